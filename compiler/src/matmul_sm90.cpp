#include "matmul_sm90.h"

#include <algorithm>

#include "config_override.h"
#include "kiln/error.h"

namespace kiln::compiler {

std::string Sm90MatmulConfig::json() const {
  return "{\"block_m\": 128, \"block_n\": " + std::to_string(blockN) + ", \"block_k\": 64, \"stages\": " +
         std::to_string(stages) + ", \"group_m\": " + std::to_string(groupM) + ", \"pingpong\": " +
         std::to_string(pingpong ? 1 : 0) + ", \"tma_store\": " + std::to_string(tmaStore ? 1 : 0) +
         ", \"staging_buffers\": " + std::to_string(stagingBuffers) +
         ", \"cluster_m\": " + std::to_string(clusterM) +
         (clusterN != 1 ? ", \"cluster_n\": " + std::to_string(clusterN) : std::string()) +
         ", \"consumer_regs\": " + std::to_string(consumerRegs) + "}";
}

int Sm90MatmulConfig::sharedBytes() const {
  const int aBytes = 128 * 64 * 2, bBytes = blockN * 64 * 2;
  return stages * (aBytes + bBytes) + 2 * stages * 8 + 1024;
}

namespace {

constexpr int kMaxShared = 227 * 1024;

bool validBlockN(int bn) { return bn == 64 || bn == 128 || bn == 192 || bn == 256; }

// Shared memory of the row form's exchange: two barriers and, per buffer,
// each rank's (max, sum) of each of the 128 rows.
int rowExchangeBytes(int clusterN) { return 16 + 2 * clusterN * 128 * 8; }

}  // namespace

void applySm90MatmulOverride(Sm90MatmulConfig& c, const std::string& json) {
  applyIntegerOverrides(json, "matmul (sm_90a kernel)",
                        "block_n: 64, 128, 192 or 256 (ping-pong: 64 or 128); stages: 2 to what shared memory "
                        "holds; group_m: 1 to 64; pingpong: 0 or 1; tma_store: 0 or 1; staging_buffers: 1, 2 or 4 "
                        "(dividing block_n / 64); cluster_m: 1 or 2 (2: block_n 128 "
                        "or 256, pingpong 0); cluster_n: 1, 2, 4 or 8 (a softmax over the rows); consumer_regs: 232 or 240 (producer 40 or 24); block_m: 128; block_k: 64",
                        [&](const std::string& key, int64_t v) {
                          if (key == "block_n" && validBlockN(static_cast<int>(v))) c.blockN = static_cast<int>(v);
                          else if (key == "stages" && v >= 2 && v <= 16) c.stages = static_cast<int>(v);
                          else if (key == "group_m" && v >= 1 && v <= 64) c.groupM = static_cast<int>(v);
                          else if (key == "pingpong" && (v == 0 || v == 1)) c.pingpong = v == 1;
                          else if (key == "tma_store" && (v == 0 || v == 1)) c.tmaStore = v == 1;
                          else if (key == "staging_buffers" && (v == 1 || v == 2 || v == 4))
                            c.stagingBuffers = static_cast<int>(v);
                          else if (key == "cluster_m" && (v == 1 || v == 2)) c.clusterM = static_cast<int>(v);
                          else if (key == "cluster_n" && (v == 1 || v == 2 || v == 4 || v == 8))
                            c.clusterN = static_cast<int>(v);
                          else if (key == "consumer_regs" && (v == 232 || v == 240)) {
                            // setmaxnreg split of the 64K registers: 128 x producer + 256 x consumer.
                            c.consumerRegs = static_cast<int>(v);
                            c.producerRegs = v == 240 ? 24 : 40;
                          }
                          else if ((key == "block_m" && v == 128) || (key == "block_k" && v == 64)) return true;
                          else return false;
                          return true;
                        });
  if (c.pingpong && c.blockN > 128)
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": a ping-pong consumer holds 128 x block_n "
                "accumulators, so block_n is at most 128");
  if (c.clusterM == 2 && c.blockN != 128 && c.blockN != 256)
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": a cluster of 2 splits B's tile in two halves of "
                "64-wide boxes, so block_n is 128 or 256");
  if (c.clusterM == 2 && c.pingpong)
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": clusters take cooperative consumers (pingpong 0)");
  if ((c.blockN / 64) % c.stagingBuffers != 0)
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": staging_buffers must divide the tile's " +
                std::to_string(c.blockN / 64) + " chunks of 64 columns");
  if (c.sharedBytes() > kMaxShared)
    throw Error("matmul (sm_90a kernel): config " + c.json() + " needs " + std::to_string(c.sharedBytes()) +
                " bytes of shared memory; at most " + std::to_string(kMaxShared) + " fit");
}

namespace {

// The deepest ring of at most 6 stages that fits.
int stagesFor(int blockN) {
  Sm90MatmulConfig c;
  c.blockN = blockN;
  for (c.stages = 6; c.stages > 2 && c.sharedBytes() > kMaxShared; --c.stages) {
  }
  return c.stages;
}

// The tiles of a static-shaped problem (0 when a dim is dynamic).
int64_t tileCount(const Graph& g, int blockN) {
  const MatmulShape sig = matmulShape(g);
  int64_t batch = 1;
  for (const Dim& d : sig.batch) {
    if (!d.isStatic()) return 0;
    batch *= d.size;
  }
  if (!sig.M.isStatic() || !sig.N.isStatic()) return 0;
  return batch * ((sig.M.size + 127) / 128) * ((sig.N.size + blockN - 1) / blockN);
}

}  // namespace

bool sm90RowForm(const Graph& g) { return matmulRowStats(g).any(); }

Sm90MatmulConfig sm90MatmulHeuristic(const Graph& g, int smCount) {
  Sm90MatmulConfig c;
  const bool rows = sm90RowForm(g);
  // 128 x 256 tiles unless that leaves SMs idle: small M (decode shapes)
  // then takes narrower tiles so that every SM streams part of B.
  c.blockN = 256;
  for (int bn : {128, 64}) {
    const int64_t tiles = tileCount(g, c.blockN);
    if (rows || tiles == 0 || tiles >= smCount) break;
    c.blockN = bn;
  }
  int extra = 0;  // the row form's exchange
  if (rows) {
    // Row form: clusters that split a unit's (a 128-row block's) column
    // tiles, as many CTAs per cluster as give every SM a CTA in one wave
    // (4 where the rows are a dynamic count: 4096 rows, 32 units, fill 128
    // of 132 SMs), no more than the row has tiles.
    const MatmulShape sh = matmulShape(g);
    int64_t units = 0;
    if (sh.M.isStatic()) {
      units = (sh.M.size + 127) / 128;
      for (const Dim& d : sh.batch) units = d.isStatic() ? units * d.size : 0;
    }
    if (sh.N.isStatic() && sh.N.size <= 128) c.blockN = 128;
    c.clusterN = units == 0 ? 4 : 1;
    while (units > 0 && c.clusterN < 8 && units * c.clusterN * 2 <= smCount) c.clusterN *= 2;
    if (sh.N.isStatic())
      while (c.clusterN > 1 && (sh.N.size + c.blockN - 1) / c.blockN < c.clusterN) c.clusterN /= 2;
    extra = rowExchangeBytes(c.clusterN);
  }
  // Cooperative consumers: ping-pong (in the tuning space) measured 7%
  // slower on plain GEMMs and did not hide the gelu epilogue on the H200
  // (docs/benchmarks.md).
  c.stages = stagesFor(c.blockN);
  // A short K (at most 2 k-blocks: attention scores over a head dim of 64
  // or 128): a tile's wgmmas are short and its epilogue is most of its
  // time, so the tile's chunks get staging buffers of their own (its
  // stores drain while the next tile's wgmmas run), paid for with ring
  // stages (3 still load the next tile during an epilogue). Measured on an
  // H100 (session 43, docs/benchmarks.md): scores T4096 d128 20.3 -> 18.5 us
  // (T dynamic) and 18.3 -> 17.8 us (T static) with 4 buffers and 3 stages.
  const MatmulShape sh = matmulShape(g);
  const int staging = sm90StagingBytes(g);
  if (staging > 0 && sh.K.isStatic() && sh.K.size <= 128) {
    for (int nb = c.blockN / 64; nb > 1; nb /= 2) {
      if ((c.blockN / 64) % nb != 0) continue;
      Sm90MatmulConfig t = c;
      t.stagingBuffers = nb;
      t.stages = std::min(c.stages, 3);
      if (t.sharedBytes() + nb * staging + extra <= kMaxShared) return t;
    }
  }
  while (c.stages > 2 && c.sharedBytes() + extra > kMaxShared) --c.stages;
  return c;
}

std::vector<Sm90MatmulConfig> sm90MatmulSpace() {
  std::vector<Sm90MatmulConfig> out;
  for (int pingpong : {0, 1})
    for (int cluster : {1, 2})
      for (int bn : {256, 128, 192, 64})
        for (int stages : {3, 4, 5, 6})
          for (int group : {8, 16}) {
            Sm90MatmulConfig c;
            c.blockN = bn;
            c.stages = stages;
            c.groupM = group;
            c.pingpong = pingpong == 1;
            c.clusterM = cluster;
            if (c.sharedBytes() > kMaxShared || (c.pingpong && bn > 128)) continue;
            // Clusters: cooperative consumers, tiles 128 or 256 wide.
            if (cluster == 2 && (c.pingpong || (bn != 128 && bn != 256))) continue;
            out.push_back(c);
          }
  // Staging buffers per 64-column chunk (short K), with 2 or 3 ring stages.
  for (int bn : {256, 128})
    for (int nb : {2, 4})
      for (int stages : {2, 3}) {
        if ((bn / 64) % nb != 0) continue;
        Sm90MatmulConfig c;
        c.blockN = bn;
        c.stagingBuffers = nb;
        c.stages = stages;
        out.push_back(c);
      }
  // The register split: the consumers' 232 or 240 registers, for the
  // heuristic's large-problem tiles.
  for (int bn : {256, 128}) {
    Sm90MatmulConfig c;
    c.blockN = bn;
    c.stages = stagesFor(bn);
    c.consumerRegs = 240;
    c.producerRegs = 24;
    out.push_back(c);
  }
  return out;
}

std::vector<Sm90MatmulConfig> sm90RowMatmulSpace() {
  std::vector<Sm90MatmulConfig> out;
  for (int bn : {256, 128})
    for (int cn : {1, 2, 4, 8})
      for (int stages : {2, 3, 4})
        for (int nb : {1, bn / 64}) {
          Sm90MatmulConfig c;
          c.blockN = bn;
          c.clusterN = cn;
          c.stages = stages;
          c.stagingBuffers = nb;
          out.push_back(c);
        }
  return out;
}

int sm90StagingBytes(const Graph& g) {
  const MatmulShape sh = matmulShape(g);
  if (g.outputs().size() > 2) return 0;
  int bytes = 0;
  for (const GraphOutput& o : g.outputs()) {
    const DType t = g.node(o.node).dtype;
    if (t != DType::BF16 && t != DType::F16 && t != DType::F32) return 0;
    const int size = static_cast<int>(dtypeSize(t));
    // A dynamic N is checked at launch (the kernel and the launcher agree
    // on (N * size) % 16; see TensorMapParam::whenRowsAligned).
    if (sh.N.isStatic() && (sh.N.size * size) % 16 != 0) return 0;
    bytes += 2 * 64 * 64 * size;
  }
  return bytes;
}

bool sm90MatmulApplies(const Graph& g) { return sm90MatmulOperandsApply(g, *matmulShape(g).mm); }

bool sm90MatmulOperandsApply(const Graph& g, const Node& mm) {
  if (mm.dtype != DType::BF16 && mm.dtype != DType::F16) return false;
  // The contiguous dim of each operand sets its row stride.
  const Node& a = g.node(mm.inputs[0]);
  const Node& b = g.node(mm.inputs[1]);
  for (const Node* n : {&a, &b}) {
    if (n->dtype != mm.dtype) return false;
    const Dim& inner = n->shape.back();
    if (!inner.isStatic() || inner.size % 8 != 0) return false;
  }
  return true;
}

namespace {

const char* kHelpers = R"(
// kiln matmul for sm_90a: $WHAT
//   tile 128 x $BN x 64, $STAGES-stage TMA ring, persistent grid, tiles in groups of $GROUP_M rows;
//   384 threads: a producer warpgroup (TMA) and 2 consumer warpgroups (wgmma m64n$BNk16, 64 rows each)
$PRELUDE
struct __align__(64) KilnTensorMap { unsigned long long opaque[16]; };

__device__ __forceinline__ unsigned kiln_smem(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void kiln_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void kiln_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void kiln_mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void kiln_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nKILN_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra KILN_WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
// One box of shared memory to a 3-D tensor map's (inner, rows, batch), in
// the thread's bulk group.
__device__ __forceinline__ void kiln_tma_store(const KilnTensorMap* map, unsigned src, int x, int y, int z) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
               :: "l"(map), "r"(src), "r"(x), "r"(y), "r"(z) : "memory");
}
// The same box into the same shared-memory offset of every CTA of the
// cluster in `mask`, completing on each one's barrier at `bar`'s offset.
__device__ __forceinline__ void kiln_tma_load_mc(unsigned dst, const KilnTensorMap* map, unsigned bar, int x, int y, int z, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%3, %4, %5}], [%2], %6;"
      :: "r"(dst), "l"(map), "r"(bar), "r"(x), "r"(y), "r"(z), "h"(mask) : "memory");
}
// An arrival on the barrier at `bar`'s offset in CTA `rank` of the cluster,
// with the default (.release.cta) semantics: the stage's reads were wgmma's,
// already waited for. (The first version's .release.cluster arrivals, on
// the consumers' path every k-step, ran 30% slower than single CTAs; that
// this was the cause is a guess not yet measured.)
__device__ __forceinline__ void kiln_mbar_arrive_cluster(unsigned bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
// One box of a 3-D tensor map (inner, rows, batch) into shared memory,
// completing on `bar`.
__device__ __forceinline__ void kiln_tma_load(unsigned dst, const KilnTensorMap* map, unsigned bar, int x, int y, int z) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      :: "r"(dst), "l"(map), "r"(bar), "r"(x), "r"(y), "r"(z) : "memory");
}
// Shared-memory matrix descriptors for 128-byte swizzled tiles: start
// address >> 4 (bits 0-13), leading byte offset >> 4 (16-29), stride byte
// offset >> 4 (32-45), swizzle mode 1 (128B, bits 62-63). K-major: rows of
// 64 K values (128 B), 8-row groups 1024 B apart. M/N-major: 64-wide M/N
// chunks of 64 K rows 8192 B apart (leading), 8-row K groups 1024 B apart.
__device__ __forceinline__ unsigned long long kiln_desc_k(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ unsigned long long kiln_desc_mn(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62);
}
)";

const char* kKernel = R"(
extern "C" __global__ void __launch_bounds__(384, 1)
$NAME($PARAMS, const __grid_constant__ KilnTensorMap tmA, const __grid_constant__ KilnTensorMap tmB$OUT_MAPS) {
  const long long M = $M, N = $N, K = $K;
  const long long tilesM = (M + 127) / 128, tilesN = (N + $BN - 1) / $BN;
  // Work units: $CLUSTER vertically adjacent tiles (one per CTA of a cluster,
  // sharing B's tile), walked by clusters: unit u of cluster kiln_cid.
  const long long unitsM = (tilesM + $CLUSTER - 1) / $CLUSTER;
  const long long tilesPerBatch = unitsM * tilesN, numTiles = $BATCH * tilesPerBatch;
  const long long kiln_cid = blockIdx.x / $CLUSTER, kiln_ncl = gridDim.x / $CLUSTER;
$CLUSTER_RANK
  const int kBlocks = (int)((K + 63) / 64);
  extern __shared__ unsigned char kiln_smem_raw[];
  unsigned char* smem = (unsigned char*)(((unsigned long long)kiln_smem_raw + 1023) & ~1023ull);
  unsigned long long* full = (unsigned long long*)(smem + $STAGES * $STAGE_BYTES + $STAGING_BYTES);
  unsigned long long* empty = full + $STAGES;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < $STAGES; ++s) {
      kiln_mbar_init(kiln_smem(&full[s]), 1);
      kiln_mbar_init(kiln_smem(&empty[s]), $EMPTY_COUNT);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
$INIT_SYNC
  // Tile t of the persistent loop: batch z, corner (m0, n0), in groups of
  // $GROUP_M tile rows so that concurrent CTAs share B tiles in L2. In 32-bit
  // arithmetic where the tile count allows (always, but for absurd batches):
  // a 64-bit division by a runtime value (a dynamic dim) is a long
  // subroutine, paid between every two tiles.
  const bool kiln_t32 = numTiles <= 0xFFFFFFFFLL;
  const unsigned kiln_tpb32 = (unsigned)tilesPerBatch, kiln_um32 = (unsigned)unitsM;
  const unsigned kiln_gs32 = $GROUP_M * tilesN > 0xFFFFFFFFLL ? 0xFFFFFFFFu : (unsigned)($GROUP_M * tilesN);
#define KILN_TILE(t)                                                                  \
  long long z, m0, n0;                                                                \
  if (kiln_t32) {                                                                     \
    const unsigned t32 = (unsigned)(t), z32 = t32 / kiln_tpb32, r = t32 - z32 * kiln_tpb32; \
    const unsigned group = r / kiln_gs32, first = group * $GROUP_M;                   \
    const unsigned rows = kiln_um32 - first < $GROUP_M ? kiln_um32 - first : $GROUP_M; \
    const unsigned inGroup = r - group * kiln_gs32;                                   \
    z = z32;                                                                          \
    m0 = ((long long)(first + inGroup % rows) * $CLUSTER + kiln_crank) * 128;         \
    n0 = (long long)(inGroup / rows) * $BN;                                           \
  } else {                                                                            \
    z = (t) / tilesPerBatch;                                                          \
    const long long r = (t) - z * tilesPerBatch;                                      \
    const long long group = r / ($GROUP_M * tilesN), first = group * $GROUP_M;        \
    const long long rows = unitsM - first < $GROUP_M ? unitsM - first : $GROUP_M;     \
    const long long inGroup = r - group * $GROUP_M * tilesN;                          \
    m0 = ((first + inGroup % rows) * $CLUSTER + kiln_crank) * 128;                    \
    n0 = (inGroup / rows) * $BN;                                                      \
  }
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $PRODUCER_REGS;");
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmA) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmB) : "memory");
      int it = 0;
      for (long long tile = kiln_cid; tile < numTiles; tile += kiln_ncl) {
        KILN_TILE(tile)
        long long zA = 0, zB = 0;
$OPERAND_BATCH
        for (int kb = 0; kb < kBlocks; ++kb, ++it) {
          const int s = it % $STAGES;
          kiln_mbar_wait(kiln_smem(&empty[s]), ((it / $STAGES) & 1) ^ 1);
          const unsigned bar = kiln_smem(&full[s]);
          const unsigned sA = kiln_smem(smem + s * $STAGE_BYTES), sB = sA + $A_BYTES;
          kiln_mbar_expect_tx(bar, $EXPECT_BYTES);
$LOADS
        }
      }
$PRODUCER_TAIL    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 $CONSUMER_REGS;");
  const int c = wg - 1, w = tid / 32, l = tid % 32;
$EPILOGUE
  float d[$ACC];
  // $SCHEME
  for (long long j = $FIRST_J;; j += $J_STEP) {
    const long long tile = kiln_cid + j * kiln_ncl;
    if (tile >= numTiles) break;
    KILN_TILE(tile)
$HANDOFF_BEFORE    long long it = j * kBlocks;  // the ring position of the tile's first k-block
$MMA_TILE    // Accumulator i of an m64 block, thread (warp w, lane l): row 16w + l/4 +
    // 8 [i%4 >= 2], column 8 (i/4) + 2 (l%4) + i%2.
$STORE_CALLS  }
$STORE_TAIL#undef KILN_TILE
}
)";

// The row-softmax form (matmul_sm90.h): per work unit (a 128-row block of a
// batch) two passes over the unit's column tiles, the CTA of cluster rank r
// taking tiles r, r + $CLUSTER, ...: the first keeps each row's running
// (max, sum of exp(v - max)), the cluster's CTAs exchange them through
// each other's shared memory, and the second recomputes the product and
// stores the outputs from v and the row's (max, sum).
// Both kernels' tile at (m0, n0) into d: the wgmmas of its k-blocks from
// ring position `it` on (which counts on), each stage released once read.
const char* kMmaTile = R"(    for (int kb = 0; kb < kBlocks; ++kb, ++it) {
      const int s = (int)(it % $STAGES);
      kiln_mbar_wait(kiln_smem(&full[s]), (unsigned)((it / $STAGES) & 1));
      const unsigned stage = kiln_smem(smem + s * $STAGE_BYTES);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const unsigned long long db = $DESC_B;
$WGMMAS      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // Keep one group in flight: the previous k-block's stage is free.
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (kb > 0 && $RELEASERS) kiln_release(kiln_smem(&empty[(it - 1) % $STAGES]));
    }
$HANDOFF_AFTER    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (kBlocks > 0) {
      if ($RELEASERS) kiln_release(kiln_smem(&empty[(it - 1) % $STAGES]));
    } else {
#pragma unroll
      for (int i = 0; i < $ACC; ++i) d[i] = 0.0f;
    }
)";

const char* kRowKernel = R"(
__device__ __forceinline__ float kiln_neg_inf() { return __int_as_float(0xff800000); }
// A value (x, y) into the same shared-memory offset of CTA `rank` of the cluster.
__device__ __forceinline__ void kiln_st_cluster(const void* local, unsigned rank, float x, float y) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(kiln_smem(local)), "r"(rank));
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" :: "r"(remote), "f"(x), "f"(y) : "memory");
}
// An arrival on the barrier at `bar`'s offset in CTA `rank`, releasing this
// thread's earlier accesses to the cluster.
__device__ __forceinline__ void kiln_mbar_arrive_release_cluster(unsigned bar, unsigned rank) {
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote) : "memory");
}
__device__ __forceinline__ void kiln_mbar_wait_acquire_cluster(unsigned bar, unsigned parity) {
  asm volatile("{\n.reg .pred p;\nKILN_WAIT_X:\n"
               "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra KILN_WAIT_X;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

extern "C" __global__ void __launch_bounds__(384, 1)
$NAME($PARAMS, const __grid_constant__ KilnTensorMap tmA, const __grid_constant__ KilnTensorMap tmB$OUT_MAPS) {
  const long long M = $M, N = $N, K = $K;
  const long long tilesM = (M + 127) / 128, tilesN = (N + $BN - 1) / $BN;
  // Work units: every batch's 128-row blocks, one cluster of $CLUSTER CTAs
  // each at a time; the CTA of rank r takes column tiles r, r + $CLUSTER, ...
  const long long numUnits = $BATCH * tilesM;
  const long long kiln_cid = blockIdx.x / $CLUSTER, kiln_ncl = gridDim.x / $CLUSTER;
  unsigned kiln_crank = 0;
  if ($CLUSTER > 1) asm("mov.u32 %0, %%cluster_ctarank;" : "=r"(kiln_crank));
  const int kBlocks = (int)((K + 63) / 64);
  extern __shared__ unsigned char kiln_smem_raw[];
  unsigned char* smem = (unsigned char*)(((unsigned long long)kiln_smem_raw + 1023) & ~1023ull);
  unsigned long long* full = (unsigned long long*)(smem + $STAGES * $STAGE_BYTES + $STAGING_BYTES);
  unsigned long long* empty = full + $STAGES;
  // The exchange, double-buffered by unit: barrier xbar[b] completes when
  // every consumer thread of every CTA of the cluster has written its rows'
  // (max, sum) into slot [b][its rank][row] of every CTA (the writes of a
  // unit two ahead wait for this unit's exchange to complete everywhere,
  // which each CTA's threads join only after reading it).
  unsigned long long* xbar = empty + $STAGES;
  float2* xstat = (float2*)(xbar + 2);
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < $STAGES; ++s) {
      kiln_mbar_init(kiln_smem(&full[s]), 1);
      kiln_mbar_init(kiln_smem(&empty[s]), 2);
    }
    kiln_mbar_init(kiln_smem(&xbar[0]), 256 * $CLUSTER);
    kiln_mbar_init(kiln_smem(&xbar[1]), 256 * $CLUSTER);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
$INIT_SYNC
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $PRODUCER_REGS;");
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmA) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmB) : "memory");
      int it = 0;
      for (long long u = kiln_cid; u < numUnits; u += kiln_ncl) {
        const long long z = u / tilesM, m0 = (u - z * tilesM) * 128;
        long long zA = 0, zB = 0;
$OPERAND_BATCH
        for (int pass = 0; pass < 2; ++pass)
          for (long long nt = kiln_crank; nt < tilesN; nt += $CLUSTER) {
            const long long n0 = nt * $BN;
            for (int kb = 0; kb < kBlocks; ++kb, ++it) {
              const int s = it % $STAGES;
              kiln_mbar_wait(kiln_smem(&empty[s]), ((it / $STAGES) & 1) ^ 1);
              const unsigned bar = kiln_smem(&full[s]);
              const unsigned sA = kiln_smem(smem + s * $STAGE_BYTES), sB = sA + $A_BYTES;
              kiln_mbar_expect_tx(bar, $EXPECT_BYTES);
$LOADS
            }
          }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 $CONSUMER_REGS;");
  const int c = wg - 1, w = tid / 32, l = tid % 32;
$EPILOGUE
  float d[$ACC];
  long long it = 0;  // the ring position of the next k-block
  auto kiln_release = [&](unsigned bar) { kiln_mbar_arrive(bar); };  // (no multicast: this CTA's ring only)
  // This thread's rows of the tile: rr (accumulators i with i % 4 < 2) and rr + 8.
  const int rr = c * 64 + 16 * w + l / 4;
  unsigned ui = 0;  // units done: the exchange's buffer (ui & 1) and phase
  for (long long u = kiln_cid; u < numUnits; u += kiln_ncl, ++ui) {
    const long long z = u / tilesM, m0 = (u - z * tilesM) * 128;
    // Pass 1: each row's running max and sum of exp(v - max) over this
    // CTA's columns (each lane of a quad its own; the max kept equal across
    // the quad, the sums added at the end).
    float rmax[2] = {kiln_neg_inf(), kiln_neg_inf()}, rsum[2] = {0.0f, 0.0f};
    for (long long nt = kiln_crank; nt < tilesN; nt += $CLUSTER) {
      const long long n0 = nt * $BN;
$MMA_TILE      if (m0 + 128 <= M && n0 + $BN <= N) {
#pragma unroll
        for (int i = 0; i < $ACC; i += 2) {
          const float2 v = kiln_rowvals_inside(z, m0 + rr + ((i % 4) >= 2 ? 8 : 0), n0 + 8 * (i / 4) + 2 * (l % 4),
                                               d[i], d[i + 1]);
          d[i] = v.x;
          d[i + 1] = v.y;
        }
      } else {
#pragma unroll
        for (int i = 0; i < $ACC; i += 2) {
          const float2 v = kiln_rowvals(z, m0 + rr + ((i % 4) >= 2 ? 8 : 0), n0 + 8 * (i / 4) + 2 * (l % 4), d[i],
                                        d[i + 1]);
          d[i] = v.x;
          d[i + 1] = v.y;
        }
      }
      // Maxima by fmaxf (a NaN is lost there but not in the sum, which it
      // makes NaN: the row's outputs are NaN, as torch's). The sums are taken
      // relative to the running max, or to 0 while that is -inf (so that
      // -inf - -inf makes no NaN of an empty row).
      float tmax[2] = {kiln_neg_inf(), kiln_neg_inf()}, tsum[2] = {0.0f, 0.0f}, ref[2];
#pragma unroll
      for (int i = 0; i < $ACC; i += 2) {
        const int h = (i % 4) >= 2;
        tmax[h] = fmaxf(tmax[h], fmaxf(d[i], d[i + 1]));
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 1));
        tmax[h] = fmaxf(tmax[h], __shfl_xor_sync(0xffffffffu, tmax[h], 2));
        const float nm = fmaxf(rmax[h], tmax[h]);
        ref[h] = nm == kiln_neg_inf() ? 0.0f : nm;
        rsum[h] *= __expf(rmax[h] - ref[h]);
        rmax[h] = nm;
      }
#pragma unroll
      for (int i = 0; i < $ACC; i += 2) {
        const int h = (i % 4) >= 2;
        tsum[h] += __expf(d[i] - ref[h]) + __expf(d[i + 1] - ref[h]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) rsum[h] += tsum[h];
    }
    float kiln_M[2], kiln_S[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      rsum[h] += __shfl_xor_sync(0xffffffffu, rsum[h], 1);
      rsum[h] += __shfl_xor_sync(0xffffffffu, rsum[h], 2);
      kiln_M[h] = rmax[h];
      kiln_S[h] = rsum[h];
    }
    if ($CLUSTER > 1) {
      // Every rank's (max, sum) of the rows, merged in rank order.
      const unsigned b = ui & 1;
      if (l % 4 == 0)
        for (unsigned p = 0; p < $CLUSTER; ++p)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            kiln_st_cluster(&xstat[(b * $CLUSTER + kiln_crank) * 128 + rr + 8 * h], p, rmax[h], rsum[h]);
      for (unsigned p = 0; p < $CLUSTER; ++p) kiln_mbar_arrive_release_cluster(kiln_smem(&xbar[b]), p);
      kiln_mbar_wait_acquire_cluster(kiln_smem(&xbar[b]), (ui >> 1) & 1);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = kiln_neg_inf(), s = 0.0f;
        for (unsigned p = 0; p < $CLUSTER; ++p) m = fmaxf(m, xstat[(b * $CLUSTER + p) * 128 + rr + 8 * h].x);
        const float r = m == kiln_neg_inf() ? 0.0f : m;
        for (unsigned p = 0; p < $CLUSTER; ++p) {
          const float2 e = xstat[(b * $CLUSTER + p) * 128 + rr + 8 * h];
          s += e.y * __expf(e.x - r);
        }
        kiln_M[h] = m;
        kiln_S[h] = s;
      }
    }
    float kiln_R[2];  // 1 / sum: softmax's division, once per row
#pragma unroll
    for (int h = 0; h < 2; ++h) kiln_R[h] = 1.0f / kiln_S[h];
    // Pass 2: the product again, and the outputs from v and the row's (max, sum).
    for (long long nt = kiln_crank; nt < tilesN; nt += $CLUSTER) {
      const long long n0 = nt * $BN;
$MMA_TILE$STORE_CALLS    }
  }
$STORE_TAIL$CLUSTER_EXIT}
)";

}  // namespace

MatmulKernel emitSm90Matmul(const Graph& g, const Sm90MatmulConfig& c, const std::string& name, int smCount) {
  if (!validBlockN(c.blockN) || (c.pingpong && c.blockN > 128))
    throw Error("matmul (sm_90a kernel): block_n must be 64, 128, 192 or 256 (64 or 128 with ping-pong)");
  if (c.stages < 2 || c.sharedBytes() > kMaxShared)
    throw Error("matmul (sm_90a kernel): config " + c.json() + " needs " + std::to_string(c.sharedBytes()) +
                " bytes of shared memory; at most " + std::to_string(kMaxShared) + " fit");
  if (c.clusterM != 1 && (c.clusterM != 2 || (c.blockN != 128 && c.blockN != 256) || c.pingpong))
    throw Error("matmul (sm_90a kernel): config " + c.json() +
                ": cluster_m is 1, or 2 with block_n 128 or 256 and cooperative consumers");
  if (!sm90MatmulApplies(g))
    throw Error("kiln: internal: the sm_90a matmul kernel needs bf16/f16 operands whose rows are static multiples "
                "of 8 elements");
  MatmulKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "matmul";
  k.config = c.json();
  const int staging = sm90StagingBytes(g);
  if ((c.blockN / 64) % c.stagingBuffers != 0)
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": staging_buffers must divide block_n / 64");
  const bool rows = sm90RowForm(g);
  if (rows && (c.pingpong || c.clusterM != 1))
    throw Error("matmul (sm_90a kernel): config " + c.json() + ": a matmul with a softmax over its rows takes "
                "cooperative consumers (pingpong 0) and cluster_m 1 (its clusters are cluster_n)");
  const int extra = rows ? rowExchangeBytes(c.clusterN) : 0;
  if (c.sharedBytes() + extra > kMaxShared)
    throw Error("matmul (sm_90a kernel): config " + c.json() + " needs " + std::to_string(c.sharedBytes() + extra) +
                " bytes of shared memory; at most " + std::to_string(kMaxShared) + " fit");
  // Fewer staging buffers where that many do not fit next to the ring (a
  // tuned config of stages alone over the heuristic's buffers); the kernel's
  // config says what it got (and cluster_n 1 without a softmax over the
  // rows: it applies to that form only).
  int nb = c.stagingBuffers;
  while (nb > 1 && c.sharedBytes() + nb * staging + extra > kMaxShared) nb /= 2;
  if (nb != c.stagingBuffers || (!rows && c.clusterN != 1)) {
    Sm90MatmulConfig got = c;
    got.stagingBuffers = nb;
    if (!rows) got.clusterN = 1;
    k.config = got.json();
  }
  const int clusterN = rows ? c.clusterN : 1;
  const bool useTma =
      c.tmaStore && !c.pingpong && staging > 0 && c.sharedBytes() + nb * staging + extra <= kMaxShared;
  MatmulSignature sig = matmulSignature(g, k, true, useTma);
  const Node& mm = *sig.mm;
  const Node& an = g.node(mm.inputs[0]);
  const Node& bn = g.node(mm.inputs[1]);
  const DType t = mm.dtype;
  const int aBytes = 128 * 64 * 2, bBytes = c.blockN * 64 * 2;

  // Operand batch indices (flattened over the operand's own batch dims;
  // broadcast dims contribute nothing).
  const std::string batchCode =
      sig.batch.empty() ? ""
                        : "        { long long zz = z;\n" + batchOffsetCode(sig, g, "zA", "zB", false, "          ") +
                              "        }\n";

  // Loads and descriptors per layout. K-major: one box {64 K, rows}.
  // M/N-major: boxes {64 M or N, 64 K}, one per 64-wide chunk.
  std::string loads;
  // The kernel tensor of an operand (by its input name) or of an output.
  auto tensorIndex = [&](const std::string& name, bool output) {
    for (size_t i = 0; i < k.tensors.size(); ++i)
      if (k.tensors[i].output == output && k.tensors[i].name == name) return static_cast<int>(i);
    throw Error("kiln: internal: matmul " + std::string(output ? "output" : "operand") + " '" + name +
                "' is not a kernel tensor");
  };
  if (!mm.transA) {
    // Fewer than 128 rows (decode shapes): the launcher clamps the box to
    // the rows there are (TMA's zero fill of rows out of bounds is slow);
    // the rest of the tile's rows hold stale data that only reaches output
    // rows >= M, which are never stored.
    loads += "          kiln_tma_load(sA, &tmA, bar, kb * 64, (int)m0, (int)zA);\n";
    k.tensorMaps.push_back({tensorIndex(an.name, false), 64, 128, true});
  } else {
    for (int j = 0; j < 2; ++j)
      loads += "          kiln_tma_load(sA + " + std::to_string(j * 8192) + ", &tmA, bar, (int)m0 + " +
               std::to_string(64 * j) + ", kb * 64, (int)zA);\n";
    k.tensorMaps.push_back({tensorIndex(an.name, false), 64, 64});
  }
  // B's tile. In a cluster of 2, each CTA loads half of it and multicasts
  // it to both (the cluster's CTAs share n0).
  const int cl = c.clusterM;
  if (mm.transB) {
    if (cl == 1) {
      loads += "          kiln_tma_load(sB, &tmB, bar, kb * 64, (int)n0, (int)zB);\n";
    } else {
      const int half = c.blockN / 2;
      loads += "          kiln_tma_load_mc(sB + kiln_crank * " + std::to_string(half * 128) +
               ", &tmB, bar, kb * 64, (int)n0 + kiln_crank * " + std::to_string(half) + ", (int)zB, 3);\n";
    }
    k.tensorMaps.push_back({tensorIndex(bn.name, false), 64, c.blockN / cl});
  } else {
    if (cl == 1) {
      for (int j = 0; j < c.blockN / 64; ++j)
        loads += "          kiln_tma_load(sB + " + std::to_string(j * 8192) + ", &tmB, bar, (int)n0 + " +
                 std::to_string(64 * j) + ", kb * 64, (int)zB);\n";
    } else {
      const int per = c.blockN / 128;  // 64-wide boxes per CTA
      loads += "          for (int j = kiln_crank * " + std::to_string(per) + "; j < (kiln_crank + 1) * " +
               std::to_string(per) + "; ++j)\n"
               "            kiln_tma_load_mc(sB + j * 8192, &tmB, bar, (int)n0 + 64 * j, kb * 64, (int)zB, 3);\n";
    }
    k.tensorMaps.push_back({tensorIndex(bn.name, false), 64, 64});
  }

  // Per m64 block h of the consumer's rows: one wgmma per k16 step into
  // accumulators [h * BN/2, (h + 1) * BN/2).
  // The row form's epilogues also take the row's max and sum (the thread's
  // row of accumulator i: kiln_M[(i % 4) >= 2]).
  auto stat = [&](const std::string& i) {
    return rows ? ", kiln_M[(" + i + " % 4) >= 2], kiln_S[(" + i + " % 4) >= 2], kiln_R[(" + i + " % 4) >= 2]"
                : std::string();
  };
  const int halves = c.pingpong ? 2 : 1;
  const int perHalf = c.blockN / 2;
  std::string wgmmas, calls, callsEdge;
  for (int h = 0; h < halves; ++h) {
    std::string dregs, douts;
    for (int i = 0; i < perHalf; ++i) {
      dregs += (i ? ", %" : "%") + std::to_string(i);
      douts += std::string(i ? ", " : "") + "\"+f\"(d[" + std::to_string(h * perHalf + i) + "])";
    }
    const std::string aOff = c.pingpong ? std::to_string(h * 8192) : "c * 8192";
    wgmmas += "        {\n          const unsigned long long da = " +
              std::string(mm.transA ? "kiln_desc_mn(stage + " + aOff + " + kk * 2048)"
                                    : "kiln_desc_k(stage + " + aOff + " + kk * 32)") +
              ";\n          asm volatile(\n"
              "              \"{\\n.reg .pred p;\\nsetp.ne.b32 p, %" + std::to_string(perHalf + 2) +
              ", 0;\\n\"\n              \"wgmma.mma_async.sync.aligned.m64n$BNk16.f32.$MMA.$MMA {" + dregs + "}, %" +
              std::to_string(perHalf) + ", %" + std::to_string(perHalf + 1) + ", p, 1, 1, $TRANS_A, $TRANS_B;\\n}\\n\"\n"
              "              : " + douts + "\n              : \"l\"(da), \"l\"(db), \"r\"(kb | kk));\n        }\n";
    const std::string rowBase = c.pingpong ? "m0 + " + std::to_string(64 * h) : "m0 + c * 64";
    for (const char* fn : {"kiln_epilogue_inside", "kiln_epilogue"})
      (std::string(fn) == "kiln_epilogue" ? callsEdge : calls) +=
          "#pragma unroll\n      for (int i = 0; i < " + std::to_string(perHalf) + "; i += 2)\n        " + fn + "(z, " +
          rowBase + " + 16 * w + l / 4 + ((i % 4) >= 2 ? 8 : 0), n0 + 8 * (i / 4) + 2 * (l % 4), d[" +
          std::to_string(h * perHalf) + " + i], d[" + std::to_string(h * perHalf) + " + i + 1]" + stat("i") + ");\n";
  }
  std::string outMaps, storeTail, tmaRowsOk;
  if (useTma) {
    // Per 64-column chunk of the tile: wait until this warpgroup's previous
    // stores have read its staging, write the chunk there, make the writes
    // visible to the async proxy, and one thread stores every output's boxes.
    std::string stores;
    int offset = 0;
    for (size_t o = 0; o < g.outputs().size(); ++o) {
      const GraphOutput& go = g.outputs()[o];
      const int size = static_cast<int>(dtypeSize(g.node(go.node).dtype));
      const int index = tensorIndex(go.name, true);
      const std::string map = "tmC" + std::to_string(o);
      outMaps += ", const __grid_constant__ KilnTensorMap " + map;
      // A dynamic N: the launcher encodes the map only where a row's bytes
      // are a multiple of 16, and the kernel takes the TMA path only then.
      const bool dynamicN = !sig.N.isStatic();
      k.tensorMaps.push_back({index, 128 / size, 64, false, dynamicN});
      if (dynamicN) tmaRowsOk += " && (N * " + std::to_string(size) + ") % 16 == 0";
      for (int box = 0; box < size / 2; ++box)
        stores += "          kiln_tma_store(&" + map + ", kiln_smem(st + " + std::to_string(offset + box * 8192) +
                  "), (int)n0 + ch * 64 + " + std::to_string(box * 128 / size) + ", (int)m0 + c * 64, (int)z);\n";
      offset += 64 * 64 * size;
    }
    // With nb buffers, chunk ch writes buffer ch % nb, whose last stores
    // were committed nb groups before (one group per chunk, by thread 0):
    // at most nb - 1 newer groups may still be reading.
    calls = "      unsigned char* const st0 = smem + $STAGES * $STAGE_BYTES + c * " + std::to_string(nb * staging / 2) + ";\n"
            "#pragma unroll\n"
            "      for (int ch = 0; ch < $BN / 64; ++ch) {\n"
            "        unsigned char* const st = st0 + (ch % " + std::to_string(nb) + ") * " + std::to_string(staging / 2) + ";\n"
            "        if (tid == 0) asm volatile(\"cp.async.bulk.wait_group.read " + std::to_string(nb - 1) + ";\" ::: \"memory\");\n"
            "        asm volatile(\"bar.sync %0, 128;\" :: \"r\"(3 + c) : \"memory\");\n"
            "#pragma unroll\n"
            "        for (int q = 0; q < 32; q += 2) {\n"
            "          const int r = 16 * w + l / 4 + ((q % 4) >= 2 ? 8 : 0), cc = 8 * (q / 4) + 2 * (l % 4);\n"
            "          kiln_epilogue_staged(z, m0 + c * 64 + r, n0 + ch * 64 + cc, d[ch * 32 + q], d[ch * 32 + q + 1], "
            "st, r, cc" + stat("q") + ");\n"
            "        }\n"
            "        asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\");\n"
            "        asm volatile(\"bar.sync %0, 128;\" :: \"r\"(3 + c) : \"memory\");\n"
            "        if (tid == 0) {\n" + stores +
            "          asm volatile(\"cp.async.bulk.commit_group;\" ::: \"memory\");\n"
            "        }\n"
            "      }\n";
    storeTail = "  // The last stores must finish before the CTA (and its shared memory) goes.\n"
                "  if (tid == 0) asm volatile(\"cp.async.bulk.wait_group 0;\" ::: \"memory\");\n";
  }
  // Tiles wholly inside the output take the branch-free epilogue (through
  // TMA where it stores the outputs). With a dynamic N whose rows TMA cannot
  // take (a row's bytes not a multiple of 16), they store from registers.
  if (!tmaRowsOk.empty()) {
    std::string inside;
    for (int h = 0; h < halves; ++h)
      inside += "#pragma unroll\n      for (int i = 0; i < " + std::to_string(perHalf) +
                "; i += 2)\n        kiln_epilogue_inside(z, m0 + c * 64 + 16 * w + l / 4 + ((i % 4) >= 2 ? 8 : 0), n0 + 8 * "
                "(i / 4) + 2 * (l % 4), d[" + std::to_string(h * perHalf) + " + i], d[" + std::to_string(h * perHalf) +
                " + i + 1]" + stat("i") + ");\n";
    calls = "    if (kiln_tma_rows && m0 + 128 <= M && n0 + $BN <= N) {\n" + calls +
            "    } else if (m0 + 128 <= M && n0 + $BN <= N) {\n" + inside + "    } else {\n" + callsEdge + "    }\n";
    calls = "    const bool kiln_tma_rows = true" + tmaRowsOk + ";\n" + calls;
  } else {
    calls = "    if (m0 + " + std::string("128") + " <= M && n0 + $BN <= N) {\n" + calls +
            "    } else {\n" + callsEdge + "    }\n";
  }
  std::string what = "C = A @ B" + std::string(g.outputs().size() > 1 || g.node(g.outputs()[0].node).op != Op::Matmul
                                                    ? " with a fused epilogue"
                                                    : "") +
                     ", " + std::string(dtypeName(t)) + (mm.transA ? ", A stored [K, M]" : "") +
                     (mm.transB ? ", B stored [N, K]" : ", B stored [K, N]") +
                     (useTma ? "; inner tiles stored through shared memory and TMA" : "") +
                     (rows ? "; a softmax over the product's rows, the product computed twice (row statistics, "
                             "then the outputs), clusters of " + std::to_string(clusterN) + " CTAs along N"
                           : "");
  std::string src = std::string(kHelpers) + (rows ? kRowKernel : kKernel);
  replaceAll(src, "$MMA_TILE", kMmaTile);
  // CTAs per cluster: along M (B multicast), or the row form's along N.
  const int ctas = rows ? clusterN : cl;
  replaceAll(src, "$NAME", name + "_v");
  replaceAll(src, "$PRELUDE", sig.prelude);
  replaceAll(src, "$EPILOGUE", sig.epilogue);
  replaceAll(src, "$OPERAND_BATCH", batchCode);
  replaceAll(src, "$LOADS", loads);
  replaceAll(src, "$EXPECT_BYTES", mm.transA ? std::string("$STAGE_BYTES")
                                              : "(M >= 128 ? $STAGE_BYTES : (unsigned)((M + 7) & ~7LL) * 128 + $B_BYTES)");
  replaceAll(src, "$WGMMAS", wgmmas);
  replaceAll(src, "$STORE_CALLS", calls);
  replaceAll(src, "$STORE_TAIL", storeTail);
  replaceAll(src, "$OUT_MAPS", outMaps);
  replaceAll(src, "$STAGING_BYTES", std::to_string(useTma ? nb * staging : 0));
  replaceAll(src, "$SCHEME", c.pingpong ? "Ping-pong: consumer c takes every other tile of this CTA (j = c, c + 2, ...), "
                                          "all 128 rows of it, so that one's epilogue overlaps the other's wgmmas."
                                        : "Cooperative: both consumers take every tile of this CTA, 64 rows each.");
  // Ping-pong hand-off: a consumer may wait on the full barrier of its
  // tile's first ring positions only once the other consumer has passed its
  // waits on the previous tile's (a parity wait cannot tell phases two
  // apart), so tile j's consumer signals tile j + 1's on a named barrier
  // (1: consumer 0 to 1, 2: consumer 1 to 0) when it has issued its last
  // wgmma.
  replaceAll(src, "$HANDOFF_BEFORE",
             c.pingpong ? "    if (j > 0) asm volatile(\"bar.sync %0, 256;\" :: \"r\"(2 - c) : \"memory\");\n" : "");
  replaceAll(src, "$HANDOFF_AFTER",
             c.pingpong ? "    if (kiln_cid + (j + 1) * kiln_ncl < numTiles) asm volatile(\"bar.arrive %0, 256;\" :: "
                          "\"r\"(1 + c) : \"memory\");\n"
                        : "");
  replaceAll(src, "$FIRST_J", c.pingpong ? "c" : "0");
  replaceAll(src, "$J_STEP", c.pingpong ? "2" : "1");
  // Both consumers (cooperative) or the tile's one (ping-pong) of every CTA
  // in the cluster release a stage: the producer's multicast writes it in each.
  replaceAll(src, "$EMPTY_COUNT", std::to_string((c.pingpong ? 1 : 2) * cl));
  replaceAll(src, "$CLUSTER_RANK",
             cl == 1 ? "  const unsigned kiln_crank = 0;\n"
                       "  auto kiln_release = [&](unsigned bar) { kiln_mbar_arrive(bar); };\n"
                     : "  unsigned kiln_crank;\n"
                       "  asm(\"mov.u32 %0, %%cluster_ctarank;\" : \"=r\"(kiln_crank));\n"
                       "  // A stage is free once the consumers of both CTAs are done with it:\n"
                       "  // thread 0 of a consumer warpgroup tells its own CTA, thread 32 the peer.\n"
                       "  auto kiln_release = [&](unsigned bar) {\n"
                       "    if (threadIdx.x % 128 == 0) kiln_mbar_arrive(bar);\n"
                       "    else kiln_mbar_arrive_cluster(bar, kiln_crank ^ 1);\n"
                       "  };\n");
  replaceAll(src, "$RELEASERS", cl == 1 ? "tid == 0" : "(tid == 0 || tid == 32)");
  replaceAll(src, "$INIT_SYNC",
             ctas == 1 ? "  __syncthreads();\n"
                     : "  // Every CTA's barriers are initialized before a peer's multicast or arrival reaches them.\n"
                       "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;\" ::: "
                       "\"memory\");\n");
  // The row form's exchange writes into the cluster's other CTAs; each CTA
  // waits for every peer's writes into it before it reads them, so none
  // lands after it has gone, but only a cluster barrier says so to the
  // hardware's rules and to compute-sanitizer (racecheck reported every
  // exchange write as one into a CTA that may have exited). The producer
  // warpgroup has returned: the barrier waits for the threads still there.
  replaceAll(src, "$CLUSTER_EXIT",
             rows && ctas > 1
                 ? "  // No CTA leaves while a peer may still write into its shared memory.\n"
                   "  asm volatile(\"barrier.cluster.arrive.release;\\nbarrier.cluster.wait.acquire;\" ::: \"memory\");\n"
                 : "");
  replaceAll(src, "$PRODUCER_TAIL",
             cl == 1 ? ""
                     : "      // Stay until the consumers of both CTAs have released every stage: no\n"
                       "      // peer's arrival may reach this CTA's barriers after it has gone.\n"
                       "      for (int i = 0; i < $STAGES; ++i, ++it)\n"
                       "        kiln_mbar_wait(kiln_smem(&empty[it % $STAGES]), ((it / $STAGES) & 1) ^ 1);\n");
  replaceAll(src, "$CLUSTER", std::to_string(ctas));
  replaceAll(src, "$DESC_B", mm.transB ? "kiln_desc_k(stage + $A_BYTES + kk * 32)" : "kiln_desc_mn(stage + $A_BYTES + kk * 2048)");
  replaceAll(src, "$TRANS_A", mm.transA ? "1" : "0");
  replaceAll(src, "$TRANS_B", mm.transB ? "0" : "1");
  replaceAll(src, "$ACC", std::to_string(halves * perHalf));
  replaceAll(src, "$STAGE_BYTES", std::to_string(aBytes + bBytes));
  replaceAll(src, "$A_BYTES", std::to_string(aBytes));
  replaceAll(src, "$B_BYTES", std::to_string(bBytes));
  replaceAll(src, "$BN", std::to_string(c.blockN));
  replaceAll(src, "$STAGES", std::to_string(c.stages));
  replaceAll(src, "$GROUP_M", std::to_string(c.groupM));
  replaceAll(src, "$PRODUCER_REGS", std::to_string(c.producerRegs));
  replaceAll(src, "$CONSUMER_REGS", std::to_string(c.consumerRegs));
  replaceAll(src, "$WHAT", what);
  replaceAll(src, "$MMA", t == DType::BF16 ? "bf16" : "f16");
  fillSignature(src, sig);
  out.source = std::move(src);

  // One entry, "vectorized": TMA needs 16-byte aligned operands (and the
  // epilogue's paired stores aligned outputs); the launcher reports a
  // pointer that is not.
  k.entries.push_back({name + "_v", true});
  k.launch.threadsPerBlock = 384;
  k.launch.elementsPerBlock = 1;
  k.launch.iterShape = mm.shape;
  k.launch.tile = {128 * cl, c.blockN};  // one cluster per work unit, at most one block per SM
  k.launch.cluster = cl;
  k.launch.maxBlocks = smCount;
  k.launch.sharedBytes = c.sharedBytes() + (useTma ? nb * staging : 0) + extra;
  if (rows) {
    // A unit is a 128-row block (all its columns); the clusters that fit at
    // once loop over the units.
    k.launch.tile = {128, int64_t(1) << 40};
    k.launch.cluster = clusterN;
    k.launch.maxBlocks = std::max(smCount / clusterN, 1) * clusterN;
    k.launch.resident = true;
  }
  return out;
}

}  // namespace kiln::compiler
