//===- FilesTest.cpp - reading through a bound, writing by rename ---------===//
//
// core/io/Files.h, where every file hypipe reads whole or writes goes
// through (issue 32, docs/security.md "Files read and written"): a bound
// whatever the file is, no write onto what is not a regular file, no
// output onto an input, a failed write that leaves the old file.
//
//===----------------------------------------------------------------------===//
#include "core/io/Files.h"
#include "core/io/DirectoryLock.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace hypipe::files {
namespace {

namespace fs = std::filesystem;

class FilesTest : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hypipe-files-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
  }
  void TearDown() override { fs::remove_all(dir); }

  void put(const std::string &path, const std::string &text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  std::string get(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  /// The message and help of `err` ("" for success).
  static std::string said(Error err) { return toString(err); }
  /// The names in `dir`, for "no temporary file was left".
  std::vector<std::string> names() {
    std::vector<std::string> out;
    for (const auto &e : fs::directory_iterator(dir))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir;
};

TEST_F(FilesTest, ReadsAFileUpToItsBound) {
  put(dir + "/f", std::string(100, 'x'));
  Expected<std::string> text = readBounded(dir + "/f", {"test file", 100});
  ASSERT_TRUE(text);
  EXPECT_EQ(text->size(), 100u);
  Expected<std::string> over = readBounded(dir + "/f", {"test file", 99});
  ASSERT_FALSE(over);
  EXPECT_NE(toString(over.takeError())
                .find("is larger than 99 bytes, the most hypipe reads of a "
                      "test file"),
            std::string::npos);
}

TEST_F(FilesTest, ReadsADeviceThroughTheSameBound) {
  Expected<std::string> zero = readBounded("/dev/zero", {"spec", 4096});
  ASSERT_FALSE(zero);
  EXPECT_NE(
      toString(zero.takeError()).find("'/dev/zero' is larger than 4.0 KiB"),
      std::string::npos);
  Expected<std::string> empty = readBounded("/dev/null", {"spec", 4096});
  ASSERT_TRUE(empty);
  EXPECT_EQ(*empty, "");
}

TEST_F(FilesTest, AFifoWithoutAWriterDoesNotWait) {
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  Expected<std::string> text = readBounded(dir + "/fifo", {"spec", 4096});
  ASSERT_TRUE(text);
  EXPECT_EQ(*text, "");
}

// A FIFO whose writer holds it open and sends nothing ends the read after
// the bound's silence with an error naming it, instead of waiting forever;
// one whose writer sends, then closes, reads whole.
TEST_F(FilesTest, ASilentWriterEndsTheRead) {
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int writer = ::open(fifo.c_str(), O_RDWR); // held open, writing nothing
  ASSERT_GE(writer, 0);
  const auto start = std::chrono::steady_clock::now();
  Expected<std::string> silent = readBounded(fifo, {"spec", 4096, 200});
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ASSERT_FALSE(silent);
  EXPECT_NE(silent.problem().message.find("sent nothing for 0.2 s"),
            std::string::npos)
      << silent.problem().message;
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 5.0);
  ::close(writer);

  // The writer's bytes wait in the FIFO; it closes a while after the
  // reader opened (at once, below), which ends the stream.
  writer = ::open(fifo.c_str(), O_RDWR);
  ASSERT_GE(writer, 0);
  ASSERT_EQ(::write(writer, "model: {}\n", 10), 10);
  std::thread close([writer] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::close(writer);
  });
  Expected<std::string> sent = readBounded(fifo, {"spec", 4096, 5000});
  close.join();
  ASSERT_TRUE(sent) << sent.problem().message;
  EXPECT_EQ(*sent, "model: {}\n");
}

TEST_F(FilesTest, ADirectoryOrAMissingFileIsNamed) {
  Expected<std::string> d = readBounded(dir, {"spec", 4096});
  ASSERT_FALSE(d);
  EXPECT_NE(toString(d.takeError()).find("it is a directory"),
            std::string::npos);
  Expected<std::string> missing = readBounded(dir + "/none", {"spec", 4096});
  ASSERT_FALSE(missing);
  EXPECT_NE(toString(missing.takeError()).find("No such file or directory"),
            std::string::npos);
}

TEST_F(FilesTest, WritesOnlyWhereARegularFileMayBe) {
  for (const char *device : {"/dev/null", "/dev/full"}) {
    EXPECT_NE(said(writeAtomically(device, "-o", "x"))
                  .find("is a character device, not a file hypipe may "
                        "replace"),
              std::string::npos);
    struct stat st;
    ASSERT_EQ(::stat(device, &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode)) << device << " was replaced";
  }
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  EXPECT_NE(said(writeAtomically(dir + "/fifo", "-o", "x")).find("is a FIFO"),
            std::string::npos);
  fs::create_directory(dir + "/sub");
  EXPECT_NE(said(writeAtomically(dir + "/sub", "-o", "x"))
                .find("is a directory, not a file"),
            std::string::npos);
  EXPECT_TRUE(fs::is_directory(dir + "/sub"));
}

TEST_F(FilesTest, ReplacesAFileWholeKeepingItsMode) {
  put(dir + "/f", "old");
  ASSERT_EQ(::chmod((dir + "/f").c_str(), 0600), 0);
  ASSERT_EQ(said(writeAtomically(dir + "/f", "-o", "new")), "");
  EXPECT_EQ(get(dir + "/f"), "new");
  struct stat st;
  ASSERT_EQ(::stat((dir + "/f").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A new file gets what the umask gives.
  const mode_t mask = ::umask(022);
  ASSERT_EQ(said(writeAtomically(dir + "/g", "-o", "new")), "");
  ::umask(mask);
  ASSERT_EQ(::stat((dir + "/g").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
  EXPECT_EQ(names(), (std::vector<std::string>{"f", "g"}));
}

TEST_F(FilesTest, ALinkIsNotWrittenThrough) {
  put(dir + "/f", "old");
  fs::create_symlink(dir + "/f", dir + "/link");
  EXPECT_NE(said(writeAtomically(dir + "/link", "-o", "new"))
                .find("is a symbolic link, which hypipe does not write "
                      "through"),
            std::string::npos);
  EXPECT_TRUE(fs::is_symlink(dir + "/link"));
  EXPECT_EQ(get(dir + "/f"), "old");
}

TEST_F(FilesTest, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  put(dir + "/f", "old");
  struct rlimit before;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  auto restore = [&] { ::setrlimit(RLIMIT_FSIZE, &before); };
  struct rlimit small = before;
  small.rlim_cur = 16;
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message = said(
      writeAtomically(dir + "/f", "the test file", std::string(1000, 'x')));
  std::string fresh = said(
      writeAtomically(dir + "/g", "the test file", std::string(1000, 'x')));
  restore();
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_NE(message.find("cannot write the test file"), std::string::npos);
  EXPECT_NE(message.find("the file that was there is untouched"),
            std::string::npos);
  EXPECT_NE(fresh.find("nothing was written there"), std::string::npos);
  EXPECT_EQ(get(dir + "/f"), "old");
  EXPECT_EQ(names(), (std::vector<std::string>{"f"}));
}

TEST_F(FilesTest, AnOutputIsNeverAnInputNorInsideOne) {
  fs::create_directories(dir + "/ck/step");
  put(dir + "/ck/step/pp0", "shard");
  ASSERT_EQ(::link((dir + "/ck/step/pp0").c_str(), (dir + "/hard").c_str()), 0);
  const std::vector<std::string> inputs = {dir + "/ck"};
  EXPECT_NE(said(checkNotAnInput(dir + "/ck/step/pp0", "-o", inputs))
                .find("is inside the input"),
            std::string::npos);
  EXPECT_NE(said(checkNotAnInput(dir + "/ck/new/file", "-o", inputs))
                .find("is inside the input"),
            std::string::npos);
  EXPECT_NE(said(checkNotAnInput(dir + "/hard", "-o", {dir + "/ck/step/pp0"}))
                .find("is the input"),
            std::string::npos);
  EXPECT_EQ(said(checkNotAnInput(dir + "/ck2", "-o", inputs)), "");
  // Relative paths compare by where they are, not how they are written.
  const fs::path before = fs::current_path();
  fs::current_path(dir + "/ck");
  const std::string relative =
      said(checkNotAnInput("new.safetensors", "-o", {"."}));
  fs::current_path(before);
  EXPECT_NE(relative.find("is inside the input"), std::string::npos);
  EXPECT_EQ(said(checkNotAnInput(dir, "-o", inputs)), "");
  EXPECT_NE(said(checkNotAnInput(dir, "-o", inputs, /*replacedWhole=*/true))
                .find("holds the input"),
            std::string::npos);
}

TEST_F(FilesTest, ADirectoryIsReplacedWhole) {
  fs::create_directory(dir + "/art");
  put(dir + "/art/stale", "x");
  std::string built = siblingTemporary(dir + "/art");
  fs::create_directory(built);
  put(built + "/manifest.json", "{}");
  ASSERT_EQ(said(replaceDirectory(built, dir + "/art", "the artifact")), "");
  EXPECT_TRUE(fs::exists(dir + "/art/manifest.json"));
  EXPECT_FALSE(fs::exists(dir + "/art/stale"));
  EXPECT_EQ(names(), (std::vector<std::string>{"art"}));
}

TEST_F(FilesTest, OutputsOfOneRunAreApart) {
  const std::string ckpt = dir + "/run/ckpt";
  // Apart: success, whether or not the files exist yet.
  EXPECT_EQ(said(checkOutputsApart({{dir + "/costs.json", "--costs-out"},
                                    {dir + "/log.jsonl", "--json-log"},
                                    {ckpt, "the checkpoints"},
                                    {"", "--trace"}})),
            "");
  // Inside another output, or the same path (also through "..").
  EXPECT_NE(said(checkOutputsApart({{ckpt + "/latest", "--costs-out"},
                                    {ckpt, "the checkpoints"}}))
                .find("--costs-out '" + ckpt +
                      "/latest' is inside the checkpoints '" + ckpt + "'"),
            std::string::npos);
  EXPECT_NE(said(checkOutputsApart({{dir + "/x", "--costs-out"},
                                    {dir + "/run/../x", "--json-log"}}))
                .find("--costs-out '" + dir + "/x' is also --json-log"),
            std::string::npos);
  // A hard link to the same file is the same output.
  put(dir + "/a", "a");
  ASSERT_EQ(::link((dir + "/a").c_str(), (dir + "/b").c_str()), 0);
  EXPECT_NE(said(checkOutputsApart(
                {{dir + "/a", "--trace"}, {dir + "/b", "--json-log"}})),
            "");
}

TEST_F(FilesTest, AnOutputsDirectoryMustExist) {
  EXPECT_EQ(said(checkOutputDirectoryExists(dir + "/f", "--costs-out")), "");
  EXPECT_NE(said(checkOutputDirectoryExists(dir + "/no/f", "--costs-out"))
                .find("its directory '" + dir + "/no' does not exist"),
            std::string::npos);
  put(dir + "/file", "x");
  EXPECT_NE(said(checkOutputDirectoryExists(dir + "/file/f", "--costs-out"))
                .find("is not a directory"),
            std::string::npos);
}

TEST_F(FilesTest, AnOutputDirectoryHoldsOnlyAnEarlierOutput) {
  auto ours = [](const std::string &name) { return name == "plan-1.yaml"; };
  EXPECT_EQ(
      said(checkOutputDirectoryHoldsOnly(dir + "/new", "--out", ours, "help")),
      "");
  put(dir + "/plan-1.yaml", "x");
  EXPECT_EQ(said(checkOutputDirectoryHoldsOnly(dir, "--out", ours, "help")),
            "");
  put(dir + "/notes.txt", "x");
  put(dir + "/other.txt", "x");
  EXPECT_EQ(said(checkOutputDirectoryHoldsOnly(dir, "--out", ours, "do X")),
            "--out '" + dir +
                "' holds 'notes.txt' and 1 more, which hypipe did not write "
                "there: the output would be written among other files\n"
                "help: do X");
}

TEST_F(FilesTest, ADirectoryHasOneWriter) {
  EXPECT_EQ(said(checkNotLocked(dir, "the run directory", "wait")), "");
  // Another holder (another open file description, as another process has).
  put(dir + "/.lock", "pid 1 on elsewhere\n");
  int other = ::open((dir + "/.lock").c_str(), O_RDONLY);
  ASSERT_GE(other, 0);
  ASSERT_EQ(::flock(other, LOCK_EX), 0);
  EXPECT_EQ(said(lockDirectory(dir, "the run directory", "wait")),
            "the run directory '" + dir + "' is in use by another run (" + dir +
                "/.lock: pid 1 on elsewhere)\nhelp: wait");
  EXPECT_NE(said(checkNotLocked(dir, "the run directory", "wait")), "");
  ::close(other);
  EXPECT_EQ(said(checkNotLocked(dir, "the run directory", "wait")), "");
  EXPECT_EQ(said(lockDirectory(dir, "the run directory", "wait")), "");
  EXPECT_NE(get(dir + "/.lock").find("pid " + std::to_string(::getpid())),
            std::string::npos);
}

TEST(Excerpt, IsShortPrintableAndSaysWhatWasCut) {
  EXPECT_EQ(excerpt("step_00000004\n"), "step_00000004");
  EXPECT_EQ(excerpt("root:x:0:0\nsecond line"), "root:x:0:0...");
  EXPECT_EQ(excerpt("a\x01\xff"), "a\\x01\\xff");
  EXPECT_EQ(excerpt(std::string(10'000'000, 'x'), 8), "xxxxxxxx...");
  EXPECT_EQ(printable("a\tb\x80"), "a?b?");
}

TEST(HumanBytes, SaysSmallAmountsInTheirUnit) {
  EXPECT_EQ(humanBytes(100), "100 bytes");
  EXPECT_EQ(humanBytes(3 << 20), "3.0 MiB");
  EXPECT_EQ(humanBytes(uint64_t(5) << 29), "2.5 GiB");
}

} // namespace
} // namespace hypipe::files
