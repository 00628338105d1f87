// PTX → cubin: ptxas as a child process (default) or nvJitLink in process,
// and the resource report parsed from their info logs. No LLVM/MLIR here.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "kiln/compiler/backend.h"
#include "toolkit_lib.h"

extern char** environ;

namespace kiln::compiler {

namespace {

using Clock = std::chrono::steady_clock;
double msSince(Clock::time_point t0, Clock::time_point t1 = Clock::now()) {
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

bool isExecutable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string dirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// Directory of an already loaded shared library (nullopt if not loaded).
std::optional<std::string> loadedLibraryDir(const char* soname) {
  void* h = ::dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return std::nullopt;
  std::optional<std::string> dir;
  struct link_map* lm = nullptr;
  if (::dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
    dir = dirName(lm->l_name);
  ::dlclose(h);
  return dir;
}

void checkArch(std::string_view arch) {
  static const std::regex re(R"(sm_[0-9]{2,3}[af]?)");
  if (!std::regex_match(arch.begin(), arch.end(), re))
    throw Error(fmt::format("ptxToCubin: bad arch '{}' (expected e.g. sm_90 or sm_90a)", arch));
}
bool isArchSpecific(std::string_view arch) {
  return !arch.empty() && (arch.back() == 'a' || arch.back() == 'f');
}

// ------------------------------------------------------------ temp files

std::string tempDir() {
  const char* t = std::getenv("TMPDIR");
  return (t && *t) ? t : "/tmp";
}

// A unique file, removed when this goes out of scope.
class TempFile {
 public:
  explicit TempFile(const std::string& suffix) {
    std::string tmpl = tempDir() + "/kiln-XXXXXX" + suffix;
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    int fd = ::mkstemps(buf.data(), static_cast<int>(suffix.size()));
    if (fd < 0)
      throw Error(fmt::format("ptxToCubin: cannot create a temporary file in {}: {}", tempDir(),
                              std::strerror(errno)));
    ::close(fd);
    path_ = buf.data();
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void writeFile(const std::string& path, std::string_view data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw Error(fmt::format("ptxToCubin: cannot write {}", path));
}

std::vector<char> readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("ptxToCubin: cannot read {}", path));
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

// ------------------------------------------------------------ subprocess

struct ProcessResult {
  int exitCode = -1;  // valid if !signaled
  int signal = 0;     // valid if signaled
  bool signaled = false;
  bool timedOut = false;
  std::string output;  // stdout and stderr, interleaved
};

// Runs argv[0] (a path) with stdin from /dev/null and stdout+stderr captured.
// posix_spawn: no fork of a possibly large, multi-threaded process.
ProcessResult runProcess(const std::vector<std::string>& argv, int timeoutSeconds) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0)
    throw Error(fmt::format("ptxToCubin: pipe failed: {}", std::strerror(errno)));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 1);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], 2);

  // The child starts with default signal dispositions and an empty mask,
  // whatever the application did to its own.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, cargv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    throw Error(fmt::format("ptxToCubin: cannot start {}: {}", argv[0], std::strerror(rc)));
  }

  ProcessResult r;
  auto deadline = Clock::now() + std::chrono::seconds(timeoutSeconds);
  char buf[4096];
  for (;;) {
    int waitMs = -1;
    if (timeoutSeconds > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        r.timedOut = true;
        break;
      }
      waitMs = static_cast<int>(left);
    }
    struct pollfd p = {pipefd[0], POLLIN, 0};
    int pr = ::poll(&p, 1, waitMs);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pr == 0) continue;  // deadline checked above
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (n == 0) break;  // EOF: the child closed its output (exited)
    r.output.append(buf, static_cast<size_t>(n));
  }
  ::close(pipefd[0]);
  if (r.timedOut) ::kill(pid, SIGKILL);

  int status = 0;
  pid_t w;
  do {
    w = ::waitpid(pid, &status, 0);
  } while (w < 0 && errno == EINTR);
  if (w < 0) {
    // ECHILD: the application ignores SIGCHLD, so the status is gone. The
    // output file tells whether ptxas succeeded.
    r.exitCode = r.timedOut ? -1 : 0;
    return r;
  }
  if (WIFSIGNALED(status)) {
    r.signaled = true;
    r.signal = WTERMSIG(status);
  } else if (WIFEXITED(status)) {
    r.exitCode = WEXITSTATUS(status);
  }
  return r;
}

// -------------------------------------------------------------- nvJitLink

// The subset of nvJitLink.h used here (CUDA 12/13 C API, versioned symbols).
using nvJitLinkHandle = void*;
using nvJitLinkResult = int;
constexpr int kNvJitLinkInputPtx = 2;  // NVJITLINK_INPUT_PTX

struct NvJitLinkApi {
  void* lib = nullptr;
  std::string path;
  nvJitLinkResult (*create)(nvJitLinkHandle*, uint32_t, const char**) = nullptr;
  nvJitLinkResult (*destroy)(nvJitLinkHandle*) = nullptr;
  nvJitLinkResult (*addData)(nvJitLinkHandle, int, const void*, size_t, const char*) = nullptr;
  nvJitLinkResult (*complete)(nvJitLinkHandle) = nullptr;
  nvJitLinkResult (*cubinSize)(nvJitLinkHandle, size_t*) = nullptr;
  nvJitLinkResult (*cubin)(nvJitLinkHandle, void*) = nullptr;
  nvJitLinkResult (*errorLogSize)(nvJitLinkHandle, size_t*) = nullptr;
  nvJitLinkResult (*errorLog)(nvJitLinkHandle, char*) = nullptr;
  nvJitLinkResult (*infoLogSize)(nvJitLinkHandle, size_t*) = nullptr;
  nvJitLinkResult (*infoLog)(nvJitLinkHandle, char*) = nullptr;
};

template <typename Fn>
bool bind(void* lib, Fn& fn, const char* name) {
  // Prefer the versioned name the CUDA 13 header maps to, then the plain one.
  std::string versioned = fmt::format("__{}_13_0", name);
  void* sym = ::dlsym(lib, versioned.c_str());
  if (!sym) sym = ::dlsym(lib, name);
  fn = reinterpret_cast<Fn>(sym);
  return sym != nullptr;
}

// Loads libnvJitLink once per process (never unloaded). nullptr if missing;
// `why` says what was tried.
const NvJitLinkApi* nvJitLinkApi(const std::string& cudaHome, std::string* why) {
  return loadToolkitApi<NvJitLinkApi>(cudaHome, "libnvJitLink.so.13", [](void* h, NvJitLinkApi& a) {
    return bind(h, a.create, "nvJitLinkCreate") && bind(h, a.destroy, "nvJitLinkDestroy") &&
           bind(h, a.addData, "nvJitLinkAddData") && bind(h, a.complete, "nvJitLinkComplete") &&
           bind(h, a.cubinSize, "nvJitLinkGetLinkedCubinSize") && bind(h, a.cubin, "nvJitLinkGetLinkedCubin") &&
           bind(h, a.errorLogSize, "nvJitLinkGetErrorLogSize") && bind(h, a.errorLog, "nvJitLinkGetErrorLog") &&
           bind(h, a.infoLogSize, "nvJitLinkGetInfoLogSize") && bind(h, a.infoLog, "nvJitLinkGetInfoLog");
  }, why);
}

std::string nvJitLinkLog(const NvJitLinkApi& api, nvJitLinkHandle h, bool info) {
  size_t size = 0;
  if ((info ? api.infoLogSize(h, &size) : api.errorLogSize(h, &size)) != 0 || size == 0) return {};
  std::string log(size, '\0');
  if ((info ? api.infoLog(h, log.data()) : api.errorLog(h, log.data())) != 0) return {};
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

CubinResult viaNvJitLink(std::string_view ptx, std::string_view arch, const CubinOptions& o) {
  std::string why;
  const NvJitLinkApi* api = nvJitLinkApi(o.cudaHome, &why);
  if (!api) throw Error("ptxToCubin (nvJitLink): " + why);

  auto t0 = Clock::now();
  std::vector<std::string> opts = {fmt::format("-arch={}", arch), "-verbose"};
  if (!o.fastCompile.empty()) opts.push_back("-Ofc=" + o.fastCompile);  // excludes -O
  else opts.push_back(fmt::format("-O{}", o.optLevel));
  for (const auto& a : o.extraArgs) opts.push_back(a);
  std::vector<const char*> copts;
  for (const auto& s : opts) copts.push_back(s.c_str());

  nvJitLinkHandle h = nullptr;
  int rc = api->create(&h, static_cast<uint32_t>(copts.size()), copts.data());
  if (rc != 0 || !h)
    throw Error(fmt::format("ptxToCubin (nvJitLink): nvJitLinkCreate failed (error {}) with options {}",
                            rc, fmt::join(opts, " ")));
  struct Destroy {
    const NvJitLinkApi* api;
    nvJitLinkHandle* h;
    ~Destroy() { api->destroy(h); }
  } destroy{api, &h};

  // nvJitLink wants the PTX NUL-terminated.
  std::string text(ptx);
  rc = api->addData(h, kNvJitLinkInputPtx, text.c_str(), text.size() + 1, "kiln.ptx");
  if (rc == 0) rc = api->complete(h);
  std::string info = nvJitLinkLog(*api, h, true);
  if (rc != 0) {
    std::string err = nvJitLinkLog(*api, h, false);
    throw Error(fmt::format("ptxToCubin (nvJitLink, {}): failed with error {}:\n{}{}", arch, rc, err,
                            info.empty() ? "" : "\n" + info));
  }
  size_t size = 0;
  if (api->cubinSize(h, &size) != 0 || size == 0)
    throw Error("ptxToCubin (nvJitLink): no cubin produced");
  CubinResult r;
  r.cubin.resize(size);
  if (api->cubin(h, r.cubin.data()) != 0) throw Error("ptxToCubin (nvJitLink): cannot read the cubin");
  r.log = std::move(info);
  r.route = CubinRoute::NvJitLink;
  r.stages.push_back({"nvjitlink", msSince(t0)});
  return r;
}

// ------------------------------------------------------------------ ptxas

CubinResult viaPtxas(const std::string& ptxas, std::string_view ptx, std::string_view arch,
                     const CubinOptions& o) {
  CubinResult r;
  r.route = CubinRoute::Ptxas;
  auto t = Clock::now();
  auto stage = [&](const char* name) {
    auto now = Clock::now();
    r.stages.push_back({name, msSince(t, now)});
    t = now;
  };

  TempFile in(".ptx");
  TempFile out(".cubin");
  writeFile(in.path(), ptx);
  stage("write-ptx");

  std::vector<std::string> argv = {ptxas, fmt::format("-arch={}", arch), "-v"};
  if (!o.fastCompile.empty()) argv.push_back("--Ofast-compile=" + o.fastCompile);  // excludes -O
  else argv.push_back(fmt::format("-O{}", o.optLevel));
  for (const auto& a : o.extraArgs) argv.push_back(a);
  argv.insert(argv.end(), {in.path(), "-o", out.path()});
  ProcessResult p = runProcess(argv, o.timeoutSeconds);
  stage("ptxas");

  if (p.timedOut)
    throw Error(fmt::format("ptxToCubin: {} did not finish within {} s (killed); output:\n{}", ptxas,
                            o.timeoutSeconds, p.output));
  if (p.signaled)
    throw Error(fmt::format("ptxToCubin: {} crashed ({}) compiling for {}; output:\n{}", ptxas,
                            strsignal(p.signal), arch, p.output));
  if (p.exitCode != 0)
    throw Error(fmt::format("ptxToCubin: {} failed (exit code {}) for {}:\n{}", ptxas, p.exitCode, arch,
                            p.output));
  r.cubin = readFile(out.path());
  if (r.cubin.empty())
    throw Error(fmt::format("ptxToCubin: {} produced no cubin; output:\n{}", ptxas, p.output));
  r.log = std::move(p.output);
  stage("read-cubin");
  return r;
}

int toInt(const std::string& s) {
  try {
    return std::stoi(s);
  } catch (...) {
    return 0;
  }
}

}  // namespace

std::string_view routeName(CubinRoute route) {
  switch (route) {
    case CubinRoute::Default:
      return "default";
    case CubinRoute::Ptxas:
      return "ptxas";
    case CubinRoute::NvJitLink:
      return "nvjitlink";
  }
  return "?";
}

const ResourceReport* CubinResult::kernel(std::string_view name) const {
  for (const auto& k : kernels)
    if (k.kernel == name) return &k;
  return nullptr;
}

std::optional<std::string> findPtxas(const std::string& cudaHome) {
  std::vector<std::string> candidates;
  if (!cudaHome.empty()) candidates.push_back(cudaHome + "/bin/ptxas");
  if (const char* env = std::getenv("CUDA_HOME"); env && *env)
    candidates.push_back(std::string(env) + "/bin/ptxas");
  // Next to an NVRTC the process already uses (<root>/lib64/libnvrtc.so.13).
  if (auto dir = loadedLibraryDir("libnvrtc.so.13")) {
    candidates.push_back(*dir + "/../bin/ptxas");
    candidates.push_back(*dir + "/ptxas");
  }
  if (const char* path = std::getenv("PATH")) {
    std::stringstream ss(path);
    std::string d;
    while (std::getline(ss, d, ':'))
      if (!d.empty()) candidates.push_back(d + "/ptxas");
  }
  candidates.push_back("/usr/local/cuda/bin/ptxas");
  for (const auto& c : candidates)
    if (isExecutable(c)) return c;
  return std::nullopt;
}

bool nvJitLinkAvailable(const std::string& cudaHome) {
  return nvJitLinkApi(cudaHome, nullptr) != nullptr;
}

std::vector<ResourceReport> parseResourceReport(std::string_view logView) {
  // ptxas -v:
  //   ptxas info    : Compiling entry function 'k' for 'sm_90'
  //   ptxas info    : Function properties for k
  //       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  //   ptxas info    : Used 8 registers, used 0 barriers, 1024 bytes smem, ...
  // nvJitLink -verbose adds its own summary per function:
  //   info    : Function properties for 'k':
  //   info    : used 8 registers, used 0 barriers, 0 stack, 0 bytes smem, ...
  // Device (non-entry) functions get "Function properties" too; only entry
  // functions are reported from ptxas's lines. nvJitLink's summary names
  // a function on its own: at times it comes without any ptxas lines (seen
  // on the H200 machine for kernels compiled before in the same process,
  // session 18), and then the summary is the report. It gives a stack
  // size and local memory but not spills, and spills live in the stack:
  // for one function ptxas's lines read "40 bytes stack frame, 44 bytes
  // spill stores" where the summary read "40 stack, 0 bytes lmem" (session
  // 19). kiln's kernels keep no local arrays, so a summary's stack (and
  // any lmem beyond it) counts as spill stores: a spilling kernel is still
  // seen to spill, and the heuristic's rebuilds after a spill happen on
  // that machine too.
  static const std::regex entryRe(R"(Compiling entry function '([^']+)')");
  static const std::regex summaryRe(R"(^info\s*: Function properties for '([^']+)':)");
  static const std::regex propsRe(R"(Function properties for '?([A-Za-z0-9_$.]+)'?:?)");
  static const std::regex lmemRe(R"((\d+) bytes lmem)");
  static const std::regex regsRe(R"([Uu]sed (\d+) registers)");
  static const std::regex barriersRe(R"(used (\d+) barriers)");
  static const std::regex smemRe(R"((\d+) bytes smem)");
  static const std::regex frameRe(R"((\d+) bytes stack frame)");
  static const std::regex stackRe(R"(, (\d+) stack,)");
  static const std::regex spillStRe(R"((\d+) bytes spill stores)");
  static const std::regex spillLdRe(R"((\d+) bytes spill loads)");

  std::vector<ResourceReport> reports;
  std::vector<std::string> entries;
  auto find = [&](const std::string& name) -> ResourceReport* {
    for (auto& r : reports)
      if (r.kernel == name) return &r;
    return nullptr;
  };
  auto isEntry = [&](const std::string& name) {
    return std::find(entries.begin(), entries.end(), name) != entries.end();
  };

  std::string log(logView);
  std::istringstream in(log);
  std::string line;
  ResourceReport* current = nullptr;
  std::vector<std::string> summaryOnly;  // reports made from nvJitLink's summary alone
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, summaryRe)) {
      std::string name = m[1].str();
      current = find(name);
      if (!current) {
        reports.push_back(ResourceReport{name});
        current = &reports.back();
        summaryOnly.push_back(name);
      }
      continue;
    }
    if (std::regex_search(line, m, entryRe)) {
      std::string name = m[1].str();
      if (!isEntry(name)) entries.push_back(name);
      current = find(name);
      if (!current) {
        reports.push_back(ResourceReport{name});
        current = &reports.back();
      }
      continue;
    }
    if (std::regex_search(line, m, propsRe)) {
      std::string name = m[1].str();
      current = isEntry(name) ? find(name) : nullptr;
      continue;
    }
    if (!current) continue;
    if (std::regex_search(line, m, regsRe)) current->registers = toInt(m[1].str());
    if (std::regex_search(line, m, barriersRe)) current->barriers = toInt(m[1].str());
    if (std::regex_search(line, m, smemRe)) current->sharedBytes = toInt(m[1].str());
    if (std::regex_search(line, m, frameRe)) current->stackBytes = toInt(m[1].str());
    if (std::regex_search(line, m, stackRe)) current->stackBytes = toInt(m[1].str());
    if (std::regex_search(line, m, spillStRe)) current->spillStoreBytes = toInt(m[1].str());
    if (std::regex_search(line, m, spillLdRe)) current->spillLoadBytes = toInt(m[1].str());
    if (std::regex_search(line, m, lmemRe) &&
        std::find(summaryOnly.begin(), summaryOnly.end(), current->kernel) != summaryOnly.end())
      current->spillStoreBytes = std::max(current->stackBytes, toInt(m[1].str()));  // stack, and lmem beyond it
  }
  return reports;
}

CubinResult ptxToCubin(std::string_view ptx, std::string_view arch, const CubinOptions& options) {
  auto t0 = Clock::now();
  checkArch(arch);
  if (options.optLevel < 0 || options.optLevel > 4)
    throw Error(fmt::format("ptxToCubin: optLevel {} is not in 0..4", options.optLevel));
  if (ptx.empty()) throw Error("ptxToCubin: empty PTX");

  CubinResult r;
  switch (options.route) {
    case CubinRoute::Ptxas: {
      auto ptxas = findPtxas(options.cudaHome);
      if (!ptxas)
        throw Error(
            "ptxToCubin: ptxas not found (looked in $CUDA_HOME/bin, next to libnvrtc, on PATH and in "
            "/usr/local/cuda/bin); install the CUDA toolkit or set CUDA_HOME");
      r = viaPtxas(*ptxas, ptx, arch, options);
      break;
    }
    case CubinRoute::NvJitLink:
      r = viaNvJitLink(ptx, arch, options);
      break;
    case CubinRoute::Default: {
      if (auto ptxas = findPtxas(options.cudaHome)) {
        r = viaPtxas(*ptxas, ptx, arch, options);
        break;
      }
      if (isArchSpecific(arch))
        throw Error(fmt::format(
            "ptxToCubin: ptxas not found, and nvJitLink is not used for {} (it crashes inside "
            "the library on sm_90a features such as wgmma); install the CUDA toolkit or set CUDA_HOME",
            arch));
      std::string why;
      if (!nvJitLinkApi(options.cudaHome, &why))
        throw Error(
            "ptxToCubin: neither ptxas (looked in $CUDA_HOME/bin, next to libnvrtc, on PATH and in "
            "/usr/local/cuda/bin) nor nvJitLink is available; install the CUDA toolkit or set "
            "CUDA_HOME.\n" +
            why);
      r = viaNvJitLink(ptx, arch, options);
      break;
    }
  }
  r.kernels = parseResourceReport(r.log);
  r.totalMs = msSince(t0);
  return r;
}

}  // namespace kiln::compiler
