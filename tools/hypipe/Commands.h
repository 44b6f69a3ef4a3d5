//===- Commands.h - the hypipe subcommands --------------------------------===//
#ifndef HYPIPE_TOOLS_HYPIPE_COMMANDS_H
#define HYPIPE_TOOLS_HYPIPE_COMMANDS_H

#include "core/model/Cluster.h"
#include "frontend/Spec.h"

#include <CLI/CLI.hpp>

#include <functional>

namespace hypipe::cli {

/// Each subcommand registers its options and sets `run` to its body, which
/// returns the process exit code (0 on success, 1 on rejected input).
using Runner = std::function<int()>;

void addLayoutCommand(CLI::App &app, Runner &run);
void addCompileCommand(CLI::App &app, Runner &run);
/// --pp, --vpp, --dp, --tp, --sequence-parallel, --schedule,
/// --microbatches, --steps, --seed and the others of SpecOverrides.
void addOverrideOptions(CLI::App *sub, SpecOverrides &overrides);
void addExplainCommand(CLI::App &app, Runner &run);
void addPartitionCommand(CLI::App &app, Runner &run);
void addScheduleCommand(CLI::App &app, Runner &run);
void addTrainCommand(CLI::App &app, Runner &run);
void addCheckpointCommand(CLI::App &app, Runner &run);
void addPlanCommand(CLI::App &app, Runner &run);
/// `hypipe data prepare`: JSON Lines to Megatron's indexed dataset.
void addDataCommand(CLI::App &app, Runner &run);
/// `hypipe grid`: Megatron-LM's rank groups for given sizes.
void addGridCommand(CLI::App &app, Runner &run);
/// `hypipe split`: the documents of each part of Megatron-LM's --split.
void addSplitCommand(CLI::App &app, Runner &run);
/// `hypipe plot RUN...`: several runs' curves in one picture.
void addPlotCommand(CLI::App &app, Runner &run);

/// The cluster a step is timed on (plan and explain).
struct ClusterOptions {
  /// None without --device; `--device ''` is a device name, and refused.
  std::optional<std::string> device;
  ClusterOverrides overrides;
};
/// --device, --ranks-per-node, --intra-node, --inter-node, --mfu.
void addClusterOptions(CLI::App *sub, ClusterOptions &options);
/// The cluster the options describe: none without --device, and an error
/// for a device's setting given without one.
Expected<std::optional<Cluster>> clusterOf(const ClusterOptions &options);

} // namespace hypipe::cli

#endif
