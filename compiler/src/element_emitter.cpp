#include "element_emitter.h"

#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "kiln/dsl/ops.h"

namespace kiln::compiler {

std::string MlirWriter::f32(double v) {
  uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%08" PRIX32, bits);
  return assign(std::string("arith.constant ") + buf + " : f32");
}

std::string MlirWriter::integer(int64_t v, const std::string& type) {
  if (type == "i1") return boolean(v != 0);
  return assign("arith.constant " + std::to_string(v) + " : " + type);
}

std::string hintedLoad16(MlirWriter& w, const std::string& ptr, const std::string& vt, const std::string& priority,
                         bool nc) {
  const std::string ld = std::string(nc ? "ld.global.nc" : "ld.global") + ".L1::" + priority + ".L2::cache_hint";
  std::string s4 = w.assign("llvm.inline_asm \"{ .reg .b64 kiln_pol; createpolicy.fractional.L2::" + priority +
                            ".b64 kiln_pol, 1.0; " + ld + ".v4.b32 {$0, $1, $2, $3}, [$4], "
                            "kiln_pol; }\", \"=r,=r,=r,=r,l\" " + ptr +
                            " : (!llvm.ptr<1>) -> !llvm.struct<(i32, i32, i32, i32)>");
  return wordsAsVector(w, s4, vt);
}

std::string wordsAsVector(MlirWriter& w, const std::string& s4, const std::string& vt) {
  std::string v4 = w.assign("llvm.mlir.poison : vector<4xi32>");
  for (int i = 0; i < 4; ++i) {
    std::string e = w.assign("llvm.extractvalue " + s4 + "[" + std::to_string(i) + "] : !llvm.struct<(i32, i32, i32, i32)>");
    v4 = w.assign("llvm.insertelement " + e + ", " + v4 + "[" + w.integer(i, "i32") + " : i32] : vector<4xi32>");
  }
  return w.assign("llvm.bitcast " + v4 + " : vector<4xi32> to " + vt);
}

std::string opaqueCopy16(MlirWriter& w, const std::string& vec, const std::string& vt, const std::string& note) {
  std::string words = w.assign("llvm.bitcast " + vec + " : " + vt + " to vector<4xi32>");
  std::string in[4];
  for (int i = 0; i < 4; ++i)
    in[i] = w.assign("llvm.extractelement " + words + "[" + w.integer(i, "i32") + " : i32] : vector<4xi32>");
  std::string s4 = w.assign("llvm.inline_asm has_side_effects \"mov.b32 $0, $4; mov.b32 $1, $5; mov.b32 $2, $6; "
                            "mov.b32 $3, $7; // kiln: " + note + "\", \"=r,=r,=r,=r,r,r,r,r\" " + in[0] + ", " + in[1] +
                            ", " + in[2] + ", " + in[3] + " : (i32, i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32)>");
  return wordsAsVector(w, s4, vt);
}

std::string computeType(DType t) {
  switch (t) {
    case DType::Bool: return "i1";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    default: return "f32";
  }
}

std::string storageType(DType t) {
  switch (t) {
    case DType::Bool: return "i8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
  }
  return "f32";
}

namespace {

bool isF(DType t) { return isFloat(t); }

}  // namespace

std::string convertValue(MlirWriter& w, const std::string& v, DType from, DType to) {
  std::string ft = computeType(from), tt = computeType(to);
  if (ft == tt) return v;
  if (tt == "i1") {
    if (ft == "f32") return w.assign("arith.cmpf une, " + v + ", " + w.f32(0.0) + " : f32");
    return w.assign("arith.cmpi ne, " + v + ", " + w.integer(0, ft) + " : " + ft);
  }
  if (tt == "f32") {
    if (ft == "i1") return w.assign("arith.uitofp " + v + " : i1 to f32");
    return w.assign("arith.sitofp " + v + " : " + ft + " to f32");
  }
  // to an integer
  if (ft == "f32") return w.assign("arith.fptosi " + v + " : f32 to " + tt);
  if (ft == "i1") return w.assign("arith.extui " + v + " : i1 to " + tt);
  if (ft == "i32" && tt == "i64") return w.assign("arith.extsi " + v + " : i32 to i64");
  return w.assign("arith.trunci " + v + " : " + ft + " to " + tt);
}

std::string roundTo(MlirWriter& w, const std::string& v, DType t) {
  if (t != DType::BF16 && t != DType::F16) return v;
  std::string st = storageType(t);
  std::string narrow = w.assign("arith.truncf " + v + " : f32 to " + st);
  return w.assign("arith.extf " + narrow + " : " + st + " to f32");
}

std::string loadConvert(MlirWriter& w, const std::string& stored, DType t) {
  switch (t) {
    case DType::BF16:
    case DType::F16:
      return w.assign("arith.extf " + stored + " : " + storageType(t) + " to f32");
    case DType::Bool:
      return w.assign("arith.cmpi ne, " + stored + ", " + w.integer(0, "i8") + " : i8");
    default:
      return stored;
  }
}

std::string storeConvert(MlirWriter& w, const std::string& value, DType t) {
  switch (t) {
    case DType::BF16:
    case DType::F16:
      return w.assign("arith.truncf " + value + " : f32 to " + storageType(t));
    case DType::Bool:
      return w.assign("arith.extui " + value + " : i1 to i8");
    default:
      return value;
  }
}

std::string approxExpF32(MlirWriter& w, const std::string& x) {
  std::string s = w.assign("arith.mulf " + x + ", " + w.f32(1.4426950408889634) + " : f32");
  return w.assign("llvm.inline_asm \"ex2.approx.ftz.f32 $0, $1;\", \"=f,f\" " + s + " : (f32) -> f32");
}

bool isSoftmaxExp(const Graph& g, int id) {
  const Node& e = g.node(id);
  if (e.op != Op::Exp || e.dtype != DType::F32) return false;
  const Node& d = g.node(e.inputs[0]);
  if (d.op != Op::Sub) return false;
  const Node& m = g.node(d.inputs[1]);
  return m.op == Op::Max && m.keepdim && m.inputs[0] == d.inputs[0] && m.dtype == DType::F32;
}

std::string emitConstant(MlirWriter& w, const Node& n) {
  if (isF(n.dtype)) return w.f32(n.fvalue);
  return w.integer(n.ivalue, computeType(n.dtype));
}

namespace {

std::string unaryFloat(MlirWriter& w, const std::string& op, const std::string& x) {
  return w.assign(op + " " + x + " : f32");
}

// Python-style remainder (the result takes the divisor's sign).
std::string remainder(MlirWriter& w, DType t, const std::string& a, const std::string& b) {
  std::string ty = computeType(t);
  if (isF(t)) {
    std::string r = w.assign("arith.remf " + a + ", " + b + " : f32");
    std::string zero = w.f32(0.0);
    std::string rNonZero = w.assign("arith.cmpf une, " + r + ", " + zero + " : f32");
    std::string rNeg = w.assign("arith.cmpf olt, " + r + ", " + zero + " : f32");
    std::string bNeg = w.assign("arith.cmpf olt, " + b + ", " + zero + " : f32");
    std::string signsDiffer = w.assign("arith.xori " + rNeg + ", " + bNeg + " : i1");
    std::string fix = w.assign("arith.andi " + rNonZero + ", " + signsDiffer + " : i1");
    std::string adjusted = w.assign("arith.addf " + r + ", " + b + " : f32");
    return w.assign("arith.select " + fix + ", " + adjusted + ", " + r + " : f32");
  }
  std::string zero = w.integer(0, ty), one = w.integer(1, ty);
  std::string bZero = w.assign("arith.cmpi eq, " + b + ", " + zero + " : " + ty);
  std::string safeB = w.assign("arith.select " + bZero + ", " + one + ", " + b + " : " + ty);
  std::string r = w.assign("arith.remsi " + a + ", " + safeB + " : " + ty);
  std::string rNonZero = w.assign("arith.cmpi ne, " + r + ", " + zero + " : " + ty);
  std::string x = w.assign("arith.xori " + r + ", " + safeB + " : " + ty);
  std::string signsDiffer = w.assign("arith.cmpi slt, " + x + ", " + zero + " : " + ty);
  std::string fix = w.assign("arith.andi " + rNonZero + ", " + signsDiffer + " : i1");
  std::string adjusted = w.assign("arith.addi " + r + ", " + safeB + " : " + ty);
  std::string res = w.assign("arith.select " + fix + ", " + adjusted + ", " + r + " : " + ty);
  return w.assign("arith.select " + bZero + ", " + zero + ", " + res + " : " + ty);
}

// Integer power by squaring over every exponent bit; negative exponents give
// 0 except for bases 1 and -1 (like the reference evaluator).
std::string intPow(MlirWriter& w, DType t, const std::string& a, const std::string& b) {
  std::string ty = computeType(t);
  int bits = t == DType::I32 ? 32 : 64;
  std::string acc = w.integer(1, ty), base = a, e = b;
  std::string one = w.integer(1, ty);
  for (int i = 0; i < bits; ++i) {
    std::string bit = w.assign("arith.andi " + e + ", " + one + " : " + ty);
    std::string set = w.assign("arith.cmpi ne, " + bit + ", " + w.integer(0, ty) + " : " + ty);
    std::string prod = w.assign("arith.muli " + acc + ", " + base + " : " + ty);
    acc = w.assign("arith.select " + set + ", " + prod + ", " + acc + " : " + ty);
    if (i + 1 < bits) {
      base = w.assign("arith.muli " + base + ", " + base + " : " + ty);
      e = w.assign("arith.shrui " + e + ", " + one + " : " + ty);
    }
  }
  std::string zero = w.integer(0, ty), minusOne = w.integer(-1, ty);
  std::string neg = w.assign("arith.cmpi slt, " + b + ", " + zero + " : " + ty);
  std::string isOne = w.assign("arith.cmpi eq, " + a + ", " + one + " : " + ty);
  std::string isMinusOne = w.assign("arith.cmpi eq, " + a + ", " + minusOne + " : " + ty);
  std::string odd = w.assign("arith.andi " + b + ", " + one + " : " + ty);
  std::string oddSet = w.assign("arith.cmpi ne, " + odd + ", " + zero + " : " + ty);
  std::string minusOnePow = w.assign("arith.select " + oddSet + ", " + minusOne + ", " + one + " : " + ty);
  std::string negResult = w.assign("arith.select " + isMinusOne + ", " + minusOnePow + ", " + zero + " : " + ty);
  negResult = w.assign("arith.select " + isOne + ", " + one + ", " + negResult + " : " + ty);
  return w.assign("arith.select " + neg + ", " + negResult + ", " + acc + " : " + ty);
}

std::string compare(MlirWriter& w, Op op, DType t, const std::string& a, const std::string& b) {
  std::string ty = computeType(t);
  const char* pred = "";
  if (isF(t)) {
    switch (op) {
      case Op::Eq: pred = "oeq"; break;
      case Op::Ne: pred = "une"; break;
      case Op::Lt: pred = "olt"; break;
      case Op::Le: pred = "ole"; break;
      case Op::Gt: pred = "ogt"; break;
      default: pred = "oge"; break;
    }
    return w.assign(std::string("arith.cmpf ") + pred + ", " + a + ", " + b + " : f32");
  }
  bool u = t == DType::Bool;
  switch (op) {
    case Op::Eq: pred = "eq"; break;
    case Op::Ne: pred = "ne"; break;
    case Op::Lt: pred = u ? "ult" : "slt"; break;
    case Op::Le: pred = u ? "ule" : "sle"; break;
    case Op::Gt: pred = u ? "ugt" : "sgt"; break;
    default: pred = u ? "uge" : "sge"; break;
  }
  return w.assign(std::string("arith.cmpi ") + pred + ", " + a + ", " + b + " : " + ty);
}

}  // namespace

std::string emitElementwise(MlirWriter& w, const Graph& g, const Node& n,
                            const std::vector<std::string>& operands, const ElementOptions& options) {
  auto operandDType = [&](size_t i) { return g.node(n.inputs[i]).dtype; };
  // Converts operand i into the compute type of dtype t.
  auto in = [&](size_t i, DType t) { return convertValue(w, operands[i], operandDType(i), t); };
  const DType t = n.dtype;
  const std::string ty = computeType(t);
  const bool f = isF(t);

  switch (n.op) {
    case Op::Cast:
      return roundTo(w, in(0, t), t);
    // ---- unary
    case Op::Neg:
      return f ? unaryFloat(w, "arith.negf", in(0, t))
               : w.assign("arith.subi " + w.integer(0, ty) + ", " + in(0, t) + " : " + ty);
    case Op::Abs:
      if (f) return unaryFloat(w, "math.absf", in(0, t));
      {  // math.absi has no NVVM lowering: select(x < 0, -x, x)
        std::string x = in(0, t), zero = w.integer(0, ty);
        std::string negx = w.assign("arith.subi " + zero + ", " + x + " : " + ty);
        std::string isNeg = w.assign("arith.cmpi slt, " + x + ", " + zero + " : " + ty);
        return w.assign("arith.select " + isNeg + ", " + negx + ", " + x + " : " + ty);
      }
    case Op::Exp:
      if (options.approxTranscendentals) return approxExpF32(w, in(0, t));
      return unaryFloat(w, "math.exp", in(0, t));
    case Op::Exp2: return unaryFloat(w, "math.exp2", in(0, t));
    case Op::Log: return unaryFloat(w, "math.log", in(0, t));
    case Op::Log2: return unaryFloat(w, "math.log2", in(0, t));
    case Op::Log1p: return unaryFloat(w, "math.log1p", in(0, t));
    case Op::Expm1: return unaryFloat(w, "math.expm1", in(0, t));
    case Op::Sqrt: return unaryFloat(w, "math.sqrt", in(0, t));
    case Op::Rsqrt: return unaryFloat(w, "math.rsqrt", in(0, t));
    case Op::Reciprocal: return w.assign("arith.divf " + w.f32(1.0) + ", " + in(0, t) + " : f32");
    case Op::Sin: return unaryFloat(w, "math.sin", in(0, t));
    case Op::Cos: return unaryFloat(w, "math.cos", in(0, t));
    case Op::Tanh:
      if (options.approxTranscendentals)
        return w.assign("llvm.inline_asm \"tanh.approx.f32 $0, $1;\", \"=f,f\" " + in(0, t) + " : (f32) -> f32");
      return unaryFloat(w, "math.tanh", in(0, t));
    case Op::Erf: return unaryFloat(w, "math.erf", in(0, t));
    case Op::Sigmoid: {
      std::string x = in(0, t);
      std::string nx = unaryFloat(w, "arith.negf", x);
      std::string e = options.approxTranscendentals ? approxExpF32(w, nx) : unaryFloat(w, "math.exp", nx);
      std::string d = w.assign("arith.addf " + w.f32(1.0) + ", " + e + " : f32");
      return w.assign("arith.divf " + w.f32(1.0) + ", " + d + " : f32");
    }
    case Op::Relu:
      return f ? w.assign("arith.maximumf " + in(0, t) + ", " + w.f32(0.0) + " : f32")
               : w.assign("arith.maxsi " + in(0, t) + ", " + w.integer(0, ty) + " : " + ty);
    case Op::Floor: return f ? unaryFloat(w, "math.floor", in(0, t)) : in(0, t);
    case Op::Ceil: return f ? unaryFloat(w, "math.ceil", in(0, t)) : in(0, t);
    case Op::Round: return f ? unaryFloat(w, "math.roundeven", in(0, t)) : in(0, t);
    case Op::IsNan: {
      if (!isF(operandDType(0))) return w.boolean(false);
      std::string x = operands[0];
      return w.assign("arith.cmpf uno, " + x + ", " + x + " : f32");
    }
    case Op::IsInf: {
      if (!isF(operandDType(0))) return w.boolean(false);
      std::string a = unaryFloat(w, "math.absf", operands[0]);
      return w.assign("arith.cmpf oeq, " + a + ", " + w.f32(INFINITY) + " : f32");
    }
    case Op::LogicalNot: {
      std::string b = in(0, DType::Bool);
      return w.assign("arith.xori " + b + ", " + w.boolean(true) + " : i1");
    }
    // ---- binary
    case Op::Add:
      return w.assign(std::string(f ? "arith.addf " : "arith.addi ") + in(0, t) + ", " + in(1, t) + " : " + ty);
    case Op::Sub:
      return w.assign(std::string(f ? "arith.subf " : "arith.subi ") + in(0, t) + ", " + in(1, t) + " : " + ty);
    case Op::Mul:
      return w.assign(std::string(f ? "arith.mulf " : "arith.muli ") + in(0, t) + ", " + in(1, t) + " : " + ty);
    case Op::Div:  // true division: the DSL made integer divisions f32
      // 16-bit outputs: the approximate division (2 ulp of f32) is far below
      // their precision, and a divisor that is the same along a row (a
      // softmax's sum) becomes one reciprocal per row.
      return w.assign("arith.divf " + in(0, t) + ", " + in(1, t) +
                      (options.approxTranscendentals ? " fastmath<arcp,afn>"
                       : options.reciprocalDivision ? " fastmath<arcp>"
                                                    : "") +
                      " : f32");
    case Op::Pow:
      return f ? w.assign("math.powf " + in(0, t) + ", " + in(1, t) + " : f32") : intPow(w, t, in(0, t), in(1, t));
    case Op::Maximum:
      return w.assign(std::string(f ? "arith.maximumf " : "arith.maxsi ") + in(0, t) + ", " + in(1, t) + " : " + ty);
    case Op::Minimum:
      return w.assign(std::string(f ? "arith.minimumf " : "arith.minsi ") + in(0, t) + ", " + in(1, t) + " : " + ty);
    case Op::Remainder:
      return remainder(w, t, in(0, t), in(1, t));
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      DType ct = promoteTypes({&g.node(n.inputs[0]), &g.node(n.inputs[1])});
      return compare(w, n.op, ct, in(0, ct), in(1, ct));
    }
    case Op::LogicalAnd:
      return w.assign("arith.andi " + in(0, DType::Bool) + ", " + in(1, DType::Bool) + " : i1");
    case Op::LogicalOr:
      return w.assign("arith.ori " + in(0, DType::Bool) + ", " + in(1, DType::Bool) + " : i1");
    // ---- ternary
    case Op::Where:
      return w.assign("arith.select " + in(0, DType::Bool) + ", " + in(1, t) + ", " + in(2, t) + " : " + ty);
    case Op::Fma:
      if (f) return w.assign("math.fma " + in(0, t) + ", " + in(1, t) + ", " + in(2, t) + " : f32");
      return w.assign("arith.addi " + w.assign("arith.muli " + in(0, t) + ", " + in(1, t) + " : " + ty) + ", " +
                      in(2, t) + " : " + ty);
    default:
      break;
  }
  throw Error("kiln: internal: the element emitter has no rule for op '" + std::string(opName(n.op)) + "'");
}

}  // namespace kiln::compiler
