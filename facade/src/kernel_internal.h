// Facade internals shared with its tests (not installed, not public API).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/runtime/grid_rule.h"
#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_map.h"
#include "kiln/runtime/workspace.h"

namespace kiln::detail {

// The grid rule of a compiled kernel (rt::GridRule), from its
// LaunchGeometry. `kernelDims`: the kernel's dynamic dims (CompiledKernel::
// dims), in the order dimValue takes them. A geometry that names other dims
// or has bad tiles is a kiln::Error naming `kernel`.
using GridRule = rt::GridRule;
GridRule gridRuleFrom(const compiler::LaunchGeometry& g, const std::vector<std::string>& kernelDims,
                      const std::string& kernel);

// One compiled kernel in the runtime's terms: its signature (tensors at the
// alignments its vectorized entry needs), where each of its arguments comes
// from, its grid rule and its TMA operands.
struct KernelPlan {
  rt::KernelSignature signature;
  // Kernel tensor i is graph tensor tensors[i] (>= 0, the graph
  // signature's order) or workspace tensor -tensors[i] - 1; kernel dim i is
  // graph dim dims[i]; kernel scalar i is graph scalar scalars[i].
  std::vector<int> tensors, dims, scalars;
  bool identity = false;  // the only kernel, taking the graph's arguments as they are
  GridRule grid;
  std::vector<rt::TensorMapRule> maps;
};

// A compiled graph in the runtime's terms: what the facade's Kernel and an
// ahead-of-time launcher (kiln aot, rt::AotGraph) both launch from.
struct LaunchPlan {
  rt::KernelSignature signature;           // the graph's: inputs, outputs (alignment 1), dims, scalars
  std::vector<rt::WorkspaceTensor> workspace;  // dims as graph dim indices
  std::vector<KernelPlan> kernels;         // in launch order
};

// Maps `cg`'s kernels onto `graph`'s arguments and the workspace. A kernel
// that fits none of them, or reads a workspace tensor before a kernel
// writes it, is a kiln::Error ("internal error: ... does not fit its
// graph").
LaunchPlan planLaunches(const Graph& graph, const compiler::CompiledGraph& cg);

// A Kernel for a graph whose CompiledGraph is already at hand: no compiler
// run, no registry entry. Checks that the kernels fit the graph (every
// tensor a graph parameter, a graph output or a workspace tensor written
// before it is read; every dim and scalar the graph's) and loads the
// modules when a driver is present, exactly as compile() does. Tests use it
// to launch hand-written multi-kernel plans; a disk cache would too.
// (The scalar entries, when a launch needs them, are still compiled from
// `graph`.)
Kernel kernelFromCompiled(const Graph& graph, compiler::CompiledGraph compiled, const std::string& chip,
                          const CompileOptions& options = {});
// The same with the compiler's options as they were for `compiled` (a
// tuning candidate's per-kernel config included).
Kernel kernelFromCompiled(const Graph& graph, compiler::CompiledGraph compiled, const compiler::CompileOptions& co);

// The compiler's options for a facade compile for `chip` (tuning not yet
// resolved).
compiler::CompileOptions compilerOptions(const CompileOptions& options, const std::string& chip);

}  // namespace kiln::detail
