// Tuning on the GPU: softmax and gelu(x + b) tuned at two shapes each into a
// fresh database; each tuned kernel is timed against the heuristic's and is
// never slower; then a second process with the same disk cache and the
// database compiles nothing and benchmarks nothing (kiln::stats()).
#include <catch2/catch.hpp>

#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>

#include "gpu_support.h"
#include "kiln/autotune/tuning_db.h"
#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

extern char** environ;

using namespace kiln;
namespace fs = std::filesystem;

namespace {

struct TuneCase {
  std::string label;
  Graph graph;
  int64_t rows;
};

std::vector<TuneCase> tuneCases() {
  std::vector<TuneCase> cases;
  for (auto [len, rows] : {std::pair<int64_t, int64_t>{4096, 16384}, {32768, 1024}}) {
    Graph g;
    g.output("y", softmax(g.input("x", DType::BF16, {Dim("R"), len})));
    cases.push_back({"softmax bf16 [" + std::to_string(rows) + ", " + std::to_string(len) + "]", std::move(g), rows});
  }
  for (int64_t rows : {16384, 64}) {
    Graph g;
    g.output("y", gelu_tanh(g.input("x", DType::BF16, {Dim("R"), 4096}) + g.input("b", DType::BF16, {4096})));
    cases.push_back({"gelu(x + b) bf16 [" + std::to_string(rows) + ", 4096]", std::move(g), rows});
  }
  return cases;
}

// Buffers for one launch of a case (zeros in, outputs out).
struct Buffers {
  std::vector<rt::DeviceBuffer> bufs;
  std::vector<TensorView> views;
  std::vector<int64_t> dims;
  explicit Buffers(const TuneCase& c) {
    DimBindings b{{"R", c.rows}};
    auto add = [&](DType t, const Shape& s) {
      std::vector<int64_t> shape = resolveShape(s, b);
      size_t bytes = static_cast<size_t>(dtypeSize(t));
      for (int64_t d : shape) bytes *= static_cast<size_t>(d);
      bufs.emplace_back(bytes + 256);
      bufs.back().fill(0);
      views.emplace_back(bufs.back().data(), t, shape);
    };
    for (int id : c.graph.params()) add(c.graph.node(id).dtype, c.graph.node(id).shape);
    for (const GraphOutput& o : c.graph.outputs()) add(c.graph.node(o.node).dtype, c.graph.node(o.node).shape);
    dims = {c.rows};
  }
  void launch(const Kernel& k) { k.launch(std::span<const TensorView>(views), std::span<const int64_t>(dims)); }
};

std::string selfExe() { return fs::read_symlink("/proc/self/exe").string(); }

}  // namespace

TEST_CASE("tuning: softmax and gelu(x + b) at two shapes each, never slower than the heuristic; a second process "
          "compiles and benchmarks nothing",
          "[gpu][tuning]") {
  test::requireGpu();
  fs::path dir = fs::temp_directory_path() / ("kiln-tuning-gpu-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir / "config");
  const fs::path dbFile = dir / "tuning.json";
  tune::TuningDbOptions dbo;
  dbo.searchPath = "";
  dbo.userFile = dbFile;
  tune::TuningDatabase db(dbo);

  std::vector<TuneCase> cases = tuneCases();
  for (const TuneCase& c : cases) {
    INFO(c.label);
    CompileOptions o;
    o.tune = CompileOptions::Tune::Always;
    o.tuningDatabase = &db;
    o.dims = {{"R", c.rows}};
    Stats before = stats();
    auto t0 = std::chrono::steady_clock::now();
    Kernel tuned = compile(c.graph, o);
    double wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    CHECK(stats().kernelsTuned == before.kernelsTuned + 1);
    CHECK(stats().candidatesBenchmarked > before.candidatesBenchmarked + 4);
    CHECK_THAT(tuned.explain(), Catch::Contains("tuned now"));

    CompileOptions off;
    off.tune = CompileOptions::Tune::Off;
    Kernel heuristic = compile(c.graph, off);

    // Both timed the same way, interleaved, each first in every other round
    // (the first timing of a pair ran 1-7% slower on the H200 even when both
    // kernels had the same config); the better of four rounds each.
    Buffers b(c);
    rt::BenchmarkOptions bo;
    bo.warmup = 5;
    bo.iters = 60;
    bo.flushL2 = true;
    double tunedUs = 1e30, heurUs = 1e30;
    for (int round = 0; round < 4; ++round) {
      auto timeTuned = [&] { tunedUs = std::min(tunedUs, rt::benchmark([&] { b.launch(tuned); }, bo).medianUs); };
      auto timeHeur = [&] { heurUs = std::min(heurUs, rt::benchmark([&] { b.launch(heuristic); }, bo).medianUs); };
      if (round % 2 == 0) {
        timeTuned();
        timeHeur();
      } else {
        timeHeur();
        timeTuned();
      }
    }
    std::printf("tuning %-32s %.2f s wall, %llu candidates timed; heuristic %s %.2f us, tuned %s %.2f us (%.3fx)\n",
                c.label.c_str(), wallS,
                static_cast<unsigned long long>(stats().candidatesBenchmarked - before.candidatesBenchmarked),
                heuristic.compiled().kernels[0].config.c_str(), heurUs, tuned.compiled().kernels[0].config.c_str(),
                tunedUs, heurUs / tunedUs);
    // Never slower: the same config is the same kernel (two timings of it
    // differed by up to 0.45 us at 5 us on the H200: noise); another config
    // must be within this measurement's noise, 2% or 0.5 us (one event tick).
    if (tuned.compiled().kernels[0].config != heuristic.compiled().kernels[0].config)
      CHECK(tunedUs <= std::max(heurUs * 1.02, heurUs + 0.5));
  }
  REQUIRE(fs::exists(dbFile));
  REQUIRE(tune::readTuningFile(dbFile).size() == cases.size());

  // The second process: the database shipped on KILN_TUNING_PATH, an empty
  // user config, the same disk cache (KILN_CACHE_DIR is inherited).
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string s = *e;
    if (s.rfind("KILN_TUNING_PATH=", 0) == 0 || s.rfind("XDG_CONFIG_HOME=", 0) == 0) continue;
    env.push_back(s);
  }
  env.push_back("KILN_TUNING_PATH=" + dbFile.string());
  env.push_back("XDG_CONFIG_HOME=" + (dir / "config").string());
  env.push_back("KILN_TEST_SECOND_PROCESS=1");
  std::vector<char*> envp;
  for (std::string& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = selfExe(), spec = "[.tuning-second-process]";
  std::vector<char*> argv{exe.data(), spec.data(), nullptr};
  pid_t pid = 0;
  REQUIRE(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()) == 0);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// Run only by the test above, in a process of its own.
TEST_CASE("tuning: the second process", "[.tuning-second-process]") {
  // main() resets KILN_TUNING_PATH for every test binary run; the parent's
  // value comes back through this marker.
  test::requireGpu();
  REQUIRE(std::getenv("KILN_TEST_SECOND_PROCESS") != nullptr);
  std::vector<TuneCase> cases = tuneCases();
  for (const TuneCase& c : cases) {
    INFO(c.label);
    CompileOptions o;
    o.dims = {{"R", c.rows}};
    Kernel k = compile(c.graph, o);
    CHECK_THAT(k.explain(), Catch::Contains("from the tuning database"));
    // From the disk cache, or from this process's registry when two cases
    // came out as the same graph with the same tuned config.
    CHECK((k.compiled().kernels[0].cache == "hit"));
    Buffers b(c);
    b.launch(k);
  }
  rt::DeviceBuffer(16).download();  // waits for the launches
  Stats s = stats();
  std::printf("second process: %llu kernels compiled, %llu from the disk cache, %llu tuning hits, %llu candidates "
              "benchmarked\n",
              static_cast<unsigned long long>(s.kernelsCompiled), static_cast<unsigned long long>(s.kernelsFromDiskCache),
              static_cast<unsigned long long>(s.tuningHits), static_cast<unsigned long long>(s.candidatesBenchmarked));
  CHECK(s.kernelsCompiled == 0);
  CHECK(s.candidatesBenchmarked == 0);
  CHECK(s.kernelsTuned == 0);
  CHECK(s.tuningHits == cases.size());
  CHECK(s.kernelsFromDiskCache >= 1);
}
