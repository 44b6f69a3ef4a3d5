//===- CheckpointIndexFuzzer.cpp - libFuzzer target: index.json -----------===//
//
// The input is a checkpoint's index.json: it parses into plain file names
// (never a path that leaves the step directory) or is refused.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/Artifact.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/FileCheck.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string text(reinterpret_cast<const char *>(data), size);
  try {
    auto index = hypipe::rt::CheckpointReader::parseIndex(text, "index.json");
    for (const auto &[tensor, file] : index.weightMap)
      if (!hypipe::rt::isPlainName(file))
        __builtin_trap();
    for (const auto &[file, sum] : index.files)
      if (!hypipe::rt::isPlainName(file))
        __builtin_trap();
  } catch (const hypipe::rt::RuntimeError &e) {
    if (std::string(e.what()).empty())
      __builtin_trap();
  }
  return 0;
}
