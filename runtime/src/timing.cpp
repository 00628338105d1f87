// Events and the event-timed benchmark loop.
#include "kiln/runtime/timing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kiln/error.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/driver.h"

namespace kiln::rt {

Event::Event() {
  const Driver& d = driver();
  ensureContext();
  check(d.eventCreate(&ev_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::Event(Event&& other) noexcept : ev_(other.ev_) { other.ev_ = nullptr; }

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    Event old(std::move(*this));
    ev_ = other.ev_;
    other.ev_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (!ev_) return;
  try {
    driver().eventDestroy(ev_);
  } catch (...) {
  }
}

void Event::record(void* stream) {
  check(driver().eventRecord(ev_, static_cast<CUstream>(stream)), "cuEventRecord");
}

void Event::synchronize() const { check(driver().eventSynchronize(ev_), "cuEventSynchronize"); }

float elapsedMs(const Event& start, const Event& stop) {
  float ms = 0;
  check(driver().eventElapsedTime(&ms, start.handle(), stop.handle()), "cuEventElapsedTime");
  return ms;
}

BenchmarkResult summarizeSamples(std::vector<double> s) {
  BenchmarkResult r;
  r.iters = static_cast<int>(s.size());
  if (s.empty()) return r;
  std::sort(s.begin(), s.end());
  const size_t n = s.size();
  r.medianUs = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  const size_t rank = static_cast<size_t>(std::ceil(0.95 * static_cast<double>(n)));
  r.p95Us = s[std::max<size_t>(rank, 1) - 1];
  r.minUs = s.front();
  r.maxUs = s.back();
  r.meanUs = std::accumulate(s.begin(), s.end(), 0.0) / static_cast<double>(n);
  return r;
}

BenchmarkResult benchmark(const std::function<void()>& fn, const BenchmarkOptions& o) {
  if (o.iters <= 0) throw Error("kiln: benchmark needs at least one measured run");
  const Driver& d = driver();
  ensureContext();
  const CUstream stream = static_cast<CUstream>(o.stream);
  DeviceBuffer flush;
  if (o.flushL2) flush = DeviceBuffer(2 * static_cast<size_t>(Device::current().properties().l2Bytes));

  for (int i = 0; i < o.warmup; ++i) fn();
  check(d.streamSynchronize(stream), "cuStreamSynchronize (benchmark warm-up)");

  std::vector<Event> starts(o.iters), stops(o.iters);
  for (int i = 0; i < o.iters; ++i) {
    if (flush.size())
      check(d.memsetD8Async(reinterpret_cast<uintptr_t>(flush.data()), uint8_t(i), flush.size(),
                            stream),
            "cuMemsetD8Async (L2 flush)");
    if (o.afterFlush) o.afterFlush();
    starts[i].record(o.stream);
    fn();
    stops[i].record(o.stream);
  }
  stops.back().synchronize();

  std::vector<double> us(o.iters);
  for (int i = 0; i < o.iters; ++i) us[i] = 1000.0 * elapsedMs(starts[i], stops[i]);
  return summarizeSamples(std::move(us));
}

}  // namespace kiln::rt
