#include "kiln/runtime/grid_rule.h"

#include "kiln/error.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/module.h"

namespace kiln::rt {

void GridRule::boundExceeded(const Bound& b, int64_t value, const std::string& kernel) {
  throw Error("kiln: launch of kernel '" + kernel + "': dim " + b.dim + " = " + std::to_string(value) +
              ", but the kernel takes at most " + std::to_string(b.max) + " " + b.what +
              " (it counts them with 32-bit integers); split the work into smaller parts");
}

int64_t residentBlocks(const Function& f, int threadsPerBlock, int sharedBytes, int cluster) {
  const Driver& d = driver();
  if (!f) return 0;
  if (cluster > 1) {
    if (!d.occupancyMaxActiveClusters) return 0;
    CUlaunchAttribute attr{};
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = static_cast<unsigned>(cluster);
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    CUlaunchConfig cfg{};
    cfg.gridDimX = static_cast<unsigned>(cluster);
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = static_cast<unsigned>(threadsPerBlock);
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = static_cast<unsigned>(sharedBytes);
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    if (d.occupancyMaxActiveClusters(&clusters, f.handle(), &cfg) == CUDA_SUCCESS && clusters > 0)
      return static_cast<int64_t>(clusters) * cluster;
    return 0;
  }
  int perSM = 0;
  if (d.occupancyMaxActiveBlocksPerMultiprocessor(&perSM, f.handle(), threadsPerBlock,
                                                  static_cast<size_t>(sharedBytes)) == CUDA_SUCCESS &&
      perSM > 0)
    return static_cast<int64_t>(perSM) * Device::current().basics().smCount;
  return 0;
}

}  // namespace kiln::rt
