// The reference evaluator and HostTensor: every op against values computed
// independently here (libm, hand-worked numbers, naive loops), the rounding
// rules (fp64 intermediates, rounding at casts and outputs only), integer
// wrap-around, broadcasting, reductions, matmul, views and input validation.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kiln/dsl/ops.h"
#include "kiln/dsl/reference.h"

using namespace kiln;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// Equal, with NaN equal to NaN.
bool sameValue(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

HostTensor hostTensor(DType t, std::vector<int64_t> shape, const std::vector<double>& values) {
  HostTensor h(t, std::move(shape));
  REQUIRE(static_cast<int64_t>(values.size()) == h.numel());
  for (int64_t i = 0; i < h.numel(); ++i) h.set(i, values[i]);
  return h;
}

HostTensor hostInts(DType t, std::vector<int64_t> shape, const std::vector<int64_t>& values) {
  HostTensor h(t, std::move(shape));
  REQUIRE(static_cast<int64_t>(values.size()) == h.numel());
  for (int64_t i = 0; i < h.numel(); ++i) h.setInt(i, values[i]);
  return h;
}

std::vector<double> valuesOf(const HostTensor& h) {
  std::vector<double> v;
  for (int64_t i = 0; i < h.numel(); ++i) v.push_back(h.get(i));
  return v;
}

std::vector<int64_t> intsOf(const HostTensor& h) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < h.numel(); ++i) v.push_back(h.getInt(i));
  return v;
}

EvalOutput evalOne(const Graph& g, const EvalInputs& in) {
  std::vector<EvalOutput> outs = evaluate(g, in);
  REQUIRE(outs.size() == 1);
  return outs[0];
}

void checkValues(const HostTensor& got, const std::vector<double>& expected) {
  REQUIRE(got.numel() == static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i << ": got " << got.get(i) << ", expected " << expected[i]);
    CHECK(sameValue(got.get(i), expected[i]));
  }
}

void checkInts(const HostTensor& got, const std::vector<int64_t>& expected) {
  REQUIRE(got.numel() == static_cast<int64_t>(expected.size()));
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i);
    CHECK(got.getInt(i) == expected[i]);
  }
}

const std::vector<double> kFloatSamples = {-2.5, -1.0, -0.7, -0.5, -0.0, 0.0,  0.3,
                                           0.5,  1.5,  2.5,  3.0,  7.25, kInf, -kInf, kNaN};

}  // namespace

// ============================================================ HostTensor

TEST_CASE("a host tensor stores every dtype in its storage format", "[reference]") {
  DType t = GENERATE(DType::Bool, DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32);
  INFO("dtype " << dtypeName(t));
  HostTensor h(t, {2, 3});
  CHECK(h.numel() == 6);
  CHECK(h.bytes() == static_cast<size_t>(6 * dtypeSize(t)));
  CHECK(h.shape() == std::vector<int64_t>{2, 3});
  double v = t == DType::Bool ? 1.0 : 3.0;
  h.set(4, v);
  CHECK(h.get(4) == v);
  CHECK(h.get(0) == 0.0);
  h.setInt(5, 1);
  CHECK(h.getInt(5) == 1);
}

TEST_CASE("a host tensor rounds bf16 and f16 to nearest even and keeps NaN and infinities",
          "[reference]") {
  HostTensor bf(DType::BF16, {6});
  bf.set(0, 1.0 + 0x1p-8);      // halfway between 1 and 1 + 2^-7: to even (1)
  bf.set(1, 1.0 + 3 * 0x1p-8);  // halfway, to even (1 + 2^-6)
  bf.set(2, 1.0 + 0x1p-8 + 0x1p-20);  // just above halfway: up
  bf.set(3, kNaN);
  bf.set(4, -kInf);
  bf.set(5, 1e39);  // beyond bf16's range
  checkValues(bf, {1.0, 1.0 + 0x1p-6, 1.0 + 0x1p-7, kNaN, -kInf, kInf});
  uint16_t bits;
  std::memcpy(&bits, bf.data(), 2);
  CHECK(bits == 0x3F80);  // 1.0 in bf16

  HostTensor h(DType::F16, {5});
  h.set(0, 1.0 + 0x1p-11);           // halfway between 1 and 1 + 2^-10: to even
  h.set(1, 1.0 + 3 * 0x1p-11);       // halfway: up to 1 + 2^-9
  h.set(2, 65519.0);                 // below halfway to 65536: the max, 65504
  h.set(3, 65520.0);                 // halfway, and 65504 is odd: infinity
  h.set(4, 0x1p-25);                 // half the smallest subnormal: to even (0)
  checkValues(h, {1.0, 1.0 + 0x1p-9, 65504.0, kInf, 0.0});
}

TEST_CASE("a host tensor wraps and truncates integers like a C cast", "[reference]") {
  HostTensor i32(DType::I32, {4});
  i32.set(0, 3e9);
  i32.set(1, -2.7);
  i32.set(2, kNaN);
  i32.setInt(3, (int64_t{1} << 32) + 5);
  checkInts(i32, {3000000000LL - 4294967296LL, -2, 0, 5});

  HostTensor i64(DType::I64, {2});
  int64_t big = (int64_t{1} << 62) + 1;  // not representable as a double
  i64.setInt(0, big);
  i64.setInt(1, -big);
  checkInts(i64, {big, -big});

  HostTensor b(DType::Bool, {3});
  b.set(0, 0.25);
  b.set(1, kNaN);
  b.setInt(2, 0);
  checkInts(b, {1, 1, 0});
}

TEST_CASE("a host tensor rejects bad shapes and indices", "[reference]") {
  CHECK_THROWS_WITH(HostTensor(DType::F32, {2, -1}), Catch::Contains("negative"));
  HostTensor h(DType::F32, {3});
  CHECK_THROWS_WITH(h.get(3), Catch::Contains("index 3"));
  CHECK_THROWS_AS(h.set(-1, 0.0), Error);
  HostTensor scalar(DType::F32, {});
  CHECK(scalar.numel() == 1);
}

TEST_CASE("fillBytes with 0xFF poisons floats to NaN", "[reference]") {
  DType t = GENERATE(DType::F16, DType::BF16, DType::F32);
  INFO("dtype " << dtypeName(t));
  HostTensor h(t, {4});
  h.fillBytes(0xFF);
  for (int64_t i = 0; i < 4; ++i) CHECK(std::isnan(h.get(i)));
  HostTensor ints(DType::I32, {2});
  ints.fillBytes(0xFF);
  checkInts(ints, {-1, -1});
}

TEST_CASE("fillRandom stays in the half-open range and is reproducible", "[reference]") {
  DType t = GENERATE(DType::F16, DType::BF16, DType::F32);
  INFO("dtype " << dtypeName(t));
  std::mt19937_64 rng(7);
  HostTensor h(t, {4096});
  h.fillRandom(rng, 0.0, 1.0);
  double lo = 1, hi = 0;
  for (int64_t i = 0; i < h.numel(); ++i) {
    lo = std::min(lo, h.get(i));
    hi = std::max(hi, h.get(i));
  }
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(hi > 0.9);
  CHECK(lo < 0.1);

  std::mt19937_64 again(7);
  HostTensor h2(t, {4096});
  h2.fillRandom(again, 0.0, 1.0);
  CHECK(std::memcmp(h.data(), h2.data(), h.bytes()) == 0);
}

TEST_CASE("fillRandom draws every integer of the range and both bools", "[reference]") {
  std::mt19937_64 rng(1);
  HostTensor ints(DType::I32, {2000});
  ints.fillRandom(rng, -3, 5);
  std::vector<int> seen(8, 0);
  for (int64_t v : intsOf(ints)) {
    REQUIRE(v >= -3);
    REQUIRE(v < 5);
    ++seen[v + 3];
  }
  for (int c : seen) CHECK(c > 100);

  HostTensor bools(DType::Bool, {200});
  bools.fillRandom(rng);
  int ones = 0;
  for (int64_t v : intsOf(bools)) ones += static_cast<int>(v);
  CHECK(ones > 50);
  CHECK(ones < 150);
}

// ============================================================ unary ops

namespace {

struct UnaryCase {
  Op op;
  double (*expected)(double);
};

const std::vector<UnaryCase> kFloatUnaryCases = {
    {Op::Neg, [](double x) { return -x; }},
    {Op::Abs, [](double x) { return std::fabs(x); }},
    {Op::Exp, [](double x) { return std::exp(x); }},
    {Op::Exp2, [](double x) { return std::exp2(x); }},
    {Op::Log, [](double x) { return std::log(x); }},
    {Op::Log2, [](double x) { return std::log2(x); }},
    {Op::Log1p, [](double x) { return std::log1p(x); }},
    {Op::Expm1, [](double x) { return std::expm1(x); }},
    {Op::Sqrt, [](double x) { return std::sqrt(x); }},
    {Op::Rsqrt, [](double x) { return 1.0 / std::sqrt(x); }},
    {Op::Reciprocal, [](double x) { return 1.0 / x; }},
    {Op::Sin, [](double x) { return std::sin(x); }},
    {Op::Cos, [](double x) { return std::cos(x); }},
    {Op::Tanh, [](double x) { return std::tanh(x); }},
    {Op::Sigmoid, [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
    {Op::Erf, [](double x) { return std::erf(x); }},
    {Op::Relu, [](double x) { return std::isnan(x) ? x : (x < 0 ? 0.0 : x); }},
    {Op::Floor, [](double x) { return std::floor(x); }},
    {Op::Ceil, [](double x) { return std::ceil(x); }},
    {Op::Round, [](double x) { return std::nearbyint(x); }},  // default mode: half to even
};

}  // namespace

TEST_CASE("every float unary op matches libm in every float dtype", "[reference]") {
  DType t = GENERATE(DType::F32, DType::F16, DType::BF16);
  UnaryCase c = GENERATE(from_range(kFloatUnaryCases));
  INFO(opName(c.op) << " in " << dtypeName(t));
  const int64_t n = static_cast<int64_t>(kFloatSamples.size());
  Graph g;
  Tensor x = g.input("x", t, {n});
  Tensor y = unary(c.op, x);
  REQUIRE(y.dtype() == t);
  g.output("y", y);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(t, {n}, kFloatSamples));
  EvalOutput out = evalOne(g, in);
  REQUIRE(out.value.dtype() == t);
  const HostTensor& stored = in.tensors.at("x");
  for (int64_t i = 0; i < n; ++i) {
    double xi = stored.get(i);
    double want = c.expected(xi);
    INFO(opName(c.op) << "(" << xi << ") = " << out.exact[i] << ", expected " << want);
    CHECK(sameValue(out.exact[i], want));
    CHECK(sameValue(out.value.get(i), roundToDType(want, t)));
  }
}

TEST_CASE("round sends halves to the even neighbour", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {8});
  g.output("y", kiln::round(x));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {8}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, 2.6}));
  checkValues(evalOne(g, in).value, {0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 2.0, 3.0});
}

TEST_CASE("integer unary ops are exact and wrap like two's complement", "[reference]") {
  DType t = GENERATE(DType::I32, DType::I64);
  INFO("dtype " << dtypeName(t));
  int64_t lowest = t == DType::I32 ? std::numeric_limits<int32_t>::min()
                                   : std::numeric_limits<int64_t>::min();
  std::vector<int64_t> xs = {-7, -1, 0, 1, 5, lowest};
  const int64_t n = static_cast<int64_t>(xs.size());
  struct IntCase {
    Op op;
    std::vector<int64_t> want;
  };
  // -lowest and |lowest| wrap back to lowest.
  std::vector<IntCase> cases = {
      {Op::Neg, {7, 1, 0, -1, -5, lowest}},  {Op::Abs, {7, 1, 0, 1, 5, lowest}},
      {Op::Relu, {0, 0, 0, 1, 5, 0}},        {Op::Floor, xs},
      {Op::Ceil, xs},                        {Op::Round, xs},
  };
  for (const IntCase& c : cases) {
    INFO(opName(c.op));
    Graph g;
    Tensor x = g.input("x", t, {n});
    Tensor y = unary(c.op, x);
    REQUIRE(y.dtype() == t);
    g.output("y", y);
    EvalInputs in;
    in.tensors.emplace("x", hostInts(t, {n}, xs));
    checkInts(evalOne(g, in).value, c.want);
  }
}

TEST_CASE("a transcendental op on integers computes in f32", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::I32, {3});
  Tensor y = kiln::exp(x);
  REQUIRE(y.dtype() == DType::F32);
  g.output("y", y);
  EvalInputs in;
  in.tensors.emplace("x", hostInts(DType::I32, {3}, {0, 1, -2}));
  EvalOutput out = evalOne(g, in);
  checkValues(out.value, {1.0, roundToDType(std::exp(1.0), DType::F32),
                          roundToDType(std::exp(-2.0), DType::F32)});
  CHECK(out.exact[1] == std::exp(1.0));
}

TEST_CASE("isnan, isinf and logical_not give bool in every dtype", "[reference]") {
  DType t = GENERATE(DType::F32, DType::F16, DType::BF16);
  INFO("dtype " << dtypeName(t));
  Graph g;
  Tensor x = g.input("x", t, {5});
  g.output("nan", kiln::isnan(x));
  g.output("inf", kiln::isinf(x));
  g.output("not", kiln::logical_not(x));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(t, {5}, {0.0, -0.0, 2.0, kNaN, -kInf}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  REQUIRE(outs.size() == 3);
  for (const EvalOutput& o : outs) CHECK(o.value.dtype() == DType::Bool);
  checkInts(outs[0].value, {0, 0, 0, 1, 0});
  checkInts(outs[1].value, {0, 0, 0, 0, 1});
  checkInts(outs[2].value, {1, 1, 0, 0, 0});  // NaN is nonzero
}

TEST_CASE("isnan, isinf and logical_not on integers", "[reference]") {
  DType t = GENERATE(DType::I32, DType::I64, DType::Bool);
  INFO("dtype " << dtypeName(t));
  Graph g;
  Tensor x = g.input("x", t, {3});
  g.output("nan", kiln::isnan(x));
  g.output("inf", kiln::isinf(x));
  g.output("not", kiln::logical_not(x));
  EvalInputs in;
  in.tensors.emplace("x", hostInts(t, {3}, {0, 1, t == DType::Bool ? 1 : -4}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {0, 0, 0});
  checkInts(outs[1].value, {0, 0, 0});
  checkInts(outs[2].value, {1, 0, 0});
}

// ============================================================ binary ops

namespace {

struct BinaryCase {
  Op op;
  double (*expected)(double, double);
};

const std::vector<BinaryCase> kFloatBinaryCases = {
    {Op::Add, [](double a, double b) { return a + b; }},
    {Op::Sub, [](double a, double b) { return a - b; }},
    {Op::Mul, [](double a, double b) { return a * b; }},
    {Op::Div, [](double a, double b) { return a / b; }},
    {Op::Pow, [](double a, double b) { return std::pow(a, b); }},
    {Op::Maximum,
     [](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::max(a, b); }},
    {Op::Minimum,
     [](double a, double b) { return std::isnan(a) || std::isnan(b) ? kNaN : std::min(a, b); }},
};

// Every pair of a few samples, as two flat inputs.
void allPairs(const std::vector<double>& s, std::vector<double>& as, std::vector<double>& bs) {
  for (double a : s)
    for (double b : s) {
      as.push_back(a);
      bs.push_back(b);
    }
}

const std::vector<double> kPairSamples = {-2.5, -1.0, -0.0, 0.0, 0.5, 3.0, kInf, kNaN};

}  // namespace

TEST_CASE("every float binary op matches C++ arithmetic in every float dtype", "[reference]") {
  DType t = GENERATE(DType::F32, DType::F16, DType::BF16);
  BinaryCase c = GENERATE(from_range(kFloatBinaryCases));
  INFO(opName(c.op) << " in " << dtypeName(t));
  std::vector<double> as, bs;
  allPairs(kPairSamples, as, bs);
  const int64_t n = static_cast<int64_t>(as.size());
  Graph g;
  Tensor a = g.input("a", t, {n});
  Tensor b = g.input("b", t, {n});
  Tensor y = binary(c.op, a, b);
  REQUIRE(y.dtype() == t);
  g.output("y", y);
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(t, {n}, as));
  in.tensors.emplace("b", hostTensor(t, {n}, bs));
  EvalOutput out = evalOne(g, in);
  for (int64_t i = 0; i < n; ++i) {
    double want = c.expected(as[i], bs[i]);
    INFO(opName(c.op) << "(" << as[i] << ", " << bs[i] << ") = " << out.exact[i]);
    CHECK(sameValue(out.exact[i], want));
    CHECK(sameValue(out.value.get(i), roundToDType(want, t)));
  }
}

TEST_CASE("maximum and minimum propagate NaN from either side", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::F32, {3});
  Tensor b = g.input("b", DType::F32, {3});
  g.output("max", maximum(a, b));
  g.output("min", minimum(a, b));
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(DType::F32, {3}, {kNaN, 1.0, 2.0}));
  in.tensors.emplace("b", hostTensor(DType::F32, {3}, {1.0, kNaN, -2.0}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkValues(outs[0].value, {kNaN, kNaN, 2.0});
  checkValues(outs[1].value, {kNaN, kNaN, -2.0});
}

TEST_CASE("float remainder takes the sign of the divisor", "[reference]") {
  DType t = GENERATE(DType::F32, DType::F16, DType::BF16);
  INFO("dtype " << dtypeName(t));
  Graph g;
  Tensor a = g.input("a", t, {7});
  Tensor b = g.input("b", t, {7});
  g.output("r", a % b);
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(t, {7}, {5.5, -5.5, 5.5, -5.5, 1.0, 4.0, kNaN}));
  in.tensors.emplace("b", hostTensor(t, {7}, {2.0, 2.0, -2.0, -2.0, 0.0, 2.0, 1.0}));
  checkValues(evalOne(g, in).value, {1.5, 0.5, -0.5, -1.5, kNaN, 0.0, kNaN});
}

TEST_CASE("comparisons give bool and NaN compares false except ne", "[reference]") {
  DType t = GENERATE(DType::F32, DType::F16, DType::BF16);
  INFO("dtype " << dtypeName(t));
  std::vector<double> as, bs;
  allPairs(kPairSamples, as, bs);
  const int64_t n = static_cast<int64_t>(as.size());
  struct Cmp {
    Op op;
    bool (*want)(double, double);
  };
  const Cmp cmps[] = {
      {Op::Eq, [](double a, double b) { return a == b; }},
      {Op::Ne, [](double a, double b) { return a != b; }},
      {Op::Lt, [](double a, double b) { return a < b; }},
      {Op::Le, [](double a, double b) { return a <= b; }},
      {Op::Gt, [](double a, double b) { return a > b; }},
      {Op::Ge, [](double a, double b) { return a >= b; }},
  };
  for (const Cmp& c : cmps) {
    INFO(opName(c.op));
    Graph g;
    Tensor a = g.input("a", t, {n});
    Tensor b = g.input("b", t, {n});
    g.output("y", binary(c.op, a, b));
    EvalInputs in;
    in.tensors.emplace("a", hostTensor(t, {n}, as));
    in.tensors.emplace("b", hostTensor(t, {n}, bs));
    EvalOutput out = evalOne(g, in);
    REQUIRE(out.value.dtype() == DType::Bool);
    for (int64_t i = 0; i < n; ++i) {
      INFO(as[i] << " vs " << bs[i]);
      CHECK(out.value.getInt(i) == (c.want(as[i], bs[i]) ? 1 : 0));
    }
  }
}

TEST_CASE("comparisons of mixed dtypes compare in the promoted type", "[reference]") {
  Graph g;
  Tensor i = g.input("i", DType::I32, {2});
  Tensor f = g.input("f", DType::F32, {2});
  Tensor h = g.input("h", DType::BF16, {2});
  g.output("int_lt_float", i < f);
  g.output("bf16_eq_f32", h == f);
  EvalInputs in;
  in.tensors.emplace("i", hostInts(DType::I32, {2}, {3, 1}));
  in.tensors.emplace("f", hostTensor(DType::F32, {2}, {3.5, 1.0 + 0x1p-7 + 0x1p-20}));
  in.tensors.emplace("h", hostTensor(DType::BF16, {2}, {3.5, 1.0 + 0x1p-7}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {1, 1});  // 3 < 3.5 and 1 < 1.0078: not compared as ints
  checkInts(outs[1].value, {1, 0});  // the f32 value is not rounded to bf16
}

TEST_CASE("logical and/or treat any nonzero, NaN included, as true", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::F32, {4});
  Tensor b = g.input("b", DType::I32, {4});
  g.output("and", logical_and(a, b));
  g.output("or", logical_or(a, b));
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(DType::F32, {4}, {kNaN, -0.0, 0.5, 0.0}));
  in.tensors.emplace("b", hostInts(DType::I32, {4}, {2, 1, 0, 0}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {1, 0, 0, 0});
  checkInts(outs[1].value, {1, 1, 1, 0});
}

TEST_CASE("i32 arithmetic wraps around like two's complement", "[reference]") {
  const int64_t kMax = std::numeric_limits<int32_t>::max();
  const int64_t kMin = std::numeric_limits<int32_t>::min();
  Graph g;
  Tensor a = g.input("a", DType::I32, {3});
  Tensor b = g.input("b", DType::I32, {3});
  g.output("add", a + b);
  g.output("sub", a - b);
  g.output("mul", a * b);
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I32, {3}, {kMax, kMin, 65536}));
  in.tensors.emplace("b", hostInts(DType::I32, {3}, {1, 1, 65536}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  for (const EvalOutput& o : outs) CHECK(o.value.dtype() == DType::I32);
  checkInts(outs[0].value, {kMin, kMin + 1, 131072});
  checkInts(outs[1].value, {kMax - 1, kMax, 0});
  checkInts(outs[2].value, {kMax, kMin, 0});  // 2^16 * 2^16 = 2^32 wraps to 0
}

TEST_CASE("i64 arithmetic is exact beyond 2^53", "[reference]") {
  const int64_t big = (int64_t{1} << 53) + 1;
  Graph g;
  Tensor a = g.input("a", DType::I64, {2});
  g.output("y", a + 2);
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I64, {2}, {big, std::numeric_limits<int64_t>::max()}));
  checkInts(evalOne(g, in).value, {big + 2, std::numeric_limits<int64_t>::min() + 1});
}

TEST_CASE("integer binary ops: maximum, minimum, Python remainder and exact pow", "[reference]") {
  DType t = GENERATE(DType::I32, DType::I64);
  INFO("dtype " << dtypeName(t));
  const int64_t kMin32 = std::numeric_limits<int32_t>::min();
  std::vector<int64_t> as = {7, -7, 7, -7, 5, kMin32, 2, -3, 2, 1, -1, -1, 0, 2};
  std::vector<int64_t> bs = {3, 3, -3, -3, 0, -1, 10, 3, -1, -5, -3, -2, 0, 31};
  const int64_t n = static_cast<int64_t>(as.size());
  Graph g;
  Tensor a = g.input("a", t, {n});
  Tensor b = g.input("b", t, {n});
  g.output("max", maximum(a, b));
  g.output("min", minimum(a, b));
  g.output("rem", kiln::remainder(a, b));
  g.output("pow", kiln::pow(a, b));
  EvalInputs in;
  in.tensors.emplace("a", hostInts(t, {n}, as));
  in.tensors.emplace("b", hostInts(t, {n}, bs));
  std::vector<EvalOutput> outs = evaluate(g, in);
  for (const EvalOutput& o : outs) CHECK(o.value.dtype() == t);
  std::vector<int64_t> mx, mn;
  for (int64_t i = 0; i < n; ++i) {
    mx.push_back(std::max(as[i], bs[i]));
    mn.push_back(std::min(as[i], bs[i]));
  }
  checkInts(outs[0].value, mx);
  checkInts(outs[1].value, mn);
  // x % 0 is 0; INT_MIN % -1 is 0.
  checkInts(outs[2].value, {1, 2, -2, -1, 0, 0, 2, 0, 0, -4, -1, -1, 0, 2});
  // 2^31 wraps to INT32_MIN in i32; a negative exponent gives 0 unless |base| == 1.
  int64_t twoTo31 = t == DType::I32 ? kMin32 : (int64_t{1} << 31);
  checkInts(outs[3].value, {343, -343, 0, 0, 1, 0, 1024, -27, 0, 1, -1, 1, 1, twoTo31});
}

TEST_CASE("i64 pow wraps modulo 2^64", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::I64, {1});
  g.output("y", kiln::pow(a, 40));
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I64, {1}, {3}));
  checkInts(evalOne(g, in).value, {-6289078614652622815LL});  // 3^40 mod 2^64, signed
}

TEST_CASE("integer remainder of i32 by zero gives zero", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::I32, {2});
  g.output("y", a % 0);
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I32, {2}, {5, -5}));
  checkInts(evalOne(g, in).value, {0, 0});
}

TEST_CASE("integer division is true division in f32", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::I32, {3});
  Tensor b = g.input("b", DType::I32, {3});
  Tensor y = a / b;
  REQUIRE(y.dtype() == DType::F32);
  g.output("y", y);
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I32, {3}, {7, -7, 1}));
  in.tensors.emplace("b", hostInts(DType::I32, {3}, {2, 2, 3}));
  EvalOutput out = evalOne(g, in);
  checkValues(out.value, {3.5, -3.5, roundToDType(1.0 / 3.0, DType::F32)});
  CHECK(out.exact[2] == 1.0 / 3.0);
}

TEST_CASE("an integer operand of a float op converts exactly", "[reference]") {
  Graph g;
  Tensor i = g.input("i", DType::I32, {1});
  Tensor f = g.input("f", DType::F32, {1});
  Tensor y = i + f;
  REQUIRE(y.dtype() == DType::F32);
  g.output("y", y);
  EvalInputs in;
  in.tensors.emplace("i", hostInts(DType::I32, {1}, {16777217}));  // 2^24 + 1: not an f32
  in.tensors.emplace("f", hostTensor(DType::F32, {1}, {0.0}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.exact[0] == 16777217.0);
  CHECK(out.value.get(0) == 16777216.0);
}

// ============================================================ where, fma

TEST_CASE("where picks by condition with broadcasting", "[reference]") {
  Graph g;
  Tensor c = g.input("c", DType::Bool, {3, 1});
  Tensor a = g.input("a", DType::F32, {1, 4});
  g.output("y", where(c, a, -1.0));
  EvalInputs in;
  in.tensors.emplace("c", hostInts(DType::Bool, {3, 1}, {1, 0, 1}));
  in.tensors.emplace("a", hostTensor(DType::F32, {1, 4}, {10, 20, 30, 40}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.value.shape() == std::vector<int64_t>{3, 4});
  checkValues(out.value, {10, 20, 30, 40, -1, -1, -1, -1, 10, 20, 30, 40});
}

TEST_CASE("where on integers keeps the integer dtype", "[reference]") {
  Graph g;
  Tensor c = g.input("c", DType::Bool, {3});
  Tensor a = g.input("a", DType::I64, {3});
  Tensor b = g.input("b", DType::I64, {3});
  g.output("y", where(c, a, b));
  const int64_t big = (int64_t{1} << 60) + 3;
  EvalInputs in;
  in.tensors.emplace("c", hostInts(DType::Bool, {3}, {1, 0, 1}));
  in.tensors.emplace("a", hostInts(DType::I64, {3}, {big, 2, 3}));
  in.tensors.emplace("b", hostInts(DType::I64, {3}, {-1, -2, -3}));
  checkInts(evalOne(g, in).value, {big, -2, 3});
}

TEST_CASE("fma rounds once", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1});
  Tensor third = x / 3.0;  // an fp64 intermediate: 1/3 in double
  g.output("y", kiln::fma(third, third, -(third * third)));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {1}, {1.0}));
  EvalOutput out = evalOne(g, in);
  double t = 1.0 / 3.0;
  double want = std::fma(t, t, -(t * t));  // the rounding error of t * t
  REQUIRE(want != 0.0);
  CHECK(out.exact[0] == want);
  CHECK(out.value.get(0) == roundToDType(want, DType::F32));
}

TEST_CASE("fma on integers wraps", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::I32, {2});
  g.output("y", kiln::fma(a, a, 1));
  EvalInputs in;
  in.tensors.emplace("a", hostInts(DType::I32, {2}, {3, 65536}));
  checkInts(evalOne(g, in).value, {10, 1});
}

// ============================================================ rounding

TEST_CASE("outputs round to the output dtype, ties to even, NaN and inf kept", "[reference]") {
  struct Case {
    DType t;
    double ulpAtOne;
  };
  Case c = GENERATE(Case{DType::BF16, 0x1p-7}, Case{DType::F16, 0x1p-10});
  INFO("dtype " << dtypeName(c.t));
  const double u = c.ulpAtOne;
  Graph g;
  Tensor a = g.input("a", c.t, {5});
  Tensor b = g.input("b", c.t, {5});
  g.output("y", a + b);
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(c.t, {5}, {1.0, 1.0 + u, 1.0, kNaN, kInf}));
  in.tensors.emplace("b", hostTensor(c.t, {5}, {u / 2, u / 2, u / 2 + u / 4, 1.0, 1.0}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.value.dtype() == c.t);
  // 1 + u/2: tie, to even (1); 1 + u + u/2: tie, to even (1 + 2u); above the tie: up.
  checkValues(out.value, {1.0, 1.0 + 2 * u, 1.0 + u, kNaN, kInf});
  CHECK(out.exact[0] == 1.0 + u / 2);
  CHECK(out.exact[1] == 1.0 + u + u / 2);
}

TEST_CASE("f16 outputs overflow to infinity", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::F16, {2});
  g.output("y", a * 2.0);
  EvalInputs in;
  in.tensors.emplace("a", hostTensor(DType::F16, {2}, {60000.0, -60000.0}));
  EvalOutput out = evalOne(g, in);
  checkValues(out.value, {kInf, -kInf});
  CHECK(out.exact[0] == 120000.0);
}

TEST_CASE("float intermediates are not rounded to their dtype", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {1});
  Tensor y = g.input("y", DType::BF16, {1});
  g.output("z", (x + y) - y);  // (1 + 2^-8) is no bf16, but the sum is kept in fp64
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::BF16, {1}, {1.0}));
  in.tensors.emplace("y", hostTensor(DType::BF16, {1}, {0x1p-8}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.exact[0] == 1.0);  // rounding the sum would give 1 - 2^-8
  CHECK(out.value.get(0) == 1.0);
}

// ============================================================ casts

TEST_CASE("casting to a narrower float rounds the intermediate", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4});
  g.output("y", cast(cast(x, DType::BF16), DType::F32));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {4}, {1.0 + 0x1p-8, 1.0 + 3 * 0x1p-8, kNaN, -kInf}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.value.dtype() == DType::F32);
  checkValues(out.value, {1.0, 1.0 + 0x1p-6, kNaN, -kInf});
  CHECK(out.exact[0] == 1.0);
}

TEST_CASE("casting floats to integers truncates toward zero and wraps", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {7});
  g.output("i32", cast(x, DType::I32));
  g.output("i64", cast(x, DType::I64));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {7}, {-2.7, 2.7, -0.5, kNaN, kInf, 3e9, -2.5e9}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {-2, 2, 0, 0, 0, 3000000000LL - 4294967296LL,
                            -2500000000LL + 4294967296LL});
  checkInts(outs[1].value, {-2, 2, 0, 0, 0, 3000000000LL, -2500000000LL});
}

TEST_CASE("casting anything to bool tests for nonzero", "[reference]") {
  Graph g;
  Tensor f = g.input("f", DType::BF16, {5});
  Tensor i = g.input("i", DType::I32, {3});
  g.output("fb", cast(f, DType::Bool));
  g.output("ib", cast(i, DType::Bool));
  EvalInputs in;
  in.tensors.emplace("f", hostTensor(DType::BF16, {5}, {0.0, -0.0, 0.5, kNaN, -kInf}));
  in.tensors.emplace("i", hostInts(DType::I32, {3}, {0, 7, -1}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {0, 0, 1, 1, 1});
  checkInts(outs[1].value, {0, 1, 1});
}

TEST_CASE("casting between integers and from bool", "[reference]") {
  Graph g;
  Tensor w = g.input("w", DType::I64, {3});
  Tensor b = g.input("b", DType::Bool, {2});
  Tensor n = g.input("n", DType::I32, {4});
  g.output("narrow", cast(w, DType::I32));
  g.output("bf", cast(b, DType::F32));
  g.output("tobf16", cast(n, DType::BF16));
  g.output("tof32", cast(n, DType::F32));
  EvalInputs in;
  in.tensors.emplace("w", hostInts(DType::I64, {3}, {(int64_t{1} << 32) + 5, int64_t{1} << 31, -1}));
  in.tensors.emplace("b", hostInts(DType::Bool, {2}, {1, 0}));
  in.tensors.emplace("n", hostInts(DType::I32, {4}, {257, 259, 16777217, -3}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {5, std::numeric_limits<int32_t>::min(), -1});
  checkValues(outs[1].value, {1.0, 0.0});
  // 257 and 259 are bf16 ties: to the even neighbours 256 and 260.
  checkValues(outs[2].value, {256.0, 260.0, 16777216.0, -3.0});
  checkValues(outs[3].value, {257.0, 259.0, 16777216.0, -3.0});
}

// ============================================================ broadcasting

TEST_CASE("elementwise ops broadcast rows, columns and scalars", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {3, 4});
  Tensor row = g.input("row", DType::F32, {4});
  Tensor col = g.input("col", DType::F32, {3, 1});
  Tensor c = g.input("c", DType::F32, {1, 4});
  g.output("plus_row", x + row);
  g.output("times_col", x * col);
  g.output("minus_scalar", x - g.constant(10.0, DType::F32));
  g.output("outer", col * c);
  std::vector<double> xs, rs = {1, 2, 3, 4}, cs = {10, 20, 30}, c4 = {-1, 0, 1, 2};
  for (int i = 0; i < 12; ++i) xs.push_back(i * 0.5);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {3, 4}, xs));
  in.tensors.emplace("row", hostTensor(DType::F32, {4}, rs));
  in.tensors.emplace("col", hostTensor(DType::F32, {3, 1}, cs));
  in.tensors.emplace("c", hostTensor(DType::F32, {1, 4}, c4));
  std::vector<EvalOutput> outs = evaluate(g, in);
  std::vector<double> plusRow, timesCol, minus, outer;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      plusRow.push_back(xs[i * 4 + j] + rs[j]);
      timesCol.push_back(xs[i * 4 + j] * cs[i]);
      minus.push_back(xs[i * 4 + j] - 10);
      outer.push_back(cs[i] * c4[j]);
    }
  for (const EvalOutput& o : outs) CHECK(o.value.shape() == std::vector<int64_t>{3, 4});
  checkValues(outs[0].value, plusRow);
  checkValues(outs[1].value, timesCol);
  checkValues(outs[2].value, minus);
  checkValues(outs[3].value, outer);
}

TEST_CASE("dynamic dims take their size from the bindings", "[reference]") {
  int64_t n = GENERATE(0, 1, 3);
  INFO("N = " << n);
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 2});
  Tensor b = g.input("b", DType::F32, {2});
  g.output("y", x + b);
  EvalInputs in;
  in.dims["N"] = n;
  std::vector<double> xs;
  for (int64_t i = 0; i < 2 * n; ++i) xs.push_back(static_cast<double>(i));
  in.tensors.emplace("x", hostTensor(DType::F32, {n, 2}, xs));
  in.tensors.emplace("b", hostTensor(DType::F32, {2}, {100, 200}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.value.shape() == std::vector<int64_t>{n, 2});
  std::vector<double> want;
  for (int64_t i = 0; i < 2 * n; ++i) want.push_back(xs[i] + (i % 2 ? 200 : 100));
  checkValues(out.value, want);
}

// ============================================================ reductions

namespace {

// Reduces x (row-major, `shape`) over `axes` the slow and obvious way: every
// input element is sent to its output slot, then `fold` runs per slot.
template <class Fold>
std::vector<double> naiveReduce(const std::vector<double>& x, const std::vector<int64_t>& shape,
                                const std::vector<int64_t>& axes, Fold fold) {
  std::vector<int64_t> outShape;
  for (size_t d = 0; d < shape.size(); ++d)
    if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
      outShape.push_back(shape[d]);
  int64_t numOut = 1;
  for (int64_t d : outShape) numOut *= d;
  std::vector<std::vector<double>> slots(numOut);
  std::vector<int64_t> idx(shape.size(), 0);
  for (double v : x) {
    int64_t o = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) == axes.end())
        o = o * shape[d] + idx[d];
    slots[o].push_back(v);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  std::vector<double> out;
  for (const auto& s : slots) out.push_back(fold(s));
  return out;
}

}  // namespace

TEST_CASE("float reductions over any axes, with and without keepdim", "[reference]") {
  std::vector<int64_t> axes = GENERATE(std::vector<int64_t>{0}, std::vector<int64_t>{1},
                                       std::vector<int64_t>{2}, std::vector<int64_t>{0, 2},
                                       std::vector<int64_t>{0, 1, 2});
  bool keepdim = GENERATE(false, true);
  INFO("axes " << axes.size() << " starting at " << axes[0] << ", keepdim " << keepdim);
  const std::vector<int64_t> shape = {2, 3, 4};
  std::vector<double> xs;
  for (int i = 0; i < 24; ++i) xs.push_back(std::sin(i * 1.7) * 3.0);

  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 3, 4});
  Axes ax(axes);
  g.output("sum", kiln::sum(x, ax, keepdim));
  g.output("mean", kiln::mean(x, ax, keepdim));
  g.output("max", kiln::max(x, ax, keepdim));
  g.output("min", kiln::min(x, ax, keepdim));
  g.output("prod", kiln::prod(x, ax, keepdim));
  g.output("var0", kiln::var(x, ax, 0, keepdim));
  g.output("var1", kiln::var(x, ax, 1, keepdim));
  g.output("std1", kiln::std(x, ax, 1, keepdim));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, shape, xs));
  const HostTensor& stored = in.tensors.at("x");
  std::vector<double> xv = valuesOf(stored);
  std::vector<EvalOutput> outs = evaluate(g, in);

  std::vector<int64_t> wantShape;
  for (int64_t d = 0; d < 3; ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced) wantShape.push_back(shape[d]);
    else if (keepdim) wantShape.push_back(1);
  }
  for (const EvalOutput& o : outs) CHECK(o.value.shape() == wantShape);

  auto sum = [](const std::vector<double>& s) {
    double a = 0;
    for (double v : s) a += v;
    return a;
  };
  auto mean = [&](const std::vector<double>& s) { return sum(s) / s.size(); };
  auto var = [&](const std::vector<double>& s, int corr) {
    double m = mean(s), a = 0;
    for (double v : s) a += (v - m) * (v - m);
    return a / (static_cast<double>(s.size()) - corr);
  };
  std::vector<std::vector<double>> want = {
      naiveReduce(xv, shape, axes, sum),
      naiveReduce(xv, shape, axes, mean),
      naiveReduce(xv, shape, axes, [](const std::vector<double>& s) { return *std::max_element(s.begin(), s.end()); }),
      naiveReduce(xv, shape, axes, [](const std::vector<double>& s) { return *std::min_element(s.begin(), s.end()); }),
      naiveReduce(xv, shape, axes, [](const std::vector<double>& s) {
        double p = 1;
        for (double v : s) p *= v;
        return p;
      }),
      naiveReduce(xv, shape, axes, [&](const std::vector<double>& s) { return var(s, 0); }),
      naiveReduce(xv, shape, axes, [&](const std::vector<double>& s) { return var(s, 1); }),
      naiveReduce(xv, shape, axes, [&](const std::vector<double>& s) { return std::sqrt(var(s, 1)); }),
  };
  for (size_t k = 0; k < outs.size(); ++k) {
    INFO(outs[k].name);
    REQUIRE(outs[k].exact.size() == want[k].size());
    for (size_t i = 0; i < want[k].size(); ++i) {
      INFO("element " << i);
      CHECK(outs[k].exact[i] == Approx(want[k][i]).epsilon(1e-12).margin(1e-12));
      CHECK(outs[k].value.get(i) == roundToDType(outs[k].exact[i], DType::F32));
    }
  }
}

TEST_CASE("max, min, argmax and argmin propagate NaN", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 4});
  g.output("max", kiln::max(x, 1));
  g.output("min", kiln::min(x, 1));
  g.output("argmax", argmax(x, 1));
  g.output("argmin", argmin(x, 1));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {2, 4}, {1, kNaN, 3, kNaN, 1, 5, -2, 0}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkValues(outs[0].value, {kNaN, 5});
  checkValues(outs[1].value, {kNaN, -2});
  CHECK(outs[2].value.dtype() == DType::I64);
  checkInts(outs[2].value, {1, 1});  // the first NaN counts as the extreme
  checkInts(outs[3].value, {1, 2});
}

TEST_CASE("argmax and argmin pick the first of tied extremes", "[reference]") {
  DType t = GENERATE(DType::F32, DType::BF16, DType::I32, DType::I64);
  INFO("dtype " << dtypeName(t));
  Graph g;
  Tensor x = g.input("x", t, {3, 4});
  g.output("argmax1", argmax(x, 1));
  g.output("argmin1", argmin(x, -1, true));
  g.output("argmax0", argmax(x, 0));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(t, {3, 4}, {1, 5, 5, 2,  //
                                                 3, 1, 1, 3,  //
                                                 7, 7, 7, 7}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {1, 0, 0});
  CHECK(outs[1].value.shape() == std::vector<int64_t>{3, 1});
  checkInts(outs[1].value, {0, 1, 0});
  checkInts(outs[2].value, {2, 2, 2, 2});
}

TEST_CASE("integer sums and products accumulate in i64", "[reference]") {
  const int64_t kMax = std::numeric_limits<int32_t>::max();
  Graph g;
  Tensor x = g.input("x", DType::I32, {2, 2});
  Tensor b = g.input("b", DType::Bool, {5});
  Tensor s = kiln::sum(x, 1);
  Tensor p = kiln::prod(x, 1);
  REQUIRE(s.dtype() == DType::I64);
  g.output("sum", s);
  g.output("prod", p);
  g.output("count", kiln::sum(b));
  g.output("max", kiln::max(x, 0));
  EvalInputs in;
  in.tensors.emplace("x", hostInts(DType::I32, {2, 2}, {kMax, 1, 65536, -65536}));
  in.tensors.emplace("b", hostInts(DType::Bool, {5}, {1, 0, 1, 1, 0}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkInts(outs[0].value, {kMax + 1, 0});
  checkInts(outs[1].value, {kMax, -(int64_t{1} << 32)});
  CHECK(outs[2].value.dtype() == DType::I64);
  CHECK(outs[2].value.shape().empty());
  checkInts(outs[2].value, {3});
  CHECK(outs[3].value.dtype() == DType::I32);
  checkInts(outs[3].value, {kMax, 1});
}

TEST_CASE("sums are compensated, so cancellation and long rows stay exact", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {3});
  Tensor tenth = g.input("tenth", DType::F32, {1000000});
  g.output("cancel", kiln::sum(x));
  g.output("long", kiln::sum(tenth));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {3}, {1e16, 1.0, -1e16}));
  HostTensor t(DType::F32, {1000000});
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, 0.1);
  in.tensors.emplace("tenth", std::move(t));
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].exact[0] == 1.0);  // a plain left-to-right sum gives 0
  // f32(0.1) = 13421773 * 2^-27, so a million of them sum exactly to:
  CHECK(outs[1].exact[0] == 13421773e6 * 0x1p-27);
}

TEST_CASE("var and std with a correction of N or more give NaN", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {4});
  g.output("v0", kiln::var(x, {}, 0));
  g.output("v1", kiln::var(x, {}, 1));
  g.output("v4", kiln::var(x, {}, 4));
  g.output("s5", kiln::std(x, {}, 5));
  g.output("s0", kiln::std(x, {}, 0));
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {4}, {1, 2, 3, 4}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].exact[0] == 1.25);  // mean 2.5, squared deviations sum to 5
  CHECK(outs[1].exact[0] == 5.0 / 3.0);
  CHECK(std::isnan(outs[2].exact[0]));
  CHECK(std::isnan(outs[3].exact[0]));
  CHECK(outs[4].exact[0] == std::sqrt(1.25));
}

TEST_CASE("reductions over an empty axis give their identity or NaN", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, "N"});
  g.output("sum", kiln::sum(x, 1));
  g.output("prod", kiln::prod(x, 1));
  g.output("mean", kiln::mean(x, 1));
  g.output("max", kiln::max(x, 1));
  EvalInputs in;
  in.dims["N"] = 0;
  in.tensors.emplace("x", HostTensor(DType::F32, {2, 0}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkValues(outs[0].value, {0, 0});
  checkValues(outs[1].value, {1, 1});
  checkValues(outs[2].value, {kNaN, kNaN});
  checkValues(outs[3].value, {kNaN, kNaN});
}

TEST_CASE("max of integers over an empty axis is an error", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::I32, {"N"});
  g.output("max", kiln::max(x));
  EvalInputs in;
  in.dims["N"] = 0;
  in.tensors.emplace("x", HostTensor(DType::I32, {0}));
  CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("max") && Catch::Contains("empty"));
}

// ============================================================ matmul

TEST_CASE("matmul with transposes and broadcast batch dims matches a naive loop",
          "[reference]") {
  bool transA = GENERATE(false, true);
  bool transB = GENERATE(false, true);
  INFO("transA " << transA << ", transB " << transB);
  const int64_t M = 3, K = 5, N = 4;
  // a: [2, 1, M, K] (or [2, 1, K, M]); b: [3, K, N] (or [3, N, K]) -> [2, 3, M, N]
  std::vector<int64_t> aShape = {2, 1, transA ? K : M, transA ? M : K};
  std::vector<int64_t> bShape = {3, transB ? N : K, transB ? K : N};
  Graph g;
  Tensor a = g.input("a", DType::F32, {aShape[0], aShape[1], aShape[2], aShape[3]});
  Tensor b = g.input("b", DType::F32, {bShape[0], bShape[1], bShape[2]});
  g.output("c", matmul(a, b, {transA, transB}));
  EvalInputs in = randomInputs(g, {}, 42);
  EvalOutput out = evalOne(g, in);
  REQUIRE(out.value.shape() == std::vector<int64_t>{2, 3, M, N});

  const HostTensor& A = in.tensors.at("a");
  const HostTensor& B = in.tensors.at("b");
  for (int64_t p = 0; p < 2; ++p)
    for (int64_t q = 0; q < 3; ++q)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double acc = 0;
          for (int64_t k = 0; k < K; ++k) {
            int64_t ai = p * M * K + (transA ? k * M + m : m * K + k);
            int64_t bi = q * K * N + (transB ? n * K + k : k * N + n);
            acc += A.get(ai) * B.get(bi);
          }
          int64_t o = ((p * 3 + q) * M + m) * N + n;
          INFO("c[" << p << "," << q << "," << m << "," << n << "]");
          CHECK(out.exact[o] == Approx(acc).epsilon(1e-14).margin(1e-14));
          CHECK(out.value.get(o) == roundToDType(out.exact[o], DType::F32));
        }
}

TEST_CASE("a bf16 matmul accumulates in fp64 and rounds once", "[reference]") {
  Graph g;
  Tensor a = g.input("a", DType::BF16, {1, 3});
  Tensor b = g.input("b", DType::BF16, {3, 1});
  g.output("c", matmul(a, b));
  EvalInputs in;
  // 1 + 2^-9 + 2^-9: each partial sum would be lost to bf16 rounding.
  in.tensors.emplace("a", hostTensor(DType::BF16, {1, 3}, {1.0, 0x1p-9, 0x1p-9}));
  in.tensors.emplace("b", hostTensor(DType::BF16, {3, 1}, {1.0, 1.0, 1.0}));
  EvalOutput out = evalOne(g, in);
  CHECK(out.exact[0] == 1.0 + 0x1p-8);
  CHECK(out.value.get(0) == 1.0);  // a tie, to even
}

TEST_CASE("a tf32 matmul rounds each operand to 10 mantissa bits, ties away from zero", "[reference]") {
  for (bool tf32 : {false, true}) {
    INFO("tf32 " << tf32);
    Graph g;
    Tensor a = g.input("a", DType::F32, {1, 3});
    Tensor b = g.input("b", DType::F32, {3, 1});
    g.output("c", matmul(a, b, {.tf32 = tf32}));
    EvalInputs in;
    // 1 + 2^-12 rounds down to 1; 1 + 2^-11 is a tie and rounds away to
    // 1 + 2^-10; -(1 + 2^-11) to -(1 + 2^-10).
    in.tensors.emplace("a", hostTensor(DType::F32, {1, 3}, {1.0 + 0x1p-12, 1.0 + 0x1p-11, -(1.0 + 0x1p-11)}));
    in.tensors.emplace("b", hostTensor(DType::F32, {3, 1}, {1.0, 1.0, 0.5}));
    EvalOutput out = evalOne(g, in);
    const double want = tf32 ? 1.0 + (1.0 + 0x1p-10) - 0.5 * (1.0 + 0x1p-10)
                             : (1.0 + 0x1p-12) + (1.0 + 0x1p-11) - 0.5 * (1.0 + 0x1p-11);
    CHECK(out.exact[0] == want);
  }
  // Only f32 operands take tf32.
  Graph h;
  CHECK_THROWS_WITH(matmul(h.input("a", DType::BF16, {2, 2}), h.input("b", DType::BF16, {2, 2}), {.tf32 = true}),
                    Catch::Contains("tf32 applies to f32 operands"));
}

// ============================================================ views, iota

TEST_CASE("reshape keeps row-major order", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::I32, {2, 6});
  Tensor y = reshape(x, {3, -1});
  g.output("y", y);
  std::vector<int64_t> xs;
  for (int i = 0; i < 12; ++i) xs.push_back(i * 3 - 5);
  EvalInputs in;
  in.tensors.emplace("x", hostInts(DType::I32, {2, 6}, xs));
  EvalOutput out = evalOne(g, in);
  CHECK(out.value.shape() == std::vector<int64_t>{3, 4});
  checkInts(out.value, xs);
}

TEST_CASE("permute and transpose move elements to their new positions", "[reference]") {
  DType t = GENERATE(DType::F32, DType::I64);
  INFO("dtype " << dtypeName(t));
  Graph g;
  Tensor x = g.input("x", t, {2, 3, 4});
  g.output("p", permute(x, {2, 0, 1}));
  g.output("t", transpose(x, 0, 2));
  std::vector<double> xs;
  for (int i = 0; i < 24; ++i) xs.push_back(i);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(t, {2, 3, 4}, xs));
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].value.shape() == std::vector<int64_t>{4, 2, 3});
  CHECK(outs[1].value.shape() == std::vector<int64_t>{4, 3, 2});
  std::vector<double> p, tr;
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) p.push_back(xs[i * 12 + j * 4 + k]);  // p[k][i][j] = x[i][j][k]
  for (int k = 0; k < 4; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i) tr.push_back(xs[i * 12 + j * 4 + k]);  // t[k][j][i] = x[i][j][k]
  checkValues(outs[0].value, p);
  checkValues(outs[1].value, tr);
}

TEST_CASE("expand repeats size-1 and missing dims", "[reference]") {
  Graph g;
  Tensor col = g.input("col", DType::F32, {3, 1});
  Tensor row = g.input("row", DType::F32, {4});
  g.output("c", expand(col, {3, 4}));
  g.output("r", broadcast_to(row, {2, 4}));
  EvalInputs in;
  in.tensors.emplace("col", hostTensor(DType::F32, {3, 1}, {1, 2, 3}));
  in.tensors.emplace("row", hostTensor(DType::F32, {4}, {5, 6, 7, 8}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  checkValues(outs[0].value, {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3});
  checkValues(outs[1].value, {5, 6, 7, 8, 5, 6, 7, 8});
}

TEST_CASE("slice takes start, end and step along one axis", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2, 10});
  g.output("stepped", slice(x, 1, 1, 8, 3));
  g.output("tail", slice(x, -1, -3, 100));
  g.output("rows", slice(x, 0, 1, 2) * 2.0);
  std::vector<double> xs;
  for (int i = 0; i < 20; ++i) xs.push_back(i);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {2, 10}, xs));
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].value.shape() == std::vector<int64_t>{2, 3});
  checkValues(outs[0].value, {1, 4, 7, 11, 14, 17});
  CHECK(outs[1].value.shape() == std::vector<int64_t>{2, 3});
  checkValues(outs[1].value, {7, 8, 9, 17, 18, 19});
  checkValues(outs[2].value, {20, 22, 24, 26, 28, 30, 32, 34, 36, 38});
}

TEST_CASE("iota counts along its axis", "[reference]") {
  Graph g;
  Tensor cols = iota(g, {2, 3}, 1);
  Tensor rows = iota(g, {"N", 3}, 0, DType::F32);
  g.output("cols", cols);
  g.output("rows", rows);
  EvalInputs in;
  in.dims["N"] = 2;
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].value.dtype() == DType::I64);
  checkInts(outs[0].value, {0, 1, 2, 0, 1, 2});
  CHECK(outs[1].value.dtype() == DType::F32);
  checkValues(outs[1].value, {0, 0, 0, 1, 1, 1});
}

// ============================================================ parameters

TEST_CASE("runtime scalars are rounded to their dtype", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {1});
  Tensor s = g.scalar("s");
  Tensor k = g.scalar("k", DType::I32);
  g.output("scaled", x * s);
  g.output("shifted", x + k);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {1}, {1.0}));
  in.scalars["s"] = 0.1;
  in.scalars["k"] = 7.9;
  std::vector<EvalOutput> outs = evaluate(g, in);
  CHECK(outs[0].exact[0] == static_cast<double>(0.1f));
  CHECK(outs[1].exact[0] == 8.0);  // 7.9 truncates to 7
}

TEST_CASE("constants take their value in their dtype", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::I32, {2});
  g.output("f", x + g.constant(0.1, DType::BF16));
  g.output("i", x * g.constant(3, DType::I32));
  EvalInputs in;
  in.tensors.emplace("x", hostInts(DType::I32, {2}, {1, -2}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  double c = roundToDType(0.1, DType::BF16);
  CHECK(outs[0].exact[0] == 1.0 + c);
  checkInts(outs[1].value, {3, -6});
}

TEST_CASE("a node may be several outputs, each with its own name", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {2});
  Tensor y = x * 2.0;
  g.output("first", y);
  g.output("second", y);
  g.output("third", y + 1.0);
  EvalInputs in;
  in.tensors.emplace("x", hostTensor(DType::F32, {2}, {1, 2}));
  std::vector<EvalOutput> outs = evaluate(g, in);
  REQUIRE(outs.size() == 3);
  CHECK(outs[0].name == "first");
  CHECK(outs[1].name == "second");
  checkValues(outs[0].value, {2, 4});
  checkValues(outs[1].value, {2, 4});
  checkValues(outs[2].value, {3, 5});
}

// ============================================================ validation

TEST_CASE("evaluate names a missing, mistyped or misshapen input", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 8});
  Tensor s = g.scalar("s");
  g.output("y", x * s);
  EvalInputs good;
  good.dims["N"] = 4;
  good.tensors.emplace("x", HostTensor(DType::F32, {4, 8}));
  good.scalars["s"] = 1.0;
  CHECK_NOTHROW(evaluate(g, good));

  SECTION("missing input") {
    EvalInputs in = good;
    in.tensors.clear();
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("input 'x'") && Catch::Contains("missing"));
  }
  SECTION("wrong dtype") {
    EvalInputs in = good;
    in.tensors["x"] = HostTensor(DType::BF16, {4, 8});
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'x'") && Catch::Contains("f32[N, 8]") &&
                                           Catch::Contains("bf16[4, 8]"));
  }
  SECTION("wrong shape for the bound dim") {
    EvalInputs in = good;
    in.tensors["x"] = HostTensor(DType::F32, {5, 8});
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'x'") && Catch::Contains("[4, 8]") &&
                                           Catch::Contains("[5, 8]"));
  }
  SECTION("unbound dim") {
    EvalInputs in = good;
    in.dims.clear();
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'N'") && Catch::Contains("not bound"));
  }
  SECTION("negative dim") {
    EvalInputs in = good;
    in.dims["N"] = -1;
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'N'") && Catch::Contains(">= 0"));
  }
  SECTION("unknown dim") {
    EvalInputs in = good;
    in.dims["M"] = 3;
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'M'"));
  }
  SECTION("missing scalar") {
    EvalInputs in = good;
    in.scalars.clear();
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("scalar 's'") && Catch::Contains("missing"));
  }
  SECTION("unknown tensor") {
    EvalInputs in = good;
    in.tensors.emplace("z", HostTensor(DType::F32, {1}));
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'z'") && Catch::Contains("not an input"));
  }
  SECTION("a scalar passed as a tensor") {
    EvalInputs in = good;
    in.tensors.emplace("s", HostTensor(DType::F32, {}));
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'s'") && Catch::Contains("runtime scalar"));
  }
  SECTION("unknown scalar") {
    EvalInputs in = good;
    in.scalars["t"] = 1.0;
    CHECK_THROWS_WITH(evaluate(g, in), Catch::Contains("'t'"));
  }
}

TEST_CASE("resolveShape substitutes bound dims and names an unbound one", "[reference]") {
  CHECK(resolveShape({"B", 3, "T"}, {{"B", 2}, {"T", 7}}) == std::vector<int64_t>{2, 3, 7});
  CHECK_THROWS_WITH(resolveShape({"B", 3}, {}), Catch::Contains("'B'"));
}

TEST_CASE("randomInputs fills every parameter within its range", "[reference]") {
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"N", 16});
  Tensor t = g.input("t", DType::I32, {32});
  Tensor w = g.input("w", DType::F32, {64});
  Tensor lr = g.scalar("lr");
  Tensor step = g.scalar("step", DType::I64);
  g.output("y", kiln::sum(x * lr) + kiln::sum(t) + kiln::sum(w) + step);
  EvalInputs in = randomInputs(g, {{"N", 3}}, 5, {{"w", {5.0, 6.0}}});
  REQUIRE(in.tensors.at("x").shape() == std::vector<int64_t>{3, 16});
  for (double v : valuesOf(in.tensors.at("x"))) {
    CHECK(v >= -1.0);
    CHECK(v < 1.0);
  }
  for (int64_t v : intsOf(in.tensors.at("t"))) {
    CHECK(v >= 0);
    CHECK(v < 8);
  }
  for (double v : valuesOf(in.tensors.at("w"))) {
    CHECK(v >= 5.0);
    CHECK(v < 6.0);
  }
  CHECK(in.scalars.at("lr") >= 0.5);
  CHECK(in.scalars.at("lr") < 1.0);
  CHECK(in.scalars.at("step") >= 1.0);
  CHECK(in.scalars.at("step") == std::trunc(in.scalars.at("step")));
  CHECK_NOTHROW(evaluate(g, in));

  EvalInputs again = randomInputs(g, {{"N", 3}}, 5, {{"w", {5.0, 6.0}}});
  CHECK(std::memcmp(in.tensors.at("x").data(), again.tensors.at("x").data(),
                    in.tensors.at("x").bytes()) == 0);
  EvalInputs other = randomInputs(g, {{"N", 3}}, 6, {{"w", {5.0, 6.0}}});
  CHECK(std::memcmp(in.tensors.at("x").data(), other.tensors.at("x").data(),
                    in.tensors.at("x").bytes()) != 0);

  CHECK_THROWS_WITH(randomInputs(g, {{"N", 3}}, 5, {{"wx", {0.0, 1.0}}}), Catch::Contains("'wx'"));
}

// ============================================================ scale

TEST_CASE("ten million elements evaluate in seconds", "[reference][slow]") {
  const int64_t n = 10'000'000;
  Graph g;
  Tensor x = g.input("x", DType::F32, {n});
  Tensor b = g.input("b", DType::F32, {1});
  g.output("y", kiln::exp(x) * 2.0 + x * b);
  EvalInputs in = randomInputs(g, {}, 3);
  auto start = std::chrono::steady_clock::now();
  std::vector<EvalOutput> outs = evaluate(g, in);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("took " << seconds << " s");
  CHECK(seconds < 20.0);  // generous: a Debug build; optimized builds take well under a second
  const HostTensor& xs = in.tensors.at("x");
  double bv = in.tensors.at("b").get(0);
  for (int64_t i : {int64_t{0}, n / 2, n - 1})
    CHECK(outs[0].exact[i] == Approx(std::exp(xs.get(i)) * 2.0 + xs.get(i) * bv).epsilon(1e-15));
}
