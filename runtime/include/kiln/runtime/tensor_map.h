// TMA tensor maps (CUtensorMap, 128 bytes) for kernels that load through the
// Tensor Memory Accelerator (the sm_90a matmul), built on the host through
// the driver's cuTensorMapEncodeTiled.
#pragma once

#include <cstdint>

#include "kiln/dtype.h"

namespace kiln::rt {

// The 128-byte, 64-byte aligned value a kernel takes as a
// `const __grid_constant__ CUtensorMap` parameter.
struct alignas(64) TensorMap {
  uint64_t opaque[16];
};

// A 3-D view of a dense row-major tensor at `data`: [batch][rows][inner]
// elements of `dtype`, boxes of {boxInner, boxRows, 1}, 128-byte swizzle,
// zero fill out of bounds, 256-byte L2 promotion. Throws kiln::Error naming
// `what` (e.g. "matmul operand 'a'") when TMA cannot take it: a pointer not
// 16-byte aligned, a row of bytes not a multiple of 16, sizes beyond 2^32,
// or a driver without cuTensorMapEncodeTiled.
void encodeTensorMap3d(TensorMap& map, const char* what, DType dtype, const void* data, uint64_t inner,
                       uint64_t rows, uint64_t batch, uint32_t boxInner, uint32_t boxRows);

}  // namespace kiln::rt
