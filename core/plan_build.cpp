// ExecutionPlan construction: inference, constant folding, partitioning, compilation, report.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/checked.hpp"
#include "core/executable_cache.hpp"
#include "core/executor.hpp"
#include "core/host_ops.hpp"
#include "partitioner/partitioner.hpp"

namespace quilt {
namespace {

bool has_subgraph(const Node& n) {
  for (const auto& [_, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

TypeShape type_of(const ValueInfo& info) {
  return TypeShape::of_info(info);
}

// Shape / Size of a value whose shape is static at session creation.
Tensor shape_or_size_of(const Node& node, const std::vector<int64_t>& dims) {
  const auto rank = static_cast<int64_t>(dims.size());
  if (node.op_type == "Size")
    return Tensor::from_vector<int64_t>({}, {Checked(node, "element count").product(dims)});
  int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> out(dims.begin() + start, dims.begin() + end);
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(out.size())}, out);
}

std::string op_label(const Node& n) {
  return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
}

// A node as the partitioner and the ABI see it, before it is placed.
struct LiveNode {
  const Node* node = nullptr;
  const OpSchema* schema = nullptr;
  std::vector<int> inputs, outputs;  // explicit, -1 = absent
  std::vector<TypeShape> in_types, out_types;
  bool host = false;
  std::string host_reason;  // set for nodes on values the ABI does not carry (host_ops.hpp)
  std::map<std::string, std::unique_ptr<ExecutionPlan>> subplans;
};

// About how long the CPU backend takes for a node, in ns, for the partitioner's cost rule
// (partition::Node::cpu_ns): multiply-adds of GEMM-shaped ops at 25 per ns (the packed GEMM
// measured 20-50 on small products at 2 threads) plus their activations in and out, every
// element other ops read or write at 4 per ns (a Relu streams 13), and 0.5 us per node. -1 when a
// shape is not static or the op's work is not modelled (recurrent and attention ops): the rule then
// leaves the island where it is.
double estimate_cpu_ns(const Node& node, const std::vector<TypeShape>& in,
                       const std::vector<TypeShape>& out) {
  auto numel = [](const TypeShape& t) -> double {
    if (!t.is_static()) return -1;
    double n = 1;
    for (int64_t d : t.dims) n *= static_cast<double>(d);
    return n;
  };
  double elements = 0;
  for (const auto* types : {&in, &out})
    for (const TypeShape& t : *types) {
      if (t.dtype == DType::Undefined && !t.has_shape) continue;  // an absent optional input
      const double n = numel(t);
      if (n < 0) return -1;
      elements += n;
    }
  double macs = 0;
  const std::string& op = node.op_type;
  if (node.domain.empty() && !out.empty() && in.size() >= 2) {
    const double out_n = numel(out[0]);
    const std::vector<int64_t>& w = in[1].dims;
    if ((op == "Conv" || op == "ConvTranspose") && w.size() >= 3) {
      double window = 1;
      for (size_t d = 1; d < w.size(); ++d) window *= static_cast<double>(w[d]);
      macs = (op == "Conv" ? out_n : numel(in[0])) * window;
    } else if (op == "MatMul" && !in[0].dims.empty()) {
      macs = out_n * static_cast<double>(in[0].dims.back());
    } else if (op == "Gemm" && in[0].dims.size() == 2) {
      macs = out_n * static_cast<double>(in[0].dims[node.attr_int("transA", 0) ? 0 : 1]);
    } else if (partition::is_heavy_op(op)) {
      return -1;
    }
    // The weights are counted in the multiply-adds, not as elements to stream.
    if (macs > 0) elements = numel(in[0]) + out_n;
  } else if (partition::is_heavy_op(op)) {
    return -1;
  }
  return macs / 25 + elements / 4 + 500;
}

}  // namespace

int ExecutionPlan::value_id(const std::string& name) {
  auto [it, fresh] = ids_.emplace(name, static_cast<int>(names_.size()));
  if (fresh) {
    names_.push_back(name);
    static_types_.emplace_back();
    constants_.emplace_back();
    defaults_.emplace_back();
  }
  return it->second;
}

int ExecutionPlan::slot_id(int value, int space) {
  if (space == 0) return value;  // host slots are numbered like values
  auto [it, fresh] =
      slot_ids_.emplace(std::make_pair(value, space), static_cast<int>(slots_.size()));
  if (fresh) slots_.push_back({value, space});
  return it->second;
}

int ExecutionPlan::space_of(int device) const {
  return device < 0 || devices_[device]->host_memory() ? 0 : device + 1;
}

ExecutionPlan::ExecutionPlan(Model& model, DeviceList devices, const PlanOptions& options)
    : where_(model.path), devices_(std::move(devices)), logger_(options.logger) {
  build(model.graph, options, nullptr, model.ir_version, &model.graph.initializers);
}

ExecutionPlan::ExecutionPlan(const Graph& graph, std::string where, DeviceList devices,
                             const PlanOptions& options,
                             const std::function<TypeShape(const std::string&)>& outer_type)
    : where_(std::move(where)), devices_(std::move(devices)), logger_(options.logger) {
  build(graph, options, &outer_type, 0, nullptr);
}

ExecutionPlan::~ExecutionPlan() = default;

void ExecutionPlan::find_static_shapes(Step& step) const {
  std::vector<char> made(names_.size(), 0), seen(names_.size(), 0);
  step.static_shapes = true;
  for (const PatchNode& pn : step.nodes) {
    for (int v : pn.inputs)
      if (v >= 0 && !made[v] && !seen[v] && !constants_[v].defined()) {
        seen[v] = 1;
        step.boundary.push_back(v);
        step.static_shapes = step.static_shapes && static_types_[v].is_static();
      }
    for (int v : pn.outputs)
      if (v >= 0) {
        made[v] = 1;
        step.static_shapes = step.static_shapes && static_types_[v].is_static();
      }
  }
  if (!step.static_shapes) {
    if (step.value_inputs.empty()) step.memo = new_types_memo();
    return;
  }
  step.static_dims.resize(step.abi_values.size());
  for (size_t a = 0; a < step.abi_values.size(); ++a)
    step.static_infos.push_back(
        tensor_info(static_types_[step.abi_values[a]], step.static_dims[a]));
}

namespace {

// What a graph output's declaration says against what inference found. A kind or dtype that
// differs is refused, as onnxruntime refuses it (outputs() would describe a different tensor from
// the one run() returns). A shape that differs is a converter's slip more often than a broken
// model (skl2onnx declares a multi-target forest regressor's output [N, 1]): onnxruntime runs
// such a model with a warning, and so does Quilt; the inferred shape wins, and the function
// returns true so that the caller describes the output with it.
bool check_declared_output(const std::string& where, const Graph& g, const ValueInfo& declared,
                           const TypeShape& inferred, const Logger& logger) {
  std::string conflict;
  bool shape_only = false;
  if (declared.kind != inferred.kind && inferred.has_shape) {
    conflict = inferred.text() + ", but the graph declares " + type_string(declared);
  } else if (!inferred.is_tensor()) {
    return false;  // the element types are checked when a run returns the value
  } else if (declared.dtype != DType::Undefined && inferred.dtype != DType::Undefined &&
             declared.dtype != inferred.dtype) {
    conflict = std::string("dtype ") + dtype_name(inferred.dtype) + ", but the graph declares " +
               dtype_name(declared.dtype);
  } else if (declared.has_shape && inferred.has_shape) {
    shape_only = true;
    if (declared.shape.size() != inferred.dims.size()) {
      conflict = "shape " + to_string(inferred.dims) + ", but the graph declares " +
                 to_string(declared.shape) + " (rank " + std::to_string(declared.shape.size()) +
                 ")";
    } else {
      for (size_t d = 0; d < declared.shape.size() && conflict.empty(); ++d)
        if (declared.shape[d].is_fixed() && inferred.dims[d] >= 0 &&
            declared.shape[d].value != inferred.dims[d])
          conflict = "shape " + to_string(inferred.dims) + ", but the graph declares " +
                     to_string(declared.shape) + " (dim " + std::to_string(d) + ")";
    }
  }
  if (conflict.empty()) return false;
  // A stream, not string concatenation: GCC 12 warns falsely (-Wrestrict) on "[" + s here.
  std::ostringstream message;
  message << "model '" << where << "': ";
  const auto producer = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
    return std::find(n.outputs.begin(), n.outputs.end(), declared.name) != n.outputs.end();
  });
  if (producer != g.nodes.end())
    message << "[" << producer->display() << "] output";
  else
    message << "graph output";
  message << " '" << declared.name << "' has " << conflict;
  if (!shape_only) throw Error(ErrorCode::InvalidModel, message.str());
  message << "; running with the inferred shape, which outputs() reports";
  logger.warning(message.str());
  return true;
}

}  // namespace

void ExecutionPlan::build(const Graph& g, const PlanOptions& options,
                          const std::function<TypeShape(const std::string&)>* outer_type,
                          int64_t ir_version, std::map<std::string, Tensor>* take_initializers) {
  const SchemaRegistry& schemas = SchemaRegistry::builtin();
  // Number every value first: constants_ and static_types_ must not reallocate while pointers
  // into them are handed to inference and to backends.
  for (const auto& [name, _] : g.initializers) value_id(name);
  for (const auto& in : g.inputs) value_id(in.name);
  for (const auto& node : g.nodes) {
    for (const auto& name : node.inputs)
      if (!name.empty()) value_id(name);
    for (const auto& name : node.implicit_inputs) value_id(name);
    for (const auto& name : node.outputs)
      if (!name.empty()) value_id(name);
  }
  for (const auto& out : g.outputs) value_id(out.name);
  for (size_t v = 0; v < names_.size(); ++v) slots_.push_back({static_cast<int>(v), 0});
  for (const auto& [name, t] : g.initializers) {
    int id = value_id(name);
    constants_[id] = t;
    static_types_[id] = TypeShape::of(t);
  }
  for (const auto& in : g.inputs) {
    const int id = value_id(in.name);
    if (g.initializers.count(in.name) && !outer_type) {
      overridable_.push_back(in.name);
      // From IR 4 on, listing an initializer as an input says it may be overridden: it is an
      // input with a default. Before, every initializer had to be listed: they are constants.
      if (ir_version >= 4) {
        defaults_[id] = constants_[id];
        constants_[id] = Tensor();
        overridable_infos_.push_back(in);
      }
      continue;
    }
    static_types_[id] = type_of(in);
    constants_[id] = Tensor();  // a formal input shadows an initializer of the same name
    inputs_.push_back(in);
    formal_.push_back(in.name);
  }
  // From here on the plan is the constants' only owner, so that dropping one frees it.
  if (take_initializers) take_initializers->clear();
  if (outer_type) {
    // Values read but not defined here come from the enclosing graph.
    std::set<std::string> defined(formal_.begin(), formal_.end());
    for (const auto& [name, _] : g.initializers) defined.insert(name);
    for (const auto& n : g.nodes)
      for (const auto& o : n.outputs) defined.insert(o);
    std::set<std::string> outer;
    for (const auto& n : g.nodes) {
      for (const auto& name : n.inputs)
        if (!name.empty() && !defined.count(name)) outer.insert(name);
      for (const auto& name : n.implicit_inputs)
        if (!defined.count(name)) outer.insert(name);
    }
    for (const auto& out : g.outputs)
      if (!defined.count(out.name)) outer.insert(out.name);
    outer_.assign(outer.begin(), outer.end());
    for (const auto& name : outer_) static_types_[value_id(name)] = (*outer_type)(name);
  }

  // One-node ABI graph of a node with its creation-time types and constants.
  auto node_graph = [this](AbiGraph& ag, const Node& node, const std::vector<int>& ins,
                           const std::vector<TypeShape>& in_types, const std::vector<int>& outs,
                           const std::vector<TypeShape>& out_types) {
    std::vector<int32_t> ai, ao;
    for (size_t i = 0; i < ins.size(); ++i)
      ai.push_back(
          ins[i] < 0 ? -1
                     : ag.add_value(names_[ins[i]], in_types[i],
                                    constants_[ins[i]].defined() ? &constants_[ins[i]] : nullptr));
    for (size_t i = 0; i < outs.size(); ++i)
      ao.push_back(outs[i] < 0 ? -1 : ag.add_value(names_[outs[i]], out_types[i], nullptr));
    ag.add_node(node, ai, ao);
    std::vector<int32_t> graph_in;
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i] >= 0 && !constants_[ins[i]].defined()) graph_in.push_back(ai[i]);
    ag.set_inputs(graph_in);
    std::vector<int32_t> graph_out;
    for (int32_t a : ao)
      if (a >= 0) graph_out.push_back(a);
    ag.set_outputs(graph_out);
  };

  cpu_index_ = options.cpu_index >= 0 ? options.cpu_index : static_cast<int>(devices_.size()) - 1;
  const std::shared_ptr<const Device>& cpu = devices_[cpu_index_];
  std::vector<LiveNode> live;
  for (size_t index : g.topological_order()) {
    const Node& node = g.nodes[index];
    const OpSchema* schema = schemas.find(node.op_type, node.domain, node.opset);
    if (!schema)
      node.fail("no schema at opset " + std::to_string(node.opset), ErrorCode::NotImplemented);
    // A node that names none of its outputs ("" for each) makes nothing anyone can read, and is
    // not run: its kernel would be asked for an output it has no shape or buffer for (fuzz_run:
    // a MaxPool whose one output was "" read the geometry of an output shape of rank 0).
    if (std::all_of(node.outputs.begin(), node.outputs.end(),
                    [](const std::string& o) { return o.empty(); }))
      continue;
    LiveNode ln;
    ln.node = &node;
    ln.schema = schema;
    std::vector<const Tensor*> in_values;
    bool all_constant = true;
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        ln.inputs.push_back(-1);
        ln.in_types.emplace_back();
        in_values.push_back(nullptr);
        continue;
      }
      int id = value_id(name);
      ln.inputs.push_back(id);
      ln.in_types.push_back(static_types_[id]);
      in_values.push_back(constants_[id].defined() ? &constants_[id] : nullptr);
      if (!constants_[id].defined()) all_constant = false;
    }
    for (const auto& name : node.outputs) ln.outputs.push_back(name.empty() ? -1 : value_id(name));
    ln.out_types.assign(node.outputs.size(), TypeShape{});
    try {
      ln.out_types = infer_node(*schema, node, ln.in_types, in_values, false);
    } catch (const Error&) {
      // A branch that these shapes never take (e.g. the 2-D branch of an If when the input is
      // 3-D) may not type-check; in a subgraph, leave its shapes to run time.
      if (!outer_type) throw;
    }
    for (size_t i = 0; i < ln.outputs.size(); ++i)
      if (ln.outputs[i] >= 0) static_types_[ln.outputs[i]] = ln.out_types[i];

    if (node.domain.empty() && (node.op_type == "If" || node.op_type == "Loop" ||
                                node.op_type == "Scan" || node.op_type == "SequenceMap")) {
      ln.host = true;
      auto type_here = [this](const std::string& name) {
        auto it = ids_.find(name);
        return it == ids_.end() ? TypeShape{} : static_types_[it->second];
      };
      for (const auto& [attr_name, a] : node.attributes)
        if (a.kind == Attribute::Kind::Graph && a.g)
          ln.subplans[attr_name] = std::make_unique<ExecutionPlan>(
              *a.g, where_ + " [" + node.display() + " subgraph '" + attr_name + "']", devices_,
              options, type_here);
      live.push_back(std::move(ln));
      continue;
    }
    ln.host_reason = host_reason(ln.in_types, ln.out_types);
    if (ln.host_reason.empty() && node.op_type != "Identity" &&
        value_ops().count({node.domain, node.op_type}))  // types unknown here (a subgraph)
      ln.host_reason =
          "sequences, maps and optionals do not cross the backend ABI: the core runs it";
    if (!ln.host_reason.empty()) {
      require_host_kernel(node);  // throws, naming the node, when the core has no kernel
      ln.host = true;
      live.push_back(std::move(ln));
      continue;
    }

    // Constant folding: run nodes whose inputs are all known now, once, on the CPU. Shape and
    // Size of a statically shaped value are constants too.
    const bool shape_of_static = (node.op_type == "Shape" || node.op_type == "Size") &&
                                 node.domain.empty() && !ln.in_types.empty() &&
                                 ln.in_types[0].is_static();
    const bool candidate =
        options.optimization_level >= 1 &&
        ((all_constant && !is_random_op(node) && !has_subgraph(node)) || shape_of_static);
    if (candidate) {
      AbiGraph ag;
      node_graph(ag, node, ln.inputs, ln.in_types, ln.outputs, ln.out_types);
      if (cpu->supports(ag).empty()) {
        std::vector<Tensor> outs(node.outputs.size());
        if (all_constant) {
          std::vector<TypeShape> run_types =
              infer_node(*schema, node, ln.in_types, in_values, true);
          auto exe = cpu->compile(ag, "[" + node.display() + "]");
          std::vector<void*> out_ptrs;
          std::vector<std::vector<int64_t>> dims(ag.num_values());
          std::vector<quilt_tensor_info_t> infos(ag.num_values());
          const quilt_graph_t* qg = ag.get();
          for (size_t a = 0; a < qg->num_values; ++a) infos[a] = qg->values[a].info;
          for (size_t i = 0, a = 0; i < node.outputs.size(); ++i) {
            if (ln.outputs[i] < 0) continue;
            outs[i] = Tensor(run_types[i].dtype, run_types[i].dims);
            out_ptrs.push_back(outs[i].nbytes() ? outs[i].raw_data() : nullptr);
            const int32_t idx = qg->outputs[a++];
            infos[idx] = tensor_info(run_types[i], dims[idx]);
          }
          quilt_execute_args_t args{};
          args.struct_size = sizeof(args);
          args.values = infos.data();
          args.outputs = out_ptrs.data();
          cpu->execute(*exe, args, "");
        } else {
          outs[0] = shape_or_size_of(node, ln.in_types[0].dims);
        }
        for (size_t i = 0; i < ln.outputs.size(); ++i) {
          if (ln.outputs[i] < 0) continue;
          constants_[ln.outputs[i]] = outs[i];
          static_types_[ln.outputs[i]] = TypeShape::of(outs[i]);
        }
        ++folded_;
        continue;
      }
    }
    live.push_back(std::move(ln));
  }

  // Constants no remaining node reads (the inputs of folded nodes, e.g. a mask a Slice was cut
  // from) are dropped now, before backends compile and pack their copies of the others.
  std::vector<char> read(names_.size(), 0);
  auto mark = [&](const std::string& name) {
    if (auto it = ids_.find(name); it != ids_.end()) read[it->second] = 1;
  };
  for (const LiveNode& ln : live) {
    for (int v : ln.inputs)
      if (v >= 0) read[v] = 1;
    for (const auto& name : ln.node->implicit_inputs) mark(name);
  }
  for (const auto& out : g.outputs) mark(out.name);
  for (size_t v = 0; v < names_.size(); ++v)
    if (!read[v]) constants_[v] = Tensor();

  // Partition.
  std::set<std::string> graph_outputs;
  for (const auto& o : g.outputs) graph_outputs.insert(o.name);
  std::vector<partition::Node> pnodes;
  for (const LiveNode& ln : live) {
    partition::Node p;
    p.display = ln.node->display();
    p.name = ln.node->name;
    p.op_type = ln.node->op_type;
    p.host = ln.host;
    p.host_reason = ln.host_reason;
    p.cpu_ns = ln.host ? -1 : estimate_cpu_ns(*ln.node, ln.in_types, ln.out_types);
    for (int v : ln.inputs)
      if (v >= 0) p.inputs.push_back(v);
    for (const auto& name : ln.node->implicit_inputs) p.inputs.push_back(value_id(name));
    for (int i : ln.schema->value_inputs)
      if (static_cast<size_t>(i) < ln.inputs.size() && ln.inputs[i] >= 0 &&
          !constants_[ln.inputs[i]].defined())
        p.value_inputs.push_back(ln.inputs[i]);
    for (int v : ln.outputs)
      if (v >= 0) p.outputs.push_back(v);
    pnodes.push_back(std::move(p));
  }
  std::vector<partition::Value> pvalues(names_.size());
  for (size_t v = 0; v < names_.size(); ++v) {
    pvalues[v].constant = constants_[v].defined();
    pvalues[v].graph_output = graph_outputs.count(names_[v]) != 0;
    pvalues[v].bytes = static_types_[v].bytes();
  }
  std::vector<partition::Device> pdevices;
  std::map<std::string, int> peer_groups;  // backends that copy between their devices
  for (size_t d = 0; d < devices_.size(); ++d) {
    const Device& device = *devices_[d];
    const int group =
        device.copies_between_devices()
            ? peer_groups.emplace(device.backend_name(), static_cast<int>(peer_groups.size()))
                  .first->second
            : -1;
    pdevices.push_back({device.name(), space_of(static_cast<int>(d)),
                        d < options.requested.size() ? bool(options.requested[d]) : true,
                        device.launch_ns(), group});
  }
  partition::Options popts;
  popts.cost_rule = options.cost_rule;
  popts.cpu_fallback = options.cpu_fallback;
  popts.pinned = options.pinned;
  popts.where = where_;
  popts.cpu_index = cpu_index_;
  std::map<std::pair<int, int>, std::string> notes;  // (node, device) -> how it runs there
  // ABI 1.2's supports_graph: the nodes a backend may get (no host node, no subgraph) as one
  // graph, asked once per device that has the slot; graph_node[n] = n's index there, or -1.
  auto crosses_abi = [&](const LiveNode& ln) {
    if (ln.host) return false;
    for (const auto& [name, a] : ln.node->attributes)
      if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return false;
    return true;
  };
  std::vector<int> graph_node(live.size(), -1);
  std::vector<std::optional<std::vector<Device::GraphClaim>>> graph_claims(devices_.size());
  auto whole_graph_claims = [&](int d) -> const std::vector<Device::GraphClaim>& {
    if (graph_claims[d]) return *graph_claims[d];
    AbiGraph ag;
    std::map<int, int32_t> abi_value;  // value id -> index in ag
    std::vector<char> made(names_.size(), 0), read_outside(names_.size(), 0);
    int nodes = 0;
    auto value = [&](int v, const TypeShape& type) -> int32_t {
      if (v < 0) return -1;
      auto [it, fresh] = abi_value.emplace(v, 0);
      if (fresh)
        it->second =
            ag.add_value(names_[v], type, constants_[v].defined() ? &constants_[v] : nullptr);
      return it->second;
    };
    for (size_t n = 0; n < live.size(); ++n) {
      const LiveNode& ln = live[n];
      if (!crosses_abi(ln)) {
        for (int v : ln.inputs)
          if (v >= 0) read_outside[v] = 1;
        for (const auto& name : ln.node->implicit_inputs) read_outside[value_id(name)] = 1;
        continue;
      }
      std::vector<int32_t> ai, ao;
      for (size_t i = 0; i < ln.inputs.size(); ++i)
        ai.push_back(value(ln.inputs[i], ln.in_types[i]));
      for (size_t i = 0; i < ln.outputs.size(); ++i) {
        ao.push_back(value(ln.outputs[i], ln.out_types[i]));
        if (ln.outputs[i] >= 0) made[ln.outputs[i]] = 1;
      }
      graph_node[n] = nodes++;
      ag.add_node(*ln.node, ai, ao);
    }
    std::vector<int32_t> graph_in, graph_out;
    for (const auto& [v, a] : abi_value) {
      if (!made[v] && !constants_[v].defined()) graph_in.push_back(a);
      if (made[v] && (read_outside[v] || graph_outputs.count(names_[v]))) graph_out.push_back(a);
    }
    ag.set_inputs(std::move(graph_in));
    ag.set_outputs(std::move(graph_out));
    graph_claims[d] = devices_[d]->supports_graph(ag);
    return *graph_claims[d];
  };
  auto ask = [&](int n, int d) -> std::string {
    const LiveNode& ln = live[n];
    // Subgraphs do not cross the ABI: only If, Loop and Scan run them, in the core.
    for (const auto& [name, a] : ln.node->attributes)
      if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs)
        return "graph attribute '" + name + "' is not supported (subgraphs run only in If, " +
               "Loop and Scan)";
    if (devices_[d]->claims_graphs()) {
      const auto& claims = whole_graph_claims(d);
      const Device::GraphClaim& c = claims.at(graph_node[n]);
      if (c.why_not.empty() && !c.note.empty()) notes[{n, d}] = c.note;
      return c.why_not;
    }
    AbiGraph ag;
    node_graph(ag, *ln.node, ln.inputs, ln.in_types, ln.outputs, ln.out_types);
    std::string note;
    std::string why = devices_[d]->supports(ag, &note);
    if (why.empty() && !note.empty()) notes[{n, d}] = std::move(note);
    return why;
  };
  partition::Result part = partition::partition(pnodes, pvalues, pdevices, popts, ask);

  // Steps: uploads just before their first consumer, downloads right after their producer.
  report_.model = where_;
  for (size_t d = 0; d < devices_.size(); ++d)
    if (pdevices[d].requested || (static_cast<int>(d) == cpu_index_ && options.cpu_fallback))
      report_.backends.push_back(devices_[d]->name());
  report_.folded_nodes = static_cast<int>(folded_);
  report_.rewrites = options.rewrites;
  std::vector<int> report_node(live.size());
  for (size_t n = 0; n < live.size(); ++n) {
    const Node& node = *live[n].node;
    PlanReport::Node rn;
    rn.name = node.name;
    rn.op_type = op_label(node);
    rn.patch = part.patch_of[n];
    rn.backend = part.device_of[n] < 0 ? "host" : devices_[part.device_of[n]]->name();
    rn.reason = part.reason[n];
    if (auto it = notes.find({static_cast<int>(n), part.device_of[n]}); it != notes.end())
      rn.note = it->second;
    report_node[n] = static_cast<int>(report_.nodes.size());
    report_.nodes.push_back(rn);
  }
  auto device_of_space = [&](int space) { return space - 1; };
  auto space_name = [&](int space) {
    return space == 0 ? std::string("host") : devices_[device_of_space(space)]->name();
  };
  std::vector<char> emitted(part.transfers.size(), 0);
  auto emit_transfer = [&](size_t t) {
    if (emitted[t]) return;
    emitted[t] = 1;
    const partition::Transfer& tr = part.transfers[t];
    Step step;
    const bool upload = tr.to_space != 0;
    const bool direct = upload && tr.from_space != 0;  // device to device
    step.kind = direct ? StepKind::DeviceCopy : upload ? StepKind::Upload : StepKind::Download;
    step.device = device_of_space(upload ? tr.to_space : tr.from_space);
    if (direct) step.source_device = device_of_space(tr.from_space);
    step.label = "transfer '" + names_[tr.value] + "' " + space_name(tr.from_space) + " -> " +
                 space_name(tr.to_space);
    step.in_slots = {slot_id(tr.value, tr.from_space)};
    step.out_slots = {slot_id(tr.value, tr.to_space)};
    steps_.push_back(std::move(step));
    PlanReport::Transfer rt;
    rt.value = names_[tr.value];
    rt.from = space_name(tr.from_space);
    rt.to = space_name(tr.to_space);
    rt.bytes = pvalues[tr.value].bytes;
    rt.producer_patch = tr.producer_patch;
    rt.consumer_patches = tr.consumer_patches;
    report_.transfers.push_back(rt);
  };
  // How many patches, host steps and graph outputs read each constant: when every patch that
  // has one says (constant_done) it will not read it again and nothing else reads it, it goes.
  constexpr int kKept = 1 << 20;  // host steps and graph outputs never let go
  std::vector<int> holders(names_.size(), 0);
  for (const partition::Patch& pp : part.patches) {
    std::set<int> reads;
    for (int n : pp.nodes) {
      for (int v : live[n].inputs)
        if (v >= 0) reads.insert(v);
      for (const auto& name : live[n].node->implicit_inputs) reads.insert(value_id(name));
      // Constants whose values shape inference reads (a Split's sizes, a Resize's scales) stay
      // whatever the backend says: a run whose shapes were not all known at creation reads them.
      if (live[n].schema)
        for (int i : live[n].schema->value_inputs)
          if (static_cast<size_t>(i) < live[n].inputs.size() && live[n].inputs[i] >= 0)
            holders[live[n].inputs[i]] += kKept;
    }
    for (int v : reads) holders[v] += pp.device < 0 ? kKept : 1;
  }
  for (const auto& out : g.outputs)
    if (auto it = ids_.find(out.name); it != ids_.end()) holders[it->second] += kKept;
  struct DoneContext {
    std::vector<Tensor>* constants;
    std::vector<int>* holders;
    const std::vector<int>* abi_values;
  };
  for (size_t p = 0; p < part.patches.size(); ++p) {
    const partition::Patch& pp = part.patches[p];
    const int space = space_of(pp.device);
    for (size_t t = 0; t < part.transfers.size(); ++t) {
      const auto& tr = part.transfers[t];
      if (tr.to_space == space && space != 0 &&
          std::count(tr.consumer_patches.begin(), tr.consumer_patches.end(), static_cast<int>(p)))
        emit_transfer(t);
    }
    Step step;
    step.device = pp.device;
    PlanReport::Patch rp;
    rp.id = static_cast<int>(p);
    rp.backend = pp.device < 0 ? "host" : devices_[pp.device]->name();
    rp.device = pp.device < 0 ? "Quilt core" : devices_[pp.device]->description();
    rp.depends_on = pp.depends_on;
    for (int v : pp.inputs) rp.inputs.push_back(names_[v]);
    for (int v : pp.outputs) rp.outputs.push_back(names_[v]);
    std::string members;
    for (size_t k = 0; k < pp.nodes.size(); ++k) {
      rp.nodes.push_back(report_node[pp.nodes[k]]);
      if (k < 3) members += (k ? ", " : "") + live[pp.nodes[k]].node->display();
    }
    if (pp.nodes.size() > 3) members += ", ...";
    step.label = "patch " + std::to_string(p) + " on " + rp.backend + " (" + members + ")";
    if (pp.device < 0) {
      LiveNode& ln = live[pp.nodes[0]];
      step.kind = StepKind::Host;
      const std::string& op = ln.node->op_type;
      step.host_kind = !ln.host_reason.empty() ? HostKind::Op
                       : op == "If"            ? HostKind::If
                       : op == "Loop"          ? HostKind::Loop
                       : op == "SequenceMap"   ? HostKind::SequenceMap
                                               : HostKind::Scan;
      if (step.host_kind == HostKind::Op) step.host_kernel = make_host_kernel(*ln.node);
      step.nodes.push_back({ln.node, ln.schema, ln.inputs, ln.outputs});
      step.subplans = std::move(ln.subplans);
      for (int v : ln.inputs) step.in_slots.push_back(v < 0 ? -1 : slot_id(v, 0));
      for (const auto& name : ln.node->implicit_inputs) step.in_slots.push_back(value_id(name));
      for (int v : ln.outputs) step.out_slots.push_back(v < 0 ? -1 : slot_id(v, 0));
    } else {
      step.kind = StepKind::Patch;
      AbiGraph ag;
      std::map<int, int32_t> abi_of;
      auto abi = [&](int v) -> int32_t {
        if (v < 0) return -1;
        auto it = abi_of.find(v);
        if (it != abi_of.end()) return it->second;
        const Tensor* c = constants_[v].defined() ? &constants_[v] : nullptr;
        if (c) rp.constant_bytes += static_cast<int64_t>(c->nbytes());
        int32_t a = ag.add_value(names_[v], static_types_[v], c);
        abi_of[v] = a;
        step.abi_values.push_back(v);
        return a;
      };
      for (int n : pp.nodes) {
        const LiveNode& ln = live[n];
        std::vector<int32_t> ai, ao;
        for (int v : ln.inputs) ai.push_back(abi(v));
        for (int v : ln.outputs) ao.push_back(abi(v));
        ag.add_node(*ln.node, ai, ao);
        step.nodes.push_back({ln.node, ln.schema, ln.inputs, ln.outputs});
        step.node_labels.push_back(ln.node->display());
        for (int i : ln.schema->value_inputs)
          if (static_cast<size_t>(i) < ln.inputs.size() && ln.inputs[i] >= 0 &&
              !constants_[ln.inputs[i]].defined())
            step.value_inputs.push_back(ln.inputs[i]);
      }
      std::vector<int32_t> gi, go;
      for (int v : pp.inputs) {
        gi.push_back(abi(v));
        step.in_slots.push_back(slot_id(v, space));
      }
      for (int v : pp.outputs) {
        go.push_back(abi(v));
        step.out_slots.push_back(slot_id(v, space));
      }
      ag.set_inputs(gi);
      ag.set_outputs(go);
      DoneContext done{&constants_, &holders, &step.abi_values};
      ag.set_constant_done(
          [](void* context, int32_t a) {
            auto* d = static_cast<DoneContext*>(context);
            if (a < 0 || static_cast<size_t>(a) >= d->abi_values->size()) return;
            const int v = (*d->abi_values)[static_cast<size_t>(a)];
            if (--(*d->holders)[v] == 0) (*d->constants)[v] = Tensor();
          },
          &done);
      // Before the compile, which may free constants the backend copied (constant_done).
      find_static_shapes(step);
      // Plugins get each constant's content hash (ABI 1.2), to share uploads across sessions
      // without hashing the weights themselves; the executable cache keys by them too.
      const Device& device = *devices_[pp.device];
      if (device.backend_name() != "cpu" || !options.cache_dir.empty())
        ag.compute_constant_hashes();
      CacheOutcome cached;
      step.exe = compile_cached(device, ag, "[" + step.label + "] compile", options.cache_dir,
                                logger_ ? *logger_ : Logger(), &cached);
      rp.cache = cached.what;
      rp.cache_detail = cached.detail;
      if (!devices_[pp.device]->synchronous() || !devices_[pp.device]->host_memory())
        inline_ = false;
    }
    report_.patches.push_back(std::move(rp));
    steps_.push_back(std::move(step));
    for (size_t t = 0; t < part.transfers.size(); ++t)
      if (part.transfers[t].to_space == 0 &&
          part.transfers[t].producer_patch == static_cast<int>(p))
        emit_transfer(t);
  }

  for (const auto& out : g.outputs) {
    ValueInfo info = out;
    auto it = ids_.find(out.name);
    if (it != ids_.end()) {
      const TypeShape& t = static_types_[it->second];
      // A subgraph's inference may be left to run time (a branch these shapes never take).
      const bool wrong_shape =
          !outer_type && check_declared_output(where_, g, out, t, logger_ ? *logger_ : Logger());
      if (info.dtype == DType::Undefined) info.dtype = t.dtype;
      if (wrong_shape) {  // the inferred dims, and the declared names where those are unknown
        std::vector<Dim> dims;
        for (size_t d = 0; d < t.dims.size(); ++d)
          dims.push_back(t.dims[d] < 0 && info.shape.size() == t.dims.size() ? info.shape[d]
                                                                             : Dim{t.dims[d], ""});
        info.shape = std::move(dims);
      } else if (!info.has_shape && t.has_shape) {
        info.has_shape = true;
        for (int64_t d : t.dims) info.shape.push_back(Dim{d, ""});
      }
    }
    outputs_.push_back(info);
  }
  if (logger_ && logger_->enabled(LogLevel::Debug))
    logger_->debug("plan for '" + where_ + "': " + std::to_string(report_.patches.size()) +
                   " patches, " + std::to_string(report_.transfers.size()) + " transfers, " +
                   std::to_string(folded_) + " nodes folded into constants");
}

}  // namespace quilt
