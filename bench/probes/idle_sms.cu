// Probe (issue 4): do the SMs that kiln's 1024 x 262144 f32 row clusters
// leave idle have DRAM bandwidth left to use?
//
// kiln holds each 1 MB row in a cluster of 16 blocks. No cluster of 16
// reaches all 132 SMs of an H200 (112 do; bench/probes/cluster_occupancy.cu),
// and the three rows (softmax, layernorm, rmsnorm) run at 3.80-4.00 TB/s
// against a copy roof of about 4.29. Are they short because DRAM is busy
// (then no other work could add bandwidth), or because 112 SMs cannot keep
// enough bytes in flight (then the idle SMs could add it)?
//
// The probe runs kiln's own kernels (built ahead of time by `kiln aot`, see
// build below) alone, then with a streaming copy on a second stream whose
// blocks fit only on SMs the row kernel leaves empty (1024 threads and 120 KB
// of shared memory a block). The copy loops until the row kernel has ended
// (a flag set by a kernel queued behind it) and counts what it moved. If the
// row kernel keeps its time and the copy adds its bytes, the sum is bandwidth
// the row kernel left unused: a companion on the idle SMs would be worth
// building. If the row kernel slows by the copy's bytes, DRAM is the limit.
//
// Build (development machine, no GPU needed): bash bench/probes/idle_sms/build.sh OUT
// (kiln aot of the graphs in bench/probes/idle_sms/, whole and split, then nvcc).
// Run: ./idle_sms [copy blocks ...]   (default 8 16 20 24 32)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "kiln/runtime/tensor_view.h"
#include "long_rows.h"  // CK
#include "ln.h"
#include "rms.h"
#include "smx.h"
// The split runs (SPLITS below): <op>_m<rc> holds 1024 - rc rows in the
// clusters, <op>_c<rc> the other rc rows in 20 looped 1024-thread blocks and
// <op>_d<rc> in 40 looped 512-thread blocks (two a SM); split_all.h includes
// their 27 headers.
#include "split_all.h"


constexpr int kCopyThreads = 1024;
constexpr int kCopyShared = 120 * 1024;  // > half an SM: one block a free SM, none beside a row block

struct CopyStats {
  unsigned long long bytes;  // read + written
  unsigned int sms[1024];    // each block's SM
};

// Copies src to dst (n 16-byte vectors), round after round, until *stop.
__global__ void __launch_bounds__(kCopyThreads, 1)
    copyUntil(const int4* __restrict__ src, int4* __restrict__ dst, long long n, const volatile int* stop,
              CopyStats* stats) {
  extern __shared__ int4 pad[];
  if (threadIdx.x == 0) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    stats->sms[blockIdx.x] = sm;
    pad[0] = make_int4(0, 0, 0, 0);
  }
  const long long chunk = 64LL * kCopyThreads;  // vectors a block copies between looks at the flag
  long long moved = 0;
  long long next = (long long)blockIdx.x * chunk;
  for (;;) {
    if (*stop) break;
    long long base = next % n;
    long long end = min(base + chunk, n);
#pragma unroll 8
    for (long long i = base + threadIdx.x; i < end; i += kCopyThreads) dst[i] = src[i];
    moved += end - base;
    next += (long long)gridDim.x * chunk;
  }
  if (threadIdx.x == 0) atomicAdd(&stats->bytes, (unsigned long long)(moved * 2 * sizeof(int4)));
}

__global__ void setFlag(int* flag) { *flag = 1; }
__global__ void spinUs(long long ns) {
  long long t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > ns) break;
  }
}

static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int main(int argc, char** argv) {
  std::vector<int> grids = {8, 16, 20, 24, 32};
  if (argc > 1) {
    grids.clear();
    for (int i = 1; i < argc; ++i) grids.push_back(std::atoi(argv[i]));
  }
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", p.name, p.multiProcessorCount, p.l2CacheSize >> 20);
  CK(cudaFuncSetAttribute(copyUntil, cudaFuncAttributeMaxDynamicSharedMemorySize, kCopyShared));

  const long long R = 1024, C = 262144;
  float *x, *w, *b, *y;
  CK(cudaMalloc(&x, R * C * 4));
  CK(cudaMalloc(&y, R * C * 4));
  CK(cudaMalloc(&w, C * 4));
  CK(cudaMalloc(&b, C * 4));
  {
    std::vector<float> h(C);
    srand(4711);
    for (auto& v : h) v = float(rand()) / RAND_MAX * 2.f - 1.f;
    for (long long r = 0; r < R; ++r) CK(cudaMemcpy(x + r * C, h.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(w, h.data(), C * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, h.data(), C * 4, cudaMemcpyHostToDevice));
  }
  const long long copyBytes = 512LL << 20;  // each copy buffer; 1 GB moved a round
  int4 *src, *dst;
  CK(cudaMalloc(&src, copyBytes));
  CK(cudaMalloc(&dst, copyBytes));
  CK(cudaMemset(src, 1, copyBytes));
  void* flush;
  const size_t flushBytes = 256u << 20;
  CK(cudaMalloc(&flush, flushBytes));
  int* flag;
  CopyStats* stats;
  CK(cudaMalloc(&flag, sizeof(int)));
  CK(cudaMallocManaged(&stats, sizeof(CopyStats)));

  cudaStream_t s1, s2, s3;
  CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&s3, cudaStreamNonBlocking));
  cudaEvent_t e0, e1, eGo, c0, c1;
  for (cudaEvent_t* e : {&e0, &e1, &eGo, &c0, &c1}) CK(cudaEventCreate(e));

  using kiln::DType;
  using kiln::TensorView;
  TensorView vx(x, DType::F32, {R, C}), vy(y, DType::F32, {R, C}), vw(w, DType::F32, {C}), vb(b, DType::F32, {C});
  struct RowOp {
    const char* name;
    double bytes;
    std::function<void(cudaStream_t)> run;
  };
  std::vector<RowOp> ops = {
      {"softmax", 2.0 * R * C * 4, [&](cudaStream_t s) { kiln_aot::smx(vx, vy, s); }},
      {"layernorm", 2.0 * R * C * 4 + 2.0 * C * 4, [&](cudaStream_t s) { kiln_aot::ln(vx, vw, vb, vy, s); }},
      {"rmsnorm", 2.0 * R * C * 4 + 1.0 * C * 4, [&](cudaStream_t s) { kiln_aot::rms(vx, vw, vy, s); }},
  };
  const int reps = 9;
  auto flushL2 = [&] { CK(cudaMemsetAsync(flush, reps, flushBytes, s1)); };

  // The copy alone on G blocks for a fixed time: its rate on that many SMs.
  auto copyAlone = [&](int G, float us, std::set<unsigned>* smsOut) {
    CK(cudaMemsetAsync(flag, 0, sizeof(int), s1));
    stats->bytes = 0;
    CK(cudaStreamSynchronize(s1));
    CK(cudaEventRecord(e0, s2));
    copyUntil<<<G, kCopyThreads, kCopyShared, s2>>>(src, dst, copyBytes / 16, flag, stats);
    spinUs<<<1, 32, 0, s1>>>((long long)(us * 1000));
    setFlag<<<1, 1, 0, s1>>>(flag);
    CK(cudaEventRecord(e1, s2));
    CK(cudaDeviceSynchronize());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    if (smsOut)
      for (int i = 0; i < G; ++i) smsOut->insert(stats->sms[i]);
    return stats->bytes / (ms * 1e-3) / 1e12;
  };

  for (auto& op : ops) {
    // Warm up: loads the module.
    op.run(s1);
    CK(cudaDeviceSynchronize());
    std::vector<float> alone;
    for (int r = 0; r < reps; ++r) {
      flushL2();
      CK(cudaEventRecord(e0, s1));
      op.run(s1);
      CK(cudaEventRecord(e1, s1));
      CK(cudaStreamSynchronize(s1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      alone.push_back(ms);
    }
    float tAlone = median(alone);
    std::printf("\n%-9s alone: %8.1f us  %.3f TB/s\n", op.name, tAlone * 1e3, op.bytes / (tAlone * 1e-3) / 1e12);
    for (int G : grids) {
      std::vector<float> times, totals, copies;
      std::set<unsigned> sms;
      for (int r = 0; r < reps; ++r) {
        flushL2();
        CK(cudaMemsetAsync(flag, 0, sizeof(int), s1));
        CK(cudaStreamSynchronize(s1));
        stats->bytes = 0;
        CK(cudaEventRecord(e0, s1));
        op.run(s1);  // first, so that its clusters take their SMs
        CK(cudaEventRecord(e1, s1));
        setFlag<<<1, 1, 0, s1>>>(flag);
        spinUs<<<1, 32, 0, s3>>>(20000);  // then the copy, 20 us later, on what is left
        CK(cudaEventRecord(eGo, s3));
        CK(cudaStreamWaitEvent(s2, eGo, 0));
        CK(cudaEventRecord(c0, s2));
        copyUntil<<<G, kCopyThreads, kCopyShared, s2>>>(src, dst, copyBytes / 16, flag, stats);
        CK(cudaEventRecord(c1, s2));
        CK(cudaDeviceSynchronize());
        float ms, cms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        CK(cudaEventElapsedTime(&cms, c0, c1));
        times.push_back(ms);
        // Each over its own window (the copy's starts 20 us into the row kernel's).
        float copyRate = float(double(stats->bytes) / (cms * 1e-3) / 1e12);
        copies.push_back(copyRate);
        totals.push_back(float(op.bytes / (ms * 1e-3) / 1e12) + copyRate);
        for (int i = 0; i < G; ++i) sms.insert(stats->sms[i]);
      }
      float t = median(times);
      std::printf("%-9s + copy on %2d blocks (%2zu SMs): row kernel %8.1f us (%.3f TB/s, %+.1f%%), copy %.3f TB/s, sum %.3f TB/s\n",
                  op.name, G, sms.size(), t * 1e3, op.bytes / (t * 1e-3) / 1e12, 100.0 * (t / tAlone - 1.0),
                  median(copies), median(totals));
    }
  }
  // SPLITS: the rows shared between the clusters (first, on s1) and a
  // looped companion on the SMs they leave empty (10 us later, on s2); the
  // time from the clusters' start to both kernels' end, against the
  // clusters alone on all 1024 rows. The companion's rows are checked
  // against the clusters' output of the same rows.
  using Part = void (*)(const TensorView&, const TensorView&, const TensorView&, const TensorView&, void*);
  auto view = [&](float* base, long long row0, long long rows) {
    return TensorView(base + row0 * C, DType::F32, {rows, C});
  };
  struct Split {
    int op;  // index into ops
    int rc;
    char kind;  // 'c': 20 x 1024 threads, 'd': 40 x 512
    std::function<void(long long, long long, cudaStream_t)> main, comp;
  };
  std::vector<Split> splits;
#define SPLIT(OPI, OPN, RC, K, CALL)                                                                          \
  splits.push_back({OPI, RC, #K[0],                                                                           \
                    [&](long long r0, long long n, cudaStream_t s) { CALL(OPN##_m##RC, r0, n, s); },         \
                    [&](long long r0, long long n, cudaStream_t s) { CALL(OPN##_##K##RC, r0, n, s); }});
#define CALL_SMX(F, r0, n, s) kiln_aot::F(view(x, r0, n), view(y, r0, n), s)
#define CALL_LN(F, r0, n, s) kiln_aot::F(view(x, r0, n), vw, vb, view(y, r0, n), s)
#define CALL_RMS(F, r0, n, s) kiln_aot::F(view(x, r0, n), vw, view(y, r0, n), s)
#define SPLITS_OF(OPI, OPN, CALL) \
  SPLIT(OPI, OPN, 40, c, CALL) SPLIT(OPI, OPN, 80, c, CALL) SPLIT(OPI, OPN, 120, c, CALL) \
  SPLIT(OPI, OPN, 40, d, CALL) SPLIT(OPI, OPN, 80, d, CALL) SPLIT(OPI, OPN, 120, d, CALL)
  SPLITS_OF(0, smx, CALL_SMX)
  SPLITS_OF(1, ln, CALL_LN)
  SPLITS_OF(2, rms, CALL_RMS)
  std::printf("\nsplit rows (the clusters first, the companion 10 us later on the SMs left; us, median of %d):\n", reps);
  std::vector<float> want(2 * C), got(2 * C);
  for (auto& sp : splits) {
    const RowOp& op = ops[sp.op];
    const long long rm = R - sp.rc;
    // The clusters' own output of the companion's first and last rows.
    op.run(s1);
    CK(cudaStreamSynchronize(s1));
    CK(cudaMemcpy(want.data(), y + rm * C, C * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(want.data() + C, y + (R - 1) * C, C * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemset(y, 0xff, R * C * 4));  // NaN
    sp.main(0, rm, s1);
    sp.comp(rm, sp.rc, s2);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(got.data(), y + rm * C, C * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(got.data() + C, y + (R - 1) * C, C * 4, cudaMemcpyDeviceToHost));
    double err = 0;
    for (long long i = 0; i < 2 * C; ++i) {
      double d = std::fabs(double(got[i]) - double(want[i]));
      err = std::isfinite(got[i]) ? std::max(err, d) : INFINITY;
    }
    std::vector<float> both, compAlone, mainAlone;
    for (int r = 0; r < reps; ++r) {
      float ms;
      flushL2();
      CK(cudaEventRecord(e0, s1));
      sp.main(0, rm, s1);
      spinUs<<<1, 32, 0, s3>>>(10000);
      CK(cudaEventRecord(eGo, s3));
      CK(cudaStreamWaitEvent(s2, eGo, 0));
      sp.comp(rm, sp.rc, s2);
      CK(cudaEventRecord(c1, s2));
      CK(cudaStreamWaitEvent(s1, c1, 0));
      CK(cudaEventRecord(e1, s1));
      CK(cudaDeviceSynchronize());
      CK(cudaEventElapsedTime(&ms, e0, e1));
      both.push_back(ms);
      flushL2();
      CK(cudaEventRecord(e0, s1));
      sp.comp(rm, sp.rc, s1);
      CK(cudaEventRecord(e1, s1));
      CK(cudaStreamSynchronize(s1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      compAlone.push_back(ms);
      flushL2();
      CK(cudaEventRecord(e0, s1));
      sp.main(0, rm, s1);
      CK(cudaEventRecord(e1, s1));
      CK(cudaStreamSynchronize(s1));
      CK(cudaEventElapsedTime(&ms, e0, e1));
      mainAlone.push_back(ms);
    }
    float t = median(both);
    std::printf("  %-9s %4lld + %3d (%s): both %7.1f us = %.3f TB/s | clusters alone %7.1f | companion alone %7.1f (%.3f TB/s) | max abs diff %.2e\n",
                op.name, rm, sp.rc, sp.kind == 'c' ? "20 x 1024" : "40 x 512 ", t * 1e3, op.bytes / (t * 1e-3) / 1e12,
                median(mainAlone) * 1e3, median(compAlone) * 1e3,
                op.bytes * sp.rc / R / (median(compAlone) * 1e-3) / 1e12, err);
  }

  std::printf("\ncopy alone (a 600 us window):\n");
  for (int G : grids) {
    std::set<unsigned> sms;
    std::vector<float> v;
    for (int r = 0; r < 5; ++r) v.push_back(float(copyAlone(G, 600.f, &sms)));
    std::printf("  %3d blocks (%3zu SMs): %.3f TB/s\n", G, sms.size(), median(v));
  }
  for (int G : {p.multiProcessorCount}) {
    std::vector<float> v;
    for (int r = 0; r < 5; ++r) v.push_back(float(copyAlone(G, 600.f, nullptr)));
    std::printf("  %3d blocks (every SM): %.3f TB/s\n", G, median(v));
  }
  return 0;
}
