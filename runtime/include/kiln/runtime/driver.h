// The CUDA driver, loaded at run time with dlopen("libcuda.so.1").
//
// kiln never links libcuda: a program that uses kiln starts on a machine
// without an NVIDIA driver, and the first call that needs the driver throws a
// kiln::Error that says so ("kiln: no CUDA driver found ..."). The library is
// loaded, its entry points resolved and cuInit(0) called exactly once per
// process, thread-safely; a failure is remembered and re-reported by every
// later call, never retried.
//
// Every entry point is resolved under its exact ABI name (cuMemAlloc_v2, not
// the cuMemAlloc macro), with the function type taken from the toolkit's own
// cuda.h declaration, so the pointer type and the symbol always agree. The
// legacy default stream semantics apply (never the _ptsz/_ptds variants).
#pragma once

#include <cuda.h>

#include <string>

namespace kiln::rt {

// X(member, symbol): required entry points. Loading fails if one is missing.
#define KILN_CUDA_REQUIRED_ENTRY_POINTS(X)                      \
  X(init, cuInit)                                               \
  X(driverGetVersion, cuDriverGetVersion)                       \
  X(getErrorName, cuGetErrorName)                               \
  X(getErrorString, cuGetErrorString)                           \
  X(deviceGet, cuDeviceGet)                                     \
  X(deviceGetCount, cuDeviceGetCount)                           \
  X(deviceGetAttribute, cuDeviceGetAttribute)                   \
  X(deviceGetName, cuDeviceGetName)                             \
  X(deviceTotalMem, cuDeviceTotalMem_v2)                        \
  X(ctxGetCurrent, cuCtxGetCurrent)                             \
  X(ctxSetCurrent, cuCtxSetCurrent)                             \
  X(ctxGetDevice, cuCtxGetDevice)                               \
  X(ctxSynchronize, cuCtxSynchronize)                           \
  X(devicePrimaryCtxRetain, cuDevicePrimaryCtxRetain)           \
  X(devicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2)      \
  X(moduleLoadData, cuModuleLoadData)                           \
  X(moduleLoadDataEx, cuModuleLoadDataEx)                       \
  X(moduleUnload, cuModuleUnload)                               \
  X(moduleGetFunction, cuModuleGetFunction)                     \
  X(funcGetAttribute, cuFuncGetAttribute)                       \
  X(funcSetAttribute, cuFuncSetAttribute)                       \
  X(launchKernel, cuLaunchKernel)                               \
  X(memAlloc, cuMemAlloc_v2)                                    \
  X(memFree, cuMemFree_v2)                                      \
  X(memGetInfo, cuMemGetInfo_v2)                                \
  X(memcpyHtoD, cuMemcpyHtoD_v2)                                \
  X(memcpyDtoH, cuMemcpyDtoH_v2)                                \
  X(memcpyDtoD, cuMemcpyDtoD_v2)                                \
  X(memcpyHtoDAsync, cuMemcpyHtoDAsync_v2)                      \
  X(memcpyDtoHAsync, cuMemcpyDtoHAsync_v2)                      \
  X(memsetD8, cuMemsetD8_v2)                                    \
  X(memsetD8Async, cuMemsetD8Async)                             \
  X(streamCreate, cuStreamCreate)                               \
  X(streamDestroy, cuStreamDestroy_v2)                          \
  X(streamSynchronize, cuStreamSynchronize)                     \
  X(streamIsCapturing, cuStreamIsCapturing)                     \
  X(threadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode) \
  X(eventCreate, cuEventCreate)                                 \
  X(eventRecord, cuEventRecord)                                 \
  X(eventSynchronize, cuEventSynchronize)                       \
  X(eventDestroy, cuEventDestroy_v2)                            \
  X(occupancyMaxActiveBlocksPerMultiprocessor, cuOccupancyMaxActiveBlocksPerMultiprocessor)

// Optional entry points: null when the driver is too old to have them.
//  cuLaunchKernelEx       CUDA 11.8 (clusters)
//  cuTensorMapEncodeTiled CUDA 12.0 (TMA descriptors)
//  cuFuncGetParamInfo     CUDA 12.4 (checking a kernel's parameter list)
//  cuOccupancyMaxActiveClusters CUDA 11.8 (how many clusters fit at once)
#define KILN_CUDA_OPTIONAL_ENTRY_POINTS(X)                      \
  X(launchKernelEx, cuLaunchKernelEx)                           \
  X(tensorMapEncodeTiled, cuTensorMapEncodeTiled)               \
  X(funcGetParamInfo, cuFuncGetParamInfo)                       \
  X(occupancyMaxActiveClusters, cuOccupancyMaxActiveClusters)

// The resolved driver. Members are named after the call without its "cu"
// prefix and version suffix (memAlloc is cuMemAlloc_v2), because the plain
// names are macros in cuda.h.
struct Driver {
#define KILN_CUDA_DECLARE_ENTRY_POINT(member, symbol) decltype(&::symbol) member = nullptr;
  KILN_CUDA_REQUIRED_ENTRY_POINTS(KILN_CUDA_DECLARE_ENTRY_POINT)
  KILN_CUDA_OPTIONAL_ENTRY_POINTS(KILN_CUDA_DECLARE_ENTRY_POINT)
#undef KILN_CUDA_DECLARE_ENTRY_POINT

  // cuEventElapsedTime_v2 where the driver has it (CUDA 12.8+), else the
  // original cuEventElapsedTime; both have this type.
  decltype(&::cuEventElapsedTime_v2) eventElapsedTime = nullptr;

  int version = 0;  // cuDriverGetVersion, e.g. 13000 for CUDA 13.0
};

// The loaded driver; the first call loads it. Throws kiln::Error when there
// is no usable driver (library missing, an entry point missing, cuInit
// failed), with the same message on every call.
const Driver& driver();

// True when driver() would succeed and at least one device is visible.
// Never throws; safe to call on any machine.
bool driverAvailable() noexcept;

// Why the driver is unavailable (the message driver() throws), or "" when it
// is available. Never throws.
std::string driverUnavailableReason() noexcept;

// The message for a libcuda.so.1 that could not be opened (exposed so that
// tests can check its wording on machines that do have a driver).
std::string noDriverMessage(const std::string& dlerrorText);

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or "CUresult 12345" for a code
// the driver cannot name. Never throws.
std::string cuErrorText(CUresult result) noexcept;

// Throws kiln::Error("kiln: <call> failed: <name> (<string>)").
[[noreturn]] void throwCuError(CUresult result, const char* call);

inline void check(CUresult result, const char* call) {
  if (result != CUDA_SUCCESS) [[unlikely]]
    throwCuError(result, call);
}

}  // namespace kiln::rt

// KILN_CU_CHECK(kiln::rt::driver().memAlloc(&p, n)): throws a kiln::Error that
// names the call as written and the driver's error name and description.
#define KILN_CU_CHECK(expr) ::kiln::rt::check((expr), #expr)
