//===- Report.cpp ---------------------------------------------------------===//
#include "tools/hypipe/Report.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace hypipe::cli {

void printTable(const std::vector<std::vector<std::string>> &rows) {
  if (rows.empty())
    return;
  std::vector<size_t> widths(rows.front().size(), 0);
  for (const auto &row : rows)
    for (size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  auto numeric = [](const std::string &s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == ',' || c == '.';
    });
  };
  for (const auto &row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      if (c)
        line += "  ";
      line += numeric(row[c]) ? fmt::format("{:>{}}", row[c], widths[c])
                              : fmt::format("{:<{}}", row[c], widths[c]);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    std::cout << line << "\n";
  }
}

std::string rangeText(const std::vector<int64_t> &numbers) {
  if (numbers.empty())
    return "-";
  if (numbers.size() == 1)
    return std::to_string(numbers.front());
  return fmt::format("{}-{}", numbers.front(), numbers.back());
}

nlohmann::json hybridLayoutJson(const HybridPattern &pattern, const PatternPlacement &placement) {
  nlohmann::json out;
  out["kind"] = "hybrid";
  out["num_layers"] = pattern.numLayers();
  out["num_segments"] = placement.stages.size();
  out["pp"] = placement.pp;
  out["vpp"] = placement.vpp;
  if (pattern.hasMtp()) {
    out["mtp"] = {{"pattern", pattern.mtp},
                  {"depths", pattern.mtpDepths},
                  {"pp_rank", placement.mtpOn->first},
                  {"vp_stage", placement.mtpOn->second}};
  } else {
    out["mtp"] = nullptr;
  }
  nlohmann::json counts = nlohmann::json::object();
  for (auto [symbol, count] : pattern.layerCounts())
    counts[std::string(1, symbol)] = count;
  out["layer_counts"] = counts;
  out["stages"] = nlohmann::json::array();
  for (const PatternStage &s : placement.stages)
    out["stages"].push_back({{"index", s.index},
                             {"pp_rank", s.ppRank},
                             {"vp_stage", s.vpStage},
                             {"layers", s.layers},
                             {"layer_offset", s.layerOffset},
                             {"layer_numbers", s.layerNumbers}});
  return out;
}

nlohmann::json pipelineLayoutJson(const PipelineLayout &layout, bool mtpStandalone) {
  nlohmann::json out;
  int64_t mtp = layout.count('m');
  out["kind"] = "layout";
  out["num_layers"] = layout.count('t');
  out["num_segments"] = layout.stages.size();
  out["pp"] = layout.pp;
  out["vpp"] = layout.vpp;
  out["expanded"] = layout.expanded;
  if (mtp > 0)
    out["mtp"] = {{"pattern", "m"}, {"depths", mtp}, {"standalone", mtpStandalone}};
  else
    out["mtp"] = nullptr;
  out["stages"] = nlohmann::json::array();
  int64_t offset = 0;
  for (const LayoutStage &s : layout.stages) {
    std::vector<int64_t> numbers;
    for (int64_t id : s.decoderLayerIds)
      numbers.push_back(id + 1);
    out["stages"].push_back({{"index", s.index},
                             {"pp_rank", s.ppRank},
                             {"vp_stage", s.vpStage},
                             {"layers", s.layers},
                             {"layer_offset", offset},
                             {"layer_numbers", numbers},
                             {"decoder_layer_ids", s.decoderLayerIds},
                             {"mtp_layer_ids", s.mtpLayerIds}});
    offset += static_cast<int64_t>(s.decoderLayerIds.size());
  }
  return out;
}

std::string pinnedPattern(const HybridPattern &pattern, const PatternPlacement &placement) {
  std::string out;
  for (const PatternStage &s : placement.stages) {
    if (s.index > 0)
      out += '|';
    out += s.layers;
  }
  for (int d = 0; d < pattern.mtpDepths; ++d)
    out += "/" + pattern.mtp;
  return out;
}

} // namespace hypipe::cli
