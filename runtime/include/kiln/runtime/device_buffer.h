// DeviceBuffer: device memory for tests, examples and benchmarks. Owns one
// cuMemAlloc allocation (in the current context, see device.h), copies bytes
// to and from the host synchronously, fills it with a byte (to poison
// outputs before a run) and hands out TensorViews into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kiln/dtype.h"
#include "kiln/runtime/tensor_view.h"

namespace kiln::rt {

class DeviceBuffer {
 public:
  // The byte poison() writes: 0xFF makes every float NaN and every integer -1.
  static constexpr uint8_t kPoisonByte = 0xFF;

  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // 0 bytes: an empty buffer, no allocation
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  // A buffer holding a copy of `bytes`.
  static DeviceBuffer fromHost(std::span<const uint8_t> bytes);

  void* data() const { return reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_)); }
  size_t size() const { return size_; }

  // Host -> device at `offset`; throws kiln::Error if it would not fit.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void upload(std::span<const uint8_t> bytes, size_t offset = 0) {
    upload(bytes.data(), bytes.size(), offset);
  }
  // Device -> host from `offset`.
  void download(void* dst, size_t bytes, size_t offset = 0) const;
  std::vector<uint8_t> download() const;

  // Fills every byte (cuMemsetD8; ordered on the legacy default stream).
  void fill(uint8_t byte);
  void poison() { fill(kPoisonByte); }

  // A contiguous view into the buffer starting `byteOffset` bytes in (use an
  // odd multiple of the element size to test unaligned base pointers);
  // throws kiln::Error if it does not fit.
  TensorView view(DType dtype, std::vector<int64_t> shape, size_t byteOffset = 0) const;

 private:
  uint64_t ptr_ = 0;  // CUdeviceptr
  size_t size_ = 0;
};

}  // namespace kiln::rt
