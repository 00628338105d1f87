// Loading libcuda.so.1 once, resolving its entry points and calling cuInit.
#include "kiln/runtime/driver.h"

#include <dlfcn.h>

#include <string>

#include "kiln/error.h"

#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "kiln's runtime uses the legacy default stream; build it without CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

namespace kiln::rt {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

struct LoadedDriver {
  Driver driver;
  std::string error;  // empty when loading succeeded
  int deviceCount = 0;
};

// The driver's name and description of a result, without touching loaded()
// (loadDriver runs inside loaded()'s initialization).
std::string describe(const Driver& d, CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (d.getErrorName) d.getErrorName(result, &name);
  if (d.getErrorString) d.getErrorString(result, &text);
  std::string out = name ? std::string(name) : "CUresult " + std::to_string(int(result));
  if (text) out += " (" + std::string(text) + ")";
  return out;
}

std::string dlerrorText() {
  const char* e = dlerror();
  return e ? std::string(e) : std::string("unknown error");
}

LoadedDriver loadDriver() {
  LoadedDriver out;
  dlerror();  // clear any stale error
  // Never dlclose'd: the driver stays loaded for the life of the process.
  void* lib = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    out.error = noDriverMessage(dlerrorText());
    return out;
  }
  Driver& d = out.driver;
  std::string missing;
#define KILN_CUDA_RESOLVE_REQUIRED(member, symbol)                            \
  d.member = reinterpret_cast<decltype(d.member)>(dlsym(lib, #symbol));       \
  if (!d.member) missing += (missing.empty() ? "" : ", ") + std::string(#symbol);
  KILN_CUDA_REQUIRED_ENTRY_POINTS(KILN_CUDA_RESOLVE_REQUIRED)
#undef KILN_CUDA_RESOLVE_REQUIRED
#define KILN_CUDA_RESOLVE_OPTIONAL(member, symbol) \
  d.member = reinterpret_cast<decltype(d.member)>(dlsym(lib, #symbol));
  KILN_CUDA_OPTIONAL_ENTRY_POINTS(KILN_CUDA_RESOLVE_OPTIONAL)
#undef KILN_CUDA_RESOLVE_OPTIONAL
  d.eventElapsedTime =
      reinterpret_cast<decltype(d.eventElapsedTime)>(dlsym(lib, "cuEventElapsedTime_v2"));
  if (!d.eventElapsedTime)
    d.eventElapsedTime =
        reinterpret_cast<decltype(d.eventElapsedTime)>(dlsym(lib, "cuEventElapsedTime"));
  if (!d.eventElapsedTime) missing += (missing.empty() ? "" : ", ") + std::string("cuEventElapsedTime");
  if (!missing.empty()) {
    out.error = "kiln: the CUDA driver (" + std::string(kDriverLibrary) +
                ") lacks entry points kiln needs: " + missing +
                "; the driver is too old, update it (kiln needs CUDA 12 or newer)";
    return out;
  }

  CUresult r = d.init(0);
  if (r != CUDA_SUCCESS) {
    out.error = "kiln: the CUDA driver was found but cuInit failed: " + describe(d, r) +
                (r == CUDA_ERROR_STUB_LIBRARY
                     ? "; libcuda.so.1 is the toolkit's stub, not a real driver"
                     : "") +
                "; this needs an NVIDIA GPU and driver";
    return out;
  }
  d.driverGetVersion(&d.version);
  if (d.deviceGetCount(&out.deviceCount) != CUDA_SUCCESS) out.deviceCount = 0;
  return out;
}

const LoadedDriver& loaded() {
  // A function-local static: initialized once, thread-safely (C++11).
  static const LoadedDriver instance = loadDriver();
  return instance;
}

}  // namespace

std::string noDriverMessage(const std::string& dlerrorText) {
  return "kiln: no CUDA driver found (" + std::string(kDriverLibrary) +
         " could not be loaded: " + dlerrorText + "); this needs an NVIDIA GPU and driver";
}

const Driver& driver() {
  const LoadedDriver& l = loaded();
  if (!l.error.empty()) [[unlikely]]
    throw Error(l.error);
  return l.driver;
}

bool driverAvailable() noexcept {
  try {
    const LoadedDriver& l = loaded();
    return l.error.empty() && l.deviceCount > 0;
  } catch (...) {
    return false;
  }
}

std::string driverUnavailableReason() noexcept {
  try {
    const LoadedDriver& l = loaded();
    if (!l.error.empty()) return l.error;
    if (l.deviceCount <= 0) return "kiln: the CUDA driver is loaded but sees no CUDA device";
    return "";
  } catch (...) {
    return "kiln: the CUDA driver could not be checked";
  }
}

std::string cuErrorText(CUresult result) noexcept {
  try {
    return describe(loaded().driver, result);
  } catch (...) {
    return "CUresult " + std::to_string(int(result));
  }
}

void throwCuError(CUresult result, const char* call) {
  throw Error("kiln: " + std::string(call) + " failed: " + cuErrorText(result));
}

}  // namespace kiln::rt
