// Host tensors (HostTensor: dense row-major storage and element access in
// the storage format), the random inputs tests feed to both the reference
// evaluator and the GPU, and dim binding (resolveShape). Declared in
// kiln/dsl/reference.h; conversions go through element_semantics.h so that
// reading, writing and casting agree with the evaluator.
#include "kiln/dsl/reference.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "element_semantics.h"

namespace kiln {

namespace {

using detail::floatToInt;

// ------------------------------------------------------------ helpers

using detail::dimsToString;
using detail::product;

// ------------------------------------------------------------ random fill

// Uniform in [0, 1) from the top 53 bits: the same on every platform (unlike
// std::uniform_real_distribution).
double uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Uniform integer in [0, n) for n > 0 (multiply-shift, no modulo bias to
// speak of).
uint64_t uniformBelow(std::mt19937_64& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

// The largest value of float dtype t below the representable value r.
double nextDown(double r, DType t) {
  if (t == DType::F32) return std::nextafter(static_cast<float>(r), -INFINITY);
  bool bf16 = t == DType::BF16;
  uint16_t bits = bf16 ? doubleToBF16Bits(r) : doubleToF16Bits(r);
  if ((bits & 0x7FFF) == 0) bits = 0x8001;   // ±0: the smallest negative subnormal
  else if (bits & 0x8000) bits += 1;         // negative: larger magnitude
  else bits -= 1;
  return bf16 ? bf16BitsToDouble(bits) : f16BitsToDouble(bits);
}

[[noreturn]] void outOfRange(int64_t i, int64_t numel) {
  throw Error(fmt::format("HostTensor: index {} is out of range; expected [0, {})", i, numel));
}
template <class T>
T load(const std::vector<uint8_t>& data, int64_t i) {
  T v;
  std::memcpy(&v, data.data() + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store(std::vector<uint8_t>& data, int64_t i, T v) {
  std::memcpy(data.data() + i * sizeof(T), &v, sizeof(T));
}

}  // namespace

// ------------------------------------------------------------ HostTensor

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)) {
  for (int64_t d : shape_)
    if (d < 0)
      throw Error(fmt::format("HostTensor: shape {} has a negative dim; expected sizes >= 0",
                              dimsToString(shape_)));
  numel_ = product(shape_);
  data_.assign(static_cast<size_t>(numel_) * dtypeSize(dtype_), 0);
}

double HostTensor::get(int64_t i) const {
  if (i < 0 || i >= numel_) outOfRange(i, numel_);
  switch (dtype_) {
    case DType::Bool: return data_[i] != 0 ? 1.0 : 0.0;
    case DType::I32: return load<int32_t>(data_, i);
    case DType::I64: return static_cast<double>(load<int64_t>(data_, i));
    case DType::F16: return f16BitsToDouble(load<uint16_t>(data_, i));
    case DType::BF16: return bf16BitsToDouble(load<uint16_t>(data_, i));
    case DType::F32: return load<float>(data_, i);
  }
  return 0.0;
}

void HostTensor::set(int64_t i, double v) {
  if (i < 0 || i >= numel_) outOfRange(i, numel_);
  switch (dtype_) {
    case DType::Bool: data_[i] = (v != 0.0 || std::isnan(v)) ? 1 : 0; return;
    case DType::I32: store<int32_t>(data_, i, static_cast<int32_t>(floatToInt(v, dtype_))); return;
    case DType::I64: store<int64_t>(data_, i, floatToInt(v, dtype_)); return;
    case DType::F16: store<uint16_t>(data_, i, doubleToF16Bits(v)); return;
    case DType::BF16: store<uint16_t>(data_, i, doubleToBF16Bits(v)); return;
    case DType::F32: store<float>(data_, i, static_cast<float>(v)); return;
  }
}

int64_t HostTensor::getInt(int64_t i) const {
  if (i < 0 || i >= numel_) outOfRange(i, numel_);
  switch (dtype_) {
    case DType::Bool: return data_[i] != 0 ? 1 : 0;
    case DType::I32: return load<int32_t>(data_, i);
    case DType::I64: return load<int64_t>(data_, i);
    default: return floatToInt(get(i), DType::I64);
  }
}

void HostTensor::setInt(int64_t i, int64_t v) {
  if (i < 0 || i >= numel_) outOfRange(i, numel_);
  switch (dtype_) {
    case DType::Bool: data_[i] = v != 0 ? 1 : 0; return;
    case DType::I32: store<int32_t>(data_, i, static_cast<int32_t>(v)); return;
    case DType::I64: store<int64_t>(data_, i, v); return;
    default: set(i, static_cast<double>(v)); return;  // correctly rounded, see evalCast
  }
}

void HostTensor::fillRandom(std::mt19937_64& rng, double lo, double hi) {
  switch (dtypeCategory(dtype_)) {
    case DTypeCategory::Bool:
      for (int64_t i = 0; i < numel_; ++i) data_[i] = static_cast<uint8_t>(rng() >> 63);
      return;
    case DTypeCategory::Integer: {
      // The integers in [lo, hi): ceil(lo) .. ceil(hi) - 1.
      int64_t first = static_cast<int64_t>(std::ceil(lo));
      int64_t span = static_cast<int64_t>(std::ceil(hi)) - first;
      for (int64_t i = 0; i < numel_; ++i)
        setInt(i, span > 0 ? first + static_cast<int64_t>(uniformBelow(rng, span)) : first);
      return;
    }
    case DTypeCategory::Float:
      for (int64_t i = 0; i < numel_; ++i) {
        double r = roundToDType(lo + (hi - lo) * uniform01(rng), dtype_);
        // Rounding to a narrow dtype may land on hi; keep the range half-open.
        while (r >= hi && hi > lo) r = nextDown(r, dtype_);
        set(i, r);
      }
      return;
  }
}

void HostTensor::fillBytes(uint8_t byte) { std::fill(data_.begin(), data_.end(), byte); }

// ------------------------------------------------------------ entry points

std::vector<int64_t> resolveShape(const Shape& s, const DimBindings& dims) {
  std::vector<int64_t> out;
  out.reserve(s.size());
  for (const Dim& d : s) {
    if (d.isStatic()) {
      out.push_back(d.size);
      continue;
    }
    auto it = dims.find(d.name);
    if (it == dims.end())
      throw Error(fmt::format("dynamic dim '{}' of shape {} is not bound; expected a size for it",
                              d.name, shapeToString(s)));
    out.push_back(it->second);
  }
  return out;
}

EvalInputs randomInputs(const Graph& g, const DimBindings& dims, uint64_t seed,
                        const InputRanges& ranges) {
  for (const auto& [name, range] : ranges) {
    bool known = false;
    for (int id : g.params()) known = known || g.node(id).name == name;
    if (!known)
      throw Error(fmt::format("randomInputs: a range is given for '{}', which is not a parameter "
                              "of the graph",
                              name));
  }
  EvalInputs in;
  in.dims = dims;
  std::mt19937_64 rng(seed);
  for (int id : g.params()) {
    const Node& n = g.node(id);
    // Defaults: tensors in [-1, 1) (ints [0, 8)); float scalars in
    // [0.5, 1), int scalars in [1, 8) (a step count, say, is never 0).
    std::pair<double, double> range;
    if (n.op == Op::Input) range = isFloat(n.dtype) ? std::pair{-1.0, 1.0} : std::pair{0.0, 8.0};
    else range = isFloat(n.dtype) ? std::pair{0.5, 1.0} : std::pair{1.0, 8.0};
    if (auto it = ranges.find(n.name); it != ranges.end()) range = it->second;

    if (n.op == Op::Input) {
      HostTensor t(n.dtype, resolveShape(n.shape, dims));
      t.fillRandom(rng, range.first, range.second);
      in.tensors.emplace(n.name, std::move(t));
    } else {
      HostTensor one(n.dtype, {});
      one.fillRandom(rng, range.first, range.second);
      in.scalars[n.name] = one.get(0);
    }
  }
  return in;
}

}  // namespace kiln