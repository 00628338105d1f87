// The tuning database (autotune/include/kiln/autotune/tuning_db.h): buckets,
// file format, search path precedence, errors, schedule versions, merge,
// atomic saves. CPU only; every test works in its own temporary directory.
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>

#include "kiln/autotune/tuning_db.h"
#include "kiln/error.h"

namespace fs = std::filesystem;
using namespace kiln::tune;
using nlohmann::json;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() /
           ("kiln-tuning-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// Sets (or unsets, value nullptr) an environment variable for a scope.
struct EnvGuard {
  std::string name;
  bool had = false;
  std::string old;
  EnvGuard(const char* n, const char* value) : name(n) {
    if (const char* v = std::getenv(n)) {
      had = true;
      old = v;
    }
    if (value)
      ::setenv(n, value, 1);
    else
      ::unsetenv(n);
  }
  ~EnvGuard() {
    if (had)
      ::setenv(name.c_str(), old.c_str(), 1);
    else
      ::unsetenv(name.c_str());
  }
};

// Captures std::cerr for a scope.
struct CerrCapture {
  std::ostringstream buf;
  std::streambuf* old;
  CerrCapture() : old(std::cerr.rdbuf(buf.rdbuf())) {}
  ~CerrCapture() { std::cerr.rdbuf(old); }
  std::string str() const { return buf.str(); }
};

const DeviceKey kH200{"NVIDIA H200", 9, 0, 132};
const DeviceKey kH100{"NVIDIA H100 80GB HBM3", 9, 0, 132};

TuningEntry entry(std::string sig, double medianUs, int threads = 256, std::string bucket = "N=4096",
                  int version = 1, std::string date = "2025-11-30T00:00:00Z") {
  return TuningEntry{
      .kernelSignature = std::move(sig),
      .schedule = "pointwise",
      .scheduleVersion = version,
      .device = kH200,
      .shapeBucket = std::move(bucket),
      .config = json{{"threads", threads}, {"vector", 8}},
      .medianUs = medianUs,
      .p95Us = medianUs * 1.1,
      .achieved = 4.2,
      .achievedUnit = "TB/s",
      .kilnVersion = "0.1.0+abc",
      .date = std::move(date),
  };
}

void writeText(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string readText(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string errorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const kiln::Error& e) {
    return e.what();
  }
  return "";
}

std::vector<fs::path> temporaries(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& de : fs::directory_iterator(dir))
    if (de.path().extension() == ".tmp") out.push_back(de.path());
  return out;
}

}  // namespace

TEST_CASE("shape buckets: powers of two by default, exact and boundaries per dim", "[tuning]") {
  CHECK(shapeBucket({{"N", 4096}}) == "N=4096");
  CHECK(shapeBucket({{"N", 1000}}) == "N=1024");
  CHECK(shapeBucket({{"N", 1025}}) == "N=2048");
  CHECK(shapeBucket({{"N", 1}}) == "N=1");
  CHECK(shapeBucket({{"N", 0}}) == "N=0");
  CHECK(shapeBucket({}) == "");
  // Sorted by name, whatever the order given.
  CHECK(shapeBucket({{"N", 3000}, {"M", 5}}) == "M=8,N=4096");
  CHECK(shapeBucket({{"M", 5}, {"N", 3000}}) == "M=8,N=4096");

  BucketPolicy p;
  p.perDim["B"] = DimRule::exact();
  p.perDim["S"] = DimRule::bounds({128, 512, 2048});
  CHECK(shapeBucket({{"B", 3}, {"S", 1}, {"N", 100}}, p) == "B=3,N=128,S=128");
  CHECK(shapeBucket({{"B", 3}, {"S", 129}}, p) == "B=3,S=512");
  CHECK(shapeBucket({{"S", 2048}}, p) == "S=2048");
  CHECK(shapeBucket({{"S", 2049}}, p) == "S=4096");  // above the last boundary: power of two

  BucketPolicy exactAll{.defaultRule = DimRule::exact()};
  CHECK(shapeBucket({{"N", 1000}}, exactAll) == "N=1000");

  CHECK_THROWS_AS(shapeBucket({{"N", -1}}), kiln::Error);
  CHECK_THROWS_AS(shapeBucket({{"N", 1}, {"N", 2}}), kiln::Error);
  CHECK_THROWS_AS(shapeBucket({{"N", (int64_t{1} << 62) + 1}}), kiln::Error);
  CHECK(shapeBucket({{"N", int64_t{1} << 62}}) == "N=4611686018427387904");
  CHECK_THROWS_AS(bucketValue(5, DimRule::bounds({512, 128})), kiln::Error);
}

TEST_CASE("device keys have a stable string form", "[tuning]") {
  CHECK(kH200.str() == "NVIDIA H200/sm_90/132sm");
  CHECK(DeviceKey{"NVIDIA B200", 10, 0, 148}.str() == "NVIDIA B200/sm_100/148sm");
}

TEST_CASE("tuning database: record, save and load round trip", "[tuning]") {
  TempDir tmp;
  fs::path user = tmp.path / "cfg" / "kiln" / "tuning.json";
  TuningEntry a = entry("aaaa", 12.5);
  TuningEntry b = entry("bbbb", 30.25, 128, "M=8,N=1024");
  b.schedule = "row_reduction";
  b.scheduleVersion = 3;
  b.achieved = 0.123456789012345;
  {
    TuningDatabase db({.searchPath = "", .userFile = user});
    CHECK(db.files().size() == 1);
    CHECK_FALSE(db.lookup("aaaa", "pointwise", 1, kH200, "N=4096"));
    db.record(b);
    db.record(a);
    db.save();
  }
  REQUIRE(fs::exists(user));
  json doc = json::parse(readText(user));
  CHECK(doc["kiln_tuning_db"] == kTuningDbSchemaVersion);
  REQUIRE(doc["entries"].size() == 2);
  CHECK(doc["entries"][0]["signature"] == "aaaa");  // sorted by key

  TuningDatabase db({.searchPath = "", .userFile = user});
  auto got = db.lookup("bbbb", "row_reduction", 3, kH200, "M=8,N=1024");
  REQUIRE(got);
  CHECK(got->config == b.config);
  CHECK(got->medianUs == b.medianUs);
  CHECK(got->p95Us == b.p95Us);
  CHECK(got->achieved == b.achieved);  // doubles round-trip exactly
  CHECK(got->achievedUnit == "TB/s");
  CHECK(got->kilnVersion == b.kilnVersion);
  CHECK(got->date == b.date);
  CHECK(got->device == kH200);
  CHECK(db.lookup("aaaa", "pointwise", 1, kH200, "N=4096"));
  // Every part of the key matters.
  CHECK_FALSE(db.lookup("aaaa", "pointwise", 1, kH100, "N=4096"));
  CHECK_FALSE(db.lookup("aaaa", "pointwise", 1, kH200, "N=2048"));
  CHECK_FALSE(db.lookup("aaaa", "row_reduction", 1, kH200, "N=4096"));
  CHECK_FALSE(db.lookup("aaab", "pointwise", 1, kH200, "N=4096"));

  // record() replaces an entry with the same key.
  db.record(entry("aaaa", 99.0, 1024));
  db.save();
  TuningDatabase again({.searchPath = "", .userFile = user});
  CHECK(again.lookup("aaaa", "pointwise", 1, kH200, "N=4096")->config["threads"] == 1024);
  CHECK(again.files()[0].entries.size() == 2);
}

TEST_CASE("tuning database: the default user file follows XDG_CONFIG_HOME, then HOME", "[tuning]") {
  TempDir tmp;
  {
    EnvGuard xdg("XDG_CONFIG_HOME", tmp.path.c_str());
    CHECK(defaultUserTuningFile() == tmp.path / "kiln" / "tuning.json");
  }
  {
    EnvGuard xdg("XDG_CONFIG_HOME", nullptr);
    EnvGuard home("HOME", tmp.path.c_str());
    CHECK(defaultUserTuningFile() == tmp.path / ".config" / "kiln" / "tuning.json");
    EnvGuard path("KILN_TUNING_PATH", nullptr);
    TuningDatabase db;
    CHECK(db.userFile() == tmp.path / ".config" / "kiln" / "tuning.json");
  }
}

TEST_CASE("tuning database: precedence across the search path and the user file", "[tuning]") {
  TempDir tmp;
  fs::path shipA = tmp.path / "app" / "a.json";
  fs::path dir = tmp.path / "more";
  fs::path user = tmp.path / "user.json";
  writeTuningFile(shipA, {entry("k1", 50.0, 1), entry("k2", 50.0, 1)});
  // A directory contributes its *.json files in name order.
  writeTuningFile(dir / "20-late.json", {entry("k1", 10.0, 3), entry("k3", 5.0, 3), entry("k4", 5.0, 3)});
  writeTuningFile(dir / "10-early.json", {entry("k3", 90.0, 2)});
  writeText(dir / "notes.txt", "not a database");
  writeTuningFile(user, {entry("k1", 1.0, 4), entry("k4", 1.0, 4), entry("k5", 1.0, 4)});

  std::string path = shipA.string() + "::" + (tmp.path / "missing.json").string() + ":" + dir.string();
  SECTION("from KILN_TUNING_PATH, user file last") {
    EnvGuard env("KILN_TUNING_PATH", path.c_str());
    TuningDatabase db({.userFile = user});
    REQUIRE(db.files().size() == 4);
    CHECK(db.files()[0].path == shipA);
    CHECK(db.files()[1].path == dir / "10-early.json");
    CHECK(db.files()[2].path == dir / "20-late.json");
    CHECK(db.files()[3].path == user);
    CHECK(db.files()[3].writable);
    CHECK_FALSE(db.files()[0].writable);
    auto threads = [&](const char* sig) {
      auto e = db.lookup(sig, "pointwise", 1, kH200, "N=4096");
      return e ? e->config["threads"].get<int>() : -1;
    };
    // Earlier files win, even over a faster entry later on the path.
    CHECK(threads("k1") == 1);
    CHECK(threads("k2") == 1);
    CHECK(threads("k3") == 2);
    CHECK(threads("k4") == 3);
    CHECK(threads("k5") == 4);  // only in the user file
    CHECK(threads("k6") == -1);
  }
  SECTION("user file first when asked") {
    TuningDatabase db({.searchPath = path, .userFile = user, .userFileFirst = true});
    REQUIRE(db.files().size() == 4);
    CHECK(db.files()[0].path == user);
    CHECK(db.lookup("k1", "pointwise", 1, kH200, "N=4096")->config["threads"] == 4);
    CHECK(db.lookup("k3", "pointwise", 1, kH200, "N=4096")->config["threads"] == 2);
  }
  SECTION("the user file on the path is loaded once, as the user file") {
    TuningDatabase db({.searchPath = user.string() + ":" + shipA.string(), .userFile = user});
    REQUIRE(db.files().size() == 2);
    CHECK(db.files()[0].path == shipA);
    CHECK(db.files()[1].path == user);
  }
}

TEST_CASE("tuning database: another schema version is an error naming the file", "[tuning]") {
  TempDir tmp;
  fs::path f = tmp.path / "old.json";
  writeText(f, R"({"kiln_tuning_db": 7, "entries": []})");
  std::string err = errorOf([&] { TuningDatabase db({.searchPath = f.string(), .userFile = tmp.path / "u.json"}); });
  CHECK_THAT(err, Catch::Contains(f.string()));
  CHECK_THAT(err, Catch::Contains("schema version 7"));
  CHECK_THAT(err, Catch::Contains("reads version 1"));

  writeText(f, R"({"entries": []})");
  CHECK_THAT(errorOf([&] { readTuningFile(f); }), Catch::Contains("not a kiln tuning database"));

  // A bad entry names its index and field.
  json doc = {{"kiln_tuning_db", 1}, {"entries", {entryToJson(entry("a", 1)), entryToJson(entry("b", 1))}}};
  doc["entries"][1].erase("median_us");
  writeText(f, doc.dump());
  err = errorOf([&] { readTuningFile(f); });
  CHECK_THAT(err, Catch::Contains(f.string()));
  CHECK_THAT(err, Catch::Contains("entry 1"));
  CHECK_THAT(err, Catch::Contains("median_us"));
  doc["entries"][1]["median_us"] = "fast";
  writeText(f, doc.dump());
  CHECK_THAT(errorOf([&] { readTuningFile(f); }), Catch::Contains("must be a number"));
}

TEST_CASE("tuning database: malformed JSON is an error with the line and column", "[tuning]") {
  TempDir tmp;
  fs::path f = tmp.path / "bad.json";
  writeText(f, "{\n  \"kiln_tuning_db\": 1,\n  \"entries\": [ oops ]\n}\n");
  std::string err = errorOf([&] { TuningDatabase db({.searchPath = f.string(), .userFile = tmp.path / "u.json"}); });
  CHECK_THAT(err, Catch::Contains(f.string()));
  CHECK_THAT(err, Catch::Contains("malformed JSON"));
  CHECK_THAT(err, Catch::Contains("line 3"));
  CHECK_THAT(err, Catch::Contains("column"));
  CHECK_THAT(err, !Catch::Contains("[json.exception"));

  // A malformed user file is reported too.
  fs::path u = tmp.path / "user.json";
  writeText(u, "");
  CHECK_THAT(errorOf([&] { TuningDatabase db({.searchPath = "", .userFile = u}); }),
             Catch::Contains(u.string()));
}

TEST_CASE("tuning database: entries of another schedule version are ignored with one note", "[tuning]") {
  TempDir tmp;
  fs::path shipped = tmp.path / "shipped.json";
  fs::path user = tmp.path / "user.json";
  writeTuningFile(shipped, {entry("k", 5.0, 64, "N=4096", /*version=*/1)});
  writeTuningFile(user, {entry("k", 9.0, 512, "N=4096", /*version=*/2)});
  TuningDatabase db({.searchPath = shipped.string(), .userFile = user});

  CerrCapture cap;
  // This kiln's pointwise is version 2: the shipped v1 entry is stale.
  auto e = db.lookup("k", "pointwise", 2, kH200, "N=4096");
  REQUIRE(e);
  CHECK(e->config["threads"] == 512);
  CHECK(db.lookup("k", "pointwise", 2, kH200, "N=4096"));  // no second note
  std::string out = cap.str();
  CHECK_THAT(out, Catch::Contains(shipped.string()));
  CHECK_THAT(out, Catch::Contains("version 1"));
  REQUIRE(db.notes().size() == 1);
  CHECK(out == db.notes()[0] + "\n");

  // Version 3: nothing matches; the user file's v2 entry gets its own note.
  CHECK_FALSE(db.lookup("k", "pointwise", 3, kH200, "N=4096"));
  CHECK(db.notes().size() == 2);
  CHECK_THAT(db.notes()[1], Catch::Contains(user.string()));
}

TEST_CASE("kiln-tune merge: keeps the faster entry, is deterministic", "[tuning]") {
  TempDir tmp;
  fs::path a = tmp.path / "a.json", b = tmp.path / "b.json", c = tmp.path / "c.json";
  writeTuningFile(a, {entry("z", 10.0, 1), entry("m", 7.0, 1), entry("same", 5.0, 1, "N=4096", 1, "2025-01-01")});
  writeTuningFile(b, {entry("m", 6.0, 2), entry("z", 11.0, 2), entry("same", 5.0, 2, "N=4096", 1, "2025-06-01"),
                      entry("a", 3.0, 2)});
  // Another schedule version is another key: both kept.
  writeTuningFile(c, {entry("z", 1.0, 3, "N=4096", /*version=*/2)});

  fs::path out1 = tmp.path / "out1.json", out2 = tmp.path / "out2.json";
  MergeStats s = mergeTuningFiles({a, b, c}, out1);
  CHECK(s.filesRead == 3);
  CHECK(s.entriesRead == 8);
  CHECK(s.entriesWritten == 5);
  CHECK(s.duplicatesDropped == 3);

  std::vector<TuningEntry> merged = readTuningFile(out1);
  REQUIRE(merged.size() == 5);
  // Sorted by key: signature, schedule, version, device, bucket.
  std::vector<std::string> order;
  for (const auto& e : merged) order.push_back(e.kernelSignature + "/" + std::to_string(e.scheduleVersion));
  CHECK(order == std::vector<std::string>{"a/1", "m/1", "same/1", "z/1", "z/2"});
  CHECK(merged[1].config["threads"] == 2);  // m: 6 us beats 7 us
  CHECK(merged[2].config["threads"] == 2);  // same: a tie, the newer date wins
  CHECK(merged[3].config["threads"] == 1);  // z v1: 10 us beats 11 us
  CHECK(merged[4].config["threads"] == 3);

  // Any input order gives the same bytes.
  mergeTuningFiles({c, b, a}, out2);
  CHECK(readText(out1) == readText(out2));
  // Merging into one of the inputs works; merging a merged file is a no-op.
  mergeTuningFiles({a, out1}, a);
  CHECK(readText(a) == readText(out1));
  CHECK(temporaries(tmp.path).empty());

  // A bad input writes nothing.
  fs::path bad = tmp.path / "bad.json", out3 = tmp.path / "out3.json";
  writeText(bad, "[1, 2");
  CHECK_THAT(errorOf([&] { mergeTuningFiles({a, bad}, out3); }), Catch::Contains(bad.string()));
  CHECK_FALSE(fs::exists(out3));
}

TEST_CASE("tuning database: saves are atomic", "[tuning]") {
  TempDir tmp;
  fs::path user = tmp.path / "deep" / "er" / "tuning.json";
  TuningDatabase db({.searchPath = "", .userFile = user});
  db.save();  // nothing recorded: nothing written
  CHECK_FALSE(fs::exists(user));
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) db.record(entry("sig" + std::to_string(i), 1.0 + i + round, 32 * (round + 1)));
    db.save();
    CHECK(temporaries(user.parent_path()).empty());
    std::vector<TuningEntry> back = readTuningFile(user);  // whole and valid
    REQUIRE(back.size() == 50);
    CHECK(back[0].config["threads"] == 32 * (round + 1));
  }
  // The only file in the directory is the database.
  size_t files = 0;
  for (const auto& de : fs::directory_iterator(user.parent_path())) {
    (void)de;
    ++files;
  }
  CHECK(files == 1);

  // A stale reader keeps a whole file open while a writer replaces it: the
  // reader's view is the old content, intact (rename, not rewrite in place).
  std::ifstream reader(user);
  std::string before = readText(user);
  db.record(entry("new", 1.0));
  db.save();
  std::stringstream ss;
  ss << reader.rdbuf();
  CHECK(ss.str() == before);
  CHECK(readText(user) != before);

  // A directory in the way of the file is an error naming the file.
  fs::path blocked = tmp.path / "blocked";
  fs::create_directories(blocked / "tuning.json");
  CHECK_THAT(errorOf([&] { writeTuningFile(blocked / "tuning.json", {entry("x", 1)}); }),
             Catch::Contains((blocked / "tuning.json").string()));
  CHECK(temporaries(blocked).empty());
}
