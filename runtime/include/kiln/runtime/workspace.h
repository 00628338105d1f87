// The device workspace of a graph compiled to several kernels (or to a
// kernel whose blocks pass state to a last block): the intermediates
// (compiler::CompiledGraph::workspace) live in one device allocation that
// the kiln::Kernel (or the ahead-of-time launcher, aot.h) owns, laid out
// again at every launch from that launch's dim values.
//
// The layout is pure host arithmetic (layoutWorkspace, tested on the CPU);
// Workspace adds the allocation, which only grows, and the TensorViews that
// the per-kernel argument packing takes. Part of the runtime (no LLVM), so
// its tests need neither the compiler nor a GPU.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/runtime/device_buffer.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln::rt {

// Every tensor starts at a multiple of 256 bytes from the base, and
// cuMemAlloc returns 256-byte aligned memory: each tensor gets the 16 bytes
// the vectorized entries need with room to spare, and no two tensors share
// a 128-byte cache line.
inline constexpr size_t kWorkspaceAlignment = 256;

// One axis of a workspace tensor: a static size, or the index of a graph
// dynamic dim (Graph::dynamicDims() order) whose launch value is the size.
struct WorkspaceAxis {
  int64_t size = 0;
  int dim = -1;  // -1: static
};

struct WorkspaceTensor {
  std::string name;  // for messages ("ws0")
  DType dtype = DType::F32;
  std::vector<WorkspaceAxis> shape;
};

// Bytes of one tensor for these dim values.
size_t workspaceTensorBytes(const WorkspaceTensor& tensor, std::span<const int64_t> dims);

// Places the tensors one after the other, each at the next multiple of
// kWorkspaceAlignment, in the given order (the compiler's first-written
// order), and writes each offset to `offsets` (one per tensor). Returns the
// total bytes (a multiple of kWorkspaceAlignment; 0 when every tensor is
// empty). Allocates nothing, so a launch can call it every time. Throws
// kiln::Error for a dim index out of range, a negative dim value or a size
// that overflows.
size_t layoutWorkspace(std::span<const WorkspaceTensor> tensors, std::span<const int64_t> dims,
                       std::span<size_t> offsets);

// The workspace of one Kernel. One at a time: a launch holds it (a Lease)
// from laying it out until its last kernel is enqueued, so that another
// thread cannot grow (free) the allocation between the two. What the GPU
// does afterwards is not guarded: launches of the same Kernel that may run
// at the same time on different streams share this memory, and the caller
// must order them (see kernel.h).
class Workspace {
 public:
  Workspace() = default;
  // `owner` names what the workspace serves in messages ("kernel 'ce'").
  explicit Workspace(std::vector<WorkspaceTensor> tensors, std::string owner = "a kernel graph");
  Workspace(const Workspace&) = delete;
  Workspace& operator=(const Workspace&) = delete;

  bool empty() const { return tensors_.empty(); }
  const std::vector<WorkspaceTensor>& tensors() const { return tensors_; }

  // Exclusive use of the workspace for one launch; the views stay valid
  // (and the allocation in place) until the lease is destroyed.
  class Lease {
   public:
    const TensorView& view(size_t i) const { return ws_->views_[i]; }
    std::span<const TensorView> views() const { return ws_->views_; }

   private:
    friend class Workspace;
    Lease(std::unique_lock<std::mutex> lock, const Workspace* ws) : lock_(std::move(lock)), ws_(ws) {}
    std::unique_lock<std::mutex> lock_;
    const Workspace* ws_;
  };

  // Lays the tensors out for `dims` (every graph dynamic dim's value, in
  // order), grows the allocation if it is too small, and points the views
  // at their places (empty tensors get null), for a launch on `stream`.
  // Growing waits for the whole context (cuCtxSynchronize) before it frees
  // the old allocation, because kernels enqueued earlier on any stream may
  // still use it; the allocation never shrinks.
  //
  // CUDA graph capture (capture.h): on a stream being captured, a growth
  // throws a kiln::Error that says to launch once before capturing (no
  // capture allows allocating or synchronizing), and an allocation that a
  // capture used is retired, not freed, when it grows later: it lives as
  // long as this Workspace, so a captured graph's pointers stay valid.
  //
  // Allocates no host memory once the views exist (they are built once,
  // with their ranks).
  Lease acquire(std::span<const int64_t> dims, void* stream);

  // Bytes allocated now (for tests and tools). Takes no lock: safe to call
  // while holding a lease.
  size_t capacity() const { return capacity_.load(std::memory_order_relaxed); }

 private:
  void grow(size_t bytes);

  std::vector<WorkspaceTensor> tensors_;
  std::string owner_;
  std::mutex mutex_;
  rt::DeviceBuffer buffer_;       // in the context current at the first growth
  bool captured_ = false;         // buffer_ was used by a launch under capture
  std::vector<rt::DeviceBuffer> retired_;  // captured allocations outgrown
  std::vector<size_t> offsets_;   // of the last layout
  std::vector<TensorView> views_;  // reused by every launch
  std::atomic<size_t> capacity_{0};  // buffer_.size(), readable without the lock
};

}  // namespace kiln::rt
