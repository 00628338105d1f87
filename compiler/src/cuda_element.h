// Internal: the element-expression emitter for the schedules that generate
// CUDA C++ (the matmul epilogue). It gives each elementwise op the meaning
// element_emitter.h gives it in MLIR (and the reference evaluator in fp64):
// 16-bit floats compute in f32 and are rounded only by an explicit cast;
// maximum/minimum propagate NaN; comparisons with NaN are false except ne;
// remainder takes the divisor's sign; round is half-to-even.
//
// It covers float and bool values (every op a matmul epilogue meets: bias,
// activations, residuals, scaling, casts, where); cudaElementSupported says
// whether a node is covered, so that the planner never hands it one that
// is not.
#pragma once

#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::compiler {

// True when cudaElementwise can compute node `n` of `g`.
bool cudaElementSupported(const Graph& g, const Node& n);

// Device helpers the expressions call (conversions, rounding, tanh.approx);
// put once at the top of the source.
const char* cudaElementPrelude();

// The C++ type a value of `t` is computed in ("float", "bool"), and the type
// it is stored as ("unsigned short" for bf16/f16).
std::string cudaComputeType(DType t);
std::string cudaStorageType(DType t);

// A stored element (an lvalue expression of the storage type) as a compute
// value, and a compute value as the storage type.
std::string cudaLoadValue(const std::string& stored, DType t);
std::string cudaStoreValue(const std::string& value, DType t);

// A Constant node's value.
std::string cudaConstant(const Node& n);

// The value of an elementwise node from its operands' values (expressions of
// their compute types). `approx`: tanh.approx and fast exp/division, as the
// MLIR path does when every output is a 16-bit float.
std::string cudaElementwise(const Graph& g, const Node& n, const std::vector<std::string>& operands, bool approx);

}  // namespace kiln::compiler
