// ArgPacker: the hot path (checks and packing, no allocation) and the
// construction that precomputes its rules. Error messages live in
// arg_errors.cpp, the by-name path in named_args.cpp.
#include "kiln/runtime/arg_packer.h"

#include <cstdio>
#include <cstring>

#include "kiln/error.h"

namespace kiln::rt {

ArgPacker::ArgPacker(KernelSignature signature) : sig_(std::move(signature)) {
  sig_.validate();
  if (sig_.tensors.size() > 64)
    fail("has " + std::to_string(sig_.tensors.size()) + " tensors; kiln supports at most 64");
  numParams_ = sig_.numParams();
  if (numParams_ > ArgBlock::kMaxParams)
    fail("has " + std::to_string(numParams_) + " parameters; kiln supports at most " +
         std::to_string(ArgBlock::kMaxParams));
  rules_.reserve(sig_.tensors.size());
  for (const TensorParam& t : sig_.tensors) {
    TensorRule r{};
    r.firstAxis = static_cast<uint32_t>(axes_.size());
    r.rank = static_cast<uint32_t>(t.shape.size());
    r.elemSize = static_cast<uint32_t>(dtypeSize(t.dtype));
    r.alignMask = t.alignment > 1 ? t.alignment - 1 : 0;
    r.contiguous = t.contiguous;
    r.passStrides = t.passStrides;
    r.isOutput = t.isOutput;
    for (const Dim& d : t.shape)
      axes_.push_back(AxisRule{d.isDynamic() ? 0 : d.size,
                               d.isDynamic() ? int32_t(sig_.findDim(d.name)) : int32_t(-1)});
    if (!t.isOutput) ++numInputs_;
    rules_.push_back(r);
  }
}

void ArgPacker::pack(ArgBlock& out, std::span<const TensorView> tensors,
                     std::span<const int64_t> dims, std::span<const ScalarArg> scalars) const {
  if (tensors.size() != rules_.size()) [[unlikely]] {
    out.size_ = 0;
    failCount("tensors", rules_.size(), tensors.size());
  }
  const TensorView* ptrs[64];  // the constructor caps a signature at 64 tensors
  for (size_t i = 0; i < tensors.size(); ++i) ptrs[i] = &tensors[i];
  packPointers(out, ptrs, tensors.size(), dims.data(), dims.size(), scalars.data(),
               scalars.size());
}

void ArgPacker::pack(ArgBlock& out, std::span<const TensorView* const> tensors,
                     std::span<const int64_t> dims, std::span<const ScalarArg> scalars) const {
  packPointers(out, tensors.data(), tensors.size(), dims.data(), dims.size(), scalars.data(),
               scalars.size());
}

void ArgPacker::packPointers(ArgBlock& out, const TensorView* const* tensors, size_t numTensors,
                             const int64_t* dims, size_t numDims, const ScalarArg* scalars,
                             size_t numScalars) const {
  const size_t T = rules_.size();
  const size_t D = sig_.dims.size();
  const size_t S = sig_.scalars.size();
  out.size_ = 0;  // stays empty if anything below throws
  if (numTensors != T) [[unlikely]] failCount("tensors", T, numTensors);
  if (numDims != 0 && numDims != D) [[unlikely]] failCount("dim values", D, numDims);
  if (numScalars != S) [[unlikely]] failCount("scalars", S, numScalars);

  uint64_t* slots = out.slots_.data();
  // Dim values live in their final slots; dimSource records which tensor
  // bound an inferred one (-1: given by the caller).
  int64_t* dimValues = reinterpret_cast<int64_t*>(slots + T);
  int32_t dimSource[ArgBlock::kMaxParams];
  for (size_t d = 0; d < D; ++d) {
    const int64_t given = numDims ? dims[d] : kInferDim;
    if (given < 0 && given != kInferDim) [[unlikely]]
      fail("dim '" + sig_.dims[d].name + "' was given as " + std::to_string(given) +
           "; sizes cannot be negative");
    dimValues[d] = given;
    dimSource[d] = -1;
  }

  uint64_t addressBits = 0;
  uint64_t misaligned = 0;
  uint64_t lo[64], hi[64];  // byte range of each tensor, for the alias check
  for (size_t t = 0; t < T; ++t) {
    const TensorView& v = *tensors[t];
    const TensorRule& r = rules_[t];
    if (v.dtype != sig_.tensors[t].dtype) [[unlikely]]
      failTensor(t, "expected dtype " + std::string(dtypeName(sig_.tensors[t].dtype)) + ", got " +
                        std::string(dtypeName(v.dtype)));
    if (v.shape.size() != r.rank) [[unlikely]]
      failTensor(t, "expected rank " + std::to_string(r.rank) + " " +
                        formatShape(sig_.tensors[t].shape) + ", got rank " +
                        std::to_string(v.shape.size()) + " " + formatShape(v.shape));
    const AxisRule* axes = axes_.data() + r.firstAxis;
    int64_t numel = 1;
    for (uint32_t a = 0; a < r.rank; ++a) {
      const int64_t s = v.shape[a];
      if (s < 0) [[unlikely]]
        failTensor(t, "axis " + std::to_string(a) + " has negative size " + std::to_string(s) +
                          " (shape " + formatShape(v.shape) + ")");
      if (__builtin_mul_overflow(numel, s, &numel)) [[unlikely]]
        failTensor(t, "shape " + formatShape(v.shape) + " has more elements than a 64-bit count holds");
      const int32_t d = axes[a].dim;
      if (d < 0) {
        if (s != axes[a].size) [[unlikely]]
          failTensor(t, "axis " + std::to_string(a) + " expected size " +
                            std::to_string(axes[a].size) + ", got " + std::to_string(s) +
                            " (expected shape " + formatShape(sig_.tensors[t].shape) +
                            ", got " + formatShape(v.shape) + ")");
      } else if (dimValues[d] == kInferDim) {
        dimValues[d] = s;
        dimSource[d] = static_cast<int32_t>(t);
      } else if (dimValues[d] != s) [[unlikely]] {
        failDim(t, a, v, dimValues[d], dimSource[d], tensors);
      }
    }
    if (!v.strides.empty()) {
      if (v.strides.size() != r.rank) [[unlikely]]
        failTensor(t, "has " + std::to_string(v.strides.size()) + " strides for rank " +
                          std::to_string(r.rank) + " (shape " + formatShape(v.shape) +
                          ", strides " + formatShape(v.strides) + ")");
      if (r.contiguous && !v.contiguous()) [[unlikely]]
        failTensor(t, "must be contiguous, got strides " + formatShape(v.strides) +
                          " for shape " + formatShape(v.shape) + " (contiguous strides are " +
                          formatShape(contiguousStrides(v.shape)) + ")");
    }
    const uint64_t addr = reinterpret_cast<uintptr_t>(v.data);
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(uint64_t(numel), uint64_t(r.elemSize), &bytes) || addr + bytes < addr) [[unlikely]]
      failTensor(t, "shape " + formatShape(v.shape) + " of " + std::string(dtypeName(v.dtype)) +
                        " spans more bytes than the address space holds");
    if (addr == 0) {
      if (numel != 0) [[unlikely]]
        failTensor(t, "data pointer is null (shape " + formatShape(v.shape) + ")");
    } else if (addr & (r.elemSize - 1)) [[unlikely]] {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%p", v.data);
      failTensor(t, std::string("pointer ") + buf + " is not aligned to its element size (" +
                        std::to_string(r.elemSize) + " bytes for " +
                        std::string(dtypeName(v.dtype)) + ")");
    }
    addressBits |= addr;
    if (addr & r.alignMask) misaligned |= uint64_t(1) << t;
    slots[t] = addr;
    if (numel == 0) {
      lo[t] = hi[t] = 0;
    } else if (v.strides.empty()) {
      lo[t] = addr;
      hi[t] = addr + bytes;
    } else {
      lo[t] = addr;
      for (uint32_t a = 0; a < r.rank; ++a)
        if (v.strides[a] < 0) lo[t] -= uint64_t(-v.strides[a]) * uint64_t(v.shape[a] - 1) * r.elemSize;
      hi[t] = lo[t] + v.spanBytes();
    }
  }

  // Outputs must not overlap inputs or earlier outputs (inputs may share
  // memory with each other: they are only read).
  for (size_t o = numInputs_; o < T; ++o) {
    if (lo[o] == hi[o]) continue;
    for (size_t t = 0; t < o; ++t)
      if (lo[t] != hi[t] && lo[o] < hi[t] && lo[t] < hi[o]) [[unlikely]]
        failAlias(o, t, *tensors[o], *tensors[t]);
  }

  for (size_t d = 0; d < D; ++d)
    if (dimValues[d] == kInferDim) [[unlikely]]
      fail("dynamic dim '" + sig_.dims[d].name +
           "' was not given and no tensor has it; pass its value");

  size_t p = T + D;
  for (size_t t = 0; t < T; ++t) {
    if (!rules_[t].passStrides) continue;
    const TensorView& v = *tensors[t];
    for (uint32_t a = 0; a < rules_[t].rank; ++a) slots[p++] = static_cast<uint64_t>(v.stride(a));
  }

  for (size_t s = 0; s < S; ++s) {
    const ScalarArg& v = scalars[s];
    const DType dt = sig_.scalars[s].dtype;
    uint64_t slot = 0;
    if (isFloat(dt)) {
      if (v.kind == ScalarArg::Kind::Bool) [[unlikely]]
        failScalar(s, v, "expected a number");
      const double x = v.kind == ScalarArg::Kind::Float ? v.f : static_cast<double>(v.i);
      if (dt == DType::F32) {
        const float f = static_cast<float>(x);
        std::memcpy(&slot, &f, sizeof(f));
      } else {
        slot = dt == DType::F16 ? doubleToF16Bits(x) : doubleToBF16Bits(x);
      }
    } else if (dt == DType::Bool) {
      if (v.kind != ScalarArg::Kind::Bool) [[unlikely]]
        failScalar(s, v, "expected a bool");
      slot = v.i ? 1 : 0;
    } else {
      if (v.kind != ScalarArg::Kind::Int) [[unlikely]]
        failScalar(s, v, "expected an integer");
      if (dt == DType::I32) {
        if (v.i < INT32_MIN || v.i > INT32_MAX) [[unlikely]]
          failScalar(s, v, "does not fit in i32");
        const int32_t x = static_cast<int32_t>(v.i);
        std::memcpy(&slot, &x, sizeof(x));
      } else {
        slot = static_cast<uint64_t>(v.i);
      }
    }
    slots[p++] = slot;
  }

  for (size_t i = 0; i < p; ++i) out.ptrs_[i] = &slots[i];
  out.size_ = p;
  out.numTensors_ = T;
  out.addressBits_ = addressBits;
  out.misaligned_ = misaligned;
}

bool ArgBlock::samePacking(const ArgBlock& other) const {
  if (size_ != other.size_ || numTensors_ != other.numTensors_ ||
      addressBits_ != other.addressBits_ || misaligned_ != other.misaligned_)
    return false;
  return std::memcmp(slots_.data(), other.slots_.data(), size_ * sizeof(uint64_t)) == 0;
}

}  // namespace kiln::rt
