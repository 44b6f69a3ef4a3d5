//===- Tokenizer.h - text to token ids: SentencePiece models or bytes -----===//
//
// What `hypipe data prepare` tokenises with and what the spec's
// data.tokenizer names (docs/data.md): a SentencePiece model file, read by
// the SentencePiece library, or `bytes`, each byte of the UTF-8 text one
// token (the convention of hypipe's text and jsonl data). The compiler asks
// only for the vocabulary's size, to check model.vocab_size against it.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_DATA_TOKENIZER_H
#define HYPIPE_CORE_DATA_TOKENIZER_H

#include "core/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hypipe {

/// The name that selects the byte tokenizer instead of a model file.
inline constexpr std::string_view kBytesTokenizer = "bytes";

class Tokenizer {
public:
  virtual ~Tokenizer() = default;

  /// Ids are in [0, vocabSize()).
  virtual int64_t vocabSize() const = 0;
  /// The end-of-document id that --append-eod appends, as Megatron-LM's
  /// tokenizers define it: a SentencePiece model's end-of-sentence piece
  /// (`</s>`, the eod of GPTSentencePieceTokenizer and Llama2Tokenizer),
  /// for bytes 0 (megatron-core's ByteLevelTokenizer). None when a model
  /// has no end-of-sentence piece.
  virtual std::optional<int32_t> eod() const = 0;
  /// Appends the ids of `text` to `ids`. Safe to call from several threads
  /// at once.
  virtual Error encode(std::string_view text,
                       std::vector<int32_t> &ids) const = 0;
  /// "SentencePiece model 'm.model' (500 pieces)", "bytes (256 ids)".
  virtual std::string description() const = 0;
};

/// `bytes`, or a SentencePiece model file. An error says whether the file
/// is missing or is not a SentencePiece model, and what to give instead.
Expected<std::unique_ptr<Tokenizer>> openTokenizer(const std::string &name);

} // namespace hypipe

#endif
