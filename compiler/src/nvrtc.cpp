#include "kiln/compiler/nvrtc.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

#include "kiln/compiler/backend.h"
#include "kiln/error.h"
#include "toolkit_lib.h"

namespace kiln::compiler {

namespace {

// The few NVRTC entry points kiln uses (nvrtc.h's types, declared here so
// that no CUDA header is needed to build).
using Program = void*;
struct NvrtcApi {
  void* lib = nullptr;
  std::string path;
  int (*version)(int*, int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*, const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*ptxSize)(Program, size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*logSize)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*errorString)(int) = nullptr;
};

template <typename Fn>
bool bind(void* lib, Fn& fn, const char* name) {
  void* sym = ::dlsym(lib, name);
  fn = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

// Loaded once per process, never unloaded.
const NvrtcApi* nvrtcApi(const std::string& cudaHome, std::string* why) {
  return loadToolkitApi<NvrtcApi>(cudaHome, "libnvrtc.so.13", [](void* h, NvrtcApi& a) {
    return bind(h, a.version, "nvrtcVersion") && bind(h, a.create, "nvrtcCreateProgram") &&
           bind(h, a.compile, "nvrtcCompileProgram") && bind(h, a.ptxSize, "nvrtcGetPTXSize") &&
           bind(h, a.ptx, "nvrtcGetPTX") && bind(h, a.logSize, "nvrtcGetProgramLogSize") &&
           bind(h, a.log, "nvrtcGetProgramLog") && bind(h, a.destroy, "nvrtcDestroyProgram") &&
           bind(h, a.errorString, "nvrtcGetErrorString");
  }, why);
}

std::string programLog(const NvrtcApi& api, Program p) {
  size_t size = 0;
  if (api.logSize(p, &size) != 0 || size <= 1) return {};
  std::string log(size, '\0');
  if (api.log(p, log.data()) != 0) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  return log;
}

}  // namespace

bool nvrtcAvailable(const std::string& cudaHome, std::string* why) {
  return nvrtcApi(cudaHome.empty() ? defaultCudaHome() : cudaHome, why) != nullptr;
}

std::string nvrtcVersion(const std::string& cudaHome) {
  const NvrtcApi* api = nvrtcApi(cudaHome.empty() ? defaultCudaHome() : cudaHome, nullptr);
  int major = 0, minor = 0;
  if (!api || api->version(&major, &minor) != 0) return "";
  return std::to_string(major) + "." + std::to_string(minor);
}

CudaToPtxResult cudaToPtx(std::string_view source, const CudaCompileOptions& o) {
  auto t0 = std::chrono::steady_clock::now();
  const std::string cudaHome = o.cudaHome.empty() ? defaultCudaHome() : o.cudaHome;
  std::string why;
  const NvrtcApi* api = nvrtcApi(cudaHome, &why);
  if (!api) throw Error("cudaToPtx (NVRTC): " + why);
  if (o.arch.rfind("compute_", 0) != 0)
    throw Error("cudaToPtx (NVRTC): arch '" + o.arch +
                "' is not a virtual architecture (compute_XX): kiln takes PTX from NVRTC and makes the cubin with "
                "ptxas");

  CudaToPtxResult r;
  r.args = {"--gpu-architecture=" + o.arch, "-std=c++17", "-default-device", "-I" + cudaHome + "/include"};
  if (o.fastMath) r.args.push_back("--use_fast_math");
  for (const std::string& a : o.extraArgs) r.args.push_back(a);
  std::vector<const char*> argv;
  for (const std::string& a : r.args) argv.push_back(a.c_str());

  std::string text(source);
  Program prog = nullptr;
  int rc = api->create(&prog, text.c_str(), o.name.c_str(), 0, nullptr, nullptr);
  if (rc != 0 || !prog)
    throw Error("cudaToPtx (NVRTC): nvrtcCreateProgram failed for " + o.name + ": " + api->errorString(rc));
  struct Destroy {
    const NvrtcApi* api;
    Program* p;
    ~Destroy() { api->destroy(p); }
  } destroy{api, &prog};

  rc = api->compile(prog, static_cast<int>(argv.size()), argv.data());
  r.log = programLog(*api, prog);
  if (rc != 0) {
    std::string args;
    for (const std::string& a : r.args) args += " " + a;
    throw Error("cudaToPtx (NVRTC " + nvrtcVersion(cudaHome) + "): " + o.name + " did not compile (" +
                api->errorString(rc) + "; options" + args + "):\n" + (r.log.empty() ? "(no log)" : r.log));
  }
  size_t size = 0;
  if (api->ptxSize(prog, &size) != 0 || size == 0) throw Error("cudaToPtx (NVRTC): no PTX produced for " + o.name);
  r.ptx.assign(size, '\0');
  if (api->ptx(prog, r.ptx.data()) != 0) throw Error("cudaToPtx (NVRTC): cannot read the PTX of " + o.name);
  while (!r.ptx.empty() && r.ptx.back() == '\0') r.ptx.pop_back();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kiln::compiler
