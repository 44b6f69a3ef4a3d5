//===- HostileFilesTest.cpp - files written by someone else are checked ---===//
//
// Every reader of a file another process wrote refuses what its format does
// not allow, with a message naming the file and the fault (issue "Hostile
// files", docs/security.md): safetensors headers, checkpoint checksums and
// the names in index.json and latest, Megatron .idx files.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/Artifact.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/FileCheck.h"
#include "runtime/formats/MegatronIndex.h"
#include "runtime/formats/SafeTensors.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

namespace hypipe::rt {
namespace {

namespace fs = std::filesystem;

/// The message of the RuntimeError `f` throws ("" if it throws none).
std::string errorOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "";
}

/// A safetensors file's bytes: `header` (JSON) then `data`.
std::string safetensors(const std::string &header, const std::string &data) {
  uint64_t n = header.size();
  std::string out(reinterpret_cast<const char *>(&n), 8);
  return out + header + data;
}

std::string parseError(const std::string &bytes) {
  return errorOf([&] { parseSafeTensorsHeader(bytes, bytes.size(), "t.st"); });
}

TEST(SafeTensorsHeader, AcceptsAWellFormedFile) {
  std::string bytes =
      safetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                  R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
                  R"("__metadata__":{"k":"v"}})",
                  std::string(12, '\0'));
  SafeTensorsHeader h = parseSafeTensorsHeader(bytes, bytes.size(), "t.st");
  EXPECT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries.at("b").begin, 8u);
  EXPECT_EQ(h.metadata.at("k"), "v");
  EXPECT_EQ(h.dataBytes, 12u);
}

TEST(SafeTensorsHeader, RefusesEachViolationOfTheFormat) {
  const std::string d8(8, '\0');
  struct Case {
    const char *what, *header;
    std::string data, message;
  };
  const Case cases[] = {
      {"offsets wrap around",
       R"({"a":{"dtype":"F32","shape":[2],)"
       R"("data_offsets":[18446744073709551615,7]}})",
       d8, "ends (byte 7) before it begins"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       d8,
       "tensor 'b' begins at byte 4 of the data section, where 8 was "
       "expected (it overlaps"},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", d8,
       "bytes between tensors belong to none"},
      {"trailing bytes",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d8,
       "the tensors cover 4 bytes of a 8-byte data section"},
      {"past the end",
       R"({"a":{"dtype":"F32","shape":[4],)"
       R"("data_offsets":[0,16]}})",
       d8, "runs past the end of the file"},
      {"size mismatch",
       R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8,
       "spans 8 bytes, but F32 3 needs 12"},
      {"size overflow",
       R"({"a":{"dtype":"F32","shape":[4611686018427387904],)"
       R"("data_offsets":[0,8]}})",
       d8, "shape whose size overflows 64 bits"},
      {"negative shape",
       R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8,
       "not a non-negative integer"},
      {"fractional shape",
       R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", d8,
       "not a non-negative integer"},
      {"unknown dtype",
       R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", d8,
       "unknown dtype \"F31\""},
      {"duplicate name",
       R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       d8, "the header names 'a' twice"},
      {"missing field", R"({"a":{"dtype":"F32","shape":[2]}})", d8,
       "lacks dtype, shape or data_offsets"},
      {"not json", R"({"a":)", d8, "the header is not valid JSON"},
      {"not an object", R"([1,2])", d8, "the header is not a JSON object"},
      {"bad utf-8", "{\"\xff\":{}}", d8, "the header is not valid JSON"},
      {"metadata not strings", R"({"__metadata__":{"step":3}})", "",
       "metadata 'step' is not a string"},
      {"nested too deep",
       R"({"a":{"dtype":"F32","shape":[[1]],"data_offsets":[0,4]}})",
       std::string(4, '\0'), "nests deeper"},
  };
  for (const Case &c : cases) {
    std::string message = parseError(safetensors(c.header, c.data));
    EXPECT_NE(message.find("'t.st' is not a valid safetensors file"),
              std::string::npos)
        << c.what << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << c.what << ": " << message;
  }
}

TEST(SafeTensorsHeader, BoundsTheHeaderLength) {
  std::string bytes(16, '\0');
  uint64_t huge = kMaxSafeTensorsHeader + 1;
  std::memcpy(bytes.data(), &huge, 8);
  EXPECT_NE(parseError(bytes).find("a header of 100000001 bytes"),
            std::string::npos);
  uint64_t longer = 9;
  std::memcpy(bytes.data(), &longer, 8);
  EXPECT_NE(parseError(bytes).find("header of 9 bytes in a file of 16"),
            std::string::npos);
  EXPECT_NE(parseError("1234").find("shorter than its 8-byte header length"),
            std::string::npos);
}

class ScratchDir : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hypipe-hostile-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }

  void writeText(const std::string &path, const std::string &text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string readText(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  /// A one-rank checkpoint at dir/ckpt, step `at`, tensor "w" = {1, 2, 3}.
  std::string saveCheckpoint(int64_t at = 3, int64_t lrDecaySteps = 6) {
    std::string root = dir + "/ckpt", step = root + "/" + stepDirectoryName(3);
    fs::create_directories(step);
    static const float w[3] = {1, 2, 3};
    SafeTensorsWriter writer;
    writer.add("w", {3}, w);
    CheckpointInfo info;
    info.step = at;
    info.globalBatch = 2;
    info.consumedSamples = 2 * at;
    info.lrDecaySteps = lrDecaySteps;
    for (auto &[k, v] : info.metadata())
      writer.metadata(k, v);
    WrittenFile f = writer.write(step + "/pp0.safetensors");
    writeCheckpointIndex(step, info, {{"w", "pp0.safetensors"}},
                         {{"pp0.safetensors", f}}, 1, 1, 1,
                         schedule::ScheduleKind::OneFOneB, 1);
    markLatest(root, stepDirectoryName(3));
    return root;
  }

  std::string dir;
};

TEST_F(ScratchDir, ACheckpointReadsBackThroughItsChecks) {
  std::string root = saveCheckpoint();
  CheckpointReader ckpt(root);
  float w[3] = {0, 0, 0};
  ckpt.read("w", {3}, w);
  EXPECT_EQ(w[2], 3.0f);
  EXPECT_EQ(ckpt.info().step, 3);
}

TEST_F(ScratchDir, AStepNoRunWritesIsRefused) {
  std::string root = saveCheckpoint(-5);
  std::string message = errorOf([&] { CheckpointReader{root}; });
  EXPECT_NE(message.find("says step -5, global batch 2 and -10 consumed "
                         "samples, which no run writes"),
            std::string::npos)
      << message;
}

// lr_decay_steps -100 was read as "none" and the resumed cosine restarted
// above min_lr; 0 is "none" only in a file of no step (an import); a value
// must be the whole decimal number a run writes.
TEST_F(ScratchDir, ALearningRateScheduleNoRunWritesIsRefused) {
  const std::string malformed =
      "has no valid 'lr_decay_steps' in its metadata: it is not a whole number";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"-100", "records lr_decay_steps -100 in its metadata, and a run of 3 "
               "steps writes a step count from 1 to 2^40"},
      {"0", "records lr_decay_steps 0 in its metadata"},
      {"1099511627777", "records lr_decay_steps 1099511627777"},
      {"6 steps", malformed},
      {"1e3", malformed},
      {"", malformed},
      {"99999999999999999999", malformed}};
  for (const auto &[value, expected] : cases) {
    SCOPED_TRACE(value);
    fs::remove_all(dir + "/ckpt");
    std::string root = saveCheckpoint();
    std::string index = root + "/" + stepDirectoryName(3) + "/index.json";
    nlohmann::json j = nlohmann::json::parse(readText(index));
    j["metadata"]["lr_decay_steps"] = value;
    writeText(index, j.dump());
    std::string message = errorOf([&] { CheckpointReader{root}; });
    EXPECT_NE(message.find("'" + index + "' " + expected), std::string::npos)
        << message;
    EXPECT_NE(message.find("help: "), std::string::npos) << message;
  }
}

TEST_F(ScratchDir, AFlippedByteIsFoundNotTrainedOn) {
  std::string root = saveCheckpoint();
  std::string file = root + "/step_00000003/pp0.safetensors";
  std::string bytes = readText(file);
  bytes[bytes.size() - 2] ^= 0x10; // inside tensor w's last float
  writeText(file, bytes);
  std::string message = errorOf([&] { CheckpointReader{root}; });
  EXPECT_NE(message.find("pp0.safetensors' fails its checksum"),
            std::string::npos)
      << message;
  // A merged file carries its data section's checksum in its own header.
  std::string merged = dir + "/merged.safetensors";
  fs::remove_all(root);
  root = saveCheckpoint();
  mergeCheckpoint(root, merged);
  bytes = readText(merged);
  bytes.back() ^= 0x01;
  writeText(merged, bytes);
  message = errorOf([&] { CheckpointReader{merged}; });
  EXPECT_NE(message.find("merged.safetensors' fails its checksum"),
            std::string::npos)
      << message;
}

TEST_F(ScratchDir, ATruncatedShardIsRefusedBySize) {
  std::string root = saveCheckpoint();
  std::string file = root + "/step_00000003/pp0.safetensors";
  std::string bytes = readText(file);
  writeText(file, bytes.substr(0, bytes.size() - 4));
  std::string message = errorOf([&] { CheckpointReader{root}; });
  EXPECT_NE(message.find("recorded " + std::to_string(bytes.size())),
            std::string::npos)
      << message;
}

TEST_F(ScratchDir, IndexNamesStayInsideTheStepDirectory) {
  std::string root = saveCheckpoint();
  std::string indexPath = root + "/step_00000003/index.json";
  nlohmann::json index = nlohmann::json::parse(readText(indexPath));
  for (const char *name :
       {"../../../../../etc/passwd", "/etc/passwd", "..", "sub/../pp0"}) {
    nlohmann::json bad = index;
    bad["weight_map"]["w"] = name;
    writeText(indexPath, bad.dump());
    std::string message = errorOf([&] { CheckpointReader{root}; });
    EXPECT_NE(message.find("which is not a file name inside the step "
                           "directory"),
              std::string::npos)
        << name << ": " << message;
  }
}

TEST_F(ScratchDir, LatestNamesAStepDirectoryInsideTheRoot) {
  std::string root = saveCheckpoint();
  fs::create_directories(dir + "/elsewhere/step_00000009");
  for (const char *name :
       {"../elsewhere/step_00000009", "/tmp", "..", "not-a-step"}) {
    writeText(root + "/latest", std::string(name) + "\n");
    std::string message = errorOf([&] { CheckpointReader{root}; });
    EXPECT_NE(message.find("which is not a step directory of this "
                           "checkpoint"),
              std::string::npos)
        << name << ": " << message;
  }
  // A symbolic link that leads out of the root.
  fs::create_directory_symlink(dir + "/elsewhere/step_00000009",
                               root + "/step_00000009");
  writeText(root + "/latest", "step_00000009\n");
  std::string message = errorOf([&] { CheckpointReader{root}; });
  EXPECT_NE(message.find("leads outside it"), std::string::npos) << message;
}

TEST_F(ScratchDir, ASymlinkedShardLeavingTheCheckpointIsRefused) {
  std::string root = saveCheckpoint();
  std::string step = root + "/step_00000003";
  fs::rename(step + "/pp0.safetensors", dir + "/outside.safetensors");
  fs::create_symlink(dir + "/outside.safetensors", step + "/pp0.safetensors");
  std::string message = errorOf([&] { CheckpointReader{root}; });
  EXPECT_NE(message.find("leads outside it"), std::string::npos) << message;
}

TEST(ConfinedPath, AcceptsNamesInsideAndRefusesTheRest) {
  EXPECT_EQ(confinedPath("/tmp", "a/b.so", "x", "f"), "/tmp/a/b.so");
  for (const char *bad : {"", "/abs", "a/../b", "./a", "a//b", "a\nb"})
    EXPECT_NE(errorOf([&] { confinedPath("/tmp", bad, "x", "f"); }), "") << bad;
}

TEST(Checksum, FindsAnyChangedByte) {
  std::string a(1000, 'x'), b = a;
  b[517] = 'y';
  EXPECT_EQ(checksumOf(a.data(), a.size()).rfind("xxh3-128:", 0), 0u);
  EXPECT_EQ(checksumOf(a.data(), a.size()).size(), 9u + 32u);
  EXPECT_NE(checksumOf(a.data(), a.size()), checksumOf(b.data(), b.size()));
  // Pieces hash as their concatenation.
  EXPECT_EQ(checksumOf({{a.data(), 10}, {a.data() + 10, 990}}),
            checksumOf(a.data(), a.size()));
}

/// A Megatron .idx: `sequences` lengths of 4 tokens, pointers 8 apart
/// (int16 tokens), the given document boundaries.
std::string megatronIdx(uint64_t sequences, std::vector<int64_t> docs,
                        uint64_t docCount = 0) {
  std::string out("MMIDIDX\0\0", 9);
  auto put = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  uint64_t version = 1;
  uint8_t code = 3;
  uint64_t count = docCount ? docCount : docs.size();
  put(&version, 8);
  put(&code, 1);
  put(&sequences, 8);
  put(&count, 8);
  for (uint64_t s = 0; s < sequences; ++s) {
    int32_t n = 4;
    put(&n, 4);
  }
  for (uint64_t s = 0; s < sequences; ++s) {
    int64_t p = int64_t(s) * 8;
    put(&p, 8);
  }
  for (int64_t d : docs)
    put(&d, 8);
  return out;
}

TEST(MegatronIndexFile, ParsesAValidIndex) {
  MegatronIndex index = parseMegatronIndex(megatronIdx(3, {0, 1, 3}), "d.idx");
  EXPECT_EQ(index.lengths.size(), 3u);
  EXPECT_EQ(index.itemSize, 2);
  std::vector<int64_t> starts = checkMegatronBin(index, 24, "d.bin");
  EXPECT_EQ(starts.back(), 12);
  EXPECT_NE(errorOf([&] { checkMegatronBin(index, 23, "d.bin"); })
                .find("sequence 2 (4 tokens at byte 16) runs past the end "
                      "of the 23-byte file"),
            std::string::npos);
}

TEST(MegatronIndexFile, RefusesCountsThatWrapOrBoundariesThatDoNotFit) {
  auto message = [](const std::string &bytes) {
    return errorOf([&] { parseMegatronIndex(bytes, "d.idx"); });
  };
  // 2^61 + 1 boundaries: times 8 wraps to 8 bytes.
  EXPECT_NE(message(megatronIdx(1, {0}, (uint64_t(1) << 61) + 1))
                .find("do not hold 1 sequences and 2305843009213693953 "
                      "document boundaries"),
            std::string::npos);
  EXPECT_NE(message(megatronIdx(3, {0, 2, 1, 3}))
                .find("document boundary 2 (sequence 1) comes before"),
            std::string::npos);
  EXPECT_NE(message(megatronIdx(3, {0, 1, 7}))
                .find("do not run from sequence 0 to the sequence count 3"),
            std::string::npos);
  EXPECT_NE(message(megatronIdx(3, {1, 3})).find("do not run from"),
            std::string::npos);
  std::string bytes = megatronIdx(2, {0, 2});
  bytes.pop_back();
  EXPECT_NE(message(bytes).find("truncated"), std::string::npos);
  EXPECT_NE(message("MMIDIDX").find("does not start with MMIDIDX"),
            std::string::npos);
}

} // namespace
} // namespace hypipe::rt
