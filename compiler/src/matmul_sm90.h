// Internal: the matmul schedule's Hopper kernel (sm_90a), generated CUDA C++
// with inline PTX (no CUTLASS), compiled by NVRTC (compute_90a) and ptxas.
// See shared/notes/hopper-gemm.md for where its structure comes from.
//
// The kernel:
//  - C = A @ B (+ the graph's epilogue), bf16 or f16 in, f32 accumulation;
//    A and B in either layout (K-major or M/N-major: the transposed wgmma
//    forms read either), batched through 3-D tensor maps;
//  - a persistent grid (one CTA per SM) walking 128 x BN output tiles in
//    grouped order (group_m tile rows share B tiles in L2);
//  - 384 threads: a producer warpgroup (one thread issues TMA loads into a
//    ring of `stages` shared-memory buffers, 128-byte swizzled, guarded by
//    full/empty mbarriers) and two consumer warpgroups (64 rows each, wgmma
//    m64nBNk16 from shared-memory descriptors, one wgmma group in flight);
//  - register reallocation (setmaxnreg: producer 40, consumers 232);
//  - the epilogue (matmul.h) applied in registers; for tiles wholly inside
//    the output written to a 128-byte swizzled staging buffer per consumer
//    (64 x 64 elements per output at a time) and stored by TMA; edge tiles
//    (and graphs whose outputs TMA cannot store) store straight to global
//    memory (any M, N; TMA zero-fills the tails of K and the tiles).
// Tensor maps (one per operand) are kernel parameters after the usual ABI's
// (__grid_constant__), built by the launcher from the CompiledKernel's
// tensorMaps, each time from the launch's pointers and sizes.
#pragma once

#include <string>
#include <vector>

#include "kiln/compiler/api.h"
#include "kiln/dtype.h"
#include "matmul.h"

namespace kiln::compiler {

struct KILN_COMPILER_API Sm90MatmulConfig {
  int blockN = 256;      // 64, 128, 192 or 256
  int stages = 4;        // shared-memory ring depth
  int groupM = 16;       // tile rows walked together (L2 reuse of B tiles)
  // Consumers: cooperative (both warpgroups on every tile, 64 rows each) or
  // ping-pong (each warpgroup its own tiles, 128 rows: one's epilogue runs
  // while the other's wgmmas do; block_n <= 128).
  bool pingpong = false;
  // Tiles wholly inside the output store through shared memory and TMA
  // (cooperative consumers; up to 2 outputs of bf16, f16 or f32 whose rows
  // are a multiple of 16 bytes, when the staging fits next to the ring);
  // otherwise, and at the edges, straight from registers. A dynamic N is
  // checked at launch: the kernel takes either path by (N * size) % 16.
  bool tmaStore = true;
  // CTAs per cluster along M (1 or 2): a cluster's CTAs take vertically
  // adjacent tiles and share B's tile, each loading half of it by TMA
  // multicast (block_n 128 or 256).
  int clusterM = 1;
  // TMA-store staging buffers per consumer (1, 2 or 4, dividing block_n /
  // 64): each 64-column chunk of a tile is staged in buffer chunk % n, so
  // a chunk waits only for the stores of the chunk n before it to have read
  // its buffer. More buffers let a tile's stores drain while the next
  // tile's wgmmas run (short K, where the epilogue is most of a tile).
  int stagingBuffers = 1;
  // The row-softmax form only (a softmax over the product's rows in the
  // kernel's graph, see below): CTAs per cluster (1, 2, 4 or 8) that split
  // a 128-row block's column tiles and exchange their rows' statistics.
  int clusterN = 1;
  int producerRegs = 40; // setmaxnreg for the producer warpgroup
  int consumerRegs = 232;
  std::string json() const;
  // Dynamic shared memory the kernel needs (ring, barriers, 1 KiB alignment slack).
  int sharedBytes() const;
};

// Shared memory of the TMA-store staging for this graph's outputs (both
// consumers), or 0 when its outputs cannot be stored by TMA (a static N
// whose rows are not 16-byte multiples counts; a dynamic one is checked at
// launch).
KILN_COMPILER_API int sm90StagingBytes(const Graph& g);

// Applies a JSON override (keys: block_n, stages, group_m, pingpong, tma_store, cluster_m, consumer_regs); throws
// kiln::Error naming a bad key or value.
KILN_COMPILER_API void applySm90MatmulOverride(Sm90MatmulConfig& c, const std::string& json);

// The heuristic: the widest tile that still gives every SM a tile, the
// deepest ring that fits.
KILN_COMPILER_API Sm90MatmulConfig sm90MatmulHeuristic(const Graph& g, int smCount);

// The default search space (every config must compile without spills).
KILN_COMPILER_API std::vector<Sm90MatmulConfig> sm90MatmulSpace();
// The row-softmax form's (see below): cooperative, cluster_m 1; tiles 128 or
// 256 wide, clusters of 1 to 8 along N, 2 to 4 ring stages, one staging
// buffer or one per chunk.
KILN_COMPILER_API std::vector<Sm90MatmulConfig> sm90RowMatmulSpace();

// Whether the Hopper kernel takes this graph's matmul: bf16/f16, and the
// row stride of each operand (its contiguous dim) a static multiple of 8
// elements (TMA needs 16-byte strides). Otherwise the portable kernel runs.
KILN_COMPILER_API bool sm90MatmulApplies(const Graph& g);
// The same for matmul node `mm` of any graph (the planner asks it of the
// whole graph's matmuls).
bool sm90MatmulOperandsApply(const Graph& g, const Node& mm);

// The row-softmax form: where the kernel's graph also takes a softmax over
// the product's rows (MatmulRowStats: the planner puts it there for a short
// K, where computing the product twice costs less than storing it and
// reading it back), each 128-row block of the output is a work unit of a
// cluster of `cluster_n` CTAs. In a first pass over the unit's column tiles
// the consumers keep each row's running max and sum of exp(v - max) (online
// softmax) and store nothing; the cluster's CTAs exchange those through
// each other's shared memory; a second pass computes the tiles again and
// stores the outputs, computed from v and the row's max and sum, through
// the usual epilogue (TMA for inner tiles). Cooperative consumers,
// cluster_m 1.
KILN_COMPILER_API bool sm90RowForm(const Graph& g);

// The kernel (source, signature, tensor maps, launch geometry).
KILN_COMPILER_API MatmulKernel emitSm90Matmul(const Graph& g, const Sm90MatmulConfig& config, const std::string& name, int smCount);

}  // namespace kiln::compiler
