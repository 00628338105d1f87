// The on-disk kernel cache: opaque payloads (a compiled kernel's PTX, cubin
// and metadata, serialized by the caller) stored under a hex key, shared by
// every thread and process of the user. Pure C++ and POSIX: no LLVM, no CUDA.
//
// Promises:
// - Location: the directory given, else $KILN_CACHE_DIR, else
//   $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (HOME from the password
//   database if unset). Created on first use with mode 0700 (parents as
//   needed); a directory that cannot be created or written is a kiln::Error
//   naming it, thrown by the first call that touches the disk, never a crash.
// - Layout: one flat directory, one file `<key>.kcache` per entry (no
//   sharding: a few thousand kernels per user is the expected size). Each file
//   is a 32-byte little-endian header (magic "KILNCACH", format version,
//   key length, payload size, 64-bit payload checksum), the key, the payload.
// - Writes are atomic: a temporary `.<key>.<pid>.<n>.tmp` in the same
//   directory, then rename() over the final name, so readers (in any process)
//   see the old entry, the new one or none, never a partial file. There is no
//   fsync: a file torn by a power loss fails its checksum and is rebuilt.
// - Loads verify everything. A corrupt, truncated or mismatched entry is
//   removed, get() returns Corrupt, and the first time per key per process a
//   warning goes to stderr: "kiln: cache: entry <key> in <dir> is corrupt
//   (<why>); rebuilding". A file removed by another process mid-lookup is a
//   Miss.
// - LRU: a hit sets the file's mtime to now; prune() removes the least
//   recently used first. put() prunes to 90% of the cap when the total
//   exceeds it. Totals come from scanning the directory (readdir + stat per
//   entry, O(entries), about a microsecond each): fine after a compile that
//   takes milliseconds, not meant for a hot path. prune() and clear() also
//   remove temporary files older than an hour (left by a killed writer).
// - Thread-safe and multi-process safe; the object itself holds no state but
//   its directory, cap and a "directory is ready" flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

enum class CacheLookup {
  Hit,
  Miss,
  Corrupt,  // the entry was unreadable/truncated/mismatched; it has been removed
};

struct DiskCacheEntry {
  std::string key;
  uint64_t bytes = 0;        // size of the file on disk (header + key + payload)
  int64_t lastUsedUnix = 0;  // mtime, seconds since the epoch
};

struct DiskCacheStats {
  std::string directory;
  uint64_t entries = 0;
  uint64_t bytes = 0;  // sum of the entries' file sizes
  uint64_t capBytes = 0;
};

class DiskCache {
 public:
  // The entry file format version; a file of another version is Corrupt.
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr uint64_t kDefaultCapBytes = uint64_t{2} << 30;  // 2 GiB

  // directory "": resolved from the environment as above (at construction).
  // capBytes 0: $KILN_CACHE_MAX_BYTES (bytes, optional K/M/G suffix, binary)
  // if set, else 2 GiB. A malformed value is a kiln::Error at first use.
  explicit DiskCache(std::string directory = "", uint64_t capBytes = 0);

  // The process-wide instance with the defaults (constructed on first call,
  // thread-safe; the environment is read then).
  static DiskCache& global();

  const std::string& directory() const { return dir_; }
  uint64_t capBytes() const { return cap_; }

  // key: [0-9a-f]{16,64}, else a kiln::Error. On Hit, payload holds the
  // entry; on Miss and Corrupt it is empty.
  CacheLookup get(const std::string& key, std::vector<uint8_t>& payload);
  // Stores (or replaces) the entry, then prunes if the total exceeds the cap.
  // An entry larger than the cap by itself is not stored. An I/O failure
  // (disk full...) is a kiln::Error naming the file; callers that treat the
  // cache as optional catch it.
  void put(const std::string& key, std::span<const uint8_t> payload);

  DiskCacheStats stats() const;
  std::vector<DiskCacheEntry> list() const;  // most recently used first
  uint64_t clear();                          // removes every entry; returns how many
  // Removes least recently used entries until the total is <= targetBytes;
  // returns how many it removed.
  uint64_t prune(uint64_t targetBytes);

 private:
  void ensureReady() const;  // creates/checks the directory, throws kiln::Error
  std::string entryPath(const std::string& key) const;
  void removeStaleTemporaries() const;

  std::string dir_;
  uint64_t cap_ = 0;
  std::string configError_;  // reported at first use
  mutable std::atomic<bool> ready_{false};
};

// True for a valid cache key: 16 to 64 lowercase hex characters.
bool isCacheKey(std::string_view key);

// kiln-hash128 v1: a 128-bit non-cryptographic hash of `data` as 32 lowercase
// hex chars. Stable across runs, platforms and compilers (bytes are read as
// little-endian 64-bit words whatever the host). Two lanes, each murmur3-x64
// style (multiply, rotate, multiply into the lane; lane rotate, *5 + constant),
// seeded differently with the length mixed in, a zero-padded tail word, then
// murmur3's fmix64 finalizer and cross-lane adds. Changing it changes every
// cache key, so it is frozen; tests pin known outputs.
std::string hashHex(std::string_view data);

// The first 64 bits of the same hash (the entries' payload checksum).
uint64_t hash64(const void* data, size_t size);

}  // namespace kiln::rt
