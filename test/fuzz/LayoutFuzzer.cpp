//===- LayoutFuzzer.cpp - libFuzzer target: pipeline layout strings -------===//
#include "core/lang/PipelineLayout.h"
#include "frontend/Diagnostic.h"

#include "llvm/Support/raw_ostream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  int64_t pp = 1 + (data[0] & 7);
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  llvm::raw_null_ostream sink;
  auto layout = hypipe::parsePipelineLayout(text, pp);
  if (!layout) {
    hypipe::printTextError(sink, "<fuzz>", text, layout.takeError());
    return 0;
  }
  if (layout->expanded.size() != layout->sourceOffsets.size())
    __builtin_trap();
  for (size_t offset : layout->sourceOffsets)
    if (offset >= text.size())
      __builtin_trap();
  std::optional<int64_t> mtp;
  if (data[0] & 8)
    mtp = layout->count('m');
  auto valid = hypipe::validatePipelineLayout(*layout, layout->count('t'), mtp);
  if (!valid)
    hypipe::printTextError(sink, "<fuzz>", text, valid.takeError());
  return 0;
}
