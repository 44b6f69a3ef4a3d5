//===- StepBatch.cpp - one step's microbatches of this data-parallel rank -===//

#include "runtime/exec/StepBatch.h"

#include "runtime/comm/Comm.h"
#include "runtime/formats/SafeTensors.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypipe::rt {

int64_t globalBatchSize(const Artifact &artifact, const Comm &comm) {
  if (artifact.packing.enabled)
    return artifact.packing.globalBatchSize;
  return comm.dpSize() * artifact.microbatches *
         artifact.training.microBatchSize;
}

StepBatch::StepBatch(const Artifact &artifact, Comm &comm, Device &device,
                     TrainingData data)
    : artifact(artifact), comm(comm), device(device), data(data) {
  if (artifact.packing.enabled)
    packOptions = packingOptions(artifact.packing, comm.dpSize());
}

StepBatch::Counts StepBatch::load(int64_t step) {
  const Counts counts =
      artifact.packing.enabled ? loadPacked(step) : loadWindows(step);
  stageOnDevice();
  return counts;
}

StepBatch::Counts StepBatch::loadWindows(int64_t step) {
  const TrainingConfig &t = artifact.training;
  const int64_t M = artifact.microbatches, dp = comm.dpSize(),
                perMb = t.microBatchSize * t.seqLength;
  tokens.resize(M * perMb);
  labels.resize(M * perMb);
  batch.assign(M, Microbatch{});
  // The global batch is dp x M microbatches; this replica takes microbatches
  // [dpRank * M, (dpRank + 1) * M) of it. Every pipeline rank draws the
  // replica's samples, so first and last stages agree on tokens and labels
  // without sending them.
  for (int64_t mb = 0; mb < M; ++mb)
    for (int64_t row = 0; row < t.microBatchSize; ++row) {
      int64_t globalMb = (step - 1) * dp * M + comm.dpRank() * M + mb;
      int64_t index = globalMb * t.microBatchSize + row;
      int64_t at = mb * perMb + row * t.seqLength;
      data.stream->sample(uint64_t(t.seed), index, tokens.data() + at,
                          labels.data() + at);
    }
  // Each microbatch's loss enters the step's loss with weight 1 / (dp M),
  // so the data-parallel sum of gradients is already their mean.
  for (int64_t mb = 0; mb < M; ++mb) {
    batch[mb].offset = mb * perMb;
    batch[mb].tokens = perMb;
    batch[mb].scale = 1.0 / double(M * dp);
  }
  Counts counts;
  counts.microbatches = M;
  counts.tokens = counts.paddedTokens =
      globalBatchSize(artifact, comm) * t.seqLength;
  return counts;
}

namespace {

/// Every rank packed alone; a rank that read other data (another file on
/// another node) would disagree on the bins and deadlock. One small
/// collective per step makes that an error instead.
void checkSamePacking(Comm &comm, int64_t step, const packing::Plan &plan,
                      const std::vector<int64_t> &index,
                      const std::vector<int64_t> &lengths,
                      double globalLossTokens) {
  uint64_t digest = 1469598103934665603ULL;
  for (const packing::Bin &bin : plan.bins)
    for (int64_t g : bin.samples)
      digest =
          (digest ^ uint64_t(index[g] * 8191 + lengths[g])) * 1099511628211ULL;
  std::vector<double> all = comm.allgather(
      {double(plan.bins.size()), double(digest >> 12), globalLossTokens});
  for (size_t r = 3; r < all.size(); r += 3)
    if (all[r] != all[0] || all[r + 1] != all[1] || all[r + 2] != all[2])
      throw CollectiveError(fmt::format(
          "error: step {}: the ranks packed different microbatches (rank {} "
          "made {} bins, rank 0 {})\nhelp: every rank must read the same "
          "data: check data.path on every node",
          step, r / 3, all[r], all[0]));
}

} // namespace

StepBatch::Counts StepBatch::loadPacked(int64_t step) {
  const PackingConfig &pc = artifact.packing;
  const uint64_t seed = uint64_t(artifact.training.seed);
  const int64_t G = pc.globalBatchSize;
  std::vector<int64_t> index(G), lengths(G);
  int64_t longest = 0;
  for (int64_t g = 0; g < G; ++g) {
    index[g] = data.samples->sampleAt(seed, (step - 1) * G + g);
    lengths[g] = data.samples->length(index[g]);
    longest = std::max(longest, lengths[g]);
  }
  Expected<packing::Plan> plan = packing::pack(lengths, packOptions);
  if (!plan)
    throw CollectiveError(fmt::format(
        "error: step {}: cannot pack its {} samples into microbatches of {} "
        "tokens: {}\nhelp: raise data.global_batch_size or lower "
        "data.min_bin_count / bin_count_multiple",
        step, G, pc.maxTokens, toString(plan.takeError())));

  // With calculate_per_token_loss the loss is the mean over every real
  // (unmasked) token of the global batch, however it was packed: a
  // microbatch's mean loss enters with weight (its loss tokens) / (the
  // global batch's). Without (Megatron's default, schedules.py) it is the
  // mean of the global batch's microbatch means: weight 1 / (its
  // microbatches). Megatron divides by each replica's count and averages
  // the replicas; the two agree when the replicas run as many microbatches
  // each, and this one does not depend on the layout when they do not.
  std::vector<double> binLossTokens(plan->bins.size(), 0.0);
  double globalLossTokens = 0;
  for (size_t b = 0; b < plan->bins.size(); ++b) {
    for (int64_t g : plan->bins[b].samples)
      binLossTokens[b] += data.samples->lossTokens(index[g]);
    globalLossTokens += binLossTokens[b];
  }
  if (!(globalLossTokens > 0))
    throw CollectiveError(fmt::format(
        "error: step {}: every label of the global batch is masked out\n"
        "help: check the samples' loss_mask",
        step));
  checkSamePacking(comm, step, *plan, index, lengths, globalLossTokens);

  const std::vector<int64_t> &mine = plan->ranks[comm.dpRank()];
  // Sequence parallelism splits a microbatch's tokens in tp equal parts:
  // each packed microbatch is padded to a multiple of tp with one more
  // sequence of token 0 whose labels are all masked (Megatron-LM pads
  // packed sequences for sequence parallelism too). It attends to nothing
  // but itself and adds no loss; the budget, a multiple of tp (the spec's
  // rule), still holds it.
  const int64_t multiple = artifact.sequenceParallel ? artifact.tp : 1;
  auto paddedTokens = [&](int64_t n) {
    return (n + multiple - 1) / multiple * multiple;
  };
  // On an expert grid over m data-parallel replicas the MoE layers run the
  // m replicas' microbatches as one (MoeShape::groupReplicas): each is
  // padded to the group's most rows, its MoE layers told every
  // replica's real tokens (every rank packed every replica's bins).
  const int64_t replicas = comm.expertReplicas(),
                firstReplica = comm.dpRank() - comm.dpRank() % replicas;
  std::vector<std::vector<int64_t>> groupTokens(mine.size());
  std::vector<int64_t> rows(mine.size());
  int64_t total = 0;
  for (size_t mb = 0; mb < mine.size(); ++mb) {
    for (int64_t j = 0; j < replicas; ++j)
      groupTokens[mb].push_back(
          plan->bins[plan->ranks[firstReplica + j][mb]].tokens);
    rows[mb] = paddedTokens(
        *std::max_element(groupTokens[mb].begin(), groupTokens[mb].end()));
    total += rows[mb];
  }
  // Zeros: the padding's tokens, labels and masks.
  tokens.assign(size_t(total), 0);
  labels.assign(size_t(total), 0);
  lossMask.assign(size_t(total), 0.0f);
  batch.assign(mine.size(), Microbatch{});
  int64_t at = 0;
  for (size_t mb = 0; mb < mine.size(); ++mb) {
    const packing::Bin &bin = plan->bins[mine[mb]];
    Microbatch &m = batch[mb];
    m.offset = at;
    m.tokens = rows[mb];
    if (replicas > 1)
      m.replicaTokens = std::move(groupTokens[mb]);
    m.cuSeqlens.push_back(0);
    for (int64_t g : bin.samples) {
      data.samples->read(index[g], tokens.data() + at, labels.data() + at,
                         lossMask.data() + at);
      at += lengths[g];
      m.cuSeqlens.push_back(int32_t(at - m.offset));
    }
    if (m.tokens > bin.tokens) {
      at = m.offset + m.tokens;
      m.cuSeqlens.push_back(int32_t(m.tokens));
      m.paddedTail = true;
    }
    m.scale = artifact.training.perTokenLoss
                  ? binLossTokens[mine[mb]] / globalLossTokens
                  : 1.0 / double(plan->bins.size());
  }
  return {int64_t(mine.size()), plan->tokens(), G * longest};
}

void StepBatch::stageOnDevice() {
  if (device.host()) {
    batchTokens = tokens.data();
    batchLabels = labels.data();
    batchLossMask = lossMask.data();
    return;
  }
  auto fit = [&](auto &array, int64_t n) {
    if (array.size() < n)
      array = std::decay_t<decltype(array)>(device, n);
  };
  std::vector<int32_t> cu;
  for (Microbatch &mb : batch) {
    mb.cuOffset = int64_t(cu.size());
    cu.insert(cu.end(), mb.cuSeqlens.begin(), mb.cuSeqlens.end());
  }
  fit(deviceTokens, int64_t(tokens.size()));
  fit(deviceLabels, int64_t(labels.size()));
  fit(deviceLossMask, int64_t(lossMask.size()));
  fit(deviceCuSeqlens, int64_t(cu.size()));
  deviceTokens.upload(tokens.data(), int64_t(tokens.size()));
  deviceLabels.upload(labels.data(), int64_t(labels.size()));
  deviceLossMask.upload(lossMask.data(), int64_t(lossMask.size()));
  deviceCuSeqlens.upload(cu.data(), int64_t(cu.size()));
  batchTokens = deviceTokens.data();
  batchLabels = deviceLabels.data();
  batchLossMask = deviceLossMask.data();
  batchCuSeqlens = cu.empty() ? nullptr : deviceCuSeqlens.data();
}

StageArgs StepBatch::argsFor(int64_t microbatch) const {
  StageArgs args;
  const Microbatch &mb = batch.at(size_t(microbatch));
  args.tokens = batchTokens + mb.offset;
  args.labels = batchLabels + mb.offset;
  args.loss_scale = float(mb.scale);
  if (!mb.cuSeqlens.empty()) {
    args.loss_mask = batchLossMask + mb.offset;
    args.cu_seqlens = mb.cuSeqlens.data();
    args.num_seqs = int64_t(mb.cuSeqlens.size()) - 1;
    args.padded_tail = mb.paddedTail;
    if (!mb.replicaTokens.empty())
      args.replica_tokens = mb.replicaTokens.data();
    if (batchCuSeqlens)
      args.cu_seqlens_device = batchCuSeqlens + mb.cuOffset;
  }
  return args;
}

void StepBatch::addTo(SafeTensorsWriter &w,
                      std::vector<std::vector<int32_t>> &keep) const {
  if (!artifact.packing.enabled) {
    const TrainingConfig &t = artifact.training;
    std::vector<int64_t> shape = {artifact.microbatches, t.microBatchSize,
                                  t.seqLength};
    w.add("tokens", shape, tokens.data());
    w.add("labels", shape, labels.data());
    return;
  }
  // This step's microbatches back to back, and where each sample starts.
  std::vector<int64_t> shape = {int64_t(tokens.size())};
  w.add("tokens", shape, tokens.data());
  w.add("labels", shape, labels.data());
  w.add("loss_mask", shape, lossMask.data());
  keep.resize(2);
  std::vector<int32_t> &starts = keep[0], &microbatchStarts = keep[1];
  for (const Microbatch &mb : batch)
    for (size_t i = 0; i + 1 < mb.cuSeqlens.size(); ++i)
      starts.push_back(int32_t(mb.offset) + mb.cuSeqlens[i]);
  w.add("sample_starts", {int64_t(starts.size())}, starts.data());
  // Where each microbatch starts: the loss's normalisation needs them.
  for (const Microbatch &mb : batch)
    microbatchStarts.push_back(int32_t(mb.offset));
  w.add("microbatch_starts", {int64_t(microbatchStarts.size())},
        microbatchStarts.data());
}

} // namespace hypipe::rt
