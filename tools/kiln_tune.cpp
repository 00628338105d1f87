// kiln-tune: offline tuning and the tuning database's command line
// (docs/tuning.md).
//   kiln-tune tune FILE... [--dim N=V]... [--manifest M] [-o OUT] [--shard i/N]
//   kiln-tune merge OUT IN...   combine tuning files (the faster entry per key)
//   kiln-tune show FILE...      one line per entry
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "kiln/autotune/tuning_db.h"
#include "kiln/dsl/text.h"
#include "kiln/error.h"
#include "kiln/kiln.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"

extern char** environ;

namespace {

constexpr const char* kUsage = R"(usage: kiln-tune <command> [args]

Commands:
  merge OUT IN...   combine tuning database files into OUT (which may be one
                    of the inputs): one entry per key (signature, schedule,
                    schedule version, device, shape bucket), the one with the
                    lowest median time (ties: the newer date), sorted by key.
  show FILE...      print the entries of tuning database files, one a line.
  tune [FILE...] [--dim NAME=VALUE]... [--manifest M] [-o OUT] [--shard I/N]
       [--if-missing] [--iters N] [--gpus N]
                    tune every kernel of each graph file on the GPU at the
                    given dims (values of the graph's dynamic dims: the sizes
                    benchmarked, and the shape bucket the result serves) and
                    record the results in OUT (default: the user file,
                    ~/.config/kiln/tuning.json); entries already in OUT for
                    other keys are kept.
                    --manifest M: one job per line, "FILE [NAME=VALUE...]"
                      (paths relative to M; # starts a comment); --dim
                      values apply to the command line's FILEs.
                    --shard I/N: only jobs I, I+N, I+2N... (0 <= I < N), to
                      spread one job list over N machines; `merge` gathers
                      the pieces.
                    --if-missing: skip kernels OUT already has.
                    --iters N: timed runs per finalist (default 40).
                    --gpus N: workers, one per GPU (default: every visible
                      GPU; each worker is a process of its own).
                    --verbose: every candidate's status and times (also
                      KILN_TUNE_VERBOSE=1 in any program that tunes).
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

// ---- tune -------------------------------------------------------------------

struct Job {
  std::string file;
  std::map<std::string, int64_t> dims;
  std::string label() const {
    std::string s = file;
    for (const auto& [n, v] : dims) s += " " + n + "=" + std::to_string(v);
    return s;
  }
};

std::pair<std::string, int64_t> parseDim(const std::string& spec, const std::string& where) {
  size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    throw kiln::Error("kiln-tune: " + where + ": expected NAME=VALUE, got '" + spec + "'");
  try {
    size_t used = 0;
    long long v = std::stoll(spec.substr(eq + 1), &used);
    if (used != spec.size() - eq - 1 || v < 0) throw std::invalid_argument("bad");
    return {spec.substr(0, eq), v};
  } catch (const std::exception&) {
    throw kiln::Error("kiln-tune: " + where + ": '" + spec + "' needs a non-negative integer value");
  }
}

std::vector<Job> readManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw kiln::Error("kiln-tune: cannot read manifest " + path);
  std::vector<Job> jobs;
  std::string line;
  int lineNo = 0;
  std::filesystem::path base = std::filesystem::path(path).parent_path();
  while (std::getline(in, line)) {
    ++lineNo;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream ss(line);
    std::string word;
    Job job;
    while (ss >> word) {
      if (job.file.empty()) {
        std::filesystem::path p(word);
        job.file = (p.is_absolute() || base.empty() ? p : base / p).string();
      } else {
        job.dims.insert(parseDim(word, path + ":" + std::to_string(lineNo)));
      }
    }
    if (!job.file.empty()) jobs.push_back(std::move(job));
  }
  return jobs;
}

std::string fmtDuration(double s) {
  char buf[32];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

// Runs one worker process per GPU on a share of the jobs (CUDA_VISIBLE_DEVICES
// set to its GPU), each writing OUT.gpuK.json, then merges them into OUT.
int runWorkers(int gpus, const std::vector<std::string>& args, const std::string& out, int shardIndex,
               int shardCount) {
  std::vector<pid_t> pids;
  std::vector<std::string> parts;
  std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  for (int k = 0; k < gpus; ++k) {
    std::string part = out + ".gpu" + std::to_string(k) + ".json";
    std::filesystem::remove(part);
    parts.push_back(part);
    // Worker k of G on shard I/N takes shard I + N*k of N*G.
    std::vector<std::string> argv{self, "tune"};
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "-o" || args[i] == "--shard" || args[i] == "--gpus") {
        ++i;
        continue;
      }
      argv.push_back(args[i]);
    }
    argv.insert(argv.end(), {"-o", part, "--shard",
                             std::to_string(shardIndex + shardCount * k) + "/" + std::to_string(shardCount * gpus),
                             "--gpus", "1"});
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("CUDA_VISIBLE_DEVICES=", 0) != 0) env.push_back(*e);
    env.push_back("CUDA_VISIBLE_DEVICES=" + std::to_string(k));
    env.push_back("KILN_TUNE_WORKER=" + std::to_string(k));
    std::vector<char*> av, ev;
    for (auto& a : argv) av.push_back(a.data());
    av.push_back(nullptr);
    for (auto& e : env) ev.push_back(e.data());
    ev.push_back(nullptr);
    pid_t pid = 0;
    if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, av.data(), ev.data()) != 0)
      throw kiln::Error("kiln-tune: cannot start a worker process for GPU " + std::to_string(k));
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  std::vector<std::filesystem::path> inputs;
  if (std::filesystem::exists(out)) inputs.push_back(out);
  for (const std::string& p : parts)
    if (std::filesystem::exists(p)) inputs.push_back(p);
  if (!inputs.empty()) {
    kiln::tune::MergeStats s = kiln::tune::mergeTuningFiles(inputs, out);
    std::cout << "kiln-tune: " << gpus << " workers; " << s.entriesWritten << " entries in " << out << "\n";
  }
  for (const std::string& p : parts) std::filesystem::remove(p);
  if (failed) std::cerr << "kiln-tune: " << failed << " worker(s) failed\n";
  return failed ? 1 : 0;
}

int cmdTune(const std::vector<std::string>& args) {
  std::vector<std::string> files, dimSpecs, manifests;
  std::string out;
  int shardIndex = 0, shardCount = 1, iters = 40, gpus = 0;
  bool ifMissing = false;
  auto value = [&](size_t& i) -> const std::string& {
    if (i + 1 >= args.size()) throw kiln::Error("kiln-tune tune: " + args[i] + " needs a value");
    return args[++i];
  };
  auto integer = [&](const std::string& opt, const std::string& v) {
    try {
      size_t used = 0;
      int n = std::stoi(v, &used);
      if (used == v.size()) return n;
    } catch (const std::exception&) {
    }
    throw kiln::Error("kiln-tune tune: " + opt + " needs an integer, got '" + v + "'");
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--dim") dimSpecs.push_back(value(i));
    else if (a.rfind("--dim=", 0) == 0) dimSpecs.push_back(a.substr(6));
    else if (a == "--manifest") manifests.push_back(value(i));
    else if (a == "-o") out = value(i);
    else if (a == "--if-missing") ifMissing = true;
    else if (a == "--verbose") setenv("KILN_TUNE_VERBOSE", "1", 1);
    else if (a == "--iters") iters = integer(a, value(i));
    else if (a == "--gpus") gpus = integer(a, value(i));
    else if (a == "--shard") {
      const std::string& v = value(i);
      size_t slash = v.find('/');
      if (slash == std::string::npos) throw kiln::Error("kiln-tune tune: --shard needs I/N, got '" + v + "'");
      shardIndex = integer("--shard", v.substr(0, slash));
      shardCount = integer("--shard", v.substr(slash + 1));
      if (shardCount < 1 || shardIndex < 0 || shardIndex >= shardCount)
        throw kiln::Error("kiln-tune tune: --shard " + v + ": need 0 <= I < N");
    } else if (!a.empty() && a[0] == '-') {
      throw kiln::Error("kiln-tune tune: unknown option " + a);
    } else {
      files.push_back(a);
    }
  }
  if (iters < 2) throw kiln::Error("kiln-tune tune: --iters must be at least 2");
  std::vector<Job> jobs;
  std::map<std::string, int64_t> dims;
  for (const std::string& d : dimSpecs) dims.insert(parseDim(d, "--dim"));
  for (const std::string& f : files) jobs.push_back({f, dims});
  for (const std::string& m : manifests)
    for (Job& j : readManifest(m)) jobs.push_back(std::move(j));
  if (jobs.empty()) throw kiln::Error("kiln-tune tune: no graph files (give FILEs or --manifest)");
  if (out.empty()) out = kiln::tune::defaultUserTuningFile().string();

  if (!kiln::rt::driverAvailable())
    throw kiln::Error("kiln-tune tune: tuning needs a GPU: " + kiln::rt::driverUnavailableReason());
  const int visible = kiln::rt::Device::count();
  if (gpus <= 0) gpus = visible;
  if (gpus > visible)
    throw kiln::Error("kiln-tune tune: --gpus " + std::to_string(gpus) + " but " + std::to_string(visible) +
                      " GPU(s) are visible");
  if (gpus > 1) return runWorkers(gpus, args, out, shardIndex, shardCount);

  std::vector<Job> mine;
  for (size_t j = 0; j < jobs.size(); ++j)
    if (static_cast<int>(j % static_cast<size_t>(shardCount)) == shardIndex) mine.push_back(jobs[j]);
  const char* worker = std::getenv("KILN_TUNE_WORKER");
  const std::string prefix = worker ? std::string("[gpu ") + worker + "] " : "";
  std::cout << prefix << "kiln-tune: " << mine.size() << " of " << jobs.size() << " job(s) (shard " << shardIndex
            << "/" << shardCount << ") on " << kiln::rt::Device::current().properties().summary() << " into " << out
            << "\n";

  kiln::tune::TuningDbOptions dbo;
  dbo.searchPath = "";
  dbo.userFile = out;
  kiln::tune::TuningDatabase db(dbo);

  // The progress bar: jobs done plus the current kernel's share, with an ETA.
  const bool tty = isatty(2) && !worker;
  const auto start = std::chrono::steady_clock::now();
  size_t jobsDone = 0;
  std::mutex mu;
  kiln::setTuningProgress([&](const kiln::TuningProgress& p) {
    if (!tty) return;
    std::lock_guard<std::mutex> lock(mu);
    double frac = (static_cast<double>(jobsDone) + (p.total ? double(p.done) / p.total : 0.0)) / double(mine.size());
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    double eta = frac > 0.01 ? elapsed / frac * (1 - frac) : 0;
    int width = 30, filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%s%s] %3.0f%%  job %zu/%zu  %s  ETA %s   ", std::string(static_cast<size_t>(filled), '#').c_str(),
                 std::string(static_cast<size_t>(width - filled), '.').c_str(), frac * 100, jobsDone + 1, mine.size(),
                 p.kernel.c_str(), frac > 0.01 ? fmtDuration(eta).c_str() : "?");
    std::fflush(stderr);
  });

  int failed = 0;
  for (const Job& job : mine) {
    auto t0 = std::chrono::steady_clock::now();
    try {
      kiln::Graph g = kiln::parseGraphFile(job.file);
      kiln::CompileOptions o;
      o.tune = ifMissing ? kiln::CompileOptions::Tune::IfMissing : kiln::CompileOptions::Tune::Always;
      o.tuningDatabase = &db;
      o.dims = job.dims;
      o.tuneIters = iters;
      kiln::Kernel k = kiln::compile(g, o);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (tty) std::fprintf(stderr, "\r%*s\r", 100, "");
      std::cout << prefix << job.label() << " (" << std::fixed;
      std::cout.precision(2);
      std::cout << s << " s)\n";
      std::istringstream ex(k.explain());
      std::string line, kernel;
      while (std::getline(ex, line)) {
        if (line.rfind("  kiln_", 0) == 0) kernel = line.substr(2);
        if (line.find("tuning: ") != std::string::npos)
          std::cout << prefix << "  " << kernel << "\n" << prefix << "  " << line.substr(line.find("tuning: ")) << "\n";
      }
    } catch (const std::exception& e) {
      if (tty) std::fprintf(stderr, "\r%*s\r", 100, "");
      std::cerr << prefix << job.label() << ": " << e.what() << "\n";
      ++failed;
    }
    ++jobsDone;
  }
  kiln::setTuningProgress(nullptr);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << prefix << "kiln-tune: " << mine.size() - static_cast<size_t>(failed) << " job(s) tuned, " << failed
            << " failed, in " << fmtDuration(total) << "; " << out << " now holds "
            << kiln::tune::readTuningFile(out).size() << " entries\n";
  return failed ? 1 : 0;
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
    if (cmd == "tune") return cmdTune(args);
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
