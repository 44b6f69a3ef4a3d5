//===- MeasuredCosts.cpp - layer times measured by a run, for the planner -===//

#include "core/model/MeasuredCosts.h"
#include "core/io/Files.h"
#include "core/model/SizeBounds.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>

namespace hypipe {

namespace {
constexpr const char *kPasses[3] = {"forward", "backward_input",
                                    "backward_weight"};
} // namespace

std::string measuredKindOf(const std::string &name) {
  if (name == "M")
    return "mamba";
  if (name == "*")
    return "attention";
  if (name == "-")
    return "mlp";
  if (name == "E")
    return "moe";
  if (name == "+")
    return "mla";
  if (name == "D")
    return "dsa";
  if (name == "G")
    return "gdn";
  return name; // embedding, head, mtp
}

std::string measuredCostsJson(const MeasuredCosts &c) {
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto &[kind, t] : c.kinds) {
    nlohmann::json passes = nlohmann::json::object();
    for (int p = 0; p < 3; ++p)
      passes[kPasses[p]] = {{"seconds", t.seconds[p]}, {"flops", t.flops[p]}};
    kinds[kind] = passes;
  }
  nlohmann::json out{{"hypipe_costs", 1},
                     {"target", rt::targetName(c.target)},
                     {"threads", c.threads},
                     {"tokens_per_microbatch", c.tokens},
                     {"dtype", precisionName(c.dtype)},
                     {"kinds", kinds}};
  if (c.link)
    out["link"] = {{"bytes_per_s", c.link->bytesPerSecond},
                   {"latency_s", c.link->latencySeconds}};
  return out.dump(2) + "\n";
}

namespace {

/// What is wrong with a kind's times ("" if nothing): each pass's seconds
/// finite, 0 to MeasuredBounds::kMostSeconds, the forward's at least
/// kLeastForwardSeconds (a step of no time has infinite tokens/s); each FLOP
/// count 0 (a lookup, scaled by tokens) or 1 to MeasuredBounds::kMostFlops
/// (a count below 1 would scale a layer's time up without bound), reached
/// at most kMostFlopsPerSecond fast.
std::string kindTimesProblem(const KindTimes &t) {
  for (int p = 0; p < 3; ++p) {
    const double seconds = t.seconds[size_t(p)], flops = t.flops[size_t(p)];
    if (!std::isfinite(seconds) || seconds < 0 ||
        seconds > MeasuredBounds::kMostSeconds)
      return fmt::format("a {} of {} seconds a call, outside 0 to {:g}",
                         kPasses[p], seconds, MeasuredBounds::kMostSeconds);
    if (p == 0 && !(seconds >= MeasuredBounds::kLeastForwardSeconds))
      return fmt::format("a forward of {} seconds a call, less than {:g}",
                         seconds, MeasuredBounds::kLeastForwardSeconds);
    if (!std::isfinite(flops) || !(flops == 0 || flops >= 1) ||
        flops > MeasuredBounds::kMostFlops)
      return fmt::format("a {} of {} FLOPs, neither 0 nor 1 to 2^63",
                         kPasses[p], flops);
    if (seconds > 0 && flops / seconds > MeasuredBounds::kMostFlopsPerSecond)
      return fmt::format("a {} of {} FLOPs in {} seconds, faster than {:g} "
                         "FLOP/s",
                         kPasses[p], flops, seconds,
                         MeasuredBounds::kMostFlopsPerSecond);
  }
  return std::string();
}

/// What is wrong with the run's own fields ("" if nothing): `target` and
/// `dtype` as the file writes them, parsed into `c`.
std::string runFieldsProblem(const std::string &target,
                             const std::string &dtype, MeasuredCosts &c) {
  if (rt::parseTarget(target) != rt::Target::Cpu)
    return fmt::format("its target is '{}'; only a cpu run times its "
                       "layers",
                       target);
  std::optional<TrainingPrecision> precision = parsePrecision(dtype);
  if (!precision)
    return fmt::format("its dtype is '{}', not fp32 or bf16", dtype);
  c.dtype = *precision;
  if (c.tokens < 1 || c.tokens > kMaxMicrobatchTokens || c.threads < 1 ||
      c.threads > kMaxThreads)
    return fmt::format("tokens_per_microbatch ({}) must be 1 to {} and "
                       "threads ({}) 1 to {}",
                       c.tokens, kMaxMicrobatchTokens, c.threads, kMaxThreads);
  return std::string();
}

} // namespace

Expected<MeasuredCosts> parseMeasuredCosts(const std::string &text,
                                           const std::string &what) {
  auto fail = [&](const std::string &why) {
    return Error(
        Problem{fmt::format("{} is not a measured-costs file: {}", what, why),
                "write one with `hypipe train SPEC --costs-out FILE` (or "
                "hypipe-run --costs-out FILE)"});
  };
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail("it is not a JSON object");
  if (j.value("hypipe_costs", 0) != 1)
    return fail("it lacks \"hypipe_costs\": 1");
  MeasuredCosts c;
  try {
    const auto target = j.at("target").get<std::string>();
    c.threads = j.at("threads").get<int64_t>();
    c.tokens = j.at("tokens_per_microbatch").get<int64_t>();
    const auto dtype = j.at("dtype").get<std::string>();
    if (std::string why = runFieldsProblem(target, dtype, c); !why.empty())
      return fail(why);
    for (const auto &[kind, passes] : j.at("kinds").items()) {
      if (std::find_if(std::begin(kMeasuredKinds), std::end(kMeasuredKinds),
                       [&](const char *k) { return kind == k; }) ==
          std::end(kMeasuredKinds))
        return fail(fmt::format("kind '{}' is not one a run measures ({})",
                                kind, fmt::join(kMeasuredKinds, ", ")));
      KindTimes t;
      for (int p = 0; p < 3; ++p) {
        t.seconds[p] = passes.at(kPasses[p]).at("seconds").get<double>();
        t.flops[p] = passes.at(kPasses[p]).at("flops").get<double>();
      }
      if (std::string why = kindTimesProblem(t); !why.empty())
        return fail(fmt::format("kind '{}' has {}", kind, why));
      c.kinds[kind] = t;
    }
    if (j.contains("link")) {
      Link link{j.at("link").at("bytes_per_s").get<double>(),
                j.at("link").at("latency_s").get<double>()};
      if (std::string why = linkProblem(link); !why.empty())
        return fail("its link has " + why);
      c.link = link;
    }
  } catch (const nlohmann::json::exception &e) {
    return fail(e.what());
  }
  return c;
}

Expected<MeasuredCosts> readMeasuredCosts(const std::string &path) {
  Expected<std::string> text = files::readBounded(path, files::kMeasuredCosts);
  if (!text)
    return text.takeError();
  return parseMeasuredCosts(*text, "'" + path + "'");
}

std::optional<double> measuredSeconds(const MeasuredCosts &c,
                                      const std::string &kind, int pass,
                                      double flops, int64_t tokens) {
  auto it = c.kinds.find(kind);
  if (it == c.kinds.end())
    return std::nullopt;
  const KindTimes &t = it->second;
  const double seconds = t.seconds[size_t(pass)],
               measuredFlops = t.flops[size_t(pass)];
  if (measuredFlops > 0)
    return seconds * flops / measuredFlops;
  // The same GEMMs as the forward's: its rate (a lookup's forward has no
  // FLOPs either, and falls to the tokens).
  if (flops > 0 && t.flops[0] > 0)
    return t.seconds[0] * flops / t.flops[0];
  return seconds * double(tokens) / double(c.tokens);
}

} // namespace hypipe
