#include "poly.h"

#include <algorithm>

namespace kiln::compiler {

Poly Poly::constant(int64_t c) {
  Poly p;
  if (c != 0) p.terms_.push_back({c, {}});
  return p;
}

Poly Poly::of(const Dim& d) {
  if (d.isStatic()) return constant(d.size);
  Poly p;
  p.terms_.push_back({1, {d.name}});
  return p;
}

void Poly::normalize() {
  for (Monomial& m : terms_) std::sort(m.dims.begin(), m.dims.end());
  std::sort(terms_.begin(), terms_.end(), [](const Monomial& a, const Monomial& b) { return a.dims < b.dims; });
  std::vector<Monomial> merged;
  for (const Monomial& m : terms_) {
    if (!merged.empty() && merged.back().dims == m.dims) merged.back().coeff += m.coeff;
    else merged.push_back(m);
  }
  merged.erase(std::remove_if(merged.begin(), merged.end(), [](const Monomial& m) { return m.coeff == 0; }),
               merged.end());
  terms_ = std::move(merged);
}

Poly Poly::operator+(const Poly& o) const {
  Poly p = *this;
  p.terms_.insert(p.terms_.end(), o.terms_.begin(), o.terms_.end());
  p.normalize();
  return p;
}

Poly Poly::operator*(const Poly& o) const {
  Poly p;
  for (const Monomial& a : terms_)
    for (const Monomial& b : o.terms_) {
      Monomial m{a.coeff * b.coeff, a.dims};
      m.dims.insert(m.dims.end(), b.dims.begin(), b.dims.end());
      p.terms_.push_back(std::move(m));
    }
  p.normalize();
  return p;
}

Poly Poly::operator*(int64_t c) const { return *this * constant(c); }

bool Poly::isConstant() const { return terms_.empty() || (terms_.size() == 1 && terms_[0].dims.empty()); }

int64_t Poly::constantValue() const { return terms_.empty() ? 0 : terms_[0].coeff; }

bool Poly::divisibleBy(int64_t v) const {
  return std::all_of(terms_.begin(), terms_.end(), [&](const Monomial& m) { return m.coeff % v == 0; });
}

bool Poly::divisibleBy(int64_t v, const std::string& multiple) const {
  return std::all_of(terms_.begin(), terms_.end(), [&](const Monomial& m) {
    return m.coeff % v == 0 || std::find(m.dims.begin(), m.dims.end(), multiple) != m.dims.end();
  });
}

std::string Poly::str() const {
  if (terms_.empty()) return "0";
  std::string s;
  for (size_t i = 0; i < terms_.size(); ++i) {
    if (i) s += " + ";
    s += std::to_string(terms_[i].coeff);
    for (const std::string& d : terms_[i].dims) s += "*" + d;
  }
  return s;
}

std::vector<Poly> rowMajorStrides(const Shape& s) {
  std::vector<Poly> strides(s.size());
  Poly acc = Poly::constant(1);
  for (size_t i = s.size(); i-- > 0;) {
    strides[i] = acc;
    acc = acc * Poly::of(s[i]);
  }
  return strides;
}

Poly elementCount(const Shape& s) {
  Poly acc = Poly::constant(1);
  for (const Dim& d : s) acc = acc * Poly::of(d);
  return acc;
}

}  // namespace kiln::compiler
