// The C interface of graphs compiled at run time (kiln_jit_*, declared in
// kiln/runtime/c_api.h): what python/kiln_torch.py's compile() calls in
// libkiln_jit.so. Every function catches everything; failures are null or
// -1 with kiln_last_error() set.
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/dsl/text.h"
#include "kiln/kiln.h"
#include "kiln/runtime/c_api.h"

struct kiln_jit_kernel {
  kiln::Kernel kernel;
  std::string name;       // for messages: "run-time kernel 'kiln_row0'"
  std::string signature;  // JSON
  std::string explain;
};

namespace {

void launchJit(const void* context, std::span<const kiln::TensorView> tensors,
               std::span<const kiln::ScalarArg> scalars, void* stream) {
  static_cast<const kiln_jit_kernel*>(context)->kernel.launch(tensors, {}, scalars, stream);
}

}  // namespace

extern "C" kiln_jit_kernel* kiln_jit_compile(const char* graphText, const char* dimHintsJson) {
  try {
    if (!graphText) throw kiln::Error("kiln_jit_compile: no graph text (null)");
    const kiln::Graph g = kiln::parseGraph(graphText);
    kiln::CompileOptions options;
    if (dimHintsJson && *dimHintsJson) {
      const nlohmann::json hints = nlohmann::json::parse(dimHintsJson, nullptr, false);
      if (!hints.is_object())
        throw kiln::Error(std::string("kiln_jit_compile: the dim hints must be a JSON object like {\"N\": 4096}, got ") +
                          dimHintsJson);
      for (const auto& [dim, value] : hints.items()) {
        if (!value.is_number_integer() || value.get<int64_t>() < 0)
          throw kiln::Error("kiln_jit_compile: dim hint " + dim + " must be a non-negative integer, got " + value.dump());
        options.dims[dim] = value.get<int64_t>();
      }
    }
    auto* k = new kiln_jit_kernel;
    try {
      k->kernel = kiln::compile(g, options);
      const kiln::rt::KernelSignature& sig = k->kernel.signature();
      const std::string kernelName = k->kernel.compiled().kernels.empty() ? "kernel" : k->kernel.compiled().kernels[0].name;
      k->name = "run-time kernel '" + kernelName + "'";
      k->signature = kiln::rt::signatureJson(kernelName, sig);
      k->explain = k->kernel.explain();
    } catch (...) {
      delete k;
      throw;
    }
    kiln::rt::setLastError("");
    return k;
  } catch (const std::exception& e) {
    kiln::rt::setLastError(e.what());
  } catch (...) {
    kiln::rt::setLastError("kiln_jit_compile: an unknown exception");
  }
  return nullptr;
}

extern "C" const char* kiln_jit_signature(const kiln_jit_kernel* k) { return k ? k->signature.c_str() : ""; }

extern "C" const char* kiln_jit_explain(const kiln_jit_kernel* k) { return k ? k->explain.c_str() : ""; }

extern "C" int kiln_jit_launch(const kiln_jit_kernel* k, const kiln_tensor* tensors, int32_t numTensors,
                               const double* scalars, int32_t numScalars, void* stream) {
  if (!k) {
    kiln::rt::setLastError("kiln_jit_launch: no kernel (null)");
    return -1;
  }
  return kiln::rt::callFromC(k->kernel.signature(), k->name, &launchJit, k, tensors, numTensors, scalars, numScalars,
                             stream);
}

extern "C" void kiln_jit_release(kiln_jit_kernel* k) { delete k; }
