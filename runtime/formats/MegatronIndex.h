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

/// The format's fixed parts, read by parseMegatronIndex and written by
/// serializeMegatronIndex (and MegatronDatasetWriter).
inline constexpr std::string_view kMegatronIndexMagic{"MMIDIDX\0\0", 9};
inline constexpr uint64_t kMegatronIndexVersion = 1;
/// Megatron's dtype codes of the integer types (DType in its
/// indexed_dataset.py); 6 and 7 are float64 and float32.
enum MegatronDtypeCode : int {
  kMegatronUInt8 = 1,
  kMegatronInt8 = 2,
  kMegatronInt16 = 3,
  kMegatronInt32 = 4,
  kMegatronInt64 = 5,
  kMegatronUInt16 = 8,
};

struct MegatronIndex {
  int dtypeCode = 0, itemSize = 0;
  std::vector<int32_t> lengths;
  std::vector<int64_t> pointers, documents;
};

/// Bytes per token of Megatron's dtype code (1 uint8, 2 int8, 3 int16,
/// 4 int32, 5 int64, 8 uint16); 0 for codes that are not integer types.
int megatronItemSize(int code);

/// "uint16", "int32", ...: the numpy name of an integer dtype code.
const char *megatronDtypeName(int code);

/// The dtype Megatron's DType.optimal_dtype gives a vocabulary of
/// `vocabSize` ids: uint16 below 65500, int32 from there.
int megatronDtypeCodeFor(int64_t vocabSize);

/// The .idx file of `index`: the fields parseMegatronIndex reads, in order.
std::string serializeMegatronIndex(const MegatronIndex &index);

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
