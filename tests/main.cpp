#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdlib>

// The tests' tuning database: no shipped files, and the user file in the
// build tree (XDG_CONFIG_HOME), never ~/.config. (The disk cache's
// directory comes from CTest's ENVIRONMENT, see CMakeLists.txt.)
int main(int argc, char* argv[]) {
  // (A process that test_tuning_gpu.cpp starts keeps the values it was given.)
  if (!std::getenv("KILN_TEST_SECOND_PROCESS")) {
    setenv("XDG_CONFIG_HOME", KILN_BINARY_DIR "/test-config", 1);
    setenv("KILN_TUNING_PATH", "", 1);
  }
  return Catch::Session().run(argc, argv);
}
