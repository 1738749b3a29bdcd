// What the sessions open on one device share: the context, the programs built in it and the
// constants uploaded to it, keyed by content (see SharedDevice in opencl.hpp).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {
std::mutex g_shared_mutex;
std::map<int32_t, std::weak_ptr<SharedDevice>> g_shared;  // by device index

// A 128-bit hash of bytes, 8 bytes at a time on four lanes (a few GB/s: ResNet-50's 98 MiB of
// weights in ~20 ms, against ~100 ms byte by byte), then the tail byte by byte.
std::pair<uint64_t, uint64_t> hash128(const void* data, size_t bytes) {
  constexpr uint64_t kMul[4] = {0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
                                0xd6e8feb86659fd93ull};
  uint64_t lane[4] = {bytes, ~bytes, bytes * kMul[2], bytes ^ kMul[3]};
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      lane[l] = (lane[l] ^ w) * kMul[l];
      lane[l] ^= lane[l] >> 29;
    }
  for (; i < bytes; ++i) lane[i & 3] = (lane[i & 3] ^ p[i]) * kMul[i & 3];
  auto mix = [](uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 33);
  };
  const uint64_t a = mix(lane[0] + mix(lane[1] ^ kMul[0]) + mix(lane[2]) * 3 + mix(lane[3]) * 7);
  const uint64_t b = mix(lane[3] + mix(lane[2] ^ kMul[1]) + mix(lane[1]) * 5 + mix(lane[0]) * 11);
  return {a, b};
}
}  // namespace

Status packed_constant(quilt_device_s& device, size_t count,
                       const std::function<void(float*)>& fill, const std::string& what,
                       cl_mem* mem) {
  const size_t bytes = count * sizeof(float);
  auto failed = [&](cl_int err) {
    return cl_fail(err, "upload of the packed weight '" + what + "' (" + format_bytes(bytes) + ")");
  };
  cl_int err = CL_SUCCESS;
  if (!device.entry->host_memory) {
    std::vector<float> packed(count, 0.0f);
    fill(packed.data());
    *mem = clCreateBuffer(device.context.get(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes,
                          packed.data(), &err);
    return err == CL_SUCCESS ? Status{} : failed(err);
  }
  // Packing into a vector and copying it held the weight twice at once (BERT's and GPT-2's
  // tied embeddings, 89 and 147 MiB, made the peak of a session's creation).
  const size_t align = std::max<size_t>(device.entry->base_align, 64);
  void* data = std::aligned_alloc(align, (bytes + align - 1) / align * align);
  if (!data)
    return fail(QUILT_STATUS_OUT_OF_MEMORY, "packing the weight '" + what + "': cannot allocate " +
                                                format_bytes(bytes) + " of host memory");
  std::memset(data, 0, bytes);
  fill(static_cast<float*>(data));
  *mem = clCreateBuffer(device.context.get(), CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, bytes, data,
                        &err);
  if (err == CL_SUCCESS) {
    err = clSetMemObjectDestructorCallback(
        *mem, [](cl_mem, void* memory) { std::free(memory); }, data);
    if (err == CL_SUCCESS) return {};
    clReleaseMemObject(*mem);
    *mem = nullptr;
  }
  std::free(data);
  return failed(err);
}

std::string content_key(const std::string& what, const void* data, size_t bytes) {
  // The host's hash of these bytes when it gave one (ABI 1.2: constant_hashes), else our own.
  if (t_host_hashes)
    if (auto it = t_host_hashes->find(data);
        it != t_host_hashes->end() && it->second.bytes == bytes)
      return what + "|" + std::to_string(bytes) + "|host|" + hex(it->second.hi) +
             hex(it->second.lo);
  const auto [a, b] = hash128(data, bytes);
  return what + "|" + std::to_string(bytes) + "|" + hex(a) + hex(b);
}

Status shared_device(int32_t index, std::shared_ptr<SharedDevice>* out) {
  std::lock_guard lock(g_shared_mutex);
  if ((*out = g_shared[index].lock())) return {};
  const DeviceEntry& entry = devices()[index];
  auto shared = std::make_shared<SharedDevice>();
  cl_int err = CL_SUCCESS;
  cl_device_id id = entry.id;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   reinterpret_cast<cl_context_properties>(entry.platform), 0};
  *shared->context.out() = clCreateContext(props, 1, &id, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return cl_fail(err, "create a context on '" + entry.name + "'");
  g_shared[index] = shared;
  *out = std::move(shared);
  return {};
}

}  // namespace quilt::opencl

std::string quilt_device_s::program_key(const std::string& family) const {
  return family + "\n" + options.extra_build_options + "\n" + options.cache_dir;
}

bool quilt_device_s::adopt_program(const std::string& family, const std::string& binary) {
  using namespace quilt::opencl;
  const std::string key = program_key(family);
  std::lock_guard lock(shared->mutex);
  if (shared->programs.count(key)) return true;
  cl_program p = nullptr;
  if (!program_from_binary(context.get(), *entry, build_options_for(*entry, options), binary, &p))
    return false;
  shared->programs.emplace(key, Program(p));
  return true;
}

quilt::opencl::Status quilt_device_s::program(const std::string& family, cl_program* out) {
  using namespace quilt::opencl;
  const std::string key = program_key(family);
  if (t_used_programs) t_used_programs->insert(family);
  std::lock_guard lock(shared->mutex);
  auto it = shared->programs.find(key);
  if (it == shared->programs.end()) {
    cl_program p = nullptr;
    if (Status s = build_program(context.get(), *entry, options, family, &p); !s.ok()) return s;
    it = shared->programs.emplace(key, Program(p)).first;
  }
  *out = it->second.get();
  return {};
}
