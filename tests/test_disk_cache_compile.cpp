// The disk cache seen from kiln::compileGraphCached: a second compile of an
// equal graph with equal options loads what the first stored; anything that
// changes the artifacts changes the key; a corrupt entry is rebuilt; the
// cache can be turned off.
#include <catch2/catch.hpp>

#include <algorithm>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "kiln/kiln.h"
#include "kiln/runtime/disk_cache.h"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// A fresh cache directory for one test, and a graph no other test builds
// (a random constant), so the first compile is always a miss.
struct FreshCache {
  fs::path dir;
  rt::DiskCache cache;
  FreshCache()
      : dir(fs::temp_directory_path() / ("kiln-cache-test-" + std::to_string(std::random_device{}()))),
        cache(dir.string()) {}
  ~FreshCache() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

Graph randomGraph() {
  Graph g;
  Tensor x = g.input("x", DType::F32, {"N", 256});
  static std::mt19937_64 rng(std::random_device{}());
  double c = std::uniform_real_distribution<double>(1, 2)(rng);
  g.output("y", softmax(x * c, -1));
  return g;
}

// Every field a launcher or a tool reads survives the round trip.
void requireSameKernels(const compiler::CompiledGraph& a, const compiler::CompiledGraph& b) {
  REQUIRE(a.kernels.size() == b.kernels.size());
  CHECK(a.graphText == b.graphText);
  CHECK(a.explain == b.explain);
  REQUIRE(a.workspace.size() == b.workspace.size());
  auto sameTensor = [](const compiler::KernelTensor& x, const compiler::KernelTensor& y) {
    return x.name == y.name && x.dtype == y.dtype && x.shape == y.shape && x.output == y.output &&
           x.workspace == y.workspace && x.alignment == y.alignment;
  };
  for (size_t i = 0; i < a.workspace.size(); ++i) CHECK(sameTensor(a.workspace[i], b.workspace[i]));
  for (size_t i = 0; i < a.kernels.size(); ++i) {
    const compiler::CompiledKernel &x = a.kernels[i], &y = b.kernels[i];
    INFO(x.name);
    CHECK(x.name == y.name);
    CHECK(x.schedule == y.schedule);
    CHECK(x.config == y.config);
    CHECK(x.why == y.why);
    REQUIRE(x.tensors.size() == y.tensors.size());
    for (size_t t = 0; t < x.tensors.size(); ++t) CHECK(sameTensor(x.tensors[t], y.tensors[t]));
    CHECK(x.dims == y.dims);
    REQUIRE(x.scalars.size() == y.scalars.size());
    for (size_t t = 0; t < x.scalars.size(); ++t)
      CHECK((x.scalars[t].name == y.scalars[t].name && x.scalars[t].dtype == y.scalars[t].dtype));
    REQUIRE(x.entries.size() == y.entries.size());
    for (size_t t = 0; t < x.entries.size(); ++t)
      CHECK((x.entries[t].name == y.entries[t].name && x.entries[t].vectorized == y.entries[t].vectorized &&
             x.entries[t].oneStep == y.entries[t].oneStep));
    CHECK(x.launch.threadsPerBlock == y.launch.threadsPerBlock);
    CHECK(x.launch.elementsPerBlock == y.launch.elementsPerBlock);
    CHECK(x.launch.iterShape == y.launch.iterShape);
    CHECK(x.launch.maxBlocks == y.launch.maxBlocks);
    CHECK(x.launch.tile == y.launch.tile);
    CHECK(x.launch.cluster == y.launch.cluster);
    CHECK(x.launch.sharedBytes == y.launch.sharedBytes);
    CHECK(x.launch.minBlocks == y.launch.minBlocks);
    CHECK(x.launch.resident == y.launch.resident);
    CHECK(x.launch.dimBounds == y.launch.dimBounds);
    CHECK(x.launch.vectorMultiples == y.launch.vectorMultiples);
    CHECK(x.launch.preferred == y.launch.preferred);
    CHECK(x.launch.oneStepRange == y.launch.oneStepRange);
    CHECK(x.source == y.source);
    REQUIRE(x.tensorMaps.size() == y.tensorMaps.size());
    for (size_t t = 0; t < x.tensorMaps.size(); ++t)
      CHECK((x.tensorMaps[t].tensor == y.tensorMaps[t].tensor && x.tensorMaps[t].boxInner == y.tensorMaps[t].boxInner &&
             x.tensorMaps[t].boxRows == y.tensorMaps[t].boxRows &&
             x.tensorMaps[t].clampRows == y.tensorMaps[t].clampRows &&
             x.tensorMaps[t].whenRowsAligned == y.tensorMaps[t].whenRowsAligned));
    CHECK(x.mlir == y.mlir);
    CHECK(x.ptx == y.ptx);
    CHECK(x.cubin == y.cubin);
    REQUIRE(x.resources.size() == y.resources.size());
    for (size_t t = 0; t < x.resources.size(); ++t) {
      CHECK(x.resources[t].kernel == y.resources[t].kernel);
      CHECK(x.resources[t].registers == y.resources[t].registers);
      CHECK(x.resources[t].spillStoreBytes == y.resources[t].spillStoreBytes);
      CHECK(x.resources[t].sharedBytes == y.resources[t].sharedBytes);
    }
    CHECK(x.stages.size() == y.stages.size());
    CHECK(x.compileMs == y.compileMs);
  }
}

}  // namespace

TEST_CASE("a multi-kernel graph with a workspace and scalars survives the disk cache field for field",
          "[compile][cache]") {
  FreshCache fc;
  Graph g;
  Tensor x = g.input("x", DType::BF16, {"R", 1000});
  Tensor t = g.input("t", DType::I32, {"R"});
  Tensor s = g.scalar("scale");
  // The scale after the mean too: a scalar keeps the mean a second kernel
  // (a grid tail takes no scalars).
  g.output("loss", cross_entropy(x * s, t, Reduction::Mean) * s);
  g.output("m", max(x, -1, false));
  // A dynamic row length (the vectorized entry needs whole vectors) and a
  // split row (its blocks' states in a workspace of its own).
  g.output("s", sum(g.input("v", DType::BF16, {"N"})));
  // A row kernel configured for a range of its dynamic row length.
  g.output("p", softmax(g.input("u", DType::F32, {"R", "L"}), -1));
  // A column sum of few outputs: the column form split across blocks (a
  // grid of tiles x parts, a workspace of its own).
  g.output("c", sum(g.input("w", DType::F32, {8192, 512}), {0}));
  compiler::CompileOptions o;
  compiler::CompiledGraph first = compileGraphCached(g, o, true, &fc.cache);
  REQUIRE(first.kernels.size() >= 2);
  REQUIRE(!first.workspace.empty());
  REQUIRE(std::any_of(first.kernels.begin(), first.kernels.end(), [](const compiler::CompiledKernel& k) {
    return k.config.find("\"threads_per_row\": 1,") != std::string::npos && k.config.find("\"split\"") != std::string::npos;
  }));
  // The mean over R rows counts them in 32 bits: a bound on R to carry over.
  REQUIRE(std::any_of(first.kernels.begin(), first.kernels.end(),
                      [](const compiler::CompiledKernel& k) { return !k.launch.dimBounds.empty(); }));
  REQUIRE(std::any_of(first.kernels.begin(), first.kernels.end(),
                      [](const compiler::CompiledKernel& k) { return !k.launch.vectorMultiples.empty(); }));
  REQUIRE(std::any_of(first.kernels.begin(), first.kernels.end(),
                      [](const compiler::CompiledKernel& k) { return !k.launch.preferred.empty(); }));
  // ... whose rows up to one step have an entry of their own.
  REQUIRE(std::any_of(first.kernels.begin(), first.kernels.end(), [](const compiler::CompiledKernel& k) {
    return !k.launch.oneStepRange.empty() &&
           std::any_of(k.entries.begin(), k.entries.end(), [](const compiler::KernelEntry& e) { return e.oneStep; });
  }));
  compiler::CompiledGraph second = compileGraphCached(g, o, true, &fc.cache);
  for (const auto& k : second.kernels) CHECK(k.cache == "hit");
  requireSameKernels(first, second);
  // Dim hints key the cache by class: a long-row hint is another entry,
  // and every value of its class the same one.
  compiler::CompileOptions longRows = o;
  longRows.dimHints["L"] = 40000;
  for (const auto& k : compileGraphCached(g, longRows, true, &fc.cache).kernels) CHECK(k.cache == "miss");
  longRows.dimHints["L"] = 50000;
  compiler::CompiledGraph again = compileGraphCached(g, longRows, true, &fc.cache);
  for (const auto& k : again.kernels) CHECK(k.cache == "hit");
  CHECK(std::any_of(again.kernels.begin(), again.kernels.end(), [](const compiler::CompiledKernel& k) {
    return !k.launch.preferred.empty() && k.launch.preferred[0].min == 16385;
  }));
}

TEST_CASE("a Hopper matmul with an epilogue survives the disk cache field for field", "[compile][cache][matmul]") {
  FreshCache fc;
  Graph g;
  Tensor y = matmul(g.input("a", DType::BF16, {"M", 256}), g.input("w", DType::BF16, {512, 256}), {false, true});
  static std::mt19937_64 rng(std::random_device{}());
  g.output("y", relu(y * std::uniform_real_distribution<double>(1, 2)(rng)));
  compiler::CompileOptions o;
  compiler::CompiledGraph first = compileGraphCached(g, o, true, &fc.cache);
  REQUIRE(first.kernels.size() == 1);
  REQUIRE(first.kernels[0].tensorMaps.size() == 3);  // a, w and y (TMA stores)
  REQUIRE(!first.kernels[0].launch.tile.empty());
  compiler::CompiledGraph second = compileGraphCached(g, o, true, &fc.cache);
  CHECK(second.kernels.at(0).cache == "hit");
  requireSameKernels(first, second);
}

TEST_CASE("a second compile of an equal graph is a disk-cache hit with the same cubins", "[compile][cache]") {
  FreshCache fc;
  Graph g = randomGraph();
  compiler::CompileOptions o;
  compiler::CompiledGraph first = compileGraphCached(g, o, true, &fc.cache);
  REQUIRE(first.kernels.size() == 1);
  CHECK(first.kernels[0].cache == "miss");
  auto t0 = std::chrono::steady_clock::now();
  compiler::CompiledGraph second = compileGraphCached(g, o, true, &fc.cache);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  WARN("warm start from the disk cache: " << ms << " ms for " << second.kernels.size() << " kernel(s)");
  REQUIRE(second.kernels.size() == 1);
  CHECK(second.kernels[0].cache == "hit");
  requireSameKernels(first, second);
}

TEST_CASE("what changes the artifacts changes the cache key", "[compile][cache]") {
  FreshCache fc;
  Graph g = randomGraph();
  compiler::CompileOptions o;
  (void)compileGraphCached(g, o, true, &fc.cache);
  compiler::CompileOptions other = o;
  SECTION("the chip") { other.chip = "sm_89"; }
  SECTION("a config override") { other.rowConfigOverride = "{\"threads_per_row\": 64}"; }
  SECTION("the entry variants") { other.variants = compiler::EntryVariants::ScalarOnly; }
  compiler::CompiledGraph cg = compileGraphCached(g, other, true, &fc.cache);
  CHECK(cg.kernels.at(0).cache == "miss");
}

TEST_CASE("a corrupt cache entry is rebuilt, and the cache can be turned off", "[compile][cache]") {
  FreshCache fc;
  Graph g = randomGraph();
  compiler::CompileOptions o;
  (void)compileGraphCached(g, o, true, &fc.cache);
  SECTION("corrupt") {
    // Flip a byte in the middle of every entry file.
    for (const auto& f : fs::recursive_directory_iterator(fc.dir)) {
      if (!f.is_regular_file()) continue;
      std::fstream s(f.path(), std::ios::in | std::ios::out | std::ios::binary);
      s.seekg(static_cast<std::streamoff>(f.file_size() / 2));
      char c = 0;
      s.read(&c, 1);
      c = static_cast<char>(c ^ 0x5a);
      s.seekp(static_cast<std::streamoff>(f.file_size() / 2));
      s.write(&c, 1);
    }
    compiler::CompiledGraph cg = compileGraphCached(g, o, true, &fc.cache);
    CHECK(cg.kernels.at(0).cache == "rebuilt");
    CHECK(compileGraphCached(g, o, true, &fc.cache).kernels.at(0).cache == "hit");
  }
  SECTION("off") { CHECK(compileGraphCached(g, o, false, &fc.cache).kernels.at(0).cache == "off"); }
}
