// Devices and contexts.
//
// kiln works in whatever context is current on the calling thread, so it
// lives inside applications that already use the CUDA runtime or PyTorch
// (both make the device's primary context current). When no context is
// current, kiln retains the device's primary context (the same one the CUDA
// runtime uses) and makes it current on this thread. kiln never creates
// contexts of its own and never changes a context the caller has set.
//
// Each device's properties are read once per process and cached; they feed
// schedule heuristics and tuning keys.
#pragma once

#include <cstddef>
#include <string>

#include "kiln/runtime/cuda_fwd.h"

namespace kiln::rt {

struct DeviceProperties {
  int ordinal = 0;
  std::string name;                 // "NVIDIA H200"
  int ccMajor = 0, ccMinor = 0;     // compute capability, 9 and 0 on Hopper
  int smCount = 0;
  int warpSize = 32;
  int maxThreadsPerBlock = 0;
  int maxThreadsPerSM = 0;
  int maxBlocksPerSM = 0;
  int regsPerBlock = 0;
  int regsPerSM = 0;
  int sharedPerBlock = 0;           // bytes, without opting in (48 KiB)
  int sharedPerBlockOptin = 0;      // bytes, the most a kernel can opt in to
  int sharedPerSM = 0;              // bytes
  int l2Bytes = 0;
  int persistingL2MaxBytes = 0;
  int clockKHz = 0;                 // SM clock; may be 0 where the driver no longer reports it
  int memClockKHz = 0;              // may be 0 where the driver no longer reports it
  int memBusWidthBits = 0;
  size_t totalMemBytes = 0;

  int sm() const { return ccMajor * 10 + ccMinor; }  // 90
  std::string arch() const;                          // "sm_90"
  // "NVIDIA H200 (sm_90, 132 SMs, 60 MiB L2, 227 KiB shared/block opt-in, 140 GiB)"
  std::string summary() const;
};

class Device {
 public:
  // The device of the context current on this thread. If no context is
  // current, makes device 0's primary context current first.
  static Device current();
  // Device `ordinal` (0-based); throws kiln::Error if there is no such device.
  static Device get(int ordinal);
  // Number of visible devices; throws kiln::Error without a driver.
  static int count();

  int ordinal() const { return ordinal_; }
  // Cached after the first call for each device. The first call queries
  // two dozen attributes, the name and the memory size: 1.1 ms on an H200
  // with driver 580, almost all of it the two clock rates (0.58 and 0.48
  // ms); what a compile needs comes cheaper from basics().
  const DeviceProperties& properties() const;
  // The name, compute capability and SM count only (cached; 0.01 ms):
  // what kiln::compile needs to pick a target and a grid and to look up
  // tuned configs.
  struct Basics {
    std::string name;
    int ccMajor = 0, ccMinor = 0, smCount = 0;
    std::string arch() const { return "sm_" + std::to_string(ccMajor * 10 + ccMinor); }
  };
  const Basics& basics() const;
  // This device's primary context, retained on first use and kept for the
  // life of the process (releasing it from a static destructor would race
  // the driver's own teardown at exit).
  CUcontext primaryContext() const;
  // Makes this device current on this thread: leaves the current context
  // alone if it already belongs to this device, else makes the device's
  // primary context current.
  void makeCurrent() const;

 private:
  explicit Device(int ordinal) : ordinal_(ordinal) {}
  int ordinal_ = 0;
};

// Makes sure some context is current on this thread and returns it: the
// caller's, or else device `ordinalIfNone`'s primary context.
CUcontext ensureContext(int ordinalIfNone = 0);

}  // namespace kiln::rt
