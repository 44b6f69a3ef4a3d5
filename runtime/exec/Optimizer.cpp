//===- Optimizer.cpp - AdamW over a rank's stages, sharded or not ---------===//

#include "runtime/exec/Optimizer.h"

#include "runtime/comm/Comm.h"
#include "runtime/exec/GradientSync.h"
#include "runtime/kernels/cpu/Profile.h"

#include <cmath>
#include <set>

namespace hypipe::rt {

bool usesDistributedOptimizer(const Artifact &artifact, const Comm &comm) {
  return artifact.distributedOptimizer && comm.dpSize() > 1;
}

AdamWOptimizer::AdamWOptimizer(const Artifact &artifact,
                               std::vector<Stage> &stages, Device &device,
                               Transport &transport, Comm &comm, bool sharded,
                               Buffer &scratch)
    : artifact(artifact), stages(stages), device(device), transport(transport),
      comm(comm), shardedState(sharded), scratch(scratch) {
  for (const Stage &s : stages) {
    StageState st;
    st.experts = expertShardLayoutOf(s, comm, sharded);
    const int64_t floats = st.experts.replicas() > 1
                               ? st.experts.momentsFloats()
                               : s.shard().shardFloats();
    st.expAvg = Buffer(device, floats);
    st.expAvgSq = Buffer(device, floats);
    state.push_back(std::move(st));
  }
  planSegments(artifact);
}

void AdamWOptimizer::planSegments(const Artifact &artifact) {
  // First stage (over all ranks) of each parameter held by several stages.
  std::map<std::string, int64_t> firstStage;
  for (const auto &[name, holders] : stagesHolding(artifact))
    if (holders.size() > 1)
      firstStage[name] = holders.front();
  // Each parameter once over the pipeline in the norm: a tied copy counts
  // only on the first stage that holds it.
  std::set<std::string> counted;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage &s = stages[i];
    const ShardLayout &shard = s.shard();
    StageState &st = state[i];
    // By bucket: the rank's part, at its moments' place; over an expert
    // grid spread over replicas, sharded, each piece (ExpertShardLayout),
    // dense ones first.
    const ExpertShardLayout &x = st.experts;
    st.updated.assign(size_t(shard.buckets()), {});
    for (int64_t b = 0; b < shard.buckets(); ++b) {
      std::vector<Update> &u = st.updated[size_t(b)];
      if (x.replicas() == 1) {
        u.push_back({shard.ownBegin(b) - shard.momentBegin(b), {}});
        continue;
      }
      for (const ExpertShardLayout::Piece &piece : x.densePiecesOf(b))
        u.push_back({piece.begin - piece.moment, {}});
      for (const ExpertShardLayout::Piece &piece : x.expertPiecesOf(b))
        u.push_back({piece.begin - piece.moment, {}});
    }
    for (const ParamEntry &p : s.entry().params) {
      // Another expert-parallel rank's expert: its slot is this rank's
      // own expert's, updated (and counted) once, by that one's entry.
      if (!comm.holds(p))
        continue;
      // Which copy counts is decided before the shard cuts it: the first
      // copy's part, even where this rank's shard holds none of it.
      // A parameter every tensor-parallel rank holds whole counts on tp
      // rank 0; a split one's shards on every rank.
      auto it = firstStage.find(p.name);
      const bool counts =
          (it == firstStage.end() ||
           (it->second == s.index() && counted.insert(p.name).second)) &&
          (p.split != Split::None || comm.tpRank() == 0);
      const bool expert = p.expertRank >= 0 && comm.expertReplicas() > 1;
      auto add = [&](int64_t b, size_t update, int64_t begin, int64_t end) {
        const int64_t lo = std::max(p.offset, begin),
                      hi = std::min(p.offset + p.numel, end);
        if (lo >= hi)
          return;
        st.updated[size_t(b)][update].segments.push_back(
            {lo, hi, p.weightDecay});
        if (counts && expert)
          st.normedExperts.push_back({lo, hi, false});
        else if (counts)
          st.normed.push_back({lo, hi, false});
      };
      for (int64_t b = 0; b < shard.buckets(); ++b) {
        if (x.replicas() == 1) {
          add(b, 0, shard.ownBegin(b), shard.ownBegin(b) + shard.partFloats(b));
          continue;
        }
        // A piece's update follows the dense pieces before it.
        const auto &dense = x.densePiecesOf(b);
        const auto &pieces = expert ? x.expertPiecesOf(b) : dense;
        const size_t first = expert ? dense.size() : 0;
        for (size_t k = 0; k < pieces.size(); ++k)
          add(b, first + k, pieces[k].begin, pieces[k].end);
      }
    }
  }
}

void AdamWOptimizer::zeroGrad() {
  for (size_t i = 0; i < stages.size(); ++i)
    if (!state[i].gatheringWorking) // zeroed once its gather is in
      device.zero(stages[i].grads().data(), stages[i].grads().size());
}

void AdamWOptimizer::finishParamSync(size_t local) {
  StageState &st = state[local];
  Stage &s = stages[local];
  if (!st.paramGather.empty())
    transport.waitAll(st.paramGather);
  if (!st.gatheringWorking)
    return;
  // Every rank's bf16 block, widened into the working copy; then the
  // gradient buffer the gather borrowed is zeroed for the step.
  Buffer &working = s.workingCopy();
  device.copy(working.data(), s.grads().data(), 2 * working.size());
  device.unpackBf16(working.data(), working.size());
  device.zero(s.grads().data(), s.grads().size());
  st.gatheringWorking = false;
}

void AdamWOptimizer::finishParamSync() {
  for (size_t i = 0; i < stages.size(); ++i)
    finishParamSync(i);
}

void AdamWOptimizer::progress() {
  for (StageState &st : state)
    transport.testAll(st.paramGather);
}

double AdamWOptimizer::localGradNormSquared() const {
  // Each parameter once over the pipeline: a tied copy counts only on the
  // first stage that holds it. Data-parallel replicas of a reduced
  // gradient count once: on replica 0, or on the rank whose shard holds it.
  // Experts spread over data-parallel replicas: each expert on the replica
  // of the first tp-ep group that holds it.
  if (!shardedState && comm.expertDpRank() != 0)
    return 0;
  cpu::ProfileScope scope(cpu::KernelClass::Optimizer);
  double sq = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (shardedState || comm.dpRank() == 0)
      sq = device.sumSquares(stages[i].grads().data(), state[i].normed, sq);
    sq =
        device.sumSquares(stages[i].grads().data(), state[i].normedExperts, sq);
  }
  return sq;
}

void AdamWOptimizer::step(int64_t step, double lr, double clipScale) {
  cpu::ProfileScope scope(cpu::KernelClass::Optimizer);
  const TrainingConfig &t = artifact.training;
  const double b1 = t.beta1, b2 = t.beta2;
  const double c1 = 1.0 - std::pow(b1, double(step)),
               c2 = 1.0 - std::pow(b2, double(step));
  const AdamWStep a{
      lr, b1, b2, t.eps, c1, c2, float(1.0 - lr * t.weightDecay), clipScale};
  for (size_t i = 0; i < stages.size(); ++i) {
    Stage &s = stages[i];
    StageState &st = state[i];
    for (int64_t b = 0; b < s.shard().buckets(); ++b) {
      // The moments hold the rank's part of each bucket one after another
      // (all of the stage when the state is not sharded), then its experts'
      // pieces.
      for (const Update &u : st.updated[size_t(b)])
        if (!u.segments.empty())
          device.adamw(a, u.segments, s.params().data(), s.grads().data(),
                       st.expAvg.data(), st.expAvgSq.data(), u.momentBase);
      // Every replica gets the updated bucket, under the next bucket's
      // update; the stage's next forward waits for them, so the gathers
      // overlap what runs before it. (Over an expert grid spread over
      // replicas the fp32 weights travel: the working copy is made from
      // them.)
      if (shardedState && s.workingCopy().size() && st.experts.replicas() == 1)
        gatherWorkingCopy(i, b);
      else if (shardedState)
        allGatherBucket(i, s.params().data(), b, st.paramGather);
    }
  }
  for (size_t i = 0; i < stages.size(); ++i) {
    stages[i].mainWeightsChanged();
    // A gathered working copy is made from the new weights already.
    if (state[i].gatheringWorking)
      stages[i].workingCopyIsCurrent();
  }
}

void AdamWOptimizer::allGatherBucket(size_t local, float *buffer,
                                     int64_t bucket,
                                     std::vector<Transport::Request> &into) {
  const ShardLayout &dp = stages[local].shard();
  const ExpertShardLayout &x = state[local].experts;
  if (x.replicas() == 1) {
    into.push_back(rt::allGatherBucket(transport, dp, buffer, bucket));
    return;
  }
  // The replicas' dp parts of this rank's expert-data-parallel part, their
  // dense floats taken (its experts' floats it updated itself); then that
  // part to the expert-data-parallel group, whose ranks hold its experts.
  overReplicas(transport, device, stages[local], x, CollectiveKind::AllGather,
               buffer, bucket, scratch.data());
  const ShardLayout &parts = x.expertDpParts();
  if (comm.expertDpSize() > 1)
    into.push_back(transport.iexpertShard(
        Transport::ExpertShardGroup::ExpertDp, CollectiveKind::AllGather,
        buffer + parts.bucketBegin(bucket), parts.partFloats(bucket),
        DType::F32));
}

void AdamWOptimizer::gatherWorkingCopy(size_t local, int64_t bucket) {
  // This rank's part of the bucket as bf16 (rounded as the stage rounds its
  // working copy), put at its place in the gradient buffer read as bf16:
  // float i's bf16 copy at byte 2i. The gradients are spent until the next
  // step, which zeroes them only after the gathers (finishParamSync), and a
  // bucket's bf16 image lies within the buckets up to its own, so the later
  // buckets' gradients, still to be read by their update, are intact.
  Stage &s = stages[local];
  const int64_t at = s.shard().ownBegin(bucket),
                n = s.shard().partFloats(bucket);
  float *mine = s.workingCopy().data() + at;
  device.copy(mine, s.params().data() + at, int64_t(sizeof(float)) * n);
  device.packBf16(mine, n);
  auto *bytes = reinterpret_cast<char *>(s.grads().data());
  device.copy(bytes + 2 * at, mine, 2 * n);
  state[local].paramGather.push_back(transport.iallgatherDp(
      bytes + 2 * s.shard().bucketBegin(bucket), n, DType::BF16));
  state[local].gatheringWorking = true;
}

std::vector<float> AdamWOptimizer::fullParameters(size_t local) {
  Stage &s = stages[local];
  std::vector<float> params = s.params().download();
  // Whole on every rank unsharded, and sharded over an expert grid spread
  // over replicas (its gathers leave them so); each replica of the first
  // tp-ep group holds some of the experts.
  if (!shardedState || state[local].experts.replicas() > 1)
    return comm.expertDpRank() == 0 ? params : std::vector<float>();
  // Each rank's fp32 main weights are current in its own parts (a bf16 run
  // gathers only the bf16 working copy).
  return gatherShards(local, s.shard().shardOf(params));
}

std::vector<float>
AdamWOptimizer::gatherShards(size_t local, const std::vector<float> &mine) {
  const ShardLayout &shard = stages[local].shard();
  const int64_t n = shard.shardFloats();
  std::vector<float> all(comm.dpRank() == 0 ? size_t(n * comm.dpSize()) : 0);
  comm.gatherDp(mine.data(), n, all.data());
  return comm.dpRank() == 0 ? shard.wholeOf(all) : std::vector<float>();
}

std::vector<float> AdamWOptimizer::fullMoment(size_t local,
                                              const Buffer &moment) {
  std::vector<float> shard = moment.download();
  if (!shardedState)
    return shard;
  if (state[local].experts.replicas() > 1)
    return fullExpertMoment(local, shard);
  return gatherShards(local, shard);
}

std::vector<float>
AdamWOptimizer::fullExpertMoment(size_t local, const std::vector<float> &mine) {
  const ShardLayout &dp = stages[local].shard();
  const ExpertShardLayout &x = state[local].experts;
  const ShardLayout &parts = x.expertDpParts();
  // A layout's shard (each bucket's part one after another) with `pieces`'
  // moments at their places in it.
  auto image = [&](const ShardLayout &l, auto piecesOf) {
    std::vector<float> out(size_t(l.shardFloats()), 0.0f);
    for (int64_t b = 0; b < l.buckets(); ++b)
      for (const ExpertShardLayout::Piece &piece : piecesOf(b))
        std::copy_n(mine.begin() + piece.moment, piece.end - piece.begin,
                    out.begin() + l.momentBegin(b) +
                        (piece.begin - l.ownBegin(b)));
    return out;
  };
  // The dense floats from every dp shard, on dp rank 0.
  std::vector<float> whole = gatherShards(
      local,
      image(
          dp, [&](int64_t b) -> const auto & { return x.densePiecesOf(b); }));
  // The experts' from every rank of the expert-data-parallel group, on its
  // rank 0.
  const std::vector<float> experts = image(
      parts, [&](int64_t b) -> const auto & { return x.expertPiecesOf(b); });
  std::vector<float> all(comm.expertDpRank() == 0
                             ? size_t(parts.shardFloats() * comm.expertDpSize())
                             : 0);
  comm.gatherExpertDp(experts.data(), parts.shardFloats(), all.data());
  if (comm.expertDpRank() != 0)
    return {};
  std::vector<float> gathered = parts.wholeOf(all);
  if (whole.empty())
    return gathered; // the dense floats are dp rank 0's to write
  x.forEachExpertRun(0, dp.bufferFloats(), [&](int64_t a, int64_t z) {
    std::copy(gathered.begin() + a, gathered.begin() + z, whole.begin() + a);
  });
  return whole;
}

std::vector<float> AdamWOptimizer::fullExpAvg(size_t local) {
  return fullMoment(local, state[local].expAvg);
}

std::vector<float> AdamWOptimizer::fullExpAvgSq(size_t local) {
  return fullMoment(local, state[local].expAvgSq);
}

void AdamWOptimizer::loadState(size_t local, const std::vector<float> &params,
                               const std::vector<float> &expAvg,
                               const std::vector<float> &expAvgSq) {
  Stage &s = stages[local];
  const ShardLayout &shard = s.shard();
  const ExpertShardLayout &x = state[local].experts;
  s.params().upload(params.data(), s.params().size());
  // The rank's dp shard, then (over an expert grid spread over replicas)
  // its experts' pieces.
  auto mine = [&](const std::vector<float> &whole) {
    if (x.replicas() == 1)
      return shard.shardOf(whole);
    std::vector<float> out(size_t(x.momentsFloats()));
    for (int64_t b = 0; b < shard.buckets(); ++b)
      for (const auto *pieces : {&x.densePiecesOf(b), &x.expertPiecesOf(b)})
        for (const ExpertShardLayout::Piece &piece : *pieces)
          std::copy(whole.begin() + piece.begin, whole.begin() + piece.end,
                    out.begin() + piece.moment);
    return out;
  };
  state[local].expAvg.upload(mine(expAvg).data(), state[local].expAvg.size());
  state[local].expAvgSq.upload(mine(expAvgSq).data(),
                               state[local].expAvgSq.size());
  s.mainWeightsChanged();
}

} // namespace hypipe::rt
