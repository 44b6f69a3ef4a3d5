//===- Report.h - tables and JSON shared by the subcommands ---------------===//
#ifndef HYPIPE_TOOLS_HYPIPE_REPORT_H
#define HYPIPE_TOOLS_HYPIPE_REPORT_H

#include "core/lang/HybridPattern.h"
#include "core/lang/PipelineLayout.h"
#include "core/model/Recompute.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace hypipe::cli {

/// Prints rows as a table with right-aligned numeric-looking columns; the
/// first row is the header.
void printTable(const std::vector<std::vector<std::string>> &rows);

/// Bytes in GiB with two decimals, as the tables print memory.
std::string gib(int64_t bytes);

/// "1-4", "5", or "-" for an empty list.
std::string rangeText(const std::vector<int64_t> &numbers);

/// The `hypipe layout --json` document of a hybrid pattern placement
/// (docs/cli.md).
nlohmann::ordered_json hybridLayoutJson(const HybridPattern &pattern,
                                        const PatternPlacement &placement);

/// The `hypipe layout --kind layout --json` document.
nlohmann::ordered_json pipelineLayoutJson(const PipelineLayout &layout,
                                          bool mtpStandalone);

/// training.recompute as loaded: method and num_layers are null but for
/// full recompute, modules empty but for selective (in the order given).
nlohmann::ordered_json recomputeJson(const RecomputeSpec &recompute);

} // namespace hypipe::cli

#endif
