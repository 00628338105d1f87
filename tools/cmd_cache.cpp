// `kiln cache`: look at and manage the disk cache of compiled kernels.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include "cli.h"
#include "kiln/runtime/disk_cache.h"

namespace kiln::cli {

const char* kCacheHelp =
    "usage: kiln cache stats|list|clear|prune [BYTES]\n"
    "\n"
    "The disk cache of compiled kernels ($KILN_CACHE_DIR, else\n"
    "$XDG_CACHE_HOME/kiln, else ~/.cache/kiln; KILN_CACHE_MAX_BYTES caps it,\n"
    "default 2 GiB, least recently used entries go first):\n"
    "  stats          directory, entries, bytes and the cap\n"
    "  list           every entry, most recently used first\n"
    "  clear          remove every entry\n"
    "  prune [BYTES]  remove least recently used entries until the cache holds\n"
    "                 at most BYTES (default: 90% of the cap)\n"
    "\n"
    "KILN_CACHE=0 turns the cache off for a process.\n";

int runCache(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kCacheHelp, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string what = argv[1];
  rt::DiskCache& cache = rt::DiskCache::global();
  if (what == "stats" && argc == 2) {
    rt::DiskCacheStats s = cache.stats();
    std::printf("directory %s\nentries   %llu\nbytes     %llu\ncap       %llu\n", s.directory.c_str(),
                static_cast<unsigned long long>(s.entries), static_cast<unsigned long long>(s.bytes),
                static_cast<unsigned long long>(s.capBytes));
    return 0;
  }
  if (what == "list" && argc == 2) {
    for (const rt::DiskCacheEntry& e : cache.list()) {
      std::time_t t = static_cast<std::time_t>(e.lastUsedUnix);
      char when[32] = "?";
      if (std::tm* tm = std::gmtime(&t)) std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", tm);
      std::printf("%s  %10llu  %s\n", e.key.c_str(), static_cast<unsigned long long>(e.bytes), when);
    }
    return 0;
  }
  if (what == "clear" && argc == 2) {
    std::printf("removed %llu entries from %s\n", static_cast<unsigned long long>(cache.clear()),
                cache.directory().c_str());
    return 0;
  }
  if (what == "prune" && argc <= 3) {
    uint64_t target = cache.stats().capBytes / 10 * 9;
    if (argc == 3) {
      char* end = nullptr;
      unsigned long long v = std::strtoull(argv[2], &end, 10);
      if (!end || *end) throw Error(std::string("kiln cache prune: '") + argv[2] + "' is not a byte count");
      target = v;
    }
    std::printf("removed %llu entries\n", static_cast<unsigned long long>(cache.prune(target)));
    return 0;
  }
  std::fputs(kCacheHelp, stderr);
  return 2;
}

}  // namespace kiln::cli
