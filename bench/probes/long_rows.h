// Shared by the long-row probes (split_rows.cu, ring_rows.cu): 1024 x 262144
// f32 rows normalized three ways, the states their trees merge, an fp64
// reference check of one output row, and the flushed timing loop.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                              \
  do {                                                                                     \
    cudaError_t e_ = (x);                                                                  \
    if (e_ != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

enum Op { LN = 0, RMS = 1, SMX = 2 };
static const char* opName(int op) { return op == LN ? "layernorm" : op == RMS ? "rmsnorm" : "softmax"; }

// States of equal counts: LN (mean, M2); RMS (sum of squares, 0); SMX (max,
// sum of exp(x - max); a state of max -inf adds nothing).
template <int OP>
__device__ __forceinline__ float2 merge(float2 a, float2 b, float count) {
  if (OP == LN) {
    float d = b.x - a.x;
    return make_float2(0.5f * (a.x + b.x), a.y + b.y + d * d * (0.5f * count));
  } else if (OP == RMS) {
    return make_float2(a.x + b.x, 0.f);
  } else {
    float m = fmaxf(a.x, b.x);
    float sa = a.x == -INFINITY ? 0.f : a.y * __expf(a.x - m);
    float sb = b.x == -INFINITY ? 0.f : b.y * __expf(b.x - m);
    return make_float2(m, sa + sb);
  }
}

// Butterfly over a warp: lane l holds a state of `count` values; all lanes
// of each group of `width` end equal (merged in lane order, so bit for bit).
template <int OP>
__device__ __forceinline__ float2 warpMerge(float2 s, float count, int width = 32) {
  for (int o = 1; o < width; o <<= 1) {
    float2 t;
    t.x = __shfl_xor_sync(0xffffffffu, s.x, o);
    t.y = __shfl_xor_sync(0xffffffffu, s.y, o);
    bool low = (threadIdx.x & o) == 0;
    s = low ? merge<OP>(s, t, count) : merge<OP>(t, s, count);
    count *= 2.f;
  }
  return s;
}

// The worst absolute error of output row r against an fp64 reference
// (softmax: relative to 1/n); infinity where a value is not finite.
static double reference(int op, const std::vector<float>& hx, const std::vector<float>& hw, const std::vector<float>& hb,
                        const std::vector<float>& hy, int r, int n) {
  const float* xr = hx.data() + size_t(r) * n;
  const float* yr = hy.data() + size_t(r) * n;
  double worst = 0;
  auto upd = [&](double e) { worst = std::isfinite(e) ? std::max(worst, e) : INFINITY; };
  if (op == LN) {
    double m = 0, v = 0;
    for (int i = 0; i < n; ++i) m += xr[i];
    m /= n;
    for (int i = 0; i < n; ++i) v += (xr[i] - m) * (xr[i] - m);
    v /= n;
    double rs = 1 / std::sqrt(v + 1e-5);
    for (int i = 0; i < n; ++i) upd(std::fabs(yr[i] - ((xr[i] - m) * rs * hw[i] + hb[i])));
  } else if (op == RMS) {
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += double(xr[i]) * xr[i];
    double rs = 1 / std::sqrt(ss / n + 1e-5);
    for (int i = 0; i < n; ++i) upd(std::fabs(yr[i] - xr[i] * rs * hw[i]));
  } else {
    double m = -1e300, s = 0;
    for (int i = 0; i < n; ++i) m = std::max(m, double(xr[i]));
    for (int i = 0; i < n; ++i) s += std::exp(xr[i] - m);
    for (int i = 0; i < n; ++i) upd(std::fabs(yr[i] - std::exp(xr[i] - m) / s) * n);
  }
  return worst;
}

// Microseconds of `launch()`, the median of 20 runs after 5 warm-ups, each
// after a memset of `flushBytes` at `flush` (the anchors' L2 flush).
template <typename F>
static double medianFlushedUs(void* flush, size_t flushBytes, F&& launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::vector<float> ts;
  for (int it = 0; it < 25; ++it) {
    CK(cudaMemsetAsync(flush, it & 0xff, flushBytes));
    CK(cudaEventRecord(e0));
    launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (it >= 5) ts.push_back(ms);
  }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2] * 1e3;
}
