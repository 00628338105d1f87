#include "matmul.h"

#include <algorithm>
#include <map>

#include "config_override.h"
#include "kiln/error.h"

namespace kiln::compiler {

std::string MatmulConfig::json() const {
  return "{\"block_m\": " + std::to_string(blockM) + ", \"block_n\": " + std::to_string(blockN) +
         ", \"block_k\": " + std::to_string(blockK) + ", \"threads\": " + std::to_string(threads) + "}";
}

MatmulConfig matmulHeuristic(const Graph& g) {
  (void)g;
  return MatmulConfig{};
}

void applyMatmulOverride(MatmulConfig& c, const std::string& json) {
  applyIntegerOverrides(json, "matmul", "block_m, block_n: 128; block_k: a multiple of 16 in [16, 128]; threads: 256",
                        [&](const std::string& key, int64_t v) {
                          if (key == "block_m") c.blockM = static_cast<int>(v);
                          else if (key == "block_n") c.blockN = static_cast<int>(v);
                          else if (key == "block_k" && v >= 16 && v <= 128) c.blockK = static_cast<int>(v);
                          else if (key == "threads") c.threads = static_cast<int>(v);
                          else return false;
                          return true;
                        });
}

namespace {

// A dim as a C expression: a literal, or the kernel parameter of a dynamic
// dim.
std::string dimExpr(const Dim& d) { return d.isStatic() ? std::to_string(d.size) + "LL" : "dim_" + d.name; }

// The product of dims [from, end) as a C expression.
std::string productExpr(const Shape& s, size_t from) {
  std::string e;
  for (size_t i = from; i < s.size(); ++i) e += (e.empty() ? "" : " * ") + dimExpr(s[i]);
  return e.empty() ? "1LL" : "(" + e + ")";
}

// Shared by both kernels: the problem's sizes, then, per tile of the
// grid-stride loop, its batch index, corner and operand offsets.
const char* kSizes = R"(  const long long M = $M, N = $N, K = $K;
  const long long tilesM = (M + $BM - 1) / $BM, tilesN = (N + $BN - 1) / $BN;
  const long long numTiles = $BATCH * tilesM * tilesN;
)";
const char* kTileStart = R"(    const long long z = tile / (tilesM * tilesN);
    const long long rest = tile - z * tilesM * tilesN;
    const long long m0 = (rest / tilesN) * $BM, n0 = (rest % tilesN) * $BN;
    long long offA = 0, offB = 0;
    { long long zz = z; (void)zz;
$BATCH_OFFSETS
    }
    const long long offC = z * M * N;
)";

const char* kBody16 = R"(
// kiln matmul (mma.sync m16n8k16, f32 accumulation): C = A @ B
//   A [batch.., M, K]$TRANSA_NOTE, B [batch.., K, N]$TRANSB_NOTE, C [batch.., M, N], $DTYPE
//   block tile $BM x $BN, K step $BK, $THREADS threads (8 warps: 2 x 4, 64 x 32 each)
typedef unsigned short u16;
__device__ __forceinline__ u16 kiln_f2out(float f) { u16 h; asm("cvt.rn.$CVT.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }

extern "C" __global__ void __launch_bounds__($THREADS) $NAME($PARAMS) {
  const u16* __restrict__ A = (const u16*)$APTR;
  const u16* __restrict__ B = (const u16*)$BPTR;
  u16* __restrict__ C = (u16*)$CPTR;
$SIZES  __shared__ __align__(16) u16 As[$BM][$BK + 8];
  __shared__ __align__(16) u16 Bs[$BN][$BK + 8];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3;       // the warp's 64 x 32 part of the tile
  const int g = lane >> 2, t = lane & 3;         // mma fragment coordinates
  for (long long tile = blockIdx.x; tile < numTiles; tile += gridDim.x) {
$TILE_START    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    for (long long k0 = 0; k0 < K; k0 += $BK) {
      // Stage A (m, k) and B (k, n) tiles, zero outside the matrices; B is
      // kept n-major so that a thread's B fragment is one 32-bit load.
      for (int i = tid; i < $BM * $BK; i += $THREADS) {
        const int mm = $A_M_OF_I, kk = $A_K_OF_I;
        const long long m = m0 + mm, k = k0 + kk;
        As[mm][kk] = (m < M && k < K) ? A[offA + $A_INDEX] : (u16)0;
      }
      for (int i = tid; i < $BN * $BK; i += $THREADS) {
        const int nn = $B_N_OF_I, kk = $B_K_OF_I;
        const long long n = n0 + nn, k = k0 + kk;
        Bs[nn][kk] = (n < N && k < K) ? B[offB + $B_INDEX] : (u16)0;
      }
      __syncthreads();
#pragma unroll
      for (int ks = 0; ks < $BK; ks += 16) {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = wm * 64 + i * 16 + g;
          a[i][0] = *(const unsigned*)&As[r][ks + 2 * t];
          a[i][1] = *(const unsigned*)&As[r + 8][ks + 2 * t];
          a[i][2] = *(const unsigned*)&As[r][ks + 2 * t + 8];
          a[i][3] = *(const unsigned*)&As[r + 8][ks + 2 * t + 8];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = wn * 32 + j * 8 + g;
          b[j][0] = *(const unsigned*)&Bs[c][ks + 2 * t];
          b[j][1] = *(const unsigned*)&Bs[c][ks + 2 * t + 8];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.$MMA.$MMA.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                "{%0, %1, %2, %3};\n"
                : "+f"(acc[i][j][0]), "+f"(acc[i][j][1]), "+f"(acc[i][j][2]), "+f"(acc[i][j][3])
                : "r"(a[i][0]), "r"(a[i][1]), "r"(a[i][2]), "r"(a[i][3]), "r"(b[j][0]), "r"(b[j][1]));
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const long long m = m0 + wm * 64 + i * 16 + g + (e >= 2 ? 8 : 0);
          const long long n = n0 + wn * 32 + j * 8 + 2 * t + (e & 1);
          if (m < M && n < N) C[offC + m * N + n] = kiln_f2out(acc[i][j][e]);
        }
  }
}
)";

const char* kBody32 = R"(
// kiln matmul (CUDA-core FMAs, exact f32): C = A @ B
//   A [batch.., M, K]$TRANSA_NOTE, B [batch.., K, N]$TRANSB_NOTE, C [batch.., M, N], f32
//   block tile $BM x $BN, K step $BK, $THREADS threads (16 x 16, 8 x 8 outputs each)
extern "C" __global__ void __launch_bounds__($THREADS) $NAME($PARAMS) {
  const float* __restrict__ A = (const float*)$APTR;
  const float* __restrict__ B = (const float*)$BPTR;
  float* __restrict__ C = (float*)$CPTR;
$SIZES  __shared__ __align__(16) float As[$BK][$BM + 4];
  __shared__ __align__(16) float Bs[$BK][$BN + 4];
  const int tid = threadIdx.x, ty = tid >> 4, tx = tid & 15;
  for (long long tile = blockIdx.x; tile < numTiles; tile += gridDim.x) {
$TILE_START    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    for (long long k0 = 0; k0 < K; k0 += $BK) {
#pragma unroll 2
      for (int i = tid; i < $BM * $BK; i += $THREADS) {
        const int mm = $A_M_OF_I, kk = $A_K_OF_I;
        const long long m = m0 + mm, k = k0 + kk;
        As[kk][mm] = (m < M && k < K) ? A[offA + $A_INDEX] : 0.0f;
      }
#pragma unroll 2
      for (int i = tid; i < $BN * $BK; i += $THREADS) {
        const int nn = $B_N_OF_I, kk = $B_K_OF_I;
        const long long n = n0 + nn, k = k0 + kk;
        Bs[kk][nn] = (n < N && k < K) ? B[offB + $B_INDEX] : 0.0f;
      }
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < $BK; ++kk) {
        float a[8], b[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) a[i] = As[kk][ty * 8 + i];
#pragma unroll
        for (int j = 0; j < 8; ++j) b[j] = Bs[kk][tx * 8 + j];
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
          for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const long long m = m0 + ty * 8 + i, n = n0 + tx * 8 + j;
        if (m < M && n < N) C[offC + m * N + n] = acc[i][j];
      }
  }
}
)";

}  // namespace

MatmulKernel emitMatmul(const Graph& g, const MatmulConfig& cfg, const std::string& name) {
  if (g.outputs().size() != 1) throw Error("kiln: internal: a matmul kernel has one output");
  const Node& mm = g.node(g.outputs()[0].node);
  if (mm.op != Op::Matmul) throw Error("kiln: internal: a matmul kernel's output is the matmul");
  const Node& an = g.node(mm.inputs[0]);
  const Node& bn = g.node(mm.inputs[1]);
  const DType t = mm.dtype;
  const bool tc = t == DType::BF16 || t == DType::F16;
  if (tc ? (cfg.blockM != 128 || cfg.blockN != 128 || cfg.threads != 256 || cfg.blockK % 16 != 0)
         : (cfg.blockM != 128 || cfg.blockN != 128 || cfg.threads != 256))
    throw Error("matmul: config " + cfg.json() + " is not supported by this kernel (128 x 128 tiles, 256 threads" +
                std::string(tc ? ", K step a multiple of 16)" : ")"));

  const size_t ra = an.shape.size(), rb = bn.shape.size(), rc = mm.shape.size();
  const Dim M = mm.shape[rc - 2], N = mm.shape[rc - 1];
  const Dim K = mm.transA ? an.shape[ra - 2] : an.shape[ra - 1];
  Shape batch(mm.shape.begin(), mm.shape.end() - 2);

  // Kernel parameters: tensors in graph order (inputs, then the output),
  // then the dynamic dims.
  MatmulKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "matmul";
  k.config = cfg.json();
  std::string params;
  std::map<int, std::string> ptrOf;
  int p = 0;
  auto addTensor = [&](const std::string& tname, DType dt, const Shape& s, bool output, int node) {
    KernelTensor kt;
    kt.name = tname;
    kt.dtype = dt;
    kt.shape = s;
    kt.output = output;
    k.tensors.push_back(kt);
    std::string pn = "p" + std::to_string(p++);
    params += std::string(params.empty() ? "" : ", ") + (output ? "void* " : "const void* ") + pn;
    if (node >= 0) ptrOf[node] = pn;
  };
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op != Op::Input)
      throw Error("matmul: runtime scalar '" + n.name + "' in a matmul graph: epilogues come with the Hopper schedule");
    addTensor(n.name, n.dtype, n.shape, false, id);
  }
  addTensor(g.outputs()[0].name, t, mm.shape, true, -1);
  std::string cptr = "p" + std::to_string(p - 1);
  for (const std::string& d : g.dynamicDims()) {
    k.dims.push_back(d);
    params += ", long long dim_" + d;
  }

  // Batch offsets: walk the output's batch dims from the last; an operand
  // dim of size 1 (or missing) is broadcast.
  std::string offsets;
  auto operandStride = [&](const Shape& s, size_t from) { return productExpr(s, from); };
  for (size_t d = batch.size(); d-- > 0;) {
    offsets += "      { const long long i = zz % " + dimExpr(batch[d]) + "; zz /= " + dimExpr(batch[d]) + ";";
    // Operand dims right-aligned with the output's batch dims.
    const size_t fromEnd = batch.size() - d;  // 1 = the last batch dim
    if (ra - 2 >= fromEnd) {
      const size_t ad = ra - 2 - fromEnd;
      if (!(an.shape[ad].isStatic() && an.shape[ad].size == 1))
        offsets += " offA += i * " + operandStride(an.shape, ad + 1) + ";";
    }
    if (rb - 2 >= fromEnd) {
      const size_t bd = rb - 2 - fromEnd;
      if (!(bn.shape[bd].isStatic() && bn.shape[bd].size == 1))
        offsets += " offB += i * " + operandStride(bn.shape, bd + 1) + ";";
    }
    offsets += " }\n";
  }

  std::string src = tc ? kBody16 : kBody32;
  replaceAll(src, "$SIZES", kSizes);
  replaceAll(src, "$TILE_START", kTileStart);
  // Coalesced staging: the contiguous index of each operand varies fastest.
  if (!mm.transA) {
    replaceAll(src, "$A_M_OF_I", "i / $BK");
    replaceAll(src, "$A_K_OF_I", "i % $BK");
    replaceAll(src, "$A_INDEX", "m * K + k");
  } else {
    replaceAll(src, "$A_M_OF_I", "i % $BM");
    replaceAll(src, "$A_K_OF_I", "i / $BM");
    replaceAll(src, "$A_INDEX", "k * M + m");
  }
  if (!mm.transB) {
    replaceAll(src, "$B_N_OF_I", "i % $BN");
    replaceAll(src, "$B_K_OF_I", "i / $BN");
    replaceAll(src, "$B_INDEX", "k * N + n");
  } else {
    replaceAll(src, "$B_N_OF_I", "i / $BK");
    replaceAll(src, "$B_K_OF_I", "i % $BK");
    replaceAll(src, "$B_INDEX", "n * K + k");
  }
  replaceAll(src, "$TRANSA_NOTE", mm.transA ? " stored [batch.., K, M]" : "");
  replaceAll(src, "$TRANSB_NOTE", mm.transB ? " stored [batch.., N, K]" : "");
  replaceAll(src, "$DTYPE", std::string(dtypeName(t)));
  replaceAll(src, "$CVT", t == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$MMA", t == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$BATCH_OFFSETS", offsets);
  replaceAll(src, "$BATCH", productExpr(batch, 0));
  replaceAll(src, "$BM", std::to_string(cfg.blockM));
  replaceAll(src, "$BN", std::to_string(cfg.blockN));
  replaceAll(src, "$BK", std::to_string(cfg.blockK));
  replaceAll(src, "$THREADS", std::to_string(cfg.threads));
  replaceAll(src, "$NAME", name + "_s1");
  replaceAll(src, "$PARAMS", params);
  replaceAll(src, "$APTR", ptrOf.at(mm.inputs[0]));
  replaceAll(src, "$BPTR", ptrOf.at(mm.inputs[1]));
  replaceAll(src, "$CPTR", cptr);
  replaceAll(src, "$M", dimExpr(M));
  replaceAll(src, "$N", dimExpr(N));
  replaceAll(src, "$K", dimExpr(K));
  out.source = std::move(src);

  k.entries.push_back({name + "_s1", false});
  k.launch.threadsPerBlock = cfg.threads;
  k.launch.elementsPerBlock = static_cast<int64_t>(cfg.blockM) * cfg.blockN;
  k.launch.iterShape = mm.shape;  // blocks = ceil(batch*M*N / tile) <= tiles; the kernel loops over the rest
  k.launch.maxBlocks = 0;
  return out;
}

}  // namespace kiln::compiler
