// Helpers for tests that run kernels: the visible [gpu] skip, and running a
// compiled graph on fresh random inputs against the reference evaluator.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <random>

#include "kiln/kiln.h"

namespace kiln::test {

// A [gpu] test calls this first. Without a driver it says so on stdout and
// exits with 77, which CTest (one test per process) reports as skipped.
inline void requireGpu() {
  if (!rt::driverAvailable()) {
    std::cout << "SKIPPED: no CUDA driver (" << rt::driverUnavailableReason() << ")" << std::endl;
    std::exit(77);
  }
}

// Relative tolerance by output dtype (with an absolute floor of the same
// size near zero); integers and bools must match exactly.
inline double tolerance(DType t) {
  switch (t) {
    case DType::BF16: return 1.6e-2;
    case DType::F16: return 2e-3;
    case DType::F32: return 2e-5;
    default: return 0;
  }
}

// A seed that differs every run (fresh inputs), printed on failure.
inline uint64_t freshSeed() {
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

struct RunOptions {
  DimBindings dims;
  InputRanges ranges;
  std::map<std::string, double> scalars;
  // Byte offset added to every device pointer (to test unaligned bases).
  size_t misalign = 0;
  double tolScale = 1;
};

// Compiles g, runs it on fresh random inputs with poisoned outputs, and
// checks every output element against the reference. Returns the kernel.
inline Kernel runAndCheck(const Graph& g, const RunOptions& o = {}) {
  uint64_t seed = freshSeed();
  INFO("seed " << seed);
  Kernel k = compile(g);
  EvalInputs in = randomInputs(g, o.dims, seed, o.ranges);
  for (const auto& [name, v] : o.scalars) in.scalars[name] = v;
  auto ref = evaluate(g, in);

  std::vector<rt::DeviceBuffer> buffers;
  std::vector<TensorView> views;
  auto place = [&](const HostTensor& h, bool upload) {
    buffers.emplace_back(h.bytes() + 64 + o.misalign);
    rt::DeviceBuffer& b = buffers.back();
    b.poison();
    char* base = static_cast<char*>(b.data()) + o.misalign;
    if (upload && h.bytes()) b.upload(h.data(), h.bytes(), o.misalign);
    views.emplace_back(base, h.dtype(), h.shape());
  };
  std::vector<ScalarArg> scalars;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op == Op::Input) place(in.tensors.at(n.name), true);
    else scalars.emplace_back(in.scalars.at(n.name));
  }
  for (const EvalOutput& r : ref) place(r.value, false);
  std::vector<int64_t> dims;
  for (const std::string& d : g.dynamicDims()) dims.push_back(o.dims.at(d));
  k.launch(std::span<const TensorView>(views), std::span<const int64_t>(dims), std::span<const ScalarArg>(scalars));

  size_t firstOut = views.size() - ref.size();
  for (size_t i = 0; i < ref.size(); ++i) {
    const EvalOutput& r = ref[i];
    HostTensor got(r.value.dtype(), r.value.shape());
    if (got.bytes()) buffers[firstOut + i].download(got.data(), got.bytes(), o.misalign);
    double tol = tolerance(got.dtype()) * o.tolScale;
    int64_t bad = 0, firstBad = -1;
    for (int64_t e = 0; e < got.numel(); ++e) {
      double want = isFloat(got.dtype()) ? r.exact[e] : r.value.get(e);
      double have = got.get(e);
      bool ok;
      if (std::isnan(want)) ok = std::isnan(have);
      else if (std::isinf(want)) ok = have == want || (got.dtype() != DType::F32 && std::isinf(have));
      else if (!isFloat(got.dtype())) ok = have == want;
      else ok = std::fabs(have - want) <= tol * std::max(1.0, std::fabs(want));
      if (!ok && bad++ == 0) firstBad = e;
    }
    INFO("output " << r.name << ": " << bad << " of " << got.numel() << " elements wrong"
                   << (bad ? "; first at " + std::to_string(firstBad) + ": got " + std::to_string(got.get(firstBad)) +
                                 ", want " +
                                 std::to_string(isFloat(got.dtype()) ? r.exact[firstBad] : r.value.get(firstBad))
                           : std::string()));
    CHECK(bad == 0);
  }
  return k;
}

}  // namespace kiln::test
