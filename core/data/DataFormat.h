//===- DataFormat.h - how a training data set is stored -------------------===//
//
// `data.format` of the spec and the manifest: parsed once where it is read,
// carried as the enum by the compiler and the runtime's readers
// (docs/data.md). LLVM-free.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_DATA_DATAFORMAT_H
#define HYPIPE_CORE_DATA_DATAFORMAT_H

#include <array>
#include <optional>
#include <string_view>
#include <utility>

namespace hypipe {

enum class DataFormat {
  Text,    ///< raw bytes, one token each
  Indexed, ///< Megatron's indexed dataset (.bin/.idx), one sample a document
  Jsonl,   ///< one JSON sample a line
  Mock,    ///< Megatron's mock SFT data set, generated
};

inline constexpr std::array<std::pair<std::string_view, DataFormat>, 4>
    kDataFormats = {{{"text", DataFormat::Text},
                     {"indexed", DataFormat::Indexed},
                     {"jsonl", DataFormat::Jsonl},
                     {"mock", DataFormat::Mock}}};

/// `text`, `indexed`, `jsonl`, `mock`.
inline std::string_view dataFormatName(DataFormat format) {
  for (auto [text, f] : kDataFormats)
    if (f == format)
      return text;
  return "?";
}

/// The inverse of dataFormatName; nullopt for anything else.
inline std::optional<DataFormat> parseDataFormat(std::string_view name) {
  for (auto [text, f] : kDataFormats)
    if (text == name)
      return f;
  return std::nullopt;
}

} // namespace hypipe

#endif
