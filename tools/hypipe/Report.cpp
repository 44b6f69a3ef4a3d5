//===- Report.cpp ---------------------------------------------------------===//
#include "tools/hypipe/Report.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>

namespace hypipe::cli {

void printTable(const std::vector<std::vector<std::string>> &rows) {
  if (rows.empty())
    return;
  size_t columns = rows.front().size();
  std::vector<size_t> widths(columns, 0);
  std::vector<bool> rightAligned(columns, true); // numbers, below the header
  auto numeric = [](const std::string &s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) || c == ',' ||
             c == '.';
    });
  };
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < columns; ++c) {
      widths[c] = std::max(widths[c], rows[r][c].size());
      if (r > 0 && !numeric(rows[r][c]))
        rightAligned[c] = false;
    }
  for (const auto &row : rows) {
    std::string line;
    for (size_t c = 0; c < columns; ++c) {
      if (c)
        line += "  ";
      line += rightAligned[c] ? fmt::format("{:>{}}", row[c], widths[c])
                              : fmt::format("{:<{}}", row[c], widths[c]);
    }
    while (!line.empty() && line.back() == ' ')
      line.pop_back();
    std::cout << line << "\n";
  }
}

std::string gib(int64_t bytes) {
  return fmt::format("{:.2f}", bytes / (1024.0 * 1024.0 * 1024.0));
}

std::string rangeText(const std::vector<int64_t> &numbers) {
  if (numbers.empty())
    return "-";
  if (numbers.size() == 1)
    return std::to_string(numbers.front());
  return fmt::format("{}-{}", numbers.front(), numbers.back());
}

nlohmann::ordered_json hybridLayoutJson(const HybridPattern &pattern,
                                        const PatternPlacement &placement) {
  nlohmann::ordered_json out;
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
  nlohmann::ordered_json counts = nlohmann::ordered_json::object();
  for (auto [symbol, count] : pattern.layerCounts())
    counts[std::string(1, symbol)] = count;
  out["layer_counts"] = counts;
  out["stages"] = nlohmann::ordered_json::array();
  for (const PatternStage &s : placement.stages)
    out["stages"].push_back({{"index", s.index},
                             {"pp_rank", s.ppRank},
                             {"vp_stage", s.vpStage},
                             {"layers", s.layers},
                             {"layer_offset", s.layerOffset},
                             {"layer_numbers", s.layerNumbers}});
  return out;
}

nlohmann::ordered_json pipelineLayoutJson(const PipelineLayout &layout,
                                          bool mtpStandalone) {
  nlohmann::ordered_json out;
  int64_t mtp = layout.count('m');
  out["kind"] = "layout";
  out["num_layers"] = layout.count('t');
  out["num_segments"] = layout.stages.size();
  out["pp"] = layout.pp;
  out["vpp"] = layout.vpp;
  out["expanded"] = layout.expanded;
  if (mtp > 0)
    out["mtp"] = {
        {"pattern", "m"}, {"depths", mtp}, {"standalone", mtpStandalone}};
  else
    out["mtp"] = nullptr;
  out["stages"] = nlohmann::ordered_json::array();
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

nlohmann::ordered_json recomputeJson(const RecomputeSpec &r) {
  nlohmann::ordered_json modules = nlohmann::ordered_json::array();
  for (RecomputeModule m : r.modules)
    modules.push_back(recomputeModuleName(m));
  return {{"granularity", recomputeGranularityName(r.granularity)},
          {"method", r.full()
                         ? nlohmann::ordered_json(recomputeMethodName(r.method))
                         : nlohmann::ordered_json(nullptr)},
          {"num_layers", r.full() ? nlohmann::ordered_json(r.numLayers)
                                  : nlohmann::ordered_json(nullptr)},
          {"modules", modules}};
}

} // namespace hypipe::cli
