//===- Trainer.cpp - one rank's training step, composed of its parts ------===//

#include "runtime/exec/Trainer.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace hypipe::rt {

namespace {

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
  const CommKind requested = artifact.comm;
  CommKind kind = CommKind::Mpi;
  // One process sends nothing: no communicator to set up.
  if (comm.size() == 1 && requested == CommKind::Auto)
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
    kind = resolveComm(requested, cuda, comm.nodeSize(), gpus);
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

/// This rank's tensor-parallel group over the run's transport: each
/// collective started and waited for (on a GPU the wait orders the kernels
/// after it behind it).
class TransportGroup final : public TensorParallelGroup {
public:
  /// `expert`: the MoE layers' tp-ep group (Comm::expertGroup) instead.
  TransportGroup(Transport &transport, const Comm &comm, bool expert = false)
      : transport(transport), comm(comm), expert(expert) {}
  int64_t size() const override {
    return expert ? comm.expertSize() : comm.tpSize();
  }
  int64_t rank() const override {
    return expert ? comm.expertRank() : comm.tpRank();
  }
  void run(CollectiveKind kind, float *data, int64_t count) override {
    std::vector<Transport::Request> r = {
        expert ? transport.iexpertParallel(kind, data, count, DType::F32)
               : transport.itensorParallel(kind, data, count, DType::F32)};
    transport.waitAll(r);
  }
  void allToAll(const float *send, const std::vector<int64_t> &sendCounts,
                float *recv, const std::vector<int64_t> &recvCounts) override {
    std::vector<Transport::Request> r = {
        expert ? transport.iallToAllExpert(send, sendCounts, recv, recvCounts,
                                           DType::F32)
               : transport.iallToAllTp(send, sendCounts, recv, recvCounts,
                                       DType::F32)};
    transport.waitAll(r);
  }

private:
  Transport &transport;
  const Comm &comm;
  bool expert;
};

/// The distributed optimizer's cut of a stage's buffers (every bucket in
/// dp equal parts, part d's moments on dp rank d), or one part of all.
ShardLayout shardLayoutOf(const StageEntry &e, const Comm &comm, bool sharded,
                          int64_t bucketFloats) {
  return sharded ? ShardLayout(e.numParams, comm.dpSize(), comm.dpRank(),
                               bucketFloats)
                 : ShardLayout(e.numParams, 1, 0, e.numParams);
}

} // namespace

Trainer::Trainer(Artifact &artifact, Comm &comm, TrainingData data,
                 int64_t bucketFloats, TrainingData validation)
    : artifact(artifact), comm(comm) {
  bucketFloats = std::max<int64_t>(1, bucketFloats);
  const CommKind kind = chooseTransport(artifact, comm);
  artifact.comm = kind; // as resolved
  device = openDevice(artifact, comm);
  transport = makeTransport(kind, comm, *device);
  pool = std::make_unique<ActivationPool>(*device);
  const bool sharded = usesDistributedOptimizer(artifact, comm);
  if (artifact.tp > 1)
    tensorParallel = std::make_unique<TransportGroup>(*transport, comm);
  if (comm.expertReplicas() > 1)
    expertParallel = std::make_unique<TransportGroup>(*transport, comm, true);
  const StageLinks links{*transport,
                         comm,
                         artifact.precision == TrainingPrecision::Bf16,
                         tensorParallel.get(),
                         expertParallel.get(),
                         artifact.savedFp32};
  for (StageEntry *e : artifact.stagesOf(comm.ppRank()))
    stages.emplace_back(*e, shardLayoutOf(*e, comm, sharded, bucketFloats),
                        artifact.training.seed, *device, links);
  batch = std::make_unique<StepBatch>(artifact, comm, *device, data);
  if (validation.stream || validation.samples)
    validationBatch =
        std::make_unique<StepBatch>(artifact, comm, *device, validation);
  gradSync = std::make_unique<GradientSync>(
      artifact, stages, *device, *transport, comm, sharded, bucketFloats);
  optimizer = std::make_unique<AdamWOptimizer>(artifact, stages, *device,
                                               *transport, comm, sharded,
                                               gradSync->replicaScratch());
  runtime = std::make_unique<ScheduleRuntime>(
      artifact, stages, *pool, *gradSync, *optimizer, *transport, comm);
  checkpointer = std::make_unique<Checkpointer>(artifact, stages, *optimizer,
                                                *transport, comm);

  if (const char *kill = std::getenv("HYPIPE_FAULT_KILL"))
    std::sscanf(kill, "%d:%ld", &faultKillRank, &faultKillStep);
  if (const char *nan = std::getenv("HYPIPE_FAULT_NAN_STEP"))
    faultNanStep = std::atol(nan);
  // The pipeline links the program uses (NCCL sets them up here).
  const auto [sendTo, receiveFrom] = runtime->pipelinePeers();
  if (comm.distributed())
    transport->connect(sendTo, receiveFrom);
  comm.barrier();
  runtime->startClock();
}

Trainer::~Trainer() {
  try {
    optimizer->finishParamSync();
  } catch (...) {
    // A hook ended the wait (the watchdog); nothing is left to finish.
  }
}

std::vector<Trainer::LayerTimes> Trainer::layerTimes() const {
  std::vector<LayerTimes> out;
  for (const Stage &s : stages) {
    LayerTimes t{&s.entry().program, s.layerSeconds(), s.passRuns()};
    t.seconds.resize(3 * s.entry().program.layers.size(), 0.0);
    out.push_back(std::move(t));
  }
  return out;
}

std::pair<int64_t, float> Trainer::routerFault() const {
  for (const Stage &s : stages)
    if (const auto fault = s.routerFault(); fault.first != 0)
      return fault;
  return {0, 0.0f};
}

double Trainer::mtpObjective(const std::vector<double> &depthLosses) const {
  double sum = 0;
  for (double l : depthLosses)
    sum += l;
  return depthLosses.empty() ? 0.0
                             : artifact.model.mtpLossScalingFactor * sum /
                                   double(depthLosses.size());
}

void Trainer::gatherStepTotals(StepStats &st, const StepLosses &losses) {
  // Loss, aux loss, squared norm and router fault of every rank, added in
  // rank order so every rank computes the same bits.
  // The ranks of a tensor-parallel group compute the same losses: tp rank
  // 0's count.
  const auto [faultLayer, faultLogit] = routerFault();
  const double once = comm.tpRank() == 0 ? 1.0 : 0.0;
  std::vector<double> mine = {once * losses.loss, once * losses.aux,
                              optimizer->localGradNormSquared(),
                              double(faultLayer), faultLogit};
  const std::vector<double> &mtp = losses.mtp;
  for (double l : mtp)
    mine.push_back(once * l);
  const size_t per = mine.size();
  std::vector<double> all = comm.allgather(mine);
  stopOnRouterFault(st.step, all, per);
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
        st.step, st.loss, st.gradNorm));
}

void Trainer::sumTensorParallelPartialGrads() {
  // With sequence parallelism each rank's norms saw its tp-th of the
  // tokens: the parameters every tensor-parallel rank holds whole (the
  // norms' weights) have partial gradients, summed over the group as
  // Megatron-LM's finalize_model_grads does. Sums commute, so after the
  // data-parallel reduction is as good as before it. A weight the heads
  // share (Gated DeltaNet's out norm) saw a rank's heads: summed with or
  // without sequence parallelism.
  if (comm.tpSize() == 1)
    return;
  std::vector<Transport::Request> sums;
  for (Stage &s : stages)
    for (const ParamEntry &p : s.entry().params)
      if (p.split == Split::None &&
          (artifact.sequenceParallel || p.sharedByHeads))
        sums.push_back(transport->itensorParallel(CollectiveKind::AllReduce,
                                                  s.grads().data() + p.offset,
                                                  p.numel, DType::F32));
  transport->waitAll(sums);
}

void Trainer::applyUpdate(StepStats &st) {
  const TrainingConfig &t = artifact.training;
  double clip = 1.0;
  if (t.gradClip > 0) {
    double coeff = t.gradClip / (st.gradNorm + 1e-6);
    if (coeff < 1.0)
      clip = coeff;
  }
  const int64_t samplesPerStep = globalBatch();
  st.lr = t.lrSchedule(samplesPerStep).at((st.step - 1) * samplesPerStep);
  const double optimizerBegin = runtime->secondsSinceStart();
  optimizer->step(st.step, st.lr, clip);
  runtime->record({"optimizer step", schedule::kOptimizerCategory,
                   optimizerBegin, runtime->secondsSinceStart()});
}

double Trainer::evaluate(int64_t first, int64_t batches) {
  double sum = 0;
  for (int64_t b = first; b < first + batches; ++b) {
    // StepBatch numbers its batches from 1, as steps.
    validationBatch->load(b + 1);
    StepLosses losses;
    runtime->runForward(*validationBatch, losses);
    // Added in rank order so every rank computes the same bits; the ranks
    // of a tensor-parallel group hold the same loss: tp rank 0's counts,
    // as in gatherStepTotals.
    const double once = comm.tpRank() == 0 ? 1.0 : 0.0;
    for (double loss : comm.allgather({once * losses.loss}))
      sum += loss;
  }
  return sum / double(batches);
}

StepStats Trainer::step(int64_t step, const std::string &dumpPath) {
  auto start = std::chrono::steady_clock::now();
  optimizer->zeroGrad();
  StepStats st;
  st.step = step;
  device->startPeakWindow();
  gradSync->startStep();
  // Fault injection for the tests (docs/runtime.md): this rank dies at the
  // start of a step, or a step's loss turns into NaN.
  if (faultKillRank == comm.rank() && faultKillStep == step)
    std::raise(SIGKILL);
  const StepBatch::Counts counts = batch->load(step);
  st.microbatches = counts.microbatches;
  st.tokens = counts.tokens;
  st.paddedTokens = counts.paddedTokens;
  StepLosses losses;
  st.sentBytes = runtime->run(*batch, losses);
  st.bucketsInBackward = gradSync->bucketsInBackward();
  if (faultNanStep == step)
    losses.loss = std::nan("");
  gradSync->finalizeModelGrads();
  sumTensorParallelPartialGrads();
  if (gradSync->reductionBegin() >= 0)
    runtime->record({"dp gradient reduction", schedule::kDpReductionCategory,
                     runtime->secondsSinceStart(gradSync->reductionBegin()),
                     runtime->secondsSinceStart(gradSync->reductionEnd()), -1,
                     -1, /*overlapping=*/true});
  if (!dumpPath.empty())
    checkpointer->dump(dumpPath, step, losses, mtpObjective(losses.mtp),
                       *batch);
  gatherStepTotals(st, losses);
  applyUpdate(st);
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
