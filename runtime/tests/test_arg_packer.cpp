// ArgPacker on the positional path: what it packs, what it infers, what it
// reports about alignment and every launch mistake it rejects. Pointers are
// fake: packing never touches the driver.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <iostream>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"
#include "test_support.h"

using namespace kiln::rt;
using kiln::DType;
using Catch::Matchers::Contains;
using kiln::rt::test::fakePtr;

namespace {

// y = alpha * x + b (b a row vector), with a count scalar for good measure.
KernelSignature axpyRow() {
  KernelSignature s;
  s.kernel = "axpy_row";
  s.tensors = {{"x", DType::F32, {"N", 64}},
               {"b", DType::F32, {64}},
               {"y", DType::F32, {"N", 64}, /*isOutput=*/true}};
  s.dims = {{"N"}};
  s.scalars = {{"alpha", DType::F32}, {"count", DType::I32}};
  return s;
}

constexpr uintptr_t kX = 0x100000, kB = 0x200000, kY = 0x300000;

struct Launch {
  TensorView x{fakePtr(kX), DType::F32, {8, 64}};
  TensorView b{fakePtr(kB), DType::F32, {64}};
  TensorView y{fakePtr(kY), DType::F32, {8, 64}};
  std::vector<int64_t> dims;
  std::vector<ScalarArg> scalars{ScalarArg(0.5f), ScalarArg(3)};

  void pack(const ArgPacker& p, ArgBlock& out) const {
    const TensorView views[] = {x, b, y};
    p.pack(out, views, dims, scalars);
  }
};

float slotAsFloat(const ArgBlock& a, size_t i) {
  float f;
  const uint64_t s = a.slot(i);
  std::memcpy(&f, &s, sizeof(f));
  return f;
}

}  // namespace

TEST_CASE("packing lays out pointers, inferred dims and scalars in ABI order") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.pack(packer, args);
  REQUIRE(args.size() == 6);
  CHECK(packer.numParams() == 6);
  CHECK(args.slot(0) == kX);
  CHECK(args.slot(1) == kB);
  CHECK(args.slot(2) == kY);
  CHECK(args.slot(3) == 8);  // N, inferred from x
  CHECK(args.dimValue(0) == 8);
  CHECK(slotAsFloat(args, 4) == 0.5f);
  CHECK(args.slot(5) == 3);
  // kernelParams point at the slots.
  CHECK(*static_cast<void**>(args.params()[0]) == fakePtr(kX));
  CHECK(*static_cast<int64_t*>(args.params()[3]) == 8);
  CHECK(*static_cast<float*>(args.params()[4]) == 0.5f);
  CHECK(*static_cast<int32_t*>(args.params()[5]) == 3);
  CHECK(args.vectorizable());
}

TEST_CASE("given dim values are checked against the tensors") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.dims = {8};
  CHECK_NOTHROW(l.pack(packer, args));
  l.dims = {kInferDim};
  CHECK_NOTHROW(l.pack(packer, args));
  CHECK(args.dimValue(0) == 8);
  l.dims = {9};
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("kernel 'axpy_row'") && Contains("tensor 'x' (input 0)") &&
                        Contains("axis 0 is dynamic dim 'N' = 8") && Contains("N = 9 was given"));
  l.dims = {-1};
  CHECK_THROWS_WITH(l.pack(packer, args), Contains("dim 'N' was given as -1"));
  l.dims = {8, 8};
  CHECK_THROWS_WITH(l.pack(packer, args), Contains("expected 1 dim values (N), got 2"));
}

TEST_CASE("a dynamic dim must agree across tensors") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.y.shape = {7, 64};
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("tensor 'y' (output 0): axis 0 is dynamic dim 'N' = 7 (shape [7, 64])") &&
                        Contains("N = 8 from tensor 'x' (input 0) of shape [8, 64]"));
}

TEST_CASE("a dynamic dim no tensor carries must be given") {
  KernelSignature s = axpyRow();
  s.dims.push_back({"K"});
  const ArgPacker packer(s);
  ArgBlock args;
  Launch l;
  CHECK_THROWS_WITH(l.pack(packer, args), Contains("dynamic dim 'K' was not given and no tensor has it"));
  l.dims = {kInferDim, 5};
  l.pack(packer, args);
  CHECK(args.dimValue(0) == 8);
  CHECK(args.dimValue(1) == 5);
}

TEST_CASE("a tensor of the wrong dtype is rejected by name") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.pack(packer, args);
  REQUIRE(args.size() == 6);
  l.b.dtype = DType::BF16;
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("tensor 'b' (input 1): expected dtype f32, got bf16"));
  CHECK(args.size() == 0);  // a failed pack leaves nothing to launch
}

TEST_CASE("a tensor of the wrong rank or static size is rejected by name") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  SECTION("rank") {
    l.x.shape = {8, 64, 1};
    CHECK_THROWS_WITH(l.pack(packer, args),
                      Contains("tensor 'x' (input 0): expected rank 2 [N, 64], got rank 3 [8, 64, 1]"));
  }
  SECTION("static size") {
    l.b.shape = {63};
    CHECK_THROWS_WITH(l.pack(packer, args),
                      Contains("tensor 'b' (input 1): axis 0 expected size 64, got 63"));
  }
  SECTION("negative size") {
    l.x.shape = {-8, 64};
    CHECK_THROWS_WITH(l.pack(packer, args),
                      Contains("tensor 'x' (input 0): axis 0 has negative size -8"));
  }
}

TEST_CASE("a strided view is rejected where the kernel needs contiguity") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.x.strides = {64, 1};  // explicit but contiguous: fine
  CHECK_NOTHROW(l.pack(packer, args));
  l.x.strides = {128, 1};
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("tensor 'x' (input 0): must be contiguous, got strides [128, 1] for "
                             "shape [8, 64] (contiguous strides are [64, 1])"));
  l.x.strides = {1};
  CHECK_THROWS_WITH(l.pack(packer, args), Contains("tensor 'x' (input 0): has 1 strides for rank 2"));
}

TEST_CASE("a kernel that takes strides gets them after the dims") {
  KernelSignature s = axpyRow();
  s.tensors[0].contiguous = false;
  s.tensors[0].passStrides = true;
  const ArgPacker packer(s);
  ArgBlock args;
  Launch l;
  l.x.strides = {128, 2};
  l.pack(packer, args);
  REQUIRE(args.size() == 8);
  CHECK(args.slot(3) == 8);    // N
  CHECK(args.slot(4) == 128);  // x strides
  CHECK(args.slot(5) == 2);
  CHECK(slotAsFloat(args, 6) == 0.5f);
  l.x.strides = {};
  l.pack(packer, args);
  CHECK(args.slot(4) == 64);  // row-major strides when none are given
  CHECK(args.slot(5) == 1);
}

TEST_CASE("null pointers are rejected unless the tensor is empty") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.y.data = nullptr;
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("tensor 'y' (output 0): data pointer is null (shape [8, 64])"));
  l.x.shape = {0, 64};
  l.y.shape = {0, 64};
  l.x.data = nullptr;
  CHECK_NOTHROW(l.pack(packer, args));
  CHECK(args.dimValue(0) == 0);
}

TEST_CASE("a pointer not aligned to its element size is rejected") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.x.data = fakePtr(kX + 2);
  CHECK_THROWS_WITH(l.pack(packer, args),
                    Contains("tensor 'x' (input 0): pointer 0x100002 is not aligned to its element "
                             "size (4 bytes for f32)"));
}

TEST_CASE("a pointer off the vector alignment is reported, not rejected") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  l.pack(packer, args);
  CHECK(args.vectorizable());
  CHECK(args.misalignedMask() == 0);
  CHECK(args.allAligned(16));
  CHECK(args.allAligned(256));

  l.b.data = fakePtr(kB + 4);
  REQUIRE_NOTHROW(l.pack(packer, args));
  CHECK_FALSE(args.vectorizable());
  CHECK(args.misalignedMask() == 0b010);
  CHECK_FALSE(args.allAligned(16));
  CHECK_FALSE(args.allAligned(8));
  CHECK(args.allAligned(4));
  CHECK(args.slot(1) == kB + 4);

  KernelSignature s = axpyRow();
  s.tensors[1].alignment = 4;  // b's vector path needs only 4 bytes
  const ArgPacker relaxed(s);
  l.pack(relaxed, args);
  CHECK(args.vectorizable());
}

TEST_CASE("an output may not overlap an input or another output") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  SECTION("the same buffer") {
    l.y.data = l.x.data;
    CHECK_THROWS_WITH(l.pack(packer, args),
                      Contains("tensor 'y' (output 0) overlaps tensor 'x' (input 0) in memory: "
                               "[0x100000, 0x100800) and [0x100000, 0x100800)"));
  }
  SECTION("a partial overlap") {
    l.y.data = fakePtr(kX + 0x7fc);
    CHECK_THROWS_WITH(l.pack(packer, args), Contains("overlaps tensor 'x' (input 0)"));
  }
  SECTION("adjacent buffers are fine") {
    l.y.data = fakePtr(kX + 0x800);
    CHECK_NOTHROW(l.pack(packer, args));
  }
  SECTION("inputs may share memory") {
    l.b.data = l.x.data;
    CHECK_NOTHROW(l.pack(packer, args));
  }
  SECTION("two outputs") {
    KernelSignature s = axpyRow();
    s.tensors.push_back({"z", DType::F32, {"N", 64}, true});
    const ArgPacker two(s);
    const TensorView z(fakePtr(kY + 0x400), DType::F32, {8, 64});
    const TensorView views[] = {l.x, l.b, l.y, z};
    CHECK_THROWS_WITH(two.pack(args, views, {}, l.scalars),
                      Contains("tensor 'z' (output 1) overlaps tensor 'y' (output 0)"));
  }
  SECTION("a strided output overlapping through a negative stride") {
    KernelSignature s = axpyRow();
    s.tensors[2].contiguous = false;
    const ArgPacker strided(s);
    l.y.data = fakePtr(kB + 0x700);  // row 7 starts here; row 0 sits on b
    l.y.strides = {-64, 1};
    CHECK_THROWS_WITH(l.pack(strided, args), Contains("overlaps tensor 'b' (input 1)"));
  }
}

TEST_CASE("a shape whose size does not fit in 64 bits is rejected by name, not wrapped") {
  KernelSignature s;
  s.kernel = "copy2d";
  s.tensors = {{"x", DType::F32, {"N", "M"}}, {"y", DType::F32, {"N", "M"}, /*isOutput=*/true}};
  s.dims = {{"N"}, {"M"}};
  const ArgPacker packer(s);
  ArgBlock args;
  SECTION("more elements than an int64 counts") {
    const int64_t huge = int64_t{1} << 40;
    const TensorView views[] = {TensorView(fakePtr(kX), DType::F32, {huge, huge}),
                                TensorView(fakePtr(kY), DType::F32, {huge, huge})};
    CHECK_THROWS_WITH(packer.pack(args, views, {}, {}),
                      Contains("tensor 'x'") && Contains("more elements than a 64-bit count holds"));
  }
  SECTION("more bytes than the address space") {
    const int64_t big = int64_t{1} << 31;  // 2^62 f32 values: 2^64 bytes
    const TensorView views[] = {TensorView(fakePtr(kX), DType::F32, {big, big}),
                                TensorView(fakePtr(kY), DType::F32, {big, big})};
    CHECK_THROWS_WITH(packer.pack(args, views, {}, {}),
                      Contains("tensor 'x'") && Contains("spans more bytes than the address space holds"));
  }
  SECTION("a large shape that fits is fine") {
    const TensorView views[] = {TensorView(fakePtr(kX), DType::F32, {1 << 20, 1 << 10}),
                                TensorView(fakePtr(kX + (uint64_t{1} << 32)), DType::F32, {1 << 20, 1 << 10})};
    CHECK_NOTHROW(packer.pack(args, views, {}, {}));
  }
}

TEST_CASE("a missing or extra argument is rejected by name") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  SECTION("missing tensor") {
    const TensorView views[] = {l.x, l.b};
    CHECK_THROWS_WITH(packer.pack(args, views, {}, l.scalars),
                      Contains("expected 3 tensors (x, b, y), got 2: missing tensor 'y' (output 0)"));
  }
  SECTION("extra tensor") {
    const TensorView views[] = {l.x, l.b, l.y, l.y};
    CHECK_THROWS_WITH(packer.pack(args, views, {}, l.scalars),
                      Contains("expected 3 tensors (x, b, y), got 4: 1 more than the kernel takes"));
  }
  SECTION("missing scalar") {
    l.scalars.pop_back();
    CHECK_THROWS_WITH(l.pack(packer, args),
                      Contains("expected 2 scalars (alpha, count), got 1: missing scalar 'count'"));
  }
  SECTION("extra scalar") {
    l.scalars.push_back(1.0);
    CHECK_THROWS_WITH(l.pack(packer, args), Contains("got 3: 1 more than the kernel takes"));
  }
}

TEST_CASE("scalars are converted to their dtype, and refused when they do not fit") {
  KernelSignature s;
  s.kernel = "scalars";
  s.scalars = {{"f", DType::F32}, {"h", DType::F16}, {"bf", DType::BF16},
               {"i", DType::I32}, {"l", DType::I64}, {"flag", DType::Bool}};
  const ArgPacker packer(s);
  ArgBlock args;
  std::vector<ScalarArg> v{ScalarArg(2), ScalarArg(1.0), ScalarArg(-2.0f), ScalarArg(-7),
                           ScalarArg(int64_t(1) << 40), ScalarArg(true)};
  packer.pack(args, std::span<const TensorView>(), {}, v);
  REQUIRE(args.size() == 6);
  CHECK(slotAsFloat(args, 0) == 2.0f);  // an integer for a float parameter
  CHECK(args.slot(1) == 0x3C00);        // f16 1.0
  CHECK(args.slot(2) == 0xC000);        // bf16 -2.0
  int32_t i32;
  const uint64_t slot3 = args.slot(3);
  std::memcpy(&i32, &slot3, 4);
  CHECK(i32 == -7);
  CHECK((args.slot(3) >> 32) == 0);  // the unused high bytes are zero
  CHECK(args.slot(4) == uint64_t(1) << 40);
  CHECK(args.slot(5) == 1);

  SECTION("a fraction for an integer") {
    v[3] = 1.5;
    CHECK_THROWS_WITH(packer.pack(args, std::span<const TensorView>(), {}, v),
                      Contains("scalar 'i' (i32): expected an integer, got float 1.5"));
  }
  SECTION("an integer too large for i32") {
    v[3] = int64_t(1) << 31;
    CHECK_THROWS_WITH(packer.pack(args, std::span<const TensorView>(), {}, v),
                      Contains("scalar 'i' (i32): does not fit in i32, got integer 2147483648"));
  }
  SECTION("a bool for a float") {
    v[0] = false;
    CHECK_THROWS_WITH(packer.pack(args, std::span<const TensorView>(), {}, v),
                      Contains("scalar 'f' (f32): expected a number, got bool false"));
  }
  SECTION("an integer for a bool") {
    v[5] = 1;
    CHECK_THROWS_WITH(packer.pack(args, std::span<const TensorView>(), {}, v),
                      Contains("scalar 'flag' (bool): expected a bool, got integer 1"));
  }
}

TEST_CASE("a signature too large for an ArgBlock is refused up front") {
  KernelSignature s;
  s.kernel = "wide";
  for (int i = 0; i < 65; ++i) s.tensors.push_back({std::to_string(i).insert(0, 1, 't'), DType::F32, {4}});
  CHECK_THROWS_WITH(ArgPacker(s), Contains("kernel 'wide'") && Contains("at most 64"));
  KernelSignature bad = axpyRow();
  bad.tensors[0].name = std::string("b");
  CHECK_THROWS_WITH(ArgPacker(bad), Contains("invalid signature for kernel 'axpy_row'"));
}

TEST_CASE("packing by pointer and by value give the same block") {
  const ArgPacker packer(axpyRow());
  ArgBlock a, b;
  Launch l;
  l.pack(packer, a);
  const TensorView* ptrs[] = {&l.x, &l.b, &l.y};
  packer.pack(b, ptrs, {}, l.scalars);
  CHECK(a.samePacking(b));
}

TEST_CASE("packing a launch costs well under a microsecond of host time") {
  const ArgPacker packer(axpyRow());
  ArgBlock args;
  Launch l;
  const TensorView views[] = {l.x, l.b, l.y};
  const int64_t dims[] = {8};
  const int reps = 200000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reps; ++i) packer.pack(args, views, dims, l.scalars);
  auto t1 = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / reps;
  std::cout << "ArgPacker::pack (3 tensors, 1 dim, 2 scalars): " << ns << " ns per launch\n";
  CHECK(args.slot(3) == 8);
  // Generous: this holds in Debug and under sanitizers; Release is ~10x lower.
  CHECK(ns < 5000);
}
