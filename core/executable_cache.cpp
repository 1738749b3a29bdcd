// The executable cache: keys, entry files, and compile_cached (see executable_cache.hpp).
#include "core/executable_cache.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

// ---- hashing ----

namespace {

// 64 x 64 -> 128-bit product, folded to 64 bits: every input bit reaches every output bit.
inline uint64_t fold_multiply(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
}

inline uint64_t load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}

inline uint64_t avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919e3779f9ull;
  h ^= h >> 32;
  return h;
}

// Odd constants (digits of pi and e, as hex) that decorrelate the lanes.
constexpr uint64_t kSecret[10] = {
    0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull, 0x082efa98ec4e6c89ull,
    0x452821e638d01377ull, 0xbe5466cf34e90c6cull, 0xc0ac29b7c97c50ddull, 0x3f84d5b5b5470917ull,
    0xb7e151628aed2a6bull, 0x9216d5d98979fb1bull};

}  // namespace

// Four independent lanes of 16 bytes per 64-byte block (the products pipeline: several GB/s,
// so ResNet-50's 98 MiB of weights take ~15 ms), each adding a folded product of its two
// words (keyed by the secret) and the words themselves, then a tail block and a final mix.
// The lanes only add, so the length, which two of them start from, is added at the end: the
// bytes can come in pieces.
ContentHasher::ContentHasher(uint64_t seed) : acc_{seed ^ kSecret[8], 0, seed + kSecret[0], 0} {}

void ContentHasher::update(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += bytes;
  auto block = [this](const unsigned char* b) {
    for (int l = 0; l < 4; ++l) {
      const uint64_t x = load64(b + 16 * l), y = load64(b + 16 * l + 8);
      acc_[l] += fold_multiply(x ^ kSecret[2 * l], y ^ kSecret[2 * l + 1]) + (x ^ (y << 1));
    }
  };
  if (pending_bytes_ > 0) {
    const size_t take = std::min(bytes, sizeof pending_ - pending_bytes_);
    std::memcpy(pending_ + pending_bytes_, p, take);
    pending_bytes_ += take;
    p += take;
    bytes -= take;
    if (pending_bytes_ < sizeof pending_) return;
    block(pending_);
    pending_bytes_ = 0;
  }
  for (; bytes >= 64; p += 64, bytes -= 64) block(p);
  if (bytes) std::memcpy(pending_, p, bytes);
  pending_bytes_ = bytes;
}

quilt_hash128_t ContentHasher::finish() const {
  // Lanes 1 and 3 start from (bytes ^ K9) and ~bytes.
  uint64_t acc[4] = {acc_[0], acc_[1] + (total_ ^ kSecret[9]), acc_[2], acc_[3] + ~total_};
  if (pending_bytes_ > 0) {
    unsigned char tail[64] = {0};
    std::memcpy(tail, pending_, pending_bytes_);
    for (int l = 0; l < 4; ++l) {
      const uint64_t a = load64(tail + 16 * l), b = load64(tail + 16 * l + 8);
      acc[l] += fold_multiply(a ^ kSecret[2 * l + 1], b ^ kSecret[2 * l]) + (a ^ (b << 1));
    }
  }
  const uint64_t lo = avalanche(fold_multiply(acc[0] ^ kSecret[4], acc[1] ^ kSecret[5]) +
                                fold_multiply(acc[2] ^ kSecret[6], acc[3] ^ kSecret[7]) + total_);
  const uint64_t hi = avalanche(fold_multiply(acc[3] ^ kSecret[0], acc[2] ^ kSecret[1]) +
                                fold_multiply(acc[1] ^ kSecret[2], acc[0] ^ kSecret[3]) + lo);
  return {lo, hi};
}

quilt_hash128_t content_hash(const void* data, size_t bytes, uint64_t seed) {
  ContentHasher h(seed);
  h.update(data, bytes);
  return h.finish();
}

std::string hex128(quilt_hash128_t h) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(h.hi),
                static_cast<unsigned long long>(h.lo));
  return text;
}

// ---- the key ----

namespace {

// Appends fixed-size fields and length-prefixed strings, so that no two graphs read the same.
struct KeyWriter {
  std::string out;
  template <class T>
  void pod(const T& v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const char* s, size_t n) {
    pod(static_cast<uint64_t>(n));
    if (n) out.append(s, n);
  }
  void str(const char* s) { s ? str(s, std::strlen(s)) : pod(~uint64_t{0}); }
  void info(const quilt_tensor_info_t& t) {
    pod(t.dtype);
    pod(t.rank);
    for (int32_t d = 0; d < t.rank; ++d) pod(t.dims[d]);
  }
  void ints(const int32_t* v, size_t n) {
    pod(static_cast<uint64_t>(n));
    for (size_t i = 0; i < n; ++i) pod(v[i]);
  }
};

size_t constant_bytes(const quilt_tensor_info_t& t) {
  if (t.rank < 0) return 0;
  int64_t count = 1;
  for (int32_t d = 0; d < t.rank; ++d) count *= std::max<int64_t>(t.dims[d], 0);
  return dtype_nbytes(static_cast<DType>(t.dtype), count);
}

}  // namespace

quilt_hash128_t cache_key(const Device& device, AbiGraph& graph) {
  const quilt_graph_t& g = *graph.get();
  KeyWriter k;
  k.str("quilt executable cache 1");
  k.str(version());
  k.str(device.identity().c_str());
  k.pod(static_cast<uint64_t>(g.num_values));
  for (size_t v = 0; v < g.num_values; ++v) {
    const quilt_value_t& value = g.values[v];
    k.str(value.name);
    k.info(value.info);
    k.pod(static_cast<uint8_t>(value.constant != nullptr));
    if (value.constant) k.pod(g.constant_hashes ? g.constant_hashes[v] : quilt_hash128_t{0, 0});
  }
  k.pod(static_cast<uint64_t>(g.num_nodes));
  for (size_t n = 0; n < g.num_nodes; ++n) {
    const quilt_node_t& node = g.nodes[n];
    k.str(node.name);
    k.str(node.op_type);
    k.str(node.domain);
    k.pod(node.opset);
    k.pod(node.index);
    k.ints(node.inputs, node.num_inputs);
    k.ints(node.outputs, node.num_outputs);
    k.pod(static_cast<uint64_t>(node.num_attributes));
    for (size_t a = 0; a < node.num_attributes; ++a) {
      const quilt_attribute_t& attr = node.attributes[a];
      k.str(attr.name);
      k.pod(attr.kind);
      k.pod(attr.f);
      k.pod(attr.i);
      k.str(attr.s, attr.s ? attr.s_size : 0);
      k.pod(static_cast<uint64_t>(attr.count));
      for (size_t i = 0; attr.floats && i < attr.count; ++i) k.pod(attr.floats[i]);
      for (size_t i = 0; attr.ints && i < attr.count; ++i) k.pod(attr.ints[i]);
      for (size_t i = 0; attr.strings && i < attr.count; ++i) k.str(attr.strings[i]);
      const size_t tensors = attr.kind == QUILT_ATTRIBUTE_TENSOR ? 1
                             : attr.tensors                      ? attr.count
                                                                 : 0;
      for (size_t i = 0; attr.tensors && i < tensors; ++i) {
        k.info(attr.tensors[i].info);
        const size_t bytes = attr.tensors[i].data ? constant_bytes(attr.tensors[i].info) : 0;
        k.pod(content_hash(attr.tensors[i].data, bytes));
      }
    }
  }
  k.ints(g.inputs, g.num_inputs);
  k.ints(g.outputs, g.num_outputs);
  return content_hash(k.out.data(), k.out.size(), 0x51c7a9e3u);
}

// ---- entry files ----

namespace {

constexpr char kMagic[8] = {'Q', 'U', 'I', 'L', 'T', 'E', 'X', 'E'};
constexpr uint32_t kFormat = 1;
constexpr size_t kHeaderBytes = 4096;

struct Header {
  char magic[8];
  uint32_t format;
  uint32_t header_bytes;
  quilt_hash128_t key;
  uint64_t payload_bytes;
  quilt_hash128_t payload_hash;
  char description[4096 - 56];  // NUL-terminated, for people reading the directory
};
static_assert(sizeof(Header) == kHeaderBytes);

// A read-only private mapping of a whole file, unmapped with the last reference.
struct Mapping {
  void* base = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (base != MAP_FAILED) munmap(base, bytes);
  }
};

// The entry's payload, mapped; null and *why when the file is missing ("" then) or unusable.
std::shared_ptr<Mapping> open_entry(const std::filesystem::path& path, quilt_hash128_t key,
                                    std::string* why) {
  why->clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;  // a miss
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(kHeaderBytes)) {
    ::close(fd);
    *why = "it is truncated (" + std::to_string(st.st_size) + " bytes, shorter than its header)";
    return nullptr;
  }
  auto map = std::make_shared<Mapping>();
  map->bytes = static_cast<size_t>(st.st_size);
  // Private and writable: a backend that wraps the bytes in place can never write the file.
  map->base = mmap(nullptr, map->bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map->base == MAP_FAILED) {
    *why = std::string("it cannot be mapped: ") + std::strerror(errno);
    return nullptr;
  }
  Header h;
  std::memcpy(&h, map->base, sizeof h);
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.format != kFormat ||
      h.header_bytes != kHeaderBytes) {
    *why = "it is not a Quilt executable cache entry of format " + std::to_string(kFormat);
    return nullptr;
  }
  if (h.key.lo != key.lo || h.key.hi != key.hi) {
    *why = "its key is " + hex128(h.key) + ", not " + hex128(key);
    return nullptr;
  }
  if (h.payload_bytes != map->bytes - kHeaderBytes) {
    *why = "it is truncated or extended (payload of " + std::to_string(map->bytes - kHeaderBytes) +
           " bytes, its header says " + std::to_string(h.payload_bytes) + ")";
    return nullptr;
  }
  const char* payload = static_cast<const char*>(map->base) + kHeaderBytes;
  const quilt_hash128_t sum = content_hash(payload, h.payload_bytes);
  if (sum.lo != h.payload_hash.lo || sum.hi != h.payload_hash.hi) {
    *why = "it is corrupt (checksum mismatch)";
    return nullptr;
  }
  return map;
}

// An entry being written: a temporary file in the directory, the payload streamed into it as
// the backend writes (through a small buffer, hashed on the way; the header, which holds the
// payload's size and checksum, is written last, over the space kept for it), then renamed into
// place. Nothing but the buffer is held in memory, whatever the entry's size. Destroyed
// without commit(), it removes the temporary file.
class EntryWriter {
 public:
  EntryWriter(std::filesystem::path path, quilt_hash128_t key) : path_(std::move(path)), key_(key) {
    std::error_code ec;
    std::filesystem::create_directories(path_.parent_path(), ec);
    if (ec) {
      failure_ = "cannot create " + path_.parent_path().string() + ": " + ec.message();
      return;
    }
    static std::atomic<uint64_t> counter{0};
    tmp_ = path_;
    tmp_ += ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      failure_ = "cannot write " + tmp_.string() + ": " + std::strerror(errno);
      return;
    }
    // The header's place; its contents come at commit.
    if (::lseek(fd_, kHeaderBytes, SEEK_SET) != static_cast<off_t>(kHeaderBytes)) fail_errno();
    buffer_.reserve(kBufferBytes);
  }
  ~EntryWriter() {
    if (fd_ >= 0) ::close(fd_);
    if (!tmp_.empty() && !committed_) {
      std::error_code ec;
      std::filesystem::remove(tmp_, ec);
    }
  }
  EntryWriter(const EntryWriter&) = delete;
  EntryWriter& operator=(const EntryWriter&) = delete;

  // "" while every write succeeded, else what failed.
  const std::string& failure() const { return failure_; }

  // The backend's bytes, in order; throws (stopping executable_serialize) once a write failed.
  void append(const void* data, size_t bytes) {
    if (!failure_.empty()) throw Error(ErrorCode::Io, failure_);
    hasher_.update(data, bytes);
    payload_bytes_ += bytes;
    const auto* p = static_cast<const char*>(data);
    if (buffer_.size() + bytes > kBufferBytes) flush();
    if (bytes >= kBufferBytes) {
      write_all(p, bytes);  // large pieces go straight to the file
    } else {
      buffer_.insert(buffer_.end(), p, p + bytes);
    }
    if (!failure_.empty()) throw Error(ErrorCode::Io, failure_);
  }

  // Writes the header and renames the file into place; returns what failed, "" on success.
  std::string commit(const std::string& description) {
    if (failure_.empty()) flush();
    if (!failure_.empty()) return failure_;
    Header h{};
    std::memcpy(h.magic, kMagic, sizeof kMagic);
    h.format = kFormat;
    h.header_bytes = kHeaderBytes;
    h.key = key_;
    h.payload_bytes = payload_bytes_;
    h.payload_hash = hasher_.finish();
    std::snprintf(h.description, sizeof h.description, "%s\n", description.c_str());
    if (::lseek(fd_, 0, SEEK_SET) != 0) fail_errno();
    if (failure_.empty()) write_all(reinterpret_cast<const char*>(&h), sizeof h);
    if (failure_.empty() && ::close(fd_) != 0) fail_errno();
    fd_ = -1;
    if (!failure_.empty()) return failure_;
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) return "cannot rename into " + path_.string() + ": " + ec.message();
    committed_ = true;
    return "";
  }

 private:
  static constexpr size_t kBufferBytes = size_t{1} << 20;

  void fail_errno() {
    if (failure_.empty()) failure_ = "cannot write " + tmp_.string() + ": " + std::strerror(errno);
  }
  void write_all(const char* p, size_t n) {
    while (n > 0 && failure_.empty()) {
      const ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        if (w == 0) errno = ENOSPC;
        fail_errno();
        return;
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  }
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }

  std::filesystem::path path_, tmp_;
  quilt_hash128_t key_;
  int fd_ = -1;
  std::string failure_;
  std::vector<char> buffer_;
  ContentHasher hasher_;
  uint64_t payload_bytes_ = 0;
  bool committed_ = false;
};

}  // namespace

std::shared_ptr<Executable> compile_cached(const Device& device, AbiGraph& graph,
                                           const std::string& where, const std::string& cache_dir,
                                           const Logger& logger, CacheOutcome* outcome) {
  *outcome = {};
  if (cache_dir.empty()) return device.compile(graph, where);
  if (!device.caches_executables()) {
    *outcome = {"compiled", "backend '" + device.backend_name() +
                                "' has no executable_serialize/executable_deserialize"};
    return device.compile(graph, where);
  }
  if (!graph.has_constant_hashes()) graph.compute_constant_hashes();
  const quilt_hash128_t key = cache_key(device, graph);
  const std::filesystem::path path =
      std::filesystem::path(cache_dir) / (device.backend_name() + "-" + hex128(key) + ".qexe");
  std::string why;
  if (std::shared_ptr<Mapping> map = open_entry(path, key, &why)) {
    const char* payload = static_cast<const char*>(map->base) + kHeaderBytes;
    const size_t bytes = map->bytes - kHeaderBytes;
    try {
      auto exe = device.deserialize(graph, payload, bytes, map, where + " (cache entry)");
      *outcome = {"loaded", path.string()};
      logger.debug(where + ": loaded from the executable cache " + path.string());
      return exe;
    } catch (const Error& e) {
      why = std::string("the backend refused it: ") + e.what();
    }
  }
  if (!why.empty())
    logger.warning(where + ": executable cache entry " + path.string() + " ignored, " + why +
                   "; compiling and storing it again");
  auto exe = device.compile(graph, where);
  EntryWriter entry(path, key);
  if (std::string failure = entry.failure(); !failure.empty()) {
    logger.warning(where + ": executable cache: " + failure);
    *outcome = {"compiled", "not stored: " + failure};
    return exe;
  }
  try {
    device.serialize(
        *exe, [&entry](const void* data, size_t bytes) { entry.append(data, bytes); },
        where + " executable_serialize");
  } catch (const Error& e) {
    // The sink's own failure (the disk) is the cache's, not the backend's.
    const std::string what = entry.failure().empty() ? e.what() : entry.failure();
    logger.warning(where + ": " + what + " (nothing stored in the executable cache)");
    *outcome = {"compiled", std::string("not stored: ") + what};
    return exe;
  }
  const std::string description = std::string("Quilt ") + version() +
                                  " executable cache entry: " + where + " on " + device.name() +
                                  " (" + device.description() + ")";
  if (std::string failure = entry.commit(description); !failure.empty()) {
    logger.warning(where + ": executable cache: " + failure);
    *outcome = {"compiled", "not stored: " + failure};
  } else {
    *outcome = {"stored", path.string()};
  }
  if (!why.empty()) outcome->detail += " (replaced an entry that " + why + ")";
  return exe;
}

}  // namespace quilt
