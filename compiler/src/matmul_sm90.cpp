#include "matmul_sm90.h"

#include <algorithm>

#include "config_override.h"
#include "kiln/error.h"

namespace kiln::compiler {

std::string Sm90MatmulConfig::json() const {
  return "{\"block_m\": 128, \"block_n\": " + std::to_string(blockN) + ", \"block_k\": 64, \"stages\": " +
         std::to_string(stages) + ", \"group_m\": " + std::to_string(groupM) + "}";
}

int Sm90MatmulConfig::sharedBytes() const {
  const int aBytes = 128 * 64 * 2, bBytes = blockN * 64 * 2;
  return stages * (aBytes + bBytes) + 2 * stages * 8 + 1024;
}

namespace {

constexpr int kMaxShared = 227 * 1024;

bool validBlockN(int bn) { return bn == 64 || bn == 128 || bn == 192 || bn == 256; }

}  // namespace

void applySm90MatmulOverride(Sm90MatmulConfig& c, const std::string& json) {
  applyIntegerOverrides(json, "matmul (sm_90a kernel)",
                        "block_n: 64, 128, 192 or 256; stages: 2 to what shared memory holds; group_m: 1 to 64; "
                        "block_m: 128; block_k: 64",
                        [&](const std::string& key, int64_t v) {
                          if (key == "block_n" && validBlockN(static_cast<int>(v))) c.blockN = static_cast<int>(v);
                          else if (key == "stages" && v >= 2 && v <= 16) c.stages = static_cast<int>(v);
                          else if (key == "group_m" && v >= 1 && v <= 64) c.groupM = static_cast<int>(v);
                          else if ((key == "block_m" && v == 128) || (key == "block_k" && v == 64)) return true;
                          else return false;
                          return true;
                        });
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
  CompiledKernel probe;
  MatmulSignature sig = matmulSignature(g, probe, true);
  int64_t batch = 1;
  for (const Dim& d : sig.batch) {
    if (!d.isStatic()) return 0;
    batch *= d.size;
  }
  if (!sig.M.isStatic() || !sig.N.isStatic()) return 0;
  return batch * ((sig.M.size + 127) / 128) * ((sig.N.size + blockN - 1) / blockN);
}

}  // namespace

Sm90MatmulConfig sm90MatmulHeuristic(const Graph& g, int smCount) {
  Sm90MatmulConfig c;
  // 128 x 256 tiles unless that leaves SMs idle: small M (decode shapes)
  // then takes narrower tiles so that every SM streams part of B.
  c.blockN = 256;
  for (int bn : {128, 64}) {
    const int64_t tiles = tileCount(g, c.blockN);
    if (tiles == 0 || tiles >= smCount) break;
    c.blockN = bn;
  }
  c.stages = stagesFor(c.blockN);
  return c;
}

std::vector<Sm90MatmulConfig> sm90MatmulSpace() {
  std::vector<Sm90MatmulConfig> out;
  for (int bn : {256, 128, 192, 64})
    for (int stages : {3, 4, 5, 6})
      for (int group : {8, 16}) {
        Sm90MatmulConfig c;
        c.blockN = bn;
        c.stages = stages;
        c.groupM = group;
        if (c.sharedBytes() <= kMaxShared) out.push_back(c);
      }
  return out;
}

bool sm90MatmulApplies(const Graph& g) {
  CompiledKernel probe;
  MatmulSignature sig = matmulSignature(g, probe, true);
  const Node& mm = *sig.mm;
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

const char* kTemplate = R"(
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

extern "C" __global__ void __launch_bounds__(384, 1)
$NAME($PARAMS, const __grid_constant__ KilnTensorMap tmA, const __grid_constant__ KilnTensorMap tmB) {
  const long long M = $M, N = $N, K = $K;
  const long long tilesM = (M + 127) / 128, tilesN = (N + $BN - 1) / $BN;
  const long long tilesPerBatch = tilesM * tilesN, numTiles = $BATCH * tilesPerBatch;
  const int kBlocks = (int)((K + 63) / 64);
  extern __shared__ unsigned char kiln_smem_raw[];
  unsigned char* smem = (unsigned char*)(((unsigned long long)kiln_smem_raw + 1023) & ~1023ull);
  unsigned long long* full = (unsigned long long*)(smem + $STAGES * $STAGE_BYTES);
  unsigned long long* empty = full + $STAGES;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < $STAGES; ++s) {
      kiln_mbar_init(kiln_smem(&full[s]), 1);
      kiln_mbar_init(kiln_smem(&empty[s]), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Tile t of the persistent loop: batch z, corner (m0, n0), in groups of
  // $GROUP_M tile rows so that concurrent CTAs share B tiles in L2.
#define KILN_TILE(t)                                                                  \
  const long long z = (t) / tilesPerBatch, r = (t) - z * tilesPerBatch;              \
  const long long group = r / ($GROUP_M * tilesN), first = group * $GROUP_M;          \
  const long long rows = tilesM - first < $GROUP_M ? tilesM - first : $GROUP_M;       \
  const long long inGroup = r - group * $GROUP_M * tilesN;                            \
  const long long m0 = (first + inGroup % rows) * 128, n0 = (inGroup / rows) * $BN;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $PRODUCER_REGS;");
    if (tid == 0) {
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmA) : "memory");
      asm volatile("prefetch.tensormap [%0];" :: "l"(&tmB) : "memory");
      int it = 0;
      for (long long tile = blockIdx.x; tile < numTiles; tile += gridDim.x) {
        KILN_TILE(tile)
        long long zA = 0, zB = 0;
$OPERAND_BATCH
        for (int kb = 0; kb < kBlocks; ++kb, ++it) {
          const int s = it % $STAGES;
          kiln_mbar_wait(kiln_smem(&empty[s]), ((it / $STAGES) & 1) ^ 1);
          const unsigned bar = kiln_smem(&full[s]);
          const unsigned sA = kiln_smem(smem + s * $STAGE_BYTES), sB = sA + $A_BYTES;
          kiln_mbar_expect_tx(bar, $STAGE_BYTES);
$LOADS
        }
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 $CONSUMER_REGS;");
  const int c = wg - 1, w = tid / 32, l = tid % 32;
$EPILOGUE
  float d[$ACC];
  int it = 0;
  for (long long tile = blockIdx.x; tile < numTiles; tile += gridDim.x) {
    KILN_TILE(tile)
    for (int kb = 0; kb < kBlocks; ++kb, ++it) {
      const int s = it % $STAGES;
      kiln_mbar_wait(kiln_smem(&full[s]), (it / $STAGES) & 1);
      const unsigned aBase = kiln_smem(smem + s * $STAGE_BYTES) + c * 8192, bBase = kiln_smem(smem + s * $STAGE_BYTES) + $A_BYTES;
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const unsigned long long da = $DESC_A, db = $DESC_B;
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.b32 p, %$DS, 0;\n"
            "wgmma.mma_async.sync.aligned.m64n$BNk16.f32.$MMA.$MMA {$DREGS}, %$DA, %$DB, p, 1, 1, $TRANS_A, $TRANS_B;\n}\n"
            : $DOUTS
            : "l"(da), "l"(db), "r"(kb | kk));
      }
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      // Keep one group in flight: the previous k-block's stage is free.
      asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
      if (kb > 0 && tid == 0) kiln_mbar_arrive(kiln_smem(&empty[(it - 1) % $STAGES]));
    }
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (kBlocks > 0) {
      if (tid == 0) kiln_mbar_arrive(kiln_smem(&empty[(it - 1) % $STAGES]));
    } else {
#pragma unroll
      for (int i = 0; i < $ACC; ++i) d[i] = 0.0f;
    }
    // Accumulator i of thread (warp w, lane l): row 16w + l/4 + 8 [i%4 >= 2],
    // column 8 (i/4) + 2 (l%4) + i%2 of the consumer's 64 x $BN part.
#pragma unroll
    for (int i = 0; i < $ACC; i += 2)
      kiln_epilogue(z, m0 + c * 64 + 16 * w + l / 4 + ((i % 4) >= 2 ? 8 : 0), n0 + 8 * (i / 4) + 2 * (l % 4), d[i],
                    d[i + 1]);
  }
#undef KILN_TILE
}
)";

}  // namespace

MatmulKernel emitSm90Matmul(const Graph& g, const Sm90MatmulConfig& c, const std::string& name, int smCount) {
  if (!validBlockN(c.blockN)) throw Error("matmul (sm_90a kernel): block_n must be 64, 128, 192 or 256");
  if (c.stages < 2 || c.sharedBytes() > kMaxShared)
    throw Error("matmul (sm_90a kernel): config " + c.json() + " needs " + std::to_string(c.sharedBytes()) +
                " bytes of shared memory; at most " + std::to_string(kMaxShared) + " fit");
  if (!sm90MatmulApplies(g))
    throw Error("kiln: internal: the sm_90a matmul kernel needs bf16/f16 operands whose rows are static multiples "
                "of 8 elements");
  MatmulKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "matmul";
  k.config = c.json();
  MatmulSignature sig = matmulSignature(g, k, true);
  const Node& mm = *sig.mm;
  const Node& an = g.node(mm.inputs[0]);
  const Node& bn = g.node(mm.inputs[1]);
  const DType t = mm.dtype;
  const int acc = c.blockN / 2;  // f32 accumulators per thread: 64 x BN / 128
  const int aBytes = 128 * 64 * 2, bBytes = c.blockN * 64 * 2;

  // Operand batch indices (flattened over the operand's own batch dims;
  // broadcast dims contribute nothing).
  std::string batchCode;
  if (!sig.batch.empty()) {
    batchCode = "        { long long zz = z;\n";
    for (size_t d = sig.batch.size(); d-- > 0;) {
      batchCode += "          { const long long i = zz % " + dimExpr(sig.batch[d]) + "; zz /= " +
                   dimExpr(sig.batch[d]) + ";";
      const size_t fromEnd = sig.batch.size() - d;
      for (const auto& [node, var] : {std::pair{&an, "zA"}, std::pair{&bn, "zB"}}) {
        Shape ob(node->shape.begin(), node->shape.end() - 2);
        if (ob.size() >= fromEnd) {
          const size_t od = ob.size() - fromEnd;
          if (!(ob[od].isStatic() && ob[od].size == 1))
            batchCode += std::string(" ") + var + " += i * " + productExpr(ob, od + 1) + ";";
        }
      }
      batchCode += " }\n";
    }
    batchCode += "        }\n";
  }
  (void)acc;

  // Loads and descriptors per layout. K-major: one box {64 K, rows}.
  // M/N-major: boxes {64 M or N, 64 K}, one per 64-wide chunk.
  std::string loads;
  auto tensorIndex = [&](const Node& n) {
    for (size_t i = 0; i < k.tensors.size(); ++i)
      if (!k.tensors[i].output && k.tensors[i].name == n.name) return static_cast<int>(i);
    throw Error("kiln: internal: matmul operand '" + n.name + "' is not a kernel tensor");
  };
  if (!mm.transA) {
    loads += "          kiln_tma_load(sA, &tmA, bar, kb * 64, (int)m0, (int)zA);\n";
    k.tensorMaps.push_back({tensorIndex(an), 64, 128});
  } else {
    for (int j = 0; j < 2; ++j)
      loads += "          kiln_tma_load(sA + " + std::to_string(j * 8192) + ", &tmA, bar, (int)m0 + " +
               std::to_string(64 * j) + ", kb * 64, (int)zA);\n";
    k.tensorMaps.push_back({tensorIndex(an), 64, 64});
  }
  if (mm.transB) {
    loads += "          kiln_tma_load(sB, &tmB, bar, kb * 64, (int)n0, (int)zB);\n";
    k.tensorMaps.push_back({tensorIndex(bn), 64, c.blockN});
  } else {
    for (int j = 0; j < c.blockN / 64; ++j)
      loads += "          kiln_tma_load(sB + " + std::to_string(j * 8192) + ", &tmB, bar, (int)n0 + " +
               std::to_string(64 * j) + ", kb * 64, (int)zB);\n";
    k.tensorMaps.push_back({tensorIndex(bn), 64, 64});
  }

  std::string dregs, douts;
  for (int i = 0; i < acc; ++i) {
    dregs += (i ? ", %" : "%") + std::to_string(i);
    douts += std::string(i ? ", " : "") + "\"+f\"(d[" + std::to_string(i) + "])";
  }
  std::string what = "C = A @ B" + std::string(g.outputs().size() > 1 || g.node(g.outputs()[0].node).op != Op::Matmul
                                                    ? " with a fused epilogue"
                                                    : "") +
                     ", " + std::string(dtypeName(t)) + (mm.transA ? ", A stored [K, M]" : "") +
                     (mm.transB ? ", B stored [N, K]" : ", B stored [K, N]");
  std::string src = kTemplate;
  replaceAll(src, "$NAME", name + "_v");
  replaceAll(src, "$PRELUDE", sig.prelude);
  replaceAll(src, "$EPILOGUE", sig.epilogue);
  replaceAll(src, "$OPERAND_BATCH", batchCode);
  replaceAll(src, "$LOADS", loads);
  replaceAll(src, "$DESC_A", mm.transA ? "kiln_desc_mn(aBase + kk * 2048)" : "kiln_desc_k(aBase + kk * 32)");
  replaceAll(src, "$DESC_B", mm.transB ? "kiln_desc_k(bBase + kk * 32)" : "kiln_desc_mn(bBase + kk * 2048)");
  replaceAll(src, "$TRANS_A", mm.transA ? "1" : "0");
  replaceAll(src, "$TRANS_B", mm.transB ? "0" : "1");
  replaceAll(src, "$DREGS", dregs);
  replaceAll(src, "$DOUTS", douts);
  replaceAll(src, "$DA", std::to_string(acc));
  replaceAll(src, "$DB", std::to_string(acc + 1));
  replaceAll(src, "$DS", std::to_string(acc + 2));
  replaceAll(src, "$ACC", std::to_string(acc));
  replaceAll(src, "$STAGE_BYTES", std::to_string(aBytes + bBytes));
  replaceAll(src, "$A_BYTES", std::to_string(aBytes));
  replaceAll(src, "$BN", std::to_string(c.blockN));
  replaceAll(src, "$STAGES", std::to_string(c.stages));
  replaceAll(src, "$GROUP_M", std::to_string(c.groupM));
  replaceAll(src, "$PRODUCER_REGS", std::to_string(c.producerRegs));
  replaceAll(src, "$CONSUMER_REGS", std::to_string(c.consumerRegs));
  replaceAll(src, "$WHAT", what);
  replaceAll(src, "$MMA", t == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$BATCH", productExpr(sig.batch, 0));
  replaceAll(src, "$PARAMS", sig.params);
  replaceAll(src, "$M", dimExpr(sig.M));
  replaceAll(src, "$N", dimExpr(sig.N));
  replaceAll(src, "$K", dimExpr(sig.K));
  out.source = std::move(src);

  // One entry, "vectorized": TMA needs 16-byte aligned operands (and the
  // epilogue's paired stores aligned outputs); the launcher reports a
  // pointer that is not.
  k.entries.push_back({name + "_v", true});
  k.launch.threadsPerBlock = 384;
  k.launch.elementsPerBlock = static_cast<int64_t>(128) * c.blockN;
  k.launch.iterShape = mm.shape;
  k.launch.maxBlocks = smCount;
  k.launch.sharedBytes = c.sharedBytes();
  return out;
}

}  // namespace kiln::compiler
