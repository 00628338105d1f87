// The workspace of multi-kernel graphs: layout arithmetic on the CPU, the
// growing allocation on the GPU ([gpu]: skipped visibly without a driver).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <random>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime/driver.h"
#include "kiln/runtime/workspace.h"

using namespace kiln;
using namespace kiln::rt;
using Catch::Matchers::Contains;

namespace {

WorkspaceAxis fixed(int64_t n) { return {n, -1}; }
WorkspaceAxis dyn(int d) { return {0, d}; }

std::vector<size_t> layout(const std::vector<WorkspaceTensor>& ts, const std::vector<int64_t>& dims, size_t* total) {
  std::vector<size_t> offsets(ts.size());
  *total = layoutWorkspace(ts, dims, offsets);
  return offsets;
}

void requireGpu() {
  if (!rt::driverAvailable()) {
    std::cout << "SKIPPED: no CUDA driver (" << rt::driverUnavailableReason() << ")" << std::endl;
    std::exit(77);
  }
}

uintptr_t address(const TensorView& v) { return reinterpret_cast<uintptr_t>(v.data); }

}  // namespace

TEST_CASE("workspace tensors follow each other at 256-byte aligned offsets", "[workspace]") {
  std::vector<WorkspaceTensor> ts = {
      {"ws0", DType::F32, {fixed(3)}},             // 12 bytes
      {"ws1", DType::BF16, {dyn(0), fixed(5)}},    // 2 * N * 5
      {"ws2", DType::I64, {}},                     // a 0-dim tensor: 8 bytes
      {"ws3", DType::F16, {dyn(1), dyn(0)}},       // 2 * M * N
  };
  size_t total = 0;
  std::vector<size_t> off = layout(ts, {7, 300}, &total);
  CHECK(off == std::vector<size_t>{0, 256, 512, 768});
  CHECK(total == 768 + 4352);  // 2 * 300 * 7 = 4200 bytes, padded to 17 * 256
  CHECK(workspaceTensorBytes(ts[1], std::vector<int64_t>{7, 300}) == 70);
  CHECK(workspaceTensorBytes(ts[3], std::vector<int64_t>{7, 300}) == 4200);

  // Exactly one alignment unit takes exactly one unit.
  std::vector<WorkspaceTensor> exact = {{"a", DType::F32, {fixed(64)}}, {"b", DType::Bool, {fixed(1)}}};
  off = layout(exact, {}, &total);
  CHECK(off == std::vector<size_t>{0, 256});
  CHECK(total == 512);
}

TEST_CASE("empty workspace tensors take no space", "[workspace]") {
  std::vector<WorkspaceTensor> ts = {
      {"ws0", DType::F32, {dyn(0), fixed(4)}},
      {"ws1", DType::F32, {fixed(0)}},
      {"ws2", DType::F32, {dyn(0)}},
  };
  size_t total = 0;
  std::vector<size_t> off = layout(ts, {0}, &total);
  CHECK(total == 0);
  CHECK(off == std::vector<size_t>{0, 0, 0});
  off = layout(ts, {1}, &total);
  CHECK(off == std::vector<size_t>{0, 256, 256});
  CHECK(total == 512);
  CHECK(layout({}, {5}, &total).empty());
  CHECK(total == 0);
}

TEST_CASE("random layouts are aligned, disjoint and tight", "[workspace]") {
  std::mt19937_64 rng(42);
  const DType dtypes[] = {DType::F32, DType::BF16, DType::F16, DType::I64, DType::I32, DType::Bool};
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<WorkspaceTensor> ts(1 + rng() % 6);
    std::vector<int64_t> dims(1 + rng() % 3);
    for (int64_t& d : dims) d = static_cast<int64_t>(rng() % 2000);
    for (size_t i = 0; i < ts.size(); ++i) {
      ts[i].name = "ws" + std::to_string(i);
      ts[i].dtype = dtypes[rng() % 6];
      for (size_t a = rng() % 4; a-- > 0;)
        ts[i].shape.push_back(rng() % 2 ? fixed(static_cast<int64_t>(rng() % 50)) : dyn(static_cast<int>(rng() % dims.size())));
    }
    size_t total = 0;
    std::vector<size_t> off = layout(ts, dims, &total);
    CHECK(total % kWorkspaceAlignment == 0);
    size_t end = 0;
    for (size_t i = 0; i < ts.size(); ++i) {
      const size_t bytes = workspaceTensorBytes(ts[i], dims);
      INFO("iteration " << iter << ", tensor " << i);
      CHECK(off[i] % kWorkspaceAlignment == 0);
      CHECK(off[i] == end);  // in order, no gap beyond the padding
      CHECK(off[i] + bytes <= total);
      end = off[i] + (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
    }
    CHECK(end == total);
  }
}

TEST_CASE("workspace layout errors name the tensor", "[workspace]") {
  size_t total = 0;
  std::vector<WorkspaceTensor> ts = {{"ws0", DType::F32, {dyn(1)}}};
  CHECK_THROWS_WITH(layout(ts, {4}, &total), Contains("'ws0'") && Contains("dynamic dim 1") && Contains("only 1"));
  ts = {{"ws1", DType::F32, {dyn(0)}}};
  CHECK_THROWS_WITH(layout(ts, {-3}, &total), Contains("'ws1'") && Contains("negative size -3"));
  const int64_t big = std::numeric_limits<int64_t>::max();  // 2^63 - 1
  ts = {{"ws2", DType::F32, {dyn(0)}}};
  CHECK_NOTHROW(layout(ts, {big / 8}, &total));  // 2^62 bytes: absurd, but it fits in size_t
  ts = {{"ws3", DType::F32, {dyn(0), dyn(0)}}};
  CHECK_THROWS_WITH(layout(ts, {big / 8}, &total), Contains("'ws3'") && Contains("overflows"));
  // Each tensor fits (2^63 bytes once padded), the sum does not.
  ts = {{"ws4", DType::Bool, {dyn(0)}}, {"ws5", DType::Bool, {dyn(0)}}};
  CHECK_THROWS_WITH(layout(ts, {big}, &total), Contains("'ws5'") && Contains("overflows"));
  std::vector<size_t> offsets(3);
  CHECK_THROWS_WITH(layoutWorkspace(ts, std::vector<int64_t>{1}, offsets), Contains("3 offsets for 2 tensors"));
}

TEST_CASE("an all-empty workspace needs no allocation and no driver", "[workspace]") {
  Workspace ws({{"ws0", DType::F32, {dyn(0), fixed(8)}}, {"ws1", DType::BF16, {dyn(0)}}});
  std::vector<int64_t> dims = {0};
  Workspace::Lease lease = ws.acquire(dims, nullptr);
  REQUIRE(lease.views().size() == 2);
  CHECK(lease.view(0).data == nullptr);
  CHECK(lease.view(0).shape == std::vector<int64_t>{0, 8});
  CHECK(lease.view(0).dtype == DType::F32);
  CHECK(lease.view(1).shape == std::vector<int64_t>{0});
  CHECK(lease.view(1).dtype == DType::BF16);
  CHECK(lease.view(1).contiguous());
  CHECK(ws.capacity() == 0);
}

TEST_CASE("the workspace allocation grows, never shrinks, and keeps tensors aligned", "[gpu][workspace]") {
  requireGpu();
  Workspace ws({{"ws0", DType::F32, {dyn(0), fixed(3)}}, {"ws1", DType::BF16, {dyn(0)}}, {"ws2", DType::Bool, {fixed(1)}}});
  auto check = [&](int64_t n) {
    std::vector<int64_t> dims = {n};
    Workspace::Lease lease = ws.acquire(dims, nullptr);
    std::vector<size_t> offsets(3);
    const size_t total = layoutWorkspace(ws.tensors(), dims, offsets);
    const uintptr_t base = address(lease.view(2));  // ws2 is never empty: offsets[2] from the base
    for (size_t i = 0; i < 3; ++i) {
      INFO("n = " << n << ", tensor " << i);
      if (lease.view(i).numel() == 0) {
        CHECK(lease.view(i).data == nullptr);
        continue;
      }
      CHECK(address(lease.view(i)) % kWorkspaceAlignment == 0);
      CHECK(address(lease.view(i)) - (base - offsets[2]) == offsets[i]);
    }
    CHECK(lease.view(0).shape == std::vector<int64_t>{n, 3});
    CHECK(lease.view(1).shape == std::vector<int64_t>{n});
    return std::pair<size_t, uintptr_t>(total, base - offsets[2]);
  };
  auto [t1, b1] = check(1000);
  CHECK(ws.capacity() == t1);
  auto [t2, b2] = check(10);  // smaller: same allocation
  CHECK(t2 < t1);
  CHECK(ws.capacity() == t1);
  CHECK(b2 == b1);
  auto [t3, b3] = check(1 << 20);  // larger: grows
  CHECK(t3 > t1);
  CHECK(ws.capacity() == t3);
  (void)b3;
  check(0);
  CHECK(ws.capacity() == t3);
}

TEST_CASE("concurrent workspace leases are exclusive", "[gpu][workspace]") {
  requireGpu();
  Workspace ws({{"ws0", DType::F32, {dyn(0)}}});
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int64_t i = 1; i <= 50; ++i) {
        const int64_t n = i * 1000 * (t + 1);
        std::vector<int64_t> dims = {n};
        Workspace::Lease lease = ws.acquire(dims, nullptr);
        // While leased, nothing may change the views or shrink the allocation.
        for (int k = 0; k < 10; ++k)
          if (lease.view(0).shape[0] != n || ws.tensors().size() != 1) ++failures[static_cast<size_t>(t)];
      }
    });
  for (std::thread& th : threads) th.join();
  CHECK(failures == std::vector<int>(4, 0));
  CHECK(ws.capacity() == 50 * 1000 * 4 * 4);  // the largest: 200000 f32
}
