// The driver loader: a clear error and no crash without a driver.
#include <catch2/catch.hpp>

#include "kiln/error.h"
#include "kiln/runtime/runtime.h"
#include "test_support.h"

using namespace kiln::rt;
using Catch::Matchers::Contains;

TEST_CASE("the no-driver message names the library, the loader's error and what is needed") {
  const std::string msg =
      noDriverMessage("libcuda.so.1: cannot open shared object file: No such file or directory");
  CHECK(msg ==
        "kiln: no CUDA driver found (libcuda.so.1 could not be loaded: libcuda.so.1: cannot open "
        "shared object file: No such file or directory); this needs an NVIDIA GPU and driver");
}

TEST_CASE("driverAvailable never throws and agrees with driver()") {
  bool available = false;
  REQUIRE_NOTHROW(available = driverAvailable());
  REQUIRE(driverAvailable() == available);  // asking twice changes nothing
  if (available) {
    CHECK(driverUnavailableReason().empty());
    CHECK(driver().version >= 12000);
  } else {
    const std::string reason = driverUnavailableReason();
    CHECK_THAT(reason, Contains("kiln: "));
    CHECK_THAT(reason, Contains("NVIDIA"));
    // driver() throws the same message every time (the failure is remembered).
    for (int i = 0; i < 2; ++i) {
      try {
        driver();
        // A loaded driver with no device: driver() may succeed.
        CHECK_THAT(reason, Contains("no CUDA device"));
      } catch (const kiln::Error& e) {
        CHECK(std::string(e.what()) == reason);
      }
    }
  }
}

TEST_CASE("without libcuda.so.1 the error says no driver was found") {
  if (driverAvailable() || driverUnavailableReason().find("could not be loaded") == std::string::npos) {
    SUCCEED("a driver library is present here");
    return;
  }
  REQUIRE_THROWS_AS(driver(), kiln::Error);
  REQUIRE_THROWS_WITH(driver(), Contains("kiln: no CUDA driver found (libcuda.so.1 could not be loaded: ") &&
                                    Contains("); this needs an NVIDIA GPU and driver"));
}

TEST_CASE("every driver-backed call fails with a kiln::Error, never a crash, without a driver") {
  if (driverAvailable()) {
    SUCCEED("a driver is present here");
    return;
  }
  CHECK_THROWS_AS(Device::count(), kiln::Error);
  CHECK_THROWS_AS(Device::current(), kiln::Error);
  CHECK_THROWS_AS(ensureContext(), kiln::Error);
  CHECK_THROWS_AS(DeviceBuffer(1024), kiln::Error);
  CHECK_THROWS_AS(Module::load(std::string_view(".version 7.0\n")), kiln::Error);
  CHECK_THROWS_AS(Event(), kiln::Error);
  CHECK_THROWS_AS(benchmark([] {}, 1, 1), kiln::Error);
  ArgBlock block;
  LaunchConfig config;
  CHECK_THROWS_AS(launch(Function(), config, block), kiln::Error);
  // Empty objects need no driver at all.
  CHECK_NOTHROW(DeviceBuffer(0));
  CHECK_NOTHROW(Module());
  // Error names still come out as something readable.
  CHECK(cuErrorText(CUDA_ERROR_OUT_OF_MEMORY) == "CUresult 2");
}

TEST_CASE("a failed driver call becomes a kiln::Error naming the call") {
  try {
    KILN_CU_CHECK(CUDA_ERROR_INVALID_VALUE);
    FAIL("KILN_CU_CHECK did not throw");
  } catch (const kiln::Error& e) {
    CHECK_THAT(e.what(), Contains("kiln: CUDA_ERROR_INVALID_VALUE failed: "));
  }
  CHECK_THROWS_WITH(check(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction(k)"),
                    Contains("kiln: cuModuleGetFunction(k) failed: "));
  CHECK_NOTHROW(check(CUDA_SUCCESS, "cuInit"));
}
