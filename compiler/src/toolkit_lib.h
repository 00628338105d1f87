// Internal: loading a CUDA toolkit library (libnvJitLink, libnvrtc) with
// dlopen, the one way for every such library: $CUDA_HOME's (or the given
// root's) lib64, then /usr/local/cuda/lib64, then the loader's path.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace kiln::compiler {

struct ToolkitLibrary {
  void* handle = nullptr;  // null when nothing could be loaded
  std::string path;        // the file that was loaded
};

// Opens the first candidate for `soname` (e.g. "libnvrtc.so.13") whose
// `bindAll(handle)` succeeds (a candidate missing entry points is closed and
// skipped). On failure, `why` says what was tried. Never unloaded.
ToolkitLibrary openToolkitLibrary(const std::string& cudaHome, const std::string& soname,
                                  const std::function<bool(void*)>& bindAll, std::string* why);

// Once per process, before the first toolkit library works: raises glibc's
// adaptive heap-trim threshold the way glibc itself does when a program
// frees a large block (toolkit_lib.cpp says why). KILN_TUNE_MALLOC=0 skips it.
void primeAllocatorForToolkit();

// The process-wide API table `Api` of a toolkit library (a struct with
// members `void* lib` and `std::string path` besides its entry points),
// loaded and bound by `bindAll(handle, api)` the first time it succeeds and
// then kept (never unloaded). Null while it cannot be loaded; `why` says why.
template <typename Api, typename BindAll>
const Api* loadToolkitApi(const std::string& cudaHome, const char* soname, BindAll bindAll, std::string* why) {
  static std::mutex mu;
  static Api* api = nullptr;
  std::lock_guard<std::mutex> lock(mu);
  if (api) return api;
  auto* a = new Api();
  ToolkitLibrary lib = openToolkitLibrary(cudaHome, soname, [&](void* h) { return bindAll(h, *a); }, why);
  if (!lib.handle) {
    delete a;
    return nullptr;
  }
  a->lib = lib.handle;
  a->path = lib.path;
  primeAllocatorForToolkit();
  api = a;
  return api;
}

}  // namespace kiln::compiler
