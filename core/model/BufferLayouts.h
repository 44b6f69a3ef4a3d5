//===- BufferLayouts.h - where each layer's tensors sit in its buffers ----===//
//
// The one description, shared by the CPU and CUDA kernels, of how a layer's
// parameter range (in the order of `Shape::params()`) and its saved range
// (`Shape::savedFloats()` floats) are cut into tensors. With T = float the
// parameter views also cut the gradient buffer. Every saved tensor says what
// it holds (SavedType), which is how a bf16 run stores it between passes
// (runtime/exec/SavedBuffers.h); savedSpansOf lists a layer's. With
// sequence parallelism a layer's input x and its pre-norm's rstd hold the
// rank's own rows alone (shardRows of the shape's sequenceShards), as
// Megatron-LM keeps them; the normed input xn is the gathered whole.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_BUFFERLAYOUTS_H
#define HYPIPE_CORE_MODEL_BUFFERLAYOUTS_H

#include "core/model/LayerShapes.h"

#include <cstdint>
#include <type_traits>
#include <variant>
#include <vector>

namespace hypipe::rt {

/// What a saved tensor holds, which is how a bf16 run may store it: an
/// activation or an activation's gradient is a bf16 value there (Megatron's
/// `--bf16` keeps it in two bytes: docs/precision.md), a statistic stays
/// fp32 (a norm's rstd, a log-sum-exp, the scan's dt and states, router
/// probabilities), an index is an int32 in a float-sized slot. In an fp32
/// run every kind is four bytes.
enum class SavedType : uint8_t { Activation, F32, I32 };

/// One saved tensor as a layout cut it: `floats` float-sized slots at
/// `offset` floats from the start of the layer's range.
struct SavedSpan {
  int64_t offset = 0, floats = 0;
  SavedType type = SavedType::F32;
  /// In the layer's range of the recompute buffer (a module selective
  /// recompute drops), not in its range of the microbatch's saved buffer.
  bool again = false;
};

/// Where a layer's saved tensors lie: in `kept` (its range of the
/// microbatch's saved buffer), except those of the modules selective
/// recompute drops (`modules`), which lie in `again` (its range of the
/// recompute buffer) and are computed again before its input gradient. A
/// plain pointer keeps every tensor there. With `spans` set, the carver
/// also records each tensor it cuts (savedSpansOf); null bases then give
/// null tensors.
struct SavedBases {
  SavedBases(float *kept) : kept(kept) {} // NOLINT: every tensor kept
  /// The weight pass's view, which only reads (the layouts hand out
  /// mutable pointers for every pass).
  SavedBases(const float *kept) // NOLINT: every tensor kept
      : kept(const_cast<float *>(kept)) {}
  SavedBases(float *kept, float *again, RecomputeModuleSet modules)
      : kept(kept), again(again), modules(modules) {}
  float *kept;
  float *again = nullptr;
  RecomputeModuleSet modules = 0;
  std::vector<SavedSpan> *spans = nullptr;
  bool drops(RecomputeModule m) const { return modules & moduleBit(m); }
};

/// Cuts a layer's saved tensors, in layout order, off the two bases; every
/// tensor says what it holds (SavedType).
class SavedCarver {
public:
  /// `skip`: the layout continues one whose kept tensors took `skip`
  /// floats of the range.
  explicit SavedCarver(const SavedBases &b, int64_t skip = 0)
      : b(b), keptAt(skip) {}
  /// `n` floats kept between the forward and the backward.
  float *keep(int64_t n, SavedType type) {
    return cut(b.kept, keptAt, n, type, false);
  }
  /// `n` floats of `module`: dropped when it is recomputed.
  float *of(RecomputeModule module, int64_t n, SavedType type) {
    return b.drops(module) ? cut(b.again, againAt, n, type, true)
                           : cut(b.kept, keptAt, n, type, false);
  }
  /// `n` int32 kept (in float-sized slots).
  int32_t *keepIndices(int64_t n) {
    return reinterpret_cast<int32_t *>(keep(n, SavedType::I32));
  }
  int32_t *indicesOf(RecomputeModule module, int64_t n) {
    return reinterpret_cast<int32_t *>(of(module, n, SavedType::I32));
  }

private:
  float *cut(float *base, int64_t &at, int64_t n, SavedType type, bool again) {
    if (b.spans && n > 0)
      b.spans->push_back({at, n, type, again});
    float *p = base ? base + at : nullptr;
    at += n;
    return p;
  }
  SavedBases b;
  int64_t keptAt = 0, againAt = 0;
};

template <typename T> struct MambaParams {
  T *norm, *inProj, *convW, *convB, *dtBias, *aLog, *d, *gnorm, *outProj;
};

template <typename T> MambaParams<T> mambaParams(const MambaShape &s, T *base) {
  MambaParams<T> p;
  T *q = base;
  p.norm = q, q += s.hidden;
  p.inProj = q, q += s.inProj() * s.hidden;
  p.convW = q, q += s.convChannels() * s.convWidth;
  p.convB = q, q += s.convChannels();
  p.dtBias = q, q += s.heads;
  p.aLog = q, q += s.heads;
  p.d = q, q += s.heads;
  p.gnorm = q, q += s.inner();
  p.outProj = q;
  return p;
}

/// Layer input, normed input and its rstd, in_proj output, conv output
/// (post-SiLU), dt, scan output, gated-norm input, its rstd and output, the
/// scan state entering every kScanChunk-th row, and the in_proj and
/// out_proj output gradients for W.
struct MambaSaved {
  float *x, *xn, *rstd, *zxbcdt, *xbc, *dt, *y, *gated, *grstd, *normed,
      *states, *dzxbcdt, *dout;
};

inline MambaSaved mambaSaved(const MambaShape &s, const TokenShape &t,
                             const SavedBases &bases) {
  const int64_t T = t.tokens();
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  SavedCarver c(bases);
  MambaSaved m;
  const int64_t rows = shardRows(t, s.sequenceShards);
  m.x = c.keep(rows * s.hidden, act);
  m.xn = c.keep(T * s.hidden, act);
  m.rstd = c.keep(rows, f32);
  m.zxbcdt = c.keep(T * s.inProj(), act);
  m.xbc = c.keep(T * s.convChannels(), act);
  m.dt = c.keep(T * s.heads, f32);
  m.y = c.keep(T * s.inner(), act);
  // y * silu(z) inside the gated norm's one kernel: never rounded.
  m.gated = c.keep(T * s.inner(), f32);
  m.grstd = c.keep(T * s.groups, f32);
  m.normed = c.keep(T * s.inner(), act);
  m.states = c.keep(s.scanChunks(t) * s.heads * s.headDim * s.state, f32);
  m.dzxbcdt = c.keep(T * s.inProj(), act);
  m.dout = c.keep(T * s.hidden, act);
  return m;
}

template <typename T> struct GdnParams {
  T *norm, *inProj, *convW, *dtBias, *aLog, *outNorm, *outProj;
};

template <typename T> GdnParams<T> gdnParams(const GdnShape &s, T *base) {
  GdnParams<T> p;
  T *q = base;
  p.norm = q, q += s.hidden;
  p.inProj = q, q += s.inProj() * s.hidden;
  p.convW = q, q += s.convChannels() * s.convWidth;
  p.dtBias = q, q += s.valueHeads;
  p.aLog = q, q += s.valueHeads;
  p.outNorm = q, q += s.valueHeadDim;
  p.outProj = q;
  return p;
}

/// Layer input, normed input and its rstd, in_proj output [q k v z beta
/// alpha], conv output (post-SiLU) [q k v], the L2-normalised [q k] and
/// their inverse norms [T, 2 key heads], g and beta [T, value heads], the
/// rule's output o, the out norm's rstd [T, value heads] and output, the
/// state entering every kChunk-th row [chunk][value head][dk][dv], and the
/// in_proj and out_proj output gradients for W.
struct GdnSaved {
  float *x, *xn, *rstd, *proj, *conv, *qk, *qkInv, *g, *beta, *o, *orstd,
      *normed, *states, *dproj, *dout;
};

inline GdnSaved gdnSaved(const GdnShape &s, const TokenShape &t,
                         const SavedBases &bases) {
  const int64_t T = t.tokens();
  SavedCarver c(bases);
  GdnSaved m;
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  const int64_t rows = shardRows(t, s.sequenceShards);
  m.x = c.keep(rows * s.hidden, act);
  m.xn = c.keep(T * s.hidden, act);
  m.rstd = c.keep(rows, f32);
  m.proj = c.keep(T * s.inProj(), act);
  m.conv = c.keep(T * s.convChannels(), act);
  // The L2 norms feed the rule in fp32.
  m.qk = c.keep(T * 2 * s.keyWidth(), f32);
  m.qkInv = c.keep(T * 2 * s.keyHeads, f32);
  m.g = c.keep(T * s.valueHeads, f32);
  m.beta = c.keep(T * s.valueHeads, f32);
  m.o = c.keep(T * s.valueWidth(), act);
  m.orstd = c.keep(T * s.valueHeads, f32);
  m.normed = c.of(RecomputeModule::GdnNormOut, T * s.valueWidth(), act);
  m.states = c.keep(s.chunks(t) * s.valueHeads * s.stateFloats(), f32);
  m.dproj = c.keep(T * s.inProj(), act);
  m.dout = c.keep(T * s.hidden, act);
  return m;
}

/// x, xn, rstd, qkv (after RoPE), the softmax's log-sum-exp [T, heads]
/// (both targets recompute the probabilities from it: no [len, len] matrix
/// is kept), context, the qkv and output gradients for W.
struct AttnSaved {
  float *x, *xn, *rstd, *qkv, *softmax, *ctx, *dqkv, *dout;
};

inline AttnSaved attnSaved(const AttentionShape &s, const TokenShape &t,
                           const SavedBases &bases) {
  int64_t T = t.tokens();
  SavedCarver c(bases);
  AttnSaved a;
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  const int64_t rows = shardRows(t, s.sequenceShards);
  a.x = c.keep(rows * s.hidden, act);
  a.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden, act);
  a.rstd = c.keep(rows, f32);
  a.qkv = c.keep(T * s.qkvWidth(), act);
  a.softmax = c.of(RecomputeModule::CoreAttn, T * s.heads, f32);
  a.ctx = c.of(RecomputeModule::CoreAttn, T * s.contextWidth(), act);
  a.dqkv = c.keep(T * s.qkvWidth(), act);
  a.dout = c.keep(T * s.hidden, act);
  return a;
}

/// An MLA layer's parameters (MlaShape::params' order; null where the
/// layer has none: the query down-projection and its norm without
/// q_lora_rank, the latents' norms without qk_layernorm). `wQ` is
/// linear_q_up_proj, or linear_q_proj without q_lora_rank.
template <typename T> struct MlaParams {
  T *norm, *wQDown, *qNorm, *wQ, *wKvDown, *kvNorm, *wKvUp, *wProj;
};

template <typename T> MlaParams<T> mlaParams(const MlaShape &s, T *base) {
  MlaParams<T> p{};
  T *q = base;
  p.norm = q, q += s.hidden;
  if (s.qLoraRank > 0) {
    p.wQDown = q, q += s.qLoraRank * s.hidden;
    if (s.qkLayernorm)
      p.qNorm = q, q += s.qLoraRank;
  }
  p.wQ = q, q += s.queryWidth() * (s.qLoraRank > 0 ? s.qLoraRank : s.hidden);
  p.wKvDown = q, q += s.kvDownWidth() * s.hidden;
  if (s.qkLayernorm)
    p.kvNorm = q, q += s.kvLoraRank;
  p.wKvUp = q, q += s.kvUpWidth() * s.kvLoraRank;
  p.wProj = q;
  return p;
}

/// An MLA layer's saved tensors (MlaShape::savedFloats' order): `core` the
/// attention core's (x, xn, rstd, its q, k and v -- in the recompute
/// buffer when mla_up_proj is recomputed --, log-sum-exp, padded
/// context and the output gradient; its dqkv is workspace, left null);
/// the query latent cq, normed cqn (cq itself without qk_layernorm) with
/// its rstd; kv_down_proj's output kvd [c_kv | k_pe], c_kv alone (ckv) and
/// normed (ckvn, likewise); the context [T, heads x v] linear_proj reads;
/// the gradients the weight pass reads: of q (linear_q_up_proj's or
/// linear_q_proj's output), cq, kvd and kv_up_proj's output.
struct MlaSaved {
  AttnSaved core;
  float *cq, *cqn, *cqRstd, *kvd, *ckv, *ckvn, *ckvRstd, *ctx, *dq, *dcq, *dkvd,
      *dkvu;
};

inline MlaSaved mlaSaved(const MlaShape &s, const TokenShape &t,
                         const SavedBases &bases) {
  const int64_t T = t.tokens(), D = s.coreHeadDim(), n = s.heads;
  const bool ln = s.qkLayernorm;
  SavedCarver c(bases);
  MlaSaved m;
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  const int64_t rows = shardRows(t, s.sequenceShards);
  m.core.x = c.keep(rows * s.hidden, act);
  m.core.xn = c.keep(T * s.hidden, act);
  m.core.rstd = c.keep(rows, f32);
  m.cq = c.keep(T * s.qLoraRank, act);
  m.cqn = ln ? c.keep(T * s.qLoraRank, act) : m.cq;
  m.cqRstd = ln && s.qLoraRank > 0 ? c.keep(T, f32) : nullptr;
  m.kvd = c.keep(T * s.kvDownWidth(), act);
  m.ckv = c.keep(T * s.kvLoraRank, act);
  m.ckvn = ln ? c.keep(T * s.kvLoraRank, act) : m.ckv;
  m.ckvRstd = ln ? c.keep(T, f32) : nullptr;
  m.core.qkv = c.of(RecomputeModule::MlaUpProj, T * 3 * n * D, act);
  m.core.softmax = c.keep(T * n, f32);
  m.core.ctx = c.keep(T * n * D, act);
  m.ctx = c.keep(T * s.contextWidth(), act);
  m.dq = c.keep(T * s.queryWidth(), act);
  m.dcq = c.keep(T * s.qLoraRank, act);
  m.dkvd = c.keep(T * s.kvDownWidth(), act);
  m.dkvu = c.keep(T * s.kvUpWidth(), act);
  m.core.dout = c.keep(T * s.hidden, act);
  m.core.dqkv = nullptr;
  return m;
}

/// A DSA layer's parameters: MLA's (MlaShape::params' order), then its
/// indexer's linear_wq_b, linear_wk, k_norm's weight and bias and
/// linear_weights_proj.
template <typename T> struct DsaParams {
  MlaParams<T> mla;
  T *wqB, *wk, *kNormWeight, *kNormBias, *wWeights;
};

template <typename T> DsaParams<T> dsaParams(const DsaShape &s, T *base) {
  DsaParams<T> p{mlaParams(s.mla(), base)};
  T *q = base + numel(s.mla().params(1));
  p.wqB = q, q += s.indexerQueryWidth() * s.indexerQueryIn();
  p.wk = q, q += s.indexerHeadDim * s.mla().hidden;
  p.kNormWeight = q, q += s.indexerHeadDim;
  p.kNormBias = q, q += s.indexerHeadDim;
  p.wWeights = q;
  return p;
}

/// A DSA layer's saved tensors (DsaShape::savedFloats' order): MLA's, then
/// the indexer's queries q [T, nI x dI] (after RoPE) and their gradient,
/// linear_wk's output k and k_norm's mean and rstd, the normed and rotated
/// key kn, k's gradient, the head weights w (linear_weights_proj's
/// output) and their gradient; per sample (DsaShape::pairFloats, samples
/// one after another, [len, len] each) the KL loss's gradient of the index
/// scores (before the step's loss scale) and the keys each query keeps (1
/// or 0).
struct DsaSaved {
  MlaSaved mla;
  float *q, *dq, *k, *kMean, *kRstd, *kn, *dk, *w, *dw, *dScores, *keep;
};

inline DsaSaved dsaSaved(const DsaShape &s, const TokenShape &t,
                         const SavedBases &bases) {
  const int64_t T = t.tokens(), nd = s.indexerQueryWidth(),
                d = s.indexerHeadDim, n = s.indexerHeads;
  DsaSaved m{mlaSaved(s.mla(), t, bases)};
  // DSA recomputes no module alone: MLA's tensors are all kept.
  SavedCarver c(bases, s.mla().savedFloats(t));
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  m.q = c.keep(T * nd, act);
  m.dq = c.keep(T * nd, act);
  m.k = c.keep(T * d, act);
  m.kMean = c.keep(T, f32);
  m.kRstd = c.keep(T, f32);
  m.kn = c.keep(T * d, act);
  m.dk = c.keep(T * d, act);
  m.w = c.keep(T * n, act);
  m.dw = c.keep(T * n, act);
  m.dScores = c.keep(DsaShape::pairFloats(t), f32);
  m.keep = c.keep(DsaShape::pairFloats(t), f32);
  return m;
}

/// x, xn, rstd, fc1 output, activation, fc1 and fc2 output gradients.
struct MlpSaved {
  float *x, *xn, *rstd, *h1, *act, *dh1, *dout;
};

inline MlpSaved mlpSaved(const MlpShape &s, const TokenShape &t,
                         const SavedBases &bases) {
  int64_t T = t.tokens();
  SavedCarver c(bases);
  MlpSaved m;
  const SavedType act = SavedType::Activation;
  const int64_t rows = shardRows(t, s.sequenceShards);
  m.x = c.keep(rows * s.hidden, act);
  m.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden, act);
  m.rstd = c.keep(rows, SavedType::F32);
  m.h1 = c.of(RecomputeModule::Mlp, T * s.fc1Width(), act);
  m.act = c.of(RecomputeModule::Mlp, T * s.ffn, act);
  m.dh1 = c.keep(T * s.fc1Width(), act);
  m.dout = c.keep(T * s.hidden, act);
  return m;
}

template <typename T> struct MoeParams {
  T *norm, *router;
  T *w1(const MoeShape &s, int64_t e) const {
    return router + s.experts * s.hidden +
           e * (s.fc1Width() * s.hidden + s.hidden * s.ffn);
  }
  T *w2(const MoeShape &s, int64_t e) const {
    return w1(s, e) + s.fc1Width() * s.hidden;
  }
};

template <typename T> MoeParams<T> moeParams(const MoeShape &s, T *base) {
  return {base, base + s.hidden};
}

/// x, xn, rstd, router probabilities, chosen experts and weights, tokens
/// per expert (those kept: the routed rows), the aux loss, then per routed
/// row (grouped by expert): its input, fc1 output and gradient, activation,
/// fc2 output and gradient, and which (token, slot) it is; last the tokens
/// routed to each expert before a capacity dropped any (the load-balancing
/// loss counts them; dropless, the kept counts). Expert ids, counts and the row
/// map are int32 (a float is exact only up to 2^24 rows), each in the
/// float-sized slots savedFloats counts, so every tensor keeps its 4-byte
/// alignment; checkStageProgram bounds the routed rows below 2^31.
///
/// The routed rows' float tensors (xr to dyr) hold only the rows of the
/// experts this rank keeps (MoeShape::heldExperts), experts [expertFrom,
/// expertTo): grouped by expert, they are the group's routed rows
/// [rowFrom, rowTo), row r at r - rowFrom, in room for rowRoom rows
/// (MoeShape::heldRows). The row map and the slots' rows count every
/// routed row of the group. holdRows sets rowFrom and rowTo once the
/// routing is known.
struct MoeSaved {
  float *x, *xn, *rstd, *probs;
  int32_t *topIdx;
  float *topW;
  int32_t *counts;
  float *aux, *xr, *h1, *dh1, *act, *yr, *dyr;
  int32_t *rowMap;
  int32_t *routed;
  int64_t expertFrom = 0, expertTo = 0, rowFrom = 0, rowTo = 0, rowRoom = 0;
  /// Whether group row r is one of the held ones.
  bool holds(int64_t r) const { return r >= rowFrom && r < rowTo; }
  int64_t heldRows() const { return rowTo - rowFrom; }
};

/// The held rows from each expert's first row `off` (expertOffsets).
/// Returns false, leaving `m` as it was, where they outnumber the room
/// (which MoeShape::heldRows bounds: a bug).
inline bool holdRows(MoeSaved &m, const std::vector<int64_t> &off) {
  const int64_t from = off[size_t(m.expertFrom)], to = off[size_t(m.expertTo)];
  if (to - from > m.rowRoom)
    return false;
  m.rowFrom = from;
  m.rowTo = to;
  return true;
}

/// `t`: a replica's microbatch (the layer's tensors hold its group's:
/// MoeShape::groupReplicas); `routed` and `aux` hold each replica's.
/// It keeps the rows of experts [firstHeld, firstHeld + heldCount) (on an
/// expert grid under the allgather dispatcher the rank's own; heldCount -1:
/// MoeShape::heldExperts, at most that many), in room for the most rows
/// MoeShape::heldExperts experts take.
inline MoeSaved moeSaved(const MoeShape &s, const TokenShape &t,
                         const SavedBases &bases, int64_t firstHeld = 0,
                         int64_t heldCount = -1) {
  const TokenShape g = s.group(t);
  const int64_t T = g.tokens(), L = s.heldRows(g);
  SavedCarver c(bases);
  MoeSaved m;
  m.expertFrom = firstHeld;
  m.expertTo = firstHeld + (heldCount < 0 ? s.heldExperts() : heldCount);
  m.rowRoom = L;
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  const int64_t rows = shardRows(g, s.sequenceShards); // this rank's tokens
  m.x = c.keep(rows * s.hidden, act);
  m.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden, act);
  m.rstd = c.keep(rows, f32);
  // moe: the router's and the experts' tensors (moe_act, its part, is
  // dropped with it: the pass names both).
  const RecomputeModule moe = RecomputeModule::Moe;
  m.probs = c.of(moe, T * s.experts, f32);
  m.topIdx = c.indicesOf(moe, T * s.topk);
  m.topW = c.of(moe, T * s.topk, f32);
  m.counts = c.indicesOf(moe, s.experts);
  m.aux = c.of(moe, s.groupReplicas, f32);
  m.xr = c.of(moe, L * s.hidden, act);
  m.h1 = c.of(moe, L * s.fc1Width(), act);
  m.dh1 = c.keep(L * s.fc1Width(), act);
  m.act = c.of(RecomputeModule::MoeAct, L * s.ffn, act);
  m.yr = c.of(moe, L * s.hidden, act);
  m.dyr = c.keep(L * s.hidden, act);
  m.rowMap = c.indicesOf(moe, T * s.topk);
  m.routed = c.indicesOf(moe, s.groupReplicas * s.experts);
  return m;
}

/// What a MoE layer's router found in its logits, in the memory its kernels
/// run in (device memory on CUDA): set, never cleared, by the forward when a
/// logit is NaN or infinite, and read by the trainer once a step, which then
/// stops the run naming the step, layer and rank (Trainer::step).
struct RouterCheck {
  int32_t nonFinite = 0; ///< 1 once a logit was NaN or infinite
  float logit = 0;       ///< one such logit
};
static_assert(sizeof(RouterCheck) == 2 * sizeof(float),
              "schedule::routerCheckFloats counts two floats a check");

/// First routed row of each expert (and the end, E + 1 entries), from its
/// token count (host memory), into `off` (the caller's, reused).
inline void expertOffsets(const MoeShape &s, const int32_t *counts,
                          std::vector<int64_t> &off) {
  off.assign(size_t(s.experts + 1), 0);
  for (int64_t e = 0; e < s.experts; ++e)
    off[e + 1] = off[e] + counts[e];
}

/// x, xn, rstd, the logits (then their gradient, for W; none when the loss
/// is chunked), each row's softmax statistics, loss mask (a chunked loss's
/// input gradient turns it into each row's gradient coefficient), labels
/// (int32).
struct HeadSaved {
  float *x, *xn, *rstd, *logits, *rowMax, *rowScale, *mask;
  int32_t *labels;
};

/// A chunked loss's statistics scratch (lmLossChunkStatsFloats(T) floats):
/// each row's loss (the cuda target's: the CPU sums the rows' losses in
/// double as it goes), sum of exponentials over this rank's vocabulary,
/// target logit, the group's largest logit, and 4 floats of sums.
struct LossChunkStats {
  float *rowLoss, *sum, *target, *groupMax, *sums;
};
inline LossChunkStats lossChunkStats(int64_t T, float *stats) {
  return {stats, stats + T, stats + 2 * T, stats + 3 * T, stats + 4 * T};
}

/// The head's saved buffer, and an MTP depth's output (the same layout).
/// `chunk` > 0: the loss is chunked and keeps no logits (h.logits null).
inline HeadSaved headSaved(int64_t vocab, int64_t hidden, const TokenShape &t,
                           const SavedBases &bases, int64_t chunk = 0,
                           int64_t sequenceShards = 1) {
  const int64_t T = t.tokens(), rows = shardRows(t, sequenceShards);
  SavedCarver c(bases);
  HeadSaved h;
  h.x = c.keep(rows * hidden, SavedType::Activation);
  h.xn = c.keep(T * hidden, SavedType::Activation);
  h.rstd = c.keep(rows, SavedType::F32);
  // The output layer's logits as it writes them (bf16 in a bf16 run), kept
  // rather than their fp32 softmax: the backward recomputes each
  // probability, exp(logit - rowMax) * rowScale, from the row's largest
  // logit and its 1 / sum of exponentials (over the whole vocabulary), the
  // same float operations the loss made. After I they hold the logits'
  // gradient for W, rounded as the output layer's input gradient is.
  // A chunked loss makes them again, a chunk at a time, from xn.
  h.logits = chunk > 0 ? nullptr : c.keep(T * vocab, SavedType::Activation);
  h.rowMax = c.keep(T, SavedType::F32);
  h.rowScale = c.keep(T, SavedType::F32);
  h.mask = c.keep(T, SavedType::F32);
  h.labels = c.keepIndices(T);
  return h;
}

inline HeadSaved headSaved(const HeadShape &s, const TokenShape &t,
                           const SavedBases &bases) {
  return headSaved(s.vocab, s.hidden, t, bases, s.lossChunk, s.sequenceShards);
}

inline HeadSaved headSaved(const MtpOutputShape &s, const TokenShape &t,
                           const SavedBases &bases) {
  return headSaved(s.vocab, s.hidden, t, bases, s.lossChunk, s.sequenceShards);
}

/// An MTP depth's input (MtpInputShape::savedFloats, in that order).
struct MtpInputSaved {
  int32_t *ids;
  float *e, *rstdE, *h, *rstdH, *cat, *dOut, *dE;
};

inline MtpInputSaved mtpInputSaved(const MtpInputShape &s, const TokenShape &t,
                                   const SavedBases &bases) {
  const int64_t T = t.tokens(), H = s.hidden,
                rows = shardRows(t, s.sequenceShards);
  const SavedType act = SavedType::Activation, f32 = SavedType::F32;
  SavedCarver c(bases);
  MtpInputSaved m;
  m.ids = c.keepIndices(T);
  m.e = c.keep(T * H, act); // summed over the group: its rows at the front
  m.rstdE = c.keep(rows, f32);
  m.h = c.keep(rows * H, act);
  m.rstdH = c.keep(rows, f32);
  m.cat = c.keep(T * 2 * H, act);
  m.dOut = c.keep(T * H, act);
  m.dE = c.keep(T * H, act);
  return m;
}

/// The embedding's saved tensors: the ids it looked up, and after I its
/// output's gradient for W.
struct EmbeddingSaved {
  int32_t *ids;
  float *dy;
};

inline EmbeddingSaved embeddingSaved(const EmbeddingShape &s,
                                     const TokenShape &t,
                                     const SavedBases &bases) {
  SavedCarver c(bases);
  EmbeddingSaved e;
  e.ids = c.keepIndices(t.tokens());
  e.dy = c.keep(t.tokens() * s.hidden, SavedType::Activation);
  return e;
}

/// The tensors a layer of shape `shard` saves of a microbatch of `t`
/// (their offsets from the start of its range; those of `modules`, which
/// selective recompute drops, in its range of the recompute buffer), as
/// its kernels carve them.
inline std::vector<SavedSpan> savedSpansOf(const LayerShape &shard,
                                           const TokenShape &t,
                                           RecomputeModuleSet modules = 0) {
  std::vector<SavedSpan> spans;
  SavedBases bases(static_cast<float *>(nullptr), nullptr, modules);
  bases.spans = &spans;
  std::visit(
      [&](const auto &s) {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, EmbeddingShape>)
          embeddingSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, MambaShape>)
          mambaSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, GdnShape>)
          gdnSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, AttentionShape>)
          attnSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, MlaShape>)
          mlaSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, DsaShape>)
          dsaSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, MlpShape>)
          mlpSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, MoeShape>)
          moeSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, HeadShape> ||
                           std::is_same_v<S, MtpOutputShape>)
          headSaved(s, t, bases);
        else if constexpr (std::is_same_v<S, MtpInputShape>)
          mtpInputSaved(s, t, bases);
        else
          static_assert(sizeof(S) == 0, "a layer kind without its layout");
      },
      shard);
  return spans;
}

/// Bytes `floats` saved floats take in a packed copy (a stage's SavedStash
/// slot): two a value when stored as `bf16`, else four, rounded up to keep
/// what follows 4-byte aligned.
inline int64_t packedBytes(int64_t floats, bool bf16) {
  return (floats * (bf16 ? 2 : 4) + 3) / 4 * 4;
}

/// Floats of the packed copy of `spans`' kept tensors, each on its own
/// (a bf16 run packs activations in two bytes).
inline int64_t packedFloats(const std::vector<SavedSpan> &spans, bool bf16) {
  int64_t bytes = 0;
  for (const SavedSpan &s : spans)
    if (!s.again)
      bytes += packedBytes(s.floats, bf16 && s.type == SavedType::Activation);
  return bytes / 4;
}

} // namespace hypipe::rt

#endif
