// Lesson 3: tune offline, ship the results, start warm.
//
// kiln picks each kernel's config with a heuristic. The tuner can do better
// on a given GPU and shape by measuring: it compiles every candidate of the
// schedule's config space in parallel, drops those whose resource report
// rules them out, checks the rest against the reference, and times them.
// That takes a second or two per kernel, so it belongs offline: run it once
// on the GPU you ship for, then ship two things next to the application:
//   DIR/tuning.json  the tuning database (which config, for which kernel,
//                    device and shape bucket, how fast it ran);
//   DIR/kernels/     the disk cache holding the tuned kernels' cubins.
// The application points KILN_TUNING_PATH and KILN_CACHE_DIR at them (here
// it does so itself, before its first kiln call). Its first run then
// compiles nothing and benchmarks nothing; kiln::stats() proves it.
//
//   lesson_03_tuning tune DIR   offline: tune, write DIR/tuning.json and DIR/kernels
//   lesson_03_tuning app DIR    the application: load, check, run
//   lesson_03_tuning [DIR]      both, the application in a second process
//                               (DIR defaults to ./lesson3-ship)
//
// Without a GPU there is nothing to tune or run: the lesson says so.
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "kiln/autotune/tuning_db.h"
#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;
namespace fs = std::filesystem;

extern char** environ;

namespace {

// The application's kernels: softmax over bf16 rows and a bias + GELU, both
// with a dynamic row count. They run at 4096 rows; the tuned configs serve
// the shape bucket of that size (rows 2049..4096).
constexpr int64_t kRows = 4096, kCols = 4096;

struct AppKernel {
  const char* name;
  Graph graph;
};

std::vector<AppKernel> appKernels() {
  std::vector<AppKernel> ks;
  {
    Graph g;
    g.output("y", softmax(g.input("x", DType::BF16, {"rows", kCols})));
    ks.push_back({"softmax", std::move(g)});
  }
  {
    Graph g;
    g.output("y", gelu_tanh(g.input("x", DType::BF16, {"rows", kCols}) + g.input("b", DType::BF16, {kCols})));
    ks.push_back({"bias + gelu", std::move(g)});
  }
  return ks;
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

int tuneOffline(const fs::path& dir) {
  fs::create_directories(dir / "kernels");
  setenv("KILN_CACHE_DIR", (dir / "kernels").c_str(), 1);  // the tuned kernels go into the shipped cache
  tune::TuningDbOptions dbo;
  dbo.searchPath = "";                  // read nothing else
  dbo.userFile = dir / "tuning.json";   // record here
  tune::TuningDatabase db(dbo);
  for (const AppKernel& k : appKernels()) {
    CompileOptions o;
    o.tune = CompileOptions::Tune::Always;
    o.tuningDatabase = &db;
    o.dims = {{"rows", kRows}};
    auto t0 = std::chrono::steady_clock::now();
    Kernel kernel = compile(k.graph, o);
    std::printf("tuned %-12s in %.2f s\n%s", k.name, msSince(t0) / 1000, kernel.explain().c_str());
  }
  Stats s = stats();
  std::printf("offline: %llu kernels compiled (candidates included), %llu candidates benchmarked; wrote %s\n",
              static_cast<unsigned long long>(s.kernelsCompiled),
              static_cast<unsigned long long>(s.candidatesBenchmarked), (dir / "tuning.json").c_str());
  return 0;
}

int runApp(const fs::path& dir) {
  // What an application does to use what it ships: before its first kiln call.
  setenv("KILN_TUNING_PATH", (dir / "tuning.json").c_str(), 1);
  setenv("KILN_CACHE_DIR", (dir / "kernels").c_str(), 1);

  rt::DeviceBuffer warm(16);  // the driver and context first: not part of a kernel's warm start
  bool ok = true;
  std::mt19937_64 rng(std::random_device{}());
  for (const AppKernel& k : appKernels()) {
    CompileOptions o;
    o.dims = {{"rows", kRows}};  // the bucket to look up
    auto t0 = std::chrono::steady_clock::now();
    Kernel kernel = compile(k.graph, o);
    double warmMs = msSince(t0);
    const auto& ck = kernel.compiled().kernels.at(0);
    std::printf("%-12s graph to launchable kernel in %.3f ms (cache: %s), config %s\n", k.name, warmMs,
                ck.cache.c_str(), ck.config.c_str());

    // Run it at full size, and check the first 16 rows against the reference.
    const int64_t checkRows = 16;
    EvalInputs in = randomInputs(k.graph, {{"rows", kRows}}, rng());
    std::vector<rt::DeviceBuffer> bufs;
    std::vector<TensorView> views;
    for (int id : k.graph.params()) {
      const HostTensor& h = in.tensors.at(k.graph.node(id).name);
      bufs.push_back(rt::DeviceBuffer::fromHost({static_cast<const uint8_t*>(h.data()), h.bytes()}));
      views.emplace_back(bufs.back().data(), h.dtype(), h.shape());
    }
    const Node& out = k.graph.node(k.graph.outputs()[0].node);
    bufs.emplace_back(static_cast<size_t>(kRows * kCols * dtypeSize(out.dtype)));
    bufs.back().poison();
    views.emplace_back(bufs.back().data(), out.dtype, std::vector<int64_t>{kRows, kCols});
    const std::vector<int64_t> dims{kRows};
    auto launch = [&] { kernel.launch(std::span<const TensorView>(views), std::span<const int64_t>(dims)); };
    launch();

    EvalInputs few = in;
    few.dims = {{"rows", checkRows}};
    HostTensor& x = few.tensors.at("x");
    HostTensor xs(x.dtype(), {checkRows, kCols});
    std::memcpy(xs.data(), x.data(), xs.bytes());
    x = xs;
    EvalOutput want = evaluate(k.graph, few).at(0);
    HostTensor got(out.dtype, {checkRows, kCols});
    bufs.back().download(got.data(), got.bytes());
    int64_t bad = 0;
    for (int64_t e = 0; e < got.numel(); ++e)
      if (!(std::fabs(got.get(e) - want.exact[e]) <= 1.6e-2 * std::max(1e-2, std::fabs(want.exact[e])))) ++bad;
    rt::BenchmarkOptions bo;
    bo.flushL2 = true;
    double us = rt::benchmark(launch, bo).medianUs;
    double bytes = 2.0 * kRows * kCols * 2;
    std::printf("%-12s %lld of %lld checked values wrong; %.1f us, %.2f TB/s\n", k.name, static_cast<long long>(bad),
                static_cast<long long>(got.numel()), us, bytes / (us * 1e-6) / 1e12);
    ok = ok && bad == 0;
  }
  Stats s = stats();
  std::printf("application: %llu kernels compiled, %llu loaded from the disk cache, %llu tuning-database hits, "
              "%llu candidates benchmarked\n",
              static_cast<unsigned long long>(s.kernelsCompiled),
              static_cast<unsigned long long>(s.kernelsFromDiskCache), static_cast<unsigned long long>(s.tuningHits),
              static_cast<unsigned long long>(s.candidatesBenchmarked));
  if (s.kernelsCompiled != 0 || s.candidatesBenchmarked != 0 || s.tuningHits != 2) {
    std::printf("expected nothing compiled, nothing benchmarked and 2 hits: was `tune` run with this build on this "
                "GPU?\n");
    return 1;
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "both";
  if (mode != "tune" && mode != "app" && mode != "both") {
    // `lesson_03_tuning DIR`: both steps into DIR.
    mode = "both";
  }
  fs::path dir = argc > 2 ? argv[2] : (argc == 2 && std::string(argv[1]) != "both" && std::string(argv[1]) != "tune" &&
                                               std::string(argv[1]) != "app"
                                           ? argv[1]
                                           : "lesson3-ship");
  if (!rt::driverAvailable()) {
    std::printf("no GPU here: %s\nTuning measures kernels on the GPU they will run on; run this lesson on a machine "
                "with an NVIDIA GPU.\n",
                rt::driverUnavailableReason().c_str());
    return 0;
  }
  dir = fs::absolute(dir);
  try {
    if (mode == "tune") return tuneOffline(dir);
    if (mode == "app") return runApp(dir);
    // Both: start from nothing (only what this lesson writes is removed),
    // tune, then the application in a process of its own (a real first run:
    // nothing in memory).
    std::error_code ec;
    fs::remove(dir / "tuning.json", ec);
    fs::remove_all(dir / "kernels", ec);
    if (int rc = tuneOffline(dir)) return rc;
    std::printf("\n-- the application, first run, in a new process\n");
    std::fflush(stdout);
    std::string self = fs::read_symlink("/proc/self/exe").string(), app = "app", d = dir.string();
    std::vector<char*> av{self.data(), app.data(), d.data(), nullptr};
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, av.data(), environ) != 0) return 1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lesson_03_tuning: %s\n", e.what());
    return 1;
  }
}
