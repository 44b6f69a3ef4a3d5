//===- MegatronDatasetWriterTest.cpp - Megatron's .bin/.idx, written ------===//
//
// The writer's files against the format written out here (Megatron's
// IndexedDatasetBuilder: pointers are byte offsets, one boundary a document)
// and read back by the reader; an uncommitted writer leaves an earlier
// output and no temporary behind.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/MegatronDatasetWriter.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <unistd.h>

namespace hypipe::rt {
namespace {

namespace fs = std::filesystem;

std::string readAll(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

fs::path freshDirectory(const std::string &name) {
  fs::path dir = fs::temp_directory_path() /
                 ("hypipe-writer-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(MegatronDatasetWriter, WritesMegatronsLayout) {
  fs::path dir = freshDirectory("layout");
  const std::string prefix = (dir / "d").string();
  auto writer = MegatronDatasetWriter::create(prefix, kMegatronUInt16);
  ASSERT_TRUE(writer) << writer.problem().message;
  // Two sequences, then a document without any, then one of a large id.
  ASSERT_FALSE((*writer)->addDocument({1, 2, 3, 4, 5}, {2, 3}));
  ASSERT_FALSE((*writer)->addDocument({}, {}));
  ASSERT_FALSE((*writer)->addDocument({65000}, {1}));
  ASSERT_FALSE((*writer)->commit());

  const std::string idx = readAll(dir / "d.idx");
  MegatronIndex index = parseMegatronIndex(idx, "d.idx");
  EXPECT_EQ(index.dtypeCode, 8);
  EXPECT_EQ(index.lengths, (std::vector<int32_t>{2, 3, 1}));
  // Byte offsets of uint16 tokens: 0, 2 x 2, (2 + 3) x 2.
  EXPECT_EQ(index.pointers, (std::vector<int64_t>{0, 4, 10}));
  EXPECT_EQ(index.documents, (std::vector<int64_t>{0, 2, 2, 3}));
  // 9 + 8 + 1 + 8 + 8 header bytes, 3 x (4 + 8) and 4 x 8.
  EXPECT_EQ(idx.size(), 34u + 36u + 32u);
  EXPECT_EQ(idx.substr(0, 9), std::string("MMIDIDX\0\0", 9));

  const std::string bin = readAll(dir / "d.bin");
  const uint16_t expected[] = {1, 2, 3, 4, 5, 65000};
  ASSERT_EQ(bin.size(), sizeof expected);
  EXPECT_EQ(0, std::memcmp(bin.data(), expected, sizeof expected));
  EXPECT_EQ(checkMegatronBin(index, bin.size(), "d.bin").back(), 6);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), {}), 2);
  fs::remove_all(dir);
}

TEST(MegatronDatasetWriter, LeavesAnEarlierOutputUnlessCommitted) {
  fs::path dir = freshDirectory("keep");
  std::ofstream(dir / "d.bin") << "old tokens";
  std::ofstream(dir / "d.idx") << "old index";
  {
    auto writer =
        MegatronDatasetWriter::create((dir / "d").string(), kMegatronInt32);
    ASSERT_TRUE(writer);
    ASSERT_FALSE((*writer)->addDocument({7, 8}, {2}));
  } // a run that failed: never committed
  EXPECT_EQ(readAll(dir / "d.bin"), "old tokens");
  EXPECT_EQ(readAll(dir / "d.idx"), "old index");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), {}), 2);
  fs::remove_all(dir);
}

TEST(MegatronDatasetWriter, RefusesADirectoryThatIsNotThere) {
  auto writer =
      MegatronDatasetWriter::create("/nonexistent-hypipe/d", kMegatronUInt16);
  ASSERT_FALSE(writer);
  EXPECT_NE(writer.problem().message.find("/nonexistent-hypipe"),
            std::string::npos);
}

// Megatron's DType.optimal_dtype: uint16 when the vocabulary is under
// 65500 ids, int32 otherwise.
TEST(MegatronDatasetWriter, PicksMegatronsDtype) {
  EXPECT_EQ(megatronDtypeCodeFor(256), kMegatronUInt16);
  EXPECT_EQ(megatronDtypeCodeFor(65499), kMegatronUInt16);
  EXPECT_EQ(megatronDtypeCodeFor(65500), kMegatronInt32);
  EXPECT_STREQ(megatronDtypeName(kMegatronUInt16), "uint16");
}

} // namespace
} // namespace hypipe::rt
