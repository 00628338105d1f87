// Internal: the matmul schedule's first kernel, generated CUDA C++ compiled
// by NVRTC (nvrtc.h) and ptxas. This one is the portable path of issue 6:
// tensor cores through mma.sync (m16n8k16, f32 accumulation) for bf16 and
// f16, CUDA-core FMAs for f32 (exact f32, no tf32), any M/N/K (predicated
// loads and stores), either operand transposed, broadcast batch dims.
// It is correct on sm_80 and later, not fast: the Hopper kernel (TMA,
// wgmma, warp specialization) replaces it on sm_90.
//
// The graph it takes is inputs → matmul → output (planner.cpp checks that);
// the kernel's parameters follow the graph (tensor inputs in declaration
// order, the output, then the dynamic dims) like every kiln kernel.
#pragma once

#include <string>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/graph.h"

namespace kiln::compiler {

struct MatmulConfig {
  int blockM = 128;  // output tile of a block
  int blockN = 128;
  int blockK = 32;   // K step staged in shared memory
  int threads = 256; // 8 warps: 2 (M) x 4 (N), each 64 x 32 of the tile
  std::string json() const;
};

MatmulConfig matmulHeuristic(const Graph& g);

// Applies a JSON override (keys: block_m, block_n, block_k, threads);
// throws kiln::Error naming a bad key or value.
void applyMatmulOverride(MatmulConfig& c, const std::string& json);

struct MatmulKernel {
  std::string source;  // CUDA C++ (what --emit=cuda prints)
  CompiledKernel kernel;
};
// Replaces every `from` in `s` (the generators fill their CUDA C++
// templates with it).
inline void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

MatmulKernel emitMatmul(const Graph& g, const MatmulConfig& config, const std::string& name);

// What both matmul generators share: the kernel's signature (tensors in
// graph order: inputs, then outputs; the dynamic dims; the runtime scalars)
// and its epilogue. The epilogue is a lambda the generated kernel defines
// after its sizes (M, N as long long):
//   kiln_epilogue(z, row, col, acc0, acc1)
// computes every output of the graph at (batch z, row, col) and (z, row,
// col + 1) from the accumulators and the inputs it reads (broadcast by
// index math), bounds-checked against M and N. With `pairStores` the two
// elements are stored with one 4- or 8-byte store where N is even (the
// tensors must then be 16-byte aligned).
// The matmul of a kernel's graph and its sizes (cheap: no code).
struct MatmulShape {
  int id = -1;                // the matmul node's id
  const Node* mm = nullptr;   // the matmul node
  Dim M, N, K;
  Shape batch;                // the output's batch dims
};
MatmulShape matmulShape(const Graph& g);
// The contraction dim K of matmul node `mm` of `g`.
Dim matmulK(const Graph& g, const Node& mm);

// A matmul kernel whose graph also takes a softmax over the product's rows
// (the planner's recomputed form, matmul_sm90.h): a value v computed per
// element from the product, its row maximum mx = max(v, last axis, keepdim)
// and its row sum s = sum(exp(v - mx), last axis, keepdim), and outputs
// computed per element from v, mx and s. The ids of v, mx and s; -1 where
// the graph has no reductions. A graph with reductions of another form is a
// kiln::Error (internal).
struct MatmulRowStats {
  int value = -1, max = -1, sum = -1;
  bool any() const { return max >= 0; }
};
MatmulRowStats matmulRowStats(const Graph& g);

struct MatmulSignature : MatmulShape {
  std::string params;         // the kernel's parameter list
  std::string aPtr, bPtr;     // parameter names of the operands
  std::string epilogue;       // defines kiln_epilogue (inside the kernel)
  MatmulRowStats rows;        // with row statistics: every epilogue takes three
                              // more arguments, the row's max, sum and 1 / sum,
                              // and the epilogue also defines
                              //   kiln_rowvals(z, row, col, acc0, acc1, v0, v1)
                              // (v at both columns, -inf outside the output)
                              // and kiln_rowvals_inside (no bounds checks)
  std::string prelude;        // device helpers (put before the kernel)
};
// With `staged` (all outputs bf16, f16 or f32; N even) it also defines
//   kiln_epilogue_staged(z, row, col, acc0, acc1, st, r, cc)
// which writes the pair into a staging buffer `st` for a TMA store instead
// (layout in matmul.cpp), with no bounds checks.
MatmulSignature matmulSignature(const Graph& g, CompiledKernel& k, bool pairStores, bool staged);

// Fills a kernel template's $BATCH (the batch count), $PARAMS, $M, $N and $K
// from the signature; last, after every other placeholder that starts with
// one of these ($MMA, $NAME, $KSTEP, $BATCH_OFFSETS).
void fillSignature(std::string& src, const MatmulSignature& sig);

// Code that walks `zz` (the output's flattened batch index, a variable the
// code changes) down the output's batch dims and adds each operand's share:
// `varA += i * stride` for A, `varB` for B, where stride is the product of
// the operand's later batch dims, times its matrix (rows x columns) when
// `elements` (an element offset; otherwise an index over its own batch).
// Broadcast dims (missing or of size 1) add nothing. One line per dim.
std::string batchOffsetCode(const MatmulShape& s, const Graph& g, const std::string& varA, const std::string& varB,
                            bool elements, const std::string& indent);

// A dim as a C expression: a literal, or the kernel parameter of a dynamic
// dim; the product of dims [from, end) of a shape.
std::string dimExpr(const Dim& d);
std::string productExpr(const Shape& s, size_t from);

}  // namespace kiln::compiler
