//===- SpecFuzzer.cpp - libFuzzer target: YAML model specs ----------------===//
#include "frontend/Spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  auto spec = hypipe::parseSpec(text, "fuzz.yaml");
  if (!spec) {
    std::string message = toString(spec.takeError());
    if (message.empty())
      __builtin_trap(); // every rejection says why
  }
  return 0;
}
