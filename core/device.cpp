// RAII wrappers over the backend ABI, and AbiGraph.
#include "core/device.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/executable_cache.hpp"

struct quilt_status_s {
  quilt_status_code_t code;
  std::string message;
};

namespace quilt {
namespace {

// Returned when even a status cannot be allocated; never freed.
quilt_status_s g_out_of_memory{QUILT_STATUS_OUT_OF_MEMORY, "out of memory"};

ErrorCode error_code_of(quilt_status_code_t code) {
  switch (code) {
    case QUILT_STATUS_INVALID_ARGUMENT:
      return ErrorCode::InvalidArgument;
    case QUILT_STATUS_NOT_IMPLEMENTED:
      return ErrorCode::NotImplemented;
    case QUILT_STATUS_OUT_OF_MEMORY:
      return ErrorCode::OutOfMemory;
    default:
      return ErrorCode::Runtime;
  }
}

quilt_status_code_t status_code_of(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidArgument:
      return QUILT_STATUS_INVALID_ARGUMENT;
    case ErrorCode::NotImplemented:
      return QUILT_STATUS_NOT_IMPLEMENTED;
    case ErrorCode::OutOfMemory:
      return QUILT_STATUS_OUT_OF_MEMORY;
    default:
      return QUILT_STATUS_RUNTIME_ERROR;
  }
}

// Optional slots exist only if the plugin's struct is long enough.
template <class F>
bool has_slot(const quilt_backend_t& api, F quilt_backend_t::*slot, size_t offset) {
  return api.struct_size >= offset + sizeof(F) && api.*slot != nullptr;
}

}  // namespace

quilt_status_t make_status(quilt_status_code_t code, const std::string& message) {
  try {
    return new quilt_status_s{code, message};
  } catch (...) {
    return &g_out_of_memory;
  }
}

void status_release(quilt_status_t status) {
  if (status && status != &g_out_of_memory) delete status;
}

std::string take_status_message(quilt_status_t status) {
  std::string m = status->message;
  status_release(status);
  return m;
}

void check_status(quilt_status_t status, const std::string& where) {
  if (!status) return;
  const ErrorCode code = error_code_of(status->code);
  std::string message = take_status_message(status);
  if (message.empty()) message = "failed without a message";
  if (where.empty()) throw Error(code, message);
  throw Error(code, where + (where.back() == ']' ? " " : ": ") + message);
}

quilt_status_t status_from_current_exception() {
  try {
    throw;
  } catch (const Error& e) {
    return make_status(status_code_of(e.code()), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(QUILT_STATUS_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_status(QUILT_STATUS_RUNTIME_ERROR, e.what());
  } catch (...) {
    return make_status(QUILT_STATUS_RUNTIME_ERROR, "unknown exception");
  }
}

// ---- AbiGraph ----

quilt_tensor_info_t tensor_info(const TypeShape& type, std::vector<int64_t>& dims_storage) {
  dims_storage = type.dims;
  return {static_cast<int32_t>(type.dtype),
          type.has_shape ? static_cast<int32_t>(type.dims.size()) : -1, dims_storage.data()};
}

int AbiGraph::add_value(const std::string& name, const TypeShape& type, const Tensor* constant) {
  names_.push_back(name);
  TypeShape t = constant ? TypeShape::of(*constant) : type;
  dims_.push_back(t.dims);
  quilt_value_t v{};
  v.info = {static_cast<int32_t>(t.dtype), t.has_shape ? static_cast<int32_t>(t.dims.size()) : -1,
            nullptr};
  v.constant = constant ? (constant->nbytes() ? constant->raw_data() : constant) : nullptr;
  values_.push_back(v);
  constants_.push_back(constant);
  return static_cast<int>(names_.size() - 1);
}

void AbiGraph::add_node(const Node& node, std::vector<int32_t> inputs,
                        std::vector<int32_t> outputs) {
  nodes_.push_back(&node);
  node_arrays_.push_back({std::move(inputs), std::move(outputs), {}});
}

const quilt_graph_t* AbiGraph::get() {
  for (size_t i = 0; i < values_.size(); ++i) {
    values_[i].name = names_[i].c_str();
    values_[i].info.dims = dims_[i].data();
  }
  abi_nodes_.clear();
  strings_.clear();
  tensors_.clear();
  tensor_dims_.clear();
  // Reserve so that pointers into these stay put while they fill.
  size_t n_strings = 0, n_tensors = 0, n_dims = 0;
  for (const Node* n : nodes_)
    for (const auto& [_, a] : n->attributes) {
      if (a.kind == Attribute::Kind::Strings) ++n_strings;
      if (a.kind == Attribute::Kind::Tensor || a.kind == Attribute::Kind::Tensors) {
        ++n_tensors;
        n_dims += a.tensors.size() + 1;
      }
    }
  strings_.reserve(n_strings);
  tensors_.reserve(n_tensors);
  tensor_dims_.reserve(n_dims);
  auto constant_of = [&](const Tensor& t) {
    tensor_dims_.push_back(t.shape());
    return quilt_constant_t{{static_cast<int32_t>(t.dtype()), static_cast<int32_t>(t.rank()),
                             tensor_dims_.back().data()},
                            t.nbytes() ? t.raw_data() : nullptr};
  };
  for (size_t k = 0; k < nodes_.size(); ++k) {
    const Node& n = *nodes_[k];
    NodeArrays& arrays = node_arrays_[k];
    arrays.attributes.clear();
    for (const auto& [name, a] : n.attributes) {
      quilt_attribute_t q{};
      q.name = name.c_str();
      switch (a.kind) {
        case Attribute::Kind::Float:
          q.kind = QUILT_ATTRIBUTE_FLOAT;
          q.f = a.f;
          break;
        case Attribute::Kind::Int:
          q.kind = QUILT_ATTRIBUTE_INT;
          q.i = a.i;
          break;
        case Attribute::Kind::String:
          q.kind = QUILT_ATTRIBUTE_STRING;
          q.s = a.s.c_str();
          q.s_size = a.s.size();
          break;
        case Attribute::Kind::Floats:
          q.kind = QUILT_ATTRIBUTE_FLOATS;
          q.count = a.floats.size();
          q.floats = a.floats.data();
          break;
        case Attribute::Kind::Ints:
          q.kind = QUILT_ATTRIBUTE_INTS;
          q.count = a.ints.size();
          q.ints = a.ints.data();
          break;
        case Attribute::Kind::Strings: {
          q.kind = QUILT_ATTRIBUTE_STRINGS;
          strings_.emplace_back();
          for (const auto& s : a.strings) strings_.back().push_back(s.c_str());
          q.count = a.strings.size();
          q.strings = strings_.back().data();
          break;
        }
        case Attribute::Kind::Tensor:
        case Attribute::Kind::Tensors: {
          const bool one = a.kind == Attribute::Kind::Tensor;
          q.kind = one ? QUILT_ATTRIBUTE_TENSOR : QUILT_ATTRIBUTE_TENSORS;
          tensors_.emplace_back();
          if (one) {
            tensors_.back().push_back(constant_of(a.t));
          } else {
            for (const auto& t : a.tensors) tensors_.back().push_back(constant_of(t));
          }
          q.count = tensors_.back().size();
          q.tensors = tensors_.back().data();
          break;
        }
        default:
          continue;  // graphs: such nodes are run by the host
      }
      arrays.attributes.push_back(q);
    }
    quilt_node_t q{};
    q.name = n.name.c_str();
    q.op_type = n.op_type.c_str();
    q.domain = n.domain.c_str();
    q.opset = n.opset;
    q.index = static_cast<int64_t>(n.index);
    q.num_inputs = arrays.inputs.size();
    q.inputs = arrays.inputs.data();
    q.num_outputs = arrays.outputs.size();
    q.outputs = arrays.outputs.data();
    q.num_attributes = arrays.attributes.size();
    q.attributes = arrays.attributes.data();
    abi_nodes_.push_back(q);
  }
  graph_.struct_size = sizeof(quilt_graph_t);
  graph_.num_values = values_.size();
  graph_.values = values_.data();
  graph_.num_nodes = abi_nodes_.size();
  graph_.nodes = abi_nodes_.data();
  graph_.num_inputs = inputs_.size();
  graph_.inputs = inputs_.data();
  graph_.num_outputs = outputs_.size();
  graph_.outputs = outputs_.data();
  graph_.constant_done = done_fn_;
  graph_.constant_done_context = done_context_;
  graph_.constant_hashes = hashes_.empty() ? nullptr : hashes_.data();
  return &graph_;
}

void AbiGraph::compute_constant_hashes() {
  hashes_.assign(constants_.size(), quilt_hash128_t{0, 0});
  for (size_t v = 0; v < constants_.size(); ++v)
    if (constants_[v])
      hashes_[v] = content_hash(constants_[v]->nbytes() ? constants_[v]->raw_data() : nullptr,
                                constants_[v]->nbytes());
}

// ---- Event, Executable ----

Event::Event(std::shared_ptr<const Device> device, quilt_event_t handle)
    : device_(std::move(device)), handle_(handle) {}

Event::~Event() {
  device_->api().event_release(device_->handle(), handle_);
}

void Event::wait(const std::string& where) const {
  check_status(device_->api().event_wait(device_->handle(), handle_), where);
}

bool Event::timestamps(uint64_t* start_ns, uint64_t* end_ns) const {
  const quilt_backend_t& api = device_->api();
  if (!has_slot(api, &quilt_backend_t::event_timestamps,
                offsetof(quilt_backend_t, event_timestamps)))
    return false;
  quilt_status_t s = api.event_timestamps(device_->handle(), handle_, start_ns, end_ns);
  if (s) {
    status_release(s);
    return false;
  }
  return true;
}

Executable::~Executable() {
  device_->api().executable_release(device_->handle(), handle_);
}

// ---- Device ----

Device::Device(const LoadedBackend& backend, int32_t index,
               const std::map<std::string, std::string>& options)
    : backend_(backend), api_(backend.api) {
  const int32_t count = api_->device_count(api_->context);
  if (index < 0 || index >= count)
    throw Error(ErrorCode::InvalidArgument,
                "backend '" + backend.name + "' has no device " + std::to_string(index) +
                    " (it has " + std::to_string(count) + (count == 1 ? " device)" : " devices)"));
  name_ = backend.name == "cpu" ? "cpu" : backend.name + ":" + std::to_string(index);
  // Only the name and flags: a session has no use for the properties, which a backend may
  // have to work out (the CPU backend's BLAS core loads OpenBLAS).
  quilt_device_info_t info{};
  info.struct_size = offsetof(quilt_device_info_t, flags) + sizeof(info.flags);
  check_status(api_->device_info(api_->context, index, &info), "[" + name_ + "] device_info");
  description_ = info.name ? info.name : "";
  flags_ = info.flags;
  std::vector<quilt_option_t> opts;
  for (const auto& [k, v] : options) opts.push_back({k.c_str(), v.c_str()});
  check_status(api_->device_open(api_->context, index, opts.data(), opts.size(), &handle_),
               "[" + name_ + "] cannot open the device");
  brackets_runs_ =
      has_slot(*api_, &quilt_backend_t::run_begin, offsetof(quilt_backend_t, run_begin)) &&
      has_slot(*api_, &quilt_backend_t::run_end, offsetof(quilt_backend_t, run_end));
  caches_executables_ = has_slot(*api_, &quilt_backend_t::executable_serialize,
                                 offsetof(quilt_backend_t, executable_serialize)) &&
                        has_slot(*api_, &quilt_backend_t::executable_deserialize,
                                 offsetof(quilt_backend_t, executable_deserialize));
  copies_between_devices_ = has_slot(*api_, &quilt_backend_t::copy_device_to_device,
                                     offsetof(quilt_backend_t, copy_device_to_device));
  claims_graphs_ =
      has_slot(*api_, &quilt_backend_t::supports_graph, offsetof(quilt_backend_t, supports_graph));
  identity_ = "backend " + backend.name + "\nversion " + backend.version + "\nabi " +
              std::to_string(backend.abi_version) + "\ndevice " + std::to_string(index) + " " +
              description_ + "\nflags " + std::to_string(flags_) + "\n";
  for (const auto& [k, v] : options) identity_ += "option " + k + "=" + v + "\n";
  // A device with its own memory or its own queue may publish what a command costs it (after
  // opening: the backend may measure it then), for the partitioner's cost rule; its properties
  // (driver, versions) also go into the executable cache's key. (The CPU, host memory and
  // synchronous, publishes nothing; asking would load OpenBLAS.)
  if (!host_memory() || !synchronous() || caches_executables_) {
    quilt_device_info_t full{};
    full.struct_size = sizeof(full);
    if (quilt_status_t s = api_->device_info(api_->context, index, &full)) {
      status_release(s);  // no cost published: the rule only leaves the device out
    } else {
      for (size_t k = 0; k < full.num_properties; ++k) {
        if (!full.property_keys[k] || !full.property_values[k]) continue;
        const std::string key = full.property_keys[k];
        if (key == "launch_ns")
          launch_ns_ = std::max(0.0, std::strtod(full.property_values[k], nullptr));
        else
          identity_ += "property " + key + "=" + full.property_values[k] + "\n";
      }
    }
  }
}

void Device::run_begin(uint64_t run) const {
  check_status(api_->run_begin(handle_, run), "[" + name_ + "] run_begin");
}

void Device::run_end(uint64_t run) const {
  api_->run_end(handle_, run);
}

Device::~Device() {
  if (handle_) api_->device_close(handle_);
}

std::string Device::supports(AbiGraph& node, std::string* note) const {
  char reason[512] = {0};
  int32_t claimed = 0;
  check_status(api_->supports(handle_, node.get(), &claimed, reason, sizeof(reason)),
               "[" + name_ + "] capability query");
  // A reason that fills the buffer without its NUL is cut, and says so.
  const bool terminated = std::memchr(reason, 0, sizeof(reason)) != nullptr;
  reason[sizeof(reason) - 1] = 0;
  if (claimed) {
    if (note) *note = reason;  // ABI 1.3: a claiming backend may say how it runs the node
    return "";
  }
  if (!reason[0]) return "not supported (no reason given)";
  if (!terminated)
    return std::string(reason) + "... (the backend's reason was cut: no NUL within " +
           std::to_string(sizeof(reason)) + " bytes)";
  return reason;
}

std::vector<Device::GraphClaim> Device::supports_graph(AbiGraph& graph) const {
  const quilt_graph_t* g = graph.get();
  quilt_graph_claims_t claims{};
  claims.struct_size = sizeof(claims);
  quilt_status_t status = api_->supports_graph(handle_, g, &claims);
  // The arrays are the plugin's until release, called once whatever the answer.
  struct Release {
    quilt_graph_claims_t& c;
    ~Release() {
      if (c.release) c.release(c.release_context);
    }
  } release{claims};
  const std::string where = "[" + name_ + "] supports_graph of backend '" + backend_.name + "' (" +
                            backend_.library + ")";
  check_status(status, where);
  auto malformed = [&](const std::string& what) {
    return Error(ErrorCode::Runtime, where + ": malformed answer: " + what);
  };
  if (claims.num_nodes != g->num_nodes)
    throw malformed(std::to_string(claims.num_nodes) + " claims for a graph of " +
                    std::to_string(g->num_nodes) + " nodes");
  if (g->num_nodes && (!claims.claimed || !claims.reasons))
    throw malformed(std::string(!claims.claimed ? "claimed" : "reasons") + " is NULL");
  std::vector<GraphClaim> out(g->num_nodes);
  for (size_t n = 0; n < g->num_nodes; ++n) {
    const quilt_node_t& node = g->nodes[n];
    const std::string label =
        std::string("node ") + std::to_string(n) + " (" + node.op_type +
        (node.name && node.name[0] ? std::string(" '") + node.name + "'" : std::string()) + ")";
    const int32_t claimed = claims.claimed[n];
    if (claimed != 0 && claimed != 1)
      throw malformed("claim of " + label + " is " + std::to_string(claimed) + ", expected 0 or 1");
    const char* reason = claims.reasons[n];
    if (!reason) throw malformed("the reason of " + label + " is NULL");
    const void* end = std::memchr(reason, 0, QUILT_CLAIM_REASON_MAX);
    if (!end)
      throw malformed("the reason of " + label + " has no NUL within " +
                      std::to_string(QUILT_CLAIM_REASON_MAX) + " bytes");
    std::string text(reason, static_cast<const char*>(end));
    if (claimed)
      out[n].note = std::move(text);
    else
      out[n].why_not = text.empty() ? "not supported (no reason given)" : std::move(text);
  }
  return out;
}

std::shared_ptr<Executable> Device::compile(AbiGraph& graph, const std::string& where) const {
  quilt_executable_t exe = nullptr;
  check_status(api_->compile(handle_, graph.get(), &exe), where);
  return std::make_shared<Executable>(shared_from_this(), exe);
}

void Device::serialize(const Executable& exe, const std::function<void(const void*, size_t)>& sink,
                       const std::string& where) const {
  using Sink = std::function<void(const void*, size_t)>;
  auto write = [](void* context, const void* data, size_t bytes) -> quilt_status_t {
    try {
      if (bytes) (*static_cast<const Sink*>(context))(data, bytes);
      return nullptr;
    } catch (...) {
      return status_from_current_exception();
    }
  };
  check_status(api_->executable_serialize(handle_, exe.handle(), write, const_cast<Sink*>(&sink)),
               where);
}

std::shared_ptr<Executable> Device::deserialize(AbiGraph& graph, const void* data, size_t bytes,
                                                std::shared_ptr<const void> keep,
                                                const std::string& where) const {
  quilt_executable_t exe = nullptr;
  check_status(api_->executable_deserialize(handle_, graph.get(), data, bytes, &exe), where);
  return std::make_shared<Executable>(shared_from_this(), exe, std::move(keep));
}

void Device::execute(const Executable& exe, const quilt_execute_args_t& args,
                     const std::string& where) const {
  check_status(api_->execute(handle_, exe.handle(), &args), where);
}

void* Device::alloc(size_t bytes, const std::string& where) const {
  void* p = nullptr;
  check_status(api_->alloc(handle_, bytes, &p), where);
  return p;
}

void Device::free(void* ptr) const {
  if (ptr) api_->free(handle_, ptr);
}

std::unique_ptr<Event> Device::create_event() const {
  quilt_event_t e = nullptr;
  check_status(api_->event_create(handle_, &e), "[" + name_ + "] event_create");
  return std::make_unique<Event>(shared_from_this(), e);
}

void Device::copy_to_device(void* dst, const void* src, size_t bytes,
                            const std::vector<quilt_event_t>& waits, const Event* signal,
                            const std::string& where) const {
  check_status(api_->copy_to_device(handle_, dst, src, bytes, waits.data(), waits.size(),
                                    signal ? signal->handle() : nullptr),
               where);
}

void Device::copy_to_host(void* dst, const void* src, size_t bytes,
                          const std::vector<quilt_event_t>& waits, const Event* signal,
                          const std::string& where) const {
  check_status(api_->copy_to_host(handle_, dst, src, bytes, waits.data(), waits.size(),
                                  signal ? signal->handle() : nullptr),
               where);
}

void Device::copy_from_device(void* dst, const Device& source, const void* src, size_t bytes,
                              const std::vector<quilt_event_t>& waits, const Event* signal,
                              const std::string& where) const {
  check_status(api_->copy_device_to_device(handle_, dst, source.handle_, src, bytes, waits.data(),
                                           waits.size(), signal ? signal->handle() : nullptr),
               where);
}

}  // namespace quilt
