//===- MockSft.cpp - the mock SFT dataset's sample lengths ----------------===//

#include "core/data/MockSft.h"

#include "core/Random.h"
#include "core/io/Files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace hypipe::packing {

namespace {

const char *kHelp =
    "the mock dataset is {\"mode\": \"distribution\", \"type\": "
    "\"lognormal\", \"min_seq_len\": N, \"max_seq_len\": N, "
    "\"mean_seq_len\": N, \"lognormal_sigma\": X} or {\"mode\": \"file\", "
    "\"path\": \"seqlens.csv\"}";

} // namespace

Expected<MockSftConfig> parseMockSftConfig(const std::string &text,
                                           int64_t budget) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  auto fail = [&](const std::string &what) -> Expected<MockSftConfig> {
    return Error(Problem{what, kHelp, std::nullopt, 1});
  };
  if (j.is_discarded() || !j.is_object())
    return fail("the mock dataset configuration is not a JSON object");
  MockSftConfig c;
  auto str = [&](const char *key, std::string &out) {
    if (!j.contains(key) || !j[key].is_string())
      return false;
    out = j[key].get<std::string>();
    return true;
  };
  std::string mode;
  if (!str("mode", mode))
    return fail("the mock dataset configuration needs \"mode\"");
  if (mode == "file") {
    c.fromFile = true;
    if (!str("path", c.path) || c.path.empty())
      return fail("the mock dataset's mode \"file\" needs \"path\"");
    for (auto &[key, value] : j.items())
      if (key != "mode" && key != "path")
        return fail(fmt::format("unknown key \"{}\" for mode \"file\"", key));
    return c;
  }
  if (mode != "distribution")
    return fail(fmt::format("unknown mock dataset mode \"{}\"", mode));
  std::string type;
  if (!str("type", type) || type != "lognormal")
    return fail("the mock dataset's distribution \"type\" must be "
                "\"lognormal\"");
  for (auto &[key, value] : j.items())
    if (key != "mode" && key != "type" && key != "min_seq_len" &&
        key != "max_seq_len" && key != "mean_seq_len" &&
        key != "lognormal_sigma")
      return fail(
          fmt::format("unknown key \"{}\" for mode \"distribution\"", key));
  for (const char *key :
       {"min_seq_len", "max_seq_len", "mean_seq_len", "lognormal_sigma"})
    if (!j.contains(key) || !j[key].is_number())
      return fail(fmt::format("the mock dataset needs a number \"{}\"", key));
  for (const char *key : {"min_seq_len", "max_seq_len"})
    if (!j[key].is_number_integer())
      return fail(fmt::format("\"{}\" must be an integer", key));
  c.minLen = j["min_seq_len"].get<int64_t>();
  c.maxLen = j["max_seq_len"].get<int64_t>();
  c.mean = j["mean_seq_len"].get<double>();
  c.sigma = j["lognormal_sigma"].get<double>();
  // Megatron's lengths count the EOD: a sample of one token trains nothing.
  if (c.minLen < 2 || c.maxLen < c.minLen)
    return fail(fmt::format("the mock lengths need 2 <= min_seq_len <= "
                            "max_seq_len (a length counts the sample's EOD, "
                            "as Megatron's does), got {} and {}",
                            c.minLen, c.maxLen));
  if (c.maxLen - 1 > budget)
    return Error(Problem{
        fmt::format("max_seq_len {} gives {} training positions, more than "
                    "the {} a microbatch holds",
                    c.maxLen, c.maxLen - 1, budget),
        "raise data.max_tokens_per_microbatch or lower max_seq_len",
        std::nullopt, 1});
  if (!(c.mean > 0) || !(c.sigma >= 0))
    return fail(fmt::format("mean_seq_len must be positive and "
                            "lognormal_sigma non-negative, got {} and {}",
                            c.mean, c.sigma));
  // The lengths' log-mean ln(m) - s^2 / 2 must be a number.
  if (!std::isfinite(std::log(c.mean) - 0.5 * c.sigma * c.sigma))
    return Error(Problem{
        fmt::format("mean_seq_len {} with lognormal_sigma {} gives no "
                    "lengths: ln(mean) - sigma^2 / 2 is not a finite number",
                    c.mean, c.sigma),
        "use a finite mean_seq_len and a lognormal_sigma such as 0.5 to 2 "
        "(Megatron-LM's mock SFT examples use 1.0; past about 10 nearly "
        "every length is min_seq_len or max_seq_len)",
        std::nullopt, 1});
  return c;
}

Error readMockLengths(const std::string &text, std::vector<int64_t> &lengths,
                      std::vector<size_t> *offsets) {
  lengths.clear();
  if (offsets)
    offsets->clear();
  size_t i = 0;
  while (i < text.size()) {
    unsigned char ch = static_cast<unsigned char>(text[i]);
    if (std::isspace(ch) || ch == ',') {
      ++i;
      continue;
    }
    size_t start = i;
    int64_t value = 0;
    bool digits = false;
    while (i < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[i]))) {
      value = value * 10 + (text[i] - '0');
      digits = true;
      if (value > (int64_t(1) << 40))
        break;
      ++i;
    }
    bool endsWell = i == text.size() ||
                    std::isspace(static_cast<unsigned char>(text[i])) ||
                    text[i] == ',';
    if (!digits || !endsWell || value < 1) {
      size_t end = start;
      while (end < text.size() &&
             !std::isspace(static_cast<unsigned char>(text[end])) &&
             text[end] != ',')
        ++end;
      // The file is named by a path in the spec and may be anything: its
      // bytes are not echoed (docs/security.md), the place is enough.
      return sourceError(
          start,
          fmt::format("entry {} is not a positive sequence length",
                      lengths.size() + 1),
          "a lengths file holds positive integers separated by commas, "
          "spaces or newlines (each a sample's length with its EOD: 2 or "
          "more)",
          end - start);
    }
    lengths.push_back(value);
    if (offsets)
      offsets->push_back(start);
  }
  if (lengths.empty())
    return makeError("the lengths file holds no sequence length");
  return Error::success();
}

int64_t mockSftLength(const MockSftConfig &c, uint64_t seed, int64_t index) {
  if (c.fromFile)
    return c.lengths[size_t(index) % c.lengths.size()];
  uint64_t base =
      splitmix64(splitmix64(seed ^ 0x6d6f636bULL) ^ uint64_t(index));
  double z = standardNormal(unitInterval(splitmix64(base)),
                            unitInterval(splitmix64(base ^ 1)));
  double mu = std::log(c.mean) - 0.5 * c.sigma * c.sigma;
  double len = std::clamp(std::exp(mu + c.sigma * z), double(c.minLen),
                          double(c.maxLen));
  if (std::isnan(len)) // (0 x inf: the parser refuses what gets here)
    len = double(c.minLen);
  return int64_t(len); // truncated after the clip, as astype(int)
}

} // namespace hypipe::packing
