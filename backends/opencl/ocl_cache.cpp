// The executable cache's bytes (ABI 1.2's executable_serialize / executable_deserialize): what a
// compiled patch needs besides its graph, which deserialize compiles again cheaply (node checks,
// views, fusions): the binaries of the programs it launches, the device copies of its constants
// (packed weights, plain uploads) by content key, and the GEMM engine they were packed for.
//
// Layout (little-endian, offsets from the start of the bytes):
//   "QCLEXE01", u32 GEMM engine, u32 programs, u32 constants, u32 0,
//   per program: u32 name length, name, u64 binary bytes, u64 offset,
//   per constant: u32 key length, key, u64 bytes, u64 offset,
//   then each binary and constant at an offset that is a multiple of 4096, so that on a device
//   whose memory is the host's a constant is used in place (the host maps the entry at a page
//   boundary and keeps it while the executable lives).
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {
constexpr char kMagic[8] = {'Q', 'C', 'L', 'E', 'X', 'E', '0', '1'};
constexpr uint64_t kAlign = 4096;

uint64_t align_up(uint64_t v) {
  return (v + kAlign - 1) / kAlign * kAlign;
}

// Reads fields from the bytes, failing (never reading past the end) when they do not fit.
struct Reader {
  const unsigned char* data;
  size_t size, pos = 0;
  bool ok = true;
  template <class T>
  T pod() {
    T v{};
    if (!ok || size - pos < sizeof v) return ok = false, v;
    std::memcpy(&v, data + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  std::string str() {
    const auto n = pod<uint32_t>();
    if (!ok || size - pos < n) return ok = false, std::string();
    std::string s(reinterpret_cast<const char*>(data + pos), n);
    pos += n;
    return s;
  }
  // A region [offset, offset + bytes) inside the data, aligned as written.
  const void* region(uint64_t offset, uint64_t bytes) {
    if (!ok || offset % kAlign != 0 || offset > size || bytes > size - offset) {
      ok = false;
      return nullptr;
    }
    return data + offset;
  }
};

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace

Status read_buffer(quilt_device_s& device, cl_mem mem, std::string* out) {
  size_t size = 0;
  if (cl_int err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, nullptr);
      err != CL_SUCCESS)
    return cl_fail(err, "size of a constant buffer");
  out->resize(size);
  if (size == 0) return {};
  if (cl_int err = clEnqueueReadBuffer(device.queue.get(), mem, CL_TRUE, 0, size, out->data(), 0,
                                       nullptr, nullptr);
      err != CL_SUCCESS)
    return cl_fail(err, "read back a constant buffer (" + format_bytes(size) + ")");
  return {};
}

Status write_cache_image(quilt_device_s& device, const CacheImage& image,
                         const CacheWriter& write) {
  // The index first: its size decides where the data begins.
  std::string index(kMagic, sizeof kMagic);
  put(index, static_cast<uint32_t>(image.gemm_engine));
  put(index, static_cast<uint32_t>(image.programs.size()));
  put(index, static_cast<uint32_t>(image.constants.size()));
  put(index, uint32_t{0});
  uint64_t index_bytes = index.size();
  for (const auto& [name, binary] : image.programs) index_bytes += 4 + name.size() + 16;
  std::vector<size_t> sizes;
  for (const auto& [key, mem] : image.constants) {
    index_bytes += 4 + key.size() + 16;
    size_t& size = sizes.emplace_back(0);
    if (cl_int err = clGetMemObjectInfo(mem->get(), CL_MEM_SIZE, sizeof size, &size, nullptr);
        err != CL_SUCCESS)
      return cl_fail(err, "size of a constant buffer");
  }
  uint64_t offset = align_up(index_bytes);
  std::vector<std::pair<const void*, uint64_t>> blobs;  // in offset order
  for (const auto& [name, binary] : image.programs) {
    put(index, static_cast<uint32_t>(name.size()));
    index += name;
    put(index, static_cast<uint64_t>(binary.size()));
    put(index, offset);
    blobs.emplace_back(binary.data(), binary.size());
    offset = align_up(offset + binary.size());
  }
  for (size_t i = 0; i < image.constants.size(); ++i) {
    const std::string& key = image.constants[i].first;
    put(index, static_cast<uint32_t>(key.size()));
    index += key;
    put(index, static_cast<uint64_t>(sizes[i]));
    put(index, offset);
    offset = align_up(offset + sizes[i]);
  }
  const std::string zeros(kAlign, '\0');
  uint64_t at = index.size();
  auto pad_and_write = [&](const void* data, size_t bytes) -> Status {
    if (Status s = write(zeros.data(), align_up(at) - at); !s.ok()) return s;
    at = align_up(at) + bytes;
    return write(data, bytes);
  };
  if (Status s = write(index.data(), index.size()); !s.ok()) return s;
  for (const auto& [data, bytes] : blobs)
    if (Status s = pad_and_write(data, bytes); !s.ok()) return s;
  std::string contents;  // one constant at a time, read back from the device
  for (const auto& [key, mem] : image.constants) {
    if (Status s = read_buffer(device, mem->get(), &contents); !s.ok()) return s;
    if (Status s = pad_and_write(contents.data(), contents.size()); !s.ok()) return s;
  }
  return {};
}

Status read_cache_image(const void* data, size_t bytes, ParsedCacheImage* out) {
  Reader r{static_cast<const unsigned char*>(data), bytes};
  auto bad = [](const std::string& what) {
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "executable cache entry: " + what);
  };
  if (!data || bytes < sizeof kMagic || std::memcmp(data, kMagic, sizeof kMagic) != 0)
    return bad("not the OpenCL backend's (format QCLEXE01)");
  r.pos = sizeof kMagic;
  out->gemm_engine = static_cast<GemmEngine>(r.pod<uint32_t>());
  const auto programs = r.pod<uint32_t>(), constants = r.pod<uint32_t>();
  r.pod<uint32_t>();
  if (out->gemm_engine != GemmEngine::kUndecided && out->gemm_engine != GemmEngine::kOwn &&
      out->gemm_engine != GemmEngine::kClBlast)
    return bad("unknown GEMM engine " + std::to_string(static_cast<uint32_t>(out->gemm_engine)));
  for (uint32_t i = 0; i < programs && r.ok; ++i) {
    std::string name = r.str();
    const auto size = r.pod<uint64_t>(), offset = r.pod<uint64_t>();
    const void* binary = r.region(offset, size);
    if (r.ok)
      out->programs.emplace_back(std::move(name),
                                 std::string(static_cast<const char*>(binary), size));
  }
  for (uint32_t i = 0; i < constants && r.ok; ++i) {
    std::string key = r.str();
    const auto size = r.pod<uint64_t>(), offset = r.pod<uint64_t>();
    const void* at = r.region(offset, size);
    if (r.ok) out->constants[std::move(key)] = {at, static_cast<size_t>(size)};
  }
  if (!r.ok) return bad("truncated or inconsistent index (" + std::to_string(bytes) + " bytes)");
  return {};
}

Status restore_constant(quilt_device_s& device, const RestoredConstant& c, cl_mem* mem,
                        bool* in_place) {
  cl_int err = CL_SUCCESS;
  *in_place = device.entry->host_memory &&
              reinterpret_cast<uintptr_t>(c.data) % device.entry->base_align == 0;
  // In place: the kernels only read constants, so the host's read-only view of the entry is
  // never written.
  const cl_mem_flags flags =
      CL_MEM_READ_ONLY | (*in_place ? CL_MEM_USE_HOST_PTR : CL_MEM_COPY_HOST_PTR);
  *mem = clCreateBuffer(device.context.get(), flags, c.bytes, const_cast<void*>(c.data), &err);
  if (err != CL_SUCCESS)
    return cl_fail(
        err, "restore of a constant from the executable cache (" + format_bytes(c.bytes) + ")");
  return {};
}

}  // namespace quilt::opencl
