// Device registry (properties and primary contexts, once per device) and the
// "caller's context, else the primary one" rule.
#include "kiln/runtime/device.h"

#include <memory>
#include <mutex>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime/driver.h"

namespace kiln::rt {
namespace {

struct DeviceEntry {
  CUdevice handle = 0;
  std::once_flag propsOnce;
  DeviceProperties props;
  std::once_flag basicsOnce;
  Device::Basics basics;
  std::once_flag primaryOnce;
  CUcontext primary = nullptr;
};

// Process-wide registry of devices. Built on first use and never destroyed
// (nothing to release at exit, and no destruction-order hazards).
class DeviceRegistry {
 public:
  static DeviceRegistry& get() {
    static DeviceRegistry* instance = new DeviceRegistry();
    return *instance;
  }
  int count() const { return static_cast<int>(entries_.size()); }
  DeviceEntry& entry(int ordinal) {
    if (ordinal < 0 || ordinal >= count())
      throw Error("kiln: no CUDA device " + std::to_string(ordinal) + " (" +
                  std::to_string(count()) + " visible)");
    return *entries_[ordinal];
  }
  int ordinalOf(CUdevice handle) const {
    for (int i = 0; i < count(); ++i)
      if (entries_[i]->handle == handle) return i;
    throw Error("kiln: the current context belongs to a device kiln cannot see (CUdevice " +
                std::to_string(handle) + ")");
  }

 private:
  DeviceRegistry() {
    const Driver& d = driver();
    int n = 0;
    check(d.deviceGetCount(&n), "cuDeviceGetCount");
    for (int i = 0; i < n; ++i) {
      auto e = std::make_unique<DeviceEntry>();
      check(d.deviceGet(&e->handle, i), "cuDeviceGet");
      entries_.push_back(std::move(e));
    }
  }
  std::vector<std::unique_ptr<DeviceEntry>> entries_;
};

int attribute(const Driver& d, CUdevice dev, CUdevice_attribute attr, const char* what) {
  int v = 0;
  CUresult r = d.deviceGetAttribute(&v, attr, dev);
  if (r != CUDA_SUCCESS)
    throwCuError(r, (std::string("cuDeviceGetAttribute(") + what + ")").c_str());
  return v;
}

// Attributes that newer drivers may drop: 0 rather than an error.
int optionalAttribute(const Driver& d, CUdevice dev, CUdevice_attribute attr) {
  int v = 0;
  return d.deviceGetAttribute(&v, attr, dev) == CUDA_SUCCESS ? v : 0;
}

DeviceProperties readProperties(int ordinal, CUdevice dev) {
  const Driver& d = driver();
  DeviceProperties p;
  p.ordinal = ordinal;
  char name[256] = {};
  check(d.deviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  p.name = name;
#define KILN_ATTR(field, attr) p.field = attribute(d, dev, attr, #attr)
  KILN_ATTR(ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  KILN_ATTR(ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  KILN_ATTR(smCount, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  KILN_ATTR(warpSize, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  KILN_ATTR(maxThreadsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  KILN_ATTR(maxThreadsPerSM, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  KILN_ATTR(regsPerBlock, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
  KILN_ATTR(sharedPerBlock, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  KILN_ATTR(l2Bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
#undef KILN_ATTR
  p.maxBlocksPerSM = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
  p.regsPerSM = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
  p.sharedPerBlockOptin =
      optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  if (p.sharedPerBlockOptin == 0) p.sharedPerBlockOptin = p.sharedPerBlock;
  p.sharedPerSM = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
  p.persistingL2MaxBytes = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
  p.clockKHz = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
  p.memClockKHz = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  p.memBusWidthBits = optionalAttribute(d, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
  check(d.deviceTotalMem(&p.totalMemBytes, dev), "cuDeviceTotalMem");
  return p;
}

}  // namespace

std::string DeviceProperties::arch() const { return "sm_" + std::to_string(sm()); }

std::string DeviceProperties::summary() const {
  return name + " (" + arch() + ", " + std::to_string(smCount) + " SMs, " +
         std::to_string(l2Bytes >> 20) + " MiB L2, " + std::to_string(sharedPerBlockOptin >> 10) +
         " KiB shared/block opt-in, " + std::to_string(totalMemBytes >> 30) + " GiB)";
}

int Device::count() { return DeviceRegistry::get().count(); }

Device Device::get(int ordinal) {
  DeviceRegistry::get().entry(ordinal);  // validates the ordinal
  return Device(ordinal);
}

Device Device::current() {
  ensureContext(0);
  CUdevice dev = 0;
  check(driver().ctxGetDevice(&dev), "cuCtxGetDevice");
  return Device(DeviceRegistry::get().ordinalOf(dev));
}

const DeviceProperties& Device::properties() const {
  DeviceEntry& e = DeviceRegistry::get().entry(ordinal_);
  std::call_once(e.propsOnce, [&] { e.props = readProperties(ordinal_, e.handle); });
  return e.props;
}

const Device::Basics& Device::basics() const {
  DeviceEntry& e = DeviceRegistry::get().entry(ordinal_);
  std::call_once(e.basicsOnce, [&] {
    const Driver& d = driver();
    char name[256] = {};
    check(d.deviceGetName(name, sizeof(name) - 1, e.handle), "cuDeviceGetName");
    e.basics.name = name;
    e.basics.ccMajor = attribute(d, e.handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR");
    e.basics.ccMinor = attribute(d, e.handle, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR");
    e.basics.smCount = attribute(d, e.handle, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                 "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT");
  });
  return e.basics;
}

CUcontext Device::primaryContext() const {
  DeviceEntry& e = DeviceRegistry::get().entry(ordinal_);
  std::call_once(e.primaryOnce, [&] {
    CUcontext ctx = nullptr;
    check(driver().devicePrimaryCtxRetain(&ctx, e.handle), "cuDevicePrimaryCtxRetain");
    e.primary = ctx;
  });
  return e.primary;
}

void Device::makeCurrent() const {
  const Driver& d = driver();
  CUcontext cur = nullptr;
  check(d.ctxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur) {
    CUdevice dev = 0;
    check(d.ctxGetDevice(&dev), "cuCtxGetDevice");
    if (dev == DeviceRegistry::get().entry(ordinal_).handle) return;
  }
  check(d.ctxSetCurrent(primaryContext()), "cuCtxSetCurrent");
}

CUcontext ensureContext(int ordinalIfNone) {
  const Driver& d = driver();
  CUcontext cur = nullptr;
  check(d.ctxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur) return cur;
  CUcontext primary = Device::get(ordinalIfNone).primaryContext();
  check(d.ctxSetCurrent(primary), "cuCtxSetCurrent");
  return primary;
}

}  // namespace kiln::rt
