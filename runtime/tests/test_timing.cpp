// Summaries of benchmark samples (pure host arithmetic).
#include <catch2/catch.hpp>

#include "kiln/runtime/timing.h"

using namespace kiln::rt;

TEST_CASE("benchmark summaries give the median, nearest-rank p95, min, max and mean") {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);  // unsorted on purpose
  const BenchmarkResult r = summarizeSamples(samples);
  CHECK(r.iters == 100);
  CHECK(r.medianUs == Approx(50.5));
  CHECK(r.p95Us == Approx(95));
  CHECK(r.minUs == Approx(1));
  CHECK(r.maxUs == Approx(100));
  CHECK(r.meanUs == Approx(50.5));

  const BenchmarkResult odd = summarizeSamples({3, 1, 2});
  CHECK(odd.medianUs == Approx(2));
  CHECK(odd.p95Us == Approx(3));

  const BenchmarkResult one = summarizeSamples({7});
  CHECK(one.medianUs == Approx(7));
  CHECK(one.p95Us == Approx(7));

  CHECK(summarizeSamples({}).iters == 0);
}
