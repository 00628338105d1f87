// Facade internals shared with its tests (not installed, not public API).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernel.h"
#include "kiln/runtime/grid_rule.h"

namespace kiln::detail {

// The grid rule of a compiled kernel (rt::GridRule), from its
// LaunchGeometry. `kernelDims`: the kernel's dynamic dims (CompiledKernel::
// dims), in the order dimValue takes them. A geometry that names other dims
// or has bad tiles is a kiln::Error naming `kernel`.
using GridRule = rt::GridRule;
GridRule gridRuleFrom(const compiler::LaunchGeometry& g, const std::vector<std::string>& kernelDims,
                      const std::string& kernel);

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
