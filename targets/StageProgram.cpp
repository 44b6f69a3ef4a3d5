//===- StageProgram.cpp - a planned stage as its kernel program -----------===//

#include "targets/StageProgram.h"

namespace hypipe {
namespace {

using rt::KernelCall;
using rt::LayerKind;
using rt::Slot;
using rt::TensorRange;

TensorRange floats(int64_t offset, int64_t count) {
  return {4 * offset, 4 * count, rt::DType::F32};
}

/// Where the tensors an MTP depth shares with the model sit in the stage's
/// parameters: the output layer (the head's) and the embedding table.
void placeSharedTensors(const cpu::StagePlan &plan, rt::StageProgram &p) {
  bool mtp = false;
  int64_t output = -1, table = -1, vocab = 0;
  for (const cpu::KernelLayer &l : plan.layers) {
    mtp |= l.kind == cpu::KernelKind::MtpInput;
    int64_t at = l.paramOffset;
    for (const rt::ParamSpec &param : l.params) {
      if (l.kind == cpu::KernelKind::Head &&
          param.name != "decoder.final_norm.weight") {
        output = at;
        vocab = std::get<rt::HeadShape>(l.shape).vocab;
      }
      if (table < 0 &&
          l.parameterName(param) == "embedding.word_embeddings.weight")
        table = at;
      at += param.numel();
    }
  }
  if (!mtp)
    return;
  p.sharedOutput = floats(output, vocab * plan.hidden);
  p.sharedTable = floats(table, vocab * plan.hidden);
}

} // namespace

rt::StageProgram buildStageProgram(const cpu::StagePlan &plan) {
  rt::StageProgram p;
  p.target = plan.target;
  p.tokens = plan.tokens;
  p.hidden = plan.hidden;
  p.paramBytes = 4 * plan.paramFloats;
  p.savedBytes = 4 * plan.savedFloats;
  p.workspaceBytes = 4 * plan.workspaceFloats;
  const int64_t act = plan.tokens.tokens() * plan.hidden;
  // The workspace: two activations the layers ping-pong between, then the
  // scratch the largest layer needs.
  p.act0 = floats(0, act);
  p.act1 = floats(act, act);
  p.scratch = floats(2 * act, plan.workspaceFloats - 2 * act);
  for (const cpu::KernelLayer &l : plan.layers)
    p.layers.push_back({l.kind, l.layer, l.shape,
                        floats(l.paramOffset, l.paramFloats),
                        floats(l.savedOffset, l.savedFloats)});
  placeSharedTensors(plan, p);
  const Slot acts[2] = {Slot::Act0, Slot::Act1};
  const int32_t n = int32_t(plan.layers.size());

  // Forward: the first layer reads the stage input, the last writes the
  // stage output; the head and an MTP depth's output end in a loss.
  Slot x = Slot::Input;
  int cur = 0;
  bool wroteOutput = false;
  for (int32_t i = 0; i < n; ++i) {
    const LayerKind kind = p.layers[size_t(i)].kind;
    const bool lastMixer = !plan.hasHead && i + 1 == n;
    const Slot dst = lastMixer ? Slot::Output : acts[cur];
    if (kind == LayerKind::Head || kind == LayerKind::MtpOutput) {
      p.forward.push_back({i, x, Slot::None});
      continue;
    }
    const bool readsX =
        kind != LayerKind::Embedding && kind != LayerKind::MtpInput;
    p.forward.push_back({i, readsX ? x : Slot::None, dst});
    wroteOutput |= lastMixer;
    x = dst;
    cur ^= 1;
  }
  if (!plan.hasHead && !wroteOutput)
    p.forward.push_back({-1, x, Slot::Output});

  // Input gradients, layers in reverse: the head and an MTP depth's output
  // start from their loss, the first layer writes the stage's input
  // gradient.
  Slot dy = Slot::GradOutput;
  cur = 0;
  bool wroteGradInput = false;
  for (int32_t i = n; i-- > 0;) {
    const LayerKind kind = p.layers[size_t(i)].kind;
    const bool firstMixer = !plan.hasEmbedding && i == 0;
    const Slot dst = firstMixer ? Slot::GradInput : acts[cur];
    if (kind == LayerKind::Embedding) {
      p.backwardInput.push_back({i, dy, Slot::None});
      continue;
    }
    const bool startsFromLoss =
        kind == LayerKind::Head || kind == LayerKind::MtpOutput;
    p.backwardInput.push_back({i, startsFromLoss ? Slot::None : dy, dst});
    wroteGradInput |= firstMixer;
    dy = dst;
    cur ^= 1;
  }
  if (!plan.hasEmbedding && !wroteGradInput)
    p.backwardInput.push_back({-1, dy, Slot::GradInput});

  for (int32_t i = n; i-- > 0;)
    p.backwardWeight.push_back({i, Slot::None, Slot::None});
  return p;
}

} // namespace hypipe
