//===- Stage.cpp - one pipeline stage of a rank: compute, transfers, slots ===//

#include "runtime/exec/Stage.h"

#include "runtime/comm/Comm.h"
#include "runtime/exec/Init.h"

#include <fmt/format.h>

#include <algorithm>

namespace hypipe::rt {

namespace {

/// Tags name the receiving stage, the microbatch and the direction, so a
/// transfer can only match its own receive.
int transferTag(int64_t receivingStage, int64_t mb, int64_t microbatches,
                bool backward) {
  return int(((receivingStage * microbatches + mb) * 2 + backward) % 32768);
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

} // namespace

Buffer ActivationPool::take(int64_t floats) {
  if (pool.empty() || pool.back().size() != floats)
    return Buffer(device, floats);
  Buffer b = std::move(pool.back());
  pool.pop_back();
  return b;
}

Stage::Stage(StageEntry &entry, const ShardLayout &layout, int64_t seed,
             Device &device, const StageLinks &links)
    : stageEntry(&entry), layout(layout), device(&device), links(links) {
  const int64_t floats = layout.bufferFloats();
  mainParams = Buffer(device, floats);
  gradients = Buffer(device, floats);
  workspace = Buffer(device, entry.workspaceFloats);
  if (entry.program.activations == DType::BF16)
    working = Buffer(device, floats);
  routerChecks = routerChecksFor(device, entry.program);
  if (entry.program.activations == DType::BF16 && !links.savedFp32)
    stash =
        std::make_unique<SavedStash>(device, entry.program, entry.savedFloats);
  else
    saved = MicrobatchBuffers(device, entry.savedFloats);
  const int64_t f32 = dtypeBytes(DType::F32);
  recomputed = MicrobatchBuffers(device, entry.program.recomputeBytes / f32);
  std::vector<float> init(entry.numParams, 0.0f);
  for (const ParamEntry &p : entry.params)
    initParameter(p, seed, init.data() + p.offset, links.comm.paramRanks(p),
                  links.comm.paramRank(p));
  mainParams.upload(init.data(), entry.numParams);
}

void Stage::run(StagePass pass, StageArgs &args) {
  if (measuring) {
    seconds.resize(3 * stageEntry->program.layers.size(), 0.0);
    args.layer_seconds = seconds.data();
    ++runs[size_t(pass)];
  }
  args.params = working.size() ? working.data() : mainParams.data();
  args.grads = gradients.data();
  args.workspace = workspace.data();
  args.router_checks = routerChecks.data();
  args.tensor_parallel = links.tensorParallel;
  args.expert_parallel = links.expertParallel;
  device->runStagePass(stageEntry->program, pass, args);
}

float *Stage::savedOf(int64_t mb, const StageArgs &args, bool fresh) {
  if (!stash)
    return fresh ? saved.take(mb) : saved.of(mb);
  const TokenShape t =
      packedTokens(stageEntry->program.tokens, args.cu_seqlens, args.num_seqs,
                   args.padded_tail, args.replica_tokens);
  return stash->open(mb, t, fresh);
}

void Stage::releaseSaved(int64_t mb) {
  if (stash)
    stash->release(mb);
  else
    saved.release(mb);
}

void Stage::refreshWorkingCopy() {
  if (!working.size() || !workingStale)
    return;
  device->roundToBf16(working.data(), mainParams.data(), mainParams.size());
  workingStale = false;
}

void Stage::forward(int64_t mb, StageArgs args, double scale, StepTensors &t,
                    ActivationPool &pool, StepLosses &losses,
                    bool forwardOnly) {
  const StageEntry &e = *stageEntry;
  const int64_t stage = e.index;
  args.saved = savedOf(mb, args, true);
  // The recomputed layers' tensors of a forward are dropped: a buffer
  // borrowed for its length (key -1-mb: no microbatch's).
  const int64_t borrowed = -1 - mb;
  if (!recomputed.empty())
    args.recomputed = recomputed.take(borrowed);
  if (!e.hasEmbedding)
    args.input = t.acts.at(tensorKey(stage - 1, mb)).data();
  refreshWorkingCopy();
  if (!e.hasHead)
    args.output = t.acts.emplace(tensorKey(stage, mb), pool.take(t.activation))
                      .first->second.data();
  std::vector<float> mtp(losses.mtp.size(), 0.0f);
  args.mtp_losses = mtp.data();
  run(StagePass::Forward, args);
  if (forwardOnly)
    releaseSaved(mb);
  if (!recomputed.empty())
    recomputed.release(borrowed);
  if (!e.hasEmbedding) {
    auto in = t.acts.find(tensorKey(stage - 1, mb));
    pool.giveBack(std::move(in->second));
    t.acts.erase(in);
  }
  if (e.hasHead)
    losses.loss += args.loss * scale;
  losses.aux += args.aux_loss * scale;
  if (e.hasHead)
    for (size_t d = 0; d < mtp.size(); ++d)
      losses.mtp[d] += mtp[d] * scale;
}

void Stage::backwardInput(int64_t mb, StageArgs args, StepTensors &t,
                          ActivationPool &pool) {
  const StageEntry &e = *stageEntry;
  const int64_t stage = e.index;
  args.saved = savedOf(mb, args, false);
  if (!recomputed.empty())
    args.recomputed = recomputed.take(mb);
  if (!e.hasHead)
    args.grad_output = t.grads.at(tensorKey(stage + 1, mb)).data();
  if (!e.hasEmbedding)
    args.grad_input =
        t.grads.emplace(tensorKey(stage, mb), pool.take(t.activation))
            .first->second.data();
  run(StagePass::BackwardInput, args);
  if (!e.hasHead) {
    auto in = t.grads.find(tensorKey(stage + 1, mb));
    pool.giveBack(std::move(in->second));
    t.grads.erase(in);
  }
}

void Stage::backwardWeight(int64_t mb, StageArgs args,
                           WeightGradientHook hook) {
  args.saved = savedOf(mb, args, false);
  if (!recomputed.empty())
    args.recomputed = recomputed.of(mb);
  args.weight_gradient_done = hook.done;
  args.weight_gradient_context = hook.context;
  run(StagePass::BackwardWeight, args);
  releaseSaved(mb);
  if (!recomputed.empty())
    recomputed.release(mb);
}

void Stage::send(const ActionEntry &a, StepTensors &t) {
  const bool backward = a.op == schedule::Op::SendB;
  auto &from = backward ? t.grads : t.acts;
  auto it = from.find(tensorKey(a.stage, a.microbatch));
  if (it == from.end())
    throw RuntimeError(fmt::format(
        "error: rank {} has nothing to send at '{}'\nhelp: the artifact's "
        "program is out of order; recompile it",
        stageEntry->ppRank, schedule::pytorchText(a)));
  t.sendBuffers.push_back(std::move(it->second));
  from.erase(it);
  float *data = t.sendBuffers.back().data();
  const int64_t n = t.activationFloats.at(size_t(a.microbatch));
  if (links.wireBf16)
    device->packBf16(data, n);
  t.sentBytes += n * dtypeBytes(links.wireBf16 ? DType::BF16 : DType::F32);
  t.sends.push_back(links.transport.isend(
      data, n, links.wireType(), links.comm.worldRankOf(a.peer),
      transferTag(backward ? a.stage - 1 : a.stage + 1, a.microbatch,
                  t.microbatches, backward)));
}

void Stage::receive(const ActionEntry &a, StepTensors &t,
                    ActivationPool &pool) {
  const bool backward = a.op == schedule::Op::RecvB;
  // Stored as if the producing stage had run here.
  const int64_t key =
      tensorKey(backward ? a.stage + 1 : a.stage - 1, a.microbatch);
  auto &into = backward ? t.grads : t.acts;
  Buffer &buffer = into.emplace(key, pool.take(t.activation)).first->second;
  // Posted here, waited for by the action that reads it (as PyTorch's
  // runtime and NCCL do; the simulator times receives the same way).
  (backward ? t.postedGrads : t.postedActs)[key].push_back(
      links.transport.irecv(
          buffer.data(), t.activationFloats.at(size_t(a.microbatch)),
          links.wireType(), links.comm.worldRankOf(a.peer),
          transferTag(a.stage, a.microbatch, t.microbatches, backward)));
}

bool Stage::awaitInput(const ActionEntry &a, StepTensors &t) {
  const bool forward = a.op == schedule::Op::F;
  if (!forward && a.op != schedule::Op::B && a.op != schedule::Op::I)
    return false;
  auto &posted = forward ? t.postedActs : t.postedGrads;
  const int64_t key =
      tensorKey(forward ? a.stage - 1 : a.stage + 1, a.microbatch);
  auto it = posted.find(key);
  if (it == posted.end())
    return false;
  links.transport.waitAll(it->second);
  posted.erase(it);
  if (links.wireBf16) {
    auto &into = forward ? t.acts : t.grads;
    device->unpackBf16(into.at(key).data(),
                       t.activationFloats.at(size_t(a.microbatch)));
  }
  return true;
}

std::pair<int64_t, float> Stage::routerFault() const {
  const std::vector<RouterCheck> checks = routerChecks.download();
  for (size_t i = 0; i < checks.size(); ++i)
    if (checks[i].nonFinite) {
      // The MoE layers inside an MTP depth have no layer number (0): they
      // are told apart by a negative code.
      const int64_t layer = stageEntry->program.layers[i].layer;
      return {layer > 0 ? layer : -1, checks[i].logit};
    }
  return {0, 0.0f};
}

} // namespace hypipe::rt
