#include "toolkit_lib.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <vector>

namespace kiln::compiler {

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
