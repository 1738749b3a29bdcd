// The example backend: a simulated two-device accelerator behind the plain-C plugin ABI
// (include/quilt/backend.h). Each open device has its own memory arena, handed to the host as
// fake addresses that crash if dereferenced, and its own worker thread running an in-order
// queue, so the host's asynchronous paths (events, copies, overlap) are exercised for real.
//
// Options (device_open): memory_limit (bytes, default 256 MiB), execute_delay_ms (simulated
// device time per execute, default 0), fail_execute_on / fail_compile_on (a node name: inject a
// failure into executes / compiles of patches containing it), graph_claims (what supports_graph,
// ABI 1.2's whole-graph claims, claims: node, the default, as supports; conv_relu, only a Conv
// followed by a Relu; whole, all or nothing).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <utility>

#include "example.hpp"

using namespace quilt::example;

namespace {

constexpr const char* kKnownOptions =
    "memory_limit, execute_delay_ms, fail_execute_on, fail_execute_count, fail_compile_on, "
    "check_runs, fail_run_begin, graph_claims";

Status parse_options(const quilt_option_t* options, size_t count, Options* out) {
  auto number = [](const char* key, const char* text, uint64_t* value) -> Status {
    const char* end = text + std::strlen(text);
    auto [ptr, ec] = std::from_chars(text, end, *value);
    if (ec != std::errc() || ptr != end || ptr == text)
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  std::string("option ") + key + ": '" + text + "' is not a non-negative integer");
    return {};
  };
  for (size_t i = 0; i < count; ++i) {
    std::string key = options[i].key;
    const char* value = options[i].value;
    Status status;
    if (key == "memory_limit") {
      status = number("memory_limit", value, &out->memory_limit);
      if (status.ok() && (out->memory_limit == 0 || out->memory_limit > kAddressWindow))
        status = fail(QUILT_STATUS_INVALID_ARGUMENT, "option memory_limit: must be between 1 and " +
                                                         std::to_string(kAddressWindow));
    } else if (key == "execute_delay_ms") {
      status = number("execute_delay_ms", value, &out->execute_delay_ms);
    } else if (key == "fail_execute_on") {
      out->fail_execute_on = value;
    } else if (key == "fail_execute_count") {
      status = number("fail_execute_count", value, &out->fail_execute_count);
    } else if (key == "fail_compile_on") {
      out->fail_compile_on = value;
    } else if (key == "check_runs") {
      out->check_runs = std::string(value) == "1";
    } else if (key == "fail_run_begin") {
      out->fail_run_begin = std::string(value) == "1";
    } else if (key == "graph_claims") {
      out->graph_claims = value;
      if (out->graph_claims != "node" && out->graph_claims != "conv_relu" &&
          out->graph_claims != "whole")
        status = fail(QUILT_STATUS_INVALID_ARGUMENT, "option graph_claims: '" + out->graph_claims +
                                                         "' is not node, conv_relu or whole");
    } else {
      status = fail(QUILT_STATUS_INVALID_ARGUMENT,
                    "unknown option '" + key + "' (known: " + kKnownOptions + ")");
    }
    if (!status.ok()) return status;
  }
  return {};
}

// A compiled patch: immutable, shared by the executable handle and its queued executions.
struct Program {
  explicit Program(Arena* a) : arena(a) {}
  ~Program() {
    for (int64_t offset : constant_offsets)
      if (offset >= 0) arena->free(static_cast<uint64_t>(offset));
  }
  Arena* arena;
  std::vector<std::string> value_names;
  std::vector<int64_t> constant_offsets;  // per value: arena offset, -1 = not an uploaded constant
  std::vector<NodeDesc> nodes;
  std::vector<int32_t> inputs, outputs, intermediates;
  std::string failing_node;  // fail_execute_on matched a node of this patch
};

}  // namespace

struct quilt_executable_s {
  std::shared_ptr<const Program> program;
};

namespace {

// ---- description and devices ----

const char* const kDeviceNames[] = {"Simulated accelerator 0", "Simulated accelerator 1"};
const char* const kPropertyKeys[] = {"kind", "memory"};
const char* const kPropertyValues[] = {"simulated (quilt example plugin)",
                                       "an arena per session, option memory_limit"};

int32_t device_count(void*) {
  return 2;
}

quilt_status_t device_info(void*, int32_t index, quilt_device_info_t* info) {
  if (index < 0 || index >= 2)
    return to_c(fail(QUILT_STATUS_INVALID_ARGUMENT, "no device " + std::to_string(index)));
#define QUILT_EXAMPLE_FITS(field) \
  (info->struct_size >= offsetof(quilt_device_info_t, field) + sizeof(info->field))
  if (QUILT_EXAMPLE_FITS(name)) info->name = kDeviceNames[index];
  if (QUILT_EXAMPLE_FITS(flags)) info->flags = 0;  // own memory, asynchronous
  if (QUILT_EXAMPLE_FITS(memory_bytes)) info->memory_bytes = kDefaultMemoryLimit;
  if (QUILT_EXAMPLE_FITS(property_values)) {
    info->num_properties = 2;
    info->property_keys = kPropertyKeys;
    info->property_values = kPropertyValues;
  }
#undef QUILT_EXAMPLE_FITS
  return nullptr;
}

quilt_status_t device_open(void*, int32_t index, const quilt_option_t* options, size_t num_options,
                           quilt_device_t* device) {
  return guarded([&]() -> Status {
    if (index < 0 || index >= 2)
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "no device " + std::to_string(index));
    Options parsed;
    if (Status s = parse_options(options, num_options, &parsed); !s.ok()) return s;
    static std::atomic<uint64_t> opened{0};
    uint64_t slot = opened++ % kAddressSlots;
    *device = new quilt_device_s(index, std::move(parsed), kAddressBase + slot * kAddressWindow);
    return {};
  });
}

void device_close(quilt_device_t device) {
  device->queue.drain_and_join();
  delete device;
}

// ---- capability and compilation ----

bool graph_fits(const quilt_graph_t* graph) {
  return graph && graph->struct_size >= offsetof(quilt_graph_t, outputs) + sizeof(graph->outputs);
}

quilt_status_t supports(quilt_device_t, const quilt_graph_t* graph, int32_t* claimed, char* reason,
                        size_t reason_size) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph) || graph->num_nodes != 1)
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "supports: expected a graph of one node");
    NodeDesc desc;
    std::string why = check_node(*graph, graph->nodes[0], &desc);
    *claimed = why.empty() ? 1 : 0;
    if (reason && reason_size > 0) {
      size_t n = std::min(why.size(), reason_size - 1);
      std::memcpy(reason, why.data(), n);
      reason[n] = '\0';
    }
    return {};
  });
}

// The answer of supports_graph, owned by the plugin until the host's release call.
struct GraphClaims {
  std::vector<int32_t> claimed;
  std::vector<std::string> reasons;
  std::vector<const char*> reason_ptrs;
};

quilt_status_t supports_graph(quilt_device_t device, const quilt_graph_t* graph,
                              quilt_graph_claims_t* claims) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph) || !claims)
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "supports_graph: expected a graph and claims");
    const size_t n = graph->num_nodes;
    auto answer = std::make_unique<GraphClaims>();
    std::vector<std::string>& why = answer->reasons;
    why.resize(n);
    for (size_t i = 0; i < n; ++i) {
      NodeDesc desc;
      why[i] = check_node(*graph, graph->nodes[i], &desc);
    }
    auto label = [&](size_t i) {
      const quilt_node_t& node = graph->nodes[i];
      return std::string(node.op_type) + " '" + (node.name ? node.name : "") + "'";
    };
    answer->claimed.assign(n, 0);
    const std::string& mode = device->options.graph_claims;
    if (mode == "conv_relu") {
      // A Relu runs here only fused into the Conv before it, and that Conv only with it.
      std::vector<int> producer(graph->num_values, -1);
      for (size_t i = 0; i < n; ++i)
        for (size_t o = 0; o < graph->nodes[i].num_outputs; ++o)
          if (int32_t v = graph->nodes[i].outputs[o]; v >= 0 && size_t(v) < graph->num_values)
            producer[v] = static_cast<int>(i);
      for (size_t i = 0; i < n; ++i) {
        const quilt_node_t& node = graph->nodes[i];
        if (std::strcmp(node.op_type, "Relu") != 0 || !why[i].empty() || node.num_inputs < 1 ||
            node.inputs[0] < 0 || size_t(node.inputs[0]) >= graph->num_values)
          continue;
        const int p = producer[node.inputs[0]];
        if (p >= 0 && std::strcmp(graph->nodes[p].op_type, "Conv") == 0 && why[p].empty())
          answer->claimed[i] = answer->claimed[p] = 1;
      }
      for (size_t i = 0; i < n; ++i)
        if (!answer->claimed[i] && why[i].empty())
          why[i] = std::string(graph->nodes[i].op_type) +
                   ": graph_claims=conv_relu claims only a Conv followed by a Relu";
    } else {
      size_t refused = n;
      for (size_t i = 0; i < n && refused == n; ++i)
        if (!why[i].empty()) refused = i;
      for (size_t i = 0; i < n; ++i) {
        if (!why[i].empty()) continue;
        if (mode == "whole" && refused < n)
          why[i] = "graph_claims=whole: the graph's " + label(refused) +
                   " cannot run here, so none of it does (" + why[refused] + ")";
        else
          answer->claimed[i] = 1;
      }
    }
    for (std::string& r : why) {
      if (r.size() >= QUILT_CLAIM_REASON_MAX) r.resize(QUILT_CLAIM_REASON_MAX - 1);
      answer->reason_ptrs.push_back(r.c_str());
    }
    claims->num_nodes = n;
    claims->claimed = answer->claimed.data();
    claims->reasons = answer->reason_ptrs.data();
    claims->release = [](void* context) { delete static_cast<GraphClaims*>(context); };
    claims->release_context = answer.release();
    return {};
  });
}

Status compile_program(quilt_device_s& device, const quilt_graph_t& graph, Program* program) {
  auto in_range = [&](int32_t v) { return v >= 0 && static_cast<size_t>(v) < graph.num_values; };
  for (size_t i = 0; i < graph.num_nodes; ++i) {
    const quilt_node_t& node = graph.nodes[i];
    NodeDesc desc;
    if (std::string why = check_node(graph, node, &desc); !why.empty())
      return fail(QUILT_STATUS_NOT_IMPLEMENTED,
                  "compile: node '" + std::string(node.name) + "': " + why);
    if (!device.options.fail_compile_on.empty() && desc.name == device.options.fail_compile_on)
      return fail(QUILT_STATUS_RUNTIME_ERROR,
                  "injected compile failure in node '" + desc.name + "'");
    if (!device.options.fail_execute_on.empty() && desc.name == device.options.fail_execute_on)
      program->failing_node = desc.name;
    program->nodes.push_back(std::move(desc));
  }

  size_t n = graph.num_values;
  program->constant_offsets.assign(n, -1);
  std::vector<char> available(n, 0);  // a graph input, a constant, or produced by a node
  for (size_t v = 0; v < n; ++v) {
    const quilt_value_t& value = graph.values[v];
    program->value_names.emplace_back(value.name ? value.name : "");
    if (!value.constant) continue;
    available[v] = 1;
    const quilt_tensor_info_t& info = value.info;
    if (info.rank < 0 ||
        std::any_of(info.dims, info.dims + info.rank, [](int64_t d) { return d < 0; }))
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "compile: constant '" + program->value_names[v] + "' has an unknown shape");
    uint64_t bytes = element_count({info.dims, static_cast<size_t>(info.rank)}) * sizeof(float);
    if (bytes == 0) continue;
    uint64_t offset;
    Status s = device.arena.alloc(bytes, &offset);
    if (!s.ok()) return {s.code, s.message + " (constant '" + program->value_names[v] + "')"};
    program->constant_offsets[v] = static_cast<int64_t>(offset);
    std::memcpy(device.arena.at(offset), value.constant, bytes);  // the upload, once
  }
  for (size_t i = 0; i < graph.num_inputs; ++i) {
    if (!in_range(graph.inputs[i]))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: graph input index out of range");
    program->inputs.push_back(graph.inputs[i]);
    available[graph.inputs[i]] = 1;
  }
  std::vector<char> produced(n, 0);
  for (const NodeDesc& node : program->nodes) {
    for (int32_t v : node.inputs)
      if (v >= 0 && !available[v])
        return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: node '" + node.name + "' reads '" +
                                                       program->value_names[v] +
                                                       "', which nothing before it provides");
    for (int32_t v : node.outputs)
      if (v >= 0) available[v] = produced[v] = 1;
  }
  for (size_t i = 0; i < graph.num_outputs; ++i) {
    int32_t v = graph.outputs[i];
    if (!in_range(v) || !produced[v])
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "compile: graph output " + std::to_string(i) + " is not produced by a node");
    program->outputs.push_back(v);
    produced[v] = 0;  // written into the host's buffer, not an intermediate
  }
  for (size_t v = 0; v < n; ++v)
    if (produced[v]) program->intermediates.push_back(static_cast<int32_t>(v));
  return {};
}

quilt_status_t compile(quilt_device_t device, const quilt_graph_t* graph,
                       quilt_executable_t* executable) {
  return guarded([&]() -> Status {
    if (!graph_fits(graph))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "compile: graph struct too small");
    auto program = std::make_shared<Program>(&device->arena);
    if (Status s = compile_program(*device, *graph, program.get()); !s.ok()) return s;
    *executable = new quilt_executable_s{std::move(program)};
    return {};
  });
}

void executable_release(quilt_device_t, quilt_executable_t executable) {
  delete executable;
}

// ---- execution ----

using Dims = std::vector<int64_t>;

// The host's optional per-node timing callback (quilt_execute_args_t::node_timing).
struct NodeTiming {
  void (*callback)(void*, size_t, uint64_t, uint64_t) = nullptr;
  void* context = nullptr;
};

Status run_program(quilt_device_s& device, const Program& program, const std::vector<Dims>& shapes,
                   const std::vector<int64_t>& input_offsets,
                   const std::vector<int64_t>& output_offsets, NodeTiming timing) {
  if (device.options.execute_delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(device.options.execute_delay_ms));
  if (!program.failing_node.empty() &&
      (device.options.fail_execute_count == 0 ||
       device.injected_failures.fetch_add(1) < device.options.fail_execute_count))
    return fail(QUILT_STATUS_DEVICE_ERROR,
                "injected failure in node '" + program.failing_node + "'");

  Arena& arena = device.arena;
  std::vector<float*> data(shapes.size(), nullptr);
  auto at = [&](int64_t offset) {
    return offset < 0 ? nullptr : reinterpret_cast<float*>(arena.at(static_cast<uint64_t>(offset)));
  };
  for (size_t v = 0; v < shapes.size(); ++v) data[v] = at(program.constant_offsets[v]);
  for (size_t i = 0; i < program.inputs.size(); ++i) data[program.inputs[i]] = at(input_offsets[i]);
  for (size_t i = 0; i < program.outputs.size(); ++i)
    data[program.outputs[i]] = at(output_offsets[i]);

  // Intermediates live in device memory for this execution only.
  std::vector<uint64_t> scratch;
  struct FreeScratch {
    Arena& arena;
    std::vector<uint64_t>& offsets;
    ~FreeScratch() {
      for (uint64_t o : offsets) arena.free(o);
    }
  } free_scratch{arena, scratch};
  for (int32_t v : program.intermediates) {
    uint64_t bytes = element_count(shapes[v]) * sizeof(float);
    if (bytes == 0) continue;
    uint64_t offset;
    Status s = arena.alloc(bytes, &offset);
    if (!s.ok()) return {s.code, s.message + " (intermediate '" + program.value_names[v] + "')"};
    scratch.push_back(offset);
    data[v] = at(static_cast<int64_t>(offset));
  }

  for (size_t k = 0; k < program.nodes.size(); ++k) {
    const NodeDesc& node = program.nodes[k];
    const uint64_t start = timing.callback ? host().now_ns() : 0;
    std::vector<TensorView> in, out;
    for (int32_t v : node.inputs)
      in.push_back(v < 0 ? TensorView{nullptr, {}} : TensorView{data[v], shapes[v]});
    for (int32_t v : node.outputs)
      out.push_back(v < 0 ? TensorView{nullptr, {}} : TensorView{data[v], shapes[v]});
    if (Status s = node.op->run(node, in, out); !s.ok()) return s;
    if (timing.callback) timing.callback(timing.context, k, start, host().now_ns());
  }
  return {};
}

quilt_status_t execute(quilt_device_t device, quilt_executable_t executable,
                       const quilt_execute_args_t* args) {
  return guarded([&]() -> Status {
    if (!args || args->struct_size <
                     offsetof(quilt_execute_args_t, signal_event) + sizeof(args->signal_event))
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "execute: args struct too small");
    if (device->options.check_runs) {
      const uint64_t run =
          args->struct_size >= offsetof(quilt_execute_args_t, run) + sizeof(args->run) ? args->run
                                                                                       : 0;
      std::lock_guard lock(device->runs_mutex);
      if (std::find(device->open_runs.begin(), device->open_runs.end(), run) ==
          device->open_runs.end())
        return fail(QUILT_STATUS_INVALID_ARGUMENT,
                    "execute: run " + std::to_string(run) + " was not begun (check_runs)");
    }
    std::shared_ptr<const Program> program = executable->program;
    // The host's arrays are valid only during this call: copy shapes and pointers now.
    std::vector<Dims> shapes;
    for (size_t v = 0; v < program->value_names.size(); ++v) {
      const quilt_tensor_info_t& info = args->values[v];
      if (info.dtype != QUILT_DTYPE_FLOAT32 || info.rank < 0)
        return fail(QUILT_STATUS_INVALID_ARGUMENT, "execute: value '" + program->value_names[v] +
                                                       "' is " + dtype_name(info.dtype) +
                                                       " of rank " + std::to_string(info.rank) +
                                                       ", expected float32 of known rank");
      shapes.emplace_back(info.dims, info.dims + info.rank);
    }
    auto offsets = [&](const std::vector<int32_t>& values, void* const* pointers,
                       std::vector<int64_t>* out) -> Status {
      for (size_t i = 0; i < values.size(); ++i) {
        uint64_t bytes = element_count(shapes[values[i]]) * sizeof(float), offset = 0;
        if (bytes == 0) {
          out->push_back(-1);
          continue;
        }
        Status s = device->offset_of(pointers[i], bytes, &offset);
        if (!s.ok())
          return {s.code,
                  s.message + " (execute: buffer of '" + program->value_names[values[i]] + "')"};
        out->push_back(static_cast<int64_t>(offset));
      }
      return {};
    };
    NodeTiming timing;  // a field newer hosts add at the end: read it only if present
    if (args->struct_size >= offsetof(quilt_execute_args_t, node_timing_context) + sizeof(void*))
      timing = {args->node_timing, args->node_timing_context};
    std::vector<int64_t> input_offsets, output_offsets;
    if (Status s = offsets(program->inputs, args->inputs, &input_offsets); !s.ok()) return s;
    if (Status s = offsets(program->outputs, args->outputs, &output_offsets); !s.ok()) return s;
    return enqueue(
        *device, args->wait_events, args->num_wait_events, args->signal_event,
        [device, program, shapes = std::move(shapes), input_offsets = std::move(input_offsets),
         output_offsets = std::move(output_offsets), timing] {
          return run_program(*device, *program, shapes, input_offsets, output_offsets, timing);
        });
  });
}

// ABI 1.2: a run's bracket. The example only checks the host's contract (check_runs).
quilt_status_t run_begin(quilt_device_t device, uint64_t run) {
  return guarded([&]() -> Status {
    if (device->options.fail_run_begin)
      return fail(QUILT_STATUS_DEVICE_ERROR,
                  "run_begin: injected failure (run " + std::to_string(run) + ")");
    std::lock_guard lock(device->runs_mutex);
    if (device->options.check_runs && !device->open_runs.empty())
      return fail(QUILT_STATUS_INVALID_ARGUMENT, "run_begin: run " +
                                                     std::to_string(device->open_runs[0]) +
                                                     " was never ended (check_runs)");
    if (std::find(device->open_runs.begin(), device->open_runs.end(), run) !=
        device->open_runs.end())
      return fail(QUILT_STATUS_INVALID_ARGUMENT,
                  "run_begin: run " + std::to_string(run) + " begun twice");
    device->open_runs.push_back(run);
    return {};
  });
}

void run_end(quilt_device_t device, uint64_t run) {
  std::lock_guard lock(device->runs_mutex);
  std::erase(device->open_runs, run);
}

void release(void*) {
  set_host(nullptr);
}

#ifdef QUILT_EXAMPLE_BAD_ABI  // a variant for the host's version check
constexpr uint32_t kReportedAbi = 99u << 16;
#else
constexpr uint32_t kReportedAbi = QUILT_BACKEND_ABI_VERSION;
#endif

[[maybe_unused]] const quilt_backend_t kBackend = {
    // unused by the init_fail variant
    .struct_size = sizeof(quilt_backend_t),
    .abi_version = kReportedAbi,
    .name = "example",
    .version = "1.0.0",
    .context = nullptr,
    .release = release,
    .device_count = device_count,
    .device_info = device_info,
    .device_open = device_open,
    .device_close = device_close,
    .supports = supports,
    .compile = compile,
    .executable_release = executable_release,
    .execute = execute,
    .alloc = alloc,
    .free = free_memory,
    .copy_to_device = copy_to_device,
    .copy_to_host = copy_to_host,
    .event_create = event_create,
    .event_wait = event_wait,
    .event_query = event_query,
    .event_release = event_release,
    .event_timestamps = event_timestamps,
    .run_begin = run_begin,
    .run_end = run_end,
    // No executable cache: compiling a patch here is quicker than reading a file.
    .executable_serialize = nullptr,
    .executable_deserialize = nullptr,
    .copy_device_to_device = copy_device_to_device,
    .supports_graph = supports_graph,
};

#ifdef QUILT_EXAMPLE_FAULTS
// A variant for the host's load-time checks, configured by the environment when it is loaded
// (the tests load copies of it under different names, one per case):
//   QUILT_EXAMPLE_NULL_SLOT=<slot>      that slot of the table is NULL
//   QUILT_EXAMPLE_STRUCT_SIZE=<bytes>   the table's struct_size (an older or broken plugin)
//   QUILT_EXAMPLE_ABI_MINOR=<minor>     abi_version 1.<minor>
//   QUILT_EXAMPLE_UNTERMINATED_REASON=1 supports() refuses filling reason without a NUL
//   QUILT_EXAMPLE_GRAPH_CLAIMS=<fault>  supports_graph answers wrongly: "short" (one claim too
//                                       few), "null_claimed", "null_reason" (node 0's),
//                                       "unterminated" (node 0's reason has no NUL), "bad_claim"
//                                       (node 0's claim is 7) or "fail" (an error status)
quilt_backend_t g_faulty;

quilt_status_t supports_graph_faulty(quilt_device_t device, const quilt_graph_t* graph,
                                     quilt_graph_claims_t* claims) {
  const char* env = std::getenv("QUILT_EXAMPLE_GRAPH_CLAIMS");
  const std::string fault = env ? env : "";
  if (fault == "fail")
    return to_c(fail(QUILT_STATUS_DEVICE_ERROR, "supports_graph: injected failure"));
  quilt_status_t s = supports_graph(device, graph, claims);
  if (s || claims->num_nodes == 0) return s;
  // Copies of the answer's arrays, altered; the answer itself is still released by the host.
  thread_local std::vector<int32_t> claimed;
  thread_local std::vector<const char*> reasons;
  thread_local char no_nul[2 * QUILT_CLAIM_REASON_MAX];
  claimed.assign(claims->claimed, claims->claimed + claims->num_nodes);
  reasons.assign(claims->reasons, claims->reasons + claims->num_nodes);
  claims->claimed = claimed.data();
  claims->reasons = reasons.data();
  if (fault == "short") claims->num_nodes -= 1;
  if (fault == "null_claimed") claims->claimed = nullptr;
  if (fault == "null_reason") reasons[0] = nullptr;
  if (fault == "bad_claim") claimed[0] = 7;
  if (fault == "unterminated") {
    std::memset(no_nul, 'x', sizeof(no_nul));
    reasons[0] = no_nul;
  }
  return nullptr;
}

quilt_status_t supports_unterminated(quilt_device_t device, const quilt_graph_t* graph,
                                     int32_t* claimed, char* reason, size_t reason_size) {
  quilt_status_t s = supports(device, graph, claimed, reason, reason_size);
  if (!s && !*claimed && reason_size > 0) std::memset(reason, 'x', reason_size);
  return s;
}

const quilt_backend_t* faulty_backend() {
  g_faulty = kBackend;
  if (const char* slot = std::getenv("QUILT_EXAMPLE_NULL_SLOT")) {
    // Every function pointer of the table, by name.
    const std::pair<const char*, size_t> slots[] = {
        {"release", offsetof(quilt_backend_t, release)},
        {"device_count", offsetof(quilt_backend_t, device_count)},
        {"device_info", offsetof(quilt_backend_t, device_info)},
        {"device_open", offsetof(quilt_backend_t, device_open)},
        {"device_close", offsetof(quilt_backend_t, device_close)},
        {"supports", offsetof(quilt_backend_t, supports)},
        {"compile", offsetof(quilt_backend_t, compile)},
        {"executable_release", offsetof(quilt_backend_t, executable_release)},
        {"execute", offsetof(quilt_backend_t, execute)},
        {"alloc", offsetof(quilt_backend_t, alloc)},
        {"free", offsetof(quilt_backend_t, free)},
        {"copy_to_device", offsetof(quilt_backend_t, copy_to_device)},
        {"copy_to_host", offsetof(quilt_backend_t, copy_to_host)},
        {"event_create", offsetof(quilt_backend_t, event_create)},
        {"event_wait", offsetof(quilt_backend_t, event_wait)},
        {"event_query", offsetof(quilt_backend_t, event_query)},
        {"event_release", offsetof(quilt_backend_t, event_release)},
        {"event_timestamps", offsetof(quilt_backend_t, event_timestamps)},
        {"run_begin", offsetof(quilt_backend_t, run_begin)},
        {"run_end", offsetof(quilt_backend_t, run_end)},
        {"supports_graph", offsetof(quilt_backend_t, supports_graph)},
    };
    for (const auto& [name, offset] : slots)
      if (std::strcmp(slot, name) == 0)
        std::memset(reinterpret_cast<char*>(&g_faulty) + offset, 0, sizeof(void (*)()));
  }
  if (const char* size = std::getenv("QUILT_EXAMPLE_STRUCT_SIZE"))
    g_faulty.struct_size = static_cast<uint32_t>(std::strtoul(size, nullptr, 10));
  if (const char* minor = std::getenv("QUILT_EXAMPLE_ABI_MINOR"))
    g_faulty.abi_version = (QUILT_BACKEND_ABI_MAJOR << 16) | std::strtoul(minor, nullptr, 10);
  if (std::getenv("QUILT_EXAMPLE_UNTERMINATED_REASON")) {
    g_faulty.supports = supports_unterminated;
    g_faulty.supports_graph = nullptr;  // so that the host asks supports()
  }
  if (std::getenv("QUILT_EXAMPLE_GRAPH_CLAIMS")) g_faulty.supports_graph = supports_graph_faulty;
  return &g_faulty;
}
#endif

}  // namespace

extern "C" QUILT_BACKEND_EXPORT quilt_status_t quilt_backend_init(const quilt_host_api_t* host,
                                                                  const quilt_backend_t** backend) {
  // status_create and abi_version sit at the same place in every version of the host api.
  if (host->abi_version >> 16 != QUILT_BACKEND_ABI_MAJOR) {
    std::string message =
        "[example] the host speaks ABI " + std::to_string(host->abi_version >> 16) + "." +
        std::to_string(host->abi_version & 0xffff) + ", this plugin was built for " +
        std::to_string(QUILT_BACKEND_ABI_MAJOR) + "." + std::to_string(QUILT_BACKEND_ABI_MINOR);
    return host->status_create(QUILT_STATUS_INVALID_ARGUMENT, message.c_str());
  }
  if (host->struct_size < offsetof(quilt_host_api_t, now_ns) + sizeof(host->now_ns))
    return host->status_create(QUILT_STATUS_INVALID_ARGUMENT,
                               "[example] the host api has no now_ns");
  set_host(host);
#ifdef QUILT_EXAMPLE_INIT_FAIL  // a variant for the host's handling of a failing entry point
  (void)backend;
  return host->status_create(QUILT_STATUS_RUNTIME_ERROR, "example: simulated driver not found");
#elif defined(QUILT_EXAMPLE_FAULTS)
  *backend = faulty_backend();
  return nullptr;
#else
  *backend = &kBackend;
  return nullptr;
#endif
}
