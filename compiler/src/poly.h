// Internal: sizes and strides as polynomials over the named dynamic dims
// (sum of c * N * M ...), so that index math is exact for any binding and
// can be folded when everything is static.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dsl/graph.h"

namespace kiln::compiler {

struct Monomial {
  int64_t coeff = 0;
  std::vector<std::string> dims;  // sorted; repeated names mean powers
  bool operator==(const Monomial&) const = default;
};

class Poly {
 public:
  Poly() = default;
  static Poly constant(int64_t c);
  static Poly of(const Dim& d);

  Poly operator+(const Poly& o) const;
  Poly operator*(const Poly& o) const;
  Poly operator*(int64_t c) const;
  bool operator==(const Poly& o) const { return terms_ == o.terms_; }

  bool isZero() const { return terms_.empty(); }
  bool isConstant() const;
  int64_t constantValue() const;   // requires isConstant()
  // True when every coefficient is a multiple of v (so the value is, for any
  // binding of the dims).
  bool divisibleBy(int64_t v) const;
  // The same where dim `multiple` is known to be a multiple of v (terms
  // holding it are): a row kernel's vectorized entry runs only where its
  // dynamic row length is a multiple of its vector width.
  bool divisibleBy(int64_t v, const std::string& multiple) const;
  const std::vector<Monomial>& terms() const { return terms_; }
  std::string str() const;

 private:
  void normalize();
  std::vector<Monomial> terms_;
};

// Row-major strides of a shape (in elements).
std::vector<Poly> rowMajorStrides(const Shape& s);
Poly elementCount(const Shape& s);

}  // namespace kiln::compiler
