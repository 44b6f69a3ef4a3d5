//===- BufferLayouts.h - where each layer's tensors sit in its buffers ----===//
//
// The one description, shared by the CPU and CUDA kernels, of how a layer's
// parameter range (in the order of `Shape::params()`) and its saved range
// (`Shape::savedFloats()` floats) are cut into tensors. With T = float the
// parameter views also cut the gradient buffer. Only attention's saved
// tensors differ between the targets: the CPU kernel keeps the
// probabilities, the CUDA kernel one log-sum-exp per row and head
// (LayerShapes.h, Target).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_CORE_MODEL_BUFFERLAYOUTS_H
#define HYPIPE_CORE_MODEL_BUFFERLAYOUTS_H

#include "core/model/LayerShapes.h"

#include <cstdint>
#include <vector>

namespace hypipe::rt {

/// Where a layer's saved tensors lie: in `kept` (its range of the
/// microbatch's saved buffer), except those of the modules selective
/// recompute drops (`modules`), which lie in `again` (its range of the
/// recompute buffer) and are computed again before its input gradient. A
/// plain pointer keeps every tensor there.
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
  bool drops(RecomputeModule m) const { return modules & moduleBit(m); }
};

/// Cuts a layer's saved tensors, in layout order, off the two bases.
class SavedCarver {
public:
  explicit SavedCarver(const SavedBases &b) : b(b) {}
  /// `n` floats kept between the forward and the backward.
  float *keep(int64_t n) { return cut(b.kept, n); }
  /// `n` floats of `module`: dropped when it is recomputed.
  float *of(RecomputeModule module, int64_t n) {
    return b.drops(module) ? cut(b.again, n) : cut(b.kept, n);
  }

private:
  static float *cut(float *&at, int64_t n) {
    float *p = at;
    at += n;
    return p;
  }
  SavedBases b;
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
                             float *p) {
  int64_t T = t.tokens();
  MambaSaved m;
  m.x = p, p += T * s.hidden;
  m.xn = p, p += T * s.hidden;
  m.rstd = p, p += T;
  m.zxbcdt = p, p += T * s.inProj();
  m.xbc = p, p += T * s.convChannels();
  m.dt = p, p += T * s.heads;
  m.y = p, p += T * s.inner();
  m.gated = p, p += T * s.inner();
  m.grstd = p, p += T * s.groups;
  m.normed = p, p += T * s.inner();
  m.states = p, p += s.scanChunks(t) * s.heads * s.headDim * s.state;
  m.dzxbcdt = p, p += T * s.inProj();
  m.dout = p;
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
  m.x = c.keep(T * s.hidden);
  m.xn = c.keep(T * s.hidden);
  m.rstd = c.keep(T);
  m.proj = c.keep(T * s.inProj());
  m.conv = c.keep(T * s.convChannels());
  m.qk = c.keep(T * 2 * s.keyWidth());
  m.qkInv = c.keep(T * 2 * s.keyHeads);
  m.g = c.keep(T * s.valueHeads);
  m.beta = c.keep(T * s.valueHeads);
  m.o = c.keep(T * s.valueWidth());
  m.orstd = c.keep(T * s.valueHeads);
  m.normed = c.of(RecomputeModule::GdnNormOut, T * s.valueWidth());
  m.states = c.keep(s.chunks(t) * s.valueHeads * s.stateFloats());
  m.dproj = c.keep(T * s.inProj());
  m.dout = c.keep(T * s.hidden);
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
  a.x = c.keep(T * s.hidden);
  a.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden);
  a.rstd = c.keep(T);
  a.qkv = c.keep(T * s.qkvWidth());
  a.softmax = c.of(RecomputeModule::CoreAttn, T * s.heads);
  a.ctx = c.of(RecomputeModule::CoreAttn, T * s.contextWidth());
  a.dqkv = c.keep(T * s.qkvWidth());
  a.dout = c.keep(T * s.hidden);
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
  m.core.x = c.keep(T * s.hidden);
  m.core.xn = c.keep(T * s.hidden);
  m.core.rstd = c.keep(T);
  m.cq = c.keep(T * s.qLoraRank);
  m.cqn = ln ? c.keep(T * s.qLoraRank) : m.cq;
  m.cqRstd = ln && s.qLoraRank > 0 ? c.keep(T) : nullptr;
  m.kvd = c.keep(T * s.kvDownWidth());
  m.ckv = c.keep(T * s.kvLoraRank);
  m.ckvn = ln ? c.keep(T * s.kvLoraRank) : m.ckv;
  m.ckvRstd = ln ? c.keep(T) : nullptr;
  m.core.qkv = c.of(RecomputeModule::MlaUpProj, T * 3 * n * D);
  m.core.softmax = c.keep(T * n);
  m.core.ctx = c.keep(T * n * D);
  m.ctx = c.keep(T * s.contextWidth());
  m.dq = c.keep(T * s.queryWidth());
  m.dcq = c.keep(T * s.qLoraRank);
  m.dkvd = c.keep(T * s.kvDownWidth());
  m.dkvu = c.keep(T * s.kvUpWidth());
  m.core.dout = c.keep(T * s.hidden);
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
  SavedBases rest = bases;
  rest.kept += s.mla().savedFloats(t); // DSA recomputes no module alone
  SavedCarver c(rest);
  m.q = c.keep(T * nd);
  m.dq = c.keep(T * nd);
  m.k = c.keep(T * d);
  m.kMean = c.keep(T);
  m.kRstd = c.keep(T);
  m.kn = c.keep(T * d);
  m.dk = c.keep(T * d);
  m.w = c.keep(T * n);
  m.dw = c.keep(T * n);
  m.dScores = c.keep(DsaShape::pairFloats(t));
  m.keep = c.keep(DsaShape::pairFloats(t));
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
  m.x = c.keep(T * s.hidden);
  m.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden);
  m.rstd = c.keep(T);
  m.h1 = c.of(RecomputeModule::Mlp, T * s.fc1Width());
  m.act = c.of(RecomputeModule::Mlp, T * s.ffn);
  m.dh1 = c.keep(T * s.fc1Width());
  m.dout = c.keep(T * s.hidden);
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
struct MoeSaved {
  float *x, *xn, *rstd, *probs;
  int32_t *topIdx;
  float *topW;
  int32_t *counts;
  float *aux, *xr, *h1, *dh1, *act, *yr, *dyr;
  int32_t *rowMap;
  int32_t *routed;
};

/// `t`: a replica's microbatch (the layer's tensors hold its group's:
/// MoeShape::groupReplicas); `routed` and `aux` hold each replica's.
inline MoeSaved moeSaved(const MoeShape &s, const TokenShape &t,
                         const SavedBases &bases) {
  int64_t T = s.group(t).tokens(), R = T * s.topk;
  SavedCarver c(bases);
  MoeSaved m;
  m.x = c.keep(T * s.hidden);
  m.xn = c.of(RecomputeModule::LayerNorm, T * s.hidden);
  m.rstd = c.keep(T);
  // moe: the router's and the experts' tensors (moe_act, its part, is
  // dropped with it: the pass names both).
  const RecomputeModule moe = RecomputeModule::Moe;
  m.probs = c.of(moe, T * s.experts);
  m.topIdx = reinterpret_cast<int32_t *>(c.of(moe, T * s.topk));
  m.topW = c.of(moe, T * s.topk);
  m.counts = reinterpret_cast<int32_t *>(c.of(moe, s.experts));
  m.aux = c.of(moe, s.groupReplicas);
  m.xr = c.of(moe, R * s.hidden);
  m.h1 = c.of(moe, R * s.fc1Width());
  m.dh1 = c.keep(R * s.fc1Width());
  m.act = c.of(RecomputeModule::MoeAct, R * s.ffn);
  m.yr = c.of(moe, R * s.hidden);
  m.dyr = c.keep(R * s.hidden);
  m.rowMap = reinterpret_cast<int32_t *>(c.of(moe, R));
  m.routed =
      reinterpret_cast<int32_t *>(c.of(moe, s.groupReplicas * s.experts));
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

/// First routed row of each expert (and the end, E + 1 entries), from its
/// token count (host memory), into `off` (the caller's, reused).
inline void expertOffsets(const MoeShape &s, const int32_t *counts,
                          std::vector<int64_t> &off) {
  off.assign(size_t(s.experts + 1), 0);
  for (int64_t e = 0; e < s.experts; ++e)
    off[e + 1] = off[e] + counts[e];
}

/// x, xn, rstd, logits turned probabilities (then their gradient for W),
/// loss mask, labels (int32).
struct HeadSaved {
  float *x, *xn, *rstd, *probs, *mask;
  int32_t *labels;
};

/// The head's saved buffer, and an MTP depth's output (the same layout).
inline HeadSaved headSaved(int64_t vocab, int64_t hidden, const TokenShape &t,
                           float *p) {
  int64_t T = t.tokens();
  HeadSaved h;
  h.x = p, p += T * hidden;
  h.xn = p, p += T * hidden;
  h.rstd = p, p += T;
  h.probs = p, p += T * vocab;
  h.mask = p, p += T;
  h.labels = reinterpret_cast<int32_t *>(p);
  return h;
}

inline HeadSaved headSaved(const HeadShape &s, const TokenShape &t, float *p) {
  return headSaved(s.vocab, s.hidden, t, p);
}

inline HeadSaved headSaved(const MtpOutputShape &s, const TokenShape &t,
                           float *p) {
  return headSaved(s.vocab, s.hidden, t, p);
}

/// An MTP depth's input (MtpInputShape::savedFloats, in that order).
struct MtpInputSaved {
  int32_t *ids;
  float *e, *rstdE, *h, *rstdH, *cat, *dOut, *dE;
};

inline MtpInputSaved mtpInputSaved(const MtpInputShape &s, const TokenShape &t,
                                   float *p) {
  int64_t T = t.tokens(), H = s.hidden;
  MtpInputSaved m;
  m.ids = reinterpret_cast<int32_t *>(p), p += T;
  m.e = p, p += T * H;
  m.rstdE = p, p += T;
  m.h = p, p += T * H;
  m.rstdH = p, p += T;
  m.cat = p, p += T * 2 * H;
  m.dOut = p, p += T * H;
  m.dE = p;
  return m;
}

} // namespace hypipe::rt

#endif
