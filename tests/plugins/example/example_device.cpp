// The simulated device: error helpers, the memory arena, events, the worker queue, and the
// backend slots for memory, copies and events.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "example.hpp"

namespace quilt::example {

namespace {
const quilt_host_api_t* g_host = nullptr;
constexpr uint64_t kAlignment = 64;
}  // namespace

const quilt_host_api_t& host() {
  return *g_host;
}
void set_host(const quilt_host_api_t* h) {
  g_host = h;
}

Status fail(quilt_status_code_t code, const std::string& message) {
  return {code, "[example] " + message};
}

quilt_status_t to_c(const Status& status) {
  if (status.ok()) return nullptr;
  return g_host->status_create(status.code, status.message.c_str());
}

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 3) v /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, "%.1f %s", v, units[unit]);
  return text;
}

std::string format_dims(std::span<const int64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case QUILT_DTYPE_FLOAT32:
      return "float32";
    case QUILT_DTYPE_UINT8:
      return "uint8";
    case QUILT_DTYPE_INT8:
      return "int8";
    case QUILT_DTYPE_UINT16:
      return "uint16";
    case QUILT_DTYPE_INT16:
      return "int16";
    case QUILT_DTYPE_INT32:
      return "int32";
    case QUILT_DTYPE_INT64:
      return "int64";
    case QUILT_DTYPE_BOOL:
      return "bool";
    case QUILT_DTYPE_FLOAT16:
      return "float16";
    case QUILT_DTYPE_FLOAT64:
      return "float64";
    case QUILT_DTYPE_UINT32:
      return "uint32";
    case QUILT_DTYPE_UINT64:
      return "uint64";
    case QUILT_DTYPE_BFLOAT16:
      return "bfloat16";
    case QUILT_DTYPE_FLOAT8E4M3FN:
      return "float8e4m3fn";
    case QUILT_DTYPE_FLOAT8E4M3FNUZ:
      return "float8e4m3fnuz";
    case QUILT_DTYPE_FLOAT8E5M2:
      return "float8e5m2";
    case QUILT_DTYPE_FLOAT8E5M2FNUZ:
      return "float8e5m2fnuz";
    default:
      return "an undefined type";
  }
}

int64_t element_count(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- Arena ----

Arena::Arena(uint64_t capacity) : capacity_(capacity / kAlignment * kAlignment) {
  if (capacity_ > 0) free_[0] = capacity_;
}

Status Arena::alloc(uint64_t bytes, uint64_t* offset) {
  std::lock_guard lock(mutex_);
  uint64_t size = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  auto block = std::find_if(free_.begin(), free_.end(), [&](auto& b) { return b.second >= size; });
  if (bytes == 0 || size < bytes || block == free_.end()) {
    uint64_t free_total = 0, largest = 0;
    for (auto& [o, s] : free_) free_total += s, largest = std::max(largest, s);
    std::string message = "out of device memory: asked " + format_bytes(bytes) + ", " +
                          format_bytes(free_total) + " free of " + format_bytes(capacity_);
    if (free_total >= size) message += " (largest free block " + format_bytes(largest) + ")";
    return fail(QUILT_STATUS_OUT_OF_MEMORY, message);
  }
  if (!storage_) {
    // Reserved lazily: sessions that open the device but never allocate cost nothing.
    storage_.reset(new (std::nothrow) std::byte[capacity_]);
    if (!storage_)
      return fail(QUILT_STATUS_OUT_OF_MEMORY,
                  "cannot reserve the " + format_bytes(capacity_) + " device arena in host memory");
  }
  auto [start, block_size] = *block;
  free_.erase(block);
  if (block_size > size) free_[start + size] = block_size - size;
  used_[start] = bytes;
  *offset = start;
  return {};
}

bool Arena::free(uint64_t offset) {
  std::lock_guard lock(mutex_);
  auto used = used_.find(offset);
  if (used == used_.end()) return false;
  uint64_t start = offset, size = (used->second + kAlignment - 1) / kAlignment * kAlignment;
  used_.erase(used);
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      prev->second += size;
      return true;
    }
  }
  free_[start] = size;
  return true;
}

Status Arena::check(uint64_t offset, uint64_t bytes) const {
  std::lock_guard lock(mutex_);
  auto block = used_.upper_bound(offset);
  if (block != used_.begin()) {
    --block;
    if (offset + bytes <= block->first + block->second) return {};
  }
  return fail(QUILT_STATUS_INVALID_ARGUMENT, "device range at offset " + std::to_string(offset) +
                                                 " of " + format_bytes(bytes) +
                                                 " is not inside one allocation");
}

uint64_t Arena::free_bytes() const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (auto& [o, s] : free_) total += s;
  return total;
}

// ---- events ----

void EventState::signal(Status result, uint64_t start, uint64_t end) {
  {
    std::lock_guard lock(mutex);
    status = std::move(result);
    start_ns = start;
    end_ns = end;
    signalled = true;
  }
  signalled_cv.notify_all();
}

Status EventState::wait() {
  std::unique_lock lock(mutex);
  signalled_cv.wait(lock, [&] { return signalled; });
  return status;
}

// ---- Queue ----

Queue::Queue() : thread_([this] { loop(); }) {}

Queue::~Queue() {
  drain_and_join();
}

void Queue::push(Command command) {
  {
    std::lock_guard lock(mutex_);
    commands_.push_back(std::move(command));
  }
  wake_.notify_one();
}

void Queue::drain_and_join() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Queue::loop() {
  for (;;) {
    Command command;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !commands_.empty(); });
      if (commands_.empty()) return;  // stopping, and drained
      command = std::move(commands_.front());
      commands_.pop_front();
    }
    Status status;
    for (auto& event : command.wait_events) {
      Status dependency = event->wait();
      if (!dependency.ok()) {
        status = {dependency.code, "[example] a dependency failed: " + dependency.message};
        break;
      }
    }
    uint64_t start = host().now_ns();
    if (status.ok()) {
      try {
        status = command.run();
      } catch (const std::exception& e) {  // e.g. bad_alloc: reported, never thrown across
        status = fail(QUILT_STATUS_RUNTIME_ERROR, e.what());
      }
    }
    uint64_t end = host().now_ns();
    if (command.signal_event) command.signal_event->signal(std::move(status), start, end);
  }
}

// ---- asynchronous work and the memory and event slots ----

// Queues `run` behind wait_events; it signals signal_event. Callers validate everything first,
// so a refused call leaves no trace.
Status enqueue(quilt_device_s& device, const quilt_event_t* wait_events, size_t num_wait_events,
               quilt_event_t signal_event, std::function<Status()> run) {
  Command command;
  for (size_t i = 0; i < num_wait_events; ++i) {
    if (!wait_events[i]) return fail(QUILT_STATUS_INVALID_ARGUMENT, "wait event is NULL");
    command.wait_events.push_back(wait_events[i]->state);
  }
  if (signal_event) {
    std::lock_guard lock(signal_event->state->mutex);
    if (signal_event->state->armed)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "signal event already used (events are single-use)");
    signal_event->state->armed = true;
    command.signal_event = signal_event->state;
  }
  command.run = std::move(run);
  device.queue.push(std::move(command));
  return {};
}

// ---- memory ----

quilt_status_t alloc(quilt_device_t device, size_t bytes, void** ptr) {
  return guarded([&]() -> Status {
    if (bytes == 0) return fail(QUILT_STATUS_INVALID_ARGUMENT, "alloc: 0 bytes");
    uint64_t offset;
    if (Status s = device->arena.alloc(bytes, &offset); !s.ok()) return s;
    *ptr = device->address(offset);
    return {};
  });
}

void free_memory(quilt_device_t device, void* ptr) {
  uint64_t a = reinterpret_cast<uint64_t>(ptr);
  if (a < device->base || !device->arena.free(a - device->base))
    host().log(QUILT_LOG_WARNING, "[example] free: pointer is not an allocation of this device");
}

quilt_status_t copy_to_device(quilt_device_t device, void* dst, const void* src_host, size_t bytes,
                              const quilt_event_t* wait_events, size_t num_wait_events,
                              quilt_event_t signal_event) {
  return guarded([&]() -> Status {
    uint64_t offset = 0;
    if (bytes > 0)
      if (Status s = device->offset_of(dst, bytes, &offset); !s.ok()) return s;
    return enqueue(*device, wait_events, num_wait_events, signal_event, [=]() -> Status {
      if (bytes > 0) std::memcpy(device->arena.at(offset), src_host, bytes);
      return {};
    });
  });
}

quilt_status_t copy_to_host(quilt_device_t device, void* dst_host, const void* src, size_t bytes,
                            const quilt_event_t* wait_events, size_t num_wait_events,
                            quilt_event_t signal_event) {
  return guarded([&]() -> Status {
    uint64_t offset = 0;
    if (bytes > 0)
      if (Status s = device->offset_of(src, bytes, &offset); !s.ok()) return s;
    return enqueue(*device, wait_events, num_wait_events, signal_event, [=]() -> Status {
      if (bytes > 0) std::memcpy(dst_host, device->arena.at(offset), bytes);
      return {};
    });
  });
}

quilt_status_t copy_device_to_device(quilt_device_t dst_device, void* dst,
                                     quilt_device_t src_device, const void* src, size_t bytes,
                                     const quilt_event_t* wait_events, size_t num_wait_events,
                                     quilt_event_t signal_event) {
  return guarded([&]() -> Status {
    if (!src_device || src_device == dst_device)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "copy_device_to_device: the source must be another open device of this plugin");
    uint64_t dst_offset = 0, src_offset = 0;
    if (bytes > 0) {
      if (Status s = dst_device->offset_of(dst, bytes, &dst_offset); !s.ok()) return s;
      if (Status s = src_device->offset_of(src, bytes, &src_offset); !s.ok()) return s;
    }
    // The host waited for whatever wrote src; the source stays open and src unwritten until
    // this copy's event is signalled, so the destination's worker reads it directly.
    return enqueue(*dst_device, wait_events, num_wait_events, signal_event, [=]() -> Status {
      if (bytes > 0)
        std::memcpy(dst_device->arena.at(dst_offset), src_device->arena.at(src_offset), bytes);
      return {};
    });
  });
}

// ---- events ----

quilt_status_t event_create(quilt_device_t, quilt_event_t* event) {
  return guarded([&]() -> Status {
    *event = new quilt_event_s;
    return {};
  });
}

quilt_status_t event_wait(quilt_device_t, quilt_event_t event) {
  return guarded([&] { return event->state->wait(); });
}

quilt_status_t event_query(quilt_device_t, quilt_event_t event, int32_t* done) {
  std::lock_guard lock(event->state->mutex);
  *done = event->state->signalled ? 1 : 0;
  return nullptr;
}

void event_release(quilt_device_t, quilt_event_t event) {
  delete event;
}

quilt_status_t event_timestamps(quilt_device_t, quilt_event_t event, uint64_t* start_ns,
                                uint64_t* end_ns) {
  std::lock_guard lock(event->state->mutex);
  if (!event->state->signalled)
    return to_c(fail(QUILT_STATUS_INVALID_ARGUMENT, "event_timestamps: event not signalled yet"));
  *start_ns = event->state->start_ns;
  *end_ns = event->state->end_ns;
  return nullptr;
}

}  // namespace quilt::example
