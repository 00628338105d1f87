// GPU timing with CUDA events, following the project's measuring method:
// warm-up runs kept apart from the measured ones, events (not host clocks)
// around each run, and the median and 95th percentile over many runs.
#pragma once

#include <functional>
#include <vector>

#include "kiln/runtime/cuda_fwd.h"

namespace kiln::rt {

class Event {
 public:
  Event();  // cuEventCreate in the current context (see device.h)
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  void record(void* stream = nullptr);
  void synchronize() const;
  CUevent handle() const { return ev_; }

 private:
  CUevent ev_ = nullptr;
};

// Milliseconds between two recorded, completed events.
float elapsedMs(const Event& start, const Event& stop);

struct BenchmarkResult {
  int iters = 0;
  double medianUs = 0;
  double p95Us = 0;
  double minUs = 0;
  double maxUs = 0;
  double meanUs = 0;
};

// Median (middle value, or the mean of the two middle ones), p95 (nearest
// rank), min, max and mean of samples in microseconds. Pure host code.
BenchmarkResult summarizeSamples(std::vector<double> samplesUs);

struct BenchmarkOptions {
  int warmup = 10;
  int iters = 100;
  void* stream = nullptr;  // where fn enqueues its work
  // Before each measured run (outside its events), overwrite a buffer of
  // twice the L2 size so that no run finds its inputs in L2.
  bool flushL2 = false;
  // Enqueued on the stream after each flush (outside the events), when set:
  // an experiment's hook (bench_reduction's KILN_BENCH_FLUSH=read reads a
  // buffer of twice the L2 after the flush, so that the timed run finds
  // the L2 holding clean lines instead of the flush's dirty ones).
  std::function<void()> afterFlush;
};

// Runs fn `warmup` times, then `iters` times between a pair of events each,
// and summarizes the per-run GPU times. fn must enqueue its work on
// options.stream.
BenchmarkResult benchmark(const std::function<void()>& fn, const BenchmarkOptions& options);
inline BenchmarkResult benchmark(const std::function<void()>& fn, int warmup, int iters,
                                 void* stream = nullptr) {
  BenchmarkOptions o;
  o.warmup = warmup;
  o.iters = iters;
  o.stream = stream;
  return benchmark(fn, o);
}

}  // namespace kiln::rt
