// Lesson 8: a training step.
//
// A tiny classifier head trained with kiln kernels only: h = rmsnorm(x) * g,
// logits = h @ W^T, loss = cross_entropy(logits, targets) (the mean over the
// tokens), then the gradients and an AdamW update of W and g. Mixed
// precision, as a real training run does it: activations and the weight
// copies the kernels read are bf16; the master weights and AdamW's moments
// are f32, and the update writes a fresh bf16 copy of each weight.
//
// What one step is made of in kiln (the lesson prints each graph's kernels):
//   forward   the norm, fused into one row kernel; the matmul on tensor
//             cores; the loss, per-row log-sum-exp and its mean in one
//             kernel (the last block to finish takes the mean);
//   backward  the cross-entropy gradient, one row kernel; two matmuls that
//             read their operands as stored, transposed where needed (dh =
//             dlogits @ W; dW = dlogits^T @ h, as the forward read W^T):
//             no transpose is ever written out; the norm's gradients: a
//             row kernel writes dx and sums dg over its part of the rows
//             (column partials: 128 parts of 4 rows for 512 tokens), and a
//             small second kernel adds up the parts;
//   optimizer AdamW and the bf16 copy of the new weight in one pointwise
//             kernel, launched once for W and once for g.
// Nothing here fuses across a matmul yet: a matmul's epilogue fuses
// elementwise ops only (lesson 4), so the loss after the logits and the
// norm's gradient after dh stay kernels of their own.
//
// Each graph names its inputs and outputs after the lesson's device tensors,
// so one small helper launches any of them by name; the optimizer's graph
// is launched through a rename map and flat views. Kernel pointer arguments
// are no-alias, so a launch never reads and writes the same buffer: the f32
// master weights and AdamW states ping-pong between two buffers.
//
// Step 1 is checked: after each launch, before anything later overwrites
// its inputs, the lesson downloads them and compares every output element
// against the fp64 reference evaluator. Then it trains, prints the loss and
// times a step. On a machine without a GPU it compiles every graph, prints
// their kernels and says it cannot run them.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kiln.h"
#include "kiln/runtime/timing.h"

using namespace kiln;

namespace {

constexpr double kNormEps = 1e-6;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// A device tensor of the lesson. The graphs name their parameters after
// these.
struct DeviceTensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  rt::DeviceBuffer buffer;
};
using Tensors = std::map<std::string, DeviceTensor>;

// One graph of the step, compiled once. `slots`: its tensor parameters, then
// its outputs, with their declared types.
struct Slot {
  std::string name;
  DType dtype;
  Shape shape;
  bool output;
};
struct Stage {
  std::string name;
  Graph graph;
  Kernel kernel;
  std::vector<Slot> slots;
};

Stage makeStage(std::string name, Graph g, const CompileOptions& options = {}) {
  Stage s{std::move(name), g, compile(g, options), {}};
  for (int id : g.params())
    if (g.node(id).op == Op::Input) s.slots.push_back({g.node(id).name, g.node(id).dtype, g.node(id).shape, false});
  for (const GraphOutput& o : g.outputs()) s.slots.push_back({o.name, g.node(o.node).dtype, g.node(o.node).shape, true});
  return s;
}

// "2 kernels: row_reduction + matmul"
std::string kernelsOf(const Kernel& k) {
  const auto& kernels = k.compiled().kernels;
  std::string s = std::to_string(kernels.size()) + (kernels.size() == 1 ? " kernel:  " : " kernels: ");
  for (size_t i = 0; i < kernels.size(); ++i) s += (i ? " + " : "") + kernels[i].schedule;
  return s;
}

// One launch of a stage: the device tensor each graph name stands for
// (`rename`, graph name -> tensor name, where they differ), the dynamic
// dims and the runtime scalars.
struct Launch {
  std::string label;
  const Stage* stage = nullptr;
  std::map<std::string, std::string> rename;
  DimBindings dims;
  std::map<std::string, double> scalars;
};

DeviceTensor& tensorFor(Tensors& t, const Launch& l, const Slot& s) {
  auto r = l.rename.find(s.name);
  const std::string& name = r == l.rename.end() ? s.name : r->second;
  auto it = t.find(name);
  if (it == t.end()) throw Error(l.label + ": no device tensor named " + name + " for " + s.name);
  return it->second;
}

// The view a launch passes for a slot: the graph's shape under the launch's
// dims (a flat [N] view of a [V, D] tensor for the optimizer).
TensorView viewFor(Tensors& t, const Launch& l, const Slot& s) {
  const DeviceTensor& d = tensorFor(t, l, s);
  std::vector<int64_t> shape = resolveShape(s.shape, l.dims);
  if (d.dtype != s.dtype || product(shape) != product(d.shape))
    throw Error(l.label + ": " + s.name + " is " + typeToString(s.dtype, s.shape) + " but its device tensor is " +
                std::string(dtypeName(d.dtype)) + rt::formatShape(d.shape));
  return d.buffer.view(s.dtype, shape);
}

void launch(Tensors& t, const Launch& l) {
  Args args;
  for (const Slot& s : l.stage->slots) args.tensor(s.name, viewFor(t, l, s));
  for (const auto& [name, value] : l.dims) args.dim(name, value);
  for (const auto& [name, value] : l.scalars) args.scalar(name, value);
  l.stage->kernel.launch(args);
}

HostTensor download(Tensors& t, const Launch& l, const Slot& s) {
  HostTensor h(s.dtype, resolveShape(s.shape, l.dims));
  tensorFor(t, l, s).buffer.download(h.data(), h.bytes());
  return h;
}

// Compares every output of the launch just made with the fp64 reference
// evaluated on the inputs as they are on the device. Bad: |got - want| >
// rtol * (|want| + rms(want)), rtol by dtype; the rms floor is for sums that
// cancel (matmuls, dg). Prints one line; returns the number of bad elements.
int64_t check(Tensors& t, const Launch& l) {
  EvalInputs in;
  in.dims = l.dims;
  in.scalars = l.scalars;
  for (const Slot& s : l.stage->slots)
    if (!s.output) in.tensors[s.name] = download(t, l, s);
  std::vector<EvalOutput> ref = evaluate(l.stage->graph, in);
  double worst = 0;  // the largest error as a fraction of its tolerance
  int64_t bad = 0, total = 0;
  size_t o = 0;
  for (const Slot& s : l.stage->slots) {
    if (!s.output) continue;
    HostTensor got = download(t, l, s);
    const std::vector<double>& want = ref[o++].exact;
    const double rtol = s.dtype == DType::BF16 ? 1.6e-2 : 1e-4;
    double sumSquares = 0;
    for (double w : want) sumSquares += w * w;
    const double rms = std::sqrt(sumSquares / static_cast<double>(want.size()));
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double tol = rtol * (std::fabs(want[i]) + rms);
      const double err = std::fabs(got.get(i) - want[i]);
      const double rel = tol > 0 ? err / tol : (err == 0 ? 0 : INFINITY);
      if (!(rel <= 1)) ++bad;
      worst = std::isnan(rel) ? INFINITY : std::max(worst, rel);
    }
    total += got.numel();
  }
  std::printf("  %-10s %-42s max error %.3f of tolerance, %lld of %lld outside\n", l.label.c_str(),
              kernelsOf(l.stage->kernel).c_str(), worst, static_cast<long long>(bad), static_cast<long long>(total));
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t T = argc > 1 ? std::atoll(argv[1]) : 512, D = 256, V = 1024;  // tokens, features, classes

  // 1. The graphs of one step, each compiled once.
  Graph norm;
  {
    Tensor x = norm.input("x", DType::BF16, {T, D});
    Tensor g = norm.input("g", DType::BF16, {D});
    norm.output("h", rmsnorm(x, g, kNormEps));
  }
  Graph head;
  {
    Tensor h = head.input("h", DType::BF16, {T, D});
    Tensor w = head.input("W", DType::BF16, {V, D});
    head.output("logits", matmul(h, w, {.transB = true}));
  }
  Graph loss;
  {
    Tensor logits = loss.input("logits", DType::BF16, {T, V});
    Tensor targets = loss.input("targets", DType::I64, {T});
    loss.output("loss", cross_entropy(logits, targets, Reduction::Mean));
  }
  Graph lossBack;
  {
    Tensor dloss = lossBack.input("dloss", DType::F32, {});
    Tensor logits = lossBack.input("logits", DType::BF16, {T, V});
    Tensor targets = lossBack.input("targets", DType::I64, {T});
    lossBack.output("dlogits", cross_entropy_backward(dloss, logits, targets, Reduction::Mean));
  }
  Graph headBackH;  // dh = dlogits @ W
  {
    Tensor dlogits = headBackH.input("dlogits", DType::BF16, {T, V});
    Tensor w = headBackH.input("W", DType::BF16, {V, D});
    headBackH.output("dh", matmul(dlogits, w));
  }
  Graph headBackW;  // dW = dlogits^T @ h: dlogits is stored [K = T, M = V]
  {
    Tensor dlogits = headBackW.input("dlogits", DType::BF16, {T, V});
    Tensor h = headBackW.input("h", DType::BF16, {T, D});
    headBackW.output("dW", matmul(dlogits, h, {.transA = true}));
  }
  Graph normBack;
  {
    Tensor dh = normBack.input("dh", DType::BF16, {T, D});
    Tensor x = normBack.input("x", DType::BF16, {T, D});
    Tensor g = normBack.input("g", DType::BF16, {D});
    NormGrads r = rmsnorm_backward(dh, x, g, kNormEps);
    normBack.output("dx", r.dx);  // the gradient for the layer below: checked, otherwise unused
    normBack.output("dg", r.dweight);
  }
  Graph adamw;  // any parameter, flat: N is bound at launch
  {
    Tensor param = adamw.input("param", DType::F32, {"N"});
    Tensor grad = adamw.input("grad", DType::BF16, {"N"});
    Tensor expAvg = adamw.input("exp_avg", DType::F32, {"N"});
    Tensor expAvgSq = adamw.input("exp_avg_sq", DType::F32, {"N"});
    AdamWScalars s = adamw_scalars(adamw);
    AdamWResult r = adamw_step(param, cast(grad, DType::F32), expAvg, expAvgSq, s);
    adamw.output("param_out", r.param);
    adamw.output("exp_avg_out", r.exp_avg);
    adamw.output("exp_avg_sq_out", r.exp_avg_sq);
    adamw.output("param_bf16", cast(r.param, DType::BF16));
  }
  const std::vector<Stage> stages = {
      makeStage("norm", norm),          makeStage("logits", head),       makeStage("loss", loss),
      makeStage("dlogits", lossBack),   makeStage("dh", headBackH),      makeStage("dW", headBackW),
      makeStage("norm_back", normBack), makeStage("adamw", adamw, {.dims = {{"N", V * D}}}),
  };

  if (!rt::driverAvailable()) {
    for (const Stage& s : stages) std::printf("%-10s %s\n", s.name.c_str(), kernelsOf(s.kernel).c_str());
    std::printf("\nno GPU here: %s\nAll graphs compiled; run this lesson on a machine with an NVIDIA GPU to "
                "train with them.\n",
                rt::driverUnavailableReason().c_str());
    return 0;
  }

  // 2. The device tensors: fixed inputs, parameters (f32 masters and bf16
  //    copies), AdamW states, activations and gradients.
  Tensors t;
  auto add = [&](const std::string& name, DType dtype, std::vector<int64_t> shape) {
    rt::DeviceBuffer buffer(static_cast<size_t>(product(shape)) * dtypeSize(dtype));
    t[name] = DeviceTensor{dtype, std::move(shape), std::move(buffer)};
  };
  auto upload = [&](const std::string& name, const HostTensor& h) { t.at(name).buffer.upload(h.data(), h.bytes()); };
  add("x", DType::BF16, {T, D});
  add("targets", DType::I64, {T});
  add("dloss", DType::F32, {});
  add("W", DType::BF16, {V, D});
  add("g", DType::BF16, {D});
  add("h", DType::BF16, {T, D});
  add("logits", DType::BF16, {T, V});
  add("loss", DType::F32, {});
  add("dlogits", DType::BF16, {T, V});
  add("dh", DType::BF16, {T, D});
  add("dW", DType::BF16, {V, D});
  add("dx", DType::BF16, {T, D});
  add("dg", DType::BF16, {D});
  for (const std::string p : {"W", "g"})
    for (const char* state : {"_master", "_exp_avg", "_exp_avg_sq"}) {
      add(p + state, DType::F32, t.at(p).shape);
      add(p + state + "_next", DType::F32, t.at(p).shape);
      t.at(p + state).buffer.fill(0);
    }

  std::mt19937_64 rng(8);
  HostTensor hx(DType::BF16, {T, D}), htargets(DType::I64, {T}), hdloss(DType::F32, {});
  hx.fillRandom(rng, -2, 2);
  htargets.fillRandom(rng, 0, static_cast<double>(V));
  hdloss.set(0, 1.0);
  upload("x", hx);
  upload("targets", htargets);
  upload("dloss", hdloss);
  HostTensor wMaster(DType::F32, {V, D}), w(DType::BF16, {V, D}), gMaster(DType::F32, {D}), g(DType::BF16, {D});
  wMaster.fillRandom(rng, -0.05, 0.05);
  for (int64_t i = 0; i < wMaster.numel(); ++i) w.set(i, wMaster.get(i));
  for (int64_t i = 0; i < D; ++i) {
    gMaster.set(i, 1.0);
    g.set(i, 1.0);
  }
  upload("W_master", wMaster);
  upload("W", w);
  upload("g_master", gMaster);
  upload("g", g);

  // 3. The launches of one step, in order. The optimizer reads the current
  //    master and states and writes the *_next buffers (swapped after the
  //    step) and the bf16 copy the next step's kernels read.
  const std::map<std::string, double> hyper = {{"lr", 1e-2},  {"beta1", 0.9},         {"beta2", 0.999},
                                               {"eps", 1e-8}, {"weight_decay", 0.01}, {"step", 1}};
  auto optimizer = [&](const std::string& p, const std::string& grad, int64_t n) {
    return Launch{"adamw " + p,
                  &stages[7],
                  {{"param", p + "_master"},
                   {"grad", grad},
                   {"exp_avg", p + "_exp_avg"},
                   {"exp_avg_sq", p + "_exp_avg_sq"},
                   {"param_out", p + "_master_next"},
                   {"exp_avg_out", p + "_exp_avg_next"},
                   {"exp_avg_sq_out", p + "_exp_avg_sq_next"},
                   {"param_bf16", p}},
                  {{"N", n}},
                  hyper};
  };
  std::vector<Launch> launches;
  for (size_t i = 0; i < 7; ++i) launches.push_back({stages[i].name, &stages[i], {}, {}, {}});
  launches.push_back(optimizer("W", "dW", V * D));
  launches.push_back(optimizer("g", "dg", D));
  size_t kernelsPerStep = 0;
  for (const Launch& l : launches) kernelsPerStep += l.stage->kernel.compiled().kernels.size();

  // One step; `checked`: poison each launch's outputs first (the bf16
  // weight copies too: the launches that read them have run by then) and
  // check them after it. Returns the number of bad elements.
  auto step = [&](int64_t n, bool checked) {
    int64_t bad = 0;
    for (Launch& l : launches) {
      if (l.scalars.count("step")) l.scalars["step"] = static_cast<double>(n);
      if (checked)
        for (const Slot& s : l.stage->slots)
          if (s.output) tensorFor(t, l, s).buffer.poison();
      launch(t, l);
      if (checked) bad += check(t, l);
    }
    for (const char* p : {"W", "g"})
      for (const char* state : {"_master", "_exp_avg", "_exp_avg_sq"})
        std::swap(t.at(std::string(p) + state).buffer, t.at(std::string(p) + state + "_next").buffer);
    return bad;
  };
  auto readLoss = [&] {
    float v = 0;
    t.at("loss").buffer.download(&v, sizeof v);
    return static_cast<double>(v);
  };

  // 4. Step 1, checked launch by launch against the reference.
  std::printf("step 1, every output checked against the fp64 reference:\n");
  const int64_t bad = step(1, true);
  const double firstLoss = readLoss();
  std::printf("step %3d  loss %.4g\n", 1, firstLoss);

  // 5. Train.
  const int64_t steps = 60;
  double lastLoss = firstLoss;
  for (int64_t n = 2; n <= steps; ++n) {
    step(n, false);
    if (n % 10 == 0) std::printf("step %3lld  loss %.4g\n", static_cast<long long>(n), lastLoss = readLoss());
  }
  const bool learned = lastLoss < 0.5 * firstLoss;
  std::printf("loss %.4g -> %.4g in %lld steps: %s\n", firstLoss, lastLoss, static_cast<long long>(steps),
              learned ? "below half" : "NOT below half the first loss");

  // 6. Time whole steps (training on).
  int64_t n = steps + 1;
  rt::BenchmarkResult b = rt::benchmark([&] { step(n++, false); }, 10, 100);
  std::printf("one training step: median %.1f us, p95 %.1f us; %zu kernel launches a step (%zu graph launches)\n",
              b.medianUs, b.p95Us, kernelsPerStep, launches.size());
  return bad == 0 && learned ? 0 : 1;
}
