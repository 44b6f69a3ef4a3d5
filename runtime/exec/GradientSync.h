//===- GradientSync.h - data-parallel gradient reduction in buckets -------===//
//
// Megatron's bucket groups (param_and_grad_buffer.py): each local stage's
// gradient buffer is cut into buckets (GradientBuckets.h; with the
// distributed optimizer the buckets of ShardLayout.h), and a bucket's
// data-parallel all-reduce (reduce-scatter when sharded) starts as soon as
// it is final: in the stage's last backward, or all at once at a REDUCE_GRAD
// action (startGradSync). finishGradSync waits for them; finalizeModelGrads
// then sums the gradients of tied parameters (the embedding shared with the
// output layer) over their copies, as Megatron's finalize_model_grads does.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_GRADIENTSYNC_H
#define HYPIPE_RUNTIME_EXEC_GRADIENTSYNC_H

#include "core/model/CostModel.h"
#include "runtime/exec/Stage.h"

#include <map>
#include <string>
#include <vector>

namespace hypipe::rt {

class Comm;

/// Gradients are reduced over data parallelism in buckets of at most this
/// many floats (16 MiB; GradientBuckets.h, ShardLayout.h).
inline constexpr int64_t kDefaultBucketFloats = kDefaultGradientBucketFloats;

/// The stages (over all ranks, in order) that hold each parameter name.
std::map<std::string, std::vector<int64_t>>
stagesHolding(const Artifact &artifact);

/// Sharded runs: the all-gather of bucket `bucket` of `buffer` (a stage's
/// parameters or gradients, fp32) from every rank's part of it.
Transport::Request allGatherBucket(Transport &transport,
                                   const ShardLayout &shard, float *buffer,
                                   int64_t bucket);

/// The slots of the experts this rank holds in stage `s`'s buffer, sorted
/// and merged where they touch (the other expert-parallel ranks' experts'
/// entries name the same slots); none unless MoE layers' experts spread
/// over data-parallel replicas.
std::vector<std::pair<int64_t, int64_t>> expertSlotsOf(const Stage &s,
                                                       const Comm &comm);

/// Sharded runs whose MoE layers' experts spread over data-parallel
/// replicas: stage `s`'s ExpertShardLayout, every stage's (one without
/// experts has no pieces). Otherwise one of a single replica: unused.
ExpertShardLayout expertShardLayoutOf(const Stage &s, const Comm &comm,
                                      bool sharded);

/// Over such a grid: bucket `bucket` of `buffer` (stage `s`'s parameters or
/// gradients, fp32) reduce-scattered or all-gathered (`kind`) over the m
/// replicas in the rank's expert-data-parallel part, through `scratch`
/// (ExpertShardLayout::scratchFloats, chunk by chunk), waited for; only the
/// dense floats take the result (of the rank's dp part after a reduce-scatter,
/// of the whole part after a gather), the experts' are the group's own.
void overReplicas(Transport &transport, Device &device, const Stage &s,
                  const ExpertShardLayout &x, CollectiveKind kind,
                  float *buffer, int64_t bucket, float *scratch);

class GradientSync {
public:
  /// Sets up the reduction of `stages` (this rank's): collective, as it
  /// creates the groups that sum tied parameters across pipeline ranks.
  /// `sharded`: the distributed optimizer's reduce-scatter into each
  /// rank's parts instead of an all-reduce in buckets of `bucketFloats`.
  GradientSync(const Artifact &artifact, std::vector<Stage> &stages,
               Device &device, Transport &transport, Comm &comm, bool sharded,
               int64_t bucketFloats);
  GradientSync(const GradientSync &) = delete;
  GradientSync &operator=(const GradientSync &) = delete;

  /// A step begins: no bucket started yet.
  void startStep();
  /// Starts the reduction of every bucket of local stage `local` (a
  /// REDUCE_GRAD, or a last backward that was not bucketed).
  void startGradSync(size_t local);
  /// For the weight-gradient pass of local stage `local`'s last backward:
  /// each call starts the buckets it completes (Megatron's grad-ready
  /// hooks); gradsReadyAfterPass starts those no call writes.
  WeightGradientHook gradReadyHook(size_t local);
  void gradsReadyAfterPass(size_t local);
  /// Moves the reductions in flight along (MPI progresses on calls).
  void progress();
  /// Waits for every bucket started this step.
  void finishGradSync();
  /// Sums tied parameters' gradients over their copies (on this rank, then
  /// across pipeline ranks) and, sharded, reduce-scatters the buckets that
  /// waited for that sum.
  void finalizeModelGrads();

  /// The scratch of the sums over the replicas where MoE layers'
  /// experts spread over replicas, sharded (ExpertShardLayout); the
  /// optimizer borrows it for its gathers.
  Buffer &replicaScratch() { return scratch; }

  /// Buckets started inside a weight-gradient pass, before its last call.
  int64_t bucketsInBackward() const { return startedInBackward; }
  /// When this step's first bucket started and the rank saw the last one
  /// done (steadySeconds); begin < 0 when none started.
  double reductionBegin() const { return begin; }
  double reductionEnd() const { return end; }

private:
  /// A stage's buckets: which wait for the tied sum (sharded), and which are
  /// final after each weight-gradient call.
  struct BucketGroup {
    GradientSync *sync;
    size_t local;
    std::vector<bool> tiedBuckets;
    std::vector<std::vector<int64_t>> bucketsAfterLayer;
    int64_t bucketsFor = 0;
    bool waitsForTiedSum(int64_t bucket) const {
      return size_t(bucket) < tiedBuckets.size() && tiedBuckets[size_t(bucket)];
    }
  };
  /// Tied parameters with copies on other pipeline ranks and the group that
  /// sums them.
  struct TiedGroup {
    std::string name;
    Transport::Group group;
  };

  void markTied(BucketGroup &g, const ParamEntry &p);
  void setUpTiedParameters(const Artifact &artifact);
  static void weightGradientDone(void *context, int32_t layer);
  /// Starts the buckets final after `layer`'s call (layers.size(): those no
  /// call writes) and moves the reductions along; returns how many started.
  int64_t startBuckets(size_t local, size_t layer);
  /// Starts one bucket's reduction; false for one that waits for the tied
  /// sum (sharded).
  bool reduceBucket(size_t local, int64_t bucket);
  Transport::Request scatterBucket(Stage &s, int64_t bucket);
  /// Over an expert grid spread over replicas (ExpertShardLayout): starts
  /// bucket `bucket`'s reduce-scatter over the expert-data-parallel group
  /// into `into`; sumOverReplicas does the rest once it is in.
  void scatterExpertBucket(size_t local, int64_t bucket,
                           std::vector<Transport::Request> &into);
  /// The dense floats of each pending bucket's dp part summed over the m
  /// replicas (a reduce-scatter of the expert-data-parallel part, through
  /// the scratch buffer, so the experts' sums stay as they are).
  void sumOverReplicas();
  int64_t bucketStride(const Stage &s) const;
  void reduceTiedGradients();
  void finishShardedReduction();
  void started();

  std::vector<Stage> &stages;
  Device &device;
  Transport &transport;
  Comm &comm;
  bool sharded;
  int64_t bucketFloats;
  std::vector<BucketGroup> groups; ///< by local stage
  /// Where MoE layers' experts spread over data-parallel replicas: each
  /// local stage's expert slots, [begin, end) in order, summed over the
  /// expert-data-parallel group instead (Megatron-LM's expert_dp group).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> expertRanges;
  /// Sharded, over such a grid: each local stage's layout, the buckets
  /// waiting for their sum over the replicas, and the scratch of the
  /// collectives over the replicas (ExpertShardLayout::scratchFloats).
  std::vector<ExpertShardLayout> expertShards;
  std::vector<std::pair<size_t, int64_t>> replicaSums;
  Buffer scratch;
  /// Parameters that appear in more than one local stage (tied embedding):
  /// (local stage, offset) of each copy, by name.
  std::map<std::string, std::vector<std::pair<size_t, int64_t>>> copies;
  std::vector<TiedGroup> tiedGroups;
  std::vector<Transport::Request> requests;
  int64_t startedInBackward = 0;
  double begin = -1, end = 0;
};

} // namespace hypipe::rt

#endif
