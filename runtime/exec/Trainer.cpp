//===- Trainer.cpp - run one rank's schedule program, step after step -----===//

#include "runtime/exec/Trainer.h"
#include "core/numeric/Bf16.h"
#include "runtime/kernels/cpu/Profile.h"

#include "core/schedule/Schedule.h"
#include "core/schedule/Simulate.h"
#include "runtime/exec/GradientBuckets.h"
#include "runtime/exec/Init.h"
#include "runtime/formats/Checkpoint.h"
#include "runtime/formats/SafeTensors.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <sys/stat.h>

namespace hypipe::rt {

double learningRate(const TrainingConfig &c, int64_t step) {
  if (c.warmupSteps > 0 && step <= c.warmupSteps)
    return c.lr * double(step) / double(c.warmupSteps);
  int64_t decaySteps = std::max<int64_t>(1, c.decayEnd() - c.warmupSteps);
  double ratio =
      std::min(1.0, double(step - c.warmupSteps) / double(decaySteps));
  return c.minLr + 0.5 * (1.0 + std::cos(M_PI * ratio)) * (c.lr - c.minLr);
}

namespace {

/// The index of the first element of `values[0, n)` that is NaN or
/// infinite, or of the first negative one with `nonNegative`; -1 if none.
int64_t firstInsane(const float *values, int64_t n, bool nonNegative) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i]) || (nonNegative && values[i] < 0))
      return i;
  return -1;
}

/// Refuses a checkpoint whose parameter `p` or Adam moments cannot have
/// been written by a run: training from them would turn the first update
/// into NaN (sqrt of a negative second moment) and save it.
void checkOptimizerState(const std::string &where, const ParamEntry &p,
                         const float *w, const float *m, const float *v) {
  const struct {
    std::string name;
    const float *values;
    bool nonNegative;
  } tensors[] = {{p.name, w, false},
                 {"optimizer.exp_avg." + p.name, m, false},
                 {"optimizer.exp_avg_sq." + p.name, v, true}};
  for (const auto &t : tensors) {
    const int64_t at = firstInsane(t.values + p.offset, p.numel, t.nonNegative);
    if (at < 0)
      continue;
    const float value = t.values[p.offset + at];
    throw RuntimeError(fmt::format(
        "checkpoint '{}': tensor '{}' holds {} at element {}{}; no run "
        "writes that, so the checkpoint was edited or is corrupt\nhelp: "
        "resume from an earlier checkpoint (a step_* directory), or start "
        "over from its weights with --init-from",
        where, t.name, value, at,
        t.nonNegative && std::isfinite(value)
            ? " (a second moment is a mean of squares, never negative)"
            : ""));
  }
}

/// The name of a parameter of `stage` that holds a NaN or infinite value
/// in `params` (its full parameters), or "".
std::string nonFiniteParameter(const StageEntry &stage,
                               const std::vector<float> &params) {
  for (const ParamEntry &p : stage.params)
    if (firstInsane(params.data() + p.offset, p.numel, false) >= 0)
      return p.name;
  return std::string();
}

/// What every rank contributes to a step's end: loss, aux loss, squared
/// gradient norm, its router fault (layer number, logit), then each MTP
/// depth's loss.
constexpr size_t kGathered = 5;

/// Stops every rank when one's MoE router met a NaN or infinite logit this
/// step, naming the lowest such rank: before the loss check, which would
/// only say that training diverged (and the experts were picked by position
/// since). `gathered` holds `per` values per rank: kGathered, the fault
/// last, then the MTP depths.
void stopOnRouterFault(int64_t step, const std::vector<double> &gathered,
                       size_t per) {
  for (size_t r = 0; r * per < gathered.size(); ++r) {
    const double layer = gathered[r * per + 3];
    if (layer == 0)
      continue;
    const std::string where =
        layer > 0 ? fmt::format("layer {} (E)", int64_t(layer))
                  : std::string("an MoE layer of a multi-token-prediction "
                                "depth");
    throw CollectiveError(fmt::format(
        "error: step {}: {} on rank {}: the MoE router produced a "
        "non-finite logit ({}); no update was applied (the last checkpoint "
        "is kept)\nhelp: the router's input or weights overflowed or hold "
        "NaN: lower training.lr or raise warmup_steps, and check the "
        "starting weights (--resume, --init-from)",
        step, where, r, gathered[r * per + 4]));
  }
}

/// One RouterCheck per layer of a program with MoE layers (indexed like
/// its layers); none for a program without.
DeviceArray<RouterCheck> routerChecksFor(Device &device,
                                         const StageProgram &program) {
  const auto &layers = program.layers;
  if (std::none_of(layers.begin(), layers.end(), [](const ProgramLayer &l) {
        return l.kind == LayerKind::Moe;
      }))
    return {};
  return DeviceArray<RouterCheck>(device, int64_t(layers.size()));
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Tags name the receiving stage, the microbatch and the direction, so a
/// transfer can only match its own receive.
int transferTag(int64_t receivingStage, int64_t mb, int64_t microbatches,
                bool backward) {
  return int(((receivingStage * microbatches + mb) * 2 + backward) % 32768);
}

/// The GPU a rank opens: its index on the node modulo the GPUs it sees (a
/// rank bound to its own GPU sees one; one that sees them all takes its
/// node index; ranks beyond the GPUs share them).
int gpuOrdinal(const Comm &comm) {
  return comm.nodeRank() % std::max(1, cudaDeviceCount());
}

/// The transport this run uses (the artifact's `comm`, resolved the same
/// on every rank: nodes that resolve `auto` differently all stage).
CommKind chooseTransport(const Artifact &artifact, Comm &comm) {
  const bool cuda = artifact.target == Target::Cuda;
  const std::optional<CommKind> requested =
      schedule::parseCommKind(artifact.comm);
  if (!requested)
    throw RuntimeError(
        fmt::format("error: unknown transport '{}'\nhelp: --comm is one of {}",
                    artifact.comm, schedule::kCommKindList));
  CommKind kind = CommKind::Mpi;
  // One process sends nothing: no communicator to set up.
  if (comm.size() == 1 && *requested == CommKind::Auto)
    return cuda ? CommKind::MpiStaged : CommKind::Mpi;
  // The distinct GPUs this node's ranks would open (their PCI bus ids: the
  // same GPU under any CUDA_VISIBLE_DEVICES numbering).
  int gpus = 0;
  if (cuda) {
    const std::vector<std::string> ids = comm.allgatherOnNode(
        cudaDeviceCount() ? cudaDeviceId(gpuOrdinal(comm)) : "");
    std::set<std::string> distinct(ids.begin(), ids.end());
    distinct.erase("");
    gpus = int(distinct.size());
  }
  onEveryRank(comm, "error: cannot choose the transport between ranks", [&] {
    kind = resolveComm(*requested, cuda, comm.nodeSize(), gpus);
  });
  const std::vector<double> all = comm.allgather({double(int(kind))});
  for (double k : all)
    if (CommKind(int(k)) == CommKind::MpiStaged)
      kind = CommKind::MpiStaged;
  return kind;
}

std::unique_ptr<Device> openDevice(const Artifact &artifact, const Comm &comm) {
  if (artifact.target != Target::Cuda)
    return makeHostDevice();
  const int ordinal = gpuOrdinal(comm);
  std::unique_ptr<Device> device;
  try {
    device = makeCudaDevice(ordinal);
  } catch (const std::runtime_error &e) {
    throw RuntimeError(e.what());
  }
  const int built = artifact.computeCapability;
  const int found = device->computeCapability();
  if (built && found < built)
    throw RuntimeError(fmt::format(
        "error: the stages of '{}' are built for compute capability {}.{} "
        "and later; {} is {}.{}\nhelp: run on a newer GPU (hypipe builds "
        "sm_90a with compute_90 PTX)",
        artifact.dir, built / 10, built % 10, device->describe(), found / 10,
        found % 10));
  return device;
}

} // namespace

Trainer::Trainer(Artifact &artifact, Comm &comm, TrainingData data,
                 int64_t bucketFloats)
    : artifact(artifact), comm(comm), ppRank(comm.ppRank()), data(data),
      bucketFloats(std::max<int64_t>(1, bucketFloats)) {
  const CommKind kind = chooseTransport(artifact, comm);
  artifact.comm = std::string(schedule::commKindName(kind)); // as resolved
  device = openDevice(artifact, comm);
  transport = makeTransport(kind, comm, *device);
  for (StageEntry *e : artifact.stagesOf(ppRank)) {
    StageState s;
    s.entry = e;
    // Megatron's distributed optimizer: every bucket cut into dp equal
    // parts, part d's moments on dp rank d (ShardLayout.h).
    s.shard = sharded() ? ShardLayout(e->numParams, comm.dpSize(),
                                      comm.dpRank(), this->bucketFloats)
                        : ShardLayout(e->numParams, 1, 0, e->numParams);
    const int64_t floats = s.shard.bufferFloats();
    s.params = Buffer(*device, floats);
    s.grads = Buffer(*device, floats);
    s.adamM = Buffer(*device, s.shard.shardFloats());
    s.adamV = Buffer(*device, s.shard.shardFloats());
    s.workspace = Buffer(*device, e->workspaceFloats);
    if (e->program.activations == DType::BF16)
      s.working = Buffer(*device, floats);
    s.routerChecks = routerChecksFor(*device, e->program);
    std::vector<float> init(e->numParams, 0.0f);
    for (const ParamEntry &p : e->params) {
      initParameter(p, artifact.training.seed, init.data() + p.offset);
      copies[p.name].push_back({stages.size(), p.offset});
    }
    s.params.upload(init.data(), e->numParams);
    stages.push_back(std::move(s));
  }
  for (auto it = copies.begin(); it != copies.end();)
    it = it->second.size() > 1 ? std::next(it) : copies.erase(it);

  // Parameters held by several pipeline ranks (the tied embedding between
  // first and last stage): every rank creates the groups in name order.
  std::map<std::string, std::vector<int64_t>> holders; // name -> stages
  for (const StageEntry &e : artifact.stages)
    for (const ParamEntry &p : e.params)
      holders[p.name].push_back(e.index);
  for (auto &[name, stageIndices] : holders) {
    std::vector<int64_t> ranks;
    for (int64_t st : stageIndices)
      ranks.push_back(artifact.stages[st].ppRank);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    bool local = false;
    for (StageState &s : stages)
      for (const ParamEntry &p : s.entry->params)
        if (p.name == name) {
          local = true;
          if (stageIndices.size() > 1)
            s.markTied(p);
        }
    if (stageIndices.size() > 1)
      firstStage[name] = stageIndices.front();
    if (ranks.size() < 2)
      continue;
    Transport::Group group = transport->makeGroup(ranks);
    if (local)
      tiedGroups.push_back({name, group});
  }

  // The optimizer's segments. Each parameter once over the pipeline in the
  // norm: a tied copy counts only on the first stage that holds it.
  std::set<std::string> counted;
  for (StageState &s : stages) {
    s.updated.assign(size_t(s.shard.buckets()), {});
    for (const ParamEntry &p : s.entry->params) {
      // Which copy counts is decided before the shard cuts it: the first
      // copy's part, even where this rank's shard holds none of it.
      auto it = firstStage.find(p.name);
      const bool counts =
          it == firstStage.end() ||
          (it->second == s.entry->index && counted.insert(p.name).second);
      for (int64_t b = 0; b < s.shard.buckets(); ++b) {
        const int64_t own = s.shard.ownBegin(b);
        const int64_t lo = std::max(p.offset, own),
                      hi = std::min(p.offset + p.numel,
                                    own + s.shard.partFloats(b));
        if (lo >= hi)
          continue;
        s.updated[size_t(b)].push_back({lo, hi, p.weightDecay});
        if (counts)
          s.normed.push_back({lo, hi, false});
      }
    }
  }

  if (const char *kill = std::getenv("HYPIPE_FAULT_KILL"))
    std::sscanf(kill, "%d:%ld", &faultKillRank, &faultKillStep);
  if (const char *nan = std::getenv("HYPIPE_FAULT_NAN_STEP"))
    faultNanStep = std::atol(nan);
  if (artifact.packing.enabled) {
    const PackingConfig &pc = artifact.packing;
    packOptions.budget = pc.maxTokens;
    packOptions.dp = comm.dpSize();
    packOptions.minBins = pc.minBins;
    packOptions.binMultiple = pc.binMultiple;
    packOptions.scheduler = *packing::parseScheduler(pc.scheduler);
    packOptions.cost = {pc.costPerToken, pc.costPerSquaredToken};
  }
  // The pipeline links the program uses (NCCL sets them up here; a packed
  // step's program for another microbatch count has the same peers).
  std::set<int> sendTo, receiveFrom;
  for (const ActionEntry &a : programFor(artifact.microbatches).actions) {
    if (a.op == schedule::Op::SendF || a.op == schedule::Op::SendB)
      sendTo.insert(comm.worldRankOf(a.peer));
    if (a.op == schedule::Op::RecvF || a.op == schedule::Op::RecvB)
      receiveFrom.insert(comm.worldRankOf(a.peer));
  }
  if (comm.distributed())
    transport->connect({sendTo.begin(), sendTo.end()},
                       {receiveFrom.begin(), receiveFrom.end()});
  comm.barrier();
  epoch = now();
}

Trainer::~Trainer() {
  try {
    for (StageState &s : stages)
      awaitParameters(s);
  } catch (...) {
    // A hook ended the wait (the watchdog); nothing is left to finish.
  }
}

bool Trainer::sharded() const {
  return artifact.distributedOptimizer && comm.dpSize() > 1;
}

void Trainer::awaitParameters(StageState &s) {
  if (!s.paramGather.empty())
    transport->waitAll(s.paramGather);
  if (!s.gatheringWorking)
    return;
  // Every rank's bf16 block, widened into the working copy; then the
  // gradient buffer the gather borrowed is zeroed for the step.
  device->copy(s.working.data(), s.grads.data(), 2 * s.working.size());
  device->unpackBf16(s.working.data(), s.working.size());
  device->zero(s.grads.data(), s.grads.size());
  s.gatheringWorking = false;
}

void Trainer::refreshWorkingCopy(StageState &s) {
  if (!s.working.size() || !s.workingStale)
    return;
  device->roundToBf16(s.working.data(), s.params.data(), s.params.size());
  s.workingStale = false;
}

void Trainer::timePass(StageState &s, StageArgs &args, int pass) {
  if (!measuring)
    return;
  s.layerSeconds.resize(3 * s.entry->program.layers.size(), 0.0);
  args.layer_seconds = s.layerSeconds.data();
  ++s.passRuns[size_t(pass)];
}

std::vector<Trainer::LayerTimes> Trainer::layerTimes() const {
  std::vector<LayerTimes> out;
  for (const StageState &s : stages) {
    LayerTimes t{&s.entry->program, s.layerSeconds, s.passRuns};
    t.seconds.resize(3 * s.entry->program.layers.size(), 0.0);
    out.push_back(std::move(t));
  }
  return out;
}

void Trainer::mainWeightsChanged() {
  for (StageState &s : stages)
    s.workingStale = true;
}

void Trainer::startDpReduction(StageState &s) {
  if (comm.dpSize() == 1)
    return;
  const int64_t stride = bucketStride(s);
  for (int64_t b = 0; b * stride < s.grads.size(); ++b)
    reduceBucket(s, b);
}

int64_t Trainer::bucketStride(const StageState &s) const {
  return sharded() ? s.shard.stride() : bucketFloats;
}

Transport::Request Trainer::scatterBucket(StageState &s, int64_t bucket) {
  return transport->ireduceScatterDp(s.grads.data() +
                                         s.shard.bucketBegin(bucket),
                                     s.shard.partFloats(bucket), DType::F32);
}

Transport::Request Trainer::gatherBucket(StageState &s, float *buffer,
                                         int64_t bucket) {
  return transport->iallgatherDp(buffer + s.shard.bucketBegin(bucket),
                                 s.shard.partFloats(bucket), DType::F32);
}

bool Trainer::reduceBucket(StageState &s, int64_t bucket) {
  if (sharded() && s.waitsForTiedSum(bucket))
    return false;
  if (reductionBegin < 0)
    reductionBegin = now() - epoch;
  if (sharded()) {
    dpRequests.push_back(scatterBucket(s, bucket));
    return true;
  }
  const int64_t at = bucket * bucketFloats;
  dpRequests.push_back(transport->iallreduceDp(
      s.grads.data() + at, std::min<int64_t>(bucketFloats, s.grads.size() - at),
      DType::F32));
  return true;
}

int64_t Trainer::startBuckets(StageState &s, size_t layer) {
  const int64_t stride = bucketStride(s);
  if (s.bucketsFor != stride) {
    s.bucketsAfterLayer =
        bucketsFinalAfter(s.entry->program, s.grads.size(), stride);
    s.bucketsFor = stride;
  }
  int64_t started = 0;
  for (int64_t b : s.bucketsAfterLayer.at(layer))
    started += reduceBucket(s, b);
  transport->testAll(dpRequests);
  return started;
}

void Trainer::weightGradientDone(void *context, int32_t layer) {
  if (layer < 0)
    return;
  auto *hook = static_cast<BucketHook *>(context);
  Trainer &t = *hook->trainer;
  StageState &s = *hook->stage;
  const int64_t started = t.startBuckets(s, size_t(layer));
  if (layer != s.entry->program.backwardWeight.back().layer)
    t.bucketsInBackward += started;
}

namespace {
/// Key of a (stage, microbatch) tensor in a step's maps.
int64_t tensorKey(int64_t stage, int64_t mb) { return stage * (1 << 20) + mb; }
} // namespace

const Trainer::Program &Trainer::programFor(int64_t microbatches) {
  auto it = programs.find(microbatches);
  if (it != programs.end())
    return it->second;
  Program p;
  try {
    // Every rank builds the same schedule from the same request, so a
    // refusal is collective.
    // NCCL matches messages by their order on a link, not by tag.
    p.actions = rankProgram(artifact, ppRank, microbatches,
                            transport->matchesByOrder());
  } catch (const RuntimeError &e) {
    throw CollectiveError(e.what());
  }
  // Texts and trace names, formatted once rather than in every step.
  const schedule::Placement placement =
      schedule::placementOf(artifact.schedule);
  for (const ActionEntry &a : p.actions) {
    p.texts.push_back(schedule::pytorchText(a));
    p.traceNames.push_back(schedule::megatronText(a, placement, artifact.pp));
    if (a.op == schedule::Op::ReduceGrad)
      p.reduceGradStages.push_back(a.stage);
  }
  return programs.emplace(microbatches, std::move(p)).first->second;
}

void Trainer::loadBatch(int64_t step, StepStats &stats) {
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
  stats.microbatches = M;
  stats.tokens = stats.paddedTokens = globalBatch() * t.seqLength;
}

void Trainer::loadPackedBatch(int64_t step, StepStats &stats) {
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

  // Every rank packed alone; a rank that read other data (another file on
  // another node) would disagree on the bins and deadlock. One small
  // collective per step makes that an error instead.
  uint64_t digest = 1469598103934665603ULL;
  for (const packing::Bin &bin : plan->bins)
    for (int64_t g : bin.samples)
      digest =
          (digest ^ uint64_t(index[g] * 8191 + lengths[g])) * 1099511628211ULL;
  std::vector<double> all = comm.allgather(
      {double(plan->bins.size()), double(digest >> 12), globalLossTokens});
  for (size_t r = 3; r < all.size(); r += 3)
    if (all[r] != all[0] || all[r + 1] != all[1] || all[r + 2] != all[2])
      throw CollectiveError(fmt::format(
          "error: step {}: the ranks packed different microbatches (rank {} "
          "made {} bins, rank 0 {})\nhelp: every rank must read the same "
          "data: check data.path on every node",
          step, r / 3, all[r], all[0]));

  const std::vector<int64_t> &mine = plan->ranks[comm.dpRank()];
  int64_t total = 0;
  for (int64_t b : mine)
    total += plan->bins[b].tokens;
  tokens.resize(total);
  labels.resize(total);
  lossMask.resize(total);
  batch.assign(mine.size(), Microbatch{});
  int64_t at = 0;
  for (size_t mb = 0; mb < mine.size(); ++mb) {
    const packing::Bin &bin = plan->bins[mine[mb]];
    Microbatch &m = batch[mb];
    m.offset = at;
    m.tokens = bin.tokens;
    m.cuSeqlens.push_back(0);
    for (int64_t g : bin.samples) {
      data.samples->read(index[g], tokens.data() + at, labels.data() + at,
                         lossMask.data() + at);
      at += lengths[g];
      m.cuSeqlens.push_back(int32_t(at - m.offset));
    }
    m.scale = artifact.training.perTokenLoss
                  ? binLossTokens[mine[mb]] / globalLossTokens
                  : 1.0 / double(plan->bins.size());
  }
  stats.microbatches = int64_t(mine.size());
  stats.tokens = plan->tokens();
  stats.paddedTokens = G * longest;
}

int64_t Trainer::activationFloats(const ActionEntry &a) const {
  return batch.at(a.microbatch).tokens * artifact.stages[0].hidden;
}

Trainer::StageState &Trainer::localStage(int64_t stage) {
  for (StageState &s : stages)
    if (s.entry->index == stage)
      return s;
  throw RuntimeError(fmt::format(
      "error: rank {}'s program names stage {}, which runs on another rank\n"
      "help: the artifact is corrupt; recompile it",
      ppRank, stage));
}

void Trainer::send(const ActionEntry &a, StepState &st) {
  bool backward = a.op == schedule::Op::SendB;
  auto &from = backward ? st.grads : st.acts;
  auto it = from.find(tensorKey(a.stage, a.microbatch));
  if (it == from.end())
    throw RuntimeError(fmt::format(
        "error: rank {} has nothing to send at '{}'\nhelp: the artifact's "
        "program is out of order; recompile it",
        ppRank, schedule::pytorchText(a)));
  st.sendBuffers.push_back(std::move(it->second));
  from.erase(it);
  float *data = st.sendBuffers.back().data();
  const int64_t n = activationFloats(a);
  if (wireBf16())
    device->packBf16(data, n);
  st.sentBytes += n * (wireBf16() ? 2 : 4);
  st.sends.push_back(
      transport->isend(data, n, wireType(), comm.worldRankOf(a.peer),
                       transferTag(backward ? a.stage - 1 : a.stage + 1,
                                   a.microbatch, st.microbatches, backward)));
}

void Trainer::receive(const ActionEntry &a, StepState &st) {
  bool backward = a.op == schedule::Op::RecvB;
  // Stored as if the producing stage had run here.
  auto &into = backward ? st.grads : st.acts;
  Buffer &buffer = into.emplace(tensorKey(backward ? a.stage + 1 : a.stage - 1,
                                          a.microbatch),
                                takeActivation(st.activation))
                       .first->second;
  // Posted here, waited for by the action that reads it (as PyTorch's
  // runtime and NCCL do; the simulator times receives the same way).
  const int64_t key =
      tensorKey(backward ? a.stage + 1 : a.stage - 1, a.microbatch);
  (backward ? st.postedGrads : st.postedActs)[key].push_back(transport->irecv(
      buffer.data(), activationFloats(a), wireType(), comm.worldRankOf(a.peer),
      transferTag(a.stage, a.microbatch, st.microbatches, backward)));
}

bool Trainer::awaitInput(const ActionEntry &a, StepState &st) {
  const bool forward = a.op == schedule::Op::F;
  if (!forward && a.op != schedule::Op::B && a.op != schedule::Op::I)
    return false;
  auto &posted = forward ? st.postedActs : st.postedGrads;
  auto it =
      posted.find(tensorKey(forward ? a.stage - 1 : a.stage + 1, a.microbatch));
  if (it == posted.end())
    return false;
  transport->waitAll(it->second);
  posted.erase(it);
  if (wireBf16()) {
    auto &into = forward ? st.acts : st.grads;
    device->unpackBf16(
        into.at(tensorKey(forward ? a.stage - 1 : a.stage + 1, a.microbatch))
            .data(),
        activationFloats(a));
  }
  return true;
}

bool Trainer::wireBf16() const {
  return artifact.precision == TrainingPrecision::Bf16;
}

StageArgs Trainer::stageArgs(StageState &s, const ActionEntry &a) {
  StageArgs args;
  args.params = s.working.size() ? s.working.data() : s.params.data();
  args.grads = s.grads.data();
  args.workspace = s.workspace.data();
  args.router_checks = s.routerChecks.data();
  const Microbatch &mb = batch.at(a.microbatch);
  args.tokens = batchTokens + mb.offset;
  args.labels = batchLabels + mb.offset;
  args.loss_scale = float(mb.scale);
  if (!mb.cuSeqlens.empty()) {
    args.loss_mask = batchLossMask + mb.offset;
    args.cu_seqlens = mb.cuSeqlens.data();
    args.num_seqs = int64_t(mb.cuSeqlens.size()) - 1;
    if (batchCuSeqlens)
      args.cu_seqlens_device = batchCuSeqlens + mb.cuOffset;
  }
  return args;
}

Trainer::Buffer Trainer::takeActivation(int64_t floats) {
  if (activationPool.empty() || activationPool.back().size() != floats)
    return Buffer(*device, floats);
  Buffer b = std::move(activationPool.back());
  activationPool.pop_back();
  return b;
}

void Trainer::giveBack(Buffer &&buffer) {
  activationPool.push_back(std::move(buffer));
}

void Trainer::stageBatch() {
  if (device->host()) {
    batchTokens = tokens.data();
    batchLabels = labels.data();
    batchLossMask = lossMask.data();
    return;
  }
  auto fit = [&](auto &array, int64_t n) {
    if (array.size() < n)
      array = std::decay_t<decltype(array)>(*device, n);
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

void Trainer::forward(const ActionEntry &a, StepState &st) {
  StageState &s = localStage(a.stage);
  StageEntry &e = *s.entry;
  StageArgs args = stageArgs(s, a);
  int slot;
  if (s.freeSlots.empty()) {
    slot = int(s.slots.size());
    s.slots.emplace_back(*device, e.savedFloats);
  } else {
    slot = s.freeSlots.back();
    s.freeSlots.pop_back();
  }
  int64_t k = tensorKey(a.stage, a.microbatch);
  st.slotOf[k] = slot;
  args.saved = s.slots[slot].data();
  if (!e.hasEmbedding)
    args.input = st.acts.at(tensorKey(a.stage - 1, a.microbatch)).data();
  awaitParameters(s);
  refreshWorkingCopy(s);
  if (!e.hasHead)
    args.output =
        st.acts.emplace(k, takeActivation(st.activation)).first->second.data();
  std::vector<float> mtp(st.mtp.size(), 0.0f);
  args.mtp_losses = mtp.data();
  timePass(s, args, 0);
  device->runStagePass(e.program, StagePass::Forward, args);
  if (!e.hasEmbedding) {
    auto in = st.acts.find(tensorKey(a.stage - 1, a.microbatch));
    giveBack(std::move(in->second));
    st.acts.erase(in);
  }
  const double scale = batch[a.microbatch].scale;
  if (e.hasHead)
    st.loss += args.loss * scale;
  st.aux += args.aux_loss * scale;
  if (e.hasHead)
    for (size_t d = 0; d < mtp.size(); ++d)
      st.mtp[d] += mtp[d] * scale;
}

void Trainer::backward(const ActionEntry &a, StepState &st) {
  StageState &s = localStage(a.stage);
  StageEntry &e = *s.entry;
  StageArgs args = stageArgs(s, a);
  int64_t k = tensorKey(a.stage, a.microbatch);
  args.saved = s.slots.at(st.slotOf.at(k)).data();
  if (a.op == schedule::Op::B || a.op == schedule::Op::I) {
    if (!e.hasHead)
      args.grad_output =
          st.grads.at(tensorKey(a.stage + 1, a.microbatch)).data();
    if (!e.hasEmbedding)
      args.grad_input = st.grads.emplace(k, takeActivation(st.activation))
                            .first->second.data();
    timePass(s, args, 1);
    device->runStagePass(e.program, StagePass::BackwardInput, args);
    if (!e.hasHead) {
      auto in = st.grads.find(tensorKey(a.stage + 1, a.microbatch));
      giveBack(std::move(in->second));
      st.grads.erase(in);
    }
  }
  if (a.op == schedule::Op::B || a.op == schedule::Op::W) {
    timePass(s, args, 2);
    // The stage's last backward: each bucket's all-reduce (reduce-scatter
    // when sharded) starts once the last call writing into it has run,
    // under the rest of the pass.
    const bool bucketed = s.backwardsDone + 1 == st.microbatches &&
                          !s.reducedByProgram && comm.dpSize() > 1;
    BucketHook hook{this, &s};
    if (bucketed) {
      args.weight_gradient_done = &Trainer::weightGradientDone;
      args.weight_gradient_context = &hook;
    }
    device->runStagePass(e.program, StagePass::BackwardWeight, args);
    if (bucketed)
      startBuckets(s, e.program.layers.size());
    s.freeSlots.push_back(st.slotOf.at(k));
    st.slotOf.erase(k);
    if (++s.backwardsDone == st.microbatches && !s.reducedByProgram &&
        !bucketed)
      startDpReduction(s);
  }
}

int64_t Trainer::runProgram(double &loss, double &aux,
                            std::vector<double> &mtp) {
  const TrainingConfig &t = artifact.training;
  StepState st;
  st.mtp.assign(size_t(artifact.model.mtpDepths), 0.0);
  st.microbatches = int64_t(batch.size());
  st.activation = t.microBatchSize * t.seqLength * artifact.stages[0].hidden;
  lastTimings.clear();

  const Program &prog = programFor(st.microbatches);
  for (StageState &s : stages) {
    s.backwardsDone = 0;
    s.reducedByProgram = false;
  }
  for (int32_t stage : prog.reduceGradStages)
    localStage(stage).reducedByProgram = true;
  const std::vector<ActionEntry> &program = prog.actions;
  const std::vector<std::string> &actionText = prog.texts;
  const std::vector<std::string> &traceName = prog.traceNames;
  for (size_t i = 0; i < program.size(); ++i) {
    const ActionEntry &a = program[i];
    double begin = now() - epoch;
    if (comm.distributed())
      comm.setWaitContext(actionText[i]);
    // FSDP's UNSHARD and RESHARD: nothing is sharded, nothing to do.
    if (a.op == schedule::Op::Unshard || a.op == schedule::Op::Reshard)
      continue;
    if (schedule::isTransfer(a.op) && !comm.distributed())
      throw RuntimeError(fmt::format(
          "error: action '{}' exchanges tensors with rank {}; this run has a "
          "single process\nhelp: launch {} ranks with mpirun (or compile "
          "with --pp 1)",
          actionText[i], a.peer, artifact.pp * artifact.dp));
    // The data of a posted receive: the wait is traced apart, so the
    // action's own span is compute only.
    if (schedule::isCompute(a.op) && awaitInput(a, st)) {
      lastTimings.push_back({"wait " + traceName[i], schedule::kWaitCategory,
                             begin, now() - epoch, a.stage, a.microbatch});
      begin = now() - epoch;
    }
    switch (a.op) {
    case schedule::Op::SendF:
    case schedule::Op::SendB:
      send(a, st);
      break;
    case schedule::Op::RecvF:
    case schedule::Op::RecvB:
      receive(a, st);
      break;
    case schedule::Op::F:
      forward(a, st);
      break;
    case schedule::Op::B:
    case schedule::Op::I:
    case schedule::Op::W:
      backward(a, st);
      break;
    case schedule::Op::ReduceGrad:
      // The verifier put it after the stage's last backward on this rank.
      startDpReduction(localStage(a.stage));
      break;
    case schedule::Op::Unshard:
    case schedule::Op::Reshard:
      break; // skipped above
    }
    lastTimings.push_back({traceName[i], schedule::traceCategory(a.op), begin,
                           now() - epoch, a.stage, a.microbatch});
    // Let MPI move pending sends and reductions along between kernels; a
    // transfer needs no progress call of its own.
    if (comm.distributed() && schedule::isCompute(a.op)) {
      transport->testAll(st.sends);
      transport->testAll(dpRequests);
      for (StageState &s : stages)
        transport->testAll(s.paramGather);
    }
  }
  if (comm.distributed())
    comm.setWaitContext("the end of the program");
  transport->waitAll(st.sends);
  transport->waitAll(dpRequests);
  reductionEnd = now() - epoch;
  for (auto *posted : {&st.postedActs, &st.postedGrads})
    for (auto &[key, requests] : *posted)
      transport->waitAll(requests); // a verified program reads all it receives
  if (comm.distributed())
    comm.setWaitContext(""); // what follows names itself
  for (Buffer &b : st.sendBuffers)
    giveBack(std::move(b));
  loss += st.loss;
  aux += st.aux;
  mtp.resize(st.mtp.size(), 0.0);
  for (size_t d = 0; d < st.mtp.size(); ++d)
    mtp[d] += st.mtp[d];
  return st.sentBytes;
}

void Trainer::reduceTiedGradients() {
  // Copies on this rank first (in stage order), then across ranks: a group
  // of two adds a + b on both members, so the copies stay bit-identical.
  for (auto &[name, where] : copies) {
    const StageState &first = stages[where[0].first];
    int64_t n = 0;
    for (const ParamEntry &p : first.entry->params)
      if (p.name == name)
        n = p.numel;
    float *sum = stages[where[0].first].grads.data() + where[0].second;
    for (size_t c = 1; c < where.size(); ++c)
      device->add(sum, stages[where[c].first].grads.data() + where[c].second,
                  n);
    for (size_t c = 1; c < where.size(); ++c)
      device->copy(stages[where[c].first].grads.data() + where[c].second, sum,
                   int64_t(sizeof(float)) * n);
  }
  for (const TiedGroup &g : tiedGroups) {
    float *first = nullptr;
    int64_t n = 0;
    for (StageState &s : stages)
      for (const ParamEntry &p : s.entry->params)
        if (p.name == g.name) {
          if (!first) {
            first = s.grads.data() + p.offset;
            n = p.numel;
            std::vector<Transport::Request> sum{
                transport->iallreduce(g.group, first, n, DType::F32)};
            transport->waitAll(sum);
          } else {
            device->copy(s.grads.data() + p.offset, first,
                         int64_t(sizeof(float)) * n);
          }
        }
  }
}

void Trainer::finishShardedReduction() {
  std::vector<Transport::Request> pending;
  for (StageState &s : stages)
    for (int64_t b = 0; b < s.shard.buckets(); ++b)
      if (s.waitsForTiedSum(b))
        pending.push_back(scatterBucket(s, b));
  if (pending.empty())
    return;
  if (reductionBegin < 0)
    reductionBegin = now() - epoch;
  // Each rank's summed parts land where its parameters are.
  transport->waitAll(pending);
  reductionEnd = now() - epoch;
}

double Trainer::localGradNormSquared() const {
  // Each parameter once over the pipeline: a tied copy counts only on the
  // first stage that holds it. Data-parallel replicas of a reduced
  // gradient count once: on replica 0, or on the rank whose shard holds it.
  if (!sharded() && comm.dpRank() != 0)
    return 0;
  cpu::ProfileScope scope(cpu::KernelClass::Optimizer);
  double sq = 0;
  for (const StageState &s : stages)
    sq = device->sumSquares(s.grads.data(), s.normed, sq);
  return sq;
}

std::pair<int64_t, float> Trainer::routerFault() const {
  for (const StageState &s : stages) {
    const std::vector<RouterCheck> checks = s.routerChecks.download();
    for (size_t i = 0; i < checks.size(); ++i)
      if (checks[i].nonFinite) {
        // The MoE layers inside an MTP depth have no layer number (0):
        // they are told apart by a negative code.
        const int64_t layer = s.entry->program.layers[i].layer;
        return {layer > 0 ? layer : -1, checks[i].logit};
      }
  }
  return {0, 0.0f};
}

void Trainer::optimizerStep(int64_t step, double lr, double clipScale) {
  cpu::ProfileScope scope(cpu::KernelClass::Optimizer);
  const TrainingConfig &t = artifact.training;
  const double b1 = t.beta1, b2 = t.beta2;
  const double c1 = 1.0 - std::pow(b1, double(step)),
               c2 = 1.0 - std::pow(b2, double(step));
  const AdamWStep a{
      lr, b1, b2, t.eps, c1, c2, float(1.0 - lr * t.weightDecay), clipScale};
  for (StageState &s : stages)
    for (int64_t b = 0; b < s.shard.buckets(); ++b) {
      // The moments hold the rank's part of each bucket one after another
      // (all of the stage when the state is not sharded).
      device->adamw(a, s.updated[size_t(b)], s.params.data(), s.grads.data(),
                    s.adamM.data(), s.adamV.data(),
                    s.shard.ownBegin(b) - s.shard.momentBegin(b));
      // Every replica gets the updated bucket, under the next bucket's
      // update; the stage's next forward waits for them, so the gathers
      // overlap what runs before it.
      if (sharded() && s.working.size())
        gatherWorkingCopy(s, b);
      else if (sharded())
        s.paramGather.push_back(gatherBucket(s, s.params.data(), b));
    }
  mainWeightsChanged();
  // A gathered working copy is made from the new weights already.
  for (StageState &s : stages)
    if (s.gatheringWorking)
      s.workingStale = false;
}

void Trainer::gatherWorkingCopy(StageState &s, int64_t bucket) {
  // This rank's part of the bucket as bf16 (rounded as refreshWorkingCopy
  // rounds), put at its place in the gradient buffer read as bf16: float
  // i's bf16 copy at byte 2i. The gradients are spent until the next step,
  // which zeroes them only after the gathers (awaitParameters), and a
  // bucket's bf16 image lies within the buckets up to its own, so the
  // later buckets' gradients, still to be read by their update, are intact.
  const int64_t at = s.shard.ownBegin(bucket), n = s.shard.partFloats(bucket);
  float *mine = s.working.data() + at;
  device->copy(mine, s.params.data() + at, int64_t(sizeof(float)) * n);
  device->packBf16(mine, n);
  auto *bytes = reinterpret_cast<char *>(s.grads.data());
  device->copy(bytes + 2 * at, mine, 2 * n);
  s.paramGather.push_back(transport->iallgatherDp(
      bytes + 2 * s.shard.bucketBegin(bucket), n, DType::BF16));
  s.gatheringWorking = true;
}

int64_t Trainer::peakTensorBytes() const { return device->peakBytes(); }

std::vector<float> Trainer::fullParameters(StageState &s) {
  std::vector<float> params = s.params.download();
  if (!sharded())
    return comm.dpRank() == 0 ? params : std::vector<float>();
  // Each rank's fp32 main weights are current in its own parts (a bf16 run
  // gathers only the bf16 working copy).
  return gatherShards(s, s.shard.shardOf(params));
}

std::vector<float> Trainer::gatherShards(const StageState &s,
                                         const std::vector<float> &mine) {
  const int64_t n = s.shard.shardFloats();
  std::vector<float> all(comm.dpRank() == 0 ? size_t(n * comm.dpSize()) : 0);
  comm.gatherDp(mine.data(), n, all.data());
  return comm.dpRank() == 0 ? s.shard.wholeOf(all) : std::vector<float>();
}

std::vector<float> Trainer::fullMoment(StageState &s, const Buffer &moment) {
  std::vector<float> shard = moment.download();
  if (!sharded())
    return shard;
  return gatherShards(s, shard);
}

int64_t Trainer::globalBatch() const {
  if (artifact.packing.enabled)
    return artifact.packing.globalBatchSize;
  return comm.dpSize() * artifact.microbatches *
         artifact.training.microBatchSize;
}

void agreeAcrossRanks(Comm &comm, const std::string &error,
                      const std::string &what) {
  std::vector<double> failed = comm.allgather({error.empty() ? 0.0 : 1.0});
  bool any = false;
  for (double f : failed)
    any |= f != 0;
  if (!any)
    return;
  // Rank 0 lists each distinct message once with the ranks that raised it.
  std::vector<std::string> messages = comm.gatherToRoot(error);
  std::vector<std::pair<std::string, std::vector<size_t>>> distinct;
  for (size_t r = 0; r < messages.size(); ++r) {
    std::string m = messages[r];
    if (m.empty())
      continue;
    if (m.rfind("error: ", 0) == 0)
      m = m.substr(7);
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const auto &d) { return d.first == m; });
    if (it == distinct.end())
      distinct.push_back({m, {r}});
    else
      it->second.push_back(r);
  }
  std::string text = what;
  for (const auto &[m, ranks] : distinct)
    text += fmt::format("\n[rank{} {}] {}", ranks.size() > 1 ? "s" : "",
                        fmt::join(ranks, ","), m);
  throw CollectiveError(text);
}

void onEveryRank(Comm &comm, const std::string &what,
                 const std::function<void()> &work) {
  if (!comm.distributed())
    return work();
  std::string error;
  try {
    work();
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error, what);
}

/// The metadata a checkpoint of `artifact`'s run at `step` carries.
static CheckpointInfo checkpointInfoOf(const Artifact &artifact, int64_t step,
                                       int64_t globalBatch) {
  CheckpointInfo info;
  info.step = step;
  info.lrDecaySteps = artifact.training.decayEnd();
  info.globalBatch = globalBatch;
  info.consumedSamples = step * info.globalBatch;
  info.seed = artifact.training.seed;
  info.model = artifact.model.name;
  info.pattern = artifact.model.pattern;
  info.modelConfig = modelJson(artifact.model).dump();
  info.layout = fmt::format("pp={},vpp={},dp={},schedule={},microbatches={}",
                            artifact.pp, artifact.vpp, artifact.dp,
                            schedule::scheduleName(artifact.schedule),
                            artifact.microbatches);
  return info;
}

void Trainer::save(const std::string &root, int64_t step) {
  const CheckpointInfo info = checkpointInfoOf(artifact, step, globalBatch());
  const std::string name = stepDirectoryName(step), dir = root + "/" + name;
  const std::string what =
      fmt::format("error: saving the checkpoint of step {} to '{}' failed; "
                  "the previous checkpoint is intact",
                  step, dir);
  std::string error;
  // Data-parallel replicas hold the same parameters: replica 0 writes
  // them, with the moments gathered from every shard when sharded (the
  // file is the same either way).
  std::vector<std::vector<float>> host; // alive until write()
  for (StageState &s : stages) {
    awaitParameters(s);
    host.push_back(fullParameters(s));
    host.push_back(fullMoment(s, s.adamM));
    host.push_back(fullMoment(s, s.adamV));
    // A NaN saved would become `latest`, and every resume would start from
    // it: the last good checkpoint stays latest instead.
    // (Only the replicas that write hold them: the others' are empty.)
    const std::vector<float> &params = host[host.size() - 3];
    const std::string bad = params.size() < size_t(s.entry->numParams)
                                ? std::string()
                                : nonFiniteParameter(*s.entry, params);
    if (!bad.empty() && error.empty())
      error = fmt::format(
          "step {}: parameter '{}' holds a NaN or infinite value; no "
          "checkpoint is saved for it\nhelp: the update diverged: lower "
          "training.lr or raise warmup_steps, and check the state it started "
          "from (--resume, --init-from)",
          step, bad);
  }
  if (comm.rank() == 0 && error.empty())
    for (const std::string &d : {root, dir})
      if (::mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
        error = fmt::format("cannot create '{}': {}", d, std::strerror(errno));
        break;
      }
  agreeAcrossRanks(comm, error, what);
  std::string written; // "FILE BYTES CHECKSUM" on the ranks that write
  if (comm.dpRank() == 0) {
    SafeTensorsWriter w;
    std::set<std::string> seen;
    for (size_t i = 0; i < stages.size(); ++i) {
      StageState &s = stages[i];
      const float *params = host[3 * i].data();
      const float *m = host[3 * i + 1].data();
      const float *v = host[3 * i + 2].data();
      for (const ParamEntry &p : s.entry->params) {
        if (!seen.insert(p.name).second)
          continue;
        w.add(p.name, p.shape, params + p.offset);
        w.add("optimizer.exp_avg." + p.name, p.shape, m + p.offset);
        w.add("optimizer.exp_avg_sq." + p.name, p.shape, v + p.offset);
      }
    }
    for (auto &[k, v] : info.metadata())
      w.metadata(k, v);
    try {
      WrittenFile f = w.write(fmt::format("{}/pp{}.safetensors", dir, ppRank));
      written =
          fmt::format("pp{}.safetensors {} {}", ppRank, f.bytes, f.checksum);
    } catch (const RuntimeError &e) {
      error = e.what();
    }
  }
  agreeAcrossRanks(comm, error, what);
  // Each writer's file size and checksum, for the index.
  std::vector<std::string> writtenByRank = comm.gatherToRoot(written);
  if (comm.rank() == 0) {
    std::map<std::string, WrittenFile> files;
    for (const std::string &line : writtenByRank) {
      char name[64] = {0}, checksum[128] = {0};
      unsigned long long bytes = 0;
      if (std::sscanf(line.c_str(), "%63s %llu %127s", name, &bytes,
                      checksum) == 3)
        files[name] = {checksum, bytes};
    }
    std::map<std::string, std::string> weightMap;
    for (const StageEntry &e : artifact.stages)
      for (const ParamEntry &p : e.params) {
        std::string file = fmt::format("pp{}.safetensors", e.ppRank);
        for (const std::string &prefix :
             {"", "optimizer.exp_avg.", "optimizer.exp_avg_sq."})
          weightMap.emplace(prefix + p.name, file);
      }
    try {
      writeCheckpointIndex(dir, info, weightMap, files, artifact.pp,
                           artifact.vpp, artifact.dp, artifact.schedule,
                           artifact.microbatches);
      markLatest(root, name);
    } catch (const RuntimeError &e) {
      error = e.what();
    }
  }
  agreeAcrossRanks(comm, error, what);
}

int64_t Trainer::resume(const std::string &path) {
  std::string error;
  int64_t step = 0;
  try {
    CheckpointReader ckpt(path);
    const CheckpointInfo &info = ckpt.info();
    const TrainingConfig &t = artifact.training;
    // The layers must match; where the stage boundaries fall may not.
    auto layers = [](std::string p) {
      p.erase(std::remove(p.begin(), p.end(), '|'), p.end());
      return p;
    };
    if (info.model != artifact.model.name ||
        layers(info.pattern) != layers(artifact.model.pattern))
      throw RuntimeError(fmt::format(
          "checkpoint '{}' is of model '{}' ({}), this artifact of '{}' "
          "({})\nhelp: resume with the spec that wrote it",
          ckpt.location(), info.model, layers(info.pattern),
          artifact.model.name, layers(artifact.model.pattern)));
    if (info.globalBatch != globalBatch() || info.seed != t.seed)
      throw RuntimeError(fmt::format(
          "checkpoint '{}' was trained with global batch {} and seed {}, "
          "this run has {} and {}; the data order would change\nhelp: keep "
          "dp x microbatches x micro_batch_size and the seed of the run that "
          "saved it (pp, vpp and the schedule may change)",
          ckpt.location(), info.globalBatch, info.seed, globalBatch(), t.seed));
    if (info.step >= t.steps)
      throw RuntimeError(fmt::format(
          "checkpoint '{}' is at step {}, and this run ends at step {}\n"
          "help: pass --steps N with N > {}",
          ckpt.location(), info.step, t.steps, info.step));
    // Every rank reads all of its stages' state and keeps its shard of
    // the moments: a checkpoint resumes on any dp, sharded or not.
    for (StageState &s : stages) {
      awaitParameters(s);
      const size_t n = size_t(s.params.size());
      std::vector<float> w(n, 0.0f), m(n, 0.0f), v(n, 0.0f);
      for (const ParamEntry &p : s.entry->params) {
        ckpt.read(p.name, p.shape, w.data() + p.offset);
        ckpt.read("optimizer.exp_avg." + p.name, p.shape, m.data() + p.offset);
        ckpt.read("optimizer.exp_avg_sq." + p.name, p.shape,
                  v.data() + p.offset);
        checkOptimizerState(ckpt.location(), p, w.data(), m.data(), v.data());
      }
      s.params.upload(w.data(), s.params.size());
      s.adamM.upload(s.shard.shardOf(m).data(), s.shard.shardFloats());
      s.adamV.upload(s.shard.shardOf(v).data(), s.shard.shardFloats());
    }
    mainWeightsChanged();
    step = info.step;
    resumedDecayEnd = info.lrDecaySteps;
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error,
                   fmt::format("error: cannot resume from '{}'", path));
  return step;
}

void Trainer::initFrom(const std::string &path) {
  std::string error;
  try {
    CheckpointReader ckpt(path);
    auto layers = [](std::string p) {
      p.erase(std::remove(p.begin(), p.end(), '|'), p.end());
      return p;
    };
    const std::string theirs = layers(ckpt.info().pattern);
    if (!theirs.empty() && theirs != layers(artifact.model.pattern))
      throw RuntimeError(fmt::format(
          "'{}' holds a model of layers {}, and this one has {}\nhelp: start "
          "from weights of the same pattern (stage boundaries may differ)",
          ckpt.location(), theirs, layers(artifact.model.pattern)));
    for (StageState &s : stages) {
      awaitParameters(s);
      std::vector<float> w = s.params.download();
      for (const ParamEntry &p : s.entry->params)
        ckpt.read(p.name, p.shape, w.data() + p.offset);
      s.params.upload(w.data(), s.params.size());
    }
    mainWeightsChanged();
  } catch (const RuntimeError &e) {
    error = e.what();
  }
  agreeAcrossRanks(comm, error,
                   fmt::format("error: cannot take the initial weights from "
                               "'{}'",
                               path));
}

double Trainer::mtpObjective(const std::vector<double> &depthLosses) const {
  double sum = 0;
  for (double l : depthLosses)
    sum += l;
  return depthLosses.empty() ? 0.0
                             : artifact.model.mtpLossScalingFactor * sum /
                                   double(depthLosses.size());
}

void Trainer::dump(const std::string &path, int64_t step, double loss,
                   double aux, const std::vector<double> &mtp) {
  if (sharded()) {
    // Every rank's parts of summed gradients, for the whole gradient.
    std::vector<Transport::Request> gathers;
    for (StageState &s : stages) {
      awaitParameters(s);
      for (int64_t b = 0; b < s.shard.buckets(); ++b)
        gathers.push_back(gatherBucket(s, s.grads.data(), b));
    }
    transport->waitAll(gathers);
  }
  SafeTensorsWriter w;
  std::vector<std::vector<float>> host; // alive until write()
  for (StageState &s : stages) {
    host.push_back(s.params.download());
    const float *params = host.back().data();
    host.push_back(s.grads.download());
    const float *grads = host.back().data();
    for (const ParamEntry &p : s.entry->params) {
      w.add("param." + p.name, p.shape, params + p.offset);
      w.add("grad." + p.name, p.shape, grads + p.offset);
    }
  }
  const TrainingConfig &t = artifact.training;
  // The writer keeps pointers until write(): where each sample and each
  // microbatch starts (packed steps).
  std::vector<int32_t> starts, microbatchStarts;
  if (artifact.packing.enabled) {
    // This step's microbatches back to back, and where each sample starts.
    std::vector<int64_t> shape = {int64_t(tokens.size())};
    w.add("tokens", shape, tokens.data());
    w.add("labels", shape, labels.data());
    w.add("loss_mask", shape, lossMask.data());
    for (const Microbatch &mb : batch)
      for (size_t i = 0; i + 1 < mb.cuSeqlens.size(); ++i)
        starts.push_back(int32_t(mb.offset) + mb.cuSeqlens[i]);
    w.add("sample_starts", {int64_t(starts.size())}, starts.data());
    // Where each microbatch starts: the loss's normalisation needs them.
    for (const Microbatch &mb : batch)
      microbatchStarts.push_back(int32_t(mb.offset));
    w.add("microbatch_starts", {int64_t(microbatchStarts.size())},
          microbatchStarts.data());
  } else {
    std::vector<int64_t> shape = {artifact.microbatches, t.microBatchSize,
                                  t.seqLength};
    w.add("tokens", shape, tokens.data());
    w.add("labels", shape, labels.data());
  }
  w.metadata("step", std::to_string(step));
  w.metadata("loss", fmt::format("{:.9g}", loss));
  w.metadata("aux_loss", fmt::format("{:.9g}", aux));
  for (size_t d = 0; d < mtp.size(); ++d)
    w.metadata(fmt::format("mtp_{}_loss", d + 1),
               fmt::format("{:.9g}", mtp[d]));
  if (!mtp.empty())
    w.metadata("mtp_loss", fmt::format("{:.9g}", mtpObjective(mtp)));
  w.write(path);
}

StepStats Trainer::step(int64_t step, const std::string &dumpPath) {
  auto start = std::chrono::steady_clock::now();
  for (StageState &s : stages)
    if (!s.gatheringWorking) // zeroed once its gather is in
      device->zero(s.grads.data(), s.grads.size());
  StepStats st;
  st.step = step;
  device->startPeakWindow();
  reductionBegin = -1;
  // Fault injection for the tests (docs/runtime.md): this rank dies at the
  // start of a step, or a step's loss turns into NaN.
  if (faultKillRank == comm.rank() && faultKillStep == step)
    std::raise(SIGKILL);
  double loss = 0, aux = 0;
  std::vector<double> mtp;
  if (artifact.packing.enabled)
    loadPackedBatch(step, st);
  else
    loadBatch(step, st);
  stageBatch();
  bucketsInBackward = 0;
  st.sentBytes = runProgram(loss, aux, mtp);
  st.bucketsInBackward = bucketsInBackward;
  if (faultNanStep == step)
    loss = std::nan("");
  reduceTiedGradients();
  if (sharded())
    finishShardedReduction();
  if (reductionBegin >= 0)
    lastTimings.push_back({"dp gradient reduction",
                           schedule::kDpReductionCategory, reductionBegin,
                           reductionEnd, -1, -1, /*overlapping=*/true});
  if (!dumpPath.empty())
    dump(dumpPath, step, loss, aux, mtp);
  // Loss, aux loss, squared norm and router fault of every rank, added in
  // rank order so every rank computes the same bits.
  const auto [faultLayer, faultLogit] = routerFault();
  std::vector<double> mine = {loss, aux, localGradNormSquared(),
                              double(faultLayer), faultLogit};
  mine.insert(mine.end(), mtp.begin(), mtp.end());
  const size_t per = mine.size();
  std::vector<double> all = comm.allgather(mine);
  stopOnRouterFault(step, all, per);
  double sq = 0;
  st.mtpLosses.assign(mtp.size(), 0.0);
  for (size_t r = 0; r < all.size(); r += per) {
    st.loss += all[r];
    st.auxLoss += all[r + 1];
    sq += all[r + 2];
    for (size_t d = 0; d < mtp.size(); ++d)
      st.mtpLosses[d] += all[r + kGathered + d];
  }
  st.mtpLoss = mtpObjective(st.mtpLosses);
  st.gradNorm = std::sqrt(sq);
  if (!std::isfinite(st.loss) || !std::isfinite(st.gradNorm))
    throw CollectiveError(fmt::format(
        "error: step {}: the loss is {} and the gradient norm {}; training "
        "diverged (no update was applied; the last checkpoint is kept)\n"
        "help: lower training.lr or raise warmup_steps",
        step, st.loss, st.gradNorm));
  const TrainingConfig &t = artifact.training;
  double clip = 1.0;
  if (t.gradClip > 0) {
    double coeff = t.gradClip / (st.gradNorm + 1e-6);
    if (coeff < 1.0)
      clip = coeff;
  }
  st.lr = learningRate(t, step);
  const double optimizerBegin = now() - epoch;
  optimizerStep(step, st.lr, clip);
  lastTimings.push_back({"optimizer step", schedule::kOptimizerCategory,
                         optimizerBegin, now() - epoch});
  st.liveTensorBytes = device->liveBytes();
  st.stepPeakTensorBytes = device->windowPeakBytes();
  st.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  // The global batch's real tokens: every data-parallel replica's.
  st.tokensPerSecond = double(st.tokens) / st.seconds;
  return st;
}

} // namespace hypipe::rt
