// The tuning database: which config a kernel should use on a device at a
// shape, as measured by the tuner, kept in JSON files that an application can
// ship. Pure C++ (nlohmann::json): no LLVM, no CUDA. docs/tuning.md has the
// file format and an example.
//
// Promises:
// - A file is `{"kiln_tuning_db": <schema version>, "entries": [...]}`. A
//   file of another schema version, malformed JSON (line and column given) or
//   an entry with a missing or mistyped field is a kiln::Error naming the file
//   (and the entry's index), thrown while loading.
// - An entry is keyed by (signature, schedule, scheduleVersion, device, shape
//   bucket). Within one file a duplicate key keeps the better entry (the
//   rule of merge below).
// - Search path: `KILN_TUNING_PATH`, a colon-separated list of files and
//   directories (a directory contributes its *.json files in name order;
//   empty and nonexistent entries are skipped, like PATH). These files are
//   read-only. One user file is writable: $XDG_CONFIG_HOME/kiln/tuning.json,
//   else ~/.config/kiln/tuning.json, or the one given to the constructor;
//   a missing user file is an empty one. If the user file also appears on the
//   path it is loaded once, as the user file.
// - Precedence: the first file in search order that has the key wins. The
//   path's files come first, in path order, and the user file last (unless
//   TuningDbOptions::userFileFirst): what an application ships is the result
//   its authors validated and is the same on every machine; the user file
//   collects ad-hoc tuning and should fill gaps, not silently shadow a shipped
//   file that has since been updated. `userFileFirst` is for a user who
//   re-tunes on purpose.
// - lookup() ignores entries whose scheduleVersion differs from the caller's
//   (their config may not mean the same thing any more); the first time per
//   (file, schedule, version) per database object a note goes to stderr:
//   "kiln: tuning: <file>: ignoring entries of schedule 'S' version V (this
//   kiln's is W)". The notes are also kept (notes()).
// - record() adds or replaces an entry of the user file in memory; save()
//   writes the user file atomically (a temporary `.<name>.<pid>.<n>.tmp` in
//   the same directory, then rename(); parents created as needed), entries
//   sorted by key so files diff well. An I/O failure is a kiln::Error naming
//   the file.
// - Not thread-safe: one object per thread, or a lock around it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kiln::tune {

// The schema version this kiln reads and writes.
inline constexpr int kTuningDbSchemaVersion = 1;

struct DeviceKey {
  std::string name;  // as the driver reports it, e.g. "NVIDIA H200"
  int ccMajor = 0;
  int ccMinor = 0;
  int smCount = 0;

  // Stable string form, e.g. "NVIDIA H200/sm_90/132sm" (used to sort keys and
  // in `kiln-tune show`; the file stores the fields separately).
  std::string str() const;
  friend bool operator==(const DeviceKey&, const DeviceKey&) = default;
};

struct TuningEntry {
  std::string kernelSignature;  // a hash string of the kernel (its graph and ABI)
  std::string schedule;         // "pointwise", "row_reduction", ...
  int scheduleVersion = 0;
  DeviceKey device;
  std::string shapeBucket;      // shapeBucket() below; "" when no dim is dynamic
  nlohmann::json config;        // the schedule's config object
  double medianUs = 0;
  double p95Us = 0;
  double achieved = 0;          // in achievedUnit
  std::string achievedUnit;     // "TB/s" or "TFLOP/s"
  std::string kilnVersion;
  std::string date;             // ISO 8601, UTC ("2025-11-30T04:02:00Z"); compared as text
};

// The key of an entry, as a sortable tuple.
struct TuningKey {
  std::string signature, schedule;
  int scheduleVersion = 0;
  std::string device, bucket;  // DeviceKey::str(), the bucket
  auto operator<=>(const TuningKey&) const = default;
};
TuningKey keyOf(const TuningEntry& e);

// True when `a` should be kept over `b` for the same key: the lower medianUs,
// on a tie the newer date; on a full tie false (the one already kept stays).
bool betterEntry(const TuningEntry& a, const TuningEntry& b);

// ---- Shape buckets ---------------------------------------------------------
//
// A tuned config serves every shape of its bucket. Each dynamic dim maps to a
// value by its rule:
//   PowerOfTwo (the default): the smallest power of two >= v (0 stays 0), so
//     1000 and 1024 share "N=1024", 1025 goes to "N=2048".
//   Exact: v itself.
//   Boundaries: the smallest boundary >= v (boundaries ascending); a value
//     above the last boundary falls back to its power of two, so no bucket is
//     unbounded.
// The bucket string lists the dims sorted by name, "M=4096,N=1024"; a
// negative value or a power of two above 2^62 is a kiln::Error.
struct DimRule {
  enum class Kind { PowerOfTwo, Exact, Boundaries };
  Kind kind = Kind::PowerOfTwo;
  std::vector<int64_t> boundaries;  // for Boundaries: ascending, positive

  static DimRule powerOfTwo() { return {}; }
  static DimRule exact() { return {Kind::Exact, {}}; }
  static DimRule bounds(std::vector<int64_t> b) { return {Kind::Boundaries, std::move(b)}; }
};

struct BucketPolicy {
  DimRule defaultRule;                  // for dims not named in perDim
  std::map<std::string, DimRule> perDim;
};

// The value v maps to under `rule` (see above).
int64_t bucketValue(int64_t v, const DimRule& rule);
std::string shapeBucket(const std::vector<std::pair<std::string, int64_t>>& dims,
                        const BucketPolicy& policy = {});

// ---- Files -------------------------------------------------------------------

// Reads one file (schema checked, duplicates within it resolved by
// betterEntry, entries in file order otherwise). kiln::Error on any problem.
std::vector<TuningEntry> readTuningFile(const std::filesystem::path& file);
// Writes entries sorted by key, atomically (temporary file + rename).
void writeTuningFile(const std::filesystem::path& file, std::vector<TuningEntry> entries);

nlohmann::json entryToJson(const TuningEntry& e);
// `where` names the entry in errors ("tuning.json: entry 3").
TuningEntry entryFromJson(const nlohmann::json& j, const std::string& where);

struct MergeStats {
  size_t filesRead = 0;
  size_t entriesRead = 0;
  size_t entriesWritten = 0;
  size_t duplicatesDropped = 0;  // entries that lost to a better one with the same key
};
// Combines the inputs into `output` (which may be one of them): one entry per
// key, the better one by betterEntry (ties: the earlier input's), sorted by
// key. Every schedule version is kept. kiln::Error naming the file on a bad
// input or a failed write; nothing is written then.
MergeStats mergeTuningFiles(const std::vector<std::filesystem::path>& inputs,
                            const std::filesystem::path& output);

// ---- The database ------------------------------------------------------------

struct TuningDbOptions {
  // nullopt: $KILN_TUNING_PATH (unset or empty: no read-only files).
  std::optional<std::string> searchPath;
  // "": $XDG_CONFIG_HOME/kiln/tuning.json, else ~/.config/kiln/tuning.json.
  std::filesystem::path userFile;
  // Search the user file before the path's files instead of after them.
  bool userFileFirst = false;
};

// The default user file (see above), resolved from the environment now.
std::filesystem::path defaultUserTuningFile();
// Now, UTC, ISO 8601 ("2025-11-30T04:02:00Z"), for TuningEntry::date.
std::string utcNowIso8601();

class TuningDatabase {
 public:
  // Loads every file now; kiln::Error on a bad file (nothing half-loaded).
  explicit TuningDatabase(TuningDbOptions options = {});

  // The best entry for the key: the first file in search order that has an
  // entry with this key. Entries of another scheduleVersion are ignored (with
  // a note, see above).
  std::optional<TuningEntry> lookup(const std::string& signature, const std::string& schedule,
                                    int scheduleVersion, const DeviceKey& device,
                                    const std::string& bucket);

  // Adds the entry to the user file, replacing one with the same key
  // (whatever its times: the caller measured it last). Not written until save().
  void record(const TuningEntry& entry);
  // Writes the user file atomically. No-op when nothing was recorded.
  void save();

  const std::filesystem::path& userFile() const { return files_[userIndex_].path; }
  // The files in search order (the user file among them), and their entries.
  struct File {
    std::filesystem::path path;
    bool writable = false;
    std::vector<TuningEntry> entries;
  };
  const std::vector<File>& files() const { return files_; }
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  std::vector<File> files_;
  size_t userIndex_ = 0;
  bool dirty_ = false;
  std::set<std::string> noted_;
  std::vector<std::string> notes_;
};

}  // namespace kiln::tune
