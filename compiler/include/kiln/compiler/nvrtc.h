// CUDA C++ → PTX with NVRTC, the front half of the matmul schedule's path
// (generated CUDA C++ → PTX for compute_90a → cubin with ptxas as a child
// process, cubin.cpp). libnvrtc.so.13 is loaded with dlopen the first time
// it is needed, from $CUDA_HOME/lib64, /usr/local/cuda/lib64, then the
// loader's path; nothing here needs a GPU.
//
// Only PTX comes out of NVRTC: straight to a cubin, NVRTC 13.0 crashes
// inside the library on wgmma code (shared/notes/ptx-to-cubin.md), and a
// crash in a library takes the user's process down. PTX → cubin for "a"
// targets always goes through the ptxas executable (CubinRoute::Default).
//
// Errors are kiln::Error with NVRTC's log; nothing is written to stderr.
// Thread-safe: each call has its own nvrtcProgram.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "kiln/compiler/api.h"

namespace kiln::compiler {

struct CudaCompileOptions {
  // A virtual architecture: NVRTC makes PTX for it ("compute_90a" for
  // wgmma, TMA and setmaxnreg; "compute_80" for mma.sync).
  std::string arch = "compute_90a";
  std::string cudaHome;         // empty: defaultCudaHome(); its include/ is on the path
  std::string name = "kiln.cu"; // the source's name in NVRTC's messages
  bool fastMath = false;        // --use_fast_math
  std::vector<std::string> extraArgs;
};

struct CudaToPtxResult {
  std::string ptx;
  std::string log;   // NVRTC's program log (warnings), may be empty
  double ms = 0;
  std::vector<std::string> args;  // the options NVRTC was given
};

// Compiles `source` to PTX. kiln::Error naming NVRTC, the source's name and
// its log when compilation fails, or saying what was tried when libnvrtc
// cannot be loaded.
KILN_COMPILER_API CudaToPtxResult cudaToPtx(std::string_view source, const CudaCompileOptions& options = {});

// Whether libnvrtc.so.13 can be loaded (and, when not, why).
KILN_COMPILER_API bool nvrtcAvailable(const std::string& cudaHome = "", std::string* why = nullptr);

// NVRTC's version ("13.0"), or "" when it cannot be loaded.
KILN_COMPILER_API std::string nvrtcVersion(const std::string& cudaHome = "");

}  // namespace kiln::compiler
