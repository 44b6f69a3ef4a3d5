//===- StageInterpreter.h - run a stage's kernel program ------------------===//
//
// The one composition of a stage's layers, written once over a target's
// kernels and instantiated for each target (StageRunners.cpp: the CPU
// kernels; the CUDA kernels where hypipe is built with them). `Kernels`
// supplies the layer entry points of runtime/kernels/<target>/Layers.h
// under their own names, `Tokens` and `tokens(capacity, args)` for the
// call's token shape, and `copy` for a device copy of floats.
//
// The calls run exactly what the program lists, in order; what a layer
// kind adds to the stage's outputs (the language-model loss, MoE's
// load-balancing loss, an MTP depth's loss and the normed hidden states it
// hands to the next depth) is the layer's recipe, here once.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_EXEC_STAGEINTERPRETER_H
#define HYPIPE_RUNTIME_EXEC_STAGEINTERPRETER_H

#include "runtime/exec/StageArgs.h"
#include "runtime/exec/StageRunner.h"
#include "runtime/formats/StageProgram.h"

#include "runtime/kernels/ForwardTo.h"

#include <chrono>

/// The layer entry points a target's `Kernels` supplies, by name: each
/// target forwards them to its Layers.h with
/// `HYPIPE_STAGE_KERNELS(HYPIPE_FORWARD_KERNEL)` inside its struct.
#define HYPIPE_STAGE_KERNELS(X)                                                \
  X(embeddingForward)                                                          \
  X(embeddingBackwardInput)                                                    \
  X(embeddingBackwardWeight)                                                   \
  X(mambaForward)                                                              \
  X(mambaBackwardInput)                                                        \
  X(mambaBackwardWeight)                                                       \
  X(attentionForward)                                                          \
  X(attentionBackwardInput)                                                    \
  X(attentionBackwardWeight)                                                   \
  X(mlpForward)                                                                \
  X(mlpBackwardInput)                                                          \
  X(mlpBackwardWeight)                                                         \
  X(moeForward)                                                                \
  X(moeBackwardInput)                                                          \
  X(moeBackwardWeight)                                                         \
  X(headForward)                                                               \
  X(headNormed)                                                                \
  X(headBackwardInput)                                                         \
  X(headBackwardWeight)                                                        \
  X(mtpInputForward)                                                           \
  X(mtpInputBackwardInput)                                                     \
  X(mtpInputBackwardWeight)                                                    \
  X(mtpOutputForward)                                                          \
  X(mtpNormed)                                                                 \
  X(mtpOutputBackwardInput)                                                    \
  X(mtpOutputBackwardWeight)

namespace hypipe::rt {

template <class Kernels> class StageInterpreter {
public:
  StageInterpreter(const StageProgram &program, StageArgs &args)
      : p(program), a(args),
        t(Kernels::tokens(program.tokens, args.cu_seqlens,
                          args.cu_seqlens_device, args.num_seqs)),
        act{a.workspace + p.act0.elementOffset(),
            a.workspace + p.act1.elementOffset()},
        ws(a.workspace + p.scratch.elementOffset()) {}

  void forward() {
    a.aux_loss = 0.0f;
    const float *h = nullptr; // normed hidden states for the next MTP depth
    for (const KernelCall &c : p.forward) {
      if (c.layer < 0) {
        Kernels::copy(out(c.out), in(c.in), activationFloats());
        continue;
      }
      const LayerTimer timer(a, p, 0, c.layer);
      const ProgramLayer &l = p.layers[size_t(c.layer)];
      const float *params = a.params + l.params.elementOffset();
      float *saved = a.saved + l.saved.elementOffset();
      const float *x = c.in == Slot::None ? nullptr : in(c.in);
      float *y = c.out == Slot::None ? nullptr : out(c.out);
      switch (l.kind) {
      case LayerKind::Embedding:
        Kernels::embeddingForward(p.activations, shape<EmbeddingShape>(l), t,
                                  params, a.tokens, y, saved);
        break;
      case LayerKind::Mamba:
        Kernels::mambaForward(p.activations, shape<MambaShape>(l), t, params, x,
                              y, saved, ws);
        break;
      case LayerKind::Attention:
        Kernels::attentionForward(p.activations, shape<AttentionShape>(l), t,
                                  params, x, y, saved, ws);
        break;
      case LayerKind::Mlp:
        Kernels::mlpForward(p.activations, shape<MlpShape>(l), t, params, x, y,
                            saved, ws);
        break;
      case LayerKind::Moe:
        a.aux_loss +=
            Kernels::moeForward(p.activations, shape<MoeShape>(l), t, params, x,
                                y, saved, ws, a.router_checks + c.layer);
        break;
      case LayerKind::Head:
        a.loss =
            Kernels::headForward(p.activations, shape<HeadShape>(l), t, params,
                                 x, a.labels, a.loss_mask, saved, ws);
        if (!p.sharedOutput.empty())
          h = Kernels::headNormed(shape<HeadShape>(l), t, saved);
        break;
      case LayerKind::MtpInput:
        Kernels::mtpInputForward(p.activations, shape<MtpInputShape>(l), t,
                                 params,
                                 a.params + p.sharedTable.elementOffset(),
                                 a.tokens, h, y, saved, ws);
        break;
      case LayerKind::MtpOutput: {
        const auto &s = shape<MtpOutputShape>(l);
        a.mtp_losses[s.depth - 1] +=
            Kernels::mtpOutputForward(p.activations, s, t, params,
                                      a.params + p.sharedOutput.elementOffset(),
                                      x, a.labels, a.loss_mask, saved, ws);
        h = Kernels::mtpNormed(s, t, saved);
        break;
      }
      }
    }
  }

  void backwardInput() {
    const float *dh = nullptr; // gradient of the normed hidden states
    for (const KernelCall &c : p.backwardInput) {
      if (c.layer < 0) {
        Kernels::copy(out(c.out), in(c.in), activationFloats());
        continue;
      }
      const LayerTimer timer(a, p, 1, c.layer);
      const ProgramLayer &l = p.layers[size_t(c.layer)];
      const float *params = a.params + l.params.elementOffset();
      float *grads = a.grads + l.params.elementOffset();
      float *saved = a.saved + l.saved.elementOffset();
      const float *dy = c.in == Slot::None ? nullptr : in(c.in);
      float *dx = c.out == Slot::None ? nullptr : out(c.out);
      switch (l.kind) {
      case LayerKind::Embedding:
        Kernels::embeddingBackwardInput(p.activations, shape<EmbeddingShape>(l),
                                        t, dy, saved);
        break;
      case LayerKind::Mamba:
        Kernels::mambaBackwardInput(p.activations, shape<MambaShape>(l), t,
                                    params, grads, saved, dy, dx, ws);
        break;
      case LayerKind::Attention:
        Kernels::attentionBackwardInput(p.activations, shape<AttentionShape>(l),
                                        t, params, grads, saved, dy, dx, ws);
        break;
      case LayerKind::Mlp:
        Kernels::mlpBackwardInput(p.activations, shape<MlpShape>(l), t, params,
                                  grads, saved, dy, dx, ws);
        break;
      case LayerKind::Moe:
        Kernels::moeBackwardInput(p.activations, shape<MoeShape>(l), t, params,
                                  grads, saved, dy, dx, ws, a.loss_scale);
        break;
      case LayerKind::Head:
        if (p.sharedOutput.empty())
          Kernels::headBackwardInput(p.activations, shape<HeadShape>(l), t,
                                     params, grads, saved, a.loss_scale, dx,
                                     ws);
        else
          Kernels::headBackwardInput(p.activations, shape<HeadShape>(l), t,
                                     params, grads, saved, a.loss_scale, dh, dx,
                                     ws);
        break;
      case LayerKind::MtpOutput:
        Kernels::mtpOutputBackwardInput(
            p.activations, shape<MtpOutputShape>(l), t, params, grads,
            a.params + p.sharedOutput.elementOffset(), saved, a.loss_scale, dh,
            dx, ws);
        break;
      case LayerKind::MtpInput:
        Kernels::mtpInputBackwardInput(p.activations, shape<MtpInputShape>(l),
                                       t, params, grads, saved, dy, dx, ws);
        dh = dx;
        break;
      }
    }
  }

  void backwardWeight() {
    for (const KernelCall &c : p.backwardWeight) {
      backwardWeightCall(c);
      if (a.weight_gradient_done)
        a.weight_gradient_done(a.weight_gradient_context, c.layer);
    }
  }

private:
  void backwardWeightCall(const KernelCall &c) {
    const LayerTimer timer(a, p, 2, c.layer);
    const ProgramLayer &l = p.layers[size_t(c.layer)];
    float *grads = a.grads + l.params.elementOffset();
    float *saved = a.saved + l.saved.elementOffset();
    switch (l.kind) {
    case LayerKind::Embedding:
      Kernels::embeddingBackwardWeight(p.activations, shape<EmbeddingShape>(l),
                                       t, saved, grads);
      break;
    case LayerKind::Mamba:
      Kernels::mambaBackwardWeight(p.activations, shape<MambaShape>(l), t,
                                   saved, grads);
      break;
    case LayerKind::Attention:
      Kernels::attentionBackwardWeight(p.activations, shape<AttentionShape>(l),
                                       t, saved, grads);
      break;
    case LayerKind::Mlp:
      Kernels::mlpBackwardWeight(p.activations, shape<MlpShape>(l), t, saved,
                                 grads);
      break;
    case LayerKind::Moe:
      Kernels::moeBackwardWeight(p.activations, shape<MoeShape>(l), t, saved,
                                 grads);
      break;
    case LayerKind::Head:
      Kernels::headBackwardWeight(p.activations, shape<HeadShape>(l), t, saved,
                                  grads);
      break;
    case LayerKind::MtpInput:
      Kernels::mtpInputBackwardWeight(p.activations, shape<MtpInputShape>(l), t,
                                      saved, grads,
                                      a.grads + p.sharedTable.elementOffset());
      break;
    case LayerKind::MtpOutput:
      Kernels::mtpOutputBackwardWeight(
          p.activations, shape<MtpOutputShape>(l), t, saved,
          a.grads + p.sharedOutput.elementOffset());
      break;
    }
  }

  /// Adds its lifetime to the call's entry of args.layer_seconds, if set.
  class LayerTimer {
  public:
    LayerTimer(StageArgs &args, const StageProgram &program, int pass,
               int32_t layer)
        : into(args.layer_seconds
                   ? args.layer_seconds + pass * program.layers.size() +
                         size_t(layer)
                   : nullptr),
          start(into ? std::chrono::steady_clock::now()
                     : std::chrono::steady_clock::time_point{}) {}
    ~LayerTimer() {
      if (into)
        *into += std::chrono::duration<double>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    }
    LayerTimer(const LayerTimer &) = delete;
    LayerTimer &operator=(const LayerTimer &) = delete;

  private:
    double *into;
    std::chrono::steady_clock::time_point start;
  };

  template <class S> static const S &shape(const ProgramLayer &l) {
    return std::get<S>(l.shape);
  }
  int64_t activationFloats() const { return t.tokens() * p.hidden; }
  /// The buffer a slot names in this call (the stage's input and output
  /// gradient are read-only to the kernels: `in` hands them out as const).
  float *slot(Slot s) const {
    switch (s) {
    case Slot::Input:
      return const_cast<float *>(a.input);
    case Slot::GradOutput:
      return const_cast<float *>(a.grad_output);
    case Slot::Output:
      return a.output;
    case Slot::GradInput:
      return a.grad_input;
    case Slot::Act0:
      return act[0];
    case Slot::Act1:
      return act[1];
    case Slot::None:
      break;
    }
    return nullptr;
  }
  const float *in(Slot s) const { return slot(s); }
  float *out(Slot s) const { return slot(s); }

  const StageProgram &p;
  StageArgs &a;
  typename Kernels::Tokens t;
  float *act[2];
  float *ws;
};

template <class Kernels>
void runStagePassOn(const StageProgram &program, StagePass pass,
                    StageArgs &args) {
  StageInterpreter<Kernels> run(program, args);
  switch (pass) {
  case StagePass::Forward:
    return run.forward();
  case StagePass::BackwardInput:
    return run.backwardInput();
  case StagePass::BackwardWeight:
    return run.backwardWeight();
  }
}

} // namespace hypipe::rt

#endif
