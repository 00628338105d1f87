// kiln-tune: the tuning database's command line (docs/tuning.md).
//   kiln-tune merge OUT IN...   combine tuning files (the faster entry per key)
//   kiln-tune show FILE...      one line per entry
//   kiln-tune tune ...          not implemented yet (exit 2)
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "kiln/autotune/tuning_db.h"
#include "kiln/error.h"

namespace {

constexpr const char* kUsage = R"(usage: kiln-tune <command> [args]

Commands:
  merge OUT IN...   combine tuning database files into OUT (which may be one
                    of the inputs): one entry per key (signature, schedule,
                    schedule version, device, shape bucket), the one with the
                    lowest median time (ties: the newer date), sorted by key.
  show FILE...      print the entries of tuning database files, one a line.
  tune ...          tune kernels on the GPU: NOT IMPLEMENTED YET (issue 5);
                    exits with status 2.
  --help            this text.

Files are JSON, {"kiln_tuning_db": 1, "entries": [...]}; see docs/tuning.md.
KILN_TUNING_PATH lists the files (and directories of *.json files) that
kiln::compile will read, before the user file ~/.config/kiln/tuning.json.
)";

std::string fmtNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

int cmdMerge(const std::vector<std::string>& args) {
  if (args.size() < 2) {
    std::cerr << "kiln-tune merge: expected OUT and at least one IN\n" << kUsage;
    return 1;
  }
  std::vector<std::filesystem::path> inputs(args.begin() + 1, args.end());
  kiln::tune::MergeStats s = kiln::tune::mergeTuningFiles(inputs, args[0]);
  std::cout << "kiln-tune: merged " << s.entriesRead << " entries from " << s.filesRead << " file"
            << (s.filesRead == 1 ? "" : "s") << " into " << args[0] << ": " << s.entriesWritten << " written, "
            << s.duplicatesDropped << " duplicate" << (s.duplicatesDropped == 1 ? "" : "s") << " dropped\n";
  return 0;
}

int cmdShow(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::cerr << "kiln-tune show: expected FILE\n" << kUsage;
    return 1;
  }
  for (const std::string& file : args) {
    std::vector<kiln::tune::TuningEntry> entries = kiln::tune::readTuningFile(file);
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return kiln::tune::keyOf(a) < kiln::tune::keyOf(b);
    });
    if (args.size() > 1) std::cout << "# " << file << "\n";
    std::cout << "# " << entries.size() << " entr" << (entries.size() == 1 ? "y" : "ies") << "\n";
    for (const auto& e : entries) {
      std::string sig = e.kernelSignature.size() > 16 ? e.kernelSignature.substr(0, 16) : e.kernelSignature;
      std::cout << sig << "  " << e.schedule << " v" << e.scheduleVersion << "  " << e.device.str() << "  "
                << (e.shapeBucket.empty() ? "-" : e.shapeBucket) << "  median " << fmtNumber(e.medianUs)
                << " us  p95 " << fmtNumber(e.p95Us) << " us  " << fmtNumber(e.achieved) << " "
                << e.achievedUnit << "  " << e.config.dump() << "  kiln " << e.kilnVersion << "  " << e.date
                << "\n";
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return 1;
  }
  std::string cmd = args[0];
  args.erase(args.begin());
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  try {
    if (cmd == "merge") return cmdMerge(args);
    if (cmd == "show") return cmdShow(args);
    if (cmd == "tune") {
      std::cerr << "kiln-tune tune: not implemented yet. The tuning database and `kiln-tune merge`/`show` "
                   "exist; config spaces, the benchmark harness and the tuner itself do not (issue 5).\n";
      return 2;
    }
  } catch (const kiln::Error& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "kiln-tune: " << e.what() << "\n";
    return 1;
  }
  std::cerr << "kiln-tune: unknown command '" << cmd << "'\n" << kUsage;
  return 1;
}
