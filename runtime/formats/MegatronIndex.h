//===- MegatronIndex.h - Megatron-LM's .idx file, parsed and checked ------===//
//
// PREFIX.idx of Megatron-LM's indexed dataset: "MMIDIDX\0\0", version 1
// (u64), a dtype code (u8), sequence and document counts (u64 each), then
// the sequence lengths (i32), their byte pointers into PREFIX.bin (i64) and
// the document boundaries (i64 sequence indices). The parser works on the
// file's bytes alone, so it is fuzzed as it runs (docs/security.md).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_MEGATRONINDEX_H
#define HYPIPE_RUNTIME_FORMATS_MEGATRONINDEX_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe::rt {

struct MegatronIndex {
  int dtypeCode = 0, itemSize = 0;
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, documents;
};

/// Bytes per token of Megatron's dtype code (1 uint8, 2 int8, 3 int16,
/// 4 int32, 5 int64, 8 uint16); 0 for codes that are not integer types.
int megatronItemSize(int code);

/// Parses `bytes` (the whole .idx file, `path` in errors): the header, the
/// counts against the file size without overflow, non-negative lengths and
/// pointers, document boundaries that start at 0, never decrease and end
/// at the sequence count. Throws RuntimeError naming the file and the fault.
MegatronIndex parseMegatronIndex(std::string_view bytes,
                                 const std::string &path);

/// Checks every sequence against the size of PREFIX.bin (`binPath`);
/// returns each sequence's first token position in the stream (count + 1
/// entries). Throws RuntimeError.
std::vector<int64_t> checkMegatronBin(const MegatronIndex &index,
                                      uint64_t binBytes,
                                      const std::string &binPath);

/// The help line of every .idx/.bin error.
extern const char *const kMegatronIndexHelp;

} // namespace hypipe::rt

#endif
