// Warm start: the time from a graph in hand to a launchable kernel when the
// kernel is in the disk cache, in a process that has compiled nothing yet
// (what an application's first run sees when it ships its cache).
//
//   bench_warm_start [N]   fills a fresh cache with N graphs (softmax, norms,
//                          gelu: distinct row lengths), then starts itself
//                          again and times kiln::compile of each, one by one
//
// The first compile of a process also pays one-time costs (the driver's
// context when a GPU is present, the cache directory, the tuning database);
// it is reported apart from the others, and a third process times its
// parts (device properties, cache read, module load) for two kernels. With a GPU, a compile includes
// loading the module (cuModuleLoadData). The cache lives in a temporary
// directory that is removed at the end.
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/module.h"

extern char** environ;

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<Graph> graphs(int n) {
  std::vector<Graph> gs;
  for (int i = 0; i < n; ++i) {
    const int64_t len = 1024 + 64 * i;
    Graph g;
    Tensor x = g.input("x", DType::BF16, {"rows", len});
    switch (i % 3) {
      case 0: g.output("y", softmax(x)); break;
      case 1: g.output("y", rmsnorm(x, g.input("w", DType::BF16, {len}), 1e-6)); break;
      default: g.output("y", gelu_tanh(x + g.input("b", DType::BF16, {len}))); break;
    }
    gs.push_back(std::move(g));
  }
  return gs;
}

double msSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

// Where the first kernel's time goes: the parts of a compile() timed one by
// one for the first two graphs (cache read, then module load on a GPU),
// in a process of their own.
int breakdown() {
  std::vector<Graph> gs = graphs(2);
  if (rt::driverAvailable()) {
    rt::DeviceBuffer warm(16);
    // The device queries, one by one, the first time in this process.
    const rt::Driver& d = rt::driver();
    CUdevice dev = 0;
    rt::check(d.ctxGetDevice(&dev), "cuCtxGetDevice");
    auto time = [](const char* what, const std::function<void()>& fn) {
      auto t = std::chrono::steady_clock::now();
      fn();
      std::printf("breakdown: %-40s %.3f ms\n", what, msSince(t));
    };
    time("Device::basics (cc, SM count)", [] { rt::Device::current().basics(); });
    char name[256] = {};
    time("cuDeviceGetName", [&] { d.deviceGetName(name, sizeof(name) - 1, dev); });
    size_t mem = 0;
    time("cuDeviceTotalMem", [&] { d.deviceTotalMem(&mem, dev); });
    int v = 0;
    time("cuDeviceGetAttribute(CLOCK_RATE)", [&] { d.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev); });
    time("cuDeviceGetAttribute(MEMORY_CLOCK_RATE)",
         [&] { d.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, dev); });
    time("cuDeviceGetAttribute(L2_CACHE_SIZE)", [&] { d.deviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev); });
    time("Device::properties (the rest)", [] { rt::Device::current().properties(); });
  }
  for (int i = 0; i < 2; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    compiler::CompileOptions co;
    co.variants = compiler::EntryVariants::VectorOnly;
    if (rt::driverAvailable()) {
      co.chip = rt::Device::current().basics().arch();
      co.smCount = rt::Device::current().basics().smCount;
    }
    double propsMs = msSince(t0);
    auto t1 = std::chrono::steady_clock::now();
    compiler::CompiledGraph cg = compileGraphCached(gs[static_cast<size_t>(i)], co);
    double readMs = msSince(t1);
    double loadMs = 0;
    if (rt::driverAvailable()) {
      auto t2 = std::chrono::steady_clock::now();
      const auto& cubin = cg.kernels.at(0).cubin;
      rt::Module m = rt::Module::load(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(cubin.data()), cubin.size()));
      loadMs = msSince(t2);
    }
    std::printf("breakdown, kernel %d of the process: device properties %.3f ms, disk-cache read %.3f ms (%s), "
                "cuModuleLoadData %.3f ms\n",
                i, propsMs, readMs, cg.kernels.at(0).cache.c_str(), loadMs);
  }
  return 0;
}

int measure(int n) {
  std::vector<Graph> gs = graphs(n);
  if (rt::driverAvailable()) rt::DeviceBuffer warm(16);  // the context: not a kernel's cost
  std::vector<double> ms;
  for (const Graph& g : gs) {
    auto t0 = std::chrono::steady_clock::now();
    Kernel k = compile(g);
    ms.push_back(msSince(t0));
    if (k.compiled().kernels.at(0).cache != "hit") {
      std::printf("bench_warm_start: kernel %zu was not a cache hit (%s)\n", ms.size() - 1,
                  k.compiled().kernels.at(0).cache.c_str());
      return 1;
    }
  }
  std::vector<double> rest(ms.begin() + 1, ms.end());
  std::sort(rest.begin(), rest.end());
  double median = rest.empty() ? ms[0] : rest[rest.size() / 2];
  double worst = rest.empty() ? ms[0] : rest.back();
  Stats s = stats();
  std::printf("warm start (%s): first kernel of the process %.3f ms; the next %zu: median %.3f ms, max %.3f ms per "
              "kernel (%llu compiled, %llu from the disk cache)\n",
              rt::driverAvailable() ? "GPU: includes cuModuleLoadData" : "no GPU: cache read and deserialize",
              ms[0], rest.size(), median, worst, static_cast<unsigned long long>(s.kernelsCompiled),
              static_cast<unsigned long long>(s.kernelsFromDiskCache));
  std::printf("JSON {\"op\": \"warm start\", \"gpu\": %s, \"first_ms\": %.4f, \"median_ms\": %.4f, \"max_ms\": %.4f}\n",
              rt::driverAvailable() ? "true" : "false", ms[0], median, worst);
  return s.kernelsCompiled == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--measure") return measure(std::atoi(argv[2]));
  if (argc > 1 && std::string(argv[1]) == "--breakdown") return breakdown();
  const int n = argc > 1 ? std::max(2, std::atoi(argv[1])) : 12;
  fs::path dir = fs::temp_directory_path() / ("kiln-warm-start-" + std::to_string(std::random_device{}()));
  setenv("KILN_CACHE_DIR", dir.c_str(), 1);
  auto t0 = std::chrono::steady_clock::now();
  for (const Graph& g : graphs(n)) compile(g);
  std::printf("filled %s with %d graphs in %.0f ms\n", dir.c_str(), n, msSince(t0));
  std::fflush(stdout);
  std::string self = fs::read_symlink("/proc/self/exe").string(), flag = "--measure", count = std::to_string(n);
  std::vector<char*> av{self.data(), flag.data(), count.data(), nullptr};
  auto run = [&](std::vector<char*> args) {
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, args.data(), environ) != 0) return 1;
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  };
  int rc = run(av);
  std::string bd = "--breakdown";
  if (rc == 0) rc = run({self.data(), bd.data(), nullptr});
  std::error_code ec;
  fs::remove_all(dir, ec);
  return rc;
}
