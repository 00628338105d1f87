// Internal: the per-element semantics of the reference evaluator, the value
// each elementwise op gives for one element (unary, binary, ternary, casts)
// plus the summation the reductions use. Floats compute in fp64, integers
// exactly in int64 with the node dtype's wrap-around (see reference.cpp for
// the value model). The evaluator (reference.cpp) and the host tensors
// (host_tensor.cpp) call these, and a constant-folding pass should too, so
// that it folds exactly as the oracle computes. Everything is inline.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::detail {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kInf = std::numeric_limits<double>::infinity();

// ------------------------------------------------------------ shapes

inline std::string dimsToString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

inline int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// ------------------------------------------------------------ integers and casts
//
// Casts: to a float dtype the exact value is rounded once (roundToDType in
// kiln/dtype.h); to an integer or bool dtype a float goes through floatToInt
// and an integer through wrapToDType.

// The integer value v as stored in `t`: i32 wraps modulo 2^32 (C++20
// conversions are modular), bool is v != 0.
inline int64_t wrapToDType(int64_t v, DType t) {
  switch (t) {
    case DType::I32: return static_cast<int32_t>(v);
    case DType::Bool: return v != 0 ? 1 : 0;
    default: return v;
  }
}

// Two's-complement arithmetic without signed-overflow UB.
inline int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// A float converted to an integer dtype like a C cast: truncated toward zero,
// then wrapped to the dtype (NaN and infinities give 0); bool is x != 0.
inline int64_t floatToInt(double x, DType t) {
  if (t == DType::Bool) return (x != 0.0 || std::isnan(x)) ? 1 : 0;
  if (!std::isfinite(x)) return 0;
  constexpr double k2to63 = 9223372036854775808.0;
  constexpr double k2to64 = 18446744073709551616.0;
  double m = std::fmod(std::trunc(x), k2to64);  // exact
  if (m >= k2to63) m -= k2to64;                 // exact (Sterbenz)
  else if (m < -k2to63) m += k2to64;
  return wrapToDType(static_cast<int64_t>(m), t);
}

// Round half to even, independent of the floating-point environment.
inline double roundHalfEven(double x) {
  if (!std::isfinite(x)) return x;
  double r = std::floor(x);
  double frac = x - r;  // exact for |x| < 2^52; 0 beyond
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0.0)) r += 1.0;
  return r == 0.0 ? std::copysign(0.0, x) : r;
}

// Exact integer power modulo 2^64; a negative exponent gives 0 unless the
// base is 1 or -1 (as 1/b^|e| truncates).
inline int64_t intPow(int64_t base, int64_t e) {
  if (e < 0) {
    if (base == 1) return 1;
    if (base == -1) return (e % 2 == 0) ? 1 : -1;
    return 0;
  }
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  for (uint64_t k = static_cast<uint64_t>(e); k; k >>= 1) {
    if (k & 1) result *= b;
    b *= b;
  }
  return static_cast<int64_t>(result);
}

// ------------------------------------------------------------ unary, binary

// Python-style remainder (the result has the divisor's sign), as torch
// computes it: fmod, then shift by b when the signs differ.
inline double floatRemainder(double a, double b) {
  double r = std::fmod(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
  return r;
}
inline int64_t intRemainder(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;  // x % 0 := 0 (torch raises); -1 avoids INT64_MIN UB
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

inline double unaryFloat(Op op, double x) {
  switch (op) {
    case Op::Neg: return -x;
    case Op::Abs: return std::fabs(x);
    case Op::Exp: return std::exp(x);
    case Op::Exp2: return std::exp2(x);
    case Op::Log: return std::log(x);
    case Op::Log2: return std::log2(x);
    case Op::Log1p: return std::log1p(x);
    case Op::Expm1: return std::expm1(x);
    case Op::Sqrt: return std::sqrt(x);
    case Op::Rsqrt: return 1.0 / std::sqrt(x);
    case Op::Reciprocal: return 1.0 / x;
    case Op::Sin: return std::sin(x);
    case Op::Cos: return std::cos(x);
    case Op::Tanh: return std::tanh(x);
    case Op::Sigmoid: return 1.0 / (1.0 + std::exp(-x));
    case Op::Erf: return std::erf(x);
    case Op::Relu: return std::isnan(x) ? x : (x > 0.0 ? x : 0.0);
    case Op::Floor: return std::floor(x);
    case Op::Ceil: return std::ceil(x);
    case Op::Round: return roundHalfEven(x);
    default: break;
  }
  throw Error(fmt::format("reference: {} has no float evaluation", opName(op)));
}

inline int64_t unaryInt(Op op, int64_t x) {
  switch (op) {
    case Op::Neg: return wrapSub(0, x);
    case Op::Abs: return x < 0 ? wrapSub(0, x) : x;
    case Op::Relu: return x > 0 ? x : 0;
    case Op::Floor:
    case Op::Ceil:
    case Op::Round: return x;
    default: break;
  }
  throw Error(fmt::format("reference: {} has no integer evaluation", opName(op)));
}

inline double binaryFloat(Op op, double a, double b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Pow: return std::pow(a, b);
    case Op::Maximum: return (std::isnan(a) || std::isnan(b)) ? kNaN : (a > b ? a : b);
    case Op::Minimum: return (std::isnan(a) || std::isnan(b)) ? kNaN : (a < b ? a : b);
    case Op::Remainder: return floatRemainder(a, b);
    default: break;
  }
  throw Error(fmt::format("reference: {} has no float evaluation", opName(op)));
}

inline int64_t binaryInt(Op op, int64_t a, int64_t b) {
  switch (op) {
    case Op::Add: return wrapAdd(a, b);
    case Op::Sub: return wrapSub(a, b);
    case Op::Mul: return wrapMul(a, b);
    case Op::Pow: return intPow(a, b);
    case Op::Maximum: return std::max(a, b);
    case Op::Minimum: return std::min(a, b);
    case Op::Remainder: return intRemainder(a, b);
    default: break;
  }
  throw Error(fmt::format("reference: {} has no integer evaluation (it yields a float dtype)",
                          opName(op)));
}

// Comparisons: NaN compares false, except ne.
template <class T>
inline bool compare(Op op, T a, T b) {
  switch (op) {
    case Op::Eq: return a == b;
    case Op::Ne: return a != b;
    case Op::Lt: return a < b;
    case Op::Le: return a <= b;
    case Op::Gt: return a > b;
    case Op::Ge: return a >= b;
    default: break;
  }
  throw Error(fmt::format("reference: {} is not a comparison", opName(op)));
}

inline bool isComparison(Op op) {
  return op == Op::Eq || op == Op::Ne || op == Op::Lt || op == Op::Le || op == Op::Gt ||
         op == Op::Ge;
}

// The unary predicates (IsNan, IsInf, LogicalNot) look at the operand in its
// own type and give 0/1.
inline int64_t predicateFloat(Op op, double x) {
  return op == Op::IsNan ? std::isnan(x) : op == Op::IsInf ? std::isinf(x) : x == 0.0;
}
inline int64_t predicateInt(Op op, int64_t x) { return op == Op::LogicalNot ? x == 0 : 0; }

// The truth of a value used as a condition (Where, LogicalAnd, LogicalOr):
// nonzero, NaN counting as nonzero.
inline bool truthOf(double x) { return x != 0.0 || std::isnan(x); }

// ------------------------------------------------------------ ternary

// Fma: a * b + c with a single rounding; integers wrap like int64 (the
// caller wraps the result to the node's dtype). Where is plain selection.
inline double fmaFloat(double a, double b, double c) { return std::fma(a, b, c); }
inline int64_t fmaInt(int64_t a, int64_t b, int64_t c) { return wrapAdd(wrapMul(a, b), c); }

// ------------------------------------------------------------ reductions

// Compensated (Neumaier) summation: within about an ulp of the exact sum
// however long the row, so the oracle's own rounding error never shows in a
// comparison. With an infinity or NaN in the row the compensation term is
// meaningless and the plain sum is the answer.
inline double accurateSum(const double* p, int64_t n) {
  double sum = 0.0, comp = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    double t = sum + p[k];
    comp += std::fabs(sum) >= std::fabs(p[k]) ? (sum - t) + p[k] : (p[k] - t) + sum;
    sum = t;
  }
  double r = sum + comp;
  return std::isfinite(r) ? r : sum;
}

}  // namespace kiln::detail
