// The tuner's search: one kernel of a graph, a list of candidate configs
// (the schedule's config space, compiler::describeKernels), and hooks that
// compile, check and time a candidate. The search itself is pure host code
// (tests drive it with a fake timer); the facade supplies hooks that run on
// the GPU (kiln::CompileOptions::tune).
//
// The search, in order:
//  1. compile every candidate, in parallel on CPU threads (compile errors
//     drop the candidate, with the message);
//  2. prune from each kernel's resource report, before anything runs:
//     register spills, more registers per block than an SM holds, more
//     shared memory than a block may have;
//  3. check each survivor against the reference (the check hook); a wrong
//     candidate is dropped with a warning on stderr naming its config;
//  4. time each survivor briefly (quickIters runs), then time the best few
//     and the default again in finalRounds rounds, interleaved (finalIters
//     runs each in all; each round starts with the next finalist, so no
//     one always takes a round's first slot);
//  5. the default (the first candidate, the heuristic's choice) is kept
//     unless a finalist was at least minGain faster than it in every round;
//     among those, the fastest (by its best round's median) wins: a tuned
//     config is never a noisy step backwards.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/compiler/compile.h"

namespace kiln::tune {

// What an SM and a block may use (sm_90 by default).
struct ResourceLimits {
  int registersPerSm = 65536;
  int sharedBytesPerBlock = 227 * 1024;
};

// Why a compiled candidate cannot be fast (or cannot launch): nullopt when
// it passes. Looks at every entry of kernel `kernelIndex`.
std::optional<std::string> pruneReason(const compiler::CompiledGraph& cg, int kernelIndex,
                                       const ResourceLimits& limits = {});

struct Timing {
  double medianUs = 0;
  double p95Us = 0;
};

struct Candidate {
  enum class Status { Pending, Ok, CompileError, Pruned, Wrong, RunError };
  std::string config;
  Status status = Status::Pending;
  std::string why;  // for every status but Ok
  int registers = 0;
  int spillBytes = 0;
  double compileMs = 0;
  Timing quick;      // the short timing (every candidate that ran)
  Timing final;      // the finalists' timing (medianUs 0 otherwise)
};
const char* statusName(Candidate::Status s);

struct Progress {
  int done = 0;   // steps finished (a compile, a check, a timing)
  int total = 0;  // steps planned (may grow)
  std::string what;
};

struct SearchHooks {
  // Compiles the graph with `config` for the tuned kernel. Called from
  // several threads at once. Throws kiln::Error on failure.
  std::function<compiler::CompiledGraph(const std::string& config)> compile;
  // Optional: called on the searching thread for every compiled candidate
  // before pruning, to complete what the compile could not report (the
  // facade fills missing resource reports from the driver).
  std::function<void(compiler::CompiledGraph&)> complete;
  // Runs the candidate on the check instance: nullopt when right, else what
  // is wrong. May throw (a launch failure: the candidate is dropped).
  std::function<std::optional<std::string>(const compiler::CompiledGraph&)> check;
  // Times `iters` runs of the candidate (after its own warm-up).
  std::function<Timing(const compiler::CompiledGraph&, int iters)> time;
  std::function<void(const Progress&)> progress;  // optional
  // Where warnings go (default: stderr with a "kiln: tune: " prefix).
  std::function<void(const std::string&)> warn;
};

struct SearchOptions {
  int compileThreads = 0;  // 0: std::thread::hardware_concurrency()
  int quickIters = 10;
  int finalIters = 40;
  int finalists = 3;       // besides the default
  int finalRounds = 3;
  double minGain = 0.01;   // 1%
  ResourceLimits limits;
  std::string kernelName;  // for messages
};

struct SearchResult {
  std::string best;             // the chosen config (a candidate's text)
  bool bestIsDefault = true;
  Timing bestTiming;            // from the final round
  Timing defaultTiming;         // from the final round
  std::vector<Candidate> candidates;  // in the order given
  int compiled = 0;             // candidates compiled
  int benchmarked = 0;          // candidates timed
  double wallMs = 0;
};

// Searches `space` (the default first) for kernel `kernelIndex`. kiln::Error
// when the space is empty or the default itself fails to compile, is pruned
// or is wrong (the heuristic must always work: that is a bug to report).
SearchResult search(const std::vector<std::string>& space, int kernelIndex, const SearchHooks& hooks,
                    const SearchOptions& options = {});

}  // namespace kiln::tune
