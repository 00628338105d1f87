// The on-disk kernel cache: format, corruption handling, LRU, cap, directory
// resolution, concurrency (threads and processes) and hash stability. CPU
// only; every test uses a fresh directory under /tmp and removes it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/error.h"
#include "kiln/runtime/disk_cache.h"

using namespace kiln::rt;
using namespace std::string_literals;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/kiln-cache-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    REQUIRE(p != nullptr);
    path = p;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

// Redirects fd 2 to a file while alive; text() returns what was written.
struct StderrCapture {
  std::string file;
  int saved = -1;
  StderrCapture() {
    char tmpl[] = "/tmp/kiln-cache-stderr-XXXXXX";
    const int fd = ::mkstemp(tmpl);
    REQUIRE(fd >= 0);
    file = tmpl;
    std::fflush(stderr);
    saved = ::dup(2);
    ::dup2(fd, 2);
    ::close(fd);
  }
  std::string text() {
    std::fflush(stderr);
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    ::unlink(file.c_str());
  }
};

// Sets or unsets environment variables, restoring them afterwards.
struct EnvGuard {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string& name, const char* value) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      ::setenv(name.c_str(), value, 1);
    else
      ::unsetenv(name.c_str());
  }
  ~EnvGuard() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
};

std::vector<uint8_t> bytesOf(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

std::string keyOf(int i) { return hashHex("key " + std::to_string(i)); }

// A self-describing payload: 8 bytes of seed, then bytes generated from the
// seed (its length too), so a reader can check a payload it did not write.
std::vector<uint8_t> makePayload(uint64_t seed) {
  const size_t n = 8 + (seed * 2654435761u) % 20000;
  std::vector<uint8_t> p(n);
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(seed >> (8 * i));
  uint64_t x = seed | 1;
  for (size_t i = 8; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    p[i] = static_cast<uint8_t>(x >> 56);
  }
  return p;
}

bool payloadValid(const std::vector<uint8_t>& p, uint64_t* seedOut = nullptr) {
  if (p.size() < 8) return false;
  uint64_t seed = 0;
  for (int i = 0; i < 8; ++i) seed |= uint64_t{p[i]} << (8 * i);
  if (seedOut) *seedOut = seed;
  return p == makePayload(seed);
}

void setMtime(const std::string& path, int64_t unixSeconds) {
  const struct timespec t[2] = {{unixSeconds, 0}, {unixSeconds, 0}};
  REQUIRE(::utimensat(AT_FDCWD, path.c_str(), t, 0) == 0);
}

int64_t mtimeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mtim.tv_sec;
}

std::string entryFile(const TempDir& dir, const std::string& key) { return dir / (key + ".kcache"); }

size_t countOccurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("disk cache: round trip, overwrite, empty payload and miss", "[cache]") {
  TempDir dir;
  DiskCache cache(dir.path);
  CHECK(cache.directory() == dir.path);
  const std::string key = keyOf(1);
  std::vector<uint8_t> out{1, 2, 3};
  CHECK(cache.get(key, out) == CacheLookup::Miss);
  CHECK(out.empty());

  const auto payload = makePayload(42);
  cache.put(key, payload);
  CHECK(cache.get(key, out) == CacheLookup::Hit);
  CHECK(out == payload);

  cache.put(key, bytesOf("replaced"));
  CHECK(cache.get(key, out) == CacheLookup::Hit);
  CHECK(out == bytesOf("replaced"));

  const std::string emptyKey = keyOf(2);
  cache.put(emptyKey, {});
  out = {9};
  CHECK(cache.get(emptyKey, out) == CacheLookup::Hit);
  CHECK(out.empty());

  // 16- and 64-character keys are valid; others are errors.
  cache.put("0123456789abcdef", bytesOf("short key"));
  CHECK(cache.get("0123456789abcdef", out) == CacheLookup::Hit);
  const std::string longKey = keyOf(3) + keyOf(4);
  cache.put(longKey, bytesOf("long key"));
  CHECK(cache.get(longKey, out) == CacheLookup::Hit);
  CHECK_THROWS_AS(cache.get("0123456789abcde", out), kiln::Error);       // 15 chars
  CHECK_THROWS_AS(cache.get("0123456789ABCDEF", out), kiln::Error);      // uppercase
  CHECK_THROWS_AS(cache.put("../../etc/passwd00", bytesOf("x")), kiln::Error);
  CHECK(isCacheKey(key));
  CHECK_FALSE(isCacheKey(longKey + "0"));

  // No temporaries are left behind, and the file is private.
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().extension() == ".kcache");
  struct stat st;
  REQUIRE(::stat(entryFile(dir, key).c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
}

TEST_CASE("disk cache: corrupt entries are reported once, removed, then miss", "[cache]") {
  TempDir dir;
  DiskCache cache(dir.path);

  struct Corruption {
    const char* name;
    const char* why;  // part of the warning
    void (*apply)(const std::string& path, const std::string& otherPath);
  };
  const Corruption corruptions[] = {
      {"flipped payload byte", "checksum mismatch",
       [](const std::string& p, const std::string&) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(-10, std::ios::end);
         char c;
         f.read(&c, 1);
         f.seekp(-10, std::ios::end);
         c = static_cast<char>(c ^ 0x40);
         f.write(&c, 1);
       }},
      {"truncated payload", "truncated",
       [](const std::string& p, const std::string&) { fs::resize_file(p, fs::file_size(p) - 7); }},
      {"truncated header", "truncated",
       [](const std::string& p, const std::string&) { fs::resize_file(p, 20); }},
      {"empty file", "truncated", [](const std::string& p, const std::string&) { fs::resize_file(p, 0); }},
      {"wrong magic", "bad magic",
       [](const std::string& p, const std::string&) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.write("XILN", 4);
       }},
      {"wrong version", "format version 7, expected 1",
       [](const std::string& p, const std::string&) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(8);
         const char v[4] = {7, 0, 0, 0};
         f.write(v, 4);
       }},
      {"another key's file", "key mismatch",
       [](const std::string& p, const std::string& other) {
         fs::copy_file(other, p, fs::copy_options::overwrite_existing);
       }},
      {"trailing bytes", "trailing bytes",
       [](const std::string& p, const std::string&) {
         std::ofstream f(p, std::ios::app | std::ios::binary);
         f << "junk";
       }},
  };

  const std::string otherKey = keyOf(1000);
  cache.put(otherKey, makePayload(1000));
  int i = 0;
  for (const Corruption& c : corruptions) {
    INFO(c.name);
    const std::string key = keyOf(i++);
    cache.put(key, makePayload(7));
    c.apply(entryFile(dir, key), entryFile(dir, otherKey));
    std::vector<uint8_t> out;
    StderrCapture capture;
    CHECK(cache.get(key, out) == CacheLookup::Corrupt);
    CHECK(out.empty());
    CHECK_FALSE(fs::exists(entryFile(dir, key)));
    CHECK(cache.get(key, out) == CacheLookup::Miss);
    // Rebuilt, corrupted again: Corrupt again, but no second warning.
    cache.put(key, makePayload(8));
    c.apply(entryFile(dir, key), entryFile(dir, otherKey));
    CHECK(cache.get(key, out) == CacheLookup::Corrupt);
    CHECK(cache.get(key, out) == CacheLookup::Miss);
    cache.put(key, makePayload(9));
    CHECK(cache.get(key, out) == CacheLookup::Hit);
    CHECK(out == makePayload(9));

    const std::string text = capture.text();
    const std::string expected = "kiln: cache: entry " + key + " in " + dir.path + " is corrupt (";
    CHECK(countOccurrences(text, expected) == 1);
    CHECK(countOccurrences(text, "kiln: cache:") == 1);
    CHECK(text.find(c.why) != std::string::npos);
    CHECK(text.find("); rebuilding\n") != std::string::npos);
  }
  // The other entry was never disturbed.
  std::vector<uint8_t> out;
  CHECK(cache.get(otherKey, out) == CacheLookup::Hit);
  CHECK(out == makePayload(1000));
}

TEST_CASE("disk cache: readers never see a partial entry while writers race", "[cache]") {
  TempDir dir;
  DiskCache cache(dir.path);
  constexpr int kKeys = 3;
  constexpr int kWriters = 4;
  constexpr int kReaders = 3;
  constexpr int kWrites = 150;
  std::atomic<bool> done{false};
  std::atomic<int> hits{0}, misses{0}, corrupt{0}, invalid{0}, errors{0};

  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      try {
        for (int i = 0; i < kWrites; ++i) {
          const int k = (w + i) % kKeys;  // writers share keys
          // The seed encodes the key, so a reader can check it got its key's data.
          const uint64_t seed = (uint64_t(w * kWrites + i) << 8) | uint64_t(k);
          cache.put(keyOf(k), makePayload(seed));
        }
      } catch (...) {
        ++errors;
      }
    });
  }
  for (int r = 0; r < kReaders; ++r) {
    threads.emplace_back([&, r] {
      try {
        std::vector<uint8_t> out;
        int k = r;
        while (!done.load()) {
          k = (k + 1) % kKeys;
          switch (cache.get(keyOf(k), out)) {
            case CacheLookup::Hit: {
              ++hits;
              uint64_t seed = 0;
              if (!payloadValid(out, &seed) || (seed & 0xff) != uint64_t(k)) ++invalid;
              break;
            }
            case CacheLookup::Miss: ++misses; break;
            case CacheLookup::Corrupt: ++corrupt; break;
          }
        }
      } catch (...) {
        ++errors;
      }
    });
  }
  // A pruner/clearer racing with everyone: vanished files are misses.
  std::thread cleaner([&] {
    try {
      for (int i = 0; !done.load(); ++i) {
        if (i % 2)
          cache.clear();
        else
          cache.prune(30000);
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    } catch (...) {
      ++errors;
    }
  });
  for (int w = 0; w < kWriters; ++w) threads[w].join();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  done = true;
  for (size_t t = kWriters; t < threads.size(); ++t) threads[t].join();
  cleaner.join();

  INFO("hits " << hits << ", misses " << misses);
  CHECK(errors == 0);
  CHECK(corrupt == 0);
  CHECK(invalid == 0);
  CHECK(hits > 0);
  for (const auto& e : fs::directory_iterator(dir.path))
    CHECK(e.path().extension() == ".kcache");  // no temporaries left
}

TEST_CASE("disk cache: concurrent processes share one directory", "[cache]") {
  TempDir dir;
  constexpr int kChildren = 4;
  constexpr int kKeys = 3;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      // Child: no Catch macros; the exit status is the verdict.
      int status = 0;
      try {
        DiskCache cache(dir.path, 200000);  // small cap: puts prune concurrently too
        std::vector<uint8_t> out;
        for (int i = 0; i < 200; ++i) {
          const int k = (c + i) % kKeys;
          if (i % 2 == 0) {
            cache.put(keyOf(k), makePayload((uint64_t(c * 1000 + i) << 8) | uint64_t(k)));
          } else {
            const CacheLookup r = cache.get(keyOf(k), out);
            uint64_t seed = 0;
            if (r == CacheLookup::Corrupt) status = 2;
            if (r == CacheLookup::Hit && (!payloadValid(out, &seed) || (seed & 0xff) != uint64_t(k)))
              status = 3;
          }
          if (i % 50 == 49) cache.prune(40000);
        }
      } catch (...) {
        status = 4;
      }
      ::_exit(status);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  DiskCache cache(dir.path);
  std::vector<uint8_t> out;
  for (int k = 0; k < kKeys; ++k) {
    const CacheLookup r = cache.get(keyOf(k), out);
    CHECK(r != CacheLookup::Corrupt);
    if (r == CacheLookup::Hit) CHECK(payloadValid(out));
  }
}

TEST_CASE("disk cache: prune removes the least recently used first; a hit refreshes", "[cache]") {
  TempDir dir;
  DiskCache cache(dir.path);
  std::vector<std::string> keys;
  for (int i = 0; i < 4; ++i) {
    keys.push_back(keyOf(i));
    cache.put(keys.back(), std::vector<uint8_t>(1000, uint8_t(i)));
  }
  // Ages: key 2 oldest, then 0, 3, 1.
  setMtime(entryFile(dir, keys[2]), 1000000000);
  setMtime(entryFile(dir, keys[0]), 1000000100);
  setMtime(entryFile(dir, keys[3]), 1000000200);
  setMtime(entryFile(dir, keys[1]), 1000000300);

  const std::vector<DiskCacheEntry> listed = cache.list();
  REQUIRE(listed.size() == 4);
  CHECK(listed[0].key == keys[1]);
  CHECK(listed[1].key == keys[3]);
  CHECK(listed[2].key == keys[0]);
  CHECK(listed[3].key == keys[2]);
  CHECK(listed[3].lastUsedUnix == 1000000000);
  const uint64_t entryBytes = listed[0].bytes;
  CHECK(entryBytes == 32 + keys[0].size() + 1000);

  CHECK(cache.prune(4 * entryBytes) == 0);
  CHECK(cache.prune(3 * entryBytes) == 1);
  CHECK_FALSE(fs::exists(entryFile(dir, keys[2])));

  // A hit on the oldest remaining (key 0) makes it the most recent.
  std::vector<uint8_t> out;
  REQUIRE(cache.get(keys[0], out) == CacheLookup::Hit);
  CHECK(mtimeOf(entryFile(dir, keys[0])) >= static_cast<int64_t>(std::time(nullptr)) - 5);
  CHECK(cache.list().front().key == keys[0]);

  CHECK(cache.prune(2 * entryBytes + 10) == 1);  // removes key 3
  CHECK_FALSE(fs::exists(entryFile(dir, keys[3])));
  CHECK(fs::exists(entryFile(dir, keys[0])));
  CHECK(fs::exists(entryFile(dir, keys[1])));

  CHECK(cache.prune(0) == 2);
  CHECK(cache.stats().entries == 0);
}

TEST_CASE("disk cache: put keeps the total under the cap", "[cache]") {
  TempDir dir;
  const uint64_t entryBytes = 32 + 32 + 1000;
  DiskCache cache(dir.path, 5 * entryBytes);
  CHECK(cache.capBytes() == 5 * entryBytes);
  for (int i = 0; i < 5; ++i) {
    cache.put(keyOf(i), std::vector<uint8_t>(1000, uint8_t(i)));
    setMtime(entryFile(dir, keyOf(i)), 1000000000 + i);  // explicit order: 0 oldest
  }
  CHECK(cache.stats().entries == 5);
  CHECK(cache.stats().bytes == 5 * entryBytes);
  // The sixth goes over the cap: prune to 90% (4.5 entries), dropping 0 and 1.
  cache.put(keyOf(5), std::vector<uint8_t>(1000, 5));
  const DiskCacheStats s = cache.stats();
  CHECK(s.entries == 4);
  CHECK(s.bytes <= s.capBytes);
  CHECK_FALSE(fs::exists(entryFile(dir, keyOf(0))));
  CHECK_FALSE(fs::exists(entryFile(dir, keyOf(1))));
  for (int i = 2; i <= 5; ++i) CHECK(fs::exists(entryFile(dir, keyOf(i))));

  // An entry larger than the cap by itself is not stored.
  cache.put(keyOf(99), std::vector<uint8_t>(6 * entryBytes, 1));
  std::vector<uint8_t> out;
  CHECK(cache.get(keyOf(99), out) == CacheLookup::Miss);
  CHECK(cache.stats().entries == 4);
}

TEST_CASE("disk cache: clear, stats, list and stale temporaries", "[cache]") {
  TempDir dir;
  DiskCache cache(dir.path, 123456789);
  DiskCacheStats s = cache.stats();
  CHECK(s.directory == dir.path);
  CHECK(s.entries == 0);
  CHECK(s.bytes == 0);
  CHECK(s.capBytes == 123456789);
  CHECK(cache.list().empty());
  CHECK(cache.clear() == 0);

  uint64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    cache.put(keyOf(i), std::vector<uint8_t>(100 * (i + 1), 0));
    total += 32 + 32 + 100 * (i + 1);
  }
  s = cache.stats();
  CHECK(s.entries == 3);
  CHECK(s.bytes == total);
  const auto listed = cache.list();
  REQUIRE(listed.size() == 3);
  std::set<std::string> listedKeys;
  for (const auto& e : listed) {
    listedKeys.insert(e.key);
    CHECK(e.lastUsedUnix > 0);
  }
  CHECK(listedKeys == std::set<std::string>{keyOf(0), keyOf(1), keyOf(2)});

  // Foreign files are neither listed nor removed; a temporary older than an
  // hour is removed, a fresh one (a writer at work) is kept.
  std::ofstream(dir / "README") << "not an entry";
  std::ofstream(dir / "XYZ.kcache") << "not a key";
  std::ofstream(dir / ("." + keyOf(7) + ".1.0.tmp")) << "stale";
  std::ofstream(dir / ("." + keyOf(8) + ".1.1.tmp")) << "fresh";
  setMtime(dir / ("." + keyOf(7) + ".1.0.tmp"), std::time(nullptr) - 2 * 3600);
  CHECK(cache.stats().entries == 3);

  CHECK(cache.clear() == 3);
  CHECK(cache.stats().entries == 0);
  CHECK(fs::exists(dir / "README"));
  CHECK(fs::exists(dir / "XYZ.kcache"));
  CHECK_FALSE(fs::exists(dir / ("." + keyOf(7) + ".1.0.tmp")));
  CHECK(fs::exists(dir / ("." + keyOf(8) + ".1.1.tmp")));

  // prune removes stale temporaries too.
  setMtime(dir / ("." + keyOf(8) + ".1.1.tmp"), std::time(nullptr) - 2 * 3600);
  CHECK(cache.prune(1000) == 0);
  CHECK_FALSE(fs::exists(dir / ("." + keyOf(8) + ".1.1.tmp")));
}

TEST_CASE("disk cache: the directory comes from KILN_CACHE_DIR, XDG_CACHE_HOME, HOME", "[cache]") {
  TempDir base;
  EnvGuard env;
  env.set("KILN_CACHE_DIR", (base.path + "/explicit/").c_str());
  env.set("XDG_CACHE_HOME", (base.path + "/xdg").c_str());
  env.set("HOME", (base.path + "/home").c_str());
  env.set("KILN_CACHE_MAX_BYTES", nullptr);
  {
    DiskCache cache;
    CHECK(cache.directory() == base.path + "/explicit");
    CHECK(cache.capBytes() == DiskCache::kDefaultCapBytes);
    CHECK_FALSE(fs::exists(base.path + "/explicit"));  // created at first use
    cache.put(keyOf(1), bytesOf("x"));
    CHECK(fs::is_directory(base.path + "/explicit"));
  }
  env.set("KILN_CACHE_DIR", "");
  CHECK(DiskCache().directory() == base.path + "/xdg/kiln");
  env.set("KILN_CACHE_DIR", nullptr);
  CHECK(DiskCache().directory() == base.path + "/xdg/kiln");
  env.set("XDG_CACHE_HOME", nullptr);
  {
    DiskCache cache;
    CHECK(cache.directory() == base.path + "/home/.cache/kiln");
    CHECK(cache.stats().entries == 0);
    // Every directory it created is private to the user.
    for (const std::string& d : {base.path + "/home", base.path + "/home/.cache",
                                 base.path + "/home/.cache/kiln"}) {
      struct stat st;
      REQUIRE(::stat(d.c_str(), &st) == 0);
      CHECK((st.st_mode & 0777) == 0700);
    }
  }
  // An explicit directory wins over the environment.
  CHECK(DiskCache(base.path + "/given").directory() == base.path + "/given");

  // The cap from the environment.
  env.set("KILN_CACHE_MAX_BYTES", "64K");
  CHECK(DiskCache().capBytes() == 65536);
  env.set("KILN_CACHE_MAX_BYTES", "3000000");
  CHECK(DiskCache().capBytes() == 3000000);
  CHECK(DiskCache("", 77).capBytes() == 77);
  env.set("KILN_CACHE_MAX_BYTES", "lots");
  DiskCache bad;
  std::vector<uint8_t> out;
  CHECK_THROWS_WITH(bad.get(keyOf(1), out), Catch::Contains("KILN_CACHE_MAX_BYTES='lots'"));
}

TEST_CASE("disk cache: a directory that cannot be created or written is an error naming it",
          "[cache]") {
  TempDir base;
  std::ofstream(base / "file") << "a regular file";
  std::vector<uint8_t> out;

  const std::string underFile = base.path + "/file/cache";
  DiskCache a(underFile);
  CHECK(a.directory() == underFile);  // constructing never throws
  CHECK_THROWS_WITH(a.get(keyOf(1), out), Catch::Contains(underFile));
  CHECK_THROWS_AS(a.put(keyOf(1), bytesOf("x")), kiln::Error);
  CHECK_THROWS_AS(a.stats(), kiln::Error);

  DiskCache b(base / "file");  // exists, not a directory
  CHECK_THROWS_WITH(b.stats(), Catch::Contains(base / "file") && Catch::Contains("not a directory"));

  DiskCache c("/proc/kiln-cache-test/x");  // not creatable, even for root
  CHECK_THROWS_WITH(c.list(), Catch::Contains("/proc/kiln-cache-test/x"));

  if (::geteuid() != 0) {  // permissions do not stop root
    const std::string ro = base / "readonly";
    REQUIRE(::mkdir(ro.c_str(), 0500) == 0);
    DiskCache d(ro);
    CHECK_THROWS_WITH(d.put(keyOf(1), bytesOf("x")), Catch::Contains(ro));
    ::chmod(ro.c_str(), 0700);
  }
}

TEST_CASE("hashHex is stable and spreads", "[cache]") {
  // Known outputs of kiln-hash128 v1 (cross-checked against an independent
  // Python transcription of the algorithm in disk_cache.h): changing them
  // changes every cache key.
  CHECK(hashHex("") == "1fe02b52b10fc563f2b22c94044ed8b9");
  CHECK(hashHex("a") == "ab8a1c7507fc0c3a281090710cdb97ae");
  CHECK(hashHex("kiln") == "16c22ca483957a3906fb09daed5804a0");
  CHECK(hashHex("The quick brown fox jumps over the lazy dog") == "0394bfe1f6352802f610e2bf903f7657");

  std::set<std::string> seen;
  const std::vector<std::string> inputs = {"",         "a",         "b",        "ab",
                                           "ba",       "a\0"s,      "\0"s,      "\0\0"s,
                                           "01234567", "012345678", "12345678", "kiln",
                                           "kilN",     "kiln "};
  for (const std::string& s : inputs) {
    const std::string h = hashHex(s);
    CHECK(h.size() == 32);
    CHECK(isCacheKey(h));
    seen.insert(h);
  }
  CHECK(seen.size() == inputs.size());
  for (int i = 0; i < 2000; ++i) seen.insert(hashHex("graph " + std::to_string(i)));
  CHECK(seen.size() == inputs.size() + 2000);
  CHECK(hash64("kiln", 4) != hash64("kilm", 4));
}
