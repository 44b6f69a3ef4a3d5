//===- MockSft.h - the mock SFT dataset's sample lengths ------------------===//
//
// Megatron-LM's mock SFT dataset is configured by one JSON object:
//   {"mode": "distribution", "type": "lognormal", "min_seq_len": a,
//    "max_seq_len": b, "mean_seq_len": m, "lognormal_sigma": s}
// or {"mode": "file", "path": "seqlens.csv"}. Lognormal lengths are
// exp(mu + s z), z standard normal, with mu = ln(m) - s^2 / 2 so that the
// mean before clipping is m, rounded and clipped to [a, b]; file lengths are
// used in order, cyclically. Sample i's length depends on the seed and i
// only. The spec loader checks the configuration, the runtime draws from it.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_DATA_MOCKSFT_H
#define HYPIPE_CORE_DATA_MOCKSFT_H

#include "core/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace hypipe::packing {

struct MockSftConfig {
  bool fromFile = false;
  int64_t minLen = 0, maxLen = 0;
  double mean = 0, sigma = 0;
  std::string path;             ///< lengths file (mode file)
  std::vector<int64_t> lengths; ///< its content, once read
};

/// Parses and checks the JSON text; `budget` is the tokens a microbatch
/// holds (max_seq_len may not exceed it). The file of mode "file" is not
/// read here (readMockLengths does).
Expected<MockSftConfig> parseMockSftConfig(const std::string &json,
                                           int64_t budget);

/// Reads a lengths file: positive integers separated by commas, spaces or
/// newlines. Errors carry the 1-based line and column in `Problem::offset`
/// (as a byte offset into the file's text).
Error readMockLengths(const std::string &text, std::vector<int64_t> &lengths);

/// Length of mock sample `index` of a run with seed `seed`.
int64_t mockSftLength(const MockSftConfig &config, uint64_t seed,
                      int64_t index);

} // namespace hypipe::packing

#endif
