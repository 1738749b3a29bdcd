// The GEMM engine of a device: our register-blocked kernel (kernels_cl/gemm.cl) or CLBlast's
// SGEMM, chosen once per device by measurement (option gemm=auto, the default) or forced
// (gemm=own, gemm=clblast). The measurement times both engines on one 512^3 product, after a
// warm-up call that pays each engine's program build, and keeps the faster; the choice is cached
// in the program cache directory (gemm-engine-<key>.bin, key = platform, device, driver, OpenCL
// version), so only the first session on a device pays it. On PoCL CLBlast's first call
// compiles for ~18 s (instant once PoCL's own cache holds it) and then runs ~10 GFLOP/s, so our
// kernel wins there; on GPUs with a tuned CLBlast it is expected to win.
#include <algorithm>
#include <chrono>

#include "opencl.hpp"

#ifdef QUILT_HAVE_CLBLAST
#include <clblast_c.h>
#include <dlfcn.h>
#endif

namespace quilt::opencl {

bool clblast_available() {
#ifdef QUILT_HAVE_CLBLAST
  return true;
#else
  return false;
#endif
}

const char* engine_name(GemmEngine engine) {
  return engine == GemmEngine::kClBlast ? "clblast" : "own";
}

#ifdef QUILT_HAVE_CLBLAST
namespace {
// CLBlast is loaded at its first use (the GEMM engine measurement, or gemm=clblast), not with
// the plugin: linked, its library cost every process that loads the plugin ~3.2 MiB resident
// (relocations and static initialisers), a plan with nothing on the device included.
using SgemmFn = decltype(&CLBlastSgemm);
SgemmFn clblast_sgemm(std::string* error) {
  static std::string load_error;
  static const SgemmFn fn = [] {
    void* lib = ::dlopen(QUILT_CLBLAST_SONAME, RTLD_NOW | RTLD_LOCAL);
    void* sym = lib ? ::dlsym(lib, "CLBlastSgemm") : nullptr;
    if (!sym) {
      const char* e = ::dlerror();
      load_error = std::string("cannot load CLBlastSgemm from ") + QUILT_CLBLAST_SONAME + ": " +
                   (e ? e : "unknown error");
    }
    return reinterpret_cast<SgemmFn>(sym);
  }();
  if (!fn) *error = load_error;
  return fn;
}
}  // namespace
#endif

Status enqueue_clblast_gemm(Launch& launch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                            int64_t k, float alpha, cl_mem a, int64_t lda, cl_mem b, int64_t ldb,
                            float beta, cl_mem c) {
#ifdef QUILT_HAVE_CLBLAST
  std::string error;
  const SgemmFn sgemm = clblast_sgemm(&error);
  if (!sgemm) return fail(QUILT_STATUS_RUNTIME_ERROR, error);
  if (Status s = launch.wait_for_waits(); !s.ok()) return s;
  cl_command_queue queue = launch.device().queue.get();
  cl_event event = nullptr;
  const CLBlastStatusCode status =
      sgemm(CLBlastLayoutRowMajor, trans_a ? CLBlastTransposeYes : CLBlastTransposeNo,
            trans_b ? CLBlastTransposeYes : CLBlastTransposeNo, static_cast<size_t>(m),
            static_cast<size_t>(n), static_cast<size_t>(k), alpha, a, 0, static_cast<size_t>(lda),
            b, 0, static_cast<size_t>(ldb), beta, c, 0, static_cast<size_t>(n), &queue, &event);
  if (status != CLBlastSuccess)
    return fail(QUILT_STATUS_RUNTIME_ERROR, "CLBlastSgemm failed with status " +
                                                std::to_string(static_cast<int>(status)) + " (" +
                                                std::to_string(m) + " x " + std::to_string(k) +
                                                " x " + std::to_string(n) + ")");
  return launch.adopt(event, "CLBlastSgemm");
#else
  (void)launch, (void)trans_a, (void)trans_b, (void)m, (void)n, (void)k, (void)alpha, (void)a;
  (void)lda, (void)b, (void)ldb, (void)beta, (void)c;
  return fail(QUILT_STATUS_NOT_IMPLEMENTED, "this build of the OpenCL backend has no CLBlast");
#endif
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct Timing {
  double first_ms = 0, median_ms = 0;
};

// Runs one product `runs` + 1 times, each to completion: the first (program builds) apart.
Status time_engine(quilt_device_s& device, GemmEngine engine, int64_t size, cl_mem a, cl_mem b,
                   cl_mem c, Timing* out) {
  std::vector<double> times;
  for (int r = 0; r < 4; ++r) {
    const auto start = Clock::now();
    cl_event first = nullptr, last = nullptr;
    {
      Launch launch(device, {}, {}, {});
      Status s = engine == GemmEngine::kClBlast
                     ? enqueue_clblast_gemm(launch, false, false, size, size, size, 1.0f, a, size,
                                            b, size, 0.0f, c)
                     : enqueue_own_gemm(launch, size, size, size, a, b, c);
      if (s.ok()) s = launch.finish(&first, &last);
      if (!s.ok()) return s;
    }
    const cl_int err = clWaitForEvents(1, &last);
    clReleaseEvent(first);
    clReleaseEvent(last);
    if (err != CL_SUCCESS)
      return cl_fail(err, std::string("GEMM measurement (") + engine_name(engine) + ")");
    const double ms = ms_between(start, Clock::now());
    if (r == 0)
      out->first_ms = ms;
    else
      times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  out->median_ms = times[times.size() / 2];
  return {};
}

}  // namespace

}  // namespace quilt::opencl

using namespace quilt::opencl;

Status quilt_device_s::decide_gemm_engine() {
  if (gemm_engine.load() != GemmEngine::kUndecided) return {};
  std::lock_guard<std::mutex> lock(gemm_mutex);
  if (gemm_engine.load() != GemmEngine::kUndecided) return {};
  if (options.gemm == "own" || !clblast_available()) {
    gemm_engine = GemmEngine::kOwn;
    return {};
  }
  if (options.gemm == "clblast") {
    gemm_engine = GemmEngine::kClBlast;
    return {};
  }
  const std::string key_text = "quilt-gemm-engine-1\n" + entry->platform_name + "\n" + entry->name +
                               "\n" + entry->driver_version + "\n" + entry->cl_version;
  std::filesystem::path path;
  if (!options.cache_dir.empty())
    path = std::filesystem::path(options.cache_dir) /
           ("gemm-engine-" + hex(fnv1a(key_text, 0)) + ".bin");
  if (!path.empty()) {
    bool corrupt = false;
    const std::string cached = read_entry(path, &corrupt);
    if (cached == "own" || cached == "clblast") {
      gemm_engine = cached == "own" ? GemmEngine::kOwn : GemmEngine::kClBlast;
      log(QUILT_LOG_DEBUG,
          "GEMM engine for " + entry->name + ": " + cached + ", from " + path.string());
      return {};
    }
    if (corrupt || !cached.empty())
      log(QUILT_LOG_WARNING,
          "GEMM engine cache entry " + path.string() + " is unreadable; measuring again");
  }

  // Measure: one 512^3 product on each engine, on this device's queue.
  constexpr int64_t kSize = 512;
  const size_t bytes = kSize * kSize * sizeof(float);
  std::lock_guard<std::mutex> enqueue_lock(enqueue_mutex);
  Mem a, b, c;
  for (Mem* m : {&a, &b, &c})
    if (Status s = alloc_buffer(*this, bytes, m->out()); !s.ok())
      return {s.code, s.message + " (GEMM engine measurement)"};
  const float value = 0.5f;
  for (Mem* m : {&a, &b})
    if (cl_int err = clEnqueueFillBuffer(queue.get(), m->get(), &value, sizeof value, 0, bytes, 0,
                                         nullptr, nullptr);
        err != CL_SUCCESS)
      return cl_fail(err, "GEMM engine measurement: fill");
  Timing own, blast;
  if (Status s = time_engine(*this, GemmEngine::kOwn, kSize, a.get(), b.get(), c.get(), &own);
      !s.ok())
    return s;
  Status s = time_engine(*this, GemmEngine::kClBlast, kSize, a.get(), b.get(), c.get(), &blast);
  auto gflops = [](double ms) { return 2.0 * kSize * kSize * kSize / (ms * 1e6); };
  char text[256];
  if (!s.ok()) {
    gemm_engine = GemmEngine::kOwn;
    log(QUILT_LOG_WARNING, "GEMM engine for " + entry->name + ": CLBlast failed (" + s.message +
                               "); using our kernel");
  } else {
    gemm_engine = blast.median_ms < own.median_ms ? GemmEngine::kClBlast : GemmEngine::kOwn;
    std::snprintf(text, sizeof text,
                  "our kernel %.1f GFLOP/s, CLBlast %.1f GFLOP/s (512^3; first calls %.0f and "
                  "%.0f ms with their program builds)",
                  gflops(own.median_ms), gflops(blast.median_ms), own.first_ms, blast.first_ms);
    log(QUILT_LOG_INFO, "GEMM engine for " + entry->name +
                            " by measurement: " + engine_name(gemm_engine) + "; " + text);
  }
  if (!path.empty()) write_entry(path, engine_name(gemm_engine));
  return {};
}
