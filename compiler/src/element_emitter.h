// Internal: the element-expression emitter shared by every schedule. Given
// the values of a node's operands (scalars in their compute types, see
// computeType), it writes the MLIR arith/math ops computing the node's value
// for one element. Schedules decide where values come from (loads, shuffles,
// accumulators); this unit alone knows what each op means, so an op is
// taught to codegen once.
//
// Semantics match the reference evaluator: half types compute in f32 and
// are rounded only by an explicit cast; integers are exact in their width;
// NaN and infinities behave like PyTorch's (maximum/minimum propagate NaN,
// comparisons with NaN are false except ne, remainder takes the divisor's
// sign, round is half-to-even).
#pragma once

#include <string>
#include <vector>

#include "kiln/dsl/graph.h"
#include "mlir_writer.h"

namespace kiln::compiler {

// Converts a value between compute types as a cast would (no rounding to
// narrow floats: see roundTo).
std::string convertValue(MlirWriter& w, const std::string& v, DType from, DType to);

// Rounds an f32 compute value to a narrower float dtype and back (a cast to
// bf16/f16 in the middle of an expression). Identity for f32 and non-floats.
std::string roundTo(MlirWriter& w, const std::string& v, DType t);

// Storage element → compute value, and back.
std::string loadConvert(MlirWriter& w, const std::string& stored, DType t);
std::string storeConvert(MlirWriter& w, const std::string& value, DType t);

// The value of a Constant node, in its compute type.
std::string emitConstant(MlirWriter& w, const Node& n);

// exp(x) of an f32 value by the hardware's approximation: x * log2(e), then
// ex2.approx.ftz.f32 (one MUFU instruction; relative error about 2^-22 plus
// the rounding of x * log2(e)). The ftz form: results below 2^-126 are 0
// (the plain form spends three more instructions per exp to keep them).
std::string approxExpF32(MlirWriter& w, const std::string& x);

// Whether node `id` is a softmax's exp: exp(a - max(a)) in f32, the max a
// keepdim reduction of the same `a`. Its argument is never above 0 and its
// values lie in [0, 1], where the approximate exp's error (1e-6 relative at
// arguments near -20, 3e-6 near -80) is below f32's 2e-5; the row schedule
// computes it with approxExpF32 in held rows whatever the outputs' dtype.
bool isSoftmaxExp(const Graph& g, int id);

// Choices a schedule makes for the whole kernel.
struct ElementOptions {
  // Use the hardware approximations of tanh (tanh.approx.f32, relative error
  // <= 2^-10.9) and exp (ex2.approx): schedules set it when every output of
  // the kernel is a 16-bit float, whose precision (2^-8 for bf16, 2^-11 for
  // f16) is coarser than the approximation. libdevice's accurate versions
  // cost ~20 instructions each, enough to make a bf16 kernel compute-bound.
  // Division then takes the approximate form too.
  bool approxTranscendentals = false;
  // f32 division may become a multiplication by the reciprocal (fastmath
  // arcp: at most 1.5 ulp): the row schedule sets it, where a divisor that
  // is the same along a row (a softmax's sum) becomes one division per row
  // instead of one per element (div.rn.f32 is about ten instructions).
  bool reciprocalDivision = false;
};

// The value of an elementwise node (unary, binary, ternary, cast) from its
// operand values; `g` gives the operand nodes (for their dtypes). Returns a
// value of computeType(n.dtype).
std::string emitElementwise(MlirWriter& w, const Graph& g, const Node& n,
                            const std::vector<std::string>& operands, const ElementOptions& options = {});

}  // namespace kiln::compiler
