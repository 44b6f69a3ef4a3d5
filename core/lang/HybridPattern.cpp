//===- HybridPattern.cpp --------------------------------------------------===//
#include "core/lang/HybridPattern.h"
#include "core/Text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <utility>
#include <vector>

namespace hypipe {

namespace {

constexpr const char *kSymbolHelp =
    "layer symbols are M (Mamba-2), * (attention), - (MLP), E (MoE), "
    "G (gated delta net), D (sparse attention), + (MLA); '|' separates "
    "pipeline segments and '/' starts multi-token-prediction parts";

bool isLayerSymbol(char c) {
  return c != '\0' && kLayerSymbols.find(c) != std::string_view::npos;
}

/// The code point of the UTF-8 character at the front of `text` and its
/// bytes; {0, 0} where the bytes there are no well-formed character of
/// more than one byte.
std::pair<char32_t, size_t> utf8Character(std::string_view text) {
  const auto byte = [&](size_t i) { return (unsigned char)text[i]; };
  const unsigned char lead = text.empty() ? 0 : byte(0);
  const size_t n = lead >= 0xF0 && lead < 0xF5   ? 4
                   : lead >= 0xE0 && lead < 0xF0 ? 3
                   : lead >= 0xC2 && lead < 0xE0 ? 2
                                                 : 0;
  if (n == 0 || text.size() < n)
    return {0, 0};
  char32_t code = lead & (0x7F >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((byte(i) & 0xC0) != 0x80)
      return {0, 0};
    code = code << 6 | (byte(i) & 0x3F);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < least[n] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
    return {0, 0};
  return {code, n};
}

/// The ASCII symbol a look-alike character stands for (a word processor's
/// minus or dash for '-', a Cyrillic M for 'M', full-width forms), or 0.
char asciiLookalike(char32_t code) {
  if (code >= 0xFF01 && code <= 0xFF5E) // full-width ASCII
    return char(code - 0xFF01 + '!');
  // Each symbol and the characters that look like it: hyphens, dashes, the
  // minus sign and the soft hyphen; the asterisk operator, low and heavy
  // asterisks, the Arabic star and the times sign; ...; Cyrillic and Greek
  // capitals (and the Roman numeral one thousand).
  struct Lookalikes {
    char ascii;
    std::vector<char32_t> codes;
  };
  static const Lookalikes kLookalikes[] = {
      {'-',
       {0x2010, 0x2011, 0x2012, 0x2013, 0x2014, 0x2015, 0x2212, 0xFE63,
        0x00AD}},
      {'*', {0x2217, 0x204E, 0x2731, 0x066D, 0x00D7}},
      {'+', {0x2795, 0x02D6}},
      {'|', {0x2223, 0x01C0, 0x2502, 0x23D0}},
      {'/', {0x2044, 0x2215}},
      {'M', {0x041C, 0x039C, 0x216F}},
      {'E', {0x0415, 0x0395}}};
  for (const Lookalikes &l : kLookalikes)
    if (std::find(l.codes.begin(), l.codes.end(), code) != l.codes.end())
      return l.ascii;
  return 0;
}

/// Checks the symbols of `part` (at `offset` in the whole text) and that
/// attention is not mixed with MLA/DSA in it.
Error validatePart(std::string_view part, size_t offset, bool allowPipe,
                   std::string_view partName) {
  for (size_t i = 0; i < part.size(); ++i) {
    char c = part[i];
    if (isLayerSymbol(c) || (allowPipe && c == '|'))
      continue;
    if (c == '|')
      return sourceError(
          offset + i, fmt::format("'|' cannot appear in the {} part", partName),
          "pipeline segments are set in the main pattern only; an MTP "
          "part runs with the last segment");
    // A character past ASCII is shown whole, with its code point, and one
    // that looks like a symbol (a pasted minus or dash) says which.
    if (const auto [code, bytes] = utf8Character(part.substr(i)); bytes) {
      const char ascii = asciiLookalike(code);
      const bool symbol =
          ascii != 0 && (isLayerSymbol(ascii) || ascii == '|' || ascii == '/');
      return sourceError(
          offset + i,
          fmt::format("'{}' (U+{:04X}) is not a layer symbol ({} part)",
                      part.substr(i, bytes), uint32_t(code), partName),
          symbol ? fmt::format("it looks like '{}': type the ASCII '{}'; {}",
                               ascii, ascii, kSymbolHelp)
                 : std::string(kSymbolHelp),
          bytes);
    }
    std::string shown =
        std::isprint(static_cast<unsigned char>(c))
            ? fmt::format("'{}'", c)
            : fmt::format("byte 0x{:02x}", static_cast<unsigned char>(c));
    return sourceError(
        offset + i,
        fmt::format("{} is not a layer symbol ({} part)", shown, partName),
        kSymbolHelp);
  }
  size_t attention = part.find('*');
  size_t latent = part.find_first_of("D+");
  if (attention != std::string_view::npos && latent != std::string_view::npos)
    return sourceError(
        offset + std::max(attention, latent),
        fmt::format("attention ('*' at column {}) cannot be mixed with "
                    "MLA/DSA ('{}' at column {}) in one model",
                    offset + attention + 1, part[latent], offset + latent + 1),
        "use either '*' or the MLA/DSA symbols 'D' and '+', not both");
  return Error::success();
}

} // namespace

std::string_view layerSymbolName(char symbol) {
  switch (symbol) {
  case 'M':
    return "Mamba-2";
  case '*':
    return "attention";
  case '-':
    return "MLP";
  case 'E':
    return "MoE";
  case 'G':
    return "gated delta net";
  case 'D':
    return "sparse attention";
  case '+':
    return "MLA";
  default:
    return "";
  }
}

std::string HybridPattern::layers() const {
  std::string out;
  for (const std::string &segment : segments)
    out += segment;
  return out;
}

int64_t HybridPattern::numLayers() const {
  int64_t n = 0;
  for (const std::string &segment : segments)
    n += static_cast<int64_t>(segment.size());
  return n;
}

std::map<char, int64_t> HybridPattern::layerCounts() const {
  std::map<char, int64_t> counts;
  for (char c : kLayerSymbols)
    counts[c] = 0;
  for (char c : layers())
    ++counts[c];
  for (char c : mtp)
    counts[c] += mtpDepths;
  return counts;
}

Expected<HybridPattern> parseHybridPattern(std::string_view text) {
  HybridPattern result;
  result.text = std::string(text);

  std::vector<std::string_view> parts = text::split(text, '/');
  std::string_view main = parts.front();
  if (auto err = validatePart(main, 0, /*allowPipe=*/true, "main"))
    return std::move(err);
  result.main = std::string(main);

  if (parts.size() > 1) {
    std::vector<std::string_view> mtpParts(parts.begin() + 1, parts.end());
    bool allEmpty = std::all_of(mtpParts.begin(), mtpParts.end(),
                                [](std::string_view p) { return p.empty(); });
    if (allEmpty)
      result.emptyMtpOffset = main.size();
    if (!allEmpty) {
      size_t firstOffset = main.size() + 1;
      size_t offset = firstOffset;
      for (size_t i = 0; i < mtpParts.size(); ++i) {
        if (mtpParts[i] != mtpParts[0])
          return sourceError(
              offset,
              fmt::format(
                  "all MTP parts must be identical: part 1 is '{}' but part {} "
                  "is '{}'",
                  mtpParts[0], i + 1, mtpParts[i]),
              fmt::format(
                  "write every part after '/' as '{}' (one part per prediction "
                  "depth), or remove the '/' parts to train without MTP",
                  mtpParts[0]),
              std::max<size_t>(mtpParts[i].size(), 1));
        offset += mtpParts[i].size() + 1;
      }
      if (auto err = validatePart(mtpParts[0], firstOffset, /*allowPipe=*/false,
                                  "MTP"))
        return std::move(err);
      result.mtp = std::string(mtpParts[0]);
      result.mtpDepths = static_cast<int>(mtpParts.size());
      result.mtpOffset = firstOffset;
    }
  }

  size_t offset = 0;
  for (std::string_view segment : text::split(main, '|')) {
    result.segments.push_back(std::string(segment));
    result.segmentOffsets.push_back(offset);
    offset += segment.size() + 1;
  }
  return result;
}

Expected<const PatternStage &> PatternPlacement::stage(int64_t ppRank,
                                                       int64_t vpStage) const {
  int64_t index = vpStage * pp + ppRank;
  if (ppRank < 0 || ppRank >= pp || vpStage < 0 ||
      index >= static_cast<int64_t>(stages.size()))
    return makeError(
        fmt::format("no pipeline segment for pp_rank={}, vp_stage={}: segment "
                    "index {} is "
                    "out of range for {} segments",
                    ppRank, vpStage, index, stages.size()));
  return stages[index];
}

namespace {

/// Megatron's layer slicing for a pattern without `|` and pp > 1.
Expected<std::vector<std::pair<int64_t, int64_t>>>
splitWithoutPipes(const HybridPattern &pattern, const PlacementOptions &o) {
  int64_t n = pattern.numLayers();
  int64_t pp = o.pp;
  std::vector<std::pair<int64_t, int64_t>> slices; // (offset, count) per rank
  size_t end = pattern.main.size();
  if (!o.firstStageLayers && !o.lastStageLayers) {
    if (n % pp != 0)
      return sourceError(
          0,
          fmt::format("{} layers cannot be split evenly over pp={} ranks", n,
                      pp),
          fmt::format(
              "add '|' to place the layers yourself (for example '{}'), give "
              "first/last stage layer counts, or use a layer count divisible "
              "by {}",
              "M*M|*M*", pp),
          std::max<size_t>(end, 1));
    for (int64_t r = 0; r < pp; ++r)
      slices.push_back({r * (n / pp), n / pp});
    return slices;
  }
  int64_t first = o.firstStageLayers.value_or(0);
  int64_t last = o.lastStageLayers.value_or(0);
  if (first < 0 || last < 0)
    return sourceError(
        0, "first/last stage layer counts cannot be negative",
        "give a count of layers between 0 and the number of layers",
        std::max<size_t>(end, 1));
  if (first + last > n)
    return sourceError(
        0,
        fmt::format("first ({}) + last ({}) stage layers exceed the {} layers "
                    "of the pattern",
                    first, last, n),
        "lower the first/last stage layer counts", std::max<size_t>(end, 1));
  int64_t middleStages =
      pp - (o.firstStageLayers ? 1 : 0) - (o.lastStageLayers ? 1 : 0);
  int64_t middle = n - first - last;
  int64_t perMiddle = 0;
  if (middleStages > 0) {
    if (middle % middleStages != 0)
      return sourceError(
          0,
          fmt::format(
              "the {} middle layers cannot be split evenly over the {} middle "
              "pipeline stages",
              middle, middleStages),
          fmt::format("choose first/last stage layer counts that leave a "
                      "multiple of {} "
                      "layers in the middle",
                      middleStages),
          std::max<size_t>(end, 1));
    perMiddle = middle / middleStages;
  } else if (middle != 0) {
    return sourceError(
        0,
        fmt::format("first ({}) + last ({}) stage layers must add up to the {} "
                    "layers when pp={} has no middle stage",
                    first, last, n, pp),
        "make the two counts add up to the number of layers",
        std::max<size_t>(end, 1));
  }
  for (int64_t r = 0; r < pp; ++r) {
    if (o.firstStageLayers && r == 0)
      slices.push_back({0, first});
    else if (o.lastStageLayers && r == pp - 1)
      slices.push_back({n - last, last});
    else {
      int64_t middleRank = o.firstStageLayers ? r - 1 : r;
      slices.push_back({middleRank * perMiddle + first, perMiddle});
    }
  }
  return slices;
}

} // namespace

Expected<PatternPlacement> placeHybridPattern(const HybridPattern &pattern,
                                              const PlacementOptions &o) {
  PatternPlacement result;
  int64_t pp = o.pp;
  int64_t numSegments = pattern.numSegments();
  size_t mainEnd = std::max<size_t>(pattern.main.size(), 1);
  if (pp < 1)
    return sourceError(0, fmt::format("pp must be at least 1, got {}", pp),
                       "pass --pp N with N >= 1", mainEnd);
  if (o.vpp && *o.vpp < 1)
    return sourceError(0, fmt::format("vpp must be at least 1, got {}", *o.vpp),
                       "pass --vpp N with N >= 1", mainEnd);
  result.pp = pp;

  bool uneven = o.firstStageLayers || o.lastStageLayers;
  if (pattern.hasPipes() && uneven)
    return sourceError(
        pattern.segmentOffsets[1] - 1,
        "first/last stage layer counts cannot be combined with '|' segments",
        "the '|' separators already place every layer; drop the first/last "
        "stage "
        "layer counts, or remove the '|'");

  if (!pattern.hasPipes() && pp > 1) {
    if (o.vpp && *o.vpp > 1)
      return sourceError(
          0,
          fmt::format("virtual pipelining (vpp={}) needs '|' separators in the "
                      "pattern",
                      *o.vpp),
          fmt::format("split the pattern into pp*vpp = {} segments with '|' to "
                      "say which layers each virtual stage holds",
                      pp * *o.vpp),
          mainEnd);
    auto slices = splitWithoutPipes(pattern, o);
    if (!slices)
      return slices.takeError();
    std::string all = pattern.layers();
    for (int64_t r = 0; r < pp; ++r) {
      auto [offset, count] = (*slices)[r];
      PatternStage stage{r, r, 0, all.substr(offset, count), offset, {}};
      for (int64_t i = 0; i < count; ++i)
        stage.layerNumbers.push_back(offset + i + 1);
      result.stages.push_back(std::move(stage));
    }
  } else {
    if (uneven)
      return sourceError(0, "first/last stage layer counts need pp > 1",
                         "drop them, or pass --pp greater than 1", mainEnd);
    if (numSegments > 1 && numSegments % pp != 0) {
      int64_t lower = numSegments / pp * pp;
      return sourceError(
          0,
          fmt::format("the pattern has {} segments, which pp={} ranks cannot "
                      "share: the "
                      "number of segments must be pp * vpp",
                      numSegments, pp),
          fmt::format(
              "use {} or {} segments (vpp={} or {}), or a pp that divides {}",
              lower > 0 ? lower : pp, lower + pp,
              std::max<int64_t>(lower / pp, 1), lower / pp + 1, numSegments),
          mainEnd);
    }
    int64_t vpp = std::max<int64_t>(numSegments / pp, 1);
    if (o.vpp && *o.vpp * pp != numSegments && numSegments > 1)
      return sourceError(
          0,
          fmt::format("the pattern has {} segments but pp * vpp = {} * {} = {}",
                      numSegments, pp, *o.vpp, pp * *o.vpp),
          fmt::format("use vpp={} for this pattern, or add/remove '|'",
                      numSegments / pp),
          mainEnd);
    if (o.vpp && numSegments == 1 && *o.vpp > 1)
      return sourceError(
          0,
          fmt::format("vpp={} needs {} '|'-separated segments; the pattern has "
                      "none",
                      *o.vpp, pp * *o.vpp),
          "split the pattern with '|' into pp * vpp segments", mainEnd);
    result.vpp = vpp;
    result.virtualStages = vpp > 1;
    int64_t offset = 0;
    for (int64_t s = 0; s < numSegments; ++s) {
      const std::string &layers = pattern.segments[s];
      PatternStage stage{s,
                         schedule::rankOfStage(o.style, pp, s),
                         schedule::chunkOfStage(o.style, pp, s),
                         layers,
                         offset,
                         {}};
      for (size_t i = 0; i < layers.size(); ++i)
        stage.layerNumbers.push_back(offset + static_cast<int64_t>(i) + 1);
      offset += static_cast<int64_t>(layers.size());
      result.stages.push_back(std::move(stage));
    }
  }
  if (pattern.hasMtp()) {
    // MTP runs with the last segment, wherever the placement puts it.
    const PatternStage &last = result.stages.back();
    result.mtpOn = {last.ppRank, last.vpStage};
  }
  return result;
}

std::string patternWithStages(const HybridPattern &pattern,
                              const PatternPlacement &placement) {
  std::string out;
  for (const PatternStage &stage : placement.stages) {
    if (stage.index > 0)
      out += '|';
    out += stage.layers;
  }
  for (int depth = 0; depth < pattern.mtpDepths; ++depth)
    out += "/" + pattern.mtp;
  return out;
}

Expected<std::string>
patternFromRatios(int64_t numLayers, double attentionRatio, double mlpRatio) {
  auto bad = [](std::string message, std::string help) {
    return makeError(message + "\nhelp: " + help);
  };
  if (numLayers <= 0)
    return bad(
        fmt::format(
            "num_layers must be positive to allocate from ratios, got {}",
            numLayers),
        "set model.num_layers");
  if (numLayers > kMaxLayers)
    return bad(
        fmt::format("num_layers {} is more than hypipe supports ({})",
                    numLayers, kMaxLayers),
        "check the number; real models have at most a few hundred layers");
  if (!(attentionRatio >= 0.0 && attentionRatio <= 1.0))
    return bad(fmt::format("attention_ratio must be within [0, 1], got {}",
                           attentionRatio),
               "it is the fraction of layers that are attention");
  if (!(mlpRatio >= 0.0 && mlpRatio <= 1.0))
    return bad(fmt::format("mlp_ratio must be within [0, 1], got {}", mlpRatio),
               "it is the fraction of layers that are MLP");
  if (attentionRatio + mlpRatio > 1.0)
    return bad(fmt::format("attention_ratio + mlp_ratio = {} exceeds 1",
                           attentionRatio + mlpRatio),
               "the rest of the layers are Mamba; the two ratios can add up to "
               "1 at most");

  // Python's round() on a float: nearest, ties to even; that is nearbyint
  // under the default rounding mode.
  std::fesetround(FE_TONEAREST);
  auto n = static_cast<double>(numLayers);
  auto attentionCount =
      static_cast<int64_t>(std::nearbyint(n * attentionRatio));
  int64_t mambaCount = numLayers - attentionCount;
  double sectionLength =
      static_cast<double>(mambaCount) / static_cast<double>(attentionCount + 1);

  std::string layers(numLayers, 'M');
  double x = sectionLength;
  for (int64_t i = 0; i < numLayers; ++i) {
    if (x < 0.5) {
      layers[i] = '*';
      x += sectionLength;
    } else {
      x -= 1;
    }
  }

  auto mlpCount = static_cast<int64_t>(std::nearbyint(n * mlpRatio));
  if (mlpCount > 0) {
    mambaCount -= mlpCount;
    double ratio =
        static_cast<double>(mambaCount) / static_cast<double>(mlpCount);
    x = ratio;
    for (int64_t i = 0; i < numLayers; ++i) {
      if (layers[i] != 'M')
        continue;
      if (x < 0.5) {
        layers[i] = '-';
        x += ratio;
      } else {
        x -= 1;
      }
    }
  }
  return layers;
}

} // namespace hypipe
