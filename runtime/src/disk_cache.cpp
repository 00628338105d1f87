// The on-disk kernel cache (see disk_cache.h for the format and promises).
#include "kiln/runtime/disk_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <set>
#include <system_error>

#include "kiln/error.h"

namespace kiln::rt {

// ---------------------------------------------------------------------------
// kiln-hash128 v1 (frozen: cache keys and checksums depend on it)

namespace {

constexpr uint64_t kC1 = 0x87c37b91114253d5ULL;  // murmur3 x64 constants
constexpr uint64_t kC2 = 0x4cf5ad432745937fULL;
constexpr uint64_t kC3 = 0x9e3779b97f4a7c15ULL;  // golden ratio
constexpr uint64_t kC4 = 0xc2b2ae3d27d4eb4fULL;  // xxhash64 prime 2
constexpr uint64_t kSeed1 = 0x6b696c6e2d683132ULL;  // "kiln-h12"
constexpr uint64_t kSeed2 = 0x3132386861736831ULL;  // "128hash1"

inline uint64_t fmix64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  k *= 0xc4ceb9fe1a85ec53ULL;
  k ^= k >> 33;
  return k;
}

inline uint64_t loadLE64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
  return w;
}

struct Hash128 {
  uint64_t h1, h2;
};

Hash128 hash128(const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  const uint64_t len = size;
  uint64_t h1 = kSeed1 ^ (len * kC3);
  uint64_t h2 = kSeed2 ^ (len * kC4);
  auto mix = [&](uint64_t w) {
    uint64_t k1 = std::rotl(w * kC1, 31) * kC2;
    h1 ^= k1;
    h1 = std::rotl(h1, 27) + h2;
    h1 = h1 * 5 + 0x52dce729;
    uint64_t k2 = std::rotl(w * kC3, 33) * kC4;
    h2 ^= k2;
    h2 = std::rotl(h2, 31) + h1;
    h2 = h2 * 5 + 0x38495ab5;
  };
  size_t i = 0;
  for (; i + 8 <= size; i += 8) mix(loadLE64(p + i));
  if (i < size) {
    uint64_t w = 0;
    for (size_t j = 0; i + j < size; ++j) w |= uint64_t{p[i + j]} << (8 * j);
    mix(w);
  }
  h1 ^= len;
  h2 ^= len;
  h1 += h2;
  h2 += h1;
  h1 = fmix64(h1);
  h2 = fmix64(h2);
  h1 += h2;
  h2 += h1;
  return {h1, h2};
}

}  // namespace

std::string hashHex(std::string_view data) {
  const Hash128 h = hash128(data.data(), data.size());
  char buf[33];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(h.h1),
                static_cast<unsigned long long>(h.h2));
  return std::string(buf, 32);
}

uint64_t hash64(const void* data, size_t size) { return hash128(data, size).h1; }

bool isCacheKey(std::string_view key) {
  if (key.size() < 16 || key.size() > 64) return false;
  return std::all_of(key.begin(), key.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// ---------------------------------------------------------------------------
// Files

namespace {

constexpr unsigned char kMagic[8] = {'K', 'I', 'L', 'N', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderBytes = 32;
constexpr std::string_view kSuffix = ".kcache";
constexpr std::string_view kTmpSuffix = ".tmp";
constexpr int64_t kStaleTmpSeconds = 3600;

std::string errnoText(int e) { return std::generic_category().message(e); }

void putLE32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void putLE64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint32_t getLE32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{p[i]} << (8 * i);
  return v;
}
uint64_t getLE64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

bool endsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Reads exactly n bytes unless the file ends first; returns the bytes read, or
// -1 with errno set.
ssize_t readFull(int fd, void* buf, size_t n) {
  auto* p = static_cast<unsigned char*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::read(fd, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<ssize_t>(done);
}

bool writeFull(int fd, const void* buf, size_t n) {
  const auto* p = static_cast<const unsigned char*>(buf);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::write(fd, p + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(r);
  }
  return true;
}

// Warned keys, per process.
void warnCorrupt(const std::string& key, const std::string& dir, const std::string& why) {
  static std::mutex mu;
  static std::set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (!warned.insert(key).second) return;
  }
  const std::string line =
      "kiln: cache: entry " + key + " in " + dir + " is corrupt (" + why + "); rebuilding\n";
  // One write so that lines from several threads do not interleave.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

std::string getenvString(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string stripTrailingSlashes(std::string s) {
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string resolveDirectory(std::string& error) {
  if (std::string d = getenvString("KILN_CACHE_DIR"); !d.empty()) return stripTrailingSlashes(d);
  if (std::string x = getenvString("XDG_CACHE_HOME"); !x.empty())
    return stripTrailingSlashes(x) + "/kiln";
  std::string home = getenvString("HOME");
  if (home.empty()) {
    struct passwd pw;
    struct passwd* result = nullptr;
    std::vector<char> buf(16384);
    if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &result) == 0 && result &&
        result->pw_dir)
      home = result->pw_dir;
  }
  if (home.empty()) {
    error =
        "kiln: cache: no cache directory: KILN_CACHE_DIR, XDG_CACHE_HOME and HOME are unset and "
        "the user has no home directory";
    return "";
  }
  return stripTrailingSlashes(home) + "/.cache/kiln";
}

// "123", "64K", "512M", "2G", "1T" (binary multiples). 0 means invalid.
uint64_t parseBytes(const std::string& s) {
  if (s.empty()) return 0;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
    if (v > (UINT64_MAX - 9) / 10) return 0;
    v = v * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == 0) return 0;
  int shift = 0;
  if (i < s.size()) {
    switch (s[i]) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      case 't': case 'T': shift = 40; break;
      default: return 0;
    }
    ++i;
  }
  if (i != s.size()) return 0;
  if (shift && v > (UINT64_MAX >> shift)) return 0;
  return v << shift;
}

struct ScanItem {
  std::string key;   // entries only
  std::string name;  // file name in the directory
  uint64_t bytes = 0;
  struct timespec mtime{};
};

struct Scan {
  std::vector<ScanItem> entries;
  std::vector<ScanItem> temporaries;
};

// One pass over the directory: readdir + fstatat per file. A file that
// vanishes under the scan is skipped.
Scan scanDirectory(const std::string& dir) {
  Scan out;
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return out;
    throw Error("kiln: cache: cannot read the cache directory " + dir + ": " + errnoText(errno));
  }
  const int dfd = ::dirfd(d);
  while (struct dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    const bool isEntry = endsWith(name, kSuffix) &&
                         isCacheKey(name.substr(0, name.size() - kSuffix.size()));
    const bool isTmp = !isEntry && name.size() > 1 && name[0] == '.' && endsWith(name, kTmpSuffix);
    if (!isEntry && !isTmp) continue;
    struct stat st;
    if (::fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISREG(st.st_mode)) continue;
    ScanItem item;
    item.name = std::string(name);
    item.bytes = static_cast<uint64_t>(st.st_size);
    item.mtime = st.st_mtim;
    if (isEntry) {
      item.key = std::string(name.substr(0, name.size() - kSuffix.size()));
      out.entries.push_back(std::move(item));
    } else {
      out.temporaries.push_back(std::move(item));
    }
  }
  ::closedir(d);
  return out;
}

bool olderThan(const ScanItem& a, const ScanItem& b) {
  if (a.mtime.tv_sec != b.mtime.tv_sec) return a.mtime.tv_sec < b.mtime.tv_sec;
  if (a.mtime.tv_nsec != b.mtime.tv_nsec) return a.mtime.tv_nsec < b.mtime.tv_nsec;
  return a.key < b.key;
}

void validateKey(const std::string& key) {
  if (!isCacheKey(key))
    throw Error("kiln: cache: invalid key '" + key + "' (expected 16 to 64 lowercase hex characters)");
}

}  // namespace

// ---------------------------------------------------------------------------
// DiskCache

DiskCache::DiskCache(std::string directory, uint64_t capBytes) {
  dir_ = directory.empty() ? resolveDirectory(configError_) : stripTrailingSlashes(std::move(directory));
  cap_ = capBytes;
  if (cap_ == 0) {
    const std::string env = getenvString("KILN_CACHE_MAX_BYTES");
    if (env.empty()) {
      cap_ = kDefaultCapBytes;
    } else {
      cap_ = parseBytes(env);
      if (cap_ == 0) {
        cap_ = kDefaultCapBytes;
        if (configError_.empty())
          configError_ = "kiln: cache: KILN_CACHE_MAX_BYTES='" + env +
                         "' is not a positive size in bytes (optionally with K, M, G or T)";
      }
    }
  }
}

DiskCache& DiskCache::global() {
  static DiskCache instance;
  return instance;
}

void DiskCache::ensureReady() const {
  if (ready_.load(std::memory_order_acquire)) return;
  if (!configError_.empty()) throw Error(configError_);
  // mkdir -p with mode 0700 for each component we create; existing ones are
  // left as they are.
  for (size_t pos = 1; pos <= dir_.size(); ++pos) {
    if (pos != dir_.size() && dir_[pos] != '/') continue;
    const std::string prefix = dir_.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0700) != 0 && errno != EEXIST) {
      const int e = errno;
      struct stat st;
      if (::stat(prefix.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;  // e.g. EACCES on /
      throw Error("kiln: cache: cannot create the cache directory " + dir_ + ": " + errnoText(e) +
                  (prefix == dir_ ? std::string() : " (at " + prefix + ")"));
    }
  }
  struct stat st;
  if (::stat(dir_.c_str(), &st) != 0)
    throw Error("kiln: cache: cannot create the cache directory " + dir_ + ": " + errnoText(errno));
  if (!S_ISDIR(st.st_mode))
    throw Error("kiln: cache: the cache directory " + dir_ + " exists and is not a directory");
  if (::access(dir_.c_str(), R_OK | W_OK | X_OK) != 0)
    throw Error("kiln: cache: the cache directory " + dir_ + " is not writable: " + errnoText(errno));
  ready_.store(true, std::memory_order_release);
}

std::string DiskCache::entryPath(const std::string& key) const {
  return dir_ + "/" + key + std::string(kSuffix);
}

CacheLookup DiskCache::get(const std::string& key, std::vector<uint8_t>& payload) {
  validateKey(key);
  ensureReady();
  payload.clear();
  const std::string path = entryPath(key);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return CacheLookup::Miss;
    const std::string why = "cannot open: " + errnoText(errno);
    ::unlink(path.c_str());
    warnCorrupt(key, dir_, why);
    return CacheLookup::Corrupt;
  }
  struct stat st{};
  std::string why;
  do {
    if (::fstat(fd, &st) != 0) {
      why = "cannot stat: " + errnoText(errno);
      break;
    }
    const uint64_t fileBytes = static_cast<uint64_t>(st.st_size);
    unsigned char header[kHeaderBytes];
    const ssize_t h = readFull(fd, header, kHeaderBytes);
    if (h < 0) {
      why = "cannot read: " + errnoText(errno);
      break;
    }
    if (static_cast<size_t>(h) < kHeaderBytes) {
      why = "truncated: " + std::to_string(h) + " bytes, shorter than the header";
      break;
    }
    if (std::memcmp(header, kMagic, sizeof kMagic) != 0) {
      why = "bad magic";
      break;
    }
    const uint32_t version = getLE32(header + 8);
    if (version != kFormatVersion) {
      why = "format version " + std::to_string(version) + ", expected " +
            std::to_string(kFormatVersion);
      break;
    }
    const uint32_t keyLen = getLE32(header + 12);
    const uint64_t payloadBytes = getLE64(header + 16);
    const uint64_t checksum = getLE64(header + 24);
    if (keyLen != key.size()) {
      why = "key mismatch";
      break;
    }
    std::string storedKey(keyLen, '\0');
    if (readFull(fd, storedKey.data(), keyLen) != static_cast<ssize_t>(keyLen)) {
      why = "truncated in the key";
      break;
    }
    if (storedKey != key) {
      why = "key mismatch: the file holds " + storedKey;
      break;
    }
    const uint64_t expected = kHeaderBytes + keyLen + payloadBytes;
    if (payloadBytes > fileBytes || fileBytes < expected) {
      why = "truncated: " + std::to_string(fileBytes) + " of " + std::to_string(expected) + " bytes";
      break;
    }
    if (fileBytes > expected) {
      why = std::to_string(fileBytes - expected) + " trailing bytes";
      break;
    }
    payload.resize(payloadBytes);
    const ssize_t r = readFull(fd, payload.data(), payloadBytes);
    if (r < 0 || static_cast<uint64_t>(r) != payloadBytes) {
      why = r < 0 ? "cannot read: " + errnoText(errno) : "truncated while reading";
      break;
    }
    if (hash64(payload.data(), payload.size()) != checksum) {
      why = "checksum mismatch";
      break;
    }
  } while (false);

  if (why.empty()) {
    // LRU: the hit makes the entry the most recently used. Failure (a
    // read-only cache) is harmless.
    const struct timespec now[2] = {{0, UTIME_NOW}, {0, UTIME_NOW}};
    (void)::futimens(fd, now);
    ::close(fd);
    return CacheLookup::Hit;
  }
  payload.clear();
  // Remove the file only if it is still the one we read: a writer may have
  // renamed a good entry over it meanwhile.
  struct stat cur;
  if (::stat(path.c_str(), &cur) == 0 && cur.st_ino == st.st_ino && cur.st_dev == st.st_dev)
    ::unlink(path.c_str());
  ::close(fd);
  warnCorrupt(key, dir_, why);
  return CacheLookup::Corrupt;
}

void DiskCache::put(const std::string& key, std::span<const uint8_t> payload) {
  validateKey(key);
  ensureReady();
  const uint64_t fileBytes = kHeaderBytes + key.size() + payload.size();
  if (fileBytes > cap_) return;

  unsigned char header[kHeaderBytes];
  std::memcpy(header, kMagic, sizeof kMagic);
  putLE32(header + 8, kFormatVersion);
  putLE32(header + 12, static_cast<uint32_t>(key.size()));
  putLE64(header + 16, payload.size());
  putLE64(header + 24, hash64(payload.data(), payload.size()));

  static std::atomic<uint64_t> counter{0};
  const std::string tmp = dir_ + "/." + key + "." + std::to_string(::getpid()) + "." +
                          std::to_string(counter.fetch_add(1)) + std::string(kTmpSuffix);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {
    // The directory was removed under us (rm -rf ~/.cache): recreate it once.
    ready_.store(false);
    ensureReady();
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd < 0) throw Error("kiln: cache: cannot write " + tmp + ": " + errnoText(errno));
  const bool ok = writeFull(fd, header, kHeaderBytes) && writeFull(fd, key.data(), key.size()) &&
                  writeFull(fd, payload.data(), payload.size());
  const int writeErrno = errno;
  if (::close(fd) != 0 || !ok) {
    const int e = ok ? errno : writeErrno;
    ::unlink(tmp.c_str());
    throw Error("kiln: cache: cannot write " + tmp + ": " + errnoText(e));
  }
  const std::string path = entryPath(key);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    ::unlink(tmp.c_str());
    throw Error("kiln: cache: cannot rename " + tmp + " to " + path + ": " + errnoText(e));
  }

  uint64_t total = 0;
  for (const ScanItem& item : scanDirectory(dir_).entries) total += item.bytes;
  if (total > cap_) prune(cap_ - cap_ / 10);  // down to 90% of the cap
}

DiskCacheStats DiskCache::stats() const {
  ensureReady();
  DiskCacheStats s;
  s.directory = dir_;
  s.capBytes = cap_;
  for (const ScanItem& item : scanDirectory(dir_).entries) {
    ++s.entries;
    s.bytes += item.bytes;
  }
  return s;
}

std::vector<DiskCacheEntry> DiskCache::list() const {
  ensureReady();
  std::vector<ScanItem> items = scanDirectory(dir_).entries;
  std::sort(items.begin(), items.end(),
            [](const ScanItem& a, const ScanItem& b) { return olderThan(b, a); });
  std::vector<DiskCacheEntry> out;
  out.reserve(items.size());
  for (ScanItem& item : items)
    out.push_back({std::move(item.key), item.bytes, static_cast<int64_t>(item.mtime.tv_sec)});
  return out;
}

void DiskCache::removeStaleTemporaries() const {
  const int64_t now = static_cast<int64_t>(std::time(nullptr));
  for (const ScanItem& t : scanDirectory(dir_).temporaries)
    if (now - static_cast<int64_t>(t.mtime.tv_sec) > kStaleTmpSeconds)
      ::unlink((dir_ + "/" + t.name).c_str());
}

uint64_t DiskCache::clear() {
  ensureReady();
  removeStaleTemporaries();
  uint64_t removed = 0;
  for (const ScanItem& item : scanDirectory(dir_).entries)
    if (::unlink((dir_ + "/" + item.name).c_str()) == 0) ++removed;
  return removed;
}

uint64_t DiskCache::prune(uint64_t targetBytes) {
  ensureReady();
  removeStaleTemporaries();
  std::vector<ScanItem> items = scanDirectory(dir_).entries;
  uint64_t total = 0;
  for (const ScanItem& item : items) total += item.bytes;
  if (total <= targetBytes) return 0;
  std::sort(items.begin(), items.end(), olderThan);
  uint64_t removed = 0;
  for (const ScanItem& item : items) {
    if (total <= targetBytes) break;
    if (::unlink((dir_ + "/" + item.name).c_str()) == 0) {
      ++removed;
      total -= item.bytes;
    } else if (errno == ENOENT) {
      total -= item.bytes;  // another process removed it
    }
  }
  return removed;
}

}  // namespace kiln::rt
