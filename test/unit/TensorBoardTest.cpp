//===- TensorBoardTest.cpp - CRC-32C and the event files' framing ---------===//
//
// CRC-32C against the check values RFC 3720 (iSCSI, appendix B.4) and the
// CRC catalogue publish; an event file read back record by record, its
// masks undone by hand. test/e2e/tensorboard.test reads the files with
// TensorBoard's own reader.
//
//===----------------------------------------------------------------------===//
#include "runtime/tensorboard/Crc32c.h"
#include "runtime/tensorboard/EventWriter.h"

#include "event.pb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace hypipe::tensorboard;

namespace {

TEST(Crc32c, PublishedCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) {
    up[i] = (unsigned char)i;
    down[i] = (unsigned char)(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32c, MaskIsTensorFlows) {
  // ((crc >> 15) | (crc << 17)) + 0xa282ead8, written out for 0xE3069283.
  const uint32_t crc = 0xE3069283u;
  const uint32_t rotated = (crc >> 15) | (crc << 17);
  EXPECT_EQ(maskedCrc32c("123456789", 9), uint32_t(rotated + 0xA282EAD8u));
}

/// The records of a TFRecord file, each checked against its masked CRCs.
std::vector<std::string> readRecords(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t length = 0;
    uint32_t lengthCrc = 0, dataCrc = 0;
    std::memcpy(&length, bytes.data() + at, 8); // little-endian host
    std::memcpy(&lengthCrc, bytes.data() + at + 8, 4);
    EXPECT_EQ(lengthCrc, maskedCrc32c(bytes.data() + at, 8));
    records.push_back(bytes.substr(at + 12, length));
    std::memcpy(&dataCrc, bytes.data() + at + 12 + length, 4);
    EXPECT_EQ(dataCrc, maskedCrc32c(records.back().data(), length));
    at += 12 + length + 4;
  }
  EXPECT_EQ(at, bytes.size());
  return records;
}

TEST(EventWriter, VersionThenScalars) {
  const std::string dir = ::testing::TempDir() + "/hypipe-tensorboard-test";
  std::filesystem::remove_all(dir);
  std::string path;
  {
    EventWriter writer(dir);
    writer.scalars(3, {{kLossTag, 5.5}, {kLearningRateTag, 0.25}});
    writer.validationLoss(4, 2.0);
    path = writer.path();
  }
  EXPECT_NE(path.find("events.out.tfevents."), std::string::npos);
  std::vector<std::string> records = readRecords(path);
  ASSERT_EQ(records.size(), 3u);
  Event version, step, validation;
  ASSERT_TRUE(version.ParseFromString(records[0]));
  EXPECT_EQ(version.file_version(), "brain.Event:2");
  ASSERT_TRUE(step.ParseFromString(records[1]));
  EXPECT_EQ(step.step(), 3);
  ASSERT_EQ(step.summary().value_size(), 2);
  EXPECT_EQ(step.summary().value(0).tag(), "lm loss");
  EXPECT_EQ(step.summary().value(0).simple_value(), 5.5f);
  EXPECT_EQ(step.summary().value(1).tag(), "learning-rate");
  EXPECT_EQ(step.summary().value(1).simple_value(), 0.25f);
  ASSERT_TRUE(validation.ParseFromString(records[2]));
  ASSERT_EQ(validation.summary().value_size(), 2);
  EXPECT_EQ(validation.summary().value(0).tag(), "lm loss validation");
  EXPECT_EQ(validation.summary().value(1).simple_value(), float(std::exp(2.0)));
  std::filesystem::remove_all(dir);
}

TEST(EventWriter, UnwritableDirectoryIsAnError) {
  EXPECT_THROW(EventWriter("/proc/hypipe-cannot-write-here"), std::exception);
}

} // namespace
