//===- FusedAttention.h - causal attention through cuDNN's fused SDPA -----===//
//
// The bf16 attention core on cuDNN's fused scaled-dot-product attention
// (flash attention: cuDNN 9's SDPA forward and backward graphs, built with
// the header-only cudnn-frontend), in hypipe's packed THD layout: every
// microbatch is ragged (a sequence's tokens follow the previous one's),
// causal from each sequence's first token, grouped-query. Attention.cu
// repacks Megatron's interleaved qkv rows into the bf16 Q [T, heads, D] and
// K, V [T, groups, D] this takes, and the gradients back.
//
// Lives in its own library (libhypipe_fused_attention.so, built where the
// cudnn-frontend headers are found): cuDNN and the CUDA runtime it calls are
// opened with dlopen at the first call, so that a run that never takes this
// path never needs libcudnn.so.9, and the GPU kit's kernel rebuild (nvcc
// only) does not recompile it. Plain C++: no CUDA or cuDNN header.
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_CUDA_FUSEDATTENTION_H
#define HYPIPE_RUNTIME_KERNELS_CUDA_FUSEDATTENTION_H

#include <array>
#include <cstdint>
#include <string>

namespace hypipe::rt::cuda::fused {

/// One attention call: `sequences` packed sequences of `tokens` rows in all,
/// the longest `maxLength` long; `heads` query heads in `groups` key/value
/// groups of head dimension `headDim`; scores scaled by `scale`.
struct Problem {
  int64_t sequences = 0, tokens = 0, maxLength = 0;
  int64_t heads = 0, groups = 0, headDim = 0;
  float scale = 1.0f;
};

/// The tensors of a graph, by the uid cuDNN's variant pack knows them by:
/// the bf16 tensors and fp32 Stats; each sequence's length ([sequences]
/// int32, for queries and keys alike); the ragged offsets ([sequences + 1]
/// int32, elements) of Q/O/dQ/dO, of K/V/dK/dV and of Stats.
enum class Uid : int64_t {
  Q = 1,
  K,
  V,
  O,
  Stats,
  dO,
  dQ,
  dK,
  dV,
  SeqLenQ,
  SeqLenKV,
  QOffsets,
  KVOffsets,
  StatsOffsets,
};

/// How a [b, h, s, d] tensor of cuDNN lies in hypipe's token-major memory:
/// its dims, its strides (elements) and what its ragged offset of sequence b
/// is per token (offset[b] = firstRow(b) * offsetPerToken).
struct Layout {
  std::array<int64_t, 4> dims, strides;
  int64_t offsetPerToken;
};
/// Q, O, dQ, dO: [T, heads, D]; K, V, dK, dV: [T, groups, D]; Stats: [T,
/// heads] (a row's log-sum-exp of its scaled scores, the quantity the
/// hand-written kernels keep in the same place). The graph's batch is
/// graphSequences(sequences): the sequences past the call's are empty.
Layout queryLayout(const Problem &p);
Layout keyValueLayout(const Problem &p);
Layout statsLayout(const Problem &p);
/// What the graphs are built for, rounded so that microbatches of close
/// shapes share their plans: the longest sequence up to a multiple of 64,
/// the number of sequences up to a power of two (the others empty), and the
/// tokens (cuDNN's bound on a ragged tensor's rows, which sizes its
/// workspace) up to a multiple of 256.
int64_t graphLength(int64_t maxLength);
int64_t graphSequences(int64_t sequences);
int64_t graphTokens(int64_t tokens);

/// Opens libcudnn.so.9 (once); "" when it is there and at least 9.6 (the
/// first whose SDPA takes ragged softmax statistics), else why not.
const std::string &loadLibrary();

/// Builds the forward and backward graphs of `p` and validates them for a
/// GPU of compute capability `smVersion` (90: Hopper): no device needed.
/// "" when cuDNN takes them, else cuDNN's reason (or hypipe's: a ragged
/// offset past int32, which the graphs' offset tensors hold).
std::string validate(const Problem &p, int smVersion);

/// HYPIPE_FUSED_ATTN, as Transformer Engine's NVTE_FUSED_ATTN: unset (or
/// empty), bf16
/// attention takes cuDNN where it is found and has a plan (the hand-written
/// kernels otherwise, said once on stderr); 1 requires it (a missing cuDNN
/// or plan is an error: the GPU kit's checks of this path; also true, on);
/// 0 (false, off) keeps the hand-written kernels (the kit's switch to
/// measure what it is worth). Another value is refused (std::runtime_error).
enum class Mode { Auto, Required, Off };
Mode mode();

/// Whether bf16 attention goes through cuDNN: mode() is not Off and
/// libcudnn.so.9 loads (under Auto the first call says on stderr why not;
/// under Required it throws std::runtime_error saying so).
bool enabled();

enum class Pass { Forward, Backward };

/// The plan of `p`'s pass, built with the GPU's cuDNN at its first use (on
/// `stream`, a cudaStream_t) and cached by shape: its workspace in bytes, or
/// -1 when cuDNN has no plan for it (the caller falls back to the
/// hand-written kernels; said once on stderr). Under Mode::Required, no plan
/// throws std::runtime_error with cuDNN's reason instead.
int64_t prepare(const Problem &p, Pass pass, int smVersion, void *stream);

/// The device buffers of one call (bf16 unless said). Index arrays, B =
/// graphSequences(sequences): seqLens [B], the three offset arrays [B + 1],
/// in elements (Layout::offsetPerToken times each sequence's first row; an
/// empty sequence past the call's starts at its end).
struct Buffers {
  const void *q = nullptr, *k = nullptr, *v = nullptr;
  void *o = nullptr;      ///< written forward, read backward
  float *stats = nullptr; ///< fp32 [T, heads]: written forward, read backward
  const void *dO = nullptr;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  const int32_t *seqLens = nullptr, *qOffsets = nullptr, *kvOffsets = nullptr,
                *statsOffsets = nullptr;
};

/// Runs the pass prepare() built for `p` (forward: O and Stats from Q, K, V;
/// backward: dQ, dK, dV from Q, K, V, O, dO, Stats) on `stream`, with
/// `workspace` of prepare()'s bytes. Throws std::runtime_error with cuDNN's
/// reason when it fails.
void run(const Problem &p, Pass pass, const Buffers &b, void *workspace,
         void *stream);

} // namespace hypipe::rt::cuda::fused

#endif
