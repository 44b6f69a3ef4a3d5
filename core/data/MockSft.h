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
/// holds (max_seq_len - 1 training positions may not exceed it). The file of
/// mode "file" is not read here (readMockLengths does).
Expected<MockSftConfig> parseMockSftConfig(const std::string &json,
                                           int64_t budget);

/// The lengths file a mock configuration names (mode "file"), as written
/// (relative to the spec's directory), or "" (none, or no valid
/// configuration): an input no output of a run may overwrite.
inline std::string mockLengthsFile(const std::string &json) {
  Expected<MockSftConfig> c = parseMockSftConfig(json, INT64_MAX);
  return c && c->fromFile ? c->path : std::string();
}

/// Where a run reads the lengths file `path`: relative to `specDir`, the
/// spec's directory, unless absolute (or no directory is known).
inline std::string mockLengthsPath(const std::string &path,
                                   const std::string &specDir) {
  if (path.empty() || path[0] == '/' || specDir.empty())
    return path;
  return specDir + "/" + path;
}

/// Reads a lengths file: positive integers separated by commas, spaces or
/// newlines. Errors carry the 1-based line and column in `Problem::offset`
/// (as a byte offset into the file's text); `offsets`, when given, gets
/// each length's, for the caller's errors about one.
Error readMockLengths(const std::string &text, std::vector<int64_t> &lengths,
                      std::vector<size_t> *offsets = nullptr);

/// Length of mock sample `index` of a run with seed `seed`, as Megatron's
/// mock SFT dataset counts it: its tokens with the closing EOD, so a sample
/// of length L trains L - 1 positions (mockSftPositions). A lognormal draw
/// exp(mu + sigma z) with mu = ln(mean) - sigma^2 / 2 is clipped to
/// [min_seq_len, max_seq_len] and then truncated, as Megatron's
/// np.clip(...).astype(int) does. The draws come from hypipe's counter-based
/// generator, not numpy's: the distribution is Megatron's, the individual
/// lengths are not.
int64_t mockSftLength(const MockSftConfig &config, uint64_t seed,
                      int64_t index);

/// The training positions of mock sample `index`: its length less the EOD.
inline int64_t mockSftPositions(const MockSftConfig &config, uint64_t seed,
                                int64_t index) {
  return mockSftLength(config, seed, index) - 1;
}

} // namespace hypipe::packing

#endif
