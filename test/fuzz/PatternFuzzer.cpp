//===- PatternFuzzer.cpp - libFuzzer target: hybrid layer patterns --------===//
//
// Byte 0 picks pp and the placement options; the rest is the pattern. Every
// input must either place or be rejected with an error that renders.
//
//===----------------------------------------------------------------------===//
#include "core/lang/HybridPattern.h"
#include "frontend/Diagnostic.h"

#include "llvm/Support/raw_ostream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t options = data[0];
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::raw_null_ostream sink;
  auto pattern = hypipe::parseHybridPattern(text);
  if (!pattern) {
    hypipe::printTextError(sink, "<fuzz>", text, pattern.takeError());
    return 0;
  }
  hypipe::PlacementOptions o;
  o.pp = 1 + (options & 7);
  if (options & 8)
    o.vpp = 1 + ((options >> 4) & 3);
  if (options & 64)
    o.firstStageLayers = (options >> 4) & 3;
  if (options & 128)
    o.lastStageLayers = (options >> 2) & 3;
  auto placement = hypipe::placeHybridPattern(*pattern, o);
  if (!placement) {
    hypipe::printTextError(sink, "<fuzz>", text, placement.takeError());
    return 0;
  }
  // Every layer is placed exactly once, in order.
  int64_t next = 1;
  for (const hypipe::PatternStage &s : placement->stages)
    for (int64_t n : s.layerNumbers)
      if (n != next++)
        __builtin_trap();
  if (next != pattern->numLayers() + 1)
    __builtin_trap();
  return 0;
}
