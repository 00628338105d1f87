// KernelSignature: what a compiled kernel expects at launch, as plain data.
//
// The kernel ABI (see "Kernel ABI" in DESIGN.md), in this order:
//   1. one raw pointer per tensor, in `tensors` order: inputs first, then
//      outputs (validate() insists on that order);
//   2. one i64 per dynamic dim, in `dims` order;
//   3. for each tensor with passStrides, in `tensors` order, one i64 stride
//      (in elements) per axis;
//   4. the scalars, in `scalars` order, each in its own dtype (f32 as 4
//      bytes, i64 as 8, f16/bf16 as 2, bool as 1 byte holding 0 or 1).
// The runtime knows nothing of graphs: the compiler fills one of these in per
// kernel, and the ArgPacker checks a launch against it.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::rt {

// One axis of a tensor parameter: a static size, or a named dynamic dim
// whose value is a kernel parameter.
struct Dim {
  int64_t size = 0;  // the size when static
  std::string name;  // non-empty: a dynamic dim, declared in KernelSignature::dims

  Dim() = default;
  template <std::integral T>
  Dim(T staticSize) : size(static_cast<int64_t>(staticSize)) {}  // NOLINT: implicit on purpose
  Dim(std::string dynamicName) : name(std::move(dynamicName)) {}  // NOLINT
  Dim(const char* dynamicName) : name(dynamicName) {}             // NOLINT

  bool isDynamic() const { return !name.empty(); }
  bool operator==(const Dim&) const = default;
};

struct TensorParam {
  std::string name;
  DType dtype = DType::F32;
  std::vector<Dim> shape;
  bool isOutput = false;
  // Base-pointer alignment (bytes) that the vectorized variant of the kernel
  // needs; 0 or 1 when it needs nothing beyond the element size. A pointer
  // that misses it is not an error: the packer reports it (ArgBlock::
  // vectorizable) so the launcher can pick the scalar variant.
  unsigned alignment = 16;
  // The kernel indexes this tensor as dense row-major: strided views are
  // rejected at launch.
  bool contiguous = true;
  // The kernel takes this tensor's strides as parameters (ABI part 3).
  bool passStrides = false;

  bool operator==(const TensorParam&) const = default;
};

struct DimParam {
  std::string name;
  bool operator==(const DimParam&) const = default;
};

struct ScalarParam {
  std::string name;
  DType dtype = DType::F32;
  bool operator==(const ScalarParam&) const = default;
};

struct KernelSignature {
  std::string kernel;  // the kernel's entry point name, used in messages
  std::vector<TensorParam> tensors;
  std::vector<DimParam> dims;
  std::vector<ScalarParam> scalars;

  size_t numInputs() const;
  size_t numOutputs() const;
  // Number of ABI parameters (pointers + dims + strides + scalars).
  size_t numParams() const;
  // Byte size of each ABI parameter, in order.
  std::vector<size_t> parameterSizes() const;

  // Index in its own list, or -1.
  int findTensor(std::string_view name) const;
  int findDim(std::string_view name) const;
  int findScalar(std::string_view name) const;

  // Throws kiln::Error naming the kernel and the problem: empty or repeated
  // names, an output before an input, a dynamic dim not declared in `dims`,
  // a negative static size, an alignment that is not a power of two.
  void validate() const;

  // "add(x: f32[N, 4096], b: f32[4096], out y: f32[N, 4096]; N; alpha: f32)"
  std::string toString() const;
  // "tensor 'x' (input 0)", "tensor 'y' (output 1)"
  std::string describeTensor(size_t index) const;

  bool operator==(const KernelSignature&) const = default;
};

// "[N, 4096]"
std::string formatShape(const std::vector<Dim>& shape);

}  // namespace kiln::rt
