// TensorView: a caller's tensor as kiln sees it at launch: a device pointer,
// a dtype, a shape and strides (in elements; empty means dense row-major).
// A view owns nothing. Keep views around and update `data` between launches
// to launch without any heap allocation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::rt {

struct TensorView {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // in elements; empty = contiguous row-major

  TensorView() = default;
  TensorView(void* data, DType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides = {})
      : data(data), dtype(dtype), shape(std::move(shape)), strides(std::move(strides)) {}

  size_t rank() const { return shape.size(); }
  int64_t numel() const;
  // Bytes from the lowest to one past the highest element the view can
  // touch (numel * element size when contiguous; 0 when empty).
  size_t spanBytes() const;
  // Dense row-major: no strides given, or strides equal to the row-major
  // ones (axes of size 1 may have any stride). Empty views are contiguous.
  bool contiguous() const;
  // Element stride of `axis` (the row-major one when strides are empty).
  int64_t stride(size_t axis) const;
  // "f32[8, 4096] at 0x7f..." (plus strides when given).
  std::string toString() const;
};

// Row-major strides (in elements) for `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& shape);
// "[8, 4096]"
std::string formatShape(const std::vector<int64_t>& shape);

}  // namespace kiln::rt

namespace kiln {
using rt::TensorView;
}  // namespace kiln
