//===- MegatronDatasetWriter.h - Megatron-LM's .bin/.idx, written ---------===//
//
// What Megatron-LM's IndexedDatasetBuilder does for tools/preprocess_data.py:
// documents' tokens appended to PREFIX.bin, their sequence lengths and
// document boundaries kept, and PREFIX.idx written at the end (the format
// of MegatronIndex.h). Both files are built under temporary names beside
// their targets and renamed into place only by commit(): a run that fails
// leaves an earlier PREFIX.bin and PREFIX.idx as they were.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_FORMATS_MEGATRONDATASETWRITER_H
#define HYPIPE_RUNTIME_FORMATS_MEGATRONDATASETWRITER_H

#include "core/Error.h"
#include "runtime/formats/MegatronIndex.h"

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace hypipe::rt {

class MegatronDatasetWriter {
public:
  /// Checks that PREFIX.bin and PREFIX.idx may be written (their directory
  /// exists, neither is a directory or a link) and opens the temporary .bin.
  static Expected<std::unique_ptr<MegatronDatasetWriter>>
  create(const std::string &prefix, int dtypeCode);
  /// Removes the temporaries unless commit() succeeded.
  ~MegatronDatasetWriter();
  MegatronDatasetWriter(const MegatronDatasetWriter &) = delete;
  MegatronDatasetWriter &operator=(const MegatronDatasetWriter &) = delete;

  /// One document: its sequences' tokens back to back and each sequence's
  /// length (IndexedDatasetBuilder.add_document(tokens, lengths)). A
  /// document without sequences still records its boundary, as Megatron's
  /// builder does for a line that tokenises to nothing.
  Error addDocument(const std::vector<int32_t> &tokens,
                    const std::vector<int32_t> &sequenceLengths);
  /// Writes PREFIX.idx and renames both files into place.
  Error commit();

  const std::string &binPath() const { return bin; }
  const std::string &idxPath() const { return idx; }
  uint64_t binBytes() const { return written; }
  const MegatronIndex &index() const { return built; }

private:
  MegatronDatasetWriter(std::string prefix, int dtypeCode);
  Error failure(const std::string &step, const std::string &path, int err);

  std::string bin, idx, binTemporary, idxTemporary;
  MegatronIndex built;
  std::FILE *binFile = nullptr;
  std::vector<char> encoded; ///< one document's tokens in the file's dtype
  uint64_t written = 0;
  bool committed = false;
};

} // namespace hypipe::rt

#endif
