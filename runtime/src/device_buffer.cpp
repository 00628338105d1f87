// DeviceBuffer: allocation, synchronous copies, fills and views.
#include "kiln/runtime/device_buffer.h"

#include <string>

#include "kiln/error.h"
#include "kiln/runtime/device.h"
#include "kiln/runtime/driver.h"

namespace kiln::rt {
namespace {

void checkRange(const char* what, size_t bytes, size_t offset, size_t size) {
  if (offset > size || bytes > size - offset)
    throw Error(std::string("kiln: DeviceBuffer::") + what + " of " + std::to_string(bytes) +
                " bytes at offset " + std::to_string(offset) + " does not fit in a buffer of " +
                std::to_string(size) + " bytes");
}

}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) {
  if (bytes == 0) return;
  const Driver& d = driver();
  ensureContext();
  CUdeviceptr p = 0;
  CUresult r = d.memAlloc(&p, bytes);
  if (r != CUDA_SUCCESS)
    throwCuError(r, ("cuMemAlloc(" + std::to_string(bytes) + " bytes)").c_str());
  ptr_ = p;
  size_ = bytes;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), size_(other.size_) {
  other.ptr_ = 0;
  other.size_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    DeviceBuffer old(std::move(*this));
    ptr_ = other.ptr_;
    size_ = other.size_;
    other.ptr_ = 0;
    other.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  try {
    driver().memFree(ptr_);  // errors ignored: nothing useful to do in a destructor
  } catch (...) {
  }
}

DeviceBuffer DeviceBuffer::fromHost(std::span<const uint8_t> bytes) {
  DeviceBuffer b(bytes.size());
  b.upload(bytes);
  return b;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  checkRange("upload", bytes, offset, size_);
  if (bytes == 0) return;
  check(driver().memcpyHtoD(ptr_ + offset, src, bytes), "cuMemcpyHtoD (DeviceBuffer::upload)");
}

void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  checkRange("download", bytes, offset, size_);
  if (bytes == 0) return;
  check(driver().memcpyDtoH(dst, ptr_ + offset, bytes), "cuMemcpyDtoH (DeviceBuffer::download)");
}

std::vector<uint8_t> DeviceBuffer::download() const {
  std::vector<uint8_t> out(size_);
  download(out.data(), size_);
  return out;
}

void DeviceBuffer::fill(uint8_t byte) {
  if (size_ == 0) return;
  check(driver().memsetD8(ptr_, byte, size_), "cuMemsetD8 (DeviceBuffer::fill)");
}

TensorView DeviceBuffer::view(DType dtype, std::vector<int64_t> shape, size_t byteOffset) const {
  TensorView v(nullptr, dtype, std::move(shape));
  const int64_t n = v.numel();
  if (n < 0) throw Error("kiln: DeviceBuffer::view of a negative shape " + formatShape(v.shape));
  checkRange("view", static_cast<size_t>(n) * dtypeSize(dtype), byteOffset, size_);
  v.data = ptr_ ? reinterpret_cast<void*>(static_cast<uintptr_t>(ptr_ + byteOffset)) : nullptr;
  return v;
}

}  // namespace kiln::rt
