// Internal to kiln_compiler: the MLIR side of the backend, for emitters
// (pointwise, reductions...) that build kernels with the MLIR C++ builder.
// This is the only header that includes MLIR; keep it out of public headers
// and include it from as few .cpp files as possible (MLIR compiles slowly).
//
// Typical emitter:
//
//   GpuModule m = detail::createGpuModule("kiln_kernels");
//   auto& ctx = detail::context(m);
//   mlir::OpBuilder b(&ctx);
//   detail::KernelSignature sig;
//   sig.pointers = {{"x", true}, {"y", true}, {"out", false}};
//   sig.sizes = {"n"};
//   sig.blockSize = 256;
//   detail::Kernel k = detail::addKernel(m, "my_kernel", sig, b);
//   // b is now inside the kernel body, before its gpu.return.
//   mlir::Value tid = detail::globalThreadIndex(b, k.loc);
//   ... k.pointers[i], k.sizes[0] ...
//   PtxResult ptx = lowerToPtx(m);
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <mlir/Dialect/GPU/IR/GPUDialect.h>
#include <mlir/IR/Builders.h>
#include <mlir/IR/BuiltinOps.h>
#include <mlir/IR/MLIRContext.h>
#include <mlir/IR/OwningOpRef.h>

#include "kiln/compiler/backend.h"

namespace kiln::compiler {

namespace detail {
// Gives a context back to the pool (createContext) instead of deleting it.
struct ContextRelease {
  void operator()(mlir::MLIRContext* ctx) const;
};
using ContextHandle = std::unique_ptr<mlir::MLIRContext, ContextRelease>;
}  // namespace detail

struct GpuModule::Impl {
  detail::ContextHandle context;             // declared first: outlives the module
  mlir::OwningOpRef<mlir::ModuleOp> module;  // builtin.module {gpu.container_module}
};

namespace detail {

// A context with every dialect, interface and translation kiln's codegen
// needs registered and loaded (arith, math, scf, cf, memref, func, gpu,
// llvm, nvvm, vector, ub), multithreading off, for one module at a time.
// Contexts are pooled: building one and loading its dialects took about
// 1.2 ms of a 27-38 ms cold compile on the 2-core VM, so a released
// context serves the next module (each at most kContextUses times, so that
// the attributes and types it uniques stay bounded). Also initializes the
// NVPTX target once per process.
ContextHandle createContext();

// builtin.module attributes {gpu.container_module} { gpu.module @name {} }
// in a fresh context.
GpuModule createGpuModule(std::string_view gpuModuleName = "kiln_kernels");

mlir::MLIRContext& context(GpuModule& m);
mlir::ModuleOp topModule(GpuModule& m);
// The (first) gpu.module inside; kiln::Error if there is none.
mlir::gpu::GPUModuleOp gpuModule(GpuModule& m);

// The kernel ABI (DESIGN.md): pointers, then i64 sizes, then scalars.
struct PointerParam {
  std::string name;       // for documentation / error messages only
  bool readOnly = true;   // inputs: llvm.noalias + llvm.readonly
                          // outputs: llvm.noalias only
  int alignment = 0;      // > 0: llvm.align (only where the launcher checks it)
};
struct KernelSignature {
  std::vector<PointerParam> pointers;   // !llvm.ptr<1> each
  std::vector<std::string> sizes;       // i64 each
  std::vector<mlir::Type> scalars;      // f32, i32, ... (after the sizes)
  std::optional<int> blockSize;         // known_block_size = [n, 1, 1] (→ .maxntid)
};
struct Kernel {
  mlir::gpu::GPUFuncOp func;
  mlir::Location loc;
  std::vector<mlir::Value> pointers;
  std::vector<mlir::Value> sizes;
  std::vector<mlir::Value> scalars;
};

// Adds `gpu.func @name(...) kernel` to the module's gpu.module, with the
// argument attributes above, an entry block ending in gpu.return, and leaves
// `builder` positioned before that gpu.return.
Kernel addKernel(GpuModule& m, std::string_view name, const KernelSignature& sig,
                 mlir::OpBuilder& builder);

// blockIdx.x * blockDim.x + threadIdx.x, as i64.
mlir::Value globalThreadIndex(mlir::OpBuilder& b, mlir::Location loc);

// Address of element `index` (i64) of type `elementType` from a !llvm.ptr<1>.
mlir::Value elementPointer(mlir::OpBuilder& b, mlir::Location loc, mlir::Value base,
                           mlir::Type elementType, mlir::Value index);

// llvm.load (with `invariant` where the pointer is a read-only input, which
// makes ld.global.nc) and llvm.store; alignment in bytes (0 = natural).
mlir::Value load(mlir::OpBuilder& b, mlir::Location loc, mlir::Type type, mlir::Value ptr,
                 unsigned alignment, bool invariant);
void store(mlir::OpBuilder& b, mlir::Location loc, mlir::Value value, mlir::Value ptr,
           unsigned alignment);

// Lowers `module` in place and serializes its gpu.module to PTX (what
// lowerToPtx does on a copy).
PtxResult lowerModuleToPtx(mlir::ModuleOp module, const PtxOptions& options);

}  // namespace detail
}  // namespace kiln::compiler
