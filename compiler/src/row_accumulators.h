// Internal: the accumulators of the row-reduction schedule, as MLIR text.
// An accumulator is what one thread carries along its share of a row (a
// running sum, max, (value, first index), (count, mean, M2), (max, rescaled
// sum) ...); this unit knows each kind's identity, how a chunk of lanes
// folds into it, how two states merge (the same merge serves the
// cross-thread tree, so results are deterministic), and the tree itself:
// warp butterflies, then the warps' partials through shared memory.
#pragma once

#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "mlir_writer.h"

namespace kiln::compiler {

enum class AccKind { Sum, Prod, Max, Min, ArgMax, ArgMin, Welford, Lse, SqDev };

// One accumulator: what a thread carries along its share of a row.
struct Acc {
  AccKind kind = AccKind::Sum;
  int node = -1;     // the reduction node (Lse: the sum)
  int maxNode = -1;  // Lse: the paired max
  int operand = -1;  // reduced node, seen through the identity frame
  DType type = DType::F32;  // the accumulation dtype (compute type of it)
  int level = 0;
  std::vector<std::string> types;  // MLIR types of the components
  // Persistent variance in two passes over registers: a hidden sum (node -1)
  // gives the mean, then SqDev sums the squared deviations from it.
  int meanAcc = -1;                // SqDev: index of its hidden sum in accs_
  int meanNode = -1;               // Welford: a mean node of the same operand it also gives
  // Welford: every thread of a row accumulates the same number of values
  // (a static row that the threads, vectors and cluster blocks divide), so
  // a state received from another thread or block has this one's count:
  // the trees use their own count instead (a constant where it is static)
  // and merge equal counts in the symmetric form, without a division.
  bool equalCounts = false;
};

// How a row's threads are laid out, for the cross-thread tree.
struct RowThreads {
  int threadsPerRow = 32;
  std::string lane32;  // i32: lane in the warp
  std::string warp;    // i32: warp in the row
  std::string smem;    // !llvm.ptr<3>: the dynamic shared memory (T > 32)
  // How threads read the warps' partials: false: each reads all T/32 and
  // merges them in warp order; true: lane l reads warp (l mod T/32)'s and a
  // butterfly over T/32 lanes merges them (one load per component: fewer
  // registers next to a held row; merges are commutative, so every lane
  // gets the same bits).
  bool butterflyRead = false;
};

// The state before any element.
std::vector<std::string> identity(MlirWriter& w, const Acc& a);
// Two states merged (x first: for ties, x holds the earlier columns).
std::vector<std::string> merge(MlirWriter& w, const Acc& a, const std::vector<std::string>& x,
                               const std::vector<std::string>& y);
// Folds one chunk of lanes (consecutive columns `cols`, i32, used by
// argmax/argmin) into the state `s`; `valid` (i1, or empty: always) says
// whether the chunk is inside the row; `mean` is SqDev's mean.
std::vector<std::string> accumulate(MlirWriter& w, const Acc& a, const std::vector<std::string>& s,
                                    const std::vector<std::string>& xs, const std::vector<std::string>& cols,
                                    const std::string& valid, const std::string& mean);
// The whole row's state in every thread of the row. `slot` counts the
// shared-memory slots used so far (each component of each accumulator gets
// its own, so one barrier per level suffices).
std::vector<std::string> crossThread(MlirWriter& w, const Acc& a, std::vector<std::string> s, const RowThreads& rt,
                                     int& slot);
// A row split across a cluster of blocks (sm_90+): what the exchange needs.
struct ClusterThreads {
  int cluster = 2;       // C: blocks per row (a cluster along x)
  std::string tid;       // i32: thread in the block (= in the row)
  std::string lane32;    // i32: lane in the warp
  std::string rank;      // i32: the block's rank in the cluster
  std::string exchange;  // !llvm.ptr<3>: this row's exchange region (8-byte entries)
  // Asynchronous pushes (set: mbarHere non-empty): st.async into the peers'
  // entries completes bytes on each peer's mbarrier of this half (mbarHere,
  // i32 shared address, its phase `parity`, i32), which every thread waits
  // on instead of a cluster barrier; thread 0 first arms its own mbarrier
  // of the other half (mbarNext) for the next row's `bytes`.
  std::string mbarHere, mbarNext, parity;
  int bytes = 0;
};
// The row's states from the block states `s` of accumulators `accs` (one
// exchange for all): each component takes C entries of the exchange region
// (from `entries` on, which it advances); threads 0..C-1 push the block's
// states into entry [rank] of every peer's shared memory
// (st.shared::cluster through mapa, then a cluster barrier: release from
// the pushers' warp, relaxed from the others, acquire; or, with mbarHere,
// st.async completing on the peer's mbarrier, which every thread waits
// on), then lane l of every warp reads entry (l mod C) of its own
// shared memory and a butterfly over C lanes merges them (merges are
// commutative), so every thread of every block of the row gets the same
// bits. The caller keeps entries from being reused while a peer may still
// read them (the row loop alternates two halves of the region), and the
// kernel starts with a cluster barrier, so no block writes to a peer that
// has not started.
std::vector<std::vector<std::string>> clusterMerge(MlirWriter& w, const std::vector<const Acc*>& accs,
                                                   const std::vector<std::vector<std::string>>& s,
                                                   const ClusterThreads& ct, int& entries);

}  // namespace kiln::compiler
