// Internal: graph → CompiledGraph through the disk cache (runtime/
// disk_cache.h). The key hashes everything that changes the artifacts: the
// canonical graph text, every compile option (chip, cubin route, entry
// variants, kept text, config overrides; the schedules and their configs
// follow from these and from kiln's version), kiln's version (the commit
// of this build), the LLVM version and the CUDA toolkit's version. An entry
// holds the whole CompiledGraph: kernel names, ABI, launch geometry,
// resource reports, compile times, PTX (and MLIR when kept) and cubins.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kiln/compiler/compile.h"
#include "kiln/dsl/graph.h"

namespace kiln::detail {

std::string cacheKey(const Graph& g, const compiler::CompileOptions& options);

std::vector<uint8_t> serializeCompiled(const compiler::CompiledGraph& cg);
// False (with the reason) when the bytes are not a CompiledGraph this build
// can read.
bool deserializeCompiled(std::span<const uint8_t> bytes, compiler::CompiledGraph& cg, std::string& why);

}  // namespace kiln::detail
