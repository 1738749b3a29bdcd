// Tensor storage and dtype tables.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <vector>

#include "core/checked.hpp"
#include "quilt/quilt.hpp"

namespace quilt {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return 4;
    case DType::UInt8:
      return 1;
    case DType::Int8:
      return 1;
    case DType::UInt16:
      return 2;
    case DType::Int16:
      return 2;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Bool:
      return 1;
    case DType::Float16:
      return 2;
    case DType::Float64:
      return 8;
    case DType::UInt32:
      return 4;
    case DType::UInt64:
      return 8;
    case DType::BFloat16:
      return 2;
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
    case DType::Float8E8M0:
      return 1;
    default:
      return 0;
  }
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return "float32";
    case DType::UInt8:
      return "uint8";
    case DType::Int8:
      return "int8";
    case DType::UInt16:
      return "uint16";
    case DType::Int16:
      return "int16";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::String:
      return "string";
    case DType::Bool:
      return "bool";
    case DType::Float16:
      return "float16";
    case DType::Float64:
      return "float64";
    case DType::UInt32:
      return "uint32";
    case DType::UInt64:
      return "uint64";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float8E4M3FN:
      return "float8e4m3fn";
    case DType::Float8E4M3FNUZ:
      return "float8e4m3fnuz";
    case DType::Float8E5M2:
      return "float8e5m2";
    case DType::Float8E5M2FNUZ:
      return "float8e5m2fnuz";
    case DType::UInt4:
      return "uint4";
    case DType::Int4:
      return "int4";
    case DType::Float4E2M1:
      return "float4e2m1";
    case DType::Float8E8M0:
      return "float8e8m0";
    case DType::UInt2:
      return "uint2";
    case DType::Int2:
      return "int2";
    default:
      return "undefined";
  }
}

size_t dtype_nbytes(DType dtype, int64_t numel) {
  const auto n = static_cast<size_t>(numel);
  if (const int bits = dtype_packed_bits(dtype)) {
    const size_t per_byte = 8 / static_cast<size_t>(bits);
    return n / per_byte + (n % per_byte != 0);
  }
  return n * dtype_size(dtype);
}

bool dtype_supported(DType dtype) {
  return dtype_size(dtype) != 0 || dtype_is_packed(dtype) || dtype == DType::String;
}

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return "invalid argument";
    case ErrorCode::InvalidModel:
      return "invalid model";
    case ErrorCode::NotImplemented:
      return "not implemented";
    case ErrorCode::OutOfMemory:
      return "out of memory";
    case ErrorCode::Io:
      return "I/O error";
    case ErrorCode::Runtime:
      return "runtime error";
  }
  return "error";
}

std::string to_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

std::string to_string(const std::vector<Dim>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    if (shape[i].is_fixed())
      s += std::to_string(shape[i].value);
    else
      s += shape[i].symbol.empty() ? "?" : shape[i].symbol;
  }
  return s + "]";
}

namespace {

// 128: an OpenCL device that shares the host's memory (PoCL: CL_DEVICE_MEM_BASE_ADDR_ALIGN is
// 128 bytes) works on a tensor in place only when it is aligned so, and stages it otherwise.
constexpr size_t kAlignment = 128;

// Scratch buffers (kernel outputs, Tensor::scratch) of 4 KB and more are kept for reuse instead
// of going back to malloc: glibc serves the large ones with mmap or returns them to the system
// when the heap top shrinks, so every run would page-fault its activations in again (ResNet-50:
// a residual Add of 3 MB took 1.2 ms, most of it first-touch faults); the middle sizes go
// through its bins and their consolidation (malloc_consolidate and _int_free were 2 % of the
// keyword spotter's profile, its activations 32 KB each). The cache holds at most kCacheBytes,
// beyond which buffers are freed as before. 64 MB was too little for YOLOv5s at 640x640 (its
// detect head's 6.5 MB Transpose output fell out and was faulted in every run: 0.6 -> 2.7 ms);
// at 128 MB its peak memory did not grow. From 256 KB down to 4 KB, AMD EPYC, 2 threads, 2-3
// alternating rounds: keyword spotter 0.0273-0.0277 -> 0.0263-0.0265 ms, OCR classifier
// 0.223-0.226 -> 0.218-0.220; MLP, VAD and MNIST within noise. Below 4 KB glibc's per-thread
// cache is as fast as this one.
//
// A request takes the most recently returned buffer of its size up to kFit times it, not only
// of its exact size: the last one returned is the likeliest still in the caches. By exact size,
// each size had buffers of its own, touched once a run: MobileNetV3's 64x112x112 output (3.2 MB)
// was written into memory untouched since the last run, and its 16 -> 64 pointwise conv took
// 257 us against onnxruntime's 123 (whose arena reuses a few hot regions). This machine's memory
// is slow: that conv's product, 177 us with one output buffer, took 235 with 4 in turn and 486
// with 8. Up to 2x, 2 threads, 2-3 alternating rounds: MobileNetV3 2.18-2.48 -> 1.94-2.02 ms,
// EfficientNet-B0 4.00 -> 3.63-3.70, DeepLabV3 5.22-5.26 -> 5.00-4.95; the peak memory fell
// too (YOLOv5s 175 -> 136 MiB at up to 4x). Up to 4x or any size measured the same; 2x bounds
// what a buffer may waste while a caller holds it (a run's outputs come from here too).
constexpr size_t kCacheMinBytes = size_t{4} << 10;
constexpr size_t kCacheBytes = size_t{128} << 20;
constexpr size_t kFit = 2;

class BufferCache {
 public:
  // A free buffer of at least `bytes` and at most kFit times that, the most recently returned
  // of those; its size in *capacity.
  void* take(size_t bytes, size_t* capacity) {
    std::lock_guard lock(mutex_);
    auto best = free_.end();
    for (auto it = free_.lower_bound(bytes); it != free_.end() && it->first <= kFit * bytes; ++it)
      if (!it->second.empty() &&
          (best == free_.end() || it->second.back().stamp > best->second.back().stamp))
        best = it;
    if (best == free_.end()) return nullptr;
    void* p = best->second.back().p;
    best->second.pop_back();
    *capacity = best->first;
    held_ -= best->first;
    return p;
  }
  void give(void* p, size_t bytes) {
    {
      std::lock_guard lock(mutex_);
      if (held_ + bytes <= kCacheBytes) {
        free_[bytes].push_back({p, ++stamp_});
        held_ += bytes;
        return;
      }
    }
    std::free(p);
  }

 private:
  struct Free {
    void* p;
    uint64_t stamp;  // order of return: the largest is the latest
  };
  std::mutex mutex_;
  std::map<size_t, std::vector<Free>> free_;  // by size, each size's latest last
  uint64_t stamp_ = 0;
  size_t held_ = 0;
};

// Never destroyed: tensors may outlive static destruction (a deleter running at exit).
BufferCache& buffer_cache() {
  static BufferCache* cache = new BufferCache;
  return *cache;
}

uint64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page_size);
}

}  // namespace

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : dtype_(dtype), shape_(std::move(shape)) {
  allocate(true);
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, NoZero)
    : dtype_(dtype), shape_(std::move(shape)) {
  allocate(false);
}

Tensor Tensor::scratch(DType dtype, std::vector<int64_t> shape, bool zero) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.allocate(zero, true);
  return t;
}

Tensor Tensor::uninitialized(DType dtype, std::vector<int64_t> shape) {
  return Tensor(dtype, std::move(shape), NoZero{});
}

void Tensor::allocate(bool zero, bool reuse) {
  const DType dtype = dtype_;
  if (!dtype_supported(dtype))
    throw Error(ErrorCode::NotImplemented,
                std::string("tensors of dtype ") + dtype_name(dtype) + " are not supported");
  uint64_t count = 1;
  for (int64_t d : shape_) {
    if (d < 0)
      throw Error(ErrorCode::InvalidArgument,
                  "tensor shape " + quilt::to_string(shape_) + " has a negative dimension");
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(d), &count))
      throw Error(ErrorCode::OutOfMemory,
                  "tensor shape " + quilt::to_string(shape_) + " overflows a 64-bit element count");
  }
  uint64_t bytes = 0;
  // A string element is a std::string object (nbytes() counts none of them): the memory check
  // below counts the objects, so that a hostile [2^31] string tensor is refused instead of
  // asking for 64 GiB of std::string.
  const uint64_t element_bytes =
      dtype == DType::String ? sizeof(std::string) : static_cast<uint64_t>(dtype_size(dtype));
  if (dtype_is_packed(dtype))
    bytes = dtype_nbytes(dtype, static_cast<int64_t>(std::min<uint64_t>(count, INT64_MAX)));
  else if (__builtin_mul_overflow(count, element_bytes, &bytes))
    count = UINT64_MAX;
  if (count > static_cast<uint64_t>(INT64_MAX))
    throw Error(ErrorCode::OutOfMemory,
                "tensor shape " + quilt::to_string(shape_) + " overflows a 64-bit byte count");
  static const uint64_t kMemory = physical_memory_bytes();
  if (bytes > kMemory)
    throw Error(ErrorCode::OutOfMemory, "tensor of shape " + quilt::to_string(shape_) + " (" +
                                            dtype_name(dtype) + ") needs " + std::to_string(bytes) +
                                            " bytes, more than this machine's " +
                                            std::to_string(kMemory) + " bytes of memory");
  numel_ = static_cast<int64_t>(count);
  if (dtype == DType::String) {
    // Elements are std::string objects (empty when made), never raw bytes: nbytes() is 0, so
    // code that copies bytes moves nothing, and the CPU and device backends never see them.
    auto* strings = new (std::nothrow) std::string[std::max<uint64_t>(count, 1)];
    if (!strings)
      throw Error(ErrorCode::OutOfMemory, "could not allocate " + std::to_string(count) +
                                              " strings for a tensor of shape " +
                                              quilt::to_string(shape_));
    storage_ =
        std::shared_ptr<void>(strings, [](void* q) { delete[] static_cast<std::string*>(q); });
    data_ = strings;
    return;
  }
  size_t alloc = (static_cast<size_t>(bytes) + kAlignment - 1) / kAlignment * kAlignment;
  if (alloc == 0) alloc = kAlignment;
  const bool cached = reuse && alloc >= kCacheMinBytes;
  size_t capacity = alloc;
  void* p = cached ? buffer_cache().take(alloc, &capacity) : nullptr;
  if (!p) p = std::aligned_alloc(kAlignment, alloc);
  if (!p)
    throw Error(ErrorCode::OutOfMemory, "could not allocate " + std::to_string(bytes) +
                                            " bytes for a tensor of shape " +
                                            quilt::to_string(shape_));
  if (zero) std::memset(p, 0, alloc);
  if (cached)
    storage_ = std::shared_ptr<void>(p, [capacity](void* q) { buffer_cache().give(q, capacity); });
  else
    storage_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  data_ = p;
}

Tensor Tensor::from_data(DType dtype, std::vector<int64_t> shape, const void* data) {
  Tensor t(dtype, std::move(shape));
  if (dtype == DType::String) {
    const auto* from = static_cast<const std::string*>(data);
    std::copy(from, from + t.numel_, static_cast<std::string*>(t.data_));
    return t;
  }
  if (t.nbytes()) std::memcpy(t.data_, data, t.nbytes());
  return t;
}

Tensor Tensor::wrap(DType dtype, std::vector<int64_t> shape, void* data,
                    std::shared_ptr<void> owner) {
  if (!dtype_supported(dtype))
    throw Error(ErrorCode::NotImplemented,
                std::string("tensors of dtype ") + dtype_name(dtype) + " are not supported");
  if (dtype == DType::String)
    throw Error(ErrorCode::InvalidArgument,
                "Tensor::wrap: a string tensor owns its std::string elements; make it with "
                "Tensor::from_strings");
  Tensor t;
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(count, d, &count))
      throw Error(ErrorCode::InvalidArgument,
                  "Tensor::wrap: shape " + quilt::to_string(shape) + " is not a valid shape");
  }
  if (count > 0 && !data)
    throw Error(ErrorCode::InvalidArgument, "Tensor::wrap: null data for a non-empty tensor");
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numel_ = count;
  // Aliasing: storage identity is the data pointer, so shares_storage_with() stays meaningful.
  t.storage_ = std::shared_ptr<void>(std::move(owner), data);
  t.data_ = data;
  return t;
}

Tensor Tensor::clone() const {
  if (!defined()) return Tensor();
  return from_data(dtype_, shape_, data_);
}

Tensor Tensor::from_strings(std::vector<int64_t> shape, const std::vector<std::string>& values) {
  return from_vector<std::string>(std::move(shape), values);
}

Tensor Tensor::reshaped(std::vector<int64_t> shape) const {
  auto where = [&] {
    return "cannot reshape a tensor of shape " + quilt::to_string(shape_) + " to " +
           quilt::to_string(shape);
  };
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    throw Error(ErrorCode::InvalidArgument, where() + ": a dim is negative");
  if (Checked(where, "element count", ErrorCode::InvalidArgument).product(shape) != numel_)
    throw Error(ErrorCode::InvalidArgument, where());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::check_type(DType requested) const {
  // float16 and bfloat16 are accessed as uint16_t bits, the float8 types as uint8_t bits, the
  // packed types (4- and 2-bit) as their packed bytes.
  const bool bits16 =
      requested == DType::UInt16 && (dtype_ == DType::Float16 || dtype_ == DType::BFloat16);
  const bool bits8 = requested == DType::UInt8 &&
                     (dtype_ == DType::Float8E4M3FN || dtype_ == DType::Float8E4M3FNUZ ||
                      dtype_ == DType::Float8E5M2 || dtype_ == DType::Float8E5M2FNUZ ||
                      dtype_ == DType::Float8E8M0 || dtype_is_packed(dtype_));
  if (requested != dtype_ && !bits16 && !bits8)
    throw Error(ErrorCode::InvalidArgument, std::string("tensor holds ") + dtype_name(dtype_) +
                                                " but was accessed as " + dtype_name(requested));
}

}  // namespace quilt
