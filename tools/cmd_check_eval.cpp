// `kiln check` and `kiln eval`: the graph-level subcommands.
#include <cinttypes>
#include <cstdio>

#include "cli.h"
#include "kiln/dsl/text.h"

namespace kiln::cli {

const char* kCheckHelp =
    "usage: kiln check FILE\n"
    "\n"
    "Parses and validates a graph file (.kiln) and prints its canonical text\n"
    "form. Exit status 1 with a line:column message when the file is invalid.\n";

const char* kEvalHelp =
    "usage: kiln eval FILE [--dim NAME=VALUE]... [--seed N]\n"
    "\n"
    "Evaluates the graph with the fp64 reference evaluator on random inputs\n"
    "(floats uniform in [-1, 1), integers in [0, 8), runtime scalars in\n"
    "[0.5, 1)) and prints, per output, its shape, dtype, min/max/mean and a\n"
    "checksum (FNV-1a of the output's bytes).\n"
    "\n"
    "  --dim NAME=VALUE      bind a dynamic dim (repeat for each dim)\n"
    "  --seed N              random seed (default 0)\n"
    "  --range NAME=LO:HI    draw parameter NAME from [LO, HI) (repeatable),\n"
    "                        e.g. --range exp_avg_sq=0:1 --range targets=0:32768\n";

int runCheck(int argc, char** argv) {
  int rc = 0;
  std::optional<Args> parsed = parseFileCommand(argc, argv, kCheckHelp, {}, rc);
  if (!parsed) return rc;
  const Args& a = *parsed;
  Graph g = parseGraphFile(a.positional[0]);
  std::fputs(printGraph(g).c_str(), stdout);
  return 0;
}

int runEval(int argc, char** argv) {
  int rc = 0;
  std::optional<Args> parsed = parseFileCommand(argc, argv, kEvalHelp, {"dim", "seed", "range"}, rc);
  if (!parsed) return rc;
  const Args& a = *parsed;
  Graph g = parseGraphFile(a.positional[0]);
  DimBindings dims = parseDims(a.all("dim"));
  uint64_t seed = 0;
  if (auto s = a.get("seed")) {
    try {
      seed = std::stoull(*s);
    } catch (const std::logic_error&) {
      throw Error("kiln: --seed '" + *s + "': expected a non-negative integer");
    }
  }
  for (const std::string& d : g.dynamicDims())
    if (!dims.count(d))
      throw Error("kiln: the graph has the dynamic dim " + d + "; bind it with --dim " + d + "=VALUE");
  InputRanges ranges;
  for (const std::string& spec : a.all("range")) {
    size_t eq = spec.find('='), colon = spec.find(':', eq == std::string::npos ? 0 : eq);
    if (eq == std::string::npos || colon == std::string::npos || eq == 0)
      throw Error("kiln: --range '" + spec + "': expected NAME=LO:HI, e.g. --range x=-1:1");
    try {
      ranges[spec.substr(0, eq)] = {std::stod(spec.substr(eq + 1, colon - eq - 1)), std::stod(spec.substr(colon + 1))};
    } catch (const std::logic_error&) {
      throw Error("kiln: --range '" + spec + "': LO and HI must be numbers");
    }
  }
  EvalInputs in = randomInputs(g, dims, seed, ranges);
  for (const EvalOutput& out : evaluate(g, in)) {
    const HostTensor& t = out.value;
    double lo = 0, hi = 0, sum = 0;
    int64_t nans = 0;
    for (int64_t i = 0; i < t.numel(); ++i) {
      double v = t.get(i);
      if (v != v) {
        ++nans;
        continue;
      }
      if (i == nans || v < lo) lo = v;
      if (i == nans || v > hi) hi = v;
      sum += v;
    }
    uint64_t h = 1469598103934665603ull;
    const auto* bytes = static_cast<const uint8_t*>(t.data());
    for (size_t i = 0; i < t.bytes(); ++i) h = (h ^ bytes[i]) * 1099511628211ull;
    std::string shape = "[";
    for (size_t i = 0; i < t.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
    shape += "]";
    int64_t finite = t.numel() - nans;
    std::printf("%s: %s%s min %.9g max %.9g mean %.9g nan %" PRId64 " checksum %016" PRIx64 "\n",
                out.name.c_str(), std::string(dtypeName(t.dtype())).c_str(), shape.c_str(), lo, hi,
                finite ? sum / finite : 0.0, nans, h);
  }
  return 0;
}

}  // namespace kiln::cli
