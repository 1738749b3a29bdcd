// The example plugin's internals, shared by its three files:
//   example_backend.cpp  the quilt_backend_t table: entry point, options, supports, compile,
//   execute example_device.cpp   the simulated device: memory arena, events, in-order worker queue
//   example_kernels.cpp  the op table: what each op accepts (supports) and its float32 kernel
// Like any third-party backend it is built only on include/quilt/backend.h.
#pragma once

#include <quilt/backend.h>
#include <atomic>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace quilt::example {

// ---- errors: one internal status type, turned into a host status at the ABI boundary ----

struct Status {
  quilt_status_code_t code = QUILT_STATUS_OK;
  std::string message;
  bool ok() const { return code == QUILT_STATUS_OK; }
};

// An error whose message starts with "[example] ".
Status fail(quilt_status_code_t code, const std::string& message);
// NULL for OK, else host->status_create(code, message).
quilt_status_t to_c(const Status& status);

// The host's services, set by quilt_backend_init.
const quilt_host_api_t& host();
void set_host(const quilt_host_api_t* host);

std::string format_bytes(uint64_t bytes);                // "64.0 MiB"
std::string format_dims(std::span<const int64_t> dims);  // "[2, 3]"
const char* dtype_name(int32_t dtype);                   // "float32", "int64", ...
int64_t element_count(std::span<const int64_t> dims);

// ---- device memory ----

// A first-fit allocator over one host block standing in for device memory, reserved on the
// first alloc. Offsets are what the device sees; the backend turns them into fake addresses.
class Arena {
 public:
  explicit Arena(uint64_t capacity);
  uint64_t capacity() const { return capacity_; }
  Status alloc(uint64_t bytes, uint64_t* offset);
  // False when offset is not the start of a live allocation.
  bool free(uint64_t offset);
  // OK when [offset, offset + bytes) lies inside one live allocation.
  Status check(uint64_t offset, uint64_t bytes) const;
  std::byte* at(uint64_t offset) const { return storage_.get() + offset; }
  uint64_t free_bytes() const;

 private:
  mutable std::mutex mutex_;
  uint64_t capacity_;
  std::unique_ptr<std::byte[]> storage_;
  std::map<uint64_t, uint64_t> free_;  // offset -> size, coalesced: never two adjacent blocks
  std::map<uint64_t, uint64_t> used_;  // offset -> size asked (the block is rounded up)
};

// ---- events and the worker queue ----

// What an event handle refers to; shared with the command that signals it, so a handle
// released early cannot leave the worker writing freed memory.
struct EventState {
  std::mutex mutex;
  std::condition_variable signalled_cv;
  bool armed = false;  // some command will signal it (events are single-use)
  bool signalled = false;
  Status status;
  uint64_t start_ns = 0, end_ns = 0;

  void signal(Status result, uint64_t start, uint64_t end);
  Status wait();  // blocks until signalled; returns the operation's status
};

struct Command {
  std::vector<std::shared_ptr<EventState>> wait_events;
  std::shared_ptr<EventState> signal_event;  // may be null
  std::function<Status()> run;
};

// One worker thread running commands in submission order, as a device's stream does.
class Queue {
 public:
  Queue();
  ~Queue();  // drains and joins
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;
  void push(Command command);
  void drain_and_join();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Command> commands_;
  bool stopping_ = false;
  std::thread thread_;
};

// ---- ops ----

struct ConvParams {
  enum class AutoPad { NotSet, Valid, SameUpper, SameLower } auto_pad = AutoPad::NotSet;
  int64_t group = 1;
  std::vector<int64_t> strides{1, 1}, dilations{1, 1}, pads{0, 0, 0, 0}, kernel_shape;
};

struct GemmParams {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
};

struct TensorView {
  float* data;  // null when empty
  std::span<const int64_t> dims;
};

struct OpDef;

// A node as compiled: everything copied out of the host's graph.
struct NodeDesc {
  std::string name;
  const OpDef* op = nullptr;
  std::vector<int32_t> inputs, outputs;  // indices into the executable's values; -1 = absent
  ConvParams conv;
  GemmParams gemm;
};

struct OpDef {
  const char* op_type;
  size_t min_inputs, max_inputs;
  // Checks what the generic rules (float32, known rank) do not and fills the node's parameters;
  // returns why the op is refused, or "" when it is claimed.
  std::string (*prepare)(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc);
  // Runs on concrete shapes; absent optional inputs have data == null and empty dims.
  Status (*run)(const NodeDesc& desc, std::span<const TensorView> inputs,
                std::span<const TensorView> outputs);
};

// The op table: supports() and compile() both read it. Null when op_type is not in it.
const OpDef* find_op(const char* op_type);

// Why the device cannot run `node` of `graph`, or "" when it can (and then *desc is filled).
std::string check_node(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc);

// ---- the device as opened ----

inline constexpr uint64_t kMiB = 1024 * 1024;
inline constexpr uint64_t kDefaultMemoryLimit = 256 * kMiB;
// Device addresses are kAddressBase + slot * kAddressWindow + offset: not host memory, so a
// host that dereferences one crashes at once instead of reading plausible garbage.
inline constexpr uint64_t kAddressBase = 0x100000000000ull;
inline constexpr uint64_t kAddressWindow = 1ull << 38;
inline constexpr uint64_t kAddressSlots = 64;

struct Options {
  uint64_t memory_limit = kDefaultMemoryLimit;
  uint64_t execute_delay_ms = 0;
  std::string fail_execute_on, fail_compile_on;
  uint64_t fail_execute_count = 0;  // with fail_execute_on: fail only this many times (0 = always)
  // ABI 1.2 runs, for the host's tests: "1" = every execute must belong to a begun run and, the
  // runs being sequential, run_begin finds no other run open (so the last one ended).
  bool check_runs = false;
  bool fail_run_begin = false;  // run_begin fails
  // ABI 1.2 supports_graph, for the host's tests: "node" claims what supports would; "conv_relu"
  // only a Conv whose output a Relu reads, and that Relu (a pattern run fused); "whole" every
  // node or, when one cannot run here, none.
  std::string graph_claims = "node";
};

// Turns C++ exceptions (bad_alloc from a vector, say) into a status: nothing crosses the ABI.
template <class F>
quilt_status_t guarded(F body) {
  try {
    return to_c(body());
  } catch (const std::bad_alloc&) {
    return to_c(fail(QUILT_STATUS_OUT_OF_MEMORY, "host memory exhausted"));
  } catch (const std::exception& e) {
    return to_c(fail(QUILT_STATUS_RUNTIME_ERROR, e.what()));
  }
}

// Queues `run` on the device's worker behind wait_events, to signal signal_event. Callers
// validate everything first, so a refused call leaves no trace.
Status enqueue(quilt_device_s& device, const quilt_event_t* wait_events, size_t num_wait_events,
               quilt_event_t signal_event, std::function<Status()> run);

// The memory and event slots of quilt_backend_t (example_device.cpp).
quilt_status_t alloc(quilt_device_t device, size_t bytes, void** ptr);
void free_memory(quilt_device_t device, void* ptr);
quilt_status_t copy_to_device(quilt_device_t device, void* dst, const void* src_host, size_t bytes,
                              const quilt_event_t* wait_events, size_t num_wait_events,
                              quilt_event_t signal_event);
// ABI 1.2: between two open devices of this plugin, on dst_device's worker thread.
quilt_status_t copy_device_to_device(quilt_device_t dst_device, void* dst,
                                     quilt_device_t src_device, const void* src, size_t bytes,
                                     const quilt_event_t* wait_events, size_t num_wait_events,
                                     quilt_event_t signal_event);
quilt_status_t copy_to_host(quilt_device_t device, void* dst_host, const void* src, size_t bytes,
                            const quilt_event_t* wait_events, size_t num_wait_events,
                            quilt_event_t signal_event);
quilt_status_t event_create(quilt_device_t device, quilt_event_t* event);
quilt_status_t event_wait(quilt_device_t device, quilt_event_t event);
quilt_status_t event_query(quilt_device_t device, quilt_event_t event, int32_t* done);
void event_release(quilt_device_t device, quilt_event_t event);
quilt_status_t event_timestamps(quilt_device_t device, quilt_event_t event, uint64_t* start_ns,
                                uint64_t* end_ns);

}  // namespace quilt::example

// ---- the opaque handles (the ABI leaves their definition to each backend) ----

struct quilt_device_s {
  quilt_device_s(int32_t device_index, quilt::example::Options opts, uint64_t address_base)
      : index(device_index),
        options(std::move(opts)),
        base(address_base),
        arena(options.memory_limit) {}

  std::atomic<uint64_t> injected_failures{0};
  std::mutex runs_mutex;
  std::vector<uint64_t> open_runs;  // begun and not yet ended (ABI 1.2)

  void* address(uint64_t offset) const { return reinterpret_cast<void*>(base + offset); }
  // The arena offset of a device address, checked to span `bytes` of one allocation.
  quilt::example::Status offset_of(const void* ptr, uint64_t bytes, uint64_t* offset) const {
    uint64_t a = reinterpret_cast<uint64_t>(ptr);
    if (a < base || a - base >= arena.capacity())
      return quilt::example::fail(QUILT_STATUS_INVALID_ARGUMENT,
                                  "pointer " + std::to_string(a) + " is not memory of this device");
    *offset = a - base;
    return arena.check(*offset, bytes);
  }

  int32_t index;
  quilt::example::Options options;
  uint64_t base;
  quilt::example::Arena arena;
  quilt::example::Queue queue;  // last: destroyed (drained and joined) first
};

struct quilt_event_s {
  std::shared_ptr<quilt::example::EventState> state =
      std::make_shared<quilt::example::EventState>();
};
