// Loaded code: a Module owns one cuModuleLoadData image (cubin, fatbin or
// NUL-terminated PTX) in the context that was current when it was loaded,
// and unloads it when destroyed. A Function is a kernel in a Module, looked
// up by name; it is a light handle and must not outlive its Module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/runtime/cuda_fwd.h"

namespace kiln::rt {

struct KernelSignature;
class Module;

class Function {
 public:
  Function() = default;

  CUfunction handle() const { return fn_; }
  CUcontext context() const { return ctx_; }  // the context its module was loaded into
  const std::string& name() const { return name_; }
  explicit operator bool() const { return fn_ != nullptr; }

  // cuFuncGetAttribute (a CUfunction_attribute value).
  int attribute(int cuFunctionAttribute) const;
  int numRegisters() const;
  int localBytes() const;          // per-thread local memory (spills, stack)
  int staticSharedBytes() const;
  int maxThreadsPerBlock() const;  // for this kernel, given its registers
  // Lets launches use more than 48 KiB of dynamic shared memory
  // (cuFuncSetAttribute MAX_DYNAMIC_SHARED_SIZE_BYTES).
  void setMaxDynamicSharedBytes(int bytes) const;
  // Lets launches use clusters of more than 8 blocks (up to 16 on sm_90;
  // cuFuncSetAttribute NON_PORTABLE_CLUSTER_SIZE_ALLOWED).
  void allowNonPortableClusters() const;

  // The kernel's parameter sizes in bytes, in order, as recorded in its image
  // (cuFuncGetParamInfo). Empty when the driver is older than CUDA 12.4.
  std::vector<size_t> parameterSizes() const;
  // Throws kiln::Error if the kernel's parameter list does not match what an
  // ArgBlock packed for `sig` holds (count, and each size). Does nothing when
  // the driver cannot report parameters.
  void checkSignature(const KernelSignature& sig) const;

 private:
  friend class Module;
  Function(CUfunction fn, CUcontext ctx, std::string name)
      : fn_(fn), ctx_(ctx), name_(std::move(name)) {}
  CUfunction fn_ = nullptr;
  CUcontext ctx_ = nullptr;
  std::string name_;
};

class Module {
 public:
  // Loads an image into the current context (the caller's, else device 0's
  // primary context; see device.h). The image is a cubin, a fatbin or PTX
  // text (PTX need not be NUL-terminated here). `label` names the module in
  // error messages. A bad image is a kiln::Error carrying the driver's error
  // and, for PTX, the JIT's log.
  static Module load(std::span<const uint8_t> image, std::string_view label = {});
  static Module load(std::string_view ptxOrImage, std::string_view label = {});

  Module() = default;
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();

  // The kernel `name` (its entry point, e.g. the extern "C" name); throws
  // kiln::Error naming it if the module has no such kernel.
  Function function(std::string_view name) const;

  CUmodule handle() const { return mod_; }
  CUcontext context() const { return ctx_; }
  explicit operator bool() const { return mod_ != nullptr; }

 private:
  void reset() noexcept;
  CUmodule mod_ = nullptr;
  CUcontext ctx_ = nullptr;
  std::string label_;
};

}  // namespace kiln::rt
