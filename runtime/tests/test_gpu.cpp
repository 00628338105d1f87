// [gpu] tests: they need a driver and a device, and skip visibly (exit 77)
// without one.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include "kiln/error.h"
#include "kiln/runtime/runtime.h"
#include "test_kernels.h"
#include "test_support.h"

using namespace kiln::rt;
using kiln::DType;
using Catch::Matchers::Contains;
using kiln::rt::test::requireGpu;

namespace {

KernelSignature axpySignature() {
  KernelSignature s;
  s.kernel = "kiln_test_axpy";
  s.tensors = {{"x", DType::F32, {"n"}}, {"y", DType::F32, {"n"}, /*isOutput=*/true}};
  s.dims = {{"n"}};
  s.scalars = {{"alpha", DType::F32}, {"beta", DType::F32}};
  return s;
}

std::vector<uint8_t> asBytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(float));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<float> asFloats(const std::vector<uint8_t>& b) {
  std::vector<float> out(b.size() / sizeof(float));
  std::memcpy(out.data(), b.data(), out.size() * sizeof(float));
  return out;
}

unsigned blocksFor(int64_t n, unsigned block) { return static_cast<unsigned>((n + block - 1) / block); }

}  // namespace

TEST_CASE("the device reports sane properties", "[gpu]") {
  requireGpu();
  const Device dev = Device::current();
  const DeviceProperties& p = dev.properties();
  std::cout << "device " << dev.ordinal() << ": " << p.summary() << ", driver " << driver().version
            << ", clock " << p.clockKHz << " kHz, mem clock " << p.memClockKHz << " kHz, bus "
            << p.memBusWidthBits << " bits\n";
  CHECK(Device::count() >= 1);
  CHECK_FALSE(p.name.empty());
  CHECK(p.sm() >= 80);
  CHECK(p.arch() == "sm_" + std::to_string(p.sm()));
  CHECK(p.smCount > 0);
  CHECK(p.warpSize == 32);
  CHECK(p.sharedPerBlockOptin >= p.sharedPerBlock);
  CHECK(p.l2Bytes > 0);
  CHECK(p.totalMemBytes > 0);
  CHECK(&Device::get(dev.ordinal()).properties() == &p);  // cached
  // The cheap subset agrees with the full query.
  const Device::Basics& b = dev.basics();
  CHECK(b.name == p.name);
  CHECK(b.ccMajor == p.ccMajor);
  CHECK(b.ccMinor == p.ccMinor);
  CHECK(b.smCount == p.smCount);
  CHECK(b.arch() == p.arch());
  CHECK_THROWS_WITH(Device::get(Device::count()), Contains("no CUDA device"));
}

TEST_CASE("kiln uses the caller's current context when there is one", "[gpu]") {
  requireGpu();
  CUcontext ctx = ensureContext();
  REQUIRE(ctx != nullptr);
  CHECK(ensureContext() == ctx);
  CUcontext cur = nullptr;
  KILN_CU_CHECK(driver().ctxGetCurrent(&cur));
  CHECK(cur == ctx);
  // On a fresh thread there is no current context: kiln makes the primary one current.
  CUcontext onThread = nullptr, before = reinterpret_cast<CUcontext>(1);
  std::thread t([&] {
    driver().ctxGetCurrent(&before);
    onThread = ensureContext();
  });
  t.join();
  CHECK(before == nullptr);
  CHECK(onThread == Device::get(0).primaryContext());
}

TEST_CASE("bytes survive a round trip through a DeviceBuffer", "[gpu]") {
  requireGpu();
  std::mt19937 rng(42);
  std::vector<uint8_t> host(1000003);
  for (auto& b : host) b = static_cast<uint8_t>(rng());
  DeviceBuffer buf = DeviceBuffer::fromHost(host);
  REQUIRE(buf.size() == host.size());
  REQUIRE(buf.data() != nullptr);
  CHECK(buf.download() == host);

  // Partial copies at an offset.
  const uint8_t patch[5] = {1, 2, 3, 4, 5};
  buf.upload(patch, 5, 17);
  uint8_t back[7] = {};
  buf.download(back, 7, 16);
  CHECK(back[0] == host[16]);
  CHECK(std::memcmp(back + 1, patch, 5) == 0);
  CHECK(back[6] == host[22]);

  CHECK_THROWS_WITH(buf.upload(patch, 5, host.size() - 4),
                    Contains("upload of 5 bytes at offset 999999 does not fit in a buffer of "
                             "1000003 bytes"));
  CHECK_THROWS_WITH(buf.view(DType::F32, {250001}), Contains("does not fit"));

  DeviceBuffer moved = std::move(buf);
  CHECK(buf.data() == nullptr);
  CHECK(moved.size() == host.size());
}

TEST_CASE("poisoning a buffer makes every float NaN", "[gpu]") {
  requireGpu();
  DeviceBuffer buf(4096 * sizeof(float));
  buf.fill(0);
  for (uint8_t b : buf.download()) REQUIRE(b == 0);
  buf.poison();
  const std::vector<uint8_t> bytes = buf.download();
  for (uint8_t b : bytes) REQUIRE(b == DeviceBuffer::kPoisonByte);
  for (float f : asFloats(bytes)) REQUIRE(std::isnan(f));
}

TEST_CASE("loading an invalid image is a clear error", "[gpu]") {
  requireGpu();
  CHECK_THROWS_WITH(Module::load(std::string_view("this is not PTX"), "garbage"),
                    Contains("kiln: cuModuleLoadData for 'garbage' failed to load the PTX image") &&
                        Contains("CUDA_ERROR_INVALID_"));
  const uint8_t fakeElf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  CHECK_THROWS_WITH(Module::load(std::span<const uint8_t>(fakeElf), "bad.cubin"),
                    Contains("failed to load the cubin image (16 bytes)") &&
                        Contains("CUDA_ERROR_"));
  CHECK_THROWS_WITH(Module::load(std::span<const uint8_t>()), Contains("empty module image"));
}

TEST_CASE("a module's kernels are found by name and report their attributes", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx), "test kernels");
  REQUIRE(m);
  CHECK(m.context() == ensureContext());
  Function f = m.function("kiln_test_axpy");
  CHECK(f.name() == "kiln_test_axpy");
  CHECK(f.numRegisters() > 0);
  CHECK(f.localBytes() == 0);
  CHECK(f.maxThreadsPerBlock() >= 256);
  CHECK_THROWS_WITH(m.function("kiln_test_nope"),
                    Contains("kernel 'kiln_test_nope' not found in module for 'test kernels'") &&
                        Contains("CUDA_ERROR_NOT_FOUND"));
  if (driver().funcGetParamInfo) {
    CHECK(f.parameterSizes() == std::vector<size_t>{8, 8, 8, 4, 4});
    CHECK_NOTHROW(f.checkSignature(axpySignature()));
    KernelSignature wrong = axpySignature();
    wrong.scalars.pop_back();
    CHECK_THROWS_WITH(f.checkSignature(wrong), Contains("takes parameters of sizes [8, 8, 8, 4, 4]"));
  }
}

TEST_CASE("a packed launch computes the right result, aligned or not", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_axpy");
  const ArgPacker packer(axpySignature());
  for (int64_t n : {int64_t(1), int64_t(7), int64_t(1000003)}) {
    for (size_t offset : {size_t(0), size_t(4)}) {
      std::vector<float> x(n);
      for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(i % 1000) * 0.25f;
      DeviceBuffer xb(n * sizeof(float) + 16), yb(n * sizeof(float) + 16);
      xb.upload(asBytes(x), offset);
      yb.poison();
      const TensorView views[] = {xb.view(DType::F32, {n}, offset), yb.view(DType::F32, {n}, offset)};
      const ScalarArg scalars[] = {2.0f, 1.0f};
      ArgBlock args;
      packer.pack(args, views, {}, scalars);
      CHECK(args.vectorizable() == (offset == 0));
      LaunchConfig cfg;
      cfg.block.x = 256;
      cfg.grid.x = blocksFor(n, 256);
      launch(f, cfg, args);
      std::vector<uint8_t> raw(n * sizeof(float));
      yb.download(raw.data(), raw.size(), offset);
      const std::vector<float> y = asFloats(raw);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) bad += y[i] != 2.0f * x[i] + 1.0f;
      INFO("n = " << n << ", offset = " << offset);
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("scalars reach the kernel exactly as packed", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_scalars");
  KernelSignature s;
  s.kernel = "kiln_test_scalars";
  s.tensors = {{"out", DType::I32, {8}, /*isOutput=*/true}};
  s.dims = {{"n"}};
  s.scalars = {{"f", DType::F32}, {"i", DType::I32}, {"l", DType::I64}, {"h", DType::F16},
               {"flag", DType::Bool}};
  f.checkSignature(s);
  const ArgPacker packer(s);
  DeviceBuffer out(32);
  out.poison();
  const TensorView views[] = {out.view(DType::I32, {8})};
  const int64_t dims[] = {123456789012LL};
  const ScalarArg scalars[] = {-1.5f, -42, int64_t(-5000000000LL), 0.5, true};
  ArgBlock args;
  packer.pack(args, views, dims, scalars);
  launch(f, LaunchConfig{}, args);
  const std::vector<uint8_t> b = out.download();
  int64_t n, l;
  float fl;
  int32_t i;
  uint16_t h;
  std::memcpy(&n, &b[0], 8);
  std::memcpy(&fl, &b[8], 4);
  std::memcpy(&i, &b[12], 4);
  std::memcpy(&l, &b[16], 8);
  std::memcpy(&h, &b[24], 2);
  CHECK(n == 123456789012LL);
  CHECK(fl == -1.5f);
  CHECK(i == -42);
  CHECK(l == -5000000000LL);
  CHECK(h == 0x3800);  // f16 0.5
  CHECK(b[26] == 1);
}

TEST_CASE("launches work from a thread with no current context, and empty grids do nothing", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_axpy");
  const ArgPacker packer(axpySignature());
  const int64_t n = 1000;
  std::vector<float> x(n, 3.0f);
  DeviceBuffer xb = DeviceBuffer::fromHost(asBytes(x));
  DeviceBuffer yb(n * sizeof(float));
  yb.poison();
  const TensorView views[] = {xb.view(DType::F32, {n}), yb.view(DType::F32, {n})};
  const ScalarArg scalars[] = {1.0f, 0.5f};
  std::string error;
  std::thread t([&] {
    try {
      ArgBlock args;
      packer.pack(args, views, {}, scalars);
      LaunchConfig empty;
      empty.grid.x = 0;
      launch(f, empty, args);  // no-op, no error
      LaunchConfig cfg;
      cfg.grid.x = blocksFor(n, 128);
      cfg.block.x = 128;
      launch(f, cfg, args);
      KILN_CU_CHECK(driver().ctxSynchronize());
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  t.join();
  REQUIRE(error.empty());
  for (float y : asFloats(yb.download())) REQUIRE(y == 3.5f);
}

TEST_CASE("a bad launch configuration is a kiln::Error naming the kernel", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_empty");
  void* p = nullptr;
  void* params[] = {&p};
  LaunchConfig cfg;
  cfg.block.x = 4096;  // over the 1024-thread limit
  CHECK_THROWS_WITH(launch(f, cfg, params),
                    Contains("kiln: cuLaunchKernel of kernel 'kiln_test_empty' failed: ") &&
                        Contains("block (4096, 1, 1)"));
  CHECK_THROWS_WITH(launch(Function(), LaunchConfig{}, params), Contains("empty Function"));
}

TEST_CASE("events time GPU work and benchmark reports median and p95", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_axpy");
  const ArgPacker packer(axpySignature());
  const int64_t n = int64_t(1) << 26;  // 256 MiB per tensor
  DeviceBuffer xb(n * sizeof(float)), yb(n * sizeof(float));
  xb.fill(0);
  const TensorView views[] = {xb.view(DType::F32, {n}), yb.view(DType::F32, {n})};
  const ScalarArg scalars[] = {1.0f, 0.0f};
  ArgBlock args;
  packer.pack(args, views, {}, scalars);
  LaunchConfig cfg;
  cfg.block.x = 256;
  cfg.grid.x = blocksFor(n, 256);

  Event start, stop;
  start.record();
  launch(f, cfg, args);
  stop.record();
  stop.synchronize();
  CHECK(elapsedMs(start, stop) > 0);

  BenchmarkOptions opt;
  opt.warmup = 3;
  opt.iters = 20;
  opt.flushL2 = true;
  const BenchmarkResult r = benchmark([&] { launch(f, cfg, args); }, opt);
  const double gbps = 2.0 * n * sizeof(float) / (r.medianUs * 1e-6) / 1e9;
  std::cout << "axpy 2^26 f32: median " << r.medianUs << " us, p95 " << r.p95Us << " us, " << gbps
            << " GB/s\n";
  CHECK(r.iters == 20);
  CHECK(r.medianUs > 0);
  CHECK(r.p95Us >= r.medianUs);
  CHECK(r.minUs <= r.medianUs);
}

TEST_CASE("packing adds little host time to a raw cuLaunchKernel", "[gpu]") {
  requireGpu();
  Module m = Module::load(std::string_view(test::kTestPtx));
  const Function f = m.function("kiln_test_empty");
  KernelSignature s;
  s.kernel = "kiln_test_empty";
  s.tensors = {{"p", DType::F32, {256}, /*isOutput=*/true}};
  const ArgPacker packer(s);
  DeviceBuffer buf(1024);
  const TensorView views[] = {buf.view(DType::F32, {256})};
  const Driver& d = driver();
  const int reps = 100000;
  void* raw = buf.data();
  void* rawParams[] = {&raw};
  auto hostUs = [&](auto&& body) {
    for (int i = 0; i < 1000; ++i) body();
    KILN_CU_CHECK(d.ctxSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) body();
    const auto t1 = std::chrono::steady_clock::now();
    KILN_CU_CHECK(d.ctxSynchronize());
    return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
  };
  const double rawUs = hostUs([&] {
    d.launchKernel(f.handle(), 1, 1, 1, 32, 1, 1, 0, nullptr, rawParams, nullptr);
  });
  LaunchConfig cfg;
  cfg.block.x = 32;
  const double packedUs = hostUs([&] {
    ArgBlock args;
    packer.pack(args, views);
    launch(f, cfg, args);
  });
  std::cout << "host cost per launch: raw cuLaunchKernel " << rawUs << " us, kiln pack+launch "
            << packedUs << " us\n";
  CHECK(packedUs < rawUs + 1.0);
}
