// Internal: loading a CUDA toolkit library (libnvJitLink, libnvrtc) with
// dlopen, the one way for every such library: $CUDA_HOME's (or the given
// root's) lib64, then /usr/local/cuda/lib64, then the loader's path.
#pragma once

#include <functional>
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

}  // namespace kiln::compiler
