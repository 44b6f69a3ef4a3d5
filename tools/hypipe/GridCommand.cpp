//===- GridCommand.cpp - `hypipe grid` ------------------------------------===//
//
// The groups of Megatron-LM's rank grid (core/model/RankGrid.h) for given
// sizes and order: what RankGenerator.get_ranks(token) returns for each
// token, so a user (and test/cli/grid.test, against megatron-core) can see
// which ranks share a tensor-, data- or pipeline-parallel group.
//
//===----------------------------------------------------------------------===//
#include "core/model/RankGrid.h"
#include "core/model/SizeBounds.h"
#include "tools/common/CliChecks.h"
#include "tools/hypipe/Commands.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

namespace hypipe::cli {

namespace {

/// The tokens Megatron-LM's parallel_state asks its rank generators for
/// (decoder and expert grids), and the single dimensions and pairs.
constexpr const char *kDefaultTokens[] = {
    "tp",    "cp",    "ep",       "dp",       "pp",       "tp-pp",
    "tp-dp", "dp-pp", "tp-cp",    "tp-ep",    "cp-dp",    "dp-cp",
    "ep-dp", "ep-pp", "tp-ep-pp", "tp-cp-dp", "tp-dp-cp",
};

struct GridOptions {
  int64_t tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
  std::string order{kRankOrder};
  std::vector<std::string> tokens;
  bool json = false;
};

int runGrid(const GridOptions &o) {
  // Each size is at most kMaxRanks (CLI11), so the running product cannot
  // overflow before it passes the bound.
  int64_t world = 1;
  for (int64_t size : {o.tp, o.cp, o.ep, o.dp, o.pp})
    if ((world *= size) > kMaxRanks) {
      std::cerr << fmt::format(
          "error: tp {} x cp {} x ep {} x dp {} x pp {} is more than the {} "
          "ranks hypipe accepts\nhelp: use smaller sizes\n",
          o.tp, o.cp, o.ep, o.dp, o.pp, kMaxRanks);
      return 1;
    }
  std::string why;
  std::optional<RankGrid> grid =
      RankGrid::make(o.tp, o.cp, o.ep, o.dp, o.pp, o.order, &why);
  if (!grid) {
    std::cerr << fmt::format("error: {}\nhelp: e.g. --order {} (Megatron's "
                             "default) or --order {} (its "
                             "--use-tp-pp-dp-mapping)\n",
                             why, kRankOrder, kTpPpDpRankOrder);
    return 1;
  }
  std::vector<std::string> tokens = o.tokens;
  if (tokens.empty())
    tokens.assign(std::begin(kDefaultTokens), std::end(kDefaultTokens));
  std::vector<std::vector<std::vector<int64_t>>> groups;
  for (const std::string &token : tokens) {
    try {
      groups.push_back(grid->groups(token));
    } catch (const std::invalid_argument &) {
      std::cerr << fmt::format(
          "error: the token '{}' is not dimensions of the grid joined by "
          "'-'\nhelp: name some of tp, cp, ep, dp and pp, e.g. tp-pp\n",
          token);
      return 1;
    }
  }
  if (o.json) {
    nlohmann::ordered_json out;
    out["order"] = grid->order();
    for (const char *name : {"tp", "cp", "ep", "dp", "pp"})
      out["sizes"][name] = grid->size(name);
    out["world"] = grid->world();
    out["groups"] = nlohmann::ordered_json::object();
    for (size_t i = 0; i < tokens.size(); ++i)
      out["groups"][tokens[i]] = groups[i];
    std::cout << out.dump() << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "grid: tp {} x cp {} x ep {} x dp {} x pp {} = {} ranks, order {} "
      "(leftmost fastest)\n",
      o.tp, o.cp, o.ep, o.dp, o.pp, grid->world(), grid->order());
  size_t width = 0;
  for (const std::string &token : tokens)
    width = std::max(width, token.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::vector<std::string> texts;
    for (const std::vector<int64_t> &group : groups[i])
      texts.push_back(fmt::format("[{}]", fmt::join(group, ", ")));
    std::cout << fmt::format("{:<{}}  {}\n", tokens[i], width,
                             fmt::join(texts, " "));
  }
  return 0;
}

} // namespace

void addGridCommand(CLI::App &app, Runner &run) {
  auto o = std::make_shared<GridOptions>();
  CLI::App *sub = app.add_subcommand(
      "grid", "Show the rank groups of Megatron-LM's rank grid (its "
              "RankGenerator) for the given parallel sizes");
  for (auto [name, slot, what] :
       {std::tuple{"--tp", &o->tp, "tensor-parallel size"},
        {"--cp", &o->cp, "context-parallel size"},
        {"--ep", &o->ep, "expert-parallel size"},
        {"--dp", &o->dp, "data-parallel size"},
        {"--pp", &o->pp, "pipeline-parallel size"}})
    sub->add_option(name, *slot, what)
        ->check(wholeBetween(1, kMaxRanks))
        ->default_val(1);
  sub->add_option("--order", o->order,
                  "the dimensions, fastest first (Megatron's "
                  "tp-cp-ep-dp-pp, or tp-cp-ep-pp-dp); those of size 1 may "
                  "be left out")
      ->default_val(std::string(kRankOrder));
  sub->add_option("--token", o->tokens,
                  "print only the groups of these tokens (dimensions joined "
                  "by '-', as get_ranks takes them; default: tp, cp, ep, dp, "
                  "pp and the combinations Megatron-LM uses)");
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runGrid(*o); }; });
}

} // namespace hypipe::cli
