// Internal: the row-reduction schedule. A kernel group whose reductions all
// run over the last axis of one domain D = [L..., N] (the planner rewrites
// every reduction into that form) becomes one kernel in which a group of T
// threads owns a row:
//   - persistent form (N static, the row fits in registers): each thread
//     loads its V-wide 16-byte vectors of the row once, and every
//     reduction level (softmax: max, then the sum of exp(x - max)) is a pass
//     over registers followed by a warp-shuffle / shared-memory tree;
//     outputs that broadcast a row result back along the row are computed
//     from the same registers and stored with 16-byte stores;
//   - looped form (long or dynamic rows): each level is a loop over the row
//     in chunks of T*V*unroll elements with the accumulators carried in
//     registers; online algorithms fuse levels where they exist (max + sum
//     of exp(x - max) in one pass with a rescaled sum; Welford/Chan for the
//     variance), and outputs take one more pass;
//   - short rows: T < 32 threads per row and several rows per block, with
//     shuffles inside a warp only;
//   - rows too long for one block's registers (sm_90+): the persistent form
//     split across a thread-block cluster of C blocks, each holding N/C
//     columns; a block's partial states meet the others' through
//     distributed shared memory after a cluster barrier, merged in rank
//     order (so every block of the row holds the same result).
// Elementwise producers are computed inside the loads (the shared element
// emitter), accumulation is in f32 for 16-bit floats, reductions are
// deterministic (fixed tree and order), and argmax/argmin return the first
// index of the extreme with NaN winning, like PyTorch.
//
// Layout: config + heuristic, then an emitter that obeys the config.
#pragma once

#include <string>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/graph.h"

namespace kiln::compiler {

struct RowConfig {
  int threadsPerRow = 256;  // T: a power of two in [1, 1024]
  int threads = 256;        // per block: T when T >= 32, else a multiple of 32 (several rows per block)
  int vector = 1;           // V: elements per vector access
  bool persistent = true;   // the row held in registers (static row length only)
  int unroll = 4;           // looped form: vectors per thread per iteration
  int cluster = 1;          // C: blocks per row (a cluster; persistent, sm_90+, N % (C*V) == 0)
  bool rowLoop = true;      // clusters: a grid of the clusters that fit at once, looping over rows
  // One block per row (no cluster), not staged, at least 32 threads per
  // row: a grid of the blocks that fit at once loops over the rows (config
  // "row_loop": 1; off by default). A grid tail (a mean over the rows)
  // then signals once per block instead of once per row.
  bool plainRowLoop = false;
  bool loopsRows() const { return cluster > 1 ? rowLoop : plainRowLoop; }
  // Looped form, one row per block, sm_90+: the block's part of each
  // row-shaped input (the whole row) is copied into shared memory by one
  // bulk copy (TMA) at the row's start, and every pass reads it there, so
  // a block holds no row in registers and several blocks per SM overlap
  // one row's loads with another's passes.
  bool stage = false;
  // Persistent form, sm_90+, one row (or, in a cluster, one part of a row)
  // per block: the blocks that fit at once loop over the rows, and while a
  // block reduces one row held in registers, the TMA unit copies its next
  // row into shared memory (one bulk copy per row-shaped input, completion
  // on an mbarrier), from where it is read into registers at the next
  // row's start. Each block always has a row's loads in flight.
  // 1: bulk copies by one thread (TMA); 2: each thread copies its own
  // 16-byte vectors (cp.async, the same columns it reads back).
  int prefetch = 0;
  // Looped form (not staged): the 16-byte loads of row-shaped inputs carry
  // L2 eviction hints, evict_last in the passes before the last (a later
  // pass reads the row again, from L2) and evict_first in the last. Held
  // form (not prefetched): the row's single read is evict_first.
  // Each hinted load carries the same priority for L1 (so a row read again
  // by the next pass can still be in L1) and for L2 (a cache policy):
  // 1: ld.global.nc (the read-only path); 2: ld.global.
  int evict = 0;
  // A looped row with L2 hints (evict): its variance in one pass (Welford,
  // a Chan merge per step) instead of two (the mean, then the squared
  // deviations: a third read of the row, from L2).
  bool welford = false;
  // At least this many blocks per SM (0: no request): ptxas caps each
  // thread's registers so that they fit (nvvm.minctasm), spilling if it must.
  int minBlocks = 0;
  // Persistent form looping over rows (clusters, prefetch): the inputs
  // every row shares (weights, biases) are copied into shared memory once
  // per block, each thread its own columns, and read there by every row
  // (as many as fit in 200 KB), instead of from L2 in every row's last pass.
  bool resident = true;
  // The column form (one thread per row, looped, one pass, no row-shaped
  // outputs) whose consecutive rows are adjacent in memory (a reduction
  // over a non-last axis): each thread owns this many consecutive rows
  // (1, 2, 4, 8, 16), one accumulator per row, and reads the rows' values
  // at a column with one vector load (the vector entry; the scalar entry
  // loads them one by one). Rows per block = threads x lanes.
  int lanes = 1;
  // Looped form, one value per row (no row-shaped output, one pass): each
  // row is split across this many blocks (a power of two), each reducing a
  // contiguous part of whole steps (the last part shorter, later ones
  // empty: any row length, dynamic too); each block writes its state to a
  // workspace of the kernel's own and the last block of the row to finish
  // (a per-row counter) merges the states in a fixed order (deterministic)
  // and writes the row's results. For few long rows that the planner cannot
  // reshape into parts (a whole tensor of dynamic or odd size).
  int split = 1;
  // Looped form over a dynamic row length with L2 hints (evict), several
  // passes: rows that one step of this many vectors per thread covers (at
  // most T x V x one_step values, LaunchGeometry::oneStepRange) get a
  // vectorized entry of their own in which each pass is one guarded step,
  // with no loop, so that the passes' loads of the same vectors meet in one
  // (as a static row of one step's do: layernorm's mean and variance read
  // the row once); the launcher takes the looped entry for longer rows.
  // 0: no such entry. A power of two, at most 16.
  int oneStep = 0;
  // A kernel that loops over rows (clusters, prefetch, plain row loops):
  // at most this many blocks (whole clusters), fewer than fit at once
  // (0: as many as fit). For measuring how a kernel scales with SMs.
  int64_t maxBlocks = 0;
  // Held form, one row per block, no row loop (sm_80+): each block asks
  // the L2 to fetch the row this many rows ahead (prefetch.global.L2 with
  // evict_last, one 128-byte line per thread at a time, before its own
  // row's loads), so that the blocks dispatched next find their rows
  // already on the way: loads in flight beyond what the registers of one
  // or two held rows per SM allow. 0: none. The heuristic's distance is
  // about 6 MB of rows (farther, the L2 drops them before they are read).
  // Also in a column-partial kernel's part loop (the next row prefetched):
  // the part's row this many rows ahead, about 64 KB of rows per SM
  // (columnPartialForm sets it).
  int64_t l2Prefetch = 0;
  std::string json() const;  // "cluster" appears only when C > 1, "stage", "prefetch", "evict", "welford" and "min_blocks" only when set, "resident" only when 0, "lanes" only when > 1, "max_blocks" only when > 0, "split" only when > 1, "one_step" only when > 0, "l2_prefetch" only when > 0
};

// An SM of sm_90 (and of every chip kiln targets so far): 65536 registers,
// allocated per warp in units of 256 (8 a thread), and 2048 threads.
constexpr int kRegistersPerSm = 65536;
constexpr int kMaxThreadsPerSm = 2048;

// A good config from the domain, dtypes and device (clusters on sm_90+).
// gridTail: the kernel ends with a grid tail (KernelPlan::tail, e.g. cross_entropy's mean).
// `preferred`, when given, receives the range of a dynamic row length the
// config was chosen for (LaunchGeometry::preferred), or stays empty.
RowConfig rowHeuristic(const Graph& g, const CompileOptions& options, bool gridTail = false,
                       std::vector<LaunchGeometry::DimRange>* preferred = nullptr);

// The bytes of one row of the row-shaped inputs of a row kernel's graph:
// their bytes per column times the row's length, the static one or, for a
// dynamic length, the largest of its range in `preferred` (0 where that
// range is unbounded or absent).
int64_t rowBytesAtMost(const Graph& g, const std::vector<LaunchGeometry::DimRange>& preferred);

// A dynamic row length (looped, read again by a later pass) of up to this
// many bytes a row (row-shaped inputs' bytes per value, a power of two)
// gets 128 threads a row, up to the second 256, longer ones 512, in two
// ranges split at the third. On sm_90 longer rows loop across a cluster:
// of 8 blocks up to the fourth, of 16 past it.
constexpr int64_t kDynamicRowBytes128 = 16 << 10, kDynamicRowBytes256 = 32 << 10, kDynamicRowBytes512 = 64 << 10;
constexpr int64_t kDynamicRowBytesCluster8 = 4 * kDynamicRowBytes512, kDynamicRowBytesCluster16 = 8 * kDynamicRowBytes512;


// Applies a JSON override (keys: threads_per_row, threads, vector,
// persistent (0/1), unroll, cluster (1, 2, 4, 8, 16), row_loop (0/1), stage (0/1), prefetch (0, 1, 2), evict (0, 1, 2), min_blocks (0..32), resident (0/1), welford (0/1), lanes (1, 2, 4, 8, 16), max_blocks, split (1..1024, powers of two), one_step (0, 1, 2, 4, 8, 16), l2_prefetch (0..1048576)); throws kiln::Error naming a
// bad key or value.
void applyRowOverride(RowConfig& c, const std::string& json);

// The schedule's config space around the heuristic's choice `h` for the
// sub-graph `g`: override objects of every key, `h` first.
// `sm`: the target's SM number (clusters from 90).
std::vector<std::string> rowSpace(const Graph& g, const RowConfig& h, int sm);

struct RowKernel {
  std::string mlir;
  CompiledKernel kernel;
  // The PTX ISA the kernel needs beyond the chip's lowest (NVPTX features,
  // e.g. "+ptx80" for bulk copies); empty: the lowest.
  std::string ptxFeatures;
};
// `g` is a planner sub-graph: its outputs are either of the domain's shape
// or one value per row. `sm`: the target's SM number; a cluster config on a
// target below sm_90 is a kiln::Error. `tail` (with `tailCounter`, an i32[1]
// workspace tensor at zero): a one-row reduction graph over outputs of `g`
// that the last block to finish runs (KernelPlan::tail); its outputs join
// the kernel's, after the counter.
RowKernel emitRowReduction(const Graph& g, const RowConfig& config, const std::string& name,
                           EntryVariants variants = EntryVariants::All, int sm = 90, const Graph* tail = nullptr,
                           const std::string& tailCounter = "");

}  // namespace kiln::compiler
