#include "core/executor.hpp"

#include <algorithm>
#include <new>
#include <set>

#include "core/control_flow.hpp"

namespace quilt {
namespace {

bool has_subgraph(const Node& n) {
  for (const auto& [_, a] : n.attributes)
    if (a.g || !a.graphs.empty()) return true;
  return false;
}

TypeShape type_of(const ValueInfo& info) {
  TypeShape t;
  t.dtype = info.dtype;
  t.has_shape = info.has_shape;
  for (const auto& d : info.shape) t.dims.push_back(d.is_fixed() ? d.value : -1);
  return t;
}

// Shape / Size of a value whose shape is static at session creation.
Tensor shape_or_size_of(const Node& node, const std::vector<int64_t>& dims) {
  const auto rank = static_cast<int64_t>(dims.size());
  if (node.op_type == "Size") {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return Tensor::from_vector<int64_t>({}, {n});
  }
  int64_t start = node.attr_int("start", 0), end = node.attr_int("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, start, rank);
  std::vector<int64_t> out(dims.begin() + start, dims.begin() + end);
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(out.size())}, out);
}

// Wraps any failure inside a step so that its message names the node.
[[noreturn]] void rethrow_for(const Node& node) {
  try {
    throw;
  } catch (const Error& e) {
    std::string what = e.what();
    if (what.rfind("[", 0) == 0) throw;
    throw Error(e.code(), "[" + node.display() + "] " + what);
  } catch (const std::bad_alloc&) {
    throw Error(ErrorCode::OutOfMemory, "[" + node.display() + "] out of memory");
  } catch (const std::exception& e) {
    throw Error(ErrorCode::Runtime, "[" + node.display() + "] " + e.what());
  }
}

}  // namespace

int ExecutionPlan::value_id(const std::string& name) {
  auto [it, fresh] = ids_.emplace(name, static_cast<int>(names_.size()));
  if (fresh) {
    names_.push_back(name);
    static_types_.emplace_back();
    constants_.emplace_back();
  }
  return it->second;
}

ExecutionPlan::ExecutionPlan(const Model& model, BackendList backends, const PlanOptions& options)
    : where_(model.path), backends_(std::move(backends)), logger_(options.logger) {
  build(model.graph, options, nullptr);
}

ExecutionPlan::ExecutionPlan(const Graph& graph, std::string where, BackendList backends,
                             const PlanOptions& options,
                             const std::function<TypeShape(const std::string&)>& outer_type)
    : where_(std::move(where)), backends_(std::move(backends)), logger_(options.logger) {
  build(graph, options, &outer_type);
}

void ExecutionPlan::build(const Graph& g, const PlanOptions& options,
                          const std::function<TypeShape(const std::string&)>* outer_type) {
  const SchemaRegistry& schemas = SchemaRegistry::builtin();
  // Number every value first: constants_ and static_types_ must not reallocate while pointers
  // into them are handed to inference and to kernels.
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
  for (const auto& [name, t] : g.initializers) {
    int id = value_id(name);
    constants_[id] = t;
    static_types_[id] = TypeShape::of(t);
  }
  for (const auto& in : g.inputs) {
    if (g.initializers.count(in.name) && !outer_type) {
      overridable_.push_back(in.name);
      continue;
    }
    int id = value_id(in.name);
    static_types_[id] = type_of(in);
    constants_[id] = Tensor();  // a formal input shadows an initializer of the same name
    inputs_.push_back(in);
    formal_.push_back(in.name);
  }
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

  std::vector<std::string> unsupported;
  const Backend& cpu = *backends_.back();
  for (size_t index : g.topological_order()) {
    const Node& node = g.nodes[index];
    const OpSchema* schema = schemas.find(node.op_type, node.domain, node.opset);
    if (!schema)
      node.fail("no schema at opset " + std::to_string(node.opset), ErrorCode::NotImplemented);
    Step step;
    step.node = &node;
    step.schema = schema;
    std::vector<TypeShape> in_types;
    std::vector<const Tensor*> in_values;
    bool all_constant = true;
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        step.inputs.push_back(-1);
        in_types.emplace_back();
        in_values.push_back(nullptr);
        continue;
      }
      int id = value_id(name);
      step.inputs.push_back(id);
      in_types.push_back(static_types_[id]);
      in_values.push_back(constants_[id].defined() ? &constants_[id] : nullptr);
      if (!constants_[id].defined()) all_constant = false;
    }
    for (const auto& name : node.implicit_inputs) step.inputs.push_back(value_id(name));
    for (const auto& name : node.outputs)
      step.outputs.push_back(name.empty() ? -1 : value_id(name));
    std::vector<TypeShape> out_types(node.outputs.size());
    try {
      out_types = infer_node(*schema, node, in_types, in_values, false);
    } catch (const Error&) {
      // A branch that these shapes never take (e.g. the 2-D branch of an If when the input is
      // 3-D) may not type-check; in a subgraph, leave its shapes to run time.
      if (!outer_type) throw;
    }
    for (size_t i = 0; i < step.outputs.size(); ++i)
      if (step.outputs[i] >= 0) static_types_[step.outputs[i]] = out_types[i];

    if (node.domain.empty() &&
        (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan")) {
      step.kind = node.op_type == "If"     ? StepKind::If
                  : node.op_type == "Loop" ? StepKind::Loop
                                           : StepKind::Scan;
      auto type_here = [this](const std::string& name) {
        auto it = ids_.find(name);
        return it == ids_.end() ? TypeShape{} : static_types_[it->second];
      };
      for (const auto& [attr_name, a] : node.attributes)
        if (a.kind == Attribute::Kind::Graph && a.g)
          step.subplans[attr_name] = std::make_unique<ExecutionPlan>(
              *a.g, where_ + " [" + node.display() + " subgraph '" + attr_name + "']", backends_,
              options, type_here);
      steps_.push_back(std::move(step));
      continue;
    }

    NodeSignature sig{node, in_types, out_types, in_values};
    // Constant folding: run nodes whose inputs are all known now, once.
    const std::string reason = cpu.unsupported_reason(sig);
    // Constant folding: run nodes whose inputs are all known now, once. Shape and Size of a
    // statically shaped value are constants too.
    const bool shape_of_static = (node.op_type == "Shape" || node.op_type == "Size") &&
                                 node.domain.empty() && !in_types.empty() &&
                                 in_types[0].is_static();
    const bool foldable =
        options.optimization_level >= 1 && reason.empty() &&
        ((all_constant && !is_random_op(node) && !has_subgraph(node)) || shape_of_static);
    if (foldable) {
      try {
        std::vector<Tensor> outs(node.outputs.size());
        if (all_constant) {
          auto compiled = cpu.compile(sig);
          std::vector<TypeShape> run_types = infer_node(*schema, node, in_types, in_values, true);
          compiled->run(in_values, run_types, outs);
        } else {
          outs[0] = shape_or_size_of(node, in_types[0].dims);
        }
        for (size_t i = 0; i < step.outputs.size(); ++i) {
          if (step.outputs[i] < 0) continue;
          constants_[step.outputs[i]] = outs[i];
          static_types_[step.outputs[i]] = TypeShape::of(outs[i]);
        }
        ++folded_;
        continue;
      } catch (...) {
        rethrow_for(node);
      }
    }
    if (!reason.empty()) {
      unsupported.push_back("[" + node.display() + "] " + reason);
      continue;
    }
    step.backend = backends_.size() - 1;
    try {
      step.compiled = cpu.compile(sig);
    } catch (...) {
      rethrow_for(node);
    }
    steps_.push_back(std::move(step));
  }
  if (!unsupported.empty()) {
    std::string msg = "model '" + where_ + "': " + std::to_string(unsupported.size()) +
                      (unsupported.size() == 1 ? " node is" : " nodes are") +
                      " not supported by any backend:";
    for (const auto& u : unsupported) msg += "\n  - " + u;
    throw Error(ErrorCode::NotImplemented, msg);
  }
  for (const auto& out : g.outputs) {
    ValueInfo info = out;
    auto it = ids_.find(out.name);
    if (it != ids_.end()) {
      const TypeShape& t = static_types_[it->second];
      if (info.dtype == DType::Undefined) info.dtype = t.dtype;
      if (!info.has_shape && t.has_shape) {
        info.has_shape = true;
        for (int64_t d : t.dims) info.shape.push_back(Dim{d, ""});
      }
    }
    outputs_.push_back(info);
  }
  if (logger_)
    logger_->debug("plan for '" + where_ + "': " + std::to_string(steps_.size()) + " steps, " +
                   std::to_string(folded_) + " nodes folded into constants");
}

void ExecutionPlan::check_input(const ValueInfo& info, const Tensor& t) const {
  const std::string where = "input '" + info.name + "'";
  if (!t.defined()) throw Error(ErrorCode::InvalidArgument, where + " is an empty tensor");
  if (info.dtype != DType::Undefined && t.dtype() != info.dtype)
    throw Error(ErrorCode::InvalidArgument, where + " has dtype " + dtype_name(t.dtype()) +
                                                ", expected " + dtype_name(info.dtype));
  if (!info.has_shape) return;
  if (t.rank() != static_cast<int64_t>(info.shape.size()))
    throw Error(ErrorCode::InvalidArgument,
                where + " has rank " + std::to_string(t.rank()) + " (shape " +
                    to_string(t.shape()) + "), expected rank " + std::to_string(info.shape.size()) +
                    " " + to_string(info.shape));
  for (size_t i = 0; i < info.shape.size(); ++i)
    if (info.shape[i].is_fixed() && info.shape[i].value != t.shape()[i])
      throw Error(ErrorCode::InvalidArgument, where + " has shape " + to_string(t.shape()) +
                                                  ", expected " + to_string(info.shape) + ": dim " +
                                                  std::to_string(i) + " is " +
                                                  std::to_string(t.shape()[i]) + ", expected " +
                                                  std::to_string(info.shape[i].value));
}

Tensor ExecutionPlan::detach(const Tensor& t, const std::vector<const Tensor*>& inputs) const {
  for (const auto& c : constants_)
    if (c.defined() && t.shares_storage_with(c)) return t.clone();
  for (const Tensor* in : inputs)
    if (in && t.shares_storage_with(*in)) return t.clone();
  return t;
}

void ExecutionPlan::execute(std::vector<Tensor>& values, const std::vector<int>& wanted) const {
  std::vector<char> needed_value(names_.size(), 0);
  for (int id : wanted) needed_value[id] = 1;
  std::vector<char> run_step(steps_.size(), 0);
  for (size_t s = steps_.size(); s-- > 0;) {
    for (int o : steps_[s].outputs)
      if (o >= 0 && needed_value[o]) run_step[s] = 1;
    if (run_step[s])
      for (int i : steps_[s].inputs)
        if (i >= 0) needed_value[i] = 1;
  }
  // Reference counts so intermediate buffers are released after their last use.
  std::vector<int> uses(names_.size(), 0);
  for (size_t s = 0; s < steps_.size(); ++s)
    if (run_step[s])
      for (int i : steps_[s].inputs)
        if (i >= 0) ++uses[i];
  std::vector<char> keep(names_.size(), 0);
  for (int id : wanted) keep[id] = 1;

  std::vector<const Tensor*> in_ptrs;
  std::vector<TypeShape> in_types;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (!run_step[s]) continue;
    const Step& step = steps_[s];
    try {
      if (step.kind != StepKind::Kernel) {
        run_control_flow(step, values);
      } else {
        const size_t explicit_inputs = step.node->inputs.size();
        in_ptrs.assign(explicit_inputs, nullptr);
        in_types.assign(explicit_inputs, TypeShape{});
        for (size_t i = 0; i < explicit_inputs; ++i) {
          if (step.inputs[i] < 0) continue;
          const Tensor& t = values[step.inputs[i]];
          if (!t.defined())
            step.node->fail("input '" + names_[step.inputs[i]] + "' has no value",
                            ErrorCode::Runtime);
          in_ptrs[i] = &t;
          in_types[i] = TypeShape::of(t);
        }
        std::vector<TypeShape> out_types;
        try {
          out_types = infer_node(*step.schema, *step.node, in_types, in_ptrs, true);
        } catch (const Error& e) {
          // Creation-time inference accepted the graph: what fails now is the actual inputs.
          if (e.code() != ErrorCode::InvalidModel) throw;
          throw Error(ErrorCode::InvalidArgument, e.what());
        }
        for (size_t i = 0; i < out_types.size(); ++i)
          if (step.outputs[i] >= 0 && !out_types[i].is_static())
            step.node->fail("could not infer the shape of output '" + names_[step.outputs[i]] + "'",
                            ErrorCode::Runtime);
        std::vector<Tensor> outs(step.outputs.size());
        step.compiled->run(in_ptrs, out_types, outs);
        for (size_t i = 0; i < step.outputs.size(); ++i) {
          if (step.outputs[i] < 0) continue;
          if (!outs[i].defined())
            step.node->fail("kernel did not produce output '" + names_[step.outputs[i]] + "'",
                            ErrorCode::Runtime);
          values[step.outputs[i]] = std::move(outs[i]);
        }
      }
    } catch (...) {
      rethrow_for(*step.node);
    }
    for (int i : step.inputs)
      if (i >= 0 && --uses[i] == 0 && !keep[i]) values[i] = Tensor();
  }
}

TensorMap ExecutionPlan::run(const TensorMap& inputs,
                             const std::vector<std::string>& output_names) const {
  std::vector<Tensor> values = constants_;
  for (const auto& [name, tensor] : inputs) {
    auto in = std::find_if(inputs_.begin(), inputs_.end(),
                           [&](const ValueInfo& v) { return v.name == name; });
    if (in == inputs_.end()) {
      if (std::find(overridable_.begin(), overridable_.end(), name) != overridable_.end()) {
        const Tensor& init = constants_[ids_.at(name)];
        if (tensor.dtype() != init.dtype() || tensor.shape() != init.shape())
          throw Error(ErrorCode::InvalidArgument,
                      "input '" + name + "' overrides an initializer of " +
                          dtype_name(init.dtype()) + to_string(init.shape()) + " but has " +
                          dtype_name(tensor.dtype()) + to_string(tensor.shape()));
        values[ids_.at(name)] = tensor;
        continue;
      }
      std::string known;
      for (const auto& v : inputs_) known += std::string(known.empty() ? "" : ", ") + v.name;
      throw Error(ErrorCode::InvalidArgument,
                  "unknown input '" + name + "'; the model's inputs are: " + known);
    }
    check_input(*in, tensor);
    values[ids_.at(name)] = tensor;
  }
  for (const auto& in : inputs_)
    if (!inputs.count(in.name))
      throw Error(ErrorCode::InvalidArgument, "missing input '" + in.name + "' (" +
                                                  dtype_name(in.dtype) + " " + to_string(in.shape) +
                                                  ")");

  std::vector<std::string> wanted = output_names;
  if (wanted.empty())
    for (const auto& o : outputs_) wanted.push_back(o.name);
  std::vector<int> wanted_ids;
  for (const auto& name : wanted) {
    bool is_output = std::any_of(outputs_.begin(), outputs_.end(),
                                 [&](const ValueInfo& v) { return v.name == name; });
    if (!is_output) {
      std::string known;
      for (const auto& v : outputs_) known += std::string(known.empty() ? "" : ", ") + v.name;
      throw Error(ErrorCode::InvalidArgument,
                  "unknown output '" + name + "'; the model's outputs are: " + known);
    }
    wanted_ids.push_back(ids_.at(name));
  }
  execute(values, wanted_ids);

  std::vector<const Tensor*> caller;
  for (const auto& [_, in] : inputs) caller.push_back(&in);
  TensorMap result;
  for (const auto& name : wanted) result[name] = detach(values[ids_.at(name)], caller);
  return result;
}

std::vector<Tensor> ExecutionPlan::run_subgraph(const std::vector<Tensor>& formal,
                                                const std::map<std::string, Tensor>& outer) const {
  std::vector<Tensor> values = constants_;
  for (size_t i = 0; i < formal_.size(); ++i)
    if (i < formal.size()) values[ids_.at(formal_[i])] = formal[i];
  for (const auto& name : outer_) {
    auto it = outer.find(name);
    if (it == outer.end())
      throw Error(ErrorCode::Runtime,
                  where_ + ": outer-scope value '" + name + "' is not available");
    values[ids_.at(name)] = it->second;
  }
  std::vector<int> wanted;
  for (const auto& o : outputs_) wanted.push_back(ids_.at(o.name));
  execute(values, wanted);
  std::vector<Tensor> out;
  for (int id : wanted) {
    if (!values[id].defined())
      throw Error(ErrorCode::Runtime, where_ + ": output '" + names_[id] + "' has no value");
    out.push_back(detach(values[id], {}));
  }
  return out;
}

}  // namespace quilt
