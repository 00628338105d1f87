#include "kiln/dtype.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace kiln {

std::string_view dtypeName(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
  }
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtypeName(t) == name) return t;
  return std::nullopt;
}

int dtypeSize(DType t) {
  switch (t) {
    case DType::Bool: return 1;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
  }
  return 0;
}

DTypeCategory dtypeCategory(DType t) {
  switch (t) {
    case DType::Bool: return DTypeCategory::Bool;
    case DType::I32:
    case DType::I64: return DTypeCategory::Integer;
    default: return DTypeCategory::Float;
  }
}

namespace {

// Rounds x to nearest even in a binary format with `sigBits` significand
// bits (implicit bit included), minimum normal exponent `emin` (x = m * 2^e
// with 1 <= m < 2) and largest finite value `maxFinite`.
double roundToFormat(double x, int sigBits, int emin, double maxFinite) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // x = f * 2^e, 0.5 <= |f| < 1  => exponent e-1
  int exponent = std::max(e - 1, emin);
  // quantum: 2^(exponent - (sigBits - 1))
  double scaled = std::ldexp(x, (sigBits - 1) - exponent);
  double r = std::nearbyint(scaled);  // default rounding mode: to nearest even
  double out = std::ldexp(r, exponent - (sigBits - 1));
  if (std::fabs(out) > maxFinite) return std::copysign(INFINITY, x);
  return out;
}

constexpr double kBF16Max = 3.38953138925153547590470800371487866880e+38;
constexpr double kF16Max = 65504.0;

}  // namespace

uint16_t doubleToBF16Bits(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFFC0 : 0x7FC0;
  double r = roundToFormat(x, 8, -126, kBF16Max);
  float f = static_cast<float>(r);  // exact: r is representable in f32
  uint32_t u = std::bit_cast<uint32_t>(f);
  return static_cast<uint16_t>(u >> 16);
}

double bf16BitsToDouble(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  return static_cast<double>(std::bit_cast<float>(u));
}

uint16_t doubleToF16Bits(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xFE00 : 0x7E00;
  double r = roundToFormat(x, 11, -14, kF16Max);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7C00;
  if (a == 0.0) return sign;
  int e;
  double f = std::frexp(a, &e);  // a = f * 2^e, f in [0.5, 1)
  int exponent = e - 1;
  if (exponent < -14) {
    // subnormal: a = m * 2^-24
    uint16_t m = static_cast<uint16_t>(std::ldexp(a, 24));
    return sign | m;
  }
  uint16_t mant = static_cast<uint16_t>(std::ldexp(f * 2.0 - 1.0, 10));
  return sign | static_cast<uint16_t>((exponent + 15) << 10) | mant;
}

double f16BitsToDouble(uint16_t bits) {
  int sign = (bits >> 15) & 1;
  int exp = (bits >> 10) & 0x1F;
  int mant = bits & 0x3FF;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(1.0 + mant / 1024.0, exp - 15);
  }
  return sign ? -v : v;
}

double roundToDType(double x, DType t) {
  switch (t) {
    case DType::F32: return static_cast<double>(static_cast<float>(x));
    case DType::BF16: return bf16BitsToDouble(doubleToBF16Bits(x));
    case DType::F16: return f16BitsToDouble(doubleToF16Bits(x));
    case DType::Bool: return (x != 0.0 || std::isnan(x)) ? 1.0 : 0.0;
    case DType::I32:
    case DType::I64: {
      if (std::isnan(x) || std::isinf(x)) return 0.0;  // undefined in C; pick 0
      double tr = std::trunc(x);
      if (t == DType::I32) {
        // wrap modulo 2^32
        double m = std::fmod(tr, 4294967296.0);
        if (m < 0) m += 4294967296.0;
        if (m >= 2147483648.0) m -= 4294967296.0;
        return m;
      }
      return tr;
    }
  }
  return x;
}

}  // namespace kiln
