// Facade internals shared with its tests (not installed, not public API).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernel.h"

namespace kiln::detail {

// A kernel's grid size from its LaunchGeometry, prepared once so that a
// launch does a few multiplications: staticCount (the static dims' tile
// counts) times ceil(dim / tile) for each (kernel dim index, tile) of
// dynamic, then ceil(/ elementsPerBlock) units; `cluster` blocks per unit,
// capped at maxBlocks (> 0) and at 2^31 - 1 (the kernels loop over the
// rest), in whole clusters. 0 means nothing to launch.
struct GridRule {
  int64_t staticCount = 1;
  std::vector<std::pair<int, int64_t>> dynamic;
  int64_t elementsPerBlock = 1;
  int64_t maxBlocks = 0;
  int64_t cluster = 1;
  int64_t minBlocks = 0;
  // Dims the kernel takes only up to a bound (LaunchGeometry::dimBounds),
  // by kernel dim index; check() refuses larger values.
  struct Bound {
    int index = 0;
    int64_t max = 0;
    std::string dim, what;
  };
  std::vector<Bound> bounds;
  // Dims the vectorized entry needs multiples of (LaunchGeometry::
  // vectorMultiples): (kernel dim index, multiple).
  std::vector<std::pair<int, int64_t>> multiples;
  // The dim values the kernel's config was chosen for (LaunchGeometry::
  // preferred): (kernel dim index, min, max).
  struct Range {
    int index = 0;
    int64_t min = 0, max = 0;
  };
  std::vector<Range> preferred;
  template <class DimValue>
  bool inPreferred(const DimValue& dimValue) const {
    return within(preferred, dimValue);
  }
  // The dim values the one-step entry covers (LaunchGeometry::oneStepRange).
  std::vector<Range> oneStep;
  template <class DimValue>
  bool inOneStep(const DimValue& dimValue) const {
    return within(oneStep, dimValue);
  }
  template <class DimValue>
  static bool within(const std::vector<Range>& ranges, const DimValue& dimValue) {
    for (const Range& r : ranges)
      if (const int64_t v = dimValue(static_cast<size_t>(r.index)); v < r.min || v > r.max) return false;
    return true;
  }
  template <class DimValue>
  bool vectorFits(const DimValue& dimValue) const {
    for (const auto& [d, m] : multiples)
      if (dimValue(static_cast<size_t>(d)) % m != 0) return false;
    return true;
  }

  // `kernelDims`: the kernel's dynamic dims (CompiledKernel::dims), in the
  // order dimValue takes them. A geometry that names other dims or has bad
  // tiles is a kiln::Error naming `kernel`.
  static GridRule from(const compiler::LaunchGeometry& g, const std::vector<std::string>& kernelDims,
                       const std::string& kernel);
  // A kiln::Error naming `kernel`, the dim and its bound when a dim is over
  // its bound; nothing otherwise (and nothing to loop over for most kernels).
  template <class DimValue>
  void check(const DimValue& dimValue, const std::string& kernel) const {
    for (const Bound& b : bounds)
      if (const int64_t v = dimValue(static_cast<size_t>(b.index)); v > b.max) [[unlikely]]
        boundExceeded(b, v, kernel);
  }
  [[noreturn]] static void boundExceeded(const Bound& b, int64_t value, const std::string& kernel);
  template <class DimValue>
  int64_t blocks(const DimValue& dimValue) const {
    int64_t total = staticCount;
    for (const auto& [d, t] : dynamic) total *= (dimValue(static_cast<size_t>(d)) + t - 1) / t;
    if (total <= 0) return minBlocks;
    int64_t units = (total + elementsPerBlock - 1) / elementsPerBlock;
    int64_t cap = (maxBlocks > 0 ? maxBlocks : 0x7fffffff) / cluster;
    if (cap > 0x7fffffff / cluster) cap = 0x7fffffff / cluster;
    const int64_t blocks = (units > cap ? cap : units) * cluster;
    return blocks < minBlocks ? minBlocks : blocks;
  }
};

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
