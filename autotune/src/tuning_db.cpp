#include "kiln/autotune/tuning_db.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <sstream>

#include "kiln/error.h"

namespace kiln::tune {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void fail(const fs::path& file, const std::string& what) {
  throw Error("kiln: tuning database " + file.string() + ": " + what);
}

// nlohmann's messages start with "[json.exception.parse_error.101] "; drop it.
std::string stripJsonPrefix(const std::string& msg) {
  if (!msg.empty() && msg[0] == '[') {
    size_t close = msg.find("] ");
    if (close != std::string::npos) return msg.substr(close + 2);
  }
  return msg;
}

template <typename T>
T field(const json& j, const char* name, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) throw Error(where + ": missing field \"" + name + "\"");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(where + ": field \"" + name + "\" has the wrong type (" + std::string(it->type_name()) +
                ")");
  }
}

// Strict number fields: nlohmann converts a float to int silently; refuse it.
int intField(const json& j, const char* name, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) throw Error(where + ": missing field \"" + name + "\"");
  if (!it->is_number_integer())
    throw Error(where + ": field \"" + name + "\" must be an integer (is " + std::string(it->type_name()) +
                ")");
  return it->get<int>();
}

double numberField(const json& j, const char* name, const std::string& where) {
  auto it = j.find(name);
  if (it == j.end()) throw Error(where + ": missing field \"" + name + "\"");
  if (!it->is_number())
    throw Error(where + ": field \"" + name + "\" must be a number (is " + std::string(it->type_name()) + ")");
  return it->get<double>();
}

// Adds e to the list unless an entry with its key is better; returns false
// when e was dropped or replaced one (a duplicate).
bool addBest(std::vector<TuningEntry>& list, std::map<TuningKey, size_t>& index, TuningEntry e) {
  TuningKey k = keyOf(e);
  auto it = index.find(k);
  if (it == index.end()) {
    index.emplace(std::move(k), list.size());
    list.push_back(std::move(e));
    return true;
  }
  if (betterEntry(e, list[it->second])) list[it->second] = std::move(e);
  return false;
}

std::string envOr(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

void sortByKey(std::vector<TuningEntry>& entries) {
  std::stable_sort(entries.begin(), entries.end(),
                   [](const TuningEntry& a, const TuningEntry& b) { return keyOf(a) < keyOf(b); });
}

}  // namespace

// ---- Keys -----------------------------------------------------------------------

std::string DeviceKey::str() const {
  return name + "/sm_" + std::to_string(ccMajor) + std::to_string(ccMinor) + "/" + std::to_string(smCount) +
         "sm";
}

TuningKey keyOf(const TuningEntry& e) {
  return {e.kernelSignature, e.schedule, e.scheduleVersion, e.device.str(), e.shapeBucket};
}

bool betterEntry(const TuningEntry& a, const TuningEntry& b) {
  if (a.medianUs != b.medianUs) return a.medianUs < b.medianUs;
  return a.date > b.date;
}

// ---- Buckets ----------------------------------------------------------------------

namespace {
int64_t powerOfTwoAtLeast(int64_t v) {
  if (v == 0) return 0;
  if (v > (int64_t{1} << 62)) throw Error("kiln: shape bucket: dim value " + std::to_string(v) + " is too large");
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}
}  // namespace

int64_t bucketValue(int64_t v, const DimRule& rule) {
  if (v < 0) throw Error("kiln: shape bucket: negative dim value " + std::to_string(v));
  switch (rule.kind) {
    case DimRule::Kind::Exact:
      return v;
    case DimRule::Kind::Boundaries:
      if (!std::is_sorted(rule.boundaries.begin(), rule.boundaries.end()))
        throw Error("kiln: shape bucket: boundaries must be ascending");
      for (int64_t b : rule.boundaries)
        if (v <= b) return b;
      return powerOfTwoAtLeast(v);
    case DimRule::Kind::PowerOfTwo:
      break;
  }
  return powerOfTwoAtLeast(v);
}

std::string shapeBucket(const std::vector<std::pair<std::string, int64_t>>& dims, const BucketPolicy& policy) {
  std::vector<std::pair<std::string, int64_t>> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size(); ++i) {
    const auto& [name, v] = sorted[i];
    if (i > 0 && sorted[i - 1].first == name) throw Error("kiln: shape bucket: dim '" + name + "' given twice");
    auto rule = policy.perDim.find(name);
    int64_t b;
    try {
      b = bucketValue(v, rule != policy.perDim.end() ? rule->second : policy.defaultRule);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (dim '" + name + "')");
    }
    if (!out.empty()) out += ',';
    out += name + "=" + std::to_string(b);
  }
  return out;
}

// ---- JSON -------------------------------------------------------------------------

json entryToJson(const TuningEntry& e) {
  // ordered_json would keep this order; plain json sorts keys, which is just
  // as stable.
  return json{
      {"signature", e.kernelSignature},
      {"schedule", e.schedule},
      {"schedule_version", e.scheduleVersion},
      {"device",
       {{"name", e.device.name},
        {"cc_major", e.device.ccMajor},
        {"cc_minor", e.device.ccMinor},
        {"sm_count", e.device.smCount}}},
      {"bucket", e.shapeBucket},
      {"config", e.config.is_null() ? json::object() : e.config},
      {"median_us", e.medianUs},
      {"p95_us", e.p95Us},
      {"achieved", e.achieved},
      {"achieved_unit", e.achievedUnit},
      {"kiln_version", e.kilnVersion},
      {"date", e.date},
  };
}

TuningEntry entryFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + ": not an object");
  TuningEntry e;
  e.kernelSignature = field<std::string>(j, "signature", where);
  e.schedule = field<std::string>(j, "schedule", where);
  e.scheduleVersion = intField(j, "schedule_version", where);
  auto dev = j.find("device");
  if (dev == j.end() || !dev->is_object()) throw Error(where + ": missing object \"device\"");
  std::string dwhere = where + ": device";
  e.device.name = field<std::string>(*dev, "name", dwhere);
  e.device.ccMajor = intField(*dev, "cc_major", dwhere);
  e.device.ccMinor = intField(*dev, "cc_minor", dwhere);
  e.device.smCount = intField(*dev, "sm_count", dwhere);
  e.shapeBucket = field<std::string>(j, "bucket", where);
  auto cfg = j.find("config");
  if (cfg == j.end() || !cfg->is_object()) throw Error(where + ": missing object \"config\"");
  e.config = *cfg;
  e.medianUs = numberField(j, "median_us", where);
  e.p95Us = numberField(j, "p95_us", where);
  e.achieved = numberField(j, "achieved", where);
  e.achievedUnit = field<std::string>(j, "achieved_unit", where);
  e.kilnVersion = field<std::string>(j, "kiln_version", where);
  e.date = field<std::string>(j, "date", where);
  if (e.kernelSignature.empty()) throw Error(where + ": empty \"signature\"");
  if (e.schedule.empty()) throw Error(where + ": empty \"schedule\"");
  return e;
}

std::vector<TuningEntry> readTuningFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail(file, std::string("cannot open: ") + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail(file, "read error");

  json doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    fail(file, "malformed JSON: " + stripJsonPrefix(e.what()));
  }
  if (!doc.is_object()) fail(file, "not a kiln tuning database (the top level is not an object)");
  auto ver = doc.find("kiln_tuning_db");
  if (ver == doc.end())
    fail(file, "not a kiln tuning database (no \"kiln_tuning_db\" schema version at the top level)");
  if (!ver->is_number_integer()) fail(file, "\"kiln_tuning_db\" must be an integer schema version");
  if (ver->get<int64_t>() != kTuningDbSchemaVersion)
    fail(file, "schema version " + ver->dump() + ", this kiln reads version " +
                   std::to_string(kTuningDbSchemaVersion));
  auto list = doc.find("entries");
  if (list == doc.end() || !list->is_array()) fail(file, "missing array \"entries\"");

  std::vector<TuningEntry> out;
  std::map<TuningKey, size_t> index;
  for (size_t i = 0; i < list->size(); ++i) {
    TuningEntry e;
    try {
      e = entryFromJson((*list)[i], "entry " + std::to_string(i));
    } catch (const Error& err) {
      fail(file, err.what());
    }
    addBest(out, index, std::move(e));
  }
  return out;
}

void writeTuningFile(const fs::path& file, std::vector<TuningEntry> entries) {
  sortByKey(entries);
  json doc = {{"kiln_tuning_db", kTuningDbSchemaVersion}, {"entries", json::array()}};
  for (const TuningEntry& e : entries) doc["entries"].push_back(entryToJson(e));
  std::string text = doc.dump(2) + "\n";

  fs::path dir = file.parent_path();
  if (!dir.empty()) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail(file, "cannot create directory " + dir.string() + ": " + ec.message());
  }
  static std::atomic<unsigned> counter{0};
  fs::path tmp = (dir.empty() ? fs::path(".") : dir) /
                 ("." + file.filename().string() + "." + std::to_string(::getpid()) + "." +
                  std::to_string(counter++) + ".tmp");
  {
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) fail(file, "cannot write " + tmp.string() + ": " + std::strerror(errno));
    bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    int err = errno;
    ok = (std::fclose(f) == 0) && ok;
    if (!ok) {
      std::remove(tmp.c_str());
      fail(file, "cannot write " + tmp.string() + ": " + std::strerror(err ? err : errno));
    }
  }
  if (std::rename(tmp.c_str(), file.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail(file, std::string("cannot rename the temporary file over it: ") + std::strerror(err));
  }
}

MergeStats mergeTuningFiles(const std::vector<fs::path>& inputs, const fs::path& output) {
  MergeStats stats;
  std::vector<TuningEntry> all;
  std::map<TuningKey, size_t> index;
  for (const fs::path& in : inputs) {
    std::vector<TuningEntry> entries = readTuningFile(in);
    stats.filesRead++;
    stats.entriesRead += entries.size();
    for (TuningEntry& e : entries)
      if (!addBest(all, index, std::move(e))) stats.duplicatesDropped++;
  }
  stats.entriesWritten = all.size();
  writeTuningFile(output, std::move(all));
  return stats;
}

// ---- Environment ----------------------------------------------------------------

fs::path defaultUserTuningFile() {
  std::string xdg = envOr("XDG_CONFIG_HOME");
  if (!xdg.empty() && xdg[0] == '/') return fs::path(xdg) / "kiln" / "tuning.json";
  std::string home = envOr("HOME");
  if (home.empty()) {
    if (const passwd* pw = ::getpwuid(::getuid()); pw && pw->pw_dir) home = pw->pw_dir;
  }
  if (home.empty()) throw Error("kiln: tuning database: neither XDG_CONFIG_HOME nor HOME is set");
  return fs::path(home) / ".config" / "kiln" / "tuning.json";
}

std::string utcNowIso8601() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// ---- TuningDatabase -------------------------------------------------------------

TuningDatabase::TuningDatabase(TuningDbOptions options) {
  fs::path user = options.userFile.empty() ? defaultUserTuningFile() : options.userFile;
  std::string path = options.searchPath ? *options.searchPath : envOr("KILN_TUNING_PATH");

  auto sameAsUser = [&](const fs::path& p) {
    std::error_code ec;
    if (fs::equivalent(p, user, ec)) return true;
    fs::path a = fs::weakly_canonical(p, ec);
    if (ec) return false;
    fs::path b = fs::weakly_canonical(user, ec);
    return !ec && a == b;
  };

  std::vector<fs::path> readOnly;
  auto addReadOnly = [&](const fs::path& p) {
    if (sameAsUser(p)) return;
    if (std::find(readOnly.begin(), readOnly.end(), p) == readOnly.end()) readOnly.push_back(p);
  };
  size_t start = 0;
  while (start <= path.size()) {
    size_t colon = path.find(':', start);
    if (colon == std::string::npos) colon = path.size();
    std::string item = path.substr(start, colon - start);
    start = colon + 1;
    if (item.empty()) continue;
    std::error_code ec;
    fs::path p(item);
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> jsons;
      for (const auto& de : fs::directory_iterator(p, ec))
        if (de.path().extension() == ".json" && !de.is_directory(ec)) jsons.push_back(de.path());
      if (ec) fail(p, "cannot list the directory: " + ec.message());
      std::sort(jsons.begin(), jsons.end());
      for (const fs::path& f : jsons) addReadOnly(f);
    } else if (fs::exists(p, ec)) {
      addReadOnly(p);
    }
  }

  File userFile{user, true, {}};
  std::error_code ec;
  if (fs::exists(user, ec)) userFile.entries = readTuningFile(user);
  if (options.userFileFirst) {
    userIndex_ = 0;
    files_.push_back(std::move(userFile));
  }
  for (const fs::path& p : readOnly) files_.push_back(File{p, false, readTuningFile(p)});
  if (!options.userFileFirst) {
    userIndex_ = files_.size();
    files_.push_back(std::move(userFile));
  }
}

std::optional<TuningEntry> TuningDatabase::lookup(const std::string& signature, const std::string& schedule,
                                                  int scheduleVersion, const DeviceKey& device,
                                                  const std::string& bucket) {
  std::optional<TuningEntry> found;
  for (const File& f : files_) {
    for (const TuningEntry& e : f.entries) {
      if (e.kernelSignature != signature || e.schedule != schedule || !(e.device == device) ||
          e.shapeBucket != bucket)
        continue;
      if (e.scheduleVersion != scheduleVersion) {
        std::string id = f.path.string() + "\n" + schedule + "\n" + std::to_string(e.scheduleVersion);
        if (noted_.insert(id).second) {
          std::string note = "kiln: tuning: " + f.path.string() + ": ignoring entries of schedule '" + schedule +
                             "' version " + std::to_string(e.scheduleVersion) + " (this kiln's is " +
                             std::to_string(scheduleVersion) + ")";
          std::cerr << note << "\n";
          notes_.push_back(std::move(note));
        }
        continue;
      }
      // One entry per key per file (readTuningFile, record).
      if (!found) found = e;
    }
    if (found) return found;
  }
  return std::nullopt;
}

void TuningDatabase::record(const TuningEntry& entry) {
  if (entry.kernelSignature.empty() || entry.schedule.empty())
    throw Error("kiln: tuning database: record(): an entry needs a signature and a schedule");
  if (!entry.config.is_null() && !entry.config.is_object())
    throw Error("kiln: tuning database: record(): the config must be a JSON object");
  auto& list = files_[userIndex_].entries;
  TuningKey k = keyOf(entry);
  for (TuningEntry& e : list) {
    if (keyOf(e) == k) {
      e = entry;
      dirty_ = true;
      return;
    }
  }
  list.push_back(entry);
  dirty_ = true;
}

void TuningDatabase::save() {
  if (!dirty_) return;
  writeTuningFile(files_[userIndex_].path, files_[userIndex_].entries);
  dirty_ = false;
}

}  // namespace kiln::tune
