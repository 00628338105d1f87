// Helpers for tests that run kernels: the visible [gpu] skip, running a
// compiled graph on fresh random inputs against the reference evaluator
// (runAndCheck, with a hook to write special values into the inputs), and
// the same for graphs too large for the reference, checked on sampled rows
// (runRowsAndCheck).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gpu_basics.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"

namespace kiln::test {

// Whether the current GPU has thread-block clusters (sm_90 or newer).
inline bool hasClusters() { return rt::Device::current().basics().ccMajor >= 9; }

struct RunOptions {
  DimBindings dims;
  InputRanges ranges;
  std::map<std::string, double> scalars;
  // Byte offset added to every device pointer (to test unaligned bases).
  size_t misalign = 0;
  double tolScale = 1;
  // Called on the random inputs before they are uploaded and evaluated: how
  // a test writes special values (-inf, NaN, ties) into chosen elements.
  std::function<void(EvalInputs&)> prepare;
  // By output name: |want| below which a float's tolerance is absolute
  // (tolerance x relFloor). 1 for outputs not named; 0 compares relatively
  // down to the dtype's smallest normal (for outputs far below 1 that are
  // never cancellations, like softmax's).
  std::map<std::string, double> relFloor;
  CompileOptions compile;  // how runAndCheck compiles the graph
};

inline double relFloorOf(const std::map<std::string, double>& floors, const std::string& output) {
  auto it = floors.find(output);
  return it == floors.end() ? 1.0 : it->second;
}

// The smallest normal value of a float dtype: below it values are subnormal
// and their rounding error is absolute.
inline double smallestNormal(DType t) {
  switch (t) {
    case DType::F16: return 0x1p-14;
    case DType::BF16: case DType::F32: return 0x1p-126;
    default: return 0;
  }
}

// Checks every element of `got` (an output downloaded from the GPU) against
// the reference output `r`: floats within tolerance(dtype) x tolScale,
// relative above max(relFloor, smallest normal) and absolute below it; NaN
// where the reference has NaN; infinities equal (an f32 must not overflow
// where the exact value is finite, a 16-bit result may); integers exactly.
// `where` describes an element index for the failure message.
inline void checkOutput(const EvalOutput& r, const HostTensor& got, double tolScale, double relFloor,
                        const std::function<std::string(int64_t)>& where = {}) {
  REQUIRE(got.numel() == r.value.numel());
  double tol = tolerance(got.dtype()) * tolScale;
  double absBelow = std::max(relFloor, smallestNormal(got.dtype()));
  int64_t bad = 0, firstBad = -1;
  for (int64_t e = 0; e < got.numel(); ++e) {
    double want = isFloat(got.dtype()) ? r.exact[e] : r.value.get(e);
    double have = got.get(e);
    bool ok;
    if (std::isnan(want)) ok = std::isnan(have);
    else if (std::isinf(want)) ok = have == want || (got.dtype() != DType::F32 && std::isinf(have));
    else if (!isFloat(got.dtype())) ok = have == want;
    else ok = std::fabs(have - want) <= tol * std::max(absBelow, std::fabs(want));
    if (!ok && bad++ == 0) firstBad = e;
  }
  INFO("output " << r.name << ": " << bad << " of " << got.numel() << " elements wrong"
                 << (bad ? "; first at " + std::to_string(firstBad) + (where ? " (" + where(firstBad) + ")" : "") +
                               ": got " + std::to_string(got.get(firstBad)) + ", want " +
                               std::to_string(isFloat(got.dtype()) ? r.exact[firstBad] : r.value.get(firstBad))
                         : std::string()));
  CHECK(bad == 0);
}

// Compiles g, runs it on fresh random inputs with poisoned outputs, and
// checks every output element against the reference. Returns the kernel.
inline Kernel runAndCheck(const Graph& g, const RunOptions& o = {}) {
  uint64_t seed = freshSeed();
  INFO("seed " << seed);
  Kernel k = compile(g, o.compile);
  EvalInputs in = randomInputs(g, o.dims, seed, o.ranges);
  for (const auto& [name, v] : o.scalars) in.scalars[name] = v;
  if (o.prepare) o.prepare(in);
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
    checkOutput(r, got, o.tolScale, relFloorOf(o.relFloor, r.name));
  }
  return k;
}

// Fresh random values in [lo, hi) like HostTensor::fillRandom, fast enough
// for 10^8 elements: a pool of 2^20 independent draws is copied into `t` in
// runs of one row (numel / shape[0] elements, at most half the pool) taken
// from random offsets, so every row is a different sequence of random values.
inline void fillRandomFast(HostTensor& t, std::mt19937_64& rng, double lo, double hi) {
  const int64_t kPool = int64_t{1} << 20;
  if (t.numel() <= 4 * kPool || t.shape().empty()) {
    t.fillRandom(rng, lo, hi);
    return;
  }
  HostTensor pool(t.dtype(), {kPool});
  pool.fillRandom(rng, lo, hi);
  const int64_t run = std::clamp<int64_t>(t.numel() / t.shape()[0], 1, kPool / 2);
  const size_t es = static_cast<size_t>(dtypeSize(t.dtype()));
  auto* dst = static_cast<uint8_t*>(t.data());
  const auto* src = static_cast<const uint8_t*>(pool.data());
  for (int64_t i = 0; i < t.numel(); i += run) {
    int64_t n = std::min(run, t.numel() - i);
    int64_t off = static_cast<int64_t>(rng() % static_cast<uint64_t>(kPool - n + 1));
    std::memcpy(dst + i * es, src + off * es, n * es);
  }
}

struct RowRunOptions {
  std::string rowDim = "R";  // the graph's only dynamic dim, leading every row-wise tensor
  int64_t rows = 1;
  InputRanges ranges;
  int sampledRows = 8;  // rows checked: the first, the last and random ones
  double tolScale = 1;
  std::map<std::string, double> relFloor;  // as in RunOptions
};

// For graphs too large for the reference evaluator (10^8 elements): every
// tensor either leads with the dynamic dim o.rowDim (one row-wise slice per
// row) or does not use it (weights, shared by all rows). Runs the kernel on
// o.rows rows of fresh random inputs with poisoned outputs, then evaluates
// the reference on the sampled rows alone and checks those rows of every
// row-wise output. Outputs without the row dim (a mean over all rows, say)
// are not checked here. Returns every output as the GPU wrote it, by name.
inline std::map<std::string, HostTensor> runRowsAndCheck(const Graph& g, const RowRunOptions& o) {
  uint64_t seed = freshSeed();
  INFO("seed " << seed);
  for (const std::string& d : g.dynamicDims()) {
    INFO("dynamic dim " << d);
    REQUIRE(d == o.rowDim);
  }
  const Dim rowDim(o.rowDim);
  auto rowWise = [&](const Shape& s) { return !s.empty() && s[0] == rowDim; };
  auto checkShape = [&](const std::string& name, const Shape& s) {
    INFO(name << " " << shapeToString(s) << ": the row dim must lead or be absent");
    REQUIRE(std::count(s.begin(), s.end(), rowDim) == (rowWise(s) ? 1 : 0));
  };
  Kernel k = compile(g);
  std::mt19937_64 rng(seed);
  const DimBindings dims{{o.rowDim, o.rows}};

  EvalInputs in;
  in.dims = dims;
  std::vector<rt::DeviceBuffer> buffers;
  std::vector<TensorView> views;
  // A poisoned device buffer for each tensor; inputs uploaded.
  auto place = [&](const HostTensor* h, DType t, const std::vector<int64_t>& shape) {
    size_t bytes = static_cast<size_t>(dtypeSize(t));
    for (int64_t d : shape) bytes *= static_cast<size_t>(d);
    buffers.emplace_back(bytes + 64);
    buffers.back().poison();
    if (h && bytes) buffers.back().upload(h->data(), bytes);
    views.emplace_back(buffers.back().data(), t, shape);
  };
  std::vector<ScalarArg> scalars;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    std::pair<double, double> range;  // randomInputs' defaults, unless o.ranges names it
    if (n.op == Op::Input) range = isFloat(n.dtype) ? std::pair{-1.0, 1.0} : std::pair{0.0, 8.0};
    else range = isFloat(n.dtype) ? std::pair{0.5, 1.0} : std::pair{1.0, 8.0};
    if (auto it = o.ranges.find(n.name); it != o.ranges.end()) range = it->second;
    if (n.op == Op::Input) {
      checkShape(n.name, n.shape);
      HostTensor t(n.dtype, resolveShape(n.shape, dims));
      fillRandomFast(t, rng, range.first, range.second);
      place(&t, n.dtype, t.shape());
      in.tensors.emplace(n.name, std::move(t));
    } else {
      HostTensor one(n.dtype, {});
      one.fillRandom(rng, range.first, range.second);
      in.scalars[n.name] = one.get(0);
      scalars.emplace_back(one.get(0));
    }
  }
  const size_t firstOut = views.size();
  for (const GraphOutput& out : g.outputs()) {
    const Node& n = g.node(out.node);
    checkShape(out.name, n.shape);
    place(nullptr, n.dtype, resolveShape(n.shape, dims));
  }
  std::vector<int64_t> dimValues{o.rows};
  if (g.dynamicDims().empty()) dimValues.clear();
  k.launch(std::span<const TensorView>(views), std::span<const int64_t>(dimValues),
           std::span<const ScalarArg>(scalars));

  std::map<std::string, HostTensor> got;
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const TensorView& v = views[firstOut + i];
    HostTensor h(v.dtype, v.shape);
    if (h.bytes()) buffers[firstOut + i].download(h.data(), h.bytes());
    got.emplace(g.outputs()[i].name, std::move(h));
  }

  // The sampled rows, and the reference on those rows alone.
  std::set<int64_t> pick{0, o.rows - 1};
  while (static_cast<int64_t>(pick.size()) < std::min<int64_t>(o.sampledRows, o.rows))
    pick.insert(static_cast<int64_t>(rng() % static_cast<uint64_t>(o.rows)));
  const std::vector<int64_t> rows(pick.begin(), pick.end());
  auto takeRows = [&](const HostTensor& full) {
    std::vector<int64_t> shape = full.shape();
    shape[0] = static_cast<int64_t>(rows.size());
    HostTensor sub(full.dtype(), shape);
    const size_t rowBytes = full.bytes() / static_cast<size_t>(full.shape()[0]);
    for (size_t r = 0; r < rows.size(); ++r)
      std::memcpy(static_cast<uint8_t*>(sub.data()) + r * rowBytes,
                  static_cast<const uint8_t*>(full.data()) + static_cast<size_t>(rows[r]) * rowBytes, rowBytes);
    return sub;
  };
  EvalInputs sub;
  sub.dims = {{o.rowDim, static_cast<int64_t>(rows.size())}};
  sub.scalars = in.scalars;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op != Op::Input) continue;
    const HostTensor& full = in.tensors.at(n.name);
    sub.tensors.emplace(n.name, rowWise(n.shape) ? takeRows(full) : full);
  }
  std::string rowList;
  for (int64_t r : rows) rowList += (rowList.empty() ? "" : ", ") + std::to_string(r);
  INFO("checked rows " << rowList << " of " << o.rows);
  std::vector<EvalOutput> ref = evaluate(g, sub);
  for (size_t i = 0; i < ref.size(); ++i) {
    const Node& n = g.node(g.outputs()[i].node);
    if (!rowWise(n.shape)) continue;
    const HostTensor& full = got.at(ref[i].name);
    const int64_t perRow = full.numel() / o.rows;
    checkOutput(ref[i], takeRows(full), o.tolScale, relFloorOf(o.relFloor, ref[i].name), [&](int64_t e) {
      return "row " + std::to_string(rows[static_cast<size_t>(e / perRow)]) + ", element " +
             std::to_string(e % perRow);
    });
  }
  return got;
}

}  // namespace kiln::test
