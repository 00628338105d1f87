#include "row_accumulators.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "element_emitter.h"

namespace kiln::compiler {

namespace {
std::string scaleFor(MlirWriter& w, const std::string& mOld, const std::string& mNew);
std::string argBetter(MlirWriter& w, const Acc& a, const std::string& v, const std::string& i, const std::string& bv,
                      const std::string& bi);
std::vector<std::string> chan(MlirWriter& w, const std::vector<std::string>& x, const std::vector<std::string>& y);
std::string shuffleXor(MlirWriter& w, const std::string& v, const std::string& type, int offset);
}  // namespace

// The exps inside the online log-sum-exp statistic (the running sum and its
// rescaling) are approxExpF32's (relative error ~2^-22 plus the rounding of
// x*log2(e)), well inside f32's tolerance for a sum of positive terms; the
// accurate libdevice exp made cross-entropy compute-bound.

namespace {
// exp(mOld - mNew), exactly 1 when equal (so -inf - -inf is not NaN).
std::string scaleFor(MlirWriter& w, const std::string& mOld, const std::string& mNew) {
  std::string same = w.assign("arith.cmpf oeq, " + mOld + ", " + mNew + " : f32");
  std::string d = w.assign("arith.subf " + mOld + ", " + mNew + " : f32");
  return w.assign("arith.select " + same + ", " + w.f32(1.0) + ", " + approxExpF32(w, d) + " : f32");
}
}  // namespace

std::vector<std::string> identity(MlirWriter& w, const Acc& a) {
  const std::string ct = computeType(a.type);
  const bool fl = ct == "f32";
  auto extreme = [&](bool lowest) -> std::string {
    if (fl) return w.f32(lowest ? -INFINITY : INFINITY);
    if (ct == "i1") return w.boolean(!lowest);
    int64_t v = ct == "i32" ? (lowest ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max())
                            : (lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max());
    return w.integer(v, ct);
  };
  switch (a.kind) {
    case AccKind::Sum:
      return {fl ? w.f32(0.0) : w.integer(0, ct)};
    case AccKind::Prod:
      return {fl ? w.f32(1.0) : w.integer(1, ct)};
    case AccKind::Max:
      return {extreme(true)};
    case AccKind::Min:
      return {extreme(false)};
    case AccKind::ArgMax:
      return {extreme(true), w.integer(std::numeric_limits<int32_t>::max(), "i32")};
    case AccKind::ArgMin:
      return {extreme(false), w.integer(std::numeric_limits<int32_t>::max(), "i32")};
    case AccKind::Welford:
      return {w.f32(0.0), w.f32(0.0), w.f32(0.0)};
    case AccKind::Lse:
      return {w.f32(-INFINITY), w.f32(0.0)};
    case AccKind::SqDev:
      return {w.f32(0.0)};
  }
  return {};
}

namespace {
std::string argBetter(MlirWriter& w, const Acc& a, const std::string& v, const std::string& i,
                                  const std::string& bv, const std::string& bi) {
  const std::string ct = computeType(a.type);
  const bool mx = a.kind == AccKind::ArgMax;
  std::string earlier = w.assign("arith.cmpi slt, " + i + ", " + bi + " : i32");
  if (ct != "f32") {
    std::string gt = w.assign("arith.cmpi " + std::string(mx ? "sgt" : "slt") + ", " + v + ", " + bv + " : " + ct);
    std::string eq = w.assign("arith.cmpi eq, " + v + ", " + bv + " : " + ct);
    return w.assign("arith.ori " + gt + ", " + w.assign("arith.andi " + eq + ", " + earlier + " : i1") + " : i1");
  }
  std::string gt = w.assign("arith.cmpf " + std::string(mx ? "ogt" : "olt") + ", " + v + ", " + bv + " : f32");
  std::string nanV = w.assign("arith.cmpf uno, " + v + ", " + v + " : f32");
  std::string nanB = w.assign("arith.cmpf uno, " + bv + ", " + bv + " : f32");
  std::string notNanB = w.assign("arith.xori " + nanB + ", " + w.boolean(true) + " : i1");
  std::string eq = w.assign("arith.cmpf oeq, " + v + ", " + bv + " : f32");
  std::string bothNan = w.assign("arith.andi " + nanV + ", " + nanB + " : i1");
  std::string same = w.assign("arith.ori " + eq + ", " + bothNan + " : i1");
  std::string win = w.assign("arith.ori " + gt + ", " + w.assign("arith.andi " + nanV + ", " + notNanB + " : i1") + " : i1");
  return w.assign("arith.ori " + win + ", " + w.assign("arith.andi " + same + ", " + earlier + " : i1") + " : i1");
}
}  // namespace

namespace {
// Chan's merge of two (count, mean, M2) triples; an empty side is exact.
std::vector<std::string> chan(MlirWriter& w, const std::vector<std::string>& x,
                                     const std::vector<std::string>& y) {
  std::string n = w.assign("arith.addf " + x[0] + ", " + y[0] + " : f32");
  std::string empty = w.assign("arith.cmpf oeq, " + n + ", " + w.f32(0.0) + " : f32");
  std::string ratio = w.assign("arith.divf " + y[0] + ", " + n + " : f32");
  ratio = w.assign("arith.select " + empty + ", " + w.f32(0.0) + ", " + ratio + " : f32");
  std::string delta = w.assign("arith.subf " + y[1] + ", " + x[1] + " : f32");
  std::string mean = w.assign("math.fma " + delta + ", " + ratio + ", " + x[1] + " : f32");
  std::string t = w.assign("arith.mulf " + delta + ", " + delta + " : f32");
  t = w.assign("arith.mulf " + t + ", " + x[0] + " : f32");
  t = w.assign("arith.mulf " + t + ", " + ratio + " : f32");
  std::string m2 = w.assign("arith.addf " + x[2] + ", " + y[2] + " : f32");
  m2 = w.assign("arith.addf " + m2 + ", " + t + " : f32");
  return {n, mean, m2};
}
}  // namespace

std::vector<std::string> merge(MlirWriter& w, const Acc& a, const std::vector<std::string>& x,
                                           const std::vector<std::string>& y) {
  const std::string ct = computeType(a.type);
  const bool fl = ct == "f32";
  switch (a.kind) {
    case AccKind::Sum:
    case AccKind::SqDev:
      return {w.assign(std::string(fl ? "arith.addf " : "arith.addi ") + x[0] + ", " + y[0] + " : " + ct)};
    case AccKind::Prod:
      return {w.assign(std::string(fl ? "arith.mulf " : "arith.muli ") + x[0] + ", " + y[0] + " : " + ct)};
    case AccKind::Max:
      return {w.assign(std::string(fl ? "arith.maximumf " : ct == "i1" ? "arith.ori " : "arith.maxsi ") + x[0] + ", " +
                       y[0] + " : " + ct)};
    case AccKind::Min:
      return {w.assign(std::string(fl ? "arith.minimumf " : ct == "i1" ? "arith.andi " : "arith.minsi ") + x[0] + ", " +
                       y[0] + " : " + ct)};
    case AccKind::ArgMax:
    case AccKind::ArgMin: {
      std::string b = argBetter(w, a, y[0], y[1], x[0], x[1]);
      return {w.assign("arith.select " + b + ", " + y[0] + ", " + x[0] + " : " + ct),
              w.assign("arith.select " + b + ", " + y[1] + ", " + x[1] + " : i32")};
    }
    case AccKind::Welford: {
      if (x[0] == y[0]) {
        // Equal counts (the same value: Acc::equalCounts): n = 2 n_x, the
        // mean halfway, M2 = M2_x + M2_y + d^2 n_x / 2. Symmetric in x and
        // y bit for bit ((y - x)^2 = (x - y)^2), so butterfly trees leave
        // every lane the same state without ordering the operands.
        std::string n = w.assign("arith.addf " + x[0] + ", " + y[0] + " : f32");
        std::string mean = w.assign("arith.mulf " + w.assign("arith.addf " + x[1] + ", " + y[1] + " : f32") + ", " +
                                    w.f32(0.5) + " : f32");
        std::string d = w.assign("arith.subf " + y[1] + ", " + x[1] + " : f32");
        std::string t = w.assign("arith.mulf " + w.assign("arith.mulf " + d + ", " + d + " : f32") + ", " +
                                 w.assign("arith.mulf " + x[0] + ", " + w.f32(0.5) + " : f32") + " : f32");
        std::string m2 = w.assign("arith.addf " + w.assign("arith.addf " + x[2] + ", " + y[2] + " : f32") + ", " + t +
                                  " : f32");
        return {n, mean, m2};
      }
      // Operands in a canonical order (by count, then mean), so that
      // merge(x, y) and merge(y, x) give the same bits: butterfly trees
      // then leave every lane with the same state.
      std::string lt = w.assign("arith.cmpf olt, " + y[0] + ", " + x[0] + " : f32");
      std::string eqn = w.assign("arith.cmpf oeq, " + y[0] + ", " + x[0] + " : f32");
      std::string ltm = w.assign("arith.cmpf olt, " + y[1] + ", " + x[1] + " : f32");
      std::string swap = w.assign("arith.ori " + lt + ", " + w.assign("arith.andi " + eqn + ", " + ltm + " : i1") + " : i1");
      std::vector<std::string> a2, b2;
      for (int i = 0; i < 3; ++i) {
        a2.push_back(w.assign("arith.select " + swap + ", " + y[i] + ", " + x[i] + " : f32"));
        b2.push_back(w.assign("arith.select " + swap + ", " + x[i] + ", " + y[i] + " : f32"));
      }
      return chan(w, a2, b2);
    }
    case AccKind::Lse: {
      std::string m = w.assign("arith.maximumf " + x[0] + ", " + y[0] + " : f32");
      std::string s1 = w.assign("arith.mulf " + x[1] + ", " + scaleFor(w, x[0], m) + " : f32");
      std::string s2 = w.assign("arith.mulf " + y[1] + ", " + scaleFor(w, y[0], m) + " : f32");
      return {m, w.assign("arith.addf " + s1 + ", " + s2 + " : f32")};
    }
  }
  return {};
}

// Folds one chunk of lanes (consecutive columns) into the state; `valid`
// (i1, or empty for always) says whether the chunk is inside the row.
std::vector<std::string> accumulate(MlirWriter& w, const Acc& a, const std::vector<std::string>& s,
                                    const std::vector<std::string>& xs, const std::vector<std::string>& cols,
                                    const std::string& valid, const std::string& mean) {
  std::vector<std::string> out;
  const int n = static_cast<int>(xs.size());
  if (a.kind == AccKind::SqDev) {
    std::vector<std::string> sq;
    for (const std::string& x : xs) {
      std::string d = w.assign("arith.subf " + x + ", " + mean + " : f32");
      sq.push_back(w.assign("arith.mulf " + d + ", " + d + " : f32"));
    }
    Acc sum = a;
    sum.kind = AccKind::Sum;
    return accumulate(w, sum, s, sq, cols, valid, "");
  }
  switch (a.kind) {
    case AccKind::SqDev:
    case AccKind::Sum:
    case AccKind::Prod:
    case AccKind::Max:
    case AccKind::Min: {
      // A balanced tree over the lanes, then one merge into the state.
      std::vector<std::vector<std::string>> level;
      for (const std::string& x : xs) level.push_back({x});
      while (level.size() > 1) {
        std::vector<std::vector<std::string>> next;
        for (size_t i = 0; i + 1 < level.size(); i += 2) next.push_back(merge(w, a, level[i], level[i + 1]));
        if (level.size() % 2) next.push_back(level.back());
        level = std::move(next);
      }
      out = merge(w, a, s, level[0]);
      break;
    }
    case AccKind::ArgMax:
    case AccKind::ArgMin:
      out = s;
      for (int i = 0; i < n; ++i) out = merge(w, a, out, {xs[i], cols[i]});
      break;
    case AccKind::Welford: {
      std::string sum = xs[0];
      for (int i = 1; i < n; ++i) sum = w.assign("arith.addf " + sum + ", " + xs[i] + " : f32");
      std::string cnt = w.f32(static_cast<double>(n));
      std::string mean = w.assign("arith.mulf " + sum + ", " + w.f32(1.0 / n) + " : f32");
      std::string m2;
      for (int i = 0; i < n; ++i) {
        std::string d = w.assign("arith.subf " + xs[i] + ", " + mean + " : f32");
        m2 = m2.empty() ? w.assign("arith.mulf " + d + ", " + d + " : f32")
                        : w.assign("math.fma " + d + ", " + d + ", " + m2 + " : f32");
      }
      out = chan(w, s, {cnt, mean, m2});
      break;
    }
    case AccKind::Lse: {
      std::string cm = xs[0];
      for (int i = 1; i < n; ++i) cm = w.assign("arith.maximumf " + cm + ", " + xs[i] + " : f32");
      std::string m = w.assign("arith.maximumf " + s[0] + ", " + cm + " : f32");
      std::string ninf = w.assign("arith.cmpf oeq, " + m + ", " + w.f32(-INFINITY) + " : f32");
      std::string ms = w.assign("arith.select " + ninf + ", " + w.f32(0.0) + ", " + m + " : f32");
      std::string sum = w.assign("arith.mulf " + s[1] + ", " + scaleFor(w, s[0], m) + " : f32");
      for (int i = 0; i < n; ++i)
        sum = w.assign("arith.addf " + sum + ", " + approxExpF32(w, w.assign("arith.subf " + xs[i] + ", " + ms + " : f32")) +
                       " : f32");
      out = {m, sum};
      break;
    }
  }
  if (!valid.empty())
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = w.assign("arith.select " + valid + ", " + out[i] + ", " + s[i] + " : " + a.types[i]);
  return out;
}

namespace {
std::string shuffleXor(MlirWriter& w, const std::string& v, const std::string& type, int offset) {
  std::string off = w.integer(offset, "i32");
  std::string width = w.integer(32, "i32");
  auto shfl32 = [&](const std::string& x, const std::string& t) {
    std::string r = w.fresh();
    w.line(r + ", " + w.fresh() + " = gpu.shuffle xor " + x + ", " + off + ", " + width + " : " + t);
    return r;
  };
  if (type == "f32" || type == "i32") return shfl32(v, type);
  if (type == "i1") {
    std::string x = w.assign("arith.extui " + v + " : i1 to i32");
    return w.assign("arith.trunci " + shfl32(x, "i32") + " : i32 to i1");
  }
  // i64: two halves
  std::string lo = w.assign("arith.trunci " + v + " : i64 to i32");
  std::string hi = w.assign("arith.trunci " + w.assign("arith.shrui " + v + ", " + w.integer(32, "i64") + " : i64") +
                            " : i64 to i32");
  std::string lo2 = w.assign("arith.extui " + shfl32(lo, "i32") + " : i32 to i64");
  std::string hi2 = w.assign("arith.extui " + shfl32(hi, "i32") + " : i32 to i64");
  hi2 = w.assign("arith.shli " + hi2 + ", " + w.integer(32, "i64") + " : i64");
  return w.assign("arith.ori " + hi2 + ", " + lo2 + " : i64");
}
}  // namespace

// The whole row's state in every thread of the row: butterfly shuffles in
// the warp, then (T > 32) the warps' partials through shared memory, merged
// in warp order by every thread (deterministic, no second barrier).
std::vector<std::string> crossThread(MlirWriter& w, const Acc& a, std::vector<std::string> s, const RowThreads& rt,
                                     int& slot) {
  const int T = rt.threadsPerRow;
  // Acc::equalCounts: a partner's count (component 0) is this thread's own,
  // so it neither travels (shuffles, shared memory) nor is read back.
  auto travels = [&](size_t i) { return !(a.equalCounts && i == 0); };
  auto received = [&](size_t i, const std::function<std::string()>& read) { return travels(i) ? read() : s[i]; };
  for (int off = std::min(T, 32) / 2; off >= 1; off /= 2) {
    std::vector<std::string> o;
    for (size_t i = 0; i < s.size(); ++i) o.push_back(received(i, [&] { return shuffleXor(w, s[i], a.types[i], off); }));
    s = merge(w, a, s, o);
  }
  if (T <= 32) return s;
  const int W = T / 32;
  std::vector<int> slots(s.size(), -1);
  std::string isLane0 = w.assign("arith.cmpi eq, " + rt.lane32 + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + isLane0 + " {");
  w.indent();
  for (size_t i = 0; i < s.size(); ++i) {
    if (!travels(i)) continue;
    slots[i] = slot++;
    std::string idx = w.assign("arith.addi " + rt.warp + ", " + w.integer(slots[i] * W, "i32") + " : i32");
    std::string p = w.assign("llvm.getelementptr " + rt.smem + "[" + idx + "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64");
    w.line("llvm.store " + s[i] + ", " + p + " {alignment = " + std::to_string(a.types[i] == "i64" ? 8 : 4) +
           " : i64} : " + a.types[i] + ", !llvm.ptr<3>");
  }
  w.dedent();
  w.line("}");
  w.line("gpu.barrier");
  auto load = [&](size_t i, const std::string& p) {
    return w.assign("llvm.load " + p + " {alignment = " + std::to_string(a.types[i] == "i64" ? 8 : 4) + " : i64} : !llvm.ptr<3> -> " +
                    a.types[i]);
  };
  std::vector<std::string> acc;
  if (rt.butterflyRead) {
    std::string from = W == 32 ? rt.lane32 : w.assign("arith.andi " + rt.lane32 + ", " + w.integer(W - 1, "i32") + " : i32");
    for (size_t i = 0; i < s.size(); ++i)
      acc.push_back(received(i, [&] {
        std::string idx = w.assign("arith.addi " + from + ", " + w.integer(slots[i] * W, "i32") + " : i32");
        return load(i, w.assign("llvm.getelementptr " + rt.smem + "[" + idx + "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64"));
      }));
    for (int off = W / 2; off >= 1; off /= 2) {
      std::vector<std::string> o;
      for (size_t i = 0; i < acc.size(); ++i)
        o.push_back(travels(i) ? shuffleXor(w, acc[i], a.types[i], off) : acc[i]);
      acc = merge(w, a, acc, o);
    }
    return acc;
  }
  for (int j = 0; j < W; ++j) {
    std::vector<std::string> part;
    for (size_t i = 0; i < s.size(); ++i)
      part.push_back(received(i, [&] {
        return load(i, w.assign("llvm.getelementptr " + rt.smem + "[" + std::to_string(slots[i] * W + j) +
                                "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64"));
      }));
    acc = acc.empty() ? part : merge(w, a, acc, part);
  }
  return acc;
}

std::vector<std::vector<std::string>> clusterMerge(MlirWriter& w, const std::vector<const Acc*>& accs,
                                                   const std::vector<std::vector<std::string>>& s,
                                                   const ClusterThreads& ct, int& entries) {
  const int C = ct.cluster;
  // Each component's C entries: where peers push (entry [rank]) and where
  // this block reads.
  std::vector<std::vector<std::string>> base;  // per acc, per component: !llvm.ptr<3>
  for (const Acc* a : accs) {
    base.push_back({});
    for (size_t i = 0; i < a->types.size(); ++i) {
      base.back().push_back(w.assign("llvm.getelementptr " + ct.exchange + "[" + std::to_string(entries) +
                                     "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64"));
      entries += C;
    }
  }
  std::string pusher = w.assign("arith.cmpi ult, " + ct.tid + ", " + w.integer(C, "i32") + " : i32");
  // Each pusher's store of component i of accumulator k into its peer's
  // entry [rank]: `push(peerAddress, value, type)`.
  auto forEachPush = [&](const std::function<void(const std::string&, const std::string&, const std::string&)>& push) {
    for (size_t k = 0; k < accs.size(); ++k)
      for (size_t i = 0; i < accs[k]->types.size(); ++i) {
        std::string mine = w.assign("llvm.getelementptr " + base[k][i] + "[" + ct.rank +
                                    "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64");
        push(mine, s[k][i], accs[k]->types[i]);
      }
  };
  if (!ct.mbarHere.empty()) {
    // st.async onto the peers' mbarriers. Thread 0 arms the other half's
    // mbarrier for the next row before any push of this row leaves: a peer
    // can push the next row only after it has this row's pushes, ours
    // included.
    std::string first = w.assign("arith.cmpi eq, " + ct.tid + ", " + w.integer(0, "i32") + " : i32");
    w.line("scf.if " + first + " {");
    w.indent();
    w.line("llvm.inline_asm has_side_effects \"mbarrier.arrive.expect_tx.relaxed.cluster.shared::cta.b64 _, [$0], $1;\", "
           "\"r,r,~{memory}\" " + ct.mbarNext + ", " + w.integer(ct.bytes, "i32") + " : (i32, i32) -> ()");
    w.dedent();
    w.line("}");
    w.line("scf.if " + pusher + " {");
    w.indent();
    auto mapa = [&](const std::string& local32) {
      return w.assign("llvm.inline_asm \"mapa.shared::cluster.u32 $0, $1, $2;\", \"=r,r,r\" " + local32 + ", " + ct.tid +
                      " : (i32, i32) -> i32");
    };
    std::string bar = mapa(ct.mbarHere);
    forEachPush([&](const std::string& mine, const std::string& value, const std::string& ty) {
      const bool wide = ty == "i64" || ty == "f64";
      std::string peer = mapa(w.assign("llvm.ptrtoint " + mine + " : !llvm.ptr<3> to i32"));
      std::string v = value;
      if (ty == "f32") v = w.assign("arith.bitcast " + v + " : f32 to i32");
      if (ty == "f64") v = w.assign("arith.bitcast " + v + " : f64 to i64");
      w.line(std::string("llvm.inline_asm has_side_effects \"st.async.shared::cluster.mbarrier::complete_tx::bytes.") +
             (wide ? "b64" : "b32") + " [$0], $1, [$2];\", \"r," + (wide ? "l" : "r") + ",r,~{memory}\" " + peer + ", " + v +
             ", " + bar + " : (i32, " + (wide ? "i64" : "i32") + ", i32) -> ()");
    });
    w.dedent();
    w.line("}");
    w.line("llvm.inline_asm has_side_effects \"{ .reg .pred p; kiln_xchg_wait: mbarrier.try_wait.parity.acquire.cluster."
           "shared::cta.b64 p, [$0], $1; @!p bra kiln_xchg_wait; }\", \"r,r,~{memory}\" " + ct.mbarHere + ", " +
           ct.parity + " : (i32, i32) -> ()");
  } else {
    // st.shared::cluster, then a cluster barrier. Only the pushers' warp
    // (warp 0: threads 0..C-1) arrives with release semantics, which makes
    // its pushes visible to the peers that wait; a release waits for the
    // warp's earlier global stores (the previous row's output) too, so the
    // other warps arrive relaxed instead of each waiting for its own stores.
    w.line("scf.if " + pusher + " {");
    w.indent();
    forEachPush([&](const std::string& mine, const std::string& value, const std::string& ty) {
      std::string peer = w.assign("nvvm.mapa " + mine + ", " + ct.tid + " : !llvm.ptr<3> -> !llvm.ptr<7>");
      w.line("llvm.store " + value + ", " + peer + " {alignment = " + std::to_string(ty == "i64" ? 8 : 4) + " : i64} : " +
             ty + ", !llvm.ptr<7>");
    });
    w.dedent();
    w.line("}");
    std::string w0 = w.assign("arith.cmpi ult, " + ct.tid + ", " + w.integer(32, "i32") + " : i32");
    w.line("scf.if " + w0 + " {");
    w.indent();
    w.line("nvvm.cluster.arrive {aligned}");
    w.dedent();
    w.line("} else {");
    w.indent();
    w.line("nvvm.cluster.arrive.relaxed {aligned}");
    w.dedent();
    w.line("}");
    w.line("nvvm.cluster.wait {aligned}");
  }
  std::string from = w.assign("arith.andi " + ct.lane32 + ", " + w.integer(C - 1, "i32") + " : i32");
  std::vector<std::vector<std::string>> out;
  for (size_t k = 0; k < accs.size(); ++k) {
    std::vector<std::string> acc;
    // Acc::equalCounts: every block's count is this block's, but the blocks
    // still exchange theirs (their merges keep the division): with its own
    // count here, layernorm's vector entry at 1024x262144 (clusters of 8 x
    // 512 threads, a row loop, weights in shared memory) spilled 32 bytes at
    // 128 registers (ptxas); with the counts exchanged it does not.
    for (size_t i = 0; i < accs[k]->types.size(); ++i) {
      const std::string& ty = accs[k]->types[i];
      std::string p = w.assign("llvm.getelementptr " + base[k][i] + "[" + from +
                               "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i64");
      acc.push_back(w.assign("llvm.load " + p + " {alignment = " + std::to_string(ty == "i64" ? 8 : 4) +
                             " : i64} : !llvm.ptr<3> -> " + ty));
    }
    for (int off = C / 2; off >= 1; off /= 2) {
      std::vector<std::string> o;
      for (size_t i = 0; i < acc.size(); ++i) o.push_back(shuffleXor(w, acc[i], accs[k]->types[i], off));
      acc = merge(w, *accs[k], acc, o);
    }
    out.push_back(acc);
  }
  return out;
}

}  // namespace kiln::compiler
