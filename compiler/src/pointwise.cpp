#include "pointwise.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "element_emitter.h"
#include "config_override.h"
#include "frames.h"
#include "kernel_text.h"
#include "poly.h"

namespace kiln::compiler {

bool isPointwiseOp(Op op) {
  OpClass c = opClass(op);
  return c == OpClass::Leaf || c == OpClass::View || isElementwise(op);
}

std::string PointwiseConfig::json() const {
  return "{\"threads\": " + std::to_string(threads) + ", \"vector\": " + std::to_string(vector) +
         ", \"unroll\": " + std::to_string(unroll) + ", \"max_blocks\": " + std::to_string(maxBlocks) +
         ", \"index_bits\": " + (index32 ? "32" : "64") + (nc ? "" : ", \"nc\": 0") + "}";
}

namespace {

class PointwiseEmitter {
 public:
  PointwiseEmitter(const Graph& g, const PointwiseGroup& group, const PointwiseConfig& cfg)
      : g_(g),
        group_(group),
        cfg_(cfg),
        out_(group.shape),
        outStrides_(rowMajorStrides(group.shape)),
        rank_(static_cast<int>(group.shape.size())),
        deps_(g, static_cast<int>(group.shape.size())) {}

  PointwiseKernel run(const std::string& name, EntryVariants variants);

 private:
  // Flags of input loads: invariant, so that they lower to ld.global.nc (config nc).
  std::string loadFlags() const { return cfg_.nc ? ", invariant" : ""; }
  // ---- analysis
  void collect(int node, const Frame& frame);
  Access accessOf(int inputNode, const Shape& viewShape, const Frame& frame) const {
    return compiler::accessOf(inputNode, viewShape, frame, rank_);
  }
  uint64_t maskOf(int node, const Frame& frame) { return deps_.of(node, frame); }
  Frame operandFrame(const Node& n, size_t operand, const Frame& frame) const {
    return compiler::operandFrame(g_, n, operand, frame);
  }
  bool isFlat(const Access& a) const;
  bool isInvariant(const Access& a) const { return std::all_of(a.strides.begin(), a.strides.end(), [](const Poly& p) { return p.isZero(); }); }

  // ---- emission
  struct Region {
    MlirWriter* w = nullptr;
    std::map<std::string, std::string> memo;
    // index state per u: the flat index and its lazily computed multi-index
    std::vector<std::string> flat;
    std::vector<std::map<int, std::string>> idx, quot;
    bool fast = false;  // vector path (lanes meaningful)
  };
  std::string emitKernel(const std::string& entry, int vector);
  std::string finishKernel(const std::string& entry, const std::string& signature, const MlirWriter& pre,
                           const MlirWriter& body);
  std::string value(Region& r, int node, const Frame& frame, int u, int lane);
  std::string loadAccess(Region& r, const Access& a, DType dtype, int u, int lane);
  std::string outIndex(Region& r, int u, int k);
  std::string offsetOf(Region& r, const Access& a, int u);
  std::string poly(const Poly& p);
  std::string it() const { return index32_ ? "i32" : "i64"; }
  std::string cst(int64_t v) { return pre_->integer(v, it()); }

  const Graph& g_;
  const PointwiseGroup& group_;
  PointwiseConfig cfg_;
  Shape out_;
  std::vector<Poly> outStrides_;  // row-major strides of the output
  int rank_;
  bool index32_ = true;
  int vector_ = 1;
  // Vectors per thread per chunk in the entry being emitted: the config's
  // unroll in the vectorized entry; unroll x vector in the scalar one, so
  // that both entries cover the same chunk per block (the launcher sizes one
  // grid for both, from elementsPerBlock).
  int unroll_ = 1;
  bool rowLanes_ = true;
  ElementOptions elementOptions_;

  std::vector<int> inputs_;   // Input nodes read, in parameter order
  std::vector<int> scalars_;  // Scalar nodes read, in parameter order
  std::vector<std::string> dims_;
  std::map<std::string, Access> accesses_;
  AxisDependence deps_;
  std::set<std::string> seen_;
  bool hasVaryingIota_ = false;

  // per entry
  MlirWriter* pre_ = nullptr;
  std::map<std::string, std::string> preMemo_;
  std::map<int, std::string> argOf_;  // node id -> SSA argument
  std::map<std::string, std::string> dimArg_;
  std::map<std::string, int> accessClass_;  // 0 gather, 1 vector, 2 splat
};

bool PointwiseEmitter::isFlat(const Access& a) const {
  for (int k = 0; k < rank_; ++k)
    if (!(a.strides[k] == outStrides_[k]) && !(isUnit(out_[k]))) return false;
  return true;
}

// Walks the expression DAG once per frame: records inputs, scalars, accesses,
// and rejects what a pointwise kernel cannot hold.
void PointwiseEmitter::collect(int id, const Frame& frame) {
  std::string key = std::to_string(id) + "@" + frameKey(frame);
  if (!seen_.insert(key).second) return;
  const Node& n = g_.node(id);
  if (!isPointwiseOp(n.op))
    throw Error("kiln: internal: pointwise kernel reached op '" + std::string(opName(n.op)) + "'");
  auto noteInput = [&](int inputNode, const Shape& viewShape) {
    if (std::find(inputs_.begin(), inputs_.end(), inputNode) == inputs_.end()) inputs_.push_back(inputNode);
    Access a = accessOf(inputNode, viewShape, frame);
    accesses_[a.key()] = a;
  };
  switch (n.op) {
    case Op::Input:
      noteInput(id, n.shape);
      return;
    case Op::Scalar:
      if (std::find(scalars_.begin(), scalars_.end(), id) == scalars_.end()) scalars_.push_back(id);
      return;
    case Op::Constant:
      return;
    case Op::Iota: {
      const Axis& a = frame[n.axis];
      if (a.src >= 0 && a.coeff != 0) hasVaryingIota_ = true;
      return;
    }
    case Op::Reshape: {
      const Node& x = g_.node(n.inputs[0]);
      if (unitReshape(n, x)) break;
      if (x.op == Op::Input) {
        noteInput(n.inputs[0], n.shape);
        return;
      }
      throw Error("kiln: compile: reshape " + typeToString(x.dtype, x.shape) + " -> " + shapeToString(n.shape) +
                  " of a computed value cannot be fused into a pointwise kernel yet; reshape the graph's inputs "
                  "or outputs instead");
    }
    default:
      break;
  }
  for (size_t i = 0; i < n.inputs.size(); ++i) collect(n.inputs[i], operandFrame(n, i, frame));
}

std::string PointwiseEmitter::poly(const Poly& p) {
  std::string key = "poly:" + p.str();
  if (auto found = preMemo_.find(key); found != preMemo_.end()) return found->second;
  return preMemo_[key] = polyValue(*pre_, p, it(), dimArg_);
}

// idx_k of the flat index of (u): computed lazily, outermost without a mod.
std::string PointwiseEmitter::outIndex(Region& r, int u, int k) {
  auto& idx = r.idx[u];
  if (auto found = idx.find(k); found != idx.end()) return found->second;
  auto& quot = r.quot[u];
  // quot[j] = flat / prod(D[j+1..]) ; idx[j] = quot[j] % D[j] (j > 0)
  std::function<std::string(int)> quotient = [&](int j) -> std::string {
    if (j == rank_ - 1) return r.flat[u];
    if (auto found = quot.find(j); found != quot.end()) return found->second;
    std::string q = r.w->assign("arith.divui " + quotient(j + 1) + ", " + poly(Poly::of(out_[j + 1])) + " : " + it());
    quot[j] = q;
    return q;
  };
  std::string v = quotient(k);
  if (k > 0) v = r.w->assign("arith.remui " + v + ", " + poly(Poly::of(out_[k])) + " : " + it());
  idx[k] = v;
  return v;
}

std::string PointwiseEmitter::offsetOf(Region& r, const Access& a, int u) {
  std::string key = "off:" + a.key() + ":" + std::to_string(u);
  if (auto found = r.memo.find(key); found != r.memo.end()) return found->second;
  std::string off;
  // (A flat access over unit dims only is the one element at the base: an
  // invariant load, emitted in the entry block, where no flat index is.)
  const bool oneElement = std::all_of(out_.begin(), out_.end(), [](const Dim& d) { return isUnit(d); });
  if (isFlat(a) && !oneElement) {
    off = r.flat[u];
  } else {
    for (int k = 0; k < rank_; ++k) {
      if (a.strides[k].isZero() || isUnit(out_[k])) continue;
      std::string term = r.w->assign("arith.muli " + outIndex(r, u, k) + ", " + poly(a.strides[k]) + " : " + it());
      off = off.empty() ? term : r.w->assign("arith.addi " + off + ", " + term + " : " + it());
    }
  }
  if (!a.base.isZero()) {
    std::string b = poly(a.base);
    off = off.empty() ? b : r.w->assign("arith.addi " + off + ", " + b + " : " + it());
  }
  if (off.empty()) off = poly(Poly());
  r.memo[key] = off;
  return off;
}

std::string PointwiseEmitter::loadAccess(Region& r, const Access& a, DType dtype, int u, int lane) {
  const std::string st = storageType(dtype);
  const std::string ptr = argOf_.at(a.node);
  const int cls = r.fast ? accessClass_.at(a.key()) : 0;
  auto scalarLoadAt = [&](const std::string& off) {
    std::string p = r.w->assign("llvm.getelementptr inbounds " + ptr + "[" + off + "] : (!llvm.ptr<1>, " + it() +
                                ") -> !llvm.ptr<1>, " + st);
    std::string raw = r.w->assign("llvm.load " + p + " {alignment = " + std::to_string(dtypeSize(dtype)) +
                                  " : i64" + loadFlags() + "} : !llvm.ptr<1> -> " + st);
    return loadConvert(*r.w, raw, dtype);
  };
  if (cls == 1) {  // one vector load per u, then a lane
    std::string vkey = "vload:" + a.key() + ":" + std::to_string(u);
    std::string vec;
    if (auto found = r.memo.find(vkey); found != r.memo.end()) {
      vec = found->second;
    } else {
      std::string off = offsetOf(r, a, u);
      std::string p = r.w->assign("llvm.getelementptr inbounds " + ptr + "[" + off + "] : (!llvm.ptr<1>, " + it() +
                                  ") -> !llvm.ptr<1>, " + st);
      int align = std::min(16, vector_ * dtypeSize(dtype));
      vec = r.w->assign("llvm.load " + p + " {alignment = " + std::to_string(align) + " : i64" + loadFlags() + "} : !llvm.ptr<1> -> vector<" +
                        std::to_string(vector_) + "x" + st + ">");
      r.memo[vkey] = vec;
    }
    std::string pos = r.w->integer(lane, "i32");
    std::string e = r.w->assign("llvm.extractelement " + vec + "[" + pos + " : i32] : vector<" + std::to_string(vector_) +
                                "x" + st + ">");
    return loadConvert(*r.w, e, dtype);
  }
  if (cls == 2 || lane == 0) return scalarLoadAt(offsetOf(r, a, u));
  // gather: lane offset along the row
  std::string off = offsetOf(r, a, u);
  std::string step = r.w->assign("arith.muli " + poly(a.strides[rank_ - 1]) + ", " + r.w->integer(lane, it()) + " : " + it());
  return scalarLoadAt(r.w->assign("arith.addi " + off + ", " + step + " : " + it()));
}

std::string PointwiseEmitter::value(Region& r, int id, const Frame& frame, int u, int lane) {
  const Node& n = g_.node(id);
  uint64_t mask = maskOf(id, frame);
  bool global = mask == 0;
  bool laneFree = rank_ == 0 || !(mask >> (rank_ - 1) & 1) || !r.fast;  // (a 0-dim kernel has no lanes)
  std::string key = std::to_string(id) + "@" + frameKey(frame) + "#" + (global ? "g" : std::to_string(u)) + "." +
                    std::to_string(laneFree ? -1 : lane);
  auto& memo = global ? preMemo_ : r.memo;
  if (auto found = memo.find(key); found != memo.end()) return found->second;

  MlirWriter* saved = r.w;
  if (global) r.w = pre_;
  std::string v;
  switch (n.op) {
    case Op::Input:
      v = loadAccess(r, accessOf(id, n.shape, frame), n.dtype, u, laneFree ? 0 : lane);
      break;
    case Op::Scalar:
      v = argOf_.at(id);
      break;
    case Op::Constant:
      v = emitConstant(*r.w, n);
      break;
    case Op::Iota: {
      const Axis& a = frame[n.axis];
      std::string idx;
      if (a.src < 0 || a.coeff == 0) {
        idx = r.w->integer(a.off, it());
      } else {
        std::string base = outIndex(r, u, a.src);
        if (r.fast && a.src == rank_ - 1 && lane > 0)
          base = r.w->assign("arith.addi " + base + ", " + r.w->integer(lane, it()) + " : " + it());
        idx = r.w->assign("arith.muli " + base + ", " + r.w->integer(a.coeff, it()) + " : " + it());
        if (a.off) idx = r.w->assign("arith.addi " + idx + ", " + r.w->integer(a.off, it()) + " : " + it());
      }
      v = convertValue(*r.w, idx, index32_ ? DType::I32 : DType::I64, n.dtype);
      break;
    }
    case Op::Reshape:
    case Op::Expand:
    case Op::Permute:
    case Op::Slice: {
      const Node& x = g_.node(n.inputs[0]);
      if (n.op == Op::Reshape && x.op == Op::Input && !unitReshape(n, x))
        v = loadAccess(r, accessOf(n.inputs[0], n.shape, frame), x.dtype, u, laneFree ? 0 : lane);
      else
        v = value(r, n.inputs[0], operandFrame(n, 0, frame), u, lane);
      break;
    }
    default: {
      std::vector<std::string> ops;
      for (size_t i = 0; i < n.inputs.size(); ++i) ops.push_back(value(r, n.inputs[i], operandFrame(n, i, frame), u, lane));
      v = emitElementwise(*r.w, g_, n, ops, elementOptions_);
      break;
    }
  }
  r.w = saved;
  memo[key] = v;
  return v;
}

std::string PointwiseEmitter::emitKernel(const std::string& entry, int vector) {
  vector_ = vector;
  unroll_ = cfg_.unroll * (cfg_.vector / vector);
  preMemo_.clear();
  argOf_.clear();
  dimArg_.clear();
  accessClass_.clear();

  // Classify accesses for the vector path.
  for (const auto& [key, a] : accesses_) {
    int cls = 0;
    if (vector_ > 1) {
      int esize = dtypeSize(g_.node(a.node).dtype);
      (void)esize;
      if (isInvariant(a) || (rowLanes_ && a.strides[rank_ - 1].isZero())) {
        cls = 2;
      } else if (isFlat(a) && a.base.divisibleBy(vector_)) {
        cls = 1;
      } else if (rowLanes_ && a.strides[rank_ - 1] == Poly::constant(1) && a.base.divisibleBy(vector_)) {
        bool aligned = true;
        for (int k = 0; k + 1 < rank_; ++k) aligned = aligned && a.strides[k].divisibleBy(vector_);
        cls = aligned ? 1 : 0;
      }
    }
    accessClass_[key] = cls;
  }

  MlirWriter head;
  MlirWriter pre = head.sibling();
  MlirWriter body = head.sibling();
  pre_ = &pre;
  pre.setIndent(2);
  body.setIndent(2);

  // Signature (the kernel ABI): input pointers, output pointers, dims, scalars.
  ParamOptions po;
  po.readonlyInputs = cfg_.nc;
  KernelParams params = kernelParams(g_, inputs_, group_.outputs.size(), dims_, scalars_, po);
  argOf_ = params.argOf;
  dimArg_ = params.dimArg;
  const std::vector<std::string>& outPtrs = params.outputs;
  const int64_t chunk = static_cast<int64_t>(cfg_.threads) * unroll_ * vector_;
  // Block / thread ids and the chunk loop.
  auto idxCast = [&](const std::string& v) { return pre.assign("arith.index_cast " + v + " : index to " + it()); };
  std::string bid = idxCast(pre.assign("gpu.block_id x"));
  std::string tid = idxCast(pre.assign("gpu.thread_id x"));
  std::string gdim = idxCast(pre.assign("gpu.grid_dim x"));
  std::string numel = poly(elementCount(out_));
  std::string chunkC = cst(chunk);
  std::string nChunks = pre.assign("arith.divui " +
                                   pre.assign("arith.addi " + numel + ", " + cst(chunk - 1) + " : " + it()) + ", " +
                                   chunkC + " : " + it());
  std::string tidV = pre.assign("arith.muli " + tid + ", " + cst(vector_) + " : " + it());

  // The vector path for the flat indices `flats` (one per unrolled vector):
  // loads first (all of them), then compute, then 16-byte stores.
  auto vectorPath = [&](const std::vector<std::string>& flats) {
    Region r;
    r.w = &body;
    r.fast = vector_ > 1;
    r.flat = flats;
    r.idx.resize(flats.size());
    r.quot.resize(flats.size());
    const int n = static_cast<int>(flats.size());
    Frame root(rank_);
    for (int k = 0; k < rank_; ++k) root[k] = Axis{k, 1, 0};
    for (int u = 0; u < n; ++u)
      for (const auto& [key, a] : accesses_)
        if (accessClass_[key] == 1) (void)loadAccess(r, a, g_.node(a.node).dtype, u, 0);
    for (int u = 0; u < n; ++u) {
      for (size_t o = 0; o < group_.outputs.size(); ++o) {
        const GraphOutput& go = g_.outputs()[group_.outputs[o]];
        DType dt = g_.node(go.node).dtype;
        std::string st = storageType(dt);
        std::vector<std::string> lanes;
        for (int l = 0; l < vector_; ++l) lanes.push_back(storeConvert(body, value(r, go.node, root, u, l), dt));
        std::string p = body.assign("llvm.getelementptr inbounds " + outPtrs[o] + "[" + r.flat[u] +
                                    "] : (!llvm.ptr<1>, " + it() + ") -> !llvm.ptr<1>, " + st);
        if (vector_ == 1) {
          body.line("llvm.store " + lanes[0] + ", " + p + " {alignment = " + std::to_string(dtypeSize(dt)) +
                    " : i64} : " + st + ", !llvm.ptr<1>");
          continue;
        }
        std::string vt = "vector<" + std::to_string(vector_) + "x" + st + ">";
        std::string vec = body.assign("llvm.mlir.poison : " + vt);
        for (int l = 0; l < vector_; ++l)
          vec = body.assign("llvm.insertelement " + lanes[l] + ", " + vec + "[" + body.integer(l, "i32") + " : i32] : " + vt);
        int align = std::min(16, vector_ * dtypeSize(dt));
        body.line("llvm.store " + vec + ", " + p + " {alignment = " + std::to_string(align) + " : i64} : " + vt +
                  ", !llvm.ptr<1>");
      }
    }
  };
  auto flatOf = [&](const std::string& cbase, int u) {
    std::string ub = body.assign("arith.addi " + cbase + ", " +
                                 body.integer(static_cast<int64_t>(u) * cfg_.threads * vector_, it()) + " : " + it());
    return body.assign("arith.addi " + ub + ", " + tidV + " : " + it());
  };
  // When the element count is a multiple of the vector (for any binding of
  // the dims), a vector is entirely in range or entirely out: one guard per
  // vector and no element-by-element tail at all.
  const bool wholeVectors = elementCount(out_).divisibleBy(vector_);

  // The chunk loop. A grid of one block per chunk (no max_blocks, a static
  // size whose chunks the launcher's grid holds) needs no loop: each block
  // takes the chunk of its index, straight-line.
  std::string c;
  const bool oneChunk = cfg_.maxBlocks == 0 && isStaticShape(out_) &&
                        (staticElementCount(out_) + chunk - 1) / chunk <= 0x7fffffff;
  if (oneChunk) {
    c = bid;
    body.line("scf.if " + body.assign("arith.cmpi ult, " + bid + ", " + nChunks + " : " + it()) + " {");
  } else {
    c = body.fresh();
    body.line("scf.for " + c + " = " + bid + " to " + nChunks + " step " + gdim + " : " + it() + " {");
  }
  body.indent();
  std::string cbase = body.assign("arith.muli " + c + ", " + chunkC + " : " + it());
  if (wholeVectors) {
    std::vector<std::string> flats;
    for (int u = 0; u < unroll_; ++u) flats.push_back(flatOf(cbase, u));
    auto guardEach = [&] {
      for (const std::string& flat : flats) {
        body.line("scf.if " + body.assign("arith.cmpi ult, " + flat + ", " + numel + " : " + it()) + " {");
        body.indent();
        vectorPath({flat});
        body.dedent();
        body.line("}");
      }
    };
    // A whole chunk in range: every vector's loads first, as one path (the
    // guards of a vector each would keep each vector's loads behind the
    // stores of the one before). Chunks that divide the element count are
    // always whole; otherwise the last chunk guards each vector.
    if (unroll_ == 1) {
      guardEach();
    } else if (elementCount(out_).divisibleBy(chunk)) {
      vectorPath(flats);
    } else {
      std::string cend = body.assign("arith.addi " + cbase + ", " + chunkC + " : " + it());
      body.line("scf.if " + body.assign("arith.cmpi ule, " + cend + ", " + numel + " : " + it()) + " {");
      body.indent();
      vectorPath(flats);
      body.dedent();
      body.line("} else {");
      body.indent();
      guardEach();
      body.dedent();
      body.line("}");
    }
    body.dedent();
    body.line("}");
    return finishKernel(entry, params.signature, pre, body);
  }
  std::string cend = body.assign("arith.addi " + cbase + ", " + chunkC + " : " + it());
  std::string full = body.assign("arith.cmpi ule, " + cend + ", " + numel + " : " + it());
  body.line("scf.if " + full + " {");
  body.indent();
  {
    // Fast path: every vector of the chunk is in range.
    std::vector<std::string> flats;
    for (int u = 0; u < unroll_; ++u) flats.push_back(flatOf(cbase, u));
    vectorPath(flats);
  }
  body.dedent();
  body.line("} else {");
  body.indent();
  {
    // Tail: element by element, guarded.
    std::string j = body.fresh();
    body.line("scf.for " + j + " = " + cst(0) + " to " + cst(static_cast<int64_t>(unroll_) * vector_) + " step " +
              cst(1) + " : " + it() + " {");
    body.indent();
    std::string uu = body.assign("arith.divui " + j + ", " + body.integer(vector_, it()) + " : " + it());
    std::string ll = body.assign("arith.remui " + j + ", " + body.integer(vector_, it()) + " : " + it());
    std::string e = body.assign("arith.muli " + uu + ", " + body.integer(static_cast<int64_t>(cfg_.threads) * vector_, it()) +
                                " : " + it());
    e = body.assign("arith.addi " + e + ", " + cbase + " : " + it());
    e = body.assign("arith.addi " + e + ", " + tidV + " : " + it());
    e = body.assign("arith.addi " + e + ", " + ll + " : " + it());
    std::string inRange = body.assign("arith.cmpi ult, " + e + ", " + numel + " : " + it());
    body.line("scf.if " + inRange + " {");
    body.indent();
    Region r;
    r.w = &body;
    r.fast = false;
    r.flat = {e};
    r.idx.resize(1);
    r.quot.resize(1);
    Frame root(rank_);
    for (int k = 0; k < rank_; ++k) root[k] = Axis{k, 1, 0};
    for (size_t o = 0; o < group_.outputs.size(); ++o) {
      const GraphOutput& go = g_.outputs()[group_.outputs[o]];
      DType dt = g_.node(go.node).dtype;
      std::string st = storageType(dt);
      std::string sv = storeConvert(body, value(r, go.node, root, 0, 0), dt);
      std::string p = body.assign("llvm.getelementptr inbounds " + outPtrs[o] + "[" + e + "] : (!llvm.ptr<1>, " + it() +
                                  ") -> !llvm.ptr<1>, " + st);
      body.line("llvm.store " + sv + ", " + p + " {alignment = " + std::to_string(dtypeSize(dt)) + " : i64} : " + st +
                ", !llvm.ptr<1>");
    }
    body.dedent();
    body.line("}");
    body.dedent();
    // Keep the tail loop rolled: unrolled, it would be a second copy of the
    // whole expression per lane (code size and compile time, for the last
    // chunk only).
    body.line("} {loop_annotation = #llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>}");
  }
  body.dedent();
  body.line("}");
  body.dedent();
  body.line("}");

  return finishKernel(entry, params.signature, pre, body);
}

// Splices the function header, the entry-block values and the body.
std::string PointwiseEmitter::finishKernel(const std::string& entry, const std::string& signature,
                                           const MlirWriter& pre, const MlirWriter& body) {
  std::string text = gpuFuncText(entry, signature, cfg_.threads, pre, body);
  pre_ = nullptr;
  return text;
}

PointwiseKernel PointwiseEmitter::run(const std::string& name, EntryVariants variants) {
  Frame root(rank_);
  for (int k = 0; k < rank_; ++k) root[k] = Axis{k, 1, 0};
  for (int o : group_.outputs) collect(g_.outputs()[o].node, root);
  std::sort(inputs_.begin(), inputs_.end(), [&](int a, int b) {
    const auto& p = g_.params();
    return std::find(p.begin(), p.end(), a) < std::find(p.begin(), p.end(), b);
  });
  std::sort(scalars_.begin(), scalars_.end(), [&](int a, int b) {
    const auto& p = g_.params();
    return std::find(p.begin(), p.end(), a) < std::find(p.begin(), p.end(), b);
  });
  // Dynamic dims used by any tensor of the kernel, in the graph's order.
  std::vector<Shape> shapes = {out_};
  for (int id : inputs_) shapes.push_back(g_.node(id).shape);
  dims_ = usedDims(g_, shapes, accesses_);

  // 32-bit index math only when every offset provably fits.
  index32_ = cfg_.index32 && dims_.empty();
  if (index32_) {
    int64_t limit = (int64_t{1} << 31) - 1 - static_cast<int64_t>(cfg_.threads) * cfg_.unroll * 16;
    if (staticElementCount(out_) > limit) index32_ = false;
    for (int id : inputs_)
      if (staticElementCount(g_.node(id).shape) > limit) index32_ = false;
  }
  elementOptions_.approxTranscendentals = true;
  for (int o : group_.outputs) {
    DType dt = g_.node(g_.outputs()[o].node).dtype;
    if (dt != DType::BF16 && dt != DType::F16) elementOptions_.approxTranscendentals = false;
  }
  rowLanes_ = rank_ <= 1 || (out_.back().isStatic() && cfg_.vector > 0 && out_.back().size % cfg_.vector == 0);
  int vector = cfg_.vector;
  if (vector > 1 && !rowLanes_) {
    // Vectors cross rows: only flat and invariant accesses can be vectorized.
    bool ok = !hasVaryingIota_;
    for (const auto& [key, a] : accesses_) ok = ok && (isFlat(a) || isInvariant(a));
    if (!ok) vector = 1;
  }
  if (rank_ == 0) vector = 1;
  cfg_.vector = vector;
  cfg_.index32 = index32_;

  PointwiseKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "pointwise";
  k.config = cfg_.json();
  std::string mlir = "module attributes {gpu.container_module} {\n  gpu.module @kiln_kernels {\n";
  std::map<std::string, int> vecClass;
  if (vector > 1 && variants != EntryVariants::ScalarOnly) {
    mlir += emitKernel(name + "_v" + std::to_string(vector), vector);
    k.entries.push_back({name + "_v" + std::to_string(vector), true});
    vecClass = accessClass_;
  }
  if (vector == 1 || variants != EntryVariants::VectorOnly) {
    mlir += emitKernel(name + "_s1", 1);
    k.entries.push_back({name + "_s1", false});
  }
  mlir += "  }\n}\n";
  out.mlir = std::move(mlir);

  for (int id : inputs_) {
    const Node& n = g_.node(id);
    int align = 0;
    if (vector > 1)
      for (const auto& [key, a] : accesses_)
        if (a.node == id && vecClass[key] == 1) align = std::min(16, vector * dtypeSize(n.dtype));
    k.tensors.push_back({.name = n.name, .dtype = n.dtype, .shape = n.shape, .output = false, .alignment = align});
  }
  for (int o : group_.outputs) {
    const GraphOutput& go = g_.outputs()[o];
    const Node& n = g_.node(go.node);
    bool hasVector = vector > 1 && variants != EntryVariants::ScalarOnly;
    k.tensors.push_back({.name = go.name,
                         .dtype = n.dtype,
                         .shape = n.shape,
                         .output = true,
                         .alignment = hasVector ? std::min(16, vector * dtypeSize(n.dtype)) : 0});
  }
  k.dims = dims_;
  for (int id : scalars_) k.scalars.push_back({g_.node(id).name, g_.node(id).dtype});
  k.launch.threadsPerBlock = cfg_.threads;
  k.launch.elementsPerBlock = static_cast<int64_t>(cfg_.threads) * cfg_.unroll * vector;
  k.launch.iterShape = out_;
  k.launch.maxBlocks = cfg_.maxBlocks;
  return out;
}

}  // namespace

namespace {
// The narrowest dtype's bytes among the group's inputs and outputs.
int narrowestBytes(const Graph& g, const PointwiseGroup& group) {
  int minSize = 16;
  std::set<int> seen;
  std::function<void(int)> walk = [&](int id) {
    if (!seen.insert(id).second) return;
    const Node& n = g.node(id);
    if (n.op == Op::Input) minSize = std::min(minSize, dtypeSize(n.dtype));
    for (int i : n.inputs) walk(i);
  };
  for (int o : group.outputs) {
    walk(g.outputs()[o].node);
    minSize = std::min(minSize, dtypeSize(g.node(g.outputs()[o].node).dtype));
  }
  return minSize;
}

// 16-byte accesses of an element type of `bytes`, at most 8 lanes (each
// lane carries its own copy of the expression, and 16 lanes of a libdevice
// call, cos say, start to spill), kept inside a row where the row allows
// (else halved).
int widestVectorFor(int bytes, const Shape& shape) {
  int v = std::max(1, std::min(8, 16 / bytes));
  if (!shape.empty() && shape.back().isStatic())
    while (v > 1 && shape.back().size % v != 0) v /= 2;
  return v;
}
}  // namespace

int pointwiseWidestVector(const Graph& g, const PointwiseGroup& group) {
  return widestVectorFor(narrowestBytes(g, group), group.shape);
}

PointwiseConfig pointwiseHeuristic(const Graph& g, const PointwiseGroup& group, const CompileOptions& options) {
  PointwiseConfig c;
  const int minSize = narrowestBytes(g, group);
  c.vector = widestVectorFor(minSize, group.shape);
  // 128 threads: measured on the H200 (2026-11-30, bench_pointwise sweep)
  // equal to 256/512 on pure streaming kernels and ~1% faster on kernels
  // with more arithmetic per byte (gelu); unroll > 1 and persistent grids
  // were slower.
  c.threads = 128;
  c.unroll = 1;
  // Many streams (AdamW: param, grad and both moments) want two vectors per
  // thread in flight: measured on the H200 (2026-11-30, tuner sweep),
  // adamw f32 N=16M 116.0 us with unroll 2 vs 127.8 with 1; with three
  // inputs (x*y+z) unroll 1 and 2 tie.
  int fullInputs = 0;
  for (int id : g.params())
    if (g.node(id).op == Op::Input && g.node(id).shape == group.shape) ++fullInputs;
  if (fullInputs >= 4) c.unroll = 2;
  // Three full-size streams of 4-byte values in (x*y+z in f32): 8-byte
  // vectors, torch.compile's autotuned pick for it. Measured on the H200
  // (2026-12-04, session 33 call 6, do_bench in rounds next to
  // torch.compile, us, 32768x4096 / 1024x262144 f32): 16-byte 485.7 /
  // 962.9, 8-byte 484.7 / 960.5 (256 threads: 484.6 / 959.4),
  // torch.compile 485.1 / 1000.9; 16-byte vectors had run 0.1-0.3% behind
  // it in every call since session 8. Fewer streams lose with 8 bytes (x+y
  // f32 373.0 against 370.8; gelu(x+b) 324.3 against 256.8), as do 16-bit
  // types (4-byte accesses).
  if (fullInputs == 3 && minSize == 4 && c.vector == 4) c.vector = 2;
  // Small tensors: fewer, smaller blocks still fill the GPU better.
  if (isStaticShape(group.shape)) {
    int64_t n = staticElementCount(group.shape);
    while (c.threads > 64 && n / (static_cast<int64_t>(c.threads) * c.vector) < 2 * options.smCount) c.threads /= 2;
  }
  c.maxBlocks = 0;
  return c;
}

std::vector<std::string> pointwiseSpace(const PointwiseGroup& group, const PointwiseConfig& h,
                                        const CompileOptions& options, int widest) {
  std::vector<std::string> out;
  auto add = [&](int threads, int vector, int unroll, int64_t maxBlocks) {
    std::string j = "{\"threads\": " + std::to_string(threads) + ", \"vector\": " + std::to_string(vector) +
                    ", \"unroll\": " + std::to_string(unroll) + ", \"max_blocks\": " + std::to_string(maxBlocks) + "}";
    if (std::find(out.begin(), out.end(), j) == out.end()) out.push_back(std::move(j));
  };
  add(h.threads, h.vector, h.unroll, h.maxBlocks);
  std::vector<int> vectors{h.vector};
  if (h.vector >= 4) vectors.push_back(h.vector / 2);
  if (widest > h.vector) vectors.push_back(widest);
  int64_t n = isStaticShape(group.shape) ? staticElementCount(group.shape) : -1;
  for (int v : vectors)
    for (int t : {64, 128, 256, 512}) {
      // No block larger than the tensor needs.
      if (n >= 0 && t > 64 && static_cast<int64_t>(t) * v > std::max<int64_t>(n, 1) * 2) continue;
      for (int u : {1, 2, 4}) add(t, v, u, 0);
      // A persistent grid: one wave of resident blocks (2048 threads per SM).
      add(t, v, 1, static_cast<int64_t>(options.smCount) * (2048 / t));
    }
  return out;
}

void applyPointwiseOverride(PointwiseConfig& c, const std::string& json) {
  applyIntegerOverrides(json, "pointwise",
                        "threads: multiple of 32 in [32, 1024]; vector: 1, 2, 4, 8, 16; unroll: 1..16; "
                        "max_blocks >= 0; index_bits: 32 or 64; nc: 0 or 1",
                        [&](const std::string& key, int64_t v) {
                          if (key == "threads" && v >= 32 && v <= 1024 && v % 32 == 0) c.threads = static_cast<int>(v);
                          else if (key == "vector" && (v == 1 || v == 2 || v == 4 || v == 8 || v == 16))
                            c.vector = static_cast<int>(v);
                          else if (key == "unroll" && v >= 1 && v <= 16) c.unroll = static_cast<int>(v);
                          else if (key == "max_blocks" && v >= 0) c.maxBlocks = v;
                          else if (key == "index_bits" && (v == 32 || v == 64)) c.index32 = v == 32;
                          else if (key == "nc" && (v == 0 || v == 1)) c.nc = v == 1;
                          else return false;
                          return true;
                        });
}

PointwiseKernel emitPointwise(const Graph& g, const PointwiseGroup& group, const PointwiseConfig& config,
                              const std::string& name, EntryVariants variants) {
  PointwiseEmitter e(g, group, config);
  return e.run(name, variants);
}

}  // namespace kiln::compiler
