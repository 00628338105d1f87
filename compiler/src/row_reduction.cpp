#include "row_reduction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "element_emitter.h"
#include "config_override.h"
#include "frames.h"
#include "kernel_text.h"
#include "poly.h"
#include "row_accumulators.h"

namespace kiln::compiler {

std::string RowConfig::json() const {
  return "{\"threads_per_row\": " + std::to_string(threadsPerRow) + ", \"threads\": " + std::to_string(threads) +
         ", \"vector\": " + std::to_string(vector) + ", \"persistent\": " + (persistent ? "1" : "0") +
         ", \"unroll\": " + std::to_string(unroll) +
         (cluster > 1 ? ", \"cluster\": " + std::to_string(cluster) + ", \"row_loop\": " + (rowLoop ? "1" : "0")
                      : std::string(plainRowLoop ? ", \"row_loop\": 1" : "")) +
         (stage ? ", \"stage\": 1" : "") + (prefetch ? ", \"prefetch\": " + std::to_string(prefetch) : std::string()) + (evict ? ", \"evict\": " + std::to_string(evict) : std::string()) + (welford ? ", \"welford\": 1" : "") +
         (minBlocks > 0 ? ", \"min_blocks\": " + std::to_string(minBlocks) : std::string()) +
         (resident ? "" : ", \"resident\": 0") + (lanes > 1 ? ", \"lanes\": " + std::to_string(lanes) : std::string()) +
         (maxBlocks > 0 ? ", \"max_blocks\": " + std::to_string(maxBlocks) : std::string()) +
         (split > 1 ? ", \"split\": " + std::to_string(split) : std::string()) +
         (oneStep > 0 ? ", \"one_step\": " + std::to_string(oneStep) : std::string()) +
         (l2Prefetch > 0 ? ", \"l2_prefetch\": " + std::to_string(l2Prefetch) : std::string()) + "}";
}

namespace {

bool isReduction(Op op) { return opClass(op) == OpClass::Reduction; }

// Whether some node of id's cone (id and every node it reads, through any
// path) satisfies `pred`. Each node is visited once: an expression that
// reuses its values (x*x of x*x of ...) has exponentially many paths.
bool coneHas(const Graph& g, int id, const std::function<bool(const Node&)>& pred) {
  std::vector<char> seen(static_cast<size_t>(g.numNodes()), 0);
  std::vector<int> stack{id};
  while (!stack.empty()) {
    const int at = stack.back();
    stack.pop_back();
    if (seen[static_cast<size_t>(at)]++) continue;
    const Node& n = g.node(at);
    if (pred(n)) return true;
    stack.insert(stack.end(), n.inputs.begin(), n.inputs.end());
  }
  return false;
}

// The staged form copies at most this many bytes of rows per block: two
// blocks per SM, with their trees' slots, in 227 KiB of shared memory.
constexpr int64_t kMaxStagedRowBytes = 112 * 1024;
// The prefetch form copies at most this many bytes of a block's next row:
// one block per SM, with room left for the trees and a cluster's exchange.
constexpr int64_t kMaxPrefetchBytes = 200 * 1024;
// Row-invariant inputs (weights) a held row loop keeps in shared memory,
// together with the prefetch form's next row where it has one.
constexpr int64_t kMaxResidentBytes = 200 * 1024;
// Stands for a cluster row loop's span of block-tree slots (i64 entries) in
// an entry's text until the entry is written (see emitEntry).
constexpr const char* kTreeSpanMark = "KILN_TREE_SPAN";
bool isPow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
// A gpu-scope acquire-release fence (orders a block's global writes before
// its count of finished blocks, and the last block's reads after it).
constexpr const char* kFenceGpu = "llvm.inline_asm has_side_effects \"fence.acq_rel.gpu;\", \"~{memory}\"  : () -> ()";

// The domain of a row sub-graph: the operand shape of its reductions.
Shape domainOf(const Graph& g) {
  for (int id : g.canonicalOrder())
    if (isReduction(g.node(id).op) && columnPartialOperand(g, id) < 0) return g.node(g.node(id).inputs[0]).shape;
  throw Error("kiln: internal: a row-reduction kernel without a reduction");
}

class RowEmitter {
 public:
  RowEmitter(const Graph& g, const RowConfig& cfg)
      : g_(g),
        cfg_(cfg),
        dom_(domainOf(g)),
        k_(static_cast<int>(dom_.size())),
        deps_(g, k_, (uint64_t{1} << (k_ - 1)) - 1) {}  // a reduction's value: one per row
  RowKernel run(const std::string& name, EntryVariants variants);
  // Grid tail (KernelPlan::tail): the one-row reduction `tail` run by this
  // kernel's last block to finish, emitted as an internal function that the
  // entries call (LLVM inlines it).
  void setTail(const Graph* tail, const std::string& counter) {
    tail_ = tail;
    tailCounter_ = counter;
  }

 private:
  // ---- analysis
  void collect(int id, const Frame& f);
  int levelNeeded(int id);
  uint64_t maskOf(int id, const Frame& f) { return deps_.of(id, f); }
  bool colDep(int id, const Frame& f) { return (maskOf(id, f) >> (k_ - 1)) & 1; }
  // A held row's variance: the mean first, then the squared deviations from
  // it (two block trees). In a cluster, Welford's (count, mean, M2) instead,
  // so the blocks exchange their states once.
  // A staged row is read from shared memory, so the second pass is cheap there too;
  // a looped row with L2 hints (evict) reads it again from the cache (as
  // Inductor's looped layernorm does), instead of Welford's division per vector.
  bool twoPassVariance() const {
    return (cfg_.persistent || cfg_.stage || (cfg_.evict && !cfg_.welford)) && cfg_.cluster == 1 && cfg_.split == 1;
  }
  void buildAccumulators();

  // ---- emission
  struct Ctx {
    MlirWriter* w = nullptr;
    std::map<std::string, std::string>* memo = nullptr;
    // Raw vector loads: in the persistent form they outlive a level's memo
    // (the row stays in registers in its storage type; what is computed
    // from it is recomputed per level, which keeps 16-bit rows at half the
    // registers).
    std::map<std::string, std::string>* loads = nullptr;
    std::vector<std::string> cols;   // per slot: the column of lane 0 (i32)
    // per slot: whether its vector is inside the row (i1; empty: whole
    // slots, no guards). A guarded slot's column is 0 where it is not.
    std::vector<std::string> valid;
    std::string validAt(int slot) const { return valid.empty() ? std::string() : valid[slot]; }
  };
  std::string emitEntry(const std::string& entry, int vector);
  void prepare();
  // This emitter as a grid tail: the function's text and name, its
  // parameters (input names, output names, dims, in order) and its
  // shared-memory slots.
  struct TailFunction {
    std::string text, name;
    std::vector<std::string> inputs, outputs, dims;
    int slots = 0;
  };
  TailFunction tailFunction(const std::string& fname);
  void lastBlock(MlirWriter& w, const std::vector<std::string>& outPtrs);
  // Counts this block finished on `counter` (type `ty`, i32 or i64) and
  // returns, in every thread, whether it was the last (i1): see lastBlock.
  // `lastOld(w)`: the counter's value the last block sees before its add;
  // `reset`: that block puts the counter back to zero right away.
  std::string countFinished(MlirWriter& w, const std::string& counter, const std::string& ty,
                            const std::function<std::string(MlirWriter&)>& lastOld, bool reset);
  const Graph* tail_ = nullptr;
  std::string tailCounter_;
  bool asTail_ = false;  // this emitter writes a grid tail function
  std::string tidRaw_;   // the thread's index in the block (i32)
  TailFunction tailFn_;
  std::string value(Ctx& c, int id, const Frame& f, int slot, int lane);
  std::string rowValue(int id, const Frame& f);
  std::string loadElement(Ctx& c, const Access& a, DType dt, int slot, int lane);
  std::string rowLoad(const Access& a, DType dt);
  std::string globalLoad(const Access& a, DType dt);
  std::string scalarLoad(MlirWriter& w, const std::string& p, DType dt);
  std::string rowPtr(const Access& a, DType dt);
  std::string leadIndex(int axis);  // i64 index of leading domain axis `axis` for this row
  std::string poly(const Poly& p);  // i64, in the entry block
  bool vectorAccess(const Access& a) const;
  // The frame of a one-value-per-row output: its non-unit axes are the
  // domain's non-unit leading axes in order (the rows' memory layout).
  Frame rowFrame(const Shape& s, const std::string& name, DType dt) const {
    Frame f;
    if (!perRowFrame(s, dom_, f))
      throw Error("kiln: internal: output " + name + " " + typeToString(dt, s) + " does not fit the row domain " +
                  shapeToString(dom_));
    return f;
  }

  // accumulators (row_accumulators.h does the algebra)
  void finalize(MlirWriter& w, const Acc& a, const std::vector<std::string>& s);
  std::vector<std::string> accumulateAcc(MlirWriter& w, const Acc& a, const std::vector<std::string>& s,
                                         const std::vector<std::string>& xs, const std::vector<std::string>& cols,
                                         const std::string& valid) {
    return accumulate(w, a, s, xs, cols, valid, a.kind == AccKind::SqDev ? hiddenMean_.at(a.meanAcc) : "");
  }
  std::vector<std::string> crossThreadAcc(MlirWriter& w, const Acc& a, const std::vector<std::string>& s) {
    return crossThread(w, a, s, RowThreads{cfg_.threadsPerRow, lane32_, warp_, smem_, cfg_.cluster > 1}, smemSlots_);
  }
  std::string nAsF32(MlirWriter& w);
  void mergeAcrossCluster(MlirWriter& w, const std::vector<const Acc*>& accs,
                          std::vector<std::vector<std::string>>& states);
  void mergeAcrossGrid(MlirWriter& w, const std::vector<const Acc*>& accs,
                       std::vector<std::vector<std::string>>& states);
  // The column form split across blocks (columnSplit()): every lane's
  // states at once, one counter per tile of rows.
  void mergeTileAcrossGrid(MlirWriter& w, const std::vector<const Acc*>& accs,
                           std::vector<std::vector<std::vector<std::string>>>& lanes);
  std::vector<std::string> lastBlockMerges(MlirWriter& w, const std::vector<std::string>& types,
                                           const std::vector<std::string>& own,
                                           const std::function<std::vector<std::string>()>& merged);
  // A split over blocks of several rows each (threads per row below 32: the
  // column form): the blocks of a tile of rows (threads / T x lanes rows)
  // reduce parts of those rows, and the tile's last block merges them.
  bool columnSplit() const { return cfg_.split > 1 && cfg_.threadsPerRow < 32; }
  // columnSplit(): the tiles of rows and the blocks of each (S', the
  // parts, fewer than config split where the row has fewer steps).
  int64_t splitTiles() const;
  int64_t splitBlocksPerTile() const;
  std::string rowValid_;  // several rows per block: whether this thread's first row is inside the domain (i1)
  std::string tile_;      // columnSplit(): this block's tile (i64)
  int64_t partLen_ = 0;   // columnSplit(): every part's length where they are equal (splitLen_ then empty), else 0
  // split > 1: this block's part of the row (its length, i32; its first
  // column is colBase_), the components of the states a block writes (8-byte
  // entries each), and whether this block finished its row last (i1: it
  // merged every block's states and stores the row's results).
  std::string splitLen_, splitLast_, splitParts_;  // ... and S', the row's blocks at this launch (i64)
  int splitEntries_ = 0;
  // The rows of a domain whose leading dims are static (a split row's).
  int64_t staticRowCount() const {
    int64_t rows = 1;
    for (int j = 0; j + 1 < k_; ++j) rows *= dom_[j].size;
    return rows;
  }

  // level passes
  void levelPersistent(int level, int chunks, const std::vector<std::string>& valid);
  void reholdNarrow(MlirWriter& w, int pass);
  // min_blocks applies to the config's widest entry only: the narrower
  // fallbacks (unaligned pointers) hold a 16-bit value per register and
  // would spill under its register cap.
  int entryMinBlocks() const { return vector_ == cfg_.vector ? cfg_.minBlocks : 0; }
  void levelLooped(int level);
  std::vector<std::vector<std::string>> loopOver(
      const std::vector<std::vector<std::string>>& init, const std::vector<std::string>& types,
      const std::function<std::vector<std::vector<std::string>>(Ctx&, const std::vector<std::vector<std::string>>&, int)>& body);
  void storeFull(Ctx& c, int slot, const std::string& valid);
  // The one-step entry is being written (RowConfig::oneStep; oneStepEntry_),
  // and within it a looped pass: loopOver writes the pass as one guarded
  // step instead of a loop.
  bool oneStepEntry_ = false, oneStepPass_ = false;

  const Graph& g_;
  RowConfig cfg_;
  Shape dom_;
  int k_;
  int vector_ = 1;
  ElementOptions elementOptions_;

  std::vector<int> inputs_, scalars_;
  std::vector<std::string> dims_;
  std::map<std::string, Access> accesses_;
  AxisDependence deps_;
  std::set<std::string> seen_;
  std::map<int, int> level_;  // reduction node → level
  std::map<int, int> levelOf_;  // any node → levelNeeded (each node walked once; cleared when level_ changes)
  std::vector<Acc> accs_;
  // sum(where(iota(last axis) == t, x, 0)) with t the same along the row
  // (cross-entropy's picked logit): no accumulator, one load of x at column
  // t per row (0 where t is outside the row, as the sum would give).
  struct Gather {
    int sum = -1;      // the Sum node
    int value = -1;    // x
    int column = -1;   // t
    Frame columnFrame, valueFrame;
  };
  std::vector<Gather> gathers_;
  bool gatherOf(int sumNode, Gather& out);
  void emitGatherColumns();
  void emitGathers();
  // Looped rows: the gathers' columns are loaded before the row's first
  // loop and their values after it (emitGathers from levelLooped), so that
  // neither load's latency stalls the row's start.
  bool gathersPending_ = false;
  int maxLevel_ = -1;
  std::vector<int> fullOutputs_, rowOutputs_;  // indices into g_.outputs()
  // Column partials (columnPartialOperand): outputs [P, D] each block sums
  // over its part of partRows_ rows, which it loops over (one part a block,
  // P blocks), the sums carried by the loop in registers; with their
  // operands (the summed values, of the domain's shape).
  std::vector<int> colOutputs_, colOperands_;
  int64_t partRows_ = 0, parts_ = 0;
  // Per entry: the loop's carried sums (block arguments) and this row's
  // new sums, per output x slot x lane; the slots per row.
  std::vector<std::string> colCarried_, colSums_;
  int colChunks_ = 0;
  // After the row loop (its results `result#1...`): each thread's sums to
  // row `bid` of the partial outputs, at its columns.
  void storeColumnPartials(MlirWriter& w, const std::string& result, const std::string& bid);

  // per entry
  MlirWriter* pre_ = nullptr;
  MlirWriter* row_ = nullptr;
  std::map<std::string, std::string> preMemo_, rowMemo_, elemMemo_, loadMemo_;
  std::map<std::string, DType> loadDtype_;  // loadMemo_ key (a vector load) → its element dtype
  std::map<int, std::string> hiddenMean_;  // accs_ index of a hidden sum → mean
  std::map<int, std::string> argOf_;
  std::map<std::string, std::string> dimArg_;
  std::vector<std::string> outPtr_;
  std::map<int, std::string> rowValue_;  // reduction node → its value for this row
  std::string r_, t_, lane32_, warp_, smem_, tV_;  // row (i64), thread in row, lane, warp in row (i32)
  std::string rank_;  // cluster > 1 or split > 1: the block's rank in the row (i32)
  // cluster > 1 or split > 1: the block's first column (i32, and i64): row pointers
  // start there, so slots' columns stay block-local; iota and arg ops add it
  // back (rowColumn).
  std::string colBase_, colBase64_;
  std::string rowColumn(MlirWriter& w, const std::string& col) {
    return colBase_.empty() ? col : w.assign("arith.addi " + col + ", " + colBase_ + " : i32");
  }
  // Cluster exchanges: this row's half of the exchange region (rows
  // alternate halves, so a push for the next row never meets a peer still
  // reading this one's), and the 8-byte entries used so far of a half.
  std::string exchange_;
  int exchangeEntries_ = 0;
  // Held cluster rows with one exchange per row: the pushes are st.async
  // completing on the receiver's mbarrier of the row's half (two, after the
  // exchange region), waited on instead of a cluster barrier, whose release
  // waited for the previous row's output stores (asyncBytes_: what a block
  // receives per row; 0: cluster barriers).
  int asyncBytes_ = 0;
  std::string mbar0_, rowCounter_;  // the first mbarrier's shared address (i32); the loop's row counter mod 4 (i64)
  int exchangesThisRow_ = 0;
  int asyncExchangeBytes() const;
  static constexpr int kExchangeEntries = 256;  // per half
  // Flags of global loads: invariant (free to move) except, in a cluster,
  // after the row's first loads: LLVM would hoist later loads (weights,
  // biases) above the cluster barriers, and ptxas does not sink them back
  // below one as it does below bar.sync, which spilled held rows.
  std::string loadFlags_ = ", invariant";
  int smemSlots_ = 0;
  // stage: the row-shaped accesses copied into shared memory (access key →
  // byte offset in the staged region, its bytes), and per entry their
  // shared-memory row pointers (set once the copy has landed).
  std::map<std::string, std::pair<int64_t, int64_t>> staged_;
  int64_t stagedBytes_ = 0;
  std::map<std::string, std::string> stagedPtr_;
  bool stagedAccess(const Access& a) const;  // a 16-byte vector access that differs between rows
  bool perRowAccess(const Access& a) const;
  bool vector16Access(const Access& a) const;
  void planStaging();
  void emitStaging(MlirWriter& w, const std::string& base);
  std::string rowPtrFor(MlirWriter& w, const std::string& r, const Access& a, DType dt);
  void emitL2Prefetch(MlirWriter& w, const std::string& rows);
  std::string stagingPointers(MlirWriter& w, const std::string& base);
  std::vector<std::string> copySources(MlirWriter& w, const std::string& r);
  void emitCopies(MlirWriter& w, const std::string& mb, const std::vector<std::string>& srcs);
  void emitMbarrierInit(MlirWriter& w, const std::string& mb);
  void emitWait(MlirWriter& w, const std::string& mb, const std::string& parity);
  void emitPrefetchStart(MlirWriter& w, const std::string& base, const std::string& r0, const std::string& rows);
  void emitPrefetchNext(MlirWriter& w, const std::string& next, const std::string& rows);
  void emitThreadCopies(MlirWriter& w, const std::vector<std::string>& srcs);
  void forThreadVectors(MlirWriter& w, const std::function<void(const std::string&, bool)>& each);
  std::string prefetchMb_;     // the prefetch form's mbarrier (i32 shared address)
  // config evict: the L2 eviction priority of this pass's row loads
  // ("evict_last", "evict_first"; empty: no hint).
  std::string evictHint_;
  bool stagedClosed_ = false;  // the next row's copy is issued: no more reads of the staged row
  Ctx persistentCtx_;
  // A held row's sum(exp(x - max)) in a cluster (Lse): each thread's
  // exp(x - m_t) values, m_t its own max, stay in registers in place of x,
  // and the output's exp(x - max) is e * exp(m_t - max) (heldExpValue):
  // one multiply instead of a second exp per value.
  struct HeldExp {
    int expNode = -1;        // the exp node the row's output reads
    int maxNode = -1;        // the paired max
    std::string threadMax;   // m_t (f32)
    std::vector<std::string> es;  // per slot * vector + lane
    std::string scale;       // exp(m_t - max), once the row's max is known
  };
  HeldExp heldExp_;
  // Held rows that loop over rows (clusters, prefetch): the accesses every
  // row shares (weights, biases) live in shared memory, each thread's
  // columns copied there once before the loop (access key -> byte offset in
  // the region), instead of an L2 round trip per vector in every row's
  // output pass.
  std::map<std::string, int64_t> resident_;
  int64_t residentBytes_ = 0;
  std::map<std::string, std::string> residentPtr_;  // per entry: access key -> its shared row
  void planResident();
  bool reusesHeldExp(const Acc& a) const;
  bool narrowInputBelow(int id) const;

  // Lanes (config `lanes` L > 1, the column form): a thread owns rows
  // r_ .. r_ + L - 1 (L divides the domain's next-to-last axis, so they
  // differ in that axis only). The loop carries one set of accumulators
  // per lane; what depends on the row but not on the column (row pointers,
  // per-row values, the finalized results, the row outputs) is emitted per
  // lane with that lane's row, row memo and results swapped in (swapLane).
  // laneVec_: this entry loads the lanes' values at a column as one vector
  // where an access is contiguous across rows (laneVectorAccess).
  bool laneVec_ = false;
  std::vector<std::string> laneRow_;  // lane l's row (i64); laneRow_[0] is r_
  std::vector<std::map<std::string, std::string>> laneMemo_;
  std::vector<std::map<int, std::string>> laneRowValue_;
  void swapLane(int l) {
    if (l == 0) return;
    std::swap(r_, laneRow_[static_cast<size_t>(l)]);
    std::swap(rowMemo_, laneMemo_[static_cast<size_t>(l)]);
    std::swap(rowValue_, laneRowValue_[static_cast<size_t>(l)]);
  }
  bool laneVectorAccess(const Access& a) const;
  std::string laneRowValue(int id, const Frame& f, int lane) {
    swapLane(lane);
    std::string v = rowValue(id, f);
    swapLane(lane);
    return v;
  }
};

// ------------------------------------------------------------- analysis

void RowEmitter::collect(int id, const Frame& f) {
  std::string key = std::to_string(id) + "@" + frameKey(f);
  if (!seen_.insert(key).second) return;
  const Node& n = g_.node(id);
  auto noteInput = [&](int input, const Shape& view) {
    if (std::find(inputs_.begin(), inputs_.end(), input) == inputs_.end()) inputs_.push_back(input);
    Access a = accessOf(input, view, f, k_);
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
    case Op::Iota:
      return;
    case Op::Matmul:
      throw Error("kiln: internal: matmul reached the row-reduction schedule");
    case Op::Reshape: {
      const Node& x = g_.node(n.inputs[0]);
      if (unitReshape(n, x)) break;
      if (x.op == Op::Input) {
        noteInput(n.inputs[0], n.shape);
        return;
      }
      throw Error("kiln: internal: reshape of a computed value reached the row-reduction schedule");
    }
    default:
      break;
  }
  if (isReduction(n.op)) {
    // The result must be read at its own row (the planner sends other
    // readers to a later kernel; this is a planner bug's last guard).
    if (!readsOwnRow(n, g_.node(n.inputs[0]).shape, f, dom_))
      throw Error("kiln: compile: the " + std::string(opName(n.op)) + " result " + typeToString(n.dtype, n.shape) +
                  " is read at other rows than its own (through a view) inside its kernel; this cannot be fused yet");
    collect(n.inputs[0], identityFrame(k_));
    return;
  }
  for (size_t i = 0; i < n.inputs.size(); ++i) collect(n.inputs[i], operandFrame(g_, n, i, f));
}

// The highest reduction level a node's value needs (-1: none).
int RowEmitter::levelNeeded(int id) {
  const Node& n = g_.node(id);
  if (isReduction(n.op)) {
    if (auto it = level_.find(id); it != level_.end()) return it->second;
    int l = levelNeeded(n.inputs[0]) + 1;
    if (twoPassVariance() && (n.op == Op::Var || n.op == Op::Std)) ++l;  // mean, then squared deviations
    level_[id] = l;
    return l;
  }
  if (auto it = levelOf_.find(id); it != levelOf_.end()) return it->second;
  int l = -1;
  for (int i : n.inputs) l = std::max(l, levelNeeded(i));
  return levelOf_[id] = l;
}

void RowEmitter::buildAccumulators() {
  std::vector<int> reds;
  for (int id : g_.canonicalOrder())
    if (isReduction(g_.node(id).op)) {
      // every live reduction (collect visited it with some frame)
      bool live = false;
      for (const std::string& s : seen_) live = live || s.rfind(std::to_string(id) + "@", 0) == 0;
      if (live) reds.push_back(id);
    }
  for (int id : reds) maxLevel_ = std::max(maxLevel_, levelNeeded(id));
  // Looped form and clusters: sum(exp(a - max(a))) pairs with its max into
  // one online pass (the running sum is rescaled when the max grows), so a
  // cluster exchanges (max, sum) once.
  std::map<int, int> lsePartner;  // sum node → max node
  if (!cfg_.persistent || cfg_.cluster > 1) {
    for (int id : reds) {
      const Node& s = g_.node(id);
      if (s.op != Op::Sum) continue;
      const Node& e = g_.node(s.inputs[0]);
      if (e.op != Op::Exp || e.dtype != DType::F32) continue;
      const Node& d = g_.node(e.inputs[0]);
      if (d.op != Op::Sub) continue;
      const Node& m = g_.node(d.inputs[1]);
      if (m.op != Op::Max || !m.keepdim || m.inputs[0] != d.inputs[0] || m.dtype != DType::F32) continue;
      lsePartner[id] = d.inputs[1];
    }
  }
  std::set<int> pairedMax;
  for (const auto& [s, m] : lsePartner) pairedMax.insert(m);
  for (int id : reds) {
    const Node& n = g_.node(id);
    const Node& x = g_.node(n.inputs[0]);
    if (Gather gth; gatherOf(id, gth)) {
      gathers_.push_back(gth);
      continue;
    }
    Acc a;
    a.node = id;
    a.operand = n.inputs[0];
    a.level = level_.at(id);
    if (pairedMax.count(id)) {
      // accumulated with its sum; a max may pair with several sums, keep the first
      bool taken = false;
      for (const Acc& b : accs_) taken = taken || (b.kind == AccKind::Lse && b.maxNode == id);
      if (taken) continue;
      continue;
    }
    switch (n.op) {
      case Op::Sum:
      case Op::Mean:
        a.kind = AccKind::Sum;
        a.type = n.dtype;
        break;
      case Op::Prod:
        a.kind = AccKind::Prod;
        a.type = n.dtype;
        break;
      case Op::Max:
        a.kind = AccKind::Max;
        a.type = n.dtype;
        break;
      case Op::Min:
        a.kind = AccKind::Min;
        a.type = n.dtype;
        break;
      case Op::ArgMax:
      case Op::ArgMin:
        a.kind = n.op == Op::ArgMax ? AccKind::ArgMax : AccKind::ArgMin;
        a.type = x.dtype;
        break;
      case Op::Var:
      case Op::Std:
        a.kind = AccKind::Welford;
        a.type = DType::F32;
        break;
      default:
        throw Error("kiln: internal: reduction " + std::string(opName(n.op)));
    }
    if (a.kind == AccKind::Welford && twoPassVariance()) {
      // The mean of the same operand, if the graph computes it anyway
      // (layernorm's mean), else a hidden sum.
      for (size_t i = 0; i < accs_.size(); ++i)
        if (accs_[i].kind == AccKind::Sum && accs_[i].operand == a.operand && accs_[i].level == a.level - 1 &&
            (accs_[i].node < 0 || g_.node(accs_[i].node).op == Op::Mean))
          a.meanAcc = static_cast<int>(i);
    }
    if (a.kind == AccKind::Welford && twoPassVariance() && a.meanAcc < 0) {
      Acc mean;
      mean.kind = AccKind::Sum;
      mean.node = -1;
      mean.operand = a.operand;
      mean.type = DType::F32;
      mean.level = a.level - 1;
      mean.types = {"f32"};
      accs_.push_back(mean);
      a.meanAcc = static_cast<int>(accs_.size()) - 1;
    }
    if (a.kind == AccKind::Welford && twoPassVariance()) a.kind = AccKind::SqDev;
    // Every thread of the row accumulates the same number of values: the
    // row is static and the threads' vectors (and the cluster's blocks)
    // divide it, so each step's columns are inside the row for all threads
    // or for none.
    if (a.kind == AccKind::Welford && !asTail_ && cfg_.split == 1 && dom_[k_ - 1].isStatic() &&
        dom_[k_ - 1].size % (static_cast<int64_t>(cfg_.threadsPerRow) * cfg_.vector * cfg_.cluster) == 0)
      a.equalCounts = true;
    if (auto it = lsePartner.find(id); it != lsePartner.end()) {
      a.kind = AccKind::Lse;
      a.maxNode = it->second;
      a.operand = g_.node(it->second).inputs[0];
      a.level = level_.at(it->second);
      a.type = DType::F32;
    }
    std::string ct = computeType(a.type);
    switch (a.kind) {
      case AccKind::ArgMax:
      case AccKind::ArgMin:
        a.types = {ct, "i32"};
        break;
      case AccKind::Welford:
        a.types = {"f32", "f32", "f32"};  // count, mean, M2
        break;
      case AccKind::Lse:
        a.types = {"f32", "f32"};  // running max, rescaled sum
        break;
      case AccKind::SqDev:
        a.types = {"f32"};
        break;
      default:
        a.types = {ct};
    }
    accs_.push_back(a);
  }
  // Welford's state holds the mean: a mean of the same operand at the same
  // level (layernorm's) is taken from it instead of a tree of its own.
  for (size_t i = 0; i < accs_.size(); ++i) {
    if (accs_[i].kind != AccKind::Welford) continue;
    for (size_t j = 0; j < accs_.size(); ++j) {
      const Acc& m = accs_[j];
      if (m.kind == AccKind::Sum && m.node >= 0 && g_.node(m.node).op == Op::Mean && m.operand == accs_[i].operand &&
          m.level == accs_[i].level && accs_[i].meanNode < 0) {
        accs_[i].meanNode = m.node;
        accs_.erase(accs_.begin() + static_cast<long>(j));
        if (j < i) --i;
        break;
      }
    }
  }
  // A paired max's level is its sum's level; levels may now have gaps.
  for (const Acc& a : accs_)
    if (a.kind == AccKind::Lse) level_[a.node] = a.level;
  levelOf_.clear();
}

// sum(where(eq(iota, t), x, 0)) over the row, iota counting the row's
// columns and t the same along the row: a gather (not in clusters, whose
// blocks hold parts of the row).
bool RowEmitter::gatherOf(int sumNode, Gather& out) {
  if (cfg_.cluster > 1) return false;
  const Node& s = g_.node(sumNode);
  if (s.op != Op::Sum || s.dtype != DType::F32) return false;
  const Frame id = identityFrame(k_);
  const Node& wh = g_.node(s.inputs[0]);
  if (wh.op != Op::Where || wh.dtype != DType::F32) return false;
  const Node& zero = g_.node(wh.inputs[2]);
  if (zero.op != Op::Constant || zero.fvalue != 0.0 || zero.ivalue != 0) return false;
  const Node& eq = g_.node(wh.inputs[0]);
  if (eq.op != Op::Eq) return false;
  const Frame eqFrame = operandFrame(g_, wh, 0, id);
  for (int side = 0; side < 2; ++side) {
    const Node& io = g_.node(eq.inputs[side]);
    if (io.op != Op::Iota || !isInteger(io.dtype)) continue;
    const Frame ioFrame = operandFrame(g_, eq, static_cast<size_t>(side), eqFrame);
    const Axis& ax = ioFrame[static_cast<size_t>(io.axis)];
    if (!(ax == Axis{k_ - 1, 1, 0})) continue;
    const int t = eq.inputs[1 - side];
    const Frame tFrame = operandFrame(g_, eq, static_cast<size_t>(1 - side), eqFrame);
    const Node& tn = g_.node(t);
    if (!isInteger(tn.dtype) || tn.dtype != io.dtype || colDep(t, tFrame) || levelNeeded(t) >= 0) continue;
    const Frame xFrame = operandFrame(g_, wh, 1, id);
    if (levelNeeded(wh.inputs[1]) >= 0) return false;
    out = Gather{sumNode, wh.inputs[1], t, tFrame, xFrame};
    return true;
  }
  return false;
}

// Each gather's column t for this row (its load only: nothing that uses it,
// so the loop that follows does not wait for it).
void RowEmitter::emitGatherColumns() {
  for (const Gather& gth : gathers_) (void)rowValue(gth.column, gth.columnFrame);
}

// Each gather's value for this row: x at column t (one scalar load), 0 where
// t is outside [0, N).
void RowEmitter::emitGathers() {
  MlirWriter& w = *row_;
  gathersPending_ = false;
  for (const Gather& gth : gathers_) {
    const Node& tn = g_.node(gth.column);
    std::string t = rowValue(gth.column, gth.columnFrame);
    std::string t64 = tn.dtype == DType::I64 ? t : convertValue(w, t, tn.dtype, DType::I64);
    const Dim& nd = dom_[k_ - 1];
    std::string n64 = nd.isStatic() ? w.integer(nd.size, "i64") : dimArg_.at(nd.name);
    std::string ge0 = w.assign("arith.cmpi sge, " + t64 + ", " + w.integer(0, "i64") + " : i64");
    std::string ltN = w.assign("arith.cmpi slt, " + t64 + ", " + n64 + " : i64");
    std::string ok = w.assign("arith.andi " + ge0 + ", " + ltN + " : i1");
    std::string col64 = w.assign("arith.select " + ok + ", " + t64 + ", " + w.integer(0, "i64") + " : i64");
    Ctx c;
    c.w = row_;
    std::map<std::string, std::string> memo;
    c.memo = &memo;
    c.cols = {w.assign("arith.trunci " + col64 + " : i64 to i32")};
    const int savedVector = vector_;
    vector_ = 1;  // a scalar load at one column
    std::string v = value(c, gth.value, gth.valueFrame, 0, 0);
    vector_ = savedVector;
    v = convertValue(w, v, g_.node(gth.value).dtype, DType::F32);
    rowValue_[gth.sum] = w.assign("arith.select " + ok + ", " + v + ", " + w.f32(0.0) + " : f32");
  }
}

// ------------------------------------------------------------- emission helpers

std::string RowEmitter::poly(const Poly& p) {
  std::string key = "poly:" + p.str();
  if (auto it = preMemo_.find(key); it != preMemo_.end()) return it->second;
  return preMemo_[key] = polyValue(*pre_, p, "i64", dimArg_);
}

std::string RowEmitter::leadIndex(int axis) {
  std::string key = "lead:" + std::to_string(axis);
  if (auto it = rowMemo_.find(key); it != rowMemo_.end()) return it->second;
  // r = flat index over the leading axes; idx_axis = (r / prod(L[axis+1..])) % L[axis]
  Poly below = Poly::constant(1);
  for (int j = axis + 1; j + 1 < k_; ++j) below = below * Poly::of(dom_[j]);
  std::string v = r_;
  if (!(below == Poly::constant(1))) v = row_->assign("arith.divui " + v + ", " + poly(below) + " : i64");
  if (axis > 0) v = row_->assign("arith.remui " + v + ", " + poly(Poly::of(dom_[axis])) + " : i64");
  rowMemo_[key] = v;
  return v;
}

std::string RowEmitter::rowPtr(const Access& a, DType dt) {
  std::string key = "rowptr:" + a.key();
  if (auto it = rowMemo_.find(key); it != rowMemo_.end()) return it->second;
  std::string off;
  if (!a.base.isZero()) off = poly(a.base);
  for (int j = 0; j + 1 < k_; ++j) {
    if (a.strides[j].isZero() || isUnit(dom_[j])) continue;
    std::string term = row_->assign("arith.muli " + leadIndex(j) + ", " + poly(a.strides[j]) + " : i64");
    off = off.empty() ? term : row_->assign("arith.addi " + off + ", " + term + " : i64");
  }
  if (!colBase64_.empty() && !a.strides[k_ - 1].isZero()) {
    std::string term = row_->assign("arith.muli " + colBase64_ + ", " + poly(a.strides[k_ - 1]) + " : i64");
    off = off.empty() ? term : row_->assign("arith.addi " + off + ", " + term + " : i64");
  }
  std::string p = argOf_.at(a.node);
  if (!off.empty())
    p = row_->assign("llvm.getelementptr inbounds " + p + "[" + off + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " +
                     storageType(dt));
  rowMemo_[key] = p;
  return p;
}

std::string RowEmitter::rowLoad(const Access& a, DType dt) {
  std::string key = "rowload:" + a.key();
  if (auto it = rowMemo_.find(key); it != rowMemo_.end()) return it->second;
  return rowMemo_[key] = scalarLoad(*row_, rowPtr(a, dt), dt);
}

// One element of type `dt` at `p`, converted to its computing type.
std::string RowEmitter::scalarLoad(MlirWriter& w, const std::string& p, DType dt) {
  std::string raw = w.assign("llvm.load " + p + " {alignment = " + std::to_string(dtypeSize(dt)) + " : i64" +
                             loadFlags_ + "} : !llvm.ptr<1> -> " + storageType(dt));
  return loadConvert(w, raw, dt);
}

// An input value the same for every row and column (a one-element weight,
// or any input of a domain whose axes are all 1): loaded once, where the
// values computed from it go (the entry's invariant part), not per row.
std::string RowEmitter::globalLoad(const Access& a, DType dt) {
  std::string key = "globalload:" + a.key();
  if (auto it = preMemo_.find(key); it != preMemo_.end()) return it->second;
  std::string p = argOf_.at(a.node);
  if (!a.base.isZero())
    p = pre_->assign("llvm.getelementptr inbounds " + p + "[" + poly(a.base) + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " +
                     storageType(dt));
  return preMemo_[key] = scalarLoad(*pre_, p, dt);
}

bool RowEmitter::laneVectorAccess(const Access& a) const {
  const int L = cfg_.lanes;
  if (L <= 1 || k_ < 2 || !(a.strides[k_ - 2] == Poly::constant(1)) || !a.base.divisibleBy(L)) return false;
  for (int j = 0; j < k_; ++j)
    if (j != k_ - 2 && !a.strides[j].divisibleBy(L)) return false;
  return true;
}

// A dynamic row length is a multiple of the vector width wherever the
// vectorized entry runs (LaunchGeometry::vectorMultiples).
bool RowEmitter::vectorAccess(const Access& a) const {
  const std::string rowDim = dom_[k_ - 1].isDynamic() ? dom_[k_ - 1].name : "";
  if (vector_ <= 1 || !(a.strides[k_ - 1] == Poly::constant(1)) || !a.base.divisibleBy(vector_, rowDim)) return false;
  for (int j = 0; j + 1 < k_; ++j)
    if (!a.strides[j].divisibleBy(vector_, rowDim)) return false;
  return true;
}

std::string RowEmitter::loadElement(Ctx& c, const Access& a, DType dt, int slot, int lane) {
  const std::string st = storageType(dt);
  std::string p = rowPtr(a, dt);
  MlirWriter& w = *c.w;
  if (vectorAccess(a)) {
    std::string vkey = "vload:" + a.key() + ":" + std::to_string(slot);
    std::string vec;
    std::map<std::string, std::string>& loads = c.loads ? *c.loads : *c.memo;
    if (auto it = loads.find(vkey); it != loads.end()) {
      vec = it->second;
    } else if (auto rp = residentPtr_.find(a.key()); rp != residentPtr_.end()) {
      std::string q = w.assign("llvm.getelementptr inbounds " + rp->second + "[" + c.cols[slot] +
                               "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, " + st);
      vec = w.assign("llvm.load " + q + " {alignment = 16 : i64} : !llvm.ptr<3> -> vector<" +
                     std::to_string(vector_) + "x" + st + ">");
      loads[vkey] = vec;
      loadDtype_[vkey] = dt;
    } else if (auto sp = stagedPtr_.find(a.key()); sp != stagedPtr_.end()) {
      // The row's copy in shared memory (stage, prefetch): plain loads,
      // ordered after the copy's wait by its memory clobber.
      if (stagedClosed_)
        throw Error("kiln: internal: a prefetched row read from shared memory after its next row's copy was issued");
      std::string q = w.assign("llvm.getelementptr inbounds " + sp->second + "[" + c.cols[slot] +
                               "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, " + st);
      int align = std::min(16, vector_ * dtypeSize(dt));
      vec = w.assign("llvm.load " + q + " {alignment = " + std::to_string(align) + " : i64} : !llvm.ptr<3> -> vector<" +
                     std::to_string(vector_) + "x" + st + ">");
      loads[vkey] = vec;
      loadDtype_[vkey] = dt;
    } else {
      std::string q = w.assign("llvm.getelementptr inbounds " + p + "[" + c.cols[slot] +
                               "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, " + st);
      int align = std::min(16, vector_ * dtypeSize(dt));
      const std::string vt = "vector<" + std::to_string(vector_) + "x" + st + ">";
      if (!evictHint_.empty() && align == 16 && stagedAccess(a)) {
        // A row-shaped 16-byte load with an L2 eviction priority, the same
        // in L1: with evict_last, the next pass often finds the row still
        // in L1. Measured on the H200 (2026-12-01, session 10 call 5, TB/s,
        // L2 hint only -> both): softmax bf16 32768x4096 3.99 -> 4.16,
        // rmsnorm bf16 4096x32768 4.00 -> 4.09, rmsnorm f32 4096x32768
        // (1024 threads x 8) 3.97 -> 4.17.
        vec = hintedLoad16(w, q, vt, evictHint_, cfg_.evict != 2);
      } else {
        vec = w.assign("llvm.load " + q + " {alignment = " + std::to_string(align) + " : i64" + loadFlags_ + "} : !llvm.ptr<1> -> " + vt);
      }
      loads[vkey] = vec;
      loadDtype_[vkey] = dt;
    }
    std::string e = w.assign("llvm.extractelement " + vec + "[" + w.integer(lane, "i32") + " : i32] : vector<" +
                             std::to_string(vector_) + "x" + st + ">");
    return loadConvert(w, e, dt);
  }
  std::string col = c.cols[slot];
  if (lane && cfg_.lanes == 1) col = w.assign("arith.addi " + col + ", " + w.integer(lane, "i32") + " : i32");
  std::string off = w.assign("arith.extui " + col + " : i32 to i64");
  if (!(a.strides[k_ - 1] == Poly::constant(1)))
    off = w.assign("arith.muli " + off + ", " + poly(a.strides[k_ - 1]) + " : i64");
  std::string q = w.assign("llvm.getelementptr inbounds " + p + "[" + off + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " + st);
  if (cfg_.lanes > 1) {
    // Lanes: lane l's row is l rows further along the next-to-last axis.
    if (laneVec_ && laneVectorAccess(a)) {
      std::string vkey = "lvload:" + a.key() + ":" + std::to_string(slot);
      const std::string vt = "vector<" + std::to_string(cfg_.lanes) + "x" + st + ">";
      std::string vec;
      if (auto it = c.memo->find(vkey); it != c.memo->end()) {
        vec = it->second;
      } else {
        int align = std::min(16, cfg_.lanes * dtypeSize(dt));
        vec = w.assign("llvm.load " + q + " {alignment = " + std::to_string(align) + " : i64" + loadFlags_ +
                       "} : !llvm.ptr<1> -> " + vt);
        (*c.memo)[vkey] = vec;
      }
      std::string e = w.assign("llvm.extractelement " + vec + "[" + w.integer(lane, "i32") + " : i32] : " + vt);
      return loadConvert(w, e, dt);
    }
    if (lane) {
      std::string step = w.assign("arith.muli " + poly(a.strides[k_ - 2]) + ", " + w.integer(lane, "i64") + " : i64");
      q = w.assign("llvm.getelementptr inbounds " + q + "[" + step + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " + st);
    }
  }
  std::string raw = w.assign("llvm.load " + q + " {alignment = " + std::to_string(dtypeSize(dt)) +
                             " : i64" + loadFlags_ + "} : !llvm.ptr<1> -> " + st);
  return loadConvert(w, raw, dt);
}

// A value that does not depend on the column: computed once per row.
std::string RowEmitter::rowValue(int id, const Frame& f) {
  Ctx c;
  c.w = row_;
  c.memo = &rowMemo_;
  return value(c, id, f, -1, 0);
}

std::string RowEmitter::value(Ctx& c, int id, const Frame& f, int slot, int lane) {
  const Node& n = g_.node(id);
  uint64_t mask = maskOf(id, f);
  const bool col = (mask >> (k_ - 1)) & 1;
  if (slot >= 0 && !col) return cfg_.lanes > 1 ? laneRowValue(id, f, lane) : rowValue(id, f);
  const bool global = mask == 0 && !isReduction(n.op) && levelNeeded(id) < 0;
  std::string key = std::to_string(id) + "@" + frameKey(f) + "#" + std::to_string(slot) + "." + std::to_string(lane);
  std::map<std::string, std::string>& memo = global ? preMemo_ : *c.memo;
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  if (id == heldExp_.expNode && !heldExp_.scale.empty() && slot >= 0 && &c == &persistentCtx_ &&
      frameKey(f) == frameKey(identityFrame(k_))) {
    std::string v = c.w->assign("arith.mulf " + heldExp_.es.at(static_cast<size_t>(slot * vector_ + lane)) + ", " +
                                heldExp_.scale + " : f32");
    memo[key] = v;
    return v;
  }
  MlirWriter* saved = c.w;
  if (global) c.w = pre_;
  MlirWriter& w = *c.w;
  std::string v;
  switch (n.op) {
    case Op::Input: {
      Access a = accessOf(id, n.shape, f, k_);
      v = global ? globalLoad(a, n.dtype) : col ? loadElement(c, a, n.dtype, slot, lane) : rowLoad(a, n.dtype);
      break;
    }
    case Op::Scalar:
      v = argOf_.at(id);
      break;
    case Op::Constant:
      v = emitConstant(w, n);
      break;
    case Op::Iota: {
      const Axis& a = f[n.axis];
      std::string idx;
      if (a.src < 0 || a.coeff == 0) {
        idx = w.integer(a.off, "i64");
      } else {
        std::string base;
        if (a.src == k_ - 1) {
          base = rowColumn(w, c.cols[slot]);
          if (lane && cfg_.lanes == 1) base = w.assign("arith.addi " + base + ", " + w.integer(lane, "i32") + " : i32");
          base = w.assign("arith.extui " + base + " : i32 to i64");
        } else {
          base = leadIndex(a.src);
        }
        idx = w.assign("arith.muli " + base + ", " + w.integer(a.coeff, "i64") + " : i64");
        if (a.off) idx = w.assign("arith.addi " + idx + ", " + w.integer(a.off, "i64") + " : i64");
      }
      v = convertValue(w, idx, DType::I64, n.dtype);
      break;
    }
    case Op::Reshape:
    case Op::Expand:
    case Op::Permute:
    case Op::Slice: {
      const Node& x = g_.node(n.inputs[0]);
      if (n.op == Op::Reshape && x.op == Op::Input && !unitReshape(n, x)) {
        Access a = accessOf(n.inputs[0], n.shape, f, k_);
        v = col ? loadElement(c, a, x.dtype, slot, lane) : rowLoad(a, x.dtype);
      } else {
        v = value(c, n.inputs[0], operandFrame(g_, n, 0, f), slot, lane);
      }
      break;
    }
    default:
      if (isReduction(n.op)) {
        auto it = rowValue_.find(id);
        if (it == rowValue_.end()) throw Error("kiln: internal: reduction used before its level was computed");
        v = it->second;
        break;
      }
      {
        std::vector<std::string> ops;
        for (size_t i = 0; i < n.inputs.size(); ++i) ops.push_back(value(c, n.inputs[i], operandFrame(g_, n, i, f), slot, lane));
        // A softmax's exp in a held row: the approximate exp whatever the
        // outputs' dtype (isSoftmaxExp says why it is precise enough). Not
        // in the looped form with f32 outputs: there it measured slower than
        // the accurate exp (H200, 2026-12-01, session 12 calls 2-4, softmax
        // f32 32768x4096 at 256 x 4 with evict: 4.13-4.15 TB/s against
        // 4.22-4.24; at 31 registers against 46 it ran 8 blocks per SM, not
        // 5, but 5 by padded shared memory measured slower still, 3.97).
        // (16-bit outputs: every exp is the approximate one anyway.)
        v = cfg_.persistent && isSoftmaxExp(g_, id) ? approxExpF32(w, ops[0])
                                                    : emitElementwise(w, g_, n, ops, elementOptions_);
      }
      break;
  }
  c.w = saved;
  memo[key] = v;
  return v;
}

// ------------------------------------------------------------- accumulators

std::string RowEmitter::nAsF32(MlirWriter& w) {
  const Dim& d = dom_[k_ - 1];
  if (d.isStatic()) return w.f32(static_cast<double>(d.size));
  return w.assign("arith.uitofp " + dimArg_.at(d.name) + " : i64 to f32");
}

void RowEmitter::finalize(MlirWriter& w, const Acc& a, const std::vector<std::string>& s) {
  if (a.node < 0) {  // a hidden sum: the mean a variance needs
    hiddenMean_[static_cast<int>(&a - accs_.data())] = w.assign("arith.divf " + s[0] + ", " + nAsF32(w) + " : f32");
    return;
  }
  const Node& n = g_.node(a.node);
  switch (a.kind) {
    case AccKind::Sum:
      rowValue_[a.node] = n.op == Op::Mean ? w.assign("arith.divf " + s[0] + ", " + nAsF32(w) + " : f32") : s[0];
      if (n.op == Op::Mean) hiddenMean_[static_cast<int>(&a - accs_.data())] = rowValue_[a.node];
      break;
    case AccKind::ArgMax:
    case AccKind::ArgMin:
      rowValue_[a.node] = w.assign("arith.extui " + s[1] + " : i32 to i64");
      break;
    case AccKind::Welford:
    case AccKind::SqDev: {
      const std::string& m2 = a.kind == AccKind::Welford ? s[2] : s[0];
      std::string div = w.assign("arith.subf " + nAsF32(w) + ", " + w.f32(static_cast<double>(n.correction)) + " : f32");
      std::string var = w.assign("arith.divf " + m2 + ", " + div + " : f32");
      std::string bad = w.assign("arith.cmpf ole, " + div + ", " + w.f32(0.0) + " : f32");
      var = w.assign("arith.select " + bad + ", " + w.f32(NAN) + ", " + var + " : f32");
      rowValue_[a.node] = n.op == Op::Std ? w.assign("math.sqrt " + var + " : f32") : var;
      if (a.meanNode >= 0) rowValue_[a.meanNode] = s[1];
      break;
    }
    case AccKind::Lse:
      rowValue_[a.maxNode] = s[0];
      rowValue_[a.node] = s[1];
      break;
    default:
      rowValue_[a.node] = s[0];
  }
}

// ------------------------------------------------------------- passes

// The operand lanes of accumulator `a` for one slot of the context.
static std::vector<std::string> laneValues(const std::function<std::string(int)>& lane, int v) {
  std::vector<std::string> out;
  for (int l = 0; l < v; ++l) out.push_back(lane(l));
  return out;
}

// A held row of 16-bit values stays packed in registers between its passes:
// each pass after the first converts it to f32 again from an opaque copy of
// the loaded words (a `mov` with side effects, one per pass), so LLVM cannot
// reuse the first pass's f32 values and keep them, twice the registers, alive
// through the block reductions. The 16-byte vectors of 16-bit values only
// (f32 rows have nothing to gain).
void RowEmitter::reholdNarrow(MlirWriter& w, int pass) {
  if (vector_ != 8) return;
  for (auto& [key, vec] : loadMemo_) {
    auto t = loadDtype_.find(key);
    if (t == loadDtype_.end() || (t->second != DType::BF16 && t->second != DType::F16)) continue;
    vec = opaqueCopy16(w, vec, "vector<8x" + storageType(t->second) + ">", "held row, pass " + std::to_string(pass));
  }
}

void RowEmitter::levelPersistent(int level, int chunks, const std::vector<std::string>& valid) {
  MlirWriter& w = *row_;
  Ctx& c = persistentCtx_;
  elemMemo_.clear();
  if (level > 0) reholdNarrow(w, level);
  int slot = 0;
  std::vector<const Acc*> here;  // this level's accumulators and their block states
  std::vector<std::vector<std::string>> states;
  for (const Acc& a : accs_)
    if (a.level == level) {
      std::vector<std::string> s = identity(w, a);
      Frame id = identityFrame(k_);
      auto operandAt = [&](int j, int l) {
        return convertValue(w, value(c, a.operand, id, j, l), g_.node(a.operand).dtype, a.type);
      };
      if (a.kind == AccKind::Lse) {
        // A held row's (max, sum of exp(x - max)) folds every value the
        // thread holds at once (its max, then one exp per value) instead of
        // rescaling per chunk; columns past the row count as -inf.
        std::vector<std::string> xs;
        for (int j = 0; j < chunks; ++j)
          for (int l = 0; l < vector_; ++l) {
            std::string x = operandAt(j, l);
            if (!valid[j].empty()) x = w.assign("arith.select " + valid[j] + ", " + x + ", " + w.f32(-INFINITY) + " : f32");
            xs.push_back(x);
          }
        here.push_back(&a);
        if (reusesHeldExp(a)) {
          // The same statistic as accumulate's Lse from the identity state
          // (m_t, sum of exp(x - m_t), the shift 0 where m_t is -inf), with
          // the exps kept for the output (balanced trees for both folds).
          auto fold = [&](std::vector<std::string> v, const std::string& op) {
            while (v.size() > 1) {
              std::vector<std::string> next;
              for (size_t i = 0; i + 1 < v.size(); i += 2) next.push_back(w.assign(op + " " + v[i] + ", " + v[i + 1] + " : f32"));
              if (v.size() % 2) next.push_back(v.back());
              v = std::move(next);
            }
            return v[0];
          };
          std::string m = fold(xs, "arith.maximumf");
          std::string ninf = w.assign("arith.cmpf oeq, " + m + ", " + w.f32(-INFINITY) + " : f32");
          std::string shift = w.assign("arith.select " + ninf + ", " + w.f32(0.0) + ", " + m + " : f32");
          heldExp_ = HeldExp{};
          heldExp_.expNode = g_.node(a.node).inputs[0];
          heldExp_.maxNode = a.maxNode;
          heldExp_.threadMax = m;
          for (const std::string& x : xs)
            heldExp_.es.push_back(approxExpF32(w, w.assign("arith.subf " + x + ", " + shift + " : f32")));
          states.push_back(crossThreadAcc(w, a, {m, fold(heldExp_.es, "arith.addf")}));
          continue;
        }
        states.push_back(crossThreadAcc(w, a, accumulateAcc(w, a, s, xs, {}, "")));
        continue;
      }
      for (int j = 0; j < chunks; ++j) {
        std::vector<std::string> xs = laneValues(
            [&](int l) {
              return convertValue(w, value(c, a.operand, id, j, l), g_.node(a.operand).dtype, a.type);
            },
            vector_);
        std::vector<std::string> cols;
        if (a.kind == AccKind::ArgMax || a.kind == AccKind::ArgMin) {
          std::string c0 = rowColumn(w, c.cols[j]);
          for (int l = 0; l < vector_; ++l)
            cols.push_back(l ? w.assign("arith.addi " + c0 + ", " + w.integer(l, "i32") + " : i32") : c0);
        }
        s = accumulateAcc(w, a, s, xs, cols, valid[j]);
      }
      (void)slot;
      here.push_back(&a);
      states.push_back(crossThreadAcc(w, a, s));
    }
  mergeAcrossCluster(w, here, states);
  for (size_t i = 0; i < here.size(); ++i) finalize(w, *here[i], states[i]);
  if (heldExp_.expNode >= 0 && heldExp_.scale.empty() && rowValue_.count(heldExp_.maxNode)) {
    // exp(m_t - max): 1 where equal; where the thread's values are all -inf
    // (its exps are 0), max - max: 0 for a finite max, NaN for a row that
    // is all -inf or holds a NaN, as PyTorch's softmax gives.
    const std::string& mx = rowValue_.at(heldExp_.maxNode);
    const std::string& m = heldExp_.threadMax;
    std::string ninf = w.assign("arith.cmpf oeq, " + m + ", " + w.f32(-INFINITY) + " : f32");
    std::string same = w.assign("arith.cmpf oeq, " + m + ", " + mx + " : f32");
    std::string e = w.assign("arith.select " + same + ", " + w.f32(1.0) + ", " +
                             approxExpF32(w, w.assign("arith.subf " + m + ", " + mx + " : f32")) + " : f32");
    heldExp_.scale = w.assign("arith.select " + ninf + ", " + w.assign("arith.subf " + mx + ", " + mx + " : f32") +
                              ", " + e + " : f32");
  }
}

// Whether a held row's Lse keeps its exps for the output: in clusters (the
// held form's only Lse), for f32 operands (a 16-bit row is held packed, at
// half the registers of its exps).
bool RowEmitter::reusesHeldExp(const Acc& a) const {
  return cfg_.persistent && cfg_.cluster > 1 && !asTail_ && g_.node(a.operand).dtype == DType::F32 &&
         !narrowInputBelow(a.operand);
}

bool RowEmitter::narrowInputBelow(int id) const {
  return coneHas(g_, id, [](const Node& n) {
    return n.op == Op::Input && (n.dtype == DType::BF16 || n.dtype == DType::F16);
  });
}

// In a cluster, the blocks' states of a level (each already merged across
// the block's threads) meet in one exchange; every thread then holds the row's.
void RowEmitter::mergeAcrossCluster(MlirWriter& w, const std::vector<const Acc*>& accs,
                                    std::vector<std::vector<std::string>>& states) {
  if (cfg_.cluster == 1 || accs.empty()) return;
  ClusterThreads ct{cfg_.cluster, t_, lane32_, rank_, exchange_};
  if (asyncBytes_ > 0) {
    if (exchangesThisRow_++ > 0) throw Error("kiln: internal: a row with asynchronous cluster pushes exchanges twice");
    // This row's half's mbarrier and the other's (computed here, where they
    // are used, not held through the row's loads); its phase flips every
    // second row (the row counter's second bit).
    std::string h8 = w.assign("arith.trunci " + w.assign("arith.shli " + w.assign("arith.andi " + rowCounter_ + ", " +
                              w.integer(1, "i64") + " : i64") + ", " + w.integer(3, "i64") + " : i64") + " : i64 to i32");
    ct.mbarHere = w.assign("arith.addi " + mbar0_ + ", " + h8 + " : i32");
    ct.mbarNext = w.assign("arith.subi " + w.assign("arith.addi " + mbar0_ + ", " + w.integer(8, "i32") + " : i32") + ", " + h8 + " : i32");
    ct.parity = w.assign("arith.trunci " + w.assign("arith.andi " + w.assign("arith.shrui " + rowCounter_ + ", " +
                         w.integer(1, "i64") + " : i64") + ", " + w.integer(1, "i64") + " : i64") + " : i64 to i32");
    ct.bytes = asyncBytes_;
  }
  states = clusterMerge(w, accs, states, ct, exchangeEntries_);
  if (exchangeEntries_ > kExchangeEntries)
    throw Error("kiln: internal: a row cluster exchanges more than " + std::to_string(kExchangeEntries) + " values");
}

// A row split across blocks (config split S): every thread holds its
// block's states of accumulators `accs` (the row's only level). Thread 0
// writes them to the row's entries [rank] of the kernel's workspace (8
// bytes per component; the row's counter first), then counts the block
// finished as a grid tail does (a block barrier, a gpu-scope fence, an
// acq_rel atomic); the row's last block resets the counter for the next
// launch and merges all S' states: thread t folds entries t, t + T, ... in
// order, then the block tree merges the threads' (a fixed order: the
// result does not depend on which block finishes last). The other blocks
// keep their own states and store nothing (splitLast_).
void RowEmitter::mergeAcrossGrid(MlirWriter& w, const std::vector<const Acc*>& accs,
                                 std::vector<std::vector<std::string>>& states) {
  if (cfg_.split <= 1 || accs.empty()) return;
  if (!splitLast_.empty()) throw Error("kiln: internal: a split row merges its blocks' states twice");
  const int S = cfg_.split, T = cfg_.threadsPerRow;
  int E = 0;
  for (const Acc* a : accs) E += static_cast<int>(a->types.size());
  splitEntries_ = E;
  const std::string scratch = outPtr_.at(g_.outputs().size());
  std::string rowBase = w.assign("arith.muli " + r_ + ", " + w.integer(1 + static_cast<int64_t>(S) * E, "i64") + " : i64");
  std::string counter = w.assign("llvm.getelementptr inbounds " + scratch + "[" + rowBase +
                                 "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64");
  // Component c of rank `rank`'s state (rank: i32).
  auto entry = [&](const std::string& rank, int c) {
    std::string i = w.assign("arith.addi " + w.assign("arith.muli " + w.assign("arith.extui " + rank + " : i32 to i64") + ", " +
                                                      w.integer(E, "i64") + " : i64") +
                             ", " + w.integer(1 + c, "i64") + " : i64");
    return w.assign("llvm.getelementptr inbounds " + counter + "[" + i + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64");
  };
  auto align = [](const std::string& ty) { return std::string(ty == "i64" || ty == "f64" ? "8" : "4"); };
  std::string first = w.assign("arith.cmpi eq, " + tidRaw_ + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + first + " {");
  w.indent();
  int c = 0;
  for (size_t k = 0; k < accs.size(); ++k)
    for (size_t i = 0; i < accs[k]->types.size(); ++i, ++c)
      w.line("llvm.store " + states[k][i] + ", " + entry(rank_, c) + " {alignment = " + align(accs[k]->types[i]) +
             " : i64} : " + accs[k]->types[i] + ", !llvm.ptr<1>");
  w.dedent();
  w.line("}");
  splitLast_ = countFinished(w, counter, "i64", [&](MlirWriter& b) {
    return b.assign("arith.subi " + splitParts_ + ", " + b.integer(1, "i64") + " : i64");
  }, true);
  std::vector<std::string> types, own;
  for (size_t k = 0; k < accs.size(); ++k)
    for (size_t i = 0; i < accs[k]->types.size(); ++i) {
      types.push_back(accs[k]->types[i]);
      own.push_back(states[k][i]);
    }
  std::vector<std::string> res = lastBlockMerges(w, types, own, [&] {
    std::vector<std::vector<std::string>> merged;
    for (const Acc* a : accs) merged.push_back(identity(w, *a));
    std::string parts32 = w.assign("arith.trunci " + splitParts_ + " : i64 to i32");
    for (int j = 0; j * T < S; ++j) {
      std::string rank = j ? w.assign("arith.addi " + t_ + ", " + w.integer(static_cast<int64_t>(j) * T, "i32") + " : i32") : t_;
      std::string valid = w.assign("arith.cmpi ult, " + rank + ", " + parts32 + " : i32");
      rank = w.assign("arith.select " + valid + ", " + rank + ", " + w.integer(0, "i32") + " : i32");
      c = 0;
      for (size_t k = 0; k < accs.size(); ++k) {
        std::vector<std::string> theirs;
        for (size_t i = 0; i < accs[k]->types.size(); ++i, ++c)
          theirs.push_back(w.assign("llvm.load " + entry(rank, c) + " {alignment = " + align(accs[k]->types[i]) +
                                    " : i64} : !llvm.ptr<1> -> " + accs[k]->types[i]));
        std::vector<std::string> next = merge(w, *accs[k], merged[k], theirs);
        for (size_t i = 0; i < next.size(); ++i)
          next[i] = w.assign("arith.select " + valid + ", " + next[i] + ", " + merged[k][i] + " : " + accs[k]->types[i]);
        merged[k] = next;
      }
    }
    std::vector<std::string> out;
    for (size_t k = 0; k < accs.size(); ++k)
      for (const std::string& v : crossThreadAcc(w, *accs[k], merged[k])) out.push_back(v);
    return out;
  });
  c = 0;
  for (size_t k = 0; k < accs.size(); ++k)
    for (size_t i = 0; i < accs[k]->types.size(); ++i) states[k][i] = res[static_cast<size_t>(c++)];
}

// "a, b, c".
static std::string commaList(const std::vector<std::string>& v) {
  std::string out;
  for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}

// In every thread: `scf.if` the last block to finish (splitLast_), after a
// gpu-scope fence, the states `merged()` emits, else the thread's own
// (`own`, of `types`); the results' names.
std::vector<std::string> RowEmitter::lastBlockMerges(MlirWriter& w, const std::vector<std::string>& types,
                                                     const std::vector<std::string>& own,
                                                     const std::function<std::vector<std::string>()>& merged) {
  std::string res = w.fresh();
  w.line(res + ":" + std::to_string(types.size()) + " = scf.if " + splitLast_ + " -> (" + commaList(types) + ") {");
  w.indent();
  w.line(kFenceGpu);
  w.line("scf.yield " + commaList(merged()) + " : " + commaList(types));
  w.dedent();
  w.line("} else {");
  w.indent();
  w.line("scf.yield " + commaList(own) + " : " + commaList(types));
  w.dedent();
  w.line("}");
  std::vector<std::string> out;
  for (size_t i = 0; i < types.size(); ++i) out.push_back(res + "#" + std::to_string(i));
  return out;
}

int64_t RowEmitter::splitTiles() const {
  const int64_t perBlock = static_cast<int64_t>(cfg_.threads / cfg_.threadsPerRow) * cfg_.lanes;
  return (staticRowCount() + perBlock - 1) / perBlock;
}

int64_t RowEmitter::splitBlocksPerTile() const {
  // One value per lane at a time (the column form has no vectors along the row).
  const int64_t step = static_cast<int64_t>(cfg_.threadsPerRow) * cfg_.unroll;
  const int64_t n = dom_[k_ - 1].size;
  return std::clamp<int64_t>((n + step - 1) / step, 1, cfg_.split);
}

// The column form split across blocks (columnSplit()): the S' blocks of a
// tile of rows each reduce one part of every row of the tile, and every
// thread holds its lanes' states of accumulators `accs` (the rows' only
// level). The kernel's workspace holds the tiles' counters (8 bytes each,
// padded to 16), then per state component c an array [S'][rows] of c's
// type: a thread's lanes are adjacent rows, so each component takes one
// vector store and, in the merge, one vector load per part. Each thread
// stores its rows' states at its block's part, then the block counts
// itself finished on its tile's counter as a grid tail does (a block
// barrier, a gpu-scope fence, an acq_rel atomic); the tile's last block
// resets the counter and each of its threads folds its rows' S' states in
// part order (deterministic: not the order in which the blocks finished).
// The other blocks keep their own states and store nothing (splitLast_).
void RowEmitter::mergeTileAcrossGrid(MlirWriter& w, const std::vector<const Acc*>& accs,
                                     std::vector<std::vector<std::vector<std::string>>>& lanes) {
  if (accs.empty()) return;
  if (!splitLast_.empty()) throw Error("kiln: internal: a split row merges its blocks' states twice");
  const int L = cfg_.lanes;
  const int64_t S = splitBlocksPerTile(), tiles = splitTiles();
  const int64_t rowsPad = tiles * (cfg_.threads / cfg_.threadsPerRow) * L;
  int E = 0;
  for (const Acc* a : accs) E += static_cast<int>(a->types.size());
  splitEntries_ = E;
  const std::string scratch = outPtr_.at(g_.outputs().size());
  std::string counter = w.assign("llvm.getelementptr inbounds " + scratch + "[" + tile_ + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64");
  const int64_t head = (tiles + 1) / 2 * 2;
  auto bytesOf = [](const std::string& ty) { return ty == "i64" || ty == "f64" ? 8 : 4; };
  // Lanes' entries of component c (type ty) at part `part` (i64): a vector
  // of L (a scalar for one lane) and its alignment.
  auto entry = [&](const std::string& part, int c, const std::string& ty) {
    std::string base = w.assign("llvm.getelementptr inbounds " + scratch + "[" +
                                w.integer(head + static_cast<int64_t>(c) * S * rowsPad, "i64") +
                                "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i64");
    std::string i = w.assign("arith.addi " + w.assign("arith.muli " + part + ", " + w.integer(rowsPad, "i64") + " : i64") + ", " +
                             r_ + " : i64");
    return w.assign("llvm.getelementptr inbounds " + base + "[" + i + "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " + ty);
  };
  auto vecType = [&](const std::string& ty) { return L > 1 ? "vector<" + std::to_string(L) + "x" + ty + ">" : ty; };
  auto alignOf = [&](const std::string& ty) { return std::to_string(std::min(16, L * bytesOf(ty))); };
  std::string rank64 = w.assign("arith.extui " + rank_ + " : i32 to i64");
  w.line("scf.if " + rowValid_ + " {");
  w.indent();
  int c = 0;
  for (size_t k = 0; k < accs.size(); ++k)
    for (size_t i = 0; i < accs[k]->types.size(); ++i, ++c) {
      const std::string& ty = accs[k]->types[i];
      std::string v = lanes[0][k][i];
      if (L > 1) {
        v = w.assign("llvm.mlir.undef : " + vecType(ty));
        for (int l = 0; l < L; ++l)
          v = w.assign("llvm.insertelement " + lanes[static_cast<size_t>(l)][k][i] + ", " + v + "[" + w.integer(l, "i32") +
                       " : i32] : " + vecType(ty));
      }
      w.line("llvm.store " + v + ", " + entry(rank64, c, ty) + " {alignment = " + alignOf(ty) + " : i64} : " + vecType(ty) +
             ", !llvm.ptr<1>");
    }
  w.dedent();
  w.line("}");
  splitLast_ = countFinished(w, counter, "i64", [&](MlirWriter& b) { return b.integer(S - 1, "i64"); }, true);
  std::vector<std::string> types, own;
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < accs.size(); ++k)
      for (size_t i = 0; i < accs[k]->types.size(); ++i) {
        types.push_back(accs[k]->types[i]);
        own.push_back(lanes[static_cast<size_t>(l)][k][i]);
      }
  const size_t n = types.size();
  std::vector<std::string> res = lastBlockMerges(w, types, own, [&] {
    // The parts in order, U at a time (their loads in flight together; all
    // of them at once would take registers from the kernel's main loop).
    int64_t U = 1;
    while (U < 8 && S % (2 * U) == 0) U *= 2;
    std::string init;
    std::vector<std::string> args;
    for (int l = 0; l < L; ++l)
      for (const Acc* a : accs)
        for (const std::string& v : identity(w, *a)) {
          args.push_back(w.fresh());
          init += (init.empty() ? "" : ", ") + args.back() + " = " + v;
        }
    const std::string typeList = commaList(types);
    std::string iv = w.fresh(), folded = w.fresh();
    w.line(folded + ":" + std::to_string(n) + " = scf.for " + iv + " = " + w.integer(0, "i64") + " to " + w.integer(S, "i64") +
           " step " + w.integer(U, "i64") + " iter_args(" + init + ") -> (" + typeList + ") : i64 {");
    w.indent();
    std::vector<std::vector<std::vector<std::string>>> merged(static_cast<size_t>(L));
    size_t at = 0;
    for (int l = 0; l < L; ++l)
      for (const Acc* a : accs) {
        merged[static_cast<size_t>(l)].push_back({});
        for (size_t i = 0; i < a->types.size(); ++i) merged[static_cast<size_t>(l)].back().push_back(args[at++]);
      }
    for (int64_t u = 0; u < U; ++u) {
      std::string p = u ? w.assign("arith.addi " + iv + ", " + w.integer(u, "i64") + " : i64") : iv;
      std::vector<std::vector<std::vector<std::string>>> theirs(static_cast<size_t>(L),
                                                                std::vector<std::vector<std::string>>(accs.size()));
      int c = 0;
      for (size_t k = 0; k < accs.size(); ++k)
        for (size_t i = 0; i < accs[k]->types.size(); ++i, ++c) {
          const std::string& ty = accs[k]->types[i];
          std::string v = w.assign("llvm.load " + entry(p, c, ty) + " {alignment = " + alignOf(ty) +
                                   " : i64} : !llvm.ptr<1> -> " + vecType(ty));
          for (int l = 0; l < L; ++l)
            theirs[static_cast<size_t>(l)][k].push_back(
                L > 1 ? w.assign("llvm.extractelement " + v + "[" + w.integer(l, "i32") + " : i32] : " + vecType(ty)) : v);
        }
      for (int l = 0; l < L; ++l)
        for (size_t k = 0; k < accs.size(); ++k) {
          auto& m = merged[static_cast<size_t>(l)][k];
          m = merge(w, *accs[k], m, theirs[static_cast<size_t>(l)][k]);
        }
    }
    std::vector<std::string> step;
    for (int l = 0; l < L; ++l)
      for (size_t k = 0; k < accs.size(); ++k)
        for (const std::string& v : merged[static_cast<size_t>(l)][k]) step.push_back(v);
    w.line("scf.yield " + commaList(step) + " : " + typeList);
    w.dedent();
    w.line("}");
    std::vector<std::string> out;
    for (size_t j = 0; j < n; ++j) out.push_back(folded + "#" + std::to_string(j));
    return out;
  });
  size_t j = 0;
  for (int l = 0; l < L; ++l)
    for (size_t k = 0; k < accs.size(); ++k)
      for (size_t i = 0; i < accs[k]->types.size(); ++i) lanes[static_cast<size_t>(l)][k][i] = res[j++];
}

// The bytes a block receives per row when the held cluster row's single
// exchange goes by st.async (every accumulator at one level, components of
// 4 or 8 bytes, C pushes); 0 where the cluster barrier stays.
int RowEmitter::asyncExchangeBytes() const {
  if (cfg_.cluster <= 1 || !cfg_.persistent || asTail_ || tail_ || accs_.empty()) return 0;
  int level = accs_.front().level, bytes = 0;
  for (const Acc& a : accs_) {
    if (a.level != level) return 0;
    for (const std::string& t : a.types) {
      if (t == "f32" || t == "i32") bytes += 4;
      else if (t == "f64" || t == "i64") bytes += 8;
      else return 0;
    }
  }
  return bytes * cfg_.cluster;
}

// One pass over the row in chunks: a main loop of unrolled, unguarded
// vectors, then a tail loop of single vectors. `body` gets a context whose
// slots are the chunk's vectors and the carried states, and returns them
// updated.
std::vector<std::vector<std::string>> RowEmitter::loopOver(
    const std::vector<std::vector<std::string>>& init, const std::vector<std::string>& loopTypes,
    const std::function<std::vector<std::vector<std::string>>(Ctx&, const std::vector<std::vector<std::string>>&, int)>&
        body) {
  MlirWriter& w = *row_;
  const int T = cfg_.threadsPerRow, V = vector_, U = cfg_.unroll;
  // In a cluster, the block's part of the row (columns are block-local).
  Dim nd = dom_[k_ - 1];
  if (cfg_.cluster > 1 && nd.isStatic()) nd = Dim(nd.size / cfg_.cluster);
  if (partLen_ > 0) nd = Dim(partLen_);
  // A block's part of a split row has a length of its own.
  const bool fixed = nd.isStatic() && splitLen_.empty();
  std::string n32 = !splitLen_.empty() ? splitLen_
                    : nd.isStatic()    ? w.integer(nd.size, "i32")
                                       : w.assign("arith.trunci " + dimArg_.at(nd.name) + " : i64 to i32");
  const int64_t step = static_cast<int64_t>(T) * V * U;
  std::string mainEnd;
  if (fixed) mainEnd = w.integer(nd.size / step * step, "i32");
  else mainEnd = w.assign("arith.muli " + w.assign("arith.divui " + n32 + ", " + w.integer(step, "i32") + " : i32") +
                          ", " + w.integer(step, "i32") + " : i32");
  std::vector<std::string> flatTypes;
  std::vector<std::string> flatInit;
  std::vector<size_t> sizes;
  for (const auto& st : init) {
    sizes.push_back(st.size());
    for (const std::string& v : st) flatInit.push_back(v);
  }
  auto runLoop = [&](const std::vector<std::string>& start, const std::string& lb, const std::string& ub,
                     int64_t stride, int slots) {
    std::string iv = w.fresh();
    std::vector<std::string> args;
    std::string iter, types;
    for (size_t i = 0; i < start.size(); ++i) {
      args.push_back(w.fresh());
      iter += (i ? ", " : "") + args.back() + " = " + start[i];
    }
    std::vector<std::string> flatT;
    size_t pos = 0;
    for (size_t a = 0; a < init.size(); ++a)
      for (size_t i = 0; i < sizes[a]; ++i, ++pos) flatT.push_back(flatTypes[pos]);
    for (size_t i = 0; i < flatT.size(); ++i) types += (i ? ", " : "") + flatT[i];
    std::string res = w.fresh();
    std::string head = (start.empty() ? "" : res + ":" + std::to_string(start.size()) + " = ") + "scf.for " + iv +
                       " = " + lb + " to " + ub + " step " + w.integer(stride, "i32");
    if (!start.empty()) head += " iter_args(" + iter + ") -> (" + types + ")";
    // The body goes to its own writer: values that do not change along the
    // row (row pointers, earlier levels' results) are emitted into the row
    // writer meanwhile, so they land before the loop and dominate it.
    MlirWriter bw = w.sibling();
    bw.setIndent(w.indentLevel() + 1);
    std::map<std::string, std::string> memo;
    Ctx c;
    c.w = &bw;
    c.memo = &memo;
    for (int u = 0; u < slots; ++u)
      c.cols.push_back(u ? bw.assign("arith.addi " + iv + ", " + bw.integer(static_cast<int64_t>(u) * T * V, "i32") + " : i32")
                         : iv);
    std::vector<std::vector<std::string>> states;
    pos = 0;
    for (size_t a = 0; a < init.size(); ++a) {
      states.push_back({});
      for (size_t i = 0; i < sizes[a]; ++i) states.back().push_back(args[pos++]);
    }
    std::vector<std::vector<std::string>> next = body(c, states, slots);
    std::vector<std::string> flatNext;
    for (const auto& st : next)
      for (const std::string& v : st) flatNext.push_back(v);
    if (!flatNext.empty()) {
      std::string vals;
      for (size_t i = 0; i < flatNext.size(); ++i) vals += (i ? ", " : "") + flatNext[i];
      bw.line("scf.yield " + vals + " : " + types);
    }
    w.line(head + " : i32 {");
    w.append(bw.text());
    w.line("}");
    std::vector<std::string> out;
    for (size_t i = 0; i < start.size(); ++i) out.push_back(res + "#" + std::to_string(i));
    return out;
  };
  flatTypes = loopTypes;  // the flattened states' types
  if (oneStepPass_) {
    // One step covers the row (the launcher takes this entry where n <=
    // T x V x one_step, LaunchGeometry::oneStepRange): the body once,
    // straight-line, each slot's vector guarded (its column 0 where it is
    // past the row's end, so that every load stays inside the row). The
    // body goes to its own writer, as a loop's does (values memoized for
    // the row land before it, not inside a slot's guard).
    MlirWriter bw = w.sibling();
    bw.setIndent(w.indentLevel());
    std::map<std::string, std::string> memo;
    Ctx c;
    c.w = &bw;
    c.memo = &memo;
    std::string tv = bw.assign("arith.muli " + t_ + ", " + bw.integer(V, "i32") + " : i32");
    for (int u = 0; u < cfg_.oneStep; ++u) {
      std::string col = u ? bw.assign("arith.addi " + tv + ", " + bw.integer(static_cast<int64_t>(u) * T * V, "i32") + " : i32") : tv;
      std::string ok = bw.assign("arith.cmpi ult, " + col + ", " + n32 + " : i32");
      c.valid.push_back(ok);
      c.cols.push_back(bw.assign("arith.select " + ok + ", " + col + ", " + bw.integer(0, "i32") + " : i32"));
    }
    std::vector<std::vector<std::string>> out = body(c, init, cfg_.oneStep);
    w.append(bw.text());
    return out;
  }
  std::vector<std::string> cur = flatInit;
  const bool hasMain = !(fixed && nd.size < step);
  const bool hasTail = !(fixed && nd.size % step == 0);
  if (hasMain) {
    std::string lb = w.assign("arith.muli " + t_ + ", " + w.integer(V, "i32") + " : i32");
    cur = runLoop(cur, lb, mainEnd, step, U);
  }
  if (hasTail) {
    std::string lb = w.assign("arith.addi " + mainEnd + ", " + w.assign("arith.muli " + t_ + ", " + w.integer(V, "i32") + " : i32") + " : i32");
    cur = runLoop(cur, lb, n32, static_cast<int64_t>(T) * V, 1);
  }
  std::vector<std::vector<std::string>> out;
  size_t pos = 0;
  for (size_t a = 0; a < init.size(); ++a) {
    out.push_back({});
    for (size_t i = 0; i < sizes[a]; ++i) out.back().push_back(cur[pos++]);
  }
  return out;
}

void RowEmitter::levelLooped(int level) {
  MlirWriter& w = *row_;
  std::vector<const Acc*> here;
  for (const Acc& a : accs_)
    if (a.level == level) here.push_back(&a);
  if (here.empty()) return;
  // One set of accumulators per lane (lanes: a thread's rows), lane-major.
  const int L = cfg_.lanes;
  const size_t H = here.size();
  std::vector<std::vector<std::string>> init;
  std::vector<std::string> types;
  for (int rl = 0; rl < L; ++rl)
    for (const Acc* a : here) {
      init.push_back(identity(w, *a));
      types.insert(types.end(), a->types.begin(), a->types.end());
    }
  Frame id = identityFrame(k_);
  auto states = loopOver(init, types, [&](Ctx& c, const std::vector<std::vector<std::string>>& st, int slots) {
    std::vector<std::vector<std::string>> s = st;
    MlirWriter& b = *c.w;
    // Operand of `a` at slot u, row lane rl, vector lane vl (one of the two
    // is 0: lanes use vector width 1).
    auto operand = [&](const Acc& a, int u, int rl, int vl) {
      return convertValue(b, value(c, a.operand, id, u, rl + vl), g_.node(a.operand).dtype, a.type);
    };
    // The online (max, sum of exp) and Welford's (count, mean, M2) take the
    // whole step's values at once: one rescale of the running sum, or one
    // Chan merge (one division) of the step's mean and M2, per step, not
    // per vector (the column form's vectors are one value each).
    auto wholeStep = [](const Acc& a) { return a.kind == AccKind::Lse || a.kind == AccKind::Welford; };
    for (int rl = 0; rl < L; ++rl)
      for (size_t i = 0; i < H; ++i) {
        const Acc& a = *here[i];
        if (!wholeStep(a)) continue;
        // (A one-step row's guarded slots count as -inf: whole steps only
        // hold Lse here, prepare() keeps Welford's out of one-step rows.)
        std::vector<std::string> xs;
        for (int u = 0; u < slots; ++u)
          for (int l = 0; l < vector_; ++l) {
            std::string x = operand(a, u, rl, l);
            if (!c.validAt(u).empty())
              x = b.assign("arith.select " + c.validAt(u) + ", " + x + ", " + b.f32(-INFINITY) + " : f32");
            xs.push_back(x);
          }
        s[rl * H + i] = accumulateAcc(b, a, s[rl * H + i], xs, {}, "");
      }
    for (int u = 0; u < slots; ++u)
      for (int rl = 0; rl < L; ++rl)
        for (size_t i = 0; i < H; ++i) {
          const Acc& a = *here[i];
          if (wholeStep(a)) continue;
          std::vector<std::string> xs, cols;
          for (int l = 0; l < vector_; ++l) {
            xs.push_back(operand(a, u, rl, l));
            if (a.kind == AccKind::ArgMax || a.kind == AccKind::ArgMin) {
              std::string c0 = rowColumn(b, c.cols[u]);
              cols.push_back(l ? b.assign("arith.addi " + c0 + ", " + b.integer(l, "i32") + " : i32") : c0);
            }
          }
          s[rl * H + i] = accumulateAcc(b, a, s[rl * H + i], xs, cols, c.validAt(u));
        }
    return s;
  });
  if (gathersPending_) emitGathers();  // after the row's first loop, before its tree
  std::vector<std::vector<std::vector<std::string>>> lanes;
  for (int rl = 0; rl < L; ++rl) {
    std::vector<std::vector<std::string>> lane(states.begin() + rl * H, states.begin() + (rl + 1) * H);
    for (size_t i = 0; i < H; ++i) lane[i] = crossThreadAcc(w, *here[i], lane[i]);
    mergeAcrossCluster(w, here, lane);  // the blocks' parts of the row
    if (!columnSplit()) mergeAcrossGrid(w, here, lane);
    lanes.push_back(std::move(lane));
  }
  if (columnSplit()) mergeTileAcrossGrid(w, here, lanes);
  for (int rl = 0; rl < L; ++rl) {
    swapLane(rl);  // each lane's results are its own row's
    for (size_t i = 0; i < H; ++i) finalize(w, *here[i], lanes[static_cast<size_t>(rl)][i]);
    swapLane(rl);
  }
}

// Computes every full-shaped output at one slot of the context and stores it.
void RowEmitter::storeFull(Ctx& c, int slot, const std::string& valid) {
  MlirWriter& w = *c.w;
  Frame id = identityFrame(k_);
  std::vector<std::pair<std::string, std::vector<std::string>>> stores;
  for (int o : fullOutputs_) {
    const GraphOutput& go = g_.outputs()[o];
    DType dt = g_.node(go.node).dtype;
    std::vector<std::string> lanes;
    for (int l = 0; l < vector_; ++l) lanes.push_back(storeConvert(w, value(c, go.node, id, slot, l), dt));
    stores.push_back({outPtr_[o], lanes});
  }
  // A one-step entry's guarded slots store 16-byte vectors by a predicated
  // st.global (no branch): the output pass stays straight-line, so every
  // slot's loads (the row again, weights, biases) can be in flight at once,
  // as in a static row of one step, instead of each slot's loads waiting
  // behind the previous slot's guarded store. Below 512 threads: there the
  // predicates' registers cost blocks. Measured on the H200 (2026-12-02,
  // session 25 calls 4-5, TB/s, branches -> predicated): layernorm bf16
  // N = 4096 3.83 -> 4.07 (static 4.17), rmsnorm bf16 4096 4.14 -> 4.17,
  // f32 layernorm / softmax / rmsnorm 4096 unchanged (4.24-4.25); rmsnorm
  // bf16 8192 at 512 threads 4.15 -> 3.88 (32 -> 35 registers: three
  // blocks per SM instead of four).
  bool predicated = !valid.empty() && oneStepPass_ && vector_ > 1 && cfg_.threadsPerRow < 512;
  for (int o : fullOutputs_)
    predicated = predicated && vector_ * dtypeSize(g_.node(g_.outputs()[o].node).dtype) == 16;
  std::string pred;
  if (predicated) pred = w.assign("arith.extui " + valid + " : i1 to i32");
  if (!valid.empty() && !predicated) {
    w.line("scf.if " + valid + " {");
    w.indent();
  }
  for (size_t i = 0; i < stores.size(); ++i) {
    const GraphOutput& go = g_.outputs()[fullOutputs_[i]];
    DType dt = g_.node(go.node).dtype;
    const std::string st = storageType(dt);
    // Outputs are contiguous: row r starts at r * N.
    std::string key = "outrow:" + std::to_string(fullOutputs_[i]);
    std::string base;
    if (auto it = rowMemo_.find(key); it != rowMemo_.end()) {
      base = it->second;
    } else {
      std::string off = row_->assign("arith.muli " + r_ + ", " + poly(Poly::of(dom_[k_ - 1])) + " : i64");
      if (!colBase64_.empty()) off = row_->assign("arith.addi " + off + ", " + colBase64_ + " : i64");
      base = row_->assign("llvm.getelementptr inbounds " + stores[i].first + "[" + off +
                          "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " + st);
      rowMemo_[key] = base;
    }
    std::string p = w.assign("llvm.getelementptr inbounds " + base + "[" + c.cols[slot] +
                             "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, " + st);
    const auto& lanes = stores[i].second;
    if (vector_ == 1) {
      w.line("llvm.store " + lanes[0] + ", " + p + " {alignment = " + std::to_string(dtypeSize(dt)) + " : i64} : " + st +
             ", !llvm.ptr<1>");
      continue;
    }
    std::string vt = "vector<" + std::to_string(vector_) + "x" + st + ">";
    std::string vec = w.assign("llvm.mlir.poison : " + vt);
    for (int l = 0; l < vector_; ++l)
      vec = w.assign("llvm.insertelement " + lanes[l] + ", " + vec + "[" + w.integer(l, "i32") + " : i32] : " + vt);
    if (predicated) {
      std::string words = w.assign("llvm.bitcast " + vec + " : " + vt + " to vector<4xi32>");
      std::string ops = pred + ", " + p;
      for (int l = 0; l < 4; ++l)
        ops += ", " + w.assign("llvm.extractelement " + words + "[" + w.integer(l, "i32") + " : i32] : vector<4xi32>");
      w.line("llvm.inline_asm has_side_effects \"{ .reg .pred kiln_p; setp.ne.b32 kiln_p, $0, 0; @kiln_p "
             "st.global.v4.b32 [$1], {$2, $3, $4, $5}; }\", \"r,l,r,r,r,r,~{memory}\" " + ops +
             " : (i32, !llvm.ptr<1>, i32, i32, i32, i32) -> ()");
      continue;
    }
    w.line("llvm.store " + vec + ", " + p + " {alignment = " + std::to_string(std::min(16, vector_ * dtypeSize(dt))) +
           " : i64} : " + vt + ", !llvm.ptr<1>");
  }
  if (!valid.empty() && !predicated) {
    w.dedent();
    w.line("}");
  }
}

// Whether access `a` reads different values for different rows.
bool RowEmitter::perRowAccess(const Access& a) const {
  for (int j = 0; j + 1 < k_; ++j)
    if (!a.strides[j].isZero() && !isUnit(dom_[j])) return true;
  return false;
}

// Contiguous 16-byte vectors along the row.
bool RowEmitter::vector16Access(const Access& a) const {
  return vectorAccess(a) && a.strides[k_ - 1] == Poly::constant(1) && vector_ * dtypeSize(g_.node(a.node).dtype) == 16;
}

bool RowEmitter::stagedAccess(const Access& a) const { return vector16Access(a) && perRowAccess(a); }

// Which accesses the staged and prefetch forms copy, and where: an 8-byte
// mbarrier (16 bytes reserved), then each row (in a cluster, the block's
// part of it), 16-byte aligned; the block trees' slots follow. Staging and
// prefetching are dropped when nothing qualifies or the rows would not
// leave room for two blocks per SM (staged) or one (prefetch).
void RowEmitter::planStaging() {
  staged_.clear();
  stagedBytes_ = 0;
  if (!cfg_.stage && !cfg_.prefetch) return;
  vector_ = cfg_.vector;
  const int64_t N = dom_[k_ - 1].size / cfg_.cluster;  // the block's part of the row
  for (const auto& [key, a] : accesses_) {
    if (!stagedAccess(a)) continue;
    const int64_t bytes = N * dtypeSize(g_.node(a.node).dtype);
    staged_[key] = {stagedBytes_, bytes};
    stagedBytes_ += (bytes + 15) / 16 * 16;
  }
  if (staged_.empty() || stagedBytes_ > (cfg_.stage ? kMaxStagedRowBytes : kMaxPrefetchBytes)) {
    staged_.clear();
    stagedBytes_ = 0;
    cfg_.stage = false;
    cfg_.prefetch = 0;
  }
}

// Which row-invariant accesses a held row loop keeps in shared memory:
// 16-byte vectors of the block's part of the row, as many as fit next to
// the exchange region, the trees and the prefetch form's next row (whose
// bytes count against the same budget). Not next to prefetch 2's rows:
// each thread's copies hold their addresses (residual + rmsnorm f32 at
// 32768, clusters of 2, spilled 88 bytes with its weight resident).
void RowEmitter::planResident() {
  resident_.clear();
  residentBytes_ = 0;
  const bool loopRows = cfg_.loopsRows() || cfg_.prefetch;
  if (!cfg_.resident || !cfg_.persistent || !loopRows || cfg_.stage || cfg_.prefetch == 2 || cfg_.vector <= 1 ||
      dom_[k_ - 1].isDynamic())
    return;
  vector_ = cfg_.vector;
  const int64_t N = dom_[k_ - 1].size / cfg_.cluster;
  // Blocks asked to share an SM (min_blocks) share its shared memory too.
  const int64_t budget = (kMaxResidentBytes - (staged_.empty() ? 0 : 16 + stagedBytes_)) / std::max(1, cfg_.minBlocks);
  for (const auto& [key, a] : accesses_) {
    if (!vector16Access(a) || perRowAccess(a)) continue;
    const int64_t bytes = (N * dtypeSize(g_.node(a.node).dtype) + 15) / 16 * 16;
    if (residentBytes_ + bytes > budget) continue;
    resident_[key] = residentBytes_;
    residentBytes_ += bytes;
  }
}

// The row pointer of access `a` for row `r` (i64) instead of the current
// row, emitted into `w`: the prefetch form's next row.
std::string RowEmitter::rowPtrFor(MlirWriter& w, const std::string& r, const Access& a, DType dt) {
  std::string savedR = r_;
  MlirWriter* savedW = row_;
  std::map<std::string, std::string> savedMemo = std::move(rowMemo_);
  r_ = r;
  row_ = &w;
  rowMemo_.clear();
  std::string p = rowPtr(a, dt);
  r_ = savedR;
  row_ = savedW;
  rowMemo_ = std::move(savedMemo);
  return p;
}

// Where each staged access lives in shared memory (stagedPtr_), from the
// region's base; returns the mbarrier's shared address (i32).
std::string RowEmitter::stagingPointers(MlirWriter& w, const std::string& base) {
  stagedPtr_.clear();
  stagedClosed_ = false;
  for (const auto& [key, at] : staged_)
    stagedPtr_[key] = w.assign("llvm.getelementptr " + base + "[" + std::to_string(16 + at.first) +
                               "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8");
  return w.assign("llvm.ptrtoint " + base + " : !llvm.ptr<3> to i32");
}

// The global source of each staged access's copy for row `r` (empty: the
// current row), in staged_'s order. Emitted where it dominates the copies
// (values memoized in the entry block must not first appear in a branch).
std::vector<std::string> RowEmitter::copySources(MlirWriter& w, const std::string& r) {
  std::vector<std::string> out;
  for (const auto& [key, at] : staged_) {
    const Access& a = accesses_.at(key);
    DType dt = g_.node(a.node).dtype;
    out.push_back(r.empty() ? rowPtr(a, dt) : rowPtrFor(w, r, a, dt));
  }
  return out;
}

// Thread 0's part of a row's copy: arm the mbarrier with the row's bytes
// and issue one bulk copy (global -> shared, the TMA unit) per staged
// access, from `srcs` (copySources).
void RowEmitter::emitCopies(MlirWriter& w, const std::string& mb, const std::vector<std::string>& srcs) {
  w.line("llvm.inline_asm has_side_effects \"mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;\", "
         "\"r,r,~{memory}\" " + mb + ", " + w.integer(stagedBytes_, "i32") + " : (i32, i32) -> ()");
  size_t i = 0;
  for (const auto& [key, at] : staged_) {
    const std::string& src = srcs.at(i++);
    std::string dst = w.assign("llvm.ptrtoint " + stagedPtr_.at(key) + " : !llvm.ptr<3> to i32");
    w.line("llvm.inline_asm has_side_effects \"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
           "[$0], [$1], $2, [$3];\", \"r,l,r,r,~{memory}\" " + dst + ", " + src + ", " +
           w.integer(at.second, "i32") + ", " + mb + " : (i32, !llvm.ptr<1>, i32, i32) -> ()");
  }
}

void RowEmitter::emitMbarrierInit(MlirWriter& w, const std::string& mb) {
  w.line("llvm.inline_asm has_side_effects \"mbarrier.init.shared::cta.b64 [$0], 1;\", \"r,~{memory}\" " + mb +
         " : (i32) -> ()");
  w.line("llvm.inline_asm has_side_effects \"fence.mbarrier_init.release.cluster;\", \"~{memory}\"  : () -> ()");
}

// Every thread waits for the mbarrier's phase of parity `parity` (i32) to
// complete: the row's bytes have landed.
void RowEmitter::emitWait(MlirWriter& w, const std::string& mb, const std::string& parity) {
  if (cfg_.prefetch == 2) {
    // The thread's own copies have landed; a block barrier makes the other
    // threads' visible too (lanes past a partial row's end read column 0).
    w.line("llvm.inline_asm has_side_effects \"cp.async.wait_group 0;\", \"~{memory}\" : () -> ()");
    w.line("gpu.barrier");
    return;
  }
  w.line("llvm.inline_asm has_side_effects \"{ .reg .pred p; kiln_stage_wait: mbarrier.try_wait.parity.shared::cta.b64 "
         "p, [$0], $1; @!p bra kiln_stage_wait; }\", \"r,r,~{memory}\" " + mb + ", " + parity +
         " : (i32, i32) -> ()");
}

// The row's start in the staged form: thread 0 sets up the mbarrier, arms
// it with the row's bytes and issues one bulk copy per staged access;
// after a block barrier (the mbarrier's initialization is then visible)
// every thread waits for the copies' completion on the barrier's phase 0
// (one row per block, so one phase).
void RowEmitter::emitStaging(MlirWriter& w, const std::string& base) {
  std::string mb = stagingPointers(w, base);
  std::vector<std::string> srcs = copySources(w, "");
  std::string first = w.assign("arith.cmpi eq, " + t_ + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + first + " {");
  w.indent();
  emitMbarrierInit(w, mb);
  emitCopies(w, mb, srcs);
  w.dedent();
  w.line("}");
  w.line("gpu.barrier");
  emitWait(w, mb, w.integer(0, "i32"));
}

// prefetch 2: this thread's 16-byte vectors of every staged access (the
// columns it holds: t * V + j * T * V), from `srcs` (copySources) into the
// staged rows, one cp.async each (L2 only: .cg).
void RowEmitter::emitThreadCopies(MlirWriter& w, const std::vector<std::string>& srcs) {
  size_t i = 0;
  for (const auto& [key, at] : staged_) {
    const std::string st = storageType(g_.node(accesses_.at(key).node).dtype);
    const std::string& src = srcs.at(i++);
    forThreadVectors(w, [&](const std::string& col, bool) {
      std::string d = w.assign("llvm.getelementptr inbounds " + stagedPtr_.at(key) + "[" + col +
                               "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, " + st);
      std::string d32 = w.assign("llvm.ptrtoint " + d + " : !llvm.ptr<3> to i32");
      std::string q = w.assign("llvm.getelementptr inbounds " + src + "[" + col + "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, " + st);
      w.line("llvm.inline_asm has_side_effects \"cp.async.cg.shared.global [$0], [$1], 16;\", \"r,l,~{memory}\" " + d32 +
             ", " + q + " : (i32, !llvm.ptr<1>) -> ()");
    });
  }
}

// This thread's 16-byte vectors of the block's part of a row, the columns
// it holds (t * V + j * T * V): `each(col, partial)` runs for each, a
// partial last one under a guard (col < N).
void RowEmitter::forThreadVectors(MlirWriter& w, const std::function<void(const std::string&, bool)>& each) {
  const int64_t N = dom_[k_ - 1].size / cfg_.cluster;
  const int64_t per = static_cast<int64_t>(cfg_.threadsPerRow) * vector_;
  std::string tv = w.assign("arith.muli " + t_ + ", " + w.integer(vector_, "i32") + " : i32");
  for (int64_t j = 0; j * per < N; ++j) {
    std::string col = j ? w.assign("arith.addi " + tv + ", " + w.integer(j * per, "i32") + " : i32") : tv;
    const bool partial = (j + 1) * per > N;
    if (partial) {
      w.line("scf.if " + w.assign("arith.cmpi ult, " + col + ", " + w.integer(N, "i32") + " : i32") + " {");
      w.indent();
    }
    each(col, partial);
    if (partial) {
      w.dedent();
      w.line("}");
    }
  }
}

// The prefetch form's start, before the row loop: thread 0 sets up the
// mbarrier and copies the block's first row `r0` (if there is one); a
// block barrier makes the mbarrier visible to every thread.
void RowEmitter::emitPrefetchStart(MlirWriter& w, const std::string& base, const std::string& r0,
                                   const std::string& rows) {
  prefetchMb_ = stagingPointers(w, base);
  std::vector<std::string> srcs = copySources(w, r0);
  if (cfg_.prefetch == 2) {
    // Each thread copies its own vectors of the first row; no mbarrier.
    w.line("scf.if " + w.assign("arith.cmpi ult, " + r0 + ", " + rows + " : i64") + " {");
    w.indent();
    emitThreadCopies(w, srcs);
    w.dedent();
    w.line("}");
    w.line("llvm.inline_asm has_side_effects \"cp.async.commit_group;\", \"~{memory}\" : () -> ()");
    return;
  }
  std::string first = w.assign("arith.cmpi eq, " + tidRaw_ + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + first + " {");
  w.indent();
  emitMbarrierInit(w, prefetchMb_);
  w.line("scf.if " + w.assign("arith.cmpi ult, " + r0 + ", " + rows + " : i64") + " {");
  w.indent();
  emitCopies(w, prefetchMb_, srcs);
  w.dedent();
  w.line("}");
  w.dedent();
  w.line("}");
  w.line("gpu.barrier");
}

// After every thread has read the current row out of shared memory (a
// block barrier), thread 0 copies row `next` there if it exists. The
// shared memory was last read by the generic proxy and is now written by
// the async proxy: a proxy fence orders the two.
void RowEmitter::emitPrefetchNext(MlirWriter& w, const std::string& next, const std::string& rows) {
  stagedClosed_ = true;
  std::vector<std::string> srcs = copySources(w, next);
  w.line("gpu.barrier");
  if (cfg_.prefetch == 2) {
    // prefetch 2: every thread copies its own vectors of the next row
    // (cp.async, the generic proxy: the barrier above orders the block's
    // reads of the current row before these writes).
    w.line("scf.if " + w.assign("arith.cmpi ult, " + next + ", " + rows + " : i64") + " {");
    w.indent();
    emitThreadCopies(w, srcs);
    w.dedent();
    w.line("}");
    w.line("llvm.inline_asm has_side_effects \"cp.async.commit_group;\", \"~{memory}\" : () -> ()");
    return;
  }
  std::string first = w.assign("arith.cmpi eq, " + t_ + ", " + w.integer(0, "i32") + " : i32");
  std::string more = w.assign("arith.cmpi ult, " + next + ", " + rows + " : i64");
  w.line("scf.if " + w.assign("arith.andi " + first + ", " + more + " : i1") + " {");
  w.indent();
  w.line("llvm.inline_asm has_side_effects \"fence.proxy.async.shared::cta;\", \"~{memory}\"  : () -> ()");
  emitCopies(w, prefetchMb_, srcs);
  w.dedent();
  w.line("}");
}

// l2_prefetch: the L2 fetches row r + D (if there is one) of every
// row-shaped input the held row loads, with evict_last, one 128-byte line
// per thread at a time (lines t, t + T, ...). A hint: an address past the
// row's lines, or a line the L2 drops again, costs nothing but the time.
// (evict_normal measured level or slower, session 27 call 5.)
void RowEmitter::emitL2Prefetch(MlirWriter& w, const std::string& rows) {
  std::string next = w.assign("arith.addi " + r_ + ", " + w.integer(cfg_.l2Prefetch, "i64") + " : i64");
  std::vector<std::pair<std::string, int64_t>> srcs;  // the next row's pointer, the row's bytes
  for (const auto& [key, a] : accesses_)
    if (!a.strides[k_ - 1].isZero() && vectorAccess(a) && perRowAccess(a)) {
      DType dt = g_.node(a.node).dtype;
      srcs.emplace_back(rowPtrFor(w, next, a, dt), dom_[k_ - 1].size * dtypeSize(dt));
    }
  if (srcs.empty()) return;
  const int64_t T = cfg_.threadsPerRow, line = 128;
  w.line("scf.if " + w.assign("arith.cmpi ult, " + next + ", " + rows + " : i64") + " {");
  w.indent();
  std::string first = w.assign("arith.muli " + t_ + ", " + w.integer(line, "i32") + " : i32");
  for (const auto& [src, bytes] : srcs)
    for (int64_t k = 0; k * T * line < bytes; ++k) {
      std::string off = k ? w.assign("arith.addi " + first + ", " + w.integer(k * T * line, "i32") + " : i32") : first;
      const bool partial = (k + 1) * T * line > bytes;
      if (partial) {
        w.line("scf.if " + w.assign("arith.cmpi ult, " + off + ", " + w.integer(bytes, "i32") + " : i32") + " {");
        w.indent();
      }
      std::string p = w.assign("llvm.getelementptr inbounds " + src + "[" + off + "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, i8");
      w.line("llvm.inline_asm has_side_effects \"prefetch.global.L2::evict_last [$0];\", \"l\" " + p +
             " : (!llvm.ptr<1>) -> ()");
      if (partial) {
        w.dedent();
        w.line("}");
      }
    }
  w.dedent();
  w.line("}");
}

std::string RowEmitter::emitEntry(const std::string& entry, int vector) {
  // Lanes: `vector` > 1 asks for the lanes' vector loads; along the row
  // every lane reads one value at a time.
  laneVec_ = cfg_.lanes > 1 && vector > 1;
  vector_ = cfg_.lanes > 1 ? 1 : vector;
  laneRow_.assign(static_cast<size_t>(cfg_.lanes), "");
  laneMemo_.assign(static_cast<size_t>(cfg_.lanes), {});
  laneRowValue_.assign(static_cast<size_t>(cfg_.lanes), {});
  preMemo_.clear();
  colCarried_.clear();
  colSums_.clear();
  rowMemo_.clear();
  elemMemo_.clear();
  loadMemo_.clear();
  loadDtype_.clear();
  hiddenMean_.clear();
  argOf_.clear();
  dimArg_.clear();
  outPtr_.clear();
  rowValue_.clear();
  smemSlots_ = 0;
  colBase_.clear();
  colBase64_.clear();
  exchange_.clear();
  exchangeEntries_ = 0;
  exchangesThisRow_ = 0;
  splitLen_.clear();
  partLen_ = 0;
  splitLast_.clear();
  splitParts_.clear();
  tile_.clear();
  asyncBytes_ = asyncExchangeBytes();
  mbar0_.clear();
  rowCounter_.clear();
  stagedPtr_.clear();
  stagedClosed_ = false;
  prefetchMb_.clear();
  evictHint_.clear();
  heldExp_ = HeldExp{};
  residentPtr_.clear();
  loadFlags_ = asTail_ ? "" : ", invariant";
  // stage, prefetch: the vector entry only (the scalar entry takes unaligned
  // rows; with prefetch it loops over rows all the same).
  const bool staging = cfg_.stage && vector > 1 && vector == cfg_.vector && !staged_.empty();
  const bool prefetching = cfg_.prefetch && vector > 1 && vector == cfg_.vector && !staged_.empty();
  // The blocks (clusters) that fit at once loop over the rows: row r_ runs
  // from loopFirst in steps of loopStep (i64), the loop carrying `half`
  // (0, 1, 0, ...: a cluster's exchange half, the prefetch mbarrier's phase).
  const bool loopRows = !asTail_ && (cfg_.loopsRows() || cfg_.prefetch || parts_ > 0);
  std::string loopFirst, loopStep, loopEnd;
  std::string stageBase;
  const int T = cfg_.threadsPerRow;
  const int rowsPerBlock = cfg_.threads / T;
  std::string clusterIdx, clusters, half;  // cluster > 1: this cluster's index, the grid's clusters, the row's half (i64)

  MlirWriter head;
  MlirWriter pre = head.sibling();
  MlirWriter row = head.sibling();
  pre_ = &pre;
  row_ = &row;
  pre.setIndent(2);
  row.setIndent(2);

  // A grid tail adds, after the outputs, the block counter and the tail's
  // outputs; the outputs the tail reads back, and the counter, lose
  // `writeonly`. A tail function's parameters carry no attributes (it is
  // inlined into an entry whose own say what holds).
  const size_t numOut = g_.outputs().size();
  ParamOptions po;
  po.plain = asTail_;
  if (tail_) {
    po.readBack.insert(numOut);  // the counter
    for (size_t o = 0; o < numOut; ++o)
      if (std::find(tailFn_.inputs.begin(), tailFn_.inputs.end(), g_.outputs()[o].name) != tailFn_.inputs.end())
        po.readBack.insert(o);
  }
  // A split row: after the outputs, the kernel's own workspace (the blocks'
  // states and the rows' counters), read back.
  const bool split = cfg_.split > 1;
  if (split) po.readBack.insert(numOut);
  KernelParams params =
      kernelParams(g_, inputs_, numOut + (tail_ ? 1 + tailFn_.outputs.size() : 0) + (split ? 1 : 0), dims_, scalars_, po);
  argOf_ = params.argOf;
  dimArg_ = params.dimArg;
  outPtr_ = params.outputs;

  std::string tid = pre.assign("arith.index_cast " + pre.assign("gpu.thread_id x") + " : index to i32");
  // A grid tail reduces row 0 with whichever block runs it.
  std::string bid = asTail_ ? pre.integer(0, "i64")
                            : pre.assign("arith.index_cast " + pre.assign("gpu.block_id x") + " : index to i64");
  tidRaw_ = tid;
  Poly rowsPoly = Poly::constant(1);
  for (int j = 0; j + 1 < k_; ++j) rowsPoly = rowsPoly * Poly::of(dom_[j]);
  std::string rowValid;
  rowValid_.clear();
  // A split row's part (split > 1): block `rank64` (i64) of the row's S'
  // (splitParts_) reduces P columns from rank * P (P: whole steps of the
  // entry, about N / S'; the last parts shorter or empty).
  auto splitPart = [&](const std::string& rank64) {
    rank_ = pre.assign("arith.trunci " + rank64 + " : i64 to i32");
    const Dim& n = dom_[k_ - 1];
    // The one-step entry's step is its one step (a cluster's part of at
    // most T x V x one_step values: the whole part held at once).
    const int64_t step = static_cast<int64_t>(cfg_.threadsPerRow) * vector_ * (oneStepEntry_ ? cfg_.oneStep : cfg_.unroll);
    std::string n64 = n.isStatic() ? pre.integer(n.size, "i64") : dimArg_.at(n.name);
    auto ceilDiv = [&](const std::string& v, const std::string& d) {
      return pre.assign("arith.divui " + pre.assign("arith.addi " + v + ", " + pre.assign("arith.subi " + d + ", " + pre.integer(1, "i64") + " : i64") + " : i64") +
                        ", " + d + " : i64");
    };
    std::string stepV = pre.integer(step, "i64");
    std::string part = pre.assign("arith.muli " + ceilDiv(ceilDiv(n64, splitParts_), stepV) + ", " + stepV + " : i64");
    std::string start = pre.assign("arith.minui " + pre.assign("arith.muli " + rank64 + ", " + part + " : i64") + ", " + n64 + " : i64");
    std::string len = pre.assign("arith.minui " + pre.assign("arith.subi " + n64 + ", " + start + " : i64") + ", " + part + " : i64");
    colBase64_ = start;
    colBase_ = pre.assign("arith.trunci " + start + " : i64 to i32");
    splitLen_ = pre.assign("arith.trunci " + len + " : i64 to i32");
  };
  if (rowsPerBlock > 1) {
    t_ = pre.assign("arith.andi " + tid + ", " + pre.integer(T - 1, "i32") + " : i32");
    int shift = 0;
    while ((1 << shift) < T) ++shift;
    std::string inBlock = pre.assign("arith.extui " + pre.assign("arith.shrui " + tid + ", " + pre.integer(shift, "i32") + " : i32") +
                                     " : i32 to i64");
    // A split column form: block b reduces part b / tiles of the rows of
    // tile b % tiles (consecutive blocks read adjacent rows' values at the
    // same columns, as the unsplit form's do).
    std::string tile = bid;
    if (columnSplit()) {
      std::string tiles = pre.integer(splitTiles(), "i64");
      std::string rank64 = pre.assign("arith.divui " + bid + ", " + tiles + " : i64");
      tile = pre.assign("arith.subi " + bid + ", " + pre.assign("arith.muli " + rank64 + ", " + tiles + " : i64") + " : i64");
      tile_ = tile;
      splitParts_ = pre.integer(splitBlocksPerTile(), "i64");
      splitPart(rank64);
      // Parts of whole steps, all of one length: a static loop (with the
      // length a kernel argument, ptxas unrolls the loop further, into
      // twice or three times the registers).
      const int64_t n = dom_[k_ - 1].size, parts = splitBlocksPerTile();
      if (n % (parts * cfg_.unroll) == 0) {
        splitLen_.clear();
        partLen_ = n / parts;
      }
    }
    std::string r = pre.assign("arith.addi " + pre.assign("arith.muli " + tile + ", " + pre.integer(rowsPerBlock, "i64") + " : i64") +
                               ", " + inBlock + " : i64");
    // Lanes: the thread's first row (its rows are consecutive).
    if (cfg_.lanes > 1) r = pre.assign("arith.muli " + r + ", " + pre.integer(cfg_.lanes, "i64") + " : i64");
    std::string rows = poly(rowsPoly);
    rowValid = pre.assign("arith.cmpi ult, " + r + ", " + rows + " : i64");
    rowValid_ = rowValid;
    // Rows past the end compute the last row again (every lane of a warp
    // must take part in the shuffles) and store nothing.
    std::string last = pre.assign("arith.subi " + rows + ", " + pre.integer(cfg_.lanes, "i64") + " : i64");
    r_ = pre.assign("arith.minui " + r + ", " + last + " : i64");
    for (int l = 0; l < cfg_.lanes; ++l)
      laneRow_[static_cast<size_t>(l)] = l ? pre.assign("arith.addi " + r_ + ", " + pre.integer(l, "i64") + " : i64") : r_;
  } else if (cfg_.cluster > 1) {
    // A cluster of C consecutive blocks per row: block b holds columns
    // [rank * N/C, (rank + 1) * N/C) of row b / C, rank = b % C (the
    // cluster's CTA rank: clusters run along x).
    // Clusters loop over rows (row = cluster + k * clusters), so a grid
    // capped at the clusters that fit at once (config row_loop) keeps them
    // resident instead of launching one per row.
    int shift = 0;
    while ((1 << shift) < cfg_.cluster) ++shift;
    t_ = tid;
    clusterIdx = pre.assign("arith.shrui " + bid + ", " + pre.integer(shift, "i64") + " : i64");
    std::string grid = pre.assign("arith.index_cast " + pre.assign("gpu.grid_dim x") + " : index to i64");
    clusters = pre.assign("arith.shrui " + grid + ", " + pre.integer(shift, "i64") + " : i64");
    if (loopRows) {
      r_ = row.fresh();
      row.setIndent(3);
      loopFirst = clusterIdx;
      loopStep = clusters;
    } else {
      r_ = clusterIdx;  // one cluster per row
    }
    rank_ = pre.assign("arith.trunci " + pre.assign("arith.andi " + bid + ", " + pre.integer(cfg_.cluster - 1, "i64") +
                                                    " : i64") + " : i64 to i32");
    if (asyncBytes_ > 0) {
      // Thread 0 sets up the two mbarriers (one arrival per phase: its
      // own expect_tx) and arms the first row's half, before the cluster
      // barrier lets any peer push.
      std::string base = pre.assign("llvm.mlir.addressof @kiln_smem : !llvm.ptr<3>");
      std::string at = pre.assign("llvm.getelementptr " + base + "[" + std::to_string(2 * kExchangeEntries) +
                                  "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64");
      mbar0_ = pre.assign("llvm.ptrtoint " + at + " : !llvm.ptr<3> to i32");
      std::string first = pre.assign("arith.cmpi eq, " + tid + ", " + pre.integer(0, "i32") + " : i32");
      pre.line("scf.if " + first + " {");
      pre.indent();
      for (int h = 0; h < 2; ++h)
        pre.line("llvm.inline_asm has_side_effects \"mbarrier.init.shared::cta.b64 [$0], 1;\", \"r,~{memory}\" " +
                 pre.assign("arith.addi " + mbar0_ + ", " + pre.integer(8 * h, "i32") + " : i32") + " : (i32) -> ()");
      pre.line("llvm.inline_asm has_side_effects \"fence.mbarrier_init.release.cluster;\", \"~{memory}\"  : () -> ()");
      pre.line("llvm.inline_asm has_side_effects \"mbarrier.arrive.expect_tx.relaxed.cluster.shared::cta.b64 _, [$0], $1;\", "
               "\"r,r,~{memory}\" " + mbar0_ + ", " + pre.integer(asyncBytes_, "i32") + " : (i32, i32) -> ()");
      pre.dedent();
      pre.line("}");
    }
    // Peers write into this block's shared memory only after every block
    // of the cluster has started: a cluster barrier first.
    pre.line("nvvm.cluster.arrive {aligned}");
    pre.line("nvvm.cluster.wait {aligned}");
    if (dom_[k_ - 1].isDynamic()) {
      // A looped row of a dynamic length: the block's part of whole steps.
      splitParts_ = pre.integer(cfg_.cluster, "i64");
      splitPart(pre.assign("arith.extui " + rank_ + " : i32 to i64"));
    } else {
      colBase_ = pre.assign("arith.muli " + rank_ + ", " + pre.integer(dom_[k_ - 1].size / cfg_.cluster, "i32") + " : i32");
      colBase64_ = pre.assign("arith.extui " + colBase_ + " : i32 to i64");
    }
  } else if (split) {
    // The launch gives each row the same number of blocks, S' (at most
    // config split, fewer for a short row: one per step of the row, see
    // run()): block b reduces part b % S' of row b / S', P columns from
    // rank * P (P: whole steps, about N / S'; the last parts shorter or
    // empty).
    t_ = tid;
    std::string grid = pre.assign("arith.index_cast " + pre.assign("gpu.grid_dim x") + " : index to i64");
    splitParts_ = pre.assign("arith.divui " + grid + ", " + pre.integer(staticRowCount(), "i64") + " : i64");
    r_ = pre.assign("arith.divui " + bid + ", " + splitParts_ + " : i64");
    splitPart(pre.assign("arith.subi " + bid + ", " + pre.assign("arith.muli " + r_ + ", " + splitParts_ + " : i64") + " : i64"));
  } else if (loopRows && parts_ > 0) {
    // Column partials: block b loops over the rows of part b.
    t_ = tid;
    r_ = row.fresh();
    row.setIndent(3);
    loopFirst = pre.assign("arith.muli " + bid + ", " + pre.integer(partRows_, "i64") + " : i64");
    loopEnd = pre.assign("arith.addi " + loopFirst + ", " + pre.integer(partRows_, "i64") + " : i64");
    loopStep = pre.integer(1, "i64");
  } else if (loopRows) {
    t_ = tid;
    r_ = row.fresh();
    row.setIndent(3);
    loopFirst = bid;
    loopStep = pre.assign("arith.index_cast " + pre.assign("gpu.grid_dim x") + " : index to i64");
  } else {
    t_ = tid;
    r_ = bid;
  }
  if (loopRows) half = row.fresh();
  // The loop carries a counter of rows mod 4: its low bit picks the row's
  // half (exchange region, prefetch phase), its high bit the phase of the
  // asynchronous pushes' mbarriers.
  std::string halfBit;
  auto halfBitOf = [&]() {
    if (halfBit.empty()) halfBit = row.assign("arith.andi " + half + ", " + row.integer(1, "i64") + " : i64");
    return halfBit;
  };
  lane32_ = pre.assign("arith.andi " + tid + ", " + pre.integer(31, "i32") + " : i32");
  warp_ = pre.assign("arith.shrui " + t_ + ", " + pre.integer(5, "i32") + " : i32");
  if (T > 32 || staging || prefetching) smem_ = pre.assign("llvm.mlir.addressof @kiln_smem : !llvm.ptr<3>");
  if (cfg_.cluster > 1) {
    // Shared memory: the two halves of the exchange region, then the block
    // trees' slots.
    if (!loopRows) half = row.integer(0, "i64");
    halfBitOf();
    std::string first = row.assign("arith.muli " + halfBit + ", " + row.integer(kExchangeEntries, "i64") + " : i64");
    exchange_ = row.assign("llvm.getelementptr " + smem_ + "[" + first + "] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, i64");
    // ... then the asynchronous pushes' two mbarriers (16 bytes).
    smem_ = pre.assign("llvm.getelementptr " + smem_ + "[" + std::to_string(2 * kExchangeEntries + 2) +
                       "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i64");
    rowCounter_ = half;
  }

  if (staging || prefetching) {
    // The staged rows first, the block trees' slots after them.
    stageBase = smem_;
    smem_ = pre.assign("llvm.getelementptr " + smem_ + "[" + std::to_string(16 + stagedBytes_) +
                       "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8");
  }

  const Dim& nd = dom_[k_ - 1];
  std::string rowsValue = poly(rowsPoly);
  const std::string loopBound = loopEnd.empty() ? rowsValue : loopEnd;  // a part's rows end at its last
  if (prefetching) emitPrefetchStart(pre, stageBase, loopFirst, loopBound);
  if (!resident_.empty() && loopRows && cfg_.persistent && vector > 1 && vector == cfg_.vector) {
    // Each thread copies its own columns of the row-invariant accesses
    // into shared memory once; a block barrier, since lanes past a partial
    // row's end read column 0.
    std::string base = smem_;
    smem_ = pre.assign("llvm.getelementptr " + smem_ + "[" + std::to_string(residentBytes_) +
                       "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8");
    std::string zero = pre.integer(0, "i64");
    for (const auto& [key, off] : resident_) {
      const Access& a = accesses_.at(key);
      DType dt = g_.node(a.node).dtype;
      const std::string st = storageType(dt);
      const std::string vt = "vector<" + std::to_string(vector_) + "x" + st + ">";
      std::string dst = pre.assign("llvm.getelementptr " + base + "[" + std::to_string(off) +
                                   "] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8");
      residentPtr_[key] = dst;
      std::string src = rowPtrFor(pre, zero, a, dt);
      // The whole vectors' loads first, all in flight at once, then their
      // stores; a partial last vector under its own guard.
      std::vector<std::pair<std::string, std::string>> whole;  // value, shared pointer
      forThreadVectors(pre, [&](const std::string& col, bool partial) {
        std::string q = pre.assign("llvm.getelementptr inbounds " + src + "[" + col + "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, " + st);
        std::string v = pre.assign("llvm.load " + q + " {alignment = 16 : i64, invariant} : !llvm.ptr<1> -> " + vt);
        std::string d = pre.assign("llvm.getelementptr inbounds " + dst + "[" + col + "] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, " + st);
        if (partial) pre.line("llvm.store " + v + ", " + d + " {alignment = 16 : i64} : " + vt + ", !llvm.ptr<3>");
        else whole.emplace_back(v, d);
      });
      for (const auto& [v, d] : whole)
        pre.line("llvm.store " + v + ", " + d + " {alignment = 16 : i64} : " + vt + ", !llvm.ptr<3>");
    }
    pre.line("gpu.barrier");
  }
  if (cfg_.cluster > 1 && loopRows && T > 32) {
    // A cluster row loop alternates between two sets of the block trees'
    // slots by the row's half bit. Each tree's warps read its slots right
    // after the tree's barrier; the next row's trees may write before a
    // slow warp has read (nothing else orders them: the cluster exchange's
    // mbarriers order warp 0's reads only), but the row after that writes
    // this set again only once every warp has passed the next row's tree
    // barrier, after its reads. The span (the entry's slots x warps, known
    // once every tree is written) replaces kTreeSpanMark in run().
    std::string span = row.assign("arith.constant " + std::string(kTreeSpanMark) + " : i64");
    smem_ = row.assign("llvm.getelementptr " + smem_ + "[" + row.assign("arith.muli " + halfBitOf() + ", " + span + " : i64") +
                       "] : (!llvm.ptr<3>, i64) -> !llvm.ptr<3>, i64");
  }
  if (cfg_.persistent) {
    const int64_t N = nd.size / cfg_.cluster;  // this block's columns
    const int64_t per = static_cast<int64_t>(T) * vector_;
    const int chunks = static_cast<int>((N + per - 1) / per);
    std::string tv = row.assign("arith.muli " + t_ + ", " + row.integer(vector_, "i32") + " : i32");

    std::vector<std::string> valid;
    persistentCtx_ = Ctx{};
    persistentCtx_.w = &row;
    persistentCtx_.memo = &elemMemo_;
    persistentCtx_.loads = &loadMemo_;
    for (int j = 0; j < chunks; ++j) {
      std::string col = j ? row.assign("arith.addi " + tv + ", " + row.integer(j * per, "i32") + " : i32") : tv;
      if ((j + 1) * per <= N) {
        valid.push_back("");
      } else {
        std::string v = row.assign("arith.cmpi ult, " + col + ", " + row.integer(N, "i32") + " : i32");
        valid.push_back(v);
        col = row.assign("arith.select " + v + ", " + col + ", " + row.integer(0, "i32") + " : i32");
      }
      persistentCtx_.cols.push_back(col);
    }
    // Every 16-byte load of the row first, so they are all in flight at once.
    // In a loop over rows (clusters, prefetch), only the loads that differ
    // between rows: the others (weights, biases) are loaded where they are
    // used, after the barriers, and not as invariant loads (see
    // loadFlags_), which LLVM would hoist out of the loop.
    // Prefetch: the row's copy has landed (this phase of the mbarrier); once
    // every thread holds its values, the next row's copy starts.
    if (prefetching) emitWait(row, prefetchMb_, row.assign("arith.trunci " + halfBitOf() + " : i64 to i32"));
    // Prefetch too: the block barrier before the next row's copy would
    // keep every load issued before it alive through the whole row.
    // Loads that every row shares (weights, biases: L2 hits after the first
    // rows) come first too, unless the config asks for several blocks per
    // SM (min_blocks): then they are loaded where used, in the last pass,
    // so that they hold no registers through the reductions. (Loaded late
    // with one block per SM, their latency shows: layernorm f32 4096x32768
    // measured 3.81 TB/s in session 10 call 1, 3.97-3.98 first in call 3.)
    const bool sharedFirst = cfg_.cluster == 1 && !loopRows && cfg_.minBlocks < 2;
    // l2_prefetch: a later row's fetch first, while the row's registers
    // are free (issued after the loads, its address stayed live through
    // them: layernorm bf16 at min_blocks 2 spilled 16 bytes).
    if (cfg_.l2Prefetch > 0 && !asTail_ && !loopRows && cfg_.cluster == 1 && rowsPerBlock == 1)
      emitL2Prefetch(row, rowsValue);
    // A part's row loop (column partials) with the next row prefetched: the
    // L2 fetches the part's row r + l2_prefetch too.
    if (cfg_.l2Prefetch > 0 && prefetching && parts_ > 0) emitL2Prefetch(row, loopBound);
    // evict: a held row is read once, with evict_first (the row-shaped
    // 16-byte loads only).
    if (cfg_.evict && !asTail_) evictHint_ = "evict_first";
    for (const auto& [key, a] : accesses_)
      if (!a.strides[k_ - 1].isZero() && vectorAccess(a) && (sharedFirst || perRowAccess(a)))
        for (int j = 0; j < chunks; ++j) (void)loadElement(persistentCtx_, a, g_.node(a.node).dtype, j, 0);
    evictHint_.clear();
    if (prefetching)
      emitPrefetchNext(row, row.assign("arith.addi " + r_ + ", " + loopStep + " : i64"), loopBound);
    if (loopRows) loadFlags_.clear();
    emitGathers();
    for (int level = 0; level <= maxLevel_; ++level) levelPersistent(level, chunks, valid);
    elemMemo_.clear();
    if (!fullOutputs_.empty() || !colOutputs_.empty()) reholdNarrow(row, maxLevel_ + 1);
    // In a loop over rows the shared loads still read from global memory
    // (weights past the resident ones) are issued two chunks ahead of the
    // stores that use them, so an L2 round trip overlaps the chunks before
    // instead of stalling each store in turn.
    const int ahead = loopRows && cfg_.cluster > 1 ? 2 : 0;
    auto preload = [&](int j) {
      if (j >= chunks) return;
      for (const auto& [key, a] : accesses_)
        if (!a.strides[k_ - 1].isZero() && vectorAccess(a) && !perRowAccess(a) && !residentPtr_.count(key))
          (void)loadElement(persistentCtx_, a, g_.node(a.node).dtype, j, 0);
    };
    for (int j = 0; j < chunks && !fullOutputs_.empty(); ++j) {
      if (ahead)
        for (int p = j == 0 ? 0 : j + ahead; p <= j + ahead; ++p) preload(p);
      storeFull(persistentCtx_, j, valid[j]);
    }
    // Column partials: this row's values added to the thread's sums (the
    // loop's carried values; a guarded slot's lanes past the row add what
    // column 0 holds, never stored).
    colChunks_ = chunks;
    if (parts_ > 0)
      for (size_t c = 0; c < colOperands_.size(); ++c)
        for (int j = 0; j < chunks; ++j)
          for (int l = 0; l < vector_; ++l) {
            colCarried_.push_back(row.fresh());
            colSums_.push_back(row.assign("arith.addf " + colCarried_.back() + ", " +
                                          value(persistentCtx_, colOperands_[c], identityFrame(k_), j, l) + " : f32"));
          }
  } else {
    if (staging) emitStaging(row, stageBase);
    // The gathers' columns load here, their values after the first loop
    // (levelLooped), before its tree: a row of a loop over rows no longer
    // waits two dependent loads (t, then x at t) before its first step.
    // Measured on the H200 (cross_entropy bf16 8192x32768): see
    // docs/benchmarks.md, 2026-12-04 session 35.
    emitGatherColumns();
    gathersPending_ = !gathers_.empty();
    // evict: every pass but the last keeps the row in L2 for the next one.
    // A level makes a pass when it has accumulators; the output pass, when
    // there are row-shaped outputs, comes last.
    // The one-step entry (RowConfig::oneStep) writes each pass as one
    // guarded step; the others loop.
    oneStepPass_ = oneStepEntry_;
    const bool hints = cfg_.evict && !staging && !asTail_;
    int lastLevel = -1;
    for (const Acc& a : accs_) lastLevel = std::max(lastLevel, a.level);
    for (int level = 0; level <= maxLevel_; ++level) {
      if (hints) evictHint_ = level < lastLevel || !fullOutputs_.empty() ? "evict_last" : "evict_first";
      levelLooped(level);
    }
    if (gathersPending_) emitGathers();  // no level looped
    if (hints) evictHint_ = "evict_first";
    if (!fullOutputs_.empty())
      loopOver({}, {}, [&](Ctx& c, const std::vector<std::vector<std::string>>&, int slots) {
        for (int u = 0; u < slots; ++u) storeFull(c, u, c.validAt(u));
        return std::vector<std::vector<std::string>>{};
      });
    oneStepPass_ = false;
  }
  // One value per row: stored by the row's first thread (each lane's row).
  for (int lane = 0; lane < cfg_.lanes && !rowOutputs_.empty(); ++lane) {
    swapLane(lane);
    std::vector<std::string> vals;
    for (int o : rowOutputs_) {
      const Node& n = g_.node(g_.outputs()[o].node);
      Frame f = rowFrame(n.shape, g_.outputs()[o].name, n.dtype);
      vals.push_back(storeConvert(row, rowValue(g_.outputs()[o].node, f), n.dtype));
    }
    std::string first = row.assign("arith.cmpi eq, " + t_ + ", " + row.integer(0, "i32") + " : i32");
    if (!rowValid.empty()) first = row.assign("arith.andi " + first + ", " + rowValid + " : i1");
    if (cfg_.cluster > 1)
      first = row.assign("arith.andi " + first + ", " +
                         row.assign("arith.cmpi eq, " + rank_ + ", " + row.integer(0, "i32") + " : i32") + " : i1");
    if (!splitLast_.empty()) first = row.assign("arith.andi " + first + ", " + splitLast_ + " : i1");
    row.line("scf.if " + first + " {");
    row.indent();
    for (size_t i = 0; i < rowOutputs_.size(); ++i) {
      DType dt = g_.node(g_.outputs()[rowOutputs_[i]].node).dtype;
      std::string st = storageType(dt);
      std::string p = row.assign("llvm.getelementptr inbounds " + outPtr_[rowOutputs_[i]] + "[" + r_ +
                                 "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, " + st);
      row.line("llvm.store " + vals[i] + ", " + p + " {alignment = " + std::to_string(dtypeSize(dt)) + " : i64} : " + st +
               ", !llvm.ptr<1>");
    }
    row.dedent();
    row.line("}");
    swapLane(lane);
  }
  if (loopRows) {
    MlirWriter loop = head.sibling();
    loop.setIndent(2);
    std::string zero = pre.integer(0, "i64");
    // Column partials: the sums ride along as more carried values.
    std::string carried = half + " = " + zero, types = "i64";
    std::string zeroF;
    if (!colSums_.empty()) zeroF = pre.assign("arith.constant 0.0 : f32");
    for (size_t i = 0; i < colSums_.size(); ++i) {
      carried += ", " + colCarried_[i] + " = " + zeroF;
      types += ", f32";
    }
    const std::string result = loop.fresh();
    loop.line(result + (colSums_.empty() ? "" : ":" + std::to_string(1 + colSums_.size())) + " = scf.for " + r_ +
              " = " + loopFirst + " to " + loopBound + " step " + loopStep +
              " iter_args(" + carried + ") -> (" + types + ") : i64 {");
    // A plain row loop (no cluster, no prefetch): the next row's block
    // trees write the shared memory this row's last reads (thread 0's
    // outputs) still read; a block barrier between them. (Prefetch has one
    // before each next row's copy; clusters, their exchange barriers.)
    if ((cfg_.plainRowLoop || parts_ > 0) && !prefetching) row.line("gpu.barrier");
    std::string next = row.assign("arith.andi " + row.assign("arith.addi " + half + ", " + row.integer(1, "i64") + " : i64") +
                                  ", " + row.integer(3, "i64") + " : i64");
    std::string yielded = next;
    for (const std::string& v : colSums_) yielded += ", " + v;
    row.line("scf.yield " + yielded + " : " + types);
    loop.append(row.text());
    loop.line("}");
    if (!colSums_.empty()) storeColumnPartials(loop, result, bid);
    if (tail_) lastBlock(loop, params.outputs);
    std::string text = gpuFuncText(entry, params.signature, cfg_.threads, pre, loop, entryMinBlocks());
    pre_ = row_ = nullptr;
    return text;
  }
  if (asTail_) {
    std::string text = internalFuncText(entry, params.signature, pre, row);  // inlined into the entries
    pre_ = row_ = nullptr;
    return text;
  }
  if (tail_) {
    // Only blocks with rows do the row work (a tail kernel launches one
    // block even for no rows, for the tail's results); then the last block.
    MlirWriter body = head.sibling();
    body.setIndent(2);
    std::string first = rowsPerBlock > 1
                            ? pre.assign("arith.muli " + bid + ", " + pre.integer(rowsPerBlock, "i64") + " : i64")
                            : bid;
    body.line("scf.if " + body.assign("arith.cmpi ult, " + first + ", " + rowsValue + " : i64") + " {");
    body.append(row.text());
    body.line("}");
    lastBlock(body, params.outputs);
    std::string text = gpuFuncText(entry, params.signature, cfg_.threads, pre, body, entryMinBlocks());
    pre_ = row_ = nullptr;
    return text;
  }
  std::string text = gpuFuncText(entry, params.signature, cfg_.threads, pre, row, entryMinBlocks());
  pre_ = row_ = nullptr;
  return text;
}

void RowEmitter::storeColumnPartials(MlirWriter& w, const std::string& result, const std::string& bid) {
  const int64_t N = dom_[k_ - 1].size;
  const int64_t per = static_cast<int64_t>(cfg_.threadsPerRow) * vector_;
  std::string tv = w.assign("arith.muli " + tidRaw_ + ", " + w.integer(vector_, "i32") + " : i32");
  size_t at = 0;
  for (size_t c = 0; c < colOutputs_.size(); ++c) {
    std::string base = w.assign("llvm.getelementptr inbounds " + outPtr_[colOutputs_[c]] + "[" +
                                w.assign("arith.muli " + bid + ", " + w.integer(N, "i64") + " : i64") +
                                "] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32");
    for (int j = 0; j < colChunks_; ++j) {
      std::string col = j ? w.assign("arith.addi " + tv + ", " + w.integer(j * per, "i32") + " : i32") : tv;
      const bool guarded = (j + 1) * per > N;
      if (guarded) {
        w.line("scf.if " + w.assign("arith.cmpi ult, " + col + ", " + w.integer(N, "i32") + " : i32") + " {");
        w.indent();
      }
      std::string p = w.assign("llvm.getelementptr inbounds " + base + "[" + col + "] : (!llvm.ptr<1>, i32) -> !llvm.ptr<1>, f32");
      std::vector<std::string> lanes;
      for (int l = 0; l < vector_; ++l) lanes.push_back(result + "#" + std::to_string(1 + at++));
      if (vector_ == 1) {
        w.line("llvm.store " + lanes[0] + ", " + p + " {alignment = 4 : i64} : f32, !llvm.ptr<1>");
      } else {
        const std::string vt = "vector<" + std::to_string(vector_) + "xf32>";
        std::string vec = w.assign("llvm.mlir.poison : " + vt);
        for (int l = 0; l < vector_; ++l)
          vec = w.assign("llvm.insertelement " + lanes[l] + ", " + vec + "[" + w.integer(l, "i32") + " : i32] : " + vt);
        w.line("llvm.store " + vec + ", " + p + " {alignment = " + std::to_string(std::min(16, 4 * vector_)) +
               " : i64} : " + vt + ", !llvm.ptr<1>");
      }
      if (guarded) {
        w.dedent();
        w.line("}");
      }
    }
  }
}

std::string RowEmitter::countFinished(MlirWriter& w, const std::string& counter, const std::string& ty,
                                      const std::function<std::string(MlirWriter&)>& lastOld, bool reset) {
  // The flag travels through shared memory at offset 0: the barrier first
  // (the block trees' warps have read their slots).
  w.line("gpu.barrier");
  std::string flag = w.assign("llvm.mlir.addressof @kiln_smem : !llvm.ptr<3>");
  std::string first = w.assign("arith.cmpi eq, " + tidRaw_ + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + first + " {");
  w.indent();
  w.line(kFenceGpu);
  std::string old = w.assign("llvm.atomicrmw add " + counter + ", " + w.integer(1, ty) + " acq_rel : !llvm.ptr<1>, " + ty);
  std::string last = w.assign("arith.cmpi eq, " + old + ", " + lastOld(w) + " : " + ty);
  w.line("llvm.store " + w.assign("arith.extui " + last + " : i1 to i32") + ", " + flag + " : i32, !llvm.ptr<3>");
  if (reset) {
    w.line("scf.if " + last + " {");
    w.indent();
    w.line("llvm.store " + w.integer(0, ty) + ", " + counter + " : " + ty + ", !llvm.ptr<1>");
    w.dedent();
    w.line("}");
  }
  w.dedent();
  w.line("}");
  w.line("gpu.barrier");
  std::string seen = w.assign("llvm.load " + flag + " : !llvm.ptr<3> -> i32");
  w.line("gpu.barrier");  // every thread has read the flag before the trees reuse the memory
  return w.assign("arith.cmpi ne, " + seen + ", " + w.integer(0, "i32") + " : i32");
}

// The grid tail's call: a block barrier orders every thread's writes
// before thread 0, whose fence (cumulative: it covers what the barrier
// ordered before it) makes them visible device-wide before it counts the
// block finished; the block that counts last (it sees every other block's
// writes: the counter's acq_rel atomic and the fences order them) runs the
// tail with all its threads, and its thread 0 puts the counter back to
// zero for the next launch. One fence per block, not one per thread (with
// every thread fencing, cross_entropy's one kernel over 8192 rows measured
// about 4 us slower than its two kernels, session 8 call 5). The flag travels through shared
// memory at offset 0, which the row work no longer uses by then (a tail
// kernel does not stage rows).
void RowEmitter::lastBlock(MlirWriter& w, const std::vector<std::string>& outPtrs) {
  const size_t numOut = g_.outputs().size();
  const std::string counter = outPtrs.at(numOut);
  const std::string seen = countFinished(w, counter, "i32", [](MlirWriter& b) {
    std::string grid = b.assign("arith.index_cast " + b.assign("gpu.grid_dim x") + " : index to i32");
    return b.assign("arith.subi " + grid + ", " + b.integer(1, "i32") + " : i32");
  }, false);
  w.line("scf.if " + seen + " {");
  w.indent();
  w.line(kFenceGpu);
  std::vector<std::string> args, types;
  for (const std::string& in : tailFn_.inputs) {
    size_t o = 0;
    while (o < numOut && g_.outputs()[o].name != in) ++o;
    if (o == numOut) throw Error("kiln: internal: grid tail reads '" + in + "', which the row kernel does not write");
    args.push_back(outPtrs[o]);
    types.push_back("!llvm.ptr<1>");
  }
  for (size_t j = 0; j < tailFn_.outputs.size(); ++j) {
    args.push_back(outPtrs.at(numOut + 1 + j));
    types.push_back("!llvm.ptr<1>");
  }
  for (const std::string& d : tailFn_.dims) {
    args.push_back(dimArg_.at(d));
    types.push_back("i64");
  }
  std::string a, t;
  for (size_t i = 0; i < args.size(); ++i) {
    a += (i ? ", " : "") + args[i];
    t += (i ? ", " : "") + types[i];
  }
  w.line("llvm.call @" + tailFn_.name + "(" + a + ") : (" + t + ") -> ()");
  std::string first = w.assign("arith.cmpi eq, " + tidRaw_ + ", " + w.integer(0, "i32") + " : i32");
  w.line("scf.if " + first + " {");
  w.indent();
  w.line("llvm.store " + w.integer(0, "i32") + ", " + counter + " : i32, !llvm.ptr<1>");
  w.dedent();
  w.line("}");
  w.dedent();
  w.line("}");
}

void RowEmitter::prepare() {
  Shape rows(dom_.begin(), dom_.end() - 1);
  for (size_t o = 0; o < g_.outputs().size(); ++o) {
    const Node& n = g_.node(g_.outputs()[o].node);
    if (const int e = columnPartialOperand(g_, g_.outputs()[o].node); e >= 0) {
      if (!(g_.node(e).shape == dom_) || k_ != 2 || g_.node(e).dtype != DType::F32)
        throw Error("kiln: internal: a column partial over " + shapeToString(g_.node(e).shape) +
                    " in a row kernel over " + shapeToString(dom_));
      colOutputs_.push_back(static_cast<int>(o));
      colOperands_.push_back(e);
      parts_ = n.shape[0].size;
      partRows_ = dom_[0].size / parts_;
      collect(e, identityFrame(k_));
      continue;
    }
    if (n.shape == dom_ && !(n.shape == rows)) {
      fullOutputs_.push_back(static_cast<int>(o));
      collect(g_.outputs()[o].node, identityFrame(k_));
    } else {
      rowOutputs_.push_back(static_cast<int>(o));
      collect(g_.outputs()[o].node, rowFrame(n.shape, g_.outputs()[o].name, n.dtype));
    }
  }
  auto byParam = [&](int a, int b) {
    const auto& p = g_.params();
    return std::find(p.begin(), p.end(), a) < std::find(p.begin(), p.end(), b);
  };
  std::sort(inputs_.begin(), inputs_.end(), byParam);
  std::sort(scalars_.begin(), scalars_.end(), byParam);
  std::vector<Shape> shapes = {dom_};
  for (int id : inputs_) shapes.push_back(g_.node(id).shape);
  for (const GraphOutput& o : g_.outputs()) shapes.push_back(g_.node(o.node).shape);
  dims_ = usedDims(g_, shapes, accesses_);

  // The config, made consistent with the shape.
  const Dim& nd = dom_[k_ - 1];
  if (nd.isDynamic()) {
    cfg_.persistent = false;  // (the vectorized entry needs whole vectors per row: see run())
  } else {
    while (cfg_.vector > 1 && nd.size % cfg_.vector != 0) cfg_.vector /= 2;
  }
  if (cfg_.threadsPerRow >= 32) cfg_.threads = cfg_.threadsPerRow;
  if (cfg_.minBlocks * cfg_.threads > kMaxThreadsPerSm) cfg_.minBlocks = kMaxThreadsPerSm / cfg_.threads;
  planStaging();  // before the accumulators: a staged row's variance takes two passes
  planResident();
  buildAccumulators();
  // Lanes: one pass (one level), one value per row, no gathers.
  if (cfg_.lanes > 1 && (maxLevel_ > 0 || !fullOutputs_.empty() || !gathers_.empty())) cfg_.lanes = 1;
  // A split row: one pass (every accumulator at one level: a max paired with
  // its sum of exps counts once), one value per row, no gathers (each block
  // would pick the row's gathered value), at least one accumulator.
  if (cfg_.split > 1) {
    const bool onePass = !accs_.empty() && std::all_of(accs_.begin(), accs_.end(),
                                                       [&](const Acc& a) { return a.level == accs_[0].level; });
    if (!onePass || !fullOutputs_.empty() || !gathers_.empty()) cfg_.split = 1;
  }
  // One-step rows: several passes (what the branch saves is their second
  // reads), no Welford state (a step of the loop merges whole steps), no
  // gathers.
  if (cfg_.oneStep > 0) {
    std::set<int> levels;
    bool welford = false;
    for (const Acc& a : accs_) {
      levels.insert(a.level);
      welford = welford || a.kind == AccKind::Welford;
    }
    const size_t passes = levels.size() + (fullOutputs_.empty() ? 0 : 1);
    if (passes < 2 || welford || !gathers_.empty() || asTail_) cfg_.oneStep = 0;
  }

  elementOptions_.approxTranscendentals = true;
  elementOptions_.reciprocalDivision = true;
  for (const GraphOutput& o : g_.outputs()) {
    DType dt = g_.node(o.node).dtype;
    if (dt != DType::BF16 && dt != DType::F16) elementOptions_.approxTranscendentals = false;
  }
}

// The grid tail as an internal function: one row (the tail's domain is
// one-dimensional) reduced by the calling block's threads, row index 0,
// loads not invariant (other blocks wrote the values during this kernel).
RowEmitter::TailFunction RowEmitter::tailFunction(const std::string& fname) {
  asTail_ = true;
  prepare();
  TailFunction t;
  t.name = fname;
  t.text = emitEntry(fname, 1);
  t.slots = smemSlots_;
  for (int id : inputs_) t.inputs.push_back(g_.node(id).name);
  for (const GraphOutput& o : g_.outputs()) t.outputs.push_back(o.name);
  t.dims = dims_;
  return t;
}

RowKernel RowEmitter::run(const std::string& name, EntryVariants variants) {
  Shape rows(dom_.begin(), dom_.end() - 1);
  prepare();
  if (tail_) {
    // One block streams the whole row of per-row results, so it wants many
    // loads in flight: unroll 8 (with 128 threads and unroll 4, the tail of
    // cross_entropy over 8192 rows took about 5 us more than the second
    // kernel of 512 threads it replaced, session 7 run 10); unroll 32 since
    // session 35 (cross_entropy's 8192 losses in two rounds of L2 loads,
    // not four; the kernels' registers unchanged).
    RowConfig tc;
    tc.persistent = false;
    tc.vector = 1;
    tc.unroll = 32;
    tc.threadsPerRow = tc.threads = cfg_.threads;  // the calling block's threads
    RowEmitter te(*tail_, tc);
    tailFn_ = te.tailFunction(name + "_tail");
    for (const std::string& d : tailFn_.dims)
      if (std::find(dims_.begin(), dims_.end(), d) == dims_.end()) dims_.push_back(d);
  }

  RowKernel out;
  CompiledKernel& k = out.kernel;
  k.name = name;
  k.schedule = "row_reduction";
  k.config = cfg_.json();
  std::string body;
  int slots = 0;
  // The vector entry: 16-byte vectors along the row, or with lanes the
  // lanes' values at a column in one vector.
  const int V = cfg_.lanes > 1 ? cfg_.lanes : cfg_.vector;
  // A cluster row loop's trees take two sets of slots (emitEntry).
  const int treeSets = cfg_.cluster > 1 && cfg_.rowLoop && cfg_.threadsPerRow > 32 ? 2 : 1;
  auto entryText = [&](const std::string& entry, int vector) {
    std::string text = emitEntry(entry, vector);
    if (treeSets == 2) {
      const std::string span = std::to_string(smemSlots_ * (cfg_.threadsPerRow / 32));
      for (size_t at = text.find(kTreeSpanMark); at != std::string::npos; at = text.find(kTreeSpanMark, at))
        text.replace(at, std::strlen(kTreeSpanMark), span);
    }
    slots = std::max(slots, treeSets * smemSlots_);
    return text;
  };
  if (V > 1 && variants != EntryVariants::ScalarOnly) {
    const std::string vname = name + (cfg_.lanes > 1 ? "_l" : "_v") + std::to_string(V);
    if (cfg_.oneStep > 0) {
      // An entry of its own for the rows one step covers, so that its
      // registers (and the blocks that fit per SM) are not the loop's.
      oneStepEntry_ = true;
      body += entryText(vname + "_step", V);
      oneStepEntry_ = false;
      k.entries.push_back({.name = vname + "_step", .vectorized = true, .oneStep = true});
    }
    body += entryText(vname, V);
    k.entries.push_back({vname, true});
  }
  if (V == 1 || variants != EntryVariants::VectorOnly) {
    body += entryText(name + "_s1", 1);
    k.entries.push_back({name + "_s1", false});
  }
  std::string mlir = "module attributes {gpu.container_module} {\n  gpu.module @kiln_kernels {\n";
  if (cfg_.threadsPerRow > 32 || tail_ || cfg_.stage || cfg_.prefetch || columnSplit())
    mlir += "    llvm.mlir.global external @kiln_smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>\n";
  if (tail_) mlir += tailFn_.text;
  out.mlir = mlir + body + "  }\n}\n";

  const bool hasVector = V > 1 && variants != EntryVariants::ScalarOnly;
  vector_ = cfg_.lanes > 1 ? 1 : V;
  for (int id : inputs_) {
    const Node& n = g_.node(id);
    int align = 0;
    if (hasVector)
      for (const auto& [key, a] : accesses_)
        if (a.node == id && !a.strides[k_ - 1].isZero() && (cfg_.lanes > 1 ? laneVectorAccess(a) : vectorAccess(a)))
          align = std::min(16, V * dtypeSize(n.dtype));
    k.tensors.push_back({.name = n.name, .dtype = n.dtype, .shape = n.shape, .output = false, .alignment = align});
  }
  for (size_t o = 0; o < g_.outputs().size(); ++o) {
    const GraphOutput& go = g_.outputs()[o];
    const Node& n = g_.node(go.node);
    bool full = std::count(fullOutputs_.begin(), fullOutputs_.end(), static_cast<int>(o)) > 0;
    k.tensors.push_back({.name = go.name,
                         .dtype = n.dtype,
                         .shape = n.shape,
                         .output = true,
                         .alignment = (full || std::count(colOutputs_.begin(), colOutputs_.end(), static_cast<int>(o))) && hasVector
                                          ? std::min(16, V * dtypeSize(n.dtype))
                                          : 0});
  }
  if (cfg_.split > 1) {
    // The blocks' states and the rows' counters, 8 bytes each: per row a
    // counter, then S states of splitEntries_ components. A workspace
    // tensor of this kernel's own, zero when allocated; each row's last
    // block puts its counter back to zero.
    // (The column form's: the tiles' counters, then per component the
    // parts' states of every row, see mergeTileAcrossGrid.)
    const int64_t entries =
        columnSplit() ? (splitTiles() + 1) / 2 * 2 + splitBlocksPerTile() * splitEntries_ * splitTiles() *
                                                         (cfg_.threads / cfg_.threadsPerRow) * cfg_.lanes
                      : staticRowCount() * (1 + static_cast<int64_t>(cfg_.split) * splitEntries_);
    k.tensors.push_back({.name = name + "_parts",
                         .dtype = DType::I64,
                         .shape = {Dim(entries)},
                         .output = true,
                         .workspace = true,
                         .alignment = 0});
  }
  if (tail_) {
    // After the outputs, as in the entries' parameters: the block counter,
    // then the tail's outputs.
    k.tensors.push_back({.name = tailCounter_, .dtype = DType::I32, .shape = {Dim(1)}, .output = true, .alignment = 0});
    for (const GraphOutput& o : tail_->outputs())
      k.tensors.push_back({.name = o.name,
                           .dtype = tail_->node(o.node).dtype,
                           .shape = tail_->node(o.node).shape,
                           .output = true,
                           .alignment = 0});
  }
  k.dims = dims_;
  for (int id : scalars_) k.scalars.push_back({g_.node(id).name, g_.node(id).dtype});
  k.launch.threadsPerBlock = cfg_.threads;
  k.launch.elementsPerBlock = cfg_.threads / cfg_.threadsPerRow * cfg_.lanes;
  k.launch.iterShape = rows;
  k.launch.maxBlocks = 0;
  k.launch.cluster = cfg_.cluster;
  // A dynamic row length: the vectorized entry's loops take whole vectors
  // and its rows start aligned only where the length is a multiple of V.
  // (Whichever entries this build makes: a later build of the scalar entry
  // alone must describe the same kernel.)
  if (V > 1 && cfg_.lanes == 1 && dom_[k_ - 1].isDynamic())
    k.launch.vectorMultiples.push_back({dom_[k_ - 1].name, V});
  // The one-step entry's rows (whichever entries this build makes, as above).
  // In a cluster, each block's part is one step: C steps in all.
  if (V > 1 && cfg_.oneStep > 0)
    k.launch.oneStepRange.push_back(
        {dom_[k_ - 1].name, 0, static_cast<int64_t>(cfg_.threadsPerRow) * V * cfg_.oneStep * cfg_.cluster});
  k.launch.sharedBytes = cfg_.threadsPerRow > 32 ? slots * (cfg_.threadsPerRow / 32) * 8 : 0;
  if (columnSplit()) {
    // S' blocks per tile of rows, the parts' blocks of every tile in turn
    // (a static count: the column form's rows are static); the last
    // block's flag in shared memory.
    k.launch.iterShape = {Dim(splitTiles() * splitBlocksPerTile())};
    k.launch.elementsPerBlock = 1;
    k.launch.sharedBytes = std::max(k.launch.sharedBytes, 16);
  } else if (cfg_.split > 1) {
    // Each row gets one block per step of its values, at most S (the
    // config's split): S' blocks per row (the kernel divides the grid by the
    // rows), at least one (an empty row's result is the identity's). The
    // last block's flag in shared memory.
    const int64_t step = static_cast<int64_t>(cfg_.threadsPerRow) * std::max(1, cfg_.vector) * cfg_.unroll;
    k.launch.iterShape.push_back(dom_[k_ - 1]);
    k.launch.tile = {step};
    k.launch.maxBlocks = staticRowCount() * cfg_.split;
    k.launch.minBlocks = staticRowCount();
    k.launch.sharedBytes = std::max(k.launch.sharedBytes, 16);
  }
  if (tail_) {
    // The flag, then the tail's trees (from offset 0 too, after the flag is read).
    k.launch.sharedBytes = std::max({k.launch.sharedBytes, 16, tailFn_.slots * (cfg_.threads / 32) * 8});
    k.launch.minBlocks = cfg_.cluster;
  }
  if (cfg_.stage || cfg_.prefetch) {
    k.launch.sharedBytes += 16 + static_cast<int>(stagedBytes_);
    out.ptxFeatures = "+ptx80";  // cp.async.bulk, mbarrier expect_tx (PTX ISA 8.0)
  }
  // The blocks (clusters) loop over rows: as many as fit at once.
  if (cfg_.prefetch || cfg_.loopsRows()) {
    k.launch.resident = true;
    k.launch.maxBlocks = cfg_.maxBlocks > 0 ? std::max<int64_t>(cfg_.maxBlocks / cfg_.cluster, 1) * cfg_.cluster : 0;
  }
  // Column partials: one block per part of the rows, every part (not the
  // blocks that fit at once: a block loops over its own part's rows only).
  if (parts_ > 0) {
    k.launch.iterShape = {Dim(parts_)};
    k.launch.elementsPerBlock = 1;
    k.launch.maxBlocks = 0;
    k.launch.resident = false;
  }
  if (cfg_.cluster > 1) {
    k.launch.sharedBytes += 2 * kExchangeEntries * 8 + 16;
    // barrier.cluster.arrive.relaxed (PTX ISA 8.0); st.async (8.1); a relaxed
    // mbarrier arrive (8.6)
    out.ptxFeatures = "+ptx86";
  }
  k.launch.sharedBytes += static_cast<int>(residentBytes_);
  return out;
}

int64_t nextPow2(int64_t v) {
  int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// True when an output has the domain's shape (the row written back).
bool writesRows(const Graph& g, const Shape& domain) {
  for (const GraphOutput& o : g.outputs())
    if (g.node(o.node).shape == domain) return true;
  return false;
}

// True when no output has the domain's shape and every reduction needs at
// most one pass over the row: no reduction consumes another one, except
// sum(exp(a - max(a))), which the looped form computes online with its max.
bool streamsOnce(const Graph& g, const Shape& domain) {
  if (writesRows(g, domain)) return false;
  auto needsReduction = [&](int id) { return coneHas(g, id, [](const Node& n) { return isReduction(n.op); }); };
  for (int id : g.canonicalOrder()) {
    const Node& n = g.node(id);
    if (!isReduction(n.op) || !needsReduction(n.inputs[0])) continue;
    const Node& e = g.node(n.inputs[0]);
    bool lse = n.op == Op::Sum && e.op == Op::Exp && g.node(e.inputs[0]).op == Op::Sub;
    if (lse) {
      const Node& d = g.node(e.inputs[0]);
      const Node& m = g.node(d.inputs[1]);
      lse = m.op == Op::Max && m.keepdim && m.inputs[0] == d.inputs[0] && !needsReduction(d.inputs[0]);
    }
    if (!lse) return false;
  }
  return true;
}

// Whether the row graph reads an input (or a reshape of one, or an
// elementwise expression of them) through a permute that moves its last
// (contiguous) axis off the row's axis onto the one before it: the rows'
// values are strided, consecutive rows adjacent (a column reduction as rows
// of the permuted view).
bool stridedRows(const Graph& g) {
  std::vector<signed char> memo(static_cast<size_t>(g.numNodes()), -1);  // each node walked once
  std::function<bool(int)> readsInput = [&](int id) {
    signed char& m = memo[static_cast<size_t>(id)];
    if (m >= 0) return m == 1;
    const Node& n = g.node(id);
    bool found = n.op == Op::Input;
    if (n.op == Op::Reshape) found = readsInput(n.inputs[0]);
    else if (isElementwise(n.op))
      for (int i : n.inputs) found = found || (g.node(i).shape == n.shape && readsInput(i));  // not a broadcast operand
    m = found ? 1 : 0;
    return found;
  };
  for (int id = 0; id < g.numNodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op != Op::Permute || n.axes.size() < 2 || !readsInput(n.inputs[0])) continue;
    const int64_t last = static_cast<int64_t>(n.axes.size()) - 1;
    if (n.axes[last] != last && n.axes[last - 1] == last) return true;
  }
  return false;
}

// Bytes of one row of every row-shaped input: what the staged form copies
// into shared memory per block (at most kMaxStagedRowBytes).
int64_t stagedRowBytes(const Graph& g, const Shape& d) {
  if (d.back().isDynamic()) return 0;
  int64_t bytes = 0;
  for (int id : g.params())
    if (g.node(id).op == Op::Input && g.node(id).shape == d) bytes += d.back().size * dtypeSize(g.node(id).dtype);
  return bytes;
}

// The most lanes a column-form thread may own: 16 bytes of the widest
// input at a column, and a count that divides the rows along the
// next-to-last axis (so a thread's rows differ only there). 1: none.
int maxLanes(const Graph& g, const Shape& d) {
  int widest = 1;
  for (int id : g.params())
    if (g.node(id).op == Op::Input) widest = std::max(widest, dtypeSize(g.node(id).dtype));
  if (d.size() < 2 || d[d.size() - 2].isDynamic()) return 1;
  int lanes = std::max(1, 16 / widest);
  while (lanes > 1 && d[d.size() - 2].size % lanes != 0) lanes /= 2;
  return lanes;
}

// Values a thread holds of one part when a row of n values is split into
// `parts` parts (a cluster's blocks) of `threads` threads with `vector`-wide
// loads: the heuristic's and the space's one count.
int64_t partValuesPerThread(int64_t n, int64_t parts, int64_t threads, int vector) {
  return (n / parts + threads * vector - 1) / (threads * vector) * vector;
}

}  // namespace

// The dynamic-length rule's bounds are kDynamicRowBytes128, 256, 512,
// Cluster8 and Cluster16 over a power-of-two bytes per value of at least 2:
// powers of two up to 512 KiB / 2 = 262144, so the next power of two, up to
// twice the largest bound, tells every range apart.
int64_t dimHintClass(int64_t value) {
  constexpr int64_t kLargestBound = kDynamicRowBytesCluster16 / 2;
  int64_t c = 1;
  while (c < value && c < 2 * kLargestBound) c *= 2;
  return c;
}

namespace {

// The row-shaped inputs of a row kernel over domain `d`: their bytes per
// column (at least 2), their count, and whether every one is 16-bit.
// Row-shaped: the domain's shape, or reshaped to it (the planner's parts of
// a whole tensor; not a permuted view).
struct RowInputs {
  int bytes = 0, count = 0;
  bool narrow = true;
};

RowInputs rowInputsOf(const Graph& g, const Shape& d) {
  auto reshapedToDomain = [&](int input) {
    for (int id = 0; id < g.numNodes(); ++id)
      if (g.node(id).op == Op::Reshape && g.node(id).inputs[0] == input && g.node(id).shape == d) return true;
    return false;
  };
  RowInputs r;
  for (int id : g.params())
    if (g.node(id).op == Op::Input && (g.node(id).shape == d || reshapedToDomain(id))) {
      r.bytes += dtypeSize(g.node(id).dtype);
      ++r.count;
      r.narrow = r.narrow && dtypeSize(g.node(id).dtype) == 2;
    }
  r.bytes = std::max(r.bytes, 2);
  return r;
}

}  // namespace

int64_t rowBytesAtMost(const Graph& g, const std::vector<LaunchGeometry::DimRange>& preferred) {
  const Shape d = domainOf(g);
  const Dim& nd = d.back();
  int64_t n = nd.isStatic() ? nd.size : 0;
  for (const LaunchGeometry::DimRange& r : preferred)
    if (nd.isDynamic() && r.dim == nd.name && r.max < std::numeric_limits<int64_t>::max()) n = r.max;
  return n * rowInputsOf(g, d).bytes;
}

namespace {
// Blocks of `threads` threads for two rounds of the GPU's SMs (each SM at
// its most threads): rows past these leave held blocks a later row to
// fetch ahead (RowConfig::l2Prefetch).
int64_t twoRoundsOfBlocks(const CompileOptions& options, int threads) {
  return 2 * static_cast<int64_t>(options.smCount) * (kMaxThreadsPerSm / threads);
}

RowConfig baseRowHeuristic(const Graph& g, const CompileOptions& options, bool gridTail,
                           std::vector<LaunchGeometry::DimRange>* preferred) {
  RowConfig c;
  Shape d = domainOf(g);
  int minSize = 16;
  for (int id : g.params())
    if (g.node(id).op == Op::Input) minSize = std::min(minSize, dtypeSize(g.node(id).dtype));
  for (const GraphOutput& o : g.outputs()) minSize = std::min(minSize, dtypeSize(g.node(o.node).dtype));
  c.vector = std::max(1, std::min(8, 16 / minSize));
  const Dim& nd = d.back();
  if (nd.isStatic())
    while (c.vector > 1 && nd.size % c.vector != 0) c.vector /= 2;
  const RowInputs ri = rowInputsOf(g, d);
  const int rowBytes = ri.bytes, rowInputs = ri.count;
  const bool narrow = ri.narrow;
  // Heavy work per value: exp or a variance.
  bool variance = false, exps = false;
  for (int id = 0; id < g.numNodes(); ++id) {
    const Op op = g.node(id).op;
    variance = variance || op == Op::Var || op == Op::Std;
    exps = exps || op == Op::Exp;
  }
  const bool heavy = exps || variance;
  // Few long rows reduced to one value each, which the planner could not
  // cut into parts (splitLongReductions reshapes a static length that a
  // power of two divides; a whole tensor of dynamic or odd length stays one
  // row): each row split across S blocks (config split), S the most with
  // rows x S at most eight blocks of 512 threads per SM (two waves of
  // four), parts of at least 4096 values where the length is static. One
  // block per row read such a row at one SM's pace. Measured on the H200
  // (2026-12-02, session 23 calls 2-3, x.sum() of 32768x4096 values as one
  // dynamic dim, TB/s): f32 0.099 on one block, 4.030 (256 blocks), 4.037
  // and 3.926 (512), 4.059 and 3.973 (1024); bf16 (scalar loads: a dynamic
  // length) 0.044, 2.825, 2.910 and 2.832, 3.036 and 2.979; unroll 16, 4 or
  // 256 and 1024 threads were slower.
  int64_t splitRows = 1;
  for (size_t a = 0; a + 1 < d.size() && splitRows > 0; ++a) splitRows = d[a].isStatic() ? splitRows * d[a].size : 0;
  if (!gridTail && splitRows >= 1 && splitRows * 2 <= options.smCount && streamsOnce(g, d) && !stridedRows(g)) {
    int64_t S = 1;
    while (splitRows * S * 2 <= 8 * static_cast<int64_t>(options.smCount) && S * 2 <= 1024 &&
           (nd.isDynamic() || nd.size / (S * 2) >= 4096))
      S *= 2;
    if (S > 1) {
      c.persistent = false;
      c.threadsPerRow = c.threads = 512;
      c.unroll = c.vector == 1 ? 8 : 4;  // scalar loads: more of them in flight
      c.split = static_cast<int>(S);
      // Three blocks per SM: left alone, ptxas gives the vectorized loop
      // 86 registers (one block per SM); at the cap of 42 it spills nothing.
      c.minBlocks = 3;
      return c;
    }
  }
  if (nd.isDynamic()) {
    // Looped at the dtypes' vector width (the vectorized entry runs where
    // the length is a multiple of it: LaunchGeometry::vectorMultiples; the
    // scalar entry elsewhere), 128 threads per row, 4 vectors per thread per
    // step, the passes before the last keeping the row in L2 (evict 1), as
    // the static heuristic does for rows of 4096. Measured on the H200
    // (2026-12-02, session 23 calls 5-6, 32768 x N = 4096, TB/s; softmax /
    // rmsnorm f32, then bf16): 4.03 / 4.14, 4.14 / 4.11 (static kernels
    // 4.25 / 4.26, 4.16 / 4.14); 512 threads without hints 2.80 / 2.06,
    // 1.64 / 2.18; 256 threads with hints 4.25 / 4.06, 2.65 / 3.41; 128
    // without 3.45 / 3.88, 3.77 / 3.86; scalar loads at 512 (before session
    // 23) 2.96 / 3.00, 1.55 / 1.83.
    c.persistent = false;
    c.threadsPerRow = c.threads = 128;
    c.unroll = 4;
    if (streamsOnce(g, d)) {
      // One pass, nothing written along the row (a sum, cross_entropy): no
      // pass reads the row again, so neither hints nor the row's length
      // matter; as the static heuristic, a grid tail's heavy rows loop over
      // rows (once-per-block signals). Measured on the H200 (2026-12-02,
      // session 24 calls 8-9, cross_entropy 8192 x N = 32768 bf16): 3.27
      // TB/s at 512 threads with hints (the row-length rule), 3.84 so; the
      // static kernel 3.87.
      c.plainRowLoop = gridTail && heavy;
      return c;
    }
    if (smNumber(options.chip) >= 80) c.evict = 1;
    const auto hint = options.dimHints.find(nd.name);
    const int64_t n = hint == options.dimHints.end() ? 0 : hint->second;
    // A row that one step covers, at the vectors per thread a static row of
    // one step takes (heavy and f32 rows 4, light 16-bit ones 2, divided
    // among several row-shaped inputs), takes the one-step entry
    // (RowConfig::oneStep: its passes' loads of the same vectors meet, as a
    // static row's of one step do: layernorm reads the row twice instead of
    // three times), at the static rule's threads (the row over those
    // vectors, 128 to 256 for heavy rows, to 512 for light ones), with the
    // fewest vectors that cover the hint (1 without one). The range: the
    // lengths these cover and half as many do not (powers of two, as
    // dimHintClass). Measured on the H200 (2026-12-02, session 25 calls
    // 1-3, TB/s, the loop before -> the one-step entry): 32768 x 4096
    // softmax / rmsnorm / layernorm f32 4.04 / 4.15 / 4.05 -> 4.25 / 4.25 /
    // 4.25 (static 4.24 / 4.26 / 4.25), bf16 4.14 / 4.12 / 3.43 -> 4.18 /
    // 4.14 / 3.80; 16384 x 8192 rmsnorm bf16 3.97 -> 4.15 (512 threads),
    // softmax bf16 3.99 -> 3.97. Heavy rows at 512 threads lost: softmax
    // f32 8192 4.17 (looped at 256) -> 4.04, bf16 16384 4.09 -> 2.27 and
    // layernorm bf16 16384 3.07 -> 2.41 (69-75 registers: one block per SM).
    const bool lightF32 = !heavy && rowInputs == 1 && rowBytes == 4;
    const int64_t u = lightF32 ? 2 : std::max(1, (heavy || !narrow ? 4 : 2) / std::max(1, rowInputs));
    const int64_t maxT = heavy ? 256 : 512;
    const int64_t oneStepMax = maxT * c.vector * u;
    if (c.evict && n <= oneStepMax) {
      const int64_t T = std::clamp<int64_t>(nextPow2((n + u * c.vector - 1) / (u * c.vector)), 128, maxT);
      const int64_t k = std::clamp<int64_t>(nextPow2((n + T * c.vector - 1) / (T * c.vector)), 1, u);
      c.threadsPerRow = c.threads = static_cast<int>(T);
      c.oneStep = static_cast<int>(k);
      const int64_t cap = T * c.vector * k;
      if (preferred) preferred->push_back({nd.name, cap == 128 * c.vector ? 0 : cap / 2 + 1, cap});
      return c;
    }
    // Threads a row by the row's bytes (the launch's length as a hint,
    // CompileOptions::dimHints; the facade builds the variant for a launch
    // outside the range named here): the blocks that fit at once (2048
    // threads per SM) should read rows that fit in about half of L2, or the
    // last pass reads its row from DRAM again. Up to 16 KB a row (bytes
    // per value: the row-shaped inputs', a power of two) 128 threads, up to
    // 32 KB 256, longer 512 (1024 measured slower). Measured on the H200
    // (2026-12-02, session 24 calls 1-2, TB/s, softmax / rmsnorm; 128, 256,
    // 512 threads):
    //   f32  N = 8192 (16384 rows):  3.42 / 3.82, 4.18 / 4.20, 4.00 / 2.86
    //   f32  N = 16384 (8192 rows):  2.83 / 3.11, 3.72 / 3.95, 4.18 / 3.85
    //   bf16 N = 8192:               3.99 / 3.98, 3.98 / 4.13, 2.14 / 3.04
    //   bf16 N = 16384:              3.35 / 3.37, 4.08 / 4.03, 3.55 / 3.87
    //   N = 32768 (4096 rows), f32 then bf16: 128 threads 2.65 / 2.68,
    //   2.76 / 2.72; 512 3.79 / 4.02, 3.76 / 4.01 (1024: 3.42 / 3.93, 2.35
    //   / 3.36; the static kernels 4.06 / 4.18, 3.98 / 4.07);
    //   N = 262144 f32 (1024 rows): 2.57 / 2.47 at 128, 2.72 / 2.79 at 512
    //   (the static kernels hold the row in clusters: 3.98 / 4.01).
    // Longer rows than the one-step branch covers loop.
    const int64_t bytesPerValue = nextPow2(rowBytes);
    const int64_t upTo128 = kDynamicRowBytes128 / bytesPerValue, upTo256 = kDynamicRowBytes256 / bytesPerValue;
    const int64_t upTo512 = kDynamicRowBytes512 / bytesPerValue;
    const int64_t upToCluster8 = kDynamicRowBytesCluster8 / bytesPerValue;
    const int64_t upToCluster16 = kDynamicRowBytesCluster16 / bytesPerValue;
    LaunchGeometry::DimRange range{nd.name, 0, upTo128};
    if (n > upTo256) {
      c.threadsPerRow = c.threads = 512;
      // Two ranges at 512 threads: rows up to 64 KB, whose kernel the
      // occupancy rebuild (compile.cpp) may give more blocks per SM, and
      // longer ones, which keep one.
      range = n > upTo512 ? LaunchGeometry::DimRange{nd.name, upTo512 + 1, std::numeric_limits<int64_t>::max()}
                          : LaunchGeometry::DimRange{nd.name, upTo256 + 1, upTo512};
      // Exps on 4-wide vectors: 8 vectors a step (call 5, two rounds, f32
      // TB/s, unroll 8 vs 4: softmax N = 32768 4.00 / 3.99 vs 3.79 / 3.78,
      // 16384 4.21 / 4.21 vs 4.20 / 4.20, 262144 2.71 / 2.71 vs 2.73 /
      // 2.72; rmsnorm lost 3-4% at 8, bf16 softmax at 32768 2.89 vs 3.74).
      if (exps && c.vector <= 4) c.unroll = 8;
      // Rows of more than 256 KB (sm_90): a looped cluster of C blocks
      // each of whose parts is about 64 KB (C = 8 up to 512 KB, 16 beyond),
      // two blocks per SM, so that the rows' parts in flight (264 x 64 KB)
      // stay in L2 for the second pass, where whole rows (132 of 1 MB) do
      // not. Measured on the H200 (2026-12-03, session 31 calls 2-3,
      // 1024 x N = 262144 f32, TB/s, softmax / rmsnorm): one block per row
      // 2.72 / 2.79; clusters of 16 at 512 threads 3.24 / 3.28 with
      // min_blocks 2, 2.52 / 2.48 without; of 8 3.06 / 3.02; 256 threads
      // 3.21 / 3.20, 1024 2.09 / 2.47 (the static kernel holds the row in
      // clusters of 16: 3.97 / 4.00).
      if (smNumber(options.chip) >= 90 && n > upToCluster8) {
        c.cluster = n > upToCluster16 ? 16 : 8;
        c.minBlocks = 2;
        range = c.cluster == 16
                    ? LaunchGeometry::DimRange{nd.name, upToCluster16 + 1, std::numeric_limits<int64_t>::max()}
                    : LaunchGeometry::DimRange{nd.name, upToCluster8 + 1, upToCluster16};
      } else if (n > upTo512 && smNumber(options.chip) >= 90) {
        range.max = upToCluster8;
      }
    } else if (n > upTo128) {
      c.threadsPerRow = c.threads = 256;
      range = {nd.name, upTo128 + 1, upTo256};
    }
    if (c.evict) range.min = std::max(range.min, oneStepMax + 1);
    if (preferred) preferred->push_back(range);
    return c;
  }
  const int64_t N = nd.size;
  // Looped form: 4 vectors (64 B) per thread per step in flight.
  c.unroll = 4;
  // Rows whose values are strided in memory while consecutive rows are
  // adjacent (a reduction over a non-last axis: the planner's permuted
  // view): one thread per row, so a warp's loads read 32 adjacent values of
  // 32 rows (coalesced), several loads in flight per thread.
  int64_t staticRows = 1;  // -1: a dynamic row count
  for (size_t a = 0; a + 1 < d.size() && staticRows >= 0; ++a) staticRows = d[a].isStatic() ? staticRows * d[a].size : -1;
  if (streamsOnce(g, d) && !nd.isDynamic() && stridedRows(g)) {
    c.vector = 1;
    c.persistent = false;
    c.threadsPerRow = 1;
    c.threads = 128;
    c.unroll = 8;
    // Each thread owns several adjacent rows (lanes): one load reads the
    // lanes' values at a column, up to 16 bytes of the widest input, as
    // long as at least 12 warps per SM remain (rows / lanes threads); and
    // each step has about 128 bytes per thread in flight (unroll 4 to 16).
    // Inductor's outer reductions give a thread adjacent columns the same
    // way. Measured on the H200 (2026-12-01, session 18 calls 1-2; ncu,
    // first kernel, us, not flushed; 32768x4096 split into 64 parts):
    //   sum(0) bf16: lanes 1 81.7, lanes 4 61.8 (x16) / 64.7 (x8) / 62.5 (x4),
    //     lanes 8 67.4 (x8: 7.75 warps per SM);
    //   sum(r*x,0) bf16: lanes 1 169.3, lanes 4 119.8 (x8) / 120.5 (x16) /
    //     125.2 (x4), lanes 8 120.2;
    //   sum(0) f32: lanes 1 123.0, lanes 2-8 119.5-122.7;
    // the partials' kernel (4096 rows of 64): 2.4-3.5 us in every form
    // but lanes 8 (5 us: 512 threads).
    int bytesPerColumn = 0;
    for (int id : g.params())
      if (g.node(id).op == Op::Input) bytesPerColumn += dtypeSize(g.node(id).dtype);
    // Few rows (a column reduction of few outputs, which the planner leaves
    // whole): each tile of rows split across S blocks (config split), S the
    // most with rows x S at most 262144 threads and parts of at least 256
    // values, as the planner's two kernels of parts had (session 18).
    int64_t S = 1;
    if (!gridTail && staticRows > 0 && staticRows < 65536) {
      while (staticRows * S * 2 <= 262144 && N / (S * 2) >= 256) S *= 2;
      // A short reduction (the column-partial sums: 512 parts of 4096
      // columns) leaves too few threads that way (8192: 512 KB of loads in
      // flight, latency-bound): split further, to about 512 threads per SM,
      // into equal parts of whole steps (of unroll 16 or fewer), at least
      // 32 values (two steps).
      // Measured on the H200 (session 39 call 4, sum(0) f32, us, L2
      // flushed; before -> after): [512, 4096] 11.9 -> 8.7 (split 2 -> 16),
      // [1024, 1024] 16.8 -> 7.7 (2 -> 32), [8192, 1024] 22.5 -> 18.0 (16 ->
      // 64); the norm gradients at 32768 x 4096 (their partials' sum):
      // rmsnorm bf16 216.4 -> 213.3, layernorm bf16 238.8 -> 231.4, rmsnorm
      // f32 414.5 -> 411.2 (call 3 -> call 4).
      while (staticRows * S * 2 <= 512 * static_cast<int64_t>(options.smCount) && N % (S * 2 * 16) == 0 &&
             N / (S * 2) >= 32)
        S *= 2;
    }
    c.split = static_cast<int>(S);
    // Left alone, nvJitLink gives the split kernel about 254 registers (its
    // part loop's loads and the merge's, hoisted: two blocks per SM); six
    // blocks of 128 threads per SM cap it at 80, what the planner's kernel
    // of parts had, without spills.
    if (S > 1) c.minBlocks = 6;
    c.lanes = maxLanes(g, d);
    while (c.lanes > 1 && staticRows > 0 && staticRows * S / c.lanes < 384 * static_cast<int64_t>(options.smCount))
      c.lanes /= 2;
    c.unroll = static_cast<int>(std::clamp<int64_t>(128 / std::max(1, bytesPerColumn * c.lanes), 4, 16));
    return c;
  }
  if (streamsOnce(g, d)) {
    // Nothing is written along the row and one pass computes everything:
    // stream the row (no registers held), a few 16-byte loads per thread
    // per step, and small blocks so that many rows are in flight per SM.
    // 128 threads per row: measured best for cross-entropy (2.96 vs 1.87 TB/s
    // at 8192x32768 with 512) and equal for sums (same sweep).
    // Light rows of wider inputs (f32 sums) up to 32768 values: 256 threads.
    // Measured on the H200 (2026-12-04, session 34 call 3, three rounds
    // interleaved, us, sum(-1) f32): 32768x4096 130.5-130.6 at 128, 129.8-
    // 129.9 at 256 (torch.compile 130.3 in call 2: 512 threads, one row a
    // block); 4096x32768 130.9-131.0 -> 130.4-130.5; but 1024x262144
    // 249.4-249.6 -> 254.0-256.2, so longer rows keep 128. 512 threads lost
    // at 4096x32768 (134.6-134.9 at unroll 2) and at 32768x4096 with unroll 4
    // (135.4-135.7). The parts of whole f32 tensors gain too (call 4,
    // 32768x4096 in rows of 4096, grid tail): sum 133.6-134.2 -> 132.5-132.6,
    // sum(x*x) 134.8-135.8 -> 132.8-133.0 (3.95-3.98 -> 4.04 TB/s).
    const int64_t maxT = !heavy && !narrow && N <= 32768 ? 256 : 128;
    int64_t T = std::clamp<int64_t>(nextPow2((N + c.vector * c.unroll - 1) / (c.vector * c.unroll)), 32, maxT);
    c.persistent = false;
    c.threadsPerRow = c.threads = static_cast<int>(T);
    // A grid tail (cross_entropy's mean) over rows of up to 32768 values:
    // the blocks that fit at once loop over the rows (row_loop), so that
    // the tail's gpu-scope fence and counter atomic come once per block
    // instead of once per row. Measured on the H200 (2026-12-01, session 15,
    // cross_entropy bf16, us, L2 flushed): 8192x32768 141.1 -> 138.2 and
    // 140.6 -> 138.7 (call 1), with an fma form of the exps (since taken
    // back; it made no difference here) 140.1 -> 138.0 and 137.6 (call 2;
    // not flushed 133.0 -> 129.0), but 140.2 and 140.5 against 140.7 with
    // row_loop 0 in call 3; 8192x128256, whose rows are 4x longer, lost:
    // 475.0 -> 477.6 and 477.5. Without a tail row loops lose
    // (sum bf16 32768x4096 67.8 -> 71.6, f32 128.0 -> 129.3: a block barrier
    // per row).
    // Only with heavy work per value (exps): a whole tensor's bf16 sum in
    // parts (a grid tail, 4096 rows of 32768) measured 74.1 and 73.7 us with
    // the loop, 70.4 and 70.7 without (session 16 call 3; f32 at 128
    // threads: 134.1 vs 133.9 us, call 2).
    c.plainRowLoop = gridTail && heavy && N <= 32768;
    // No L2 hints (evict) here: evict_first on one pass measured 1.3-3.3%
    // faster for sum bf16 4096x32768 at 256 and 512 threads (session 8 call
    // 10), but with this heuristic's 128 threads (call 11) sums of f32 lost
    // 4-7% (32768x4096 4.12 -> 3.94 TB/s, 1024x262144 4.31 -> 4.01) and bf16
    // gained 0.4-2.7%, which kiln's exported cubin under do_bench did not
    // confirm (3.57 TB/s at 4096x32768).
    // Except a light row of 16-bit inputs of at least 256 threads x 2
    // vectors: read with evict_first (L1 and L2) in steps of a whole row up
    // to 512 threads x 8 vectors (256 threads where 512 x 8 would pass the
    // row's end). Measured on the H200 (TB/s; f32 sums and cross_entropy
    // lose at 512 threads: 3.99-4.10, 2.1-2.9):
    //   sum bf16 4096x32768, 512 x 8 (2026-12-01, session 10 calls 2, 5):
    //     3.88, 3.87, 3.87 vs 3.70-3.80 at 128 x 4;
    //   sum bf16 32768x4096, 256 x 2 (session 10 call 2, session 12 call 1):
    //     3.97, 3.88, 3.97 vs 3.76 at 128 x 4 (256 x 1: 3.94; 256 x 4: 3.89-3.95;
    //     512 threads: 3.54).
    if (!heavy && rowInputs > 0 && narrow && smNumber(options.chip) >= 80 && N % (256 * 2 * c.vector) == 0) {
      const int64_t t = N % (512 * 8 * c.vector) == 0 ? 512 : 256;
      int u = 2;
      while (u < 8 && N % (t * c.vector * u * 2) == 0) u *= 2;
      c.threadsPerRow = c.threads = static_cast<int>(t);
      c.unroll = u;
      c.evict = 1;
    }
    return c;
  }
  // About two vectors per thread; the row stays in registers while a thread
  // holds at most 32 values.
  // 512 threads at most unless the row needs 1024 to stay in registers
  // (a 1024-thread block caps a thread at 64 registers).
  // The row stays in registers while a thread of a block of at most 512
  // holds at most 64 values. Measured on the H200 (2026-11-30, bench/results/
  // 2026-11-30-b3c3bc4-sweep): at 4096x32768, 512 threads x 64 values beat
  // 1024 x 32 (bf16 softmax 3.24 vs 2.90 TB/s, rmsnorm 3.91 vs 3.43; f32
  // equal or better), and held rows beat the looped form.
  // Several row-shaped inputs (residual add) are all held: at most 64
  // registers of raw row data per thread.
  auto valuesPerThread = [&](int64_t t) { return (N + t * c.vector - 1) / (t * c.vector) * c.vector; };
  auto fits = [&](int64_t t) { return valuesPerThread(t) <= 64 && valuesPerThread(t) * rowBytes <= 256; };
  // A variance (layernorm) wants about four vectors per thread: its two
  // dependent block reductions and the pass between them cost more with
  // more threads. Measured on the H200 (2026-11-30, tuner sweeps in
  // bench/results/2026-11-30-tuning): layernorm 32768x4096 f32 262.9 us
  // with 256 threads vs 327.7 with 512, bf16 133.2 (128) vs 143.5 (256);
  // softmax and rmsnorm keep two vectors (f32 softmax 256.7 us with 512
  // threads vs ~263 with 256).
  const int64_t perThread = (variance ? 4 : 2) * c.vector;
  int64_t T = std::clamp<int64_t>(nextPow2((N + perThread - 1) / perThread), 1, 512);
  // A short row that one step of at most 512 threads covers loops instead of
  // being held (sm_80+): one step per pass, the first passes keeping the row
  // in the L2 (and L1) cache for the next (evict; a variance in two passes,
  // mean then squared deviations), as Inductor's looped reductions do.
  // Heavy rows (exp, a variance) and f32 rows take 4 vectors per thread,
  // light 16-bit ones 2, divided among several row-shaped inputs (light f32
  // rows of one input: see lightF32 below). Measured
  // on the H200 (2026-11-30, session 9 calls 2-3, 32768x4096, TB/s, held ->
  // looped): rmsnorm bf16 3.97 -> 4.10 (256 threads x 2), residual add +
  // rmsnorm bf16 4.07 -> 4.27 (512 x 1), layernorm bf16 4.05 -> 4.12 (128 x
  // 4), softmax bf16 3.98 -> 4.00 (128 x 4), layernorm f32 4.10 -> 4.25 (256
  // x 4); with L1 priorities too (session 10 call 5) softmax bf16 4.16.
  // Fewer rows than one wave of such blocks (a static row count) stay held:
  // latency rules there, and a held row is read once (session 8, graph
  // replay at 512x4096 bf16: softmax 3.2 us held; session 9: 3.7 looped).
  // f32 rows too since the hinted loads carry the same L1 priority
  // (session 10 call 6, 32768x4096 f32, TB/s, held -> looped 256 x 4):
  // softmax 4.13 -> 4.22, rmsnorm 4.16 -> 4.20 (with the L2 hint alone they
  // measured slower looped: 3.97 and 4.03-4.15). Light f32 rows take 4
  // vectors too (rmsnorm f32 512 x 2: 4.03).
  // A light f32 row of one input keeps 2 vectors per thread on the
  // coherent path (evict 2): rmsnorm f32 32768x4096 at 512 x 2 measured 4.23
  // and 4.24 TB/s there (session 10 calls 5-6) vs 4.20 at 256 x 4 and 4.00-
  // 4.03 at 512 x 2 on ld.global.nc.
  const bool lightF32 = !heavy && rowInputs == 1 && rowBytes == 4;
  // Held because the rows are few (the small batches): their single read
  // of the row is evict_first (evict 1). Measured on the H200 (kernel time
  // after the L2 flush, us; 2026-12-02, session 22 call 7 and session 23
  // call 3): bf16 512x4096 rmsnorm 2.976 -> 2.944 and 2.976 -> 2.912,
  // softmax 3.168 -> 3.105 and 3.168 -> 3.104; 64x4096 rmsnorm 1.503 ->
  // 1.472 and 1.472 -> 1.472, softmax 1.664 -> 1.664 and 1.632 -> 1.664.
  bool heldForFewRows = false;
  if (smNumber(options.chip) >= 80 && rowInputs > 0) {
    const int u = lightF32 ? 2 : std::max(1, (heavy || !narrow ? 4 : 2) / rowInputs);
    const int64_t span = static_cast<int64_t>(u) * c.vector;
    const int64_t t = N / span;
    const bool fewRows = staticRows >= 0 && t > 0 && staticRows < static_cast<int64_t>(options.smCount) * (kMaxThreadsPerSm / t);
    const bool loopable = N % span == 0 && isPow2(t) && t >= 128 && t <= 512;
    heldForFewRows = loopable && fewRows;
    // An f32 row of 4096 values of one input, written back whole, without a
    // variance (softmax, rmsnorm), with rows for more than two rounds of
    // blocks: held at 512 threads x 8 values instead, where rowHeuristic
    // adds the L2 fetch ahead. Measured on the H200 (2026-12-02, session 28
    // call 5, 32768x4096, us, two rounds, loop -> held + fetch): softmax
    // 254.5, 254.4 -> 252.9, 252.5; rmsnorm 253.6, 253.9 -> 252.4, 253.0
    // (layernorm f32 level at 256 threads, slower at 512; bf16 rows mixed;
    // read-only rows 8-12% slower held with the fetch, session 28 call 4);
    // session 29 call 2, three rounds: softmax 252.8-253.1 -> 252.0-252.1,
    // rmsnorm level (252.5-253.0 -> 252.5-252.6).
    if (loopable && !fewRows && rowBytes == 4 && rowInputs == 1 && !variance && writesRows(g, d) && c.vector == 4 &&
        N == 512 * 2 * c.vector && staticRows > twoRoundsOfBlocks(options, 512)) {
      c.persistent = true;
      c.unroll = 4;
      c.threadsPerRow = c.threads = 512;
      return c;
    }
    if (loopable && !fewRows) {
      c.persistent = false;
      c.evict = lightF32 ? 2 : 1;
      c.unroll = u;
      // Heavy rows take at most 256 threads (two steps where one step
      // would take 512): at 512 their one step took 68-77 registers, one
      // block per SM. Measured on the H200 (2026-12-02, session 25 call 7,
      // TB/s, 512 threads -> 256): softmax bf16 N = 16384 2.19 -> 4.10,
      // layernorm bf16 16384 2.24 -> 3.79, layernorm f32 8192 2.74 -> 4.12
      // (min_blocks 2 at 512: 3.50, 3.69, 4.16); the dynamic softmax f32
      // 8192 loops at 256 at 4.17-4.20 (static at 512: 4.07).
      c.threadsPerRow = c.threads = static_cast<int>(heavy ? std::min<int64_t>(t, 256) : t);
      return c;
    }
  }
  // Fewer rows than half the SMs, each of at least 64 KB (a softmax over a
  // vocabulary for a few sequences): one block per row would leave most SMs
  // idle and read each row at one SM's pace, so on sm_90+ each row is split
  // across a cluster of C blocks (the most, up to 8, with rows x C <= SMs),
  // each holding its part at about perThread values per thread.
  if (smNumber(options.chip) >= 90 && !gridTail && staticRows >= 1 && staticRows * 2 <= options.smCount &&
      N * rowBytes >= 65536) {
    for (int C = 8; C >= 2; C /= 2) {
      if (staticRows * C > options.smCount || N % (static_cast<int64_t>(C) * c.vector) != 0) continue;
      const int64_t part = N / C;
      const int64_t t = std::clamp<int64_t>(nextPow2((part + perThread - 1) / perThread), 64, 512);
      const int64_t vpt = (part + t * c.vector - 1) / (t * c.vector) * c.vector;
      if (vpt > 64 || vpt * rowBytes > 256) continue;
      c.cluster = C;
      c.persistent = true;
      c.threadsPerRow = c.threads = static_cast<int>(t);
      return c;
    }
  }
  // Longer rows than 512 threads hold: on sm_90+, split the row across a
  // cluster of C blocks of 512 threads (the same per-block shape as the
  // 512 x 64 rows measured best above), each holding N/C columns; the row
  // is then read once instead of two or three times by the looped form.
  if (!fits(T) && smNumber(options.chip) >= 90) {
    // Values a thread of a 512-thread block holds of a part.
    auto partValues = [&](int64_t parts) { return partValuesPerThread(N, parts, 512, c.vector); };
    auto fitsPart = [&](int64_t parts) {
      const int64_t vpt = partValues(parts);
      return N % (parts * c.vector) == 0 && vpt <= 64 && vpt * rowBytes <= 256;
    };
    for (int parts = 2; parts <= 8; parts *= 2)
      if (fitsPart(parts)) {
        c.cluster = parts;
        c.persistent = true;
        c.threadsPerRow = c.threads = 512;
        // A part that fills the block's registers (256 bytes a thread: one
        // block per SM, whose loads and passes take turns) goes to 16
        // blocks of half that, two per SM (min_blocks 2), so one block's
        // loads overlap the other's exchange and stores; compile() rebuilds
        // it as 8 blocks where the 64-register cap spills (layernorm's
        // Welford with a bias). Measured on the H200 (session 19, call 3,
        // f32 1024x262144): softmax 3.76 -> 3.96 TB/s, rmsnorm 3.78-3.81 ->
        // 3.97-3.99; layernorm at the cap spills 80 bytes, 3.30 vs 3.71.
        if (parts == 8 && partValues(parts) * rowBytes == 256 && N % (16 * c.vector) == 0) {
          c.cluster = 16;
          c.minBlocks = 2;
        }
        return c;
      }
  }
  // A row that fills a 512-thread block's registers (more than 32 values
  // per thread: one block per SM, so its loads and its passes take turns)
  // and has heavy per-element work (exp, a variance) is staged instead
  // (sm_90+): copied into shared memory by bulk copies, several blocks per
  // SM, one block's passes overlapping another's copy. Measured on the H200
  // (2026-11-30, bench/results/2026-11-30-session7 runs 2-3, bf16
  // 4096x32768): softmax 3.69 TB/s staged (512 threads, unroll 2) vs 3.24
  // held; layernorm 3.25 staged (two-pass variance) vs 3.20 held; rmsnorm,
  // light per element, 3.67 staged vs 3.89 held, so it stays held.
  // A variance instead stays held, with the next row prefetched by a bulk
  // copy while the block reduces this one (held rows need no second read of
  // shared memory for the mean and the variance). Measured on the H200
  // (2026-11-30, session 8 call 1, bf16 4096x32768): layernorm 3.46 TB/s
  // held + prefetch vs 3.28 staged; softmax 3.53 vs 3.74 staged, so softmax
  // stays staged. Elsewhere prefetch measured slower than the plain held
  // form (softmax bf16 32768x4096 3.59 vs 3.98: the blocks' own overlap
  // already hides the reduction, and a bulk copy's row arrives later than
  // the threads' own loads).
  // A light row of one 16-bit input that fills a 512-thread block (rmsnorm
  // bf16 at 32768: one block per SM, 121 registers) loops instead, 4
  // vectors per thread per step, the first pass keeping the row in L2 for
  // the second (evict). Measured on the H200 (2026-11-30, session 8 call
  // 10, rmsnorm bf16 4096x32768): 3.98 TB/s looped with hints vs 3.89 held
  // and 3.86 looped without hints (f32 rows stay held: 3.55-3.61 looped vs
  // 4.04 held).
  if (!heavy && rowBytes == 2 && fits(T) && T == 512 && valuesPerThread(T) > 32 && smNumber(options.chip) >= 80) {
    c.persistent = false;
    c.evict = 1;
    c.unroll = 4;
    c.threadsPerRow = c.threads = 512;
    return c;
  }
  // A light f32 row that one step of 1024 threads x at most 8 vectors
  // covers loops with hints too, one step per pass (Inductor's form for
  // rmsnorm f32 at 32768: 32 warps, the whole row per step). Measured on
  // the H200 (2026-12-01, session 10 calls 5-6, rmsnorm f32 4096x32768):
  // 4.16-4.17 TB/s vs 4.05-4.06 held (at 512 threads, before the L2 fetch
  // ahead). Over more rows than two rounds of blocks the row is held at
  // those 1024 threads instead (at most 32 values a thread), where
  // rowHeuristic adds the L2 fetch ahead, as Inductor holds it: session 34
  // call 7 (rmsnorm f32 4096x32768, us, three rounds interleaved): looped
  // 257.4-258.1, held + fetch 256.8-257.1 (torch.compile 256.1-257.2 in
  // calls 2 and 6); held without the fetch 261.9-263.3, held at 512 threads
  // with it 258.1-258.3.
  if (lightF32 && fits(T) && T == 512 && valuesPerThread(T) > 32 &&
      smNumber(options.chip) >= 80 && N % (1024 * c.vector) == 0 && N / (1024 * c.vector) <= 8) {
    c.threadsPerRow = c.threads = 1024;
    if (staticRows > twoRoundsOfBlocks(options, 1024)) {
      c.persistent = true;
      c.unroll = 4;
      return c;
    }
    c.persistent = false;
    c.evict = 1;
    c.unroll = static_cast<int>(N / (1024 * c.vector));
    return c;
  }
  // A heavy row of 16-bit inputs that fills a 512-thread block, whose raw
  // values take at most 32 registers per thread, stays held and packed (the
  // emitter converts each pass's values again from the loaded words), with
  // two blocks per SM (min_blocks 2: at most 64 registers), so one block's
  // loads overlap the other's passes. Measured on the H200 (2026-12-01,
  // session 10 call 1, bf16 4096x32768, TB/s): softmax 3.96 vs 3.67 staged,
  // layernorm 3.93 vs 3.42 held + prefetch; the same held form at one block
  // per SM (127 registers) 2.78 and 2.90.
  if (heavy && rowInputs > 0 && narrow && fits(T) && T == 512 && valuesPerThread(T) > 32 &&
      valuesPerThread(T) * rowBytes <= 128) {
    c.persistent = true;
    c.threadsPerRow = c.threads = 512;
    c.minBlocks = 2;
    return c;
  }
  if (heavy && fits(T) && T == 512 && valuesPerThread(T) > 32 && smNumber(options.chip) >= 90 &&
      stagedRowBytes(g, d) <= kMaxStagedRowBytes) {
    c.threadsPerRow = c.threads = 512;
    if (variance) {
      c.persistent = true;
      c.prefetch = 1;
      return c;
    }
    c.persistent = false;
    c.stage = true;
    c.unroll = 2;
    return c;
  }
  if (!fits(T) && fits(1024)) T = 1024;
  // A variance over f32 rows that 512 threads hold at 17-32 values each
  // loops with hints instead (held, layernorm took 114 registers: one block
  // per SM). Measured on the H200 (2026-12-02, session 25 call 7, layernorm
  // f32 8192 x 16384): 3.81 TB/s held, 4.02 looped at 512 x 4 with hints.
  if (variance && !narrow && T == 512 && fits(T) && valuesPerThread(T) > 16 && valuesPerThread(T) <= 32 &&
      !heldForFewRows && smNumber(options.chip) >= 80) {
    c.persistent = false;
    c.evict = 1;
    c.unroll = 4;
    c.threadsPerRow = c.threads = 512;
    return c;
  }
  c.persistent = fits(T);
  if (!c.persistent) T = 512;
  c.threadsPerRow = static_cast<int>(T);
  c.threads = T >= 32 ? static_cast<int>(T) : 128;
  if (c.persistent && heldForFewRows) c.evict = 1;
  return c;
}

// How far ahead a held row's block has the L2 fetch a later row
// (l2_prefetch): the rows that make up about 6 MB of row-shaped inputs.
constexpr int64_t kL2AheadBytes = 6 << 20;

// Whether `c` is a held row of one block a row (what l2_prefetch serves).
bool heldOneRowPerBlock(const RowConfig& c) {
  return c.persistent && c.cluster == 1 && !c.stage && !c.prefetch && c.split == 1 && c.threadsPerRow >= 32 &&
         c.threads == c.threadsPerRow;
}

// The rows of domain `d` (every axis but the last), or 0 where one is dynamic.
int64_t rowCountOf(const Shape& d) {
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < d.size() && rows > 0; ++a) rows = d[a].isStatic() ? rows * d[a].size : 0;
  return rows;
}

// The rows about kL2AheadBytes of row-shaped inputs make (at least 1), or
// 0 where the rows are known to be that few or fewer, or the row length is
// dynamic.
int64_t l2AheadRows(const Graph& g) {
  const Shape d = domainOf(g);
  if (d.back().isDynamic()) return 0;
  const int64_t ahead = std::max<int64_t>(1, kL2AheadBytes / (d.back().size * rowInputsOf(g, d).bytes));
  const int64_t rows = rowCountOf(d);
  return rows == 0 || rows > ahead ? ahead : 0;
}
}  // namespace

// The base heuristic, then: a held row of one block per row (more rows
// than the distance and than two rounds of blocks) has the L2 fetch the row
// about 6 MB of row-shaped inputs ahead (RowConfig::l2Prefetch), so that
// the blocks dispatched next find their rows on the way. Measured on the
// H200 (2026-12-02, session 27 call 4, heuristic before -> after, TB/s, two
// rounds): softmax bf16 4096x32768 3.97 -> 4.04-4.06, layernorm bf16 3.94
// -> 4.00, softmax f32 4.06 -> 4.17, layernorm f32 3.97 -> 4.12-4.13,
// softmax f32 8192x16384 4.09 -> 4.15, rmsnorm f32 8192x16384 4.12 ->
// 4.23-4.24, rmsnorm bf16 8192x16384 4.05 -> 4.15, rmsnorm f32 16384x8192
// 4.15 -> 4.26. In call 3, the best distances held 4-6 MB of rows (8.6 MB
// for two cases); about 13 MB lost 10-25% (the L2 drops the rows before
// their blocks read them).
RowConfig rowHeuristic(const Graph& g, const CompileOptions& options, bool gridTail,
                       std::vector<LaunchGeometry::DimRange>* preferred) {
  RowConfig c = baseRowHeuristic(g, options, gridTail, preferred);
  if (smNumber(options.chip) < 80 || gridTail || !heldOneRowPerBlock(c)) return c;
  // Rows for two rounds of blocks at an SM's threads, at least: fewer
  // all start at once (the small batches), with nothing to fetch ahead.
  const int64_t rows = rowCountOf(domainOf(g));
  if (rows == 0 || rows > twoRoundsOfBlocks(options, c.threads)) c.l2Prefetch = l2AheadRows(g);
  return c;
}

// Whether a row-shaped input is read in 16-byte vectors at width `v`, so
// that the staged and prefetch forms copy it (RowEmitter::stagedAccess).
static bool copiesWhole(const Graph& g, int v) {
  const Shape d = domainOf(g);
  for (int id : g.params())
    if (g.node(id).op == Op::Input && g.node(id).shape == d && v * dtypeSize(g.node(id).dtype) == 16) return true;
  return false;
}

using AddConfig = std::function<void(const RowConfig&)>;

// Looped configs like `base` (its vector width and flags) at each of `ts`
// threads per row × `us` vectors per thread per step.
static void addLoops(RowConfig base, const std::vector<int>& ts, const std::vector<int>& us, const AddConfig& add) {
  base.persistent = false;
  for (int t : ts)
    for (int u : us) {
      RowConfig c = base;
      c.threadsPerRow = c.threads = t;
      c.unroll = u;
      add(c);
    }
}

// The staged form's configs (sm_90+, rows that fit in shared memory twice
// per SM): 256 and 512 threads, one or two vectors per thread per step.
static void addStaged(const Graph& g, const RowConfig& h, int sm, const AddConfig& add) {
  const Shape d = domainOf(g);
  if (sm < 90 || d.back().isDynamic() || h.cluster > 1) return;
  if (stagedRowBytes(g, d) > kMaxStagedRowBytes || stagedRowBytes(g, d) == 0) return;
  RowConfig staged;
  staged.vector = h.vector;
  staged.stage = true;
  addLoops(staged, {256, 512}, {1, 2}, add);
}

std::vector<std::string> rowSpace(const Graph& g, const RowConfig& h, int sm) {
  std::vector<std::string> out;
  // Held rows of one block a row fetch ahead into the L2 as the
  // heuristic's held row does (RowConfig::l2Prefetch), at its distance.
  auto add = [&](const RowConfig& given) {
    RowConfig c = given;
    if (h.l2Prefetch > 0 && heldOneRowPerBlock(c) && c.l2Prefetch == 0) c.l2Prefetch = h.l2Prefetch;
    std::string j = c.json();
    if (std::find(out.begin(), out.end(), j) == out.end()) out.push_back(std::move(j));
  };
  add(h);
  const Dim nd = domainOf(g).back();
  if (h.split > 1 && h.threadsPerRow >= 32)
    // A split row: as many blocks per row and a quarter to twice as many,
    // at 256 and 512 threads, 4 or 8 vectors per step.
    for (int S = std::max(2, h.split / 4); S <= std::min(1024, 2 * h.split); S *= 2)
      for (int t : {256, 512})
        for (int u : {4, 8}) {
          RowConfig c = h;
          c.split = S;
          c.threadsPerRow = c.threads = t;
          c.unroll = u;
          add(c);
        }
  auto looped = [&](int v, const std::vector<int>& ts, const std::vector<int>& us) {
    RowConfig c;
    c.vector = v;
    addLoops(c, ts, us, add);
  };
  if (nd.isDynamic()) {
    for (int v : h.vector > 1 ? std::vector<int>{h.vector, 1} : std::vector<int>{1})
      looped(v, {128, 256, 512, 1024}, {1, 2, 4});
    if (h.cluster > 1 && sm >= 90)
      // The heuristic's looped cluster (long rows): half and twice the
      // blocks, 256 and 512 threads, with and without min_blocks 2, at the
      // heuristic's unroll and half of it.
      for (int cl = std::max(2, h.cluster / 2); cl <= std::min(16, h.cluster * 2); cl *= 2)
        for (int t : {256, 512})
          for (int mb : {0, 2})
            for (int u : {h.unroll, std::max(1, h.unroll / 2)}) {
              RowConfig c = h;
              c.cluster = cl;
              c.threadsPerRow = c.threads = t;
              c.minBlocks = mb;
              c.unroll = u;
              add(c);
            }
    return out;
  }
  const int64_t N = nd.size;
  std::vector<int> vectors{h.vector};
  if (h.vector >= 4) vectors.push_back(h.vector / 2);
  const int64_t vecs = (N + h.vector - 1) / h.vector;
  if (h.threadsPerRow == 1 && !h.persistent) {
    // The column form: block sizes, loads in flight and every lane count
    // up to maxLanes.
    const int most = maxLanes(g, domainOf(g));
    for (int lanes = 1; lanes <= most; lanes *= 2)
      for (int threads : {64, 128, 256})
        for (int u : {4, 8, 16}) {
          RowConfig c = h;
          c.threads = threads;
          c.unroll = u;
          c.lanes = lanes;
          add(c);
        }
    // Split across blocks: half and twice the parts, and without the
    // register cap.
    if (h.split > 1) {
      for (int S : {h.split / 2, h.split * 2}) {
        RowConfig c = h;
        c.split = std::clamp(S, 1, 1024);
        add(c);
      }
      RowConfig c = h;
      c.minBlocks = 0;
      add(c);
    }
  }
  if (!h.persistent) {
    // The heuristic streams (or the row is too long to hold): loop shapes.
    for (int v : vectors) {
      std::vector<int> ts;
      for (int t = 32; t <= 512; t *= 2)
        if (t == 32 || t <= nextPow2((N + v - 1) / v)) ts.push_back(t);
      looped(v, ts, {2, 4, 8});
    }
    if (h.evict) {
      // A row the heuristic loops over although a block could hold it
      // (short rows; light 16-bit rows of 64 values per thread): the held
      // form at every block size that holds it (at most 64 values per
      // thread), and the loop with L2 hints at 128 to 512 threads.
      // Each also with the L2 fetch ahead (l2_prefetch) where the rows
      // outnumber its distance: held rows of 4096 values at 32768 rows,
      // against the heuristic's loop (2026-12-02, session 28 call 5, us, two
      // rounds): softmax f32 at 512 threads 254.5, 254.4 -> 252.9, 252.5;
      // rmsnorm f32 at 512 253.6, 253.9 -> 252.4, 253.0; rmsnorm bf16 at
      // 256 130.0, 130.3 -> 129.3, 129.1; layernorm bf16 and residual +
      // rmsnorm slower, the others level.
      const int64_t ahead = l2AheadRows(g);
      for (int t = 64; t <= 1024; t *= 2) {
        RowConfig c;
        c.vector = h.vector;
        c.persistent = true;
        c.threadsPerRow = c.threads = t;
        if ((vecs + t - 1) / t * h.vector > 64 || t / 2 >= vecs) continue;
        add(c);
        if (ahead > 0 && sm >= 80) {
          c.l2Prefetch = ahead;
          add(c);
        }
      }
      // Both load paths (rmsnorm f32 32768x4096 at 512 x 2: 4.03 TB/s on
      // ld.global.nc, 4.23 on ld.global; session 10 calls 5-6), and 1024
      // threads (the heuristic's light f32 rows).
      RowConfig hinted;
      hinted.vector = h.vector;
      hinted.evict = 1;
      addLoops(hinted, {128, 256, 512, 1024}, {1, 2, 4, 8}, add);
      hinted.evict = 2;
      addLoops(hinted, {256, 512}, {2, 4}, add);
    }
    addStaged(g, h, sm, add);
    return out;
  }
  // Rows held in registers: every block size that holds the row with at
  // most 64 values per thread, for both vector widths; and the looped form
  // at the heuristic's width.
  for (int v : vectors) {
    const int64_t rowVecs = (N + v - 1) / v;
    for (int64_t t = 1; t <= 1024; t *= 2) {
      if ((rowVecs + t - 1) / t * v > 64) continue;
      if (t > 1 && t / 2 >= rowVecs) break;  // more threads than vectors
      RowConfig c;
      c.vector = v;
      c.persistent = true;
      c.threadsPerRow = static_cast<int>(t);
      c.unroll = h.unroll;
      for (int threads : t >= 32 ? std::vector<int>{static_cast<int>(t)} : std::vector<int>{128, 256}) {
        c.threads = threads;
        add(c);
      }
    }
  }
  // Clusters (sm_90+): the row split over C blocks of 128 to 512 threads
  // that each hold their part in registers, looping over rows or not
  // (16 blocks: a non-portable cluster size, which Hopper allows).
  if (sm >= 90)
    for (int cl = 2; cl <= 16; cl *= 2)
      for (int t : {128, 256, 512}) {
        const int v = h.vector;
        if (N % (static_cast<int64_t>(cl) * v) != 0) continue;
        const int64_t partVecs = N / cl / v;
        const int64_t perThread = partValuesPerThread(N, cl, t, v);
        if (perThread > 64 || t / 2 >= partVecs) continue;
        RowConfig c;
        c.vector = v;
        c.persistent = true;
        c.threadsPerRow = c.threads = t;
        c.unroll = h.unroll;
        c.cluster = cl;
        add(c);
        // Two blocks per SM where a part takes at most half the registers.
        if (t == 512 && perThread <= 32) {
          c.minBlocks = 2;
          add(c);
          c.minBlocks = 0;
        }
        c.rowLoop = false;  // one cluster per row
        add(c);
        c.rowLoop = true;
        c.prefetch = 1;
        if (copiesWhole(g, v)) add(c);
      }
  // Prefetch (sm_90+): the held rows of one block per row at 128 threads
  // and more, looping over rows with the next row copied in behind.
  if (sm >= 90)
    for (size_t i = 0, n = out.size(); i < n; ++i) {
      RowConfig c;  // defaults for the keys a config's JSON leaves out (cluster 1, no stage, no prefetch)
      applyRowOverride(c, out[i]);
      if (!c.persistent || c.cluster > 1 || c.threadsPerRow < 128 || c.threads != c.threadsPerRow || c.prefetch ||
          !copiesWhole(g, c.vector))
        continue;
      c.prefetch = 1;
      add(c);
    }
  std::vector<int> ts;
  for (int t = 64; t <= 512; t *= 2)
    if (t == 64 || t <= nextPow2(vecs)) ts.push_back(t);
  looped(h.vector, ts, {1, 2, 4});
  addStaged(g, h, sm, add);
  return out;
}

void applyRowOverride(RowConfig& c, const std::string& text) {
  applyIntegerOverrides(text, "row_reduction",
                        "threads_per_row: power of two <= 1024; threads: multiple of 32 in [32, 1024]; vector: 1, "
                        "2, 4, 8; persistent: 0 or 1; unroll: 1..16; cluster: 1, 2, 4, 8, 16 (sm_90+); row_loop: 0 or 1; "
                        "stage: 0 or 1 (sm_90+); prefetch: 0, 1 or 2 (sm_90+); evict: 0, 1 or 2; min_blocks: 0..32; resident: 0 or 1; "
                        "lanes: 1, 2, 4, 8, 16; max_blocks: >= 0 (row loops); split: power of two <= 1024; welford: 0 or 1; "
                        "one_step: 0 or a power of two <= 16 (dynamic row lengths); l2_prefetch: rows ahead, 0..1048576 "
                        "(held rows, sm_80+)",
                        [&](const std::string& key, int64_t v) {
                          if (key == "threads_per_row" && isPow2(v) && v <= 1024) c.threadsPerRow = static_cast<int>(v);
                          else if (key == "threads" && v >= 32 && v <= 1024 && v % 32 == 0) c.threads = static_cast<int>(v);
                          else if (key == "vector" && (v == 1 || v == 2 || v == 4 || v == 8)) c.vector = static_cast<int>(v);
                          else if (key == "persistent" && (v == 0 || v == 1)) c.persistent = v == 1;
                          else if (key == "unroll" && v >= 1 && v <= 16) c.unroll = static_cast<int>(v);
                          else if (key == "cluster" && isPow2(v) && v <= 16) c.cluster = static_cast<int>(v);
                          else if (key == "row_loop" && (v == 0 || v == 1)) c.rowLoop = c.plainRowLoop = v == 1;
                          else if (key == "stage" && (v == 0 || v == 1)) c.stage = v == 1;
                          else if (key == "prefetch" && v >= 0 && v <= 2) c.prefetch = static_cast<int>(v);
                          else if (key == "min_blocks" && v >= 0 && v <= 32) c.minBlocks = static_cast<int>(v);
                          else if (key == "evict" && v >= 0 && v <= 2) c.evict = static_cast<int>(v);
                          else if (key == "resident" && (v == 0 || v == 1)) c.resident = v == 1;
                          else if (key == "lanes" && isPow2(v) && v <= 16) c.lanes = static_cast<int>(v);
                          else if (key == "max_blocks" && v >= 0) c.maxBlocks = v;
                          else if (key == "split" && isPow2(v) && v <= 1024) c.split = static_cast<int>(v);
                          else if (key == "welford" && (v == 0 || v == 1)) c.welford = v == 1;
                          else if (key == "one_step" && (v == 0 || (isPow2(v) && v <= 16))) c.oneStep = static_cast<int>(v);
                          else if (key == "l2_prefetch" && v >= 0 && v <= (int64_t{1} << 20)) c.l2Prefetch = v;
                          else return false;
                          return true;
                        });
}

namespace {

// The longest row (in values) the row schedule takes: its loops count a
// row's values in 32-bit integers and look up to a step (at most 1024
// threads x 8 x 16 values) past the current one.
constexpr int64_t kMaxRowLength = (int64_t{1} << 31) - (int64_t{1} << 18);

// Refuses a static row over kMaxRowLength, naming the reduction; a dynamic
// one becomes a bound the launcher checks.
void rowLengthBound(const Graph& g, const Dim& n, const std::string& what,
                    std::vector<LaunchGeometry::DimBound>& bounds) {
  if (n.isDynamic()) {
    bounds.push_back({n.name, kMaxRowLength, what});
    return;
  }
  if (n.size <= kMaxRowLength) return;
  std::string op = "reduction";
  for (int id = 0; id < g.numNodes(); ++id)
    if (isReduction(g.node(id).op)) {
      op = std::string(opName(g.node(id).op));
      break;
    }
  throw Error("kiln: compile: " + op + " over " + std::to_string(n.size) + " " + what +
              ": the row_reduction schedule takes at most " + std::to_string(kMaxRowLength) +
              " (it counts them with 32-bit integers); split the reduction into parts of fewer values (reshape "
              "and reduce twice)");
}

}  // namespace

// A column-partial block's row loop has the L2 fetch rows ahead of the
// next row's copy (l2_prefetch in the part's row loop): about this many
// bytes of row-shaped inputs per SM, shared by its blocks. Measured on the
// H200 (session 39 call 1, 32768 x 4096, two blocks per SM, rows ahead:
// us), rmsnorm's gradients in bf16 (16 KB of dy and x a row): none 240.4,
// 1 232.4, 2 217.0, 4 250.1; layernorm's bf16: 252.2, 246.1, 239.2, 261.5;
// rmsnorm's f32 (32 KB a row): 444.3, 414.5, 444.7, 586.3. Without it a
// block waits for each row's copy (ncu, f32: 67% of a warp's stalls on the
// scoreboard); too far ahead, the L2 drops rows before their copy (f32 at
// 2 rows read 8% more from DRAM). Call 2, two rounds: 2 rows (bf16) and 1
// (f32), this rule: 216.9 / 216.4, 238.8 / 238.5, 414.7 / 414.4; 3 rows
// 230.0, 245.2, 524.2; 128 threads at three blocks per SM 260.6, 345.7,
// 481.5.
constexpr int64_t kColumnPartialAheadBytes = 64 * 1024;

// The form of a row kernel with column partials (the planner's
// fuseColumnPartials), whatever the config asked: held rows, one row at a
// time per block, every block looping over its own part of the rows (the
// sums of a thread's columns stay in registers across them), on sm_90 with
// the next row copied into shared memory while the block works on this one.
// Two vectors a thread per row where the row allows, at most 512 threads;
// two blocks per SM where a thread's values per row (the row's inputs and
// the sums, per slot and lane) fit in half its registers then, else one.
// Measured on the H200 (session 38, 32768 x 4096, us): without the
// prefetch, rmsnorm's gradients in bf16 at 512 threads 297.4 (call 4; 2.72
// TB/s in call 2), with it 240.6; layernorm's bf16 at 256 threads 249.8, at
// 512 (one vector, two blocks at 64 registers) 362.5, 512 with one block
// 423.3; rmsnorm's bf16 at 256 237.1, f32 (512 threads, two vectors) 440.6
// against 439.6 at 256; three blocks of 256 (85 registers) 264-277 (bf16).
static void columnPartialForm(const Graph& g, const Shape& d, int sm, RowConfig& c) {
  if (d.back().isDynamic()) throw Error("kiln: internal: column partials over rows of a dynamic length");
  const int64_t n = d.back().size;
  c.persistent = true;
  c.cluster = 1;
  c.split = 1;
  c.lanes = 1;
  c.stage = false;
  c.plainRowLoop = false;
  c.l2Prefetch = 0;
  c.oneStep = 0;
  c.maxBlocks = 0;
  c.prefetch = sm >= 90 ? 1 : 0;
  if (c.prefetch) c.evict = 0;  // bulk copies carry no L2 hints
  c.vector = std::max(1, c.vector);
  while (c.vector > 1 && n % c.vector != 0) c.vector /= 2;
  int t = 32;
  while (t < 512 && int64_t{2} * t * c.vector < n) t *= 2;
  c.threadsPerRow = c.threads = t;
  int64_t values = 0;  // per slot and lane: the row's inputs and the sums
  for (int id : g.params()) values += g.node(id).op == Op::Input && g.node(id).shape == d;
  for (const GraphOutput& o : g.outputs()) values += columnPartialOperand(g, o.node) >= 0;
  const int64_t perThread = values * ((n + int64_t{t} * c.vector - 1) / (int64_t{t} * c.vector)) * c.vector;
  c.minBlocks = perThread * t <= kRegistersPerSm / 4 ? 2 : 0;
  // The L2 fetches the part's rows ahead of the copy (l2_prefetch), about
  // kColumnPartialAheadBytes of row-shaped inputs per SM, whole rows, at
  // least one.
  if (c.prefetch) {
    const int64_t rowBytes = n * rowInputsOf(g, d).bytes;
    c.l2Prefetch = std::max<int64_t>(1, kColumnPartialAheadBytes / std::max(1, c.minBlocks) / rowBytes);
  }
}

RowKernel emitRowReduction(const Graph& g, const RowConfig& config, const std::string& name, EntryVariants variants,
                           int sm, const Graph* tail, const std::string& tailCounter) {
  RowConfig c = config;
  const Shape d = domainOf(g);
  if (c.cluster > 1 && sm < 90)
    throw Error("kiln: compile: row_reduction config \"cluster\": " + std::to_string(c.cluster) +
                " needs thread-block clusters (sm_90 or newer); the target is sm_" + std::to_string(sm));
  if (c.cluster > 1) {
    // A cluster splits a held row into equal whole-vector parts, one block
    // each; where that cannot be, one block per row. A looped row of a
    // dynamic length splits at launch, into parts of whole steps (the last
    // shorter), as a split row's (a config only: not the heuristic's or
    // the tuner's yet, its GPU tests have not run).
    int v = std::max(1, c.vector);
    while (v > 1 && d.back().isStatic() && d.back().size % v != 0) v /= 2;
    const bool dynamicLoop = d.back().isDynamic() && !c.persistent;
    if ((!dynamicLoop && (d.back().isDynamic() || d.back().size % (static_cast<int64_t>(c.cluster) * v) != 0)) ||
        c.threadsPerRow <= 32)
      c.cluster = 1;
    else
      c.threads = c.threadsPerRow;
  }
  if (c.persistent && d.back().isStatic()) {
    // A persistent row must fit in registers: fall back to the loop.
    int64_t per = static_cast<int64_t>(c.threadsPerRow) * std::max(1, c.vector);
    if ((d.back().size / c.cluster + per - 1) / per * c.vector > 64) {
      c.persistent = false;
      c.cluster = 1;
    }
  }
  if (c.stage && sm < 90)
    throw Error("kiln: compile: row_reduction config \"stage\": 1 needs bulk copies (TMA, sm_90 or newer); the "
                "target is sm_" + std::to_string(sm));
  // Staging is a looped form with one row per block and a static row.
  if (c.stage && (c.persistent || c.cluster > 1 || c.threadsPerRow < 32 || d.back().isDynamic())) c.stage = false;
  if (c.prefetch && sm < 90)
    throw Error("kiln: compile: row_reduction config \"prefetch\": 1 needs bulk copies (TMA, sm_90 or newer); the "
                "target is sm_" + std::to_string(sm));
  if (c.evict && sm < 80)
    throw Error("kiln: compile: row_reduction config \"evict\": 1 needs L2 cache policies (createpolicy, sm_80 or "
                "newer); the target is sm_" + std::to_string(sm));
  // Eviction hints: the looped form's passes over global memory, or a held
  // row's single read (evict_first); not rows copied by bulk copies.
  if (c.evict && (c.stage || c.prefetch)) c.evict = 0;
  // Prefetching is a persistent form with one row (part) per block.
  if (c.prefetch && (!c.persistent || c.stage || c.threadsPerRow < 32 || d.back().isDynamic())) c.prefetch = 0;
  if (c.prefetch && c.cluster > 1) c.rowLoop = true;
  // A plain row loop: one block per row, not staged (prefetch loops anyway).
  if (c.plainRowLoop && (c.cluster > 1 || c.stage || c.prefetch || c.threadsPerRow < 32)) c.plainRowLoop = false;
  if (c.threadsPerRow < 32 && (c.threads % 32 != 0 || c.threads < 32)) c.threads = 128;
  // Lanes: the column form (one thread per row, looped, no cluster, row
  // loop, staging or grid tail) whose rows the lanes divide along the
  // next-to-last axis (prepare() also asks for one pass and no gathers).
  if (c.lanes > 1) {
    const bool fit = c.threadsPerRow == 1 && !c.persistent && c.cluster == 1 && !c.stage && !c.prefetch &&
                     !c.plainRowLoop && !tail && d.size() >= 2 && d[d.size() - 2].isStatic() &&
                     d[d.size() - 2].size % c.lanes == 0;
    if (!fit) c.lanes = 1;
    else c.evict = 0;  // the hints are for 16-byte loads along a row
  }
  // A split row (see RowConfig::split): the looped form, one block per row
  // part of at least 64 threads (the flag and the trees in shared memory),
  // or the column form (one thread per row, no vectors along it, a static
  // row length: the parts per tile of rows are the kernel's constant), a
  // static row count (the workspace's size), nothing else that shapes the
  // grid; one pass, so no L2 hints.
  if (c.split > 1) {
    bool staticRows = true;
    for (size_t a = 0; a + 1 < d.size(); ++a) staticRows = staticRows && d[a].isStatic();
    const bool rowForm = c.threadsPerRow >= 64 && c.lanes == 1;
    const bool columnForm = c.threadsPerRow == 1 && c.threads >= 32 && c.vector == 1 && d.back().isStatic();
    const bool fit = !c.persistent && c.cluster == 1 && !c.stage && !c.prefetch && !c.plainRowLoop &&
                     (rowForm || columnForm) && !tail && staticRows;
    if (!fit) c.split = 1;
    else c.evict = 0;
  }
  // One-step rows (see RowConfig::oneStep): a looped, hinted row of a
  // dynamic length, one block per row part of at least 32 threads, or a
  // cluster's (each block one step of its part) (prepare() also asks for
  // several passes, no Welford state and no gathers).
  if (c.oneStep > 0) {
    const bool fit = d.back().isDynamic() && !c.persistent && !c.stage && !c.prefetch &&
                     c.split == 1 && c.lanes == 1 && c.threadsPerRow >= 32 && c.evict != 0 && !c.welford && !tail;
    if (!fit) c.oneStep = 0;
  }
  // L2 prefetch (see RowConfig::l2Prefetch): a held row, one row per block
  // of at least 32 threads, no cluster, row loop, staging, prefetch or
  // split. (Looped rows measured slower with it, session 27 call 4: sums
  // by 15-45%, whose resident blocks already read the rows it fetched.)
  if (c.l2Prefetch > 0 && sm < 80)
    throw Error("kiln: compile: row_reduction config \"l2_prefetch\": " + std::to_string(c.l2Prefetch) +
                " needs L2 prefetches with eviction priorities (sm_80 or newer); the target is sm_" + std::to_string(sm));
  if (c.l2Prefetch > 0 && (!heldOneRowPerBlock(c) || c.plainRowLoop)) c.l2Prefetch = 0;
  if (tail) {
    // The tail runs on one block's threads (a power of two for its tree),
    // after every block's rows: clusters loop over rows, nothing is staged
    // (the flag and the tail's trees reuse shared memory from offset 0).
    if (c.threadsPerRow < 32 && !isPow2(c.threads)) c.threads = 128;
    if (c.cluster > 1) c.rowLoop = true;
    c.stage = false;
    c.prefetch = 0;
  }
  // A row's values (and a grid tail's rows) are counted with 32-bit
  // integers: static lengths over the bound fail here, dynamic ones at launch.
  std::vector<LaunchGeometry::DimBound> bounds;
  rowLengthBound(g, d.back(), "values in a row", bounds);
  if (tail) rowLengthBound(*tail, domainOf(*tail).back(), "rows (its grid tail reduces one value per row)", bounds);
  if (hasColumnPartials(g)) columnPartialForm(g, d, sm, c);
  RowEmitter e(g, c);
  if (tail) e.setTail(tail, tailCounter);
  RowKernel rk = e.run(name, variants);
  // L2 eviction priorities on createpolicy and prefetch need PTX ISA 7.4;
  // the lowest ISA of sm_80 and sm_86 is older (sm_89 and up: 7.8).
  if ((c.evict || c.l2Prefetch) && rk.ptxFeatures.empty() && sm < 89) rk.ptxFeatures = "+ptx74";
  rk.kernel.launch.dimBounds = std::move(bounds);
  return rk;
}

}  // namespace kiln::compiler
