// Graphs with reductions, shared by the compile tests (CPU) and the GPU
// tests: every reduction op along the last axis, the op library's row-wise
// composites, and graphs the planner has to split into several kernels.
// Each case carries the input ranges that keep its comparison meaningful.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/dsl/oplib.h"
#include "kiln/dsl/reference.h"

namespace kiln::test {

struct GraphCase {
  std::string label;  // "softmax/bf16[R, 4096]"
  Graph graph;
  InputRanges ranges;
  // By output name, |want| below which the tolerance is absolute (see
  // RunOptions::relFloor): softmax outputs are ~1/len, far below 1, and
  // compare relatively (0).
  std::map<std::string, double> relFloor;
  // A product of len roundings: its relative error grows like sqrt(len).
  double tolScale = 1;
};

inline std::string caseLabel(const std::string& what, DType t, const Shape& s) {
  return what + "/" + typeToString(t, s);
}

// Every reduction op of the DSL (sum mean max min prod argmax argmin var std).
inline std::vector<Op> reductionOps() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i)
    if (opClass(static_cast<Op>(i)) == OpClass::Reduction) ops.push_back(static_cast<Op>(i));
  return ops;
}

// The dtypes a reduction op is swept in: every float dtype, and i32 for the
// ops whose integer results are exact and cheap to check.
inline std::vector<DType> sweepDTypes(Op op) {
  std::vector<DType> ts = {DType::F32, DType::BF16, DType::F16};
  if (op == Op::Sum || op == Op::Max || op == Op::Min || op == Op::ArgMax) ts.push_back(DType::I32);
  return ts;
}

// Inputs that keep a reduction of `len` values comparable with the fp64
// reference: sums and means of values with a positive mean (no cancellation
// to zero, and below f16's 65504 at 262144 values); products of values near 1
// (the log of the product stays within about +-6 even for long rows, so no
// overflow in f16); integers of both signs.
inline std::pair<double, double> reductionRange(Op op, DType t, int64_t len) {
  if (!isFloat(t)) return {-50, 50};
  if (op == Op::Prod) {
    double w = std::min(0.5, 2.0 / std::sqrt(static_cast<double>(len)));
    return {1 - w, 1 + w};
  }
  return {-0.25, 0.5};
}

// op(x, -1) of x [shape] for each keepdim in `keepdims`, as outputs "y"
// (keepdim false) and "y_keepdim" (keepdim true).
inline GraphCase lastAxisReduction(Op op, DType t, const Shape& shape, std::vector<bool> keepdims = {false, true}) {
  GraphCase c;
  c.label = caseLabel(std::string(opName(op)), t, shape);
  Tensor x = c.graph.input("x", t, shape);
  for (bool keep : keepdims) c.graph.output(keep ? "y_keepdim" : "y", reduce(op, x, -1, keep));
  const int64_t len = shape.back().isStatic() ? shape.back().size : 4096;
  c.ranges = {{"x", reductionRange(op, t, len)}};
  if (op == Op::Prod) c.tolScale = std::max(1.0, std::sqrt(static_cast<double>(len)) / 64);
  return c;
}

// Every (reduction op, dtype) of the sweep over x [shape], reducing the last
// axis, with the given keepdims.
inline std::vector<GraphCase> reductionSweep(const Shape& shape, std::vector<bool> keepdims = {false, true}) {
  std::vector<GraphCase> cases;
  for (Op op : reductionOps())
    for (DType t : sweepDTypes(op)) cases.push_back(lastAxisReduction(op, t, shape, keepdims));
  return cases;
}

// rmsnorm that also returns rstd = rsqrt(mean(x^2) + eps) ([rows..., 1], f32),
// the statistic a backward pass keeps; built from primitives.
inline void rmsnormWithRstd(Graph& g, const Tensor& x, const Tensor& w, double eps = 1e-6) {
  Tensor v = x.dtype() == DType::F32 ? x : cast(x, DType::F32);
  Tensor rstd = rsqrt(mean(v * v, -1, true) + eps);
  Tensor wf = w.dtype() == DType::F32 ? w : cast(w, DType::F32);
  g.output("y", cast(v * rstd * wf, x.dtype()));
  g.output("rstd", rstd);
}

// The op library's row-wise composites over x [shape] (the last dim is the
// row), each expected to be one row_reduction kernel.
inline std::vector<GraphCase> rowComposites(DType t, const Shape& shape) {
  std::vector<GraphCase> cases;
  const Dim len = shape.back();
  Shape rowsShape(shape.begin(), shape.end() - 1);
  const std::pair<double, double> normRange{-3, 5};  // a mean away from zero
  auto add = [&](const std::string& what, InputRanges ranges, const std::function<void(Graph&)>& body,
                 std::map<std::string, double> relFloor = {}) {
    GraphCase c;
    c.label = caseLabel(what, t, shape);
    body(c.graph);
    c.ranges = std::move(ranges);
    c.relFloor = relFloor;
    cases.push_back(std::move(c));
  };
  double rowLen = len.isStatic() ? static_cast<double>(len.size) : 4096.0;
  add("softmax", {{"x", {-4, 4}}}, [&](Graph& g) { g.output("y", softmax(g.input("x", t, shape))); },
      {{"y", 0}});
  add("log_softmax", {{"x", {-4, 4}}}, [&](Graph& g) { g.output("y", log_softmax(g.input("x", t, shape))); });
  add("layernorm", {{"x", normRange}}, [&](Graph& g) {
    Tensor x = g.input("x", t, shape);
    g.output("y", layernorm(x, g.input("w", t, {len}), g.input("b", t, {len})));
  });
  add("layernorm_without_affine", {{"x", normRange}},
      [&](Graph& g) { g.output("y", layernorm(g.input("x", t, shape), Tensor(), Tensor())); });
  add("rmsnorm", {{"x", normRange}},
      [&](Graph& g) { g.output("y", rmsnorm(g.input("x", t, shape), g.input("w", t, {len}))); });
  add("rmsnorm_without_weight", {{"x", normRange}},
      [&](Graph& g) { g.output("y", rmsnorm(g.input("x", t, shape), Tensor())); });
  add("rmsnorm_with_rstd", {{"x", normRange}},
      [&](Graph& g) { rmsnormWithRstd(g, g.input("x", t, shape), g.input("w", t, {len})); });
  add("residual_add_rmsnorm", {{"x", normRange}}, [&](Graph& g) {
    Tensor x = g.input("x", t, shape);
    Tensor r = g.input("r", t, shape);
    Tensor w = g.input("w", t, {len});
    Tensor h = x + r;
    g.output("h", h);
    g.output("y", rmsnorm(h, w));
  });
  for (DType target : {DType::I64, DType::I32})
    add("cross_entropy_none/targets_" + std::string(dtypeName(target)),
        {{"logits", {-8, 8}}, {"targets", {0, rowLen}}}, [&](Graph& g) {
          Tensor logits = g.input("logits", t, shape);
          Tensor targets = g.input("targets", target, rowsShape);
          g.output("loss", cross_entropy(logits, targets, Reduction::None));
        });
  return cases;
}

// cross_entropy(logits [shape], targets, Mean) alone, and with the per-row
// losses as a second output ("loss" and "mean").
inline GraphCase crossEntropyMean(DType t, DType target, const Shape& shape, bool withPerRow = false) {
  GraphCase c;
  c.label = caseLabel("cross_entropy_mean/targets_" + std::string(dtypeName(target)), t, shape);
  Shape rowsShape(shape.begin(), shape.end() - 1);
  Tensor logits = c.graph.input("logits", t, shape);
  Tensor targets = c.graph.input("targets", target, rowsShape);
  if (withPerRow) c.graph.output("loss", cross_entropy(logits, targets, Reduction::None));
  c.graph.output("mean", cross_entropy(logits, targets, Reduction::Mean));
  double rowLen = shape.back().isStatic() ? static_cast<double>(shape.back().size) : 4096.0;
  c.ranges = {{"logits", {-8, 8}}, {"targets", {0, rowLen}}};
  return c;
}

// Graphs over x [A, B] that reduce along other axes than the last, or twice:
// the planner may split them into several kernels with intermediates in the
// workspace. Values have a positive mean so no sum cancels to zero.
inline std::vector<GraphCase> splitCases(DType t, const Shape& shape) {
  std::vector<GraphCase> cases;
  auto add = [&](const std::string& what, const std::function<Tensor(const Tensor&)>& body,
                 std::map<std::string, double> relFloor = {}) {
    GraphCase c;
    c.label = caseLabel(what, t, shape);
    c.graph.output("y", body(c.graph.input("x", t, shape)));
    c.ranges = {{"x", {-0.5, 1}}};
    c.relFloor = relFloor;
    cases.push_back(std::move(c));
  };
  add("sum(max(x, 1), 0)", [](const Tensor& x) { return sum(max(x, 1), 0); });
  add("softmax(x, 0)", [](const Tensor& x) { return softmax(x, 0); }, {{"y", 0}});
  add("mean(x)", [](const Tensor& x) { return mean(x); });
  add("sum(x, 0)", [](const Tensor& x) { return sum(x, 0); });
  {
    GraphCase c;
    c.label = caseLabel("softmax(x, -1) and sum(x, 0)", t, shape);
    Tensor x = c.graph.input("x", t, shape);
    c.graph.output("rows", softmax(x, -1));
    c.graph.output("cols", sum(x, 0));
    c.ranges = {{"x", {-0.5, 1}}};
    c.relFloor = {{"rows", 0}};
    cases.push_back(std::move(c));
  }
  return cases;
}

// Values computed only from inputs that are the same for every row and
// column (a one-element parameter, or every input of a domain whose axes
// are all 1) are computed once in the kernel's entry; their loads must be
// there too. They were emitted per row, after those values: "operand #0
// does not dominate this use" (found by random graphs, session 22). The
// third graph reached the column form through a permute of unit dims and
// failed to compile there. Session 40's random graphs found the last two:
// a pointwise kernel over unit dims loaded an input through its flat index,
// which the entry block does not have; a mean over a permuted [1, 1] view
// was planned into a pointwise kernel ("internal: pointwise kernel reached
// op 'mean'").
inline std::vector<Graph> invariantInputGraphs(DType t) {
  std::vector<Graph> out;
  {
    Graph g;  // softmax(x * exp(s)) with s a one-element tensor
    Tensor x = g.input("x", t, {"N", 4096});
    Tensor s = g.input("s", DType::F32, {1});
    g.output("y", softmax(x * exp(s)));
    out.push_back(g);
  }
  {
    Graph g;  // every input of a [1, 1] domain: min(max(sqrt(w), c)) and a row sum
    Tensor x = g.input("x", t, {1, 1});
    Tensor w = g.input("w", t, {1});
    Tensor c = g.input("c", t, {1, 1});
    g.output("m", min(maximum(sqrt(w), c), {0, 1}));
    g.output("r", sum(erf(x), 1, true));
    out.push_back(g);
  }
  {
    Graph g;  // a variance over axis 0 of [1, 1] (its permute to the last axis moves unit dims only)
    Tensor x = g.input("x", t, {1, 1});
    Tensor v = var(x, 0, 1, true);
    g.output("y", abs(v) - maximum(v, x));
    out.push_back(g);
  }
  {
    Graph g;  // tanh(x), x and x reshaped, of a [1, 1] x: two pointwise kernels over unit dims
    Tensor x = g.input("x", t, {1, 1});
    g.output("a", tanh(x));
    g.output("b", x);
    g.output("c", reshape(x, {1}));
    out.push_back(g);
  }
  {
    Graph g;  // maximum(mean(permute(exp(x)), 1, keepdim), w) of a [1, 1] x
    Tensor x = g.input("x", t, {1, 1});
    Tensor w = g.input("w", t, {1, 7});
    g.output("y", maximum(mean(permute(exp(x), {1, 0}), 1, true), w));
    out.push_back(g);
  }
  return out;
}


// The reductions a split row (config split) takes, each a function of x and
// the reduced axis: sum, mean, max, min, prod, argmax, argmin (keepdim),
// var, std (correction 0) and a log-sum-exp (its max paired with the sum of
// exps: one pass).
struct AxisReduction {
  std::string name;
  std::function<Tensor(const Tensor&, int64_t)> op;
};
inline std::vector<AxisReduction> splitRowReductions() {
  return {{"sum", [](const Tensor& x, int64_t a) { return sum(x, a); }},
          {"mean", [](const Tensor& x, int64_t a) { return mean(x, a); }},
          {"max", [](const Tensor& x, int64_t a) { return max(x, a); }},
          {"min", [](const Tensor& x, int64_t a) { return min(x, a); }},
          {"prod", [](const Tensor& x, int64_t a) { return prod(x, a); }},
          {"argmax", [](const Tensor& x, int64_t a) { return argmax(x, a); }},
          {"argmin", [](const Tensor& x, int64_t a) { return argmin(x, a, true); }},
          {"var", [](const Tensor& x, int64_t a) { return var(x, a); }},
          {"std", [](const Tensor& x, int64_t a) { return kiln::std(x, a, 0); }},
          {"logsumexp", [](const Tensor& x, int64_t a) {
             Tensor xf = cast(x, DType::F32);
             Tensor m = max(xf, a, true);
             return log(sum(exp(xf - m), a, true)) + m;
           }}};
}

// A row statistic read at other rows than its own: keepdim false and
// broadcast against a square x, it lines up with the columns (as PyTorch
// broadcasts it). A row kernel cannot read its own results at other rows,
// so the planner stores the statistic and a later kernel computes the
// output; the row emitter refused these graphs before (session 22).
inline std::vector<GraphCase> misreadCases(DType t, int64_t n) {
  std::vector<GraphCase> cases;
  const Shape shape{Dim(n), Dim(n)};
  auto add = [&](const std::string& what, const std::function<Tensor(const Tensor&)>& body) {
    GraphCase c;
    c.label = caseLabel(what, t, shape);
    Tensor x = c.graph.input("x", t, shape);
    c.graph.output("y", body(x));
    c.ranges = {{"x", {-0.5, 1}}};
    c.relFloor = {{"y", 1}};
    cases.push_back(std::move(c));
  };
  add("x - sum(x, 1)", [](const Tensor& x) { return x - sum(x, 1); });
  add("maximum(x, var(x, 1))", [t](const Tensor& x) {
    Tensor xf = cast(x, DType::F32);
    return cast(maximum(xf, var(xf, 1)), t);
  });
  add("softmax(x) * max(x, 1)", [](const Tensor& x) { return softmax(x) * max(x, 1); });
  // The second sum reads the first at other rows: a second row kernel
  // (session 40: the emitter refused the one kernel the planner made).
  add("sum(x - sum(x, 1), 1)", [t](const Tensor& x) {
    Tensor xf = cast(x, DType::F32);
    return cast(sum(xf - sum(xf, 1), 1), t);
  });
  return cases;
}

// A reshape of a computed value read by a pointwise kernel of the value's
// own shape (transposed back to it): another pointwise kernel stores the
// value first (session 40; "cannot be compiled yet" before).
inline std::vector<GraphCase> reshapedValueCases(DType t) {
  std::vector<GraphCase> cases;
  {
    GraphCase c;
    c.label = caseLabel("cos(reshape(x + b, [C, R]).T)", t, {300, 64});
    Tensor x = c.graph.input("x", t, {300, 64});
    Tensor b = c.graph.input("b", t, {64});
    c.graph.output("y", cos(transpose(reshape(x + b, {64, 300}))));
    cases.push_back(std::move(c));
  }
  {
    GraphCase c;
    c.label = caseLabel("reshape(expand(exp(s)), [3, 2]).T", t, {2, 3});
    Tensor s = c.graph.input("s", t, {});
    c.graph.output("y", transpose(reshape(expand(exp(s), {2, 3}), {3, 2})));
    cases.push_back(std::move(c));
  }
  {
    // Two readers of the reshape: one of another shape (which gives the
    // value its kernel), then one of the value's own shape.
    GraphCase c;
    c.label = caseLabel("reshape(e) * 2 and cos(reshape(e).T), e = x + b", t, {300, 64});
    Tensor x = c.graph.input("x", t, {300, 64});
    Tensor b = c.graph.input("b", t, {64});
    Tensor r = reshape(x + b, {64, 300});
    c.graph.output("a", r * 2.0);
    c.graph.output("b2", cos(transpose(r)));
    cases.push_back(std::move(c));
  }
  {
    // A reshape of a reshape of a statistic.
    GraphCase c;
    c.label = caseLabel("reshape(reshape(sum(x, 0, keepdim)))", t, {50, 4, 6});
    Tensor x = c.graph.input("x", t, {50, 4, 6});
    c.graph.output("y", reshape(reshape(sum(x, 0, true), {6, 1, 4}), {24, 1}) * 0.5);
    cases.push_back(std::move(c));
  }
  return cases;
}

// A whole tensor's statistic reused by another reduction over the whole
// tensor (x of rank >= 2: both reductions over a merged view of x).
// sum(x - sum(x)) and a variance written by hand run as one row kernel
// (the reshape onto x's merged view sinks past the statistic's unit dims);
// with a row statistic in the expression too, the second reduction reads a
// stored copy of the merged view in a later kernel. The planner made a
// cycle of kernels of these before (found by random graphs, session 40).
inline std::vector<GraphCase> statisticReuseCases(DType t, const Shape& shape) {
  std::vector<GraphCase> cases;
  auto add = [&](const std::string& what, const std::function<Tensor(const Tensor&)>& body) {
    GraphCase c;
    c.label = caseLabel(what, t, shape);
    Tensor x = c.graph.input("x", t, shape);
    c.graph.output("y", body(cast(x, DType::F32)));
    c.ranges = {{"x", {0.25, 1}}};
    cases.push_back(std::move(c));
  };
  std::vector<int64_t> all;
  for (size_t a = 0; a < shape.size(); ++a) all.push_back(static_cast<int64_t>(a));
  const int64_t last = static_cast<int64_t>(shape.size()) - 1;
  add("sum(x - sum(x))", [&](const Tensor& x) { return sum(x - sum(x, all, true)); });
  add("mean((x - mean(x))^2)", [&](const Tensor& x) {
    Tensor d = x - mean(x, all, true);
    return mean(d * d) * 1000.0;
  });
  add("sum(x - sum(x, -1) - sum(x))",
      [&](const Tensor& x) { return sum(x - sum(x, last, true) - sum(x, all, true)); });
  add("mean(minimum(mean(log_softmax(x)), x))",
      [&](const Tensor& x) { return mean(minimum(mean(log_softmax(x), all, true) + 2.0, x)); });
  return cases;
}
}  // namespace kiln::test
