// The workspace of a multi-kernel graph: layout arithmetic and the growing
// device allocation.
#include "kiln/runtime/workspace.h"

#include "kiln/error.h"
#include "kiln/runtime/capture.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"

namespace kiln::rt {

namespace {

[[noreturn]] void tooLarge(const WorkspaceTensor& t) {
  throw Error("kiln: workspace tensor '" + t.name + "' (" + std::string(dtypeName(t.dtype)) +
              ") is too large for these dim values: its byte size overflows");
}

}  // namespace

size_t workspaceTensorBytes(const WorkspaceTensor& t, std::span<const int64_t> dims) {
  size_t bytes = static_cast<size_t>(dtypeSize(t.dtype));
  for (const WorkspaceAxis& a : t.shape) {
    int64_t n = a.size;
    if (a.dim >= 0) {
      if (static_cast<size_t>(a.dim) >= dims.size())
        throw Error("kiln: workspace tensor '" + t.name + "' uses dynamic dim " + std::to_string(a.dim) +
                    " but only " + std::to_string(dims.size()) + " dim values were given");
      n = dims[static_cast<size_t>(a.dim)];
    }
    if (n < 0)
      throw Error("kiln: workspace tensor '" + t.name + "' would have a negative size " + std::to_string(n));
    // Multiply through even after a zero, so that a bad later axis is still
    // reported; __builtin_mul_overflow keeps a huge dim from wrapping.
    if (__builtin_mul_overflow(bytes, static_cast<size_t>(n), &bytes)) tooLarge(t);
  }
  return bytes;
}

size_t layoutWorkspace(std::span<const WorkspaceTensor> tensors, std::span<const int64_t> dims,
                       std::span<size_t> offsets) {
  if (offsets.size() != tensors.size())
    throw Error("kiln: layoutWorkspace: " + std::to_string(offsets.size()) + " offsets for " +
                std::to_string(tensors.size()) + " tensors");
  size_t end = 0;  // always a multiple of the alignment
  for (size_t i = 0; i < tensors.size(); ++i) {
    const size_t bytes = workspaceTensorBytes(tensors[i], dims);
    offsets[i] = end;
    size_t padded = 0;
    if (__builtin_add_overflow(bytes, kWorkspaceAlignment - 1, &padded) ||
        __builtin_add_overflow(end, padded / kWorkspaceAlignment * kWorkspaceAlignment, &end))
      tooLarge(tensors[i]);
  }
  return end;
}

Workspace::Workspace(std::vector<WorkspaceTensor> tensors, std::string owner)
    : tensors_(std::move(tensors)), owner_(std::move(owner)), offsets_(tensors_.size()), views_(tensors_.size()) {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    views_[i].dtype = tensors_[i].dtype;
    views_[i].shape.resize(tensors_[i].shape.size());  // sized once: launches only overwrite
  }
}

Workspace::Lease Workspace::acquire(std::span<const int64_t> dims, void* stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  const size_t total = layoutWorkspace(tensors_, dims, offsets_);
  const bool capturing = total > 0 && streamCapturing(stream);
  if (total > buffer_.size()) {
    if (capturing)
      throw Error("kiln: the workspace of " + owner_ + " must grow from " + std::to_string(buffer_.size()) +
                  " to " + std::to_string(total) +
                  " bytes for this launch, but its stream is being captured into a CUDA graph, and a capture "
                  "allows no allocation or synchronization: launch it once outside the capture, at the largest "
                  "dim values the graph will use, before capturing");
    grow(total);
  }
  if (capturing) captured_ = true;
  auto* base = static_cast<char*>(buffer_.data());
  for (size_t i = 0; i < tensors_.size(); ++i) {
    TensorView& v = views_[i];
    int64_t numel = 1;
    for (size_t a = 0; a < v.shape.size(); ++a) {
      const WorkspaceAxis& axis = tensors_[i].shape[a];
      v.shape[a] = axis.dim >= 0 ? dims[static_cast<size_t>(axis.dim)] : axis.size;
      numel *= v.shape[a];
    }
    // An empty tensor may sit at the very end of the allocation (or have
    // none): give it null, which the packer accepts for empty tensors only.
    v.data = numel == 0 ? nullptr : base + offsets_[i];
  }
  return Lease(std::move(lock), this);
}

void Workspace::grow(size_t bytes) {
  if (buffer_.size() > 0) {
    // Kernels enqueued by earlier launches, on any stream, may still read or
    // write the old allocation. cuMemFree waits for the device as well in
    // practice, but that is an implementation detail; waiting here makes it
    // a guarantee. Growth is rare (the allocation never shrinks), so the
    // stall is paid once per new largest size. The old allocation is freed
    // before the new one is made, so peak memory stays at the new size.
    rt::ensureContext();
    rt::check(rt::driver().ctxSynchronize(), "cuCtxSynchronize (before growing a kernel workspace)");
    // A captured graph may still replay on the old allocation: keep it.
    if (captured_) retired_.push_back(std::move(buffer_));
    captured_ = false;
    buffer_ = rt::DeviceBuffer();
    capacity_ = 0;
  }
  buffer_ = rt::DeviceBuffer(bytes);  // cuMemAlloc: 256-byte aligned
  // Zeroed, and the zero in place before any launch that follows (on any
  // stream): a grid tail's block counter starts at zero, and each launch's
  // last block leaves it there.
  buffer_.fill(0);
  rt::ensureContext();
  rt::check(rt::driver().ctxSynchronize(), "cuCtxSynchronize (after zeroing a kernel workspace)");
  capacity_ = bytes;
}

}  // namespace kiln::rt
