//===- Optimizer.h - AdamW over a rank's stages, sharded or not -----------===//
//
// AdamW with fp32 moments over the stages' fp32 main weights. With the
// distributed optimizer (Megatron's DistributedOptimizer) each data-parallel
// rank keeps the moments of its part of every gradient bucket
// (ShardLayout.h), updates that part, and all-gathers the updated bucket
// under the next one's update; a stage's next forward waits for it
// (finishParamSync, Megatron's overlapped parameter gather).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_OPTIMIZER_H
#define HYPIPE_RUNTIME_EXEC_OPTIMIZER_H

#include "runtime/exec/Stage.h"

#include <vector>

namespace hypipe::rt {

class Comm;

/// True when the AdamW state is sharded over data-parallel ranks.
bool usesDistributedOptimizer(const Artifact &artifact, const Comm &comm);

class AdamWOptimizer {
public:
  /// The optimizer of `stages` (this rank's); `sharded` as
  /// usesDistributedOptimizer.
  /// `scratch`: the scratch of the collectives over the replicas where
  /// experts spread over them (GradientSync::replicaScratch, which the
  /// update never uses at once with the gradients' sum).
  AdamWOptimizer(const Artifact &artifact, std::vector<Stage> &stages,
                 Device &device, Transport &transport, Comm &comm, bool sharded,
                 Buffer &scratch);
  AdamWOptimizer(const AdamWOptimizer &) = delete;
  AdamWOptimizer &operator=(const AdamWOptimizer &) = delete;

  bool sharded() const { return shardedState; }

  /// Zeroes the gradients for a step; a stage whose parameter gather
  /// borrowed its gradient buffer is zeroed when the gather is in.
  void zeroGrad();
  /// This rank's share of the squared gradient norm: each parameter once
  /// over the pipeline and the data-parallel replicas.
  double localGradNormSquared() const;
  /// The update of step `step` (1-based) at learning rate `lr`, the
  /// gradients scaled by `clipScale`; sharded, starts the gathers.
  void step(int64_t step, double lr, double clipScale);
  /// Waits for the all-gather of local stage `local`'s parameters after the
  /// last update (bf16: widens the gathered working copy, zeroes the
  /// gradients); every stage's without an argument.
  void finishParamSync(size_t local);
  void finishParamSync();
  /// Moves the parameter gathers in flight along.
  void progress();
  /// Sharded: starts the gather of bucket `bucket` of local stage `local`'s
  /// `buffer` (its parameters or gradients, fp32) from every rank's part
  /// into `into` (over an expert grid spread over replicas the replicas'
  /// part of it is gathered before this returns).
  void allGatherBucket(size_t local, float *buffer, int64_t bucket,
                       std::vector<Transport::Request> &into);

  /// A stage's fp32 parameters on the rank that writes the checkpoint
  /// (gathered from each rank's own parts when sharded); {} elsewhere.
  std::vector<float> fullParameters(size_t local);
  /// A stage's AdamW moments (exp_avg, exp_avg_sq) over all of its
  /// parameters, on the rank that writes the checkpoint (gathered when
  /// sharded).
  std::vector<float> fullExpAvg(size_t local);
  std::vector<float> fullExpAvgSq(size_t local);
  /// Restores a stage's parameters and moments from whole buffers
  /// (bufferFloats each); this rank keeps its shard of the moments.
  void loadState(size_t local, const std::vector<float> &params,
                 const std::vector<float> &expAvg,
                 const std::vector<float> &expAvgSq);

private:
  /// Segments whose moments sit at one offset: m[i - momentBase].
  struct Update {
    int64_t momentBase = 0;
    std::vector<ParamSegment> segments;
  };
  /// A stage's moments and what the optimizer goes over, fixed for the
  /// run: every parameter's part in the rank's part of each bucket (AdamW,
  /// by bucket), and those the gradient norm counts here (a tied copy only
  /// on its first stage).
  struct StageState {
    Buffer expAvg, expAvgSq;
    /// By bucket: the rank's dp part; sharded over an expert grid spread
    /// over replicas, its dense pieces, then its experts' (ExpertShardLayout).
    std::vector<std::vector<Update>> updated;
    std::vector<ParamSegment> normed;
    /// Where MoE layers' experts spread over data-parallel replicas, the
    /// experts' segments apart: every replica of the first tp-ep group
    /// counts its own.
    std::vector<ParamSegment> normedExperts;
    /// The all-gather of the updated parameters, while in flight.
    std::vector<Transport::Request> paramGather;
    /// Sharded bf16 runs: the gather in flight carries the bf16 working
    /// copy (in the gradient buffer), not the fp32 weights.
    bool gatheringWorking = false;
    /// Sharded over an expert grid spread over replicas (else unused).
    ExpertShardLayout experts;
  };
  void planSegments(const Artifact &artifact);
  /// Sharded bf16 runs: starts the all-gather of the updated parameters as
  /// bf16 (Megatron gathers its bf16 model parameters): half the bytes of
  /// fp32, and every rank's fp32 main weights stay current in its own
  /// block only.
  void gatherWorkingCopy(size_t local, int64_t bucket);
  /// The whole of a stage's buffer on the rank that writes the checkpoint,
  /// from every rank's `mine` (its shard); {} elsewhere (collective over
  /// the data-parallel group).
  std::vector<float> gatherShards(size_t local, const std::vector<float> &mine);
  std::vector<float> fullMoment(size_t local, const Buffer &moment);
  /// The same over an expert grid spread over replicas: whole on every
  /// rank of the first expert-data-parallel place (its experts; the dense
  /// floats on dp rank 0 only), as the checkpoint's tp-ep gather wants.
  std::vector<float> fullExpertMoment(size_t local,
                                      const std::vector<float> &mine);

  const Artifact &artifact;
  std::vector<Stage> &stages;
  Device &device;
  Transport &transport;
  Comm &comm;
  bool shardedState;
  std::vector<StageState> state; ///< by local stage
  Buffer &scratch;
};

} // namespace hypipe::rt

#endif
