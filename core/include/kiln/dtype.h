// Element types kiln knows, their sizes and the host-side conversions that
// the reference evaluator and tests rely on (exact round-to-nearest-even for
// bf16 and f16, NaN and infinities kept).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

// Keep the order stable: the text form and cache keys use the names, not
// the numbers, but tables below are indexed by the enum. fp8 types go at the
// end when they come.
enum class DType : uint8_t { Bool, I32, I64, F16, BF16, F32 };

inline constexpr DType kAllDTypes[] = {DType::Bool, DType::I32, DType::I64,
                                       DType::F16,  DType::BF16, DType::F32};

enum class DTypeCategory : uint8_t { Bool = 0, Integer = 1, Float = 2 };

std::string_view dtypeName(DType t);              // "f32", "bf16", ...
std::optional<DType> parseDType(std::string_view name);
int dtypeSize(DType t);                            // bytes per element
DTypeCategory dtypeCategory(DType t);
inline bool isFloat(DType t) { return dtypeCategory(t) == DTypeCategory::Float; }
inline bool isInteger(DType t) { return dtypeCategory(t) == DTypeCategory::Integer; }

// Host conversions. roundTo* round a double once, to nearest even, to the
// target format (overflow to infinity, NaN kept), so there is no double
// rounding through f32.
uint16_t doubleToBF16Bits(double x);
uint16_t doubleToF16Bits(double x);
double bf16BitsToDouble(uint16_t bits);
double f16BitsToDouble(uint16_t bits);
// The value x takes once stored as `t` (floats rounded; ints wrapped two's
// complement after truncation toward zero, like a C cast; bool: x != 0).
double roundToDType(double x, DType t);

}  // namespace kiln
