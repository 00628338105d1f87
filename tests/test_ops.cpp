// Shape inference, type promotion and error messages of the primitive ops.
#include <catch2/catch.hpp>

#include "kiln/dsl/ops.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

// Runs `f`, expecting a kiln::Error; returns its message.
template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  FAIL("expected a kiln::Error");
  return {};
}

}  // namespace

TEST_CASE("tensor-tensor promotion follows PyTorch's table", "[ops][promotion]") {
  struct Row {
    DType a, b, expect;
  };
  const Row rows[] = {
      {DType::BF16, DType::F32, DType::F32},  {DType::F16, DType::BF16, DType::F32},
      {DType::F16, DType::F16, DType::F16},   {DType::BF16, DType::BF16, DType::BF16},
      {DType::I32, DType::I64, DType::I64},   {DType::I32, DType::F16, DType::F16},
      {DType::Bool, DType::I32, DType::I32},  {DType::Bool, DType::BF16, DType::BF16},
      {DType::I64, DType::BF16, DType::BF16}, {DType::I64, DType::F32, DType::F32},
  };
  for (const Row& r : rows) {
    Graph g;
    Tensor a = g.input("a", r.a, {4, 8});
    Tensor b = g.input("b", r.b, {4, 8});
    INFO(dtypeName(r.a) << " + " << dtypeName(r.b));
    CHECK((a + b).dtype() == r.expect);
    CHECK((b * a).dtype() == r.expect);
  }
}

TEST_CASE("scalars do not promote a tensor of their category or above", "[ops][promotion]") {
  Graph g;
  Tensor h = g.input("h", DType::BF16, {8});
  Tensor i = g.input("i", DType::I32, {8});
  Tensor b = g.input("b", DType::Bool, {8});
  CHECK((h * 2.5).dtype() == DType::BF16);
  CHECK((2 * h).dtype() == DType::BF16);
  CHECK((i + 3).dtype() == DType::I32);
  CHECK((i + 3.5).dtype() == DType::F32);  // higher category: default float
  CHECK((b & true).dtype() == DType::Bool);
  CHECK(where(b, i, 7).dtype() == DType::I32);
  // runtime scalars are weak too
  Tensor lr = g.scalar("lr");
  CHECK((h * lr).dtype() == DType::BF16);
  CHECK((i * lr).dtype() == DType::F32);
  // a 0-dim strong constant of a higher category wins, like a 0-dim tensor
  CHECK((i + g.constant(1.0, DType::F16)).dtype() == DType::F16);
  CHECK((h + g.constant(1.0, DType::F32)).dtype() == DType::BF16);
}

TEST_CASE("results of scalars alone stay weak scalars", "[ops][promotion]") {
  Graph g;
  Tensor a = g.scalar("a");
  Tensor b = g.scalar("b");
  Tensor c = a * b + 1.0;
  CHECK(c.node().weak);
  CHECK(c.rank() == 0);
  Tensor x = g.input("x", DType::F16, {3});
  CHECK((x * c).dtype() == DType::F16);
  CHECK_FALSE((x * c).node().weak);
}

TEST_CASE("division of integers is true division in f32", "[ops][promotion]") {
  Graph g;
  Tensor i = g.input("i", DType::I64, {2});
  CHECK((i / 2).dtype() == DType::F32);
  CHECK((i % 2).dtype() == DType::I64);
  CHECK(pow(i, 2).dtype() == DType::I64);
}

TEST_CASE("unary ops give their documented result dtypes", "[ops][promotion]") {
  Graph g;
  Tensor i = g.input("i", DType::I32, {2});
  Tensor h = g.input("h", DType::F16, {2});
  for (Op op : {Op::Exp, Op::Exp2, Op::Log, Op::Log2, Op::Log1p, Op::Expm1, Op::Sqrt, Op::Rsqrt,
                Op::Reciprocal, Op::Sin, Op::Cos, Op::Tanh, Op::Sigmoid, Op::Erf}) {
    INFO(opName(op));
    CHECK(unary(op, i).dtype() == DType::F32);
    CHECK(unary(op, h).dtype() == DType::F16);
  }
  for (Op op : {Op::Neg, Op::Abs, Op::Relu, Op::Floor, Op::Ceil, Op::Round}) {
    INFO(opName(op));
    CHECK(unary(op, i).dtype() == DType::I32);
    CHECK(unary(op, h).dtype() == DType::F16);
  }
  for (Op op : {Op::IsNan, Op::IsInf, Op::LogicalNot}) CHECK(unary(op, h).dtype() == DType::Bool);
  CHECK((h < 1.0).dtype() == DType::Bool);
  CHECK((-h).dtype() == DType::F16);
  CHECK((!(h > 0.0)).dtype() == DType::Bool);
}

TEST_CASE("numpy broadcasting of rows, columns and scalars", "[ops][shape]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 1, 64});
  Tensor row = g.input("row", DType::F32, {64});
  Tensor col = g.input("col", DType::F32, {"N", 16, 1});
  Tensor s = g.input("s", DType::F32, {});
  CHECK((x + row).shape() == Shape{"N", 1, 64});
  CHECK((x + col).shape() == Shape{"N", 16, 64});
  CHECK((col * s).shape() == Shape{"N", 16, 1});
  CHECK(where(x > 0.0, col, row).shape() == Shape{"N", 16, 64});
  CHECK(fma(x, col, row).shape() == Shape{"N", 16, 64});
}

TEST_CASE("broadcasting mistakes name the op, operands and dims", "[ops][errors]") {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {32, 4096});
  Tensor b = g.input("b", DType::F32, {16});
  std::string msg = errorOf([&] { (void)(a + b); });
  CHECK_THAT(msg, Contains("add(bf16[32, 4096], f32[16])"));
  CHECK_THAT(msg, Contains("4096"));
  CHECK_THAT(msg, Contains("expected equal dims or 1"));
  CHECK_THAT(msg, Contains("test_ops.cpp:"));
  Tensor n = g.input("n", DType::F32, {"N", 8});
  Tensor m = g.input("m", DType::F32, {"M", 8});
  CHECK_THAT(errorOf([&] { (void)mul(n, m); }), Contains("N in operand 0 but M in operand 1"));
}

TEST_CASE("errors point at the user's line", "[ops][errors]") {
  Graph g;
  Tensor a = g.input("a", DType::F32, {3});
  Tensor b = g.input("b", DType::F32, {4});
  int line = __LINE__ + 1;
  std::string msg = errorOf([&] { (void)(a - b); });
  CHECK_THAT(msg, Contains("test_ops.cpp:" + std::to_string(line)));
  line = __LINE__ + 1;
  msg = errorOf([&] { (void)maximum(a, b); });
  CHECK_THAT(msg, Contains("test_ops.cpp:" + std::to_string(line)));
  line = __LINE__ + 1;
  msg = errorOf([&] { (void)sum(a, 3); });
  CHECK_THAT(msg, Contains("test_ops.cpp:" + std::to_string(line)));
}

TEST_CASE("dtype mistakes are rejected with what was expected", "[ops][errors]") {
  Graph g;
  Tensor b = g.input("b", DType::Bool, {4});
  Tensor i = g.input("i", DType::I32, {4});
  Tensor f = g.input("f", DType::F32, {4});
  CHECK_THAT(errorOf([&] { (void)(b + b); }), Contains("arithmetic on bool"));
  CHECK_THAT(errorOf([&] { (void)(-b); }), Contains("neg(bool[4]): bool operand"));
  CHECK_THAT(errorOf([&] { (void)where(i, f, f); }), Contains("expected a bool condition"));
  CHECK_THAT(errorOf([&] { (void)mean(i); }), Contains("expected a float dtype"));
  CHECK_THAT(errorOf([&] { (void)var(i); }), Contains("var(i32[4])"));
  CHECK_THAT(errorOf([&] { (void)argmax(b, 0); }), Contains("bool input"));
  CHECK_THAT(errorOf([&] { (void)g.scalar("s", DType::BF16); }), Contains("expected f32, i32 or i64"));
  CHECK_THAT(errorOf([&] { (void)add(1.0, 2.0); }), Contains("expected at least one tensor"));
  CHECK_THAT(errorOf([&] { (void)fma(b, b, b); }), Contains("fma"));
}

TEST_CASE("reductions infer shapes and dtypes, with keepdim and several axes", "[ops][shape]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"B", 8, 16});
  Tensor i = g.input("i", DType::I32, {8, 16});
  Tensor b = g.input("b", DType::Bool, {8, 16});
  CHECK(sum(x, -1).shape() == Shape{"B", 8});
  CHECK(sum(x, -1, true).shape() == Shape{"B", 8, 1});
  CHECK(sum(x, {0, 2}).shape() == Shape{8});
  CHECK(sum(x, {2, 0}, true).shape() == Shape{1, 8, 1});
  CHECK(sum(x).shape() == Shape{});
  CHECK(sum(x).dtype() == DType::BF16);
  CHECK(sum(i, 0).dtype() == DType::I64);
  CHECK(prod(b, 0).dtype() == DType::I64);
  CHECK(max(i, 1).dtype() == DType::I32);
  CHECK(mean(x, 1).dtype() == DType::BF16);
  CHECK(argmax(x, 1).dtype() == DType::I64);
  CHECK(argmin(x, -1, true).shape() == Shape{"B", 8, 1});
  CHECK(var(x, -1, 0).node().correction == 0);
  CHECK(kiln::std(x, {1, 2}, 1, true).shape() == Shape{"B", 1, 1});
  CHECK(sum(x, {-1, 0}).node().axes == std::vector<int64_t>{0, 2});
}

TEST_CASE("reduction axis mistakes are clear", "[ops][errors]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {8, 16});
  CHECK_THAT(errorOf([&] { (void)sum(x, 2); }), Contains("axis 2 is out of range; expected an axis in [-2, 1]"));
  CHECK_THAT(errorOf([&] { (void)sum(x, {1, -1}); }), Contains("listed twice"));
  CHECK_THAT(errorOf([&] { (void)var(x, 0, -1); }), Contains("correction -1; expected >= 0"));
  CHECK_THAT(errorOf([&] { (void)reduce(Op::ArgMax, x, {0, 1}, false); }), Contains("expected exactly one axis"));
}

TEST_CASE("matmul shapes: batched, transposed, broadcast batch dims", "[ops][shape]") {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {"B", 64, 32});
  Tensor b = g.input("b", DType::BF16, {32, 16});
  Tensor at = g.input("at", DType::BF16, {32, 64});
  Tensor bt = g.input("bt", DType::BF16, {1, 16, 32});
  CHECK(matmul(a, b).shape() == Shape{"B", 64, 16});
  CHECK(matmul(at, b, {.transA = true}).shape() == Shape{64, 16});
  CHECK(matmul(a, bt, {.transB = true}).shape() == Shape{"B", 64, 16});
  CHECK(matmul(at, bt, {.transA = true, .transB = true}).shape() == Shape{1, 64, 16});
  CHECK(matmul(a, b).dtype() == DType::BF16);
}

TEST_CASE("matmul mistakes are clear", "[ops][errors]") {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {64, 32});
  Tensor b = g.input("b", DType::BF16, {16, 32});
  Tensor f = g.input("f", DType::F32, {32, 16});
  Tensor v = g.input("v", DType::BF16, {32});
  Tensor i = g.input("i", DType::I32, {32, 16});
  Tensor i2 = g.input("i2", DType::I32, {64, 32});
  CHECK_THAT(errorOf([&] { (void)matmul(a, b); }), Contains("a has K = 32, b has K = 16"));
  CHECK_THAT(errorOf([&] { (void)matmul(a, f); }), Contains("dtypes differ"));
  CHECK_THAT(errorOf([&] { (void)matmul(a, v); }), Contains("expected rank >= 2"));
  CHECK_THAT(errorOf([&] { (void)matmul(i2, i); }), Contains("expected f16, bf16 or f32"));
  Tensor p = g.input("p", DType::BF16, {3, 64, 32});
  Tensor q = g.input("q", DType::BF16, {4, 32, 16});
  CHECK_THAT(errorOf([&] { (void)matmul(p, q); }), Contains("batch dims [3] and [4] do not broadcast"));
}

TEST_CASE("views: reshape, expand, permute, transpose, slice", "[ops][shape]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 4, 6});
  CHECK(reshape(x, {"N", 24}).shape() == Shape{"N", 24});
  CHECK(reshape(x, {"N", -1, 3}).shape() == Shape{"N", 8, 3});
  CHECK(expand(g.input("r", DType::F32, {1, 6}), {"N", 5, 6}).shape() == Shape{"N", 5, 6});
  CHECK(broadcast_to(x, {2, -1, 4, 6}).shape() == Shape{2, "N", 4, 6});
  CHECK(permute(x, {2, 0, 1}).shape() == Shape{6, "N", 4});
  CHECK(transpose(x).shape() == Shape{"N", 6, 4});
  CHECK(slice(x, 2, 1, 5).shape() == Shape{"N", 4, 4});
  CHECK(slice(x, -1, 0, 6, 4).shape() == Shape{"N", 4, 2});
  CHECK(slice(x, 1, -3, 100).shape() == Shape{"N", 3, 6});
  Tensor s = slice(x, 1, -3, 100);
  CHECK(s.node().start == 1);
  CHECK(s.node().end == 4);
}

TEST_CASE("view mistakes are clear", "[ops][errors]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 4, 6});
  CHECK_THAT(errorOf([&] { (void)reshape(x, {"N", 25}); }), Contains("holds 25 elements but the input holds 24"));
  CHECK_THAT(errorOf([&] { (void)reshape(x, {24, 4}); }), Contains("same dynamic dims"));
  CHECK_THAT(errorOf([&] { (void)reshape(x, {"N", -1, -1}); }), Contains("two -1 dims"));
  CHECK_THAT(errorOf([&] { (void)expand(x, {"N", 5, 6}); }), Contains("input dim 1 is 4"));
  CHECK_THAT(errorOf([&] { (void)permute(x, {0, 1}); }), Contains("expected 3"));
  CHECK_THAT(errorOf([&] { (void)permute(x, {0, 1, 1}); }), Contains("repeats axis 1"));
  CHECK_THAT(errorOf([&] { (void)slice(x, 0, 0, 2); }), Contains("dynamic dim N"));
  CHECK_THAT(errorOf([&] { (void)slice(x, 1, 0, 2, 0); }), Contains("step 0; expected step >= 1"));
}

TEST_CASE("parameters and outputs validate their names", "[ops][errors]") {
  Graph g;
  (void)g.input("x", DType::F32, {4});
  CHECK_THAT(errorOf([&] { (void)g.input("x", DType::F32, {4}); }), Contains("already exists"));
  CHECK_THAT(errorOf([&] { (void)g.input("2x", DType::F32, {4}); }), Contains("not an identifier"));
  CHECK_THAT(errorOf([&] { (void)g.input("y", DType::F32, {-3}); }), Contains("dim 0 is -3"));
  CHECK_THAT(errorOf([&] { (void)g.input("z", DType::F32, {"N-1"}); }), Contains("expected an identifier"));
  Tensor x = g.tensor(0);
  g.output("out", x);
  CHECK_THAT(errorOf([&] { g.output("out", x); }), Contains("output with this name already exists"));
  CHECK_THAT(errorOf([&] { g.output("x", x); }), Contains("a parameter has this name"));
  Graph other;
  Tensor y = other.input("y", DType::F32, {4});
  CHECK_THAT(errorOf([&] { g.output("o2", y); }), Contains("another Graph"));
  CHECK_THAT(errorOf([&] { (void)(x + y); }), Contains("another Graph"));
  CHECK_THAT(errorOf([&] { (void)exp(Tensor()); }), Contains("empty Tensor"));
}

TEST_CASE("canonical order ignores the construction order of unrelated nodes", "[ops][graph]") {
  auto build = [](bool flip) {
    Graph g;
    Tensor x = g.input("x", DType::F32, {4});
    Tensor a, b;
    if (flip) {
      b = cos(x);
      a = sin(x);
    } else {
      a = sin(x);
      b = cos(x);
    }
    (void)exp(x);  // dead
    g.output("y", a + b);
    return g;
  };
  Graph g1 = build(false), g2 = build(true);
  std::vector<Op> o1, o2;
  for (int id : g1.canonicalOrder()) o1.push_back(g1.node(id).op);
  for (int id : g2.canonicalOrder()) o2.push_back(g2.node(id).op);
  CHECK(o1 == o2);
  CHECK(o1 == std::vector<Op>{Op::Input, Op::Sin, Op::Cos, Op::Add});
}

TEST_CASE("dtype conversions round to nearest even and keep specials", "[dtype]") {
  // bf16: 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  CHECK(roundToDType(1.0 + std::ldexp(1.0, -8), DType::BF16) == 1.0);
  CHECK(roundToDType(1.0 + 3 * std::ldexp(1.0, -8), DType::BF16) == 1.0 + std::ldexp(1.0, -6));
  // just above halfway rounds up (no double rounding through f32)
  CHECK(roundToDType(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40), DType::BF16) == 1.0 + std::ldexp(1.0, -7));
  CHECK(roundToDType(1.0 + std::ldexp(1.0, -11), DType::F16) == 1.0);
  CHECK(roundToDType(65520.0, DType::F16) == INFINITY);
  CHECK(roundToDType(65519.0, DType::F16) == 65504.0);
  CHECK(roundToDType(std::ldexp(1.0, -24), DType::F16) == std::ldexp(1.0, -24));  // smallest subnormal
  CHECK(roundToDType(std::ldexp(1.0, -26), DType::F16) == 0.0);
  CHECK(std::isnan(roundToDType(NAN, DType::BF16)));
  CHECK(roundToDType(-INFINITY, DType::F16) == -INFINITY);
  CHECK(roundToDType(3e9, DType::I32) == 3e9 - 4294967296.0);
  CHECK(roundToDType(-2.7, DType::I64) == -2.0);
  CHECK(roundToDType(0.1, DType::Bool) == 1.0);
  for (double v : {0.0, -0.0, 1.5, -2.25, 1e-40, 3.0e38, 1e-8}) {
    INFO(v);
    CHECK(bf16BitsToDouble(doubleToBF16Bits(v)) == roundToDType(v, DType::BF16));
    CHECK(f16BitsToDouble(doubleToF16Bits(v)) == roundToDType(v, DType::F16));
  }
  CHECK(doubleToBF16Bits(1.0) == 0x3F80);
  CHECK(doubleToF16Bits(1.0) == 0x3C00);
  CHECK(doubleToF16Bits(-2.0) == 0xC000);
  CHECK(doubleToF16Bits(65504.0) == 0x7BFF);
}
