// The primitive ops of the DSL. Each call appends one node to the operands'
// graph after validating it: a shape, dtype, axis or arity mistake throws
// kiln::Error naming the op, the operands' types, what was expected and the
// caller's file:line. Nothing invalid ever reaches the compiler.
//
// Type promotion follows PyTorch (docs/dsl.md has the table):
//  - categories bool < integer < float; within a category the wider type
//    wins, and f16 with bf16 gives f32;
//  - operands rank by priority: tensors with dims > 0-dim tensors > weak
//    scalars (literals, runtime scalars). A lower-priority operand changes
//    the result only when its category is higher; a weak float then gives
//    f32 and a weak int gives i64;
//  - bool tensors are not arithmetic: add/sub/mul/... on bool is an error.
// Broadcasting follows numpy: dims are aligned from the right; a static 1
// stretches; a dynamic dim matches only the same name (or a static 1).
#pragma once

#include <initializer_list>
#include <source_location>
#include <variant>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln {

// An operand of a binary op: a tensor or a C++ number (a weak scalar). The
// constructors capture the caller's location, which is how operators report
// file:line (operators cannot take default arguments themselves).
struct Operand {
  std::variant<Tensor, double, int64_t, bool> value;
  std::source_location loc;

  Operand(const Tensor& t, std::source_location l = std::source_location::current())  // NOLINT
      : value(t), loc(l) {}
  Operand(double v, std::source_location l = std::source_location::current())  // NOLINT
      : value(v), loc(l) {}
  Operand(float v, std::source_location l = std::source_location::current())  // NOLINT
      : value(static_cast<double>(v)), loc(l) {}
  Operand(int v, std::source_location l = std::source_location::current())  // NOLINT
      : value(static_cast<int64_t>(v)), loc(l) {}
  Operand(long v, std::source_location l = std::source_location::current())  // NOLINT
      : value(static_cast<int64_t>(v)), loc(l) {}
  Operand(long long v, std::source_location l = std::source_location::current())  // NOLINT
      : value(static_cast<int64_t>(v)), loc(l) {}
  Operand(bool v, std::source_location l = std::source_location::current())  // NOLINT
      : value(v), loc(l) {}
  bool isTensor() const { return std::holds_alternative<Tensor>(value); }
};

// Reduction axes: one axis, a list, or empty for "every axis". Negative
// axes count from the end.
struct Axes {
  std::vector<int64_t> list;
  Axes() = default;
  Axes(int a) : list{a} {}      // NOLINT
  Axes(int64_t a) : list{a} {}  // NOLINT
  Axes(std::initializer_list<int64_t> l) : list(l) {}
  Axes(std::vector<int64_t> l) : list(std::move(l)) {}  // NOLINT
};

using Loc = std::source_location;
#define KILN_LOC ::kiln::Loc loc = ::kiln::Loc::current()

// --- unary ---
Tensor neg(const Tensor& x, KILN_LOC);
Tensor abs(const Tensor& x, KILN_LOC);
Tensor exp(const Tensor& x, KILN_LOC);
Tensor exp2(const Tensor& x, KILN_LOC);
Tensor log(const Tensor& x, KILN_LOC);
Tensor log2(const Tensor& x, KILN_LOC);
Tensor log1p(const Tensor& x, KILN_LOC);
Tensor expm1(const Tensor& x, KILN_LOC);
Tensor sqrt(const Tensor& x, KILN_LOC);
Tensor rsqrt(const Tensor& x, KILN_LOC);
Tensor reciprocal(const Tensor& x, KILN_LOC);
Tensor sin(const Tensor& x, KILN_LOC);
Tensor cos(const Tensor& x, KILN_LOC);
Tensor tanh(const Tensor& x, KILN_LOC);
Tensor sigmoid(const Tensor& x, KILN_LOC);
Tensor erf(const Tensor& x, KILN_LOC);
Tensor relu(const Tensor& x, KILN_LOC);
Tensor floor(const Tensor& x, KILN_LOC);
Tensor ceil(const Tensor& x, KILN_LOC);
Tensor round(const Tensor& x, KILN_LOC);  // half to even, like torch.round
Tensor isnan(const Tensor& x, KILN_LOC);
Tensor isinf(const Tensor& x, KILN_LOC);
Tensor logical_not(const Tensor& x, KILN_LOC);
// Generic entry used by the parser and tools.
Tensor unary(Op op, const Tensor& x, KILN_LOC);

// --- binary (either side may be a C++ number) ---
Tensor add(const Operand& a, const Operand& b, KILN_LOC);
Tensor sub(const Operand& a, const Operand& b, KILN_LOC);
Tensor mul(const Operand& a, const Operand& b, KILN_LOC);
Tensor div(const Operand& a, const Operand& b, KILN_LOC);  // true division
Tensor pow(const Operand& a, const Operand& b, KILN_LOC);
Tensor maximum(const Operand& a, const Operand& b, KILN_LOC);  // NaN wins
Tensor minimum(const Operand& a, const Operand& b, KILN_LOC);  // NaN wins
Tensor remainder(const Operand& a, const Operand& b, KILN_LOC);  // sign of b
Tensor eq(const Operand& a, const Operand& b, KILN_LOC);
Tensor ne(const Operand& a, const Operand& b, KILN_LOC);
Tensor lt(const Operand& a, const Operand& b, KILN_LOC);
Tensor le(const Operand& a, const Operand& b, KILN_LOC);
Tensor gt(const Operand& a, const Operand& b, KILN_LOC);
Tensor ge(const Operand& a, const Operand& b, KILN_LOC);
Tensor logical_and(const Operand& a, const Operand& b, KILN_LOC);
Tensor logical_or(const Operand& a, const Operand& b, KILN_LOC);
Tensor binary(Op op, const Operand& a, const Operand& b, KILN_LOC);

// --- ternary, cast ---
// where(cond, a, b): cond must be bool; a and b promote.
Tensor where(const Tensor& cond, const Operand& a, const Operand& b, KILN_LOC);
// fma(a, b, c) = a * b + c, rounded once.
Tensor fma(const Operand& a, const Operand& b, const Operand& c, KILN_LOC);
Tensor cast(const Tensor& x, DType to, KILN_LOC);

// A constant node exactly as the text form states it (the parser's entry;
// users write literals or Graph::constant). fvalue is used for float dtypes,
// ivalue for int and bool dtypes.
Tensor makeConstant(Graph& g, double fvalue, int64_t ivalue, DType dtype, bool weak, KILN_LOC);

// --- index generation ---
// iota(g, shape, axis): the index along `axis` at every position.
Tensor iota(Graph& g, const Shape& shape, int64_t axis, DType dtype = DType::I64, KILN_LOC);

// --- reductions ---
// sum/prod of bool or integers give i64 (like torch); mean, var and std need
// a float input; argmax/argmin give i64, the first index of the extreme.
Tensor sum(const Tensor& x, const Axes& axes = {}, bool keepdim = false, KILN_LOC);
Tensor mean(const Tensor& x, const Axes& axes = {}, bool keepdim = false, KILN_LOC);
Tensor max(const Tensor& x, const Axes& axes = {}, bool keepdim = false, KILN_LOC);
Tensor min(const Tensor& x, const Axes& axes = {}, bool keepdim = false, KILN_LOC);
Tensor prod(const Tensor& x, const Axes& axes = {}, bool keepdim = false, KILN_LOC);
Tensor argmax(const Tensor& x, int64_t axis, bool keepdim = false, KILN_LOC);
Tensor argmin(const Tensor& x, int64_t axis, bool keepdim = false, KILN_LOC);
// Without an axis: the index into the flattened tensor (torch.argmax(x)), a
// 0-dim i64; static shapes only (a dynamic dim cannot be flattened).
Tensor argmax(const Tensor& x, KILN_LOC);
Tensor argmin(const Tensor& x, KILN_LOC);
Tensor var(const Tensor& x, const Axes& axes = {}, int64_t correction = 1,
           bool keepdim = false, KILN_LOC);
// Standard deviation. Call it kiln::std (qualified: with `using namespace
// kiln` a bare std(...) is ambiguous with namespace std) or stddev.
Tensor std(const Tensor& x, const Axes& axes = {}, int64_t correction = 1,
           bool keepdim = false, KILN_LOC);
Tensor stddev(const Tensor& x, const Axes& axes = {}, int64_t correction = 1,
              bool keepdim = false, KILN_LOC);
Tensor reduce(Op op, const Tensor& x, const Axes& axes, bool keepdim,
              int64_t correction = 1, KILN_LOC);

// --- matmul ---
struct MatmulOptions {
  bool transA = false;  // a is stored [..., K, M]
  bool transB = false;  // b is stored [..., N, K]
  // f32 operands only: the tensor cores' tf32 mode (each operand rounded to
  // 10 mantissa bits, to nearest with ties away from zero, products summed
  // in f32), like torch's allow_tf32 or Triton's input_precision="tf32".
  // Several times faster than exact f32 FMAs; relative error near 1e-3.
  bool tf32 = false;
};
// a [..., M, K] @ b [..., K, N] -> [..., M, N]; batch dims broadcast; both
// operands f16, bf16 or f32 of the same dtype.
Tensor matmul(const Tensor& a, const Tensor& b, MatmulOptions opts = {}, KILN_LOC);

// --- views ---
// reshape: the element count must match; one static dim may be -1
// (inferred); dynamic dims must carry over by name.
Tensor reshape(const Tensor& x, const Shape& shape, KILN_LOC);
// expand / broadcast_to: numpy broadcasting of x to `shape`.
Tensor expand(const Tensor& x, const Shape& shape, KILN_LOC);
Tensor broadcast_to(const Tensor& x, const Shape& shape, KILN_LOC);
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm, KILN_LOC);
Tensor transpose(const Tensor& x, int64_t dim0 = -2, int64_t dim1 = -1, KILN_LOC);
// Python-style slice of one static axis: start/end may be negative (from
// the end) and are clamped; step >= 1.
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end,
             int64_t step = 1, KILN_LOC);

#undef KILN_LOC

// --- operators (location captured through Operand) ---
Tensor operator+(const Operand& a, const Operand& b);
Tensor operator-(const Operand& a, const Operand& b);
Tensor operator*(const Operand& a, const Operand& b);
Tensor operator/(const Operand& a, const Operand& b);
Tensor operator%(const Operand& a, const Operand& b);
Tensor operator<(const Operand& a, const Operand& b);
Tensor operator<=(const Operand& a, const Operand& b);
Tensor operator>(const Operand& a, const Operand& b);
Tensor operator>=(const Operand& a, const Operand& b);
Tensor operator==(const Operand& a, const Operand& b);
Tensor operator!=(const Operand& a, const Operand& b);
Tensor operator&(const Operand& a, const Operand& b);  // logical_and
Tensor operator|(const Operand& a, const Operand& b);  // logical_or
Tensor operator-(const Operand& x);                    // neg
Tensor operator!(const Operand& x);                    // logical_not

// The result dtype of combining these operands (PyTorch's result_type).
DType promoteTypes(const std::vector<const Node*>& operands);

}  // namespace kiln
