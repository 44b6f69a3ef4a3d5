//===- Tokenizer.cpp - text to token ids: SentencePiece models or bytes ---===//

#include "core/data/Tokenizer.h"

#include <fmt/format.h>
#include <sentencepiece_processor.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace hypipe {

namespace {

class ByteTokenizer final : public Tokenizer {
public:
  int64_t vocabSize() const override { return 256; }
  // megatron-core's ByteLevelTokenizer ends a document with its default
  // eos id, 0: the NUL byte, which text does not hold.
  std::optional<int32_t> eod() const override { return 0; }
  Error encode(std::string_view text,
               std::vector<int32_t> &ids) const override {
    for (unsigned char byte : text)
      ids.push_back(int32_t(byte));
    return Error::success();
  }
  std::string description() const override { return "bytes (256 ids)"; }
};

class SentencePieceTokenizer final : public Tokenizer {
public:
  SentencePieceTokenizer(
      std::string path,
      std::unique_ptr<sentencepiece::SentencePieceProcessor> processor)
      : path(std::move(path)), processor(std::move(processor)) {}

  int64_t vocabSize() const override { return processor->GetPieceSize(); }
  std::optional<int32_t> eod() const override {
    int id = processor->eos_id();
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  Error encode(std::string_view text,
               std::vector<int32_t> &ids) const override {
    std::vector<int> pieces;
    auto status = processor->Encode(text, &pieces);
    if (!status.ok())
      return makeError(fmt::format("SentencePiece cannot encode the text: {}",
                                   status.ToString()));
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    return Error::success();
  }
  std::string description() const override {
    return fmt::format("SentencePiece model '{}' ({} pieces)", path,
                       vocabSize());
  }

private:
  std::string path;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor;
};

} // namespace

Expected<std::unique_ptr<Tokenizer>> openTokenizer(const std::string &name) {
  if (name == kBytesTokenizer)
    return std::unique_ptr<Tokenizer>(std::make_unique<ByteTokenizer>());
  const std::string help =
      "give a SentencePiece model file (spm_train writes PREFIX.model) or "
      "'bytes'";
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0)
    return Error(Problem{fmt::format("cannot read the tokenizer '{}': {}", name,
                                     std::strerror(errno)),
                         help, std::nullopt, 1});
  if (!S_ISREG(st.st_mode))
    return Error(
        Problem{fmt::format("the tokenizer '{}' is not a regular file", name),
                help, std::nullopt, 1});
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  auto status = processor->Load(name);
  if (!status.ok())
    return Error(Problem{fmt::format("'{}' is not a SentencePiece model ({})",
                                     name, status.ToString()),
                         help, std::nullopt, 1});
  return std::unique_ptr<Tokenizer>(
      std::make_unique<SentencePieceTokenizer>(name, std::move(processor)));
}

} // namespace hypipe
