//===- SafeTensorsFuzzer.cpp - libFuzzer target: safetensors headers ------===//
//
// The input is a whole safetensors file: every header either parses into
// ranges that tile the data section or is refused with a message.
//
//===----------------------------------------------------------------------===//
#include "runtime/formats/Artifact.h"
#include "runtime/formats/SafeTensors.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  try {
    hypipe::rt::SafeTensorsHeader h =
        hypipe::rt::parseSafeTensorsHeader(bytes, size, "fuzz.safetensors");
    uint64_t covered = 0;
    for (const auto &[name, e] : h.entries)
      covered += e.end - e.begin;
    if (h.dataStart + h.dataBytes != size || covered != h.dataBytes)
      __builtin_trap(); // accepted ranges must tile the data exactly
  } catch (const hypipe::rt::RuntimeError &e) {
    if (std::string_view(e.what()).empty())
      __builtin_trap();
  }
  return 0;
}
