//===- MegatronIndexFuzzer.cpp - libFuzzer target: Megatron .idx files ----===//
//
// The input is an .idx file; a .bin of twice its size stands beside it.
// Accepted indices have every sequence inside the .bin and document
// boundaries that index the sequences.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/Artifact.h"
#include "runtime/formats/MegatronIndex.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  try {
    hypipe::rt::MegatronIndex index =
        hypipe::rt::parseMegatronIndex(bytes, "fuzz.idx");
    std::vector<int64_t> starts =
        hypipe::rt::checkMegatronBin(index, 2 * size, "fuzz.bin");
    for (int64_t d : index.documents)
      if (d < 0 || size_t(d) >= starts.size())
        __builtin_trap();
  } catch (const hypipe::rt::RuntimeError &e) {
    if (std::string_view(e.what()).empty())
      __builtin_trap();
  }
  return 0;
}
