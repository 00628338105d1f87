// The CUDA C++ path of the matmul schedule, without a GPU: NVRTC makes PTX
// for compute_90a (wgmma in inline PTX), the ptxas executable makes the
// sm_90a cubin with its resource report, and every failure along the way is
// a kiln::Error carrying the compiler's message.
#include <string>

#include <catch2/catch.hpp>

#include "kiln/compiler/backend.h"
#include "kiln/compiler/nvrtc.h"
#include "kiln/error.h"
#include "../src/matmul_sm90.h"

using namespace kiln::compiler;
using Catch::Matchers::Contains;

namespace {

// One warpgroup issues a single m64n16k16 bf16 wgmma from two shared-memory
// descriptors passed in as parameters and writes its 8 accumulators per
// thread. Not a useful kernel: a probe that the toolchain takes sm_90a code.
const char* kWgmmaProbe = R"(
extern "C" __global__ void __launch_bounds__(128, 1)
kiln_wgmma_probe(float* out, unsigned long long descA, unsigned long long descB) {
  float d[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) d[i] = 0.0f;
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
  asm volatile(
      "{\n"
      ".reg .pred scale;\n"
      "setp.ne.b32 scale, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, scale, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(descA), "l"(descB), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = d[i];
}
)";

}  // namespace

TEST_CASE("NVRTC: CUDA C++ with wgmma to PTX for compute_90a, then ptxas to an sm_90a cubin",
          "[compiler][nvrtc]") {
  std::string why;
  if (!nvrtcAvailable("", &why)) {
    // Every machine kiln builds on has the CUDA toolkit; say so loudly.
    FAIL("NVRTC is not available: " << why);
  }
  CHECK(nvrtcVersion().rfind("13.", 0) == 0);
  CudaCompileOptions o;
  o.name = "wgmma_probe.cu";
  CudaToPtxResult p = cudaToPtx(kWgmmaProbe, o);
  CHECK_THAT(p.ptx, Contains(".entry kiln_wgmma_probe"));
  CHECK_THAT(p.ptx, Contains("wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16"));
  CHECK_THAT(p.ptx, Contains(".target sm_90a"));
  CHECK(p.ms > 0);

  // "a" targets never go through nvJitLink (it crashes on wgmma): the
  // default route is the ptxas child process.
  CubinResult c = ptxToCubin(p.ptx, "sm_90a", CubinOptions{});
  CHECK(c.route == CubinRoute::Ptxas);
  REQUIRE(c.cubin.size() > 4);
  CHECK((c.cubin[0] == 0x7f && c.cubin[1] == 'E'));
  const ResourceReport* r = c.kernel("kiln_wgmma_probe");
  REQUIRE(r != nullptr);
  CHECK(r->registers > 0);
  CHECK(r->spillStoreBytes == 0);
}

TEST_CASE("NVRTC errors name the source and carry NVRTC's log", "[compiler][nvrtc]") {
  CudaCompileOptions o;
  o.name = "broken.cu";
  CHECK_THROWS_WITH(cudaToPtx("extern \"C\" __global__ void k(float* p) { p[0] = undeclared_thing; }", o),
                    Contains("NVRTC") && Contains("broken.cu") && Contains("undeclared_thing"));
  // Only virtual architectures: the cubin is ptxas's job.
  o.arch = "sm_90a";
  CHECK_THROWS_WITH(cudaToPtx("__global__ void k() {}", o), Contains("not a virtual architecture"));
}

TEST_CASE("PTX that ptxas rejects is a kiln::Error with ptxas's message", "[compiler][nvrtc]") {
  // NVRTC passes inline PTX through unchecked; ptxas finds the bad opcode.
  const char* bad = R"(
extern "C" __global__ void kiln_bad_asm(int* p) { asm volatile("not.an.instruction;"); p[0] = 1; }
)";
  CudaToPtxResult p = cudaToPtx(bad, {});
  try {
    ptxToCubin(p.ptx, "sm_90a", CubinOptions{});
    FAIL("ptxas accepted an invalid instruction");
  } catch (const kiln::Error& e) {
    std::string what = e.what();
    CHECK_THAT(what, Contains("ptxas"));
    CHECK_THAT(what, Contains("not.an.instruction") || Contains("syntax error") || Contains("Unknown"));
  }
}

TEST_CASE("the sm_90a matmul kernel (not yet used) compiles without spills for every config of its space",
          "[compiler][nvrtc][matmul]") {
  const auto space = sm90MatmulSpace();
  REQUIRE(space.size() >= 3);
  for (kiln::DType t : {kiln::DType::BF16, kiln::DType::F16})
    for (const Sm90MatmulConfig& c : space) {
      INFO(kiln::dtypeName(t) << " " << c.json());
      CudaCompileOptions o;
      o.name = "kiln_matmul_sm90.cu";
      CudaToPtxResult p = cudaToPtx(emitSm90MatmulSource(t, c, "kiln_matmul_sm90"), o);
      CHECK_THAT(p.ptx, Contains("wgmma.mma_async.sync.aligned.m64n" + std::to_string(c.blockN) + "k16"));
      CHECK_THAT(p.ptx, Contains("cp.async.bulk.tensor.2d"));
      CHECK_THAT(p.ptx, Contains("setmaxnreg.inc.sync.aligned.u32 " + std::to_string(c.consumerRegs)));
      CubinResult cubin = ptxToCubin(p.ptx, "sm_90a", CubinOptions{});
      const ResourceReport* r = cubin.kernel("kiln_matmul_sm90");
      REQUIRE(r != nullptr);
      CHECK(r->spillStoreBytes == 0);
      CHECK(r->spillLoadBytes == 0);
    }
  CHECK_THROWS_WITH(emitSm90MatmulSource(kiln::DType::F32, space[0], "k"), Contains("bf16 or f16"));
}
