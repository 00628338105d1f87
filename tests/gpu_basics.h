// The pieces of the GPU tests that need only the runtime (no compiler): the
// visible [gpu] skip, tolerances by dtype and fresh seeds. gpu_support.h
// builds on them; tests/aot (a binary without the compiler) uses them alone.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <random>

#include "kiln/dtype.h"
#include "kiln/runtime/driver.h"

namespace kiln::test {

// A [gpu] test calls this first. Without a driver it says so on stdout and
// exits with 77, which CTest (one test per process) reports as skipped.
inline void requireGpu() {
  if (!rt::driverAvailable()) {
    std::cout << "SKIPPED: no CUDA driver (" << rt::driverUnavailableReason() << ")" << std::endl;
    std::exit(77);
  }
}

// Relative tolerance by output dtype (with an absolute floor of the same
// size near zero); integers and bools must match exactly.
inline double tolerance(DType t) {
  switch (t) {
    case DType::BF16: return 1.6e-2;
    case DType::F16: return 2e-3;
    case DType::F32: return 2e-5;
    default: return 0;
  }
}

// A seed that differs every run (fresh inputs), printed on failure.
inline uint64_t freshSeed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace kiln::test
