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
#include "kiln/dsl/text.h"
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

// Values with no elements (a static dim of 0), which the planner turns into
// broadcast zeros (emptyValuesAsZeros): the graph of text-form seed
// 48600897 reduced (a reshape of a [1, 3, 0] value broadcast back against
// it), an empty input through elementwise ops, and reductions over empty
// axes, which give their identity (a sum of zeros, a product of ones).
TEST_CASE("graphs with values of no elements match the reference on the GPU", "[gpu][random]") {
  test::requireGpu();
  const Graph reshaped = parseGraph(R"(kiln.graph v1
%0 = input "x" : f32[2]
%1 = sum %0 {axes = [0], keepdim = false} : f32
%2 = expand %1 : f32[2, 3]
%3 = reshape %2 : f32[3, 2]
%4 = cast %3 : f16[3, 2]
%5 = slice %4 {axis = 1, start = 1, end = 1, step = 1} : f16[3, 0]
%6 = expand %5 : f16[1, 3, 0]
%7 = reshape %6 : f16[0]
%8 = const 0 : i64 weak
%9 = ne %7, %8 : bool[0]
%10 = const 3.0 : f32 weak
%11 = add %6, %10 : f16[1, 3, 0]
%12 = where %9, %11, %8 : f16[1, 3, 0]
%13 = slice %6 {axis = 0, start = 0, end = 0, step = 1} : f16[0, 3, 0]
%14 = cast %13 : f32[0, 3, 0]
%15 = sum %5 {axes = [1], keepdim = false} : f16[3]
%16 = prod %14 {axes = [0, 2], keepdim = true} : f32[1, 3, 1]
%17 = add %16, %3 : f32[1, 3, 2]
output "a" = %12
output "b" = %14
output "c" = %15
output "d" = %17
)");
  const Graph emptyInput = parseGraph(R"(kiln.graph v1
%0 = input "x" : bf16[5, 0]
%1 = input "y" : f32[5, 7]
%2 = exp %0 : bf16[5, 0]
%3 = sum %0 {axes = [1], keepdim = true} : bf16[5, 1]
%4 = cast %3 : f32[5, 1]
%5 = add %1, %4 : f32[5, 7]
%6 = max %1 {axes = [1], keepdim = true} : f32[5, 1]
%7 = sub %1, %6 : f32[5, 7]
output "e" = %2
output "s" = %5
output "m" = %7
)");
  for (const Graph* g : {&reshaped, &emptyInput}) {
    INFO(g->toText());
    try {
      test::runAndCheck(*g, {});
    } catch (const Error& e) {
      FAIL_CHECK("kiln::Error: " << e.what());
    }
  }
}
