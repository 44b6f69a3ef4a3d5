//===- ShardLayout.h - the distributed optimizer's shards of a stage ------===//
//
// Megatron's distributed optimizer cuts each gradient bucket, not the whole
// buffer, into dp equal parts: rank d keeps the AdamW state of part d of
// every bucket, so a bucket's reduce-scatter can start as soon as its last
// gradient is in, under the rest of the backward, and each rank's summed
// part lands where its parameters are. Buckets run over the stage's flat
// buffer from its start, `bucketFloats` each (rounded up to a multiple of
// dp); the last is padded to a multiple of dp, which is all the padding the
// buffer gets. The moments hold a rank's parts one after another: part d
// of bucket b starts at moment bucketBegin(b) / dp, as every earlier bucket
// is full and a multiple of dp. One bucket is the layout of a shard per
// rank over the whole buffer; dp 1 is one part holding everything.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_SHARDLAYOUT_H
#define HYPIPE_RUNTIME_EXEC_SHARDLAYOUT_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace hypipe::rt {

class ShardLayout {
public:
  ShardLayout() = default;
  /// `numParams` floats over `dp` ranks, this one `rank`, in buckets of
  /// `bucketFloats` (at least 1).
  ShardLayout(int64_t numParams, int64_t dp, int64_t rank, int64_t bucketFloats)
      : dp(std::max<int64_t>(1, dp)), rank(rank) {
    bucket = roundUp(std::max<int64_t>(1, bucketFloats), this->dp);
    const int64_t full = numParams / bucket, rest = numParams % bucket;
    count = full + (rest > 0 ? 1 : 0);
    padded = full * bucket + roundUp(rest, this->dp);
  }

  /// Floats of the parameter and gradient buffers (the padding included).
  int64_t bufferFloats() const { return padded; }
  /// Floats of this rank's moments: its parts one after another.
  int64_t shardFloats() const { return padded / dp; }
  int64_t buckets() const { return count; }
  /// Where bucket b + 1 starts from bucket b's start.
  int64_t stride() const { return bucket; }
  int64_t bucketBegin(int64_t b) const { return b * bucket; }
  /// A bucket's floats, its padding included: a multiple of dp.
  int64_t bucketFloats(int64_t b) const {
    return std::min(bucket, padded - bucketBegin(b));
  }
  /// Each rank's part of bucket `b`.
  int64_t partFloats(int64_t b) const { return bucketFloats(b) / dp; }
  /// Where rank `r`'s part of bucket `b` starts in the buffer.
  int64_t partBegin(int64_t b, int64_t r) const {
    return bucketBegin(b) + r * partFloats(b);
  }
  /// This rank's part of bucket `b`: [partBegin, partBegin + partFloats).
  int64_t ownBegin(int64_t b) const { return partBegin(b, rank); }
  /// Where this rank's part of bucket `b` starts in its moments.
  int64_t momentBegin(int64_t b) const { return bucketBegin(b) / dp; }

  /// This rank's parts of a whole buffer (bufferFloats()), one after
  /// another, as its moments hold them.
  template <typename T>
  std::vector<T> shardOf(const std::vector<T> &whole) const {
    std::vector<T> out(static_cast<size_t>(shardFloats()));
    for (int64_t b = 0; b < count; ++b)
      std::copy_n(whole.begin() + ownBegin(b), partFloats(b),
                  out.begin() + momentBegin(b));
    return out;
  }
  /// The whole buffer from every rank's shard, rank after rank (a gather of
  /// shardFloats() from each).
  template <typename T>
  std::vector<T> wholeOf(const std::vector<T> &shards) const {
    std::vector<T> out(static_cast<size_t>(padded));
    for (int64_t r = 0; r < dp; ++r)
      for (int64_t b = 0; b < count; ++b)
        std::copy_n(shards.begin() + r * shardFloats() + momentBegin(b),
                    partFloats(b), out.begin() + partBegin(b, r));
    return out;
  }

private:
  static int64_t roundUp(int64_t n, int64_t m) { return (n + m - 1) / m * m; }
  int64_t dp = 1, rank = 0, bucket = 1, count = 0, padded = 0;
};

} // namespace hypipe::rt

#endif
