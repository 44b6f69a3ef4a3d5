//===- FusedAttention.cpp - cuDNN's fused SDPA graphs, built and run ------===//
//
// The forward and backward graphs are cudnn-frontend's composite SDPA nodes:
// bf16 inputs and outputs, fp32 softmax and accumulation, a top-left causal
// mask (every query sees the keys up to its own position in its sequence),
// a padding mask from each sequence's length and ragged offsets for every
// token-major tensor, so that packed microbatches run as they are. cuDNN
// picks the engine (heuristics A, then its fallback list).
//
//===----------------------------------------------------------------------===//

#include "runtime/kernels/cuda/FusedAttention.h"

#include <cudnn_frontend.h>

#include <dlfcn.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

// The frontend's dynamic loading reads cuDNN's entry points from this handle
// (NV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING); loadLibrary() sets it.
namespace cudnn_frontend {
void *cudnn_dlhandle = nullptr;
} // namespace cudnn_frontend

namespace hypipe::rt::cuda::fused {
namespace {

namespace fe = cudnn_frontend;
using Graph = fe::graph::Graph;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

TensorPtr tensorOf(Graph &g, const char *name, Uid uid, const Layout &l) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(int64_t(uid))
                      .set_dim({l.dims.begin(), l.dims.end()})
                      .set_stride({l.strides.begin(), l.strides.end()}));
}

TensorPtr indexTensor(Graph &g, const char *name, Uid uid, int64_t n) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(int64_t(uid))
                      .set_dim({n, 1, 1, 1})
                      .set_stride({1, 1, 1, 1})
                      .set_data_type(fe::DataType_t::INT32));
}

/// Marks `t` (a graph output) with layout `l`.
void output(const TensorPtr &t, Uid uid, const Layout &l) {
  t->set_output(true)
      .set_uid(int64_t(uid))
      .set_dim({l.dims.begin(), l.dims.end()})
      .set_stride({l.strides.begin(), l.strides.end()});
}

/// The graph of `p`'s pass, validated for `smVersion` (0: the current
/// device's); null with cuDNN's reason in `why` when it refuses.
std::shared_ptr<Graph> buildGraph(const Problem &p, Pass pass, int smVersion,
                                  std::string &why) {
  auto g = std::make_shared<Graph>();
  if (smVersion > 0)
    g->set_sm_version(smVersion);
  g->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const Layout ql = queryLayout(p), kvl = keyValueLayout(p),
               sl = statsLayout(p);
  const int64_t b = graphSequences(p.sequences), rows = graphTokens(p.tokens);
  // The offset tensors are int32: the last offset of the widest tensor is
  // rows x its elements per token.
  const int64_t widest = std::max(ql.offsetPerToken, kvl.offsetPerToken);
  if (rows * widest > INT32_MAX) {
    why = "the ragged offsets of " + std::to_string(rows) + " tokens x " +
          std::to_string(widest) + " elements pass int32";
    return nullptr;
  }
  auto q = tensorOf(*g, "Q", Uid::Q, ql), k = tensorOf(*g, "K", Uid::K, kvl),
       v = tensorOf(*g, "V", Uid::V, kvl);
  auto seqLenQ = indexTensor(*g, "seq_len_q", Uid::SeqLenQ, b),
       seqLenKV = indexTensor(*g, "seq_len_kv", Uid::SeqLenKV, b),
       qOffsets = indexTensor(*g, "q_offsets", Uid::QOffsets, b + 1),
       kvOffsets = indexTensor(*g, "kv_offsets", Uid::KVOffsets, b + 1),
       statsOffsets =
           indexTensor(*g, "stats_offsets", Uid::StatsOffsets, b + 1);
  q->set_ragged_offset(qOffsets);
  k->set_ragged_offset(kvOffsets);
  v->set_ragged_offset(kvOffsets);
  // What the forward's and the backward's attributes say alike: the scale,
  // the top-left causal and padding masks, each sequence's length and the
  // bound on the ragged tensors' rows.
  auto masked = [&](auto attributes) {
    attributes.set_attn_scale(p.scale)
        .set_causal_mask(true)
        .set_padding_mask(true)
        .set_seq_len_q(seqLenQ)
        .set_seq_len_kv(seqLenKV)
        .set_max_total_seq_len_q(rows)
        .set_max_total_seq_len_kv(rows);
    return attributes;
  };
  if (pass == Pass::Forward) {
    auto attributes = masked(fe::graph::SDPA_attributes()
                                 .set_name("sdpa_forward")
                                 .set_generate_stats(true));
    auto [o, stats] = g->sdpa(q, k, v, attributes);
    output(o, Uid::O, ql);
    o->set_ragged_offset(qOffsets);
    output(stats, Uid::Stats, sl);
    stats->set_data_type(fe::DataType_t::FLOAT).set_ragged_offset(statsOffsets);
  } else {
    auto o = tensorOf(*g, "O", Uid::O, ql),
         dO = tensorOf(*g, "dO", Uid::dO, ql);
    auto stats = tensorOf(*g, "Stats", Uid::Stats, sl);
    stats->set_data_type(fe::DataType_t::FLOAT).set_ragged_offset(statsOffsets);
    o->set_ragged_offset(qOffsets);
    dO->set_ragged_offset(qOffsets);
    auto attributes =
        masked(fe::graph::SDPA_backward_attributes().set_name("sdpa_backward"));
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, dO, stats, attributes);
    output(dq, Uid::dQ, ql);
    output(dk, Uid::dK, kvl);
    output(dv, Uid::dV, kvl);
    dq->set_ragged_offset(qOffsets);
    dk->set_ragged_offset(kvOffsets);
    dv->set_ragged_offset(kvOffsets);
  }
  auto status = g->validate();
  if (!status.is_good()) {
    why = status.get_message();
    return nullptr;
  }
  return g;
}

const char *passName(Pass pass) {
  return pass == Pass::Forward ? "forward" : "backward";
}

std::string describe(const Problem &p, Pass pass) {
  return std::string(passName(pass)) + " of " + std::to_string(p.sequences) +
         " sequence(s) up to " + std::to_string(p.maxLength) + " tokens, " +
         std::to_string(p.heads) + " heads in " + std::to_string(p.groups) +
         " groups of dimension " + std::to_string(p.headDim);
}

/// Plans built for the device, by shape; a null graph is a shape cuDNN has
/// no plan for.
struct Built {
  std::shared_ptr<Graph> graph;
  int64_t workspace = -1;
};
using Key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, uint32_t>;

Key keyOf(const Problem &p, Pass pass) {
  uint32_t scaleBits;
  std::memcpy(&scaleBits, &p.scale, sizeof scaleBits);
  return {int(pass),
          graphSequences(p.sequences),
          graphLength(p.maxLength),
          graphTokens(p.tokens),
          p.heads,
          p.groups,
          p.headDim,
          scaleBits};
}

struct Plans {
  std::mutex mutex;
  cudnnHandle_t handle = nullptr;
  std::map<Key, Built> built;
};

Plans &plans() {
  static Plans *all = new Plans; // lives as long as the process's CUDA
  return *all;
}

} // namespace

Layout queryLayout(const Problem &p) {
  const int64_t s = graphLength(p.maxLength), h = p.heads, d = p.headDim;
  return {
      {graphSequences(p.sequences), h, s, d}, {s * h * d, d, h * d, 1}, h * d};
}

Layout keyValueLayout(const Problem &p) {
  const int64_t s = graphLength(p.maxLength), g = p.groups, d = p.headDim;
  return {
      {graphSequences(p.sequences), g, s, d}, {s * g * d, d, g * d, 1}, g * d};
}

Layout statsLayout(const Problem &p) {
  const int64_t s = graphLength(p.maxLength), h = p.heads;
  return {{graphSequences(p.sequences), h, s, 1}, {s * h, 1, h, 1}, h};
}

int64_t graphLength(int64_t maxLength) { return (maxLength + 63) / 64 * 64; }

int64_t graphSequences(int64_t sequences) {
  int64_t b = 1;
  while (b < sequences)
    b *= 2;
  return b;
}

int64_t graphTokens(int64_t tokens) { return (tokens + 255) / 256 * 256; }

const std::string &loadLibrary() {
  static const std::string error = [] {
    dlerror();
    void *handle = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_GLOBAL);
    if (!handle) {
      const char *why = dlerror();
      return std::string("libcudnn.so.9 is not on the library path (") +
             (why ? why : "dlopen failed") + ")";
    }
    using GetVersion = size_t (*)();
    auto version =
        reinterpret_cast<GetVersion>(dlsym(handle, "cudnnGetVersion"));
    if (!version)
      return std::string("the libcudnn.so.9 found has no cudnnGetVersion");
    if (const size_t v = version(); v < 90600)
      return "the cuDNN found is " + std::to_string(v / 10000) + "." +
             std::to_string(v / 100 % 100) +
             ", and its SDPA takes ragged softmax statistics from 9.6 on";
    cudnn_frontend::cudnn_dlhandle = handle;
    return std::string();
  }();
  return error;
}

std::string validate(const Problem &p, int smVersion) {
  if (std::string missing = loadLibrary(); !missing.empty())
    return missing;
  for (Pass pass : {Pass::Forward, Pass::Backward}) {
    std::string why;
    try {
      if (!buildGraph(p, pass, smVersion, why))
        return std::string(passName(pass)) + ": " + why;
    } catch (const std::exception &e) {
      return std::string(passName(pass)) + ": " + e.what();
    }
  }
  return std::string();
}

Mode mode() {
  static const Mode m = [] {
    const char *flag = std::getenv("HYPIPE_FUSED_ATTN");
    const std::string v = flag ? flag : "";
    if (v.empty())
      return Mode::Auto;
    if (v == "1" || v == "true" || v == "on")
      return Mode::Required;
    if (v == "0" || v == "false" || v == "off")
      return Mode::Off;
    throw std::runtime_error("error: HYPIPE_FUSED_ATTN is '" + v +
                             "'\nhelp: give 1 (cuDNN's fused attention "
                             "required), 0 (the hand-written kernels) or "
                             "nothing (cuDNN where it is found)");
  }();
  return m;
}

bool enabled() {
  if (mode() == Mode::Off)
    return false;
  const std::string &missing = loadLibrary();
  if (missing.empty())
    return true;
  if (mode() == Mode::Required)
    throw std::runtime_error(
        "error: HYPIPE_FUSED_ATTN=1 asks for cuDNN's fused attention, and " +
        missing +
        "\nhelp: put cuDNN 9 (the nvidia-cudnn-cu13 package's lib folder, "
        "or /usr/local/cuda/lib64) on LD_LIBRARY_PATH, or unset "
        "HYPIPE_FUSED_ATTN");
  static const bool said = [&] {
    std::fprintf(stderr,
                 "hypipe: bf16 attention runs on the hand-written kernels: "
                 "%s\nhelp: put cuDNN 9 (the nvidia-cudnn-cu13 package's lib "
                 "folder, or /usr/local/cuda/lib64) on LD_LIBRARY_PATH for "
                 "cuDNN's fused attention\n",
                 missing.c_str());
    return true;
  }();
  (void)said;
  return false;
}

int64_t prepare(const Problem &p, Pass pass, int smVersion, void *stream) {
  Plans &all = plans();
  std::lock_guard<std::mutex> lock(all.mutex);
  auto [it, fresh] = all.built.try_emplace(keyOf(p, pass));
  Built &b = it->second;
  if (!fresh)
    return b.workspace;
  std::string why;
  try {
    if (!all.handle) {
      cudnnHandle_t handle = nullptr;
      if (fe::detail::create_handle(&handle) != CUDNN_STATUS_SUCCESS)
        throw std::runtime_error("cudnnCreate failed");
      all.handle = handle;
    }
    fe::detail::set_stream(all.handle, static_cast<cudaStream_t>(stream));
    auto g = buildGraph(p, pass, smVersion, why);
    if (g) {
      auto status = g->build_operation_graph(all.handle);
      if (status.is_good())
        status = g->create_execution_plans(
            {fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
      if (status.is_good())
        status = g->check_support(all.handle);
      if (status.is_good())
        status = g->build_plans(all.handle);
      int64_t bytes = 0;
      if (status.is_good())
        status = g->get_workspace_size(bytes);
      if (status.is_good()) {
        b.graph = std::move(g);
        b.workspace = bytes;
      } else {
        why = status.get_message();
      }
    }
  } catch (const std::exception &e) {
    why = e.what();
  }
  if (!b.graph && mode() == Mode::Required) {
    all.built.erase(it);
    throw std::runtime_error("error: HYPIPE_FUSED_ATTN=1 asks for cuDNN's "
                             "fused attention, and cuDNN has no plan for the " +
                             describe(p, pass) + ": " + why +
                             "\nhelp: unset HYPIPE_FUSED_ATTN to fall back to "
                             "the hand-written kernels");
  }
  if (!b.graph)
    std::fprintf(stderr,
                 "hypipe: cuDNN has no fused attention plan for the %s (%s); "
                 "the hand-written kernels run it\n",
                 describe(p, pass).c_str(), why.c_str());
  return b.workspace;
}

void run(const Problem &p, Pass pass, const Buffers &b, void *workspace,
         void *stream) {
  Plans &all = plans();
  std::shared_ptr<Graph> g;
  {
    std::lock_guard<std::mutex> lock(all.mutex);
    auto it = all.built.find(keyOf(p, pass));
    if (it == all.built.end() || !it->second.graph)
      throw std::runtime_error("error: fused attention " + describe(p, pass) +
                               " has no plan: call prepare() first");
    g = it->second.graph;
    fe::detail::set_stream(all.handle, static_cast<cudaStream_t>(stream));
  }
  auto ptr = [](const void *x) { return const_cast<void *>(x); };
  std::unordered_map<int64_t, void *> pack = {
      {int64_t(Uid::Q), ptr(b.q)},
      {int64_t(Uid::K), ptr(b.k)},
      {int64_t(Uid::V), ptr(b.v)},
      {int64_t(Uid::O), b.o},
      {int64_t(Uid::Stats), b.stats},
      {int64_t(Uid::SeqLenQ), ptr(b.seqLens)},
      {int64_t(Uid::SeqLenKV), ptr(b.seqLens)},
      {int64_t(Uid::QOffsets), ptr(b.qOffsets)},
      {int64_t(Uid::KVOffsets), ptr(b.kvOffsets)},
      {int64_t(Uid::StatsOffsets), ptr(b.statsOffsets)}};
  if (pass == Pass::Backward) {
    pack[int64_t(Uid::dO)] = ptr(b.dO);
    pack[int64_t(Uid::dQ)] = b.dq;
    pack[int64_t(Uid::dK)] = b.dk;
    pack[int64_t(Uid::dV)] = b.dv;
  }
  auto status = g->execute(all.handle, pack, workspace);
  if (!status.is_good())
    throw std::runtime_error("error: cuDNN's fused attention " +
                             describe(p, pass) +
                             " failed: " + status.get_message());
}

} // namespace hypipe::rt::cuda::fused
