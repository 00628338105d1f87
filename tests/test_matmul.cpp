// The portable matmul kernel (mma.sync for bf16/f16, FMAs for f32): on the
// CPU, every variant compiles through NVRTC and ptxas without spills and
// graphs the schedule cannot take yet are refused with a clear error; on the
// GPU, results match the fp64 reference for divisible and ragged shapes,
// transposes, broadcast batches and small M.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

#include "gpu_support.h"
#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

namespace {

struct MatmulCase {
  DType dtype;
  bool transA, transB;
  Shape batchA, batchB;
};

Graph matmulGraph(DType t, Dim M, Dim N, Dim K, bool transA, bool transB, Shape batchA = {}, Shape batchB = {}) {
  Graph g;
  Shape a = batchA, b = batchB;
  if (transA) a.insert(a.end(), {K, M});
  else a.insert(a.end(), {M, K});
  if (transB) b.insert(b.end(), {N, K});
  else b.insert(b.end(), {K, N});
  Tensor ta = g.input("a", t, a);
  Tensor tb = g.input("b", t, b);
  g.output("c", matmul(ta, tb, {transA, transB}));
  return g;
}

}  // namespace

TEST_CASE("matmul: every dtype and layout compiles through NVRTC and ptxas without spills", "[compile][matmul]") {
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        INFO(dtypeName(t) << " transA " << ta << " transB " << tb);
        Graph g = matmulGraph(t, Dim("M"), 256, 512, ta, tb, {Dim("B")}, {1});
        compiler::CompiledGraph cg = compiler::compileGraph(g, {});
        REQUIRE(cg.kernels.size() == 1);
        const auto& k = cg.kernels[0];
        CHECK(k.schedule == "matmul");
        CHECK_THAT(k.source, Catch::Contains(t == DType::F32 ? "fmaf" : "mma.sync.aligned.m16n8k16"));
        REQUIRE(k.resources.size() == 1);
        CHECK(k.resources[0].registers > 0);
        CHECK(k.resources[0].spillStoreBytes == 0);
        CHECK(k.dims == std::vector<std::string>{"B", "M"});
        CHECK_THAT(cg.explain, Catch::Contains("matmul"));
      }
}

TEST_CASE("matmul: graphs around a matmul are refused with what is in the way", "[compile][matmul]") {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {64, 128});
  Tensor b = g.input("b", DType::BF16, {128, 32});
  Tensor bias = g.input("bias", DType::BF16, {32});
  g.output("y", gelu_tanh(matmul(a, b) + bias));
  CHECK_THROWS_WITH(compile(g, {.chip = "sm_90"}), Catch::Contains("'matmul' compiles only as a graph of its own") &&
                                                        Catch::Contains("add") && Catch::Contains("epilogue"));
  Graph h;
  Tensor x = h.input("x", DType::BF16, {64, 128});
  h.output("y", matmul(x * 2.0, h.input("w", DType::BF16, {128, 32})));
  CHECK_THROWS_WITH(compile(h, {.chip = "sm_90"}), Catch::Contains("mul"));
  // bf16 tensor cores need sm_80.
  CHECK_THROWS_WITH(compiler::compileGraph(matmulGraph(DType::BF16, 64, 64, 64, false, false), {.chip = "sm_75"}),
                    Catch::Contains("sm_80"));
}

TEST_CASE("matmul matches the reference: dtypes, layouts, ragged shapes, batches, small M", "[gpu][matmul]") {
  test::requireGpu();
  struct Shape3 {
    int64_t m, n, k;
  };
  for (DType t : {DType::BF16, DType::F16, DType::F32})
    for (Shape3 s : {Shape3{128, 128, 64}, Shape3{129, 67, 100}, Shape3{16, 384, 256}, Shape3{1, 8, 16}})
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          INFO(dtypeName(t) << " M " << s.m << " N " << s.n << " K " << s.k << " transA " << ta << " transB " << tb);
          Graph g = matmulGraph(t, Dim("M"), s.n, s.k, ta, tb);
          test::RunOptions o;
          o.dims = {{"M", s.m}};
          // f32 accumulates in another order than the fp64 reference.
          o.tolScale = t == DType::F32 ? std::sqrt(static_cast<double>(s.k)) : 1.0;
          test::runAndCheck(g, o);
        }
  // Batches: [B, M, K] @ [K, N], and [2, 1, M, K] @ [3, K, N] broadcast.
  for (DType t : {DType::BF16, DType::F32}) {
    INFO(dtypeName(t));
    test::RunOptions o;
    o.dims = {{"B", 3}};
    o.tolScale = t == DType::F32 ? 16 : 1;
    test::runAndCheck(matmulGraph(t, 70, 130, 96, false, false, {Dim("B")}, {}), o);
    test::runAndCheck(matmulGraph(t, 33, 40, 48, false, true, {2, 1}, {3}), {.tolScale = o.tolScale});
  }
}

TEST_CASE("matmul: time of the portable kernel at 4096^3 bf16 (printed, not a goal)", "[gpu][matmul]") {
  test::requireGpu();
  const int64_t n = 4096;
  Graph g = matmulGraph(DType::BF16, n, n, n, false, false);
  Kernel k = compile(g);
  rt::DeviceBuffer a(n * n * 2), b(n * n * 2), c(n * n * 2);
  a.fill(0x3c);
  b.fill(0x3c);
  std::vector<TensorView> views{TensorView(a.data(), DType::BF16, {n, n}), TensorView(b.data(), DType::BF16, {n, n}),
                                TensorView(c.data(), DType::BF16, {n, n})};
  rt::BenchmarkOptions bo;
  bo.warmup = 2;
  bo.iters = 10;
  double us = rt::benchmark([&] { k.launch(std::span<const TensorView>(views)); }, bo).medianUs;
  std::printf("matmul bf16 4096^3, portable mma.sync kernel: %.1f us, %.1f TFLOP/s\n", us,
              2.0 * n * n * n / (us * 1e-6) / 1e12);
  CHECK(us > 0);
}
