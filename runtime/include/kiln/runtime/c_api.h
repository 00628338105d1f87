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

#ifdef __cplusplus
}  // extern "C"

#include <string>

namespace kiln::rt {

class AotGraph;

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
