// Internal: the parts of a kernel's MLIR text every schedule writes the same
// way: the kernel ABI as a gpu.func signature (input pointers no-alias and
// read-only, output pointers no-alias and write-only, then i64 dims, then
// scalars), the function spliced from its entry-block values and body,
// index polynomials over the dims, and which dims a kernel needs.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "frames.h"
#include "kiln/dsl/graph.h"
#include "mlir_writer.h"

namespace kiln::compiler {

// The SM number of a chip name ("sm_90a" -> 90; 0 if it has none).
int smNumber(const std::string& chip);

struct KernelParams {
  std::string signature;                       // "%arg0: !llvm.ptr<1> {...}, ..."
  std::map<int, std::string> argOf;            // input and scalar nodes → their argument
  std::vector<std::string> outputs;            // output pointers, in order
  std::map<std::string, std::string> dimArg;   // dim name → its i64 argument
};
// `readBack`: output indices the kernel also reads (they lose `writeonly`);
// `plain`: no pointer attributes at all (an internal function inlined into
// entries whose own parameters say what holds).
struct ParamOptions {
  std::set<size_t> readBack;
  bool plain = false;
  // false: inputs carry no attributes (NVPTX lowers loads of a no-alias
  // read-only argument to ld.global.nc even without invariant flags; the
  // outputs' no-alias still lets loads move past their stores).
  bool readonlyInputs = true;
};
KernelParams kernelParams(const Graph& g, const std::vector<int>& inputs, size_t numOutputs,
                          const std::vector<std::string>& dims, const std::vector<int>& scalars,
                          const ParamOptions& options = {});

// "gpu.func @entry(signature) kernel ..." with `pre` (entry-block values)
// and `body` spliced in, both written at indent 2.
std::string gpuFuncText(const std::string& entry, const std::string& signature, int threadsPerBlock,
                        const MlirWriter& pre, const MlirWriter& body, int minBlocksPerSM = 0);
// The same as an internal `llvm.func` (a device function LLVM inlines).
std::string internalFuncText(const std::string& name, const std::string& signature, const MlirWriter& pre,
                             const MlirWriter& body);

// The value of `p` in `type` (i32 or i64), computed in `w` from the dims'
// arguments (not memoized: callers keep their own memo).
std::string polyValue(MlirWriter& w, const Poly& p, const std::string& type,
                      const std::map<std::string, std::string>& dimArg);

// The graph's dynamic dims (in its order) that appear in `shapes` or in the
// strides and offsets of `accesses`: the i64 parameters a kernel takes.
std::vector<std::string> usedDims(const Graph& g, const std::vector<Shape>& shapes,
                                  const std::map<std::string, Access>& accesses);

}  // namespace kiln::compiler
