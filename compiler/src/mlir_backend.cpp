// MLIR side of the backend: context and registry, GpuModule, kernel-building
// helpers, the lowering pipeline and the NVVM target serialization to PTX.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <regex>
#include <sstream>
#include <sys/stat.h>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/MC/MCSubtargetInfo.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/TargetParser/Triple.h>

#include <mlir/Conversion/ArithToLLVM/ArithToLLVM.h>
#include <mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h>
#include <mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h>
#include <mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h>
#include <mlir/Conversion/MathToLLVM/MathToLLVM.h>
#include <mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h>
#include <mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h>
#include <mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h>
#include <mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h>
#include <mlir/Conversion/UBToLLVM/UBToLLVM.h>
#include <mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h>
#include <mlir/Dialect/Arith/IR/Arith.h>
#include <mlir/Dialect/ControlFlow/IR/ControlFlow.h>
#include <mlir/Dialect/Func/IR/FuncOps.h>
#include <mlir/Dialect/GPU/IR/CompilationInterfaces.h>
#include <mlir/Dialect/LLVMIR/LLVMDialect.h>
#include <mlir/Dialect/LLVMIR/NVVMDialect.h>
#include <mlir/Dialect/Math/IR/Math.h>
#include <mlir/Dialect/MemRef/IR/MemRef.h>
#include <mlir/Dialect/SCF/IR/SCF.h>
#include <mlir/Dialect/UB/IR/UBOps.h>
#include <mlir/Dialect/Vector/IR/VectorOps.h>
#include <mlir/IR/Diagnostics.h>
#include <mlir/IR/Verifier.h>
#include <mlir/Parser/Parser.h>
#include <mlir/Pass/Pass.h>
#include <mlir/Pass/PassManager.h>
#include <mlir/Target/LLVM/NVVM/Utils.h>
#include <mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h>
#include <mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h>
#include <mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h>
#include <mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h>

#include "mlir_context.h"

namespace kiln::compiler {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0, Clock::time_point t1 = Clock::now()) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

constexpr const char* kNvptxTriple = "nvptx64-nvidia-cuda";

// ----------------------------------------------------------- registration

void initializeLlvmTargetsOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
    // KILN_LLVM_ARGS="-opt1 -opt2": LLVM command-line options for
    // experiments (e.g. NVPTX codegen flags), parsed once per process.
    if (const char* env = std::getenv("KILN_LLVM_ARGS"); env && *env) {
      static std::vector<std::string> args;  // LLVM may keep pointers into them
      args = {"kiln"};
      std::istringstream in(env);
      for (std::string a; in >> a;) args.push_back(a);
      std::vector<const char*> argv;
      for (const auto& a : args) argv.push_back(a.c_str());
      // With an error stream LLVM reports a bad option there and returns
      // false instead of exiting the process.
      if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "kiln", &llvm::errs()))
        throw Error(fmt::format("KILN_LLVM_ARGS: LLVM did not accept the options '{}' (its message is above)", env));
    }
  });
}

// Only what kiln's codegen uses: registering everything makes the library
// several times larger (see shared/GPU.md).
const mlir::DialectRegistry& dialectRegistry() {
  static const mlir::DialectRegistry* registry = [] {
    auto* r = new mlir::DialectRegistry();  // never destroyed: no exit-time order issues
    r->insert<mlir::arith::ArithDialect, mlir::math::MathDialect, mlir::scf::SCFDialect,
              mlir::cf::ControlFlowDialect, mlir::memref::MemRefDialect, mlir::func::FuncDialect,
              mlir::gpu::GPUDialect, mlir::LLVM::LLVMDialect, mlir::NVVM::NVVMDialect,
              mlir::vector::VectorDialect, mlir::ub::UBDialect>();
    // ConvertToLLVMPatternInterface of each dialect: convert-gpu-to-nvvm
    // takes its patterns from the loaded dialects that implement it.
    mlir::arith::registerConvertArithToLLVMInterface(*r);
    mlir::cf::registerConvertControlFlowToLLVMInterface(*r);
    mlir::registerConvertFuncToLLVMInterface(*r);
    mlir::registerConvertMathToLLVMInterface(*r);
    mlir::registerConvertMemRefToLLVMInterface(*r);
    mlir::vector::registerConvertVectorToLLVMInterface(*r);
    mlir::ub::registerConvertUBToLLVMInterface(*r);
    mlir::registerConvertNVVMToLLVMInterface(*r);
    // Translation to LLVM IR.
    mlir::registerBuiltinDialectTranslation(*r);
    mlir::registerLLVMDialectTranslation(*r);
    mlir::registerNVVMDialectTranslation(*r);
    mlir::registerGPUDialectTranslation(*r);
    return r;
  }();
  return *registry;
}

// ------------------------------------------------------------ diagnostics

// Collects MLIR diagnostics (and, through llvmCallback, the LLVMContext's)
// while it lives, so they become a kiln::Error instead of text on stderr.
class DiagnosticCollector {
 public:
  explicit DiagnosticCollector(mlir::MLIRContext* ctx)
      : handler_(ctx, [this](mlir::Diagnostic& d) {
          record(d);
          return mlir::success();
        }) {}

  bool hasErrors() const { return errorCount_ > 0; }
  const std::string& text() const { return text_; }

  void addLlvm(const llvm::DiagnosticInfo& info) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    llvm::DiagnosticPrinterRawOStream printer(os);
    info.print(printer);
    os.flush();
    switch (info.getSeverity()) {
      case llvm::DS_Error:
        ++errorCount_;
        append("error (LLVM)", msg);
        break;
      case llvm::DS_Warning:
        append("warning (LLVM)", msg);
        break;
      default:
        break;  // remarks and notes: not kept
    }
  }

  static void llvmCallback(const llvm::DiagnosticInfo* info, void* self) {
    static_cast<DiagnosticCollector*>(self)->addLlvm(*info);
  }

  [[noreturn]] void fail(const std::string& what) const {
    std::string msg = what;
    if (!text_.empty()) msg += ":\n" + text_;
    throw Error(msg);
  }

 private:
  void record(mlir::Diagnostic& d) {
    const char* sev = "note";
    switch (d.getSeverity()) {
      case mlir::DiagnosticSeverity::Error:
        sev = "error";
        ++errorCount_;
        break;
      case mlir::DiagnosticSeverity::Warning:
        sev = "warning";
        break;
      case mlir::DiagnosticSeverity::Remark:
        sev = "remark";
        break;
      default:
        break;
    }
    std::string msg = where(d.getLocation()) + d.str();
    for (const mlir::Diagnostic& note : d.getNotes())
      msg += "\n    note: " + where(note.getLocation()) + note.str();
    append(sev, msg);
  }
  // "file:line:col: ", "kernel_name: " or "" for an unknown location.
  static std::string where(mlir::Location loc) {
    if (auto f = llvm::dyn_cast<mlir::FileLineColLoc>(loc))
      return fmt::format("{}:{}:{}: ", f.getFilename().str(), f.getLine(), f.getColumn());
    if (auto n = llvm::dyn_cast<mlir::NameLoc>(loc)) return n.getName().str() + ": ";
    if (llvm::isa<mlir::UnknownLoc>(loc)) return "";
    std::string s;
    llvm::raw_string_ostream os(s);
    os << loc << ": ";
    return os.str();
  }
  void append(const char* sev, const std::string& msg) {
    if (!text_.empty()) text_ += '\n';
    text_ += fmt::format("  {}: {}", sev, msg);
  }

  mlir::ScopedDiagnosticHandler handler_;
  std::string text_;
  int errorCount_ = 0;
};

// ---------------------------------------------------------------- options

// The lowest PTX ISA version (×10) LLVM 22 accepts for each chip it knows.
int minimumPtxVersion(const std::string& chip) {
  static const std::pair<const char*, int> table[] = {
      {"sm_70", 60},  {"sm_72", 61},   {"sm_75", 63},   {"sm_80", 70},   {"sm_86", 71},
      {"sm_87", 74},  {"sm_89", 78},   {"sm_90", 78},   {"sm_90a", 80},  {"sm_100", 86},
      {"sm_100a", 86}, {"sm_101", 86}, {"sm_101a", 86}, {"sm_103", 88},  {"sm_103a", 88},
      {"sm_120", 87}, {"sm_120a", 87}, {"sm_121", 88},  {"sm_121a", 88},
  };
  for (const auto& [name, v] : table)
    if (chip == name) return v;
  return -1;
}

void validate(const PtxOptions& o) {
  int minPtx = minimumPtxVersion(o.chip);
  if (minPtx < 0)
    throw Error(fmt::format("lowerToPtx: unsupported chip '{}' (expected sm_70 .. sm_121a, e.g. sm_90)",
                            o.chip));
  if (o.optLevel < 0 || o.optLevel > 3)
    throw Error(fmt::format("lowerToPtx: optLevel {} is not in 0..3", o.optLevel));
  if (o.indexBitwidth != 32 && o.indexBitwidth != 64)
    throw Error(fmt::format("lowerToPtx: indexBitwidth {} must be 32 or 64", o.indexBitwidth));
  if (!o.features.empty()) {
    // LLVM aborts the process (a fatal error, not a diagnostic) on a PTX
    // version the chip does not accept: check it here.
    static const std::regex re(R"(\+ptx([0-9]+))");
    std::smatch m;
    if (!std::regex_match(o.features, m, re))
      throw Error(fmt::format("lowerToPtx: features '{}' not supported (expected empty or \"+ptxNN\")",
                              o.features));
    int v = std::stoi(m[1].str());
    if (v < minPtx || v > 90)
      throw Error(fmt::format("lowerToPtx: {} needs PTX ISA {}.{} .. 9.0, got features '{}'", o.chip,
                              minPtx / 10, minPtx % 10, o.features));
  }
}

std::string libdevicePath(const std::string& cudaHome) {
  return cudaHome + "/nvvm/libdevice/libdevice.10.bc";
}

bool isRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> entryNames(const std::string& ptx) {
  std::vector<std::string> names;
  static const std::regex re(R"(\.entry\s+([A-Za-z_$][A-Za-z0-9_$]*))");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), re); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1].str());
  return names;
}

std::vector<std::string> unresolvedLibdeviceCalls(const std::string& ptx) {
  std::vector<std::string> names;
  static const std::regex re(R"(\.extern\s+\.func\s*(?:\([^)]*\)\s*)?(__nv_[A-Za-z0-9_]+))");
  for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), re); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[1].str());
  if (names.empty() && ptx.find(".extern .func __nv_") != std::string::npos)
    names.push_back("__nv_?");
  return names;
}

// MLIR's NVVM target serializer (translate to LLVM IR, link libdevice, O3,
// NVPTX codegen), as NVVMTargetAttr's serializeToObject runs it for
// CompilationTarget::Assembly, with four changes: libdevice is linked only
// when the module calls an __nv_* function (loading it lazily still costs
// 1-2 ms); LLVM's loop and SLP vectorizers are optional (MLIR turns them on
// at every -O level; they are a large part of the optimizer's time, and
// kiln's emitters write their vectors themselves); LLVM's diagnostics go to
// the collector instead of stderr / exit(1); and each step is timed.
class PtxSerializer final : public mlir::NVVM::SerializeGPUModuleBase {
 public:
  PtxSerializer(mlir::Operation& module, mlir::NVVM::NVVMTargetAttr target,
                const mlir::gpu::TargetOptions& options, DiagnosticCollector& diags,
                std::function<void(const char*)> stage, bool vectorize)
      : SerializeGPUModuleBase(module, target, options),
        diags_(diags),
        stage_(std::move(stage)),
        vectorize_(vectorize) {}

 protected:
  void setDataLayoutAndTriple(llvm::Module& m) override {
    stage_("llvm-translate");
    // LLVM reports codegen problems through its context; without a handler
    // an error there prints to stderr and calls exit(1).
    m.getContext().setDiagnosticHandlerCallBack(&DiagnosticCollector::llvmCallback, &diags_);
    SerializeGPUModuleBase::setDataLayoutAndTriple(m);  // creates the TargetMachine
    stage_("target-machine");
  }

  std::optional<llvm::SmallVector<std::unique_ptr<llvm::Module>>> loadBitcodeFiles(
      llvm::Module& m) override {
    bool needsLibdevice = false;
    for (const llvm::Function& f : m)
      if (f.isDeclaration() && f.getName().starts_with("__nv_")) {
        needsLibdevice = true;
        break;
      }
    if (!needsLibdevice) return llvm::SmallVector<std::unique_ptr<llvm::Module>>();
    return SerializeGPUModuleBase::loadBitcodeFiles(m);
  }

  // As mlir::makeOptimizingTransformer, with the vectorizers configurable.
  mlir::LogicalResult optimizeModule(llvm::Module& m, int level) override {
    if (level < 0 || level > 3)
      return getOperation().emitError() << "invalid LLVM optimization level " << level;
    llvm::FailureOr<llvm::TargetMachine*> tm = getOrCreateTargetMachine();
    if (mlir::failed(tm))
      return getOperation().emitError() << "no NVPTX target machine for " << triple << " / " << chip;
    (*tm)->setOptLevel(static_cast<llvm::CodeGenOptLevel>(level));
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions tuning;
    tuning.LoopUnrolling = true;
    tuning.LoopInterleaving = vectorize_;
    tuning.LoopVectorization = vectorize_;
    tuning.SLPVectorization = vectorize_;
    llvm::PassBuilder pb(*tm, tuning);  // registers NVPTX's passes (NVVMReflect...)
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                     llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(levels[level]);
    mpm.run(m, mam);
    return mlir::success();
  }

  llvm::FailureOr<llvm::SmallVector<char, 0>> moduleToObject(llvm::Module& m) override {
    llvm::FailureOr<llvm::TargetMachine*> tm = getOrCreateTargetMachine();
    if (mlir::failed(tm)) {
      getOperation().emitError() << "no NVPTX target machine for " << triple << " / " << chip;
      return mlir::failure();
    }
    llvm::FailureOr<llvm::SmallString<0>> isa =
        translateModuleToISA(m, **tm, [&] { return getOperation().emitError(); });
    if (mlir::failed(isa)) return mlir::failure();
    if (isaCallback) isaCallback(*isa);
    return llvm::SmallVector<char, 0>(isa->begin(), isa->end());
  }

 private:
  DiagnosticCollector& diags_;
  std::function<void(const char*)> stage_;
  bool vectorize_;
};

}  // namespace

// --------------------------------------------------------------- public

std::string defaultCudaHome() {
  if (const char* env = std::getenv("CUDA_HOME"); env && *env) return env;
  return "/usr/local/cuda";
}

GpuModule::GpuModule() = default;
GpuModule::GpuModule(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuModule::GpuModule(GpuModule&&) noexcept = default;
GpuModule& GpuModule::operator=(GpuModule&&) noexcept = default;
// The module must go before its context: Impl declares them in that order
// (context first), so members are destroyed module first.
GpuModule::~GpuModule() = default;

GpuModule::Impl& GpuModule::impl() {
  if (!impl_) throw Error("GpuModule: empty module");
  return *impl_;
}
const GpuModule::Impl& GpuModule::impl() const {
  if (!impl_) throw Error("GpuModule: empty module");
  return *impl_;
}

GpuModule GpuModule::parse(std::string_view text) {
  auto impl = std::make_unique<Impl>();
  impl->context = detail::createContext();
  DiagnosticCollector diags(impl->context.get());
  mlir::ParserConfig config(impl->context.get());
  impl->module = mlir::parseSourceString<mlir::ModuleOp>(llvm::StringRef(text.data(), text.size()),
                                                          config, "kiln-input");
  if (!impl->module || diags.hasErrors()) diags.fail("GpuModule::parse: invalid MLIR");
  return GpuModule(std::move(impl));
}

std::string GpuModule::str() const {
  std::string s;
  llvm::raw_string_ostream os(s);
  impl().module.get()->print(os);
  os.flush();
  return s;
}

std::vector<std::string> GpuModule::kernelNames() const {
  std::vector<std::string> names;
  impl().module.get()->walk([&](mlir::gpu::GPUFuncOp f) {
    if (f.isKernel()) names.push_back(f.getName().str());
  });
  return names;
}

PtxResult lowerToPtx(const GpuModule& module, const PtxOptions& options) {
  auto t0 = Clock::now();
  const GpuModule::Impl& impl = module.impl();
  // Lower a copy: the caller keeps the kernel-level module (dumps, retries
  // with other options).
  mlir::OwningOpRef<mlir::ModuleOp> copy(impl.module.get().clone());
  double cloneMs = msSince(t0);
  PtxResult r = detail::lowerModuleToPtx(*copy, options);
  r.stages.insert(r.stages.begin(), StageTime{"clone", cloneMs});
  r.totalMs = msSince(t0);
  return r;
}

// --------------------------------------------------------------- detail

namespace detail {

namespace {

constexpr int kContextUses = 256;   // modules per context before it is dropped
constexpr size_t kPooledContexts = 8;  // idle contexts kept (parallel tuning compiles)

struct ContextPool {
  std::mutex mutex;
  std::vector<mlir::MLIRContext*> idle;
  std::unordered_map<mlir::MLIRContext*, int> uses;  // every live context
};

ContextPool& contextPool() {
  static ContextPool* pool = new ContextPool;  // never destroyed: contexts may be released at exit
  return *pool;
}

}  // namespace

void ContextRelease::operator()(mlir::MLIRContext* ctx) const {
  if (!ctx) return;
  ContextPool& pool = contextPool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    auto it = pool.uses.find(ctx);
    if (it != pool.uses.end() && it->second < kContextUses && pool.idle.size() < kPooledContexts) {
      pool.idle.push_back(ctx);
      return;
    }
    if (it != pool.uses.end()) pool.uses.erase(it);
  }
  delete ctx;
}

ContextHandle createContext() {
  initializeLlvmTargetsOnce();
  ContextPool& pool = contextPool();
  {
    std::lock_guard<std::mutex> lock(pool.mutex);
    if (!pool.idle.empty()) {
      mlir::MLIRContext* ctx = pool.idle.back();
      pool.idle.pop_back();
      ++pool.uses[ctx];
      return ContextHandle(ctx);
    }
  }
  auto* ctx = new mlir::MLIRContext(dialectRegistry(), mlir::MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  std::lock_guard<std::mutex> lock(pool.mutex);
  pool.uses[ctx] = 1;
  return ContextHandle(ctx);
}

GpuModule createGpuModule(std::string_view name) {
  auto impl = std::make_unique<GpuModule::Impl>();
  impl->context = createContext();
  mlir::MLIRContext* ctx = impl->context.get();
  mlir::OpBuilder b(ctx);
  mlir::Location loc = mlir::UnknownLoc::get(ctx);
  impl->module = mlir::ModuleOp::create(loc);
  (*impl->module)->setAttr(mlir::gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  b.setInsertionPointToEnd(impl->module->getBody());
  mlir::gpu::GPUModuleOp::create(b, loc, llvm::StringRef(name.data(), name.size()));
  return GpuModule(std::move(impl));
}

mlir::MLIRContext& context(GpuModule& m) { return *m.impl().context; }
mlir::ModuleOp topModule(GpuModule& m) { return *m.impl().module; }

mlir::gpu::GPUModuleOp gpuModule(GpuModule& m) {
  for (auto gm : topModule(m).getOps<mlir::gpu::GPUModuleOp>()) return gm;
  throw Error("GpuModule: no gpu.module inside");
}

Kernel addKernel(GpuModule& m, std::string_view name, const KernelSignature& sig,
                 mlir::OpBuilder& b) {
  mlir::MLIRContext* ctx = &context(m);
  mlir::Location loc = mlir::NameLoc::get(mlir::StringAttr::get(ctx, llvm::StringRef(name.data(), name.size())));
  auto ptrTy = mlir::LLVM::LLVMPointerType::get(ctx, /*addressSpace=*/1);
  llvm::SmallVector<mlir::Type> args;
  for (size_t i = 0; i < sig.pointers.size(); ++i) args.push_back(ptrTy);
  for (size_t i = 0; i < sig.sizes.size(); ++i) args.push_back(b.getI64Type());
  for (mlir::Type t : sig.scalars) args.push_back(t);

  b.setInsertionPointToEnd(gpuModule(m).getBody());
  auto func = mlir::gpu::GPUFuncOp::create(b, loc, llvm::StringRef(name.data(), name.size()),
                                           b.getFunctionType(args, {}));
  func->setAttr(mlir::gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  for (size_t i = 0; i < sig.pointers.size(); ++i) {
    unsigned idx = static_cast<unsigned>(i);
    func.setArgAttr(idx, mlir::LLVM::LLVMDialect::getNoAliasAttrName(), b.getUnitAttr());
    if (sig.pointers[i].readOnly)
      func.setArgAttr(idx, mlir::LLVM::LLVMDialect::getReadonlyAttrName(), b.getUnitAttr());
    if (sig.pointers[i].alignment > 0)
      func.setArgAttr(idx, mlir::LLVM::LLVMDialect::getAlignAttrName(),
                      b.getI64IntegerAttr(sig.pointers[i].alignment));
  }
  if (sig.blockSize) func.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({*sig.blockSize, 1, 1}));

  mlir::Block& entry = func.getBody().front();
  b.setInsertionPointToEnd(&entry);
  auto ret = mlir::gpu::ReturnOp::create(b, loc);
  b.setInsertionPoint(ret);

  Kernel k{func, loc, {}, {}, {}};
  size_t a = 0;
  for (size_t i = 0; i < sig.pointers.size(); ++i) k.pointers.push_back(entry.getArgument(a++));
  for (size_t i = 0; i < sig.sizes.size(); ++i) k.sizes.push_back(entry.getArgument(a++));
  for (size_t i = 0; i < sig.scalars.size(); ++i) k.scalars.push_back(entry.getArgument(a++));
  return k;
}

mlir::Value globalThreadIndex(mlir::OpBuilder& b, mlir::Location loc) {
  auto i64 = b.getI64Type();
  auto asI64 = [&](mlir::Value v) -> mlir::Value {
    return mlir::arith::IndexCastUIOp::create(b, loc, i64, v);
  };
  mlir::Value bid = asI64(mlir::gpu::BlockIdOp::create(b, loc, mlir::gpu::Dimension::x));
  mlir::Value bdim = asI64(mlir::gpu::BlockDimOp::create(b, loc, mlir::gpu::Dimension::x));
  mlir::Value tid = asI64(mlir::gpu::ThreadIdOp::create(b, loc, mlir::gpu::Dimension::x));
  mlir::Value base = mlir::arith::MulIOp::create(b, loc, bid, bdim);
  return mlir::arith::AddIOp::create(b, loc, base, tid);
}

mlir::Value elementPointer(mlir::OpBuilder& b, mlir::Location loc, mlir::Value base,
                           mlir::Type elementType, mlir::Value index) {
  return mlir::LLVM::GEPOp::create(b, loc, base.getType(), elementType, base,
                                   mlir::ValueRange{index}, mlir::LLVM::GEPNoWrapFlags::inbounds);
}

mlir::Value load(mlir::OpBuilder& b, mlir::Location loc, mlir::Type type, mlir::Value ptr,
                 unsigned alignment, bool invariant) {
  return mlir::LLVM::LoadOp::create(b, loc, type, ptr, alignment, /*isVolatile=*/false,
                                    /*isNonTemporal=*/false, /*isInvariant=*/invariant);
}

void store(mlir::OpBuilder& b, mlir::Location loc, mlir::Value value, mlir::Value ptr,
           unsigned alignment) {
  mlir::LLVM::StoreOp::create(b, loc, value, ptr, alignment);
}

PtxResult lowerModuleToPtx(mlir::ModuleOp module, const PtxOptions& options) {
  validate(options);
  const std::string cudaHome = options.cudaHome.empty() ? defaultCudaHome() : options.cudaHome;
  if (!isRegularFile(libdevicePath(cudaHome)))
    throw Error(fmt::format(
        "lowerToPtx: libdevice not found at {} (set CUDA_HOME or PtxOptions::cudaHome to a CUDA "
        "toolkit); without it math functions would stay unresolved __nv_* calls",
        libdevicePath(cudaHome)));

  PtxResult result;
  auto t0 = Clock::now();
  auto stage = [&, last = t0](const char* name) mutable {
    auto now = Clock::now();
    result.stages.push_back(StageTime{name, msSince(last, now)});
    last = now;
  };

  mlir::MLIRContext* ctx = module.getContext();
  initializeLlvmTargetsOnce();
  DiagnosticCollector diags(ctx);

  mlir::gpu::GPUModuleOp gpuModule;
  int numGpuModules = 0;
  for (auto gm : module.getOps<mlir::gpu::GPUModuleOp>()) {
    if (!gpuModule) gpuModule = gm;
    ++numGpuModules;
  }
  if (numGpuModules != 1)
    throw Error(fmt::format("lowerToPtx: expected exactly one gpu.module, found {}", numGpuModules));

  if (mlir::failed(mlir::verify(module)) || diags.hasErrors())
    diags.fail("lowerToPtx: the kernel module does not verify");
  stage("verify");

  // 1. MLIR: scf → cf, gpu/arith/math/vector/... → llvm + nvvm.
  {
    mlir::PassManager pm(ctx, mlir::ModuleOp::getOperationName());
    pm.addPass(mlir::createSCFToControlFlowPass());
    mlir::ConvertGpuOpsToNVVMOpsOptions gpuOpts;
    gpuOpts.indexBitwidth = static_cast<unsigned>(options.indexBitwidth);
    pm.addNestedPass<mlir::gpu::GPUModuleOp>(mlir::createConvertGpuOpsToNVVMOps(gpuOpts));
    pm.addPass(mlir::createReconcileUnrealizedCastsPass());
    if (mlir::failed(pm.run(module)) || diags.hasErrors())
      diags.fail("lowerToPtx: lowering to the NVVM dialect failed");
  }
  if (options.keepLoweredMlir) {
    llvm::raw_string_ostream os(result.loweredMlir);
    module->print(os);
  }
  stage("mlir-passes");

  // 2. NVVM target: translate to LLVM IR, link libdevice, optimize, emit PTX.
  auto target = mlir::NVVM::NVVMTargetAttr::get(ctx, options.optLevel, kNvptxTriple, options.chip,
                                                options.features);
  auto linkedCb = [&](llvm::Module&) { stage("link-libdevice"); };
  auto optimizedCb = [&](llvm::Module& m) {
    if (options.keepLlvmIr) {
      llvm::raw_string_ostream os(result.llvmIr);
      m.print(os, nullptr);
    }
    stage("llvm-opt");
  };
  auto isaCb = [&](llvm::StringRef) { stage("llvm-codegen"); };
  mlir::gpu::TargetOptions targetOptions(cudaHome, /*librariesToLink=*/{}, /*cmdOptions=*/"",
                                         /*elfSection=*/"", mlir::gpu::CompilationTarget::Assembly,
                                         /*getSymbolTableCallback=*/{}, /*initialLlvmIRCallback=*/{},
                                         linkedCb, optimizedCb, isaCb);
  std::optional<llvm::SmallVector<char, 0>> ptx;
  {
    PtxSerializer serializer(*gpuModule.getOperation(), target, targetOptions, diags,
                             [&](const char* name) { stage(name); }, options.llvmVectorizers);
    ptx = serializer.run();
  }
  if (!ptx || diags.hasErrors()) diags.fail("lowerToPtx: serialization to PTX failed");
  result.ptx.assign(ptx->begin(), ptx->end());
  // Keep a plain string (no trailing NULs).
  while (!result.ptx.empty() && result.ptx.back() == '\0') result.ptx.pop_back();

  std::vector<std::string> unresolved = unresolvedLibdeviceCalls(result.ptx);
  if (!unresolved.empty()) {
    std::string list;
    for (const auto& n : unresolved) list += (list.empty() ? "" : ", ") + n;
    throw Error(fmt::format(
        "lowerToPtx: the PTX still calls libdevice functions that were not linked ({}); "
        "libdevice: {}",
        list, libdevicePath(cudaHome)));
  }
  result.kernels = entryNames(result.ptx);
  result.totalMs = msSince(t0);
  return result;
}

}  // namespace detail
std::string llvmVersion() { return LLVM_VERSION_STRING; }

}  // namespace kiln::compiler
