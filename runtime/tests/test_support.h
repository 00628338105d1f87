// Helpers shared by the runtime tests: fake device pointers for packing
// tests (packing never touches the driver) and the [gpu] skip.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <iostream>

#include "kiln/runtime/driver.h"

namespace kiln::rt::test {

inline void* fakePtr(uintptr_t address) { return reinterpret_cast<void*>(address); }

// A [gpu] test calls this first: without a driver it says so on stdout and
// exits with 77, which CTest (running one test per process) reports as
// skipped.
inline void requireGpu() {
  if (!driverAvailable()) {
    std::cout << "SKIPPED: no CUDA driver (" << driverUnavailableReason() << ")" << std::endl;
    std::exit(77);
  }
}

}  // namespace kiln::rt::test
