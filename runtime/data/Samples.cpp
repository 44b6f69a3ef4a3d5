//===- Samples.cpp - variable-length training samples for sequence packing ===//

#include "runtime/data/Samples.h"

#include "core/Random.h"
#include "core/data/MockSft.h"
#include "core/io/LineError.h"
#include "runtime/data/Data.h"
#include "runtime/formats/Artifact.h"
#include "runtime/formats/FileCheck.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <iterator>
#include <numeric>
#include <optional>

namespace hypipe::rt {

int64_t SampleSource::sampleAt(uint64_t seed, int64_t position) const {
  if (count == 0)
    return position;
  // A part's order is its own: positions go through its samples alone.
  int64_t epoch = position / count;
  if (epoch != cachedEpoch) {
    // Fisher-Yates with splitmix64: the same order on every rank and
    // machine for a seed and an epoch.
    order.resize(count);
    std::iota(order.begin(), order.end(), 0);
    uint64_t state = splitmix64(seed ^ (0x5eed0000ULL + uint64_t(epoch)));
    for (int64_t i = count - 1; i > 0; --i) {
      state = splitmix64(state);
      std::swap(order[i], order[int64_t(state % uint64_t(i + 1))]);
    }
    cachedEpoch = epoch;
  }
  return firstSample + order[position % count];
}

void SampleSource::keepPart(const DataSplit &split, SplitPart part,
                            const std::string &path) {
  if (count == 0)
    throw RuntimeError(fmt::format(
        "error: --split {}: the mock dataset is generated without end and "
        "has no documents to split\nhelp: split jsonl or indexed data, or "
        "train without --split",
        split.text));
  const auto [first, last] = split.documentRange(part, count);
  if (last <= first)
    throw RuntimeError(fmt::format(
        "error: --split {}: the {} part of '{}' holds none of its {} "
        "samples\nhelp: give the {} part a larger weight, or use more data",
        split.text, splitPartName(part), path, count, splitPartName(part)));
  about += fmt::format(", {} part: samples [{}, {}) of {} (--split {})",
                       splitPartName(part), first, last, count, split.text);
  firstSample = first;
  count = last - first;
  cachedEpoch = -1;
}

namespace {

/// `path` read whole through `bound`; the help says where the path came
/// from.
/// Reads a data file whole; `source` is where its path was given, for the
/// help (data.path, or the path of data.mock).
std::string readFile(const std::string &path, files::ReadBound bound,
                     const std::string &source = "data.path in the spec") {
  requireRegularFile(path, std::string(bound.what),
                     fmt::format("set {} to a file", source));
  if (!pathExists(path))
    throw RuntimeError(fmt::format(
        "error: cannot read {} '{}'\nhelp: set {} (relative to the spec "
        "file){}",
        bound.what, path, source,
        source == "data.path in the spec" ? " or pass --data FILE" : ""));
  return readFileBounded(path, bound);
}

/// files::lineError for the byte at `offset` of the whole file `text`.
RuntimeError located(const std::string &path, const std::string &text,
                     size_t offset, const std::string &message,
                     const std::string &help, bool echo = true) {
  offset = std::min(offset, text.size());
  size_t newline = offset ? text.rfind('\n', offset - 1) : std::string::npos;
  size_t lineStart = newline == std::string::npos ? 0 : newline + 1;
  size_t lineEnd = text.find('\n', lineStart);
  if (lineEnd == std::string::npos)
    lineEnd = text.size();
  int64_t line = 1 + std::count(text.begin(), text.begin() + lineStart, '\n');
  return RuntimeError(files::lineError(
      path, line, std::string_view(text).substr(lineStart, lineEnd - lineStart),
      offset - lineStart, message, help, echo));
}

/// Where element `index` of the array that follows `"key"` starts in `line`
/// (0 when it cannot be found), so the caret stands under the value at fault.
size_t elementColumn(const std::string &line, const std::string &key,
                     size_t index) {
  size_t at = line.find('"' + key + '"');
  at = at == std::string::npos ? at : line.find('[', at);
  if (at == std::string::npos)
    return 0;
  size_t element = 0;
  int depth = 0;
  bool inString = false;
  for (size_t i = at + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (inString) {
      i += c == '\\';
      inString = c != '"';
      continue;
    }
    if (depth == 0 && element == index && !std::isspace((unsigned char)c))
      return c == ']' ? 0 : i;
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      ++depth;
    else if (c == ']' || c == '}')
      --depth;
    else if (c == ',' && depth == 0)
      ++element;
    if (depth < 0)
      return 0;
  }
  return 0;
}

/// A `loss_mask` entry as the weight of its label: 0 or 1, false or true.
/// Anything else is refused rather than scaling the loss (1e-45 would train
/// nothing, -1 would unlearn).
std::optional<float> maskWeight(const nlohmann::json &v) {
  if (v.is_boolean())
    return v.get<bool>() ? 1.0f : 0.0f;
  if (v.is_number() && (v.get<double>() == 0 || v.get<double>() == 1))
    return v.get<double>() == 1 ? 1.0f : 0.0f;
  return std::nullopt;
}

/// The sample's `loss_mask`: one 0 or 1 per token; `fail(message, help,
/// column)` makes the located error.
template <typename Fail>
std::vector<float> readLossMask(const nlohmann::json &m, size_t tokens,
                                const std::string &line, const Fail &fail) {
  const std::string help = "loss_mask[k] = 1 (or true) trains the prediction "
                           "of token k, 0 (or false) skips it";
  if (!m.is_array() || m.size() != tokens)
    throw fail(fmt::format("\"loss_mask\" must be an array of {} numbers, "
                           "one per token",
                           tokens),
               help);
  std::vector<float> mask;
  for (size_t k = 0; k < m.size(); ++k) {
    std::optional<float> weight = maskWeight(m[k]);
    if (!weight)
      throw fail(fmt::format("loss_mask[{}] is {}: a label is either trained "
                             "(1) or skipped (0)",
                             k, m[k].dump()),
                 help + "; other weights are not supported",
                 elementColumn(line, "loss_mask", k));
    mask.push_back(*weight);
  }
  return mask;
}

/// Samples held in memory: the JSONL file's, token ids and masks.
class MemorySamples : public SampleSource {
public:
  int64_t length(int64_t i) const override { return lengths[i]; }
  double lossTokens(int64_t i) const override {
    if (masks.empty())
      return double(lengths[i]);
    double n = 0;
    for (int64_t k = 0; k < lengths[i]; ++k)
      n += masks[starts[i] + k + 1];
    return n;
  }
  void read(int64_t i, int32_t *tokens, int32_t *labels,
            float *lossMask) const override {
    const int64_t at = starts[i], n = lengths[i];
    for (int64_t k = 0; k < n; ++k) {
      tokens[k] = ids[at + k];
      labels[k] = ids[at + k + 1];
      lossMask[k] = masks.empty() ? 1.0f : masks[at + k + 1];
    }
  }

  void add(const std::vector<int32_t> &sample, const std::vector<float> &mask,
           int64_t budget, bool truncate) {
    int64_t n = int64_t(sample.size()) - 1;
    if (n > budget && truncate) {
      n = budget;
      ++truncated;
    }
    // Masks are kept from the first masked sample on; the samples before
    // it count every label.
    if (!mask.empty() && masks.empty())
      masks.assign(ids.size(), 1.0f);
    starts.push_back(int64_t(ids.size()));
    lengths.push_back(n);
    ids.insert(ids.end(), sample.begin(), sample.end());
    if (!mask.empty())
      masks.insert(masks.end(), mask.begin(), mask.end());
    else if (!masks.empty())
      masks.resize(ids.size(), 1.0f);
    count = int64_t(lengths.size());
  }
  void describe(std::string text) { about = std::move(text); }

private:
  std::vector<int32_t> ids;
  std::vector<float> masks; ///< empty: every label counts
  std::vector<int64_t> starts, lengths;
};

std::unique_ptr<SampleSource> openJsonl(const SampleOptions &o) {
  const std::string text = readFile(o.path, files::kTrainingData);
  auto samples = std::make_unique<MemorySamples>();
  int64_t lines = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos)
      end = text.size();
    std::string line = text.substr(pos, end - pos);
    const size_t lineAt = pos;
    pos = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    // nlohmann's parser takes a NUL for the end of its input: what follows
    // one would be dropped without a word.
    if (const size_t nul = line.find('\0'); nul != std::string::npos)
      throw located(o.path, text, lineAt + nul,
                    "this line holds a NUL byte, which no JSON text holds",
                    "remove it (a string holds one as \\u0000)");
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::parse_error &e) {
      size_t byte = e.byte > 0 ? e.byte - 1 : 0;
      throw located(o.path, text, lineAt + std::min(byte, line.size()),
                    "this line is not valid JSON",
                    "JSON Lines data holds one object per line, e.g. "
                    "{\"tokens\": [1, 2, 3]} or {\"text\": \"...\"}");
    }
    auto fail = [&](const std::string &message, const std::string &help,
                    size_t column = 0) {
      return located(o.path, text, lineAt + column, message, help);
    };
    if (!j.is_object())
      throw fail(
          fmt::format("this line is a JSON {}, not an object", j.type_name()),
          "each line is one sample: {\"tokens\": [...]} or "
          "{\"text\": \"...\"}, with an optional \"loss_mask\"");
    std::vector<int32_t> ids;
    // With both, "tokens" are the sample (a pre-tokenized set may keep
    // its text beside them: docs/data.md).
    if (j.contains("tokens")) {
      const nlohmann::json &t = j["tokens"];
      if (!t.is_array())
        throw fail("\"tokens\" is not an array",
                   "\"tokens\" holds the sample's token ids");
      for (size_t k = 0; k < t.size(); ++k) {
        if (!t[k].is_number_integer())
          throw fail(
              fmt::format("token {} ({}) is not an integer", k, t[k].dump()),
              fmt::format("a token is an integer id in the model's "
                          "vocabulary [0, {}), written without a "
                          "fraction or exponent",
                          o.vocab),
              elementColumn(line, "tokens", k));
        if (t[k].get<int64_t>() < 0 || t[k].get<int64_t>() >= o.vocab)
          throw fail(fmt::format("token {} ({}) is not an id in the model's "
                                 "vocabulary [0, {})",
                                 k, t[k].dump(), o.vocab),
                     fmt::format("set model.vocab_size to the tokenizer's "
                                 "size, or fix the sample"),
                     elementColumn(line, "tokens", k));
        ids.push_back(int32_t(t[k].get<int64_t>()));
      }
    } else if (j.contains("text")) {
      if (!j["text"].is_string())
        throw fail("\"text\" is not a string",
                   "\"text\" holds the sample as text (its bytes are tokens)");
      if (o.vocab < 256)
        throw fail(fmt::format("\"text\" samples are bytes, and the model's "
                               "vocabulary has {} ids",
                               o.vocab),
                   "set model.vocab_size: 256 or give \"tokens\"");
      for (unsigned char ch : j["text"].get<std::string>())
        ids.push_back(int32_t(ch));
    } else {
      throw fail("the sample has neither \"tokens\" nor \"text\"",
                 "each line is {\"tokens\": [...]} or {\"text\": \"...\"}");
    }
    if (ids.size() < 2)
      throw fail(fmt::format("the sample has {} token{}, and training needs "
                             "at least two (an input and its label)",
                             ids.size(), ids.size() == 1 ? "" : "s"),
                 "drop empty samples from the data");
    std::vector<float> mask;
    if (j.contains("loss_mask"))
      mask = readLossMask(j["loss_mask"], ids.size(), line, fail);
    if (int64_t(ids.size()) - 1 > o.budget && !o.truncate)
      throw fail(fmt::format("the sample has {} training positions, more than "
                             "the {} tokens a microbatch holds",
                             ids.size() - 1, o.budget),
                 "raise data.max_tokens_per_microbatch, or set "
                 "data.truncate: true to cut long samples");
    samples->add(ids, mask, o.budget, o.truncate);
    ++lines;
  }
  if (lines == 0)
    throw RuntimeError(fmt::format("error: training data '{}' holds no "
                                   "sample\nhelp: write one JSON object "
                                   "per line",
                                   o.path));
  samples->describe(fmt::format("{} samples of {}", lines, o.path));
  return samples;
}

/// Megatron's indexed dataset, one sample per document.
class IndexedSamples : public SampleSource {
public:
  IndexedSamples(const SampleOptions &o)
      : data(o.path, 1, o.vocab), budget(o.budget) {
    count = data.numDocuments();
    for (int64_t d = 0; d < count; ++d) {
      int64_t n = data.documentTokens(d) - 1;
      if (n < 1)
        throw RuntimeError(fmt::format(
            "error: training data '{}': document {} has {} token{}, and "
            "training needs at least two (an input and its label)\nhelp: "
            "drop empty documents when preprocessing",
            o.path, d, n + 1, n + 1 == 1 ? "" : "s"));
      if (n > budget) {
        if (!o.truncate)
          throw RuntimeError(fmt::format(
              "error: training data '{}': document {} has {} training "
              "positions, more than the {} tokens a microbatch holds\nhelp: "
              "raise data.max_tokens_per_microbatch, or set data.truncate: "
              "true to cut long samples",
              o.path, d, n, budget));
        ++truncated;
      }
    }
    about = fmt::format("{} documents of {}", count, o.path);
  }
  int64_t length(int64_t i) const override {
    return std::min(data.documentTokens(i) - 1, budget);
  }
  void read(int64_t i, int32_t *tokens, int32_t *labels,
            float *lossMask) const override {
    const int64_t at = data.documentStart(i), n = length(i);
    for (int64_t k = 0; k < n; ++k) {
      tokens[k] = int32_t(data.token(at + k));
      labels[k] = int32_t(data.token(at + k + 1));
      lossMask[k] = 1.0f;
    }
  }

private:
  IndexedDataset data;
  int64_t budget;
};

/// Megatron's mock SFT dataset: lengths from its configuration; sample i of
/// length n counts up from a seeded start, (a + k) mod vocab, a sequence a
/// model can learn.
class MockSamples : public SampleSource {
public:
  MockSamples(packing::MockSftConfig config, int64_t vocab, uint64_t seed)
      : config(std::move(config)), vocab(vocab), seed(seed) {
    count = 0;
    about = this->config.fromFile
                ? fmt::format("mock SFT samples, lengths from {}",
                              this->config.path)
                : fmt::format("mock SFT samples, lognormal lengths (mean {}, "
                              "sigma {}) in [{}, {}]",
                              this->config.mean, this->config.sigma,
                              this->config.minLen, this->config.maxLen);
  }
  int64_t length(int64_t i) const override {
    return packing::mockSftPositions(config, seed, i);
  }
  /// Says how many entries of the lengths file were cut to the budget (the
  /// file's samples recur, so these are entries, not samples).
  void lengthsCut(int64_t cut) {
    if (cut > 0)
      about += fmt::format(" ({} of its lengths cut to the budget)", cut);
  }
  void read(int64_t i, int32_t *tokens, int32_t *labels,
            float *lossMask) const override {
    const int64_t start =
        int64_t(splitmix64(seed ^ uint64_t(i)) % uint64_t(vocab));
    const int64_t n = length(i); // a lognormal draw: once, not per token
    for (int64_t k = 0; k < n; ++k) {
      tokens[k] = int32_t((start + k) % vocab);
      labels[k] = int32_t((start + k + 1) % vocab);
      lossMask[k] = 1.0f;
    }
  }

private:
  packing::MockSftConfig config;
  int64_t vocab;
  uint64_t seed;
};

} // namespace

std::unique_ptr<SampleSource> openSamples(const SampleOptions &o) {
  if (o.format == DataFormat::Jsonl)
    return openJsonl(o);
  if (o.format == DataFormat::Indexed)
    return std::make_unique<IndexedSamples>(o);
  if (o.format == DataFormat::Mock) {
    Expected<packing::MockSftConfig> config =
        packing::parseMockSftConfig(o.mockConfig, o.budget);
    if (!config)
      throw RuntimeError("error: data.mock: " + toString(config.takeError()));
    if (config->fromFile) {
      const std::string path =
          packing::mockLengthsPath(config->path, o.specDir);
      std::string text =
          readFile(path, files::kMockLengths, "the path of data.mock");
      std::vector<size_t> at; // each length's byte in the file
      if (Error err = packing::readMockLengths(text, config->lengths, &at)) {
        const Problem &p = err.problem();
        // Not echoed: the path may name any file (docs/security.md).
        if (p.offset)
          throw located(path, text, *p.offset, p.message, p.help, false);
        throw RuntimeError(fmt::format("error: '{}': {}\nhelp: write one "
                                       "positive length per line",
                                       path, p.message));
      }
      int64_t cut = 0;
      for (size_t i = 0; i < config->lengths.size(); ++i) {
        const int64_t length = config->lengths[i];
        // (Located, not echoed, as the parser's errors.)
        if (length < 2)
          throw located(
              path, text, at[i],
              fmt::format("length {} (entry {}) is a sample of its EOD "
                          "alone, with nothing to train",
                          length, i + 1),
              "a length counts the sample's EOD token, as Megatron's mock "
              "lengths do: write 2 or more",
              false);
        if (length - 1 <= o.budget)
          continue;
        if (!o.truncate)
          throw located(path, text, at[i],
                        fmt::format("length {} (entry {}) gives {} training "
                                    "positions, more than the {} a "
                                    "microbatch holds",
                                    length, i + 1, length - 1, o.budget),
                        "raise data.max_tokens_per_microbatch, or set "
                        "data.truncate: true",
                        false);
        config->lengths[i] = o.budget + 1;
        ++cut;
      }
      config->path = path;
      auto samples =
          std::make_unique<MockSamples>(std::move(*config), o.vocab, o.seed);
      samples->lengthsCut(cut);
      return samples;
    }
    return std::make_unique<MockSamples>(std::move(*config), o.vocab, o.seed);
  }
  throw RuntimeError(fmt::format(
      "error: data format '{}' has no variable-length samples\nhelp: packing "
      "reads jsonl, indexed or mock data",
      dataFormatName(o.format)));
}

} // namespace hypipe::rt
