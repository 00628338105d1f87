#include "matmul.h"

#include <algorithm>
#include <map>

#include "config_override.h"
#include "cuda_element.h"
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

std::string dimExpr(const Dim& d) { return d.isStatic() ? std::to_string(d.size) + "LL" : "dim_" + d.name; }

std::string productExpr(const Shape& s, size_t from) {
  std::string e;
  for (size_t i = from; i < s.size(); ++i) e += (e.empty() ? "" : " * ") + dimExpr(s[i]);
  return e.empty() ? "1LL" : "(" + e + ")";
}

Dim matmulK(const Graph& g, const Node& mm) {
  const Node& an = g.node(mm.inputs[0]);
  const size_t ra = an.shape.size();
  return mm.transA ? an.shape[ra - 2] : an.shape[ra - 1];
}

MatmulShape matmulShape(const Graph& g) {
  MatmulShape s;
  for (int id = 0; id < g.numNodes(); ++id)
    if (g.node(id).op == Op::Matmul) s.id = id;
  if (s.id < 0) throw Error("kiln: internal: a matmul kernel's graph has no matmul");
  const Node& mm = g.node(s.id);
  s.mm = &mm;
  const size_t rc = mm.shape.size();
  s.M = mm.shape[rc - 2];
  s.N = mm.shape[rc - 1];
  s.K = matmulK(g, mm);
  s.batch.assign(mm.shape.begin(), mm.shape.end() - 2);
  return s;
}

MatmulRowStats matmulRowStats(const Graph& g) {
  auto isReduction = [](Op op) { return opClass(op) == OpClass::Reduction; };
  MatmulRowStats r;
  auto bad = [&](const std::string& why) {
    return Error("kiln: internal: a matmul kernel's graph has reductions that are not a softmax's row max and row "
                 "sum of exp(v - max) (" + why + ")");
  };
  auto lastKeep = [&](const Node& n) {
    return n.keepdim && n.axes.size() == 1 && n.axes[0] == static_cast<int64_t>(g.node(n.inputs[0]).rank()) - 1;
  };
  for (int id = 0; id < g.numNodes(); ++id) {
    const Node& n = g.node(id);
    if (!isReduction(n.op)) continue;
    if (n.op == Op::Max && r.max < 0 && lastKeep(n)) r.max = id;
    else if (n.op == Op::Sum && r.sum < 0 && lastKeep(n)) r.sum = id;
    else throw bad(std::string(opName(n.op)) + " " + typeToString(n.dtype, n.shape));
  }
  if (r.max < 0 && r.sum < 0) return r;
  if (r.max < 0 || r.sum < 0) throw bad("a max without a sum, or a sum without a max");
  r.value = g.node(r.max).inputs[0];
  const Node& e = g.node(g.node(r.sum).inputs[0]);
  const bool form = e.op == Op::Exp && g.node(e.inputs[0]).op == Op::Sub &&
                    g.node(e.inputs[0]).inputs == std::vector<int>{r.value, r.max};
  if (!form) throw bad("the sum is not over exp(v - max)");
  if (g.node(r.value).dtype != DType::F32 || g.node(r.max).dtype != DType::F32 || g.node(r.sum).dtype != DType::F32)
    throw bad("v, its max and its sum are f32");
  return r;
}

std::string batchOffsetCode(const MatmulShape& s, const Graph& g, const std::string& varA, const std::string& varB,
                            bool elements, const std::string& indent) {
  std::string code;
  for (size_t d = s.batch.size(); d-- > 0;) {
    code += indent + "{ const long long i = zz % " + dimExpr(s.batch[d]) + "; zz /= " + dimExpr(s.batch[d]) + ";";
    const size_t fromEnd = s.batch.size() - d;  // 1: the last batch dim
    for (const auto& [node, var] : {std::pair{&g.node(s.mm->inputs[0]), varA}, std::pair{&g.node(s.mm->inputs[1]), varB}}) {
      const Shape& shape = node->shape;
      const size_t batchRank = shape.size() - 2;  // operand dims right-aligned with the output's
      if (batchRank < fromEnd) continue;
      const size_t od = batchRank - fromEnd;
      if (shape[od].isStatic() && shape[od].size == 1) continue;
      const Shape later(shape.begin() + static_cast<std::ptrdiff_t>(od) + 1,
                        elements ? shape.end() : shape.end() - 2);
      code += " " + var + " += i * " + productExpr(later, 0) + ";";
    }
    code += " }\n";
  }
  return code;
}

void fillSignature(std::string& src, const MatmulSignature& sig) {
  replaceAll(src, "$BATCH", productExpr(sig.batch, 0));
  replaceAll(src, "$PARAMS", sig.params);
  replaceAll(src, "$M", dimExpr(sig.M));
  replaceAll(src, "$N", dimExpr(sig.N));
  replaceAll(src, "$K", dimExpr(sig.K));
}

MatmulSignature matmulSignature(const Graph& g, CompiledKernel& k, bool pairStores, bool staged) {
  MatmulSignature sig;
  static_cast<MatmulShape&>(sig) = matmulShape(g);
  const int mmId = sig.id;
  const Node& mm = *sig.mm;

  // Parameters: input tensors (graph order), outputs, dims, scalars.
  std::map<int, std::string> ptrOf, scalarOf;
  int p = 0;
  auto add = [&](const std::string& text) { sig.params += (sig.params.empty() ? "" : ", ") + text; };
  const int align = pairStores ? 16 : 0;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op != Op::Input) continue;
    k.tensors.push_back({.name = n.name, .dtype = n.dtype, .shape = n.shape, .output = false, .alignment = align});
    ptrOf[id] = "p" + std::to_string(p++);
    add("const " + cudaStorageType(n.dtype) + "* __restrict__ " + ptrOf[id]);
  }
  std::vector<std::string> outPtr;
  for (const GraphOutput& o : g.outputs()) {
    const Node& n = g.node(o.node);
    k.tensors.push_back({.name = o.name, .dtype = n.dtype, .shape = n.shape, .output = true, .alignment = align});
    outPtr.push_back("p" + std::to_string(p++));
    add(cudaStorageType(n.dtype) + "* __restrict__ " + outPtr.back());
  }
  for (const std::string& d : g.dynamicDims()) {
    k.dims.push_back(d);
    add("long long dim_" + d);
  }
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op != Op::Scalar) continue;
    k.scalars.push_back({n.name, n.dtype});
    scalarOf[id] = "s" + std::to_string(k.scalars.size() - 1);
    add(cudaComputeType(n.dtype) + " " + scalarOf[id]);
  }
  sig.aPtr = ptrOf.at(mm.inputs[0]);
  sig.bPtr = ptrOf.at(mm.inputs[1]);

  // The epilogue: every node the outputs need, per element j of the pair,
  // in id order (operands have smaller ids).
  // With row statistics the outputs read the row's max and sum as values
  // the kernel passes in (computed in its first pass over the row).
  sig.rows = matmulRowStats(g);
  const MatmulRowStats& rs = sig.rows;
  auto coneOf = [&](std::vector<int> stack) {
    std::vector<bool> need(g.numNodes(), false);
    while (!stack.empty()) {
      int id = stack.back();
      stack.pop_back();
      if (need[id]) continue;
      need[id] = true;
      if (id != mmId && id != rs.max && id != rs.sum)
        for (int i : g.node(id).inputs) stack.push_back(i);
    }
    return need;
  };
  std::vector<int> outNodes;
  for (const GraphOutput& o : g.outputs()) outNodes.push_back(o.node);
  const std::vector<bool> needed = coneOf(outNodes);
  const std::vector<bool> neededV = rs.any() ? coneOf({rs.value}) : std::vector<bool>{};
  bool approx = true;
  for (const GraphOutput& o : g.outputs()) {
    DType t = g.node(o.node).dtype;
    approx = approx && (t == DType::BF16 || t == DType::F16);
  }
  const Shape& out = mm.shape;
  const size_t r = out.size();
  // The offset of an input's element at output coordinates (batch coords
  // zc<d>, row, col + j), broadcasting its missing and unit dims.
  auto offset = [&](const Shape& s, const std::string& col) {
    std::string e;
    for (size_t a = 0; a < s.size(); ++a) {
      if (s[a].isStatic() && s[a].size == 1) continue;
      const size_t oa = a + (r - s.size());
      std::string coord = oa == r - 1 ? col : oa == r - 2 ? std::string("row") : "zc" + std::to_string(oa);
      std::string stride = productExpr(s, a + 1);
      e += (e.empty() ? "" : " + ") + coord + (stride == "1LL" ? "" : " * " + stride);
    }
    return e.empty() ? std::string("0") : e;
  };
  // Inputs that vary along the output's columns, read as one 4-byte pair
  // where both elements are in bounds and N is even (16-bit types: the
  // pair's offset is even, so the load is aligned).
  auto pairable = [&](const Node& n) {
    return (n.dtype == DType::BF16 || n.dtype == DType::F16) && !n.shape.empty() &&
           !(n.shape.back().isStatic() && n.shape.back().size == 1);
  };
  auto pairLoads = [&]() {
    std::string code;
    for (int id = 0; id < g.numNodes(); ++id) {
      const Node& n = g.node(id);
      if (!needed[id] || id == mmId || n.op != Op::Input || !pairable(n)) continue;
      code += "      const unsigned in" + std::to_string(id) + "_pair = *(const unsigned*)(" + ptrOf.at(id) + " + " +
              offset(n.shape, "col") + ");\n";
    }
    return code;
  };
  auto values = [&](int j, bool paired, const std::vector<bool>& need = {}) {
    const std::vector<bool>& use = need.empty() ? needed : need;
    std::string code, col = j ? "(col + 1)" : "col";
    std::map<int, std::string> v;
    for (int id = 0; id < g.numNodes(); ++id) {
      if (!use[id]) continue;
      const Node& n = g.node(id);
      std::string expr;
      if (id == mmId) expr = j ? "acc1" : "acc0";
      else if (id == rs.max) expr = "kiln_rmax";
      else if (id == rs.sum) expr = "kiln_rsum";
      else if (n.op == Op::Input && paired && pairable(n))
        expr = cudaLoadValue("(u16)(in" + std::to_string(id) + "_pair" + (j ? " >> 16" : "") + ")", n.dtype);
      else if (n.op == Op::Input) expr = cudaLoadValue(ptrOf.at(id) + "[" + offset(n.shape, col) + "]", n.dtype);
      else if (n.op == Op::Scalar) expr = scalarOf.at(id);
      else if (n.op == Op::Constant) expr = cudaConstant(n);
      else if (rs.any() && n.op == Op::Div && n.inputs[1] == rs.sum && isFloat(n.dtype) &&
               isFloat(g.node(n.inputs[0]).dtype))
        // Division by the row's sum (softmax's): a product with its
        // reciprocal, taken once per row (not a division per element).
        expr = "(" + v.at(n.inputs[0]) + " * kiln_rinv)";
      else {
        std::vector<std::string> ops;
        for (int i : n.inputs) ops.push_back(v.at(i));
        expr = cudaElementwise(g, n, ops, approx);
      }
      v[id] = "v" + std::to_string(id) + "_" + std::to_string(j);
      code += "      const " + cudaComputeType(n.dtype) + " " + v[id] + " = " + expr + ";\n";
    }
    return std::make_pair(code, v);
  };
  auto [code0, v0] = values(0, false);
  auto [code1, v1] = values(1, false);
  auto [pcode0, pv0] = values(0, true);
  auto [pcode1, pv1] = values(1, true);
  const std::string pcode = pairLoads() + pcode0 + pcode1;
  // The value an output stores: a cast to the output's 16-bit type rounds
  // once when stored, so it stores its operand (rounding twice gives the
  // same bits; the cast's own rounding is then dead code).
  auto stored = [&](const std::map<int, std::string>& v, int id) {
    const Node& n = g.node(id);
    if (n.op == Op::Cast && (n.dtype == DType::BF16 || n.dtype == DType::F16)) {
      const DType from = g.node(n.inputs[0]).dtype;
      if (from == DType::F32 || from == DType::BF16 || from == DType::F16) return v.at(n.inputs[0]);
    }
    return v.at(id);
  };
  // A pair of adjacent values of output `id` stored at `dst` in one access
  // (4 bytes for 16-bit floats, 8 for f32); empty for other dtypes.
  auto pairStore = [&](const std::string& dst, int id, DType t) -> std::string {
    if (t == DType::BF16 || t == DType::F16)
      return "*(unsigned*)(" + dst + ") = " + (t == DType::BF16 ? "kiln_pack_bf16x2(" : "kiln_pack_f16x2(") +
             stored(pv0, id) + ", " + stored(pv1, id) + ");\n";
    if (t == DType::F32) return "*(float2*)(" + dst + ") = make_float2(" + pv0.at(id) + ", " + pv1.at(id) + ");\n";
    return "";
  };
  std::string single0, single1, pair;
  for (size_t o = 0; o < g.outputs().size(); ++o) {
    const int id = g.outputs()[o].node;
    const DType t = g.node(id).dtype;
    const std::string& ptr = outPtr[o];
    single0 += "      " + ptr + "[o] = " + cudaStoreValue(stored(v0, id), t) + ";\n";
    single1 += "        " + ptr + "[o + 1] = " + cudaStoreValue(stored(v1, id), t) + ";\n";
    const std::string both = pairStore(ptr + " + o", id, t);
    pair += both.empty() ? "      " + ptr + "[o] = " + cudaStoreValue(pv0.at(id), t) + "; " + ptr + "[o + 1] = " +
                               cudaStoreValue(pv1.at(id), t) + ";\n"
                         : "      " + both;
  }
  std::string batchCoords;
  if (!sig.batch.empty()) {
    batchCoords += "    long long zz = z;\n";
    for (size_t d = sig.batch.size(); d-- > 0;)
      batchCoords += "    const long long zc" + std::to_string(d) + " = zz % " + dimExpr(sig.batch[d]) + "; zz /= " +
                     dimExpr(sig.batch[d]) + ";\n";
  }
  const std::string statParams = rs.any() ? ", float kiln_rmax, float kiln_rsum, float kiln_rinv" : "";
  std::string e = "  // The epilogue: the graph's outputs at (batch z, row, col) and (z, row, col + 1).\n"
                  "  auto kiln_epilogue = [&](long long z, long long row, long long col, float acc0, float acc1" + statParams + ") {\n"
                  "    if (row >= M || col >= N) return;\n" +
                  batchCoords + "    const long long o = (z * M + row) * N + col;\n";
  if (pairStores) {
    e += "    if (col + 1 < N && (N & 1) == 0) {\n" + pcode + pair + "      return;\n    }\n";
  }
  e += "    {\n" + code0 + single0 + "    }\n    if (col + 1 < N) {\n" + code1 + single1 + "    }\n  };\n";
  if (pairStores) {
    // Inside the matrix (both elements in bounds; a tile that lies wholly
    // inside uses it): no branches per element, so that the compiler can
    // batch the loads and interleave the elements.
    e += "  // The same where (row, col + 1) is known to be inside the output.\n"
         "  auto kiln_epilogue_inside = [&](long long z, long long row, long long col, float acc0, float acc1" +
         statParams + ") {\n" +
         batchCoords + "    const long long o = (z * M + row) * N + col;\n    if ((N & 1) == 0) {\n" + pcode +
         pair + "    } else {\n" + code0 + single0 + code1 + single1 + "    }\n  };\n";
  }
  if (staged) {
    // Into a warpgroup's staging buffer for a TMA store: output o at
    // byte offset sum(64 * 64 * size of the outputs before it), as boxes of
    // 64 rows x 128 bytes (64 16-bit or 32 f32 columns), 128-byte swizzled
    // (16-byte chunk c of row r at chunk c ^ (r % 8)); (r, cc) is the pair's
    // row and column inside the warpgroup's 64 x 64 chunk of the tile.
    std::string st;
    int offset = 0;
    for (size_t o = 0; o < g.outputs().size(); ++o) {
      const int id = g.outputs()[o].node;
      const DType t = g.node(id).dtype;
      const int size = static_cast<int>(dtypeSize(t));
      const std::string at = "st + " + std::to_string(offset) + " + kiln_swizzle128(r, cc * " + std::to_string(size) + ")";
      const std::string both = pairStore(at, id, t);
      if (both.empty())
        throw Error("kiln: internal: a staged matmul epilogue stores bf16, f16 or f32, not " +
                    std::string(dtypeName(t)));
      st += "    " + both;
      offset += 64 * 64 * size;
    }
    e += "  // The same into shared memory for a TMA store (tiles wholly inside the output).\n"
         "  auto kiln_swizzle128 = [](int r, int byte) {\n"
         "    return (byte >> 7) * 8192 + r * 128 + ((((byte >> 4) & 7) ^ (r & 7)) << 4) + (byte & 15);\n  };\n"
         "  auto kiln_epilogue_staged = [&](long long z, long long row, long long col, float acc0, float acc1, "
         "unsigned char* st, int r, int cc" + statParams + ") {\n" +
         batchCoords + pcode + st + "  };\n";
  }
  if (rs.any()) {
    // v, the value whose rows the softmax takes, at (z, row, col) and
    // (z, row, col + 1): -inf outside the output (no loads there), so that
    // it adds nothing to the row's max and sum.
    auto [vcode0, vv0] = values(0, false, neededV);
    auto [vcode1, vv1] = values(1, false, neededV);
    const std::string v0 = vv0.at(rs.value), v1 = vv1.at(rs.value);
    e += "  // The softmax's v (its rows' max and sum are taken in the first pass) at (z, row, col), (z, row, col + 1):\n"
         "  // -inf outside the output.\n"
         "  auto kiln_rowvals = [&](long long z, long long row, long long col, float acc0, float acc1) -> float2 {\n"
         "    float2 out = make_float2(kiln_neg_inf(), kiln_neg_inf());\n    if (row >= M) return out;\n" +
         batchCoords + "    if (col < N) {\n" + vcode0 + "      out.x = " + v0 + ";\n    }\n    if (col + 1 < N) {\n" +
         vcode1 + "      out.y = " + v1 + ";\n    }\n    return out;\n  };\n"
         "  // The same where both columns are known to be inside the output.\n"
         "  auto kiln_rowvals_inside = [&](long long z, long long row, long long col, float acc0, float acc1) -> float2 {\n" +
         batchCoords + vcode0 + vcode1 + "    return make_float2(" + v0 + ", " + v1 + ");\n  };\n";
  }
  sig.epilogue = e;
  sig.prelude = cudaElementPrelude();
  return sig;
}

namespace {

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
)";

// The tensor-core kernel, for 16-bit operands (mma.sync m16n8k16) and for
// f32 through tf32 (MatmulOptions::tf32: m16n8k8 on operands rounded by
// cvt.rna as they are staged). Either way a fragment register is one 32-bit
// word of shared memory: two 16-bit values, or one tf32.
const char* kBodyMma = R"(
// kiln matmul ($MMA_NOTE, f32 accumulation): C = A @ B
//   A [batch.., M, K]$TRANSA_NOTE, B [batch.., K, N]$TRANSB_NOTE, C [batch.., M, N], $DTYPE
//   block tile $BM x $BN, K step $BK, $THREADS threads (8 warps: 2 x 4, 64 x 32 each)
$PRELUDE$HELPERS
extern "C" __global__ void __launch_bounds__($THREADS, 1) $NAME($PARAMS) {
  const $ELEM* __restrict__ A = $APTR;
  const $ELEM* __restrict__ B = $BPTR;
$SIZES$EPILOGUE  __shared__ __align__(16) $SMEM As[$BM][$BK + $PAD];
  __shared__ __align__(16) $SMEM Bs[$BN][$BK + $PAD];
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
      // kept n-major so that a thread's B fragment register is one 32-bit load.
      for (int i = tid; i < $BM * $BK; i += $THREADS) {
        const int mm = $A_M_OF_I, kk = $A_K_OF_I;
        const long long m = m0 + mm, k = k0 + kk;
        As[mm][kk] = $TO_SMEM((m < M && k < K) ? A[offA + $A_INDEX] : $ZERO);
      }
      for (int i = tid; i < $BN * $BK; i += $THREADS) {
        const int nn = $B_N_OF_I, kk = $B_K_OF_I;
        const long long n = n0 + nn, k = k0 + kk;
        Bs[nn][kk] = $TO_SMEM((n < N && k < K) ? B[offB + $B_INDEX] : $ZERO);
      }
      __syncthreads();
#pragma unroll
      for (int ks = 0; ks < $BK; ks += $KSTEP) {
        unsigned a[4][4], b[4][2];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int r = wm * 64 + i * 16 + g;
          a[i][0] = $WORDAs[r][ks + $LO];
          a[i][1] = $WORDAs[r + 8][ks + $LO];
          a[i][2] = $WORDAs[r][ks + $HI];
          a[i][3] = $WORDAs[r + 8][ks + $HI];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int c = wn * 32 + j * 8 + g;
          b[j][0] = $WORDBs[c][ks + $LO];
          b[j][1] = $WORDBs[c][ks + $HI];
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j)
            asm volatile(
                "mma.sync.aligned.$MMA_SHAPE.row.col.f32.$MMA.$MMA.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
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
        for (int e = 0; e < 4; e += 2)
          kiln_epilogue(z, m0 + wm * 64 + i * 16 + g + (e ? 8 : 0), n0 + wn * 32 + j * 8 + 2 * t, acc[i][j][e],
                        acc[i][j][e + 1]);
  }
}
)";

const char* kBody32 = R"(
// kiln matmul (CUDA-core FMAs, exact f32): C = A @ B
//   A [batch.., M, K]$TRANSA_NOTE, B [batch.., K, N]$TRANSB_NOTE, C [batch.., M, N], f32
//   block tile $BM x $BN, K step $BK, $THREADS threads (16 x 16, 8 x 8 outputs each)
$PRELUDE
extern "C" __global__ void __launch_bounds__($THREADS, 1) $NAME($PARAMS) {
  const float* __restrict__ A = $APTR;
  const float* __restrict__ B = $BPTR;
$SIZES$EPILOGUE  __shared__ __align__(16) float As[$BK][$BM + 4];
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
      for (int j = 0; j < 8; j += 2) kiln_epilogue(z, m0 + ty * 8 + i, n0 + tx * 8 + j, acc[i][j], acc[i][j + 1]);
  }
}
)";

}  // namespace

MatmulKernel emitMatmul(const Graph& g, const MatmulConfig& cfg, const std::string& name) {
  const Node& mm = *matmulShape(g).mm;
  const DType t = mm.dtype;
  const bool tc = t == DType::BF16 || t == DType::F16;
  const bool tf32 = t == DType::F32 && mm.tf32;
  const int kStep = tc ? 16 : tf32 ? 8 : 1;
  if (cfg.blockM != 128 || cfg.blockN != 128 || cfg.threads != 256 || cfg.blockK % kStep != 0)
    throw Error("matmul: config " + cfg.json() + " is not supported by this kernel (128 x 128 tiles, 256 threads" +
                (kStep > 1 ? ", K step a multiple of " + std::to_string(kStep) + ")" : std::string(")")));

  MatmulKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "matmul";
  k.config = cfg.json();
  MatmulSignature sig = matmulSignature(g, k, false, false);
  if (sig.rows.any())
    throw Error("kiln: internal: the portable matmul kernel does not take a softmax over its product's rows (the "
                "planner recomputes one only for the sm_90a kernel)");
  // Operand offsets per batch index (element offsets; broadcast dims add
  // nothing).
  const std::string offsets = batchOffsetCode(sig, g, "offA", "offB", true, "      ");

  std::string src = tc || tf32 ? kBodyMma : kBody32;
  if (tc) {
    replaceAll(src, "$MMA_NOTE", "mma.sync m16n8k16");
    replaceAll(src, "$HELPERS", "");
    replaceAll(src, "$ELEM", "u16");
    replaceAll(src, "$SMEM", "u16");
    replaceAll(src, "$PAD", "8");
    replaceAll(src, "$TO_SMEM", "");
    replaceAll(src, "$ZERO", "(u16)0");
    replaceAll(src, "$KSTEP", "16");
    replaceAll(src, "$WORD", "*(const unsigned*)&");
    replaceAll(src, "$LO", "2 * t");
    replaceAll(src, "$HI", "2 * t + 8");
    replaceAll(src, "$MMA_SHAPE", "m16n8k16");
  } else if (tf32) {
    replaceAll(src, "$MMA_NOTE", "mma.sync m16n8k8 tf32");
    replaceAll(src, "$HELPERS",
               "__device__ __forceinline__ unsigned kiln_tf32(float f) { unsigned r; asm(\"cvt.rna.tf32.f32 %0, %1;\" : "
               "\"=r\"(r) : \"f\"(f)); return r; }");
    replaceAll(src, "$ELEM", "float");
    replaceAll(src, "$SMEM", "unsigned");
    replaceAll(src, "$PAD", "4");
    replaceAll(src, "$TO_SMEM", "kiln_tf32");
    replaceAll(src, "$ZERO", "0.0f");
    replaceAll(src, "$KSTEP", "8");
    replaceAll(src, "$WORD", "");
    replaceAll(src, "$LO", "t");
    replaceAll(src, "$HI", "t + 4");
    replaceAll(src, "$MMA_SHAPE", "m16n8k8");
  }
  replaceAll(src, "$PRELUDE", sig.prelude);
  replaceAll(src, "$EPILOGUE", sig.epilogue);
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
  replaceAll(src, "$DTYPE", tf32 ? std::string("f32 through tf32") : std::string(dtypeName(t)));
  replaceAll(src, "$MMA", tf32 ? "tf32" : t == DType::BF16 ? "bf16" : "f16");
  replaceAll(src, "$BATCH_OFFSETS", offsets);
  replaceAll(src, "$BM", std::to_string(cfg.blockM));
  replaceAll(src, "$BN", std::to_string(cfg.blockN));
  replaceAll(src, "$BK", std::to_string(cfg.blockK));
  replaceAll(src, "$THREADS", std::to_string(cfg.threads));
  replaceAll(src, "$NAME", name + "_s1");
  replaceAll(src, "$APTR", sig.aPtr);
  replaceAll(src, "$BPTR", sig.bPtr);
  fillSignature(src, sig);
  out.source = std::move(src);

  k.entries.push_back({name + "_s1", false});
  k.launch.threadsPerBlock = cfg.threads;
  k.launch.elementsPerBlock = 1;
  k.launch.iterShape = mm.shape;
  k.launch.tile = {cfg.blockM, cfg.blockN};  // one block per output tile
  k.launch.maxBlocks = 0;
  return out;
}

}  // namespace kiln::compiler
