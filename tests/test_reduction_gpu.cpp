// Reduction kernels on the GPU against the reference evaluator: fresh random
// inputs every run, outputs poisoned before each launch, tolerances by dtype.
// Rows of length 1, 17, 4096, 4097 and 262144 (few rows for the long ones),
// the op library's composites, special values written into chosen elements
// (-inf, NaN, ties), several outputs per kernel, and graphs split into
// several kernels.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>

#include "gpu_support.h"
#include "reduction_graphs.h"

using namespace kiln;
using test::runAndCheck;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rows per row length: enough rows to fill blocks for short rows, few for
// long ones (about a million elements at most).
int64_t rowsFor(int64_t len) {
  if (len <= 1) return 1000;
  if (len <= 17) return 300;
  if (len <= 4096) return 40;
  if (len <= 4097) return 7;
  return 3;
}

test::RunOptions optionsFor(const test::GraphCase& c, int64_t rows) {
  return {.dims = {{"R", rows}}, .ranges = c.ranges, .tolScale = c.tolScale, .relFloor = c.relFloor};
}

// Runs case `g` over `rows` rows with the row config override `config`
// against the reference: the schedule-form tests (clusters, staged rows,
// prefetch, L2 hints) over everyRowCase.
Kernel runWithRowConfig(const test::GraphCase& g, int64_t rows, const std::string& config) {
  test::RunOptions o = optionsFor(g, rows);
  o.compile.rowConfigOverride = config;
  return runAndCheck(g.graph, o);
}

// Every reduction op (keepdim false) and the op library's composites in f32
// and bf16 over [R, len]: the cases a schedule form must get right. The same
// number of cases at every len, so that GENERATE over their indices is one
// list whichever len the outer GENERATE picked.
std::vector<test::GraphCase> everyRowCase(int64_t len) {
  std::vector<test::GraphCase> cases = test::reductionSweep({"R", len}, {false});
  for (DType t : {DType::F32, DType::BF16})
    for (test::GraphCase& g : test::rowComposites(t, {"R", len})) cases.push_back(std::move(g));
  const size_t n = test::reductionSweep({"R", 1}, {false}).size() + 2 * test::rowComposites(DType::F32, {"R", 1}).size();
  REQUIRE(cases.size() == n);
  return cases;
}

// Sets element `col` of row `row` of a [rows, len] input.
void setAt(HostTensor& t, int64_t row, int64_t col, double v) { t.set(row * t.shape().back() + col, v); }

// Products of millions of f32 values are not comparable with an fp64 one:
// values near 1 (no overflow) lose about 7e-9 per value to f32 rounding
// (its grid is twice as fine below 1 as above), 12% over 2048 x 8192 values
// in [0.9999, 1.0001] (session 16; a CPU simulation of the kernel's order
// gives the same). The split tests' products draw +-1 instead: exact at any
// length, and a part dropped or taken twice flips the sign half the time.
// (Product numerics over rows: the sweep's values near 1.)
void signsOnly(test::RunOptions& o) {
  o.ranges = {{"x", {-1, 1}}};
  o.prepare = [](EvalInputs& in) {
    HostTensor& x = in.tensors.at("x");
    for (int64_t i = 0; i < x.numel(); ++i) x.set(i, x.get(i) < 0 ? -1.0 : 1.0);
  };
}

}  // namespace

// Each case of a list is a run of its own (GENERATE over its index), so a
// case that does not compile does not hide the others.
TEST_CASE("every reduction op along the last axis matches the reference at every row length", "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(1, 17, 4096, 4097, 262144);
  const int64_t rows = rowsFor(len);
  // Outputs "y" (keepdim false) and "y_keepdim" of each (op, dtype).
  const std::vector<test::GraphCase> cases = test::reductionSweep({"R", len});
  const test::GraphCase& c = cases.at(GENERATE(range(size_t{0}, test::reductionSweep({"R", 1}).size())));
  INFO(c.label << " over " << rows << " rows");
  runAndCheck(c.graph, optionsFor(c, rows));
}

// f32 and a 16-bit type at every row length; f16 (the same 16-bit code
// paths as bf16) at the odd lengths. Cross-entropy has its own test below.
TEST_CASE("the op library's row-wise composites match the reference at every row length", "[gpu][reduction]") {
  test::requireGpu();
  struct L {
    int64_t len;
    DType t;
  };
  L l = GENERATE(L{1, DType::F32}, L{17, DType::F32}, L{4096, DType::F32}, L{4097, DType::F32}, L{262144, DType::F32},
                 L{1, DType::BF16}, L{17, DType::BF16}, L{4096, DType::BF16}, L{4097, DType::BF16},
                 L{262144, DType::BF16}, L{17, DType::F16}, L{4097, DType::F16});
  const int64_t rows = rowsFor(l.len);
  std::vector<test::GraphCase> cases = test::rowComposites(l.t, {"R", l.len});
  std::erase_if(cases, [](const test::GraphCase& c) { return c.label.rfind("cross_entropy", 0) == 0; });
  REQUIRE(cases.size() == 8);
  const test::GraphCase& c = cases.at(GENERATE(range(0, 8)));
  INFO(c.label << " over " << rows << " rows");
  runAndCheck(c.graph, optionsFor(c, rows));
}

TEST_CASE("cross_entropy matches the reference per row and averaged, with i64 and i32 targets", "[gpu][reduction]") {
  test::requireGpu();
  struct L {
    int64_t len;
    DType t;
  };
  // f16 logits at one length (the same 16-bit code paths as bf16).
  L l = GENERATE(L{1, DType::F32}, L{17, DType::F32}, L{4096, DType::F32}, L{4097, DType::F32}, L{262144, DType::F32},
                 L{1, DType::BF16}, L{17, DType::BF16}, L{4096, DType::BF16}, L{4097, DType::BF16},
                 L{262144, DType::BF16}, L{4097, DType::F16});
  DType target = GENERATE(DType::I64, DType::I32);
  const int64_t len = l.len;
  const DType t = l.t;
  const int64_t rows = rowsFor(len);
  SECTION("the mean alone") {
    test::GraphCase c = test::crossEntropyMean(t, target, {"R", len});
    INFO(c.label << " over " << rows << " rows");
    runAndCheck(c.graph, optionsFor(c, rows));
  }
  SECTION("the per-row losses and their mean") {
    test::GraphCase c = test::crossEntropyMean(t, target, {"R", len}, true);
    INFO(c.label << " over " << rows << " rows");
    runAndCheck(c.graph, optionsFor(c, rows));
  }
}

// cross_entropy's mean is the grid tail of its row kernel: the last block to
// finish reduces the per-row losses, counting finished blocks in the
// workspace, where the counter must be back at zero after every launch.
// Launches of one Kernel at changing row counts (the workspace grows and
// shrinks around the counter, which stays at its start), each against the
// reference, and a sum of row maxima (another tail).
TEST_CASE("a row kernel's grid tail (cross_entropy's mean) is right launch after launch", "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16);
  test::GraphCase c = test::crossEntropyMean(t, DType::I64, {"R", 4096});
  for (int64_t rows : {1000, 3, 1000, 20000, 1, 777}) {
    INFO(c.label << " over " << rows << " rows");
    Kernel k = runAndCheck(c.graph, optionsFor(c, rows));
    INFO(k.explain());
    CHECK(k.compiled().kernels.size() == 1);
    CHECK(k.explain().find("last block to finish") != std::string::npos);
  }
  Graph g;
  Tensor x = g.input("x", t, {"R", 333});
  g.output("y", sum(max(x, 1), 0));
  for (int64_t rows : {5, 4096, 5})
    runAndCheck(g, {.dims = {{"R", rows}}, .ranges = {{"x", {-2, 2}}}});
}

// The picked logit is one load at the target's column; a target outside
// the row (negative, like PyTorch's ignore_index -100, or >= C) picks 0,
// as the masked sum it replaces does, and never reads out of bounds.
TEST_CASE("cross_entropy with targets outside the row picks nothing and reads nothing out of bounds",
          "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 32768);
  DType target = GENERATE(DType::I64, DType::I32);
  test::GraphCase c = test::crossEntropyMean(DType::BF16, target, {"R", len}, true);
  auto prepare = [len](EvalInputs& in) {
    HostTensor& T = in.tensors.at("targets");
    T.set(0, -100);
    T.set(1, len);
    T.set(2, len - 1);
    T.set(3, 0);
    T.set(4, -1);
  };
  test::RunOptions o = optionsFor(c, 40);
  o.prepare = prepare;
  runAndCheck(c.graph, o);
}

// 4096 rows of 32768 bf16 values: the reference checks sampled rows (the
// whole would take it minutes).
TEST_CASE("row-wise composites at 4096 x 32768 in bf16 match the reference on sampled rows", "[gpu][reduction]") {
  test::requireGpu();
  const Shape shape{"R", 32768};
  std::string what = GENERATE(as<std::string>{}, "softmax", "log_softmax", "layernorm", "rmsnorm",
                              "residual_add_rmsnorm", "cross_entropy_none/targets_i64",
                              "cross_entropy_none/targets_i32");
  const std::vector<test::GraphCase> all = test::rowComposites(DType::BF16, shape);
  auto it = std::find_if(all.begin(), all.end(),
                         [&](const test::GraphCase& c) { return c.label == test::caseLabel(what, DType::BF16, shape); });
  REQUIRE(it != all.end());
  const test::GraphCase& c = *it;
  INFO(c.label << " over 4096 rows");
  test::runRowsAndCheck(c.graph, {.rows = 4096, .ranges = c.ranges, .relFloor = c.relFloor});
}

TEST_CASE("cross_entropy's mean over 4096 rows of 32768 is the mean of its per-row losses", "[gpu][reduction]") {
  test::requireGpu();
  DType target = GENERATE(DType::I64, DType::I32);
  test::GraphCase c = test::crossEntropyMean(DType::BF16, target, {"R", 32768}, true);
  INFO(c.label << " over 4096 rows");
  auto got = test::runRowsAndCheck(c.graph, {.rows = 4096, .ranges = c.ranges});
  REQUIRE(got.at("loss").numel() == 4096);
  const HostTensor& loss = got.at("loss");
  double total = 0;
  for (int64_t r = 0; r < loss.numel(); ++r) total += loss.get(r);
  double want = total / static_cast<double>(loss.numel());
  INFO("mean " << got.at("mean").get(0) << ", mean of the per-row losses " << want);
  CHECK(std::fabs(got.at("mean").get(0) - want) <= 1e-5 * std::max(1.0, std::fabs(want)));
}

TEST_CASE("softmax of rows holding -inf stays finite, and a fully -inf row gives NaN like PyTorch", "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 4097, 262144);
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  Graph g;
  Tensor x = g.input("x", t, {6, len});
  g.output("softmax", softmax(x));
  g.output("log_softmax", log_softmax(x));
  g.output("max", max(x, -1));
  g.output("argmax", argmax(x, -1));
  auto prepare = [len](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    // Row 0: every third element -inf, the first one included.
    for (int64_t j = 0; j < len; j += 3) setAt(X, 0, j, -kInf);
    // Row 1: the first half -inf (the running max starts at -inf for a while).
    for (int64_t j = 0; j < (len + 1) / 2; ++j) setAt(X, 1, j, -kInf);
    // Row 2: all -inf but the last element: softmax is exactly 1 there.
    for (int64_t j = 0; j + 1 < len; ++j) setAt(X, 2, j, -kInf);
    // Row 3: all -inf: NaN (PyTorch gives NaN too); max -inf, argmax 0.
    for (int64_t j = 0; j < len; ++j) setAt(X, 3, j, -kInf);
    // Row 4: +inf at two places: the max is inf, so the row is NaN (inf -
    // inf), like PyTorch; argmax is the first inf.
    setAt(X, 4, len / 2, kInf);
    setAt(X, 4, len - 1, kInf);
    // Row 5: untouched.
  };
  runAndCheck(g, {.ranges = {{"x", {-4, 4}}}, .prepare = prepare, .relFloor = {{"softmax", 0}}});
}

// Softmax's approximate exps (ex2.approx.ftz: held rows at every dtype,
// 16-bit outputs everywhere, every log-sum-exp statistic) over logits far
// wider than the other tests draw: x in [-40, 40], so exp(x - max) reaches
// e^-80 (still a normal f32), and rows moved by +1000 and -1000. Every
// softmax value is compared relatively (no absolute floor): the
// approximation's error, about 1e-6 relative, must stay inside f32's 2e-5.
// Rows of 4096 (looped), 32768 (held) and 262144 (clusters).
TEST_CASE("softmax and log_softmax of wide logits, rows moved by +-1000, match the reference relatively",
          "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(4096, 32768, 262144);
  DType t = GENERATE(DType::F32, DType::BF16);
  // softmax alone too: with log_softmax beside it (its own max, exps and
  // sum: the graph shares no nodes) a held cluster row keeps the exps of only
  // one of the two statistics, so the softmax-only kernel is the one sure to
  // compute softmax from its kept exps (f32, 262144).
  const bool both = GENERATE(false, true);
  INFO((both ? "softmax and log_softmax" : "softmax alone"));
  Graph g;
  Tensor x = g.input("x", t, {4, len});
  g.output("softmax", softmax(x));
  if (both) g.output("log_softmax", log_softmax(x));
  auto prepare = [len](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    for (int64_t j = 0; j < len; ++j) {
      setAt(X, 1, j, X.get(1 * len + j) + 1000);
      setAt(X, 2, j, X.get(2 * len + j) - 1000);
    }
  };
  runAndCheck(g, {.ranges = {{"x", {-40, 40}}}, .prepare = prepare, .relFloor = {{"softmax", 0}}});
}

TEST_CASE("max, min, argmax and argmin propagate NaN like PyTorch: the arg ops give the first NaN's index",
          "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 4097, 262144);
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  Graph g;
  Tensor x = g.input("x", t, {6, len});
  g.output("max", max(x, -1));
  g.output("min", min(x, -1, true));
  g.output("argmax", argmax(x, -1));
  g.output("argmin", argmin(x, -1, true));
  g.output("sum", sum(x, -1));
  g.output("softmax", softmax(x));
  auto prepare = [len](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    setAt(X, 0, len / 2, kNaN);                    // one NaN mid-row
    setAt(X, 1, len - 1, kNaN);                    // two NaNs: the first
    setAt(X, 1, len / 3, kNaN);                    //   is at len / 3
    setAt(X, 2, 0, kNaN);                          // the very first element
    setAt(X, 3, len - 1, kNaN);                    // the very last element,
    setAt(X, 3, len / 4, kInf);                    //   after +inf and -inf
    setAt(X, 3, len / 5, -kInf);
    for (int64_t j = 0; j < len; ++j) setAt(X, 4, j, kNaN);  // all NaN
    // Row 5: no NaN.
  };
  runAndCheck(g, {.ranges = {{"x", {-0.25, 0.5}}}, .prepare = prepare, .relFloor = {{"softmax", 0}}});
}

TEST_CASE("argmax and argmin return the first index among tied extremes", "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 4097, 262144);
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64);
  // Also with each row split across a cluster of 8 blocks (sm_90+): ties in
  // other blocks of the row must lose to the first.
  const bool cluster = GENERATE(false, true);
  CompileOptions co;
  if (cluster) {
    if (len % 8 != 0) return;
    if (!test::hasClusters()) {
      WARN("SKIPPED: row clusters need an sm_90 GPU");
      return;
    }
    co.rowConfigOverride = R"({"persistent": 1, "threads_per_row": 512, "cluster": 8})";
  }
  Graph g;
  Tensor x = g.input("x", t, {8, len});
  g.output("argmax", argmax(x, -1));
  g.output("argmin", argmin(x, -1, true));
  g.output("max", max(x, -1));
  auto prepare = [len](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    // Rows 0-3: four values {0, 1, 2, 3}, each tied many times.
    for (int64_t r = 0; r < 4; ++r)
      for (int64_t j = 0; j < len; ++j) setAt(X, r, j, std::floor(X.get(r * len + j)));
    // Rows 4-7: zeros, with the extremes tied at a few positions far apart
    // (other threads, warps and loop iterations hold the later ones).
    for (int64_t r = 4; r < 8; ++r)
      for (int64_t j = 0; j < len; ++j) setAt(X, r, j, 0);
    auto both = [&](int64_t r, std::initializer_list<int64_t> at) {
      for (int64_t j : at) {
        setAt(X, r, j, 1);
        setAt(X, r + 2, j, -1);
      }
    };
    both(4, {len - 1, len / 2 + 1, len / 3});  // first: len / 3
    both(5, {len - 1, 7 * len / 8});           // first: 7 len / 8
  };
  Kernel k = runAndCheck(g, {.ranges = {{"x", {0, 4}}}, .prepare = prepare, .compile = co});
  if (cluster) CHECK(k.explain().find("clusters of 8 blocks") != std::string::npos);
}

// Rows split across a thread-block cluster (the held row in C blocks that
// merge their partial states through distributed shared memory): every
// reduction op and the op library's composites, rows that fill each block's
// part exactly and parts that leave threads idle (4096 in 8 parts of 512).
TEST_CASE("rows split across a thread-block cluster match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: row clusters need an sm_90 GPU");
    return;
  }
  struct C {
    int64_t len;
    int threads, cluster;
    bool loop;  // row_loop: resident clusters looping over rows (both halves of the exchange region)
    int minBlocks = 0;
    bool held = true;  // false: each block loops over its part (L2 hints), the parts' states merged per pass
  };
  // 16 blocks: a non-portable cluster size (the launcher opts in), two
  // blocks per SM at 128 registers.
  C c = GENERATE(C{4096, 256, 2, true}, C{4096, 512, 8, true}, C{32768, 256, 4, true}, C{32768, 256, 4, false},
                 C{262144, 512, 8, true}, C{262144, 256, 16, true, 2}, C{262144, 512, 16, true, 2},
                 C{32768, 128, 2, true, 0, false},
                 C{262144, 512, 8, true, 2, false});
  // More rows than clusters fit at once where the blocks are large (15
  // clusters of 8 x 512 threads on an H200): the row loop takes several
  // turns, through both halves of the exchange region.
  const int64_t rows = c.len >= 262144 ? 36 : c.len >= 32768 ? 40 : 150;
  const std::string config = "{\"persistent\": " + std::string(c.held ? "1" : "0") +
                             ", \"prefetch\": 0, \"stage\": 0, \"evict\": " + (c.held ? "0" : "1") +
                             ", \"threads_per_row\": " + std::to_string(c.threads) +
                             ", \"cluster\": " + std::to_string(c.cluster) + ", \"row_loop\": " + (c.loop ? "1" : "0") +
                             ", \"min_blocks\": " + std::to_string(c.minBlocks) + "}";
  const std::string want = "clusters of " + std::to_string(c.cluster) + " blocks";
  std::vector<test::GraphCase> cases = everyRowCase(c.len);
  const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, cases.size())));
  INFO(g.label << " over " << rows << " rows, " << config);
  Kernel k = runWithRowConfig(g, rows, config);
  // Every row kernel of the graph runs in clusters (cross_entropy's mean
  // kernel too: its row of R values is held and split like any other).
  INFO(k.explain());
  CHECK(k.explain().find(want) != std::string::npos);
}

// A looped row of a dynamic length split across a cluster (a config, not
// yet the heuristic's): each block reduces a part of whole steps computed
// at launch (the last shorter or empty), the parts' states merged per pass
// through the cluster. Every reduction op and composite, lengths from one
// value (parts past the row's end empty) to beyond 262144, odd lengths (the
// scalar entry) among them, one compiled kernel per case.
TEST_CASE("rows of a dynamic length split across a looped cluster (a config) match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: row clusters need an sm_90 GPU");
    return;
  }
  struct C {
    int threads, cluster, oneStep;
  };
  // The third holds each block's part in one step (one_step: the launcher
  // takes that entry for vectorized rows of at most 512 x V x 8 x 16
  // values, 262144 in f32, 524288 in 16-bit).
  const C c = GENERATE(C{512, 16, 0}, C{256, 8, 0}, C{512, 16, 8});
  const std::string config = "{\"persistent\": 0, \"evict\": 1, \"threads_per_row\": " + std::to_string(c.threads) +
                             ", \"cluster\": " + std::to_string(c.cluster) +
                             ", \"one_step\": " + std::to_string(c.oneStep) + "}";
  std::vector<test::GraphCase> cases = test::reductionSweep({"R", "N"}, {false});
  for (DType t : {DType::F32, DType::BF16})
    for (test::GraphCase& g : test::rowComposites(t, {"R", "N"})) cases.push_back(std::move(g));
  const size_t n = test::reductionSweep({"R", "N"}, {false}).size() + 2 * test::rowComposites(DType::F32, {"R", "N"}).size();
  const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, n)));
  const std::vector<int64_t> lens = c.oneStep ? std::vector<int64_t>{4096, 131080, 262144, 262152}
                                               : std::vector<int64_t>{1, 4096, 100003, 262152};
  for (int64_t len : lens) {
    INFO(g.label << " with N = " << len << ", " << config);
    test::RunOptions o = optionsFor(g, 20);
    o.dims["N"] = len;
    o.compile.rowConfigOverride = config;
    Kernel k = runAndCheck(g.graph, o);
    INFO(k.explain());
    CHECK(k.explain().find("clusters of " + std::to_string(c.cluster) + " blocks") != std::string::npos);
  }
}

// Fewer long rows than half the SMs: the heuristic splits each row across
// a cluster of up to 8 blocks (softmax over a vocabulary for a few
// sequences), with no config override; every composite, static row counts.
TEST_CASE("few long rows split across clusters by the heuristic match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: row clusters need an sm_90 GPU");
    return;
  }
  struct L {
    int64_t rows, len;
    DType t;
  };
  const L l = GENERATE(L{1, 32768, DType::BF16}, L{8, 32768, DType::BF16}, L{3, 128256, DType::BF16},
                       L{8, 131072, DType::F32}, L{66, 32768, DType::F32});
  std::vector<test::GraphCase> cases = test::rowComposites(l.t, {Dim(l.rows), Dim(l.len)});
  REQUIRE(cases.size() == 10);
  const test::GraphCase& c = cases.at(GENERATE(range(0, 10)));
  INFO(c.label);
  Kernel k = runAndCheck(c.graph, {.ranges = c.ranges, .tolScale = c.tolScale, .relFloor = c.relFloor});
  INFO(k.explain());
  CHECK(k.compiled().kernels.size() == 1);
  if (c.label.find("cross_entropy") == std::string::npos)
    CHECK(k.explain().find("clusters of") != std::string::npos);
}

// Rows staged in shared memory (config "stage": one bulk copy per
// row-shaped input into shared memory, completion on an mbarrier, then every
// pass reads the copy): every reduction op and composite, rows that fill the
// loop's steps and rows with a tail step (4104), 256 and 512 threads.
TEST_CASE("rows staged in shared memory by bulk copies match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: staged rows need an sm_90 GPU (bulk copies)");
    return;
  }
  struct C {
    int64_t len;
    int threads, unroll;
  };
  C c = GENERATE(C{4096, 256, 2}, C{4104, 512, 1}, C{32768, 256, 2}, C{32768, 512, 4});
  const int64_t rows = c.len >= 32768 ? 40 : 150;
  const std::string config = "{\"persistent\": 0, \"stage\": 1, \"threads_per_row\": " + std::to_string(c.threads) +
                             ", \"unroll\": " + std::to_string(c.unroll) + "}";
  std::vector<test::GraphCase> cases = everyRowCase(c.len);
  const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, cases.size())));
  INFO(g.label << " over " << rows << " rows, " << config);
  Kernel k = runWithRowConfig(g, rows, config);
  INFO(k.explain());
  // Staged wherever the rows fit (f32 rows of 32768 are 128 KiB: not).
  const bool fits = c.len * 4 <= 112 * 1024;
  if (fits) CHECK(k.explain().find("\"stage\": 1") != std::string::npos);
}

// Held rows with the next row prefetched (config "prefetch": the blocks
// that fit at once loop over the rows; while a block reduces a row in
// registers, a bulk copy brings its next row into shared memory): every
// reduction op and composite, more rows than blocks fit at once (several
// turns of the loop, both phases of the mbarrier), a partial chunk (4104),
// and rows split across clusters of 8.
TEST_CASE("held rows with the next row prefetched match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: prefetched rows need an sm_90 GPU (bulk copies)");
    return;
  }
  struct C {
    int64_t len, rows;
    int threads, cluster;
    int mode = 1;  // 1: bulk copies by one thread; 2: each thread's own cp.async copies
  };
  // Resident blocks on an H200: 4-8 per SM of 132 at 4096 (512 threads),
  // 1-2 at 32768, 15 clusters of 8 at 262144.
  C c = GENERATE(C{4096, 1200, 512, 1}, C{4104, 1000, 256, 1}, C{32768, 280, 512, 1}, C{262144, 36, 512, 8},
                 C{4104, 1000, 256, 1, 2}, C{32768, 280, 512, 1, 2}, C{262144, 36, 512, 8, 2});
  const std::string config = "{\"persistent\": 1, \"prefetch\": " + std::to_string(c.mode) +
                             ", \"min_blocks\": 0, \"threads_per_row\": " + std::to_string(c.threads) +
                             ", \"cluster\": " + std::to_string(c.cluster) + "}";
  std::vector<test::GraphCase> cases = everyRowCase(c.len);
  const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, cases.size())));
  INFO(g.label << " over " << c.rows << " rows, " << config);
  Kernel k = runWithRowConfig(g, c.rows, config);
  INFO(k.explain());
  // Rows of 16-byte vectors are prefetched (bool and odd dtypes may not be).
  if (g.label.find("softmax") != std::string::npos)
    CHECK(k.explain().find("\"prefetch\": " + std::to_string(c.mode)) != std::string::npos);
}

// The looped form with L2 eviction hints (config "evict": createpolicy +
// ld.global.nc.L2::cache_hint on the row's 16-byte loads): every reduction
// op and composite, rows with a tail step (4104) and long rows.
TEST_CASE("looped rows with L1 and L2 eviction hints and held rows read with evict_first match the reference", "[gpu][reduction]") {
  test::requireGpu();
  struct C {
    int64_t len, rows;
    int threads, unroll, form, persistent;
  };
  // Forms 1 (ld.global.nc) and 2 (ld.global), looped; 1024 threads x 8
  // vectors (light f32 rows of 32768); a held row read with evict_first.
  C c = GENERATE(C{4104, 150, 256, 2, 1, 0}, C{32768, 40, 512, 2, 1, 0}, C{4104, 150, 512, 2, 2, 0},
                 C{32768, 40, 1024, 8, 2, 0}, C{4096, 150, 256, 1, 1, 1});
  const std::string config = "{\"persistent\": " + std::to_string(c.persistent) + ", \"stage\": 0, \"prefetch\": 0, \"evict\": " +
                             std::to_string(c.form) + ", \"threads_per_row\": " + std::to_string(c.threads) +
                             ", \"unroll\": " + std::to_string(c.unroll) + "}";
  std::vector<test::GraphCase> cases = everyRowCase(c.len);
  const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, cases.size())));
  INFO(g.label << " over " << c.rows << " rows, " << config);
  Kernel k = runWithRowConfig(g, c.rows, config);
  INFO(k.explain());
  if (g.label.find("softmax") != std::string::npos)
    CHECK(k.explain().find("\"evict\": " + std::to_string(c.form)) != std::string::npos);
}

// A plain row loop (config "row_loop": 1 without a cluster): a grid of the
// blocks that fit at once, each looping over rows, looped or held; rows
// fewer and more than the grid, a tail step (4104), long rows; and
// cross_entropy's mean, whose grid tail then signals once per block.
// The heuristic's form for a light f32 row of 32768 over more rows than two
// rounds of 1024-thread blocks (session 34): held at 1024 threads, 32 values
// a thread, each block asking the L2 for the row 48 rows ahead; the last
// rows' fetches fall past the end and are not issued. Static rows (a
// dynamic row count keeps the loop).
TEST_CASE("light f32 rows of 32768 held at 1024 threads with the L2 fetch ahead match the reference", "[gpu][reduction]") {
  test::requireGpu();
  const int64_t rows = GENERATE(600, 1024);
  Graph g;
  Tensor x = g.input("x", DType::F32, {rows, 32768});
  g.output("y", rmsnorm(x, g.input("w", DType::F32, {32768})));
  INFO("rmsnorm f32 [" << rows << ", 32768]");
  Kernel k = runAndCheck(g, {.ranges = {{"x", {-3, 3}}}});
  INFO(k.explain());
  CHECK(k.explain().find("\"threads\": 1024") != std::string::npos);
  CHECK(k.explain().find("\"persistent\": 1") != std::string::npos);
  CHECK(k.explain().find("\"l2_prefetch\": 48") != std::string::npos);
}

TEST_CASE("rows looped by the blocks that fit at once (row_loop, no cluster) match the reference", "[gpu][reduction]") {
  test::requireGpu();
  struct C {
    int64_t len, rows;
    int threads, persistent;
  };
  // Resident blocks on an H200: about 10-16 per SM of 132 at 128 threads,
  // 8 at 256: 2300 and 1500 rows loop; 7 and 64 leave blocks without rows.
  // (The reference evaluator takes most of this test's time.)
  C c = GENERATE(C{4104, 2300, 128, 0}, C{4104, 7, 128, 0}, C{32768, 64, 256, 0}, C{4096, 1500, 256, 1});
  const std::string config = "{\"row_loop\": 1, \"cluster\": 1, \"stage\": 0, \"prefetch\": 0, \"min_blocks\": 0, "
                             "\"persistent\": " + std::to_string(c.persistent) + ", \"threads_per_row\": " +
                             std::to_string(c.threads) + ", \"threads\": " + std::to_string(c.threads) + "}";
  SECTION("every reduction op and composite") {
    std::vector<test::GraphCase> cases = everyRowCase(c.len);
    const test::GraphCase& g = cases.at(GENERATE_COPY(range(size_t{0}, cases.size())));
    INFO(g.label << " over " << c.rows << " rows, " << config);
    Kernel k = runWithRowConfig(g, c.rows, config);
    INFO(k.explain());
    if (g.label.find("softmax") != std::string::npos)
      CHECK(k.explain().find("\"row_loop\": 1") != std::string::npos);
  }
  SECTION("cross_entropy's per-row losses and mean, launch after launch") {
    DType t = GENERATE(DType::F32, DType::BF16);
    test::GraphCase g = test::crossEntropyMean(t, DType::I64, {"R", c.len}, true);
    for (int64_t rows : {c.rows, int64_t{3}, c.rows}) {
      INFO(g.label << " over " << rows << " rows, " << config);
      Kernel k = runWithRowConfig(g, rows, config);
      INFO(k.explain());
      CHECK(k.explain().find("\"row_loop\": 1") != std::string::npos);
    }
  }
}

// Terminal reductions over few long rows split into parts (the planner's
// splitLongReductions): a whole tensor in one kernel whose grid tail reduces
// the parts in order, a few long rows in two kernels; every splittable op, f32,
// bf16 and i32; prod over +-1 (signsOnly).
TEST_CASE("whole-tensor reductions and few long rows, split into parts, match the reference", "[gpu][reduction]") {
  test::requireGpu();
  using Op1 = Tensor (*)(const Tensor&, const Axes&, bool, Loc);
  struct C {
    std::string name;
    Op1 op;
  };
  const C c = GENERATE(C{"sum", &sum}, C{"mean", &mean}, C{"max", &max}, C{"min", &min}, C{"prod", &prod});
  const DType t = GENERATE(DType::F32, DType::BF16, DType::I32);
  if (t == DType::I32 && (c.name == "mean" || c.name == "prod")) return;  // (a long integer product wraps to 0)
  struct S {
    std::vector<int64_t> shape;
    Axes axes;
    bool keepdim;
    size_t kernels;  // a whole tensor: one (its grid tail reduces the parts); a few rows: two
  };
  const S s = GENERATE(S{{2048, 8192}, {0, 1}, false, 1}, S{{3, 131072}, {1}, true, 2},
                       S{{2, 64, 4096}, {1, 2}, false, 2});
  Shape shape;
  for (int64_t d : s.shape) shape.push_back(Dim(d));
  INFO(c.name << " of " << dtypeName(t) << typeToString(t, shape));
  Graph g;
  g.output("y", c.op(g.input("x", t, shape), s.axes, s.keepdim, Loc::current()));
  test::RunOptions o;
  if (c.name == "prod") signsOnly(o);
  else if (t == DType::I32) o.ranges = {{"x", {-100, 100}}};
  // A sum of millions of f32 values in another order: relative to its
  // magnitude, with the inputs' mean kept away from 0.
  if (c.name == "sum" || c.name == "mean") {
    if (t != DType::I32) o.ranges = {{"x", {0.5, 1.5}}};
    o.tolScale = 4;
  }
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
  CHECK(k.compiled().kernels.size() == s.kernels);
}

// argmax and argmin split into parts (a long row, a few rows, a whole
// column): each part's extreme and index, then the first part holding the
// extreme of the extremes. Values drawn from {-2, ..., 2} tie across parts
// (the result must be the first index); some cases put NaNs in two later
// parts (the first NaN's index, as PyTorch).
TEST_CASE("argmax and argmin split into parts give the first index of the extreme", "[gpu][reduction]") {
  test::requireGpu();
  const bool isMax = GENERATE(true, false);
  const DType t = GENERATE(DType::F32, DType::BF16);
  const bool nans = GENERATE(false, true);
  struct S {
    std::vector<int64_t> shape;
    int64_t axis;
    bool keepdim;
    size_t kernels;
  };
  const S s = GENERATE(S{{1, 4194304}, 1, false, 2}, S{{3, 131072}, 1, true, 2}, S{{16384, 1024}, 0, false, 2},
                       S{{4, 2048, 256}, 1, true, 2});
  Shape shape;
  for (int64_t d : s.shape) shape.push_back(Dim(d));
  INFO((isMax ? "argmax" : "argmin") << " of " << typeToString(t, shape) << " over axis " << s.axis
                                     << (nans ? " with NaNs" : ""));
  Graph g;
  Tensor x = g.input("x", t, shape);
  g.output("y", isMax ? argmax(x, s.axis, s.keepdim) : argmin(x, s.axis, s.keepdim));
  // No axis: the index into the flattened tensor (a whole tensor: its parts,
  // then a grid tail picking among them).
  g.output("flat", isMax ? argmax(x) : argmin(x));
  test::RunOptions o;
  o.ranges = {{"x", {-2.49, 2.49}}};
  o.prepare = [&](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    const int64_t n = X.numel();
    for (int64_t i = 0; i < n; ++i) X.set(i, std::round(X.get(i)));
    if (nans)
      for (int64_t i : {n / 2 + 12345, n / 2 + 12345 + n / 4, n - 1}) X.set(i, std::nan(""));
  };
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
  CHECK(k.compiled().kernels.size() >= s.kernels);
}

// Reductions over a non-last axis: the column form (one thread per strided
// row), its rows split across blocks where the outputs are few (one
// kernel: each tile's last block merges the parts), and not split where
// they are many.
TEST_CASE("column reductions (split into parts or not) match the reference", "[gpu][reduction]") {
  test::requireGpu();
  using Op1 = Tensor (*)(const Tensor&, const Axes&, bool, Loc);
  struct C {
    std::string name;
    Op1 op;
  };
  const C c = GENERATE(C{"sum", &sum}, C{"mean", &mean}, C{"max", &max}, C{"min", &min}, C{"prod", &prod});
  const DType t = GENERATE(DType::F32, DType::BF16, DType::I32);
  if (t == DType::I32 && (c.name == "mean" || c.name == "prod")) return;
  struct S {
    std::vector<int64_t> shape;
    int64_t axis;
    bool keepdim;
  };
  const S s = GENERATE(S{{8192, 1024}, 0, false}, S{{4, 2048, 256}, 1, true}, S{{64, 65536}, 0, false},
                       S{{1000, 37}, 0, false});
  Shape shape;
  for (int64_t d : s.shape) shape.push_back(Dim(d));
  INFO(c.name << " of " << dtypeName(t) << typeToString(t, shape) << " over axis " << s.axis);
  Graph g;
  g.output("y", c.op(g.input("x", t, shape), {s.axis}, s.keepdim, Loc::current()));
  test::RunOptions o;
  if (c.name == "prod") signsOnly(o);
  else if (t == DType::I32) o.ranges = {{"x", {-100, 100}}};
  else if (c.name == "sum" || c.name == "mean") o.ranges = {{"x", {0.5, 1.5}}};
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
}

// var and std split into parts (a column and a middle axis: in one kernel
// whose tiles' last blocks merge the parts; a whole tensor, a few long
// rows: two kernels): each part's mean and variance, then Chan's merge; values
// near 0 and values far from it (the merge's deviations of part means), and
// a shape that does not split (many outputs).
TEST_CASE("var and std split into parts match the reference", "[gpu][reduction]") {
  test::requireGpu();
  const bool isStd = GENERATE(false, true);
  const DType t = GENERATE(DType::F32, DType::BF16);
  const int64_t correction = GENERATE(int64_t{1}, int64_t{0});
  const bool far = GENERATE(false, true);
  struct S {
    std::vector<int64_t> shape;
    Axes axes;
    bool keepdim;
    size_t kernels;
  };
  const S s = GENERATE(S{{8192, 1024}, {0}, false, 1}, S{{4, 2048, 256}, {1}, true, 1}, S{{64, 65536}, {0}, false, 1},
                       S{{2048, 8192}, {0, 1}, false, 1}, S{{3, 131072}, {1}, true, 2});
  Shape shape;
  for (int64_t d : s.shape) shape.push_back(Dim(d));
  INFO((isStd ? "std" : "var") << " of " << typeToString(t, shape) << " correction " << correction
                               << (far ? ", values in [100, 101]" : ""));
  Graph g;
  Tensor x = g.input("x", t, shape);
  g.output("y", isStd ? kiln::std(x, s.axes, correction, s.keepdim) : var(x, s.axes, correction, s.keepdim));
  test::RunOptions o;
  o.ranges = {{"x", far ? std::pair<double, double>{100, 101} : std::pair<double, double>{-1, 1}}};
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
  CHECK(k.compiled().kernels.size() == s.kernels);
}

// Normalizations over a non-last axis: each statistic in parts (the
// column split, with a unit dim where the axis is not the first), then the
// output's kernel; a middle axis of a 3-D tensor as well as axis 0.
TEST_CASE("softmax and norms over a non-last axis match the reference", "[gpu][reduction]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  struct S {
    std::vector<int64_t> shape;
    int64_t axis;
  };
  const S s = GENERATE(S{{8192, 1024}, 0}, S{{3, 2048, 40}, 1}, S{{3, 1024, 48}, 1});
  const int what = GENERATE(0, 1, 2);  // softmax, log_softmax, a norm
  Shape shape;
  for (int64_t d : s.shape) shape.push_back(Dim(d));
  INFO((what == 0 ? "softmax" : what == 1 ? "log_softmax" : "norm") << " of " << typeToString(t, shape) << " over axis "
                                                                       << s.axis);
  Graph g;
  Tensor x = g.input("x", t, shape);
  if (what == 0) g.output("y", softmax(x, s.axis));
  else if (what == 1) g.output("y", log_softmax(x, s.axis));
  else {
    Tensor xf = cast(x, DType::F32);
    Tensor d = xf - mean(xf, {s.axis}, true);
    g.output("y", cast(d * rsqrt(mean(d * d, {s.axis}, true) + 1e-5), t));
  }
  test::RunOptions o;
  if (what == 0) o.relFloor = {{"y", 0.0}};  // softmax: small positive values, compared relatively
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
  CHECK(k.compiled().kernels.size() >= 2);
}

// Column-form threads that own several adjacent rows (config lanes): every
// lane count, the lanes' vector entry and, from pointers one element off,
// the scalar entry; ops whose state is several values (argmax, Welford's
// variance) and a per-output weight (a value of the row, not the column:
// one per lane).
TEST_CASE("column reductions whose threads own several adjacent rows (lanes) match the reference",
          "[gpu][reduction]") {
  test::requireGpu();
  const int lanes = GENERATE(2, 4, 8, 16);
  const DType t = GENERATE(DType::F32, DType::BF16);
  const size_t offset = GENERATE(size_t{0}, size_t{1}) * static_cast<size_t>(dtypeSize(t));
  const int threads = GENERATE(64, 256);
  const std::string config = "{\"threads_per_row\": 1, \"threads\": " + std::to_string(threads) +
                             ", \"persistent\": 0, \"unroll\": 4, \"lanes\": " + std::to_string(lanes) + "}";
  INFO(dtypeName(t) << ", " << config << ", pointers " << offset << " bytes off");
  Graph g;
  Tensor x = g.input("x", t, {3000, 1024});
  Tensor w = g.input("w", t, {1024});
  g.output("s", sum(x, {0}));
  g.output("m", max(x, {0}, true));
  // Every tensor moves by `offset`: outputs of x's dtype only (argmax's i64
  // from aligned pointers only).
  if (offset == 0) g.output("a", argmax(x, 0));
  g.output("v", var(x, {0}));
  g.output("sw", cast(sum(cast(x, DType::F32) * cast(w, DType::F32), {0}), t));
  test::RunOptions o;
  // Sums of 3000 values in [0.5, 1.5]: no cancellation (the tolerance is
  // relative to the result; f32 sums of +-2 missed it by 3e-5 at 1e-6 of
  // the magnitudes summed, session 18).
  o.ranges = {{"x", {0.5, 1.5}}, {"w", {0.5, 1.5}}};
  o.misalign = offset;
  o.compile.rowConfigOverride = config;
  Kernel k = runAndCheck(g, o);
  INFO(k.explain());
  CHECK(k.explain().find("\"lanes\": " + std::to_string(lanes)) != std::string::npos);
}

// Elementwise expressions reduced whole or over columns: split into parts
// with the reshape moved onto the inputs (planner: sinkReshapes), so the
// reductions compute the expression in their loads.
TEST_CASE("split reductions of elementwise expressions match the reference", "[gpu][reduction]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  SECTION("sum(x * y) and max(|x - s|) of a whole tensor: one kernel for both") {
    Graph g;
    Tensor x = g.input("x", t, {2048, 8192});
    Tensor y = g.input("y", t, {2048, 8192});
    g.output("dot", sum(cast(x, DType::F32) * cast(y, DType::F32)));
    g.output("dist", max(abs(cast(x, DType::F32) - g.scalar("s", DType::F32)), {0, 1}));
    Kernel k = runAndCheck(g, {.ranges = {{"x", {0.5, 1.5}}, {"y", {0.5, 1.5}}}, .tolScale = 4});
    INFO(k.explain());
    CHECK(k.compiled().kernels.size() == 1);  // both over the same parts; its grid tail reduces both
  }
  SECTION("sum(dy * x) over columns: one column-form kernel split across blocks") {
    struct S {
      std::vector<int64_t> shape;
      int64_t axis;
    };
    const S s = GENERATE(S{{8192, 1024}, 0}, S{{4, 2048, 256}, 1});
    Shape shape;
    for (int64_t d : s.shape) shape.push_back(Dim(d));
    INFO(typeToString(t, shape) << " over axis " << s.axis);
    Graph g;
    Tensor dy = g.input("dy", t, shape);
    Tensor x = g.input("x", t, shape);
    g.output("dw", sum(cast(dy, DType::F32) * cast(x, DType::F32), {s.axis}));
    Kernel k = runAndCheck(g, {.ranges = {{"dy", {0.5, 1.5}}, {"x", {0.5, 1.5}}}, .tolScale = 4});
    INFO(k.explain());
    CHECK(k.compiled().kernels.size() == 1);
    for (const auto& kk : k.compiled().kernels) CHECK(kk.schedule == "row_reduction");
  }
}

TEST_CASE("a constant row has variance zero and normalizes to the bias", "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 262144);
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  Graph g;
  Tensor x = g.input("x", t, {4, len});
  Tensor w = g.input("w", t, {len});
  Tensor b = g.input("b", t, {len});
  g.output("layernorm", layernorm(x, w, b));
  g.output("var", var(x, -1));
  g.output("std", kiln::std(x, -1, 0));
  // Constants whose sums and squares are exact in f32 (so any correct
  // formula gives variance 0; a negative one would make std NaN). Row 3 is
  // random.
  auto prepare = [len](EvalInputs& in) {
    HostTensor& X = in.tensors.at("x");
    for (int64_t j = 0; j < len; ++j) {
      setAt(X, 0, j, 0.75);
      setAt(X, 1, j, -2.0);
      setAt(X, 2, j, 0.0);
    }
  };
  runAndCheck(g, {.ranges = {{"x", {-3, 5}}}, .prepare = prepare});
}

TEST_CASE("several outputs of one row reduction: statistics, normalized rows and saved statistics",
          "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4097, 262144);
  DType t = GENERATE(DType::F32, DType::BF16);
  const int64_t rows = rowsFor(len);
  SECTION("statistics of the same rows") {
    Graph g;
    Tensor x = g.input("x", t, {"R", len});
    g.output("sum", sum(x, -1));
    g.output("max", max(x, -1, true));
    g.output("argmax", argmax(x, -1));
    g.output("mean", mean(x, -1));
    g.output("var", var(x, -1, 0));
    g.output("centered", x - mean(x, -1, true));
    g.output("softmax", softmax(x));
    runAndCheck(g, {.dims = {{"R", rows}}, .ranges = {{"x", {-0.25, 0.5}}}, .relFloor = {{"softmax", 0}}});
  }
  SECTION("layernorm with the mean and rstd a backward pass keeps") {
    Graph g;
    Tensor x = g.input("x", t, {"R", len});
    Tensor w = g.input("w", t, {len});
    Tensor v = t == DType::F32 ? x : cast(x, DType::F32);
    Tensor mu = mean(v, -1, true);
    Tensor rstd = rsqrt(var(v, -1, 0, true) + 1e-5);
    g.output("y", cast((v - mu) * rstd * w, t));
    g.output("mean", reshape(mu, {"R"}));
    g.output("rstd", reshape(rstd, {"R"}));
    runAndCheck(g, {.dims = {{"R", rows}}, .ranges = {{"x", {-3, 5}}}});
  }
  SECTION("softmax with its row max and log-sum-exp") {
    Graph g;
    Tensor x = g.input("x", t, {"R", len});
    Tensor v = t == DType::F32 ? x : cast(x, DType::F32);
    Tensor m = max(v, -1, true);
    Tensor lse = log(sum(exp(v - m), -1, true)) + m;
    g.output("softmax", cast(exp(v - lse), t));
    g.output("max", m);
    g.output("lse", lse);
    runAndCheck(g, {.dims = {{"R", rows}}, .ranges = {{"x", {-4, 4}}}, .relFloor = {{"softmax", 0}}});
  }
}

TEST_CASE("elementwise producers and consumers fused around the reduction match the reference", "[gpu][reduction]") {
  test::requireGpu();
  int64_t len = GENERATE(17, 4096, 4097, 262144);
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  SECTION("softmax of a scaled, biased row, and it scaled and added to a residual, with batch dims") {
    Graph g;
    Tensor x = g.input("x", t, {"B", 3, len});
    Tensor bias = g.input("bias", t, {len});
    Tensor res = g.input("res", t, {"B", 3, len});
    Tensor scale = g.scalar("scale");
    Tensor sm = softmax(x * scale + bias);
    // Checked relatively: softmax is ~1/len, next to a residual of ~1 in y.
    // (Not scaled by len in y: in f16, softmax of long rows is subnormal, and
    // one ulp of its rounding times len would exceed the tolerance.)
    g.output("softmax", sm);
    g.output("y", sm * 2.0 + res);
    runAndCheck(g, {.dims = {{"B", len > 4097 ? 1 : 5}},
                    .ranges = {{"x", {-2, 2}}},
                    .scalars = {{"scale", 0.7}},
                    .relFloor = {{"softmax", 0}}});
  }
  SECTION("layernorm of gelu(x) followed by silu") {
    Graph g;
    Tensor x = g.input("x", t, {"R", len});
    Tensor w = g.input("w", t, {len});
    Tensor b = g.input("b", t, {len});
    g.output("y", silu(layernorm(gelu(x), w, b)));
    runAndCheck(g, {.dims = {{"R", rowsFor(len)}}, .ranges = {{"x", {-3, 3}}}});
  }
}

TEST_CASE("reduction kernels stay correct from unaligned base pointers", "[gpu][reduction]") {
  test::requireGpu();
  size_t offset = GENERATE(2, 6, 12);
  int64_t len = GENERATE(4096, 4097);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"R", len});
  Tensor w = g.input("w", DType::BF16, {len});
  // bf16 tensors only: every offset keeps their elements aligned.
  g.output("y", rmsnorm(x, w));
  g.output("s", sum(x, -1));
  g.output("m", max(x, -1, true));
  runAndCheck(g, {.dims = {{"R", 9}}, .ranges = {{"x", {-0.25, 0.5}}}, .misalign = offset});
}

// Kernels the heuristic rebuilt after their vectorized entry spilled
// (layernorm f32 at 262144: clusters of 16 -> 8; log_softmax: down to one
// cluster per row): the scalar entry, built on the first unaligned launch,
// is built in the same form (before session 20 its own build planned
// layernorm's clusters of 16, and the launch failed on the mismatch).
TEST_CASE("kernels rebuilt after a spill stay correct from unaligned base pointers", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: clusters need an sm_90 GPU");
    return;
  }
  size_t offset = GENERATE(4, 8);
  Graph g;
  Tensor x = g.input("x", DType::F32, {"R", 262144});
  g.output("y", layernorm(x, g.input("w", DType::F32, {262144}), g.input("b", DType::F32, {262144})));
  Graph h;
  h.output("y", log_softmax(h.input("x", DType::F32, {"R", 262144})));
  Kernel k = runAndCheck(g, {.dims = {{"R", 5}}, .ranges = {{"x", {-3, 5}}}, .misalign = offset});
  // (rebuilt in 16 blocks of 256 threads that prefetch the next row)
  CHECK(k.explain().find("\"cluster\": 16") != std::string::npos);
  CHECK(k.explain().find("\"prefetch\": 1") != std::string::npos);
  runAndCheck(h, {.dims = {{"R", 5}}, .ranges = {{"x", {-4, 4}}}, .misalign = offset});
}

// A staged config's scalar entry (taken for unaligned rows) reads global
// memory, with a staged row's two-pass variance: layernorm and softmax.
TEST_CASE("staged configs stay correct from unaligned base pointers", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: staged rows need an sm_90 GPU (bulk copies)");
    return;
  }
  size_t offset = GENERATE(2, 6);
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"R", 4096});
  g.output("y", layernorm(x, g.input("w", DType::BF16, {4096}), g.input("b", DType::BF16, {4096})));
  g.output("p", softmax(x));
  CompileOptions co;
  co.rowConfigOverride = R"({"persistent": 0, "stage": 1, "threads_per_row": 256, "unroll": 2})";
  Kernel k = runAndCheck(g, {.dims = {{"R", 9}}, .ranges = {{"x", {-3, 5}}}, .misalign = offset, .compile = co});
  CHECK(k.explain().find("\"stage\": 1") != std::string::npos);
}

TEST_CASE("graphs split into several kernels match the reference", "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16, DType::F16);
  struct S {
    Shape shape;
    int64_t rows;  // R, where the shape has it
  };
  // [1024, 1024]: mean(x) is the mean of a whole tensor of 1 << 20 elements.
  S s = GENERATE(S{{1024, 1024}, 0}, S{{"R", 1000}, 777}, S{{"R", 17}, 5000}, S{{"R", 4097}, 3});
  const std::vector<test::GraphCase> cases = test::splitCases(t, s.shape);
  const test::GraphCase& c = cases.at(GENERATE(range(size_t{0}, test::splitCases(DType::F32, {2, 2}).size())));
  INFO(c.label << (s.rows ? " with R = " + std::to_string(s.rows) : std::string()));
  test::RunOptions o = optionsFor(c, s.rows);
  if (!s.rows) o.dims.clear();  // a static shape
  runAndCheck(c.graph, o);
}

TEST_CASE("a dynamic row longer than the row schedule counts is refused at launch, before anything runs",
          "[gpu][reduction]") {
  test::requireGpu();
  // x.sum() over a dynamic N is one row of N values, counted in 32 bits: a
  // launch with N = 2^31 must be an error naming the dim, never a sum of the
  // first N mod 2^32 values. (The view of x claims 2^31 values of a
  // 128-byte buffer, after y's 64 bytes so that the two do not overlap: the
  // check comes before the kernel, which never runs.)
  Graph g;
  g.output("y", sum(g.input("x", DType::F32, {"N"}), 0, false));
  Kernel k = compile(g);
  rt::DeviceBuffer buf(128), bx(64), by(64);
  const TensorView big[] = {TensorView(static_cast<char*>(buf.data()) + 64, DType::F32, {int64_t{1} << 31}),
                            TensorView(buf.data(), DType::F32, {})};
  REQUIRE_THROWS_WITH(k.launch(std::span<const TensorView>(big)),
                      Catch::Matchers::Contains("dim N = 2147483648") && Catch::Matchers::Contains("values in a row"));
  // Below the bound the same kernel still sums.
  std::vector<float> ones(16, 1.0f);
  bx.upload(ones.data(), ones.size() * sizeof(float));
  const TensorView small[] = {TensorView(bx.data(), DType::F32, {16}), TensorView(by.data(), DType::F32, {})};
  k.launch(std::span<const TensorView>(small));
  float y = 0;
  by.download(&y, sizeof y);
  CHECK(y == 16.0f);
}

TEST_CASE("values of inputs the same for every row and column match the reference", "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16);
  const std::vector<Graph> graphs = test::invariantInputGraphs(t);
  for (size_t i = 0; i < graphs.size(); ++i) {
    INFO(graphs[i].toText());
    test::RunOptions o;
    if (i == 0) o.dims["N"] = 1000;               // the [1, 1] graphs have no dims
    if (i == 1) o.ranges = {{"w", {0.1, 2.0}}};   // sqrt(w) of positive values
    runAndCheck(graphs[i], o);
  }
}

TEST_CASE("a row statistic read along columns (x - sum(x, 1) of a square x) matches the reference", "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16);
  for (int64_t n : {96, 4097})
    for (const test::GraphCase& c : test::misreadCases(t, n)) {
      INFO(c.label);
      runAndCheck(c.graph, {.ranges = c.ranges, .tolScale = c.tolScale, .relFloor = c.relFloor});
    }
}

TEST_CASE("a whole tensor's statistic reused by another whole-tensor reduction matches the reference",
          "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16);
  for (const Shape& s : {Shape{Dim(4), Dim(16), Dim(7)}, Shape{Dim(1000), Dim(2)}, Shape{Dim(64), Dim(4096)}})
    for (const test::GraphCase& c : test::statisticReuseCases(t, s)) {
      INFO(c.label);
      runAndCheck(c.graph, {.ranges = c.ranges, .tolScale = c.tolScale, .relFloor = c.relFloor});
    }
}

TEST_CASE("a reshape of a value read back in the value's own shape matches the reference", "[gpu][reduction]") {
  test::requireGpu();
  DType t = GENERATE(DType::F32, DType::BF16);
  for (const test::GraphCase& c : test::reshapedValueCases(t)) {
    INFO(c.label);
    runAndCheck(c.graph, {.ranges = c.ranges, .tolScale = c.tolScale, .relFloor = c.relFloor});
  }
}

// The inputs and tolerances of a split reduction op (splitRowReductions):
// sums of many values in another order, relative to their magnitude with
// the inputs' mean kept away from 0; prod of signs; the arg ops over
// integers in [-2, 2], so that extremes tie across the parts (the first
// index wins).
static test::RunOptions splitOpOptions(const std::string& name) {
  test::RunOptions o;
  if (name == "prod") signsOnly(o);
  if (name == "sum" || name == "mean") {
    o.ranges = {{"x", {0.5, 1.5}}};
    o.tolScale = 4;
  }
  if (name == "var" || name == "std") o.tolScale = 4;
  if (name == "argmax" || name == "argmin") {
    o.ranges = {{"x", {-2.49, 2.49}}};
    o.prepare = [](EvalInputs& in) {
      HostTensor& x = in.tensors.at("x");
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::round(x.get(i)));
    };
  }
  return o;
}

// A whole tensor (or a few rows) of dynamic or odd length: the row kernel
// splits each row across blocks (config split), the row's last block to
// finish merging their states. Lengths from one value (one block) to
// millions (the most blocks), launch after launch of one kernel (a length
// change changes the blocks per row; each row's counter is reset by its
// last block), ties for the arg ops across the parts (the first index).
TEST_CASE("rows split across blocks (a whole tensor of dynamic or odd length) match the reference, launch after launch",
          "[gpu][reduction]") {
  test::requireGpu();
  const std::vector<test::AxisReduction> ops = test::splitRowReductions();
  const test::AxisReduction& c = ops.at(GENERATE(range(size_t{0}, test::splitRowReductions().size())));
  const DType t = GENERATE(DType::F32, DType::BF16);
  struct S {
    Shape shape;
    std::vector<int64_t> lengths;  // of N, launch after launch (none: static)
  };
  // (Lengths that are multiples of 8 run the vectorized entry.)
  const std::vector<S> shapes = {{{Dim("N")}, {1, 17, 4097, 1000003, 3000017, 17, 262144, 4096000}},
                                 {{Dim(3), Dim("N")}, {1, 100003, 5, 100000}},
                                 {{Dim(1000003)}, {}},
                                 {{Dim(5), Dim(200003)}, {}}};
  for (const S& s : shapes) {
    Graph g;
    g.output("y", c.op(g.input("x", t, s.shape), static_cast<int64_t>(s.shape.size()) - 1));
    std::vector<int64_t> lengths = s.lengths;
    if (lengths.empty()) lengths = {0};
    for (int64_t n : lengths) {
      INFO(c.name << " of " << typeToString(t, s.shape) << (s.lengths.empty() ? "" : " with N = " + std::to_string(n)));
      test::RunOptions o = splitOpOptions(c.name);
      if (!s.lengths.empty()) o.dims["N"] = n;
      Kernel k = runAndCheck(g, o);
      INFO(k.explain());
      CHECK(k.compiled().kernels.size() == 1);
      CHECK_THAT(k.compiled().kernels[0].config, Catch::Matchers::Contains("split"));
    }
  }
}

// Column reductions of few outputs (the column form with config split):
// each tile of rows (threads x lanes of them) is split across blocks whose
// states the tile's last block merges, in one kernel. Every op of the row
// split, an odd output count (a partial tile, one lane), parts of unequal
// length (a part length of whole steps that does not divide the column),
// the benchmark's shape, launch after launch (each tile's counter is reset
// by its last block); the bits of a sum are the same launch after launch.
TEST_CASE("column reductions split across blocks in one kernel match the reference, launch after launch",
          "[gpu][reduction]") {
  test::requireGpu();
  const std::vector<test::AxisReduction> ops = test::splitRowReductions();
  const test::AxisReduction& c = ops.at(GENERATE(range(size_t{0}, test::splitRowReductions().size())));
  const DType t = GENERATE(DType::F32, DType::BF16);
  for (const Shape& shape : {Shape{Dim(8192), Dim(1000)}, Shape{Dim(20000), Dim(36)}, Shape{Dim(3), Dim(5000), Dim(40)}}) {
    const int64_t axis = shape.size() == 3 ? 1 : 0;
    Graph g;
    g.output("y", c.op(g.input("x", t, shape), axis));
    for (int launch = 0; launch < 2; ++launch) {
      INFO(c.name << " of " << typeToString(t, shape) << " over axis " << axis << ", launch " << launch);
      test::RunOptions o = splitOpOptions(c.name);
      Kernel k = runAndCheck(g, o);
      INFO(k.explain());
      if (c.name != "logsumexp") {
        CHECK(k.compiled().kernels.size() == 1);
        CHECK_THAT(k.compiled().kernels[0].config, Catch::Matchers::Contains("split"));
      }
    }
  }
}

TEST_CASE("a column sum split across blocks matches the reference at the benchmark's shape and reduces deterministically",
          "[gpu][reduction]") {
  test::requireGpu();
  const DType t = GENERATE(DType::BF16, DType::F32);
  Graph g;
  g.output("y", sum(g.input("x", t, {32768, 4096}), {0}));
  Kernel k = runAndCheck(g, {.ranges = {{"x", {0.5, 1.5}}}, .tolScale = 4});
  INFO(k.explain());
  REQUIRE(k.compiled().kernels.size() == 1);
  REQUIRE_THAT(k.compiled().kernels[0].config, Catch::Matchers::Contains("\"split\": 64"));
  HostTensor x(t, {32768, 4096});
  std::mt19937_64 rng(test::freshSeed());
  x.fillRandom(rng, -1, 1);
  rt::DeviceBuffer bx(x.bytes()), by(4096 * static_cast<size_t>(dtypeSize(t)));
  bx.upload(x.data(), x.bytes());
  std::set<std::vector<uint8_t>> results;
  for (int run = 0; run < 10; ++run) {
    by.poison();
    const TensorView views[] = {TensorView(bx.data(), t, {32768, 4096}), TensorView(by.data(), t, {4096})};
    k.launch(std::span<const TensorView>(views), std::span<const int64_t>());
    std::vector<uint8_t> y(by.size());
    by.download(y.data(), y.size());
    results.insert(y);
  }
  CHECK(results.size() == 1);
}

// The parts' states merge in a fixed order, whichever block finishes last:
// a sum of five million f32 values has the same bits launch after launch.
TEST_CASE("a row split across blocks reduces deterministically", "[gpu][reduction]") {
  test::requireGpu();
  Graph g;
  g.output("y", sum(g.input("x", DType::F32, {"N"}), 0));
  Kernel k = compile(g);
  REQUIRE_THAT(k.compiled().kernels.at(0).config, Catch::Matchers::Contains("split"));
  const int64_t n = 5000011;
  HostTensor x(DType::F32, {n});
  std::mt19937_64 rng(test::freshSeed());
  x.fillRandom(rng, -1, 1);
  rt::DeviceBuffer bx(x.bytes()), by(4);
  bx.upload(x.data(), x.bytes());
  std::set<uint32_t> bits;
  for (int run = 0; run < 20; ++run) {
    by.poison();
    const TensorView views[] = {TensorView(bx.data(), DType::F32, {n}), TensorView(by.data(), DType::F32, {})};
    const int64_t dims[] = {n};
    k.launch(std::span<const TensorView>(views), std::span<const int64_t>(dims));
    uint32_t y = 0;
    by.download(&y, sizeof y);
    bits.insert(y);
  }
  CHECK(bits.size() == 1);
  double want = 0;
  for (int64_t i = 0; i < n; ++i) want += x.get(i);
  float got;
  std::memcpy(&got, &*bits.begin(), sizeof got);
  CHECK(std::abs(got - want) <= 1e-3 * std::max(1.0, std::abs(want)) + 0.1);
}

// A dynamic row length: the vectorized entry where the length is a
// multiple of the vector width (16 bytes of the narrowest dtype), the scalar
// entry elsewhere and from unaligned pointers; the composites and every
// reduction op, lengths from 1 to 32768, one compiled kernel per graph.
TEST_CASE("rows of a dynamic length match the reference in the vectorized and the scalar entry", "[gpu][reduction]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  std::vector<test::GraphCase> cases = test::rowComposites(t, {"R", "N"});
  for (test::GraphCase& c : test::reductionSweep({"R", "N"}, {false}))
    if (c.graph.outputs().size() && c.label.find(dtypeName(t)) != std::string::npos) cases.push_back(std::move(c));
  // The heuristic's kernels (each length launches the variant of its
  // range: one-step entries of 1 to 4 vectors a thread up to 8192 values,
  // loops beyond; 32768 the long-row variant's vectorized entry, 32771 its
  // scalar one), then one kernel for every length (an override: no ranges,
  // no variants) whose one-step entry covers 128 threads x one vector, so
  // that the short lengths launch that entry and the long ones the looped
  // one.
  for (const char* override : {"", R"({"one_step": 1})"})
    for (const test::GraphCase& c : cases)
      for (int64_t n : {4096, 4097, 8, 7, 32768, 1, 24, 32771})
        for (size_t misalign : {size_t{0}, size_t{4}}) {
          // (i64 targets and indices need 8-byte pointers)
          const bool i64 = c.label.rfind("cross_entropy", 0) == 0 || c.label.rfind("arg", 0) == 0;
          if (misalign && ((n != 4096 && n != 32768) || i64)) continue;
          INFO(c.label << " with N = " << n << (misalign ? ", base pointers 4 bytes off" : "")
                       << (*override ? ", config " : "") << override);
          test::RunOptions o = optionsFor(c, 64);
          o.dims["N"] = n;
          o.misalign = misalign;
          o.compile.rowConfigOverride = override;
          runAndCheck(c.graph, o);
        }
}

// A dynamic row length's kernel is configured for the lengths its hints
// name (none: short rows); a launch outside that range builds the graph
// again configured for it, which every later launch of that range reuses
// (sessions 24-25: one-step branches by powers of two up to 16384 values,
// then loops of 256 and 512 threads by the row's bytes). Every length twice:
// the second round builds nothing.
TEST_CASE("long dynamic rows launch a variant built once for them", "[gpu][reduction]") {
  test::requireGpu();
  for (DType t : {DType::F32, DType::BF16}) {
    INFO(dtypeName(t));
    const int64_t u128 = (16 << 10) / dtypeSize(t), u256 = (32 << 10) / dtypeSize(t);
    Graph g;
    Tensor x = g.input("x", t, {"R", "N"});
    g.output("y", softmax(x, -1));
    g.output("m", max(x, -1, false));
    test::RunOptions o;
    const Kernel k = compile(g, o.compile);
    CHECK(k.explain().find("variant") == std::string::npos);
    auto variants = [&] {
      const std::string e = k.explain();
      size_t n = 0;
      for (size_t at = e.find("variant built"); at != std::string::npos; at = e.find("variant built", at + 1)) ++n;
      return n;
    };
    // (262147 and 131080: rows past 256 KB, in looped clusters on sm_90.)
    const std::vector<int64_t> lengths = {u128, 40000, 65536, u128 + 1, u256, u256 + 1, u128 - 1, 3000, 100, 262147, 131080};
    size_t built = 0;
    for (int round = 0; round < 2; ++round) {
      for (int64_t n : lengths) {
        INFO("round " << round << ", N = " << n);
        o.dims = {{"R", 37}, {"N", n}};
        runAndCheck(g, o);
      }
      INFO(k.explain());
      if (round == 0) built = variants();
      else CHECK(variants() == built);
    }
    // (100 runs the first build; the others ranges of their own, some
    // shared: 40000, 65536 and u256 + 1; u128 and u128 - 1; f32's 3000 and
    // u128, u128 + 1 and u256.)
    CHECK(built >= 3);
    CHECK(built < lengths.size());
    CHECK(k.forDims(std::vector<int64_t>{37, 40000}).compiled().kernels.at(0).config.find("\"threads_per_row\": 512") !=
          std::string::npos);
    // Clusters of 8 up to 512 KB a row, of 16 beyond.
    if (test::hasClusters()) {
      CHECK(k.forDims(std::vector<int64_t>{37, 262147}).compiled().kernels.at(0).launch.cluster == 16);
      CHECK(k.forDims(std::vector<int64_t>{37, 131080}).compiled().kernels.at(0).launch.cluster == (t == DType::F32 ? 16 : 8));
    }
  }
}

// Rows of a dynamic length past 256 KB run in the heuristic's looped
// clusters (parts of about 64 KB, two blocks per SM; layernorm bf16 at half
// the unroll): every composite at lengths whose parts are whole steps and
// not, in both entries.
TEST_CASE("long dynamic rows in the heuristic's looped clusters match the reference", "[gpu][reduction]") {
  test::requireGpu();
  if (!test::hasClusters()) {
    WARN("SKIPPED: row clusters need an sm_90 GPU");
    return;
  }
  const DType t = GENERATE(DType::F32, DType::BF16);
  for (const test::GraphCase& c : test::rowComposites(t, {"R", "N"}))
    for (int64_t n : {int64_t{262144}, int64_t{300001}, int64_t{1048576}}) {
      INFO(c.label << " with N = " << n);
      test::RunOptions o = optionsFor(c, 12);
      o.dims["N"] = n;
      Kernel k = runAndCheck(c.graph, o);
      // (The dims in the signature's order: rmsnorm's w brings N first.)
      std::vector<int64_t> dims;
      for (const auto& d : k.signature().dims) dims.push_back(d.name == "N" ? n : 12);
      const Kernel v = k.forDims(dims);
      INFO(v.explain());
      if (c.label.find("cross_entropy") == std::string::npos)
        CHECK(v.compiled().kernels.at(0).launch.cluster > 1);
    }
}

// var/std over several axes, one of them dynamic: the law of total variance
// one axis at a time and a count of the values for the correction, several
// kernels (session 23; the plan is checked on the CPU in test_plan_reference).
TEST_CASE("var and std over several axes with a dynamic dim match the reference", "[gpu][reduction]") {
  test::requireGpu();
  const DType t = GENERATE(DType::F32, DType::BF16);
  struct S {
    Shape shape;
    Axes axes;
    DimBindings dims;
  };
  const std::vector<S> shapes = {{{Dim("B"), Dim(4096)}, Axes{0, 1}, {{"B", 333}}},
                                 {{Dim(4), Dim("N"), Dim(48)}, Axes{0, 1, 2}, {{"N", 1000}}},
                                 {{Dim("B"), Dim(5), Dim("N")}, Axes{0, 2}, {{"B", 6}, {"N", 70001}}}};
  for (const S& s : shapes)
    for (bool isStd : {false, true}) {
      INFO((isStd ? "std" : "var") << " of " << typeToString(t, s.shape));
      Graph g;
      Tensor x = g.input("x", t, s.shape);
      g.output("y", isStd ? kiln::std(x, s.axes, 1, false) : var(x, s.axes, 1, true));
      test::RunOptions o;
      o.dims = s.dims;
      o.ranges = {{"x", {-0.5, 1}}};
      o.tolScale = 4;
      runAndCheck(g, o);
    }
}
