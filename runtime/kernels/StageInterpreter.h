//===- StageInterpreter.h - run a stage's kernel program ------------------===//
//
// The one composition of a stage's layers, written once over a target's
// primitive set and instantiated by each target (cpu/CpuTarget.cpp;
// cuda/CudaTarget.cpp where hypipe is built with CUDA). `K` is the target's
// `Kernels` (cpu/Kernels.h, cuda/Kernels.h): an object holding the
// program's precision, with `Tokens` and `tokens(capacity, args)` for the
// call's token shape, `copy` for a device copy of floats, and what the
// layer recipes (runtime/kernels/recipes/) call.
//
// The calls run exactly what the program lists, in order; the interpreter
// visits each layer's shape (LayerShape, a std::variant) straight into its
// kind's recipe. What a layer kind adds to the stage's outputs (the
// language-model loss, MoE's load-balancing loss, an MTP depth's loss and
// the normed hidden states it hands to the next depth) is here once.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_STAGEINTERPRETER_H
#define HYPIPE_RUNTIME_KERNELS_STAGEINTERPRETER_H

#include "runtime/formats/StageProgram.h"
#include "runtime/kernels/StageArgs.h"
#include "runtime/kernels/recipes/Attention.h"
#include "runtime/kernels/recipes/Dsa.h"
#include "runtime/kernels/recipes/Embedding.h"
#include "runtime/kernels/recipes/Gdn.h"
#include "runtime/kernels/recipes/Head.h"
#include "runtime/kernels/recipes/Mamba.h"
#include "runtime/kernels/recipes/Mla.h"
#include "runtime/kernels/recipes/Mlp.h"
#include "runtime/kernels/recipes/Moe.h"
#include "runtime/kernels/recipes/Mtp.h"

#include <chrono>
#include <optional>
#include <type_traits>
#include <variant>

namespace hypipe::rt {

template <class K> class StageInterpreter {
public:
  /// `kernels` holds the program's precision.
  StageInterpreter(const K &kernels, const StageProgram &program,
                   StageArgs &args)
      : k(kernels), p(program), a(args),
        t(K::tokens(program.tokens, args.cu_seqlens, args.cu_seqlens_device,
                    args.num_seqs, args.padded_tail, args.replica_tokens)),
        act{a.workspace + p.act0.elementOffset(),
            a.workspace + p.act1.elementOffset()},
        rc{a.workspace + p.rc0.elementOffset(),
           a.workspace + p.rc1.elementOffset()},
        ws(a.workspace + p.scratch.elementOffset()) {}

  void forward() {
    checkSequenceSplit();
    a.aux_loss = 0.0f;
    run(p.forward, 0,
        [this](const auto &s, const Call &c) { forwardLayer(s, c); });
  }

  void backwardInput() {
    checkSequenceSplit();
    run(p.backwardInput, 1,
        [this](const auto &s, const Call &c) { backwardInputLayer(s, c); });
  }

  /// After each call the trainer hears of its layer (weight_gradient_done).
  void backwardWeight() {
    run(p.backwardWeight, 2,
        [this](const auto &s, const Call &c) { backwardWeightLayer(s, c); });
  }

private:
  /// Sequence parallelism splits the call's tokens in tp equal parts.
  void checkSequenceSplit() const {
    if (p.sequenceParallel && t.tokens() % p.tensorParallel != 0)
      throw RuntimeError(
          "error: a microbatch of " + std::to_string(t.tokens()) +
          " tokens does not split over " + std::to_string(p.tensorParallel) +
          " sequence-parallel ranks\nhelp: this is a bug in hypipe (a "
          "packed microbatch is padded to a multiple of tp); please report "
          "it");
  }

  /// One call's layer: its buffers, and the activation (or gradient) it
  /// reads and the one it writes (null for Slot::None).
  struct Call {
    int32_t index; ///< of the layer in the program
    const ProgramLayer &layer;
    const float *params;
    float *grads;
    /// Its saved tensors: in the microbatch's saved buffer, the recompute
    /// buffer (a recomputed layer), or split between them (selective).
    SavedBases saved;
    const float *in;
    float *out;
    /// The call's tensor-parallel collectives (null: tp 1).
    TensorParallelCalls *tp;
  };
  SavedBases savedOf(const ProgramLayer &l) const {
    if (l.recomputed)
      return {a.recomputed + l.saved.elementOffset()};
    if (l.modules == 0)
      return {a.saved + l.saved.elementOffset()};
    return {a.saved + l.saved.elementOffset(),
            a.recomputed + l.again.elementOffset(), l.modules};
  }
  Call callOf(const KernelCall &c, TensorParallelCalls *tp) const {
    const ProgramLayer &l = p.layers[size_t(c.layer)];
    return {c.layer,
            l,
            a.params + l.params.elementOffset(),
            a.grads + l.params.elementOffset(),
            savedOf(l),
            c.in == Slot::None ? nullptr : in(c.in),
            c.out == Slot::None ? nullptr : out(c.out),
            tp};
  }
  /// A layer call's collectives over the stage's tensor-parallel group
  /// (none at tp 1).
  /// A MoE layer whose experts spread over data-parallel replicas runs over
  /// its tp-ep group instead, on the replicas' tokens (LayerGroup).
  std::optional<TensorParallelCalls> collectivesOf(const KernelCall &c,
                                                   int pass) const {
    const LayerGroup group =
        c.layer < 0 ? LayerGroup{p.tensorParallel, p.sequenceParallel, 1}
                    : layerGroupOf(p.layers[size_t(c.layer)].shape,
                                   p.tensorParallel, p.sequenceParallel);
    if (group.size == 1)
      return std::nullopt;
    TensorParallelGroup *ranks =
        group.replicas > 1 ? a.expert_parallel : a.tensor_parallel;
    if (!ranks)
      throw RuntimeError("error: a stage split over tensor-parallel ranks "
                         "ran without its group\nhelp: this is a bug in "
                         "hypipe; please report it");
    static constexpr const char *kPasses[] = {"forward", "input gradient",
                                              "weight gradient", "recompute"};
    return std::make_optional<TensorParallelCalls>(
        *ranks, c.collectives, t.tokens() * group.replicas,
        group.sequenceParallel, c.layer,
        kPasses[c.op == CallOp::Recompute ? 3 : pass]);
  }
  /// Runs `calls`, pass `pass` (0 forward, 1 input gradient, 2 weight
  /// gradient): a copy for a call of no layer, else `layerCall` with the
  /// layer's shape (visited: its alternative's type picks the recipe).
  template <class LayerCall>
  void run(const std::vector<KernelCall> &calls, int pass,
           LayerCall layerCall) {
    for (const KernelCall &c : calls) {
      switch (c.op) {
      case CallOp::Save:
        k.copy(a.saved + c.range.elementOffset(), in(c.in), activationFloats());
        continue;
      case CallOp::Load:
        k.copy(out(c.out), a.saved + c.range.elementOffset(),
               activationFloats());
        continue;
      case CallOp::Recompute: {
        // Untimed: measured layer costs are those of F, I and W, on which
        // `hypipe plan` charges recompute itself (docs/cost-model.md).
        std::optional<TensorParallelCalls> tp = collectivesOf(c, pass);
        const Call call = callOf(c, tp ? &*tp : nullptr);
        if (call.layer.modules)
          std::visit([&](const auto &s) { recomputeModules(s, call); },
                     call.layer.shard);
        else
          std::visit([&](const auto &s) { recomputeLayer(s, call); },
                     call.layer.shard);
        if (tp)
          tp->finish();
        continue;
      }
      case CallOp::Run:
        break;
      }
      if (c.layer < 0) {
        k.copy(out(c.out), in(c.in), activationFloats());
        continue;
      }
      {
        const LayerTimer timer(a, p, pass, c.layer);
        std::optional<TensorParallelCalls> tp = collectivesOf(c, pass);
        const Call call = callOf(c, tp ? &*tp : nullptr);
        std::visit([&](const auto &s) { layerCall(s, call); },
                   call.layer.shard);
        if (tp)
          tp->finish();
      }
      if (pass == 2 && a.weight_gradient_done)
        a.weight_gradient_done(a.weight_gradient_context, c.layer);
    }
  }

  const float *sharedTable() const {
    return a.params + p.sharedTable.elementOffset();
  }
  const float *sharedOutput() const {
    return a.params + p.sharedOutput.elementOffset();
  }

  // Forward: y from x; the head's and the MTP depths' losses.
  void forwardLayer(const EmbeddingShape &s, const Call &c) {
    recipes::Embedding<K>{k, c.tp}.forward(s, t, c.params, a.tokens, c.out,
                                           c.saved.kept);
  }
  void forwardLayer(const MambaShape &s, const Call &c) {
    recipes::Mamba<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out,
                                       c.saved.kept, ws);
  }
  void forwardLayer(const GdnShape &s, const Call &c) {
    // Its saved tensors as the backward carves them: with gdn_norm_out
    // recomputed the norm's output goes to the recompute buffer.
    recipes::Gdn<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved, ws);
  }
  void forwardLayer(const AttentionShape &s, const Call &c) {
    recipes::Attention<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved,
                                           ws);
  }
  void forwardLayer(const MlpShape &s, const Call &c) {
    recipes::Mlp<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved, ws);
  }
  void forwardLayer(const MoeShape &s, const Call &c) {
    a.aux_loss += recipes::Moe<K>{k, c.tp}.forward(
        s, t, c.params, c.in, c.out, c.saved, ws, a.router_checks + c.index);
  }
  void forwardLayer(const HeadShape &s, const Call &c) {
    a.loss = recipes::Head<K>{k, c.tp}.forward(s, t, c.params, c.in, a.labels,
                                               a.loss_mask, c.saved.kept, ws);
    if (!p.sharedOutput.empty())
      normed = recipes::Head<K>{k, c.tp}.normed(s, t, c.saved.kept);
  }
  void forwardLayer(const MtpInputShape &s, const Call &c) {
    recipes::MtpInput<K>{k, c.tp}.forward(s, t, c.params, sharedTable(),
                                          a.tokens, normed, c.out, c.saved.kept,
                                          ws);
  }
  void forwardLayer(const MtpOutputShape &s, const Call &c) {
    a.mtp_losses[s.depth - 1] += recipes::MtpOutput<K>{k, c.tp}.forward(
        s, t, c.params, sharedOutput(), c.in, a.labels, a.loss_mask,
        c.saved.kept, ws);
    normed = recipes::MtpOutput<K>{k, c.tp}.normed(s, t, c.saved.kept);
  }
  void forwardLayer(const MlaShape &s, const Call &c) {
    recipes::Mla<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved, ws);
  }
  void forwardLayer(const DsaShape &s, const Call &c) {
    // The indexer's KL loss joins MoE's load-balancing losses.
    a.aux_loss += recipes::Dsa<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out,
                                                   c.saved, ws);
  }

  // Recompute: a recomputed layer's forward again, before its input
  // gradient; it writes its saved tensors as the first forward did and adds
  // nothing to the stage's losses. checkStageProgram lets no layer that
  // reads the tokens or ends in a loss recompute.
  template <class Shape> void recomputeLayer(const Shape &s, const Call &c) {
    if constexpr (std::is_same_v<Shape, MambaShape> ||
                  std::is_same_v<Shape, GdnShape> ||
                  std::is_same_v<Shape, AttentionShape> ||
                  std::is_same_v<Shape, MlpShape> ||
                  std::is_same_v<Shape, MlaShape>)
      forwardLayer(s, c);
  }
  void recomputeLayer(const DsaShape &s, const Call &c) {
    // Its loss was counted by the first forward.
    (void)recipes::Dsa<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved,
                                           ws);
  }
  void recomputeLayer(const MoeShape &s, const Call &c) {
    // The router sees the logits it saw: its check records nothing new.
    (void)recipes::Moe<K>{k, c.tp}.forward(s, t, c.params, c.in, c.out, c.saved,
                                           ws, a.router_checks + c.index);
  }
  /// Selective recompute: the dropped modules' tensors of the layer.
  template <class Shape> void recomputeModules(const Shape &s, const Call &c) {
    if constexpr (std::is_same_v<Shape, AttentionShape>)
      recipes::Attention<K>{k, c.tp}.recompute(s, t, c.params, c.saved);
    else if constexpr (std::is_same_v<Shape, MlpShape>)
      recipes::Mlp<K>{k, c.tp}.recompute(s, t, c.params, c.saved);
    else if constexpr (std::is_same_v<Shape, GdnShape>)
      recipes::Gdn<K>{k, c.tp}.recompute(s, t, c.params, c.saved);
    else if constexpr (std::is_same_v<Shape, MoeShape>)
      recipes::Moe<K>{k, c.tp}.recompute(s, t, c.params, c.saved, rc[1], rc[0],
                                         ws, a.router_checks + c.index);
    else if constexpr (std::is_same_v<Shape, MlaShape>)
      recipes::Mla<K>{k, c.tp}.recompute(s, t, c.params, c.saved, ws);
  }
  void recomputeLayer(const MtpInputShape &s, const Call &c) {
    // The normed hidden states of the head or the depth before, which keep
    // their saved tensors: the layer before this one in the program.
    const ProgramLayer &before = p.layers[size_t(c.index) - 1];
    const float *saved = a.saved + before.saved.elementOffset();
    if (const auto *head = std::get_if<HeadShape>(&before.shard))
      normed = recipes::Head<K>{k, c.tp}.normed(*head, t, saved);
    else if (const auto *depth = std::get_if<MtpOutputShape>(&before.shard))
      normed = recipes::MtpOutput<K>{k, c.tp}.normed(*depth, t, saved);
    forwardLayer(s, c);
  }

  // Input gradient: dx from dy (c.in is dy, c.out dx).
  void backwardInputLayer(const EmbeddingShape &s, const Call &c) {
    recipes::Embedding<K>{k, c.tp}.backwardInput(s, t, c.in, c.saved.kept);
  }
  void backwardInputLayer(const MambaShape &s, const Call &c) {
    recipes::Mamba<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads,
                                             c.saved.kept, c.in, c.out, ws);
  }
  void backwardInputLayer(const GdnShape &s, const Call &c) {
    recipes::Gdn<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads, c.saved,
                                           c.in, c.out, ws);
  }
  void backwardInputLayer(const AttentionShape &s, const Call &c) {
    recipes::Attention<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads,
                                                 c.saved, c.in, c.out, ws);
  }
  void backwardInputLayer(const MlpShape &s, const Call &c) {
    recipes::Mlp<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads, c.saved,
                                           c.in, c.out, ws);
  }
  void backwardInputLayer(const MoeShape &s, const Call &c) {
    recipes::Moe<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads, c.saved,
                                           c.in, c.out, ws, a.loss_scale);
  }
  void backwardInputLayer(const HeadShape &s, const Call &c) {
    // With MTP depths, the first one's gradient of the normed output adds.
    recipes::Head<K>{k, c.tp}.backwardInput(
        s, t, c.params, c.grads, c.saved.kept, a.loss_scale,
        p.sharedOutput.empty() ? nullptr : normedGradient, c.out, ws);
  }
  void backwardInputLayer(const MtpInputShape &s, const Call &c) {
    recipes::MtpInput<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads,
                                                c.saved.kept, c.in, c.out, ws);
    normedGradient = c.out;
  }
  void backwardInputLayer(const MtpOutputShape &s, const Call &c) {
    recipes::MtpOutput<K>{k, c.tp}.backwardInput(
        s, t, c.params, c.grads, sharedOutput(),
        a.grads + p.sharedOutput.elementOffset(), c.saved.kept, a.loss_scale,
        normedGradient, c.out, ws);
  }
  void backwardInputLayer(const MlaShape &s, const Call &c) {
    recipes::Mla<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads, c.saved,
                                           c.in, c.out, ws);
  }
  void backwardInputLayer(const DsaShape &s, const Call &c) {
    recipes::Dsa<K>{k, c.tp}.backwardInput(s, t, c.params, c.grads, c.saved,
                                           c.in, c.out, ws, a.loss_scale);
  }

  // Weight gradient: the GEMMs from what I stashed.
  void backwardWeightLayer(const EmbeddingShape &s, const Call &c) {
    recipes::Embedding<K>{k, c.tp}.backwardWeight(s, t, c.saved.kept, c.grads);
  }
  void backwardWeightLayer(const MambaShape &s, const Call &c) {
    recipes::Mamba<K>{k, c.tp}.backwardWeight(s, t, c.saved.kept, c.grads);
  }
  void backwardWeightLayer(const GdnShape &s, const Call &c) {
    recipes::Gdn<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
  }
  void backwardWeightLayer(const AttentionShape &s, const Call &c) {
    recipes::Attention<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
  }
  void backwardWeightLayer(const MlpShape &s, const Call &c) {
    recipes::Mlp<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
  }
  void backwardWeightLayer(const MoeShape &s, const Call &c) {
    recipes::Moe<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
  }
  void backwardWeightLayer(const HeadShape &s, const Call &c) {
    recipes::Head<K>{k, c.tp}.backwardWeight(s, t, c.saved.kept, c.grads);
  }
  void backwardWeightLayer(const MtpInputShape &s, const Call &c) {
    recipes::MtpInput<K>{k, c.tp}.backwardWeight(
        s, t, c.saved.kept, c.grads, a.grads + p.sharedTable.elementOffset());
  }
  void backwardWeightLayer(const MtpOutputShape &s, const Call &c) {
    recipes::MtpOutput<K>{k, c.tp}.backwardWeight(
        s, t, c.saved.kept, a.grads + p.sharedOutput.elementOffset());
  }
  void backwardWeightLayer(const MlaShape &s, const Call &c) {
    recipes::Mla<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
  }
  void backwardWeightLayer(const DsaShape &s, const Call &c) {
    recipes::Dsa<K>{k, c.tp}.backwardWeight(s, t, c.saved, c.grads);
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

  /// One activation between the layers: with sequence parallelism this
  /// rank's tp-th of the tokens.
  int64_t activationFloats() const {
    return (p.sequenceParallel ? t.tokens() / p.tensorParallel : t.tokens()) *
           p.hidden;
  }
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
    case Slot::Rc0:
      return rc[0];
    case Slot::Rc1:
      return rc[1];
    case Slot::None:
      break;
    }
    return nullptr;
  }
  const float *in(Slot s) const { return slot(s); }
  float *out(Slot s) const { return slot(s); }

  const K &k;
  const StageProgram &p;
  StageArgs &a;
  typename K::Tokens t;
  float *act[2];
  float *rc[2]; ///< the recompute slots (unused without recompute)
  float *ws;
  /// The normed hidden states the head or an MTP depth hands the next depth
  /// (forward), and their gradient from that depth (input gradient).
  const float *normed = nullptr;
  const float *normedGradient = nullptr;
};

/// One pass of `program` over `kernels` (which hold its precision).
template <class K>
void runStagePassOn(const K &kernels, const StageProgram &program,
                    StagePass pass, StageArgs &args) {
  StageInterpreter<K> run(kernels, program, args);
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
