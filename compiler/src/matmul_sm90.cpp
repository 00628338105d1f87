#include "matmul_sm90.h"

#include "kiln/error.h"
#include "matmul.h"

namespace kiln::compiler {

std::string Sm90MatmulConfig::json() const {
  return "{\"block_m\": 128, \"block_n\": " + std::to_string(blockN) + ", \"block_k\": 64, \"stages\": " +
         std::to_string(stages) + ", \"regs\": [" + std::to_string(producerRegs) + ", " + std::to_string(consumerRegs) +
         "]}";
}

int Sm90MatmulConfig::sharedBytes() const {
  const int aBytes = 128 * 64 * 2, bBytes = blockN * 64 * 2;
  return stages * (aBytes + bBytes) + 2 * stages * 8 + 1024;
}

std::vector<Sm90MatmulConfig> sm90MatmulSpace() {
  std::vector<Sm90MatmulConfig> out;
  for (int bn : {128, 256})
    for (int stages : {3, 4}) {
      Sm90MatmulConfig c;
      c.blockN = bn;
      c.stages = stages;
      if (c.sharedBytes() <= 227 * 1024) out.push_back(c);
    }
  return out;
}

namespace {

const char* kTemplate = R"(
// kiln matmul for sm_90a (work in progress, not yet run): C [M, N] = A [M, K] @ B [N, K]^T, $DTYPE
//   tile 128 x $BN x 64, $STAGES stages, 384 threads: producer warpgroup (TMA) + 2 consumer warpgroups (wgmma)
typedef unsigned short u16;
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
__device__ __forceinline__ bool kiln_mbar_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  return done != 0;
}
__device__ __forceinline__ void kiln_tma_load(unsigned dst, const KilnTensorMap* map, unsigned bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      :: "r"(dst), "l"(map), "r"(bar), "r"(x), "r"(y) : "memory");
}
// A shared-memory matrix descriptor for a K-major tile with 128-byte
// swizzle: start address >> 4 (bits 0-13), leading byte offset 16 >> 4
// (unused with this swizzle), stride byte offset 1024 >> 4 (8 rows of 128
// bytes), swizzle mode 1 (128B) in bits 62-63.
__device__ __forceinline__ unsigned long long kiln_desc(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(16 >> 4) << 16) |
         ((unsigned long long)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ u16 kiln_f2out(float f) { u16 h; asm("cvt.rn.$CVT.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

extern "C" __global__ void __launch_bounds__(384, 1)
$NAME(const __grid_constant__ KilnTensorMap tmA, const __grid_constant__ KilnTensorMap tmB, u16* __restrict__ C,
      long long M, long long N, long long K) {
  extern __shared__ unsigned char kiln_smem_raw[];
  unsigned char* smem = (unsigned char*)(((unsigned long long)kiln_smem_raw + 1023) & ~1023ull);
  u16* As = (u16*)smem;                                  // $STAGES x [128][64]
  u16* Bs = (u16*)(smem + $STAGES * $A_BYTES);           // $STAGES x [$BN][64]
  unsigned long long* full = (unsigned long long*)(smem + $STAGES * ($A_BYTES + $B_BYTES));
  unsigned long long* empty = full + $STAGES;
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const long long m0 = (long long)blockIdx.y * 128, n0 = (long long)blockIdx.x * $BN;
  const int kBlocks = (int)((K + 63) / 64);
  if (threadIdx.x == 0) {
    for (int s = 0; s < $STAGES; ++s) {
      kiln_mbar_init(kiln_smem(&full[s]), 1);
      kiln_mbar_init(kiln_smem(&empty[s]), 2);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 $PRODUCER_REGS;");
    if (tid == 0) {
      for (int kb = 0; kb < kBlocks; ++kb) {
        const int s = kb % $STAGES;
        const unsigned phase = (kb / $STAGES) & 1;
        while (!kiln_mbar_try_wait(kiln_smem(&empty[s]), phase ^ 1)) {
        }
        kiln_mbar_expect_tx(kiln_smem(&full[s]), $A_BYTES + $B_BYTES);
        kiln_tma_load(kiln_smem(As + s * 128 * 64), &tmA, kiln_smem(&full[s]), kb * 64, (int)m0);
        kiln_tma_load(kiln_smem(Bs + s * $BN * 64), &tmB, kiln_smem(&full[s]), kb * 64, (int)n0);
      }
    }
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 $CONSUMER_REGS;");
  const int c = wg - 1;
  float d[$ACC];
#pragma unroll
  for (int i = 0; i < $ACC; ++i) d[i] = 0.0f;
  for (int kb = 0; kb < kBlocks; ++kb) {
    const int s = kb % $STAGES;
    const unsigned phase = (kb / $STAGES) & 1;
    while (!kiln_mbar_try_wait(kiln_smem(&full[s]), phase)) {
    }
    const unsigned aBase = kiln_smem(As + s * 128 * 64 + c * 64 * 64);
    const unsigned bBase = kiln_smem(Bs + s * $BN * 64);
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const unsigned long long da = kiln_desc(aBase + kk * 32), db = kiln_desc(bBase + kk * 32);
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %$DS, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n$BNk16.f32.$MMA.$MMA {$DREGS}, %$DA, %$DB, p, 1, 1, 0, 0;\n}\n"
          : $DOUTS
          : "l"(da), "l"(db), "r"(1));
    }
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    if (tid == 0) kiln_mbar_arrive(kiln_smem(&empty[s]));
  }
  // Accumulator i of thread (warp w, lane l): row 16w + l/4 + 8 [i%4 >= 2], column 8 (i/4) + 2 (l%4) + i%2.
  const int w = tid / 32, l = tid % 32;
#pragma unroll
  for (int i = 0; i < $ACC; ++i) {
    const long long row = m0 + c * 64 + 16 * w + l / 4 + ((i % 4) >= 2 ? 8 : 0);
    const long long col = n0 + 8 * (i / 4) + 2 * (l % 4) + (i % 2);
    if (row < M && col < N) C[row * N + col] = kiln_f2out(d[i]);
  }
}
)";

}  // namespace

std::string emitSm90MatmulSource(DType dtype, const Sm90MatmulConfig& c, const std::string& name) {
  if (dtype != DType::BF16 && dtype != DType::F16)
    throw Error("matmul (sm_90a kernel): dtype " + std::string(dtypeName(dtype)) + "; expected bf16 or f16");
  if (c.blockN != 128 && c.blockN != 256) throw Error("matmul (sm_90a kernel): block_n must be 128 or 256");
  if (c.stages < 2 || c.sharedBytes() > 227 * 1024)
    throw Error("matmul (sm_90a kernel): config " + c.json() + " needs " + std::to_string(c.sharedBytes()) +
                " bytes of shared memory (at most 232448)");
  const int acc = c.blockN / 2;  // f32 accumulators per thread: 64 x BN / 128
  std::string dregs, douts;
  for (int i = 0; i < acc; ++i) {
    dregs += (i ? ", %" : "%") + std::to_string(i);
    douts += std::string(i ? ", " : "") + "\"+f\"(d[" + std::to_string(i) + "])";
  }
  std::string src = kTemplate;
  replaceAll(src, "$DREGS", dregs);
  replaceAll(src, "$DOUTS", douts);
  replaceAll(src, "$DA", std::to_string(acc));
  replaceAll(src, "$DB", std::to_string(acc + 1));
  replaceAll(src, "$DS", std::to_string(acc + 2));
  replaceAll(src, "$ACC", std::to_string(acc));
  replaceAll(src, "$A_BYTES", std::to_string(128 * 64 * 2));
  replaceAll(src, "$B_BYTES", std::to_string(c.blockN * 64 * 2));
  replaceAll(src, "$BN", std::to_string(c.blockN));
  replaceAll(src, "$STAGES", std::to_string(c.stages));
  replaceAll(src, "$PRODUCER_REGS", std::to_string(c.producerRegs));
  replaceAll(src, "$CONSUMER_REGS", std::to_string(c.consumerRegs));
  replaceAll(src, "$DTYPE", std::string(dtypeName(dtype)));
  replaceAll(src, "$CVT", dtype == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$MMA", dtype == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$NAME", name);
  return src;
}

}  // namespace kiln::compiler
