#include "kiln/autotune/tuner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

#include "kiln/error.h"

namespace kiln::tune {

namespace {

using Clock = std::chrono::steady_clock;

// Registers are allocated per warp in units of 256 (8 per thread).
int registersPerBlock(int registersPerThread, int threads) {
  int perThread = (registersPerThread + 7) / 8 * 8;
  int warps = (threads + 31) / 32;
  return perThread * 32 * warps;
}

}  // namespace

const char* statusName(Candidate::Status s) {
  switch (s) {
    case Candidate::Status::Pending: return "pending";
    case Candidate::Status::Ok: return "ok";
    case Candidate::Status::CompileError: return "compile-error";
    case Candidate::Status::Pruned: return "pruned";
    case Candidate::Status::Wrong: return "wrong";
    case Candidate::Status::RunError: return "run-error";
  }
  return "?";
}

std::optional<std::string> pruneReason(const compiler::CompiledGraph& cg, int kernelIndex,
                                       const ResourceLimits& limits) {
  if (kernelIndex < 0 || static_cast<size_t>(kernelIndex) >= cg.kernels.size())
    return "no kernel " + std::to_string(kernelIndex);
  const compiler::CompiledKernel& k = cg.kernels[static_cast<size_t>(kernelIndex)];
  const int threads = k.launch.threadsPerBlock;
  for (const compiler::ResourceReport& r : k.resources) {
    if (r.spillStoreBytes > 0 || r.spillLoadBytes > 0)
      return r.kernel + " spills (" + std::to_string(r.spillStoreBytes) + " bytes stored, " +
             std::to_string(r.spillLoadBytes) + " loaded)";
    int regs = registersPerBlock(r.registers, threads);
    if (regs > limits.registersPerSm)
      return r.kernel + " needs " + std::to_string(regs) + " registers per block of " + std::to_string(threads) +
             " threads (an SM has " + std::to_string(limits.registersPerSm) + ")";
    int shared = r.sharedBytes + k.launch.sharedBytes;
    if (shared > limits.sharedBytesPerBlock)
      return r.kernel + " needs " + std::to_string(shared) + " bytes of shared memory per block (at most " +
             std::to_string(limits.sharedBytesPerBlock) + ")";
  }
  return std::nullopt;
}

SearchResult search(const std::vector<std::string>& space, int kernelIndex, const SearchHooks& hooks,
                    const SearchOptions& options) {
  auto t0 = Clock::now();
  const std::string kname = options.kernelName.empty() ? "kernel " + std::to_string(kernelIndex) : options.kernelName;
  if (space.empty()) throw Error("tune: " + kname + ": the config space is empty");
  if (!hooks.compile || !hooks.check || !hooks.time) throw Error("tune: " + kname + ": compile, check and time hooks are required");
  auto warn = hooks.warn ? hooks.warn : [](const std::string& m) { std::fprintf(stderr, "kiln: tune: %s\n", m.c_str()); };

  SearchResult result;
  result.candidates.resize(space.size());
  for (size_t i = 0; i < space.size(); ++i) result.candidates[i].config = space[i];
  std::vector<std::optional<compiler::CompiledGraph>> built(space.size());

  std::mutex progressMu;
  Progress progress;
  progress.total = static_cast<int>(space.size()) * 3 + options.finalists + 1;
  auto step = [&](const std::string& what) {
    if (!hooks.progress) return;
    std::lock_guard<std::mutex> lock(progressMu);
    ++progress.done;
    progress.done = std::min(progress.done, progress.total);
    progress.what = what;
    hooks.progress(progress);
  };

  // 1. Compile in parallel.
  {
    int threads = options.compileThreads > 0 ? options.compileThreads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = std::min<int>(threads, static_cast<int>(space.size()));
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i = next++; i < space.size(); i = next++) {
        Candidate& c = result.candidates[i];
        auto tc = Clock::now();
        try {
          built[i] = hooks.compile(c.config);
          c.compileMs = std::chrono::duration<double, std::milli>(Clock::now() - tc).count();
        } catch (const std::exception& e) {
          c.status = Candidate::Status::CompileError;
          c.why = e.what();
        }
        step("compile");
      }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
    worker();
    for (std::thread& t : pool) t.join();
  }
  for (const auto& b : built) result.compiled += b.has_value();
  // The heuristic's candidate is built as compile() builds it, with its
  // rebuilds after the resource report (a spilling cluster row rebuilt in
  // the next form down): it stands for the config that build chose.
  if (built[0] && static_cast<size_t>(kernelIndex) < built[0]->kernels.size() &&
      !built[0]->kernels[static_cast<size_t>(kernelIndex)].config.empty())
    result.candidates[0].config = built[0]->kernels[static_cast<size_t>(kernelIndex)].config;

  // 2. Prune from the resource reports.
  for (size_t i = 0; i < space.size(); ++i) {
    Candidate& c = result.candidates[i];
    if (!built[i]) continue;
    if (hooks.complete) hooks.complete(*built[i]);
    const auto& ks = built[i]->kernels;
    if (static_cast<size_t>(kernelIndex) < ks.size())
      for (const compiler::ResourceReport& r : ks[static_cast<size_t>(kernelIndex)].resources) {
        c.registers = std::max(c.registers, r.registers);
        c.spillBytes = std::max(c.spillBytes, r.spillStoreBytes);
      }
    if (auto why = pruneReason(*built[i], kernelIndex, options.limits)) {
      c.status = Candidate::Status::Pruned;
      c.why = *why;
      built[i].reset();
    }
  }
  auto failDefault = [&](const Candidate& c) {
    throw Error("tune: " + kname + ": the heuristic's config " + c.config + " is " + statusName(c.status) + ": " +
                c.why + " (a bug in kiln: please report it)");
  };
  if (!built[0]) failDefault(result.candidates[0]);

  // 3. Check, 4. time briefly.
  for (size_t i = 0; i < space.size(); ++i) {
    Candidate& c = result.candidates[i];
    if (!built[i]) {
      step("skip");
      step("skip");
      continue;
    }
    try {
      if (auto wrong = hooks.check(*built[i])) {
        c.status = Candidate::Status::Wrong;
        c.why = *wrong;
        warn(kname + ": config " + c.config + " gives wrong results (" + *wrong + "); dropped");
      }
    } catch (const std::exception& e) {
      c.status = Candidate::Status::RunError;
      c.why = e.what();
      warn(kname + ": config " + c.config + " failed to run (" + c.why + "); dropped");
    }
    step("check");
    if (c.status != Candidate::Status::Pending) {
      if (i == 0) failDefault(c);
      built[i].reset();
      step("skip");
      continue;
    }
    c.quick = hooks.time(*built[i], options.quickIters);
    c.status = Candidate::Status::Ok;
    ++result.benchmarked;
    step("time");
  }

  // 5. The finalists (the best few by the quick median, and the default),
  // timed again round-robin so that drift affects them alike. Each round
  // starts one finalist later than the one before: the first timing of a
  // round can run slow (the H200 measured the first of two back-to-back
  // timings of one kernel 1-7% slower), and a fixed order would hand that
  // slot to the default in every round, so that an equal candidate would
  // seem minGain faster.
  std::vector<size_t> ok;
  for (size_t i = 1; i < space.size(); ++i)
    if (result.candidates[i].status == Candidate::Status::Ok) ok.push_back(i);
  std::stable_sort(ok.begin(), ok.end(), [&](size_t a, size_t b) {
    return result.candidates[a].quick.medianUs < result.candidates[b].quick.medianUs;
  });
  if (ok.size() > static_cast<size_t>(std::max(0, options.finalists))) ok.resize(static_cast<size_t>(options.finalists));
  std::vector<size_t> finalists{0};
  finalists.insert(finalists.end(), ok.begin(), ok.end());
  const int rounds = std::max(1, options.finalRounds);
  std::vector<std::vector<double>> medians(finalists.size()), p95s(finalists.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t k = 0; k < finalists.size(); ++k) {
      const size_t f = (k + static_cast<size_t>(r)) % finalists.size();
      Timing t = hooks.time(*built[finalists[f]], std::max(1, options.finalIters / rounds));
      medians[f].push_back(t.medianUs);
      p95s[f].push_back(t.p95Us);
      if (r == rounds - 1) step("final");
    }
  }
  for (size_t f = 0; f < finalists.size(); ++f) {
    // The better round's median: drift and interference only add time.
    Candidate& c = result.candidates[finalists[f]];
    size_t bestRound = static_cast<size_t>(std::min_element(medians[f].begin(), medians[f].end()) - medians[f].begin());
    c.final = {medians[f][bestRound], p95s[f][bestRound]};
  }
  // A finalist may replace the default only if it was at least minGain
  // faster in every round (each round times the default too, next to it);
  // among those, the fastest by its best round wins.
  size_t winner = 0;
  for (size_t f = 1; f < finalists.size(); ++f) {
    bool everyRound = true;
    for (int r = 0; r < rounds; ++r)
      everyRound = everyRound && medians[f][static_cast<size_t>(r)] <
                                     medians[0][static_cast<size_t>(r)] * (1.0 - options.minGain);
    if (everyRound && (winner == 0 || result.candidates[finalists[f]].final.medianUs <
                                          result.candidates[winner].final.medianUs))
      winner = finalists[f];
  }
  result.defaultTiming = result.candidates[0].final;
  result.best = result.candidates[winner].config;
  result.bestIsDefault = winner == 0;
  result.bestTiming = result.candidates[winner].final;
  result.wallMs = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  return result;
}

}  // namespace kiln::tune
