/* The C interface of graphs compiled ahead of time (`kiln aot`): what a
 * program in another language calls through a C FFI — Python's ctypes in
 * python/kiln_torch.py, which calls them on PyTorch tensors.
 *
 * Every generated NAME.cpp defines, with C linkage:
 *
 *   int kiln_NAME(const kiln_tensor* tensors, int32_t num_tensors,
 *                 const double* scalars, int32_t num_scalars, void* stream);
 *     The function NAME(...) with its tensors in signature order (inputs,
 *     then outputs) and its scalars (integers and bools as exact doubles).
 *     Dynamic dims come from the tensors' shapes. Returns 0, or -1 when it
 *     launched nothing, with the reason in kiln_last_error(). Never throws
 *     and never aborts.
 *
 *   const char* kiln_NAME_signature(void);
 *     The signature as JSON: {"name": "softmax", "tensors": [{"name": "x",
 *     "dtype": "bf16", "code": 4, "shape": ["N", 4096], "output": false},
 *     ...], "scalars": [{"name": "lr", "dtype": "f32"}], "dims": ["N"]}.
 *
 * and the runtime defines kiln_last_error().
 */
#ifndef KILN_RUNTIME_C_API_H
#define KILN_RUNTIME_C_API_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element types (kiln::DType's values). */
enum { KILN_BOOL = 0, KILN_I32 = 1, KILN_I64 = 2, KILN_F16 = 3, KILN_BF16 = 4, KILN_F32 = 5 };

typedef struct kiln_tensor {
  void* data;             /* device pointer */
  int32_t dtype;          /* KILN_* */
  int32_t ndim;
  const int64_t* shape;   /* ndim sizes */
  const int64_t* strides; /* ndim strides in elements, or null: row-major */
} kiln_tensor;

/* The last failure's message on this thread ("" if none). */
const char* kiln_last_error(void);

/* Graphs compiled at run time: libkiln_jit.so (the facade with the
 * compiler) defines these. A kernel is compiled once per equal graph and
 * hints in the process (and found in the disk cache across processes).
 *   kiln_jit_compile: the graph in kiln's text form (kiln.graph v1) and,
 *     optionally, a JSON object of dynamic-dim hints ({"N": 4096}); null
 *     with kiln_last_error() set when it cannot be compiled.
 *   kiln_jit_signature / kiln_jit_explain: JSON as kiln_NAME_signature, and
 *     Kernel::explain()'s text; valid while the kernel lives.
 *   kiln_jit_launch: as kiln_NAME.
 *   kiln_jit_release: frees the handle. */
typedef struct kiln_jit_kernel kiln_jit_kernel;
kiln_jit_kernel* kiln_jit_compile(const char* graph_text, const char* dim_hints_json);
const char* kiln_jit_signature(const kiln_jit_kernel* kernel);
const char* kiln_jit_explain(const kiln_jit_kernel* kernel);
int kiln_jit_launch(const kiln_jit_kernel* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                    const double* scalars, int32_t num_scalars, void* stream);
void kiln_jit_release(kiln_jit_kernel* kernel);

#ifdef __cplusplus
}  // extern "C"

#include <span>
#include <string>

#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln::rt {

class AotGraph;

// The C interface's common part: converts C arguments to views and scalar
// args for `sig` (errors name `name`), calls launch(context, views,
// scalars, stream), and turns every exception into -1 and
// kiln_last_error(). Used by the generated kiln_NAME and kiln_jit_launch.
using LaunchFromC = void (*)(const void* context, std::span<const TensorView> tensors,
                             std::span<const ScalarArg> scalars, void* stream);
int callFromC(const KernelSignature& sig, const std::string& name, LaunchFromC launch, const void* context,
              const kiln_tensor* tensors, int32_t numTensors, const double* scalars, int32_t numScalars,
              void* stream) noexcept;

// Sets kiln_last_error() for this thread (what the C functions report).
void setLastError(const std::string& message) noexcept;

// The signature JSON of kiln_NAME_signature for any kernel signature.
std::string signatureJson(const std::string& name, const KernelSignature& sig);

// What a generated kiln_NAME does: builds the TensorViews and ScalarArgs
// from C arguments, calls launcher().launch, and turns every exception
// into -1 and kiln_last_error(). A scalar must fit its declared dtype
// exactly (an integer for i32/i64, 0 or 1 for bool).
int callFromC(const AotGraph& (*launcher)(), const kiln_tensor* tensors, int32_t numTensors, const double* scalars,
              int32_t numScalars, void* stream) noexcept;

// The signature JSON of kiln_NAME_signature (above).
std::string signatureJson(const AotGraph& graph);

}  // namespace kiln::rt
#endif

#endif  // KILN_RUNTIME_C_API_H
