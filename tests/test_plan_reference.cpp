// Plans evaluated on the CPU: every kernel's sub-graph by the reference
// evaluator, in launch order, each workspace tensor passed from the kernel
// that writes it (rounded to its dtype, as the GPU stores it) to the ones
// that read it, a grid tail after its kernel. The graph's outputs must
// match the whole graph's evaluation: the planner's rewrites (reductions
// normalized, split into parts, reshapes sunk onto inputs, values
// recomputed or materialized) keep the graph's meaning, checked without a
// GPU. (The GPU tests check what the kernels make of each sub-graph.)
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>

#include "../compiler/src/planner.h"
#include "gpu_support.h"
#include "kiln/dsl/text.h"
#include "matmul_graphs.h"
#include "random_graphs.h"
#include "reduction_graphs.h"

using namespace kiln;

namespace {

// Runs the plan of `g` on `in` with the reference evaluator; every value by
// name (graph inputs, workspace tensors, graph outputs).
std::map<std::string, HostTensor> runPlan(const compiler::Plan& plan, const EvalInputs& in) {
  std::map<std::string, HostTensor> values = in.tensors;
  auto run = [&](const Graph& sub) {
    EvalInputs ki;
    for (const std::string& d : sub.dynamicDims()) ki.dims[d] = in.dims.at(d);  // (a kernel may use fewer)
    for (int id : sub.params()) {
      const Node& n = sub.node(id);
      if (n.op == Op::Scalar) ki.scalars[n.name] = in.scalars.at(n.name);
      if (n.op != Op::Input) continue;
      auto it = values.find(n.name);
      INFO("input " << n.name << " of a kernel's sub-graph:\n" << sub.toText());
      REQUIRE(it != values.end());  // written by an earlier kernel, or a graph input
      ki.tensors[n.name] = it->second;
    }
    for (EvalOutput& o : evaluate(sub, ki)) values[o.name] = std::move(o.value);
  };
  for (const compiler::KernelPlan& k : plan.kernels) {
    run(k.graph);
    if (k.tail) run(*k.tail);
  }
  return values;
}

// Plans `c` and checks the plan's outputs against the graph's on random
// inputs (the case's ranges), with the GPU tests' tolerances.
void checkPlan(const test::GraphCase& c, const DimBindings& dims = {}, size_t minKernels = 1,
               const compiler::PlanOptions& options = {}) {
  INFO(c.label);
  const compiler::Plan plan = compiler::planGraph(c.graph, options);
  INFO(plan.explain);
  CHECK(plan.kernels.size() >= minKernels);
  const EvalInputs in = randomInputs(c.graph, dims, 20261201, c.ranges);
  const std::map<std::string, HostTensor> got = runPlan(plan, in);
  for (const EvalOutput& want : evaluate(c.graph, in)) {
    auto it = got.find(want.name);
    REQUIRE(it != got.end());
    test::checkOutput(want, it->second, 2 * c.tolScale, test::relFloorOf(c.relFloor, want.name));
  }
}

// A graph in kiln's text form (a planner regression, usually found by the
// random graphs): its plan checked against the graph on random inputs, and
// the whole graph compiled.
void checkTextPlan(const std::string& text, const InputRanges& ranges = {}, const DimBindings& dims = {}) {
  test::GraphCase c;
  c.graph = parseGraph(text);
  c.label = c.graph.toText();
  c.ranges = ranges;
  checkPlan(c, dims);
  INFO(c.label);
  CHECK_NOTHROW(compiler::compileGraph(c.graph));
}

// relFloor: |want| below which the tolerance is absolute (0 for softmax's
// small positive values; 1 where values near 0 come from cancellations,
// x - mean).
test::GraphCase oneOutput(const std::string& what, DType t, const Shape& shape,
                          const std::function<Tensor(const Tensor&)>& body, InputRanges ranges = {{"x", {-0.5, 1}}},
                          double relFloor = 0) {
  test::GraphCase c;
  c.label = test::caseLabel(what, t, shape);
  c.graph.output("y", body(c.graph.input("x", t, shape)));
  c.ranges = std::move(ranges);
  c.relFloor = {{"y", relFloor}};
  return c;
}

}  // namespace

TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: graphs split into several kernels",
          "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& s : {Shape{Dim(2048), Dim(64)}, Shape{Dim(1024), Dim(96)}})
      for (const test::GraphCase& c : test::splitCases(t, s)) checkPlan(c);
}

// Normalizations over a non-last axis: the first statistic in one kernel
// (the column form splits its rows across blocks itself), the next in
// parts (the column split with the previous statistic broadcast into its
// parts, reshaped with a unit dim where the split axis is not the first),
// then the output's kernel.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: normalizations over other axes",
          "[compile][plan]") {
  auto norm = [](int64_t axis) {
    return [axis](const Tensor& x) {
      Tensor xf = cast(x, DType::F32);
      Tensor d = xf - mean(xf, {axis}, true);
      return cast(d * rsqrt(mean(d * d, {axis}, true) + 1e-5), x.node().dtype);
    };
  };
  for (DType t : {DType::F32, DType::BF16}) {
    checkPlan(oneOutput("softmax(x, 0)", t, {2048, 64}, [](const Tensor& x) { return softmax(x, 0); }), {}, 4);
    checkPlan(oneOutput("log_softmax(x, 0)", t, {2048, 64}, [](const Tensor& x) { return log_softmax(x, 0); }), {}, 4);
    checkPlan(oneOutput("softmax(x, 1)", t, {3, 1024, 48}, [](const Tensor& x) { return softmax(x, 1); }), {}, 4);
    checkPlan(oneOutput("norm(x, 0)", t, {4096, 32}, norm(0), {{"x", {-0.5, 1}}}, 1), {}, 4);
    checkPlan(oneOutput("norm(x, 1)", t, {3, 2048, 40}, norm(1), {{"x", {-0.5, 1}}}, 1), {}, 4);
    // keepdim false: the statistic right-aligned against x
    checkPlan(oneOutput("sum(exp(x - max(x, 0)), 0)", t, {2048, 64},
                        [](const Tensor& x) { return sum(exp(x - max(x, {0})), {0}); }));
  }
}

// Column and whole-tensor reductions of expressions, argmax/argmin in parts
// (and over the flattened tensor), cross_entropy's mean as a grid tail.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: reductions in parts and grid tails",
          "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16}) {
    checkPlan(oneOutput("sum(x*x)", t, {1024, 512}, [](const Tensor& x) { return sum(cast(x, DType::F32) * cast(x, DType::F32)); },
                        {{"x", {0.5, 1.5}}}));
    checkPlan(oneOutput("mean(x, 1)", t, {4, 2048, 64}, [](const Tensor& x) { return mean(x, {1}); }, {{"x", {0.5, 1.5}}}));
    checkPlan(oneOutput("argmax(x, 0)", t, {4096, 32}, [](const Tensor& x) { return argmax(x, 0); }));
    checkPlan(oneOutput("argmin(x)", t, {512, 1024}, [](const Tensor& x) { return argmin(x); }));
    // var/std of columns: one kernel (its rows split across blocks inside
    // the kernel: the GPU tests check that); also of values far from 0
    checkPlan(oneOutput("var(x, 0)", t, {4096, 32}, [](const Tensor& x) { return var(x, {0}); }));
    checkPlan(oneOutput("std(x, 0) shifted", t, {4096, 32}, [](const Tensor& x) { return kiln::std(x, {0}); },
                        {{"x", {100, 101}}}));
    checkPlan(oneOutput("var(x, 1, correction 0, keepdim)", t, {4, 2048, 64},
                        [](const Tensor& x) { return var(x, {1}, 0, true); }));
    checkPlan(oneOutput("std(x)", t, {1024, 512}, [](const Tensor& x) { return kiln::std(x); }, {{"x", {-3, 5}}}));
    checkPlan(oneOutput("var(x, correction 3)", t, {64, 4096}, [](const Tensor& x) { return var(x, {}, 3); }));
    test::GraphCase g;
    g.label = test::caseLabel("sum(r*x, 0)", t, {2048, 128});
    Tensor r = g.graph.input("r", t, {2048, 128});
    Tensor x = g.graph.input("x", t, {2048, 128});
    g.graph.output("dw", sum(cast(r, DType::F32) * cast(x, DType::F32), {0}));
    g.ranges = {{"r", {0.5, 1.5}}, {"x", {0.5, 1.5}}};
    checkPlan(g);
    checkPlan(test::crossEntropyMean(t, DType::I64, {"R", 1000}, true), {{"R", 300}});
  }
}

// Every reduction op and dtype of the sweep over each axis of a 3-D tensor,
// over two axes and over all, keepdim or not: the planner's normalized,
// permuted and split forms (600 = 2 parts of 300 along axis 1; 4096 values
// along axis 2 of a whole-tensor reduction split into parts).
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: every reduction op over every axis",
          "[compile][plan]") {
  const Shape shape = {Dim(4), Dim(600), Dim(48)};
  for (Op op : test::reductionOps())
    for (DType t : test::sweepDTypes(op))
      for (const Axes& axes : {Axes{0}, Axes{1}, Axes{2}, Axes{0, 2}, Axes{}})
        for (bool keep : {false, true}) {
          const bool arg = op == Op::ArgMax || op == Op::ArgMin;
          if (arg && axes.list.size() != 1) continue;  // one axis (or none: argmax(x))
          test::GraphCase c;
          c.label = test::caseLabel(std::string(opName(op)) + " over " + std::to_string(axes.list.size()) + " axes" +
                                        (axes.list.empty() ? "" : " from " + std::to_string(axes.list[0])) +
                                        (keep ? " keepdim" : ""),
                                    t, shape);
          Tensor x = c.graph.input("x", t, shape);
          c.graph.output("y", reduce(op, x, axes, keep));
          c.ranges = {{"x", test::reductionRange(op, t, 600 * 48)}};
          if (op == Op::Prod) c.tolScale = 4;
          checkPlan(c);
        }
  for (DType t : {DType::F32, DType::BF16}) {
    test::GraphCase c;
    c.label = test::caseLabel("argmax(x), argmin(x)", t, {Dim(64), Dim(4096)});
    Tensor x = c.graph.input("x", t, {64, 4096});
    c.graph.output("a", argmax(x));
    c.graph.output("b", argmin(x));
    checkPlan(c);
  }
}

TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a row statistic read along columns",
          "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16})
    for (const test::GraphCase& c : test::misreadCases(t, 96)) {
      checkPlan(c, {}, 2);
      INFO(c.label);
      CHECK_NOTHROW(compiler::compileGraph(c.graph));
    }
}

TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a whole tensor's statistic reused",
          "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16})
    for (const Shape& s : {Shape{Dim(4), Dim(16), Dim(7)}, Shape{Dim(64), Dim(7)}, Shape{Dim(1000), Dim(2)}})
      for (const test::GraphCase& c : test::statisticReuseCases(t, s)) {
        checkPlan(c);
        INFO(c.label);
        CHECK_NOTHROW(compiler::compileGraph(c.graph));
      }
  // The first two in one kernel: the reshape sinks past sum(x, all, keepdim).
  for (const test::GraphCase& c : test::statisticReuseCases(DType::F32, {4, 16, 7})) {
    INFO(c.label);
    const compiler::Plan plan = compiler::planGraph(c.graph);
    INFO(plan.explain);
    if (c.label.find("sum(x - sum(x))") != std::string::npos || c.label.find("mean((x") != std::string::npos)
      CHECK(plan.kernels.size() == 1);
  }
}

TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a reshape of a value read in its own shape",
          "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16})
    for (const test::GraphCase& c : test::reshapedValueCases(t)) {
      checkPlan(c, {}, 2);
      INFO(c.label);
      CHECK_NOTHROW(compiler::compileGraph(c.graph));
    }
}

// Views of alternating shapes over values that need a statistic, each
// stored by the pointwise kernel of its shape, made cycles of kernels (text
// form random graphs, session 40): a view or elementwise value whose
// kernel already waits for the reading pointwise kernel is computed by the
// reader, a reshape by a pointwise kernel of its own.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: views of alternating shapes",
          "[compile][plan]") {
  const char* texts[] = {R"(kiln.graph v1
%0 = scalar "s0" : i64 weak
%1 = const 3.0 : bf16
%2 = permute %1 {perm = []} : bf16
%3 = mul %1, %2 : bf16
%4 = erf %3 : bf16
%5 = reshape %1 : bf16[1, 1]
%6 = argmin %5 {axis = 0, keepdim = false} : i64[1]
%7 = expand %6 : i64[2]
%8 = const 0 : i64 weak
%9 = const true : bool weak
%10 = fma %0, %8, %9 : i64 weak
%11 = const 0 : i64 weak
%12 = ne %10, %11 : bool weak
%13 = const -2 : i64 weak
%14 = fma %4, %5, %13 : bf16[1, 1]
%15 = where %12, %7, %14 : bf16[1, 2]
%16 = reshape %15 : bf16[1, 2, 1]
%17 = permute %16 {perm = [1, 0, 2]} : bf16[2, 1, 1]
%18 = reshape %17 : bf16[1, 2, 1]
output "y" = %18
)",
                         R"(kiln.graph v1
%0 = input "x0" : i64[2, M]
%1 = iota {axis = 2} : f32[2, 1, 2]
%2 = const -2 : i64 weak
%3 = mul %1, %2 : f32[2, 1, 2]
%4 = permute %3 {perm = [1, 2, 0]} : f32[1, 2, 2]
%5 = argmin %4 {axis = 2, keepdim = true} : i64[1, 2, 1]
%6 = le %5, %4 : bool[1, 2, 2]
%7 = reshape %6 : bool[1, 4, 1]
%8 = permute %7 {perm = [1, 2, 0]} : bool[4, 1, 1]
%9 = prod %8 {axes = [0, 2], keepdim = false} : i64[1]
%10 = exp %0 : f32[2, M]
%11 = logical_and %9, %10 : bool[2, M]
%12 = permute %11 {perm = [0, 1]} : bool[2, M]
%13 = expand %12 : bool[2, 2, M]
%14 = erf %13 : f32[2, 2, M]
%15 = permute %14 {perm = [0, 2, 1]} : f32[2, M, 2]
output "y" = %15
)"};
  for (const char* text : texts) {
    test::GraphCase c;
    c.graph = parseGraph(text);
    c.label = c.graph.toText();
    const std::vector<std::string> dims = c.graph.dynamicDims();
    checkPlan(c, dims.empty() ? DimBindings{} : DimBindings{{"M", 5}});
    INFO(c.label);
    CHECK_NOTHROW(compiler::compileGraph(c.graph));
  }
}

// Two row groups over other rows (a max over the unit axis of x [1, 7, 1]
// and an argmin over its 7), an output that reads both stored by the
// argmin's group, and a sum of that output: the max's group, which can also
// compute one value per row of it, stored the sum's operand and read the
// argmin while the argmin's group read the max, a cycle of kernels (random
// graphs, session 43). The owner of a value must not be a group that
// another group of its cone already needs.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: an output of two groups and its sum",
          "[compile][plan]") {
  checkTextPlan(R"(kiln.graph v1
%0 = input "x1" : f32[1, 7, 1]
%1 = max %0 {axes = [2], keepdim = false} : f32[1, 7]
%2 = argmin %0 {axis = 1, keepdim = true} : i64[1, 1, 1]
%3 = le %1, %2 : bool[1, 1, 7]
%4 = where %3, %2, %1 : f32[1, 1, 7]
%5 = sum %4 {axes = [0, 1, 2], keepdim = true} : f32[1, 1, 1]
output "y0" = %5
output "y1" = %4
)", {{"x1", {-3, 3}}});
}

// exp(reshape(expand(s))) of a statistic s, read by an output and, through
// a reshape, by another: the reshape's pointwise kernel computes the exp
// itself (before, the output's kernel stored the exp's operand for it and
// read the exp back from it: a cycle of kernels; found by the text form's
// random graphs, seed 44970280, session 44).
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a reshape of a value of a statistic, read twice",
          "[compile][plan]") {
  for (const char* t : {"f32", "f16"}) {
    checkTextPlan(std::string(R"(kiln.graph v1
%0 = input "x" : )") + t + R"([4]
%1 = sum %0 {axes = [0], keepdim = true} : )" + t + R"([1]
%2 = expand %1 : )" + t + R"([2, 3]
%3 = reshape %2 : )" + t + R"([3, 2]
%4 = exp %3 : )" + t + R"([3, 2]
%5 = relu %4 : )" + t + R"([3, 2]
%6 = reshape %4 : )" + t + R"([6, 1]
%7 = neg %6 : )" + t + R"([6, 1]
output "a" = %5
output "b" = %7
)", {{"x", {-1, 1}}});
  }
}

// v = fma(s, expand(s)) of a statistic s, read by an output through a
// slice and by another through a reshape, and a min over a permute of the
// expand: the output's pointwise kernel stores the expand (for the min's
// row kernel), the reshape's operand v gets a pointwise kernel of its own
// over the same shape, and each read the other's value back (a cycle of
// kernels; found by the text form's random graphs, seed 46000924, session
// 45). Now a pointwise kernel computes a value of its own shape that
// another pointwise kernel of that shape stores.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a value of a statistic stored for a reshape, "
          "read by a same-shaped kernel",
          "[compile][plan]") {
  for (const char* t : {"i32", "f32"}) {
    const std::string acc = std::string(t) == "i32" ? "i64" : "f32";
    checkTextPlan(std::string(R"(kiln.graph v1
%0 = input "x0" : )") + t + R"([2]
%1 = prod %0 {axes = [0], keepdim = false} : )" + acc + R"(
%2 = reshape %1 : )" + acc + R"([1, 1, 1]
%3 = expand %2 : )" + acc + R"([2, 1, 3]
%4 = min %3 {axes = [0], keepdim = false} : )" + acc + R"([1, 3]
%5 = const -37.78242874145508 : f32 weak
%6 = fma %2, %3, %5 : f32[2, 1, 3]
%7 = cast %6 : f32[2, 1, 3]
%8 = slice %7 {axis = 2, start = 0, end = 3, step = 1} : f32[2, 1, 3]
%9 = reshape %7 : f32[3, 2]
output "a" = %8
output "b" = %9
output "c" = %4
)", {{"x0", {-3, 3}}});
  }
}

// A softmax over a permute of another softmax's rows, whose max and sum
// the first softmax's row kernel also takes (the permute of [1, 17] to
// [17, 1] lines up with its rows), and a var of the result (random graphs,
// seed 47409175, session 46): a pointwise kernel stored the permute for the
// var's kernel, reading the first softmax from the row kernel, while the
// row kernel read the permute back from it (a cycle of kernels). Now a row
// kernel computes a value whose cone holds its own group. Also with a
// dynamic row count.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: a softmax over a permute of a softmax's rows, "
          "then a var",
          "[compile][plan]") {
  for (const char* rows : {"7", "D0"}) {
    test::GraphCase c;
    const std::string x = std::string("f32[") + rows + ", 17]";
    c.graph = parseGraph(R"(kiln.graph v1
%0 = input "x" : )" + x + R"(
%1 = mul %0, %0 : )" + x + R"(
%2 = sum %1 {axes = [0], keepdim = true} : f32[1, 17]
%3 = max %2 {axes = [1], keepdim = true} : f32[1, 1]
%4 = sub %2, %3 : f32[1, 17]
%5 = exp %4 : f32[1, 17]
%6 = sum %5 {axes = [1], keepdim = true} : f32[1, 1]
%7 = div %5, %6 : f32[1, 17]
%8 = permute %7 {perm = [1, 0]} : f32[17, 1]
%9 = max %8 {axes = [0], keepdim = true} : f32[1, 1]
%10 = sub %8, %9 : f32[17, 1]
%11 = exp %10 : f32[17, 1]
%12 = sum %11 {axes = [0], keepdim = true} : f32[1, 1]
%13 = div %11, %12 : f32[17, 1]
%14 = var %13 {axes = [0, 1], keepdim = false, correction = 0} : f32
output "y" = %14
)");
    c.label = c.graph.toText();
    const DimBindings dims = std::string(rows) == "D0" ? DimBindings{{"D0", 7}} : DimBindings{};
    checkPlan(c, dims);
    INFO(c.label);
    CHECK_NOTHROW(compiler::compileGraph(c.graph));
  }
}

// r = reshape(expand(s)) of a statistic s (a reshape that is not a unit
// reshape: the pointwise kernel of r's shape stores it, reading the expand
// from a kernel of its own), read by an output through e = expand(neg(r)),
// and a max over unit reshapes of e back to r's shape (random graphs, seed
// 47600435, session 47): the kernel of r's shape stored the max's operand,
// reading the unit reshape of e from a kernel of that shape, which read r
// back from it (a cycle of kernels). Now a pointwise kernel computes a view
// or an elementwise value itself where the kernel that would store it reads
// one that this kernel stores. Also in f16 and with a dynamic row count.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: unit reshapes of a stored reshape's expand, "
          "reduced",
          "[compile][plan]") {
  struct V {
    const char* t;
    const char* x;
    const char* axes;
  };
  for (const V& v : {V{"f32", "[1, 2]", "[1]"}, V{"f16", "[1, 2]", "[1]"}, V{"f32", "[D0, 2]", "[0, 1]"}}) {
    const std::string t = v.t;
    const DimBindings dims = std::string(v.x).find("D0") != std::string::npos ? DimBindings{{"D0", 5}} : DimBindings{};
    checkTextPlan(R"(kiln.graph v1
%0 = input "x" : )" + t + v.x + R"(
%1 = sum %0 {axes = )" + v.axes + R"(, keepdim = true} : )" + t + R"([1, 1]
%2 = expand %1 : )" + t + R"([2, 3]
%3 = reshape %2 : )" + t + R"([3, 2]
%4 = neg %3 : )" + t + R"([3, 2]
%5 = expand %4 : )" + t + R"([1, 3, 2]
%6 = reshape %5 : )" + t + R"([3, 1, 2]
%7 = reshape %6 : )" + t + R"([3, 2]
%8 = max %7 {axes = [1], keepdim = false} : )" + t + R"([3]
%9 = exp %5 : )" + t + R"([1, 3, 2]
output "a" = %8
output "b" = %9
)", {{"x", {-1, 1}}}, dims);
  }
}

// Values with no elements (text-form random graphs, seed 48600897, session
// 48): v = expand(slice(s)) of a statistic s, shaped [1, 3, 0], and
// reshape(v) to [0], which broadcasts back against v in where(reshape(v)
// != 0, v + 3, 0). The output's kernel stored v for the reshape's kernel
// and read the reshape from it (a cycle of kernels). Now every value with
// a static dim of 0 is a broadcast 0 before planning, and a reduction over
// one still gives its identity (a sum of zeros, a product of ones).
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: values with no elements, reshaped and reduced",
          "[compile][plan]") {
  for (const char* t : {"f16", "bf16"}) {
    const std::string h = t;
    checkTextPlan(R"(kiln.graph v1
%0 = input "x" : f32[2]
%1 = sum %0 {axes = [0], keepdim = false} : f32
%2 = expand %1 : f32[2, 3]
%3 = reshape %2 : f32[3, 2]
%4 = cast %3 : )" + h + R"([3, 2]
%5 = slice %4 {axis = 1, start = 1, end = 1, step = 1} : )" + h + R"([3, 0]
%6 = expand %5 : )" + h + R"([1, 3, 0]
%7 = reshape %6 : )" + h + R"([0]
%8 = const 0 : i64 weak
%9 = ne %7, %8 : bool[0]
%10 = const 3.0 : f32 weak
%11 = add %6, %10 : )" + h + R"([1, 3, 0]
%12 = where %9, %11, %8 : )" + h + R"([1, 3, 0]
%13 = slice %6 {axis = 0, start = 0, end = 0, step = 1} : )" + h + R"([0, 3, 0]
%14 = cast %13 : f32[0, 3, 0]
%15 = sum %5 {axes = [1], keepdim = false} : )" + h + R"([3]
%16 = prod %14 {axes = [0, 2], keepdim = true} : f32[1, 3, 1]
%17 = add %16, %3 : f32[1, 3, 2]
output "a" = %12
output "b" = %14
output "c" = %15
output "d" = %17
)", {{"x", {-1, 1}}});
  }
}

// var/std over several axes, one of them dynamic: no reshape merges them,
// so the planner takes the law of total variance one axis at a time and
// counts the values for the correction (session 23; before, "cannot be
// compiled yet"). Keepdim or not, corrections 0 to 2, a count of one
// (correction 1: NaN, as torch), and 16-bit inputs.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: var and std over several axes with a dynamic dim",
          "[compile][plan]") {
  struct S {
    Shape shape;
    Axes axes;
    DimBindings dims;
  };
  const std::vector<S> shapes = {{{Dim("B"), Dim(600)}, Axes{0, 1}, {{"B", 37}}},
                                 {{Dim(4), Dim("N"), Dim(48)}, Axes{1, 2}, {{"N", 50}}},
                                 {{Dim(4), Dim("N"), Dim(48)}, Axes{0, 1, 2}, {{"N", 3}}},
                                 {{Dim("B"), Dim(5), Dim("N")}, Axes{0, 2}, {{"B", 6}, {"N", 70}}},
                                 {{Dim("B"), Dim("N")}, Axes{0, 1}, {{"B", 1}, {"N", 1}}}};
  for (DType t : {DType::F32, DType::BF16})
    for (const S& s : shapes)
      for (bool isStd : {false, true})
        for (int64_t correction : {0, 1, 2})
          for (bool keep : {false, true}) {
            test::GraphCase c;
            c.label = test::caseLabel(std::string(isStd ? "std" : "var") + " correction " + std::to_string(correction) +
                                          (keep ? " keepdim" : "") + " over " + std::to_string(s.axes.list.size()) +
                                          " axes",
                                      t, s.shape);
            Tensor x = c.graph.input("x", t, s.shape);
            c.graph.output("y", isStd ? kiln::std(x, s.axes, correction, keep) : var(x, s.axes, correction, keep));
            c.ranges = {{"x", {-0.5, 1}}};
            c.tolScale = 2;
            checkPlan(c, s.dims);
            if (correction != 1 || keep) continue;  // (the same kernels but for the last one's arithmetic)
            compiler::CompiledGraph cg;
            REQUIRE_NOTHROW(cg = compiler::compileGraph(c.graph));
            for (const compiler::CompiledKernel& k : cg.kernels)
              for (const compiler::ResourceReport& r : k.resources) CHECK(r.spillStoreBytes == 0);
          }
}

// Norm gradients: dweight and dbias over static rows as column partials of
// the dx kernel (each part's sum over its rows, then a kernel summing the
// parts), over dynamic rows as a column kernel reading the rows' statistics.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: norm gradients with column partials",
          "[compile][plan][grad]") {
  for (DType t : {DType::F32, DType::BF16})
    for (bool rms : {false, true})
      for (const Shape& s : {Shape{Dim(2048), Dim(64)}, Shape{Dim(1000), Dim(17)}, Shape{Dim("R"), Dim(96)}}) {
        test::GraphCase c;
        c.label = test::caseLabel(rms ? "rmsnorm_backward" : "layernorm_backward", t, s);
        Tensor dy = c.graph.input("dy", t, s), x = c.graph.input("x", t, s);
        Tensor w = c.graph.input("w", t, {s.back()});
        NormGrads r = rms ? rmsnorm_backward(dy, x, w) : layernorm_backward(dy, x, w, c.graph.input("b", t, {s.back()}));
        c.graph.output("dx", r.dx);
        c.graph.output("dw", r.dweight);
        if (r.dbias.valid()) c.graph.output("db", r.dbias);
        c.ranges = {{"x", {-3, 5}}, {"w", {0.5, 1.5}}};
        const double floor = std::sqrt(s[0].isStatic() ? static_cast<double>(s[0].size) : 300.0);
        c.relFloor = {{"dx", 1}, {"dw", floor}, {"db", floor}};
        const bool fused = s[0].isStatic();
        const compiler::Plan plan = compiler::planGraph(c.graph);
        INFO(plan.explain);
        if (fused) CHECK(plan.explain.find("column sum's partials") != std::string::npos);
        checkPlan(c, s[0].isStatic() ? DimBindings{} : DimBindings{{"R", 300}}, 2);
      }
}

// Random graphs (tests/random_graphs.h), fresh each run: the plan, kernel by
// kernel, matches the graph on random inputs, and the first ones' kernels
// compile to spill-free sm_90 cubins (kiln::Error from a graph the DSL took
// fails: any graph compiles). KILN_RANDOM_SEED=S starts from seed S,
// KILN_RANDOM_GRAPHS=N draws N graphs (default 150), KILN_RANDOM_COMPILED=M
// compiles the first M of them (default 40).
// Graphs with matmuls among other ops: the plan's stages (a matmul and its
// epilogue a kernel each, the rest planned around them) pass their values
// through the workspace in the right order.
TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: graphs with matmuls", "[compile][plan]") {
  for (DType t : {DType::F32, DType::BF16})
    for (const test::MatmulGraphCase& m : test::matmulGraphCases(t))
      for (bool rowSoftmax : {false, true}) {
        INFO(m.c.label << (rowSoftmax ? ", a softmax over a matmul's rows in the matmul's kernel" : ""));
        const compiler::Plan plan = compiler::planGraph(m.c.graph, {.matmulRowSoftmax = rowSoftmax});
        INFO(plan.explain);
        CHECK(plan.kernels.size() == m.kernelsFor(t, rowSoftmax));
        if (std::getenv("KILN_PRINT_PLANS")) std::printf("%s\n%s\n", m.c.label.c_str(), plan.explain.c_str());
        checkPlan(m.c, m.dims, 1, {.matmulRowSoftmax = rowSoftmax});
      }
}

TEST_CASE("plans evaluated kernel by kernel on the CPU match the graph: random graphs, which also compile",
          "[compile][plan][random]") {
  const char* seedEnv = std::getenv("KILN_RANDOM_SEED");
  const char* countEnv = std::getenv("KILN_RANDOM_GRAPHS");
  const uint64_t first = seedEnv ? std::strtoull(seedEnv, nullptr, 10) : test::freshSeed() % 1000000000;
  const int count = countEnv ? std::atoi(countEnv) : 150;
  const char* compiledEnv = std::getenv("KILN_RANDOM_COMPILED");
  const int compiled = compiledEnv ? std::atoi(compiledEnv) : 40;
  int withMatmul = 0, withRowSoftmax = 0;
  std::string rowSeeds;  // (the first ten, for the GPU's random test)
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    test::RandomGraph r = test::randomGraph(seed);
    INFO("random graph, seed " << seed << " (KILN_RANDOM_SEED=" << seed
                               << " KILN_RANDOM_GRAPHS=1 draws it again):\n"
                               << r.description << r.graph.toText());
    test::GraphCase c;
    c.label = "random graph " + std::to_string(seed);
    c.graph = r.graph;
    c.relFloor = r.relFloor;
    try {
      checkPlan(c, r.dims);
      // With a softmax over a Hopper matmul's rows in the matmul's kernel
      // (what an sm_90 compile plans).
      checkPlan(c, r.dims, 1, {.matmulRowSoftmax = true});
      for (const compiler::KernelPlan& k : compiler::planGraph(r.graph).kernels)
        if (k.kind == compiler::KernelPlan::Kind::Matmul) {
          ++withMatmul;
          break;
        }
      const bool rowSoftmax =
          compiler::planGraph(r.graph, {.matmulRowSoftmax = true}).explain.find("softmax over its rows") !=
          std::string::npos;
      if (rowSoftmax && ++withRowSoftmax <= 10) rowSeeds += " " + std::to_string(seed);
      if (i >= compiled) continue;
      const compiler::CompiledGraph cg = compiler::compileGraph(r.graph, {.matmulRowSoftmax = rowSoftmax});
      for (const compiler::CompiledKernel& k : cg.kernels) {
        INFO("kernel " << k.name << " (schedule " << k.schedule << ", config " << k.config << ")");
        CHECK(!k.cubin.empty());
        for (const compiler::ResourceReport& rr : k.resources) {
          INFO(rr.kernel << ": " << rr.registers << " registers");
          CHECK(rr.spillStoreBytes == 0);
          CHECK(rr.spillLoadBytes == 0);
        }
      }
    } catch (const Error& e) {
      FAIL_CHECK("kiln::Error: " << e.what());
    }
  }
  std::printf("  %d random graphs from seed %llu, %d with a matmul, %d with a softmax in a matmul's kernel%s%s\n",
              count, static_cast<unsigned long long>(first), withMatmul, withRowSoftmax,
              rowSeeds.empty() ? "" : " (seeds", rowSeeds.empty() ? "" : (rowSeeds + ")").c_str());
}
