// `kiln aot`: a graph compiled ahead of time into a C++ header and source
// that call it as a plain function. The source holds the cubin and the
// kernel's signature and launch rule as data; an application compiles it
// and links kiln_runtime alone (no compiler, no LLVM in its process).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli.h"
#include "kernel_internal.h"
#include "kiln/compiler/compile.h"
#include "kiln/dsl/text.h"
#include "kiln/kernel.h"

namespace kiln::cli {

const char* kAotHelp =
    "usage: kiln aot FILE [--dim NAME=VALUE]... [--hint NAME=VALUE]... [--name NAME]\n"
    "                [--namespace NS] [--chip sm_XY] [--sms N] -o DIR\n"
    "\n"
    "Compiles a graph file (.kiln) ahead of time and writes DIR/NAME.h and\n"
    "DIR/NAME.cpp: a function\n"
    "\n"
    "  void NAME(const kiln::TensorView& input..., const kiln::TensorView& output...,\n"
    "            scalar..., void* stream = nullptr);\n"
    "\n"
    "that checks its arguments against the graph's signature and launches the\n"
    "kernel on `stream`. The source holds the cubin (all entry points: 16-byte\n"
    "vectors where the pointers allow, a scalar entry for the rest) and the\n"
    "launch rule; build it with your application and link kiln_runtime only.\n"
    "Dynamic dims are taken from the tensors' shapes at each call.\n"
    "\n"
    "  --dim NAME=VALUE   specialize a dynamic dim to a static size\n"
    "  --hint NAME=VALUE  the value a dynamic dim is expected to take (the\n"
    "                     heuristics configure the kernel for it; other values\n"
    "                     still run, with that config)\n"
    "  --name NAME        the function's name (default: the file's stem)\n"
    "  --namespace NS     the functions' namespace (default kiln_aot)\n"
    "  --chip sm_XY       target SM (default sm_90); the cubin runs on that SM\n"
    "  --sms N            the GPU's SM count for the grid heuristics (default 132)\n"
    "  --pointwise-config JSON, --row-config JSON  as for `kiln compile`\n"
    "  --no-cache         compile without the disk cache\n"
    "  -o DIR             the output folder (created if missing)\n"
    "\n"
    "Graphs that compile to one kernel taking the graph's own arguments are\n"
    "supported (pointwise kernels, softmax, norms, row and column reductions);\n"
    "graphs that need a workspace (several kernels, or a mean over rows taken\n"
    "by a last block) and matmuls are not yet: a clear error says so.\n";

namespace {

// A C++ identifier from a graph name ("exp_avg_sq" stays; "1x" -> "_1x").
std::string identifier(const std::string& name) {
  static const std::set<std::string> reserved = {
      "alignas", "alignof", "and", "asm", "auto", "bool", "break", "case", "catch", "char", "class", "const",
      "continue", "default", "delete", "do", "double", "else", "enum", "explicit", "export", "extern", "false",
      "float", "for", "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "not",
      "operator", "or", "private", "protected", "public", "register", "return", "short", "signed", "sizeof",
      "static", "struct", "switch", "template", "this", "throw", "true", "try", "typedef", "typename", "union",
      "unsigned", "using", "virtual", "void", "volatile", "while", "xor", "stream"};
  std::string s;
  for (char c : name) s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s.insert(0, 1, '_');
  if (reserved.count(s)) s += '_';
  return s;
}

std::string quoted(const std::string& s) {
  std::string q = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') q += '\\';
    if (c == '\n') {
      q += "\\n";
      continue;
    }
    q += c;
  }
  return q + "\"";
}

std::string dtypeLiteral(DType t) {
  switch (t) {
    case DType::Bool: return "kiln::DType::Bool";
    case DType::I32: return "kiln::DType::I32";
    case DType::I64: return "kiln::DType::I64";
    case DType::F16: return "kiln::DType::F16";
    case DType::BF16: return "kiln::DType::BF16";
    case DType::F32: return "kiln::DType::F32";
  }
  return "kiln::DType::F32";
}

std::string scalarType(DType t) {
  if (t == DType::Bool) return "bool";
  return isFloat(t) ? "double" : "int64_t";
}

std::string shapeLiteral(const Shape& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += s[i].isStatic() ? "kiln::rt::Dim(int64_t{" + std::to_string(s[i].size) + "})"
                           : "kiln::rt::Dim(" + quoted(s[i].name) + ")";
  }
  return out + "}";
}

// The graph's signature, in the facade's order (inputs, then outputs; its
// dynamic dims; its scalars), which the one kernel must match.
[[noreturn]] void unsupported(const std::string& what) {
  throw Error("kiln aot: " + what +
              "; kiln aot supports graphs that compile to one kernel taking the graph's own arguments "
              "(use kiln::compile at run time for the others)");
}

void checkIdentity(const Graph& g, const compiler::CompiledGraph& cg) {
  if (cg.kernels.size() != 1)
    unsupported("the graph compiles to " + std::to_string(cg.kernels.size()) + " kernels (" +
                (cg.workspace.empty() ? std::string("no workspace") : "with a workspace") + ")");
  const compiler::CompiledKernel& k = cg.kernels[0];
  if (!k.tensorMaps.empty()) unsupported("kernel '" + k.name + "' is a matmul taking TMA tensor maps");
  if (!cg.workspace.empty())
    unsupported("kernel '" + k.name + "' needs a workspace (" + cg.workspace[0].name +
                ": state that its blocks pass to a last block, as a mean over rows does)");
  std::vector<std::pair<std::string, bool>> want;
  std::vector<std::string> scalars;
  for (int id : g.params()) {
    const Node& n = g.node(id);
    if (n.op == Op::Input) want.push_back({n.name, false});
    else scalars.push_back(n.name);
  }
  for (const GraphOutput& o : g.outputs()) want.push_back({o.name, true});
  bool same = k.tensors.size() == want.size() && k.dims == g.dynamicDims() && k.scalars.size() == scalars.size();
  for (size_t i = 0; same && i < want.size(); ++i)
    same = k.tensors[i].name == want[i].first && k.tensors[i].output == want[i].second && !k.tensors[i].workspace;
  for (size_t i = 0; same && i < scalars.size(); ++i) same = k.scalars[i].name == scalars[i];
  if (!same) unsupported("kernel '" + k.name + "' does not take the graph's arguments as they are declared");
}

}  // namespace

int runAot(int argc, char** argv) {
  int rc = 0;
  std::optional<Args> parsed = parseFileCommand(
      argc, argv, kAotHelp, {"dim", "hint", "name", "namespace", "chip", "sms", "pointwise-config", "row-config"},
      rc);
  if (!parsed) return rc;
  const Args& a = *parsed;
  const std::string file = a.positional[0];
  Graph g = parseGraphFile(file);
  auto requireDims = [&](const DimBindings& given, const std::string& flag) {
    const std::vector<std::string> known = g.dynamicDims();
    for (const auto& [name, v] : given)
      if (std::find(known.begin(), known.end(), name) == known.end())
        throw Error("kiln aot: --" + flag + " " + name + ": the graph has no dynamic dim named " + name);
  };
  const DimBindings dims = parseDims(a.all("dim"));
  requireDims(dims, "dim");
  g = bindDims(g, std::vector<std::pair<std::string, int64_t>>(dims.begin(), dims.end()));
  const DimBindings hints = parseDims(a.all("hint"), "hint");
  requireDims(hints, "hint");
  const std::optional<std::string> outDir = a.get("o");
  if (!outDir) throw Error("kiln aot: give the output folder with -o DIR");
  const std::string name = identifier(a.get("name").value_or(std::filesystem::path(file).stem().string()));
  const std::string ns = a.get("namespace").value_or("kiln_aot");
  for (char c : ns)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'))
      throw Error("kiln aot: --namespace " + ns + ": not a C++ namespace name");

  compiler::CompileOptions opts;
  if (auto chip = a.get("chip")) opts.chip = *chip;
  if (auto sms = a.get("sms")) {
    try {
      opts.smCount = std::stoi(*sms);
    } catch (...) {
      opts.smCount = 0;
    }
    if (opts.smCount < 1) throw Error("kiln aot: --sms " + *sms + ": expected a positive number of SMs");
  }
  if (auto c = a.get("pointwise-config")) opts.configOverride = *c;
  if (auto c = a.get("row-config")) opts.rowConfigOverride = *c;
  for (const auto& [d, v] : hints) opts.dimHints[d] = v;
  opts.variants = compiler::EntryVariants::All;
  const compiler::CompiledGraph cg = compileGraphCached(g, opts, !a.has("no-cache"));
  checkIdentity(g, cg);
  const compiler::CompiledKernel& k = cg.kernels[0];
  const detail::GridRule grid = detail::gridRuleFrom(k.launch, k.dims, k.name);
  std::string vectorEntry, scalarEntry, oneStepEntry;
  for (const compiler::KernelEntry& e : k.entries) (e.oneStep ? oneStepEntry : e.vectorized ? vectorEntry : scalarEntry) = e.name;

  // The function's parameters and the comment describing them.
  std::string params, describe, pointers;
  std::vector<std::string> used;
  auto unique = [&](std::string id) {
    while (std::find(used.begin(), used.end(), id) != used.end()) id += '_';
    used.push_back(id);
    return id;
  };
  for (const compiler::KernelTensor& t : k.tensors) {
    const std::string id = unique(identifier(t.name));
    params += (params.empty() ? "" : ", ") + std::string("const kiln::TensorView& ") + id;
    pointers += (pointers.empty() ? "&" : ", &") + id;
    describe += "//   " + std::string(t.output ? "out " : "in  ") + t.name + " " + typeToString(t.dtype, t.shape) + "\n";
  }
  std::string scalarArgs;
  for (const compiler::KernelScalar& s : k.scalars) {
    const std::string id = unique(identifier(s.name));
    params += ", " + scalarType(s.dtype) + " " + id;
    scalarArgs += (scalarArgs.empty() ? "" : ", ") + std::string("kiln::rt::ScalarArg(") + id + ")";
    describe += "//   scalar " + s.name + " " + std::string(dtypeName(s.dtype)) + "\n";
  }
  std::string graphComment;
  {
    std::istringstream in(printGraph(g));
    for (std::string line; std::getline(in, line);) graphComment += "//   " + line + "\n";
  }
  const std::string origin = "Generated by `kiln aot` from " + std::filesystem::path(file).filename().string() +
                             " for " + opts.chip + ". Do not edit; generate it again.";

  std::ostringstream h;
  h << "// " << name << ".h: " << origin << "\n"
    << "//\n// The graph:\n" << graphComment << "//\n// Arguments:\n" << describe
    << "//\n// Kernel " << k.name << ": schedule " << k.schedule << ", config " << k.config << "\n"
    << "// Build " << name << ".cpp with the application and link kiln_runtime (no\n"
    << "// compiler, no LLVM); the CUDA driver is loaded at the first call.\n"
    << "#pragma once\n\n#include <cstdint>\n\n#include \"kiln/runtime/aot.h\"\n\nnamespace " << ns << " {\n\n"
    << "// Checks the arguments against the graph's signature (a kiln::Error names\n"
    << "// the argument and the problem), loads the kernel into the current CUDA\n"
    << "// context (or the device's primary one) at the first call, and launches\n"
    << "// it on `stream` (a CUstream or cudaStream_t; null: the legacy default\n"
    << "// stream). Dynamic dims come from the tensors' shapes.\n"
    << "void " << name << "(" << params << ", void* stream = nullptr);\n\n"
    << "// The kernel behind it: its signature, and launches with spans.\n"
    << "const kiln::rt::AotKernel& " << name << "_kernel();\n\n"
    << "// The graph it was compiled from, in kiln's text form (kiln::parseGraph).\n"
    << "const char* " << name << "_graph();\n\n}  // namespace " << ns << "\n";

  std::ostringstream s;
  s << "// " << name << ".cpp: " << origin << "\n#include \"" << name << ".h\"\n\n#include <span>\n\nnamespace {\n\n"
    << "// The module image (" << k.cubin.size() << " bytes).\nalignas(8) const unsigned char kCubin[] = {";
  for (size_t i = 0; i < k.cubin.size(); ++i) {
    if (i % 16 == 0) s << "\n   ";
    char buf[8];
    std::snprintf(buf, sizeof buf, " 0x%02x,", static_cast<unsigned char>(k.cubin[i]));
    s << buf;
  }
  s << "\n};\n\nkiln::rt::AotKernelSpec spec() {\n  kiln::rt::AotKernelSpec s;\n"
    << "  s.name = " << quoted(k.name) << ";\n  s.cubin = std::span<const unsigned char>(kCubin, sizeof kCubin);\n"
    << "  s.vectorEntry = " << quoted(vectorEntry) << ";\n  s.scalarEntry = " << quoted(scalarEntry) << ";\n"
    << "  s.oneStepEntry = " << quoted(oneStepEntry) << ";\n  s.signature.kernel = " << quoted(k.name) << ";\n";
  for (const compiler::KernelTensor& t : k.tensors)
    s << "  s.signature.tensors.push_back({" << quoted(t.name) << ", " << dtypeLiteral(t.dtype) << ", "
      << shapeLiteral(t.shape) << ", " << (t.output ? "true" : "false") << ", " << (t.alignment > 1 ? t.alignment : 1)
      << ", true, false});\n";
  for (const std::string& d : k.dims) s << "  s.signature.dims.push_back({" << quoted(d) << "});\n";
  for (const compiler::KernelScalar& sc : k.scalars)
    s << "  s.signature.scalars.push_back({" << quoted(sc.name) << ", " << dtypeLiteral(sc.dtype) << "});\n";
  s << "  s.grid.staticCount = " << grid.staticCount << ";\n";
  for (const auto& [d, t] : grid.dynamic) s << "  s.grid.dynamic.push_back({" << d << ", " << t << "});\n";
  s << "  s.grid.elementsPerBlock = " << grid.elementsPerBlock << ";\n  s.grid.maxBlocks = " << grid.maxBlocks
    << ";\n  s.grid.cluster = " << grid.cluster << ";\n  s.grid.minBlocks = " << grid.minBlocks << ";\n";
  for (const detail::GridRule::Bound& b : grid.bounds)
    s << "  s.grid.bounds.push_back({" << b.index << ", " << b.max << ", " << quoted(b.dim) << ", " << quoted(b.what)
      << "});\n";
  for (const auto& [d, m] : grid.multiples) s << "  s.grid.multiples.push_back({" << d << ", " << m << "});\n";
  for (const detail::GridRule::Range& r : grid.oneStep)
    s << "  s.grid.oneStep.push_back({" << r.index << ", " << r.min << ", " << r.max << "});\n";
  s << "  s.threadsPerBlock = " << k.launch.threadsPerBlock << ";\n  s.sharedBytes = " << k.launch.sharedBytes
    << ";\n  s.cluster = " << k.launch.cluster << ";\n  s.resident = " << (k.launch.resident ? "true" : "false")
    << ";\n  return s;\n}\n\n}  // namespace\n\nnamespace " << ns << " {\n\n"
    << "const kiln::rt::AotKernel& " << name << "_kernel() {\n  static const kiln::rt::AotKernel kernel(spec());\n"
    << "  return kernel;\n}\n\n"
    << "const char* " << name << "_graph() {\n  return R\"kiln_graph(" << printGraph(g) << ")kiln_graph\";\n}\n\n"
    << "void " << name << "(" << params << ", void* stream) {\n"
    << "  const kiln::TensorView* tensors[] = {" << pointers << "};\n";
  if (!scalarArgs.empty()) s << "  const kiln::rt::ScalarArg scalars[] = {" << scalarArgs << "};\n";
  s << "  " << name << "_kernel().launch(std::span<const kiln::TensorView* const>(tensors), {}, "
    << (scalarArgs.empty() ? "{}" : "std::span<const kiln::rt::ScalarArg>(scalars)") << ", stream);\n}\n\n}  // namespace "
    << ns << "\n";

  std::filesystem::create_directories(*outDir);
  for (const auto& [ext, text] : {std::pair<std::string, std::string>{".h", h.str()}, {".cpp", s.str()}}) {
    const std::string path = (std::filesystem::path(*outDir) / (name + ext)).string();
    // Written only when it changes, so that a build does not recompile it.
    std::ifstream old(path, std::ios::binary);
    std::ostringstream was;
    was << old.rdbuf();
    if (old && was.str() == text) continue;
    std::ofstream f(path, std::ios::binary);
    if (!f || !(f << text)) throw Error("kiln aot: cannot write " + path);
  }
  std::printf("kiln aot: %s.h and %s.cpp in %s (kernel %s, %s, %zu-byte cubin)\n", name.c_str(), name.c_str(),
              outDir->c_str(), k.name.c_str(), k.schedule.c_str(), k.cubin.size());
  return 0;
}

}  // namespace kiln::cli
