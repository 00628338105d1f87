// The C interface of ahead-of-time graphs (c_api.h).
#include "kiln/runtime/c_api.h"

#include <cmath>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime/aot.h"

static_assert(KILN_BOOL == static_cast<int>(kiln::DType::Bool) && KILN_I32 == static_cast<int>(kiln::DType::I32) &&
                  KILN_I64 == static_cast<int>(kiln::DType::I64) && KILN_F16 == static_cast<int>(kiln::DType::F16) &&
                  KILN_BF16 == static_cast<int>(kiln::DType::BF16) && KILN_F32 == static_cast<int>(kiln::DType::F32),
              "c_api.h's dtype codes are kiln::DType's values");

namespace {

thread_local std::string lastError;

std::string jsonString(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

extern "C" const char* kiln_last_error(void) { return lastError.c_str(); }

namespace kiln::rt {

namespace {

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  throw Error("kiln: call of " + name + " through the C interface: " + what);
}

void call(const KernelSignature& sig, const std::string& name, LaunchFromC launch, const void* context,
          const kiln_tensor* tensors, int32_t numTensors, const double* scalars, int32_t numScalars, void* stream) {
  if (numTensors != static_cast<int32_t>(sig.tensors.size()))
    bad(name, std::to_string(numTensors) + " tensors given, but it takes " + std::to_string(sig.tensors.size()));
  if (numScalars != static_cast<int32_t>(sig.scalars.size()))
    bad(name, std::to_string(numScalars) + " scalars given, but it takes " + std::to_string(sig.scalars.size()));
  if ((numTensors > 0 && !tensors) || (numScalars > 0 && !scalars)) bad(name, "a null argument array");
  std::vector<TensorView> views(static_cast<size_t>(numTensors));
  for (int32_t i = 0; i < numTensors; ++i) {
    const kiln_tensor& t = tensors[i];
    const std::string& tname = sig.tensors[static_cast<size_t>(i)].name;
    if (t.dtype < KILN_BOOL || t.dtype > KILN_F32)
      bad(name, "tensor '" + tname + "' has dtype code " + std::to_string(t.dtype) + ", which is none of c_api.h's");
    if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
      bad(name, "tensor '" + tname + "' has " + std::to_string(t.ndim) + " dims and " + (t.shape ? "a" : "no") +
                    " shape");
    TensorView& v = views[static_cast<size_t>(i)];
    v.data = t.data;
    v.dtype = static_cast<DType>(t.dtype);
    v.shape.assign(t.shape, t.shape + t.ndim);
    if (t.strides) v.strides.assign(t.strides, t.strides + t.ndim);
  }
  std::vector<ScalarArg> args;
  for (int32_t i = 0; i < numScalars; ++i) {
    const ScalarParam& p = sig.scalars[static_cast<size_t>(i)];
    const double v = scalars[i];
    if (isFloat(p.dtype)) {
      args.emplace_back(v);
      continue;
    }
    const bool exact = std::isfinite(v) && v == std::trunc(v) && std::fabs(v) <= 9007199254740992.0 &&
                       (p.dtype != DType::Bool || v == 0 || v == 1) &&
                       (p.dtype != DType::I32 || (v >= -2147483648.0 && v <= 2147483647.0));
    if (!exact)
      bad(name, "scalar '" + p.name + "' is " + std::string(dtypeName(p.dtype)) + ", but the value given is " +
                    std::to_string(v));
    if (p.dtype == DType::Bool) args.emplace_back(v != 0);
    else args.emplace_back(static_cast<int64_t>(v));
  }
  launch(context, std::span<const TensorView>(views), std::span<const ScalarArg>(args), stream);
}

void launchAot(const void* context, std::span<const TensorView> tensors, std::span<const ScalarArg> scalars,
               void* stream) {
  static_cast<const AotGraph*>(context)->launch(tensors, {}, scalars, stream);
}

}  // namespace

void setLastError(const std::string& message) noexcept {
  try {
    lastError = message;
  } catch (...) {
  }
}

int callFromC(const KernelSignature& sig, const std::string& name, LaunchFromC launch, const void* context,
              const kiln_tensor* tensors, int32_t numTensors, const double* scalars, int32_t numScalars,
              void* stream) noexcept {
  try {
    call(sig, name, launch, context, tensors, numTensors, scalars, numScalars, stream);
    lastError.clear();
    return 0;
  } catch (const std::exception& e) {
    setLastError(e.what());
  } catch (...) {
    setLastError("kiln: an unknown exception");
  }
  return -1;
}

int callFromC(const AotGraph& (*launcher)(), const kiln_tensor* tensors, int32_t numTensors, const double* scalars,
              int32_t numScalars, void* stream) noexcept {
  const AotGraph* g = nullptr;
  try {
    g = &launcher();
  } catch (const std::exception& e) {
    setLastError(e.what());
    return -1;
  }
  return callFromC(g->signature(), "ahead-of-time function '" + g->name() + "'", &launchAot, g, tensors, numTensors,
                   scalars, numScalars, stream);
}

std::string signatureJson(const AotGraph& graph) { return signatureJson(graph.name(), graph.signature()); }

std::string signatureJson(const std::string& name, const KernelSignature& sig) {
  std::string s = "{\"name\": " + jsonString(name) + ", \"tensors\": [";
  for (size_t i = 0; i < sig.tensors.size(); ++i) {
    const TensorParam& t = sig.tensors[i];
    s += std::string(i ? ", " : "") + "{\"name\": " + jsonString(t.name) + ", \"dtype\": \"" +
         std::string(dtypeName(t.dtype)) + "\", \"code\": " + std::to_string(static_cast<int>(t.dtype)) +
         ", \"shape\": [";
    for (size_t a = 0; a < t.shape.size(); ++a)
      s += std::string(a ? ", " : "") +
           (t.shape[a].isDynamic() ? jsonString(t.shape[a].name) : std::to_string(t.shape[a].size));
    s += "], \"output\": " + std::string(t.isOutput ? "true" : "false") + "}";
  }
  s += "], \"scalars\": [";
  for (size_t i = 0; i < sig.scalars.size(); ++i)
    s += std::string(i ? ", " : "") + "{\"name\": " + jsonString(sig.scalars[i].name) + ", \"dtype\": \"" +
         std::string(dtypeName(sig.scalars[i].dtype)) + "\"}";
  s += "], \"dims\": [";
  for (size_t i = 0; i < sig.dims.size(); ++i) s += std::string(i ? ", " : "") + jsonString(sig.dims[i].name);
  return s + "]}";
}

}  // namespace kiln::rt
