// The core's side of the backend ABI: RAII wrappers that turn statuses into quilt::Error, and
// AbiGraph, which lays a set of core nodes out as a quilt_graph_t. Every backend, the built-in
// CPU included, is reached only through these.
//
//   auto dev = std::make_shared<Device>(*inventory.find("example"), 0, options);
//   AbiGraph g;  ... g.add_node(node, inputs, outputs) ...
//   std::string why = dev->supports(g);          // "" = claimed
//   auto exe = dev->compile(g);
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/backend_registry.hpp"
#include "core/graph.hpp"
#include "core/op_schema.hpp"
#include "quilt/backend.h"

namespace quilt {

// ---- statuses ----
void status_release(quilt_status_t status);
// Throws Error("<where>: <message>") with the status's code, freeing it; no-op for NULL.
void check_status(quilt_status_t status, const std::string& where);
// Converts a caught exception into a status (for the built-in backend's side of the ABI).
quilt_status_t status_from_current_exception();
quilt_status_t make_status(quilt_status_code_t code, const std::string& message);
// The message of a non-NULL status, which is freed.
std::string take_status_message(quilt_status_t status);
// Held by each session: while it lives, plugins' log messages (which name no session) are
// shown up to its level too. Without any, they are shown up to Warning.
class PluginLogScope {
 public:
  explicit PluginLogScope(LogLevel level);
  ~PluginLogScope();
  PluginLogScope(const PluginLogScope&) = delete;
  PluginLogScope& operator=(const PluginLogScope&) = delete;

 private:
  int level_;
};
// The level plugins' messages are shown up to now.
LogLevel plugin_log_level();

// ---- a quilt_graph_t built from core nodes, owning every array it points to ----
class AbiGraph {
 public:
  AbiGraph() = default;
  AbiGraph(const AbiGraph&) = delete;
  AbiGraph& operator=(const AbiGraph&) = delete;

  // constant, if given, must outlive every executable compiled from this graph.
  int add_value(const std::string& name, const TypeShape& type, const Tensor* constant);
  // inputs/outputs: value indices (-1 = absent). The node must outlive the graph.
  void add_node(const Node& node, std::vector<int32_t> inputs, std::vector<int32_t> outputs);
  void set_inputs(std::vector<int32_t> inputs) { inputs_ = std::move(inputs); }
  void set_outputs(std::vector<int32_t> outputs) { outputs_ = std::move(outputs); }
  const quilt_graph_t* get();
  // Offers quilt_graph_t::constant_done to the backend compiling this graph.
  void set_constant_done(void (*fn)(void*, int32_t), void* context) {
    done_fn_ = fn;
    done_context_ = context;
  }
  size_t num_values() const { return names_.size(); }
  // Hashes every constant value's data, for quilt_graph_t::constant_hashes (ABI 1.2): done for
  // the patches compiled on plugins and for the executable cache's key, not for supports().
  void compute_constant_hashes();
  bool has_constant_hashes() const { return !hashes_.empty(); }

 private:
  struct NodeArrays {
    std::vector<int32_t> inputs, outputs;
    std::vector<quilt_attribute_t> attributes;
  };
  std::vector<std::string> names_;
  std::vector<std::vector<int64_t>> dims_;
  std::vector<quilt_value_t> values_;
  std::vector<const Node*> nodes_;
  std::vector<NodeArrays> node_arrays_;
  std::vector<quilt_node_t> abi_nodes_;
  std::vector<std::vector<const char*>> strings_;
  std::vector<std::vector<quilt_constant_t>> tensors_;
  std::vector<std::vector<int64_t>> tensor_dims_;
  std::vector<int32_t> inputs_, outputs_;
  std::vector<const Tensor*> constants_;  // per value, or null
  std::vector<quilt_hash128_t> hashes_;   // per value, when computed
  quilt_graph_t graph_{};
  void (*done_fn_)(void*, int32_t) = nullptr;
  void* done_context_ = nullptr;
};

quilt_tensor_info_t tensor_info(const TypeShape& type, std::vector<int64_t>& dims_storage);

class Device;

// A single-use completion marker of one device.
class Event {
 public:
  Event(std::shared_ptr<const Device> device, quilt_event_t handle);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  quilt_event_t handle() const { return handle_; }
  const Device& device() const { return *device_; }
  // Blocks until signalled; throws the failure of the operation that signalled it.
  void wait(const std::string& where) const;
  // Device-side start/end if the backend reports them.
  bool timestamps(uint64_t* start_ns, uint64_t* end_ns) const;

 private:
  std::shared_ptr<const Device> device_;
  quilt_event_t handle_;
};

class Executable {
 public:
  // keep: what must outlive the backend's executable (the mapped cache entry it was
  // deserialized from), released after executable_release.
  Executable(std::shared_ptr<const Device> device, quilt_executable_t handle,
             std::shared_ptr<const void> keep = nullptr)
      : device_(std::move(device)), handle_(handle), keep_(std::move(keep)) {}
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  quilt_executable_t handle() const { return handle_; }

 private:
  std::shared_ptr<const Device> device_;
  quilt_executable_t handle_;
  std::shared_ptr<const void> keep_;
};

// An open device of a backend, for one session.
class Device : public std::enable_shared_from_this<Device> {
 public:
  Device(const LoadedBackend& backend, int32_t index,
         const std::map<std::string, std::string>& options);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  // "cpu" for the CPU, else "<backend>:<index>".
  const std::string& name() const { return name_; }
  const std::string& backend_name() const { return backend_.name; }
  const std::string& description() const { return description_; }
  bool host_memory() const { return flags_ & QUILT_DEVICE_HOST_MEMORY; }
  bool synchronous() const { return flags_ & QUILT_DEVICE_SYNCHRONOUS; }
  // What one command and wait costs on the device, in ns, as its backend measured and published
  // it (device property "launch_ns", read once the device is open); 0 when it did not.
  double launch_ns() const { return launch_ns_; }

  // "" when the device claims the one-node graph, else the backend's reason. When it claims it,
  // *note (if given) gets what the backend said of how it runs the node ("" when nothing).
  std::string supports(AbiGraph& node, std::string* note = nullptr) const;
  // ABI 1.2's whole-graph claims: whether the backend has supports_graph, and its answer, per
  // node of `graph`: "" when claimed (with the backend's note in `note`), else why not. A
  // malformed answer (wrong length, NULL or unterminated reason, a claim not 0 or 1) or a
  // failure throws, naming the plugin.
  struct GraphClaim {
    std::string why_not, note;
  };
  bool claims_graphs() const { return claims_graphs_; }
  std::vector<GraphClaim> supports_graph(AbiGraph& graph) const;
  std::shared_ptr<Executable> compile(AbiGraph& graph, const std::string& where) const;
  // ABI 1.2's executable cache: whether the backend has both slots; serialize hands the
  // executable's bytes to `sink` as the backend writes them (a sink that throws stops it);
  // deserialize makes one from bytes that `keep` keeps alive.
  bool caches_executables() const { return caches_executables_; }
  void serialize(const Executable& exe, const std::function<void(const void*, size_t)>& sink,
                 const std::string& where) const;
  std::shared_ptr<Executable> deserialize(AbiGraph& graph, const void* data, size_t bytes,
                                          std::shared_ptr<const void> keep,
                                          const std::string& where) const;
  // What compile's result depends on besides the graph, for the executable cache's key: the
  // backend's name, version and ABI version, the device's index, name, flags and properties
  // (launch_ns aside: measured, it varies) and the device_open options.
  const std::string& identity() const { return identity_; }
  // Throws on a synchronous failure; asynchronous ones arrive through the signal event.
  void execute(const Executable& exe, const quilt_execute_args_t& args,
               const std::string& where) const;
  void* alloc(size_t bytes, const std::string& where) const;
  void free(void* ptr) const;
  std::unique_ptr<Event> create_event() const;
  void copy_to_device(void* dst, const void* src, size_t bytes,
                      const std::vector<quilt_event_t>& waits, const Event* signal,
                      const std::string& where) const;
  void copy_to_host(void* dst, const void* src, size_t bytes,
                    const std::vector<quilt_event_t>& waits, const Event* signal,
                    const std::string& where) const;

  // ABI 1.2: whether the backend copies between two of its devices (copy_device_to_device),
  // and that copy, issued on this device (the destination) from `source`, of the same backend.
  bool copies_between_devices() const { return copies_between_devices_; }
  void copy_from_device(void* dst, const Device& source, const void* src, size_t bytes,
                        const std::vector<quilt_event_t>& waits, const Event* signal,
                        const std::string& where) const;

  // ABI 1.2: whether the backend has run_begin/run_end; run_begin throws its failure.
  bool brackets_runs() const { return brackets_runs_; }
  void run_begin(uint64_t run) const;
  void run_end(uint64_t run) const;

  const quilt_backend_t& api() const { return *api_; }
  quilt_device_t handle() const { return handle_; }

 private:
  LoadedBackend backend_;
  const quilt_backend_t* api_;
  quilt_device_t handle_ = nullptr;
  std::string name_, description_;
  uint32_t flags_ = 0;
  double launch_ns_ = 0;
  bool brackets_runs_ = false;
  bool caches_executables_ = false;
  bool copies_between_devices_ = false;
  bool claims_graphs_ = false;
  std::string identity_;
};

using DeviceList = std::vector<std::shared_ptr<const Device>>;

}  // namespace quilt
