// Module loading (with the JIT's error log for PTX), kernel lookup and
// kernel attributes.
#include "kiln/runtime/module.h"

#include <cstring>
#include <string>

#include "kiln/error.h"
#include "kiln/runtime/capture.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/signature.h"

namespace kiln::rt {
namespace {

bool isElf(std::span<const uint8_t> image) {
  return image.size() >= 4 && std::memcmp(image.data(), "\x7f" "ELF", 4) == 0;
}

bool isFatbin(std::span<const uint8_t> image) {
  // fatBinaryCtl magic 0xBA55ED50, little-endian.
  static const uint8_t magic[4] = {0x50, 0xED, 0x55, 0xBA};
  return image.size() >= 4 && std::memcmp(image.data(), magic, 4) == 0;
}

std::string forModule(std::string_view label) {
  return label.empty() ? std::string() : " for '" + std::string(label) + "'";
}

}  // namespace

Module Module::load(std::string_view ptxOrImage, std::string_view label) {
  return load(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ptxOrImage.data()),
                                       ptxOrImage.size()),
              label);
}

Module Module::load(std::span<const uint8_t> image, std::string_view label) {
  if (image.empty()) throw Error("kiln: cannot load an empty module image" + forModule(label));
  const Driver& d = driver();
  CUcontext ctx = ensureContext();

  // PTX text must reach the driver NUL-terminated.
  std::string ptxCopy;
  const void* data = image.data();
  if (!isElf(image) && !isFatbin(image) && image.back() != 0) {
    ptxCopy.assign(reinterpret_cast<const char*>(image.data()), image.size());
    data = ptxCopy.c_str();
  }

  char errorLog[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void* values[] = {errorLog, reinterpret_cast<void*>(uintptr_t(sizeof(errorLog) - 1))};
  CUmodule mod = nullptr;
  CUresult r;
  {
    // A first launch inside a CUDA graph capture may load a module (a
    // variant, a scalar entry, an ahead-of-time graph): not stream work, so
    // allowed under the relaxed mode whatever mode the capture began in.
    RelaxedCaptureMode relaxed;
    r = d.moduleLoadDataEx(&mod, data, 2, options, values);
  }
  if (r != CUDA_SUCCESS) {
    std::string kind = isElf(image) ? "cubin" : isFatbin(image) ? "fatbin" : "PTX";
    std::string msg = "kiln: cuModuleLoadData" + forModule(label) + " failed to load the " +
                      kind + " image (" + std::to_string(image.size()) +
                      " bytes): " + cuErrorText(r);
    if (r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
        r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT)
      msg += "; a stream is being captured into a CUDA graph: launch the kernel once (at the dim values "
             "the capture will use) before capturing";
    if (errorLog[0]) msg += "\n" + std::string(errorLog);
    throw Error(msg);
  }
  Module m;
  m.mod_ = mod;
  m.ctx_ = ctx;
  m.label_ = std::string(label);
  return m;
}

Module::Module(Module&& other) noexcept
    : mod_(other.mod_), ctx_(other.ctx_), label_(std::move(other.label_)) {
  other.mod_ = nullptr;
  other.ctx_ = nullptr;
}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    reset();
    mod_ = other.mod_;
    ctx_ = other.ctx_;
    label_ = std::move(other.label_);
    other.mod_ = nullptr;
    other.ctx_ = nullptr;
  }
  return *this;
}

Module::~Module() { reset(); }

void Module::reset() noexcept {
  if (!mod_) return;
  try {
    const Driver& d = driver();
    // Unload in the module's own context, then restore the caller's.
    CUcontext cur = nullptr;
    d.ctxGetCurrent(&cur);
    if (cur != ctx_) d.ctxSetCurrent(ctx_);
    d.moduleUnload(mod_);  // errors ignored: nothing useful to do in a destructor
    if (cur != ctx_) d.ctxSetCurrent(cur);
  } catch (...) {
  }
  mod_ = nullptr;
  ctx_ = nullptr;
}

Function Module::function(std::string_view name) const {
  if (!mod_) throw Error("kiln: looking up kernel '" + std::string(name) + "' in an empty Module");
  std::string n(name);
  CUfunction fn = nullptr;
  CUresult r = driver().moduleGetFunction(&fn, mod_, n.c_str());
  if (r != CUDA_SUCCESS)
    throw Error("kiln: kernel '" + n + "' not found in module" + forModule(label_) +
                " (cuModuleGetFunction: " + cuErrorText(r) + ")");
  return Function(fn, ctx_, std::move(n));
}

int Function::attribute(int cuFunctionAttribute) const {
  int v = 0;
  CUresult r = driver().funcGetAttribute(&v, static_cast<CUfunction_attribute>(cuFunctionAttribute), fn_);
  if (r != CUDA_SUCCESS)
    throwCuError(r, ("cuFuncGetAttribute(" + std::to_string(cuFunctionAttribute) + ") of kernel '" +
                     name_ + "'").c_str());
  return v;
}

int Function::numRegisters() const { return attribute(CU_FUNC_ATTRIBUTE_NUM_REGS); }
int Function::localBytes() const { return attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES); }
int Function::staticSharedBytes() const { return attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES); }
int Function::maxThreadsPerBlock() const { return attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK); }

void Function::setMaxDynamicSharedBytes(int bytes) const {
  CUresult r = driver().funcSetAttribute(fn_, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  if (r != CUDA_SUCCESS)
    throwCuError(r, ("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=" + std::to_string(bytes) +
                     ") of kernel '" + name_ + "'").c_str());
}

void Function::allowNonPortableClusters() const {
  CUresult r = driver().funcSetAttribute(fn_, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
  if (r != CUDA_SUCCESS)
    throwCuError(r, ("cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED=1) of kernel '" + name_ + "'").c_str());
}

std::vector<size_t> Function::parameterSizes() const {
  std::vector<size_t> sizes;
  const Driver& d = driver();
  if (!d.funcGetParamInfo) return sizes;
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    // Past the last parameter the driver answers CUDA_ERROR_INVALID_VALUE.
    if (d.funcGetParamInfo(fn_, i, &offset, &size) != CUDA_SUCCESS) break;
    sizes.push_back(size);
  }
  return sizes;
}

void Function::checkSignature(const KernelSignature& sig) const {
  if (!driver().funcGetParamInfo) return;
  const std::vector<size_t> actual = parameterSizes();
  const std::vector<size_t> expected = sig.parameterSizes();
  auto list = [](const std::vector<size_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  bool ok = actual.size() == expected.size();
  for (size_t i = 0; ok && i < actual.size(); ++i) ok = actual[i] == expected[i];
  if (!ok)
    throw Error("kiln: kernel '" + name_ + "' takes parameters of sizes " + list(actual) +
                " bytes, but its signature " + sig.toString() + " packs " + list(expected));
}

}  // namespace kiln::rt
