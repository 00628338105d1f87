// Random graphs (tests/random_graphs.h) on the GPU: each compiled by
// kiln::compile, launched on fresh random inputs with its outputs poisoned,
// and checked against the fp64 reference evaluator, with each output's
// tolerance absolute below its magnitude bound. Fresh graphs every run;
// KILN_RANDOM_SEED=S starts from seed S, KILN_RANDOM_GRAPHS=N draws N graphs
// (default 100).
#include <catch2/catch.hpp>

#include <cstdlib>

#include "gpu_support.h"
#include "../compiler/src/planner.h"
#include "random_graphs.h"

using namespace kiln;

TEST_CASE("random graphs match the reference on the GPU", "[gpu][random]") {
  test::requireGpu();
  const char* seedEnv = std::getenv("KILN_RANDOM_SEED");
  const char* countEnv = std::getenv("KILN_RANDOM_GRAPHS");
  const uint64_t first = seedEnv ? std::strtoull(seedEnv, nullptr, 10) : test::freshSeed() % 1000000000;
  const int count = countEnv ? std::atoi(countEnv) : 100;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first + static_cast<uint64_t>(i);
    test::RandomGraph r = test::randomGraph(seed);
    INFO("random graph, seed " << seed << " (KILN_RANDOM_SEED=" << seed << " KILN_RANDOM_GRAPHS=1 draws it again):\n"
                               << r.description << r.graph.toText());
    try {
      test::runAndCheck(r.graph, {.dims = r.dims, .relFloor = r.relFloor});
      // A softmax over a 16-bit matmul's rows: again with it computed in
      // the matmul's kernel (where the device is sm_90).
      if (compiler::planGraph(r.graph, {.matmulRowSoftmax = true}).explain.find("softmax over its rows") !=
          std::string::npos) {
        INFO("compiled with matmulRowSoftmax");
        test::runAndCheck(r.graph, {.dims = r.dims, .relFloor = r.relFloor, .compile = {.matmulRowSoftmax = true}});
      }
    } catch (const Error& e) {
      FAIL_CHECK("kiln::Error: " << e.what());
    }
  }
}
