// Host tensors and the reference evaluator: the oracle every GPU test
// compares against. It computes in fp64 (integers exactly in int64 with the
// node dtype's wrap-around), rounds only where the graph says a value is
// stored in a narrower type (casts and outputs), and favours clarity over
// speed while handling 10^7 elements in seconds.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln {

// A dense, contiguous (row-major) host tensor holding elements in their
// storage format (bf16/f16 as 16-bit patterns, bool as one byte).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, std::vector<int64_t> shape);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t bytes() const { return data_.size(); }
  void* data() { return data_.data(); }
  const void* data() const { return data_.data(); }

  // Element access through double (exact for every dtype but i64 beyond
  // 2^53; use getInt/setInt for those).
  double get(int64_t i) const;
  void set(int64_t i, double v);  // rounds to the dtype
  int64_t getInt(int64_t i) const;
  void setInt(int64_t i, int64_t v);

  // Fresh random values: floats uniform in [lo, hi); ints uniform in
  // [lo, hi) (truncated); bools fair coin.
  void fillRandom(std::mt19937_64& rng, double lo = -1.0, double hi = 1.0);
  // Every byte set to `byte` (0xFF makes NaN floats: a poison value).
  void fillBytes(uint8_t byte);

 private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numel_ = 0;
  std::vector<uint8_t> data_;
};

// Values for a graph's dynamic dims.
using DimBindings = std::map<std::string, int64_t>;

struct EvalInputs {
  std::map<std::string, HostTensor> tensors;  // by input name
  std::map<std::string, double> scalars;      // by runtime scalar name
  DimBindings dims;
};

struct EvalOutput {
  std::string name;
  HostTensor value;            // rounded to the output dtype
  std::vector<double> exact;   // fp64 values before the final rounding
};

// Evaluates every output of `g`. Missing or mismatched inputs (shape against
// the bound dims, dtype) and unbound dims are kiln::Error naming them.
std::vector<EvalOutput> evaluate(const Graph& g, const EvalInputs& inputs);

// Resolves a shape under dim bindings (error naming an unbound dim).
std::vector<int64_t> resolveShape(const Shape& s, const DimBindings& dims);

// Value ranges for randomInputs, by parameter name: [lo, hi).
using InputRanges = std::map<std::string, std::pair<double, double>>;

// Random inputs for every parameter of `g`: floats in [-1, 1), ints in
// [0, 8), bools fair, runtime scalars in [0.5, 1), unless `ranges` names
// the parameter.
EvalInputs randomInputs(const Graph& g, const DimBindings& dims, uint64_t seed,
                        const InputRanges& ranges = {});

}  // namespace kiln
