// GEMM benchmark of the OpenCL plugin (not a test): loads libquilt_opencl.so with a minimal
// host, compiles a one-node MatMul patch per shape, and prints the median GFLOP/s of the device
// time (profiling events) over a few runs, with OpenBLAS's cblas_sgemm beside it. Also prints
// device_open + compile time, i.e. the program build: cold (empty cache dir) and warm.
//
//   opencl_bench_gemm [DEVICE_INDEX [CACHE_DIR|none [keep]]]
// The cache dir (default: a temporary one) is emptied first unless "keep"; "none" turns the
// program cache off. Point POCL_CACHE_DIR at a scratch dir to see PoCL's own cache at work.
#include <dlfcn.h>
#include <quilt/backend.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

struct quilt_status_s {
  quilt_status_code_t code;
  std::string message;
};

namespace {

quilt_status_t status_create(quilt_status_code_t code, const char* message) {
  return new quilt_status_s{code, message};
}
void log_message(quilt_log_level_t level, const char* message) {
  if (level >= QUILT_LOG_WARNING) std::fprintf(stderr, "%s\n", message);
}
uint64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
const quilt_host_api_t kHost = {sizeof(quilt_host_api_t), QUILT_BACKEND_ABI_VERSION, status_create,
                                log_message, now_ns};

void check(quilt_status_t s, const char* what) {
  if (!s) return;
  std::fprintf(stderr, "%s: %s\n", what, s->message.c_str());
  std::exit(1);
}

double ms(uint64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

struct Bench {
  const quilt_backend_t* api;
  quilt_device_t device;
};

// Compiles [m,k] x [k,n] and returns the median device GFLOP/s of `runs` executions. With
// weights, b is a constant of the patch (packed once at compile), else an input (packed at
// each run, which the device time includes).
// The graph of one MatMul: values a, b, c; `num_inputs` of them (a, or a and b) given at run.
quilt_graph_t matmul_graph(quilt_value_t* values, quilt_node_t* node, const int32_t* inputs,
                           size_t num_inputs, const int32_t* output) {
  quilt_graph_t graph{};  // the optional fields at the end (constant_done, ...) stay NULL
  graph.struct_size = sizeof(quilt_graph_t);
  graph.num_values = 3;
  graph.values = values;
  graph.num_nodes = 1;
  graph.nodes = node;
  graph.num_inputs = num_inputs;
  graph.inputs = inputs;
  graph.num_outputs = 1;
  graph.outputs = output;
  return graph;
}

double bench_matmul(const Bench& b, int64_t m, int64_t k, int64_t n, int runs, bool weights) {
  std::vector<float> ha(m * k), hb(k * n);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : ha) v = dist(gen);
  for (float& v : hb) v = dist(gen);
  int64_t da[] = {m, k}, db[] = {k, n}, dc[] = {m, n};
  quilt_value_t values[3] = {{"a", {QUILT_DTYPE_FLOAT32, 2, da}, nullptr},
                             {"b", {QUILT_DTYPE_FLOAT32, 2, db}, weights ? hb.data() : nullptr},
                             {"c", {QUILT_DTYPE_FLOAT32, 2, dc}, nullptr}};
  int32_t node_in[] = {0, 1}, node_out[] = {2};
  quilt_node_t node = {"mm", "MatMul", "", 13, 0, 2, node_in, 1, node_out, 0, nullptr};
  int32_t graph_in[] = {0, 1}, graph_out[] = {2};
  quilt_graph_t graph = matmul_graph(values, &node, graph_in, weights ? 1u : 2u, graph_out);
  quilt_executable_t exe = nullptr;
  check(b.api->compile(b.device, &graph, &exe), "compile");
  void *pa, *pb, *pc;
  check(b.api->alloc(b.device, ha.size() * 4, &pa), "alloc");
  check(b.api->alloc(b.device, hb.size() * 4, &pb), "alloc");
  check(b.api->alloc(b.device, m * n * 4, &pc), "alloc");
  quilt_event_t up;
  check(b.api->event_create(b.device, &up), "event");
  check(b.api->copy_to_device(b.device, pa, ha.data(), ha.size() * 4, nullptr, 0, nullptr), "copy");
  check(b.api->copy_to_device(b.device, pb, hb.data(), hb.size() * 4, nullptr, 0, up), "copy");
  check(b.api->event_wait(b.device, up), "wait");
  b.api->event_release(b.device, up);
  std::vector<double> gflops;
  for (int r = 0; r < runs + 1; ++r) {  // the first run compiles the kernel (PoCL): not counted
    quilt_event_t done;
    check(b.api->event_create(b.device, &done), "event");
    quilt_tensor_info_t infos[3] = {values[0].info, values[1].info, values[2].info};
    void* ins[] = {pa, weights ? nullptr : pb};
    void* outs[] = {pc};
    quilt_execute_args_t args{};
    args.struct_size = sizeof(args);
    args.values = infos;
    args.inputs = ins;
    args.outputs = outs;
    args.signal_event = done;
    check(b.api->execute(b.device, exe, &args), "execute");
    check(b.api->event_wait(b.device, done), "wait");
    uint64_t start = 0, end = 0;
    check(b.api->event_timestamps(b.device, done, &start, &end), "timestamps");
    b.api->event_release(b.device, done);
    if (r > 0) gflops.push_back(2.0 * m * n * k / static_cast<double>(end - start));
  }
  // Spot check against a naive product on a few elements.
  std::vector<float> hc(m * n);
  quilt_event_t down;
  check(b.api->event_create(b.device, &down), "event");
  check(b.api->copy_to_host(b.device, hc.data(), pc, hc.size() * 4, nullptr, 0, down), "copy");
  check(b.api->event_wait(b.device, down), "wait");
  b.api->event_release(b.device, down);
  for (int t = 0; t < 16; ++t) {
    int64_t i = gen() % m, j = gen() % n;
    double want = 0;
    for (int64_t p = 0; p < k; ++p) want += double(ha[i * k + p]) * hb[p * n + j];
    if (std::abs(want - hc[i * n + j]) > 1e-3 * (1 + std::abs(want))) {
      std::fprintf(stderr, "wrong result at [%lld, %lld]: %f vs %f\n", (long long)i, (long long)j,
                   hc[i * n + j], want);
      std::exit(1);
    }
  }
  b.api->free(b.device, pa);
  b.api->free(b.device, pb);
  b.api->free(b.device, pc);
  b.api->executable_release(b.device, exe);
  std::sort(gflops.begin(), gflops.end());
  return gflops[gflops.size() / 2];
}

using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);

double bench_openblas(Sgemm sgemm, int64_t m, int64_t k, int64_t n, int runs) {
  std::vector<float> a(m * k, 0.5f), b(k * n, 0.25f), c(m * n);
  std::vector<double> gflops;
  for (int r = 0; r < runs + 1; ++r) {
    uint64_t start = now_ns();
    sgemm(101, 111, 111, int(m), int(n), int(k), 1.0f, a.data(), int(k), b.data(), int(n), 0.0f,
          c.data(), int(n));
    uint64_t end = now_ns();
    if (r > 0) gflops.push_back(2.0 * m * n * k / static_cast<double>(end - start));
  }
  std::sort(gflops.begin(), gflops.end());
  return gflops[gflops.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int32_t index = argc > 1 ? std::atoi(argv[1]) : 0;
  void* lib = dlopen(QUILT_OPENCL_PLUGIN, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return std::fprintf(stderr, "%s\n", dlerror()), 1;
  auto init = reinterpret_cast<quilt_backend_init_fn>(dlsym(lib, QUILT_BACKEND_ENTRY));
  const quilt_backend_t* api = nullptr;
  check(init(&kHost, &api), "init");
  if (api->device_count(api->context) <= index) {
    std::printf("skipped: no OpenCL device %d\n", index);
    return 0;
  }
  quilt_device_info_t info{};
  info.struct_size = sizeof(info);
  check(api->device_info(api->context, index, &info), "device_info");
  std::printf("device %d: %s (GFLOP/s: median of 5 runs, device time)\n", index, info.name);

  // Session start: device_open + compile of a MatMul patch, with an empty and a warm cache. The
  // cold one includes the GEMM engine measurement (gemm=auto), the warm ones read its choice.
  std::string cache =
      (std::filesystem::temp_directory_path() / "quilt-bench-opencl-cache").string();
  std::filesystem::remove_all(cache);
  quilt_option_t option = {"cache_dir", cache.c_str()};
  Bench bench{api, nullptr};
  for (const char* label : {"cold cache", "warm cache", "warm cache"}) {
    uint64_t start = now_ns();
    quilt_device_t device;
    check(api->device_open(api->context, index, &option, 1, &device), "device_open");
    int64_t d[] = {8, 8};
    quilt_value_t values[3] = {{"a", {QUILT_DTYPE_FLOAT32, 2, d}, nullptr},
                               {"b", {QUILT_DTYPE_FLOAT32, 2, d}, nullptr},
                               {"c", {QUILT_DTYPE_FLOAT32, 2, d}, nullptr}};
    int32_t in[] = {0, 1}, out[] = {2};
    quilt_node_t node = {"mm", "MatMul", "", 13, 0, 2, in, 1, out, 0, nullptr};
    quilt_graph_t graph = matmul_graph(values, &node, in, 2, out);
    quilt_executable_t exe;
    check(api->compile(device, &graph, &exe), "compile");
    std::printf("device_open + compile (gemm program), %s: %.1f ms\n", label, ms(now_ns() - start));
    api->executable_release(device, exe);
    api->device_close(device);
  }
  // Throughput: our kernel whatever the engine measurement chose (gemm=own).
  quilt_option_t own[] = {option, {"gemm", "own"}};
  check(api->device_open(api->context, index, own, 2, &bench.device), "device_open");

  Sgemm sgemm = nullptr;
  if (void* blas = dlopen(QUILT_OPENBLAS, RTLD_NOW | RTLD_LOCAL))
    sgemm = reinterpret_cast<Sgemm>(dlsym(blas, "cblas_sgemm"));
  struct Shape {
    int64_t m, k, n;
  };
  std::printf("%-18s %16s %16s %10s\n", "M x K x N", "opencl (B input)", "opencl (weights)",
              "OpenBLAS");
  for (Shape s : {Shape{1024, 1024, 1024}, Shape{128, 768, 768}, Shape{128, 768, 3072},
                  Shape{128, 3072, 768}, Shape{1001, 999, 1003}}) {
    double ours = bench_matmul(bench, s.m, s.k, s.n, 5, false);
    double weights = bench_matmul(bench, s.m, s.k, s.n, 5, true);
    double blas = sgemm ? bench_openblas(sgemm, s.m, s.k, s.n, 5) : 0;
    char shape[32];
    std::snprintf(shape, sizeof shape, "%lldx%lldx%lld", (long long)s.m, (long long)s.k,
                  (long long)s.n);
    std::printf("%-18s %16.1f %16.1f %10.1f\n", shape, ours, weights, blas);
  }
  api->device_close(bench.device);
  return 0;
}
