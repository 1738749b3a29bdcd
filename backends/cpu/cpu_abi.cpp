// The built-in CPU backend behind the same C ABI as every plugin (include/quilt/backend.h).
// Its memory is host memory and it completes work before returning (QUILT_DEVICE_HOST_MEMORY |
// QUILT_DEVICE_SYNCHRONOUS): the host runs it on a thread of its own next to asynchronous
// devices. Kernels come from the table in backends/cpu/kernel.hpp.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/fusion.hpp"
#include "backends/cpu/gemm_bf16.hpp"
#include "backends/cpu/half_interior.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/blocked_ops.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "backends/cpu/kernels/conv_blocked.hpp"
#include "backends/cpu/layout.hpp"
#include "backends/cpu/qgemm.hpp"
#include "core/backend_registry.hpp"
#include "core/device.hpp"
#include "core/parse_int.hpp"

struct quilt_device_s {
  quilt_device_s(int threads, bool blocked_layout, bool bf16)
      : pool(threads), blocked_layout(blocked_layout), bf16(bf16) {}
  quilt::cpu::ThreadPool pool;
  bool blocked_layout;  // option layout: blocked or nchw (default; backends/cpu/layout.hpp)
  bool bf16;            // option precision=bf16: GEMM and convolution with bfloat16 operands
};

struct quilt_event_s {
  std::mutex mutex;
  std::condition_variable cv;
  bool signalled = false;
  std::string error;  // empty = success
  quilt_status_code_t code = QUILT_STATUS_OK;
  uint64_t start_ns = 0, end_ns = 0;

  void signal(uint64_t start, const std::string& err = "",
              quilt_status_code_t c = QUILT_STATUS_OK) {
    std::lock_guard lock(mutex);
    signalled = true;
    error = err;
    code = c;
    start_ns = start;
    end_ns = quilt::host_now_ns();
    cv.notify_all();
  }
};

namespace quilt::cpu {
namespace {

// A core Node rebuilt from the ABI's description; constants are wrapped, not copied.
Tensor wrap_constant(const quilt_constant_t& c) {
  std::vector<int64_t> dims(c.info.dims, c.info.dims + c.info.rank);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return Tensor::wrap(static_cast<DType>(c.info.dtype), std::move(dims),
                      n ? const_cast<void*>(c.data) : nullptr);
}

TypeShape type_of(const quilt_tensor_info_t& info) {
  TypeShape t;
  t.dtype = static_cast<DType>(info.dtype);
  t.has_shape = info.rank >= 0;
  if (t.has_shape) t.dims.assign(info.dims, info.dims + info.rank);
  return t;
}

Node node_of(const quilt_graph_t& g, const quilt_node_t& q) {
  Node n;
  n.name = q.name ? q.name : "";
  n.op_type = q.op_type;
  n.domain = q.domain ? q.domain : "";
  n.opset = q.opset;
  n.index = static_cast<size_t>(q.index);
  auto value_name = [&](int32_t v) { return v < 0 ? std::string() : g.values[v].name; };
  for (size_t i = 0; i < q.num_inputs; ++i) n.inputs.push_back(value_name(q.inputs[i]));
  for (size_t i = 0; i < q.num_outputs; ++i) n.outputs.push_back(value_name(q.outputs[i]));
  for (size_t k = 0; k < q.num_attributes; ++k) {
    const quilt_attribute_t& qa = q.attributes[k];
    Attribute a;
    a.name = qa.name;
    switch (qa.kind) {
      case QUILT_ATTRIBUTE_FLOAT:
        a.kind = Attribute::Kind::Float;
        a.f = qa.f;
        break;
      case QUILT_ATTRIBUTE_INT:
        a.kind = Attribute::Kind::Int;
        a.i = qa.i;
        break;
      case QUILT_ATTRIBUTE_STRING:
        a.kind = Attribute::Kind::String;
        a.s.assign(qa.s, qa.s_size);
        break;
      case QUILT_ATTRIBUTE_FLOATS:
        a.kind = Attribute::Kind::Floats;
        a.floats.assign(qa.floats, qa.floats + qa.count);
        break;
      case QUILT_ATTRIBUTE_INTS:
        a.kind = Attribute::Kind::Ints;
        a.ints.assign(qa.ints, qa.ints + qa.count);
        break;
      case QUILT_ATTRIBUTE_STRINGS:
        a.kind = Attribute::Kind::Strings;
        a.strings.assign(qa.strings, qa.strings + qa.count);
        break;
      case QUILT_ATTRIBUTE_TENSOR:
        a.kind = Attribute::Kind::Tensor;
        a.t = wrap_constant(qa.tensors[0]);
        break;
      case QUILT_ATTRIBUTE_TENSORS:
        a.kind = Attribute::Kind::Tensors;
        for (size_t i = 0; i < qa.count; ++i) a.tensors.push_back(wrap_constant(qa.tensors[i]));
        break;
      default:
        continue;
    }
    n.attributes[a.name] = std::move(a);
  }
  return n;
}

// The graph's values as core types and wrapped constants.
struct ValueTable {
  std::vector<TypeShape> types;
  std::vector<Tensor> constants;  // undefined for non-constants
  ValueTable(const quilt_graph_t& g) : types(g.num_values), constants(g.num_values) {
    for (size_t v = 0; v < g.num_values; ++v) {
      types[v] = type_of(g.values[v].info);
      if (g.values[v].constant) {
        quilt_constant_t c{g.values[v].info, g.values[v].constant};
        constants[v] = wrap_constant(c);
      }
    }
  }
};

struct CompiledNode : PatchNode {
  const KernelEntry* entry = nullptr;
  std::unique_ptr<Kernel> kernel;
  bool recheck = false;  // some input dtype was unknown at compile time
};

NodeSignature signature_of(const PatchNode& cn, const ValueTable& table) {
  NodeSignature sig{cn.node, {}, {}, {}};
  for (int32_t v : cn.inputs) {
    sig.inputs.push_back(v < 0 ? TypeShape{} : table.types[v]);
    sig.constants.push_back(v >= 0 && table.constants[v].defined() ? &table.constants[v] : nullptr);
  }
  for (int32_t v : cn.outputs) sig.outputs.push_back(v < 0 ? TypeShape{} : table.types[v]);
  return sig;
}

}  // namespace
}  // namespace quilt::cpu

struct quilt_executable_s {
  explicit quilt_executable_s(const quilt_graph_t& g) : table(g) {}
  quilt::cpu::ValueTable table;
  std::vector<quilt::cpu::CompiledNode> nodes;
  std::vector<int32_t> inputs, outputs;
  // Past the graph's values, the float32 twins of half values (half_interior.hpp): per twin,
  // the graph value it holds.
  std::vector<int32_t> twin_of_value;
  std::vector<int> last_use;  // per value: the last node reading it (-1: none)
  // How long the last successful run took: a run that long wakes the pool's sleeping workers as
  // it starts (execute).
  mutable std::atomic<uint64_t> last_run_ns{0};
};

namespace quilt::cpu {
namespace {

// The debug log's line for a node that runs on the blocked layout's kernels.
void log_blocked(const Node& node, const char* input, bool out_blocked) {
  host_api()->log(QUILT_LOG_DEBUG, ("cpu: " + node.op_type + " node \"" + node.name +
                                    "\" on the blocked layout (input " + input + ", output " +
                                    (out_blocked ? "blocked" : "NCHW") + ")")
                                       .c_str());
}

int32_t device_count(void*) {
  return 1;
}

quilt_status_t device_info(void*, int32_t, quilt_device_info_t* info) {
  try {
#define QUILT_CPU_FITS(field) \
  (info->struct_size >= offsetof(quilt_device_info_t, field) + sizeof(info->field))
    static const std::string model = [] {
      std::ifstream cpuinfo("/proc/cpuinfo");
      std::string line;
      while (std::getline(cpuinfo, line))
        if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
      return std::string("cpu");
    }();
    if (QUILT_CPU_FITS(name)) info->name = model.c_str();
    if (QUILT_CPU_FITS(flags)) info->flags = QUILT_DEVICE_HOST_MEMORY | QUILT_DEVICE_SYNCHRONOUS;
    if (QUILT_CPU_FITS(memory_bytes)) info->memory_bytes = 0;
    if (QUILT_CPU_FITS(property_values)) {
      // Only for callers that want the properties (`quilt devices`): describing the BLAS core
      // loads OpenBLAS, which a session loads only if a kernel calls it.
      static const std::vector<std::string> strings = {
          std::to_string(std::thread::hardware_concurrency()),
          blas_core_description(),
          std::to_string(KernelRegistry::builtin().op_types().size()),
          qgemm_description(),
          bf16::precisions_description(),
          layout_description()};
      static const char* keys[] = {"cores", "blas", "ops", "int8 gemm", "precisions", "layout"};
      static const char* values[] = {strings[0].c_str(), strings[1].c_str(), strings[2].c_str(),
                                     strings[3].c_str(), strings[4].c_str(), strings[5].c_str()};
      info->num_properties = 6;
      info->property_keys = keys;
      info->property_values = values;
    }
#undef QUILT_CPU_FITS
    return nullptr;
  } catch (...) {
    return status_from_current_exception();
  }
}

quilt_status_t device_open(void*, int32_t, const quilt_option_t* options, size_t num_options,
                           quilt_device_t* device) {
  try {
    int threads = 0;
    // The layout's default: QUILT_CPU_LAYOUT when set (tests run the same cases both ways),
    // else auto: blocked where it measured faster than NCHW on the zoo's CNNs (CPUs without
    // AVX-512: the 8-lane kernels), NCHW with AVX-512, whose 16-lane blocked kernels did not
    // (README, "The CPU backend").
    const char* layout_env = std::getenv("QUILT_CPU_LAYOUT");
    std::string layout = layout_env && *layout_env ? layout_env : "auto";
    std::string layout_from = "QUILT_CPU_LAYOUT";
    bool use_bf16 = false;
    for (size_t i = 0; i < num_options; ++i) {
      const std::string key = options[i].key, value = options[i].value;
      if (key == "layout") {
        layout = value;
        layout_from = "option layout";
      } else if (key == "threads") {
        const auto t = parse_int64(value);
        if (!t || *t < 0 || *t > SessionOptions::kMaxThreads)
          return make_status(QUILT_STATUS_INVALID_ARGUMENT,
                             "[cpu] option threads is '" + value +
                                 "', expected an integer from 0 to " +
                                 std::to_string(SessionOptions::kMaxThreads));
        threads = static_cast<int>(*t);
      } else if (key == "precision") {
        if (value != "fp32" && value != "bf16")
          return make_status(QUILT_STATUS_INVALID_ARGUMENT,
                             "[cpu] option precision is '" + value + "', expected fp32 or bf16");
        if (value == "bf16" && !bf16::available())
          return make_status(QUILT_STATUS_NOT_IMPLEMENTED,
                             "[cpu] precision bf16 needs AVX512-BF16 (the vdpbf16ps instruction), "
                             "which this CPU lacks; it accelerates: " +
                                 bf16::precisions_description() + ". Use precision fp32");
        use_bf16 = value == "bf16";
      } else {
        return make_status(
            QUILT_STATUS_INVALID_ARGUMENT,
            "[cpu] unknown option '" + key + "'; known options: layout, precision, threads");
      }
    }
    if (layout != "auto" && layout != "blocked" && layout != "nchw")
      return make_status(QUILT_STATUS_INVALID_ARGUMENT, "[cpu] " + layout_from + " is '" + layout +
                                                            "', expected auto, blocked or nchw");
    const bool blocked_layout = layout == "blocked" || (layout == "auto" && blocked_by_default());
    if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto* d = new quilt_device_s(threads, blocked_layout, use_bf16);
    blas_set_threads(threads);
    host_api()->log(QUILT_LOG_DEBUG,
                    ("cpu backend: " + std::to_string(threads) + " threads").c_str());
    *device = d;
    return nullptr;
  } catch (...) {
    return status_from_current_exception();
  }
}

void device_close(quilt_device_t device) {
  delete device;
}

quilt_status_t supports(quilt_device_t, const quilt_graph_t* g, int32_t* claimed, char* reason,
                        size_t reason_size) {
  try {
    const quilt_node_t& q = g->nodes[0];
    CompiledNode cn;
    cn.node = node_of(*g, q);
    cn.inputs.assign(q.inputs, q.inputs + q.num_inputs);
    cn.outputs.assign(q.outputs, q.outputs + q.num_outputs);
    ValueTable table(*g);
    std::string why;
    const KernelEntry* e = KernelRegistry::builtin().find(cn.node.op_type, cn.node.domain);
    *claimed = 0;
    if (!e) {
      why = "no CPU kernel for " + cn.node.op_type;
    } else {
      const NodeSignature sig = signature_of(cn, table);
      why = e->support(sig);
      // Claimed: the reason buffer carries how the node runs, when that is worth saying.
      *claimed = why.empty() ? 1 : 0;
      if (why.empty() && e->note) why = e->note(sig);
      // Widened nodes that pass their half values on in float32 inside the patch say so.
      if (!why.empty() && *claimed && holds_half_in_float32(sig, *e))
        why = held_in_float32_note(sig);
    }
    if (reason_size) {
      std::strncpy(reason, why.c_str(), reason_size - 1);
      reason[reason_size - 1] = 0;
    }
    return nullptr;
  } catch (...) {
    return status_from_current_exception();
  }
}

quilt_status_t compile(quilt_device_t device, const quilt_graph_t* g, quilt_executable_t* out) {
  try {
    auto exe = std::make_unique<quilt_executable_s>(*g);
    exe->inputs.assign(g->inputs, g->inputs + g->num_inputs);
    exe->outputs.assign(g->outputs, g->outputs + g->num_outputs);
    std::vector<PatchNode> patch(g->num_nodes);
    for (size_t k = 0; k < g->num_nodes; ++k) {
      const quilt_node_t& q = g->nodes[k];
      patch[k].node = node_of(*g, q);
      patch[k].inputs.assign(q.inputs, q.inputs + q.num_inputs);
      patch[k].outputs.assign(q.outputs, q.outputs + q.num_outputs);
      patch[k].graph_index = static_cast<int32_t>(k);
    }
    std::vector<char> kept(g->num_values, 0);
    for (int32_t v : exe->outputs) kept[v] = 1;
    hold_half_in_float32(patch, exe->table.types, exe->table.constants, exe->twin_of_value, kept,
                         KernelRegistry::builtin());
    const size_t num_values = exe->table.types.size();  // the graph's and the twins
    if (!exe->twin_of_value.empty())
      host_api()->log(QUILT_LOG_DEBUG, ("cpu: " + std::to_string(exe->twin_of_value.size()) +
                                        " half values held in float32 inside the patch")
                                           .c_str());
    kept.resize(num_values, 0);
    fuse_activations(patch, exe->table.types, exe->table.constants, kept,
                     KernelRegistry::builtin());
    // The blocked layout (backends/cpu/layout.hpp): which nodes can run on its kernels, then
    // which values are stored blocked.
    std::vector<NodeSignature> sigs;  // each node's, built once for both uses
    sigs.reserve(patch.size());
    for (const PatchNode& pn : patch) sigs.push_back(signature_of(pn, exe->table));
    enum class Blocked : char { No, Conv, Concat, ElementWise, PlaneMean };  // what runs blocked
    std::vector<Blocked> capable(patch.size(), Blocked::No);
    std::vector<BlockedUse> uses(patch.size());
    std::vector<std::vector<char>> element_kinds(patch.size());  // per input, for ElementWise
    if (device->blocked_layout && !device->bf16)                 // the blocked kernels are float32
      for (size_t k = 0; k < patch.size(); ++k) {
        // (Not a conv whose fused residual is checked on each run: its fallback works in NCHW.)
        BlockedUse& u = uses[k];
        if (patch[k].residual_at_run < 0 && blocked_conv_capable(sigs[k], patch[k].activation)) {
          capable[k] = Blocked::Conv;
          u.writes = true;
          u.reads.assign(patch[k].inputs.size(), 0);
          u.reads[0] = blocked_conv_reads_blocked(sigs[k]);
          if (patch[k].residual_input >= 0) u.reads[patch[k].residual_input] = 1;
        } else if (blocked_concat_capable(sigs[k])) {
          capable[k] = Blocked::Concat;
          u.writes = true;
          u.reads.assign(patch[k].inputs.size(), 1);
        } else if (blocked_plane_mean_capable(sigs[k])) {
          capable[k] = Blocked::PlaneMean;
          u.reads.assign(1, 1);
        } else if (patch[k].bias_input < 0 && patch[k].residual_input < 0) {
          std::vector<char> kinds = blocked_element_wise_inputs(sigs[k]);
          for (char kind : kinds) u.reads.push_back(kind == kFull);
          u.writes = u.uniform = !kinds.empty();
          if (u.uniform) {
            capable[k] = Blocked::ElementWise;
            element_kinds[k] = std::move(kinds);
          }
        }
        u.converts = !u.writes && !is_half_edge(patch[k]) && blocked_output_convertible(sigs[k]);
      }
    const std::vector<char> blocked = blocked_values(patch, uses, num_values, kept);
    exe->last_use.assign(num_values, -1);
    exe->nodes.reserve(patch.size());
    // Constants every reader copied at creation: the host may free their data as soon as the
    // last reader is created (weights + one packed copy at a time, not weights + all copies).
    const bool offer_done =
        g->struct_size >= offsetof(quilt_graph_t, constant_done_context) + sizeof(void*) &&
        g->constant_done;
    std::vector<int> readers_left(num_values, 0);
    std::vector<char> read(num_values, 0);
    for (const PatchNode& pn : patch)
      for (int32_t v : pn.inputs)
        if (v >= 0) ++readers_left[v];
    // Half weights every reader takes as a float32 twin: the host's copy is not read again.
    if (offer_done)
      for (int32_t v : exe->twin_of_value)
        if (readers_left[v] == 0 && exe->table.constants[v].defined())
          g->constant_done(g->constant_done_context, v);
    for (size_t k = 0; k < patch.size(); ++k) {
      exe->nodes.emplace_back();
      CompiledNode& cn = exe->nodes.back();
      static_cast<PatchNode&>(cn) = std::move(patch[k]);
      cn.entry = KernelRegistry::builtin().find(cn.node.op_type, cn.node.domain);
      if (!cn.entry)
        cn.node.fail("no CPU kernel for " + cn.node.op_type, ErrorCode::NotImplemented);
      for (int32_t v : cn.inputs) {
        if (v < 0) continue;
        if (exe->table.types[v].dtype == DType::Undefined) cn.recheck = true;
        exe->last_use[v] = static_cast<int>(k);
      }
      const auto is_blocked = [&](int32_t index) {
        return index >= 0 && static_cast<size_t>(index) < cn.inputs.size() &&
               cn.inputs[static_cast<size_t>(index)] >= 0 &&
               blocked[static_cast<size_t>(cn.inputs[static_cast<size_t>(index)])];
      };
      const bool in_blocked = is_blocked(0), residual_blocked = is_blocked(cn.residual_input);
      const bool out_blocked =
          !cn.outputs.empty() && cn.outputs[0] >= 0 && blocked[static_cast<size_t>(cn.outputs[0])];
      // The types and constants built above; the node itself is cn's now (patch[k] moved).
      NodeSignature sig{cn.node, std::move(sigs[k].inputs), std::move(sigs[k].outputs),
                        std::move(sigs[k].constants)};
      sig.bf16 = device->bf16;
      if (is_half_edge(cn)) {
        cn.kernel = make_half_edge();
      } else if (capable[k] == Blocked::Conv && (in_blocked || out_blocked || residual_blocked)) {
        cn.kernel = make_blocked_conv(sig, in_blocked, out_blocked, residual_blocked);
        log_blocked(cn.node, in_blocked ? "blocked" : "NCHW", out_blocked);
      } else if (capable[k] == Blocked::Concat) {
        std::vector<char> in(cn.inputs.size(), 0);
        for (size_t i = 0; i < in.size(); ++i) in[i] = is_blocked(static_cast<int32_t>(i));
        const bool any = std::find(in.begin(), in.end(), 1) != in.end();
        if (any || out_blocked) {
          cn.kernel = make_blocked_concat(sig, in, out_blocked);
          log_blocked(cn.node, any ? "some blocked" : "NCHW", out_blocked);
        } else {
          cn.kernel = cn.entry->create(sig);
        }
      } else if (capable[k] == Blocked::ElementWise && out_blocked) {
        cn.kernel = make_blocked_element_wise(sig, cn.entry->create, std::move(element_kinds[k]));
        log_blocked(cn.node, "blocked", true);
      } else if (capable[k] == Blocked::PlaneMean && in_blocked) {
        // Its output is NCHW; reordered when two or more nodes read it blocked (converts).
        cn.kernel = make_blocked_plane_mean(sig);
        if (out_blocked) cn.kernel = make_blocked_output(sig, std::move(cn.kernel));
        log_blocked(cn.node, "blocked", out_blocked);
      } else if (out_blocked) {  // uses[k].converts
        cn.kernel = make_blocked_output(sig, cn.entry->create(sig));
        log_blocked(cn.node, "NCHW, the kernel's output reordered", true);
      } else {
        cn.kernel = cn.entry->create(sig);
      }
      for (size_t i = 0; offer_done && i < cn.inputs.size(); ++i) {
        const int32_t v = cn.inputs[i];
        if (v < 0 || static_cast<size_t>(v) >= g->num_values || !exe->table.constants[v].defined())
          continue;
        if (cn.kernel->reads_constant(i) || cn.bias_input == static_cast<int32_t>(i) ||
            cn.residual_input == static_cast<int32_t>(i))
          read[v] = 1;
        if (--readers_left[v] == 0 && !read[v]) g->constant_done(g->constant_done_context, v);
      }
    }
    *out = exe.release();
    return nullptr;
  } catch (...) {
    return status_from_current_exception();
  }
}

void executable_release(quilt_device_t, quilt_executable_t exe) {
  delete exe;
}

// A node whose residual was fused over unknown dims (fusion.hpp): when this run's product,
// residual and sum have one shape, the kernel adds the residual as usual; otherwise (the Add
// broadcasts: a batch of 1 against 4) the kernel makes the product alone, of its own shape, and
// the sum and the activation are done here.
void run_residual_at_run(const CompiledNode& cn, KernelContext& ctx,
                         std::span<const Tensor* const> inputs, const TypeShape& product,
                         const ThreadPool& pool) {
  const Tensor& residual = *ctx.residual;
  const std::vector<int64_t>& sum_shape = ctx.output_shape(0);
  if (product.dims == residual.shape() && product.dims == sum_shape) return cn.kernel->run(ctx);
  Tensor made;
  KernelContext alone(cn.node, inputs, {&product, 1}, {&made, 1}, pool);
  cn.kernel->run(alone);
  if (!made.defined() || made.shape() != product.dims)
    cn.node.fail("kernel did not produce its product of shape " + to_string(product.dims),
                 ErrorCode::Runtime);
  ctx.detail = alone.detail;
  Tensor& sum = ctx.output_uninitialized(0);
  broadcast_binary<float, float, float>(pool, made, residual, sum,
                                        [](float a, float b) { return a + b; });
  if (!ctx.activation.none()) ctx.activation.apply(sum.data<float>(), sum.numel());
}

void run(const quilt_device_s& device, const quilt_executable_s& exe,
         const quilt_execute_args_t& args) {
  const size_t n = exe.table.types.size();
  const bool timing =
      args.struct_size >= offsetof(quilt_execute_args_t, node_timing_context) + sizeof(void*) &&
      args.node_timing;
  const bool details =
      timing &&
      args.struct_size >= offsetof(quilt_execute_args_t, node_detail) + sizeof(args.node_detail) &&
      args.node_detail;
  // This run's type of each value: the compile-time one when the host's agrees (always, for a
  // model of static shapes), else a copy of the host's, made once. Building one per use took a
  // tenth of MNIST's run in allocations.
  std::vector<TypeShape> run_types(n);
  std::vector<const TypeShape*> types(n, nullptr);
  const size_t graph_values = n - exe.twin_of_value.size();
  auto type_at = [&](int32_t v) -> const TypeShape& {
    if (types[v]) return *types[v];
    // A float32 twin has the shape of the value it holds.
    const bool twin = static_cast<size_t>(v) >= graph_values;
    const quilt_tensor_info_t& info =
        args.values[twin ? exe.twin_of_value[static_cast<size_t>(v) - graph_values] : v];
    const DType dtype = twin ? DType::Float32 : static_cast<DType>(info.dtype);
    const TypeShape& t = exe.table.types[v];
    if (t.has_shape && t.dtype == dtype && static_cast<int64_t>(t.dims.size()) == info.rank &&
        std::equal(t.dims.begin(), t.dims.end(), info.dims)) {
      types[v] = &t;
    } else {
      run_types[v] = TypeShape{dtype, true, std::vector<int64_t>(info.dims, info.dims + info.rank)};
      types[v] = &run_types[v];
    }
    return *types[v];
  };
  // An empty tensor's buffer may be null (the host allocates nothing for 0 bytes); kernels pass
  // their tensors' data to memcpy and friends, where null is undefined behaviour even for 0
  // bytes (fuzz_run: ScatterElements into an empty output, UBSan). Empty ones get this address.
  alignas(64) static char no_bytes[64];
  auto wrap = [&](int32_t v, void* data) {
    const TypeShape& t = type_at(v);
    const bool empty = std::find(t.dims.begin(), t.dims.end(), 0) != t.dims.end();
    return Tensor::wrap(t.dtype, t.dims, data || !empty ? data : no_bytes);
  };
  // Values produced in this run; constants are read in place from the table (copying them all
  // into every run was an allocation per constant).
  std::vector<Tensor> values(n);
  auto value = [&](int32_t v) -> const Tensor& {
    return values[v].defined() ? values[v] : exe.table.constants[v];
  };
  std::vector<Tensor> boundary(n);  // the host's output buffers, by value
  std::vector<char> keep(n, 0);
  for (size_t i = 0; i < exe.inputs.size(); ++i)
    values[exe.inputs[i]] = wrap(exe.inputs[i], args.inputs[i]);
  for (size_t i = 0; i < exe.outputs.size(); ++i) {
    boundary[exe.outputs[i]] = wrap(exe.outputs[i], args.outputs[i]);
    keep[exe.outputs[i]] = 1;
  }
  std::vector<const Tensor*> in_ptrs;
  std::vector<TypeShape> out_types;
  std::vector<Tensor> outs;
  for (size_t k = 0; k < exe.nodes.size(); ++k) {
    const CompiledNode& cn = exe.nodes[k];
    in_ptrs.assign(cn.inputs.size(), nullptr);
    for (size_t i = 0; i < cn.inputs.size(); ++i)
      if (cn.inputs[i] >= 0) {
        const Tensor& t = value(cn.inputs[i]);
        if (!t.defined())
          cn.node.fail("input '" + cn.node.inputs[i] + "' has no value", ErrorCode::Runtime);
        in_ptrs[i] = &t;
      }
    outs.assign(cn.outputs.size(), Tensor());
    for (size_t i = 0; i < cn.outputs.size(); ++i)
      if (cn.outputs[i] >= 0) outs[i] = boundary[cn.outputs[i]];
    // One output (most nodes): its type in place, no copy.
    std::span<const TypeShape> output_types;
    if (cn.outputs.size() == 1 && cn.outputs[0] >= 0) {
      output_types = {&type_at(cn.outputs[0]), 1};
    } else {
      out_types.assign(cn.outputs.size(), TypeShape{});
      for (size_t i = 0; i < cn.outputs.size(); ++i)
        if (cn.outputs[i] >= 0) out_types[i] = type_at(cn.outputs[i]);
      output_types = out_types;
    }
    if (cn.recheck) {
      // Some input dtypes were unknown at compile time (e.g. inside a subgraph): ask the kernel
      // table again with the real ones, so an unsupported dtype is refused, not misread.
      NodeSignature sig{cn.node, {}, {output_types.begin(), output_types.end()}, {}};
      for (const Tensor* t : in_ptrs) sig.inputs.push_back(t ? TypeShape::of(*t) : TypeShape{});
      sig.constants.assign(in_ptrs.size(), nullptr);
      if (std::string reason = cn.entry->support(sig); !reason.empty())
        cn.node.fail(reason, ErrorCode::NotImplemented);
    }
    KernelContext ctx(cn.node, in_ptrs, output_types, outs, device.pool);
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].defined()) ctx.given_uninitialized(i);
    ctx.activation = cn.activation;
    if (cn.bias_input >= 0) ctx.bias = in_ptrs[static_cast<size_t>(cn.bias_input)];
    if (cn.residual_input >= 0) ctx.residual = in_ptrs[static_cast<size_t>(cn.residual_input)];
    const uint64_t start = timing ? host_now_ns() : 0;
    if (cn.residual_at_run >= 0 && ctx.residual)
      run_residual_at_run(cn, ctx, in_ptrs, type_at(cn.residual_at_run), device.pool);
    else
      cn.kernel->run(ctx);
    if (timing && cn.graph_index >= 0) {
      // Folded nodes ran inside their producer: they get its span, so profiles still list them.
      const uint64_t end = host_now_ns();
      if (details && ctx.detail)
        args.node_detail(args.node_timing_context, static_cast<size_t>(cn.graph_index), ctx.detail);
      args.node_timing(args.node_timing_context, static_cast<size_t>(cn.graph_index), start, end);
      for (int32_t f : cn.folded)
        args.node_timing(args.node_timing_context, static_cast<size_t>(f), end, end);
    }
    for (size_t i = 0; i < cn.outputs.size(); ++i) {
      const int32_t v = cn.outputs[i];
      if (v < 0) continue;
      if (!outs[i].defined())
        cn.node.fail("kernel did not produce output '" + cn.node.outputs[i] + "'",
                     ErrorCode::Runtime);
      const Tensor& b = boundary[v];
      if (b.defined() && !outs[i].shares_storage_with(b) && b.nbytes())
        std::memcpy(const_cast<void*>(b.raw_data()), outs[i].raw_data(), b.nbytes());
      values[v] = std::move(outs[i]);
    }
    for (int32_t v : cn.inputs)
      if (v >= 0 && exe.last_use[v] == static_cast<int>(k) && !keep[v]) values[v] = Tensor();
  }
}

quilt_status_t execute(quilt_device_t device, quilt_executable_t exe,
                       const quilt_execute_args_t* args) {
  const uint64_t start = host_now_ns();
  // A run that took at least this long last time has loops worth sharing: its workers are woken
  // now, so that they spin by its first split loop instead of sleeping through it (a 0.08 ms
  // keyword spotter never reached ThreadPool::split_work's cold threshold, so its workers stayed
  // asleep and it ran on one core). Shorter runs (a 1-row tree ensemble: 10 us) are not worth
  // the wake-up.
  constexpr uint64_t kWakeWorkersNs = 20'000;
  if (exe->last_run_ns.load(std::memory_order_relaxed) >= kWakeWorkersNs) device->pool.wake();
  try {
    run(*device, *exe, *args);
    exe->last_run_ns.store(host_now_ns() - start, std::memory_order_relaxed);
    if (args->signal_event) args->signal_event->signal(start);
    return nullptr;
  } catch (...) {
    quilt_status_t s = status_from_current_exception();
    if (args->signal_event) {
      // The event carries the failure too, for a host that waits on it.
      quilt_status_t copy = status_from_current_exception();
      std::string message = take_status_message(copy);
      args->signal_event->signal(start, message, QUILT_STATUS_RUNTIME_ERROR);
    }
    return s;
  }
}

quilt_status_t alloc(quilt_device_t, size_t bytes, void** ptr) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  *ptr = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!*ptr)
    return make_status(QUILT_STATUS_OUT_OF_MEMORY,
                       "[cpu] out of memory allocating " + std::to_string(bytes) + " bytes");
  return nullptr;
}

void free_memory(quilt_device_t, void* ptr) {
  std::free(ptr);
}

quilt_status_t copy(void* dst, const void* src, size_t bytes, quilt_event_t signal) {
  const uint64_t start = host_now_ns();
  if (bytes) std::memcpy(dst, src, bytes);
  if (signal) signal->signal(start);
  return nullptr;
}

quilt_status_t copy_to_device(quilt_device_t, void* dst, const void* src, size_t bytes,
                              const quilt_event_t*, size_t, quilt_event_t signal) {
  return copy(dst, src, bytes, signal);
}

quilt_status_t copy_to_host(quilt_device_t, void* dst, const void* src, size_t bytes,
                            const quilt_event_t*, size_t, quilt_event_t signal) {
  return copy(dst, src, bytes, signal);
}

quilt_status_t event_create(quilt_device_t, quilt_event_t* event) {
  try {
    *event = new quilt_event_s;
    return nullptr;
  } catch (...) {
    return status_from_current_exception();
  }
}

quilt_status_t event_wait(quilt_device_t, quilt_event_t e) {
  std::unique_lock lock(e->mutex);
  e->cv.wait(lock, [&] { return e->signalled; });
  return e->error.empty() ? nullptr : make_status(e->code, e->error);
}

quilt_status_t event_query(quilt_device_t, quilt_event_t e, int32_t* done) {
  std::lock_guard lock(e->mutex);
  *done = e->signalled ? 1 : 0;
  return nullptr;
}

void event_release(quilt_device_t, quilt_event_t e) {
  delete e;
}

quilt_status_t event_timestamps(quilt_device_t, quilt_event_t e, uint64_t* start, uint64_t* end) {
  std::lock_guard lock(e->mutex);
  if (!e->signalled) return make_status(QUILT_STATUS_INVALID_ARGUMENT, "[cpu] event not signalled");
  *start = e->start_ns;
  *end = e->end_ns;
  return nullptr;
}

const quilt_backend_t kCpuBackend = {
    sizeof(quilt_backend_t),
    QUILT_BACKEND_ABI_VERSION,
    "cpu",
    "built-in",
    nullptr,
    nullptr,
    device_count,
    device_info,
    device_open,
    device_close,
    supports,
    compile,
    executable_release,
    execute,
    alloc,
    free_memory,
    copy_to_device,
    copy_to_host,
    event_create,
    event_wait,
    event_query,
    event_release,
    event_timestamps,
    nullptr,  // run_begin, run_end: nothing to do per run
    nullptr,
    nullptr,  // executable_serialize, executable_deserialize: packing is quicker than a file
    nullptr,
    nullptr,  // copy_device_to_device: one device
    nullptr,  // supports_graph: the CPU claims node by node
};

}  // namespace
}  // namespace quilt::cpu

namespace quilt {
const quilt_backend_t* cpu_backend_api() {
  return &cpu::kCpuBackend;
}
}  // namespace quilt
