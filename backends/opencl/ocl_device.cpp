// The open device: error helpers, buffers and the intermediate pool, copies, events and their
// timestamps, and Launch (one execution's enqueues).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {
const quilt_host_api_t* g_host = nullptr;
}  // namespace

const quilt_host_api_t& host() {
  return *g_host;
}
void set_host(const quilt_host_api_t* h) {
  g_host = h;
}
void log(quilt_log_level_t level, const std::string& message) {
  if (g_host) g_host->log(level, ("[opencl] " + message).c_str());
}

Status fail(quilt_status_code_t code, const std::string& message) {
  return {code, "[opencl] " + message};
}

const char* cl_error_name(cl_int err) {
  switch (err) {
#define QUILT_CL_ERROR(e) \
  case e:                 \
    return #e;
    QUILT_CL_ERROR(CL_DEVICE_NOT_FOUND)
    QUILT_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    QUILT_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    QUILT_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    QUILT_CL_ERROR(CL_OUT_OF_RESOURCES)
    QUILT_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    QUILT_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    QUILT_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    QUILT_CL_ERROR(CL_INVALID_VALUE)
    QUILT_CL_ERROR(CL_INVALID_DEVICE)
    QUILT_CL_ERROR(CL_INVALID_CONTEXT)
    QUILT_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    QUILT_CL_ERROR(CL_INVALID_MEM_OBJECT)
    QUILT_CL_ERROR(CL_INVALID_BINARY)
    QUILT_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    QUILT_CL_ERROR(CL_INVALID_PROGRAM)
    QUILT_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    QUILT_CL_ERROR(CL_INVALID_KERNEL_NAME)
    QUILT_CL_ERROR(CL_INVALID_KERNEL)
    QUILT_CL_ERROR(CL_INVALID_ARG_INDEX)
    QUILT_CL_ERROR(CL_INVALID_ARG_VALUE)
    QUILT_CL_ERROR(CL_INVALID_ARG_SIZE)
    QUILT_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    QUILT_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    QUILT_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    QUILT_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    QUILT_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    QUILT_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    QUILT_CL_ERROR(CL_INVALID_EVENT)
    QUILT_CL_ERROR(CL_INVALID_BUFFER_SIZE)
#undef QUILT_CL_ERROR
    default:
      return "CL error";
  }
}

Status cl_fail(cl_int err, const std::string& what) {
  quilt_status_code_t code = QUILT_STATUS_DEVICE_ERROR;
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE)
    code = QUILT_STATUS_OUT_OF_MEMORY;
  return fail(code, what + ": " + cl_error_name(err) + " (" + std::to_string(err) + ")");
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
    case QUILT_DTYPE_FLOAT16:
      return "float16";
    case QUILT_DTYPE_FLOAT64:
      return "float64";
    case QUILT_DTYPE_BFLOAT16:
      return "bfloat16";
    case QUILT_DTYPE_INT64:
      return "int64";
    case QUILT_DTYPE_INT32:
      return "int32";
    case QUILT_DTYPE_INT8:
      return "int8";
    case QUILT_DTYPE_UINT8:
      return "uint8";
    case QUILT_DTYPE_BOOL:
      return "bool";
    default:
      return "a type other than float32";
  }
}

int64_t element_count(std::span<const int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

// ---- events ----

Status prepare_events(const quilt_event_t* wait_events, size_t num_wait_events,
                      quilt_event_t signal_event, std::vector<cl_event>* waits) {
  for (size_t i = 0; i < num_wait_events; ++i) {
    if (!wait_events[i]) return fail(QUILT_STATUS_INVALID_ARGUMENT, "wait event is NULL");
    EventState& e = wait_events[i]->state;
    std::lock_guard lock(e.mutex);
    if (!e.failure.ok())
      return {e.failure.code, "[opencl] a dependency failed: " + e.failure.message};
    if (!e.last)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "wait event was not handed to an operation before this one");
    waits->push_back(e.last);
  }
  if (signal_event) {
    std::lock_guard lock(signal_event->state.mutex);
    if (signal_event->state.armed)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "signal event already used (events are single-use)");
    signal_event->state.armed = true;
  }
  return {};
}

void signal(quilt_event_t signal_event, cl_event first, cl_event last, const Status& failure) {
  if (!signal_event) {
    if (first) clReleaseEvent(first);
    if (last) clReleaseEvent(last);
    return;
  }
  std::lock_guard lock(signal_event->state.mutex);
  signal_event->state.first = first;
  signal_event->state.last = last;
  signal_event->state.failure = failure;
}

int64_t measure_clock_offset(cl_command_queue queue) {
  // The device's profiling clock against now_ns(): a marker's end lies between the host times
  // taken around it; the tightest of a few tries wins.
  int64_t best_offset = 0;
  uint64_t best_span = UINT64_MAX;
  for (int attempt = 0; attempt < 5; ++attempt) {
    cl_event marker = nullptr;
    uint64_t before = host().now_ns();
    if (clEnqueueMarkerWithWaitList(queue, 0, nullptr, &marker) != CL_SUCCESS) break;
    clWaitForEvents(1, &marker);
    uint64_t after = host().now_ns();
    cl_ulong end = 0;
    cl_int err =
        clGetEventProfilingInfo(marker, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
    clReleaseEvent(marker);
    if (err != CL_SUCCESS) break;
    if (after - before < best_span) {
      best_span = after - before;
      best_offset = static_cast<int64_t>(before + (after - before) / 2) - static_cast<int64_t>(end);
    }
  }
  return best_offset;
}

void EventState::deliver_node_timings() {
  for (NodeEvents& n : nodes) {
    cl_ulong start = 0, end = 0;
    if (node_timing &&
        clGetEventProfilingInfo(n.first, CL_PROFILING_COMMAND_START, sizeof start, &start,
                                nullptr) == CL_SUCCESS &&
        clGetEventProfilingInfo(n.last, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr) ==
            CL_SUCCESS)
      node_timing(node_timing_context, n.node,
                  static_cast<uint64_t>(static_cast<int64_t>(start) + clock_offset_ns),
                  static_cast<uint64_t>(static_cast<int64_t>(end) + clock_offset_ns));
    clReleaseEvent(n.first);
    clReleaseEvent(n.last);
  }
  nodes.clear();
}

quilt_status_t event_create(quilt_device_t, quilt_event_t* event) {
  return guarded([&]() -> Status {
    *event = new quilt_event_s;
    return {};
  });
}

quilt_status_t event_wait(quilt_device_t, quilt_event_t event) {
  return guarded([&]() -> Status {
    cl_event last = nullptr;
    {
      std::lock_guard lock(event->state.mutex);
      if (!event->state.failure.ok()) return event->state.failure;
      last = event->state.last;
    }
    if (!last) return fail(QUILT_STATUS_INVALID_ARGUMENT, "event_wait: event was never signalled");
    cl_int err = clWaitForEvents(1, &last);
    cl_int status = CL_COMPLETE;
    cl_int qerr =
        clGetEventInfo(last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, nullptr);
    if (qerr != CL_SUCCESS) return cl_fail(qerr, "event_wait: query the command's status");
    if (status < 0) return cl_fail(status, "the device failed the command");
    if (err != CL_SUCCESS) return cl_fail(err, "event_wait");
    std::lock_guard lock(event->state.mutex);
    event->state.deliver_node_timings();
    return {};
  });
}

quilt_status_t event_query(quilt_device_t, quilt_event_t event, int32_t* done) {
  return guarded([&]() -> Status {
    std::lock_guard lock(event->state.mutex);
    if (!event->state.failure.ok()) {
      *done = 1;
      return {};
    }
    *done = 0;
    if (!event->state.last) return {};
    cl_int status = CL_QUEUED;
    cl_int err = clGetEventInfo(event->state.last, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status,
                                &status, nullptr);
    if (err != CL_SUCCESS) return cl_fail(err, "event_query");
    *done = status == CL_COMPLETE || status < 0 ? 1 : 0;
    if (status == CL_COMPLETE) event->state.deliver_node_timings();
    return {};
  });
}

void event_release(quilt_device_t, quilt_event_t event) {
  delete event;
}

quilt_status_t event_timestamps(quilt_device_t device, quilt_event_t event, uint64_t* start_ns,
                                uint64_t* end_ns) {
  return guarded([&]() -> Status {
    std::lock_guard lock(event->state.mutex);
    if (!event->state.first || !event->state.last)
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "event_timestamps: no command behind the event");
    cl_ulong start = 0, end = 0;
    cl_int err = clGetEventProfilingInfo(event->state.first, CL_PROFILING_COMMAND_START,
                                         sizeof start, &start, nullptr);
    if (err == CL_SUCCESS)
      err = clGetEventProfilingInfo(event->state.last, CL_PROFILING_COMMAND_END, sizeof end, &end,
                                    nullptr);
    if (err != CL_SUCCESS) return cl_fail(err, "event_timestamps");
    *start_ns = static_cast<uint64_t>(static_cast<int64_t>(start) + device->clock_offset_ns);
    *end_ns = static_cast<uint64_t>(static_cast<int64_t>(end) + device->clock_offset_ns);
    return {};
  });
}

// ---- memory ----

Status alloc_buffer(quilt_device_s& device, size_t bytes, cl_mem* out) {
  if (bytes == 0) return fail(QUILT_STATUS_INVALID_ARGUMENT, "alloc: 0 bytes");
  uint64_t limit = device.entry->max_alloc_bytes;
  if (device.options.max_alloc_bytes) limit = std::min(limit, device.options.max_alloc_bytes);
  if (bytes > limit)
    return fail(QUILT_STATUS_OUT_OF_MEMORY,
                "device out of memory: asked " + format_bytes(bytes) +
                    " in one buffer, the limit is " + format_bytes(limit) +
                    (device.options.max_alloc_bytes ? " (option max_alloc_bytes)"
                                                    : " (CL_DEVICE_MAX_MEM_ALLOC_SIZE)"));
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(device.context.get(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (err != CL_SUCCESS || !mem) {
    Status s = cl_fail(err, "clCreateBuffer of " + format_bytes(bytes));
    if (s.code == QUILT_STATUS_OUT_OF_MEMORY)
      s.message = "[opencl] device out of memory: " + s.message.substr(9);
    return s;
  }
  *out = mem;
  return {};
}

quilt_status_t alloc(quilt_device_t device, size_t bytes, void** ptr) {
  return guarded([&]() -> Status {
    cl_mem mem = nullptr;
    if (Status s = device->ready(); !s.ok()) return s;
    if (Status s = alloc_buffer(*device, bytes, &mem); !s.ok()) return s;
    *ptr = mem;
    return {};
  });
}

void free_memory(quilt_device_t, void* ptr) {
  if (ptr) clReleaseMemObject(static_cast<cl_mem>(ptr));
}

namespace {

// A copy between host and device: non-blocking, behind the wait events.
Status enqueue_copy(quilt_device_t device, bool to_device, void* device_ptr, void* host_ptr,
                    size_t bytes, const quilt_event_t* wait_events, size_t num_wait_events,
                    quilt_event_t signal_event) {
  std::vector<cl_event> waits;
  Status s = prepare_events(wait_events, num_wait_events, signal_event, &waits);
  if (s.ok()) s = device->ready();
  if (!s.ok()) {
    if (signal_event && s.code != QUILT_STATUS_INVALID_ARGUMENT)
      signal(signal_event, nullptr, nullptr, s);
    return s;
  }
  cl_event event = nullptr;
  cl_int err;
  const cl_event* wait_list = waits.empty() ? nullptr : waits.data();
  cl_uint wait_count = static_cast<cl_uint>(waits.size());
  if (bytes == 0)
    err = clEnqueueMarkerWithWaitList(device->queue.get(), wait_count, wait_list, &event);
  else if (to_device)
    err = clEnqueueWriteBuffer(device->queue.get(), static_cast<cl_mem>(device_ptr), CL_FALSE, 0,
                               bytes, host_ptr, wait_count, wait_list, &event);
  else
    err = clEnqueueReadBuffer(device->queue.get(), static_cast<cl_mem>(device_ptr), CL_FALSE, 0,
                              bytes, host_ptr, wait_count, wait_list, &event);
  if (err != CL_SUCCESS) {
    s = cl_fail(err, to_device ? "copy_to_device" : "copy_to_host");
    signal(signal_event, nullptr, nullptr, s);
    return s;
  }
  clRetainEvent(event);
  signal(signal_event, event, event, {});
  return {};
}

}  // namespace

quilt_status_t copy_to_device(quilt_device_t device, void* dst, const void* src_host, size_t bytes,
                              const quilt_event_t* wait_events, size_t num_wait_events,
                              quilt_event_t signal_event) {
  return guarded([&] {
    return enqueue_copy(device, true, dst, const_cast<void*>(src_host), bytes, wait_events,
                        num_wait_events, signal_event);
  });
}

quilt_status_t copy_to_host(quilt_device_t device, void* dst_host, const void* src, size_t bytes,
                            const quilt_event_t* wait_events, size_t num_wait_events,
                            quilt_event_t signal_event) {
  return guarded([&] {
    return enqueue_copy(device, false, const_cast<void*>(src), dst_host, bytes, wait_events,
                        num_wait_events, signal_event);
  });
}

// ---- Launch ----

Launch::~Launch() {
  for (NodeEvents& n : nodes_) {
    if (n.first) clReleaseEvent(n.first);
    if (n.last) clReleaseEvent(n.last);
  }
  if (first_) clReleaseEvent(first_);
  if (last_ && last_ != first_) clReleaseEvent(last_);
  for (auto& [bytes, mem] : scratch_) device_.pool.emplace(bytes, mem);
}

Status Launch::scratch(size_t bytes, cl_mem* out) {
  bytes = (bytes + 255) / 256 * 256;
  // The smallest pooled buffer that fits and wastes at most half of itself.
  auto it = device_.pool.lower_bound(bytes);
  if (it != device_.pool.end() && it->first <= 2 * bytes) {
    scratch_.emplace_back(it->first, it->second);
    *out = it->second;
    device_.pool.erase(it);
    return {};
  }
  cl_mem mem = nullptr;
  if (Status s = alloc_buffer(device_, bytes, &mem); !s.ok())
    return {s.code, s.message + " (an intermediate)"};
  scratch_.emplace_back(bytes, mem);
  *out = mem;
  return {};
}

void Launch::release_scratch(size_t mark) {
  for (size_t i = mark; i < scratch_.size(); ++i)
    device_.pool.emplace(scratch_[i].first, scratch_[i].second);
  scratch_.resize(std::min(mark, scratch_.size()));
}

Status Launch::set_arg(cl_kernel k, cl_uint index, size_t size, const void* value) {
  cl_int err = clSetKernelArg(k, index, size, value);
  if (err != CL_SUCCESS) return cl_fail(err, "set kernel argument " + std::to_string(index));
  return {};
}

Status Launch::enqueued(cl_int err, cl_event event, const std::string& what) {
  if (err != CL_SUCCESS) return cl_fail(err, what);
  if (timing_ && !nodes_.empty()) {
    NodeEvents& n = nodes_.back();
    clRetainEvent(event);
    if (!n.first) {
      n.first = event;
      clRetainEvent(event);
    }
    if (n.last) clReleaseEvent(n.last);
    n.last = event;
  }
  if (!first_) {
    first_ = last_ = event;
  } else {
    if (last_ != first_) clReleaseEvent(last_);
    last_ = event;
  }
  return {};
}

Status Launch::copy(cl_mem src, cl_mem dst, size_t bytes) {
  if (bytes == 0) return {};
  cl_event event = nullptr;
  cl_int err = clEnqueueCopyBuffer(device_.queue.get(), src, dst, 0, 0, bytes,
                                   first_ ? 0 : static_cast<cl_uint>(waits_.size()),
                                   first_ || waits_.empty() ? nullptr : waits_.data(), &event);
  return enqueued(err, event, "enqueue copy");
}

Status Launch::write(cl_mem dst, const void* src, size_t bytes) {
  cl_event event = nullptr;
  cl_int err = clEnqueueWriteBuffer(device_.queue.get(), dst, CL_FALSE, 0, bytes, src,
                                    first_ ? 0 : static_cast<cl_uint>(waits_.size()),
                                    first_ || waits_.empty() ? nullptr : waits_.data(), &event);
  return enqueued(err, event, "enqueue write of an input");
}

Status Launch::read(cl_mem src, void* dst, size_t bytes) {
  cl_event event = nullptr;
  cl_int err = clEnqueueReadBuffer(device_.queue.get(), src, CL_FALSE, 0, bytes, dst,
                                   first_ ? 0 : static_cast<cl_uint>(waits_.size()),
                                   first_ || waits_.empty() ? nullptr : waits_.data(), &event);
  return enqueued(err, event, "enqueue read of an output");
}

Status Launch::sync_to_host(cl_mem mem, size_t bytes) {
  cl_event event = nullptr;
  cl_int err = CL_SUCCESS;
  void* p = clEnqueueMapBuffer(device_.queue.get(), mem, CL_FALSE, CL_MAP_READ, 0, bytes,
                               first_ ? 0 : static_cast<cl_uint>(waits_.size()),
                               first_ || waits_.empty() ? nullptr : waits_.data(), &event, &err);
  if (Status s = enqueued(err, event, "enqueue map of an output"); !s.ok()) return s;
  err = clEnqueueUnmapMemObject(device_.queue.get(), mem, p, 0, nullptr, &event);
  return enqueued(err, event, "enqueue unmap of an output");
}

Status Launch::wait_for_waits() {
  if (first_ || waits_.empty()) return {};
  cl_event event = nullptr;
  cl_int err = clEnqueueMarkerWithWaitList(device_.queue.get(), static_cast<cl_uint>(waits_.size()),
                                           waits_.data(), &event);
  return enqueued(err, event, "enqueue marker");
}

Status Launch::finish(cl_event* first, cl_event* last) {
  if (!first_) {
    cl_event event = nullptr;
    cl_int err =
        clEnqueueMarkerWithWaitList(device_.queue.get(), static_cast<cl_uint>(waits_.size()),
                                    waits_.empty() ? nullptr : waits_.data(), &event);
    if (Status s = enqueued(err, event, "enqueue marker"); !s.ok()) return s;
  }
  clRetainEvent(first_);
  clRetainEvent(last_);
  *first = first_;
  *last = last_;
  return {};
}

}  // namespace quilt::opencl

using namespace quilt::opencl;

quilt_event_s::~quilt_event_s() {
  state.node_timing = nullptr;  // never delivered now: the host has moved on
  state.deliver_node_timings();
  if (state.first) clReleaseEvent(state.first);
  if (state.last) clReleaseEvent(state.last);
}

Status quilt_device_s::kernel(const std::string& family, const std::string& name, cl_kernel* out) {
  auto key = std::make_pair(family, name);
  auto it = kernels.find(key);
  if (it == kernels.end()) {
    cl_program p = nullptr;
    if (Status s = program(family, &p); !s.ok()) return s;
    cl_int err = CL_SUCCESS;
    cl_kernel k = clCreateKernel(p, name.c_str(), &err);
    if (err != CL_SUCCESS) return cl_fail(err, "create kernel '" + name + "' of " + family + ".cl");
    it = kernels.emplace(key, Kernel(k)).first;
  }
  *out = it->second.get();
  return {};
}

quilt_device_s::~quilt_device_s() {
  if (queue) clFinish(queue.get());
  for (auto& [bytes, mem] : pool) clReleaseMemObject(mem);
  kernels.clear();
}
