#include "backends/cpu/blas.hpp"

#include <dlfcn.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "quilt/quilt.hpp"

namespace quilt::cpu {
namespace {

// The CBLAS enums, as in cblas.h.
enum { kRowMajor = 101, kNoTrans = 111, kTrans = 112 };

using SgemmFn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
using CoreNameFn = char* (*)();
using SetThreadsFn = void (*)(int);

struct Blas {
  SgemmFn sgemm = nullptr;
  CoreNameFn core_name = nullptr;
  SetThreadsFn set_threads = nullptr;
  BlasCoreChoice choice;
};

// The best core OpenBLAS 0.3.21 has for this CPU's instruction set ("" when none fits).
std::string best_core_type() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    // What OpenBLAS itself picks on CPUs it recognises: Cooperlake adds bf16 kernels to SkylakeX.
    return __builtin_cpu_supports("avx512bf16") ? "Cooperlake" : "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

BlasCoreChoice choose_core() {
  BlasCoreChoice c;
  c.inherited = env_or_empty("OPENBLAS_CORETYPE");
  if (std::string forced = env_or_empty("QUILT_OPENBLAS_CORETYPE"); !forced.empty()) {
    c.core = forced;
    c.source = "QUILT_OPENBLAS_CORETYPE";
    return c;
  }
  // An inherited OPENBLAS_CORETYPE is usually set machine-wide for some other program; one that
  // names a smaller instruction set than this CPU has halves GEMM speed or worse, so Quilt
  // replaces it and says so. QUILT_OPENBLAS_CORETYPE is the way to force a core for Quilt.
  c.core = best_core_type();
  c.source = "picked by Quilt from the CPU's features";
  if (c.core.empty()) {
    c.core = c.inherited;
    c.source = c.inherited.empty() ? "detected by OpenBLAS" : "OPENBLAS_CORETYPE";
  }
  return c;
}

// The thread count asked for (0: OpenBLAS's default), applied when OpenBLAS loads, and
// whether it has. OpenBLAS loads when a kernel first calls it, not when a device opens: the
// load (OpenBLAS and its Fortran runtime) was 1.3-1.9 ms of MNIST's 2.5 ms session creation,
// and on CPUs with AVX-512 most models never call it.
std::atomic<int> requested_threads{0};
std::atomic<bool> loaded{false};

const Blas& blas() {
  static const Blas b = [] {
    Blas out;
    out.choice = choose_core();
    // OpenBLAS reads OPENBLAS_CORETYPE once, while it loads; the inherited value is put back
    // afterwards so that child processes see the environment they were given.
    if (!out.choice.core.empty()) setenv("OPENBLAS_CORETYPE", out.choice.core.c_str(), 1);
    void* lib = nullptr;
    for (const char* name : {"libopenblas.so.0", "libopenblas.so"}) {
      lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (lib) break;
    }
    if (out.choice.inherited.empty())
      unsetenv("OPENBLAS_CORETYPE");
    else
      setenv("OPENBLAS_CORETYPE", out.choice.inherited.c_str(), 1);
    if (!lib) {
      // Mapping its segments fails under an address-space cap: out of memory, not missing.
      const std::string why = dlerror();
      if (why.find("failed to map") != std::string::npos ||
          why.find("annot allocate memory") != std::string::npos)
        throw Error(ErrorCode::OutOfMemory,
                    "[cpu backend] cannot load OpenBLAS (libopenblas.so.0): out of address "
                    "space: " +
                        why);
      throw Error(ErrorCode::Runtime, "[cpu backend] cannot load OpenBLAS (libopenblas.so.0): " +
                                          why + "; install libopenblas0");
    }
    out.sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "cblas_sgemm"));
    out.core_name = reinterpret_cast<CoreNameFn>(dlsym(lib, "openblas_get_corename"));
    out.set_threads = reinterpret_cast<SetThreadsFn>(dlsym(lib, "openblas_set_num_threads"));
    if (!out.sgemm)
      throw Error(ErrorCode::Runtime, "[cpu backend] OpenBLAS has no cblas_sgemm symbol");
    loaded = true;  // before the request is read: a request made from now on applies itself
    if (out.set_threads && requested_threads > 0) out.set_threads(requested_threads);
    return out;
  }();
  return b;
}

// OpenBLAS 0.3.21 allocates a work buffer of 128 MiB for each thread on that thread's first
// call (its own workers' too) and, when the allocation fails, retries it without end
// (memory.c's blas_memory_alloc): under an address-space cap (RLIMIT_AS) the call never
// returns. So a thread's first call, while a cap is set, goes ahead only if the cap leaves room
// for the buffers, and is an OutOfMemory error otherwise.
constexpr uint64_t kBufferBytes = uint64_t{130} << 20;  // 128 MiB and OpenBLAS's guard pages
std::atomic<bool> any_call_done{false};
thread_local bool thread_call_done = false;

uint64_t mapped_bytes() {  // VmSize: what the address-space cap counts
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kib = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmSize: %" SCNu64, &kib) == 1) break;
  std::fclose(f);
  return kib << 10;
}

void check_buffer_room() {
  if (thread_call_done) return;
  rlimit cap{};
  if (getrlimit(RLIMIT_AS, &cap) != 0 || cap.rlim_cur == RLIM_INFINITY) return;
  // OpenBLAS's threads: those asked for, else one per core (its default).
  const int asked = requested_threads.load();
  const int threads =
      asked > 0 ? asked : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const uint64_t need = kBufferBytes * (any_call_done ? 1 : 1 + static_cast<uint64_t>(threads));
  const uint64_t used = mapped_bytes(), limit = cap.rlim_cur;
  if (used + need > limit)
    throw Error(ErrorCode::OutOfMemory,
                "[cpu backend] OpenBLAS needs " + std::to_string(need >> 20) +
                    " MiB of address space for its work buffers and the address-space limit "
                    "(RLIMIT_AS) leaves " +
                    std::to_string(used < limit ? (limit - used) >> 20 : 0) + " MiB");
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS leaves C untouched when k == 0 only if beta == 1; be explicit
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  const Blas& lib = blas();
  check_buffer_room();
  lib.sgemm(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans,
            static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
            static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
  thread_call_done = true;
  any_call_done = true;
}

std::string blas_core_name() {
  const Blas& b = blas();
  return b.core_name ? b.core_name() : "unknown";
}

const BlasCoreChoice& blas_core_choice() {
  return blas().choice;
}

std::string blas_core_description() {
  const BlasCoreChoice& c = blas_core_choice();
  const std::string used = blas_core_name();
  std::string out = "OpenBLAS, core " + used;
  if (c.core.empty()) return out + " (detected by OpenBLAS)";
  // OpenBLAS ignores a core name it does not know and detects the CPU itself: say so rather
  // than credit the setting (names compare case-insensitively, as OpenBLAS reads them).
  auto lower = [](std::string v) {
    for (char& ch : v) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return v;
  };
  out += " (" + c.source;
  if (lower(used) != lower(c.core))
    out += " asked for '" + c.core + "', which this OpenBLAS does not know";
  if (!c.inherited.empty() && c.inherited != c.core && c.source != "OPENBLAS_CORETYPE")
    out += "; OPENBLAS_CORETYPE=" + c.inherited + " from the environment not used";
  return out + ")";
}

void blas_set_threads(int threads) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  requested_threads = threads;
  if (loaded && blas().set_threads) blas().set_threads(threads);
}

bool blas_loaded() {
  return loaded;
}

}  // namespace quilt::cpu
