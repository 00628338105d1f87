// Graph → kernels: the fusion planner splits a graph into kernel groups, a
// schedule (pointwise; reductions and matmul later) picks a config for each
// with its heuristic, emits MLIR, and the backend makes PTX and a cubin.
// What comes out describes each kernel completely for a launcher: its ABI
// (see docs/architecture.md, "Kernel ABI"), launch geometry, variants and
// the resource report. No MLIR type appears here.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "kiln/compiler/api.h"
#include "kiln/compiler/backend.h"
#include "kiln/dsl/graph.h"

namespace kiln::compiler {

// One tensor argument of a kernel. Tensors are passed as raw pointers to
// contiguous row-major data, inputs first (graph parameter order), then
// outputs (graph output order).
struct KernelTensor {
  std::string name;     // the graph's parameter or output name
  DType dtype = DType::F32;
  Shape shape;          // with the graph's dynamic dims
  bool output = false;
  // An intermediate between two kernels of the graph (not a graph input or
  // output): the launcher places it in a workspace it owns, sized from the
  // dims at launch (see CompiledGraph::workspace). Written by the kernel
  // where `output` is true, read by later kernels where it is false.
  bool workspace = false;
  int alignment = 0;    // bytes the vectorized variant needs (0: none)
};

struct KernelScalar {
  std::string name;
  DType dtype = DType::F32;
};

// A compiled entry point of the kernel. The vectorized entry needs every
// tensor pointer aligned to its KernelTensor::alignment; the scalar entry
// takes any pointer.
struct KernelEntry {
  std::string name;
  bool vectorized = false;
  // A vectorized entry for the rows of LaunchGeometry::oneStepRange only
  // (a row reduction's one-step rows, RowConfig::oneStep); the other
  // vectorized entry takes the rest.
  bool oneStep = false;
};

// How to size the grid at launch: each dim of iterShape (dynamic dims bound
// at launch) is cut into tiles of the matching entry of `tile` (aligned to
// iterShape's trailing dims; missing entries are 1), total = product of the
// tile counts, blocks = ceil(total / elementsPerBlock), capped at maxBlocks
// when that is > 0 (the kernel loops over the rest). Pointwise and reduction
// schedules count elements (no tile); matmul counts output tiles (tile
// {BM, BN}, elementsPerBlock 1), so that a 16-row output of 128-row tiles
// still gets one block per tile.
struct LaunchGeometry {
  int threadsPerBlock = 256;
  int64_t elementsPerBlock = 256;
  Shape iterShape;
  std::vector<int64_t> tile;
  int64_t maxBlocks = 0;
  int sharedBytes = 0;     // dynamic shared memory per block
  // Blocks per cluster (along x): each counted unit gets this many blocks
  // (launched as clusters); maxBlocks caps the blocks.
  int cluster = 1;
  // The kernel loops over its units (rows), so the launcher caps the grid
  // at the blocks (or clusters) that fit on the GPU at once, asking the
  // driver's occupancy calculator; without a driver, uncapped.
  bool resident = false;
  // At least this many blocks, even for an empty iteration space: a kernel
  // whose last block computes results that exist for no rows too (a grid
  // tail's mean over zero rows). 0: none then.
  int64_t minBlocks = 0;
  // The most each named dynamic dim may be at launch, where the kernel
  // indexes along it with 32-bit integers (a row reduction's row length, its
  // grid tail's row count); the launcher refuses a larger value with an
  // error naming the dim. Static sizes over such a bound fail to compile.
  struct DimBound {
    std::string dim;
    int64_t max = 0;
    std::string what;  // what the dim counts there ("values in a row")
    bool operator==(const DimBound&) const = default;
  };
  std::vector<DimBound> dimBounds;
  // Dims that the vectorized entry needs to be multiples of a number (a row
  // reduction's dynamic row length: whole vectors per row, rows starting
  // aligned); where one is not, the launcher takes the scalar entry.
  struct DimMultiple {
    std::string dim;
    int64_t multiple = 1;
    bool operator==(const DimMultiple&) const = default;
  };
  std::vector<DimMultiple> vectorMultiples;
  // The values of a dynamic dim that the heuristic chose this kernel's
  // config for (a row reduction over a dynamic row length: short rows or
  // long ones). The kernel runs correctly for any value; for a launch
  // outside the range the facade builds, once, the graph again with the
  // launch's value as a hint (CompileOptions::dimHints) and launches that.
  // Empty when the config was given (an override, tuning).
  struct DimRange {
    std::string dim;
    int64_t min = 0, max = 0;  // inclusive
    bool operator==(const DimRange&) const = default;
  };
  std::vector<DimRange> preferred;
  // Where the vectorized entry runs and each named dim is within its range
  // (a row reduction's dynamic row length up to what one step covers), the
  // launcher takes the one-step entry (KernelEntry::oneStep) instead.
  std::vector<DimRange> oneStepRange;
};

// A TMA tensor map the launcher builds for the kernel: the kernel takes one
// 128-byte map per entry, in order, after its other parameters (tensors,
// dims, scalars). Tensor `tensor` (an index into CompiledKernel::tensors) is
// seen as 3-D: inner (its last dim), rows (the one before) and batch (the
// product of the rest); the map is 128-byte swizzled with box
// {boxInner, boxRows, 1}, out-of-bounds elements read as zero. The launcher
// encodes it from each launch's pointer and sizes (cuTensorMapEncodeTiled).
struct TensorMapParam {
  int tensor = 0;
  int boxInner = 64;
  int boxRows = 64;
  // Clamp the box's rows to the tensor's rows rounded up to 8 (for fewer
  // rows than boxRows); the kernel expects that many bytes.
  bool clampRows = false;
  // Encoded only where a row's bytes are a multiple of 16 (an output whose
  // row length is a dynamic dim); otherwise the launcher passes a zeroed map
  // and the kernel, checking the same condition, does not use it.
  bool whenRowsAligned = false;
};

struct CompiledKernel {
  std::string name;        // base name, also the prefix of the entries
  std::string schedule;    // "pointwise", "row_reduction", "matmul"
  std::string config;      // the schedule's config as a JSON object
  std::string why;         // one line: why this kernel exists / its group
  std::vector<KernelTensor> tensors;
  std::vector<std::string> dims;  // i64 parameters after the pointers
  std::vector<KernelScalar> scalars;
  std::vector<KernelEntry> entries;  // vectorized first
  LaunchGeometry launch;
  std::vector<TensorMapParam> tensorMaps;  // the matmul's TMA operands (sm_90a)
  // Artifacts.
  std::string source;      // CUDA C++ (the matmul schedule), when kept
  std::string mlir;
  std::string ptx;
  std::vector<char> cubin;
  std::vector<ResourceReport> resources;  // per entry
  StageTimes stages;       // emit, mlir-*, llvm-*, ptxas...
  double compileMs = 0;    // graph → cubin for this kernel
  // Where the artifacts came from, set by the facade's disk cache: "hit",
  // "miss" (compiled, then stored), "rebuilt" (a corrupt entry was
  // replaced), "off" (not cached); empty when compiled directly.
  std::string cache;
};

// Which entries to build. A vectorized entry needs aligned pointers; the
// scalar entry takes any. Building only the vectorized one halves a cold
// compile; the facade builds the scalar one the first time a launch needs it.
enum class EntryVariants { All, VectorOnly, ScalarOnly };

struct CompileOptions {
  std::string chip = "sm_90";    // the GPU's SM (the facade fills it in)
  int smCount = 132;             // for grid heuristics
  // Default: nvJitLink in process for plain targets (sm_90: the MLIR path's
  // kernels, which nvJitLink handles safely), ptxas as a child process for
  // "a" targets (sm_90a) and when nvJitLink is not available.
  CubinRoute route = CubinRoute::Default;
  EntryVariants variants = EntryVariants::All;
  bool keepText = true;          // keep MLIR and PTX in the result
  std::string cudaHome;          // empty: defaultCudaHome()
  // A JSON object whose keys replace the heuristic's choices in every
  // kernel's config (e.g. {"unroll": 2}); what tuning and benchmarks use.
  // Unknown keys are an error.
  std::string configOverride;
  // The same for row-reduction kernels (keys: threads_per_row, threads,
  // vector, persistent, unroll, cluster (blocks per row, sm_90+), row_loop).
  std::string rowConfigOverride;
  // The same for the Hopper matmul kernel (keys: block_n, stages, group_m).
  std::string matmulConfigOverride;
  // A softmax over the rows of a Hopper matmul's product with a short K
  // (attention scores) is computed by the matmul kernel, which computes the
  // product twice (the rows' statistics, then the outputs) instead of
  // storing it for a row kernel (planner.h). Off by default: its kernels
  // match the reference on an H100 (session 46), but the attention block at
  // T 4096 took 62-64 us there against 41 with the product stored
  // (docs/benchmarks.md); false: the product is stored.
  bool matmulRowSoftmax = false;
  // Per kernel (by its index in the plan, see describeKernels): a JSON
  // object applied after the schedule-wide overrides above. What the tuner
  // and the tuning database set. A kernel given here is built exactly as
  // asked (no heuristic rebuild after the resource report).
  std::map<int, std::string> kernelConfigs;
  // Values the graph's dynamic dims are expected to take at launch, read by
  // the heuristics only (a row kernel's config for a dynamic row length;
  // see LaunchGeometry::preferred). Any value compiles to the same kernels
  // in function; only their configs differ.
  std::map<std::string, int64_t> dimHints;
};

// What a dim hint's value stands for in the heuristics, whose bounds on a
// dynamic row length are powers of two up to 262144: the next power of
// two, at most 524288. Hints of one class compile alike, so caches key on
// the class.
KILN_COMPILER_API int64_t dimHintClass(int64_t value);

struct CompiledGraph {
  std::string graphText;  // canonical text of the compiled graph
  std::vector<CompiledKernel> kernels;  // in launch order
  // Intermediates materialized between kernels, in first-written order
  // (name, dtype, shape with the graph's dynamic dims; `workspace` set).
  // Each is written by one kernel before any later kernel reads it.
  std::vector<KernelTensor> workspace;
  std::string explain;    // the plan, kernel by kernel, with reasons
};

// Keeps freed heap memory in the process (glibc: large allocations from the
// heap instead of fresh mmaps, no trimming below 256 MiB of slack), so that
// repeated compiles do not page-fault the same memory in again. kiln on its
// own only raises glibc's adaptive thresholds once, when it loads nvJitLink
// or NVRTC (to 8/16 MiB, as glibc does after any program frees an 8 MiB
// block; KILN_TUNE_MALLOC=0 skips that), which already keeps nvJitLink's
// working memory mapped between links (32 → 22 ms per cold compile on the
// 2-core VM, docs/benchmarks.md). This fixed setting goes further and changes
// the allocator for the whole process, so kiln never does it on its own:
// call it, or set KILN_TUNE_MALLOC=1. Returns false where unsupported.
KILN_COMPILER_API bool tuneAllocatorForCompilation();

// What the tuner needs to know about one kernel of a graph's plan, without
// compiling it: which schedule builds it, a text that identifies what it
// computes (its sub-graph and schedule: equal texts are the same kernel in
// any graph), the heuristic's config and the schedule's config space.
struct KernelTuningInfo {
  int index = 0;                 // position in the plan (CompileOptions::kernelConfigs)
  std::string name;              // as compileGraph names it ("kiln_row0")
  std::string schedule;          // "pointwise", "row_reduction"
  int scheduleVersion = 0;       // bumped when a config's meaning changes
  std::string signatureText;     // hash it for a tuning-database key
  std::string defaultConfig;     // the config compileGraph would use (JSON)
  // Candidate overrides (JSON objects of the schedule's tunable keys), the
  // heuristic's choice first, no duplicates.
  std::vector<std::string> space;
  std::vector<std::string> dims; // the graph's dynamic dims this kernel uses
};

// The schedules' versions (stored with tuned configs).
inline constexpr int kPointwiseScheduleVersion = 4;  // 2: one block per chunk without max_blocks runs straight-line (no grid-stride loop); 3: 16-bit outputs' exps by ex2.approx.ftz; 4: a chunk's unrolled vectors load first, the scalar entry covers the vectorized entry's chunk
inline constexpr int kRowReductionScheduleVersion = 23;  // 2: clusters, the picked-logit gather, per-step online softmax; 3: staged rows; 4: prefetched rows, min_blocks, evict (L2 hints), one fence per block in grid tails; 5: clusters of 16, looped parts in clusters, two-pass variance in hinted loops, short rows loop with hints; 6: hinted loads carry the L1 priority too, evict 2 (ld.global), held rows take evict_first, min_blocks caps only the widest entry; 7: held cluster rows keep their exps for the softmax output, row loops keep weights in shared memory (resident); 8: softmax exps by ex2.approx.ftz (f32 held rows too), light 16-bit rows of 4096 summed at 256 x 2 with evict; 9: Welford trees of equal counts without counts or divisions; 10: plain row loops (row_loop 1 without a cluster); 11: grid tails over rows of up to 32768 values loop rows, cluster row loops alternate two sets of tree slots; 12: lanes (column-form threads own adjacent rows); 13: looped Welford folds a whole step per Chan merge, resident weights share the SM with min_blocks; 14: few long rows split across blocks (split); 15: dynamic rows one step covers in an entry of their own (one_step); 16: held rows fetch a later row into the L2 (l2_prefetch); 17: the prefetch form keeps weights resident beside the next row, f32 softmax/rmsnorm rows of 4096 held with the fetch ahead; 18: column reductions of few outputs split across blocks in one kernel (column-form split); 19: dynamic rows past 256 KB in looped clusters (sm_90), one-step entries in looped clusters, looped rows' second block from half the unroll; 20: looped rows load a gather's value after the first loop; 21: grid tails unroll 32; 22: column-partial row loops have the L2 fetch rows ahead; 23: short column reductions split to about 512 threads per SM
inline constexpr int kMatmulScheduleVersion = 3;  // 3: grids count output tiles

// Plans the graph and describes each kernel (milliseconds or less: no MLIR).
KILN_COMPILER_API std::vector<KernelTuningInfo> describeKernels(const Graph& graph,
                                                                const CompileOptions& options = {});

// Compiles every kernel of the graph. kiln::Error names what cannot be
// compiled and why.
KILN_COMPILER_API CompiledGraph compileGraph(const Graph& graph, const CompileOptions& options = {});

}  // namespace kiln::compiler
