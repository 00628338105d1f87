// Grid sizes from compiled kernels' launch geometry (detail::GridRule, what
// Kernel::launch computes before cuLaunchKernel): pointwise kernels count
// elements; matmul kernels count output tiles, so a 16-row output of 128-row
// tiles gets one block per tile (it once got ceil(M*N / tile area), 8 times
// too few, and ran 5.5 times slower). CPU only: the kernels are compiled
// for sm_90 without a GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>

#include "kernel_internal.h"
#include "kiln/kiln.h"

using namespace kiln;
using Catch::Matchers::Contains;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t configInt(const std::string& json, const std::string& key) {
  const size_t at = json.find("\"" + key + "\": ");
  REQUIRE(at != std::string::npos);
  return std::stoll(json.substr(at + key.size() + 4));
}

Graph matmulGraph(DType t, Dim M, int64_t N, int64_t K) {
  Graph g;
  g.output("c", matmul(g.input("a", t, {M, Dim(K)}), g.input("b", t, {Dim(K), Dim(N)})));
  return g;
}

int64_t blocksFor(const compiler::CompiledKernel& k, std::vector<int64_t> dims) {
  detail::GridRule r = detail::gridRuleFrom(k.launch, k.dims, k.name);
  return r.blocks([&](size_t d) { return dims.at(d); });
}

}  // namespace

TEST_CASE("grid: the Hopper matmul gets one block per output tile, at most one per SM", "[compile][matmul]") {
  const int sms = 132;
  for (int64_t m : {16, 64, 100, 128, 4096}) {
    CAPTURE(m);
    compiler::CompiledGraph cg = compiler::compileGraph(matmulGraph(DType::BF16, Dim(m), 8192, 1024),
                                                        {.chip = "sm_90", .smCount = sms});
    REQUIRE(cg.kernels.size() == 1);
    const compiler::CompiledKernel& k = cg.kernels[0];
    const int64_t bm = configInt(k.config, "block_m"), bn = configInt(k.config, "block_n");
    const int64_t tiles = ceilDiv(m, bm) * ceilDiv(8192, bn);
    CHECK(blocksFor(k, {}) == std::min<int64_t>(tiles, sms));
  }
  // A dynamic M: the tile count follows the launch's M.
  compiler::CompiledGraph cg = compiler::compileGraph(matmulGraph(DType::BF16, Dim("M"), 8192, 1024),
                                                      {.chip = "sm_90", .smCount = sms});
  const compiler::CompiledKernel& k = cg.kernels.at(0);
  const int64_t bn = configInt(k.config, "block_n");
  CHECK(blocksFor(k, {16}) == ceilDiv(8192, bn));
  CHECK(blocksFor(k, {129}) == std::min<int64_t>(2 * ceilDiv(8192, bn), sms));
  CHECK(blocksFor(k, {0}) == 0);
}

TEST_CASE("grid: the portable matmul gets one block per output tile", "[compile][matmul]") {
  compiler::CompiledGraph cg = compiler::compileGraph(matmulGraph(DType::F32, Dim("M"), 1000, 64), {.chip = "sm_90"});
  const compiler::CompiledKernel& k = cg.kernels.at(0);
  const int64_t bm = configInt(k.config, "block_m"), bn = configInt(k.config, "block_n");
  for (int64_t m : {1, 16, 300}) {
    CAPTURE(m);
    CHECK(blocksFor(k, {m}) == ceilDiv(m, bm) * ceilDiv(1000, bn));
  }
}

TEST_CASE("grid: pointwise kernels count elements", "[compile]") {
  Graph g;
  g.output("y", g.input("x", DType::F32, {"N"}) + 1.0);
  compiler::CompiledGraph cg = compiler::compileGraph(g, {.chip = "sm_90"});
  const compiler::CompiledKernel& k = cg.kernels.at(0);
  REQUIRE(k.launch.tile.empty());
  for (int64_t n : {1, 7, 1000003}) {
    CAPTURE(n);
    int64_t want = ceilDiv(n, k.launch.elementsPerBlock);
    if (k.launch.maxBlocks > 0) want = std::min(want, k.launch.maxBlocks);
    CHECK(blocksFor(k, {n}) == want);
  }
}

TEST_CASE("grid: a launch geometry that does not fit its kernel is an error naming it", "[compile]") {
  compiler::LaunchGeometry g;
  g.iterShape = {Dim("N"), Dim(64)};
  g.tile = {0};
  CHECK_THROWS_WITH(detail::gridRuleFrom(g, {"N"}, "k0"), Contains("'k0'") && Contains("tile size below 1"));
  g.tile = {1, 2, 3};
  CHECK_THROWS_WITH(detail::gridRuleFrom(g, {"N"}, "k0"), Contains("more tile sizes"));
  g.tile = {};
  CHECK_THROWS_WITH(detail::gridRuleFrom(g, {"M"}, "k0"), Contains("dim N"));
}

TEST_CASE("grid: a cluster of 2 gets two blocks per pair of tile rows, in whole clusters", "[compile][matmul]") {
  const int sms = 132;
  compiler::CompileOptions o{.chip = "sm_90", .smCount = sms};
  o.kernelConfigs[0] = "{\"cluster_m\": 2, \"block_n\": 256}";
  compiler::CompiledGraph cg = compiler::compileGraph(matmulGraph(DType::BF16, Dim("M"), 8192, 1024), o);
  const compiler::CompiledKernel& k = cg.kernels.at(0);
  REQUIRE(k.launch.cluster == 2);
  CHECK(blocksFor(k, {16}) == 2 * 32);           // one pair of tile rows (the second CTA's rows are beyond M)
  CHECK(blocksFor(k, {300}) == 2 * 2 * 32);      // 3 tile rows: 2 pairs
  CHECK(blocksFor(k, {8192}) == sms);            // capped at the SMs, in whole clusters
  compiler::LaunchGeometry g = k.launch;
  g.maxBlocks = 131;
  CHECK(blocksFor(compiler::CompiledKernel{.name = "k", .dims = {"M"}, .launch = g}, {8192}) == 130);
}

TEST_CASE("rows counted in 32 bits: a static row over the bound fails to compile, a dynamic one is checked at launch",
          "[compile][reduction]") {
  const compiler::CompileOptions o{.chip = "sm_90", .smCount = 132};
  SECTION("a static row of 2^31 values") {
    Graph g;
    g.output("y", softmax(g.input("x", DType::F32, {1, int64_t{1} << 31}), -1));
    REQUIRE_THROWS_WITH(compiler::compileGraph(g, o),
                        Contains("over 2147483648 values in a row") && Contains("32-bit"));
  }
  SECTION("a grid tail's mean over 2^32 static rows") {
    Graph g;
    g.output("loss", cross_entropy(g.input("x", DType::BF16, {int64_t{1} << 32, 1000}),
                                   g.input("t", DType::I64, {int64_t{1} << 32})));
    REQUIRE_THROWS_WITH(compiler::compileGraph(g, o), Contains("mean over 4294967296 rows") && Contains("32-bit"));
  }
  SECTION("a dynamic row: the launch checks its length") {
    Graph g;
    g.output("y", sum(g.input("x", DType::F32, {"N"}), 0, false));
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    REQUIRE(cg.kernels.size() == 1);
    const compiler::CompiledKernel& k = cg.kernels[0];
    REQUIRE(k.launch.dimBounds.size() == 1);
    const compiler::LaunchGeometry::DimBound& b = k.launch.dimBounds[0];
    CHECK(b.dim == "N");
    CHECK(b.max < (int64_t{1} << 31));
    CHECK(b.max >= (int64_t{1} << 30));
    const detail::GridRule r = detail::gridRuleFrom(k.launch, k.dims, k.name);
    int64_t n = b.max;
    auto dims = [&](size_t) { return n; };
    CHECK_NOTHROW(r.check(dims, k.name));
    n = b.max + 1;
    REQUIRE_THROWS_WITH(r.check(dims, k.name), Contains("kernel '" + k.name + "': dim N = " + std::to_string(b.max + 1)) &&
                                                   Contains("at most " + std::to_string(b.max) + " values in a row"));
  }
  SECTION("a dynamic row count under a grid tail") {
    Graph g;
    g.output("loss", cross_entropy(g.input("x", DType::BF16, {"R", 1000}), g.input("t", DType::I64, {"R"})));
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    REQUIRE(cg.kernels.size() == 1);
    const auto& bounds = cg.kernels[0].launch.dimBounds;
    REQUIRE(bounds.size() == 1);
    CHECK(bounds[0].dim == "R");
    CHECK_THAT(bounds[0].what, Contains("rows"));
  }
  SECTION("pointwise kernels index in 64 bits where dims are dynamic: no bound") {
    Graph g;
    Tensor x = g.input("x", DType::F32, {"N"});
    g.output("y", x * 2.0);
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    REQUIRE(cg.kernels.size() == 1);
    CHECK(cg.kernels[0].launch.dimBounds.empty());
  }
}

// A row kernel of a dynamic length has a vectorized entry whose loops take
// whole vectors: the launcher runs it only where the length is a multiple
// of the vector width (GridRule::vectorFits), the scalar entry elsewhere.
TEST_CASE("grid: a dynamic row length picks the vectorized entry only for whole vectors", "[compile][reduction]") {
  const compiler::CompileOptions o{.chip = "sm_90", .smCount = 132};
  for (DType t : {DType::F32, DType::BF16}) {
    const int64_t v = 16 / dtypeSize(t);
    INFO(dtypeName(t));
    Graph g;
    g.output("y", softmax(g.input("x", t, {"B", "N"}), -1));
    compiler::CompiledGraph cg = compiler::compileGraph(g, o);
    REQUIRE(cg.kernels.size() == 1);
    const compiler::CompiledKernel& k = cg.kernels[0];
    CHECK(std::any_of(k.entries.begin(), k.entries.end(), [](const compiler::KernelEntry& e) { return e.vectorized; }));
    REQUIRE(k.launch.vectorMultiples.size() == 1);
    CHECK(k.launch.vectorMultiples[0].dim == "N");
    CHECK(k.launch.vectorMultiples[0].multiple == v);
    const detail::GridRule r = detail::gridRuleFrom(k.launch, k.dims, k.name);
    const size_t nIndex = static_cast<size_t>(std::find(k.dims.begin(), k.dims.end(), "N") - k.dims.begin());
    REQUIRE(nIndex < k.dims.size());
    for (int64_t n : {v, 4096 * v, int64_t{1}, v + 1, 4097 * v - 1}) {
      INFO("N = " << n);
      CHECK(r.vectorFits([&](size_t d) { return d == nIndex ? n : int64_t{7}; }) == (n % v == 0));
    }
  }
  // A static length: the compiler picked a width that divides it.
  Graph g;
  g.output("y", softmax(g.input("x", DType::BF16, {"B", 4096}), -1));
  CHECK(compiler::compileGraph(g, o).kernels.at(0).launch.vectorMultiples.empty());
}

// A dynamic row length's config is the heuristic's for short rows unless a
// hint says the rows are long (CompileOptions::dimHints); the kernel names
// the range it was configured for (LaunchGeometry::preferred), which the
// facade checks at launch (GridRule::inPreferred) to build, once, a
// variant for values outside it. Rows that one step covers take the
// one-step branch (one_step: the fewest vectors a thread that cover the
// hint, at the static rule's threads; rmsnorm's light rows up to 512 x 2
// vectors), ranges by powers of two; longer rows loop at 256 threads up to
// 32 KB a row, 512 beyond, in ranges split at 64 KB and 256 KB; on sm_90
// rows over 256 KB loop across a cluster of 8 blocks up to 512 KB and of
// 16 beyond. Given configs stand for every length.
TEST_CASE("grid: a dynamic row length's config names the lengths it was chosen for", "[compile][reduction]") {
  const compiler::CompileOptions base{.chip = "sm_90", .smCount = 132};
  const int64_t top = std::numeric_limits<int64_t>::max();
  struct Want {
    std::map<std::string, int64_t> hints;
    int threads;
    int oneStep;  // 0: a loop
    int64_t min, max;
    int cluster = 0;  // 0: one block a row
  };
  struct Case {
    DType t;
    std::vector<Want> wants;
  };
  const std::vector<Case> cases = {
      {DType::BF16,
       {Want{{}, 128, 1, 0, 1024}, Want{{{"N", 1024}}, 128, 1, 0, 1024}, Want{{{"N", 1025}}, 128, 2, 1025, 2048},
        Want{{{"N", 3000}}, 256, 2, 2049, 4096}, Want{{{"N", 8192}}, 512, 2, 4097, 8192},
        Want{{{"N", 8193}}, 256, 0, 8193, 16384}, Want{{{"N", 16384}}, 256, 0, 8193, 16384},
        Want{{{"N", 16385}}, 512, 0, 16385, 32768}, Want{{{"N", 32768}}, 512, 0, 16385, 32768},
        Want{{{"N", 32769}}, 512, 0, 32769, 131072}, Want{{{"N", 131072}}, 512, 0, 32769, 131072},
        Want{{{"N", 131073}}, 512, 0, 131073, 262144, 8}, Want{{{"N", 262144}, {"B", 3}}, 512, 0, 131073, 262144, 8},
        Want{{{"N", 262145}}, 512, 0, 262145, top, 16}}},
      {DType::F32,
       {Want{{}, 128, 1, 0, 512}, Want{{{"N", 512}}, 128, 1, 0, 512}, Want{{{"N", 513}}, 128, 2, 513, 1024},
        Want{{{"N", 1500}}, 256, 2, 1025, 2048}, Want{{{"N", 4096}}, 512, 2, 2049, 4096},
        Want{{{"N", 4097}}, 256, 0, 4097, 8192}, Want{{{"N", 8192}}, 256, 0, 4097, 8192},
        Want{{{"N", 8193}}, 512, 0, 8193, 16384}, Want{{{"N", 16384}}, 512, 0, 8193, 16384},
        Want{{{"N", 16385}}, 512, 0, 16385, 65536}, Want{{{"N", 100000}}, 512, 0, 65537, 131072, 8},
        Want{{{"N", 131073}}, 512, 0, 131073, top, 16}, Want{{{"N", 262144}, {"B", 3}}, 512, 0, 131073, top, 16}}}};
  for (const Case& c : cases) {
    INFO(dtypeName(c.t));
    Graph g;
    g.output("y", rmsnorm(g.input("x", c.t, {"B", "N"}), g.input("w", c.t, {"N"}), 1e-6));
    for (const Want& w : c.wants) {
      compiler::CompileOptions o = base;
      o.dimHints = w.hints;
      INFO("hints: " << w.hints.size() << (w.hints.count("N") ? " N = " + std::to_string(w.hints.at("N")) : ""));
      compiler::CompiledGraph cg = compiler::compileGraph(g, o);
      REQUIRE(cg.kernels.size() == 1);
      const compiler::CompiledKernel& k = cg.kernels[0];
      INFO(k.config);
      CHECK(k.launch.threadsPerBlock == w.threads);
      CHECK((k.config.find("\"one_step\": " + std::to_string(w.oneStep) + "}") != std::string::npos) == (w.oneStep > 0));
      CHECK((k.config.find("one_step") != std::string::npos) == (w.oneStep > 0));
      if (w.cluster) CHECK(k.config.find("\"cluster\": " + std::to_string(w.cluster) + ",") != std::string::npos);
      else CHECK(k.config.find("\"cluster\"") == std::string::npos);
      REQUIRE(k.launch.preferred.size() == 1);
      CHECK(k.launch.preferred[0] == compiler::LaunchGeometry::DimRange{"N", w.min, w.max});
      // The one-step entry covers the range's longest rows.
      if (w.oneStep) CHECK(k.launch.oneStepRange == std::vector<compiler::LaunchGeometry::DimRange>{{"N", 0, w.max}});
      else CHECK(k.launch.oneStepRange.empty());
      const detail::GridRule r = detail::gridRuleFrom(k.launch, k.dims, k.name);
      const size_t nIndex = static_cast<size_t>(std::find(k.dims.begin(), k.dims.end(), "N") - k.dims.begin());
      REQUIRE(nIndex < k.dims.size());
      for (int64_t n : {int64_t{0}, int64_t{1}, w.min - 1, w.min, w.max, w.max == top ? top : w.max + 1, int64_t{1} << 30}) {
        if (n < 0) continue;
        INFO("N = " << n);
        CHECK(r.inPreferred([&](size_t d) { return d == nIndex ? n : int64_t{5}; }) == (n >= w.min && n <= w.max));
      }
      // The disk cache keys a hint by its class: the class's value compiles
      // to the same config.
      if (w.hints.count("N")) {
        compiler::CompileOptions oc = o;
        oc.dimHints["N"] = compiler::dimHintClass(w.hints.at("N"));
        const compiler::CompiledKernel kc = compiler::compileGraph(g, oc).kernels.at(0);
        CHECK(kc.config == k.config);
        CHECK(kc.launch.preferred == k.launch.preferred);
      }
    }
    // Configs given by an override or per kernel (tuning): no range.
    compiler::CompileOptions o = base;
    o.rowConfigOverride = R"({"unroll": 2})";
    CHECK(compiler::compileGraph(g, o).kernels.at(0).launch.preferred.empty());
    o = base;
    o.kernelConfigs[0] = R"({"threads_per_row": 256, "threads": 256, "vector": 1, "persistent": 0, "unroll": 4})";
    CHECK(compiler::compileGraph(g, o).kernels.at(0).launch.preferred.empty());
  }
  // Static row lengths and dynamic row counts: no range.
  Graph g;
  g.output("y", softmax(g.input("x", DType::BF16, {"B", 4096}), -1));
  CHECK(compiler::compileGraph(g, base).kernels.at(0).launch.preferred.empty());
}

// Kernel::forDims: the build a launch with given dim values runs, built on
// the machine without a GPU too (compiling needs no driver): longer dynamic
// rows get a variant per range of lengths, reused for every length in it;
// short ones the kernel itself.
TEST_CASE("a kernel's variant for long dynamic rows is built once and named by explain", "[compile][reduction]") {
  Graph g;
  g.output("y", softmax(g.input("x", DType::BF16, {"R", "N"}), -1));
  CompileOptions o;
  o.chip = "sm_90";
  o.diskCache = false;
  const Kernel k = compile(g, o);
  REQUIRE(k.signature().dims.size() == 2);
  CHECK(k.explain().find("config chosen for dim N at most 1024") != std::string::npos);
  CHECK(k.explain().find("one-step entry where dim N is at most 1024") != std::string::npos);
  CHECK(&k.forDims(std::vector<int64_t>{37, 1000}).compiled() == &k.compiled());
  CHECK(k.explain().find("variant built") == std::string::npos);
  const Kernel v = k.forDims(std::vector<int64_t>{37, 40000});
  CHECK(&v.compiled() != &k.compiled());
  REQUIRE(v.compiled().kernels.size() == 1);
  CHECK(v.compiled().kernels[0].config.find("\"threads_per_row\": 512") != std::string::npos);
  CHECK(v.compiled().kernels[0].config.find("one_step") == std::string::npos);
  CHECK(v.compiled().kernels[0].launch.preferred.at(0).min == 32769);
  // Every length of its range (to 256 KB): the same variant; the variant
  // stands for itself.
  CHECK(v.compiled().kernels[0].launch.preferred.at(0).max == 131072);
  CHECK(&k.forDims(std::vector<int64_t>{1, 100000}).compiled() == &v.compiled());
  CHECK(&k.forDims(std::vector<int64_t>{1, 131072}).compiled() == &v.compiled());
  CHECK(&v.forDims(std::vector<int64_t>{1, 5}).compiled() == &v.compiled());
  // By name, in any order; a missing or unknown dim is an error naming it.
  CHECK(&k.forDims(std::map<std::string, int64_t>{{"N", 100000}, {"R", 3}}).compiled() == &v.compiled());
  CHECK(&k.forDims(std::map<std::string, int64_t>{{"N", 1000}, {"R", 3}}).compiled() == &k.compiled());
  CHECK_THROWS_WITH(k.forDims(std::map<std::string, int64_t>{{"N", 1000}}),
                    Contains("Kernel::forDims: no value given for dynamic dim R (its dynamic dims: R, N)"));
  CHECK_THROWS_WITH(k.forDims(std::map<std::string, int64_t>{{"N", 1000}, {"R", 3}, {"Q", 1}}),
                    Contains("Kernel::forDims: the graph has no dynamic dim named Q"));
  CHECK_THROWS_WITH(k.forDims(std::map<std::string, int64_t>{{"N", -1}, {"R", 3}}), Contains("N = -1 is negative"));
  // Longer rows (sm_90): looped clusters, 8 blocks up to 512 KB, 16 beyond,
  // each range a variant of its own (hint classes part them).
  const Kernel c8 = k.forDims(std::vector<int64_t>{1, 131073});
  const Kernel c16 = k.forDims(std::vector<int64_t>{1, 1 << 20});
  CHECK(&c8.compiled() != &v.compiled());
  CHECK(&c16.compiled() != &c8.compiled());
  CHECK(c8.compiled().kernels.at(0).launch.cluster == 8);
  CHECK(c16.compiled().kernels.at(0).launch.cluster == 16);
  CHECK(&k.forDims(std::vector<int64_t>{1, 262144}).compiled() == &c8.compiled());
  CHECK(&k.forDims(std::vector<int64_t>{1, 262145}).compiled() == &c16.compiled());
  const std::string e = k.explain();
  INFO(e);
  CHECK(e.find("variant built for a launch outside the ranges above (hints N=40000)") != std::string::npos);
  CHECK(e.find("for dim N in [32769, ") != std::string::npos);
  // Rows of 16385 to 32768 (up to 64 KB): 512 threads too, a variant of
  // their own.
  const Kernel l = k.forDims(std::vector<int64_t>{37, 20000});
  CHECK(&l.compiled() != &v.compiled());
  CHECK(l.compiled().kernels.at(0).config.find("\"threads_per_row\": 512") != std::string::npos);
  CHECK(l.compiled().kernels.at(0).launch.preferred.at(0) == compiler::LaunchGeometry::DimRange{"N", 16385, 32768});
  CHECK(&k.forDims(std::vector<int64_t>{37, 32768}).compiled() == &l.compiled());
  CHECK(&k.forDims(std::vector<int64_t>{37, 32769}).compiled() == &v.compiled());
  // Rows of 8193 to 16384 bf16 values: looped at 256 threads.
  const Kernel m = k.forDims(std::vector<int64_t>{37, 12000});
  CHECK(m.compiled().kernels.at(0).config.find("\"threads_per_row\": 256") != std::string::npos);
  CHECK(m.compiled().kernels.at(0).config.find("one_step") == std::string::npos);
  CHECK(&k.forDims(std::vector<int64_t>{37, 16384}).compiled() == &m.compiled());
  CHECK(&k.forDims(std::vector<int64_t>{37, 8193}).compiled() == &m.compiled());
  CHECK(&k.forDims(std::vector<int64_t>{37, 16385}).compiled() == &l.compiled());
  // 4097 to 8192: one step of 256 threads x 4 vectors, a third variant,
  // with its one-step entry; explain names it.
  const Kernel s = k.forDims(std::vector<int64_t>{37, 8192});
  CHECK(&s.compiled() != &m.compiled());
  CHECK(s.compiled().kernels.at(0).config.find("\"threads_per_row\": 256") != std::string::npos);
  CHECK(s.compiled().kernels.at(0).config.find("\"one_step\": 4") != std::string::npos);
  CHECK(s.explain().find("one-step entry where dim N is at most 8192") != std::string::npos);
  // Bad values: the count and negative dims, named.
  CHECK_THROWS_WITH(k.forDims(std::vector<int64_t>{37}), Catch::Contains("1 dim value(s) given, but the graph has 2"));
  CHECK_THROWS_WITH(k.forDims(std::vector<int64_t>{37, -1}), Catch::Contains("dim N = -1 is negative"));
}

// CompileOptions::dims configure the first build too: a long dynamic row
// length given there needs no variant.
TEST_CASE("compile options' dims configure a dynamic row length's kernel", "[compile][reduction]") {
  Graph g;
  g.output("y", softmax(g.input("x", DType::F32, {"R", "N"}), -1));
  CompileOptions o;
  o.chip = "sm_90";
  o.diskCache = false;
  o.tune = CompileOptions::Tune::Off;
  o.dims = {{"R", 64}, {"N", 100000}};
  const Kernel k = compile(g, o);
  REQUIRE(k.compiled().kernels.size() == 1);
  CHECK(k.compiled().kernels[0].config.find("\"threads_per_row\": 512") != std::string::npos);
  CHECK(&k.forDims(std::vector<int64_t>{64, 100000}).compiled() == &k.compiled());
  // Short rows from it: a variant (128 threads a row).
  const Kernel s = k.forDims(std::vector<int64_t>{64, 1000});
  CHECK(&s.compiled() != &k.compiled());
  CHECK(s.compiled().kernels.at(0).config.find("\"threads_per_row\": 128") != std::string::npos);
  // Without dims: the short-row build, another Kernel.
  o.dims.clear();
  const Kernel plain = compile(g, o);
  CHECK(&plain.compiled() != &k.compiled());
  CHECK(plain.compiled().kernels.at(0).config.find("\"threads_per_row\": 128") != std::string::npos);
}

// Rows of many bytes per value (eight f32 inputs: 32 bytes) reach the
// dynamic-length bounds early (512 and 1024 values): hints either side of
// them compile to other configs, and their classes differ (the disk cache
// and the facade's variants key on the class).
TEST_CASE("grid: a wide row's short bounds are told apart by hint classes", "[compile][reduction]") {
  Graph g;
  Tensor s = g.input("x0", DType::F32, {"B", "N"});
  for (int i = 1; i < 8; ++i) s = s + g.input("x" + std::to_string(i), DType::F32, {"B", "N"});
  g.output("y", softmax(s, -1));
  const compiler::CompileOptions base{.chip = "sm_90", .smCount = 132};
  struct Want {
    int64_t hint;
    int threads;
  };
  for (const Want& w : {Want{300, 128}, Want{512, 128}, Want{600, 256}, Want{1024, 256}, Want{1025, 512}}) {
    INFO("N = " << w.hint);
    compiler::CompileOptions o = base;
    o.dimHints["N"] = w.hint;
    const compiler::CompiledKernel k = compiler::compileGraph(g, o).kernels.at(0);
    CHECK(k.launch.threadsPerBlock == w.threads);
    o.dimHints["N"] = compiler::dimHintClass(w.hint);
    CHECK(compiler::compileGraph(g, o).kernels.at(0).launch.threadsPerBlock == w.threads);
  }
  CHECK(compiler::dimHintClass(300) != compiler::dimHintClass(600));
  CHECK(compiler::dimHintClass(600) != compiler::dimHintClass(1025));
  // The looped clusters' bounds (bf16 131072 and 262144) part classes too.
  CHECK(compiler::dimHintClass(131072) != compiler::dimHintClass(131073));
  CHECK(compiler::dimHintClass(262144) != compiler::dimHintClass(262145));
  CHECK(compiler::dimHintClass(int64_t{1} << 40) == compiler::dimHintClass(262145));
}

// Every hint compiles to its class's config (the disk cache and the
// facade's variants key a hint by dimHintClass): lengths either side of
// every power of two up to 2^22, and odd ones between, for row kernels of
// 2 to 32 bytes per value on sm_90 and sm_80. A bound of the dynamic rule
// that no class boundary matches fails here.
TEST_CASE("grid: every dynamic row length's hint compiles to its class's config", "[compile][reduction]") {
  struct G {
    std::string label;
    Graph g;
  };
  std::vector<G> graphs;
  for (DType t : {DType::BF16, DType::F32}) {
    Graph a;
    a.output("y", softmax(a.input("x", t, {"B", "N"}), -1));
    graphs.push_back({"softmax " + std::string(dtypeName(t)), std::move(a)});
    Graph b;
    b.output("y", rmsnorm(b.input("x", t, {"B", "N"}), b.input("w", t, {"N"}), 1e-6));
    graphs.push_back({"rmsnorm " + std::string(dtypeName(t)), std::move(b)});
    Graph c;
    c.output("y", layernorm(c.input("x", t, {"B", "N"}), c.input("w", t, {"N"}), c.input("b", t, {"N"}), 1e-5));
    graphs.push_back({"layernorm " + std::string(dtypeName(t)), std::move(c)});
  }
  Graph wide;
  Tensor s = wide.input("x0", DType::F32, {"B", "N"});
  for (int i = 1; i < 8; ++i) s = s + wide.input("x" + std::to_string(i), DType::F32, {"B", "N"});
  wide.output("y", softmax(s, -1));
  graphs.push_back({"softmax of eight f32 inputs", std::move(wide)});
  std::vector<int64_t> lengths;
  for (int k = 1; k <= 22; ++k) {
    const int64_t p = int64_t{1} << k;
    for (int64_t n : {p - 1, p, p + 1, p + p / 3}) lengths.push_back(n);
  }
  for (const char* chip : {"sm_90", "sm_80"})
    for (const G& gc : graphs) {
      INFO(gc.label << " on " << chip);
      std::set<std::string> configs;
      for (int64_t n : lengths) {
        INFO("N = " << n << ", class " << compiler::dimHintClass(n));
        compiler::CompileOptions o{.chip = chip, .smCount = 132};
        o.dimHints["N"] = n;
        const std::vector<compiler::KernelTuningInfo> at = compiler::describeKernels(gc.g, o);
        o.dimHints["N"] = compiler::dimHintClass(n);
        const std::vector<compiler::KernelTuningInfo> cls = compiler::describeKernels(gc.g, o);
        REQUIRE(at.size() == 1);
        REQUIRE(cls.size() == 1);
        CHECK(at[0].defaultConfig == cls[0].defaultConfig);
        configs.insert(at[0].defaultConfig);
      }
      // (The hints do select configs: one-step widths, threads, clusters.)
      CHECK(configs.size() >= 3);
    }
}
