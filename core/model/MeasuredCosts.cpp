//===- MeasuredCosts.cpp - layer times measured by a run, for the planner -===//

#include "core/model/MeasuredCosts.h"
#include "core/io/Files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  nlohmann::json out{
      {"hypipe_costs", 1},    {"target", c.target},
      {"threads", c.threads}, {"tokens_per_microbatch", c.tokens},
      {"dtype", c.dtype},     {"kinds", kinds}};
  if (c.link)
    out["link"] = {{"bytes_per_s", c.link->bytesPerSecond},
                   {"latency_s", c.link->latencySeconds}};
  return out.dump(2) + "\n";
}

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
    c.target = j.at("target").get<std::string>();
    c.threads = j.at("threads").get<int64_t>();
    c.tokens = j.at("tokens_per_microbatch").get<int64_t>();
    c.dtype = j.at("dtype").get<std::string>();
    for (const auto &[kind, passes] : j.at("kinds").items()) {
      KindTimes t;
      for (int p = 0; p < 3; ++p) {
        t.seconds[p] = passes.at(kPasses[p]).at("seconds").get<double>();
        t.flops[p] = passes.at(kPasses[p]).at("flops").get<double>();
        if (!std::isfinite(t.seconds[p]) || t.seconds[p] < 0 ||
            !std::isfinite(t.flops[p]) || t.flops[p] < 0)
          return fail(fmt::format("kind '{}' has a negative or non-finite {}",
                                  kind, kPasses[p]));
      }
      c.kinds[kind] = t;
    }
    if (j.contains("link")) {
      Link link{j.at("link").at("bytes_per_s").get<double>(),
                j.at("link").at("latency_s").get<double>()};
      if (!std::isfinite(link.bytesPerSecond) || !(link.bytesPerSecond > 0) ||
          !std::isfinite(link.latencySeconds) || link.latencySeconds < 0)
        return fail("its link needs a positive bytes_per_s and a latency_s "
                    "of zero or more");
      c.link = link;
    }
  } catch (const nlohmann::json::exception &e) {
    return fail(e.what());
  }
  if (c.tokens < 1 || c.threads < 1)
    return fail("tokens_per_microbatch and threads must be positive");
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
  const double seconds = it->second.seconds[size_t(pass)],
               measuredFlops = it->second.flops[size_t(pass)];
  if (measuredFlops > 0)
    return seconds * flops / measuredFlops;
  return seconds * double(tokens) / double(c.tokens);
}

} // namespace hypipe
