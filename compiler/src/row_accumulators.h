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
};

// How a row's threads are laid out, for the cross-thread tree.
struct RowThreads {
  int threadsPerRow = 32;
  std::string lane32;  // i32: lane in the warp
  std::string warp;    // i32: warp in the row
  std::string smem;    // !llvm.ptr<3>: the dynamic shared memory (T > 32)
  // Blocks per row (a cluster along x, T > 32): after the block's tree,
  // its state goes to its shared memory and every block merges all C
  // blocks' states read through distributed shared memory, in rank order.
  int cluster = 1;
  std::string first;   // i1: the row's thread 0 (cluster > 1)
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
// its own, so one barrier per level suffices; a cluster exchange takes one
// more slot per component).
std::vector<std::string> crossThread(MlirWriter& w, const Acc& a, std::vector<std::string> s, const RowThreads& rt,
                                     int& slot);
// exp for the online log-sum-exp statistic (ex2.approx based).
std::string expF32(MlirWriter& w, const std::string& x);

}  // namespace kiln::compiler
