// ArgPacker by name: the same block as the positional path, and clear errors
// for unknown, repeated, missing and misplaced names.
#include <catch2/catch.hpp>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"
#include "test_support.h"

using namespace kiln::rt;
using kiln::DType;
using Catch::Matchers::Contains;
using kiln::rt::test::fakePtr;

namespace {

KernelSignature scaleAdd() {
  KernelSignature s;
  s.kernel = "scale_add";
  s.tensors = {{"x", DType::BF16, {"N", "K"}},
               {"y", DType::BF16, {"N", "K"}},
               {"out", DType::F32, {"N", "K"}, /*isOutput=*/true}};
  s.dims = {{"N"}, {"K"}};
  s.scalars = {{"alpha", DType::F32}, {"steps", DType::I64}};
  return s;
}

const TensorView kX(fakePtr(0x10000), DType::BF16, {4, 100});
const TensorView kY(fakePtr(0x20000), DType::BF16, {4, 100});
const TensorView kOut(fakePtr(0x30000), DType::F32, {4, 100});

}  // namespace

TEST_CASE("packing by name gives the same block as packing by position") {
  const ArgPacker packer(scaleAdd());
  ArgBlock positional, named;
  const TensorView views[] = {kX, kY, kOut};
  const ScalarArg scalars[] = {1.25f, int64_t(9)};
  packer.pack(positional, views, {}, scalars);
  // Any order, and dims may be left to inference.
  packer.pack(named, NamedArgs()
                         .scalar("steps", int64_t(9))
                         .tensor("out", kOut)
                         .tensor("y", kY)
                         .scalar("alpha", 1.25f)
                         .tensor("x", kX));
  CHECK(positional.samePacking(named));
  CHECK(named.dimValue(0) == 4);
  CHECK(named.dimValue(1) == 100);

  ArgBlock withDims;
  packer.pack(withDims, NamedArgs()
                            .tensor("x", kX)
                            .tensor("y", kY)
                            .tensor("out", kOut)
                            .dim("K", 100)
                            .dim("N", 4)
                            .scalar("alpha", 1.25f)
                            .scalar("steps", int64_t(9)));
  CHECK(positional.samePacking(withDims));
}

TEST_CASE("packing by name rejects unknown, repeated, missing and misplaced names") {
  const ArgPacker packer(scaleAdd());
  ArgBlock args;
  auto full = [] {
    return NamedArgs().tensor("x", kX).tensor("y", kY).tensor("out", kOut).scalar("alpha", 1.0f).scalar("steps", 1);
  };
  CHECK_NOTHROW(packer.pack(args, full()));
  CHECK_THROWS_WITH(packer.pack(args, full().tensor("z", kX)),
                    Contains("kernel 'scale_add': no parameter named 'z' (given as a tensor); the "
                             "kernel takes: x, y, out, N, K, alpha, steps"));
  CHECK_THROWS_WITH(packer.pack(args, full().tensor("x", kX)),
                    Contains("tensor 'x' (input 0) was given twice"));
  CHECK_THROWS_WITH(packer.pack(args, full().dim("N", 4).dim("N", 4)),
                    Contains("dim 'N' was given twice"));
  CHECK_THROWS_WITH(packer.pack(args, full().scalar("alpha", 2.0f)),
                    Contains("scalar 'alpha' was given twice"));
  CHECK_THROWS_WITH(packer.pack(args, full().dim("alpha", 3)),
                    Contains("'alpha' was given as a dim, but it is a scalar"));
  CHECK_THROWS_WITH(packer.pack(args, full().scalar("N", 3)),
                    Contains("'N' was given as a scalar, but it is a dynamic dim"));
  CHECK_THROWS_WITH(
      packer.pack(args, NamedArgs().tensor("x", kX).tensor("y", kY).scalar("alpha", 1.0f).scalar("steps", 1)),
      Contains("missing tensor 'out' (output 0)"));
  CHECK_THROWS_WITH(
      packer.pack(args, NamedArgs().tensor("x", kX).tensor("y", kY).tensor("out", kOut).scalar("alpha", 1.0f)),
      Contains("missing scalar 'steps' (i64)"));
  // Named launches get the same checks as positional ones.
  CHECK_THROWS_WITH(packer.pack(args, full().dim("K", 99)),
                    Contains("tensor 'x' (input 0): axis 1 is dynamic dim 'K' = 100") &&
                        Contains("K = 99 was given"));
}
