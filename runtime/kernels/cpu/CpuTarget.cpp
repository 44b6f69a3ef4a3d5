//===- CpuTarget.cpp - the cpu target: host memory and the CPU kernels ----===//

#include "core/numeric/Bf16.h"
#include "runtime/formats/RuntimeError.h"
#include "runtime/kernels/StageInterpreter.h"
#include "runtime/kernels/Target.h"
#include "runtime/kernels/cpu/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

namespace hypipe::rt {
namespace {

class CpuTarget final : public Device {
public:
  void runStagePass(const StageProgram &program, StagePass pass,
                    StageArgs &args) override {
    if (program.target != Target::Cpu)
      throw RuntimeError(
          "error: the artifact's stages are compiled for cuda, and this rank "
          "runs them on the cpu\nhelp: run it with a hypipe built with the "
          "CUDA toolkit on a GPU, or compile the spec with --target cpu");
    cpu::Kernels kernels;
    kernels.activations = program.activations;
    runStagePassOn(kernels, program, pass, args);
  }
  std::string describe() const override { return "cpu"; }
  bool host() const override { return true; }
  void *allocate(int64_t bytes) override {
    void *p = std::calloc(size_t(bytes), 1);
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  void release(void *p) override { std::free(p); }
  void toDevice(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void toHost(void *dst, const void *src, int64_t bytes) override {
    std::memcpy(dst, src, size_t(bytes));
  }
  void copy(void *dst, const void *src, int64_t bytes) override {
    std::memmove(dst, src, size_t(bytes));
  }
  void zero(float *x, int64_t n) override {
    std::memset(x, 0, sizeof(float) * size_t(n));
  }
  void add(float *dst, const float *src, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      dst[i] += src[i];
  }
  void roundToBf16(float *dst, const float *src, int64_t n) override {
    for (int64_t i = 0; i < n; ++i)
      dst[i] = bf16::round(src[i]);
  }
  double sumSquares(const float *x, const std::vector<ParamSegment> &segments,
                    double start) override {
    return cpu::sumOfSquares(x, segments, start);
  }
  void adamw(const AdamWStep &s, const std::vector<ParamSegment> &segments,
             float *w, const float *g, float *m, float *v,
             int64_t momentBase) override {
    cpu::adamwUpdate(s, segments, w, g, m, v, momentBase);
  }
  void synchronize() override {}
  void *allocateHost(int64_t bytes) override {
    void *p = std::malloc(size_t(std::max<int64_t>(bytes, 1)));
    if (!p)
      throw std::bad_alloc();
    return p;
  }
  void releaseHost(void *p) override { std::free(p); }
  void packBf16(float *x, int64_t n) override {
    // Element i's two bytes go to bytes [2i, 2i + 2), inside floats already
    // read: in place, in order.
    auto *bits = reinterpret_cast<uint16_t *>(x);
    for (int64_t i = 0; i < n; ++i)
      bits[i] = bf16::fromFloat(x[i]);
  }
  // In place, as packBf16: each run's packed bytes start at or before its
  // floats (StashRun::at <= 4 offset) and end before the next run's, so
  // packing in order and widening in reverse read every value before it
  // is overwritten.
  void packSaved(float *buffer, const std::vector<StashRun> &runs) override {
    auto *bytes = reinterpret_cast<unsigned char *>(buffer);
    for (const StashRun &r : runs) {
      const float *from = buffer + r.offset;
      if (!r.bf16) {
        std::memmove(bytes + r.at, from, size_t(r.floats) * 4);
        continue;
      }
      auto *to = reinterpret_cast<uint16_t *>(bytes + r.at);
      for (int64_t i = 0; i < r.floats; ++i)
        to[i] = bf16::fromFloat(from[i]);
    }
  }
  void unpackSaved(float *buffer, const std::vector<StashRun> &runs) override {
    const auto *bytes = reinterpret_cast<const unsigned char *>(buffer);
    for (auto r = runs.rbegin(); r != runs.rend(); ++r) {
      float *to = buffer + r->offset;
      if (!r->bf16) {
        std::memmove(to, bytes + r->at, size_t(r->floats) * 4);
        continue;
      }
      const auto *from = reinterpret_cast<const uint16_t *>(bytes + r->at);
      for (int64_t i = r->floats - 1; i >= 0; --i)
        to[i] = bf16::toFloat(from[i]);
    }
  }
  void swapBytes(void *a, void *b, int64_t bytes) override {
    std::swap_ranges(static_cast<unsigned char *>(a),
                     static_cast<unsigned char *>(a) + bytes,
                     static_cast<unsigned char *>(b));
  }
  void unpackBf16(float *x, int64_t n) override {
    // Backwards: float i covers the bf16 values 2i and 2i + 1, read already.
    const auto *bits = reinterpret_cast<const uint16_t *>(x);
    for (int64_t i = n - 1; i >= 0; --i)
      x[i] = bf16::toFloat(bits[i]);
  }
};

} // namespace

std::unique_ptr<Device> makeHostDevice() {
  return std::make_unique<CpuTarget>();
}

} // namespace hypipe::rt
