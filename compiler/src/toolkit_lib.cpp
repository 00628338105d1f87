#include "toolkit_lib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace kiln::compiler {

// glibc gives the top of its heap back to the kernel when more than its trim
// threshold lies free there, and that threshold adapts: it becomes twice the
// largest mmap-backed block freed so far (mmap threshold = that block, up to
// 32 MiB), unless the program fixed it with mallopt. nvJitLink grows the heap
// by ~4 MiB per link and frees it all, but its largest block is 1.8 MiB, so
// the threshold stopped at 3.7 MiB: the heap was trimmed after every link and
// the next link faulted the same pages in again (~700 faults, 10 of the
// 32 ms of a cold compile on the 2-core VM; docs/benchmarks.md). Freeing one
// 8 MiB block once moves the thresholds to 8 MiB (mmap) and 16 MiB (trim),
// exactly what any program that frees an 8 MiB buffer gets; it never lowers
// them and changes nothing where the program set them with mallopt. (The
// stronger, fixed setting is the opt-in tuneAllocatorForCompilation.)
void primeAllocatorForToolkit() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    const char* env = std::getenv("KILN_TUNE_MALLOC");
    if (env && std::strcmp(env, "0") == 0) return;
    // Through a volatile pointer: the compiler may drop a malloc/free pair
    // whose block is never used.
    static void* volatile block = nullptr;
    block = std::malloc(size_t{8} << 20);
    std::free(block);
    block = nullptr;
  });
#endif
}

ToolkitLibrary openToolkitLibrary(const std::string& cudaHome, const std::string& soname,
                                  const std::function<bool(void*)>& bindAll, std::string* why) {
  std::vector<std::string> candidates;
  if (!cudaHome.empty()) candidates.push_back(cudaHome + "/lib64/" + soname);
  if (const char* env = std::getenv("CUDA_HOME"); env && *env)
    candidates.push_back(std::string(env) + "/lib64/" + soname);
  candidates.push_back("/usr/local/cuda/lib64/" + soname);
  candidates.push_back(soname);  // the loader's search path
  std::string tried;
  for (const std::string& c : candidates) {
    struct stat st {};
    if (c.front() == '/' && !(::stat(c.c_str(), &st) == 0 && S_ISREG(st.st_mode))) {
      tried += "\n  " + c + ": not found";
      continue;
    }
    void* lib = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = ::dlerror();
      tried += "\n  " + c + ": " + (e ? e : "dlopen failed");
      continue;
    }
    if (!bindAll(lib)) {
      tried += "\n  " + c + ": missing entry points";
      ::dlclose(lib);
      continue;
    }
    return {lib, c};
  }
  if (why) *why = soname + " could not be loaded; tried:" + tried;
  return {};
}

}  // namespace kiln::compiler
