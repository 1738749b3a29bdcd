// The OpenCL backend's internals, shared by its files:
//   ocl_backend.cpp   the quilt_backend_t table: entry point, devices, options, supports, compile,
//                     execute
//   ocl_device.cpp    memory (buffers, the intermediate pool), copies, events, timestamps
//   ocl_program.cpp   building the kernels_cl programs per device, and their on-disk binary cache
//   ops_*.cpp         one op family each: what an op accepts (prepare) and its launch (enqueue)
//   op_table.cpp      the op table that supports() and compile() both read
// Built only on include/quilt/backend.h and OpenCL; one in-order queue per open device.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <quilt/backend.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace quilt::opencl {

// ---- errors: one internal status type, turned into a host status at the ABI boundary ----

struct Status {
  quilt_status_code_t code = QUILT_STATUS_OK;
  std::string message;
  bool ok() const { return code == QUILT_STATUS_OK; }
};

// An error whose message starts with "[opencl] ".
Status fail(quilt_status_code_t code, const std::string& message);
// A failed OpenCL call: "[opencl] <what>: CL_OUT_OF_RESOURCES (-5)"; the code follows the error.
Status cl_fail(cl_int err, const std::string& what);
const char* cl_error_name(cl_int err);
// NULL for OK, else host->status_create(code, message).
quilt_status_t to_c(const Status& status);

const quilt_host_api_t& host();
void set_host(const quilt_host_api_t* host);
void log(quilt_log_level_t level, const std::string& message);

std::string format_bytes(uint64_t bytes);                // "64.0 MiB"
std::string format_dims(std::span<const int64_t> dims);  // "[2, 3]"
const char* dtype_name(int32_t dtype);
int64_t element_count(std::span<const int64_t> dims);
// Up to 8 values as a kernel's int8 argument (the rest 0), e.g. geometry or collapsed strides.
inline cl_int8 int8_of(std::span<const int64_t> values) {
  cl_int8 v{};
  for (size_t i = 0; i < values.size() && i < 8; ++i) v.s[i] = static_cast<cl_int>(values[i]);
  return v;
}
inline cl_int8 int8_of(std::initializer_list<int64_t> values) {
  return int8_of(std::span<const int64_t>(values.begin(), values.size()));
}

// Turns C++ exceptions into a status: nothing crosses the ABI.
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

// ---- the devices of every platform, found once at init ----

struct DeviceEntry {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string name, platform_name, driver_version, cl_version;
  uint64_t memory_bytes = 0, max_alloc_bytes = 0;
  uint32_t compute_units = 0;
  bool fp16 = false, correctly_rounded_divide_sqrt = false;
  // The device's memory is the host's (CL_DEVICE_HOST_UNIFIED_MEMORY: PoCL, integrated GPUs):
  // it is offered to Quilt as QUILT_DEVICE_HOST_MEMORY, so the host passes its own buffers to
  // execute and inserts no copies; execute wraps them (CL_MEM_USE_HOST_PTR) when aligned to
  // base_align, else stages them through the queue. QUILT_OPENCL_HOST_MEMORY=0 turns it off.
  bool host_memory = false;
  size_t base_align = 128;  // CL_DEVICE_MEM_BASE_ADDR_ALIGN, in bytes
  int64_t launch_ns = 0;    // what a command and a wait for it cost (0: not measured)
  // device_info's properties; the pointer arrays point into the strings.
  std::vector<std::string> keys, values;
  std::vector<const char*> key_ptrs, value_ptrs;
};

const std::vector<DeviceEntry>& devices();
// Sets the entries' platform and id when the list came from the device list cache (loading the
// OpenCL platforms); fails when they no longer list the same devices.
Status resolve_devices();

// ---- programs (ocl_program.cpp) ----

struct Options {
  std::string cache_dir;            // "" = no on-disk cache
  std::string extra_build_options;  // appended to every program's build options
  uint64_t max_alloc_bytes = 0;     // 0 = the device's CL_DEVICE_MAX_MEM_ALLOC_SIZE
  std::string gemm = "auto";        // GEMM engine: auto (by measurement), own, clblast
};

// Which GEMM engine runs a device's MatMul/Gemm (ocl_clblast.cpp).
enum class GemmEngine { kUndecided, kOwn, kClBlast };
// True when the plugin was built with CLBlast.
bool clblast_available();

// The default cache directory: $QUILT_OPENCL_CACHE_DIR, $XDG_CACHE_HOME/quilt/opencl, or
// ~/.cache/quilt/opencl ("" when none can be formed).
std::string default_cache_dir();

// Builds (or loads from the cache) the program of one kernels_cl family for a device.
Status build_program(cl_context context, const DeviceEntry& device, const Options& options,
                     const std::string& family, cl_program* program);

// The OpenCL build options of every program for a device; a program's binary (empty when the
// driver gives none); a program made from a binary (false when the driver refuses it).
std::string build_options_for(const DeviceEntry& device, const Options& options);
std::string program_binary(cl_program program);
bool program_from_binary(cl_context context, const DeviceEntry& device,
                         const std::string& build_options, const std::string& binary,
                         cl_program* out);

// Cache files (ocl_program.cpp): a checksummed entry, written to a temporary file and renamed;
// read_entry is empty when the file is missing, and *corrupt when its header does not match.
std::string read_entry(const std::filesystem::path& path, bool* corrupt);
void write_entry(const std::filesystem::path& path, const std::string& data);
uint64_t fnv1a(std::string_view data, uint64_t seed);
std::string hex(uint64_t v);

// The embedded kernels_cl sources (generated at build time): name -> source.
struct EmbeddedSource {
  const char* name;
  const char* source;
};
std::span<const EmbeddedSource> embedded_sources();

// ---- RAII for OpenCL handles ----
// (below; SharedDevice after them)

template <class T, cl_int (*Release)(T)>
class ClHandle {
 public:
  ClHandle() = default;
  explicit ClHandle(T h) : h_(h) {}
  ~ClHandle() { reset(); }
  ClHandle(ClHandle&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  ClHandle& operator=(ClHandle&& o) noexcept {
    if (this != &o) reset(), h_ = o.h_, o.h_ = nullptr;
    return *this;
  }
  ClHandle(const ClHandle&) = delete;
  ClHandle& operator=(const ClHandle&) = delete;
  T get() const { return h_; }
  T* out() { return reset(), &h_; }
  T release() {
    T h = h_;
    h_ = nullptr;
    return h;
  }
  void reset() {
    if (h_) Release(h_);
    h_ = nullptr;
  }
  explicit operator bool() const { return h_ != nullptr; }

 private:
  T h_ = nullptr;
};
using Context = ClHandle<cl_context, clReleaseContext>;
using CommandQueue = ClHandle<cl_command_queue, clReleaseCommandQueue>;
using Program = ClHandle<cl_program, clReleaseProgram>;
using Kernel = ClHandle<cl_kernel, clReleaseKernel>;
using Mem = ClHandle<cl_mem, clReleaseMemObject>;
using ClEvent = ClHandle<cl_event, clReleaseEvent>;

// ---- what the sessions open on one device share (ocl_shared.cpp) ----
// Every device_open of one device index while another is open gets the same context, so that
// programs and constants made for one session serve the next: a second session of ResNet-50
// spent ~85 % of its start packing and uploading weights again and ~10 % loading programs.
// The state lives as long as an open device holds it (sessions that come and go one after the
// other start afresh, as before).
struct SharedDevice {
  Context context;
  std::mutex mutex;
  // Programs by family, build options and cache directory.
  std::map<std::string, Program> programs;
  // Constants on the device by content key (content_key): packed weights and plain uploads,
  // alive while an executable holds them.
  std::map<std::string, std::weak_ptr<Mem>> constants;
};
// Constants this thread found shared (device.constant) since it last reset it: what compile
// logs at debug level.
inline thread_local size_t t_shared_constants = 0;
inline thread_local size_t t_made_constants = 0;
// While compile or executable_deserialize runs on this thread (ocl_cache.cpp):
// - the host's content hashes of the graph's constants (ABI 1.2), by data pointer, which
//   content_key uses instead of hashing the bytes again;
// - every constant the patch holds, by content key, for executable_serialize;
// - in executable_deserialize, the device copies the cache entry holds, by content key, which
//   device.constant() takes instead of packing and uploading the host's data.
struct HostHash {
  uint64_t lo = 0, hi = 0;
  size_t bytes = 0;
};
inline thread_local const std::map<const void*, HostHash>* t_host_hashes = nullptr;
inline thread_local std::set<std::string>* t_used_programs = nullptr;  // families
inline thread_local std::vector<std::pair<std::string, std::shared_ptr<Mem>>>* t_used_constants =
    nullptr;
struct RestoredConstant {
  const void* data = nullptr;
  size_t bytes = 0;
};
inline thread_local const std::map<std::string, RestoredConstant>* t_restored = nullptr;
// What executable_serialize writes (ocl_cache.cpp): the GEMM engine the patch was compiled for,
// its programs' binaries by family, its constants' device buffers by content key.
struct CacheImage {
  GemmEngine gemm_engine = GemmEngine::kUndecided;
  std::vector<std::pair<std::string, std::string>> programs;
  std::vector<std::pair<std::string, std::shared_ptr<Mem>>> constants;
};
// What executable_deserialize reads: the same, the constants pointing into the host's bytes.
struct ParsedCacheImage {
  GemmEngine gemm_engine = GemmEngine::kUndecided;
  std::vector<std::pair<std::string, std::string>> programs;
  std::map<std::string, RestoredConstant> constants;
};
using CacheWriter = std::function<Status(const void* data, size_t bytes)>;
Status write_cache_image(quilt_device_s& device, const CacheImage& image, const CacheWriter& write);
// Fails, naming what does not fit, on bytes that are not a well-formed image.
Status read_cache_image(const void* data, size_t bytes, ParsedCacheImage* out);
// A device buffer of a constant from an executable cache entry: in place (CL_MEM_USE_HOST_PTR)
// on a host-memory device when aligned, else a copy; *in_place says which.
Status restore_constant(quilt_device_s& device, const RestoredConstant& c, cl_mem* mem,
                        bool* in_place);
// The shared state of device `index`, made (with its context) when no open device holds it.
Status shared_device(int32_t index, std::shared_ptr<SharedDevice>* out);
// A key for device data made from host data: what it is (kind, layout, dims) and a 128-bit hash
// of the bytes.
std::string content_key(const std::string& what, const void* data, size_t bytes);
// A read-only buffer of `count` floats (zeroed, then written by fill), for packed weights. On a
// host-memory device fill writes straight into the memory the buffer then uses in place
// (CL_MEM_USE_HOST_PTR, freed with the buffer), so the packed copy exists once; elsewhere into a
// host vector the buffer is made from. `what` names the weight in errors.
Status packed_constant(quilt_device_s& device, size_t count,
                       const std::function<void(float*)>& fill, const std::string& what,
                       cl_mem* mem);

// ---- ops ----

struct OpDef;

// A node as compiled: everything copied out of the host's graph.
struct NodeDesc {
  std::string name;  // for messages: the node's name, or "<Op> node #<index>"
  const OpDef* op = nullptr;
  std::vector<int32_t> inputs, outputs;  // indices into the executable's values; -1 = absent
  std::string kernel;                    // the kernel (or kernel stem) this node launches
  std::array<float, 2> f{};              // float parameters (alpha, beta, clip bounds, ...)
  std::array<int64_t, 4> i{};            // integer parameters (axis, transA, transB, ...)
  std::shared_ptr<Mem> packed;           // a constant operand prepared at compile (upload)
  std::shared_ptr<Mem> keep;             // a shared constant OpParams holds a reference to
  // A Conv's fused activation (conv_act in conv.cl: kind, alpha, beta), and on the activation
  // node folded into it: nothing to run, its output a view of the Conv's.
  cl_float4 act{{0, 0, 0, 0}};
  bool folded = false;
};

class Launch;

// The graph seen by prepare(): the node and its values as supports() or compile() got them.
struct NodeView {
  const quilt_graph_t& graph;
  const quilt_node_t& node;
  const quilt_value_t* input(size_t i) const {
    return i < node.num_inputs && node.inputs[i] >= 0 ? &graph.values[node.inputs[i]] : nullptr;
  }
  const quilt_value_t* output(size_t i) const {
    return i < node.num_outputs && node.outputs[i] >= 0 ? &graph.values[node.outputs[i]] : nullptr;
  }
  const quilt_attribute_t* attribute(const char* name) const;
  int64_t int_attribute(const char* name, int64_t fallback) const;
  float float_attribute(const char* name, float fallback) const;
};

struct OpDef {
  const char* op_type;
  size_t min_inputs, max_inputs;
  // The kernels_cl family its kernels live in; nullptr for reshape-like ops, which launch
  // nothing: their output is a view of input 0 (a copy only where it leaves the patch).
  const char* program;
  // Inputs that are int64 constants (shape, axes) rather than float32 data: bit i = input i.
  uint32_t int64_constant_inputs;
  // Checks what the generic rules (float32, known rank, input count) do not and fills the
  // node's parameters; returns why the op is refused, or "" when it is claimed.
  std::string (*prepare)(const NodeView& view, NodeDesc* desc);
  // Enqueues the node's kernels for one execution (concrete shapes and buffers in launch).
  Status (*enqueue)(Launch& launch, const NodeDesc& desc);
  // Optional (nullptr: nothing): at compile, prepares constant operands on the device once,
  // e.g. weights in the kernel's layout (desc->packed).
  Status (*upload)(quilt_device_s& device, const NodeView& view, NodeDesc* desc) = nullptr;
  // Inputs that are bool (one byte per value) rather than float32: bit i = input i.
  uint32_t bool_inputs = 0;
};

// The op table: supports() and compile() both read it. Null when op_type is not in it.
const OpDef* find_op(const char* op_type);

// Why the device cannot run `node` of `graph`, or "" when it can (and then *desc is filled).
std::string check_node(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc);

// numpy broadcasting of two shapes; false when they are incompatible.
bool broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b,
                     std::vector<int64_t>* out);

// The per-family prepare/enqueue pairs (ops_*.cpp), listed in op_table.cpp.
#define QUILT_OPENCL_OP(fn)                                       \
  std::string prepare_##fn(const NodeView& view, NodeDesc* desc); \
  Status enqueue_##fn(Launch& launch, const NodeDesc& desc);
QUILT_OPENCL_OP(binary)
QUILT_OPENCL_OP(unary)
QUILT_OPENCL_OP(where)
QUILT_OPENCL_OP(matmul)
QUILT_OPENCL_OP(gemm)
QUILT_OPENCL_OP(softmax)
#undef QUILT_OPENCL_OP
std::string prepare_view(const NodeView& view, NodeDesc* desc);
Status upload_gemm(quilt_device_s& device, const NodeView& view, NodeDesc* desc);

// part 2 ops: conv, pool, norm, reduce, tensor (ops_conv/pool/norm/reduce/tensor.cpp).
// Parameters that NodeDesc::i/f cannot hold (pads, permutations, slice starts, ...) live in an
// OpParams that prepare() puts in desc->packed; its Mem base is the node's constant prepared at
// upload (packed weights, folded scale and shift), empty when there is none.
struct OpParams : Mem {
  std::vector<int64_t> v;
};
OpParams& make_params(NodeDesc* desc);         // a fresh OpParams in desc->packed
const OpParams& params(const NodeDesc& desc);  // the one make_params() made
#define QUILT_OPENCL_OP(fn)                                       \
  std::string prepare_##fn(const NodeView& view, NodeDesc* desc); \
  Status enqueue_##fn(Launch& launch, const NodeDesc& desc);
QUILT_OPENCL_OP(conv)
QUILT_OPENCL_OP(conv_transpose)
QUILT_OPENCL_OP(pool)
QUILT_OPENCL_OP(global_pool)
QUILT_OPENCL_OP(batchnorm)
QUILT_OPENCL_OP(instancenorm)
QUILT_OPENCL_OP(layernorm)
QUILT_OPENCL_OP(rmsnorm)
QUILT_OPENCL_OP(reduce)
QUILT_OPENCL_OP(transpose)
QUILT_OPENCL_OP(concat)
QUILT_OPENCL_OP(split)
QUILT_OPENCL_OP(slice)
QUILT_OPENCL_OP(gather)
QUILT_OPENCL_OP(pad)
QUILT_OPENCL_OP(resize)
#undef QUILT_OPENCL_OP
Status upload_conv(quilt_device_s& device, const NodeView& view, NodeDesc* desc);
Status upload_batchnorm(quilt_device_s& device, const NodeView& view, NodeDesc* desc);
Status upload_gather(quilt_device_s& device, const NodeView& view, NodeDesc* desc);
// end of part 2 ops

// ---- events ----

// What an event handle refers to: the OpenCL events of the first and the last command of the
// operation that signals it (the same for a single command), or the failure of that operation.
// The first and last command of one node of an execution (retained), for node_timing.
struct NodeEvents {
  size_t node = 0;
  cl_event first = nullptr, last = nullptr;
};

struct EventState {
  std::mutex mutex;
  bool armed = false;                        // handed to an operation (events are single-use)
  cl_event first = nullptr, last = nullptr;  // retained; released with the handle
  Status failure;                            // set when the operation failed on the host side
  // An execute's per-node timings, delivered to the host's node_timing the first time the
  // event is seen complete (event_wait or event_query), so before the host sees it signalled.
  std::vector<NodeEvents> nodes;
  void (*node_timing)(void*, size_t, uint64_t, uint64_t) = nullptr;
  void* node_timing_context = nullptr;
  int64_t clock_offset_ns = 0;
  void deliver_node_timings();  // under mutex, once the commands completed
};

}  // namespace quilt::opencl

// ---- the opaque handles (the ABI leaves their definition to each backend) ----

struct quilt_event_s {
  quilt::opencl::EventState state;
  ~quilt_event_s();
};

struct quilt_device_s {
  int32_t index = 0;
  const quilt::opencl::DeviceEntry* entry = nullptr;
  quilt::opencl::Options options;
  // Made by ready() at the first compile, load, alloc or copy, not at device_open: a session
  // whose plan puts nothing on the device creates no context (PoCL: ~8 MiB resident).
  std::shared_ptr<quilt::opencl::SharedDevice> shared;
  quilt::opencl::Context context;  // shared->context, retained
  quilt::opencl::CommandQueue queue;
  int64_t clock_offset_ns = 0;  // host now_ns() minus the device's profiling clock
  std::mutex open_mutex;
  std::atomic<bool> opened{false};
  quilt::opencl::Status ready();

  // Programs (shared by the sessions on this device) and kernels, built lazily (at the first
  // compile that needs them).
  quilt::opencl::Status program(const std::string& family, cl_program* out);
  // The program of a family made from a binary (an executable cache entry's) unless the device
  // has it already; false when the driver refuses the binary.
  bool adopt_program(const std::string& family, const std::string& binary);
  // The key of a family's program in shared->programs.
  std::string program_key(const std::string& family) const;
  // The device copy of a constant with this content key: the one an open session made, else
  // made now by `make` (which returns a new buffer) and shared from then on.
  template <class Make>
  quilt::opencl::Status constant(const std::string& key, Make make,
                                 std::shared_ptr<quilt::opencl::Mem>* out);

  // Enqueues of one execution run under this lock, so kernels' arguments are set and enqueued
  // without interleaving, and pool buffers are handed out in queue order.
  std::mutex enqueue_mutex;
  std::map<std::pair<std::string, std::string>, quilt::opencl::Kernel> kernels;
  quilt::opencl::Status kernel(const std::string& family, const std::string& name, cl_kernel* out);

  // Intermediates: buffers reused across executions, by size. Safe to hand out again as soon
  // as the execution that used one is enqueued, since the queue runs in order.
  std::multimap<size_t, cl_mem> pool;  // guarded by enqueue_mutex

  // The GEMM engine, decided at the first compile with a MatMul or Gemm (option, cache entry
  // or measurement) and fixed for the device's lifetime.
  std::mutex gemm_mutex;
  std::atomic<quilt::opencl::GemmEngine> gemm_engine{quilt::opencl::GemmEngine::kUndecided};
  quilt::opencl::Status decide_gemm_engine();
  ~quilt_device_s();
};

template <class Make>
quilt::opencl::Status quilt_device_s::constant(const std::string& key, Make make,
                                               std::shared_ptr<quilt::opencl::Mem>* out) {
  using namespace quilt::opencl;
  std::lock_guard lock(shared->mutex);
  auto& slot = shared->constants[key];
  auto record = [&] {
    if (t_used_constants) t_used_constants->emplace_back(key, *out);
  };
  if ((*out = slot.lock())) {
    ++t_shared_constants;
    record();
    return {};
  }
  for (auto it = shared->constants.begin(); it != shared->constants.end();)  // forget dead ones
    it = it->second.expired() && &it->second != &slot ? shared->constants.erase(it) : ++it;
  cl_mem mem = nullptr;
  if (const auto it = t_restored ? t_restored->find(key)
                                 : std::map<std::string, RestoredConstant>::const_iterator{};
      t_restored && it != t_restored->end()) {
    bool in_place = false;
    if (Status s = restore_constant(*this, it->second, &mem, &in_place); !s.ok()) return s;
    *out = std::make_shared<Mem>(mem);
    // A buffer over the host's mapping of the entry lives only as long as this executable:
    // never handed to another session.
    if (!in_place) slot = *out;
    record();
    return {};
  }
  if (Status s = make(&mem); !s.ok()) return s;
  *out = std::make_shared<Mem>(mem);
  slot = *out;
  ++t_made_constants;
  record();
  return {};
}

namespace quilt::opencl {

// One execution being enqueued: the values' shapes and buffers, and the events it chains.
class Launch {
 public:
  Launch(quilt_device_s& device, std::vector<std::vector<int64_t>> shapes,
         std::vector<cl_mem> buffers, std::vector<cl_event> waits)
      : device_(device),
        shapes_(std::move(shapes)),
        buffers_(std::move(buffers)),
        waits_(std::move(waits)) {}
  ~Launch();
  Launch(const Launch&) = delete;
  Launch& operator=(const Launch&) = delete;

  quilt_device_s& device() { return device_; }
  // With node timing on, commands enqueued after begin_node(i) belong to node i.
  void time_nodes() { timing_ = true; }
  void begin_node(size_t node) {
    if (timing_) nodes_.push_back({node, nullptr, nullptr});
  }
  std::vector<NodeEvents> take_node_events() { return std::move(nodes_); }
  std::span<const int64_t> dims(int32_t value) const { return shapes_[value]; }
  cl_mem buffer(int32_t value) const { return buffers_[value]; }
  void set_buffer(int32_t value, cl_mem buffer) { buffers_[value] = buffer; }
  // A pool buffer for this execution, back in the pool when the launch ends.
  Status scratch(size_t bytes, cl_mem* out);
  // The pool buffers taken since scratch_mark() was `mark` go back to the pool now: a node's
  // own temporaries (an operand transposed or packed for it, partial sums), dead once its
  // commands are enqueued. The queue runs in order, so later commands may reuse them.
  size_t scratch_mark() const { return scratch_.size(); }
  void release_scratch(size_t mark);

  // Sets the kernel's arguments and enqueues it with a global size rounded up to the local
  // size; the first command of the launch waits for the execution's wait events.
  template <class... Args>
  Status run(const std::string& family, const std::string& kernel_name,
             std::array<size_t, 3> global, std::array<size_t, 3> local, const Args&... args);
  Status copy(cl_mem src, cl_mem dst, size_t bytes);
  // Host memory staged through the queue, in queue order (host-memory devices, unaligned
  // pointers): host -> buffer, buffer -> host.
  Status write(cl_mem dst, const void* src, size_t bytes);
  Status read(cl_mem src, void* dst, size_t bytes);
  // Makes a CL_MEM_USE_HOST_PTR buffer's contents visible in its host memory (map, unmap).
  Status sync_to_host(cl_mem mem, size_t bytes);
  // For libraries that enqueue without a wait list (CLBlast): before its first command, a
  // marker holding the execution's wait events (the queue is in order); after it, adopt()
  // takes the library's event as this launch's latest.
  Status wait_for_waits();
  Status adopt(cl_event event, const std::string& what) {
    return enqueued(CL_SUCCESS, event, what);
  }
  // Ends the launch: a marker when nothing was enqueued; returns the first and last events
  // (retained for the caller).
  Status finish(cl_event* first, cl_event* last);

 private:
  Status set_arg(cl_kernel k, cl_uint index, size_t size, const void* value);
  Status enqueued(cl_int err, cl_event event, const std::string& what);

  quilt_device_s& device_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<cl_mem> buffers_;
  std::vector<cl_event> waits_;  // for the first command only
  cl_event first_ = nullptr, last_ = nullptr;
  std::vector<std::pair<size_t, cl_mem>> scratch_;
  bool timing_ = false;
  std::vector<NodeEvents> nodes_;
};

template <class... Args>
Status Launch::run(const std::string& family, const std::string& kernel_name,
                   std::array<size_t, 3> global, std::array<size_t, 3> local, const Args&... args) {
  cl_kernel k = nullptr;
  if (Status s = device_.kernel(family, kernel_name, &k); !s.ok()) return s;
  cl_uint index = 0;
  Status status;
  ((status.ok() ? (void)(status = set_arg(k, index++, sizeof(Args), &args)) : void()), ...);
  if (!status.ok()) return status;
  size_t dims = 1;
  for (size_t d = 0; d < 3; ++d) {
    if (global[d] == 0) return {};  // nothing to do
    global[d] = (global[d] + local[d] - 1) / local[d] * local[d];
    if (global[d] > 1 || local[d] > 1) dims = d + 1;
  }
  cl_event event = nullptr;
  cl_int err = clEnqueueNDRangeKernel(device_.queue.get(), k, static_cast<cl_uint>(dims), nullptr,
                                      global.data(), local.data(),
                                      first_ ? 0 : static_cast<cl_uint>(waits_.size()),
                                      first_ || waits_.empty() ? nullptr : waits_.data(), &event);
  return enqueued(err, event, "enqueue kernel " + kernel_name);
}

// The fixed local sizes: each new local size is one more compile on PoCL.
inline constexpr size_t kLocal1d = 64;

// The memory, copy and event slots of quilt_backend_t (ocl_device.cpp).
// A buffer of bytes (> 0) within the device's (or max_alloc_bytes') single-buffer limit.
Status alloc_buffer(quilt_device_s& device, size_t bytes, cl_mem* out);

// GEMM engines (ops_gemm.cpp, ocl_clblast.cpp): C (m x n, row-major) = A * B.
// Ours, with B a plain k x n matrix (packed by a kernel first):
Status enqueue_own_gemm(Launch& launch, int64_t m, int64_t n, int64_t k, cl_mem a, cl_mem b,
                        cl_mem c);
// CLBlast's SGEMM: C = alpha * op(A) * op(B) + beta * C, leading dims lda, ldb and n.
Status enqueue_clblast_gemm(Launch& launch, bool trans_a, bool trans_b, int64_t m, int64_t n,
                            int64_t k, float alpha, cl_mem a, int64_t lda, cl_mem b, int64_t ldb,
                            float beta, cl_mem c);
const char* engine_name(GemmEngine engine);
quilt_status_t alloc(quilt_device_t device, size_t bytes, void** ptr);
void free_memory(quilt_device_t device, void* ptr);
quilt_status_t copy_to_device(quilt_device_t device, void* dst, const void* src_host, size_t bytes,
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

// Checks wait events and the signal event before an operation: collects the wait events'
// OpenCL events (a failed one fails the operation) and arms the signal event.
Status prepare_events(const quilt_event_t* wait_events, size_t num_wait_events,
                      quilt_event_t signal_event, std::vector<cl_event>* waits);
// Stores the operation's events (retained) into the signal event, or its failure.
void signal(quilt_event_t signal_event, cl_event first, cl_event last, const Status& failure);
// The offset between host now_ns() and the device's profiling clock, measured with markers.
int64_t measure_clock_offset(cl_command_queue queue);

}  // namespace quilt::opencl
