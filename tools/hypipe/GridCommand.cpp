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

/// What Megatron-LM asks its expert grid for.
constexpr const char *kExpertTokens[] = {"tp", "ep",    "dp",
                                         "pp", "tp-ep", "tp-ep-pp"};

struct GridOptions {
  int64_t tp = 1, cp = 1, ep = 1, dp = 1, pp = 1;
  /// Above 0: show the dense and the expert grid as Megatron's
  /// initialize_model_parallel builds them, ep being the expert grid's.
  int64_t etp = 0;
  std::string order{kRankOrder};
  std::vector<std::string> tokens;
  bool json = false;
};

int runGrid(const GridOptions &o) {
  // With --etp the dense grid's ep is 1 (--ep is the expert grid's).
  const bool experts = o.etp > 0;
  const int64_t denseEp = experts ? 1 : o.ep;
  // Each size is at most kMaxRanks (CLI11), so the running product cannot
  // overflow before it passes the bound.
  int64_t world = 1;
  for (int64_t size : {o.tp, o.cp, denseEp, o.dp, o.pp})
    if ((world *= size) > kMaxRanks) {
      std::cerr << fmt::format(
          "error: tp {} x cp {} x ep {} x dp {} x pp {} is more than the {} "
          "ranks hypipe accepts\nhelp: use smaller sizes\n",
          o.tp, o.cp, denseEp, o.dp, o.pp, kMaxRanks);
      return 1;
    }
  std::string why;
  std::optional<RankGrid> grid =
      RankGrid::make(o.tp, o.cp, denseEp, o.dp, o.pp, o.order, &why);
  std::optional<RankGrid> expert;
  if (grid && experts &&
      !(expert = RankGrid::expert(*grid, o.ep, o.etp, o.order, &why))) {
    std::cerr << fmt::format(
        "error: {}\nhelp: use an etp x ep that divides tp x cp x dp = {}, "
        "the ranks of a pipeline stage, in an order that ends in pp "
        "(Megatron's default {})\n",
        why, o.tp * o.cp * o.dp, kRankOrder);
    return 1;
  }
  if (!grid) {
    std::cerr << fmt::format("error: {}\nhelp: e.g. --order {} (Megatron's "
                             "default) or --order {} (its "
                             "--use-tp-pp-dp-mapping)\n",
                             why, kRankOrder, kTpPpDpRankOrder);
    return 1;
  }
  using Groups = std::vector<std::vector<std::vector<int64_t>>>;
  // Each token's groups in `g`; false (with the message) for a token that
  // is not dimensions of the grid.
  auto groupsOf = [](const RankGrid &g, const std::vector<std::string> &tokens,
                     Groups &out) {
    for (const std::string &token : tokens) {
      try {
        out.push_back(g.groups(token));
      } catch (const std::invalid_argument &) {
        std::cerr << fmt::format(
            "error: the token '{}' is not dimensions of the grid joined by "
            "'-'\nhelp: name some of tp, cp, ep, dp and pp, e.g. tp-pp\n",
            token);
        return false;
      }
    }
    return true;
  };
  std::vector<std::string> tokens = o.tokens, expertTokens = o.tokens;
  if (tokens.empty()) {
    tokens.assign(std::begin(kDefaultTokens), std::end(kDefaultTokens));
    expertTokens.assign(std::begin(kExpertTokens), std::end(kExpertTokens));
  }
  Groups groups, expertGroups;
  if (!groupsOf(*grid, tokens, groups) ||
      (expert && !groupsOf(*expert, expertTokens, expertGroups)))
    return 1;
  if (o.json) {
    auto describe = [](const RankGrid &g, const std::vector<std::string> &names,
                       const Groups &found) {
      nlohmann::ordered_json out;
      out["order"] = g.order();
      for (const char *name : {"tp", "cp", "ep", "dp", "pp"})
        out["sizes"][name] = g.size(name);
      out["world"] = g.world();
      out["groups"] = nlohmann::ordered_json::object();
      for (size_t i = 0; i < names.size(); ++i)
        out["groups"][names[i]] = found[i];
      return out;
    };
    nlohmann::ordered_json out = describe(*grid, tokens, groups);
    if (expert)
      out["expert"] = describe(*expert, expertTokens, expertGroups);
    std::cout << out.dump() << "\n";
    return 0;
  }
  auto print = [](const char *what, const RankGrid &g,
                  const std::vector<std::string> &names, const Groups &found) {
    std::cout << fmt::format(
        "{}: tp {} x cp {} x ep {} x dp {} x pp {} = {} ranks, order {} "
        "(leftmost fastest)\n",
        what, g.size("tp"), g.size("cp"), g.size("ep"), g.size("dp"),
        g.size("pp"), g.world(), g.order());
    size_t width = 0;
    for (const std::string &token : names)
      width = std::max(width, token.size());
    for (size_t i = 0; i < names.size(); ++i) {
      std::vector<std::string> texts;
      for (const std::vector<int64_t> &group : found[i])
        texts.push_back(fmt::format("[{}]", fmt::join(group, ", ")));
      std::cout << fmt::format("{:<{}}  {}\n", names[i], width,
                               fmt::join(texts, " "));
    }
  };
  print("grid", *grid, tokens, groups);
  if (expert)
    print("expert grid", *expert, expertTokens, expertGroups);
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
  sub->add_option("--etp", o->etp,
                  "expert tensor-parallel size: show the dense grid (ep 1) "
                  "and the MoE layers' expert grid (tp = etp, ep = --ep, dp "
                  "= world / (etp x ep x pp), cp 1) as Megatron-LM's "
                  "initialize_model_parallel builds them")
      ->check(wholeBetween(1, kMaxRanks));
  sub->add_flag("--json", o->json, "print JSON (format in docs/cli.md)");
  sub->callback([o, &run] { run = [o] { return runGrid(*o); }; });
}

} // namespace hypipe::cli
