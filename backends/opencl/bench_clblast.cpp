// CLBlast's SGEMM on the first OpenCL device, at the shapes opencl_bench_gemm measures, so the
// choice of GEMM in the OpenCL backend rests on a measurement (a benchmark, not a test).
//
//   opencl_bench_clblast [REPEATS]
//
// The first call of each shape includes CLBlast's kernel compilation (reported separately);
// the rest are wall time of one call to its completion (clFinish), median of REPEATS (default
// 5). Not event times: CLBlast may run several kernels and returns the last one's event.
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

[[noreturn]] void die(const char* what, int code) {
  std::fprintf(stderr, "opencl_bench_clblast: %s failed (%d)\n", what, code);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  cl_platform_id platform;
  cl_uint n = 0;
  if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0) {
    std::puts("skipped: no OpenCL platform");
    return 0;
  }
  cl_device_id device;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &n) != CL_SUCCESS || n == 0) {
    std::puts("skipped: no OpenCL device");
    return 0;
  }
  char name[256] = {0};
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name, name, nullptr);
  cl_int err = 0;
  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  if (err) die("clCreateContext", err);
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  if (err) die("clCreateCommandQueue", err);
  std::printf("device: %s\n%-16s %12s %12s\n", name, "M x K x N", "first (ms)", "GFLOP/s");
  const size_t shapes[][3] = {
      {1024, 1024, 1024}, {128, 768, 768}, {128, 768, 3072}, {128, 3072, 768}};
  for (const auto& s : shapes) {
    const size_t m = s[0], k = s[1], nn = s[2];
    std::vector<float> a(m * k, 0.5f), b(k * nn, 0.25f);
    cl_mem da = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               a.size() * sizeof(float), a.data(), &err);
    cl_mem db = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                               b.size() * sizeof(float), b.data(), &err);
    cl_mem dc = clCreateBuffer(context, CL_MEM_READ_WRITE, m * nn * sizeof(float), nullptr, &err);
    if (err) die("clCreateBuffer", err);
    std::vector<double> times;
    double first_ms = 0;
    for (int r = 0; r <= repeats; ++r) {
      cl_event e = nullptr;
      const auto t0 = std::chrono::steady_clock::now();
      CLBlastStatusCode st =
          CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, m, nn, k,
                       1.0f, da, 0, k, db, 0, nn, 0.0f, dc, 0, nn, &queue, &e);
      if (st != CLBlastSuccess) die("CLBlastSgemm", st);
      clFinish(queue);
      const double wall =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0)
        first_ms = wall;
      else
        times.push_back(wall);
      clReleaseEvent(e);
    }
    std::sort(times.begin(), times.end());
    const double ms = times[times.size() / 2];
    std::printf("%4zux%4zux%4zu   %12.1f %12.1f\n", m, k, nn, first_ms,
                2.0 * m * k * nn / (ms * 1e6));
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
  }
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return 0;
}
