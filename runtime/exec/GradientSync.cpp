//===- GradientSync.cpp - data-parallel gradient reduction in buckets -----===//

#include "runtime/exec/GradientSync.h"

#include "runtime/comm/Comm.h"
#include "runtime/exec/Clock.h"
#include "runtime/exec/GradientBuckets.h"

#include <algorithm>
#include <cstdlib>

namespace hypipe::rt {

std::map<std::string, std::vector<int64_t>>
stagesHolding(const Artifact &artifact) {
  std::map<std::string, std::vector<int64_t>> holders;
  for (const StageEntry &e : artifact.stages)
    for (const ParamEntry &p : e.params)
      holders[p.name].push_back(e.index);
  return holders;
}

Transport::Request allGatherBucket(Transport &transport,
                                   const ShardLayout &shard, float *buffer,
                                   int64_t bucket) {
  return transport.iallgatherDp(buffer + shard.bucketBegin(bucket),
                                shard.partFloats(bucket), DType::F32);
}

std::vector<std::pair<int64_t, int64_t>> expertSlotsOf(const Stage &s,
                                                       const Comm &comm) {
  std::vector<std::pair<int64_t, int64_t>> slots;
  if (comm.expertReplicas() == 1)
    return slots;
  for (const ParamEntry &p : s.entry().params)
    if (p.expertRank >= 0 && comm.holds(p))
      slots.push_back({p.offset, p.offset + p.numel});
  std::sort(slots.begin(), slots.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto &r : slots)
    if (!merged.empty() && merged.back().second >= r.first)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  return merged;
}

ExpertShardLayout expertShardLayoutOf(const Stage &s, const Comm &comm,
                                      bool sharded) {
  if (!sharded || comm.expertReplicas() == 1)
    return ExpertShardLayout();
  ExpertShardLayout x(s.shard(), expertSlotsOf(s, comm), comm.expertReplicas(),
                      comm.expertDpSize(), comm.expertDpRank());
  // Tests cut the collectives over the replicas into small chunks with it.
  if (const char *cap = std::getenv("HYPIPE_REPLICA_SCRATCH_FLOATS"))
    x.setScratchCap(std::atoll(cap));
  return x;
}

void overReplicas(Transport &transport, Device &device, const Stage &s,
                  const ExpertShardLayout &x, CollectiveKind kind,
                  float *buffer, int64_t bucket, float *scratch) {
  const ShardLayout &parts = x.expertDpParts(), &dp = s.shard();
  const int64_t at = parts.ownBegin(bucket), part = dp.partFloats(bucket),
                m = x.replicas(), own = dp.ownBegin(bucket) - at;
  const bool scattered = kind == CollectiveKind::ReduceScatter;
  constexpr int64_t f = int64_t(sizeof(float));
  // Chunk by chunk: `n` floats from `lo` of each of the m dp parts, side by
  // side in the scratch (all of them summed; this rank's own gathered).
  for (int64_t lo = 0; lo < part; lo += x.chunk()) {
    const int64_t n = std::min(x.chunk(), part - lo);
    for (int64_t i = 0; i < m; ++i)
      if (scattered || i * part == own)
        device.copy(scratch + i * n, buffer + at + i * part + lo, f * n);
    std::vector<Transport::Request> r{transport.iexpertShard(
        Transport::ExpertShardGroup::Replicas, kind, scratch, n, DType::F32)};
    transport.waitAll(r);
    // A reduce-scatter's sums are this rank's dp part's (at its place among
    // the replicas); a gather brings every part's. Only the dense floats
    // take them.
    for (int64_t i = 0; i < m; ++i) {
      if (scattered && i * part != own)
        continue;
      const int64_t from = at + i * part + lo;
      x.forEachDenseRun(from, from + n, [&](int64_t a, int64_t z) {
        device.copy(buffer + a, scratch + i * n + (a - from), f * (z - a));
      });
    }
  }
}

GradientSync::GradientSync(const Artifact &artifact, std::vector<Stage> &stages,
                           Device &device, Transport &transport, Comm &comm,
                           bool sharded, int64_t bucketFloats)
    : stages(stages), device(device), transport(transport), comm(comm),
      sharded(sharded), bucketFloats(bucketFloats) {
  for (size_t i = 0; i < stages.size(); ++i) {
    groups.push_back({this, i, {}, {}, 0});
    for (const ParamEntry &p : stages[i].entry().params)
      copies[p.name].push_back({i, p.offset});
    expertRanges.push_back(expertSlotsOf(stages[i], comm));
    expertShards.push_back(expertShardLayoutOf(stages[i], comm, sharded));
    if (expertShards.back().replicas() > 1)
      scratch = Buffer(device, std::max(scratch.size(),
                                        expertShards.back().scratchFloats()));
  }
  for (auto it = copies.begin(); it != copies.end();)
    it = it->second.size() > 1 ? std::next(it) : copies.erase(it);
  setUpTiedParameters(artifact);
}

void GradientSync::markTied(BucketGroup &g, const ParamEntry &p) {
  const ShardLayout &shard = stages[g.local].shard();
  g.tiedBuckets.resize(size_t(shard.buckets()), false);
  for (int64_t b = p.offset / shard.stride();
       b < shard.buckets() && shard.bucketBegin(b) < p.offset + p.numel; ++b)
    g.tiedBuckets[size_t(b)] = true;
}

void GradientSync::setUpTiedParameters(const Artifact &artifact) {
  // Parameters held by several pipeline ranks (the tied embedding between
  // first and last stage): every rank creates the groups in name order.
  for (auto &[name, stageIndices] : stagesHolding(artifact)) {
    std::vector<int64_t> ranks;
    for (int64_t st : stageIndices)
      ranks.push_back(artifact.stages[st].ppRank);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    bool local = false;
    for (BucketGroup &g : groups)
      for (const ParamEntry &p : stages[g.local].entry().params)
        if (p.name == name) {
          local = true;
          if (stageIndices.size() > 1)
            markTied(g, p);
        }
    if (ranks.size() < 2)
      continue;
    Transport::Group group = transport.makeGroup(ranks);
    if (local)
      tiedGroups.push_back({name, group});
  }
}

void GradientSync::startStep() {
  begin = -1;
  startedInBackward = 0;
}

void GradientSync::started() {
  if (begin < 0)
    begin = steadySeconds();
}

int64_t GradientSync::bucketStride(const Stage &s) const {
  return sharded ? s.shard().stride() : bucketFloats;
}

void GradientSync::startGradSync(size_t local) {
  if (comm.dpSize() == 1)
    return;
  const Stage &s = stages[local];
  const int64_t stride = bucketStride(s);
  for (int64_t b = 0; b * stride < s.grads().size(); ++b)
    reduceBucket(local, b);
}

Transport::Request GradientSync::scatterBucket(Stage &s, int64_t bucket) {
  return transport.ireduceScatterDp(s.grads().data() +
                                        s.shard().bucketBegin(bucket),
                                    s.shard().partFloats(bucket), DType::F32);
}

bool GradientSync::reduceBucket(size_t local, int64_t bucket) {
  if (sharded && groups[local].waitsForTiedSum(bucket))
    return false;
  started();
  Stage &s = stages[local];
  if (sharded && expertShards[local].replicas() > 1) {
    scatterExpertBucket(local, bucket, requests);
    return true;
  }
  if (sharded) {
    requests.push_back(scatterBucket(s, bucket));
    return true;
  }
  const int64_t at = bucket * bucketFloats,
                end =
                    at + std::min<int64_t>(bucketFloats, s.grads().size() - at);
  // The experts' slots over the expert-data-parallel group, the rest over
  // the data-parallel one.
  float *grads = s.grads().data();
  int64_t from = at;
  for (const auto &[lo, hi] : expertRanges[local]) {
    const int64_t a = std::max(lo, at), b = std::min(hi, end);
    if (a >= b)
      continue;
    if (from < a)
      requests.push_back(
          transport.iallreduceDp(grads + from, a - from, DType::F32));
    if (comm.expertDpSize() > 1)
      requests.push_back(
          transport.iallreduceExpertDp(grads + a, b - a, DType::F32));
    from = b;
  }
  if (from < end)
    requests.push_back(
        transport.iallreduceDp(grads + from, end - from, DType::F32));
  return true;
}

void GradientSync::scatterExpertBucket(size_t local, int64_t bucket,
                                       std::vector<Transport::Request> &into) {
  const ShardLayout &parts = expertShards[local].expertDpParts();
  if (comm.expertDpSize() > 1)
    into.push_back(transport.iexpertShard(
        Transport::ExpertShardGroup::ExpertDp, CollectiveKind::ReduceScatter,
        stages[local].grads().data() + parts.bucketBegin(bucket),
        parts.partFloats(bucket), DType::F32));
  replicaSums.push_back({local, bucket});
}

void GradientSync::sumOverReplicas() {
  for (const auto &[local, bucket] : replicaSums)
    overReplicas(transport, device, stages[local], expertShards[local],
                 CollectiveKind::ReduceScatter, stages[local].grads().data(),
                 bucket, scratch.data());
  replicaSums.clear();
}

int64_t GradientSync::startBuckets(size_t local, size_t layer) {
  BucketGroup &g = groups[local];
  const Stage &s = stages[local];
  const int64_t stride = bucketStride(s);
  if (g.bucketsFor != stride) {
    g.bucketsAfterLayer =
        bucketsFinalAfter(s.entry().program, s.grads().size(), stride);
    g.bucketsFor = stride;
  }
  int64_t count = 0;
  for (int64_t b : g.bucketsAfterLayer.at(layer))
    count += reduceBucket(local, b);
  transport.testAll(requests);
  return count;
}

void GradientSync::weightGradientDone(void *context, int32_t layer) {
  if (layer < 0)
    return;
  auto &g = *static_cast<BucketGroup *>(context);
  GradientSync &sync = *g.sync;
  const int64_t count = sync.startBuckets(g.local, size_t(layer));
  if (layer != sync.stages[g.local].entry().program.backwardWeight.back().layer)
    sync.startedInBackward += count;
}

WeightGradientHook GradientSync::gradReadyHook(size_t local) {
  return {&GradientSync::weightGradientDone, &groups[local]};
}

void GradientSync::gradsReadyAfterPass(size_t local) {
  startBuckets(local, stages[local].entry().program.layers.size());
}

void GradientSync::progress() { transport.testAll(requests); }

void GradientSync::finishGradSync() {
  transport.waitAll(requests);
  sumOverReplicas();
  end = steadySeconds();
}

void GradientSync::finalizeModelGrads() {
  reduceTiedGradients();
  if (sharded)
    finishShardedReduction();
}

void GradientSync::reduceTiedGradients() {
  // Copies on this rank first (in stage order), then across ranks: a group
  // of two adds a + b on both members, so the copies stay bit-identical.
  for (auto &[name, where] : copies) {
    int64_t n = 0;
    for (const ParamEntry &p : stages[where[0].first].entry().params)
      if (p.name == name)
        n = p.numel;
    float *sum = stages[where[0].first].grads().data() + where[0].second;
    for (size_t c = 1; c < where.size(); ++c)
      device.add(sum, stages[where[c].first].grads().data() + where[c].second,
                 n);
    for (size_t c = 1; c < where.size(); ++c)
      device.copy(stages[where[c].first].grads().data() + where[c].second, sum,
                  int64_t(sizeof(float)) * n);
  }
  for (const TiedGroup &g : tiedGroups) {
    float *first = nullptr;
    int64_t n = 0;
    for (Stage &s : stages)
      for (const ParamEntry &p : s.entry().params)
        if (p.name == g.name) {
          if (!first) {
            first = s.grads().data() + p.offset;
            n = p.numel;
            std::vector<Transport::Request> sum{
                transport.iallreduce(g.group, first, n, DType::F32)};
            transport.waitAll(sum);
          } else {
            device.copy(s.grads().data() + p.offset, first,
                        int64_t(sizeof(float)) * n);
          }
        }
  }
}

void GradientSync::finishShardedReduction() {
  std::vector<Transport::Request> pending;
  for (BucketGroup &g : groups)
    for (int64_t b = 0; b < stages[g.local].shard().buckets(); ++b)
      if (g.waitsForTiedSum(b) && expertShards[g.local].replicas() > 1)
        scatterExpertBucket(g.local, b, pending);
      else if (g.waitsForTiedSum(b))
        pending.push_back(scatterBucket(stages[g.local], b));
  if (pending.empty() && replicaSums.empty())
    return;
  started();
  // Each rank's summed parts land where its parameters are.
  transport.waitAll(pending);
  sumOverReplicas();
  end = steadySeconds();
}

} // namespace hypipe::rt
