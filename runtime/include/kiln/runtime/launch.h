// Launching a kernel: a Function, a grid, a block, dynamic shared memory and
// the caller's stream, with arguments packed by an ArgPacker.
//
// The launch itself is one cuLaunchKernel call and nothing else on the
// success path. If the calling thread has no current context (a fresh
// thread), the launch makes the kernel's own context current and retries
// once. Any other failure is a kiln::Error naming the kernel and the launch
// configuration. A launch with an empty grid (a zero in any dimension, e.g.
// for empty tensors) does nothing.
#pragma once

#include <cstdint>

#include "kiln/runtime/cuda_fwd.h"

namespace kiln::rt {

class ArgBlock;
class Function;

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

struct LaunchConfig {
  Dim3 grid;
  Dim3 block;
  unsigned sharedBytes = 0;  // dynamic shared memory per block
  void* stream = nullptr;    // a CUstream / cudaStream_t; null: the legacy default stream
  // Thread-block cluster shape (sm_90+); all zeros: no cluster, plain
  // cuLaunchKernel. Otherwise the launch goes through cuLaunchKernelEx.
  Dim3 cluster{0, 0, 0};
};

void launch(const Function& fn, const LaunchConfig& config, const ArgBlock& args);
// The same with a raw kernelParams array (one pointer per parameter).
void launch(const Function& fn, const LaunchConfig& config, void** kernelParams);

}  // namespace kiln::rt
