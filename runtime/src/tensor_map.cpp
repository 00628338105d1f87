#include "kiln/runtime/tensor_map.h"

#include <cuda.h>

#include <array>
#include <string>

#include "kiln/error.h"
#include "kiln/runtime/arg_packer.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/launch.h"
#include "kiln/runtime/module.h"
#include "kiln/runtime/signature.h"

namespace kiln::rt {

static_assert(sizeof(TensorMap) == sizeof(CUtensorMap), "TensorMap must match CUtensorMap");

namespace {

[[noreturn, gnu::cold]] void fail(const char* what, const std::string& problem) {
  throw Error(std::string("kiln: ") + what + ": " + problem);
}

}  // namespace

void encodeTensorMap3d(TensorMap& map, const char* what, DType dtype, const void* data, uint64_t inner,
                       uint64_t rows, uint64_t batch, uint32_t boxInner, uint32_t boxRows) {
  const uint64_t elem = static_cast<uint64_t>(dtypeSize(dtype));
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0)
    fail(what, "the pointer is not 16-byte aligned (TMA needs it)");
  if ((inner * elem) % 16 != 0)
    fail(what, "a row of " + std::to_string(inner) + " elements is not a multiple of 16 bytes (TMA needs it)");
  if (inner == 0 || rows == 0 || batch == 0) fail(what, "an empty tensor has no tensor map");
  if (inner > (1ull << 32) || rows > (1ull << 32) || batch > (1ull << 32))
    fail(what, "a dim beyond 2^32 elements");
  const Driver& d = driver();
  if (!d.tensorMapEncodeTiled) fail(what, "the driver lacks cuTensorMapEncodeTiled (CUDA 12.0+ is needed)");
  CUtensorMapDataType type;
  switch (dtype) {
    case DType::BF16: type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; break;
    case DType::F16: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT16; break;
    case DType::F32: type = CU_TENSOR_MAP_DATA_TYPE_FLOAT32; break;
    default: fail(what, "no tensor map for dtype " + std::string(dtypeName(dtype)));
  }
  const cuuint64_t dims[3] = {inner, rows, batch};
  const cuuint64_t strides[2] = {inner * elem, inner * rows * elem};
  const cuuint32_t box[3] = {boxInner, boxRows, 1};
  const cuuint32_t elementStrides[3] = {1, 1, 1};
  const CUresult r = d.tensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(&map), type, 3, const_cast<void*>(data),
                                            dims, strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    fail(what, "cuTensorMapEncodeTiled failed: " + cuErrorText(r) + " (sizes " + std::to_string(batch) + " x " +
                   std::to_string(rows) + " x " + std::to_string(inner) + ", box " + std::to_string(boxRows) + " x " +
                   std::to_string(boxInner) + ")");
}

void launchWithTensorMaps(const Function& fn, const LaunchConfig& cfg, const ArgBlock& block,
                          std::span<const TensorMapRule> rules, const KernelSignature& sig) {
  if (!block.vectorizable()) {
    const uint64_t bad = block.misalignedMask();
    for (size_t t = 0; t < sig.tensors.size() && t < 64; ++t)
      if (bad & (uint64_t(1) << t))
        throw Error("kiln: launch of kernel '" + sig.kernel + "': tensor '" + sig.tensors[t].name + "' is not " +
                    std::to_string(sig.tensors[t].alignment) +
                    "-byte aligned; this kernel's TMA loads and paired stores need every tensor aligned (pointers "
                    "from cudaMalloc and PyTorch allocations are)");
  }
  constexpr size_t kMaxMaps = 4;
  if (rules.size() > kMaxMaps || block.size() + rules.size() > ArgBlock::kMaxParams)
    throw Error("kiln: internal: kernel '" + sig.kernel + "' takes too many tensor maps");
  std::array<TensorMap, kMaxMaps> maps;
  std::array<void*, ArgBlock::kMaxParams> params;
  for (size_t i = 0; i < block.size(); ++i) params[i] = block.params()[i];
  for (size_t m = 0; m < rules.size(); ++m) {
    const TensorMapRule& r = rules[m];
    auto size = [&](int64_t a) { return a >= 0 ? a : block.dimValue(static_cast<size_t>(-a - 1)); };
    const size_t rank = r.axes.size();
    uint64_t batch = 1;
    for (size_t a = 0; a + 2 < rank; ++a) batch *= static_cast<uint64_t>(size(r.axes[a]));
    const uint64_t rows = static_cast<uint64_t>(size(r.axes[rank - 2]));
    const uint64_t inner = static_cast<uint64_t>(size(r.axes[rank - 1]));
    params[block.size() + m] = &maps[m];
    if (r.whenRowsAligned && (inner * static_cast<uint64_t>(dtypeSize(r.dtype))) % 16 != 0) {
      maps[m] = TensorMap{};
      continue;
    }
    uint32_t boxRows = r.boxRows;
    if (r.clampRows && rows < boxRows) boxRows = static_cast<uint32_t>((rows + 7) & ~uint64_t(7));
    encodeTensorMap3d(maps[m], r.what.c_str(), r.dtype, reinterpret_cast<const void*>(block.slot(r.tensor)), inner,
                      rows, batch, r.boxInner, boxRows);
  }
  launch(fn, cfg, params.data());
}

}  // namespace kiln::rt
