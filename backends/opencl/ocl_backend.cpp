// The OpenCL backend: every device of every OpenCL platform behind the plain-C plugin ABI
// (include/quilt/backend.h). An open device has its own context and one in-order, profiling
// command queue; device pointers are cl_mem handles; an ABI event wraps the cl_events of the
// operation that signals it.
//
// Options (device_open):
//   cache_dir            program binary cache ("" or "none": off). Default $QUILT_OPENCL_CACHE_DIR,
//                        else $XDG_CACHE_HOME/quilt/opencl, else ~/.cache/quilt/opencl.
//   extra_build_options  appended to the OpenCL build options of every program.
//   gemm                 auto (default: our kernel or CLBlast, whichever a measurement on the
//                        device finds faster; the choice is cached), own, clblast.
//   max_alloc_bytes      the largest buffer alloc() hands out (default: the device's limit).
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include <dlfcn.h>
#include <sys/stat.h>

#include "opencl.hpp"

using namespace quilt::opencl;

namespace quilt::opencl {

namespace {
std::vector<DeviceEntry> g_devices;

std::string device_string(cl_device_id id, cl_device_info what) {
  size_t size = 0;
  if (clGetDeviceInfo(id, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  clGetDeviceInfo(id, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string platform_string(cl_platform_id id, cl_platform_info what) {
  size_t size = 0;
  if (clGetPlatformInfo(id, what, 0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  clGetPlatformInfo(id, what, size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

// What one command and a wait for it cost the device, in ns: the median of 8 four-byte writes,
// each waited for, on a queue of its own (after one to warm up). Published as the device
// property "launch_ns" for the host's cost rule; 0 when it cannot be measured.
double measure_launch_ns(cl_platform_id platform, cl_device_id id) {
  cl_int err = CL_SUCCESS;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(platform), 0};
  cl_context context = clCreateContext(props, 1, &id, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return 0;
  cl_command_queue queue = clCreateCommandQueue(context, id, 0, &err);
  cl_mem buffer =
      err == CL_SUCCESS ? clCreateBuffer(context, CL_MEM_READ_WRITE, 64, nullptr, &err) : nullptr;
  std::vector<double> samples;
  const float word = 0.f;
  for (int i = 0; i < 9 && err == CL_SUCCESS; ++i) {
    const auto start = std::chrono::steady_clock::now();
    err = clEnqueueWriteBuffer(queue, buffer, CL_FALSE, 0, sizeof word, &word, 0, nullptr, nullptr);
    if (err == CL_SUCCESS) err = clFinish(queue);
    const auto ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start);
    if (i > 0) samples.push_back(ns.count());
  }
  if (buffer) clReleaseMemObject(buffer);
  if (queue) clReleaseCommandQueue(queue);
  clReleaseContext(context);
  if (err != CL_SUCCESS || samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// Lists every device of every platform. Loads the platforms' libraries (PoCL: libLLVM and
// libclang-cpp, ~62 MiB resident). `full`: each device's properties and launch_ns too (the
// measurement needs a context: ~8 MiB more); else its handles, name and versions only.
std::vector<DeviceEntry> list_devices(bool full) {
  std::vector<DeviceEntry> out;
  cl_uint num_platforms = 0;
  if (clGetPlatformIDs(0, nullptr, &num_platforms) != CL_SUCCESS || num_platforms == 0) return out;
  std::vector<cl_platform_id> platforms(num_platforms);
  clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
  for (cl_platform_id platform : platforms) {
    cl_uint num_devices = 0;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 0, nullptr, &num_devices) != CL_SUCCESS)
      continue;
    std::vector<cl_device_id> ids(num_devices);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, num_devices, ids.data(), nullptr);
    for (cl_device_id id : ids) {
      DeviceEntry& d = out.emplace_back();
      d.platform = platform;
      d.id = id;
      d.name = device_string(id, CL_DEVICE_NAME);
      d.platform_name = platform_string(platform, CL_PLATFORM_NAME);
      d.driver_version = device_string(id, CL_DRIVER_VERSION);
      d.cl_version = device_string(id, CL_DEVICE_VERSION);
      if (!full) continue;
      cl_ulong mem = 0, max_alloc = 0;
      clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof mem, &mem, nullptr);
      clGetDeviceInfo(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc, nullptr);
      d.memory_bytes = mem;
      d.max_alloc_bytes = max_alloc;
      cl_uint units = 0;
      clGetDeviceInfo(id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
      d.compute_units = units;
      d.fp16 = device_string(id, CL_DEVICE_EXTENSIONS).find("cl_khr_fp16") != std::string::npos;
      cl_device_fp_config fp = 0;
      clGetDeviceInfo(id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fp, &fp, nullptr);
      d.correctly_rounded_divide_sqrt = (fp & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) != 0;
      cl_bool unified = CL_FALSE;
      clGetDeviceInfo(id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, nullptr);
      const char* host_memory_env = std::getenv("QUILT_OPENCL_HOST_MEMORY");
      d.host_memory =
          unified == CL_TRUE && !(host_memory_env && std::string_view(host_memory_env) == "0");
      cl_uint align_bits = 0;
      clGetDeviceInfo(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN, sizeof align_bits, &align_bits, nullptr);
      d.base_align = std::max<size_t>(align_bits / 8, 1);
      d.launch_ns = static_cast<int64_t>(measure_launch_ns(platform, id));
    }
  }
  return out;
}

// ---- the device list cache ----
// Loading PoCL costs a process ~62 MiB of resident memory (libLLVM and libclang-cpp, which
// libpocl links, relocated and initialised), ~8 MiB more for a context: 7x the peak of a small
// model on the CPU, paid even when the plan puts nothing on the device. So the list (with
// launch_ns) is kept in the cache directory ($QUILT_OPENCL_CACHE_DIR or its defaults: the
// plugin lists its devices before any option reaches it) as devices-<key>.bin, and a process
// that finds it loads no OpenCL platform until a device is used (quilt_device_s::ready, which
// enumerates then and checks that the devices are the ones listed). The key is what decides the
// list: this boot (hardware), the ICD loader's vendor files and the libraries they name (size,
// mtime, inode), the loader's own library, and the OpenCL, ICD and PoCL environment variables.

extern "C" char** environ;

// size, mtime and inode of a file, or "-" when it does not exist.
std::string file_stamp(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "-";
  return std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
}

std::string read_small_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return text.substr(0, 4096);
}

std::string device_list_key() {
  std::string text =
      "quilt-opencl-devices-1\nboot " + read_small_file("/proc/sys/kernel/random/boot_id") + "\n";
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string_view v(*e);
    for (const char* prefix : {"OCL_", "OPENCL_", "POCL_", "OCLGRIND",
                               "QUILT_OPENCL_HOST_MEMORY=", "LD_LIBRARY_PATH=", "LD_PRELOAD="})
      if (v.starts_with(prefix)) env.emplace_back(v);
  }
  std::sort(env.begin(), env.end());
  for (const std::string& v : env) text += "env " + v + "\n";
  // Where the loader looks for the vendors' libraries named without a path.
  std::vector<std::filesystem::path> lib_dirs;
  if (const char* ld = std::getenv("LD_LIBRARY_PATH"))
    for (std::string_view rest = ld; !rest.empty();) {
      const size_t colon = rest.find(':');
      lib_dirs.emplace_back(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? "" : rest.substr(colon + 1);
    }
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&clGetPlatformIDs), &info) && info.dli_fname) {
    const std::filesystem::path loader = info.dli_fname;
    text += "loader " + loader.string() + " " + file_stamp(loader) + "\n";
    lib_dirs.push_back(loader.parent_path());
  }
  for (const char* dir : {"/usr/local/lib", "/usr/lib", "/lib"}) lib_dirs.emplace_back(dir);
  std::filesystem::path vendors = "/etc/OpenCL/vendors";
  if (const char* v = std::getenv("OCL_ICD_VENDORS"); v && *v) vendors = v;
  std::vector<std::filesystem::path> icds;
  std::error_code ec;
  if (std::filesystem::is_directory(vendors, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(vendors, ec)) icds.push_back(e.path());
  } else {
    icds.push_back(vendors);
  }
  std::sort(icds.begin(), icds.end());
  for (const std::filesystem::path& icd : icds) {
    std::string lib = read_small_file(icd);
    while (!lib.empty() && std::isspace(static_cast<unsigned char>(lib.back()))) lib.pop_back();
    text += "icd " + icd.string() + " " + file_stamp(icd) + " " + lib + "\n";
    if (lib.empty()) continue;
    if (lib.front() == '/') {
      text += "  " + file_stamp(lib) + "\n";
      continue;
    }
    for (const std::filesystem::path& dir : lib_dirs)
      if (std::string stamp = file_stamp(dir / lib); stamp != "-") {
        text += "  " + (dir / lib).string() + " " + stamp + "\n";
        break;
      }
  }
  return hex(fnv1a(text, 0)) + hex(fnv1a(text, 0x9e3779b97f4a7c15ull));
}

// One field per line: a device's strings (newlines, which no driver puts there, cut) and numbers.
std::string format_device_list(const std::vector<DeviceEntry>& list) {
  auto line = [](std::string s) {
    std::replace(s.begin(), s.end(), '\n', ' ');
    return s + "\n";
  };
  std::string out = "devices " + std::to_string(list.size()) + "\n";
  for (const DeviceEntry& d : list)
    out +=
        line(d.name) + line(d.platform_name) + line(d.driver_version) + line(d.cl_version) +
        line(std::to_string(d.memory_bytes) + " " + std::to_string(d.max_alloc_bytes) + " " +
             std::to_string(d.compute_units) + " " + std::to_string(d.fp16) + " " +
             std::to_string(d.correctly_rounded_divide_sqrt) + " " + std::to_string(d.host_memory) +
             " " + std::to_string(d.base_align) + " " + std::to_string(d.launch_ns));
  return out;
}

bool parse_device_list(const std::string& text, std::vector<DeviceEntry>* out) {
  std::istringstream in(text);
  std::string word;
  size_t count = 0;
  if (!(in >> word >> count) || word != "devices" || count > 1024) return false;
  std::getline(in, word);
  for (size_t i = 0; i < count; ++i) {
    DeviceEntry& d = out->emplace_back();
    std::string numbers;
    if (!std::getline(in, d.name) || !std::getline(in, d.platform_name) ||
        !std::getline(in, d.driver_version) || !std::getline(in, d.cl_version) ||
        !std::getline(in, numbers))
      return false;
    std::istringstream n(numbers);
    int fp16 = 0, crds = 0, host_memory = 0;
    if (!(n >> d.memory_bytes >> d.max_alloc_bytes >> d.compute_units >> fp16 >> crds >>
          host_memory >> d.base_align >> d.launch_ns) ||
        d.base_align == 0)
      return false;
    d.fp16 = fp16 != 0;
    d.correctly_rounded_divide_sqrt = crds != 0;
    d.host_memory = host_memory != 0;
  }
  std::string rest;
  return !(in >> rest);
}

std::filesystem::path g_list_path;  // the cache entry the list came from or went to
bool g_resolved = false;            // the entries' platform and id are set
std::mutex g_resolve_mutex;

// Once per process: open devices point into the list.
void enumerate_devices() {
  static bool done = false;
  if (done) return;
  done = true;
  if (const std::string dir = default_cache_dir(); !dir.empty())
    g_list_path = std::filesystem::path(dir) / ("devices-" + device_list_key() + ".bin");
  bool cached = false;
  if (!g_list_path.empty()) {
    bool corrupt = false;
    const std::string text = read_entry(g_list_path, &corrupt);
    cached = !text.empty() && parse_device_list(text, &g_devices);
    if (!cached) g_devices.clear();
    if (!cached && (corrupt || !text.empty()))
      log(QUILT_LOG_WARNING, "device list cache entry " + g_list_path.string() +
                                 " is unreadable; listing the devices again");
  }
  if (!cached) {
    g_devices = list_devices(true);
    g_resolved = true;
    if (!g_list_path.empty()) write_entry(g_list_path, format_device_list(g_devices));
  }
  for (DeviceEntry& d : g_devices) {
    d.keys = {"platform", "driver version", "OpenCL version", "compute units", "fp16"};
    d.values = {d.platform_name, d.driver_version, d.cl_version, std::to_string(d.compute_units),
                d.fp16 ? "yes (cl_khr_fp16)" : "no"};
    if (d.launch_ns > 0) {
      d.keys.push_back("launch_ns");
      d.values.push_back(std::to_string(d.launch_ns));
    }
    for (const std::string& k : d.keys) d.key_ptrs.push_back(k.c_str());
    for (const std::string& v : d.values) d.value_ptrs.push_back(v.c_str());
  }
}
}  // namespace

// The platform and device handles of a list read from the cache: the platforms are loaded now,
// at the first use of a device, and must list the same devices in the same order.
Status resolve_devices() {
  std::lock_guard lock(g_resolve_mutex);
  if (g_resolved) return {};
  std::vector<DeviceEntry> now = list_devices(false);
  for (size_t i = 0; i < g_devices.size(); ++i) {
    const DeviceEntry& was = g_devices[i];
    const bool same =
        i < now.size() && now[i].name == was.name && now[i].platform_name == was.platform_name &&
        now[i].driver_version == was.driver_version && now[i].cl_version == was.cl_version;
    if (!same) {
      std::error_code ec;
      std::filesystem::remove(g_list_path, ec);
      return fail(
          QUILT_STATUS_DEVICE_ERROR,
          "the OpenCL devices are not the ones listed in " + g_list_path.string() + " (device " +
              std::to_string(i) + " was '" + was.name + "' of " + was.driver_version + ", now " +
              (i < now.size() ? "'" + now[i].name + "' of " + now[i].driver_version : "absent") +
              "); the entry is removed: open the session again");
    }
  }
  for (size_t i = 0; i < g_devices.size(); ++i) {
    g_devices[i].platform = now[i].platform;
    g_devices[i].id = now[i].id;
  }
  g_resolved = true;
  return {};
}

const std::vector<DeviceEntry>& devices() {
  return g_devices;
}

}  // namespace quilt::opencl

namespace {

constexpr const char* kKnownOptions = "cache_dir, extra_build_options, gemm, max_alloc_bytes";

Status parse_options(const quilt_option_t* options, size_t count, Options* out) {
  out->cache_dir = default_cache_dir();
  // QUILT_OPENCL_GEMM: the default of option gemm (the Oclgrind tests set `own`: measuring a
  // 512^3 product on a simulator would take hours).
  if (const char* gemm = std::getenv("QUILT_OPENCL_GEMM"); gemm && *gemm) {
    const std::string value = gemm;
    if (value != "auto" && value != "own" && value != "clblast")
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "QUILT_OPENCL_GEMM: '" + value + "' is not one of auto, own, clblast");
    out->gemm = value;
  }
  for (size_t i = 0; i < count; ++i) {
    std::string key = options[i].key, value = options[i].value ? options[i].value : "";
    if (key == "cache_dir") {
      out->cache_dir = value == "none" ? "" : value;
    } else if (key == "extra_build_options") {
      out->extra_build_options = value;
    } else if (key == "gemm") {
      if (value != "auto" && value != "own" && value != "clblast")
        return fail(QUILT_STATUS_INVALID_ARGUMENT,
                    "option gemm: '" + value + "' is not one of auto, own, clblast");
      if (value == "clblast" && !clblast_available())
        return fail(QUILT_STATUS_INVALID_ARGUMENT,
                    "option gemm=clblast: this build of the OpenCL backend has no CLBlast");
      out->gemm = value;
    } else if (key == "max_alloc_bytes") {
      const char* end = value.data() + value.size();
      auto [ptr, ec] = std::from_chars(value.data(), end, out->max_alloc_bytes);
      if (ec != std::errc() || ptr != end || value.empty() || out->max_alloc_bytes == 0)
        return fail(QUILT_STATUS_INVALID_ARGUMENT,
                    "option max_alloc_bytes: '" + value + "' is not a positive integer");
    } else {
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "unknown option '" + key + "' (known: " + kKnownOptions + ")");
    }
  }
  return {};
}

// A compiled patch: immutable, shared by the executable handle and its executions.
struct Patch {
  std::vector<std::string> value_names;
  std::vector<NodeDesc> nodes;
  std::vector<int32_t> root;  // per value: the value whose buffer holds it (views alias)
  std::vector<std::shared_ptr<Mem>> constants;  // per value: the uploaded constant, or null
  std::vector<char> produced;                   // per value: written by a kernel of this patch
  std::vector<int32_t> inputs, outputs;
  // Per value: written by a kernel here, with a buffer of its own (a root) that no graph output
  // lives in; the first node writing it (-1: none); per node, the intermediates it reads last
  // (itself or a view of them). A dead intermediate's buffer serves later ones: the queue is in
  // order.
  std::vector<char> intermediate;
  std::vector<int32_t> first_write;
  std::vector<std::vector<int32_t>> dies_after;
  // Per value: its dtype in the model when float16 or bfloat16 (held in float32 here), else 0.
  std::vector<int32_t> half_dtype;
  // For executable_serialize: the program families it launches and the device copies of its
  // constants, by content key.
  std::set<std::string> programs;
  std::vector<std::pair<std::string, std::shared_ptr<Mem>>> used_constants;
};

bool is_half(int32_t dtype) {
  return dtype == QUILT_DTYPE_FLOAT16 || dtype == QUILT_DTYPE_BFLOAT16;
}

// float16 bits -> float32: the exponent and mantissa shifted into place, rebiased by one exact
// multiplication by 2^112 (subnormals included); infinities and NaNs keep their all-ones exponent.
float float16_to_float(uint16_t h) {
  uint32_t bits = uint32_t{h & 0x7fffu} << 13;
  float f = 0;
  if ((h & 0x7c00u) == 0x7c00u) {
    bits |= 0x7f800000u;
  } else {
    std::memcpy(&f, &bits, sizeof f);
    f *= 0x1p112f;
    std::memcpy(&bits, &f, sizeof f);
  }
  bits |= uint32_t{h & 0x8000u} << 16;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// A patch graph with its float16/bfloat16 values float32: the device computes half models in
// float32 (PoCL and most CPU drivers lack cl_khr_fp16), every kernel as for a float32 model; the
// half constants are widened here, once, and only the patch's inputs and outputs convert, on
// the device (enqueue_patch). The values' dims and the nodes stay the host's.
struct WideGraph {
  quilt_graph_t graph{};
  std::vector<quilt_value_t> values;
  std::vector<std::vector<float>> data;  // the widened constants
  std::vector<int32_t> half_dtype;       // per value, as Patch::half_dtype
  bool any = false;

  explicit WideGraph(const quilt_graph_t& g) : graph(g), half_dtype(g.num_values, 0) {
    for (size_t v = 0; v < g.num_values; ++v) any = any || is_half(g.values[v].info.dtype);
    if (!any) return;
    values.assign(g.values, g.values + g.num_values);
    for (size_t v = 0; v < g.num_values; ++v) {
      quilt_value_t& value = values[v];
      if (!is_half(value.info.dtype)) continue;
      half_dtype[v] = value.info.dtype;
      if (value.constant && value.info.rank >= 0) {
        const auto count = static_cast<size_t>(
            element_count({value.info.dims, static_cast<size_t>(value.info.rank)}));
        const auto* bits = static_cast<const uint16_t*>(value.constant);
        std::vector<float>& wide = data.emplace_back(count);
        for (size_t i = 0; i < count; ++i) {
          if (value.info.dtype == QUILT_DTYPE_FLOAT16) {
            wide[i] = float16_to_float(bits[i]);
          } else {
            const uint32_t b = uint32_t{bits[i]} << 16;
            std::memcpy(&wide[i], &b, sizeof b);
          }
        }
        value.constant = wide.data();
      }
      value.info.dtype = QUILT_DTYPE_FLOAT32;
    }
    graph.values = values.data();
  }
};

}  // namespace

struct quilt_executable_s {
  std::shared_ptr<const Patch> patch;
};

namespace {

int32_t device_count(void*) {
  return static_cast<int32_t>(devices().size());
}

Status check_index(int32_t index) {
  if (index < 0 || static_cast<size_t>(index) >= devices().size())
    return fail(QUILT_STATUS_INVALID_ARGUMENT,
                "no device " + std::to_string(index) + " (" + std::to_string(devices().size()) +
                    " OpenCL device" + (devices().size() == 1 ? "" : "s") + " found)");
  return {};
}

quilt_status_t device_info(void*, int32_t index, quilt_device_info_t* info) {
  return guarded([&]() -> Status {
    if (Status s = check_index(index); !s.ok()) return s;
    const DeviceEntry& d = devices()[index];
#define QUILT_OPENCL_FITS(field) \
  (info->struct_size >= offsetof(quilt_device_info_t, field) + sizeof(info->field))
    if (QUILT_OPENCL_FITS(name)) info->name = d.name.c_str();
    // Asynchronous; its own memory space unless it shares the host's.
    if (QUILT_OPENCL_FITS(flags)) info->flags = d.host_memory ? QUILT_DEVICE_HOST_MEMORY : 0;
    if (QUILT_OPENCL_FITS(memory_bytes)) info->memory_bytes = d.memory_bytes;
    if (QUILT_OPENCL_FITS(property_values)) {
      info->num_properties = d.keys.size();
      info->property_keys = d.key_ptrs.data();
      info->property_values = d.value_ptrs.data();
    }
#undef QUILT_OPENCL_FITS
    return {};
  });
}

quilt_status_t device_open(void*, int32_t index, const quilt_option_t* options, size_t num_options,
                           quilt_device_t* out) {
  return guarded([&]() -> Status {
    if (Status s = check_index(index); !s.ok()) return s;
    auto device = std::make_unique<quilt_device_s>();
    device->index = index;
    device->entry = &devices()[index];
    if (Status s = parse_options(options, num_options, &device->options); !s.ok()) return s;
    // The context and queue wait for the first compile, load or copy (ready()).
    *out = device.release();
    return {};
  });
}

}  // namespace

quilt::opencl::Status quilt_device_s::ready() {
  if (opened.load(std::memory_order_acquire)) return {};
  std::lock_guard lock(open_mutex);
  if (opened.load(std::memory_order_relaxed)) return {};
  if (Status s = resolve_devices(); !s.ok()) return s;
  if (Status s = shared_device(index, &shared); !s.ok()) return s;
  clRetainContext(shared->context.get());
  *context.out() = shared->context.get();
  cl_int err = CL_SUCCESS;
  *queue.out() = clCreateCommandQueue(context.get(), entry->id, CL_QUEUE_PROFILING_ENABLE, &err);
  if (err != CL_SUCCESS) return cl_fail(err, "create a command queue on '" + entry->name + "'");
  clock_offset_ns = measure_clock_offset(queue.get());
  opened.store(true, std::memory_order_release);
  log(QUILT_LOG_DEBUG, "device '" + entry->name + "' (" + std::to_string(index) +
                           "): context and command queue created, at its first use");
  return {};
}

namespace {

void device_close(quilt_device_t device) {
  delete device;
}

bool graph_fits(const quilt_graph_t* graph) {
  return graph && graph->struct_size >= offsetof(quilt_graph_t, outputs) + sizeof(graph->outputs);
}

quilt_status_t supports(quilt_device_t, const quilt_graph_t* graph, int32_t* claimed, char* reason,
                        size_t reason_size) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph) || graph->num_nodes != 1)
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "supports: expected a graph of one node");
    NodeDesc desc;
    const WideGraph wide(*graph);
    std::string why = check_node(wide.graph, graph->nodes[0], &desc);
    *claimed = why.empty() ? 1 : 0;
    if (reason && reason_size > 0) {
      size_t n = std::min(why.size(), reason_size - 1);
      std::memcpy(reason, why.data(), n);
      reason[n] = '\0';
    }
    return {};
  });
}

// Folds an activation into the Conv it follows when it is the Conv output's only reader and
// that output does not leave the patch: the conv kernel applies it as it stores the tile
// (conv_act), and the activation's output becomes a view of the Conv's. Saves a kernel launch
// and a pass over the tensor per pair (MobileNetV3 has 40 such pairs). SiLU arrives as one
// Swish node (the core rewrites EfficientNet's and YOLOv5's Sigmoid + Mul into it).
void fuse_conv_activations(Patch* patch) {
  const size_t n = patch->value_names.size();
  std::vector<int> readers(n, 0);
  for (const NodeDesc& node : patch->nodes)
    for (int32_t v : node.inputs)
      if (v >= 0) ++readers[v];
  for (int32_t v : patch->outputs) readers[v] += 2;  // read outside: never folded away
  struct Kind {
    const char* kernel;
    float kind;
  };
  constexpr Kind kKinds[] = {{"relu", 1},       {"leaky_relu", 2}, {"clip", 3}, {"hard_sigmoid", 4},
                             {"hard_swish", 5}, {"sigmoid", 6},    {"swish", 7}};
  for (NodeDesc& act : patch->nodes) {
    if (act.folded || act.inputs.empty() || act.inputs[0] < 0) continue;
    const int32_t v = act.inputs[0];
    const Kind* kind = nullptr;
    for (const Kind& k : kKinds)
      if (act.kernel == k.kernel && act.op && act.op->enqueue == enqueue_unary) kind = &k;
    if (!kind || patch->root[v] != v || readers[v] != 1) continue;
    for (NodeDesc& conv : patch->nodes) {
      if (conv.outputs.empty() || conv.outputs[0] != v || conv.act.s[0] != 0.0f) continue;
      if (conv.kernel != "conv_direct" && conv.kernel != "conv1x1" &&
          conv.kernel != "conv_depthwise")
        break;
      conv.act = {{kind->kind, act.f[0], act.f[1], 0.0f}};
      act.folded = true;
      patch->produced[act.outputs[0]] = 0;
      patch->root[act.outputs[0]] = v;
      break;
    }
  }
  // Views made of a folded activation's output point at the Conv's output now.
  for (size_t v = 0; v < n; ++v)
    while (patch->root[v] != patch->root[patch->root[v]])
      patch->root[v] = patch->root[patch->root[v]];
}

// Tells the host it may free constant v (ABI 1.1's constant_done, when the host offers it).
void constant_done(const quilt_graph_t& graph, int32_t v) {
  if (graph.struct_size >=
          offsetof(quilt_graph_t, constant_done_context) + sizeof(graph.constant_done_context) &&
      graph.constant_done)
    graph.constant_done(graph.constant_done_context, v);
}

Status compile_patch(quilt_device_s& device, const quilt_graph_t& graph, Patch* patch) {
  const size_t n = graph.num_values;
  auto in_range = [&](int32_t v) { return v >= 0 && static_cast<size_t>(v) < n; };
  patch->root.resize(n);
  patch->constants.resize(n);
  patch->produced.assign(n, 0);
  std::vector<char> available(n, 0);
  std::vector<size_t> upload_bytes(n, 0);
  for (size_t v = 0; v < n; ++v) {
    patch->root[v] = static_cast<int32_t>(v);
    const quilt_value_t& value = graph.values[v];
    patch->value_names.emplace_back(value.name ? value.name : "");
    if (!value.constant) continue;
    available[v] = 1;
    const quilt_tensor_info_t& info = value.info;
    // float32 data and bool conditions live on the device; shapes and axes are read at compile
    if (info.dtype != QUILT_DTYPE_FLOAT32 && info.dtype != QUILT_DTYPE_BOOL) continue;
    if (info.rank < 0 ||
        std::any_of(info.dims, info.dims + info.rank, [](int64_t d) { return d < 0; }))
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "compile: constant '" + patch->value_names[v] + "' has an unknown shape");
    const size_t bytes = element_count({info.dims, static_cast<size_t>(info.rank)}) *
                         (info.dtype == QUILT_DTYPE_BOOL ? 1 : sizeof(float));
    if (bytes > 0) upload_bytes[v] = bytes;  // uploaded below, unless only packed copies are read
  }
  // Per constant: the nodes still to compile that read it (an input listed twice counts twice).
  std::vector<int> readers(n, 0);
  for (size_t i = 0; i < graph.num_nodes; ++i)
    for (size_t k = 0; k < graph.nodes[i].num_inputs; ++k) {
      const int32_t v = graph.nodes[i].inputs[k];
      if (in_range(v) && graph.values[v].constant) ++readers[v];
    }
  for (size_t v = 0; v < n; ++v)  // read by no node: the host may free it now
    if (graph.values[v].constant && readers[v] == 0) constant_done(graph, static_cast<int32_t>(v));
  for (size_t i = 0; i < graph.num_inputs; ++i) {
    if (!in_range(graph.inputs[i]))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: graph input index out of range");
    patch->inputs.push_back(graph.inputs[i]);
    available[graph.inputs[i]] = 1;
  }
  for (size_t i = 0; i < graph.num_nodes; ++i) {
    const quilt_node_t& node = graph.nodes[i];
    NodeDesc desc;
    if (std::string why = check_node(graph, node, &desc); !why.empty())
      return fail(QUILT_STATUS_NOT_IMPLEMENTED, "compile: " + desc.name + ": " + why);
    for (int32_t v : desc.inputs)
      if (v >= 0 && !available[v])
        return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: " + desc.name + " reads '" +
                                                       patch->value_names[v] +
                                                       "', which nothing before it provides");
    for (int32_t v : desc.outputs)
      if (v >= 0) available[v] = 1;
    if (desc.op->upload)
      if (Status s = desc.op->upload(device, NodeView{graph, node}, &desc); !s.ok()) return s;
    if (desc.op->program) {
      // Build the program now, so a build failure fails the session's creation.
      cl_program program = nullptr;
      if (Status s = device.program(desc.op->program, &program); !s.ok()) return s;
      for (int32_t v : desc.outputs)
        if (v >= 0) patch->produced[v] = 1;
    } else {
      patch->root[desc.outputs[0]] = patch->root[desc.inputs[0]];  // a view: no kernel
    }
    // A constant goes to the device as it is only if a node reads it so: not the weights of a
    // Conv or a MatMul/Gemm that packed them at compile (their kernels read the packed copy
    // alone), which would otherwise be held twice. Once its last reader has its copy, the host
    // may free it (ABI 1.1): released here, node by node, the host's weights and the device's
    // did not both peak at once (BERT on opencl,cpu held 1.14 GiB against 0.61 on the CPU).
    for (size_t k = 0; k < desc.inputs.size(); ++k) {
      const int32_t v = desc.inputs[k];
      if (v < 0 || !graph.values[v].constant) continue;
      const std::string_view op = desc.op->op_type;
      const bool packed_conv =
          (op == "Conv" || op == "ConvTranspose") && k == 1 && desc.packed && params(desc).get();
      const bool packed_gemm = (op == "MatMul" || op == "Gemm") && k == 1 && desc.packed;
      if (!packed_conv && !packed_gemm && upload_bytes[v] && !patch->constants[v]) {
        const void* data = graph.values[v].constant;
        const std::string key = content_key("plain", data, upload_bytes[v]);
        auto make = [&](cl_mem* mem) -> Status {
          cl_int err = CL_SUCCESS;
          *mem = clCreateBuffer(device.context.get(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                upload_bytes[v], const_cast<void*>(data), &err);
          if (err != CL_SUCCESS)
            return cl_fail(err, "upload of constant '" + patch->value_names[v] + "' (" +
                                    format_bytes(upload_bytes[v]) + ")");
          return {};
        };
        if (Status s = device.constant(key, make, &patch->constants[v]); !s.ok()) return s;
      }
      if (--readers[v] == 0) constant_done(graph, v);
    }
    patch->nodes.push_back(std::move(desc));
  }
  for (size_t i = 0; i < graph.num_outputs; ++i) {
    int32_t v = graph.outputs[i];
    if (!in_range(v) || !available[v])
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "compile: graph output " + std::to_string(i) + " is not produced by a node");
    patch->outputs.push_back(v);
  }
  fuse_conv_activations(patch);
  // The intermediates' lifetimes, the same every run: values written here with a buffer of their
  // own (roots) that no graph output lives in (those take the host's buffers).
  patch->intermediate.assign(n, 0);
  for (size_t v = 0; v < n; ++v)
    patch->intermediate[v] = patch->produced[v] && patch->root[v] == static_cast<int32_t>(v);
  for (int32_t v : patch->outputs) patch->intermediate[patch->root[v]] = 0;
  patch->first_write.assign(n, -1);
  std::vector<int32_t> last_read(n, -1);
  for (size_t i = 0; i < patch->nodes.size(); ++i) {
    const NodeDesc& desc = patch->nodes[i];
    for (int32_t v : desc.outputs)
      if (v >= 0 && patch->first_write[patch->root[v]] < 0)
        patch->first_write[patch->root[v]] = static_cast<int32_t>(i);
    for (int32_t v : desc.inputs)
      if (v >= 0) last_read[patch->root[v]] = static_cast<int32_t>(i);
  }
  patch->dies_after.assign(patch->nodes.size(), {});
  for (size_t v = 0; v < n; ++v)
    if (patch->intermediate[v] && last_read[v] >= 0)
      patch->dies_after[static_cast<size_t>(last_read[v])].push_back(static_cast<int32_t>(v));
  return {};
}

size_t dtype_size(int32_t dtype);

// Compiles a patch; with `restored` (executable_deserialize), the constants' device copies
// come from the cache entry instead of being packed and uploaded.
Status compile_with(quilt_device_s& device, const quilt_graph_t& graph,
                    const std::map<std::string, RestoredConstant>* restored,
                    quilt_executable_t* executable) {
  auto patch = std::make_shared<Patch>();
  t_shared_constants = t_made_constants = 0;
  // The host's content hashes of the constants (ABI 1.2), so content_key hashes nothing.
  std::map<const void*, HostHash> host_hashes;
  if (graph.struct_size >=
          offsetof(quilt_graph_t, constant_hashes) + sizeof(graph.constant_hashes) &&
      graph.constant_hashes)
    for (size_t v = 0; v < graph.num_values; ++v) {
      const quilt_value_t& value = graph.values[v];
      const quilt_hash128_t h = graph.constant_hashes[v];
      if (!value.constant || value.info.rank < 0 || (h.lo == 0 && h.hi == 0)) continue;
      const int64_t count = element_count({value.info.dims, static_cast<size_t>(value.info.rank)});
      const size_t bytes = static_cast<size_t>(count) * dtype_size(value.info.dtype);
      host_hashes[value.constant] = {h.lo, h.hi, bytes};
    }
  struct Scope {  // the thread's compile state, reset however compile ends
    ~Scope() {
      t_host_hashes = nullptr;
      t_used_constants = nullptr;
      t_used_programs = nullptr;
      t_restored = nullptr;
    }
  } scope;
  t_host_hashes = &host_hashes;
  t_used_constants = &patch->used_constants;
  t_used_programs = &patch->programs;
  t_restored = restored;
  const WideGraph wide(graph);  // half constants widened: their pointers are not the host's
  if (Status s = compile_patch(device, wide.graph, patch.get()); !s.ok()) return s;
  patch->half_dtype = wide.half_dtype;
  log(QUILT_LOG_DEBUG,
      std::string(restored ? "deserialize: " : "compile: ") + std::to_string(graph.num_nodes) +
          " nodes, " + std::to_string(t_made_constants) + " constants uploaded, " +
          std::to_string(t_shared_constants) + " already on the device (same content)" +
          (restored ? ", the others from the cache entry" : ""));
  *executable = new quilt_executable_s{std::move(patch)};
  return {};
}

quilt_status_t compile(quilt_device_t device, const quilt_graph_t* graph,
                       quilt_executable_t* executable) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: graph struct too small");
    if (Status s = device->ready(); !s.ok()) return s;
    return compile_with(*device, *graph, nullptr, executable);
  });
}

quilt_status_t executable_serialize(quilt_device_t device, quilt_executable_t executable,
                                    quilt_status_t (*write)(void*, const void*, size_t),
                                    void* write_context) {
  quilt_status_t host_failure = nullptr;  // the host's write failure, returned as it is
  quilt_status_t status = guarded([&]() -> Status {
    const Patch& patch = *executable->patch;
    CacheImage image;
    image.gemm_engine = device->gemm_engine.load();
    for (const std::string& family : patch.programs) {
      cl_program program = nullptr;
      if (Status s = device->program(family, &program); !s.ok()) return s;
      std::string binary = program_binary(program);
      if (binary.empty())
        return fail(QUILT_STATUS_NOT_IMPLEMENTED,
                    "executable_serialize: the driver gives no binary of program " + family);
      image.programs.emplace_back(family, std::move(binary));
    }
    std::set<std::string> seen;
    for (const auto& [key, mem] : patch.used_constants)
      if (seen.insert(key).second) image.constants.emplace_back(key, mem);
    Status s = write_cache_image(*device, image, [&](const void* data, size_t bytes) -> Status {
      if (bytes == 0 || !(host_failure = write(write_context, data, bytes))) return {};
      return {QUILT_STATUS_RUNTIME_ERROR, "host write failed"};  // stops the writing
    });
    return host_failure ? Status{} : s;  // the host's failure is returned below, as it is
  });
  return host_failure ? host_failure : status;
}

quilt_status_t executable_deserialize(quilt_device_t device, const quilt_graph_t* graph,
                                      const void* data, size_t bytes,
                                      quilt_executable_t* executable) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "executable_deserialize: graph struct too small");
    if (Status s = device->ready(); !s.ok()) return s;
    ParsedCacheImage image;
    if (Status s = read_cache_image(data, bytes, &image); !s.ok()) return s;
    // The GEMM engine the weights were packed for: the device's, unless it has none yet.
    if (image.gemm_engine != GemmEngine::kUndecided) {
      GemmEngine undecided = GemmEngine::kUndecided;
      device->gemm_engine.compare_exchange_strong(undecided, image.gemm_engine);
      if (device->gemm_engine.load() != image.gemm_engine)
        return fail(QUILT_STATUS_INVALID_ARGUMENT,
                    std::string("executable cache entry: packed for the GEMM engine ") +
                        engine_name(image.gemm_engine) + ", the device runs " +
                        engine_name(device->gemm_engine.load()));
    }
    for (const auto& [family, binary] : image.programs)
      if (!device->adopt_program(family, binary))
        return fail(QUILT_STATUS_DEVICE_ERROR,
                    "executable cache entry: the driver refused the binary of program " + family);
    return compile_with(*device, *graph, &image.constants, executable);
  });
}

void executable_release(quilt_device_t, quilt_executable_t executable) {
  delete executable;
}

size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case QUILT_DTYPE_BOOL:
    case QUILT_DTYPE_UINT8:
    case QUILT_DTYPE_INT8:
      return 1;
    case QUILT_DTYPE_FLOAT16:
    case QUILT_DTYPE_BFLOAT16:
    case QUILT_DTYPE_INT16:
    case QUILT_DTYPE_UINT16:
      return 2;
    case QUILT_DTYPE_INT64:
    case QUILT_DTYPE_UINT64:
    case QUILT_DTYPE_FLOAT64:
      return 8;
    default:
      return 4;
  }
}

// Enqueues one execution of the patch; the caller holds the device's enqueue lock.
Status enqueue_patch(quilt_device_s& device, const Patch& patch, const quilt_execute_args_t& args,
                     std::vector<cl_event> waits, cl_event* first, cl_event* last,
                     std::vector<NodeEvents>* node_events) {
  const size_t n = patch.value_names.size();
  std::vector<std::vector<int64_t>> shapes(n);
  for (size_t v = 0; v < n; ++v) {
    const quilt_tensor_info_t& info = args.values[v];
    if (info.rank < 0)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "execute: value '" + patch.value_names[v] + "' has unknown rank");
    shapes[v].assign(info.dims, info.dims + info.rank);
    if (element_count(shapes[v]) >= (int64_t{1} << 31))
      return fail(QUILT_STATUS_NOT_IMPLEMENTED, "execute: value '" + patch.value_names[v] + "' " +
                                                    format_dims(shapes[v]) +
                                                    " has 2^31 or more elements");
  }
  std::vector<cl_mem> in_mems(patch.inputs.size()), out_mems(patch.outputs.size());
  Launch launch(device, std::move(shapes), std::vector<cl_mem>(n, nullptr), std::move(waits));
  // On a host-memory device the pointers are the host's: each becomes a buffer over that
  // memory when it is aligned as the device needs, else a pool buffer staged in (and out) by
  // the queue. The wrappers go with this call; OpenCL keeps them until their commands end.
  std::vector<Mem> wrappers;
  std::vector<std::pair<size_t, bool>> synced_outputs;  // (output, wrapped: map; else read)
  auto host_buffer = [&](void* ptr, int32_t v, bool input, cl_mem* out, bool* wrapped) -> Status {
    *out = nullptr;
    *wrapped = false;
    if (!ptr) return {};  // empty
    const size_t bytes = element_count(launch.dims(v)) * dtype_size(args.values[v].dtype);
    if (reinterpret_cast<uintptr_t>(ptr) % device.entry->base_align == 0) {
      cl_int err = CL_SUCCESS;
      const cl_mem_flags access = input ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE;
      *wrappers.emplace_back().out() =
          clCreateBuffer(device.context.get(), access | CL_MEM_USE_HOST_PTR, bytes, ptr, &err);
      if (err != CL_SUCCESS)
        return cl_fail(err, "wrap the host memory of '" + patch.value_names[v] + "'");
      *out = wrappers.back().get();
      *wrapped = true;
      return {};
    }
    if (Status s = launch.scratch(bytes, out); !s.ok())
      return {s.code, s.message + " '" + patch.value_names[v] + "'"};
    return input ? launch.write(*out, ptr, bytes) : Status{};
  };
  for (const bool input : {true, false}) {
    const std::vector<int32_t>& values = input ? patch.inputs : patch.outputs;
    std::vector<cl_mem>& mems = input ? in_mems : out_mems;
    for (size_t i = 0; i < values.size(); ++i) {
      void* ptr = input ? args.inputs[i] : args.outputs[i];
      if (!device.entry->host_memory) {
        mems[i] = static_cast<cl_mem>(ptr);
        continue;
      }
      bool wrapped = false;
      if (Status s = host_buffer(ptr, values[i], input, &mems[i], &wrapped); !s.ok()) return s;
      if (!input && mems[i]) synced_outputs.emplace_back(i, wrapped);
    }
  }
  // Half inputs are widened into float32 buffers; half outputs are written in float32 and
  // rounded into the host's buffers at the end.
  const std::vector<cl_mem> host_out_mems = out_mems;
  auto convert = [&](int32_t v, cl_mem src, cl_mem dst, bool widen) -> Status {
    const int count = static_cast<int>(element_count(launch.dims(v)));
    const bool f16 = patch.half_dtype[v] == QUILT_DTYPE_FLOAT16;
    const char* kernel = widen ? (f16 ? "float16_to_float" : "bfloat16_to_float")
                               : (f16 ? "float_to_float16" : "float_to_bfloat16");
    return launch.run("half", kernel, {static_cast<size_t>(count), 1, 1}, {kLocal1d, 1, 1}, src,
                      dst, count);
  };
  for (const bool input : {true, false}) {
    const std::vector<int32_t>& values = input ? patch.inputs : patch.outputs;
    std::vector<cl_mem>& mems = input ? in_mems : out_mems;
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t v = values[i];
      if (!patch.half_dtype[v] || !mems[i]) continue;
      cl_mem wide = nullptr;
      if (Status s = launch.scratch(element_count(launch.dims(v)) * sizeof(float), &wide); !s.ok())
        return {s.code, s.message + " '" + patch.value_names[v] + "'"};
      if (input)
        if (Status s = convert(v, mems[i], wide, true); !s.ok()) return s;
      mems[i] = wide;
    }
  }
  std::vector<cl_mem> buffers(n, nullptr);
  std::vector<char> assigned(n, 0);
  for (size_t v = 0; v < n; ++v)
    if (patch.constants[v]) buffers[v] = patch.constants[v]->get(), assigned[v] = 1;
  for (size_t i = 0; i < patch.inputs.size(); ++i)
    buffers[patch.inputs[i]] = in_mems[i], assigned[patch.inputs[i]] = 1;
  // An output a kernel writes gets the host's buffer; so does the value an output is a view of,
  // unless that value already has a buffer (then the output is a copy at the boundary).
  for (size_t i = 0; i < patch.outputs.size(); ++i) {
    int32_t v = patch.outputs[i];
    if (patch.root[v] == v && !assigned[v]) buffers[v] = out_mems[i], assigned[v] = 1;
  }
  for (size_t i = 0; i < patch.outputs.size(); ++i) {
    int32_t r = patch.root[patch.outputs[i]];
    if (!assigned[r] && patch.produced[r]) buffers[r] = out_mems[i], assigned[r] = 1;
  }
  for (size_t v = 0; v < n; ++v) launch.set_buffer(static_cast<int32_t>(v), buffers[v]);
  // Intermediates get a buffer when their first writer runs and give it back after their last
  // reader: one buffer per value for the whole launch held Real-ESRGAN's 1,093 nodes' outputs
  // at once (1.3 GiB peak on opencl,cpu against 0.24 GiB on the CPU).
  std::multimap<size_t, cl_mem> dead;  // buffers of dead intermediates, by size
  std::vector<size_t> held(n, 0);      // bytes of each intermediate's buffer
  if (node_events) launch.time_nodes();
  for (size_t i = 0; i < patch.nodes.size(); ++i) {
    const NodeDesc& node = patch.nodes[i];
    for (int32_t v : node.outputs) {
      if (v < 0) continue;
      const int32_t r = patch.root[v];
      if (patch.intermediate[r] && patch.first_write[r] == static_cast<int32_t>(i) && !held[r]) {
        const size_t bytes = element_count(launch.dims(r)) * sizeof(float);
        if (bytes) {
          cl_mem mem = nullptr;
          // The smallest dead buffer that fits and wastes at most half of itself.
          auto it = dead.lower_bound(bytes);
          if (it != dead.end() && it->first <= 2 * bytes) {
            mem = it->second;
            held[r] = it->first;
            dead.erase(it);
          } else if (Status s = launch.scratch(bytes, &mem); !s.ok()) {
            return {s.code, s.message + " '" + patch.value_names[r] + "'"};
          } else {
            held[r] = (bytes + 255) / 256 * 256;
          }
          launch.set_buffer(r, mem);
        }
      }
      if (r != v) launch.set_buffer(v, launch.buffer(r));
    }
    if (node.op->enqueue && !node.folded) {  // else a view or a folded activation
      launch.begin_node(i);
      const size_t mark = launch.scratch_mark();
      if (Status s = node.op->enqueue(launch, node); !s.ok())
        return {s.code, s.message + " (" + node.name + ")"};
      // Its temporaries serve later nodes: held to the launch's end, ViT's attention operands
      // packed each run (12 layers of 1.2 MiB) added up.
      launch.release_scratch(mark);
    }
    for (int32_t v : patch.dies_after[i])
      if (held[v]) dead.emplace(held[v], launch.buffer(v));
  }
  for (size_t i = 0; i < patch.outputs.size(); ++i) {
    int32_t v = patch.outputs[i];
    cl_mem dst = out_mems[i], src = launch.buffer(v);
    if (dst && src != dst)
      if (Status s = launch.copy(src, dst, element_count(launch.dims(v)) * sizeof(float)); !s.ok())
        return s;
    if (dst && patch.half_dtype[v])
      if (Status s = convert(v, dst, host_out_mems[i], false); !s.ok()) return s;
  }
  for (const auto& [i, wrapped] : synced_outputs) {
    const int32_t v = patch.outputs[i];
    const size_t bytes = element_count(launch.dims(v)) * dtype_size(args.values[v].dtype);
    Status s = wrapped ? launch.sync_to_host(host_out_mems[i], bytes)
                       : launch.read(host_out_mems[i], args.outputs[i], bytes);
    if (!s.ok()) return s;
  }
  if (Status s = launch.finish(first, last); !s.ok()) return s;
  if (node_events) *node_events = launch.take_node_events();
  return {};
}

quilt_status_t execute(quilt_device_t device, quilt_executable_t executable,
                       const quilt_execute_args_t* args) {
  return guarded([&]() -> Status {
    if (!args || args->struct_size <
                     offsetof(quilt_execute_args_t, signal_event) + sizeof(args->signal_event))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "execute: args struct too small");
    std::vector<cl_event> waits;
    if (Status s =
            prepare_events(args->wait_events, args->num_wait_events, args->signal_event, &waits);
        !s.ok())
      return s;
    // node_timing is at the end of the struct: used only if the host's struct has it.
    const bool timing = args->struct_size >= offsetof(quilt_execute_args_t, node_timing_context) +
                                                 sizeof(args->node_timing_context) &&
                        args->node_timing && args->signal_event;
    cl_event first = nullptr, last = nullptr;
    std::vector<NodeEvents> node_events;
    Status status;
    {
      std::lock_guard lock(device->enqueue_mutex);
      status = enqueue_patch(*device, *executable->patch, *args, std::move(waits), &first, &last,
                             timing ? &node_events : nullptr);
    }
    if (timing && status.ok()) {
      EventState& e = args->signal_event->state;
      std::lock_guard lock(e.mutex);
      e.nodes = std::move(node_events);
      e.node_timing = args->node_timing;
      e.node_timing_context = args->node_timing_context;
      e.clock_offset_ns = device->clock_offset_ns;
    }
    signal(args->signal_event, first, last, status);
    return status;
  });
}

void release(void*) {
  set_host(nullptr);
}

const quilt_backend_t kBackend = {
    .struct_size = sizeof(quilt_backend_t),
    .abi_version = QUILT_BACKEND_ABI_VERSION,
    .name = "opencl",
    .version = "0.1.0",
    .context = nullptr,
    .release = release,
    .device_count = device_count,
    .device_info = device_info,
    .device_open = device_open,
    .device_close = device_close,
    .supports = supports,
    .compile = compile,
    .executable_release = executable_release,
    .execute = execute,
    .alloc = alloc,
    .free = free_memory,
    .copy_to_device = copy_to_device,
    .copy_to_host = copy_to_host,
    .event_create = event_create,
    .event_wait = event_wait,
    .event_query = event_query,
    .event_release = event_release,
    .event_timestamps = event_timestamps,
    // ABI 1.2's run brackets: nothing to do per run (buffers come from the launch's pool).
    .run_begin = nullptr,
    .run_end = nullptr,
    .executable_serialize = executable_serialize,
    .executable_deserialize = executable_deserialize,
    // Two OpenCL devices share no context here (each has its own): through the host.
    .copy_device_to_device = nullptr,
    // Claims node by node: no OpenCL kernel needs a neighbour to run.
    .supports_graph = nullptr,
};

}  // namespace

extern "C" QUILT_BACKEND_EXPORT quilt_status_t quilt_backend_init(const quilt_host_api_t* host,
                                                                  const quilt_backend_t** backend) {
  // status_create and abi_version sit at the same place in every version of the host api.
  if (host->abi_version >> 16 != QUILT_BACKEND_ABI_MAJOR) {
    std::string message =
        "[opencl] the host speaks ABI " + std::to_string(host->abi_version >> 16) + "." +
        std::to_string(host->abi_version & 0xffff) + ", this plugin was built for " +
        std::to_string(QUILT_BACKEND_ABI_MAJOR) + "." + std::to_string(QUILT_BACKEND_ABI_MINOR);
    return host->status_create(QUILT_STATUS_INVALID_ARGUMENT, message.c_str());
  }
  if (host->struct_size < offsetof(quilt_host_api_t, now_ns) + sizeof(host->now_ns))
    return host->status_create(QUILT_STATUS_INVALID_ARGUMENT,
                               "[opencl] the host api has no now_ns");
  set_host(host);
  try {
    enumerate_devices();
  } catch (const std::exception& e) {
    return host->status_create(QUILT_STATUS_RUNTIME_ERROR, e.what());
  }
  *backend = &kBackend;
  return nullptr;
}
