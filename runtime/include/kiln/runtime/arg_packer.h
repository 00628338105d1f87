// Checking a launch against a KernelSignature and packing its arguments.
//
// An ArgPacker is built once per kernel (it validates the signature and
// precomputes what each check needs) and is then const and thread-safe. Each
// launch packs into an ArgBlock, a fixed-size block that lives on the
// caller's stack: an array of void* (the kernelParams of cuLaunchKernel) and
// the 8-byte slots they point to. Packing allocates nothing, builds no
// strings and does no lookups by name unless something is wrong, and checks
// everything the kernel relies on:
//   - the number of tensors, dim values and scalars;
//   - each tensor's dtype, rank and static sizes; its dynamic sizes against
//     the given dim values and against each other (dim values not given are
//     inferred from the first tensor that carries them);
//   - contiguity where the kernel needs it; strides of the right rank;
//   - null pointers (allowed only for empty tensors) and pointers that are
//     not aligned to their element size;
//   - outputs overlapping an input or another output (kernel pointers are
//     no-alias);
//   - scalar kinds and ranges (an integer parameter takes no fractions).
// Every failure is a kiln::Error naming the kernel, the argument, what was
// expected and what was given. A pointer that misses the vector alignment of
// its parameter is not an error: the ArgBlock reports it so that the caller
// can launch the kernel's scalar (unvectorized) variant.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kiln/runtime/signature.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln::rt {

// A dim value left for the packer to infer from the tensors.
inline constexpr int64_t kInferDim = std::numeric_limits<int64_t>::min();

// A host value for a scalar parameter: a float, an integer or a bool. The
// packer converts it to the parameter's dtype: float parameters take floats
// and integers; integer parameters take integers that fit; bool parameters
// take bools.
struct ScalarArg {
  enum class Kind : uint8_t { Float, Int, Bool };
  Kind kind = Kind::Int;
  double f = 0;
  int64_t i = 0;

  ScalarArg() = default;
  template <std::floating_point T>
  ScalarArg(T v) : kind(Kind::Float), f(static_cast<double>(v)) {}  // NOLINT: implicit on purpose
  template <std::integral T>
  ScalarArg(T v)  // NOLINT
      : kind(std::same_as<T, bool> ? Kind::Bool : Kind::Int), i(static_cast<int64_t>(v)) {}

  std::string toString() const;
};

// The packed arguments of one launch. Not copyable or movable: params()
// points into the block itself. Meant to live on the stack; a pack that
// throws leaves it empty (size() == 0).
class ArgBlock {
 public:
  static constexpr size_t kMaxParams = 128;

  ArgBlock() = default;
  ArgBlock(const ArgBlock&) = delete;
  ArgBlock& operator=(const ArgBlock&) = delete;

  // kernelParams for cuLaunchKernel: size() pointers, each to one parameter.
  void** params() const { return const_cast<void**>(ptrs_.data()); }
  size_t size() const { return size_; }
  // The 8-byte slot of parameter i (pointers and i64 fill it; smaller scalars
  // sit in its low bytes, the rest zero).
  uint64_t slot(size_t i) const { return slots_[i]; }

  // True when every tensor meets its parameter's vector alignment: launch
  // the vectorized variant.
  bool vectorizable() const { return misaligned_ == 0; }
  // Bit t set: tensor t (signature order, first 64) misses its alignment.
  uint64_t misalignedMask() const { return misaligned_; }
  // True when every tensor pointer is a multiple of `bytes` (a power of two).
  bool allAligned(unsigned bytes) const { return (addressBits_ & (uint64_t(bytes) - 1)) == 0; }
  // The dim value packed for dynamic dim d (given or inferred).
  int64_t dimValue(size_t d) const { return static_cast<int64_t>(slots_[numTensors_ + d]); }

  // Identical packed parameters (used by tests: positional and named packing
  // must agree).
  bool samePacking(const ArgBlock& other) const;

 private:
  friend class ArgPacker;
  std::array<uint64_t, kMaxParams> slots_;
  std::array<void*, kMaxParams> ptrs_;
  size_t size_ = 0;
  size_t numTensors_ = 0;
  uint64_t addressBits_ = 0;  // OR of every tensor address
  uint64_t misaligned_ = 0;
};

// Launch arguments given by name. Building one allocates; it is the
// convenient path, not the fast one.
class NamedArgs {
 public:
  NamedArgs& tensor(std::string name, TensorView view);
  NamedArgs& dim(std::string name, int64_t value);
  NamedArgs& scalar(std::string name, ScalarArg value);

  // What was given, in the order given.
  const std::vector<std::pair<std::string, TensorView>>& tensors() const { return tensors_; }
  const std::vector<std::pair<std::string, int64_t>>& dims() const { return dims_; }
  const std::vector<std::pair<std::string, ScalarArg>>& scalars() const { return scalars_; }

 private:
  friend class ArgPacker;
  std::vector<std::pair<std::string, TensorView>> tensors_;
  std::vector<std::pair<std::string, int64_t>> dims_;
  std::vector<std::pair<std::string, ScalarArg>> scalars_;
};

class ArgPacker {
 public:
  // Validates the signature (KernelSignature::validate) and checks that it
  // fits an ArgBlock (at most 64 tensors and kMaxParams parameters).
  explicit ArgPacker(KernelSignature signature);

  const KernelSignature& signature() const { return sig_; }
  size_t numParams() const { return numParams_; }

  // Positional fast path. `tensors` in signature order (inputs, then
  // outputs); `dims` empty (infer all) or one value per declared dim, in
  // order, kInferDim to infer that one; `scalars` one per declared scalar.
  void pack(ArgBlock& out, std::span<const TensorView> tensors,
            std::span<const int64_t> dims = {}, std::span<const ScalarArg> scalars = {}) const;
  // The same, with the tensors given by pointer (no copies of views needed).
  void pack(ArgBlock& out, std::span<const TensorView* const> tensors,
            std::span<const int64_t> dims = {}, std::span<const ScalarArg> scalars = {}) const;
  void pack(ArgBlock& out, std::initializer_list<TensorView> tensors,
            std::initializer_list<int64_t> dims = {},
            std::initializer_list<ScalarArg> scalars = {}) const {
    pack(out, std::span<const TensorView>(tensors.begin(), tensors.size()),
         std::span<const int64_t>(dims.begin(), dims.size()),
         std::span<const ScalarArg>(scalars.begin(), scalars.size()));
  }

  // By name: every tensor and scalar must be named once; dims not named are
  // inferred. Unknown or repeated names are errors.
  void pack(ArgBlock& out, const NamedArgs& args) const;

 private:
  // Per tensor axis: the static size, or the index of its dynamic dim.
  struct AxisRule {
    int64_t size;
    int32_t dim;  // -1: static
  };
  struct TensorRule {
    uint32_t firstAxis;  // into axes_
    uint32_t rank;
    uint32_t elemSize;
    uint64_t alignMask;  // alignment - 1 (0: none)
    bool contiguous;
    bool passStrides;
    bool isOutput;
  };

  void packPointers(ArgBlock& out, const TensorView* const* tensors, size_t numTensors,
                    const int64_t* dims, size_t numDims, const ScalarArg* scalars,
                    size_t numScalars) const;

  // Cold paths: each builds the message and throws.
  [[noreturn]] void failCount(const char* what, size_t expected, size_t got) const;
  [[noreturn]] void failTensor(size_t t, const std::string& problem) const;
  [[noreturn]] void failDim(size_t t, size_t axis, const TensorView& v, int64_t bound,
                            int boundSource, const TensorView* const* tensors) const;
  [[noreturn]] void failScalar(size_t s, const ScalarArg& v, const std::string& problem) const;
  [[noreturn]] void failAlias(size_t a, size_t b, const TensorView& va,
                              const TensorView& vb) const;
  [[noreturn]] void fail(const std::string& message) const;

  KernelSignature sig_;
  std::vector<TensorRule> rules_;
  std::vector<AxisRule> axes_;
  size_t numInputs_ = 0;
  size_t numParams_ = 0;
};

}  // namespace kiln::rt
