// kiln launches inside CUDA graph capture (cuStreamBeginCapture, or
// cudaStreamBeginCapture next to the CUDA runtime or PyTorch).
//
// A launch enqueues kernels only, so it captures like any other kernel
// launch. What a launch may do first, once, is not stream work:
//  - loading a module (a dynamic dim's variant, a lazily built scalar entry,
//    an ahead-of-time graph's first call): Module::load runs it with this
//    thread's capture mode relaxed (RelaxedCaptureMode), as PyTorch does for
//    its allocations, so a global-mode capture is not invalidated by it;
//  - growing a workspace (a multi-kernel graph's intermediates): it
//    allocates, zeroes and synchronizes, which no capture allows, so
//    Workspace::acquire refuses it on a capturing stream with an error that
//    says to launch once before capturing. A workspace that a capture used
//    is never freed while its Kernel lives (a later growth retires it), so a
//    graph keeps valid pointers.
#pragma once

namespace kiln::rt {

// True while `stream` (a CUstream or cudaStream_t; null is the legacy
// default stream) is being captured, or may not be used because another
// stream's capture forbids it (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT). Throws
// kiln::Error for any other driver error, and without a driver.
bool streamCapturing(void* stream);

// Sets this thread's stream-capture mode to relaxed for its lifetime and
// restores the previous mode after: calls that are not stream work
// (cuModuleLoadData, cuMemAlloc) are then allowed during a capture that
// began in global or thread-local mode. Without a driver it does nothing.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode() noexcept;
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  int previous_ = 0;  // CUstreamCaptureMode
  bool active_ = false;
};

}  // namespace kiln::rt
