// `kiln samples`: the sample graphs of examples/graphs, built with the DSL.
#include <cstdio>
#include <fstream>

#include "cli.h"
#include "kiln/dsl/text.h"
#include "samples.h"

namespace kiln::cli {

const char* kSamplesHelp =
    "usage: kiln samples [--write DIR]\n"
    "\n"
    "Lists the sample graphs built into kiln (the DSL programs behind\n"
    "examples/graphs/*.kiln). With --write, writes each as DIR/<name>.kiln.\n";

int runSamples(int argc, char** argv) {
  Args a = parseArgs(argc, argv, 1, {"write"});
  if (a.has("help")) {
    std::fputs(kSamplesHelp, stdout);
    return 0;
  }
  for (const samples::Sample& s : samples::all()) {
    if (auto dir = a.get("write")) {
      std::string path = *dir + "/" + s.name + ".kiln";
      std::ofstream f(path);
      if (!f) throw Error("kiln: cannot write " + path);
      f << printGraph(s.build());
      std::printf("wrote %s\n", path.c_str());
    } else {
      std::printf("%-14s %s\n", s.name.c_str(), s.summary.c_str());
    }
  }
  return 0;
}

}  // namespace kiln::cli
