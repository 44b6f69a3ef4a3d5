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
#ifndef HYPIPE_CORE_MODEL_SHARDLAYOUT_H
#define HYPIPE_CORE_MODEL_SHARDLAYOUT_H

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

/// The distributed optimizer where MoE layers' experts spread over m data-
/// parallel replicas (an expert grid with etp x ep = m tp): as Megatron-LM
/// shards the experts' state over the expert-data-parallel group and the
/// rest over the data-parallel one. The buffer keeps its layout -- each
/// expert's slot is the same on every rank, holding different experts on
/// the m replicas -- and its buckets are the data-parallel ShardLayout's.
/// With dp rank d = e m + j (e the expert-data-parallel rank, j the place
/// among the replicas), bucket b's expert-data-parallel part e is the m dp
/// parts from e m: rank d updates the experts' floats of that part, which
/// the ranks of its expert-data-parallel group (every one at place j, so
/// holding the same experts) sum and gather, and the other (dense) floats
/// of its dp part d, which lies inside it and whose sum and gather over
/// the m replicas follow. A rank's moments hold those floats only, piece
/// after piece: a dp-th of the dense floats and an edp-th of its experts'.
class ExpertShardLayout {
public:
  /// A run's part inside this rank's part of a bucket, and where its
  /// moments start.
  struct Piece {
    int64_t begin = 0, end = 0, moment = 0;
  };

  ExpertShardLayout() = default;
  /// Over `dense` (this rank's dp layout), for `experts` (the buffer's
  /// expert slots, sorted and disjoint), m `replicas`, this rank's place
  /// `e` among the expert-data-parallel `edp` ranks.
  ExpertShardLayout(const ShardLayout &dense,
                    std::vector<std::pair<int64_t, int64_t>> experts,
                    int64_t replicas, int64_t edp, int64_t e)
      : replicaCount(replicas),
        part(dense.bufferFloats(), edp, e, dense.stride()),
        runs(std::move(experts)) {
    // Each run's part becomes a piece of `pieces`, its moments next.
    auto into = [this](std::vector<Piece> &pieces) {
      return [this, &pieces](int64_t a, int64_t z) {
        pieces.push_back({a, z, momentFloats});
        momentFloats += z - a;
      };
    };
    for (int64_t b = 0; b < part.buckets(); ++b) {
      const int64_t own = dense.ownBegin(b), lo = part.ownBegin(b);
      forEachDenseRun(own, own + dense.partFloats(b),
                      into(densePieces.emplace_back()));
      forEachExpertRun(lo, lo + part.partFloats(b),
                       into(expertPieces.emplace_back()));
    }
  }

  int64_t replicas() const { return replicaCount; }
  /// The sum and gather over the replicas go through a scratch buffer in
  /// chunks: `chunk()` floats of each of the m dp parts at a time, at most
  /// kScratchFloats in all (setScratchCap: another cap), so the scratch
  /// does not grow with the bucket.
  static constexpr int64_t kScratchFloats = int64_t(1) << 18;
  void setScratchCap(int64_t floats) {
    scratchCap = std::max<int64_t>(1, floats);
  }
  int64_t chunk() const {
    if (part.buckets() == 0)
      return 1;
    const int64_t dpPart = part.partFloats(0) / replicaCount;
    return std::max<int64_t>(1, std::min(dpPart, scratchCap / replicaCount));
  }
  int64_t scratchFloats() const {
    return part.buckets() == 0 ? 0 : replicaCount * chunk();
  }
  /// The expert-data-parallel parts: part(b) of bucket b is partFloats(b)
  /// from ownBegin(b), m dp parts.
  const ShardLayout &expertDpParts() const { return part; }
  /// Floats of a rank's moments: its pieces'.
  int64_t momentsFloats() const { return momentFloats; }
  /// Bucket b's dense runs in this rank's dp part, and its expert runs in
  /// its expert-data-parallel part.
  const std::vector<Piece> &densePiecesOf(int64_t bucket) const {
    return densePieces.at(size_t(bucket));
  }
  const std::vector<Piece> &expertPiecesOf(int64_t bucket) const {
    return expertPieces.at(size_t(bucket));
  }

  /// Calls `f(a, z)` for each expert run's part of [lo, hi), in order.
  template <typename F>
  void forEachExpertRun(int64_t lo, int64_t hi, F f) const {
    for (const auto &[a, z] : runs)
      if (std::max(a, lo) < std::min(z, hi))
        f(std::max(a, lo), std::min(z, hi));
  }
  /// Calls `f(a, z)` for each part of [lo, hi) outside the expert runs.
  template <typename F>
  void forEachDenseRun(int64_t lo, int64_t hi, F f) const {
    int64_t at = lo;
    forEachExpertRun(lo, hi, [&](int64_t a, int64_t z) {
      if (at < a)
        f(at, a);
      at = z;
    });
    if (at < hi)
      f(at, hi);
  }

private:
  int64_t replicaCount = 1, scratchCap = kScratchFloats;
  ShardLayout part;
  std::vector<std::pair<int64_t, int64_t>> runs;
  std::vector<std::vector<Piece>> densePieces, expertPieces; ///< by bucket
  int64_t momentFloats = 0;
};

} // namespace hypipe::rt

#endif
