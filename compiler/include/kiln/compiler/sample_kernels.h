// Hand-built kernels that exercise the backend end to end: the tests use them,
// and a tool can use them to check a toolchain (build → PTX → cubin) without
// any graph. Both follow the kernel ABI (DESIGN.md): raw global pointers
// (inputs noalias + readonly, outputs noalias), then i64 sizes.
#pragma once

#include "kiln/compiler/backend.h"

namespace kiln::compiler::samples {

// Kernel "xyz_bf16"(x, y, z: bf16* in; out: bf16* out; n: i64):
// out = x * y + z, computed in f32. Thread t handles elements [8t, 8t+8) with
// 16-byte loads (llvm.load {alignment = 16, invariant}) and a 16-byte store
// when all 8 are in range, element by element otherwise. Launch
// ceil(ceil(n / 8) / blockSize) blocks of blockSize threads; every pointer
// must be 16-byte aligned.
KILN_COMPILER_API GpuModule buildXyzBf16(int blockSize = 256);

// Kernel "transcendental_f32"(x: f32* in; out: f32* out; n: i64):
// out = exp(x) + erf(x) * tanh(x), one element per thread (libdevice calls).
KILN_COMPILER_API GpuModule buildTranscendentalF32(int blockSize = 256);

}  // namespace kiln::compiler::samples
