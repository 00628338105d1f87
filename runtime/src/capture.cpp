// Stream-capture queries and the relaxed capture mode (capture.h).
#include "kiln/runtime/capture.h"

#include <cuda.h>

#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"

namespace kiln::rt {

bool streamCapturing(void* stream) {
  const Driver& d = driver();
  ensureContext();  // the query needs one (a stream's own, or the legacy stream's)
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUresult r = d.streamIsCapturing(static_cast<CUstream>(stream), &status);
  if (r == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) return true;
  check(r, "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

RelaxedCaptureMode::RelaxedCaptureMode() noexcept {
  if (!driverAvailable()) return;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  if (driver().threadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS) {
    previous_ = static_cast<int>(mode);
    active_ = true;
  }
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  if (!active_) return;
  auto mode = static_cast<CUstreamCaptureMode>(previous_);
  driver().threadExchangeStreamCaptureMode(&mode);
}

}  // namespace kiln::rt
