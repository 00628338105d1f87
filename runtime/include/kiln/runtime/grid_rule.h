// A kernel's grid from its launch geometry, prepared once so that a launch
// does a few multiplications. The facade builds one per compiled kernel
// (detail::gridRuleFrom, from compiler::LaunchGeometry); ahead-of-time
// launchers (aot.h) get theirs written out by kiln-aot. No compiler types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

class Function;

// The blocks of a launch: staticCount (the static dims' tile counts) times
// ceil(dim / tile) for each (kernel dim index, tile) of `dynamic`, then
// ceil(/ elementsPerBlock) units; `cluster` blocks per unit,
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

// The blocks (whole clusters) of `f` that fit on the current device at once,
// for a kernel that loops over its rows (LaunchGeometry::resident) and so
// must not get more: a block or cluster waiting for a second wave would
// double the kernel's time. 0 when the driver cannot tell (no occupancy
// API): no cap.
int64_t residentBlocks(const Function& f, int threadsPerBlock, int sharedBytes, int cluster);

}  // namespace kiln::rt
