//===- SmallSpec.h - a small hybrid model's spec for the unit tests -------===//
#ifndef HYPIPE_TEST_UNIT_SMALLSPEC_H
#define HYPIPE_TEST_UNIT_SMALLSPEC_H

#include <string>

namespace hypipe {

/// A spec of a small hybrid model (hidden 64, two attention query groups,
/// four Mamba heads of 16) with `pattern`, the parallel section's keys
/// `parallel` and the training section's `training` (each key a line,
/// indented two spaces), training on data/tokens.txt.
inline std::string smallSpec(const std::string &pattern,
                             const std::string &parallel,
                             const std::string &training) {
  return "model:\n  pattern: \"" + pattern + "\"\n" + R"(  hidden_size: 64
  ffn_hidden_size: 128
  num_attention_heads: 4
  num_query_groups: 2
  mamba_num_heads: 4
  mamba_head_dim: 16
  mamba_state_dim: 16
  vocab_size: 256
parallel:
)" + parallel +
         "training:\n" + training + "data:\n  path: data/tokens.txt\n";
}

} // namespace hypipe

#endif
