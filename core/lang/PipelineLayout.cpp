//===- PipelineLayout.cpp -------------------------------------------------===//
#include "core/lang/PipelineLayout.h"
#include "core/Text.h"
#include "core/lang/HybridPattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace hypipe {

namespace {

constexpr const char *kLetterHelp =
    "layout letters are E (embedding), t (decoder layer), m (MTP layer) and "
    "L (loss); '|' separates stages, 'x*n' and '(group)*n' repeat, commas are "
    "ignored";

/// A character of the layout being expanded and where it came from.
struct Located {
  char c;
  size_t offset;
};
using Text = std::vector<Located>;

bool isDigit(char c) { return c >= '0' && c <= '9'; }

/// Reads the `\d+` at `i` (greedy) into `count`; returns the end position.
/// Saturates so that a huge count is reported, not wrapped.
size_t readCount(const Text &s, size_t i, uint64_t &count) {
  count = 0;
  while (i < s.size() && isDigit(s[i].c)) {
    count =
        std::min<uint64_t>(count * 10 + (s[i].c - '0'), kMaxLayoutLength + 1);
    ++i;
  }
  return i;
}

Error tooLong(size_t offset) {
  return sourceError(
      offset,
      fmt::format("the layout expands to more than {} characters",
                  kMaxLayoutLength),
      "use a smaller repetition count");
}

/// One pass of Python's `re.sub(r'\(([^)]+)\)\*(\d+)', ...)`: scans left to
/// right, replaces each non-overlapping match by its group repeated.
Expected<Text> unrollGroups(const Text &s) {
  Text out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i].c == '(') {
      size_t close = i + 1;
      while (close < s.size() && s[close].c != ')')
        ++close;
      if (close > i + 1 && close + 2 < s.size() && s[close + 1].c == '*' &&
          isDigit(s[close + 2].c)) {
        uint64_t count;
        size_t end = readCount(s, close + 2, count);
        uint64_t groupSize = close - i - 1;
        if (out.size() + groupSize * count > kMaxLayoutLength)
          return tooLong(s[close + 1].offset);
        for (uint64_t k = 0; k < count; ++k)
          out.insert(out.end(), s.begin() + i + 1, s.begin() + close);
        i = end;
        continue;
      }
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

/// One pass of Python's `re.sub(r'(.)\*(\d+)', ...)`.
Expected<Text> unrollSingles(const Text &s) {
  Text out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i].c != '\n' && i + 2 < s.size() && s[i + 1].c == '*' &&
        isDigit(s[i + 2].c)) {
      uint64_t count;
      size_t end = readCount(s, i + 2, count);
      if (out.size() + count > kMaxLayoutLength)
        return tooLong(s[i + 1].offset);
      out.insert(out.end(), count, s[i]);
      i = end;
      continue;
    }
    out.push_back(s[i]);
    ++i;
  }
  return out;
}

} // namespace

int64_t PipelineLayout::count(char letter) const {
  int64_t n = 0;
  for (const LayoutStage &stage : stages)
    n += std::count(stage.layers.begin(), stage.layers.end(), letter);
  return n;
}

Expected<PipelineLayout> parsePipelineLayout(std::string_view text,
                                             int64_t pp) {
  if (pp < 1)
    return sourceError(0, fmt::format("pp must be at least 1, got {}", pp),
                       "pass --pp N with N >= 1",
                       std::max<size_t>(text.size(), 1));
  if (text.size() > kMaxLayoutLength)
    return tooLong(kMaxLayoutLength);

  Text s;
  for (size_t i = 0; i < text.size(); ++i)
    if (text[i] != ',')
      s.push_back({text[i], i});
  auto groups = unrollGroups(s);
  if (!groups)
    return groups.takeError();
  auto singles = unrollSingles(*groups);
  if (!singles)
    return singles.takeError();

  PipelineLayout layout;
  layout.text = std::string(text);
  layout.pp = pp;
  for (const Located &l : *singles) {
    layout.expanded.push_back(l.c);
    layout.sourceOffsets.push_back(l.offset);
  }

  std::vector<std::string> stages(1);
  for (const Located &l : *singles) {
    if (l.c == '|') {
      stages.emplace_back();
      continue;
    }
    if (l.c != 'E' && l.c != 't' && l.c != 'm' && l.c != 'L') {
      std::string shown =
          std::isprint(static_cast<unsigned char>(l.c))
              ? fmt::format("'{}'", l.c)
              : fmt::format("byte 0x{:02x}", static_cast<unsigned char>(l.c));
      std::string extra;
      if (l.c == 'e' || l.c == 'T' || l.c == 'M' || l.c == 'l')
        extra = fmt::format(" (letters are case-sensitive: did you mean '{}'?)",
                            static_cast<char>(std::isupper(l.c)
                                                  ? std::tolower(l.c)
                                                  : std::toupper(l.c)));
      else if (l.c == ' ')
        extra = " (spaces are not allowed; use ',' to separate visually)";
      else if (l.c == '(' || l.c == ')' || l.c == '*')
        extra = " (a repetition is 'x*n' or '(group)*n' with n a number; "
                "groups do not nest)";
      return sourceError(
          l.offset, fmt::format("{} is not a layout letter{}", shown, extra),
          kLetterHelp);
    }
    stages.back().push_back(l.c);
  }

  auto numStages = static_cast<int64_t>(stages.size());
  if (numStages % pp != 0)
    return sourceError(
        0,
        fmt::format(
            "the layout has {} stages, which is not a multiple of pp={}",
            numStages, pp),
        fmt::format("the number of '|'-separated stages must be pp * vpp: add "
                    "or remove "
                    "'|' to get {} or {} stages",
                    numStages / pp * pp == 0 ? pp : numStages / pp * pp,
                    (numStages / pp + 1) * pp),
        std::max<size_t>(text.size(), 1));
  layout.vpp = numStages / pp;

  int64_t decoder = 0, mtp = 0;
  for (int64_t i = 0; i < numStages; ++i) {
    LayoutStage stage;
    stage.index = i;
    // The layout language places stages on Megatron's loop.
    stage.ppRank = schedule::rankOfStage(schedule::Placement::Loop, pp, i);
    stage.vpStage = schedule::chunkOfStage(schedule::Placement::Loop, pp, i);
    stage.layers = stages[i];
    for (char c : stage.layers) {
      if (c == 't')
        stage.decoderLayerIds.push_back(decoder++);
      else if (c == 'm')
        stage.mtpLayerIds.push_back(mtp++);
    }
    layout.stages.push_back(std::move(stage));
  }
  return layout;
}

namespace {

/// Offset in the original text of the `k`-th layer letter (skipping `|`) of
/// the flattened layout, and of the first letter of stage `index`.
size_t offsetOfLetter(const PipelineLayout &layout, size_t k) {
  for (size_t i = 0; i < layout.expanded.size(); ++i) {
    if (layout.expanded[i] == '|')
      continue;
    if (k-- == 0)
      return layout.sourceOffsets[i];
  }
  return 0;
}

size_t offsetOfStage(const PipelineLayout &layout, int64_t index) {
  int64_t stage = 0;
  for (size_t i = 0; i < layout.expanded.size(); ++i) {
    if (stage == index)
      return layout.sourceOffsets[i];
    if (layout.expanded[i] == '|')
      ++stage;
  }
  return layout.text.empty() ? 0 : layout.text.size() - 1;
}

} // namespace

Expected<LayoutValidation>
validatePipelineLayout(const PipelineLayout &layout, int64_t numLayers,
                       std::optional<int64_t> mtpNumLayers) {
  std::string flat;
  for (const LayoutStage &stage : layout.stages)
    flat += stage.layers;
  size_t whole = std::max<size_t>(layout.text.size(), 1);

  if (flat.empty())
    return sourceError(0, "the layout has no layers",
                       "a layout starts with the embedding and ends with the "
                       "loss, e.g. 'Et*4|t*4L'",
                       whole);
  if (flat.front() != 'E')
    return sourceError(
        offsetOfLetter(layout, 0),
        fmt::format("the first layer must be the embedding 'E', got '{}'",
                    flat.front()),
        "start the layout with 'E' (it runs on pp_rank 0, vp_stage 0)");
  if (flat.back() != 'L')
    return sourceError(
        offsetOfLetter(layout, flat.size() - 1),
        fmt::format("the last layer must be the loss 'L', got '{}'",
                    flat.back()),
        layout.stages.back().layers.empty()
            ? "the last stage is empty (a trailing '|'?); end the layout with "
              "'L'"
            : "end the layout with 'L' (it runs on the last rank, last virtual "
              "stage)");
  auto countOf = [&](char c) {
    return std::count(flat.begin(), flat.end(), c);
  };
  auto nth = [&](char c, int k) {
    for (size_t i = 0; i < flat.size(); ++i)
      if (flat[i] == c && k-- == 0)
        return offsetOfLetter(layout, i);
    return size_t(0);
  };
  if (countOf('E') != 1)
    return sourceError(nth('E', 1),
                       "the embedding 'E' must appear exactly once",
                       "remove the extra 'E'");
  if (countOf('L') != 1)
    return sourceError(nth('L', 0), "the loss 'L' must appear exactly once",
                       "remove the extra 'L'");
  if (countOf('t') != numLayers)
    return sourceError(
        0,
        fmt::format("the layout has {} decoder layers 't' but the model has {}",
                    countOf('t'), numLayers),
        "make the number of 't' equal to the model's num_layers", whole);
  int64_t mtpCount = countOf('m');
  if (!(mtpCount == mtpNumLayers.value_or(0)))
    return sourceError(
        mtpCount > 0 ? nth('m', 0) : 0,
        fmt::format("the layout has {} MTP layers 'm' but the model has {}",
                    mtpCount, mtpNumLayers.value_or(0)),
        "make the number of 'm' equal to mtp_num_layers",
        mtpCount > 0 ? 1 : whole);
  size_t firstMtp = flat.find('m');
  if (firstMtp != std::string::npos) {
    size_t laterDecoder = flat.find('t', firstMtp);
    if (laterDecoder != std::string::npos)
      return sourceError(offsetOfLetter(layout, laterDecoder),
                         "decoder layers must come before MTP layers",
                         "move the 'm' layers after the last 't'");
  }
  int64_t pp = layout.pp, vpp = layout.vpp;
  for (const LayoutStage &stage : layout.stages) {
    if (stage.vpStage == vpp - 1 || stage.layers.find('m') == std::string::npos)
      continue;
    return sourceError(offsetOfStage(layout, stage.index),
                       fmt::format("MTP layers must be in the last virtual "
                                   "stage of their rank, but stage {} "
                                   "(pp_rank {}, vp_stage {}) holds some",
                                   stage.index, stage.ppRank, stage.vpStage),
                       fmt::format("put the 'm' layers in a stage with "
                                   "vp_stage {} (stage index {} to {})",
                                   vpp - 1, (vpp - 1) * pp, vpp * pp - 1));
  }
  LayoutValidation result;
  for (const LayoutStage &stage : layout.stages) {
    if (stage.vpStage != vpp - 1)
      continue;
    int64_t here = std::count(stage.layers.begin(), stage.layers.end(), 'm');
    if (here == 0)
      continue;
    if (here != mtpNumLayers.value_or(0))
      return sourceError(offsetOfStage(layout, stage.index),
                         "all MTP layers must be in one virtual pipeline stage",
                         fmt::format("move all {} 'm' layers into one stage",
                                     mtpNumLayers.value_or(0)));
    if (stage.ppRank != pp - 1)
      result.mtpStandalone = true;
  }
  return result;
}

Expected<PatternPlacement> placementFromLayout(const HybridPattern &pattern,
                                               const PipelineLayout &layout) {
  PatternPlacement placement;
  placement.pp = layout.pp;
  placement.vpp = layout.vpp;
  placement.virtualStages = layout.vpp > 1;
  std::string all = pattern.layers();
  auto last = static_cast<int64_t>(layout.stages.size()) - 1;
  for (const LayoutStage &ls : layout.stages) {
    if (!ls.mtpLayerIds.empty() && ls.index != last)
      return sourceError(
          offsetOfStage(layout, ls.index),
          fmt::format("hypipe runs the MTP layers with the loss, in the last "
                      "stage; this layout puts them in stage {} (pp_rank {}, "
                      "vp_stage {})",
                      ls.index, ls.ppRank, ls.vpStage),
          "move the 'm' layers next to 'L' (Megatron's standalone MTP "
          "placement "
          "is not supported yet)");
    PatternStage stage{ls.index, ls.ppRank, ls.vpStage, "", 0, {}};
    stage.layerOffset =
        ls.decoderLayerIds.empty() ? 0 : ls.decoderLayerIds.front();
    for (int64_t id : ls.decoderLayerIds) {
      stage.layers.push_back(all[id]);
      stage.layerNumbers.push_back(id + 1);
    }
    placement.stages.push_back(std::move(stage));
  }
  if (pattern.hasMtp())
    placement.mtpOn = {layout.pp - 1, layout.vpp - 1};
  return placement;
}

} // namespace hypipe
