//===- Mlp.cu - the dense MLP on the GPU ----------------------------------===//
//
// The CPU kernel's sequence (runtime/kernels/cpu/Mlp.cpp) with cuBLAS GEMMs
// and the same saved layout: x, xn, rstd, fc1 output, activation, fc1 and
// fc2 output gradients.
//
//===----------------------------------------------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cuda/Primitives.cuh"

namespace hypipe::rt::cuda {

void mlpForward(const MlpShape &s, const Tokens &t, const float *params,
                const float *x, float *y, float *saved, float *) {
  const int64_t T = t.tokens();
  const float *norm = params, *w1 = norm + s.hidden,
              *w2 = w1 + s.fc1Width() * s.hidden;
  MlpSaved m = mlpSaved(s, t.shape, saved);
  copyFloats(m.x, x, T * s.hidden);
  rmsnormForward(T, s.hidden, x, norm, m.xn, m.rstd);
  linearForward(T, s.hidden, s.fc1Width(), m.xn, w1, m.h1);
  activationForward(s.act, T, s.ffn, m.h1, m.act);
  linearForward(T, s.ffn, s.hidden, m.act, w2, y);
  addInPlace(y, x, T * s.hidden);
}

void mlpBackwardInput(const MlpShape &s, const Tokens &t, const float *params,
                      float *grads, float *saved, const float *dy, float *dx,
                      float *ws) {
  const int64_t T = t.tokens();
  const float *norm = params, *w1 = norm + s.hidden,
              *w2 = w1 + s.fc1Width() * s.hidden;
  MlpSaved m = mlpSaved(s, t.shape, saved);
  float *dact = ws, *dxn = dact + T * s.ffn;
  copyFloats(m.dout, dy, T * s.hidden);
  linearBackwardInput(T, s.ffn, s.hidden, dy, w2, dact);
  activationBackward(s.act, T, s.ffn, m.h1, dact, m.dh1);
  linearBackwardInput(T, s.hidden, s.fc1Width(), m.dh1, w1, dxn);
  copyFloats(dx, dy, T * s.hidden);
  rmsnormBackward(T, s.hidden, m.x, norm, m.rstd, dxn, dx, grads, true);
}

void mlpBackwardWeight(const MlpShape &s, const Tokens &t, const float *saved,
                       float *grads) {
  const int64_t T = t.tokens();
  MlpSaved m = mlpSaved(s, t.shape, const_cast<float *>(saved));
  float *g1 = grads + s.hidden, *g2 = g1 + s.fc1Width() * s.hidden;
  linearBackwardWeight(T, s.hidden, s.fc1Width(), m.dh1, m.xn, g1);
  linearBackwardWeight(T, s.ffn, s.hidden, m.dout, m.act, g2);
}

} // namespace hypipe::rt::cuda
