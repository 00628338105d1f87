// TensorView helpers: sizes, contiguity and the bytes a view spans.
#include <catch2/catch.hpp>

#include "kiln/runtime/tensor_view.h"

using namespace kiln::rt;
using kiln::DType;

TEST_CASE("a view without strides is contiguous row-major") {
  TensorView v(nullptr, DType::F32, {2, 3, 4});
  CHECK(v.rank() == 3);
  CHECK(v.numel() == 24);
  CHECK(v.contiguous());
  CHECK(v.stride(0) == 12);
  CHECK(v.stride(2) == 1);
  CHECK(v.spanBytes() == 96);
  CHECK(contiguousStrides({2, 3, 4}) == std::vector<int64_t>{12, 4, 1});
}

TEST_CASE("contiguity is judged on the strides, ignoring axes of size 1") {
  CHECK(TensorView(nullptr, DType::F32, {2, 3}, {3, 1}).contiguous());
  CHECK(TensorView(nullptr, DType::F32, {1, 3}, {99, 1}).contiguous());
  CHECK_FALSE(TensorView(nullptr, DType::F32, {2, 3}, {1, 2}).contiguous());  // transposed
  CHECK_FALSE(TensorView(nullptr, DType::F32, {2, 3}, {6, 2}).contiguous());  // every other column
  CHECK_FALSE(TensorView(nullptr, DType::F32, {2, 3}, {0, 1}).contiguous());  // broadcast rows
  CHECK_FALSE(TensorView(nullptr, DType::F32, {2, 3}, {1}).contiguous());     // wrong rank
  CHECK(TensorView(nullptr, DType::F32, {0, 3}, {7, 7}).contiguous());        // empty
}

TEST_CASE("the span of a strided view covers its lowest to highest element") {
  CHECK(TensorView(nullptr, DType::F32, {2, 3}, {6, 2}).spanBytes() == (6 + 4 + 1) * 4u);
  CHECK(TensorView(nullptr, DType::BF16, {4, 3}, {0, 1}).spanBytes() == 3 * 2u);
  CHECK(TensorView(nullptr, DType::F32, {3}, {-1}).spanBytes() == 3 * 4u);
  CHECK(TensorView(nullptr, DType::F32, {0, 5}).spanBytes() == 0u);
  CHECK(TensorView(nullptr, DType::F32, {}).numel() == 1);  // a scalar tensor
}

TEST_CASE("a view prints its dtype, shape, strides and address") {
  TensorView v(reinterpret_cast<void*>(uintptr_t(0x1000)), DType::F16, {8, 4}, {1, 8});
  CHECK(v.toString() == "f16[8, 4] strides [1, 8] at 0x1000");
}
