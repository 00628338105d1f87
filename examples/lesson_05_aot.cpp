// Lesson 5: kernels compiled ahead of time, called with no compiler around.
//
// An application that only runs kiln's kernels does not need kiln's
// compiler in its process. `kiln aot` compiles a graph on the development
// machine (no GPU needed) into two files: a header that declares a plain
// function and a source that holds the cubin, the signature and the launch
// rule as data. This program was built from them (examples/CMakeLists.txt:
// kiln_add_aot on examples/graphs/softmax.kiln and cross_entropy.kiln) and
// links kiln_runtime alone: no LLVM, no MLIR, no NVRTC. The CUDA driver is
// loaded at the first call.
//
// On a machine without a GPU the lesson prints the functions' signatures,
// shows that bad arguments are caught before any driver call, and says it
// cannot launch.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "cross_entropy.h"
#include "kiln/dtype.h"
#include "kiln/error.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/timing.h"
#include "softmax.h"

using kiln::DType;
using kiln::TensorView;

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 8192, cols = 4096, vocab = 32768;

  std::printf("kiln_aot::softmax: %s\n", kiln_aot::softmax_launcher().signature().toString().c_str());
  std::printf("kiln_aot::cross_entropy: %s (%zu kernel(s))\n",
              kiln_aot::cross_entropy_launcher().signature().toString().c_str(),
              kiln_aot::cross_entropy_launcher().numKernels());

  // The process's libraries: no compiler among them.
  bool compiler = false;
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    compiler = compiler || line.find("kiln_compiler") != std::string::npos || line.find("LLVM") != std::string::npos;
  std::printf("compiler or LLVM loaded in this process: %s\n", compiler ? "yes" : "no");

  // Arguments are checked before anything touches the driver.
  try {
    const TensorView x(reinterpret_cast<void*>(0x10000), DType::F32, {rows, cols});
    const TensorView y(reinterpret_cast<void*>(0x8000000), DType::BF16, {rows, cols});
    kiln_aot::softmax(x, y);
  } catch (const kiln::Error& e) {
    std::printf("a bad call: %s\n", e.what());
  }

  if (!kiln::rt::driverAvailable()) {
    std::printf("\nno GPU here: %s\nThe functions are built; run this lesson on a machine with an NVIDIA GPU to "
                "launch them.\n",
                kiln::rt::driverUnavailableReason().c_str());
    return 0;
  }

  // Softmax over [rows, 4096] bf16 on random data, the output poisoned
  // first, checked on a few rows against a double-precision softmax.
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<double> uni(-4, 4);
  std::vector<uint16_t> hx(static_cast<size_t>(rows * cols));
  for (uint16_t& v : hx) v = kiln::doubleToBF16Bits(uni(rng));
  kiln::rt::DeviceBuffer dx(hx.size() * 2), dy(hx.size() * 2);
  dx.upload(hx.data(), hx.size() * 2);
  dy.poison();
  const TensorView x = dx.view(DType::BF16, {rows, cols}), y = dy.view(DType::BF16, {rows, cols});
  kiln_aot::softmax(x, y);
  KILN_CU_CHECK(kiln::rt::driver().ctxSynchronize());
  std::vector<uint16_t> hy(hx.size());
  dy.download(hy.data(), hy.size() * 2);
  double worst = 0;
  for (int64_t r : {int64_t{0}, rows / 2, rows - 1}) {
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, kiln::bf16BitsToDouble(hx[static_cast<size_t>(r * cols + c)]));
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(kiln::bf16BitsToDouble(hx[static_cast<size_t>(r * cols + c)]) - m);
    for (int64_t c = 0; c < cols; ++c) {
      const double want = std::exp(kiln::bf16BitsToDouble(hx[static_cast<size_t>(r * cols + c)]) - m) / sum;
      const double got = kiln::bf16BitsToDouble(hy[static_cast<size_t>(r * cols + c)]);
      worst = std::max(worst, std::fabs(got - want) / std::max(want, 1e-30));
    }
  }
  std::printf("\nsoftmax [%lld, %lld] bf16: 3 rows checked, max relative error %.4f (%s)\n", static_cast<long long>(rows),
              static_cast<long long>(cols), worst, worst <= 1.6e-2 ? "ok" : "WRONG");
  kiln::rt::BenchmarkOptions bo;
  bo.flushL2 = true;
  const kiln::rt::BenchmarkResult t = kiln::rt::benchmark([&] { kiln_aot::softmax(x, y); }, bo);
  std::printf("softmax: median %.1f us, %.2f TB/s effective\n", t.medianUs,
              2.0 * static_cast<double>(hx.size()) * 2 / (t.medianUs * 1e-6) / 1e12);

  // The mean cross-entropy loss over (at most) 1024 rows of 32768 logits: a
  // kernel whose last block takes the mean, with its workspace allocated by
  // the launcher at the first call.
  const int64_t ceRows = std::min<int64_t>(rows, 1024);
  std::vector<uint16_t> hl(static_cast<size_t>(ceRows * vocab));
  for (uint16_t& v : hl) v = kiln::doubleToBF16Bits(uni(rng));
  std::vector<int64_t> ht(static_cast<size_t>(ceRows));
  for (int64_t& v : ht) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  kiln::rt::DeviceBuffer dl(hl.size() * 2), dt(ht.size() * 8), dloss(4);
  dl.upload(hl.data(), hl.size() * 2);
  dt.upload(ht.data(), ht.size() * 8);
  dloss.poison();
  kiln_aot::cross_entropy(dl.view(DType::BF16, {ceRows, vocab}), dt.view(DType::I64, {ceRows}), dloss.view(DType::F32, {}));
  KILN_CU_CHECK(kiln::rt::driver().ctxSynchronize());
  float loss = 0;
  dloss.download(&loss, 4);
  double want = 0;
  for (int64_t r = 0; r < ceRows; ++r) {
    double m = -INFINITY, sum = 0;
    for (int64_t c = 0; c < vocab; ++c) m = std::max(m, kiln::bf16BitsToDouble(hl[static_cast<size_t>(r * vocab + c)]));
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(kiln::bf16BitsToDouble(hl[static_cast<size_t>(r * vocab + c)]) - m);
    want += std::log(sum) + m - kiln::bf16BitsToDouble(hl[static_cast<size_t>(r * vocab + ht[static_cast<size_t>(r)])]);
  }
  want /= static_cast<double>(ceRows);
  const double err = std::fabs(loss - want) / std::fabs(want);
  std::printf("cross_entropy mean over %lld rows: %.6f (reference %.6f, relative error %.2e: %s)\n",
              static_cast<long long>(ceRows), loss, want, err, err <= 1e-4 ? "ok" : "WRONG");
  return worst <= 1.6e-2 && err <= 1e-4 ? 0 : 1;
}
