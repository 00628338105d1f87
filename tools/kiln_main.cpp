// `kiln`: the command-line entry point. Each subcommand has --help.
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli.h"

using namespace kiln::cli;

namespace {

const std::vector<Command>& commands() {
  static const std::vector<Command> cmds = {
      {"check", "parse, validate and print a graph's canonical form", kCheckHelp, runCheck},
      {"eval", "reference-evaluate a graph on random inputs", kEvalHelp, runEval},
      {"compile", "compile a graph to kernels and show any stage", kCompileHelp, runCompile},
      {"samples", "list or write the sample graphs", kSamplesHelp, runSamples},
      {"cache", "look at and manage the disk cache of compiled kernels", kCacheHelp, runCache},
      {"aot", "compile a graph ahead of time into a C++ function (runtime only)", kAotHelp, runAot},
  };
  return cmds;
}

void usage(FILE* out) {
  std::fprintf(out, "usage: kiln <command> [options]\n\ncommands:\n");
  for (const Command& c : commands()) std::fprintf(out, "  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::fprintf(out, "\n'kiln <command> --help' describes one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (!std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") || !std::strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  for (const Command& c : commands()) {
    if (c.name != argv[1]) continue;
    try {
      return c.run(argc - 1, argv + 1);
    } catch (const kiln::Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
