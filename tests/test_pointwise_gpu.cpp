// Pointwise kernels on the GPU against the reference evaluator: fresh random
// inputs every run, outputs poisoned before each launch.
#include <catch2/catch.hpp>

#include "gpu_support.h"
#include "op_sweep.h"

using namespace kiln;
using test::runAndCheck;

TEST_CASE("every op and dtype matches the reference on the GPU", "[gpu][pointwise]") {
  test::requireGpu();
  int64_t n = GENERATE(1, 7, 1000003);
  for (const test::SweepCase& c : test::opSweep({"N"})) {
    INFO(c.label << " over " << n << " elements");
    runAndCheck(c.graph, {.dims = {{"N", n}}, .ranges = c.ranges});
  }
}

// The benchmark's graphs at the benchmark's row lengths (bench_pointwise
// also checks the first and last rows of its full-size runs).
TEST_CASE("the benchmark graphs match the reference at the benchmark row lengths", "[gpu][pointwise]") {
  test::requireGpu();
  DType t = GENERATE(DType::BF16, DType::F32);
  struct S {
    int64_t rows, cols;
  };
  S s = GENERATE(S{300, 4096}, S{3, 262144});
  // Also with plain ld.global (config nc 0, Triton's loads), two vectors per thread.
  CompileOptions co;
  co.configOverride = GENERATE(as<std::string>{}, "", R"({"nc": 0, "unroll": 2})");
  Graph g;
  Tensor x = g.input("x", t, {s.rows, s.cols});
  Tensor y = g.input("y", t, {s.rows, s.cols});
  Tensor z = g.input("z", t, {s.rows, s.cols});
  Tensor b = g.input("b", t, {s.cols});
  g.output("sum", x + y);
  g.output("fma", x * y + z);
  g.output("gelu", gelu_tanh(x + b));
  Tensor c = x;
  for (int i = 0; i < 6; ++i) c = (i % 2) ? exp(c * -0.5) : c * 1.5 + 0.25;
  g.output("chain", c);
  INFO("config override " << co.configOverride);
  runAndCheck(g, {.ranges = {{"x", {-2, 2}}}, .compile = co});
}

TEST_CASE("row, column and scalar broadcasts, dynamic dims and several outputs", "[gpu][pointwise]") {
  test::requireGpu();
  int64_t rows = GENERATE(1, 3, 1025);
  int64_t cols = GENERATE(1, 7, 4096);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"R", "C"});
  Tensor row = g.input("row", DType::F32, {"C"});
  Tensor col = g.input("col", DType::BF16, {"R", 1});
  Tensor s = g.input("s", DType::F16, {});
  Tensor a = g.scalar("alpha");
  Tensor y = (x + row) * col - s * a;
  g.output("y", y);
  g.output("y16", cast(y, DType::F16));
  g.output("mask", y > 0.0);
  g.output("idx", iota(g, {"R", "C"}, 1, DType::I32) + cast(x > 0.0, DType::I32));
  // The mask compares y with 0 exactly: x and `row` on a grid of 1/128
  // make x + row, its product with col and s * alpha exact in f32, so y's
  // one rounding (or fma's) keeps the exact sign. With any f32 `row`, a y
  // within an ulp of 0 could take either sign (seen once in 4.2M values).
  auto coarseRow = [](EvalInputs& in) {
    for (const char* name : {"x", "row"}) {
      HostTensor& t = in.tensors.at(name);
      for (int64_t i = 0; i < t.numel(); ++i) t.set(i, std::round(t.get(i) * 128) / 128);
    }
  };
  runAndCheck(g, {.dims = {{"R", rows}, {"C", cols}}, .scalars = {{"alpha", 0.75}}, .prepare = coarseRow});
}

TEST_CASE("static shapes that do not divide the vector take the scalar tail", "[gpu][pointwise]") {
  test::requireGpu();
  int64_t cols = GENERATE(3, 4095, 4097);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {37, cols});
  Tensor b = g.input("b", DType::BF16, {cols});
  g.output("y", gelu(x + b));
  runAndCheck(g);
}

TEST_CASE("views inside a pointwise kernel: transpose, slice, expand, reshape of an input", "[gpu][pointwise]") {
  test::requireGpu();
  Graph g;
  Tensor x = g.input("x", DType::F32, {64, 48});
  Tensor v = g.input("v", DType::F32, {48 * 64});
  Tensor t = transpose(x);                                   // [48, 64]
  Tensor r = reshape(v, {48, 64});
  Tensor sl = slice(g.input("w", DType::F32, {48, 130}), 1, 1, 129, 2);  // [48, 64]
  Tensor e = expand(reshape(g.input("c", DType::F32, {48}), {48, 1}), {48, 64});
  g.output("y", t * 2.0 + r - sl * e);
  runAndCheck(g);
}

TEST_CASE("unaligned base pointers take the scalar entry and stay correct", "[gpu][pointwise]") {
  test::requireGpu();
  size_t offset = GENERATE(2, 4, 6, 12);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 256});
  Tensor y = g.input("y", DType::BF16, {"N", 256});
  g.output("z", x * y + 1.0);
  runAndCheck(g, {.dims = {{"N", 333}}, .misalign = offset});
}

// Two vectors per thread: whole chunks load everything before storing; a
// partial last chunk (4000 columns) guards each vector; unaligned pointers
// take the scalar entry, unrolled as well.
TEST_CASE("unrolled vectors: whole and partial chunks, aligned or not, stay correct", "[gpu][pointwise]") {
  test::requireGpu();
  DType t = GENERATE(DType::BF16, DType::F32);
  int64_t cols = GENERATE(4096, 4000);
  size_t misalign = GENERATE(0, 4);
  Graph g;
  Shape s{33, cols};
  Tensor x = g.input("x", t, s), y = g.input("y", t, s);
  g.output("out", x * y + g.input("z", t, s));
  CompileOptions co;
  co.configOverride = R"({"unroll": 2})";
  INFO(dtypeName(t) << " [33, " << cols << "], misaligned by " << misalign);
  runAndCheck(g, {.misalign = misalign, .compile = co});
}

TEST_CASE("AdamW's step runs as one fused kernel with runtime scalars", "[gpu][pointwise]") {
  test::requireGpu();
  Graph g;
  Tensor p = g.input("p", DType::F32, {"N"});
  Tensor gr = g.input("g", DType::F32, {"N"});
  Tensor m = g.input("m", DType::F32, {"N"});
  Tensor v = g.input("v", DType::F32, {"N"});
  AdamWResult r = adamw_step(p, gr, m, v, adamw_scalars(g));
  g.output("p2", r.param);
  g.output("m2", r.exp_avg);
  g.output("v2", r.exp_avg_sq);
  Kernel k = runAndCheck(g, {.dims = {{"N", 100003}},
                             .ranges = {{"v", {0, 1}}},
                             .scalars = {{"lr", 1e-3}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
                                         {"weight_decay", 0.01}, {"step", 10}},
                             .tolScale = 5});
  CHECK(k.compiled().kernels.size() == 1);
}
