// Shared by kiln's GPU benchmarks.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/dsl/graph.h"
#include "kiln/kiln.h"

namespace kiln::bench {

// Bytes that must move: every input read once, every output written once
// (the effective-bandwidth numerator of docs/benchmarks.md).
inline double minBytes(const Graph& g) {
  double bytes = 0;
  for (int id : g.params())
    if (g.node(id).op == Op::Input) bytes += staticElementCount(g.node(id).shape) * double(dtypeSize(g.node(id).dtype));
  for (const GraphOutput& o : g.outputs())
    bytes += staticElementCount(g.node(o.node).shape) * double(dtypeSize(g.node(o.node).dtype));
  return bytes;
}

// KILN_EXPORT_KERNELS=DIR: the kernel of a single-kernel graph as
// DIR/kN.cubin plus a line of DIR/kernels.jsonl (case, entry, grid, block,
// shared memory, tensors in parameter order), so that the anchor scripts
// (bench/anchors_*.py) can time the same cubin with triton.testing.do_bench
// in the process that times torch.compile: one method for both. Kernels
// that take dims or scalars at launch, tensor maps, or clusters are not
// exported (the scripts launch with plain cuLaunchKernel and pointers only).
inline void exportKernel(const std::string& op, const Kernel& k) {
  const char* dir = std::getenv("KILN_EXPORT_KERNELS");
  if (!dir || !*dir || k.compiled().kernels.size() != 1) return;
  static int n = 0;
  const compiler::CompiledKernel& ck = k.compiled().kernels[0];
  const compiler::KernelEntry* entry = nullptr;
  for (const compiler::KernelEntry& e : ck.entries)
    if (e.vectorized) entry = &e;
  const compiler::LaunchGeometry& lg = ck.launch;
  if (!entry || !ck.dims.empty() || !ck.scalars.empty() || !ck.tensorMaps.empty() || lg.cluster != 1) return;
  // The facade's grid rule (compiler::LaunchGeometry) for static shapes.
  int64_t total = 1;
  const size_t lead = lg.iterShape.size() - lg.tile.size();
  for (size_t a = 0; a < lg.iterShape.size(); ++a) {
    const int64_t t = a < lead ? 1 : lg.tile[a - lead];
    total *= (lg.iterShape[a].size + t - 1) / t;
  }
  int64_t grid = (total + lg.elementsPerBlock - 1) / lg.elementsPerBlock;
  const int64_t cap = k.maxBlocks(0);  // a resident grid: the blocks that fit at once
  if (cap > 0 && grid > cap) grid = cap;
  // Several processes may export into one folder (a sweep of configs): take
  // the first name not yet there.
  std::string file;
  do file = "k" + std::to_string(n++) + ".cubin";
  while (std::filesystem::exists(std::string(dir) + "/" + file));
  std::ofstream(std::string(dir) + "/" + file, std::ios::binary)
      .write(ck.cubin.data(), static_cast<std::streamsize>(ck.cubin.size()));
  std::string tensors;
  for (const compiler::KernelTensor& t : ck.tensors) {
    std::string shape;
    for (const Dim& d : t.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d.size);
    tensors += std::string(tensors.empty() ? "" : ", ") + "{\"name\": \"" + t.name + "\", \"dtype\": \"" +
               std::string(dtypeName(t.dtype)) + "\", \"shape\": [" + shape + "], \"output\": " +
               (t.output ? "true" : "false") + ", \"workspace\": " + (t.workspace ? "true" : "false") + "}";
  }
  std::string quoted;
  for (char c : op) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
  std::ofstream(std::string(dir) + "/kernels.jsonl", std::ios::app)
      << "{\"op\": \"" << quoted << "\", \"cubin\": \"" << file << "\", \"entry\": \"" << entry->name
      << "\", \"grid\": " << grid << ", \"block\": " << lg.threadsPerBlock << ", \"shared\": " << lg.sharedBytes
      << ", \"config\": " << ck.config << ", \"tensors\": [" << tensors << "]}\n";
}

}  // namespace kiln::bench
