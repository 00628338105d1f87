// KernelSignature: the ABI layout it describes, its text form and the
// mistakes validate() catches.
#include <catch2/catch.hpp>

#include "kiln/error.h"
#include "kiln/runtime/signature.h"

using namespace kiln::rt;
using kiln::DType;
using Catch::Matchers::Contains;

namespace {

KernelSignature biasGelu() {
  KernelSignature s;
  s.kernel = "bias_gelu";
  s.tensors = {{"x", DType::BF16, {"N", 4096}},
               {"b", DType::BF16, {4096}},
               {"y", DType::BF16, {"N", 4096}, /*isOutput=*/true}};
  s.dims = {{"N"}};
  s.scalars = {{"alpha", DType::F32}, {"flag", DType::Bool}};
  return s;
}

}  // namespace

TEST_CASE("a signature lays out pointers, then dims, then strides, then scalars") {
  KernelSignature s = biasGelu();
  CHECK_NOTHROW(s.validate());
  CHECK(s.numInputs() == 2);
  CHECK(s.numOutputs() == 1);
  CHECK(s.parameterSizes() == std::vector<size_t>{8, 8, 8, 8, 4, 1});
  s.tensors[0].passStrides = true;
  s.tensors[0].contiguous = false;
  CHECK(s.parameterSizes() == std::vector<size_t>{8, 8, 8, 8, 8, 8, 4, 1});
  CHECK(s.numParams() == 8);
}

TEST_CASE("a signature prints as one line and describes its tensors") {
  const KernelSignature s = biasGelu();
  CHECK(s.toString() ==
        "bias_gelu(x: bf16[N, 4096], b: bf16[4096], out y: bf16[N, 4096]; N; alpha: f32, flag: bool)");
  CHECK(s.describeTensor(1) == "tensor 'b' (input 1)");
  CHECK(s.describeTensor(2) == "tensor 'y' (output 0)");
  CHECK(s.findTensor("y") == 2);
  CHECK(s.findDim("N") == 0);
  CHECK(s.findScalar("flag") == 1);
  CHECK(s.findScalar("x") == -1);
}

TEST_CASE("validate names the kernel and the mistake") {
  KernelSignature s = biasGelu();
  SECTION("a repeated name") {
    s.scalars[0].name = std::string("x");  // (a temporary: GCC 12 -Wrestrict false positive)
    CHECK_THROWS_WITH(s.validate(), Contains("kernel 'bias_gelu'") && Contains("'x' is used twice"));
  }
  SECTION("an empty name") {
    s.tensors[1].name = "";
    CHECK_THROWS_WITH(s.validate(), Contains("a tensor has an empty name"));
  }
  SECTION("an input after an output") {
    std::swap(s.tensors[1], s.tensors[2]);
    CHECK_THROWS_WITH(s.validate(), Contains("input tensor 'b' comes after an output"));
  }
  SECTION("an undeclared dynamic dim") {
    s.tensors[0].shape[0] = Dim("M");
    CHECK_THROWS_WITH(s.validate(),
                      Contains("tensor 'x' axis 0 uses dynamic dim 'M', which is not declared"));
  }
  SECTION("a negative static size") {
    s.tensors[1].shape[0] = Dim(-2);
    CHECK_THROWS_WITH(s.validate(), Contains("tensor 'b' axis 0 has negative size -2"));
  }
  SECTION("an alignment that is not a power of two") {
    s.tensors[1].alignment = 12;
    CHECK_THROWS_WITH(s.validate(), Contains("tensor 'b' alignment 12 is not a power of two"));
  }
}
