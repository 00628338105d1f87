// Probe (session 47): long rows (1024 x 262144 f32) in thread-block clusters
// whose blocks keep their part of the row in a shared-memory ring of chunks
// filled by bulk copies, instead of in registers.
//
// Question: kiln's held cluster rows hold each block's part of a row in
// registers (softmax, rmsnorm: clusters of 16 x 512 threads at two blocks per
// SM; layernorm: 16 x 256 at one block per SM, the next row's part copied
// into shared memory beside resident w and b). Layernorm runs at 3.79 TB/s,
// softmax 3.97, rmsnorm 3.99 (issue 4 asks 4.0). In the held forms an SM's
// reads stop between the moment its prefetched part has landed and the moment
// the block has moved it into registers. A ring of S chunks, each refilled as
// soon as the normalizing pass has read it, keeps S - NC chunks (NC: the
// chunks of a block's part) of the next rows in flight at every moment,
// including during the cluster exchange, and holds nothing in registers, so
// the block can run 512-1024 threads. Does that reach the copy roof?
//
// Each cluster of C blocks loops over rows r = cluster, cluster + G, ...;
// block q owns columns [q*P, (q+1)*P), P = n / C. Chunk g of the block's
// sequence (row k = g / NC, chunk c = g % NC) lives in slot g % S, filled by
// one cp.async.bulk that completes on the slot's mbarrier (phase g / S).
// Per row: a pass over the chunks reduces the block's state (Welford for
// layernorm, sum of squares for rmsnorm, online max / sum for softmax); a
// warp and block tree; each block pushes its state into every peer's shared
// memory (DSMEM, double-buffered by row parity) and one cluster barrier
// publishes them; every thread merges the C states in rank order; a second
// pass normalizes each chunk from shared memory and stores it with st.global,
// after which (a block barrier) thread 0 refills the slot with chunk g + S.
//
// Result (session 47, an H100, docs/benchmarks.md): slower in every config,
// 2.08-2.77 TB/s against kiln's held forms at 2.92-2.93 (0.97 of the copy
// roof). More lookahead did not help; fewer synchronizations per row did
// (clusters of 8 over 16, two blocks per SM over one, larger chunks): each
// row's cluster barrier and per-chunk block barriers, not the bytes in
// flight, hold the ring form. Not pursued.
//
//   nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -o ring_rows ring_rows.cu && ./ring_rows [layernorm|rmsnorm|softmax]
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "long_rows.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace cg = cooperative_groups;

__device__ __forceinline__ uint32_t smem32(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mbarInit(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem32(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarExpect(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulkLoad(void* dst, const void* src, unsigned bytes, uint64_t* bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          smem32(dst)),
      "l"(src), "r"(bytes), "r"(smem32(bar)), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void bulkLoadPlain(void* dst, const void* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(smem32(dst)),
               "l"(src), "r"(bytes), "r"(smem32(bar))
               : "memory");
}
__device__ __forceinline__ void bulkStore(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n\tcp.async.bulk.commit_group;" ::"l"(dst),
               "r"(smem32(src)), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t* bar, unsigned parity) {
  const uint32_t a = smem32(bar);
  uint32_t ok = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
        : "=r"(ok)
        : "r"(a), "r"(parity)
        : "memory");
  } while (!ok);
}
__device__ __forceinline__ void stGlobal(float4* p, float4 v, int hint) {
  if (hint)
    asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w) : "memory");
  else
    *p = v;
}

// Dynamic shared memory: [w part][b part][ring S x CH bytes][full mbarriers S][wb mbarrier]
// [exchange 2 x C float2][warp states 2 x W float2].
template <int OP, int C, int T, int CH, int S>
struct Layout {
  static constexpr int P = 262144 / C;                // floats of a block's part (n fixed at 262144)
  static constexpr int NC = P * 4 / CH;               // chunks a row
  static constexpr int W = T / 32;
  static constexpr int weights = OP == LN ? 2 : OP == RMS ? 1 : 0;
  static constexpr size_t wBytes = size_t(weights) * P * 4;
  static constexpr size_t ring = wBytes;
  static constexpr size_t bars = ring + size_t(S) * CH;
  static constexpr size_t xch = bars + 8 * (S + 1);
  static constexpr size_t warps = xch + 2 * C * 8;
  static constexpr size_t total = warps + 2 * W * 8;
  static_assert(CH % (16 * T) == 0, "a chunk is a whole number of float4s a thread");
  static_assert(P * 4 % CH == 0, "a part is a whole number of chunks");
  static_assert(S >= NC, "the ring holds a whole part");
};

template <int OP, int C, int T, int CH, int S>
__global__ void __launch_bounds__(T, 1)
    ringRows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
             float* __restrict__ y, int rows, int G, int storeHint, int loadHint) {
  using L = Layout<OP, C, T, CH, S>;
  constexpr int n = 262144, P = L::P, NC = L::NC, W = L::W;
  constexpr int V = CH / 16 / T;  // float4s a thread reads of a chunk
  extern __shared__ __align__(128) unsigned char smem[];
  float* sw = reinterpret_cast<float*>(smem);
  float* sb = sw + P;
  unsigned char* ring = smem + L::ring;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + L::bars);
  uint64_t* wbBar = full + S;
  float2* xch = reinterpret_cast<float2*>(smem + L::xch);
  float2* red = reinterpret_cast<float2*>(smem + L::warps);
  cg::cluster_group cluster = cg::this_cluster();
  const int q = static_cast<int>(cluster.block_rank());
  const int clusterId = blockIdx.x / C;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int myRows = clusterId < rows ? (rows - 1 - clusterId) / G + 1 : 0;
  const long long total = static_cast<long long>(myRows) * NC;
  const size_t col = static_cast<size_t>(q) * P;
  uint64_t evictFirst;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(evictFirst));
  uint64_t evictLast;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(evictLast));

  auto chunkSrc = [&](long long g) {
    const long long k = g / NC, c = g % NC;
    const size_t row = static_cast<size_t>(clusterId) + static_cast<size_t>(k) * G;
    return reinterpret_cast<const unsigned char*>(x + row * n + col) + c * CH;
  };
  auto refill = [&](long long gn) {
    mbarExpect(&full[gn % S], CH);
    if (loadHint)
      bulkLoad(ring + (gn % S) * CH, chunkSrc(gn), CH, &full[gn % S], evictFirst);
    else
      bulkLoadPlain(ring + (gn % S) * CH, chunkSrc(gn), CH, &full[gn % S]);
  };
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) mbarInit(&full[s], 1);
    mbarInit(wbBar, 1);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    if (L::weights > 0) {
      mbarExpect(wbBar, static_cast<unsigned>(L::wBytes));
      for (int o = 0; o < P * 4; o += 16384) {
        bulkLoad(reinterpret_cast<unsigned char*>(sw) + o, reinterpret_cast<const unsigned char*>(w + col) + o, 16384,
                 wbBar, evictLast);
        if (L::weights > 1)
          bulkLoad(reinterpret_cast<unsigned char*>(sb) + o, reinterpret_cast<const unsigned char*>(b + col) + o,
                   16384, wbBar, evictLast);
      }
    }
    for (long long g = 0; g < S && g < total; ++g) refill(g);
  }
  // Peers write into this block's exchange region only after it has started.
  cluster.sync();
  if (L::weights > 0) mbarWait(wbBar, 0);

  for (int k = 0; k < myRows; ++k) {
    const size_t row = static_cast<size_t>(clusterId) + static_cast<size_t>(k) * G;
    const long long g0 = static_cast<long long>(k) * NC;
    // Pass 1: the thread's state over its values of the block's part.
    float2 s = OP == SMX ? make_float2(-INFINITY, 0.f) : make_float2(0.f, 0.f);
    float cnt = 0.f;
#pragma unroll 1
    for (int c = 0; c < NC; ++c) {
      const long long g = g0 + c;
      mbarWait(&full[g % S], static_cast<unsigned>((g / S) & 1));
      const float4* xs = reinterpret_cast<const float4*>(ring + (g % S) * CH);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float4 v = xs[threadIdx.x + i * T];
        if (OP == LN) {
          const float m = 0.25f * ((v.x + v.y) + (v.z + v.w));
          const float a = v.x - m, bb = v.y - m, cc = v.z - m, d = v.w - m;
          const float2 t = make_float2(m, (a * a + bb * bb) + (cc * cc + d * d));
          // Chan's merge of (cnt values) with 4 values.
          const float nt = cnt + 4.f, dm = t.x - s.x;
          s.x += dm * (4.f / nt);
          s.y += t.y + dm * dm * (cnt * 4.f / nt);
          cnt = nt;
        } else if (OP == RMS) {
          s.x += (v.x * v.x + v.y * v.y) + (v.z * v.z + v.w * v.w);
        } else {
          const float m = fmaxf(s.x, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
          const float e = (__expf(v.x - m) + __expf(v.y - m)) + (__expf(v.z - m) + __expf(v.w - m));
          s.y = (s.x == -INFINITY ? 0.f : s.y * __expf(s.x - m)) + e;
          s.x = m;
        }
      }
    }
    const float perThread = static_cast<float>(NC * V * 4);
    s = warpMerge<OP>(s, perThread);
    const int set = k & 1;
    if (lane == 0) red[set * W + warp] = s;
    __syncthreads();
    if (warp == 0) {
      float2 t = red[set * W + (lane < W ? lane : 0)];
      t = warpMerge<OP>(t, perThread * 32.f, W);
      t.x = __shfl_sync(0xffffffffu, t.x, 0);
      t.y = __shfl_sync(0xffffffffu, t.y, 0);
      // Lane j < C pushes the block's state into peer j's exchange slot [set][q].
      if (lane < C) {
        float2* peer = cluster.map_shared_rank(xch, lane);
        peer[set * C + q] = t;
      }
    }
    cluster.sync();
    float2 t = xch[set * C + (lane < C ? lane : 0)];
    t = warpMerge<OP>(t, static_cast<float>(P), C);
    t.x = __shfl_sync(0xffffffffu, t.x, 0);
    t.y = __shfl_sync(0xffffffffu, t.y, 0);
    float mean = 0.f, scale = 1.f;
    if (OP == LN) {
      mean = t.x;
      scale = rsqrtf(t.y / static_cast<float>(n) + 1e-5f);
    } else if (OP == RMS) {
      scale = rsqrtf(t.x / static_cast<float>(n) + 1e-5f);
    } else {
      mean = t.x;
      scale = 1.f / t.y;
    }
    // Pass 2: normalize each chunk, store it, refill its slot with chunk g + S.
    float4* yr = reinterpret_cast<float4*>(y + row * n + col);
#pragma unroll 1
    for (int c = 0; c < NC; ++c) {
      const long long g = g0 + c;
      const float4* xs = reinterpret_cast<const float4*>(ring + (g % S) * CH);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const int e = threadIdx.x + i * T;
        const float4 v = xs[e];
        float4 o;
        if (OP == LN) {
          const float4 ww = reinterpret_cast<const float4*>(sw)[c * (CH / 16) + e];
          const float4 bb = reinterpret_cast<const float4*>(sb)[c * (CH / 16) + e];
          o.x = (v.x - mean) * scale * ww.x + bb.x;
          o.y = (v.y - mean) * scale * ww.y + bb.y;
          o.z = (v.z - mean) * scale * ww.z + bb.z;
          o.w = (v.w - mean) * scale * ww.w + bb.w;
        } else if (OP == RMS) {
          const float4 ww = reinterpret_cast<const float4*>(sw)[c * (CH / 16) + e];
          o.x = v.x * scale * ww.x;
          o.y = v.y * scale * ww.y;
          o.z = v.z * scale * ww.z;
          o.w = v.w * scale * ww.w;
        } else {
          o.x = __expf(v.x - mean) * scale;
          o.y = __expf(v.y - mean) * scale;
          o.z = __expf(v.z - mean) * scale;
          o.w = __expf(v.w - mean) * scale;
        }
        if (storeHint == 2)
          const_cast<float4*>(xs)[e] = o;  // in place, for the bulk store
        else
          stGlobal(yr + c * (CH / 16) + e, o, storeHint);
      }
      if (storeHint == 2) {
        // The bulk store reads the slot through the async proxy: make this
        // thread's writes visible to it, then one thread stores the chunk and
        // refills the previous chunk's slot once its store has read it.
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        __syncthreads();
        if (threadIdx.x == 0) {
          bulkStore(yr + c * (CH / 16), ring + (g % S) * CH, CH);
          if (c > 0) {
            asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");
            if (g - 1 + S < total) refill(g - 1 + S);
          }
        }
      } else {
        __syncthreads();
        if (threadIdx.x == 0 && g + S < total) refill(g + S);
      }
    }
    if (storeHint == 2 && threadIdx.x == 0) {
      asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
      if (g0 + NC - 1 + S < total) refill(g0 + NC - 1 + S);
    }
  }
  if (storeHint == 2 && threadIdx.x == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
  // No block leaves while a peer may still push into its exchange region.
  cluster.sync();
}

struct Bufs {
  float *x, *w, *b, *y, *flush;
  size_t flushBytes;
};

template <int OP, int C, int T, int CH, int S>
void run(Bufs& B, int rows, int storeHint, int loadHint, const std::vector<float>& hx, const std::vector<float>& hw,
         const std::vector<float>& hb) {
  using L = Layout<OP, C, T, CH, S>;
  const int n = 262144;
  auto kern = ringRows<OP, C, T, CH, S>;
  const int smemBytes = static_cast<int>(L::total);
  char label[160];
  std::snprintf(label, sizeof label, "%-9s C=%2d T=%4d chunk=%5d S=%2d (NC=%2d, ahead %3d KB) store%s load %s", opName(OP), C, T,
                CH, S, L::NC, (S - L::NC) * CH / 1024, storeHint == 2 ? " bulk" : storeHint ? ".cs  " : "     ", loadHint ? "evict_first" : "plain      ");
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes);
  if (e != cudaSuccess) {
    std::printf("%s: %d bytes of shared memory: %s\n", label, smemBytes, cudaGetErrorString(e));
    cudaGetLastError();
    return;
  }
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = C;
  attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
  cfg.gridDim = dim3(C);
  cfg.blockDim = dim3(T);
  cfg.dynamicSmemBytes = smemBytes;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int G = 0;
  CK(cudaOccupancyMaxActiveClusters(&G, kern, &cfg));
  if (G <= 0) {
    std::printf("%s: no cluster fits\n", label);
    return;
  }
  cfg.gridDim = dim3(G * C);
  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, kern));
  const float* xp = B.x;
  auto launch = [&] { CK(cudaLaunchKernelEx(&cfg, kern, xp, (const float*)B.w, (const float*)B.b, B.y, rows, G, storeHint, loadHint)); };
  CK(cudaMemset(B.y, 0xff, size_t(rows) * n * 4));
  launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> hy(size_t(rows) * n);
  CK(cudaMemcpy(hy.data(), B.y, hy.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int r : {0, 1, G - 1, G, 100, 511, 777, rows - 1}) {
    double er = reference(OP, hx, hw, hb, hy, r, n);
    worst = std::isfinite(er) ? std::max(worst, er) : INFINITY;
  }
  bool ok = worst < (OP == SMX ? 1e-3 : 1e-4) && std::isfinite(worst);
  const double us = medianFlushedUs(B.flush, B.flushBytes, launch);
  double tbps = 2.0 * rows * double(n) * 4 / (us * 1e-6) / 1e12;
  std::printf("%s: %2d clusters (%3d SMs), %3d regs, %6d B smem, %7.1f us  %.3f TB/s  %s (err %.2g)\n", label, G, G * C,
              fa.numRegs, smemBytes, us, tbps, ok ? "PASS" : "FAIL", worst);
  std::fflush(stdout);
}

// A device-to-device copy of the same bytes (read 1 GiB, write 1 GiB), timed the same way: the roof.
static void copyRoof(Bufs& B, int rows, int n) {
  const double us = medianFlushedUs(B.flush, B.flushBytes, [&] {
    CK(cudaMemcpyAsync(B.y, B.x, size_t(rows) * n * 4, cudaMemcpyDeviceToDevice));
  });
  std::printf("cudaMemcpy D2D of x (copy roof): %7.1f us  %.3f TB/s\n", us, 2.0 * rows * double(n) * 4 / (us * 1e-6) / 1e12);
}

int main(int argc, char** argv) {
  int dev = 0, sms = 0, l2 = 0;
  CK(cudaSetDevice(dev));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, dev));
  const int rows = 1024, n = 262144;
  std::printf("%s, SMs %d, L2 %d MB, rows %d x %d f32\n", prop.name, sms, l2 >> 20, rows, n);
  Bufs B;
  B.flushBytes = size_t(l2) * 2;
  CK(cudaMalloc(&B.x, size_t(rows) * n * 4));
  CK(cudaMalloc(&B.y, size_t(rows) * n * 4));
  CK(cudaMalloc(&B.w, size_t(n) * 4));
  CK(cudaMalloc(&B.b, size_t(n) * 4));
  CK(cudaMalloc(&B.flush, B.flushBytes));
  std::vector<float> hx(size_t(rows) * n), hw(n), hb(n);
  std::mt19937 rng(static_cast<unsigned>(std::random_device{}()));
  std::normal_distribution<float> nd(0.5f, 1.f);
  for (auto& v : hx) v = nd(rng);
  for (auto& v : hw) v = nd(rng);
  for (auto& v : hb) v = nd(rng);
  CK(cudaMemcpy(B.x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B.w, hw.data(), hw.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B.b, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
  const std::string only = argc > 1 ? argv[1] : "";
  auto want = [&](const char* name) { return only.empty() || only.find(name) != std::string::npos; };
  copyRoof(B, rows, n);
  if (want("layernorm")) {
    // w, b: 128 KB at clusters of 16; the ring gets what is left (96 KB).
    run<LN, 16, 512, 8192, 12>(B, rows, 0, 1, hx, hw, hb);
    run<LN, 16, 512, 8192, 12>(B, rows, 0, 0, hx, hw, hb);
    run<LN, 16, 1024, 16384, 6>(B, rows, 0, 1, hx, hw, hb);
    run<LN, 16, 256, 4096, 24>(B, rows, 0, 1, hx, hw, hb);
    run<LN, 16, 256, 8192, 12>(B, rows, 0, 1, hx, hw, hb);
    run<LN, 16, 512, 8192, 12>(B, rows, 1, 1, hx, hw, hb);
    run<LN, 16, 512, 8192, 12>(B, rows, 2, 1, hx, hw, hb);
    run<LN, 16, 512, 16384, 6>(B, rows, 2, 1, hx, hw, hb);
  }
  if (want("rmsnorm")) {
    run<RMS, 16, 512, 8192, 20>(B, rows, 0, 1, hx, hw, hb);
    run<RMS, 16, 512, 8192, 20>(B, rows, 0, 0, hx, hw, hb);
    run<RMS, 16, 512, 8192, 12>(B, rows, 0, 1, hx, hw, hb);
    run<RMS, 16, 1024, 16384, 10>(B, rows, 0, 1, hx, hw, hb);
    run<RMS, 16, 512, 8192, 20>(B, rows, 1, 1, hx, hw, hb);
    run<RMS, 16, 512, 8192, 20>(B, rows, 2, 1, hx, hw, hb);
  }
  if (want("softmax")) {
    run<SMX, 16, 512, 8192, 26>(B, rows, 0, 1, hx, hw, hb);
    run<SMX, 16, 512, 8192, 26>(B, rows, 0, 0, hx, hw, hb);
    run<SMX, 8, 512, 8192, 26>(B, rows, 0, 0, hx, hw, hb);
    run<SMX, 16, 512, 8192, 12>(B, rows, 0, 1, hx, hw, hb);
    run<SMX, 8, 512, 8192, 26>(B, rows, 0, 1, hx, hw, hb);
    run<SMX, 8, 1024, 16384, 13>(B, rows, 0, 1, hx, hw, hb);
    run<SMX, 8, 512, 8192, 20>(B, rows, 0, 1, hx, hw, hb);
    run<SMX, 16, 512, 8192, 26>(B, rows, 1, 1, hx, hw, hb);
    run<SMX, 16, 512, 8192, 26>(B, rows, 2, 1, hx, hw, hb);
    run<SMX, 8, 512, 8192, 26>(B, rows, 2, 1, hx, hw, hb);
  }
  return 0;
}
