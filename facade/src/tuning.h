// Internal: the facade's side of tuning. Looks every kernel of a graph up in
// the tuning database, runs the tuner (autotune/tuner.h) with hooks that
// compile, check and time candidates on the GPU, records what it found, and
// keeps the process's counters (kiln::stats()).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/compiler/compile.h"
#include "kiln/kernel.h"

namespace kiln::detail {

struct Counters {
  std::atomic<uint64_t> compiled{0}, fromDiskCache{0}, hits{0}, misses{0}, tuned{0}, benchmarked{0};
};
Counters& counters();

// compiler::compileGraph, counted.
compiler::CompiledGraph countedCompile(const Graph& graph, const compiler::CompileOptions& options);

// Fills co.kernelConfigs from the database (`graphText`: graph.toText(),
// which the caller has already made) (and from tuning runs, as
// options.tune asks). Returns, per kernel, a line for explain(): where its
// config came from.
std::vector<std::string> resolveTuning(const Graph& graph, const std::string& graphText, const CompileOptions& options,
                                       compiler::CompileOptions& co);

}  // namespace kiln::detail
