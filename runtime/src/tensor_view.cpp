// TensorView helpers.
#include "kiln/runtime/tensor_view.h"

#include <cstdio>

namespace kiln::rt {

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

int64_t TensorView::stride(size_t axis) const {
  if (!strides.empty()) return strides[axis];
  int64_t s = 1;
  for (size_t a = axis + 1; a < shape.size(); ++a) s *= shape[a];
  return s;
}

bool TensorView::contiguous() const {
  if (strides.empty()) return true;
  if (strides.size() != shape.size()) return false;
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    if (shape[a] != 1 && strides[a] != expected) return false;
    expected *= shape[a];
  }
  return true;
}

size_t TensorView::spanBytes() const {
  if (numel() <= 0) return 0;
  int64_t lo = 0, hi = 0;
  for (size_t a = 0; a < shape.size(); ++a) {
    int64_t reach = (shape[a] - 1) * stride(a);
    (reach < 0 ? lo : hi) += reach;
  }
  return static_cast<size_t>(hi - lo + 1) * static_cast<size_t>(dtypeSize(dtype));
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size());
  int64_t s = 1;
  for (size_t a = shape.size(); a-- > 0;) {
    out[a] = s;
    s *= shape[a];
  }
  return out;
}

std::string formatShape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string TensorView::toString() const {
  char addr[32];
  std::snprintf(addr, sizeof(addr), "%p", data);
  std::string out = std::string(dtypeName(dtype)) + formatShape(shape);
  if (!strides.empty()) out += " strides " + formatShape(strides);
  return out + " at " + addr;
}

}  // namespace kiln::rt
