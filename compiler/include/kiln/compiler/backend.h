// The codegen backend: a GPU module (MLIR gpu.module holding gpu.func
// kernels) → PTX with MLIR's NVVM target and libdevice → cubin with ptxas (a
// child process) or nvJitLink (in process), with the resource report kept.
//
// No MLIR or LLVM type appears here: emitters inside compiler/src build a
// GpuModule through the internal header src/mlir_context.h; everything else
// (the facade, tools, tests) only sees this header.
//
// Errors are kiln::Error with the compiler's message (MLIR diagnostics, LLVM
// diagnostics, ptxas / nvJitLink logs). Nothing here writes to stderr or
// ends the process on a bad input.
//
// Threads: compiling different GpuModules on different threads is fine.
// One GpuModule (it owns its MLIR context) is used by one thread at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/compiler/api.h"

namespace kiln::compiler {

// Wall time of one named step, in milliseconds.
struct StageTime {
  std::string name;
  double ms = 0;
};
using StageTimes = std::vector<StageTime>;

// The CUDA toolkit root kiln uses when none is given: $CUDA_HOME if set and
// not empty, else /usr/local/cuda.
KILN_COMPILER_API std::string defaultCudaHome();

// ---------------------------------------------------------------- GpuModule

// One `builtin.module attributes {gpu.container_module}` holding one
// `gpu.module` with the kernels (each a `gpu.func ... kernel`), together with
// the MLIR context that owns it. Move-only.
class KILN_COMPILER_API GpuModule {
 public:
  struct Impl;  // defined in src/mlir_context.h

  GpuModule();
  explicit GpuModule(std::unique_ptr<Impl> impl);
  GpuModule(GpuModule&&) noexcept;
  GpuModule& operator=(GpuModule&&) noexcept;
  ~GpuModule();

  // Parses MLIR text (the form str() prints). kiln::Error with the parser's
  // diagnostics on bad input.
  static GpuModule parse(std::string_view mlirText);

  bool empty() const { return impl_ == nullptr; }
  std::string str() const;                       // MLIR text (for --emit=mlir)
  std::vector<std::string> kernelNames() const;  // the gpu.func kernels

  Impl& impl();
  const Impl& impl() const;

 private:
  std::unique_ptr<Impl> impl_;
};

// --------------------------------------------------------------- MLIR → PTX

struct PtxOptions {
  // The SM the PTX is for: sm_80, sm_86, sm_89, sm_90, sm_90a, sm_100...
  std::string chip = "sm_90";
  // LLVM NVPTX features. Empty: the lowest PTX ISA the chip accepts (7.8 for
  // sm_90, 8.0 for sm_90a). Otherwise "+ptxNN" with NN in 60..90; a value
  // below the chip's minimum is rejected here (LLVM would abort the process).
  std::string features;
  int optLevel = 3;  // LLVM -O level, 0..3
  // LLVM's loop and SLP vectorizers. MLIR's NVVM target always runs them;
  // kiln's emitters write vector code themselves, and on NVPTX they mostly
  // cost optimizer time, so they are off unless asked for.
  bool llvmVectorizers = false;
  // Bit width of MLIR's `index` on the device (convert-gpu-to-nvvm). 64 is
  // safe for any tensor size; 32 makes index arithmetic cheaper where the
  // emitter knows every offset fits. Emitters that address with i64
  // themselves (the kernel ABI passes i64 sizes) are unaffected.
  int indexBitwidth = 64;
  // Toolkit whose nvvm/libdevice/libdevice.10.bc is linked. Empty:
  // defaultCudaHome(). A missing libdevice is a kiln::Error.
  std::string cudaHome;
  // Keep intermediate forms in the result (costs a few prints).
  bool keepLoweredMlir = false;  // after convert-gpu-to-nvvm etc.
  bool keepLlvmIr = false;       // optimized LLVM IR, libdevice linked
};

struct PtxResult {
  std::string ptx;
  std::vector<std::string> kernels;  // .entry names, in module order
  // "verify", "mlir-passes", "llvm-translate", "link-libdevice", "llvm-opt",
  // "llvm-codegen"; the sum is close to totalMs.
  StageTimes stages;
  double totalMs = 0;
  std::string loweredMlir;  // if PtxOptions::keepLoweredMlir
  std::string llvmIr;       // if PtxOptions::keepLlvmIr
};

// Lowers (a copy of) the module: convert-scf-to-cf, convert-gpu-to-nvvm,
// reconcile-unrealized-casts, then the NVVM target serializes it to PTX with
// libdevice linked. The module itself is left as it was. Throws kiln::Error
// on any diagnostic of error severity, and when the PTX still calls an
// unresolved libdevice function (`.extern .func __nv_...`).
KILN_COMPILER_API PtxResult lowerToPtx(const GpuModule& module, const PtxOptions& options = {});

// ------------------------------------------------------------- PTX → cubin

// What ptxas reports for one kernel (an .entry).
// The LLVM/MLIR version kiln's compiler library was built with ("22.1.0").
KILN_COMPILER_API std::string llvmVersion();

struct ResourceReport {
  std::string kernel;
  int registers = 0;        // per thread
  int spillStoreBytes = 0;  // local memory written by spills
  int spillLoadBytes = 0;
  int stackBytes = 0;       // stack frame per thread
  int sharedBytes = 0;      // static shared memory per block
  int barriers = 0;
};

enum class CubinRoute {
  Default,    // ptxas child process; nvJitLink only if no ptxas is found
              // (and never for an "a"/"f" arch such as sm_90a: see
              // shared/notes/ptx-to-cubin.md, nvJitLink crashes on wgmma)
  Ptxas,      // ptxas as a child process: a crash there cannot take us down
  NvJitLink,  // libnvJitLink.so.13, dlopen'ed, in process
};

KILN_COMPILER_API std::string_view routeName(CubinRoute route);  // "ptxas", ...

struct CubinOptions {
  CubinRoute route = CubinRoute::Default;
  int optLevel = 3;                    // ptxas -O
  // ptxas's --Ofast-compile level ("min", "mid", "max"; empty: off). It
  // trades SASS optimization for compile speed and replaces -O.
  std::string fastCompile;
  std::vector<std::string> extraArgs;  // appended to the ptxas / nvJitLink options
  // Toolkit to search first for ptxas (bin/) and nvJitLink (lib64/). Empty:
  // $CUDA_HOME, then the directory next to a loaded libnvrtc, then PATH, then
  // /usr/local/cuda.
  std::string cudaHome;
  int timeoutSeconds = 120;  // ptxas child: killed after this (0 = no limit)
};

struct CubinResult {
  std::vector<char> cubin;              // the ELF image, for cuModuleLoadData
  std::vector<ResourceReport> kernels;  // one per .entry, in ptxas' order
  std::string log;                      // ptxas / nvJitLink info log
  CubinRoute route = CubinRoute::Default;  // the route actually taken
  StageTimes stages;  // ptxas: "write-ptx", "ptxas", "read-cubin"; nvJitLink: "nvjitlink"
  double totalMs = 0;

  // The report for one kernel, or nullptr.
  KILN_COMPILER_API const ResourceReport* kernel(std::string_view name) const;
};

// PTX → cubin for `arch` (sm_90, sm_90a...). kiln::Error with the tool's
// output when it fails or crashes, or when no route is available.
KILN_COMPILER_API CubinResult ptxToCubin(std::string_view ptx, std::string_view arch = "sm_90",
                                         const CubinOptions& options = {});

// The ptxas executable ptxToCubin would run, if any.
KILN_COMPILER_API std::optional<std::string> findPtxas(const std::string& cudaHome = {});
// Whether libnvJitLink.so.13 can be loaded (it stays loaded once it was).
KILN_COMPILER_API bool nvJitLinkAvailable(const std::string& cudaHome = {});

// Parses a ptxas -v / nvJitLink -verbose info log. Exposed for tests and
// tools; ptxToCubin fills CubinResult::kernels with it.
KILN_COMPILER_API std::vector<ResourceReport> parseResourceReport(std::string_view log);

}  // namespace kiln::compiler
