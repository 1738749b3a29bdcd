// Programs: one per kernels_cl family (common.cl prepended), built for a device from the
// embedded source or loaded from the on-disk binary cache.
//
// Cache entries are <cache_dir>/<family>-<key>.bin, key = hash(platform, device name, driver
// version, OpenCL version, source, build options). An entry is a header (magic, size, checksum)
// and the program binary; it is written to a temporary file and renamed, so readers never see a
// half-written entry. An entry that does not load (truncated, corrupt, refused by the driver) is
// rebuilt from source and overwritten; a cache that cannot be written is only logged.
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {
constexpr char kMagic[8] = {'Q', 'C', 'L', 'B', 'I', 'N', '0', '1'};
}  // namespace

uint64_t fnv1a(std::string_view data, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(v));
  return text;
}

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t size = 0;
  clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
  std::string text(size, '\0');
  if (size)
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, text.data(), nullptr);
  while (!text.empty() && (text.back() == '\0' || text.back() == '\n')) text.pop_back();
  return text;
}

const char* find_source(const std::string& name) {
  for (const EmbeddedSource& s : embedded_sources())
    if (name == s.name) return s.source;
  return nullptr;
}

}  // namespace

std::string read_entry(const std::filesystem::path& path, bool* corrupt) {
  *corrupt = false;
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  uint64_t size = 0, sum = 0;
  if (data.size() < 24 || std::memcmp(data.data(), kMagic, 8) != 0) {
    *corrupt = true;
    return {};
  }
  std::memcpy(&size, data.data() + 8, 8);
  std::memcpy(&sum, data.data() + 16, 8);
  std::string binary = data.substr(24);
  if (binary.size() != size || fnv1a(binary, 0) != sum || binary.empty()) {
    *corrupt = true;
    return {};
  }
  return binary;
}

void write_entry(const std::filesystem::path& path, const std::string& binary) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::filesystem::path tmp = path;
  tmp += ".tmp" + std::to_string(::getpid()) + "-" +
         std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    uint64_t size = binary.size(), sum = fnv1a(binary, 0);
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(reinterpret_cast<const char*>(&sum), 8);
    out.write(binary.data(), static_cast<std::streamsize>(binary.size()));
    if (!out) {
      log(QUILT_LOG_WARNING, "program cache: cannot write " + tmp.string());
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    log(QUILT_LOG_WARNING,
        "program cache: cannot rename into " + path.string() + ": " + ec.message());
    std::filesystem::remove(tmp, ec);
  }
}

std::string program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, nullptr) !=
          CL_SUCCESS ||
      size == 0)
    return {};
  std::string binary(size, '\0');
  unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof ptr, &ptr, nullptr) != CL_SUCCESS)
    return {};
  return binary;
}

std::string build_options_for(const DeviceEntry& device, const Options& options) {
  std::string build_options = "-cl-std=CL1.2";
  if (device.correctly_rounded_divide_sqrt)
    build_options += " -cl-fp32-correctly-rounded-divide-sqrt";
  if (!options.extra_build_options.empty()) build_options += " " + options.extra_build_options;
  return build_options;
}

bool program_from_binary(cl_context context, const DeviceEntry& device,
                         const std::string& build_options, const std::string& binary,
                         cl_program* out) {
  if (binary.empty()) return false;
  const unsigned char* ptr = reinterpret_cast<const unsigned char*>(binary.data());
  size_t size = binary.size();
  cl_int binary_status = CL_SUCCESS, err = CL_SUCCESS;
  cl_device_id dev = device.id;
  Program program(clCreateProgramWithBinary(context, 1, &dev, &size, &ptr, &binary_status, &err));
  if (err != CL_SUCCESS || binary_status != CL_SUCCESS ||
      clBuildProgram(program.get(), 1, &dev, build_options.c_str(), nullptr, nullptr) != CL_SUCCESS)
    return false;
  *out = program.release();
  return true;
}

std::string default_cache_dir() {
  if (const char* dir = std::getenv("QUILT_OPENCL_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/quilt/opencl";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/quilt/opencl";
  return "";
}

Status build_program(cl_context context, const DeviceEntry& device, const Options& options,
                     const std::string& family, cl_program* out) {
  const char* common = find_source("common");
  const char* body = find_source(family);
  if (!common || !body) return fail(QUILT_STATUS_RUNTIME_ERROR, "no kernels_cl/" + family + ".cl");
  const std::string source = std::string(common) + "\n" + body;
  const std::string build_options = build_options_for(device, options);

  std::string key_text = "quilt-opencl-cache-1\n" + device.platform_name + "\n" + device.name +
                         "\n" + device.driver_version + "\n" + device.cl_version + "\n" +
                         build_options + "\n" + source;
  std::string key = hex(fnv1a(key_text, 0)) + hex(fnv1a(key_text, 0x9e3779b97f4a7c15ull));
  std::filesystem::path path;
  if (!options.cache_dir.empty())
    path = std::filesystem::path(options.cache_dir) / (family + "-" + key + ".bin");

  const auto start = std::chrono::steady_clock::now();
  cl_device_id dev = device.id;
  bool was_corrupt = false;
  if (!path.empty()) {
    std::string binary = read_entry(path, &was_corrupt);
    if (!binary.empty()) {
      if (program_from_binary(context, device, build_options, binary, out)) {
        log(QUILT_LOG_DEBUG, "program " + family + ": loaded from the cache " + path.string() +
                                 " in " + std::to_string(ms_since(start)) + " ms");
        return {};
      }
      was_corrupt = true;
    }
    if (was_corrupt)
      log(QUILT_LOG_WARNING,
          "program " + family + ": cache entry " + path.string() + " is corrupt; rebuilding it");
  }

  const char* text = source.c_str();
  cl_int err = CL_SUCCESS;
  Program program(clCreateProgramWithSource(context, 1, &text, nullptr, &err));
  if (err != CL_SUCCESS) return cl_fail(err, "create program " + family);
  err = clBuildProgram(program.get(), 1, &dev, build_options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    std::string log_text = build_log(program.get(), dev);
    return fail(QUILT_STATUS_DEVICE_ERROR, "build of kernels_cl/" + family + ".cl for '" +
                                               device.name + "' failed (" + cl_error_name(err) +
                                               ", options '" + build_options + "'):\n" + log_text);
  }
  const double build_ms = ms_since(start);
  if (!path.empty()) {
    std::string binary = program_binary(program.get());
    if (binary.empty())
      log(QUILT_LOG_WARNING, "program " + family + ": the driver gave no binary to cache");
    else
      write_entry(path, binary);
  }
  log(QUILT_LOG_DEBUG,
      "program " + family + ": " + (was_corrupt ? "rebuilt" : "built") + " from source in " +
          std::to_string(build_ms) + " ms" +
          (path.empty() ? ""
                        : ", cached in " + std::to_string(ms_since(start) - build_ms) + " ms as " +
                              path.string()));
  *out = program.release();
  return {};
}

}  // namespace quilt::opencl
