#include "kernel_text.h"

#include <set>

#include "element_emitter.h"

namespace kiln::compiler {

int smNumber(const std::string& chip) {
  int sm = 0;
  for (size_t i = 3; i < chip.size() && chip[i] >= '0' && chip[i] <= '9'; ++i) sm = sm * 10 + (chip[i] - '0');
  return sm;
}

KernelParams kernelParams(const Graph& g, const std::vector<int>& inputs, size_t numOutputs,
                          const std::vector<std::string>& dims, const std::vector<int>& scalars,
                          const ParamOptions& options) {
  KernelParams p;
  int argNo = 0;
  auto addArg = [&](const std::string& type, const std::string& attrs) {
    std::string name = "%arg" + std::to_string(argNo++);
    if (!p.signature.empty()) p.signature += ", ";
    p.signature += name + ": " + type + (attrs.empty() ? "" : " " + attrs);
    return name;
  };
  const std::string in = options.plain ? "" : options.readonlyInputs ? "{llvm.noalias, llvm.readonly}" : "";
  for (int id : inputs) p.argOf[id] = addArg("!llvm.ptr<1>", in);
  for (size_t o = 0; o < numOutputs; ++o)
    p.outputs.push_back(addArg("!llvm.ptr<1>", options.plain             ? ""
                                               : options.readBack.count(o) ? "{llvm.noalias}"
                                                                           : "{llvm.noalias, llvm.writeonly}"));
  for (const std::string& d : dims) p.dimArg[d] = addArg("i64", "");
  for (int id : scalars) p.argOf[id] = addArg(computeType(g.node(id).dtype), "");
  return p;
}

namespace {
std::string reindent(const std::string& s) {  // two more levels: inside gpu.module and the function
  std::string out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    out += "  " + s.substr(start, end - start + 1);
    start = end + 1;
  }
  return out;
}
}  // namespace

std::string internalFuncText(const std::string& name, const std::string& signature, const MlirWriter& pre,
                             const MlirWriter& body) {
  return "    llvm.func internal @" + name + "(" + signature + ") {\n" + reindent(pre.text()) + reindent(body.text()) +
         "      llvm.return\n    }\n";
}

std::string gpuFuncText(const std::string& entry, const std::string& signature, int threadsPerBlock,
                        const MlirWriter& pre, const MlirWriter& body, int minBlocksPerSM) {
  // nvvm.minctasm: ptxas caps the registers so that this many blocks fit.
  return "    gpu.func @" + entry + "(" + signature + ") kernel attributes {known_block_size = array<i32: " +
         std::to_string(threadsPerBlock) + ", 1, 1>" +
         (minBlocksPerSM > 0 ? ", nvvm.minctasm = " + std::to_string(minBlocksPerSM) + " : i32" : std::string()) +
         "} {\n" + reindent(pre.text()) + reindent(body.text()) +
         "      gpu.return\n    }\n";
}

std::string polyValue(MlirWriter& w, const Poly& p, const std::string& type,
                      const std::map<std::string, std::string>& dimArg) {
  std::string acc;
  for (const Monomial& m : p.terms()) {
    std::string term = w.integer(m.coeff, type);
    for (const std::string& d : m.dims) term = w.assign("arith.muli " + term + ", " + dimArg.at(d) + " : " + type);
    acc = acc.empty() ? term : w.assign("arith.addi " + acc + ", " + term + " : " + type);
  }
  return acc.empty() ? w.integer(0, type) : acc;
}

std::vector<std::string> usedDims(const Graph& g, const std::vector<Shape>& shapes,
                                  const std::map<std::string, Access>& accesses) {
  std::set<std::string> used;
  for (const Shape& s : shapes)
    for (const Dim& d : s)
      if (d.isDynamic()) used.insert(d.name);
  auto notePoly = [&](const Poly& p) {
    for (const Monomial& m : p.terms()) used.insert(m.dims.begin(), m.dims.end());
  };
  for (const auto& [key, a] : accesses) {
    for (const Poly& p : a.strides) notePoly(p);
    notePoly(a.base);
  }
  std::vector<std::string> out;
  for (const std::string& d : g.dynamicDims())
    if (used.count(d)) out.push_back(d);
  return out;
}

}  // namespace kiln::compiler
