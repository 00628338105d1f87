// cuLaunchKernel / cuLaunchKernelEx with a cold path for errors.
#include "kiln/runtime/launch.h"

#include <string>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/module.h"

namespace kiln::rt {
namespace {

std::string dim3Text(const Dim3& d) {
  return "(" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")";
}

bool hasCluster(const LaunchConfig& c) { return c.cluster.x | c.cluster.y | c.cluster.z; }

CUresult rawLaunch(const Driver& d, const Function& fn, const LaunchConfig& c, void** params) {
  if (!hasCluster(c)) [[likely]]
    return d.launchKernel(fn.handle(), c.grid.x, c.grid.y, c.grid.z, c.block.x, c.block.y,
                          c.block.z, c.sharedBytes, static_cast<CUstream>(c.stream), params,
                          nullptr);
  if (!d.launchKernelEx)
    throw Error("kiln: launching kernel '" + fn.name() +
                "' with a cluster needs cuLaunchKernelEx (CUDA 11.8+); the driver lacks it");
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = c.cluster.x ? c.cluster.x : 1;
  attr.value.clusterDim.y = c.cluster.y ? c.cluster.y : 1;
  attr.value.clusterDim.z = c.cluster.z ? c.cluster.z : 1;
  CUlaunchConfig cfg{};
  cfg.gridDimX = c.grid.x;
  cfg.gridDimY = c.grid.y;
  cfg.gridDimZ = c.grid.z;
  cfg.blockDimX = c.block.x;
  cfg.blockDimY = c.block.y;
  cfg.blockDimZ = c.block.z;
  cfg.sharedMemBytes = c.sharedBytes;
  cfg.hStream = static_cast<CUstream>(c.stream);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return d.launchKernelEx(&cfg, fn.handle(), params, nullptr);
}

[[gnu::cold, gnu::noinline]] void launchFailed(const Driver& d, const Function& fn,
                                                const LaunchConfig& c, void** params,
                                                CUresult r) {
  if (!fn) throw Error("kiln: launch of an empty Function");
  if (r == CUDA_ERROR_INVALID_CONTEXT && fn.context()) {
    // A thread with no current context: use the kernel's own and retry once.
    CUcontext cur = nullptr;
    if (d.ctxGetCurrent(&cur) == CUDA_SUCCESS && cur == nullptr &&
        d.ctxSetCurrent(fn.context()) == CUDA_SUCCESS) {
      r = rawLaunch(d, fn, c, params);
      if (r == CUDA_SUCCESS) return;
    }
  }
  std::string msg = "kiln: cuLaunchKernel of kernel '" + fn.name() + "' failed: " +
                    cuErrorText(r) + "; grid " + dim3Text(c.grid) + ", block " +
                    dim3Text(c.block) + ", dynamic shared " + std::to_string(c.sharedBytes) +
                    " bytes";
  if (hasCluster(c)) msg += ", cluster " + dim3Text(c.cluster);
  if (r == CUDA_ERROR_INVALID_VALUE && c.sharedBytes > 48 * 1024)
    msg += " (over 48 KiB of dynamic shared memory needs Function::setMaxDynamicSharedBytes)";
  if (hasCluster(c) && c.cluster.x * c.cluster.y * c.cluster.z > 8)
    msg += " (clusters of more than 8 blocks need Function::allowNonPortableClusters)";
  if (r == CUDA_ERROR_INVALID_HANDLE || r == CUDA_ERROR_INVALID_CONTEXT)
    msg += " (is the current context the one the kernel's module was loaded into?)";
  throw Error(msg);
}

}  // namespace

void launch(const Function& fn, const LaunchConfig& c, void** params) {
  if ((c.grid.x == 0) | (c.grid.y == 0) | (c.grid.z == 0)) return;
  const Driver& d = driver();
  const CUresult r = rawLaunch(d, fn, c, params);
  if (r != CUDA_SUCCESS) [[unlikely]]
    launchFailed(d, fn, c, params, r);
}

void launch(const Function& fn, const LaunchConfig& c, const ArgBlock& args) {
  launch(fn, c, args.params());
}

}  // namespace kiln::rt
