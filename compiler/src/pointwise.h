// Internal: the pointwise schedule. A group of graph outputs of one shape
// whose producers are all elementwise ops, broadcasts, casts and views over
// the graph's inputs becomes one kernel: the flattened output is cut into
// chunks of threads * unroll * vector elements; each thread loads its
// vectors of every input (16-byte loads where the access is contiguous and
// aligned, one load and a splat where it is broadcast along the row, a
// gather otherwise), computes every output with the shared element
// emitter, and stores 16-byte vectors. A chunk that crosses the end of the
// tensor takes a guarded element-by-element path.
//
// Layout: config struct + heuristic (like nvFuser's pointwise_heuristic.h),
// then an emitter that obeys the config.
#pragma once

#include <string>
#include <vector>

#include "kiln/compiler/compile.h"

namespace kiln::compiler {

struct PointwiseConfig {
  int threads = 256;      // threads per block
  int vector = 1;         // elements per vector access (1: scalar code)
  int unroll = 1;         // vectors per thread per chunk
  int64_t maxBlocks = 0;  // 0: one block per chunk; else a persistent grid
  bool index32 = true;    // 32-bit index math (only when every offset fits)
  // Inputs read through the non-coherent (texture) path, ld.global.nc
  // (inputs no-alias and read-only, loads invariant); false: plain
  // ld.global, as Triton's pointwise kernels load (inputs without
  // attributes; outputs stay no-alias).
  bool nc = true;
  std::string json() const;  // "nc" only when 0
};

// What the planner hands the schedule.
struct PointwiseGroup {
  std::vector<int> outputs;  // indices into Graph::outputs()
  Shape shape;               // the common shape of those outputs
};

// A good config from the shapes, dtypes and device.
PointwiseConfig pointwiseHeuristic(const Graph& g, const PointwiseGroup& group, const CompileOptions& options);

// Applies a JSON override (keys: threads, vector, unroll, max_blocks,
// index_bits, nc); throws kiln::Error naming a bad key or value.
void applyPointwiseOverride(PointwiseConfig& c, const std::string& json);

// The widest vector the group's accesses take: 16 bytes of its narrowest
// dtype (inputs and outputs), at most 8 lanes, kept inside a static row.
int pointwiseWidestVector(const Graph& g, const PointwiseGroup& group);

// The schedule's config space around the heuristic's choice `h`: override
// objects of threads, vector (h's, half of it, and `widest` where h's is
// narrower: x*y+z f32 reads 8-byte vectors by default), unroll and
// max_blocks, `h` first.
std::vector<std::string> pointwiseSpace(const PointwiseGroup& group, const PointwiseConfig& h,
                                        const CompileOptions& options, int widest = 0);

// The kernel's MLIR (a vectorized entry "<name>_v<V>" when config.vector > 1,
// and/or a scalar entry "<name>_s1", as `variants` asks; a kernel whose
// config is scalar has only "_s1") and its description (no artifacts yet).
struct PointwiseKernel {
  std::string mlir;
  CompiledKernel kernel;
};
PointwiseKernel emitPointwise(const Graph& g, const PointwiseGroup& group, const PointwiseConfig& config,
                              const std::string& name, EntryVariants variants = EntryVariants::All);

// Whether `op` can be part of a pointwise kernel.
bool isPointwiseOp(Op op);

}  // namespace kiln::compiler
