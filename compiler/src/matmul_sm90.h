// Internal, work in progress (issue 6): the Hopper matmul kernel's
// generator. NOT USED by the planner yet and NOT YET RUN on a GPU: the
// tests only check that every config of its space compiles through NVRTC
// (compute_90a) and ptxas (sm_90a) without spills. The portable kernel
// (matmul.h) serves every matmul until this one is verified on the H200.
//
// The kernel (generated CUDA C++ with inline PTX; see shared/notes/
// hopper-gemm.md for where its structure comes from):
//  - C [M, N] = A [M, K] @ B^T, both operands K-major (B given as [N, K]),
//    bf16 or f16 in, f32 accumulation, the output's dtype out;
//  - a 128 x BN output tile per CTA, K in steps of 64; 384 threads: one
//    producer warpgroup (one thread issues TMA loads of both tiles into a
//    ring of `stages` shared-memory buffers, 128-byte swizzled, guarded by
//    full/empty mbarriers) and two consumer warpgroups (64 rows each,
//    wgmma m64nBNk16 from shared-memory descriptors);
//  - register reallocation (setmaxnreg: producer 40, consumers 232);
//  - an epilogue straight from registers to global memory (predicated: any
//    M, N; TMA zero-fills the K tail).
// Tensor maps (cuTensorMapEncodeTiled, 128B swizzle, boxes {64, 128} and
// {64, BN}) are kernel parameters (__grid_constant__), built by the host.
#pragma once

#include <string>
#include <vector>

#include "kiln/compiler/api.h"
#include "kiln/dtype.h"

namespace kiln::compiler {

struct KILN_COMPILER_API Sm90MatmulConfig {
  int blockN = 256;      // 128 or 256
  int stages = 3;        // shared-memory ring depth
  int producerRegs = 40; // setmaxnreg for the producer warpgroup
  int consumerRegs = 232;
  std::string json() const;
  // Dynamic shared memory the kernel needs (ring, barriers, 1 KiB alignment slack).
  int sharedBytes() const;
};

// The default search space (every config must compile without spills).
KILN_COMPILER_API std::vector<Sm90MatmulConfig> sm90MatmulSpace();

// The kernel's CUDA C++ source; its entry point is `name`.
KILN_COMPILER_API std::string emitSm90MatmulSource(DType dtype, const Sm90MatmulConfig& config, const std::string& name);

}  // namespace kiln::compiler
