// TMA tensor maps (CUtensorMap, 128 bytes) for kernels that load through the
// Tensor Memory Accelerator (the sm_90a matmul), built on the host through
// the driver's cuTensorMapEncodeTiled.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

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

class ArgBlock;
class Function;
struct LaunchConfig;
struct KernelSignature;

// A TMA operand of a kernel (the matmul's): the kernel takes it after its
// other parameters, encoded at each launch from the packed pointer of
// tensor `tensor` and its sizes. Each axis is a static size or, where
// negative, the kernel dim index -size - 1; the last two axes are the
// matrix (inner, rows), the ones before them a batch.
struct TensorMapRule {
  size_t tensor = 0;
  DType dtype = DType::BF16;
  std::vector<int64_t> axes;
  uint32_t boxInner = 64, boxRows = 64;
  bool clampRows = false;  // a box of fewer rows (a multiple of 8) when the matrix has fewer
  std::string what;        // "matmul operand 'a' of kernel 'kiln_matmul0'"
  // Encoded only when a row's bytes are a multiple of 16; a zeroed map
  // otherwise (the kernel checks the same condition and leaves it alone).
  bool whenRowsAligned = false;
};

// Launches `fn` with the packed parameters of `block` followed by the
// tensor maps of `rules` (at most 4). Every tensor must be at its
// signature's alignment (a kiln::Error names the first that is not).
void launchWithTensorMaps(const Function& fn, const LaunchConfig& cfg, const ArgBlock& block,
                          std::span<const TensorMapRule> rules, const KernelSignature& sig);

}  // namespace kiln::rt
