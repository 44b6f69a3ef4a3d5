//===- Mlp.cpp - the dense MLP on the CPU ---------------------------------===//

#include "core/model/BufferLayouts.h"
#include "runtime/kernels/cpu/Layers.h"
#include "runtime/kernels/cpu/Primitives.h"

#include <cstring>

namespace hypipe::rt::cpu {

void mlpForward(const MlpShape &s, const TokenShape &t, const float *params,
                const float *x, float *y, float *saved, float *ws) {
  (void)ws;
  const int64_t T = t.tokens();
  const float *norm = params, *w1 = norm + s.hidden,
              *w2 = w1 + s.fc1Width() * s.hidden;
  MlpSaved m = mlpSaved(s, t, saved);
  std::memcpy(m.x, x, sizeof(float) * T * s.hidden);
  rmsnormForward(T, s.hidden, x, norm, m.xn, m.rstd);
  linearForward(T, s.hidden, s.fc1Width(), m.xn, w1, m.h1);
  activationForward(s.act, T, s.ffn, m.h1, m.act);
  linearForward(T, s.ffn, s.hidden, m.act, w2, y);
  addResidual(T * s.hidden, x, y);
}

void mlpBackwardInput(const MlpShape &s, const TokenShape &t,
                      const float *params, float *grads, float *saved,
                      const float *dy, float *dx, float *ws) {
  const int64_t T = t.tokens();
  const float *norm = params, *w1 = norm + s.hidden,
              *w2 = w1 + s.fc1Width() * s.hidden;
  MlpSaved m = mlpSaved(s, t, saved);
  float *dact = ws, *dxn = dact + T * s.ffn;
  std::memcpy(m.dout, dy, sizeof(float) * T * s.hidden);
  linearBackwardInput(T, s.ffn, s.hidden, dy, w2, dact);
  activationBackward(s.act, T, s.ffn, m.h1, dact, m.dh1);
  linearBackwardInput(T, s.hidden, s.fc1Width(), m.dh1, w1, dxn);
  std::memcpy(dx, dy, sizeof(float) * T * s.hidden);
  rmsnormBackward(T, s.hidden, m.x, norm, m.rstd, dxn, dx, grads, true);
}

void mlpBackwardWeight(const MlpShape &s, const TokenShape &t,
                       const float *saved, float *grads) {
  const int64_t T = t.tokens();
  MlpSaved m = mlpSaved(s, t, const_cast<float *>(saved));
  float *g1 = grads + s.hidden, *g2 = g1 + s.fc1Width() * s.hidden;
  linearBackwardWeight(T, s.hidden, s.fc1Width(), m.dh1, m.xn, g1);
  linearBackwardWeight(T, s.ffn, s.hidden, m.dout, m.act, g2);
}

} // namespace hypipe::rt::cpu
