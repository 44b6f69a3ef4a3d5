//===- cudnn_sdpa.cu - cuDNN fused attention through the backend API ------===//
//
// Probes cuDNN's fused scaled dot-product attention (flash attention) in the
// cuDNN found at run time (libcudnn.so.9, opened with dlopen so that its
// absence is a skip), through the backend graph API of cudnn_backend.h: the
// header-only cudnn-frontend is not used. The operation graph is the one
// cudnn-frontend's composite SDPA node lowers to for cuDNN 9 before 9.21
// (fused by cuDNN's attention engine, not run op by op):
//   S = Q K^T (matmul, fp32) -> * scale -> [padding mask: row < seq_len_q
//   and col < seq_len_kv] -> causal mask (row >= col, top-left) -> softmax
//   written out as max / sub / exp / sum / div, with Stats = max + log(sum)
//   as the training forward saves it -> O = P V (P in bf16).
// bf16 Q, K, V, O in hypipe's token-major layout ([b, s, h, d] in memory),
// fp32 Stats [b, h, s, 1].
//
// What it verifies, for head dim 64 and 128:
//   - causal, b=2 h=4 s=256, and causal with variable length (padded
//     batch, sequence lengths 256 and 100 through seq-len tensors): O and
//     Stats start as NaN; every element of every valid row must be written
//     and match a naive CUDA reference (fp32 online softmax) within
//     0.02 + 0.02|ref| (O) and 2e-3 (1 + |ref|) (Stats); padded rows are
//     not checked (cuDNN leaves them unspecified);
//   - causal at b=1 h=16 s=4096: time, median of 20 after 3 warm-ups.
// What it does NOT do: the backward pass (dQ, dK, dV). Its graph is about
// three times the forward's and could not be checked without a GPU here;
// a failure of the forward graph says more about this probe than about
// cuDNN, so the forward is kept small and complete first.
// GQA (fewer K/V heads) is not exercised: K and V have as many heads as Q.
//
// Figures: `@figure cudnn_version V -`, `@figure cudnn_sdpa_fwd_engines N -`
// (engine configs cuDNN's heuristics offer for the d=128 s=4096 graph),
// `@figure cudnn_sdpa_fwd_d64 X TFLOP/s`, `@figure cudnn_sdpa_fwd_d128 X
// TFLOP/s` (causal FLOPs: 2 b h s^2 d, half of the two full products).
// A graph that cuDNN rejects fails the probe with cuDNN's last error; run
// with CUDNN_LOGERR_DBG=1 CUDNN_LOGDEST_DBG=stderr for its reasons.
// Usage: cudnn_sdpa
//
//===----------------------------------------------------------------------===//
#include "probe.cuh"

#include <cuda_bf16.h>
#include <cudnn.h>

#include <dlfcn.h>

#include <cmath>
#include <limits>
#include <memory>

namespace {

/// The cuDNN entry points this probe calls, found in libcudnn.so.9.
struct Cudnn {
  decltype(&::cudnnGetVersion) getVersion;
  decltype(&::cudnnGetCudartVersion) getCudartVersion;
  decltype(&::cudnnGetErrorString) getErrorString;
  decltype(&::cudnnGetLastErrorString) getLastErrorString;
  decltype(&::cudnnCreate) create;
  decltype(&::cudnnDestroy) destroy;
  decltype(&::cudnnSetStream) setStream;
  decltype(&::cudnnBackendCreateDescriptor) createDescriptor;
  decltype(&::cudnnBackendDestroyDescriptor) destroyDescriptor;
  decltype(&::cudnnBackendSetAttribute) setAttribute;
  decltype(&::cudnnBackendGetAttribute) getAttribute;
  decltype(&::cudnnBackendFinalize) finalize;
  decltype(&::cudnnBackendExecute) execute;
};

Cudnn dnn;

template <class F> void bind(void *lib, const char *symbol, F &fn) {
  fn = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!fn)
    probe::fail(std::string("libcudnn.so.9 has no ") + symbol);
}

void loadCudnn() {
  void *lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    probe::skip(std::string("libcudnn.so.9 not found: ") + dlerror());
  bind(lib, "cudnnGetVersion", dnn.getVersion);
  bind(lib, "cudnnGetCudartVersion", dnn.getCudartVersion);
  bind(lib, "cudnnGetErrorString", dnn.getErrorString);
  bind(lib, "cudnnGetLastErrorString", dnn.getLastErrorString);
  bind(lib, "cudnnCreate", dnn.create);
  bind(lib, "cudnnDestroy", dnn.destroy);
  bind(lib, "cudnnSetStream", dnn.setStream);
  bind(lib, "cudnnBackendCreateDescriptor", dnn.createDescriptor);
  bind(lib, "cudnnBackendDestroyDescriptor", dnn.destroyDescriptor);
  bind(lib, "cudnnBackendSetAttribute", dnn.setAttribute);
  bind(lib, "cudnnBackendGetAttribute", dnn.getAttribute);
  bind(lib, "cudnnBackendFinalize", dnn.finalize);
  bind(lib, "cudnnBackendExecute", dnn.execute);
}

std::string lastError() {
  char text[4096] = {0};
  dnn.getLastErrorString(text, sizeof(text));
  return text[0] ? std::string(" (") + text + ")" : "";
}

void check(cudnnStatus_t status, const std::string &call) {
  if (status != CUDNN_STATUS_SUCCESS)
    probe::fail(call + ": " + dnn.getErrorString(status) + lastError());
}

#define PROBE_CUDNN(call) check((call), #call)

// The handle attributes are deprecated in cuDNN 9's headers in favour of
// device-property descriptors, which older cuDNN 9 releases lack; every
// cuDNN 9 still honours them.
constexpr auto kOperationGraphHandle = cudnnBackendAttributeName_t(800);
constexpr auto kExecutionPlanHandle = cudnnBackendAttributeName_t(400);

/// One backend descriptor, destroyed with its owner.
class Descriptor {
public:
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    PROBE_CUDNN(dnn.createDescriptor(type, &raw));
  }
  ~Descriptor() { dnn.destroyDescriptor(raw); }
  Descriptor(const Descriptor &) = delete;
  Descriptor &operator=(const Descriptor &) = delete;

  template <class T>
  Descriptor &set(cudnnBackendAttributeName_t name,
                  cudnnBackendAttributeType_t type, const T *values,
                  int64_t count = 1) {
    PROBE_CUDNN(dnn.setAttribute(raw, name, type, count, values));
    return *this;
  }
  Descriptor &set(cudnnBackendAttributeName_t name,
                  cudnnBackendDescriptor_t value) {
    return set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, &value);
  }
  void finalize(const std::string &what) {
    check(dnn.finalize(raw), "finalizing " + what);
  }
  cudnnBackendDescriptor_t get() const { return raw; }

private:
  cudnnBackendDescriptor_t raw = nullptr;
};

using Dims = std::vector<int64_t>;

/// A backend operation graph under construction, owning its descriptors.
class Graph {
public:
  enum class Storage { Memory, Virtual, ByValue };

  explicit Graph(cudnnHandle_t handle) : handle(handle) {}

  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type,
                                  const Dims &dims, const Dims &strides,
                                  Storage storage = Storage::Memory) {
    Descriptor &t = own(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const int64_t alignment = 16;
    const bool isVirtual = storage == Storage::Virtual;
    const bool byValue = storage == Storage::ByValue;
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, &type)
        .set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, dims.data(),
             int64_t(dims.size()))
        .set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, strides.data(),
             int64_t(strides.size()))
        .set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, &uid)
        .set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, &alignment)
        .set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, &isVirtual);
    if (byValue)
      t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, &byValue);
    t.finalize("tensor " + std::to_string(uid));
    return t.get();
  }

  cudnnBackendDescriptor_t intermediate(cudnnDataType_t type, const Dims &dims,
                                        const Dims &strides) {
    return tensor(nextVirtualUid++, type, dims, strides, Storage::Virtual);
  }

  /// y = mode(x[, b[, t]]); `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t precision,
                 cudnnBackendDescriptor_t y, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t b = nullptr,
                 cudnnBackendDescriptor_t t = nullptr, int64_t axis = -1) {
    Descriptor &pw = own(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, &mode)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, &precision);
    if (axis >= 0)
      pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, &axis);
    pw.finalize("pointwise descriptor " + std::to_string(int(mode)));
    Descriptor &op = own(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get())
        .set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t)
      op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    // As cudnn-frontend does: both scaling factors set, to 1.
    const float unit = 1.0f;
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, &unit)
        .set(CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, &unit);
    op.finalize("pointwise operation " + std::to_string(int(mode)));
    ops.push_back(op.get());
  }

  /// c = a b (batched over the leading dims), fp32 accumulation; the
  /// overrides are per-batch sequence-length tensors or null.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t c, cudnnBackendDescriptor_t mOverride,
              cudnnBackendDescriptor_t nOverride,
              cudnnBackendDescriptor_t kOverride) {
    Descriptor &mm = own(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32);
    mm.finalize("matmul descriptor");
    Descriptor &op = own(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, a)
        .set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, b)
        .set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, c)
        .set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get());
    if (mOverride)
      op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, mOverride);
    if (nOverride)
      op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, nOverride);
    if (kOverride)
      op.set(CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, kOverride);
    op.finalize("matmul operation");
    ops.push_back(op.get());
  }

  /// y = reduce(x) over the dims where y has extent 1.
  void reduction(cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                 cudnnBackendDescriptor_t y) {
    Descriptor &red = own(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t fp32 = CUDNN_DATA_FLOAT;
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE,
            &mode)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, &fp32);
    red.finalize("reduction descriptor");
    Descriptor &op = own(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y)
        .set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red.get());
    op.finalize("reduction operation");
    ops.push_back(op.get());
  }

  /// The finalized operation graph.
  cudnnBackendDescriptor_t finalize() {
    Descriptor &g = own(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    g.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
          ops.data(), int64_t(ops.size()))
        .set(kOperationGraphHandle, CUDNN_TYPE_HANDLE, &handle);
    g.finalize("the SDPA operation graph (" + std::to_string(ops.size()) +
               " operations)");
    return g.get();
  }

private:
  Descriptor &own(cudnnBackendDescriptorType_t type) {
    owned.push_back(std::make_unique<Descriptor>(type));
    return *owned.back();
  }

  cudnnHandle_t handle;
  std::vector<std::unique_ptr<Descriptor>> owned;
  std::vector<cudnnBackendDescriptor_t> ops;
  int64_t nextVirtualUid = 1000;
};

enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kScale,
  kNegativeInfinity,
  kSeqLenQ,
  kSeqLenKv
};

struct Shape {
  int64_t b, h, s, d;
  bool variableLength;
  std::string name() const {
    return "b=" + std::to_string(b) + " h=" + std::to_string(h) +
           " s=" + std::to_string(s) + " d=" + std::to_string(d) +
           (variableLength ? " variable length" : "");
  }
};

/// Builds the forward graph of `s`: causal, with the padding mask when
/// variable-length (see the header for its operations).
cudnnBackendDescriptor_t buildForward(Graph &g, const Shape &shape) {
  const int64_t b = shape.b, h = shape.h, s = shape.s, d = shape.d;
  const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16, fp32 = CUDNN_DATA_FLOAT,
                        i32 = CUDNN_DATA_INT32, boolean = CUDNN_DATA_BOOLEAN;
  // Logical [b, h, s, d]; in memory [b, s, h, d] (token-major).
  const Dims qkvDims{b, h, s, d}, qkvStrides{s * h * d, d, h * d, 1};
  auto Q = g.tensor(kQ, bf16, qkvDims, qkvStrides);
  auto KT = g.tensor(kK, bf16, {b, h, d, s}, {s * h * d, d, 1, h * d});
  auto V = g.tensor(kV, bf16, qkvDims, qkvStrides);
  auto O = g.tensor(kO, bf16, qkvDims, qkvStrides);
  auto stats = g.tensor(kStats, fp32, {b, h, s, 1}, {h * s, s, 1, 1});
  const Dims one{1, 1, 1, 1};
  auto scale = g.tensor(kScale, fp32, one, one, Graph::Storage::ByValue);
  auto negativeInfinity =
      g.tensor(kNegativeInfinity, fp32, one, one, Graph::Storage::ByValue);
  cudnnBackendDescriptor_t seqLenQ = nullptr, seqLenKv = nullptr;
  if (shape.variableLength) {
    seqLenQ = g.tensor(kSeqLenQ, i32, {b, 1, 1, 1}, one);
    seqLenKv = g.tensor(kSeqLenKv, i32, {b, 1, 1, 1}, one);
  }

  const Dims scoreDims{b, h, s, s}, scoreStrides{h * s * s, s * s, s, 1};
  const Dims rowDims{b, h, s, 1}, rowStrides{h * s, s, 1, 1};
  auto scores = g.intermediate(fp32, scoreDims, scoreStrides);
  g.matmul(Q, KT, scores, seqLenQ, seqLenKv, nullptr);
  auto scaled = g.intermediate(fp32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_MUL, fp32, scaled, scores, scale);
  auto masked = scaled;

  if (shape.variableLength) {
    auto row = g.intermediate(i32, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, row, masked, nullptr, nullptr,
                2);
    auto col = g.intermediate(i32, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_GEN_INDEX, i32, col, masked, nullptr, nullptr,
                3);
    auto rowValid = g.intermediate(boolean, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_CMP_LT, boolean, rowValid, row, seqLenQ);
    auto colValid = g.intermediate(boolean, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_CMP_LT, boolean, colValid, col, seqLenKv);
    auto valid = g.intermediate(boolean, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_LOGICAL_AND, boolean, valid, rowValid,
                colValid);
    auto padded = g.intermediate(fp32, scoreDims, scoreStrides);
    g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, fp32, padded, masked,
                negativeInfinity, valid);
    masked = padded;
  }

  // Causal, top-left: keep row >= col.
  auto row = g.intermediate(i32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, fp32, row, masked, nullptr, nullptr,
              2);
  auto col = g.intermediate(i32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, fp32, col, masked, nullptr, nullptr,
              3);
  auto keep = g.intermediate(boolean, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, boolean, keep, row, col);
  auto causal = g.intermediate(fp32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, fp32, causal, masked,
              negativeInfinity, keep);

  // Softmax, saving Stats = max + log(sum of exp) for the backward pass.
  auto rowMax = g.intermediate(fp32, rowDims, rowStrides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, causal, rowMax);
  auto centred = g.intermediate(fp32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_SUB, fp32, centred, causal, rowMax);
  auto exps = g.intermediate(fp32, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_EXP, fp32, exps, centred);
  auto rowSum = g.intermediate(fp32, rowDims, rowStrides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, exps, rowSum);
  auto logSum = g.intermediate(fp32, rowDims, rowStrides);
  g.pointwise(CUDNN_POINTWISE_LOG, fp32, logSum, rowSum);
  g.pointwise(CUDNN_POINTWISE_ADD, fp32, stats, rowMax, logSum);
  auto probabilities = g.intermediate(bf16, scoreDims, scoreStrides);
  g.pointwise(CUDNN_POINTWISE_DIV, fp32, probabilities, exps, rowSum);

  g.matmul(probabilities, V, O, seqLenQ, nullptr, seqLenKv);
  return g.finalize();
}

/// An execution plan for a graph: the first engine config from cuDNN's
/// heuristics (mode A) that finalizes.
struct Plan {
  std::unique_ptr<Descriptor> plan;
  std::vector<std::unique_ptr<Descriptor>> configs;
  int64_t offered = 0;
  int64_t workspaceBytes = 0;
};

Plan makePlan(cudnnHandle_t handle, cudnnBackendDescriptor_t graph,
              const std::string &what) {
  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph)
      .set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, &mode);
  heuristics.finalize("engine heuristics for " + what);
  Plan p;
  PROBE_CUDNN(dnn.getAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &p.offered,
                               nullptr));
  if (p.offered == 0)
    probe::fail("cuDNN offers no engine for " + what + lastError());
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < p.offered; ++i) {
    p.configs.push_back(
        std::make_unique<Descriptor>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(p.configs.back()->get());
  }
  int64_t returned = 0;
  PROBE_CUDNN(dnn.getAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                               CUDNN_TYPE_BACKEND_DESCRIPTOR, p.offered,
                               &returned, raw.data()));
  std::string reasons;
  for (int64_t i = 0; i < returned; ++i) {
    auto plan =
        std::make_unique<Descriptor>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    plan->set(kExecutionPlanHandle, CUDNN_TYPE_HANDLE, &handle)
        .set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, raw[size_t(i)]);
    cudnnStatus_t status = dnn.finalize(plan->get());
    if (status != CUDNN_STATUS_SUCCESS) {
      reasons += std::string("\n  config ") + std::to_string(i) + ": " +
                 dnn.getErrorString(status) + lastError();
      continue;
    }
    PROBE_CUDNN(
        dnn.getAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                         CUDNN_TYPE_INT64, 1, &returned, &p.workspaceBytes));
    std::printf("%s: engine config %lld of %lld offered builds a plan "
                "(workspace %lld bytes)\n",
                what.c_str(), (long long)i, (long long)p.offered,
                (long long)p.workspaceBytes);
    p.plan = std::move(plan);
    return p;
  }
  probe::fail("none of the " + std::to_string(p.offered) +
              " engine configs cuDNN offers for " + what +
              " builds a plan:" + reasons);
}

/// Device buffers of one shape, filled with random bf16 in (-1, 1).
struct Buffers {
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  float *stats = nullptr, *referenceO = nullptr, *referenceStats = nullptr;
  int32_t *seqLen = nullptr;
  void *workspace = nullptr;
  std::vector<int32_t> lengths;
};

__global__ void fillRandomKernel(__nv_bfloat16 *x, uint64_t n, uint32_t seed) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n;
       i += uint64_t(gridDim.x) * blockDim.x) {
    uint32_t bits = probe::patternWord(i, seed) >> 8;
    x[i] =
        __float2bfloat16_rn((float(bits) + 0.5f) * (2.0f / 16777216.0f) - 1.0f);
  }
}

/// Naive causal attention, one thread per query row, fp32 online softmax;
/// rows at or past their sequence's length are skipped.
template <int D>
__global__ void referenceKernel(int64_t b, int64_t h, int64_t s,
                                const __nv_bfloat16 *q, const __nv_bfloat16 *k,
                                const __nv_bfloat16 *v, const int32_t *lengths,
                                float scale, float *o, float *stats) {
  int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (idx >= b * h * s)
    return;
  const int64_t batch = idx / (h * s), head = idx / s % h, i = idx % s;
  if (i >= lengths[batch])
    return;
  auto at = [&](int64_t token) { return ((batch * s + token) * h + head) * D; };
  float qi[D], acc[D];
  for (int c = 0; c < D; ++c) {
    qi[c] = __bfloat162float(q[at(i) + c]);
    acc[c] = 0;
  }
  float m = -INFINITY, l = 0;
  for (int64_t j = 0; j <= i; ++j) {
    float dot = 0;
    for (int c = 0; c < D; ++c)
      dot += qi[c] * __bfloat162float(k[at(j) + c]);
    const float score = dot * scale, next = fmaxf(m, score);
    const float correction = expf(m - next), p = expf(score - next);
    l = l * correction + p;
    for (int c = 0; c < D; ++c)
      acc[c] = acc[c] * correction + p * __bfloat162float(v[at(j) + c]);
    m = next;
  }
  for (int c = 0; c < D; ++c)
    o[at(i) + c] = acc[c] / l;
  stats[(batch * h + head) * s + i] = m + logf(l);
}

double negativeInfinityValue() {
  // cuDNN before 9.10 wants the lowest float as its mask value.
  return dnn.getVersion() < 91000 ? -std::numeric_limits<float>::max()
                                  : -std::numeric_limits<float>::infinity();
}

struct Runner {
  cudnnHandle_t handle;
  cudaStream_t stream;
  Plan plan;
  std::unique_ptr<Graph> graph;
  Shape shape;
  Buffers buffers;
  float scale, negativeInfinity;

  Runner(cudnnHandle_t handle, cudaStream_t stream, const Shape &shape)
      : handle(handle), stream(stream), shape(shape) {
    graph = std::make_unique<Graph>(handle);
    cudnnBackendDescriptor_t g = buildForward(*graph, shape);
    plan = makePlan(handle, g, "SDPA forward " + shape.name());
    scale = float(1.0 / std::sqrt(double(shape.d)));
    negativeInfinity = float(negativeInfinityValue());
    const uint64_t elements = uint64_t(shape.b * shape.h * shape.s * shape.d);
    Buffers &m = buffers;
    for (auto *p : {&m.q, &m.k, &m.v, &m.o})
      PROBE_CUDA(cudaMalloc(p, elements * sizeof(__nv_bfloat16)));
    uint32_t seed = 1;
    for (auto *p : {m.q, m.k, m.v}) {
      fillRandomKernel<<<1024, 256, 0, stream>>>(p, elements, seed++);
      probe::checkLaunch("fillRandomKernel");
    }
    PROBE_CUDA(cudaMalloc(&m.stats, shape.b * shape.h * shape.s * 4));
    m.lengths.assign(size_t(shape.b), int32_t(shape.s));
    if (shape.variableLength && shape.b > 1)
      m.lengths[1] = 100;
    PROBE_CUDA(cudaMalloc(&m.seqLen, shape.b * sizeof(int32_t)));
    PROBE_CUDA(cudaMemcpyAsync(m.seqLen, m.lengths.data(),
                               shape.b * sizeof(int32_t),
                               cudaMemcpyHostToDevice, stream));
    if (plan.workspaceBytes > 0)
      PROBE_CUDA(cudaMalloc(&m.workspace, size_t(plan.workspaceBytes)));
    PROBE_CUDA(cudaStreamSynchronize(stream));
  }

  ~Runner() {
    Buffers &m = buffers;
    for (void *p : {(void *)m.q, (void *)m.k, (void *)m.v, (void *)m.o,
                    (void *)m.stats, (void *)m.referenceO,
                    (void *)m.referenceStats, (void *)m.seqLen, m.workspace})
      if (p)
        cudaFree(p);
  }

  void run() {
    Buffers &m = buffers;
    std::vector<int64_t> uids{
        kQ, kK, kV, kO, kStats, kScale, kNegativeInfinity};
    std::vector<void *> pointers{
        m.q, m.k, m.v, m.o, m.stats, &scale, &negativeInfinity};
    if (shape.variableLength) {
      uids.insert(uids.end(), {kSeqLenQ, kSeqLenKv});
      pointers.insert(pointers.end(), {m.seqLen, m.seqLen});
    }
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, uids.data(),
             int64_t(uids.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             pointers.data(), int64_t(pointers.size()))
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR,
             &m.workspace);
    pack.finalize("variant pack");
    PROBE_CUDNN(dnn.execute(handle, plan.plan->get(), pack.get()));
  }

  /// Runs once on NaN-filled outputs and compares every valid row with the
  /// naive kernel.
  void checkAgainstReference() {
    Buffers &m = buffers;
    const int64_t rows = shape.b * shape.h * shape.s;
    const uint64_t elements = uint64_t(rows * shape.d);
    PROBE_CUDA(cudaMemsetAsync(m.o, 0xff, elements * 2, stream));
    PROBE_CUDA(cudaMemsetAsync(m.stats, 0xff, rows * 4, stream));
    run();
    PROBE_CUDA(cudaMalloc(&m.referenceO, elements * 4));
    PROBE_CUDA(cudaMalloc(&m.referenceStats, rows * 4));
    const unsigned blocks = unsigned((rows + 127) / 128);
    if (shape.d == 64)
      referenceKernel<64><<<blocks, 128, 0, stream>>>(
          shape.b, shape.h, shape.s, m.q, m.k, m.v, m.seqLen, scale,
          m.referenceO, m.referenceStats);
    else
      referenceKernel<128><<<blocks, 128, 0, stream>>>(
          shape.b, shape.h, shape.s, m.q, m.k, m.v, m.seqLen, scale,
          m.referenceO, m.referenceStats);
    probe::checkLaunch("referenceKernel");
    PROBE_CUDA(cudaStreamSynchronize(stream));

    std::vector<__nv_bfloat16> o(elements);
    std::vector<float> refO(elements), stats(static_cast<size_t>(rows)),
        refStats(static_cast<size_t>(rows));
    PROBE_CUDA(cudaMemcpy(o.data(), m.o, elements * 2, cudaMemcpyDeviceToHost));
    PROBE_CUDA(cudaMemcpy(refO.data(), m.referenceO, elements * 4,
                          cudaMemcpyDeviceToHost));
    PROBE_CUDA(
        cudaMemcpy(stats.data(), m.stats, rows * 4, cudaMemcpyDeviceToHost));
    PROBE_CUDA(cudaMemcpy(refStats.data(), m.referenceStats, rows * 4,
                          cudaMemcpyDeviceToHost));
    const std::string what = "SDPA forward " + shape.name();
    double worstO = 0, worstStats = 0;
    int64_t checkedRows = 0;
    for (int64_t batch = 0; batch < shape.b; ++batch)
      for (int64_t head = 0; head < shape.h; ++head)
        for (int64_t i = 0; i < m.lengths[size_t(batch)]; ++i) {
          ++checkedRows;
          const int64_t r = (batch * shape.h + head) * shape.s + i;
          const float gotStat = stats[size_t(r)], refStat = refStats[size_t(r)];
          const double statError =
              std::fabs(gotStat - refStat) / (1.0 + std::fabs(refStat));
          if (!(statError <= 2e-3))
            probe::fail(what + ": Stats[b=" + std::to_string(batch) +
                        ", h=" + std::to_string(head) + ", row " +
                        std::to_string(i) + "] = " + std::to_string(gotStat) +
                        ", reference " + std::to_string(refStat));
          worstStats = std::max(worstStats, statError);
          const int64_t base =
              ((batch * shape.s + i) * shape.h + head) * shape.d;
          for (int64_t c = 0; c < shape.d; ++c) {
            const float got = __bfloat162float(o[size_t(base + c)]);
            const float ref = refO[size_t(base + c)];
            const double error = std::fabs(got - ref);
            if (!(error <= 0.02 + 0.02 * std::fabs(ref)))
              probe::fail(what + ": O[b=" + std::to_string(batch) +
                          ", h=" + std::to_string(head) + ", row " +
                          std::to_string(i) + ", " + std::to_string(c) +
                          "] = " + std::to_string(got) + ", reference " +
                          std::to_string(ref) +
                          (std::isnan(got) ? " (never written)" : ""));
            worstO = std::max(worstO, error);
          }
        }
    std::printf("%s: %lld valid rows match the naive kernel (worst |dO| "
                "%.2e, worst Stats error %.2e)\n",
                what.c_str(), (long long)checkedRows, worstO, worstStats);
  }
};

} // namespace

int main() {
  probe::requireGpu();
  loadCudnn();
  const size_t version = dnn.getVersion();
  std::printf("cuDNN %zu (built against %d), for CUDA runtime %zu\n", version,
              CUDNN_VERSION, dnn.getCudartVersion());
  probe::figure("cudnn_version", double(version), "-");
  if (version < 90000)
    probe::fail("cuDNN " + std::to_string(version) +
                " is older than 9; this probe needs cuDNN 9");

  PROBE_CUDA(cudaSetDevice(0));
  probe::printDevice(0);
  cudaStream_t stream;
  PROBE_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudnnHandle_t handle;
  PROBE_CUDNN(dnn.create(&handle));
  PROBE_CUDNN(dnn.setStream(handle, stream));

  for (int64_t d : {64, 128})
    for (bool variableLength : {false, true}) {
      Runner r(handle, stream, {2, 4, 256, d, variableLength});
      r.checkAgainstReference();
    }

  for (int64_t d : {64, 128}) {
    Runner r(handle, stream, {1, 16, 4096, d, false});
    if (d == 128)
      probe::figure("cudnn_sdpa_fwd_engines", double(r.plan.offered), "-");
    double ms = probe::medianMs(stream, 3, 20, 1, [&](int) { r.run(); });
    const Shape &s = r.shape;
    double tflops =
        2.0 * s.b * s.h * double(s.s) * s.s * s.d / (ms * 1e-3) / 1e12;
    std::printf("SDPA forward %s causal: %.3f ms, %.1f TFLOP/s\n",
                s.name().c_str(), ms, tflops);
    probe::figure("cudnn_sdpa_fwd_d" + std::to_string(d), tflops, "TFLOP/s");
  }

  PROBE_CUDNN(dnn.destroy(handle));
  PROBE_CUDA(cudaStreamDestroy(stream));
  std::printf("PASSED: cuDNN fused attention forward (causal, variable "
              "length), d=64 and 128\n");
  return probe::kPassed;
}
