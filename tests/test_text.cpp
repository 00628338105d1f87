// The graph text form: round trips of every op, canonical printing, a
// property test over random graphs, and parse errors with their positions.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "../compiler/src/planner.h"
#include "kiln/dsl/graph.h"
#include "kiln/dsl/ops.h"
#include "kiln/dsl/text.h"
#include "kiln/kiln.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

std::vector<Op> opsOfClass(OpClass c) {
  std::vector<Op> out;
  for (int i = 0; i < kNumOps; ++i)
    if (opClass(static_cast<Op>(i)) == c) out.push_back(static_cast<Op>(i));
  return out;
}

// Everything a node means, written independently of the printer, with
// operands named by their canonical position.
std::string describeNode(const Node& n, const std::vector<int>& number) {
  std::string s = std::string(opName(n.op)) + " " + std::string(dtypeName(n.dtype)) +
                  shapeToString(n.shape) + (n.weak ? " weak" : "") + " name=" + n.name;
  if (std::isnan(n.fvalue)) {
    s += " f=nan";
  } else {
    s += " f=" + std::to_string(std::bit_cast<uint64_t>(n.fvalue));
  }
  s += " i=" + std::to_string(n.ivalue) + " axes=[";
  for (int64_t a : n.axes) s += std::to_string(a) + ",";
  s += "] axis=" + std::to_string(n.axis) + " keepdim=" + std::to_string(n.keepdim) +
       " correction=" + std::to_string(n.correction) + " trans=" + std::to_string(n.transA) +
       std::to_string(n.transB) + " slice=" + std::to_string(n.start) + ":" +
       std::to_string(n.end) + ":" + std::to_string(n.step) + " inputs=";
  for (int in : n.inputs) s += "%" + std::to_string(number.at(in)) + ",";
  return s;
}

std::vector<std::string> describeGraph(const Graph& g) {
  std::vector<int> order = g.canonicalOrder();
  std::vector<int> number(g.numNodes(), -1);
  for (size_t i = 0; i < order.size(); ++i) number[order[i]] = static_cast<int>(i);
  std::vector<std::string> out;
  for (int id : order) out.push_back(describeNode(g.node(id), number));
  for (const GraphOutput& o : g.outputs())
    out.push_back("output " + o.name + " = %" + std::to_string(number[o.node]));
  return out;
}

// Prints, parses, prints again: both texts and both graphs must agree.
Graph requireRoundTrip(const Graph& g) {
  std::string text = printGraph(g);
  Graph parsed = parseGraph(text);
  REQUIRE(printGraph(parsed) == text);
  REQUIRE(describeGraph(parsed) == describeGraph(g));
  return parsed;
}

std::string parseError(const std::string& text) {
  try {
    parseGraph(text, "t.kiln");
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected a parse error for:\n" << text);
  return {};
}

const std::string kHeader = "kiln.graph v1\n";

}  // namespace

// ------------------------------------------------------------ round trips

TEST_CASE("every unary op round-trips through the text form", "[text]") {
  Op op = GENERATE(from_range(opsOfClass(OpClass::Unary)));
  DType dtype = GENERATE(DType::F32, DType::BF16, DType::I32);
  Graph g;
  Tensor x = g.input("x", dtype, {"N", 3});
  g.output("y", unary(op, x));
  Graph parsed = requireRoundTrip(g);
  CHECK_THAT(printGraph(g), Contains("%1 = " + std::string(opName(op)) + " %0 : "));
  CHECK(parsed.node(1).op == op);
}

TEST_CASE("every binary op round-trips, with tensors and literals on either side", "[text]") {
  Op op = GENERATE(from_range(opsOfClass(OpClass::Binary)));
  bool logical = op == Op::LogicalAnd || op == Op::LogicalOr;
  Graph g;
  Tensor a = g.input("a", logical ? DType::Bool : DType::BF16, {4, 1});
  Tensor b = g.input("b", logical ? DType::Bool : DType::F32, {"N"});
  g.output("tt", binary(op, a, b));
  if (logical) {
    g.output("tl", binary(op, a, true));
    g.output("lt", binary(op, false, b));
  } else {
    g.output("tl", binary(op, a, 2.5));
    g.output("lt", binary(op, int64_t{3}, b));
  }
  requireRoundTrip(g);
}

TEST_CASE("where, fma and cast round-trip", "[text]") {
  Graph g;
  Tensor c = g.input("c", DType::Bool, {"N", 1});
  Tensor x = g.input("x", DType::F16, {"N", 8});
  Tensor s = g.scalar("s", DType::F32);
  g.output("w", where(c, x, 0.0));
  g.output("f", fma(x, s, x));
  g.output("c16", cast(x, DType::BF16));
  g.output("ci", cast(c, DType::I32));
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains("where %0, %1, %3 : f16[N, 8]"));
  CHECK_THAT(text, Contains("scalar \"s\" : f32 weak"));
  CHECK_THAT(text, Contains("cast %1 : bf16[N, 8]"));
}

TEST_CASE("iota round-trips with its axis and dtype", "[text]") {
  int64_t axis = GENERATE(0, 1, -1);
  DType dtype = GENERATE(DType::I32, DType::I64, DType::F32);
  Graph g;
  Tensor i = iota(g, {"N", 5}, axis, dtype);
  g.output("i", i);
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains("iota {axis = " + std::to_string(axis < 0 ? axis + 2 : axis) + "} : " +
                            std::string(dtypeName(dtype)) + "[N, 5]"));
}

TEST_CASE("every reduction round-trips with its axes, keepdim and correction", "[text]") {
  Op op = GENERATE(Op::Sum, Op::Mean, Op::Max, Op::Min, Op::Prod, Op::Var, Op::Std);
  bool keepdim = GENERATE(false, true);
  Axes axes = GENERATE(Axes{}, Axes{1}, Axes{0, -1});
  int64_t correction = GENERATE(0, 1, 2);
  Graph g;
  Tensor x = g.input("x", DType::F32, {"B", 4, 6});
  g.output("r", reduce(op, x, axes, keepdim, correction));
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains(std::string("keepdim = ") + (keepdim ? "true" : "false")));
  if (op == Op::Var || op == Op::Std)
    CHECK_THAT(text, Contains("correction = " + std::to_string(correction)));
  else
    CHECK_THAT(text, !Contains("correction"));
}

TEST_CASE("argmax and argmin round-trip with their one axis", "[text]") {
  Op op = GENERATE(Op::ArgMax, Op::ArgMin);
  bool keepdim = GENERATE(false, true);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"B", 7});
  Tensor r = op == Op::ArgMax ? argmax(x, -1, keepdim) : argmin(x, -1, keepdim);
  g.output("r", r);
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains(std::string(opName(op)) + " %0 {axis = 1, keepdim = " +
                            (keepdim ? "true" : "false") + "} : i64[B" + (keepdim ? ", 1]" : "]")));
}

TEST_CASE("matmul round-trips with either operand transposed", "[text]") {
  bool transA = GENERATE(false, true);
  bool transB = GENERATE(false, true);
  Graph g;
  Shape aShape = transA ? Shape{"B", 16, 8} : Shape{"B", 8, 16};
  Shape bShape = transB ? Shape{1, 32, 16} : Shape{1, 16, 32};
  Tensor a = g.input("a", DType::BF16, aShape);
  Tensor b = g.input("b", DType::BF16, bShape);
  g.output("c", matmul(a, b, {transA, transB}));
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains(std::string("{transA = ") + (transA ? "true" : "false") +
                            ", transB = " + (transB ? "true" : "false") + "} : bf16[B, 8, 32]"));
}

TEST_CASE("views round-trip: reshape, expand, permute and slice", "[text]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 4, 6});
  g.output("r", reshape(x, {"N", -1}));
  g.output("e", expand(reshape(x, {"N", 1, 4, 6}), {"N", 3, 4, 6}));
  g.output("p", permute(x, {2, 0, 1}));
  g.output("t", transpose(x));
  g.output("s", slice(x, -1, 1, 100, 2));
  g.output("z", slice(x, 1, 3, 1));  // empty slice
  std::string text = printGraph(requireRoundTrip(g));
  CHECK_THAT(text, Contains("reshape %0 : f32[N, 24]"));
  CHECK_THAT(text, Contains("expand %2 : f32[N, 3, 4, 6]"));
  CHECK_THAT(text, Contains("permute %0 {perm = [2, 0, 1]} : f32[6, N, 4]"));
  CHECK_THAT(text, Contains("slice %0 {axis = 2, start = 1, end = 6, step = 2} : f32[N, 4, 3]"));
  CHECK_THAT(text, Contains("{axis = 1, start = 3, end = 3, step = 1} : f32[N, 0, 6]"));
}

TEST_CASE("float constants round-trip bit for bit, special values included", "[text]") {
  double value = GENERATE(0.0, -0.0, 0.1, -2.0, 1e300, 5e-324, 123456789.0, 1e21, 1.0 / 3,
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN());
  bool weak = GENERATE(false, true);
  Graph g;
  Tensor x = g.input("x", DType::F32, {2});
  g.output("y", add(x, makeConstant(g, value, 0, DType::F32, weak)));
  Graph parsed = requireRoundTrip(g);
  const Node& c = parsed.node(parsed.canonicalOrder()[1]);
  REQUIRE(c.op == Op::Constant);
  CHECK(c.weak == weak);
  double expected = roundToDType(value, DType::F32);
  if (std::isnan(expected)) {
    CHECK(std::isnan(c.fvalue));
  } else {
    CHECK(std::bit_cast<uint64_t>(c.fvalue) == std::bit_cast<uint64_t>(expected));
  }
}

TEST_CASE("constants print as recognizable literals of their dtype", "[text]") {
  struct Case {
    double f;
    int64_t i;
    DType dtype;
    std::string literal;
  };
  Case c = GENERATE(Case{2.0, 0, DType::F32, "const 2.0 : f32"},
                    Case{-0.0, 0, DType::BF16, "const -0.0 : bf16"},
                    Case{0.5, 0, DType::F16, "const 0.5 : f16"},
                    Case{1e30, 0, DType::F32, "const 1.0000000150474662e+30 : f32"},
                    Case{std::numeric_limits<double>::infinity(), 0, DType::F32, "const inf : f32"},
                    Case{-std::numeric_limits<double>::infinity(), 0, DType::F16, "const -inf : f16"},
                    Case{std::numeric_limits<double>::quiet_NaN(), 0, DType::F32, "const nan : f32"},
                    Case{0, -7, DType::I32, "const -7 : i32"},
                    Case{0, std::numeric_limits<int64_t>::min(), DType::I64,
                         "const -9223372036854775808 : i64"},
                    Case{0, 1, DType::Bool, "const true : bool"},
                    Case{0, 0, DType::Bool, "const false : bool"});
  Graph g;
  g.output("c", makeConstant(g, c.f, c.i, c.dtype, false));
  std::string text = printGraph(requireRoundTrip(g));
  CHECK(text == kHeader + "%0 = " + c.literal + "\noutput \"c\" = %0\n");
}

TEST_CASE("an integer literal in text is accepted for a float constant and printed as a float",
          "[text]") {
  Graph g = parseGraph(kHeader + "%0 = const 3 : f32\n%1 = const -2.5e-1 : f32 weak\n"
                                 "%2 = add %0, %1 : f32\noutput \"y\" = %2\n");
  CHECK(printGraph(g) == kHeader + "%0 = const 3.0 : f32\n%1 = const -0.25 : f32 weak\n"
                                   "%2 = add %0, %1 : f32\noutput \"y\" = %2\n");
}

TEST_CASE("several outputs, one node as two outputs, and dynamic dims round-trip", "[text]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"batch", "seq", 64});
  Tensor lr = g.scalar("lr", DType::F32);
  Tensor step = g.scalar("step", DType::I64);
  Tensor y = x * lr;
  g.output("y", y);
  g.output("y_again", y);
  g.output("n", cast(step, DType::F32) + 1.0);
  g.output("x_plus", x + 0);
  Graph parsed = requireRoundTrip(g);
  REQUIRE(parsed.outputs().size() == 4);
  CHECK(parsed.outputs()[0].node == parsed.outputs()[1].node);
  CHECK(parsed.dynamicDims() == std::vector<std::string>{"batch", "seq"});
  CHECK(parsed.node(parsed.params()[2]).dtype == DType::I64);
}

TEST_CASE("a graph with parameters and no outputs, or nothing at all, round-trips", "[text]") {
  Graph empty;
  CHECK(printGraph(empty) == kHeader);
  requireRoundTrip(empty);
  Graph g;
  g.input("unused", DType::I32, {3});
  CHECK(printGraph(g) == kHeader + "%0 = input \"unused\" : i32[3]\n");
  requireRoundTrip(g);
}

TEST_CASE("canonical text parses back to the identical text", "[text]") {
  const std::string text = kHeader +
                           "%0 = input \"x\" : bf16[N, 4096]\n"
                           "%1 = input \"b\" : bf16[4096]\n"
                           "%2 = scalar \"alpha\" : f32 weak\n"
                           "%3 = add %0, %1 : bf16[N, 4096]\n"
                           "%4 = const 0.5 : f32 weak\n"
                           "%5 = mul %3, %4 : bf16[N, 4096]\n"
                           "%6 = mul %5, %2 : bf16[N, 4096]\n"
                           "%7 = cast %6 : f32[N, 4096]\n"
                           "%8 = sum %7 {axes = [1], keepdim = true} : f32[N, 1]\n"
                           "output \"y\" = %6\n"
                           "output \"s\" = %8\n";
  Graph g = parseGraph(text);
  CHECK(printGraph(g) == text);
  CHECK(g.toText() == text);
}

TEST_CASE("comments, blank lines, spacing and attribute order do not matter to the parser",
          "[text]") {
  const std::string messy =
      "# a graph written by hand\n"
      "\n"
      "   kiln.graph   v1   # header\n"
      "%0=input \"x\":f32[N,4]\r\n"
      "\t%1 = sum %0 {keepdim=false,axes=[-1]} : f32[N]   # trailing comment\n"
      "\n"
      "output \"y\"=%1\n";
  CHECK(printGraph(parseGraph(messy)) == kHeader +
                                             "%0 = input \"x\" : f32[N, 4]\n"
                                             "%1 = sum %0 {axes = [1], keepdim = false} : f32[N]\n"
                                             "output \"y\" = %1\n");
}

TEST_CASE("omitted optional attributes take the DSL's defaults", "[text]") {
  Graph g = parseGraph(kHeader +
                       "%0 = input \"x\" : f32[3, 5]\n"
                       "%1 = var %0 : f32\n"
                       "%2 = matmul %0, %0 {transB = true} : f32[3, 3]\n"
                       "%3 = slice %0 {axis = 1, start = 1, end = 4} : f32[3, 3]\n"
                       "output \"v\" = %1\noutput \"m\" = %2\noutput \"s\" = %3\n");
  std::string text = printGraph(g);
  CHECK_THAT(text, Contains("var %0 {axes = [0, 1], keepdim = false, correction = 1} : f32"));
  CHECK_THAT(text, Contains("{transA = false, transB = true}"));
  CHECK_THAT(text, Contains("{axis = 1, start = 1, end = 4, step = 1}"));
}

// ------------------------------------------------------------ canonical form

TEST_CASE("graphs built in different orders of unrelated nodes print identical text", "[text]") {
  auto build = [](bool expFirst) {
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N", 8});
    Tensor y = g.input("y", DType::F32, {8});
    Tensor a, b;
    if (expFirst) {
      a = exp(x);
      b = log(y) * 2.0;
    } else {
      b = log(y) * 2.0;
      a = exp(x);
    }
    g.output("z", a + b);
    g.output("m", max(a, 1));
    return g;
  };
  Graph g1 = build(true);
  Graph g2 = build(false);
  CHECK(g1.node(2).op != g2.node(2).op);  // the node ids really differ
  CHECK(printGraph(g1) == printGraph(g2));
  CHECK(g1 == g2);
}

TEST_CASE("dead nodes are not printed", "[text]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4});
  Tensor dead = sin(x) * 3.0;
  (void)dead;
  g.output("y", cos(x));
  std::string text = printGraph(g);
  CHECK_THAT(text, !Contains("sin"));
  CHECK_THAT(text, !Contains("const"));
  CHECK(text == kHeader + "%0 = input \"x\" : f32[4]\n%1 = cos %0 : f32[4]\noutput \"y\" = %1\n");
}

TEST_CASE("parameter declaration order is part of the text even when unused", "[text]") {
  Graph g1, g2;
  Tensor a1 = g1.input("a", DType::F32, {4});
  g1.input("b", DType::F32, {4});
  g1.output("y", exp(a1));
  g2.input("b", DType::F32, {4});
  Tensor a2 = g2.input("a", DType::F32, {4});
  g2.output("y", exp(a2));
  CHECK(printGraph(g1) != printGraph(g2));
  CHECK_THAT(printGraph(g1), Contains("%1 = input \"b\""));
}

// ------------------------------------------------------------ property test

namespace {

// Builds random valid graphs through the public DSL. Each step tries one
// random op on random operands; a combination the DSL rejects is skipped.
class RandomGraphBuilder {
 public:
  explicit RandomGraphBuilder(uint64_t seed) : rng_(seed) {}

  Graph build() {
    int scalars = below(3);
    for (int i = 0; i < scalars; ++i) {
      static const DType kScalarTypes[] = {DType::F32, DType::I32, DType::I64};
      pool_.push_back(g_.scalar("s" + std::to_string(i), kScalarTypes[below(3)]));
    }
    int inputs = 1 + below(3);
    for (int i = 0; i < inputs; ++i) addInput();
    int steps = 8 + below(25);
    for (int attempts = 0; steps > 0 && attempts < 500; ++attempts) {
      try {
        if (step()) --steps;
      } catch (const Error&) {
        // The DSL rejected this combination; try another.
      }
    }
    // Most nodes nobody uses become outputs (so most of the graph is live);
    // the rest stay dead. One node is sometimes output twice.
    std::vector<bool> used(g_.numNodes(), false);
    for (int id = 0; id < g_.numNodes(); ++id)
      for (int in : g_.node(id).inputs) used[in] = true;
    int outputs = 0;
    for (int id = 0; id < g_.numNodes(); ++id) {
      Op op = g_.node(id).op;
      if (used[id] || op == Op::Input || op == Op::Scalar || below(4) == 0) continue;
      g_.output("out" + std::to_string(outputs++), g_.tensor(id));
    }
    if (outputs == 0 || coin()) g_.output("out" + std::to_string(outputs++), pool_.back());
    return g_;
  }

 private:
  int below(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  bool coin() { return below(2) == 1; }
  DType anyDType() { return kAllDTypes[below(6)]; }
  Dim anyDim() {
    static const Dim kDims[] = {1, 1, 2, 3, 4, "N", "M"};
    return kDims[below(7)];
  }
  Shape anyShape(int minRank = 0) {
    Shape s;
    int rank = minRank + below(4 - minRank);
    for (int i = 0; i < rank; ++i) s.push_back(anyDim());
    return s;
  }
  int64_t anyAxis(int rank) { return rank == 0 ? 0 : below(2 * rank) - rank; }  // [-rank, rank)
  double anyFloat() {
    static const double kValues[] = {0.5, -0.0, 3.0, 1e-7, 1e30, -2.25,
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity(),
                                     std::numeric_limits<double>::quiet_NaN()};
    if (coin()) return std::uniform_real_distribution<double>(-100, 100)(rng_);
    return kValues[below(9)];
  }
  // Recent nodes are likelier, so chains grow deep and stay live.
  Tensor pick() {
    int n = static_cast<int>(pool_.size());
    if (coin()) return pool_[n - 1 - below(std::min(n, 3))];
    return pool_[below(n)];
  }
  Operand anyOperand() {
    switch (below(8)) {
      case 0: return anyFloat();
      case 1: return static_cast<long long>(below(7) - 3);
      case 2: return coin();
      default: return pick();
    }
  }
  void addInput() {
    pool_.push_back(g_.input("x" + std::to_string(numInputs_++), anyDType(), anyShape()));
  }

  bool step() {
    static const std::vector<Op> kUnary = opsOfClass(OpClass::Unary);
    static const std::vector<Op> kBinary = opsOfClass(OpClass::Binary);
    static const Op kReductions[] = {Op::Sum, Op::Mean, Op::Max, Op::Min,
                                     Op::Prod, Op::Var, Op::Std};
    Tensor t;
    switch (below(16)) {
      case 0: case 1:
        t = unary(kUnary[below(static_cast<int>(kUnary.size()))], pick());
        break;
      case 2: case 3: {
        Operand a = pick(), b = anyOperand();
        if (coin()) std::swap(a, b);
        t = binary(kBinary[below(static_cast<int>(kBinary.size()))], a, b);
        break;
      }
      case 4: {
        Tensor cond = pick();
        if (cond.dtype() != DType::Bool) {
          cond = ne(cond, 0);
          pool_.push_back(cond);
        }
        t = where(cond, anyOperand(), anyOperand());
        break;
      }
      case 5: t = fma(pick(), anyOperand(), anyOperand()); break;
      case 6: t = cast(pick(), anyDType()); break;
      case 7: {
        Shape s = anyShape(1);
        static const DType kIotaTypes[] = {DType::I32, DType::I64, DType::F32, DType::BF16};
        t = iota(g_, s, anyAxis(static_cast<int>(s.size())), kIotaTypes[below(4)]);
        break;
      }
      case 8: {
        Tensor x = pick();
        std::vector<int64_t> axes;
        for (int i = 0; i < x.rank(); ++i)
          if (coin()) axes.push_back(coin() ? i : i - x.rank());
        t = reduce(kReductions[below(7)], x, axes, coin(), below(3));
        break;
      }
      case 9: {
        Tensor x = pick();
        bool keep = coin();
        t = coin() ? argmax(x, anyAxis(x.rank()), keep) : argmin(x, anyAxis(x.rank()), keep);
        break;
      }
      case 10: {
        Tensor a = pick();
        if (!isFloat(a.dtype()) || a.rank() < 2) {
          a = cast(reshape(expand(a, {2, 3}), {3, 2}), DType::F16);
          pool_.push_back(a);
        }
        Tensor b = coin() ? a : pick();
        t = matmul(a, b, {coin(), coin()});
        break;
      }
      case 11: t = randomReshape(pick()); break;
      case 12: t = randomExpand(pick()); break;
      case 13: {
        Tensor x = pick();
        std::vector<int64_t> perm(x.rank());
        for (int i = 0; i < x.rank(); ++i) perm[i] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        if (!perm.empty() && coin()) perm[0] -= x.rank();
        t = permute(x, perm);
        break;
      }
      case 14: {
        Tensor x = pick();
        if (x.rank() == 0) return false;
        int64_t axis = anyAxis(x.rank());
        const Dim& d = x.shape()[(axis + x.rank()) % x.rank()];
        int64_t size = d.isStatic() ? d.size : 4;
        int64_t start = below(static_cast<int>(2 * size + 3)) - size - 1;
        int64_t end = below(static_cast<int>(2 * size + 3)) - size - 1;
        t = slice(x, axis, start, end, 1 + below(3));
        break;
      }
      default:
        if (coin()) {
          t = makeConstant(g_, anyFloat(), below(2001) - 1000, anyDType(), coin());
        } else if (coin()) {
          t = g_.constant(anyFloat(), anyDType());
        } else {
          addInput();  // parameters declared late still print first
          return true;
        }
        break;
    }
    pool_.push_back(t);
    return true;
  }

  Tensor randomReshape(const Tensor& x) {
    Shape target;
    int64_t count = 1;
    for (const Dim& d : x.shape()) {
      if (d.isDynamic()) target.push_back(d);
      else count *= d.size;
    }
    std::vector<int64_t> divisors;
    for (int64_t k = 1; k <= count; ++k)
      if (count % k == 0) divisors.push_back(k);
    int64_t k = divisors.empty() ? 0 : divisors[below(static_cast<int>(divisors.size()))];
    target.push_back(k);
    if (k != 0) target.push_back(count / k);
    if (coin()) target.push_back(1);
    std::shuffle(target.begin(), target.end(), rng_);
    for (Dim& d : target)
      if (d.isStatic() && coin()) {
        d = Dim(int64_t{-1});
        break;
      }
    return reshape(x, target);
  }

  Tensor randomExpand(const Tensor& x) {
    Shape target;
    if (coin()) target.push_back(anyDim());
    for (const Dim& d : x.shape()) {
      if (d.isStatic() && d.size == 1) target.push_back(anyDim());
      else target.push_back(coin() ? d : Dim(int64_t{-1}));
    }
    return expand(x, target);
  }

  std::mt19937_64 rng_;
  Graph g_;
  std::vector<Tensor> pool_;
  int numInputs_ = 0;
};

}  // namespace

TEST_CASE("random graphs round-trip exactly through the text form", "[text]") {
  uint64_t seed = GENERATE(range<uint64_t>(1, 51));
  CAPTURE(seed);
  Graph g = RandomGraphBuilder(seed).build();
  std::string text = printGraph(g);
  CAPTURE(text);
  Graph parsed = parseGraph(text);
  REQUIRE(printGraph(parsed) == text);
  REQUIRE(describeGraph(parsed) == describeGraph(g));
  REQUIRE(parsed == g);
}

TEST_CASE("the random graph builder reaches every op and dtype", "[text]") {
  std::set<Op> ops;
  std::set<DType> dtypes;
  bool weakConst = false, dynamic = false;
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Graph g = RandomGraphBuilder(seed).build();
    for (int id : g.canonicalOrder()) {
      const Node& n = g.node(id);
      ops.insert(n.op);
      dtypes.insert(n.dtype);
      weakConst |= n.op == Op::Constant && n.weak;
      dynamic |= !isStaticShape(n.shape);
    }
  }
  std::vector<std::string> missing;
  for (int i = 0; i < kNumOps; ++i)
    if (!ops.count(static_cast<Op>(i))) missing.emplace_back(opName(static_cast<Op>(i)));
  CAPTURE(missing);
  CHECK(missing.empty());
  CHECK(dtypes.size() == std::size(kAllDTypes));
  CHECK(weakConst);
  CHECK(dynamic);
}

// ------------------------------------------------------------ parse errors

TEST_CASE("parse errors give line:column and what was expected", "[text]") {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::string x = kHeader + "%0 = input \"x\" : f32[4]\n";
  Case c = GENERATE_COPY(
      Case{"", "t.kiln:1:1: expected header 'kiln.graph v1', found end of input"},
      Case{"# only a comment\n\n", "t.kiln:1:1: expected header 'kiln.graph v1', found end of input"},
      Case{"%0 = input \"x\" : f32\n", "t.kiln:1:1: expected header 'kiln.graph v1', found '%0'"},
      Case{"kiln.graph v2\n", "t.kiln:1:12: expected graph text version 'v1', found 'v2'"},
      Case{"kiln.graph\n", "t.kiln:1:11: expected graph text version 'v1', found end of line"},
      Case{"kiln.graph v1 extra\n", "t.kiln:1:15: expected end of line after the header, found 'extra'"},
      Case{x + "%1 = frobnicate %0 : f32[4]\n", "t.kiln:3:6: expected an op name, found 'frobnicate'"},
      Case{kHeader + "%0 = input \"x\" : f33[4]\n",
           "t.kiln:2:18: expected a dtype (bool, i32, i64, f16, bf16, f32), found 'f33'"},
      Case{x + "%1 = exp %9 : f32[4]\n", "t.kiln:3:10: expected an earlier node (%0 to %0), found '%9'"},
      Case{x + "%1 = exp %1 : f32[4]\n", "t.kiln:3:10: expected an earlier node (%0 to %0), found '%1'"},
      Case{x + "%2 = exp %0 : f32[4]\n", "t.kiln:3:1: expected node number '%1', found '%2'"},
      Case{kHeader + "%1 = input \"x\" : f32\n", "t.kiln:2:1: expected node number '%0', found '%1'"},
      Case{x + "%x = exp %0 : f32[4]\n", "t.kiln:3:1: expected a node number like '%0', found '%x'"},
      Case{x + "%1 = sum %0 {axis = 0} : f32\n",
           "t.kiln:3:14: expected an attribute of sum (axes, keepdim), found 'axis'"},
      Case{x + "%1 = sum %0 {keepdim = 1} : f32\n",
           "t.kiln:3:24: expected true or false for 'keepdim', found '1'"},
      Case{x + "%1 = sum %0 {axes = 0} : f32\n",
           "t.kiln:3:21: expected a list like [0, 1] for 'axes', found '0'"},
      Case{x + "%1 = sum %0 {axes = [0], axes = [0]} : f32\n",
           "t.kiln:3:26: expected a new attribute (each at most once), found 'axes'"},
      Case{x + "%1 = sum %0 {axes = [0} : f32\n", "t.kiln:3:23: expected ',' or ']', found '}'"},
      Case{x + "%1 = exp %0 {axis = 0} : f32[4]\n",
           "t.kiln:3:13: expected ':' (exp takes no attributes), found '{'"},
      Case{x + "%1 = permute %0 : f32[4]\n", "t.kiln:3:6: expected attribute 'perm' for permute, found none"},
      Case{x + "%1 = add %0 : f32[4]\n", "t.kiln:3:10: expected 2 operands for add, found 1"},
      Case{x + "%1 = exp : f32[4]\n", "t.kiln:3:10: expected 1 operand for exp, found 0"},
      Case{x + "%1 = exp %0 f32[4]\n", "t.kiln:3:13: expected ':', found 'f32'"},
      Case{x + "%1 = exp %0 : f16[4]\n",
           "t.kiln:3:15: expected 'f32[4]' (the type the DSL infers), found 'f16[4]'"},
      Case{x + "%1 = exp %0 : f32[5]\n",
           "t.kiln:3:15: expected 'f32[4]' (the type the DSL infers), found 'f32[5]'"},
      Case{kHeader + "%0 = scalar \"s\" : f32\n",
           "t.kiln:2:19: expected 'f32 weak' (the type the DSL infers), found 'f32'"},
      Case{x + "%1 = exp %0 : f32[4] weak\n",
           "t.kiln:3:15: expected 'f32[4]' (the type the DSL infers), found 'f32[4] weak'"},
      Case{x + "%1 = exp %0 : f32[4,]\n", "t.kiln:3:21: expected a dimension (a size >= 0 or a name), found ']'"},
      Case{x + "%1 = exp %0 : f32[-4]\n", "t.kiln:3:19: expected a dimension (a size >= 0 or a name), found '-4'"},
      Case{kHeader + "%0 = const 2 : bool\n", "t.kiln:2:12: expected true or false for a bool constant, found '2'"},
      Case{kHeader + "%0 = const 1.5 : i32\n", "t.kiln:2:12: expected an integer for an i32 constant, found '1.5'"},
      Case{kHeader + "%0 = const fast : f32\n",
           "t.kiln:2:12: expected a number (decimal, 'inf', '-inf' or 'nan'), found 'fast'"},
      Case{kHeader + "%0 = input x : f32\n", "t.kiln:2:12: expected a parameter name in quotes, found 'x'"},
      Case{kHeader + "%0 = input \"x : f32\n", "t.kiln:2:20: expected closing '\"', found end of line"},
      Case{x + "output y = %0\n", "t.kiln:3:8: expected an output name in quotes, found 'y'"},
      Case{x + "output \"y\" = %0 extra\n", "t.kiln:3:17: expected end of line after the output, found 'extra'"},
      Case{x + "output \"y\" = %3\n", "t.kiln:3:14: expected an earlier node (%0 to %0), found '%3'"},
      Case{x + "exp %0\n", "t.kiln:3:1: expected a node '%1 = ...' or 'output', found 'exp'"},
      Case{x + "%1 = exp %0 : f32[4] $\n", "t.kiln:3:22: expected a token, found '$'"});
  CAPTURE(c.text);
  CHECK(parseError(c.text) == c.message);
}

TEST_CASE("a DSL validation error inside text is reported at the op with the DSL's message",
          "[text]") {
  std::string text = kHeader +
                     "# two inputs that do not broadcast\n"
                     "%0 = input \"a\" : f32[4]\n"
                     "%1 = input \"b\" : f32[5]\n"
                     "%2 = add %0, %1 : f32[4]\n";
  std::string msg = parseError(text);
  CHECK_THAT(msg, Catch::Matchers::StartsWith("t.kiln:5:6: kiln: add(f32[4], f32[5]): cannot broadcast"));
  CHECK_THAT(msg, Contains("expected equal dims or 1"));
  CHECK_THAT(msg, !Contains("text_parse.cpp"));
}

TEST_CASE("DSL rejections of parameters and outputs in text carry their position", "[text]") {
  struct Case {
    std::string text;
    std::string start;
    std::string detail;
  };
  Case c = GENERATE(
      Case{kHeader + "%0 = input \"x\" : f32\n%1 = input \"x\" : f32\n", "t.kiln:3:6: ",
           "already exists"},
      Case{kHeader + "%0 = scalar \"s\" : bf16 weak\n", "t.kiln:2:6: ", "expected f32, i32 or i64"},
      Case{kHeader + "%0 = input \"x\" : f32\noutput \"y\" = %0\noutput \"y\" = %0\n", "t.kiln:4:8: ",
           "an output with this name already exists"},
      Case{kHeader + "%0 = input \"x\" : f32[3]\n%1 = sum %0 {axes = [3]} : f32\n", "t.kiln:3:6: ",
           "axis 3 is out of range"},
      Case{kHeader + "%0 = input \"x\" : bool[3]\n%1 = neg %0 : bool[3]\n", "t.kiln:3:6: ",
           "neg(bool[3]): bool operand"},
      Case{kHeader + "%0 = input \"x\" : f32[2, 3]\n%1 = reshape %0 : f32[4]\n", "t.kiln:3:6: ",
           "expected equal element counts"});
  CAPTURE(c.text);
  std::string msg = parseError(c.text);
  CHECK_THAT(msg, Catch::Matchers::StartsWith(c.start));
  CHECK_THAT(msg, Contains(c.detail));
}

TEST_CASE("parseGraphFile reads a file and names it in errors", "[text]") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("kiln_text_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path good = dir / "good.kiln";
  fs::path bad = dir / "bad.kiln";
  {
    std::ofstream(good) << kHeader << "%0 = input \"x\" : f32[2]\n%1 = exp %0 : f32[2]\noutput \"y\" = %1\n";
    std::ofstream(bad) << kHeader << "%0 = input \"x\" : f32[2]\n%1 = exp %0 : i32[2]\n";
  }
  Graph g = parseGraphFile(good.string());
  CHECK(g.outputs().size() == 1);
  try {
    parseGraphFile(bad.string());
    FAIL("expected a type mismatch");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::StartsWith(bad.string() + ":3:15: expected 'f32[2]'"));
  }
  std::string missing = (dir / "missing.kiln").string();
  try {
    parseGraphFile(missing);
    FAIL("expected an unreadable-file error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains(missing));
  }
  fs::remove_all(dir);
}

// The same random graphs (every op and dtype, views, zero-size slices,
// dynamic dims, dead nodes, outputs of inputs and constants, matmuls among
// other ops) compiled to cubins, fresh ones each run (the seed is printed on
// a failure; KILN_TEXT_GRAPH_SEED=S KILN_TEXT_GRAPHS=N draws N from S).
// Every graph compiles. (Session 40 found, in 400 such graphs, a row kernel
// reading its own statistic through a slice, and two reshapes of computed
// values that could not be planned; a quarter of them, with a matmul among
// other ops, were refused until session 41 planned matmuls in stages.)
TEST_CASE("random graphs of every op and dtype compile", "[compile][random]") {
  const char* seedEnv = std::getenv("KILN_TEXT_GRAPH_SEED");
  const char* countEnv = std::getenv("KILN_TEXT_GRAPHS");
  static std::random_device rd;
  const uint64_t first = seedEnv ? std::strtoull(seedEnv, nullptr, 10) : rd() % 1000000000;
  const int count = countEnv ? std::atoi(countEnv) : 20;
  int matmuls = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    Graph g = RandomGraphBuilder(seed).build();
    INFO("seed " << seed << " (KILN_TEXT_GRAPH_SEED=" << seed << " KILN_TEXT_GRAPHS=1 draws it again)\n"
                 << printGraph(g));
    try {
      compiler::CompiledGraph cg = compiler::compileGraph(g);
      for (const auto& k : cg.kernels)
        if (k.schedule == "matmul") {
          ++matmuls;
          break;
        }
    } catch (const Error& e) {
      FAIL_CHECK(e.what());
    }
  }
  std::printf("  %d random graphs compiled, %d of them with a matmul\n", count, matmuls);
}

// ------------------------------------------------------------ mutated text

// Canonical texts of random graphs, mutated at random (spans deleted,
// duplicated or moved, tokens swapped for other tokens of the text,
// numbers changed, stray characters inserted, the end cut off): the parser
// either returns a graph, which prints canonical text that parses back to
// itself and which the planner plans, or throws kiln::Error. Any other
// exception, a crash or a hang is a bug. Fresh mutations each run
// (KILN_MUTATION_SEED=S repeats a run, KILN_MUTATIONS=N sets its size).
TEST_CASE("mutated graph text parses or gives a kiln::Error, never anything else", "[text][fuzz]") {
  const char* seedEnv = std::getenv("KILN_MUTATION_SEED");
  const char* countEnv = std::getenv("KILN_MUTATIONS");
  static std::random_device rd;
  const uint64_t first = seedEnv ? std::strtoull(seedEnv, nullptr, 10) : rd() % 1000000000;
  const int count = countEnv ? std::atoi(countEnv) : 400;
  const std::string alphabet = "%=:[]{},\"\n -.0123456789abcdefgilnoprstuvwxyz#NT_";
  int parsed = 0, planned = 0;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    std::mt19937_64 rng(seed);
    auto below = [&](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
    std::string text = printGraph(RandomGraphBuilder(seed % 997 + 1).build());
    // Tokens of the text: runs of letters/digits/'.'/'-'/'%', or one other character.
    std::vector<std::string> tokens;
    for (size_t p = 0; p < text.size();) {
      size_t q = p;
      auto word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '%' || ch == '_'; };
      if (word(text[p]))
        while (q < text.size() && word(text[q])) ++q;
      else
        ++q;
      tokens.push_back(text.substr(p, q - p));
      p = q;
    }
    const int edits = 1 + static_cast<int>(below(3));
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const size_t at = below(text.size());
      const size_t len = 1 + below(std::min<size_t>(24, text.size() - at));
      switch (below(7)) {
        case 0: text.erase(at, len); break;
        case 1: text.insert(below(text.size() + 1), text.substr(at, len)); break;
        case 2: {
          const std::string span = text.substr(at, len);
          text.erase(at, len);
          text.insert(below(text.size() + 1), span);
          break;
        }
        case 3: {  // a token replaced by another token of the text
          const std::string& from = tokens[below(tokens.size())];
          const std::string& to = tokens[below(tokens.size())];
          if (size_t f = text.find(from, below(text.size())); f != std::string::npos) text.replace(f, from.size(), to);
          break;
        }
        case 4: {  // a digit changed, or a number made large, negative or zero
          const size_t d = text.find_first_of("0123456789", at);
          if (d == std::string::npos) break;
          static const char* kNumbers[] = {"0", "1", "-1", "4294967297", "9223372036854775807", "99999999999999999999", "1e400", "nan"};
          if (rng() % 2) text[d] = static_cast<char>('0' + below(10));
          else text.replace(d, 1, kNumbers[below(std::size(kNumbers))]);
          break;
        }
        case 5: text.insert(at, 1, alphabet[below(alphabet.size())]); break;
        default: text.resize(at); break;
      }
    }
    INFO("mutation " << i << " (KILN_MUTATION_SEED=" << seed << " KILN_MUTATIONS=1 repeats it):\n" << text);
    Graph g;
    try {
      g = parseGraph(text, "m.kiln");
    } catch (const Error& e) {
      // The message names where: "m.kiln:LINE:COLUMN: ..." or the file.
      CHECK(std::string(e.what()).rfind("m.kiln", 0) == 0);
      continue;
    } catch (const std::exception& e) {
      FAIL("parseGraph threw a " << typeid(e).name() << ", not a kiln::Error: " << e.what());
    }
    ++parsed;
    const std::string canonical = printGraph(g);
    CHECK(printGraph(parseGraph(canonical)) == canonical);
    if (g.outputs().empty()) continue;  // (compile says: no outputs)
    try {
      (void)compiler::planGraph(g);
      ++planned;
    } catch (const Error& e) {
      FAIL_CHECK("the DSL took the graph but the planner refused it: " << e.what());
    } catch (const std::exception& e) {
      FAIL("planGraph threw a " << typeid(e).name() << ", not a kiln::Error: " << e.what());
    }
  }
  std::printf("  %d mutated texts from seed %llu: %d parsed, %d of them planned\n", count,
              static_cast<unsigned long long>(first), parsed, planned);
}
