// The op library's gradients on the GPU against the reference evaluator
// (fresh random inputs, outputs poisoned, tolerances by dtype): softmax and
// log_softmax (rows and columns), layernorm and rmsnorm (dx in a row kernel,
// dweight and dbias summed over the rows by a second one), cross_entropy
// (per row and averaged, over static and dynamic row counts, targets outside
// the row), gelu and silu.
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_support.h"
#include "kiln/dsl/oplib.h"

using namespace kiln;
using test::runAndCheck;

namespace {

int64_t rowsFor(int64_t len) {
  if (len <= 17) return 300;
  if (len <= 4097) return 200;
  return 5;
}

}  // namespace

TEST_CASE("softmax_backward and log_softmax_backward match the reference at every row length",
          "[gpu][reduction][grad]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  const bool logForm = GENERATE(false, true);
  const int64_t len = GENERATE(int64_t{1}, int64_t{17}, int64_t{4096}, int64_t{4097}, int64_t{32768});
  const int64_t rows = rowsFor(len);
  INFO((logForm ? "log_softmax_backward " : "softmax_backward ") << dtypeName(t) << " [" << rows << ", " << len << "]");
  Graph g;
  Tensor dy = g.input("dy", t, {"R", len}), y = g.input("y", t, {"R", len});
  g.output("dx", logForm ? log_softmax_backward(dy, y) : softmax_backward(dy, y));
  test::RunOptions o;
  o.dims = {{"R", rows}};
  o.ranges = {{"y", logForm ? std::pair{-8.0, 0.0} : std::pair{0.0, 1.0}}};
  runAndCheck(g, o);
}

TEST_CASE("softmax_backward over a non-last axis matches the reference", "[gpu][reduction][grad]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  Graph g;
  Tensor dy = g.input("dy", t, {1000, 64}), y = g.input("y", t, {1000, 64});
  g.output("dx", softmax_backward(dy, y, 0));
  test::RunOptions o;
  o.ranges = {{"y", {0.0, 1.0}}};
  runAndCheck(g, o);
}

TEST_CASE("layernorm_backward and rmsnorm_backward match the reference in dx and in dweight and dbias",
          "[gpu][reduction][grad]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  const bool rms = GENERATE(false, true);
  const bool affine = GENERATE(true, false);
  struct S {
    int64_t rows, len;
    bool dynamic;
  };
  // Static rows: dweight and dbias as column partials of the dx kernel
  // (one part of the rows a block); dynamic ones: a column kernel after it.
  const S s = GENERATE(S{1000, 4096, true}, S{7, 4097, true}, S{300, 17, true}, S{5, 32768, true},
                       S{64, 1, true}, S{2048, 4096, false}, S{1000, 4096, false}, S{4096, 17, false},
                       S{600, 4097, false}, S{1024, 8192, false}, S{256, 32768, false});
  INFO((rms ? "rmsnorm_backward " : "layernorm_backward ") << dtypeName(t) << (affine ? "" : " without weight")
                                                           << " [" << s.rows << ", " << s.len << "]"
                                                           << (s.dynamic ? " (rows bound at launch)" : ""));
  Graph g;
  const Shape shape = {s.dynamic ? Dim("R") : Dim(s.rows), Dim(s.len)};
  Tensor dy = g.input("dy", t, shape), x = g.input("x", t, shape);
  Tensor w = affine ? g.input("w", t, {s.len}) : Tensor();
  Tensor b = affine && !rms ? g.input("b", t, {s.len}) : Tensor();
  NormGrads r = rms ? rmsnorm_backward(dy, x, w) : layernorm_backward(dy, x, w, b);
  g.output("dx", r.dx);
  if (r.dweight.valid()) g.output("dw", r.dweight);
  if (r.dbias.valid()) g.output("db", r.dbias);
  test::RunOptions o;
  if (s.dynamic) o.dims = {{"R", s.rows}};
  o.ranges = {{"x", {-3, 5}}};
  if (affine) o.ranges["w"] = {0.5, 1.5};
  // Sums over the rows: rounding grows with their count.
  const double floor = std::sqrt(static_cast<double>(s.rows));
  o.relFloor = {{"dw", floor}, {"db", floor}};
  runAndCheck(g, o);
  // The scalar entries too (base pointers off 16-byte alignment).
  if (!s.dynamic && s.len % 8 == 0) {
    o.misalign = 4;
    runAndCheck(g, o);
  }
}

TEST_CASE("cross_entropy_backward matches the reference per row and averaged over static and dynamic row counts",
          "[gpu][reduction][grad]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  const Reduction red = GENERATE(Reduction::None, Reduction::Mean);
  const bool dynamicRows = GENERATE(false, true);
  const int64_t classes = GENERATE(int64_t{1000}, int64_t{32768});
  const DType targetType = classes == 1000 ? DType::I32 : DType::I64;
  const int64_t rows = classes > 4096 ? 16 : 200;
  INFO("cross_entropy_backward " << dtypeName(t) << " [" << rows << ", " << classes << "] "
                                 << (red == Reduction::Mean ? "mean" : "per row")
                                 << (dynamicRows ? ", rows bound at launch" : ""));
  Graph g;
  const Dim r = dynamicRows ? Dim("M") : Dim(rows);
  Tensor logits = g.input("logits", t, {r, Dim(classes)});
  Tensor targets = g.input("targets", targetType, {r});
  Tensor dloss = g.input("dloss", DType::F32, red == Reduction::Mean ? Shape{} : Shape{r});
  g.output("dlogits", cross_entropy_backward(dloss, logits, targets, red));
  test::RunOptions o;
  if (dynamicRows) o.dims = {{"M", rows}};
  o.ranges = {{"logits", {-4, 4}}, {"targets", {0, static_cast<double>(classes)}}, {"dloss", {0.5, 2}}};
  // Targets outside the row pick nothing (the forward's loss is the row's
  // log-sum-exp there).
  o.prepare = [&](EvalInputs& in) {
    in.tensors.at("targets").setInt(3, -1);
    in.tensors.at("targets").setInt(5, classes);
  };
  o.relFloor = {{"dlogits", 0}};  // probabilities far below 1
  runAndCheck(g, o);
}

TEST_CASE("gelu_backward and silu_backward match the reference", "[gpu][pointwise][grad]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  const int64_t n = GENERATE(int64_t{1}, int64_t{7}, int64_t{1000003});
  Graph g;
  Tensor dy = g.input("dy", t, {"N"}), x = g.input("x", t, {"N"});
  g.output("gelu", gelu_backward(dy, x));
  g.output("gelu_tanh", gelu_backward(dy, x, GeluApproximation::Tanh));
  g.output("silu", silu_backward(dy, x));
  test::RunOptions o;
  o.dims = {{"N", n}};
  o.ranges = {{"x", {-6, 6}}};
  runAndCheck(g, o);
}
