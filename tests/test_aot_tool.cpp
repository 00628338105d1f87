// `kiln aot` with a shipped tuning database: the generated kernel takes the
// database's config for its device and shape bucket, the heuristic's
// elsewhere, and the header says which (CPU only: kiln aot needs no GPU).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "kiln/autotune/tuning_db.h"
#include "kiln/kiln.h"
#include "kiln/runtime/disk_cache.h"

namespace fs = std::filesystem;
using namespace kiln;
using Catch::Matchers::Contains;

namespace {

std::string readFile(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs the kiln tool with `args`; returns its exit status, output in `out`.
int runKiln(const std::string& args, std::string& out, const fs::path& dir) {
  const fs::path log = dir / "kiln.log";
  const std::string cmd = std::string("KILN_CACHE=0 '") + KILN_BINARY_DIR + "/tools/kiln' " + args + " > '" +
                          log.string() + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  out = readFile(log);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST_CASE("kiln aot takes a kernel's config from a shipped tuning database, for its device and bucket") {
  const fs::path dir = fs::temp_directory_path() / ("kiln-aot-tool-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const fs::path graphFile = dir / "softmax_r.kiln";
  std::ofstream(graphFile) << "kiln.graph v1\n"
                              "%0 = input \"x\" : f32[R, 1536]\n"
                              "%1 = max %0 {axes = [1], keepdim = true} : f32[R, 1]\n"
                              "%2 = sub %0, %1 : f32[R, 1536]\n"
                              "%3 = exp %2 : f32[R, 1536]\n"
                              "%4 = sum %3 {axes = [1], keepdim = true} : f32[R, 1]\n"
                              "%5 = div %3, %4 : f32[R, 1536]\n"
                              "output \"y\" = %5\n";
  const Graph g = parseGraphFile(graphFile.string());
  const compiler::KernelTuningInfo info = compiler::describeKernels(g)[0];
  REQUIRE(nlohmann::json::parse(info.defaultConfig)["threads_per_row"] != 64);

  tune::TuningEntry e;
  e.kernelSignature = rt::hashHex(info.signatureText);
  e.schedule = info.schedule;
  e.scheduleVersion = info.scheduleVersion;
  e.device = tune::DeviceKey{"NVIDIA H200", 9, 0, 132};
  e.shapeBucket = "R=1024";
  e.config = nlohmann::json::parse(R"({"persistent":1,"threads":64,"threads_per_row":64,"unroll":4,"vector":4})");
  e.medianUs = 12.5;
  e.p95Us = 13;
  e.achieved = 3.9;
  e.achievedUnit = "TB/s";
  e.kilnVersion = "test";
  e.date = "2026-12-04T00:00:00Z";
  const fs::path shipped = dir / "shipped.json";
  tune::writeTuningFile(shipped, {e});

  std::string out;
  const fs::path gen = dir / "gen";
  const std::string base = "aot '" + graphFile.string() + "' --name sm -o '" + gen.string() + "' --tuning '" +
                           shipped.string() + "'";

  SECTION("a hit: the database's config, and the header says where it came from") {
    REQUIRE(runKiln(base + " --hint R=1000", out, dir) == 0);
    INFO(out);
    CHECK_THAT(out, Contains("from the tuning database"));
    const std::string h = readFile(gen / "sm.h");
    CHECK_THAT(h, Contains("\"threads_per_row\": 64"));
    CHECK_THAT(h, Contains("tuning: ") && Contains("from the tuning database"));
  }
  SECTION("another bucket: the heuristic's config") {
    REQUIRE(runKiln(base + " --hint R=5000", out, dir) == 0);
    INFO(out);
    const std::string h = readFile(gen / "sm.h");
    CHECK_THAT(h, Contains("no tuning-database entry"));
    CHECK_THAT(h, !Contains("\"threads_per_row\": 64"));
  }
  SECTION("a device the database lacks is a clear error") {
    CHECK(runKiln(base + " --hint R=1000 --device 'NVIDIA H100/sm_90/132sm'", out, dir) == 1);
    CHECK_THAT(out, Contains("--device NVIDIA H100/sm_90/132sm") && Contains("NVIDIA H200/sm_90/132sm"));
  }
  SECTION("--device without --tuning is a clear error") {
    CHECK(runKiln("aot '" + graphFile.string() + "' -o '" + gen.string() + "' --device x", out, dir) == 1);
    CHECK_THAT(out, Contains("give the database with --tuning FILE"));
  }
  fs::remove_all(dir);
}

TEST_CASE("kiln aot --variant builds the graph for other dims, drops a build that compiles alike, checks its dims") {
  const fs::path dir = fs::temp_directory_path() / ("kiln-aot-variant-" + std::to_string(std::random_device{}()));
  fs::create_directories(dir);
  const fs::path graphFile = dir / "rows.kiln";
  // Softmax over rows of a dynamic length: its config follows the length.
  std::ofstream(graphFile) << "kiln.graph v1\n"
                              "%0 = input \"x\" : f32[R, C]\n"
                              "%1 = max %0 {axes = [1], keepdim = true} : f32[R, 1]\n"
                              "%2 = sub %0, %1 : f32[R, C]\n"
                              "%3 = exp %2 : f32[R, C]\n"
                              "%4 = sum %3 {axes = [1], keepdim = true} : f32[R, 1]\n"
                              "%5 = div %3, %4 : f32[R, C]\n"
                              "output \"y\" = %5\n";
  const fs::path gen = dir / "gen";
  const std::string base = "aot '" + graphFile.string() + "' -o '" + gen.string() + "' --hint C=64";
  std::string out;
  REQUIRE(runKiln(base + " --variant C=20000 --variant C=70 --variant R=3,C=262144", out, dir) == 0);
  CHECK_THAT(out, Contains("--variant C=70 compiles like an earlier build") && Contains("2 variant(s)"));
  const std::string header = readFile(gen / "rows.h"), source = readFile(gen / "rows.cpp");
  CHECK_THAT(header, Contains("// Variant 1 (built for C=20000; runs where C in [") &&
                         Contains("// Variant 2 (built for C=262144, R=3; runs where C in ["));
  CHECK_THAT(source, Contains("g.variants.push_back(specVariant1());") &&
                         Contains("g.variants.push_back(specVariant2());") && Contains("s.grid.preferred.push_back({1, "));
  CHECK(runKiln(base + " --variant K=5", out, dir) == 1);
  CHECK_THAT(out, Contains("--variant K") && Contains("no dynamic dim named K"));
  CHECK(runKiln(base + " --variant C=-3", out, dir) == 1);
  CHECK_THAT(out, Contains("--variant 'C=-3'") && Contains("non-negative integer"));
  fs::remove_all(dir);
}
