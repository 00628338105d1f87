// Reduction benchmarks on the GPU: the row-reduction cases of ANCHORS.md,
// each built with the op library and compiled by kiln::compile as one graph:
// softmax, layernorm (weight and bias, eps 1e-5), rmsnorm (weight, eps 1e-6)
// and sum over the last dim at 32768x4096, 4096x32768 (bf16, f32) and
// 1024x262144 (f32); cross_entropy (mean) over bf16 logits at 8192x32768 and
// 8192x128256; residual add + rmsnorm (two outputs) at 32768x4096 bf16; and
// the small-batch latency of softmax and rmsnorm at 1, 64 and 512 x 4096
// bf16.
//
//   bench_reduction                 every case
//   bench_reduction softmax 262144  the cases whose name contains any argument
//   bench_reduction --list          the case names
//   bench_reduction --reference     (no GPU needed) time the host-side checks
//   bench_reduction control         a pointwise control case (y = x * w) that
//                                   runs the harness without a reduction
//   KILN_ROW_CONFIG='{"threads_per_row": 512, "persistent": 0}' bench_reduction ...
//                                   every row kernel with that config (a sweep)
//   KILN_BENCH_NOFLUSH=1 bench_reduction ...
//                                   time without flushing the L2 between runs
//   KILN_BENCH_TUNE=FILE bench_reduction ...
//                                   also tune every case (recorded in FILE),
//                                   then check and time the tuned kernel
//
// Every case is checked once before it is timed: outputs poisoned (NaN),
// one launch, then a spread subset of rows (all rows of the small cases)
// compared against the fp64 reference evaluator on a graph of just those
// rows. cross_entropy's mean covers every row, so its check is a
// multithreaded fp64 loop over all rows, itself checked against the
// reference evaluator on a subset of rows.
//
// Timing: rt::benchmark (CUDA events around each launch, 10 warm-ups, median
// and p95 of 100 runs, L2 flushed before each run); the small cases are also
// timed back to back without the flush (100 launches between two events,
// per call; median of 20 batches), as anchors_reduction.py does. Effective
// TB/s = (every input read once + every output written once) / median;
// "of copy" divides it by a device-to-device copy measured at the start of
// the same program. Prints a table line and a `JSON {...}` line per case,
// and writes the JSON lines to $OUT/kiln_reduction.jsonl when OUT is set.
// Exit status: 0 when every case compiled, ran and matched; 1 otherwise; 77
// without a GPU (after compiling the selected cases, which needs no GPU).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_common.h"
#include "kiln/autotune/tuning_db.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/timing.h"

using namespace kiln;
using json = nlohmann::json;

namespace {

// ---------------------------------------------------------------- cases

// Control: y = x * w, a pointwise kernel that runs the whole harness
// (inputs, check, timing) with no reduction; selected only by naming it.
// SumAll: the sum of a whole tensor (one output value); SumCols: sum(x, 0).
// With `product`, they sum x*x and r*x instead (in f32): a sum of squares,
// a weight gradient's column sums — elementwise expressions the reductions
// compute in their loads.
enum class Kind { Softmax, LayerNorm, RmsNorm, Sum, SumAll, SumCols, CrossEntropy, ResidualRmsNorm, Control };

struct Case {
  Kind kind;
  int64_t rows, cols;
  DType dtype;        // of x (the logits for cross_entropy)
  bool small = false;  // a latency case: also timed without the L2 flush
  bool product = false;  // SumAll: sum(x*x); SumCols: sum(r*x, 0)
  // A dynamic dim: SumAll takes x as one dynamic dim N (= rows x cols at
  // launch: a whole tensor of a length the planner cannot cut into parts,
  // which the row kernel splits across blocks, config split); the row-wise
  // cases take the row length as dynamic dim N (= cols at launch).
  bool flat = false;

  // The same op names as shared/bench/anchors.py and bench/anchors_reduction.py.
  std::string op() const {
    switch (kind) {

      case Kind::LayerNorm: return flat ? "layernorm (dynamic N)" : "layernorm";

      case Kind::Sum: return "sum(-1)";
      case Kind::SumAll: return product ? "sum(x*x)" : flat ? "sum(flat N)" : "sum";
      case Kind::Softmax: return flat ? "softmax(-1) (dynamic N)" : "softmax(-1)";
      case Kind::RmsNorm: return flat ? "rmsnorm (dynamic N)" : "rmsnorm";
      case Kind::SumCols: return product ? "sum(r*x,0)" : "sum(0)";
      case Kind::CrossEntropy: return flat ? "cross_entropy (dynamic N)" : "cross_entropy";
      case Kind::ResidualRmsNorm: return "residual+rmsnorm";
      case Kind::Control: return "control x*w";
    }
    return "?";
  }
  std::string dtypeName() const { return dtype == DType::BF16 ? "bfloat16" : "float32"; }
  std::string shape() const { return std::to_string(rows) + "x" + std::to_string(cols); }
  std::string name() const { return op() + " [" + shape() + " " + dtypeName() + "]"; }
};

std::vector<Case> allCases() {
  std::vector<Case> cs;
  const Kind four[] = {Kind::Softmax, Kind::LayerNorm, Kind::RmsNorm, Kind::Sum};
  struct S {
    int64_t rows, cols;
    DType dtype;
  };
  const S shapes[] = {{32768, 4096, DType::BF16}, {32768, 4096, DType::F32}, {4096, 32768, DType::BF16},
                      {4096, 32768, DType::F32},  {1024, 262144, DType::F32}};
  for (const S& s : shapes) {
    for (Kind k : four) cs.push_back({k, s.rows, s.cols, s.dtype});
    if (s.rows == 32768 && s.dtype == DType::BF16) cs.push_back({Kind::ResidualRmsNorm, s.rows, s.cols, s.dtype});
  }
  // Static rows between the anchors' lengths (8192 and 16384 values, 2^27
  // values in all), whose configs no anchor row exercises.
  for (int64_t n : {8192, 16384})
    for (DType t : {DType::BF16, DType::F32})
      for (Kind k : {Kind::Softmax, Kind::LayerNorm, Kind::RmsNorm}) cs.push_back({k, (int64_t{1} << 27) / n, n, t});
  cs.push_back({Kind::SumAll, 32768, 4096, DType::F32});
  cs.push_back({Kind::SumAll, 32768, 4096, DType::BF16});
  cs.push_back({Kind::SumCols, 32768, 4096, DType::F32});
  cs.push_back({Kind::SumCols, 32768, 4096, DType::BF16});
  // Short column sums (few threads at parts of 256 values): the norm
  // gradients' partials ([512, 4096] f32) and two more.
  for (auto [r, n] : {std::pair<int64_t, int64_t>{512, 4096}, {1024, 1024}, {8192, 1024}})
    cs.push_back({Kind::SumCols, r, n, DType::F32});
  for (DType t : {DType::F32, DType::BF16}) cs.push_back({Kind::SumAll, 32768, 4096, t, false, false, true});
  for (DType t : {DType::F32, DType::BF16})
    for (Kind k : {Kind::Softmax, Kind::RmsNorm}) cs.push_back({k, 32768, 4096, t, false, false, true});
  // Dynamic row lengths past 4096: the same shapes as the static rows above.
  for (DType t : {DType::F32, DType::BF16})
    for (Kind k : {Kind::Softmax, Kind::RmsNorm}) cs.push_back({k, 4096, 32768, t, false, false, true});
  for (Kind k : {Kind::Softmax, Kind::RmsNorm}) cs.push_back({k, 1024, 262144, DType::F32, false, false, true});
  // ... and between (the heuristic's bounds: 16 and 32 KB a row).
  for (int64_t n : {8192, 16384})
    for (DType t : {DType::F32, DType::BF16})
      for (Kind k : {Kind::Softmax, Kind::RmsNorm}) cs.push_back({k, (int64_t{1} << 27) / n, n, t, false, false, true});
  // Layernorm and cross_entropy (its mean a grid tail) of a dynamic length.
  for (int64_t n : {4096, 16384, 32768})
    for (DType t : {DType::F32, DType::BF16}) cs.push_back({Kind::LayerNorm, (int64_t{1} << 27) / n, n, t, false, false, true});
  cs.push_back({Kind::CrossEntropy, 8192, 32768, DType::BF16, false, false, true});
  for (DType t : {DType::F32, DType::BF16}) {
    cs.push_back({Kind::SumAll, 32768, 4096, t, false, true});
    cs.push_back({Kind::SumCols, 32768, 4096, t, false, true});
  }
  cs.push_back({Kind::CrossEntropy, 8192, 32768, DType::BF16});
  cs.push_back({Kind::CrossEntropy, 8192, 128256, DType::BF16});
  for (int64_t m : {1, 64, 512}) {
    cs.push_back({Kind::Softmax, m, 4096, DType::BF16, true});
    cs.push_back({Kind::RmsNorm, m, 4096, DType::BF16, true});
  }
  // A few long rows (a softmax over a vocabulary for a few sequences).
  cs.push_back({Kind::Softmax, 8, 32768, DType::BF16, true});
  cs.push_back({Kind::RmsNorm, 8, 32768, DType::BF16, true});
  cs.push_back({Kind::Softmax, 8, 128256, DType::F32, true});
  cs.push_back({Kind::Control, 32768, 4096, DType::BF16});
  cs.push_back({Kind::Control, 64, 4096, DType::F32, true});
  // KILN_BENCH_ROWS="FROM:TO[,FROM:TO...]": every case of FROM rows runs
  // with TO rows instead (an experiment's knob: how the row count against
  // the GPU's waves moves a schedule; the names say the rows run).
  if (const char* env = std::getenv("KILN_BENCH_ROWS")) {
    std::string spec = env;
    size_t pos = 0;
    while (pos < spec.size()) {
      size_t end = spec.find(',', pos);
      if (end == std::string::npos) end = spec.size();
      std::string item = spec.substr(pos, end - pos);
      size_t colon = item.find(':');
      if (colon == std::string::npos) throw Error("KILN_BENCH_ROWS: '" + item + "' is not FROM:TO");
      int64_t from = std::stoll(item.substr(0, colon)), to = std::stoll(item.substr(colon + 1));
      if (to < 1) throw Error("KILN_BENCH_ROWS: '" + item + "' asks for fewer than one row");
      for (Case& c : cs)
        if (c.rows == from) c.rows = to;
      pos = end + 1;
    }
  }
  return cs;
}

// The case's graph over `rows` rows: the full size for the benchmark, a few
// rows for the reference check. Inputs: x [rows, C] (the logits for
// cross_entropy), r [rows, C] (the residual), w [C], b [C], targets [rows].
Graph buildGraph(const Case& c, int64_t rows) {
  Graph g;
  const int64_t n = c.cols;
  switch (c.kind) {
    case Kind::Softmax:
      g.output("y", softmax(g.input("x", c.dtype, {Dim(rows), c.flat ? Dim("N") : Dim(n)}), -1));
      break;
    case Kind::LayerNorm: {
      const Dim cols = c.flat ? Dim("N") : Dim(n);
      Tensor x = g.input("x", c.dtype, {Dim(rows), cols});
      Tensor w = g.input("w", c.dtype, {cols}), b = g.input("b", c.dtype, {cols});
      g.output("y", layernorm(x, w, b, 1e-5));
      break;
    }
    case Kind::RmsNorm: {
      const Dim cols = c.flat ? Dim("N") : Dim(n);
      Tensor x = g.input("x", c.dtype, {Dim(rows), cols});
      g.output("y", rmsnorm(x, g.input("w", c.dtype, {cols}), 1e-6));
      break;
    }
    case Kind::Sum:
      g.output("y", sum(g.input("x", c.dtype, {rows, n}), -1));
      break;
    case Kind::SumAll:
    case Kind::SumCols: {
      if (c.flat) {
        g.output("y", sum(g.input("x", c.dtype, {"N"})));
        break;
      }
      Tensor x = g.input("x", c.dtype, {rows, n});
      Tensor v = x;
      if (c.product) {
        Tensor xf = c.dtype == DType::F32 ? x : cast(x, DType::F32);
        Tensor r = c.kind == Kind::SumAll ? x : g.input("r", c.dtype, {rows, n});
        v = xf * (c.dtype == DType::F32 ? r : cast(r, DType::F32));
      }
      g.output("y", c.kind == Kind::SumAll ? sum(v) : sum(v, 0));
      break;
    }
    case Kind::CrossEntropy: {
      Tensor logits = g.input("x", c.dtype, {Dim(rows), c.flat ? Dim("N") : Dim(n)});
      Tensor targets = g.input("targets", DType::I64, {rows});
      g.output("loss", cross_entropy(logits, targets, Reduction::Mean));
      break;
    }
    case Kind::Control:
      g.output("y", g.input("x", c.dtype, {rows, n}) * g.input("w", c.dtype, {n}));
      break;
    case Kind::ResidualRmsNorm: {
      Tensor x = g.input("x", c.dtype, {rows, n}), r = g.input("r", c.dtype, {rows, n});
      Tensor w = g.input("w", c.dtype, {n});
      Tensor h = x + r;
      g.output("h", h);
      g.output("y", rmsnorm(h, w, 1e-6));
      break;
    }
  }
  return g;
}

using bench::minBytes;

// ---------------------------------------------------------------- inputs

// Inputs are a pure function of (input name, element index), so any row can
// be made again on the host for the check without keeping the full tensor,
// and large tensors are made by all cores in parallel.
struct InputSpec {
  uint64_t seed;
  double lo, hi;       // floats: uniform in [lo, hi); targets: integers in [0, C)
  bool perRow;         // [rows, ...] (x, r, targets) or [C] (w, b)
};

InputSpec specFor(const std::string& name) {
  if (name == "x") return {1, -2.0, 2.0, true};
  if (name == "r") return {2, -2.0, 2.0, true};
  if (name == "w") return {3, -1.0, 1.0, false};
  if (name == "b") return {4, -1.0, 1.0, false};
  if (name == "targets") return {5, 0, 0, true};
  throw Error("bench_reduction: no input spec for '" + name + "'");
}

inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Elements [first, first + count) of an input into dst (storage format).
// `classes` is the range of integer inputs (the targets).
void fillElements(void* dst, DType t, const InputSpec& s, int64_t classes, int64_t first, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    uint64_t h = mix64((s.seed << 52) ^ static_cast<uint64_t>(first + i));
    if (t == DType::I64) {
      static_cast<int64_t*>(dst)[i] = static_cast<int64_t>(h % static_cast<uint64_t>(classes));
      continue;
    }
    double v = s.lo + (s.hi - s.lo) * (static_cast<double>(h >> 11) * 0x1.0p-53);
    if (t == DType::F32) static_cast<float*>(dst)[i] = static_cast<float>(v);
    else static_cast<uint16_t*>(dst)[i] = doubleToBF16Bits(v);
  }
}

unsigned hostThreads() { return std::max(1u, std::min(32u, std::thread::hardware_concurrency())); }

// fn(begin, end) over [0, n) in contiguous pieces, on all cores.
void parallelFor(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1 << 16) {
  int64_t parts = std::min<int64_t>(hostThreads(), (n + grain - 1) / grain);
  if (parts <= 1) {
    if (n > 0) fn(0, n);
    return;
  }
  std::vector<std::thread> ts;
  for (int64_t p = 0; p < parts; ++p) ts.emplace_back([&, p] { fn(n * p / parts, n * (p + 1) / parts); });
  for (std::thread& t : ts) t.join();
}

void fillParallel(void* dst, DType t, const InputSpec& s, int64_t classes, int64_t first, int64_t count) {
  size_t es = dtypeSize(t);
  parallelFor(count, [&](int64_t b, int64_t e) {
    fillElements(static_cast<char*>(dst) + b * es, t, s, classes, first + b, e - b);
  });
}

// A device tensor of `numel` elements made through a pinned-size host
// staging buffer.
rt::DeviceBuffer makeDeviceInput(DType t, const InputSpec& s, int64_t classes, int64_t numel) {
  size_t es = dtypeSize(t);
  rt::DeviceBuffer d(numel * es);
  const int64_t chunk = std::min<int64_t>(numel, (int64_t{256} << 20) / es);
  std::vector<char> stage(chunk * es);
  for (int64_t first = 0; first < numel; first += chunk) {
    int64_t n = std::min(chunk, numel - first);
    fillParallel(stage.data(), t, s, classes, first, n);
    d.upload(stage.data(), n * es, first * es);
  }
  return d;
}

// ---------------------------------------------------------------- checking

// Relative tolerance by output dtype with an absolute floor near zero, as in
// tests/gpu_support.h: |have - want| <= tol * max(floor, |want|).
double tolerance(DType t) {
  switch (t) {
    case DType::BF16: return 1.6e-2;
    case DType::F16: return 2e-3;
    case DType::F32: return 2e-5;
    default: return 0;
  }
}

// The floor of the relative tolerance. 1 (the tests') except: softmax,
// whose outputs are all far below 1 (about 1/C) and well conditioned in
// relative terms, is checked relatively; a sum's rounding error follows
// its partial sums (about sqrt(C) for these inputs), not its result, which
// may cancel to near zero.
double toleranceFloor(const Case& c) {
  if (c.kind == Kind::Softmax) return 0;
  if (c.kind == Kind::Sum) return std::sqrt(static_cast<double>(c.cols));
  if (c.kind == Kind::SumAll) return std::sqrt(static_cast<double>(c.rows) * static_cast<double>(c.cols));
  if (c.kind == Kind::SumCols) return std::sqrt(static_cast<double>(c.rows));
  return 1;
}

struct Mismatch {
  int64_t bad = 0, count = 0;
  double maxRelErr = 0;  // max |have - want| / max(floor, |want|)
  std::string first;     // the first bad element, described
};

void compareValue(Mismatch& m, double have, double want, double tol, double floor, const std::string& where) {
  ++m.count;
  bool ok;
  if (std::isnan(want)) ok = std::isnan(have);
  else if (std::isinf(want)) ok = have == want;
  else {
    double denom = std::max(floor, std::fabs(want));
    double rel = std::fabs(have - want) / (denom > 0 ? denom : 1e-300);
    ok = rel <= tol;  // false for a NaN (the poison)
    m.maxRelErr = std::max(m.maxRelErr, std::isnan(rel) ? INFINITY : rel);
  }
  if (!ok && m.bad++ == 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: got %.9g, want %.9g", where.c_str(), have, want);
    m.first = buf;
  }
}

// The rows a check looks at: all rows when few, else `n` rows spread over
// the tensor (first and last included), n from 64 down to 8 as rows get
// long, so the evaluator sees at most ~8M elements (about a second).
std::vector<int64_t> checkRows(const Case& c) {
  if (c.rows <= 512) {
    std::vector<int64_t> all(c.rows);
    for (int64_t i = 0; i < c.rows; ++i) all[i] = i;
    return all;
  }
  int64_t n = std::clamp<int64_t>((int64_t{1} << 23) / c.cols, 8, 64);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < n; ++i) rows.push_back(i * (c.rows - 1) / (n - 1));
  return rows;
}

// The reference evaluator's inputs for the graph of `rows.size()` rows: the
// chosen rows of x, r and targets, all of w and b.
EvalInputs subsetInputs(const Case& c, const Graph& small, const std::vector<int64_t>& rows) {
  EvalInputs ein;
  for (int id : small.params()) {
    const Node& n = small.node(id);
    InputSpec s = specFor(n.name);
    HostTensor h(n.dtype, resolveShape(n.shape, {}));
    size_t es = dtypeSize(n.dtype);
    if (!s.perRow) {
      fillElements(h.data(), n.dtype, s, c.cols, 0, h.numel());
    } else {
      int64_t rowElems = h.numel() / static_cast<int64_t>(rows.size());
      for (size_t i = 0; i < rows.size(); ++i)
        fillElements(static_cast<char*>(h.data()) + i * rowElems * es, n.dtype, s, c.cols, rows[i] * rowElems,
                     rowElems);
    }
    ein.tensors.emplace(n.name, std::move(h));
  }
  return ein;
}

// cross_entropy's per-row loss in fp64: logsumexp(row) - row[target], the
// row made again from the input generator.
double crossEntropyRowLoss(const Case& c, int64_t row, std::vector<char>& buf) {
  const InputSpec sx = specFor("x"), st = specFor("targets");
  buf.resize(c.cols * dtypeSize(c.dtype));
  fillElements(buf.data(), c.dtype, sx, c.cols, row * c.cols, c.cols);
  int64_t target = 0;
  fillElements(&target, DType::I64, st, c.cols, row, 1);
  auto at = [&](int64_t j) -> double {
    if (c.dtype == DType::F32) return reinterpret_cast<const float*>(buf.data())[j];
    return bf16BitsToDouble(reinterpret_cast<const uint16_t*>(buf.data())[j]);
  };
  double m = -INFINITY;
  for (int64_t j = 0; j < c.cols; ++j) m = std::max(m, at(j));
  double s = 0;
  for (int64_t j = 0; j < c.cols; ++j) s += std::exp(at(j) - m);
  return std::log(s) + m - at(target);
}

// Mean of the per-row losses over `rows`, on all cores.
double crossEntropyMean(const Case& c, const std::vector<int64_t>& rows) {
  std::vector<double> loss(rows.size());
  parallelFor(static_cast<int64_t>(rows.size()), [&](int64_t b, int64_t e) {
    std::vector<char> buf;
    for (int64_t i = b; i < e; ++i) loss[i] = crossEntropyRowLoss(c, rows[i], buf);
  }, 1);
  double s = 0;
  for (double v : loss) s += v;
  return s / static_cast<double>(rows.size());
}

// The sum of x over `rows` in fp64 (each row summed on its own, then the
// rows in order), the rows made again from the input generator, on all cores.
// The values a SumAll or SumCols case sums, for row r of the input: x, or
// x*x / r*x (in fp64, as the reference evaluator).
class SummedRow {
 public:
  explicit SummedRow(const Case& c)
      : c_(c), x_(c.cols * dtypeSize(c.dtype)), r_(c.product ? x_.size() : 0), v_(c.cols) {}
  const std::vector<double>& at(int64_t row) {
    fillElements(x_.data(), c_.dtype, specFor("x"), c_.cols, row * c_.cols, c_.cols);
    const bool other = c_.product && c_.kind == Kind::SumCols;
    if (other) fillElements(r_.data(), c_.dtype, specFor("r"), c_.cols, row * c_.cols, c_.cols);
    for (int64_t j = 0; j < c_.cols; ++j) {
      const double x = value(x_, j);
      v_[j] = !c_.product ? x : x * (other ? value(r_, j) : x);
    }
    return v_;
  }

 private:
  double value(const std::vector<char>& buf, int64_t j) const {
    return c_.dtype == DType::F32 ? reinterpret_cast<const float*>(buf.data())[j]
                                  : bf16BitsToDouble(reinterpret_cast<const uint16_t*>(buf.data())[j]);
  }
  const Case& c_;
  std::vector<char> x_, r_;
  std::vector<double> v_;
};

double sumRows(const Case& c, const std::vector<int64_t>& rows) {
  std::vector<double> part(rows.size());
  parallelFor(static_cast<int64_t>(rows.size()), [&](int64_t b, int64_t e) {
    SummedRow row(c);
    for (int64_t i = b; i < e; ++i) {
      double s = 0;
      for (double v : row.at(rows[i])) s += v;
      part[i] = s;
    }
  }, 16);
  double s = 0;
  for (double v : part) s += v;
  return s;
}

// sum(x, 0) over every row in fp64: each core sums a contiguous range of
// rows per column, then the ranges in order.
std::vector<double> sumColumns(const Case& c) {
  const int64_t parts = hostThreads();
  std::vector<std::vector<double>> part(parts, std::vector<double>(c.cols, 0.0));
  parallelFor(parts, [&](int64_t b, int64_t e) {
    SummedRow row(c);
    for (int64_t p = b; p < e; ++p)
      for (int64_t r = c.rows * p / parts; r < c.rows * (p + 1) / parts; ++r) {
        const std::vector<double>& v = row.at(r);
        for (int64_t j = 0; j < c.cols; ++j) part[p][j] += v[j];
      }
  }, 1);
  std::vector<double> total(c.cols, 0.0);
  for (const auto& v : part)
    for (int64_t j = 0; j < c.cols; ++j) total[j] += v[j];
  return total;
}

// What the device output must be, for the chosen rows of each output (or
// the whole 0-dim output of cross_entropy).
struct Expected {
  std::vector<int64_t> rows;        // empty for cross_entropy (0-dim output)
  std::vector<EvalOutput> outputs;  // per graph output: the chosen rows
  double scalar = 0;                // cross_entropy: the mean over every row; SumAll: the sum
  std::vector<double> columns;      // SumCols: the column sums
  std::string note;                 // what was checked, for the log
  bool selfCheckOk = true;          // cross_entropy: host loop == evaluator
  std::string selfCheck;
};

Expected expectedFor(const Case& c) {
  Expected ex;
  std::vector<int64_t> rows = checkRows(c);
  Case shaped = c;  // the same values as rows x cols (a flat x is those rows end to end)
  shaped.flat = false;
  Graph small = buildGraph(shaped, static_cast<int64_t>(rows.size()));
  std::vector<EvalOutput> ref = evaluate(small, subsetInputs(c, small, rows));
  if (c.kind == Kind::SumCols) {
    // The evaluator's column sums over the check rows check the host loop's
    // arithmetic (the same rows summed the same way); then every row.
    std::vector<double> host(c.cols, 0.0);
    SummedRow row(c);
    for (int64_t r : rows) {
      const std::vector<double>& v = row.at(r);
      for (int64_t j = 0; j < c.cols; ++j) host[j] += v[j];
    }
    double worst = 0;
    for (int64_t j = 0; j < c.cols; ++j)
      worst = std::max(worst, std::fabs(host[j] - ref.at(0).exact.at(j)) / std::max(1.0, std::fabs(host[j])));
    ex.selfCheckOk = worst <= 1e-9;
    ex.selfCheck = "host fp64 loop vs reference evaluator on " + std::to_string(rows.size()) +
                   " rows: max rel difference " + std::to_string(worst);
    ex.columns = sumColumns(c);
    ex.note = "column sums over all " + std::to_string(c.rows) + " rows (fp64 host loop; " + ex.selfCheck + ")";
    return ex;
  }
  if (c.kind == Kind::SumAll || c.kind == Kind::CrossEntropy) {
    // One value (a whole tensor's sum, cross_entropy's mean): the
    // evaluator's value over the check rows checks the host loop; the host
    // loop then takes every row.
    const bool sumAll = c.kind == Kind::SumAll;
    auto host = [&](const std::vector<int64_t>& rs) { return sumAll ? sumRows(c, rs) : crossEntropyMean(c, rs); };
    double evalValue = ref.at(0).exact.at(0);
    double hostSubset = host(rows);
    ex.selfCheckOk =
        std::fabs(evalValue - hostSubset) <= (sumAll ? 1e-9 : 1e-12) * std::max(1.0, std::fabs(evalValue));
    char buf[200];
    std::snprintf(buf, sizeof buf, "host fp64 loop vs reference evaluator on %zu rows: %.12g vs %.12g", rows.size(),
                  hostSubset, evalValue);
    ex.selfCheck = buf;
    std::vector<int64_t> every(c.rows);
    for (int64_t i = 0; i < c.rows; ++i) every[i] = i;
    ex.scalar = host(every);
    ex.note = std::string(sumAll ? "sum of all " : "mean over all ") + std::to_string(c.rows) +
              " rows (fp64 host loop; " + ex.selfCheck + ")";
    return ex;
  }
  ex.rows = rows;
  ex.outputs = std::move(ref);
  ex.note = rows.size() == static_cast<size_t>(c.rows) ? "all " + std::to_string(c.rows) + " rows"
                                                       : std::to_string(rows.size()) + " rows spread over " +
                                                             std::to_string(c.rows);
  return ex;
}

// ---------------------------------------------------------------- output

std::ofstream jsonOut;

void emitJson(const json& j) {
  std::string line = j.dump();
  std::printf("JSON %s\n", line.c_str());
  std::fflush(stdout);
  if (jsonOut) jsonOut << line << "\n" << std::flush;
}

json caseJson(const Case& c) {
  return {{"op", c.name()}, {"impl", "kiln"}, {"shape", c.shape()}, {"dtype", c.dtypeName()}};
}

std::string indent(const std::string& text, const char* prefix) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) out += prefix + line + "\n";
  return out;
}

std::string firstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// ---------------------------------------------------------------- running

// Device inputs kept across consecutive cases of the same shape.
std::map<std::string, rt::DeviceBuffer> inputCache;

std::string inputKey(const Case& c, const Node& n) {
  return n.name + ":" + typeToString(n.dtype, n.shape) + ":" + std::to_string(c.cols);
}

double copyRoofTBps = 0;

void measureCopyRoof() {
  // Device-to-device copy of 2 GiB (as shared/bench/floor.cu, which copies
  // 4 GiB): read + write bytes over the median time.
  const size_t bytes = size_t{2} << 30;
  rt::DeviceBuffer a(bytes), b(bytes);
  a.fill(1);
  const rt::Driver& d = rt::driver();
  rt::BenchmarkOptions bo;
  bo.warmup = 3;
  bo.iters = 20;
  rt::BenchmarkResult r = rt::benchmark([&] {
    CUresult e = d.memcpyDtoD(reinterpret_cast<uintptr_t>(b.data()), reinterpret_cast<uintptr_t>(a.data()), bytes);
    if (e != CUDA_SUCCESS) throw Error("bench_reduction: cuMemcpyDtoD: " + rt::cuErrorText(e));
  }, bo);
  copyRoofTBps = 2.0 * bytes / (r.medianUs * 1e-6) / 1e12;
  std::printf("copy roof: %.3f TB/s (device-to-device copy of 2 GiB, read + write, median of 20: %.1f us)\n",
              copyRoofTBps, r.medianUs);
  emitJson({{"op", "copy [2 GiB]"}, {"impl", "cuMemcpyDtoD"}, {"median_us", r.medianUs}, {"TBps", copyRoofTBps}});
}

struct StreamTime {
  double medianUsPerCall = 0;
};

// The latency measure of the small cases, as bench/anchors_reduction.py
// takes it: `calls` launches back to back between two events, divided by
// `calls`; the median over `batches` batches, after a warm-up.
StreamTime backToBack(const std::function<void()>& fn, int calls = 100, int batches = 20) {
  for (int i = 0; i < 50; ++i) fn();
  if (CUresult e = rt::driver().ctxSynchronize(); e != CUDA_SUCCESS)
    throw Error("bench_reduction: warm-up failed: " + rt::cuErrorText(e));
  std::vector<double> us;
  for (int b = 0; b < batches; ++b) {
    rt::Event start, stop;
    start.record();
    for (int i = 0; i < calls; ++i) fn();
    stop.record();
    stop.synchronize();
    us.push_back(1000.0 * rt::elapsedMs(start, stop) / calls);
  }
  return {rt::summarizeSamples(us).medianUs};
}

std::vector<int64_t> dimValuesOf(const Case& c);

// KILN_ROW_CONFIG: a row-reduction config override for every case (sweeps).
// The heuristic's configs (no tuning database) unless KILN_ROW_CONFIG says
// otherwise. An overridden kernel builds no variant at launch, so a case of
// a dynamic row length passes its length as the dim the kernel is built
// for: a partial override merges onto the heuristic's config for the
// launched length, as the variant's would.
kiln::CompileOptions benchOptions(const Case& c) {
  kiln::CompileOptions o;
  o.tune = kiln::CompileOptions::Tune::Off;
  if (const char* env = std::getenv("KILN_ROW_CONFIG")) {
    o.rowConfigOverride = env;
    if (c.flat) o.dims["N"] = dimValuesOf(c).at(0);
  }
  return o;
}

// KILN_BENCH_TUNE=FILE: every case is also tuned (Tune::Always, recorded in
// FILE), then checked and timed with the tuned config, next to the default.
std::unique_ptr<tune::TuningDatabase> tuningDb() {
  const char* env = std::getenv("KILN_BENCH_TUNE");
  if (!env || !*env) return nullptr;
  tune::TuningDbOptions o;
  o.searchPath = "";
  o.userFile = env;
  return std::make_unique<tune::TuningDatabase>(o);
}

// The case's dynamic dims: a flat case's one dim N, rows x cols (a whole
// sum) or cols (a row length); none otherwise.
std::vector<int64_t> dimValuesOf(const Case& c) {
  if (!c.flat) return {};
  return {c.kind == Kind::SumAll ? c.rows * c.cols : c.cols};
}

// Compiles, checks and times one case. Returns true when it passed.
bool runCase(const Case& c) {
  std::printf("\n== %s\n", c.name().c_str());
  std::fflush(stdout);
  json j = caseJson(c);
  Kernel k;
  Graph g = buildGraph(c, c.rows);
  const std::vector<int64_t> dimValues = dimValuesOf(c);
  DimBindings dims;
  if (c.flat) dims["N"] = dimValues.at(0);
  try {
    // The build these dims launch (a long dynamic row length: its variant).
    k = compile(g, benchOptions(c)).forDims(dimValues);
  } catch (const std::exception& e) {
    std::printf("%-40s FAIL (compile): %s\n", c.name().c_str(), e.what());
    j["correct"] = false;
    j["error"] = std::string("compile: ") + e.what();
    emitJson(j);
    return false;
  }
  const auto& kernels = k.compiled().kernels;
  std::printf("%s", indent(k.explain(), "  | ").c_str());
  j["kernels"] = kernels.size();
  json configs = json::array(), schedules = json::array();
  for (const auto& ck : kernels) {
    schedules.push_back(ck.schedule);
    json cfg = json::parse(ck.config, nullptr, false);
    configs.push_back(cfg.is_discarded() ? json(ck.config) : cfg);
  }
  j["schedules"] = schedules;
  j["configs"] = configs;

  try {
    // Inputs (kept while the next cases use the same ones), poisoned outputs.
    std::vector<std::string> keys;
    for (int id : g.params()) keys.push_back(inputKey(c, g.node(id)));
    for (auto it = inputCache.begin(); it != inputCache.end();)
      it = std::find(keys.begin(), keys.end(), it->first) == keys.end() ? inputCache.erase(it) : std::next(it);
    auto elements = [&](const Shape& s) {
      int64_t n = 1;
      for (int64_t d : resolveShape(s, dims)) n *= d;
      return n;
    };
    std::vector<TensorView> views;
    for (int id : g.params()) {
      const Node& n = g.node(id);
      auto it = inputCache.find(inputKey(c, n));
      if (it == inputCache.end())
        it = inputCache.emplace(inputKey(c, n), makeDeviceInput(n.dtype, specFor(n.name), c.cols, elements(n.shape)))
                 .first;
      views.emplace_back(it->second.data(), n.dtype, resolveShape(n.shape, dims));
    }
    std::vector<rt::DeviceBuffer> outs;
    for (const GraphOutput& o : g.outputs()) {
      const Node& n = g.node(o.node);
      outs.emplace_back(std::max<size_t>(1, elements(n.shape) * dtypeSize(n.dtype)));
      outs.back().poison();
      views.emplace_back(outs.back().data(), n.dtype, resolveShape(n.shape, dims));
    }
    auto launch = [&] { k.launch(std::span<const TensorView>(views), std::span<const int64_t>(dimValues)); };

    // Check once.
    launch();
    if (CUresult e = rt::driver().ctxSynchronize(); e != CUDA_SUCCESS)
      throw Error("bench_reduction: the first launch failed: " + rt::cuErrorText(e));
    auto t0 = std::chrono::steady_clock::now();
    Expected ex = expectedFor(c);
    double refSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tol = 0;
    auto check = [&] {
      Mismatch mm;
      if (c.kind == Kind::SumCols) {
        const DType dt = g.node(g.outputs().at(0).node).dtype;
        HostTensor got(dt, {c.cols});
        outs.at(0).download(got.data(), c.cols * dtypeSize(dt));
        tol = tolerance(dt);
        for (int64_t j = 0; j < c.cols; ++j)
          compareValue(mm, got.get(j), ex.columns[j], tol, toleranceFloor(c), "column " + std::to_string(j));
      } else if (c.kind == Kind::SumAll || c.kind == Kind::CrossEntropy) {
        const DType dt = g.node(g.outputs().at(0).node).dtype;
        HostTensor got(dt, {});
        outs.at(0).download(got.data(), dtypeSize(dt));
        tol = tolerance(dt);
        compareValue(mm, got.get(0), ex.scalar, tol, toleranceFloor(c), c.kind == Kind::SumAll ? "sum" : "loss");
      } else {
        for (size_t o = 0; o < ex.outputs.size(); ++o) {
          const EvalOutput& r = ex.outputs[o];
          DType dt = r.value.dtype();
          tol = std::max(tol, tolerance(dt));
          int64_t rowElems = r.value.numel() / static_cast<int64_t>(ex.rows.size());
          size_t rowBytes = rowElems * dtypeSize(dt);
          HostTensor got(dt, r.value.shape());
          for (size_t i = 0; i < ex.rows.size(); ++i)
            outs[o].download(static_cast<char*>(got.data()) + i * rowBytes, rowBytes, ex.rows[i] * rowBytes);
          for (int64_t e = 0; e < got.numel(); ++e)
            compareValue(mm, got.get(e), r.exact[e], tolerance(dt), toleranceFloor(c),
                         r.name + " row " + std::to_string(ex.rows[e / rowElems]) + " col " +
                             std::to_string(e % rowElems));
        }
      }
      if (!ex.selfCheckOk) {  // the host loop and the evaluator disagree
        ++mm.bad;
        mm.first = "reference disagreement: " + ex.selfCheck;
      }
      return mm;
    };
    Mismatch mm = check();
    bool ok = mm.bad == 0;
    // KILN_EXPORT_KERNELS: for anchors_reduction.py, which times it with do_bench.
    // Under KILN_ROW_CONFIG the op is a variant: the case's name, a space and
    // the override (kiln_kernels.py's variants()).
    const char* rowConfig = std::getenv("KILN_ROW_CONFIG");
    if (ok) bench::exportKernel(rowConfig && *rowConfig ? c.name() + " " + rowConfig : c.name(), k);
    std::printf("  check: %s; %lld of %lld values outside tolerance %.3g (max rel err %.3g); reference %.1f s\n",
                ex.note.c_str(), static_cast<long long>(mm.bad), static_cast<long long>(mm.count), tol, mm.maxRelErr,
                refSeconds);
    if (!ok) std::printf("  first bad: %s\n", mm.first.c_str());
    j["correct"] = ok;
    j["checked"] = ex.note;
    j["max_rel_err"] = std::isfinite(mm.maxRelErr) ? json(mm.maxRelErr) : json("inf");

    // Time.
    rt::BenchmarkOptions bo;
    bo.warmup = 10;
    bo.iters = 100;
    // KILN_BENCH_NOFLUSH=1: no L2 flush between runs (an experiment's knob:
    // the flush leaves the L2 full of dirty lines that the timed kernel's
    // reads must write back; the names and JSON say "flushed": false).
    bo.flushL2 = !std::getenv("KILN_BENCH_NOFLUSH");
    // KILN_BENCH_FLUSH=read (another experiment's knob): after the flush, a
    // kiln sum reads a buffer of twice the L2, so that the flush's dirty
    // lines are written back before the timed run, which then finds the L2
    // full of clean lines of other data (the names and JSON say "flush":
    // "read"). What a read-only kernel pays for the dirty lines is the
    // difference.
    const char* flushMode = std::getenv("KILN_BENCH_FLUSH");
    const bool readFlush = bo.flushL2 && flushMode && std::string(flushMode) == "read";
    std::unique_ptr<rt::DeviceBuffer> readBuf, readOut;
    std::optional<Kernel> reader;
    if (readFlush) {
      const int64_t n = 2 * rt::Device::current().properties().l2Bytes / 4;
      Graph rg;
      rg.output("s", sum(rg.input("f", DType::F32, {Dim(n)}), 0));
      reader.emplace(compile(rg, {.tune = CompileOptions::Tune::Off}));
      readBuf = std::make_unique<rt::DeviceBuffer>(static_cast<size_t>(n) * 4);
      readBuf->fill(0);
      readOut = std::make_unique<rt::DeviceBuffer>(4);
      const TensorView rv[] = {TensorView(readBuf->data(), DType::F32, {n}), TensorView(readOut->data(), DType::F32, {})};
      std::vector<TensorView> views(std::begin(rv), std::end(rv));
      bo.afterFlush = [&reader, views] { reader->launch(std::span<const TensorView>(views)); };
    }
    rt::BenchmarkResult r = rt::benchmark(launch, bo);
    Case shaped = c;  // a flat case moves the bytes of its rows x cols
    shaped.flat = false;
    double bytes = minBytes(buildGraph(shaped, c.rows));
    double tbps = bytes / (r.medianUs * 1e-6) / 1e12;
    double ofCopy = copyRoofTBps > 0 ? tbps / copyRoofTBps : 0;
    std::printf("%-40s kiln %zu kernel(s) %9.1f us (p95 %8.1f)  %.3f TB/s  %.3f of copy  %s\n", c.name().c_str(),
                kernels.size(), r.medianUs, r.p95Us, tbps, ofCopy, ok ? "PASS" : "FAIL");
    j["bytes"] = bytes;
    if (!bo.flushL2) j["flushed"] = false;
    if (readFlush) j["flush"] = "read";
    j["median_us"] = r.medianUs;
    j["p95_us"] = r.p95Us;
    j["TBps"] = tbps;
    j["of_copy"] = ofCopy;
    if (c.small) {
      // Back to back, not flushed: the mean time per call of 100 calls
      // between one pair of events (no per-call event cost), median of 20.
      StreamTime st = backToBack(launch);
      std::printf("%-40s kiln, L2 flushed %7.2f us (p95 %7.2f); back to back, not flushed %7.2f us per call\n",
                  c.name().c_str(), r.medianUs, r.p95Us, st.medianUsPerCall);
      j["back_to_back_us"] = st.medianUsPerCall;
    }
    if (auto db = tuningDb()) {
      // Tuned: the same check and timing with the tuner's config.
      kiln::CompileOptions to = benchOptions(c);
      to.tune = kiln::CompileOptions::Tune::Always;
      // Tuning benchmarks at the sizes in `dims`, so a dynamic case names
      // its dim's value (session 48 call 4: every dynamic case failed here).
      if (c.flat) to.dims["N"] = dimValues.at(0);
      to.tuningDatabase = db.get();
      auto t1 = std::chrono::steady_clock::now();
      Kernel tuned = compile(g, to);
      double tuneS = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
      std::string cfg;
      for (const auto& ck : tuned.compiled().kernels) cfg += (cfg.empty() ? "" : " ") + ck.config;
      for (rt::DeviceBuffer& b : outs) b.poison();
      tuned.launch(std::span<const TensorView>(views), std::span<const int64_t>(dimValues));
      if (CUresult e = rt::driver().ctxSynchronize(); e != CUDA_SUCCESS)
        throw Error("bench_reduction: the tuned kernel's launch failed: " + rt::cuErrorText(e));
      Mismatch tm = check();
      rt::BenchmarkResult tr = rt::benchmark([&] { tuned.launch(std::span<const TensorView>(views), std::span<const int64_t>(dimValues)); }, bo);
      double ttbps = bytes / (tr.medianUs * 1e-6) / 1e12;
      std::printf("%-40s tuned %9.1f us (p95 %8.1f)  %.3f TB/s  %.3fx the heuristic  %s; tuning %.2f s; %s\n",
                  c.name().c_str(), tr.medianUs, tr.p95Us, ttbps, r.medianUs / tr.medianUs,
                  tm.bad == 0 ? "PASS" : "FAIL", tuneS, cfg.c_str());
      std::string note = tuned.explain();
      if (size_t at = note.find("tuning: "); at != std::string::npos)
        std::printf("  %s\n", note.substr(at, note.find('\n', at) - at).c_str());
      j["tuned"] = {{"median_us", tr.medianUs}, {"p95_us", tr.p95Us}, {"TBps", ttbps}, {"tuning_s", tuneS},
                    {"config", cfg}, {"correct", tm.bad == 0}};
      ok = ok && tm.bad == 0;
    }
    emitJson(j);
    return ok;
  } catch (const std::exception& e) {
    std::printf("%-40s FAIL (run): %s\n", c.name().c_str(), e.what());
    j["correct"] = false;
    j["error"] = std::string("run: ") + e.what();
    emitJson(j);
    return false;
  }
}

bool selected(const Case& c, const std::vector<std::string>& filters) {
  std::string name = c.name();
  if (c.kind == Kind::Control) {  // only when asked for by name
    for (const std::string& f : filters)
      if (f.find("control") != std::string::npos && name.find(f) != std::string::npos) return true;
    return false;
  }
  if (filters.empty()) return true;
  for (const std::string& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

// Without a GPU: compile each case (no GPU needed) and report the plan.
int compileOnly(const std::vector<Case>& cases) {
  int failed = 0;
  for (const Case& c : cases) {
    try {
      auto t0 = std::chrono::steady_clock::now();
      // The build the case's dims launch (a long dynamic row length's variant).
      Kernel k = compile(buildGraph(c, c.rows), benchOptions(c)).forDims(dimValuesOf(c));
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-40s compiled: %s (%.0f ms)\n", c.name().c_str(), firstLine(k.explain()).c_str(), ms);
      for (const auto& ck : k.compiled().kernels) std::printf("    %s: %s\n", ck.name.c_str(), ck.config.c_str());
    } catch (const std::exception& e) {
      ++failed;
      std::printf("%-40s compile FAIL: %s\n", c.name().c_str(), firstLine(e.what()).c_str());
    }
  }
  return failed;
}

// Without a GPU: build the expected values of each case (the reference
// evaluator on the check rows; cross_entropy's host loop) and time it.
int referenceOnly(const std::vector<Case>& cases) {
  int failed = 0;
  for (const Case& c : cases) {
    auto t0 = std::chrono::steady_clock::now();
    Expected ex = expectedFor(c);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%-40s reference: %s, %.2f s%s\n", c.name().c_str(), ex.note.c_str(), s,
                ex.selfCheckOk ? "" : "  SELF-CHECK FAIL");
    if (c.kind == Kind::CrossEntropy || c.kind == Kind::SumAll) std::printf("    %s %.9g\n", c.kind == Kind::SumAll ? "sum" : "mean loss", ex.scalar);
    if (c.kind == Kind::SumCols) {
      double t = 0;
      for (double v : ex.columns) t += v;
      std::printf("    total of the column sums %.9g\n", t);
    }
    if (!ex.selfCheckOk) ++failed;
  }
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> filters;
  bool list = false, reference = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--list") list = true;
    else if (a == "--reference") reference = true;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_reduction [--list] [--reference] [substring...]\n");
      return 0;
    } else filters.push_back(a);
  }
  std::vector<Case> cases;
  for (const Case& c : allCases())
    if (selected(c, filters)) cases.push_back(c);
  if (list) {
    for (const Case& c : cases) std::printf("%s\n", c.name().c_str());
    return 0;
  }
  if (cases.empty()) {
    std::printf("bench_reduction: no case matches; --list shows them\n");
    return 2;
  }
  if (reference) return referenceOnly(cases) ? 1 : 0;
  if (!rt::driverAvailable()) {
    std::printf("bench_reduction: no GPU, so nothing is timed (%s)\n", rt::driverUnavailableReason().c_str());
    std::printf("compiling the %zu selected case(s) only (no GPU needed):\n", cases.size());
    int failed = compileOnly(cases);
    std::printf("bench_reduction: %zu compiled, %d failed; no GPU: exiting 77 (skipped)\n", cases.size() - failed,
                failed);
    return 77;
  }
  if (const char* out = std::getenv("OUT")) jsonOut.open(std::string(out) + "/kiln_reduction.jsonl");
  std::printf("%s; %u host threads\n", rt::Device::current().properties().summary().c_str(), hostThreads());
  try {
    measureCopyRoof();
  } catch (const std::exception& e) {
    std::printf("copy roof: FAIL: %s\n", e.what());
  }
  std::vector<std::string> failedNames;
  for (const Case& c : cases)
    if (!runCase(c)) failedNames.push_back(c.name());
  inputCache.clear();
  std::printf("\nbench_reduction: %zu of %zu case(s) passed\n", cases.size() - failedNames.size(), cases.size());
  for (const std::string& n : failedNames) std::printf("  FAIL %s\n", n.c_str());
  return failedNames.empty() ? 0 : 1;
}
