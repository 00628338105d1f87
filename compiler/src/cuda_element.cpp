#include "cuda_element.h"

#include <cmath>
#include <cstdio>

#include "kiln/dsl/ops.h"
#include "kiln/error.h"

namespace kiln::compiler {
namespace {

bool covered(DType t) { return isFloat(t) || t == DType::Bool; }

// A compute value of `from` as a compute value of `to` (float or bool).
std::string convert(const std::string& v, DType from, DType to) {
  if (isFloat(from) == isFloat(to)) return v;
  if (isFloat(to)) return "(" + v + " ? 1.0f : 0.0f)";
  return "(" + v + " != 0.0f)";  // NaN is true, like a C cast to bool
}

std::string call(const char* f, const std::string& a) { return std::string(f) + "(" + a + ")"; }
std::string call(const char* f, const std::string& a, const std::string& b) {
  return std::string(f) + "(" + a + ", " + b + ")";
}

}  // namespace

bool cudaElementSupported(const Graph& g, const Node& n) {
  if (!isElementwise(n.op) && n.op != Op::Constant) return false;
  if (!covered(n.dtype)) return false;
  for (int i : n.inputs)
    if (!covered(g.node(i).dtype)) return false;
  return true;
}

const char* cudaElementPrelude() {
  return R"(typedef unsigned short u16;
__device__ __forceinline__ float kiln_bf2f(u16 h) { return __uint_as_float((unsigned)h << 16); }
__device__ __forceinline__ float kiln_h2f(u16 h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16 kiln_f2bf(float f) { u16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16 kiln_f2h(float f) { u16 h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
// Two values rounded and packed in one instruction: lo in the low half.
__device__ __forceinline__ unsigned kiln_pack_bf16x2(float lo, float hi) { unsigned r; asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
__device__ __forceinline__ unsigned kiln_pack_f16x2(float lo, float hi) { unsigned r; asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo)); return r; }
__device__ __forceinline__ float kiln_round_bf16(float f) { return kiln_bf2f(kiln_f2bf(f)); }
__device__ __forceinline__ float kiln_round_f16(float f) { return kiln_h2f(kiln_f2h(f)); }
__device__ __forceinline__ float kiln_tanh_approx(float x) { float y; asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }
__device__ __forceinline__ float kiln_nan() { return __int_as_float(0x7fc00000); }
__device__ __forceinline__ float kiln_maximum(float a, float b) { return (a != a || b != b) ? kiln_nan() : fmaxf(a, b); }
__device__ __forceinline__ float kiln_minimum(float a, float b) { return (a != a || b != b) ? kiln_nan() : fminf(a, b); }
__device__ __forceinline__ float kiln_remainder(float a, float b) {
  float r = fmodf(a, b);
  return (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) ? r + b : r;
}
)";
}

std::string cudaComputeType(DType t) {
  if (isFloat(t)) return "float";
  if (t == DType::Bool) return "bool";
  throw Error("kiln: internal: no CUDA compute type for " + std::string(dtypeName(t)));
}

std::string cudaStorageType(DType t) {
  switch (t) {
    case DType::BF16: case DType::F16: return "u16";
    case DType::F32: return "float";
    case DType::Bool: return "unsigned char";
    case DType::I32: return "int";
    case DType::I64: return "long long";
  }
  return "void";
}

std::string cudaLoadValue(const std::string& stored, DType t) {
  switch (t) {
    case DType::BF16: return "kiln_bf2f(" + stored + ")";
    case DType::F16: return "kiln_h2f(" + stored + ")";
    case DType::F32: return stored;
    case DType::Bool: return "(" + stored + " != 0)";
    default: throw Error("kiln: internal: no CUDA load for " + std::string(dtypeName(t)));
  }
}

std::string cudaStoreValue(const std::string& value, DType t) {
  switch (t) {
    case DType::BF16: return "kiln_f2bf(" + value + ")";
    case DType::F16: return "kiln_f2h(" + value + ")";
    case DType::F32: return value;
    case DType::Bool: return "(unsigned char)(" + value + ")";
    default: throw Error("kiln: internal: no CUDA store for " + std::string(dtypeName(t)));
  }
}

std::string cudaConstant(const Node& n) {
  if (n.dtype == DType::Bool) return n.ivalue ? "true" : "false";
  if (!isFloat(n.dtype)) throw Error("kiln: internal: integer constant in a CUDA expression");
  const float f = static_cast<float>(n.fvalue);
  if (std::isnan(f)) return "kiln_nan()";
  if (std::isinf(f)) return f > 0 ? "__int_as_float(0x7f800000)" : "__int_as_float(0xff800000)";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));  // exact
  return buf;
}

std::string cudaElementwise(const Graph& g, const Node& n, const std::vector<std::string>& operands, bool approx) {
  if (!cudaElementSupported(g, n))
    throw Error("kiln: internal: op '" + std::string(opName(n.op)) + "' of " + std::string(dtypeName(n.dtype)) +
                " has no CUDA C++ form");
  auto in = [&](size_t i, DType t) { return convert(operands[i], g.node(n.inputs[i]).dtype, t); };
  const DType t = n.dtype;
  const DType F = DType::F32;
  switch (n.op) {
    case Op::Cast:
      if (t == DType::BF16) return "kiln_round_bf16(" + in(0, t) + ")";
      if (t == DType::F16) return "kiln_round_f16(" + in(0, t) + ")";
      return in(0, t);
    case Op::Neg: return "(-" + in(0, F) + ")";
    case Op::Abs: return call("fabsf", in(0, F));
    case Op::Exp: return call(approx ? "__expf" : "expf", in(0, F));
    case Op::Exp2: return call("exp2f", in(0, F));
    case Op::Log: return call("logf", in(0, F));
    case Op::Log2: return call("log2f", in(0, F));
    case Op::Log1p: return call("log1pf", in(0, F));
    case Op::Expm1: return call("expm1f", in(0, F));
    case Op::Sqrt: return call("sqrtf", in(0, F));
    case Op::Rsqrt: return call("rsqrtf", in(0, F));
    case Op::Reciprocal: return "(1.0f / " + in(0, F) + ")";
    case Op::Sin: return call("sinf", in(0, F));
    case Op::Cos: return call("cosf", in(0, F));
    case Op::Tanh: return call(approx ? "kiln_tanh_approx" : "tanhf", in(0, F));
    case Op::Erf: return call("erff", in(0, F));
    case Op::Sigmoid: return "(1.0f / (1.0f + " + call(approx ? "__expf" : "expf", "-" + in(0, F)) + "))";
    case Op::Relu: return call("kiln_maximum", in(0, F), "0.0f");
    case Op::Floor: return call("floorf", in(0, F));
    case Op::Ceil: return call("ceilf", in(0, F));
    case Op::Round: return call("rintf", in(0, F));
    case Op::IsNan: {
      if (!isFloat(g.node(n.inputs[0]).dtype)) return "false";
      const std::string& x = operands[0];
      return "(" + x + " != " + x + ")";
    }
    case Op::IsInf:
      if (!isFloat(g.node(n.inputs[0]).dtype)) return "false";
      return "(fabsf(" + operands[0] + ") == __int_as_float(0x7f800000))";
    case Op::LogicalNot: return "(!" + in(0, DType::Bool) + ")";
    case Op::Add: return "(" + in(0, t) + " + " + in(1, t) + ")";
    case Op::Sub: return "(" + in(0, t) + " - " + in(1, t) + ")";
    case Op::Mul: return "(" + in(0, t) + " * " + in(1, t) + ")";
    case Op::Div: return approx ? call("__fdividef", in(0, F), in(1, F)) : "(" + in(0, F) + " / " + in(1, F) + ")";
    case Op::Pow: return call("powf", in(0, F), in(1, F));
    case Op::Maximum: return call("kiln_maximum", in(0, F), in(1, F));
    case Op::Minimum: return call("kiln_minimum", in(0, F), in(1, F));
    case Op::Remainder: return call("kiln_remainder", in(0, F), in(1, F));
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      const DType ct = promoteTypes({&g.node(n.inputs[0]), &g.node(n.inputs[1])});
      const char* op = n.op == Op::Eq ? " == " : n.op == Op::Ne ? " != " : n.op == Op::Lt ? " < "
                       : n.op == Op::Le ? " <= " : n.op == Op::Gt ? " > " : " >= ";
      return "(" + in(0, ct) + op + in(1, ct) + ")";
    }
    case Op::LogicalAnd: return "(" + in(0, DType::Bool) + " && " + in(1, DType::Bool) + ")";
    case Op::LogicalOr: return "(" + in(0, DType::Bool) + " || " + in(1, DType::Bool) + ")";
    case Op::Where: return "(" + in(0, DType::Bool) + " ? " + in(1, t) + " : " + in(2, t) + ")";
    case Op::Fma: return "fmaf(" + in(0, F) + ", " + in(1, F) + ", " + in(2, F) + ")";
    default: break;
  }
  throw Error("kiln: internal: op '" + std::string(opName(n.op)) + "' has no CUDA C++ form");
}

}  // namespace kiln::compiler
