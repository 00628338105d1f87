#include "cached_compile.h"
#include "tuning.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "kiln/kernel.h"
#include "kiln/runtime/disk_cache.h"
#include "kiln_version.h"

namespace kiln {

namespace detail {

namespace {

using nlohmann::json;

// The toolkit's version from <cuda>/version.json ("13.0.2"), or "unknown".
std::string cudaVersion(const std::string& cudaHome) {
  static std::mutex m;
  static std::map<std::string, std::string> known;
  std::lock_guard<std::mutex> lock(m);
  if (auto it = known.find(cudaHome); it != known.end()) return it->second;
  std::string v = "unknown";
  try {
    std::ifstream in(cudaHome + "/version.json");
    if (in) {
      json j = json::parse(in);
      if (j.contains("cuda") && j["cuda"].contains("version")) v = j["cuda"]["version"].get<std::string>();
    }
  } catch (const std::exception&) {
  }
  return known[cudaHome] = v;
}

json shapeJson(const Shape& s) {
  json a = json::array();
  for (const Dim& d : s) a.push_back(d.isStatic() ? json(d.size) : json(d.name));
  return a;
}

Shape shapeFrom(const json& a) {
  Shape s;
  for (const json& d : a) s.push_back(d.is_string() ? Dim(d.get<std::string>()) : Dim(d.get<int64_t>()));
  return s;
}

DType dtypeFrom(const json& j) {
  auto t = parseDType(j.get<std::string>());
  if (!t) throw std::runtime_error("unknown dtype " + j.get<std::string>());
  return *t;
}

json tensorJson(const compiler::KernelTensor& t) {
  return {{"name", t.name},           {"dtype", std::string(dtypeName(t.dtype))},
          {"shape", shapeJson(t.shape)}, {"output", t.output},
          {"workspace", t.workspace},   {"alignment", t.alignment}};
}

compiler::KernelTensor tensorFrom(const json& j) {
  compiler::KernelTensor t;
  t.name = j.at("name").get<std::string>();
  t.dtype = dtypeFrom(j.at("dtype"));
  t.shape = shapeFrom(j.at("shape"));
  t.output = j.at("output").get<bool>();
  t.workspace = j.at("workspace").get<bool>();
  t.alignment = j.at("alignment").get<int>();
  return t;
}

// Dim ranges of a launch geometry (LaunchGeometry::preferred, oneStepRange).
json rangesJson(const std::vector<compiler::LaunchGeometry::DimRange>& ranges) {
  json a = json::array();
  for (const auto& r : ranges) a.push_back({{"dim", r.dim}, {"min", r.min}, {"max", r.max}});
  return a;
}

std::vector<compiler::LaunchGeometry::DimRange> rangesFrom(const json& a) {
  std::vector<compiler::LaunchGeometry::DimRange> ranges;
  for (const json& r : a) ranges.push_back({r.at("dim").get<std::string>(), r.at("min").get<int64_t>(), r.at("max").get<int64_t>()});
  return ranges;
}

// 2: tensor maps (the sm_90a matmul); 3: the large texts and the cubin as
// raw blobs after the CBOR head (nlohmann's CBOR reader copies strings byte
// by byte: a matmul entry's 236 KB of PTX took about 1 ms to parse); 4: the
// launch geometry's tile (matmul grids count output tiles); 5: its cluster;
// 6: its minimum blocks (a row kernel's grid tail); 7: resident grids (row
// kernels that loop over rows); 8: its dim bounds (dims counted in 32 bits);
// 9: the dims the vectorized entry needs multiples of (dynamic row lengths);
// 10: the dim ranges a heuristic config was chosen for (and dim hints in the
// key); 11: each entry's one-step flag and the one-step entry's dim ranges;
// 12: tensor maps encoded only where rows are aligned (TMA stores of a
// dynamic row length).
constexpr int kFormat = 12;

}  // namespace

std::string cacheKey(const Graph& g, const compiler::CompileOptions& o) {
  std::string cudaHome = o.cudaHome.empty() ? compiler::defaultCudaHome() : o.cudaHome;
  std::string k = "kiln-cache-v" + std::to_string(kFormat) + "\nkiln " KILN_VERSION "\nllvm " +
                  compiler::llvmVersion() + "\ncuda " + cudaVersion(cudaHome) + " at " + cudaHome + "\nchip " +
                  o.chip + "\nsms " + std::to_string(o.smCount) + "\nroute " +
                  std::string(compiler::routeName(o.route)) + "\nvariants " +
                  std::to_string(static_cast<int>(o.variants)) + "\nkeepText " + (o.keepText ? "1" : "0") +
                  "\nconfig " + o.configOverride + "\nrowConfig " + o.rowConfigOverride + "\nmatmulConfig " +
                  o.matmulConfigOverride + "\n" + (o.matmulRowSoftmax ? "matmulRowSoftmax 1\n" : "");
  // LLVM options for experiments change the PTX without changing any of the above.
  if (const char* llvmArgs = std::getenv("KILN_LLVM_ARGS"); llvmArgs && *llvmArgs)
    k += std::string("llvmArgs ") + llvmArgs + "\n";
  for (const auto& [index, config] : o.kernelConfigs) k += "kernelConfig " + std::to_string(index) + " " + config + "\n";
  for (const auto& [dim, value] : o.dimHints)
    k += "dimHint " + dim + " " + std::to_string(compiler::dimHintClass(value)) + "\n";
  k += g.toText();
  return rt::hashHex(k);
}

namespace {

// The payload: an 8-byte little-endian length of the CBOR head, the head,
// then the blobs the head names by [offset, size] (offsets from the end of
// the head).
struct Blobs {
  std::vector<uint8_t> bytes;
  json add(const void* data, size_t size) {
    json ref = json::array({bytes.size(), size});
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + size);
    return ref;
  }
  json add(const std::string& s) { return add(s.data(), s.size()); }
};

std::span<const uint8_t> blobAt(std::span<const uint8_t> blobs, const json& ref) {
  const uint64_t off = ref.at(0).get<uint64_t>(), size = ref.at(1).get<uint64_t>();
  if (off > blobs.size() || size > blobs.size() - off) throw std::runtime_error("a blob lies outside the entry");
  return blobs.subspan(off, size);
}

std::string blobString(std::span<const uint8_t> blobs, const json& ref) {
  auto b = blobAt(blobs, ref);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

}  // namespace

std::vector<uint8_t> serializeCompiled(const compiler::CompiledGraph& cg) {
  Blobs blobs;
  json j;
  j["format"] = kFormat;
  j["graph"] = cg.graphText;
  j["explain"] = cg.explain;
  j["workspace"] = json::array();
  for (const auto& t : cg.workspace) j["workspace"].push_back(tensorJson(t));
  j["kernels"] = json::array();
  for (const compiler::CompiledKernel& k : cg.kernels) {
    json jk;
    jk["name"] = k.name;
    jk["schedule"] = k.schedule;
    jk["config"] = k.config;
    jk["why"] = k.why;
    jk["tensors"] = json::array();
    for (const auto& t : k.tensors) jk["tensors"].push_back(tensorJson(t));
    jk["dims"] = k.dims;
    jk["scalars"] = json::array();
    for (const auto& s : k.scalars) jk["scalars"].push_back({{"name", s.name}, {"dtype", std::string(dtypeName(s.dtype))}});
    jk["entries"] = json::array();
    for (const auto& e : k.entries)
      jk["entries"].push_back({{"name", e.name}, {"vectorized", e.vectorized}, {"one_step", e.oneStep}});
    jk["launch"] = {{"threads", k.launch.threadsPerBlock}, {"elements_per_block", k.launch.elementsPerBlock},
                    {"iter_shape", shapeJson(k.launch.iterShape)}, {"max_blocks", k.launch.maxBlocks}, {"min_blocks", k.launch.minBlocks},
                    {"shared_bytes", k.launch.sharedBytes}, {"tile", k.launch.tile}, {"cluster", k.launch.cluster},
                    {"resident", k.launch.resident}};
    jk["launch"]["dim_bounds"] = json::array();
    for (const auto& b : k.launch.dimBounds)
      jk["launch"]["dim_bounds"].push_back({{"dim", b.dim}, {"max", b.max}, {"what", b.what}});
    jk["launch"]["vector_multiples"] = json::array();
    for (const auto& m : k.launch.vectorMultiples)
      jk["launch"]["vector_multiples"].push_back({{"dim", m.dim}, {"multiple", m.multiple}});
    jk["launch"]["preferred"] = rangesJson(k.launch.preferred);
    jk["launch"]["one_step_range"] = rangesJson(k.launch.oneStepRange);
    jk["source"] = blobs.add(k.source);
    jk["tensor_maps"] = json::array();
    for (const auto& m : k.tensorMaps)
      jk["tensor_maps"].push_back({{"tensor", m.tensor}, {"box_inner", m.boxInner}, {"box_rows", m.boxRows}, {"clamp_rows", m.clampRows},
                                    {"when_rows_aligned", m.whenRowsAligned}});
    jk["mlir"] = blobs.add(k.mlir);
    jk["ptx"] = blobs.add(k.ptx);
    jk["cubin"] = blobs.add(k.cubin.data(), k.cubin.size());
    jk["resources"] = json::array();
    for (const auto& r : k.resources)
      jk["resources"].push_back({{"kernel", r.kernel}, {"registers", r.registers}, {"spill_stores", r.spillStoreBytes},
                                 {"spill_loads", r.spillLoadBytes}, {"stack", r.stackBytes},
                                 {"shared", r.sharedBytes}, {"barriers", r.barriers}});
    jk["stages"] = json::array();
    for (const auto& s : k.stages) jk["stages"].push_back({{"name", s.name}, {"ms", s.ms}});
    jk["compile_ms"] = k.compileMs;
    j["kernels"].push_back(std::move(jk));
  }
  std::vector<uint8_t> head = json::to_cbor(j);
  std::vector<uint8_t> out;
  out.reserve(8 + head.size() + blobs.bytes.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(uint64_t(head.size()) >> (8 * i)));
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), blobs.bytes.begin(), blobs.bytes.end());
  return out;
}

bool deserializeCompiled(std::span<const uint8_t> bytes, compiler::CompiledGraph& cg, std::string& why) {
  try {
    if (bytes.size() < 8) throw std::runtime_error("the entry is shorter than its header");
    uint64_t headSize = 0;
    for (int i = 0; i < 8; ++i) headSize |= uint64_t(bytes[i]) << (8 * i);
    if (headSize > bytes.size() - 8) throw std::runtime_error("the entry's head is longer than the entry");
    json j = json::from_cbor(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(headSize));
    const std::span<const uint8_t> blobs = bytes.subspan(8 + headSize);
    if (j.at("format").get<int>() != kFormat) {
      why = "format " + std::to_string(j.at("format").get<int>()) + ", expected " + std::to_string(kFormat);
      return false;
    }
    compiler::CompiledGraph out;
    out.graphText = j.at("graph").get<std::string>();
    out.explain = j.at("explain").get<std::string>();
    for (const json& t : j.at("workspace")) out.workspace.push_back(tensorFrom(t));
    for (const json& jk : j.at("kernels")) {
      compiler::CompiledKernel k;
      k.name = jk.at("name").get<std::string>();
      k.schedule = jk.at("schedule").get<std::string>();
      k.config = jk.at("config").get<std::string>();
      k.why = jk.at("why").get<std::string>();
      for (const json& t : jk.at("tensors")) k.tensors.push_back(tensorFrom(t));
      k.dims = jk.at("dims").get<std::vector<std::string>>();
      for (const json& s : jk.at("scalars")) k.scalars.push_back({s.at("name").get<std::string>(), dtypeFrom(s.at("dtype"))});
      for (const json& e : jk.at("entries"))
        k.entries.push_back({e.at("name").get<std::string>(), e.at("vectorized").get<bool>(), e.at("one_step").get<bool>()});
      const json& l = jk.at("launch");
      k.launch.threadsPerBlock = l.at("threads").get<int>();
      k.launch.elementsPerBlock = l.at("elements_per_block").get<int64_t>();
      k.launch.iterShape = shapeFrom(l.at("iter_shape"));
      k.launch.maxBlocks = l.at("max_blocks").get<int64_t>();
      k.launch.minBlocks = l.at("min_blocks").get<int64_t>();
      k.launch.sharedBytes = l.at("shared_bytes").get<int>();
      k.launch.tile = l.at("tile").get<std::vector<int64_t>>();
      k.launch.cluster = l.at("cluster").get<int>();
      k.launch.resident = l.at("resident").get<bool>();
      for (const json& b : l.at("dim_bounds"))
        k.launch.dimBounds.push_back({b.at("dim").get<std::string>(), b.at("max").get<int64_t>(), b.at("what").get<std::string>()});
      for (const json& m : l.at("vector_multiples"))
        k.launch.vectorMultiples.push_back({m.at("dim").get<std::string>(), m.at("multiple").get<int64_t>()});
      k.launch.preferred = rangesFrom(l.at("preferred"));
      k.launch.oneStepRange = rangesFrom(l.at("one_step_range"));
      k.source = blobString(blobs, jk.at("source"));
      if (jk.contains("tensor_maps"))
        for (const json& m : jk.at("tensor_maps"))
          k.tensorMaps.push_back({m.at("tensor").get<int>(), m.at("box_inner").get<int>(), m.at("box_rows").get<int>(),
                                  m.value("clamp_rows", false), m.value("when_rows_aligned", false)});
      k.mlir = blobString(blobs, jk.at("mlir"));
      k.ptx = blobString(blobs, jk.at("ptx"));
      const auto bin = blobAt(blobs, jk.at("cubin"));
      k.cubin.assign(bin.begin(), bin.end());
      for (const json& r : jk.at("resources"))
        k.resources.push_back({r.at("kernel").get<std::string>(), r.at("registers").get<int>(),
                               r.at("spill_stores").get<int>(), r.at("spill_loads").get<int>(),
                               r.at("stack").get<int>(), r.at("shared").get<int>(), r.at("barriers").get<int>()});
      for (const json& s : jk.at("stages")) k.stages.push_back({s.at("name").get<std::string>(), s.at("ms").get<double>()});
      k.compileMs = jk.at("compile_ms").get<double>();
      out.kernels.push_back(std::move(k));
    }
    cg = std::move(out);
    return true;
  } catch (const std::exception& e) {
    why = e.what();
    return false;
  }
}

}  // namespace detail

bool diskCacheEnabledByEnvironment() {
  const char* env = std::getenv("KILN_CACHE");
  if (!env) return true;
  std::string v = env;
  return !(v == "0" || v == "off" || v == "false" || v == "no");
}

compiler::CompiledGraph compileGraphCached(const Graph& graph, const compiler::CompileOptions& options, bool useDiskCache,
                                           rt::DiskCache* chosen) {
  if (!useDiskCache || !diskCacheEnabledByEnvironment()) {
    compiler::CompiledGraph cg = detail::countedCompile(graph, options);
    for (auto& k : cg.kernels) k.cache = "off";
    return cg;
  }
  const std::string key = detail::cacheKey(graph, options);
  rt::DiskCache* cache = nullptr;
  std::vector<uint8_t> bytes;
  rt::CacheLookup found = rt::CacheLookup::Miss;
  try {
    cache = chosen ? chosen : &rt::DiskCache::global();
    found = cache->get(key, bytes);
  } catch (const std::exception& e) {
    // A cache that cannot be used never stops a compile: say so once.
    static std::once_flag warned;
    std::call_once(warned, [&] { std::fprintf(stderr, "kiln: cache: disabled for this process: %s\n", e.what()); });
    compiler::CompiledGraph cg = detail::countedCompile(graph, options);
    for (auto& k : cg.kernels) k.cache = "off";
    return cg;
  }
  if (found == rt::CacheLookup::Hit) {
    compiler::CompiledGraph cg;
    std::string why;
    if (detail::deserializeCompiled(bytes, cg, why)) {
      for (auto& k : cg.kernels) k.cache = "hit";
      detail::counters().fromDiskCache += cg.kernels.size();
      return cg;
    }
    std::fprintf(stderr, "kiln: cache: entry %s in %s cannot be read by this build (%s); rebuilding\n", key.c_str(),
                 cache->directory().c_str(), why.c_str());
    found = rt::CacheLookup::Corrupt;
  }
  compiler::CompiledGraph cg = detail::countedCompile(graph, options);
  try {
    cache->put(key, detail::serializeCompiled(cg));
  } catch (const std::exception& e) {
    static std::once_flag warned;
    std::call_once(warned, [&] { std::fprintf(stderr, "kiln: cache: cannot store entries: %s\n", e.what()); });
  }
  for (auto& k : cg.kernels) k.cache = found == rt::CacheLookup::Corrupt ? "rebuilt" : "miss";
  return cg;
}

}  // namespace kiln
