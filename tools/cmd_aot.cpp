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
#include "kiln/autotune/tuning_db.h"
#include "kiln/compiler/compile.h"
#include "kiln/dsl/text.h"
#include "kiln/kernel.h"
#include "kiln/runtime/signature.h"
#include "kiln_version.h"
#include "tuning.h"

namespace kiln::cli {

const char* kAotHelp =
    "usage: kiln aot FILE [--dim NAME=VALUE]... [--hint NAME=VALUE]... [--variant ...]... [--name NAME]\n"
    "                [--namespace NS] [--chip sm_XY] [--sms N] -o DIR\n"
    "\n"
    "Compiles a graph file (.kiln) ahead of time and writes DIR/NAME.h and\n"
    "DIR/NAME.cpp: a function\n"
    "\n"
    "  void NAME(const kiln::TensorView& input..., const kiln::TensorView& output...,\n"
    "            scalar..., void* stream = nullptr);\n"
    "\n"
    "that checks its arguments against the graph's signature and launches the\n"
    "kernels on `stream`. The source holds the cubins (all entry points: 16-byte\n"
    "vectors where the pointers allow, a scalar entry for the rest) and the\n"
    "launch rule; build it with your application and link kiln_runtime only.\n"
    "Dynamic dims are taken from the tensors' shapes at each call.\n"
    "\n"
    "  --dim NAME=VALUE   specialize a dynamic dim to a static size\n"
    "  --hint NAME=VALUE  the value a dynamic dim is expected to take (the\n"
    "                     heuristics configure the kernel for it; other values\n"
    "                     still run, with that config)\n"
    "  --variant NAME=VALUE[,NAME=VALUE...]\n"
    "                     also build the graph configured for these values\n"
    "                     (the --hint values elsewhere): a call whose dims\n"
    "                     fall outside the range the hinted configs were\n"
    "                     chosen for runs the first variant chosen for them\n"
    "                     (repeatable; one that compiles alike is dropped)\n"
    "  --name NAME        the function's name (default: the file's stem)\n"
    "  --namespace NS     the functions' namespace (default kiln_aot)\n"
    "  --chip sm_XY       target SM (default sm_90); the cubin runs on that SM\n"
    "  --sms N            the GPU's SM count for the grid heuristics (default 132)\n"
    "  --matmul-row-softmax  a softmax over a Hopper matmul's rows (short K) in\n"
    "                    the matmul's kernel, the product computed twice\n"
    "                    (CompileOptions::matmulRowSoftmax; off by default:\n"
    "                    slower than the stored product on an H100)\n"
    "  --pointwise-config JSON, --row-config JSON, --matmul-config JSON\n"
    "                     as for `kiln compile`\n"
    "  --tuning FILE      take each kernel's config from this tuning database\n"
    "                     (kiln-tune's output, docs/tuning.md) where it has one\n"
    "                     for the device and the --hint values' shape bucket;\n"
    "                     the heuristic's elsewhere (the header says which)\n"
    "  --device KEY       the database's device, as `kiln-tune show` prints it\n"
    "                     (\"NVIDIA H200/sm_90/132sm\"); needed when FILE holds\n"
    "                     several; sets --chip and --sms unless given\n"
    "  --no-cache         compile without the disk cache\n"
    "  -o DIR             the output folder (created if missing)\n"
    "\n"
    "Any graph kiln compiles: several kernels run in order, with their\n"
    "intermediates in a workspace the launcher allocates at the first call;\n"
    "matmul kernels encode their TMA descriptors at each call.\n";

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

// The statements that fill `var` (a kiln::rt::KernelSignature) with `sig`.
std::string signatureStatements(const std::string& var, const rt::KernelSignature& sig, const std::string& indent) {
  std::string out = indent + var + ".kernel = " + quoted(sig.kernel) + ";\n";
  for (const rt::TensorParam& t : sig.tensors) {
    std::string shape = "{";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += std::string(i ? ", " : "") + (t.shape[i].isDynamic() ? "kiln::rt::Dim(" + quoted(t.shape[i].name) + ")"
                                                                   : "kiln::rt::Dim(int64_t{" + std::to_string(t.shape[i].size) + "})");
    out += indent + var + ".tensors.push_back({" + quoted(t.name) + ", " + dtypeLiteral(t.dtype) + ", " + shape + "}, " +
           (t.isOutput ? "true" : "false") + ", " + std::to_string(t.alignment) + ", " + (t.contiguous ? "true" : "false") +
           ", " + (t.passStrides ? "true" : "false") + "});\n";
  }
  for (const rt::DimParam& d : sig.dims) out += indent + var + ".dims.push_back({" + quoted(d.name) + "});\n";
  for (const rt::ScalarParam& sc : sig.scalars)
    out += indent + var + ".scalars.push_back({" + quoted(sc.name) + ", " + dtypeLiteral(sc.dtype) + "});\n";
  return out;
}

std::string intList(const std::vector<int>& v) {
  std::string s = "{";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

}  // namespace

int runAot(int argc, char** argv) {
  int rc = 0;
  std::optional<Args> parsed = parseFileCommand(
      argc, argv, kAotHelp, {"dim", "hint", "variant", "name", "namespace", "chip", "sms", "pointwise-config", "row-config", "matmul-config", "tuning", "device"},
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
  if (auto c = a.get("matmul-config")) opts.matmulConfigOverride = *c;
  opts.matmulRowSoftmax = a.has("matmul-row-softmax");
  opts.variants = compiler::EntryVariants::All;
  // Tuned configs from a shipped database, for its device.
  std::optional<tune::DeviceKey> tuningDevice;
  if (auto file = a.get("tuning")) {
    if (!std::filesystem::exists(*file)) throw Error("kiln aot: --tuning " + *file + ": no such file");
    const std::vector<tune::TuningEntry> entries = tune::readTuningFile(*file);
    std::vector<tune::DeviceKey> devices;
    for (const tune::TuningEntry& e : entries)
      if (std::find(devices.begin(), devices.end(), e.device) == devices.end()) devices.push_back(e.device);
    tune::DeviceKey device;
    if (auto want = a.get("device")) {
      auto it = std::find_if(devices.begin(), devices.end(), [&](const tune::DeviceKey& d) { return d.str() == *want; });
      if (it == devices.end()) {
        std::string known;
        for (const tune::DeviceKey& d : devices) known += (known.empty() ? "" : ", ") + d.str();
        throw Error("kiln aot: --device " + *want + ": " + *file + " has no entries for it (it has: " +
                    (known.empty() ? "none" : known) + ")");
      }
      device = *it;
    } else if (devices.size() == 1) {
      device = devices[0];
    } else {
      std::string known;
      for (const tune::DeviceKey& d : devices) known += (known.empty() ? "" : ", ") + d.str();
      throw Error("kiln aot: --tuning " + *file + " holds " + std::to_string(devices.size()) +
                  " devices; pick one with --device (" + (known.empty() ? "none" : known) + ")");
    }
    if (!a.get("chip")) opts.chip = "sm_" + std::to_string(device.ccMajor) + std::to_string(device.ccMinor);
    if (!a.get("sms")) opts.smCount = device.smCount;
    tuningDevice = device;
  } else if (a.get("device")) {
    throw Error("kiln aot: --device names a tuning database's device: give the database with --tuning FILE");
  }

  // One build of the graph for a set of hints: its tuned configs (from the
  // database, for those hints' bucket), kernels and launch plan.
  struct Build {
    DimBindings hints;
    compiler::CompileOptions opts;
    std::vector<std::string> tuningNotes;
    compiler::CompiledGraph cg;
    detail::LaunchPlan plan;
  };
  auto build = [&](const DimBindings& buildHints) {
    Build b;
    b.hints = buildHints;
    b.opts = opts;
    for (const auto& [d, v] : buildHints) b.opts.dimHints[d] = v;
    if (tuningDevice) {
      tune::TuningDbOptions dbo;
      dbo.searchPath = *a.get("tuning");
      // No user file: only the given database is read.
      dbo.userFile = std::filesystem::path(*outDir) / ".kiln-aot-no-user-tuning.json";
      tune::TuningDatabase db(dbo);
      CompileOptions fo;
      fo.tune = CompileOptions::Tune::UseDatabase;
      fo.tuningDatabase = &db;
      fo.tuningDevice = &*tuningDevice;
      for (const auto& [d, v] : buildHints) fo.dims[d] = v;
      b.tuningNotes = detail::resolveTuning(g, g.toText(), fo, b.opts);
    }
    b.cg = compileGraphCached(g, b.opts, !a.has("no-cache"));
    b.plan = detail::planLaunches(g, b.cg);
    b.plan.signature.kernel = name;  // argument errors name the function
    return b;
  };
  std::vector<Build> builds;
  builds.push_back(build(hints));
  for (const std::string& spec : a.all("variant")) {
    std::vector<std::string> parts;
    for (size_t pos = 0; pos <= spec.size();) {
      const size_t comma = std::min(spec.find(',', pos), spec.size());
      parts.push_back(spec.substr(pos, comma - pos));
      pos = comma + 1;
    }
    const DimBindings given = parseDims(parts, "variant");
    requireDims(given, "variant");
    DimBindings variantHints = hints;
    for (const auto& [d, v] : given) variantHints[d] = v;
    Build b = build(variantHints);
    auto configs = [](const compiler::CompiledGraph& c) {
      std::vector<std::string> out;
      for (const compiler::CompiledKernel& k : c.kernels) out.push_back(k.config);
      return out;
    };
    bool same = false;
    for (const Build& earlier : builds) same = same || configs(earlier.cg) == configs(b.cg);
    if (same) {
      std::printf("kiln aot: --variant %s compiles like an earlier build (the same configs): not added\n", spec.c_str());
      continue;
    }
    builds.push_back(std::move(b));
  }
  const compiler::CompiledGraph& cg = builds[0].cg;
  const detail::LaunchPlan& plan = builds[0].plan;
  const std::vector<std::string>& tuningNotes = builds[0].tuningNotes;
  const rt::KernelSignature& sig = plan.signature;

  // The function's parameters (the graph's tensors, then its scalars) and
  // the comment describing them.
  std::string params, describe, pointers, scalarArgs;
  std::vector<std::string> used;
  auto unique = [&](std::string id) {
    while (std::find(used.begin(), used.end(), id) != used.end()) id += '_';
    used.push_back(id);
    return id;
  };
  for (const rt::TensorParam& t : sig.tensors) {
    const std::string id = unique(identifier(t.name));
    params += (params.empty() ? "" : ", ") + std::string("const kiln::TensorView& ") + id;
    pointers += (pointers.empty() ? "&" : ", &") + id;
    describe += "//   " + std::string(t.isOutput ? "out " : "in  ") + t.name + " " + std::string(dtypeName(t.dtype)) +
                rt::formatShape(t.shape) + "\n";
  }
  for (const rt::ScalarParam& sc : sig.scalars) {
    const std::string id = unique(identifier(sc.name));
    params += ", " + scalarType(sc.dtype) + " " + id;
    scalarArgs += (scalarArgs.empty() ? "" : ", ") + std::string("kiln::rt::ScalarArg(") + id + ")";
    describe += "//   scalar " + sc.name + " " + std::string(dtypeName(sc.dtype)) + "\n";
  }
  std::string graphComment, kernelsComment;
  {
    std::istringstream in(printGraph(g));
    for (std::string line; std::getline(in, line);) graphComment += "//   " + line + "\n";
  }
  // Where a build's configs were chosen for: "C in [4097, 8192]".
  auto rangesOf = [](const Build& b) {
    std::string out;
    for (const detail::KernelPlan& kp : b.plan.kernels)
      for (const detail::GridRule::Range& r : kp.grid.preferred) {
        const std::string piece = kp.signature.dims[static_cast<size_t>(r.index)].name + " in [" +
                                  std::to_string(r.min) + ", " + std::to_string(r.max) + "]";
        if (out.find(piece) == std::string::npos) out += (out.empty() ? "" : ", ") + piece;
      }
    return out;
  };
  for (size_t bi = 0; bi < builds.size(); ++bi) {
    if (bi) {
      std::string hintText;
      for (const auto& [d, v] : builds[bi].hints) hintText += (hintText.empty() ? "" : ", ") + d + "=" + std::to_string(v);
      kernelsComment += "// Variant " + std::to_string(bi) + " (built for " + hintText + "; runs where " + rangesOf(builds[bi]) +
                        " and the builds before it were not configured for the call's dims):\n";
    }
    for (size_t ki = 0; ki < builds[bi].cg.kernels.size(); ++ki) {
      const compiler::CompiledKernel& k = builds[bi].cg.kernels[ki];
      const std::vector<std::string>& notes = builds[bi].tuningNotes;
      kernelsComment += "//   " + k.name + ": schedule " + k.schedule + ", config " + k.config + "\n";
      if (ki < notes.size() && !notes[ki].empty()) kernelsComment += "//     tuning: " + notes[ki] + "\n";
    }
    if (bi == 0 && builds.size() > 1)
      kernelsComment += "//   (configured for " + rangesOf(builds[0]) + "; other dims take the first variant below\n"
                        "//   configured for them, else these kernels)\n";
  }
  const std::string origin = "Generated by `kiln aot` (kiln " KILN_VERSION ") from " +
                             std::filesystem::path(file).filename().string() + " for " + opts.chip +
                             ". Do not edit; generate it again.";

  std::ostringstream h;
  h << "// " << name << ".h: " << origin << "\n"
    << "//\n// The graph:\n" << graphComment << "//\n// Arguments:\n" << describe
    << "//\n// Kernels, in launch order" << (cg.workspace.empty() ? "" : " (with a workspace, allocated at the first call)")
    << ":\n" << kernelsComment
    << "// Build " << name << ".cpp with the application and link kiln_runtime (no\n"
    << "// compiler, no LLVM); the CUDA driver is loaded at the first call.\n"
    << "#pragma once\n\n#include <cstdint>\n\n#include \"kiln/runtime/aot.h\"\n#include \"kiln/runtime/c_api.h\"\n\nnamespace "
    << ns << " {\n\n"
    << "// Checks the arguments against the graph's signature (a kiln::Error names\n"
    << "// the argument and the problem), loads the kernels into the current CUDA\n"
    << "// context (or the device's primary one) at the first call, and launches\n"
    << "// them on `stream` (a CUstream or cudaStream_t; null: the legacy default\n"
    << "// stream). Dynamic dims come from the tensors' shapes.\n"
    << "void " << name << "(" << params << ", void* stream = nullptr);\n\n"
    << "// The launcher behind it: the graph's signature, and launches with spans.\n"
    << "const kiln::rt::AotGraph& " << name << "_launcher();\n\n"
    << "// The graph it was compiled from, in kiln's text form (kiln::parseGraph).\n"
    << "const char* " << name << "_graph();\n\n}  // namespace " << ns << "\n\n"
    << "// The same function for other languages' FFIs (kiln/runtime/c_api.h):\n"
    << "// tensors in signature order, scalars as doubles; 0, or -1 with\n"
    << "// kiln_last_error() set. kiln_" << name << "_signature() is its signature as JSON.\n"
    << "extern \"C\" int kiln_" << name << "(const kiln_tensor* tensors, int32_t num_tensors, const double* scalars,\n"
    << "                   int32_t num_scalars, void* stream);\n"
    << "extern \"C\" const char* kiln_" << name << "_signature(void);\n";

  std::ostringstream s;
  s << "// " << name << ".cpp: " << origin << "\n#include \"" << name << ".h\"\n\n#include <span>\n#include <string>\n\nnamespace {\n\n";
  // Build 0 is the hinted one; builds 1.. are the --variant ones.
  auto cubinName = [](size_t b, size_t ki) {
    return b == 0 ? "kCubin" + std::to_string(ki) : "kCubinV" + std::to_string(b) + "_" + std::to_string(ki);
  };
  for (size_t bi = 0; bi < builds.size(); ++bi)
  for (size_t ki = 0; ki < builds[bi].cg.kernels.size(); ++ki) {
    const compiler::CompiledKernel& k = builds[bi].cg.kernels[ki];
    s << "// Kernel " << k.name << "'s module image (" << k.cubin.size() << " bytes"
      << (bi ? ", variant " + std::to_string(bi) : std::string()) << ").\nalignas(8) const unsigned char "
      << cubinName(bi, ki) << "[] = {";
    for (size_t i = 0; i < k.cubin.size(); ++i) {
      if (i % 16 == 0) s << "\n   ";
      char buf[8];
      std::snprintf(buf, sizeof buf, " 0x%02x,", static_cast<unsigned char>(k.cubin[i]));
      s << buf;
    }
    s << "\n};\n\n";
  }
  for (size_t bi = builds.size(); bi-- > 0;) {
  const compiler::CompiledGraph& cg = builds[bi].cg;
  const detail::LaunchPlan& plan = builds[bi].plan;
  s << "kiln::rt::AotGraphSpec " << (bi ? "specVariant" + std::to_string(bi) : std::string("spec"))
    << "() {\n  kiln::rt::AotGraphSpec g;\n  g.name = " << quoted(name) << ";\n"
    << signatureStatements("g.signature", plan.signature, "  ");
  for (const rt::WorkspaceTensor& w : plan.workspace) {
    s << "  g.workspace.push_back({" << quoted(w.name) << ", " << dtypeLiteral(w.dtype) << ", {";
    for (size_t i = 0; i < w.shape.size(); ++i) s << (i ? ", " : "") << "{" << w.shape[i].size << ", " << w.shape[i].dim << "}";
    s << "}});\n";
  }
  for (size_t ki = 0; ki < cg.kernels.size(); ++ki) {
    const compiler::CompiledKernel& k = cg.kernels[ki];
    const detail::KernelPlan& kp = plan.kernels[ki];
    const detail::GridRule& grid = kp.grid;
    std::string vectorEntry, scalarEntry, oneStepEntry;
    for (const compiler::KernelEntry& e : k.entries)
      (e.oneStep ? oneStepEntry : e.vectorized ? vectorEntry : scalarEntry) = e.name;
    s << "  {\n    kiln::rt::AotKernelSpec s;\n"
      << "    s.name = " << quoted(k.name) << ";\n    s.cubin = std::span<const unsigned char>(" << cubinName(bi, ki)
      << ", sizeof " << cubinName(bi, ki) << ");\n"
      << "    s.vectorEntry = " << quoted(vectorEntry) << ";\n    s.scalarEntry = " << quoted(scalarEntry) << ";\n"
      << "    s.oneStepEntry = " << quoted(oneStepEntry) << ";\n" << signatureStatements("s.signature", kp.signature, "    ")
      << "    s.tensors = " << intList(kp.tensors) << ";\n    s.dims = " << intList(kp.dims) << ";\n    s.scalars = "
      << intList(kp.scalars) << ";\n";
    s << "    s.grid.staticCount = " << grid.staticCount << ";\n";
    for (const auto& [d, t] : grid.dynamic) s << "    s.grid.dynamic.push_back({" << d << ", " << t << "});\n";
    s << "    s.grid.elementsPerBlock = " << grid.elementsPerBlock << ";\n    s.grid.maxBlocks = " << grid.maxBlocks
      << ";\n    s.grid.cluster = " << grid.cluster << ";\n    s.grid.minBlocks = " << grid.minBlocks << ";\n";
    for (const detail::GridRule::Bound& b : grid.bounds)
      s << "    s.grid.bounds.push_back({" << b.index << ", " << b.max << ", " << quoted(b.dim) << ", " << quoted(b.what)
        << "});\n";
    for (const auto& [d, m] : grid.multiples) s << "    s.grid.multiples.push_back({" << d << ", " << m << "});\n";
    for (const detail::GridRule::Range& r : grid.oneStep)
      s << "    s.grid.oneStep.push_back({" << r.index << ", " << r.min << ", " << r.max << "});\n";
    for (const detail::GridRule::Range& r : grid.preferred)
      s << "    s.grid.preferred.push_back({" << r.index << ", " << r.min << ", " << r.max << "});\n";
    s << "    s.threadsPerBlock = " << k.launch.threadsPerBlock << ";\n    s.sharedBytes = " << k.launch.sharedBytes
      << ";\n    s.cluster = " << k.launch.cluster << ";\n    s.resident = " << (k.launch.resident ? "true" : "false")
      << ";\n";
    for (const rt::TensorMapRule& m : kp.maps) {
      std::string axes = "{";
      for (size_t i = 0; i < m.axes.size(); ++i) axes += (i ? ", " : "") + std::to_string(m.axes[i]);
      s << "    s.maps.push_back({" << m.tensor << ", " << dtypeLiteral(m.dtype) << ", " << axes << "}, " << m.boxInner
        << ", " << m.boxRows << ", " << (m.clampRows ? "true" : "false") << ", " << quoted(m.what) << ", "
        << (m.whenRowsAligned ? "true" : "false") << "});\n";
    }
    s << "    g.kernels.push_back(std::move(s));\n  }\n";
  }
  for (size_t v = 1; bi == 0 && v < builds.size(); ++v) s << "  g.variants.push_back(specVariant" << v << "());\n";
  if (bi) s << "  return g;\n}\n\n";
  }
  s << "  return g;\n}\n\n}  // namespace\n\nnamespace " << ns << " {\n\n"
    << "const kiln::rt::AotGraph& " << name << "_launcher() {\n  static const kiln::rt::AotGraph launcher(spec());\n"
    << "  return launcher;\n}\n\n"
    << "const char* " << name << "_graph() {\n  return R\"kiln_graph(" << printGraph(g) << ")kiln_graph\";\n}\n\n"
    << "void " << name << "(" << params << ", void* stream) {\n"
    << "  const kiln::TensorView* tensors[] = {" << pointers << "};\n";
  if (!scalarArgs.empty()) s << "  const kiln::rt::ScalarArg scalars[] = {" << scalarArgs << "};\n";
  s << "  " << name << "_launcher().launch(std::span<const kiln::TensorView* const>(tensors), {}, "
    << (scalarArgs.empty() ? "{}" : "std::span<const kiln::rt::ScalarArg>(scalars)") << ", stream);\n}\n\n}  // namespace "
    << ns << "\n\n"
    << "extern \"C\" int kiln_" << name << "(const kiln_tensor* tensors, int32_t num_tensors, const double* scalars,\n"
    << "                   int32_t num_scalars, void* stream) {\n"
    << "  return kiln::rt::callFromC(&" << ns << "::" << name << "_launcher, tensors, num_tensors, scalars, num_scalars, stream);\n}\n\n"
    << "extern \"C\" const char* kiln_" << name << "_signature(void) {\n"
    << "  static const std::string json = kiln::rt::signatureJson(" << ns << "::" << name << "_launcher());\n"
    << "  return json.c_str();\n}\n";

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
  size_t bytes = 0;
  for (const compiler::CompiledKernel& k : cg.kernels) bytes += k.cubin.size();
  for (size_t bi = 1; bi < builds.size(); ++bi)
    for (const compiler::CompiledKernel& k : builds[bi].cg.kernels) bytes += k.cubin.size();
  std::printf("kiln aot: %s.h and %s.cpp in %s (%zu kernel(s), %zu bytes of cubin%s%s)\n", name.c_str(), name.c_str(),
              outDir->c_str(), cg.kernels.size(), bytes, cg.workspace.empty() ? "" : ", a workspace",
              builds.size() > 1 ? (", " + std::to_string(builds.size() - 1) + " variant(s)").c_str() : "");
  for (size_t ki = 0; ki < cg.kernels.size() && ki < tuningNotes.size(); ++ki)
    if (!tuningNotes[ki].empty()) std::printf("  %s: %s\n", cg.kernels[ki].name.c_str(), tuningNotes[ki].c_str());
  return 0;
}

}  // namespace kiln::cli
