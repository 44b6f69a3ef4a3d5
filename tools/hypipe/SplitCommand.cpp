//===- SplitCommand.cpp - `hypipe split` ----------------------------------===//
//
// The documents each part of a `--split` (core/data/Split.h) holds for a
// data set of N documents: what a training run with that split trains,
// validates and tests on, so a user (and test/cli/split.test, against
// megatron-core's own builder) can see the boundaries before a run.
//
//===----------------------------------------------------------------------===//
#include "core/data/Split.h"
#include "frontend/Diagnostic.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"

#include "llvm/Support/raw_ostream.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <limits>
#include <memory>
#include <vector>

namespace hypipe::cli {

namespace {

struct SplitOptions {
  std::string text;
  std::vector<int64_t> documents;
  bool json = false;
};

constexpr SplitPart kParts[] = {SplitPart::Train, SplitPart::Validation,
                                SplitPart::Test};

int runSplit(const SplitOptions &o) {
  Expected<DataSplit> split = parseSplit(o.text);
  if (!split) {
    printTextError(llvm::errs(), "--split", o.text, split.takeError());
    return 1;
  }
  if (o.json) {
    nlohmann::ordered_json out;
    out["split"] = o.text;
    out["weights"] = split->weights;
    out["data_sets"] = nlohmann::ordered_json::array();
    for (int64_t documents : o.documents) {
      nlohmann::ordered_json set;
      set["documents"] = documents;
      for (SplitPart part : kParts) {
        const auto [first, last] = split->documentRange(part, documents);
        set[std::string(splitPartName(part))] = {first, last};
      }
      out["data_sets"].push_back(set);
    }
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << fmt::format("split {}: weights {:.6f} {:.6f} {:.6f} "
                           "(megatron-core's document ranges, [first, "
                           "last))\n",
                           o.text, split->weights[0], split->weights[1],
                           split->weights[2]);
  for (int64_t documents : o.documents) {
    std::string line = fmt::format("{} documents:", documents);
    for (SplitPart part : kParts) {
      const auto [first, last] = split->documentRange(part, documents);
      line += fmt::format("  {} [{}, {})", splitPartName(part), first, last);
    }
    std::cout << line << "\n";
  }
  return 0;
}

} // namespace

void addSplitCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<SplitOptions>();
  CLI::App *sub = app.add_subcommand(
      "split", "Show the documents each part of a --split holds "
               "(Megatron-LM's train, validation and test split)");
  sub->add_option("split", o->text,
                  "train, validation and test weights, e.g. 969,30,1")
      ->required();
  sub->add_option("--documents", o->documents,
                  "documents in the data set (an indexed dataset's "
                  "sequences, a JSON Lines file's lines); several give a "
                  "line each")
      ->check(wholeBetween(0, std::numeric_limits<int32_t>::max()))
      ->required();
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runSplit(*o); }; });
}

} // namespace hypipe::cli
