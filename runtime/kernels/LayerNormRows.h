//===- LayerNormRows.h - a LayerNorm, one row or column at a time ---------===//
//
// y = (x - mean) rstd w + b over rows of n and its backward, written once for
// both targets: a row's output (and its mean and rstd), a row's input
// gradient and a column's weight and bias gradients, each a plain loop in
// double that a CPU thread or a GPU thread runs alike (DeepSeek sparse
// attention's k_norm: cpu/Dsa.cpp, cuda/Dsa.cu).
//
//===----------------------------------------------------------------------===//
#ifndef HYPIPE_RUNTIME_KERNELS_LAYERNORMROWS_H
#define HYPIPE_RUNTIME_KERNELS_LAYERNORMROWS_H

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define HYPIPE_HOST_DEVICE __host__ __device__
#else
#define HYPIPE_HOST_DEVICE
#endif

namespace hypipe::rt {

/// Row r's output y[r], its mean and rstd (1 / sqrt(variance + eps)).
HYPIPE_HOST_DEVICE inline void
layerNormRowForward(int64_t r, int64_t n, const float *x, const float *weight,
                    const float *bias, double eps, float *y, float *mean,
                    float *rstd) {
  const float *xr = x + r * n;
  double sum = 0, squares = 0;
  for (int64_t j = 0; j < n; ++j)
    sum += xr[j];
  const double mu = sum / double(n);
  for (int64_t j = 0; j < n; ++j)
    squares += (xr[j] - mu) * (xr[j] - mu);
  const double inv = 1.0 / sqrt(squares / double(n) + eps);
  mean[r] = float(mu);
  rstd[r] = float(inv);
  for (int64_t j = 0; j < n; ++j)
    y[r * n + j] = float((xr[j] - mu) * inv) * weight[j] + bias[j];
}

/// Row r's input gradient dx[r] from dy[r], the row's saved mean and rstd.
HYPIPE_HOST_DEVICE inline void
layerNormRowInputGrad(int64_t r, int64_t n, const float *x, const float *weight,
                      const float *mean, const float *rstd, const float *dy,
                      float *dx) {
  const float *xr = x + r * n, *g = dy + r * n;
  double sumG = 0, sumGx = 0;
  for (int64_t j = 0; j < n; ++j) {
    const double xhat = (xr[j] - mean[r]) * rstd[r];
    sumG += g[j] * weight[j];
    sumGx += g[j] * weight[j] * xhat;
  }
  for (int64_t j = 0; j < n; ++j) {
    const double xhat = (xr[j] - mean[r]) * rstd[r];
    dx[r * n + j] = float(rstd[r] * (g[j] * weight[j] - sumG / double(n) -
                                     xhat * sumGx / double(n)));
  }
}

/// Column j's weight and bias gradients over the T rows, in row order,
/// added to dWeight[j] and dBias[j].
HYPIPE_HOST_DEVICE inline void
layerNormColumnParamGrad(int64_t j, int64_t T, int64_t n, const float *x,
                         const float *mean, const float *rstd, const float *dy,
                         float *dWeight, float *dBias) {
  double w = 0, b = 0;
  for (int64_t r = 0; r < T; ++r) {
    w += double(dy[r * n + j]) * (x[r * n + j] - mean[r]) * rstd[r];
    b += dy[r * n + j];
  }
  dWeight[j] += float(w);
  dBias[j] += float(b);
}

} // namespace hypipe::rt

#endif
