// The graph under rewrite (rewriter.hpp): indexes, constants, types, fuse() and its rule.
#include "core/optimize/rewriter.hpp"

#include <algorithm>
#include <cmath>

#include "core/half.hpp"

namespace quilt::optimize {

void Counts::declare(const std::string& pattern) {
  if (std::none_of(entries_.begin(), entries_.end(),
                   [&](const Entry& e) { return e.pattern == pattern; }))
    entries_.push_back({pattern});
}

void Counts::add(const std::string& pattern, int nodes_removed) {
  declare(pattern);
  for (Entry& e : entries_)
    if (e.pattern == pattern) {
      ++e.count;
      e.nodes_removed += nodes_removed;
    }
}

std::vector<Counts::Entry> Counts::nonzero() const {
  std::vector<Entry> out;
  for (const Entry& e : entries_)
    if (e.count > 0) out.push_back(e);
  return out;
}

NameSet::NameSet(const Graph& graph) {
  add(graph);
}

void NameSet::add(const Graph& graph) {
  for (const auto& in : graph.inputs) names_.insert(in.name);
  for (const auto& out : graph.outputs) names_.insert(out.name);
  for (const auto& [name, _] : graph.initializers) names_.insert(name);
  for (const auto& [name, _] : graph.value_info) names_.insert(name);
  for (const auto& n : graph.nodes) {
    names_.insert(n.inputs.begin(), n.inputs.end());
    names_.insert(n.outputs.begin(), n.outputs.end());
    for (const auto& [_, a] : n.attributes) {
      if (a.g) add(*a.g);
      for (const auto& g : a.graphs) add(*g);
    }
  }
}

std::string NameSet::fresh(const std::string& base) {
  std::string name = base;
  for (int i = 1; names_.count(name); ++i) name = base + "_" + std::to_string(i);
  names_.insert(name);
  return name;
}

Rewriter::Rewriter(Graph& graph, const Rewriter* parent, int64_t ir_version, NameSet& names,
                   Counts& counts)
    : graph_(graph),
      parent_(parent),
      names_(names),
      counts_(counts),
      dead_(graph.nodes.size(), 0),
      order_(graph.topological_order()),
      overridable_(parent != nullptr || ir_version >= 4) {
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    for (const auto& o : graph_.nodes[i].outputs)
      if (!o.empty()) producer_[o] = i;
    index_reads(i, +1);
    outside_reads_.insert(graph_.nodes[i].implicit_inputs.begin(),
                          graph_.nodes[i].implicit_inputs.end());
  }
  for (const auto& out : graph_.outputs) outside_reads_.insert(out.name);
  for (const auto& in : graph_.inputs) formal_.insert(in.name);
  local_ = formal_;
  for (const auto& [name, _] : graph_.initializers) local_.insert(name);
  for (const auto& [name, _] : producer_) local_.insert(name);
}

void Rewriter::index_reads(size_t node, int sign) {
  for (const auto& in : graph_.nodes[node].inputs) {
    if (in.empty()) continue;
    auto& list = readers_[in];
    if (sign > 0) {
      list.push_back(node);
    } else if (auto it = std::find(list.begin(), list.end(), node); it != list.end()) {
      list.erase(it);
    }
  }
}

const Node* Rewriter::producer(const std::string& v) const {
  auto it = producer_.find(v);
  return it == producer_.end() ? nullptr : &graph_.nodes[it->second];
}

const Node* Rewriter::sole_reader(const std::string& v) const {
  if (outside_reads_.count(v)) return nullptr;
  auto it = readers_.find(v);
  if (it == readers_.end() || it->second.size() != 1) return nullptr;
  return &graph_.nodes[it->second[0]];
}

std::vector<const Node*> Rewriter::readers(const std::string& v) const {
  std::vector<const Node*> out;
  if (auto it = readers_.find(v); it != readers_.end())
    for (size_t i : it->second) out.push_back(&graph_.nodes[i]);
  return out;
}

const Tensor* Rewriter::constant(const std::string& v) const {
  if (v.empty() || producer_.count(v)) return nullptr;
  if (formal_.count(v) && overridable_) return nullptr;
  if (auto it = graph_.initializers.find(v); it != graph_.initializers.end()) return &it->second;
  if (parent_ && !defines(v)) return parent_->constant(v);
  return nullptr;
}

std::optional<double> Rewriter::scalar(const std::string& v) const {
  const Tensor* t = constant(v);
  if (!t || t->numel() != 1) return std::nullopt;
  switch (t->dtype()) {
    case DType::Float32:
      return t->data<float>()[0];
    case DType::Float64:
      return t->data<double>()[0];
    case DType::Float16:
      return half_to_float(static_cast<const uint16_t*>(t->raw_data())[0]);
    case DType::Int32:
      return t->data<int32_t>()[0];
    case DType::Int64:
      return static_cast<double>(t->data<int64_t>()[0]);
    default:
      return std::nullopt;
  }
}

int64_t Rewriter::scalar_rank(const std::string& v) const {
  const Tensor* t = constant(v);
  return t ? t->rank() : 0;
}

const TypeShape& Rewriter::type(const std::string& v) const {
  if (!typed_) infer_types();
  if (auto it = types_.find(v); it != types_.end()) return it->second;
  if (parent_ && !defines(v)) return parent_->type(v);
  static const TypeShape unknown;
  return unknown;
}

namespace {

// Where inference cannot say more (an input's rank is known only at run time, after a Reshape to
// a computed shape, as in every transformer with a symbolic sequence length), the dtype of the
// ops whose output has an input's type T: the patterns need the dtype even where the shape is
// unknown. The input it comes from, or -1.
int same_type_input(const Node& n) {
  static const std::set<std::string> first = {"Abs",
                                              "Add",
                                              "AveragePool",
                                              "BatchNormalization",
                                              "Ceil",
                                              "Clip",
                                              "Concat",
                                              "Conv",
                                              "ConvTranspose",
                                              "Cos",
                                              "CumSum",
                                              "Div",
                                              "Dropout",
                                              "Elu",
                                              "Erf",
                                              "Exp",
                                              "Expand",
                                              "Flatten",
                                              "Floor",
                                              "Gather",
                                              "GatherElements",
                                              "Gelu",
                                              "Gemm",
                                              "GlobalAveragePool",
                                              "GlobalMaxPool",
                                              "GroupNormalization",
                                              "HardSigmoid",
                                              "HardSwish",
                                              "Identity",
                                              "InstanceNormalization",
                                              "LayerNormalization",
                                              "LeakyRelu",
                                              "Log",
                                              "LogSoftmax",
                                              "MatMul",
                                              "Max",
                                              "MaxPool",
                                              "Min",
                                              "Mish",
                                              "Mul",
                                              "Neg",
                                              "Pad",
                                              "Pow",
                                              "RMSNormalization",
                                              "Reciprocal",
                                              "ReduceL2",
                                              "ReduceMax",
                                              "ReduceMean",
                                              "ReduceMin",
                                              "ReduceProd",
                                              "ReduceSum",
                                              "Relu",
                                              "Reshape",
                                              "Resize",
                                              "Round",
                                              "Selu",
                                              "Sigmoid",
                                              "Sign",
                                              "Sin",
                                              "Slice",
                                              "Softmax",
                                              "Softplus",
                                              "Softsign",
                                              "Split",
                                              "Sqrt",
                                              "Squeeze",
                                              "Sub",
                                              "Swish",
                                              "Tanh",
                                              "Tile",
                                              "Transpose",
                                              "Unsqueeze"};
  if (!n.domain.empty()) return -1;
  if (n.op_type == "Where") return 1;
  return first.count(n.op_type) ? 0 : -1;
}

}  // namespace

void Rewriter::infer_types() const {
  typed_ = true;
  for (const auto& [name, t] : graph_.initializers) types_[name] = TypeShape::of(t);
  for (const auto& in : graph_.inputs) {
    if (!overridable_ && graph_.initializers.count(in.name)) continue;
    TypeShape t{in.dtype, in.has_shape, {}};
    for (const auto& d : in.shape) t.dims.push_back(d.is_fixed() ? d.value : -1);
    types_[in.name] = t;
  }
  const SchemaRegistry& schemas = SchemaRegistry::builtin();
  for (size_t i : order_) {
    if (dead_[i]) continue;
    const Node& n = graph_.nodes[i];
    std::vector<TypeShape> in_types;
    std::vector<const Tensor*> values;
    for (const auto& in : n.inputs) {
      in_types.push_back(in.empty() ? TypeShape{} : type(in));
      values.push_back(constant(in));
    }
    std::vector<TypeShape> out(n.outputs.size());
    if (const OpSchema* schema = schemas.find(n.op_type, n.domain, n.opset)) {
      try {
        out = infer_node(*schema, n, in_types, values, false);
      } catch (const Error&) {
        // Left unknown: the plan's own inference reports the node, with the model's context.
      }
    }
    const int from = same_type_input(n);
    for (size_t o = 0; o < n.outputs.size() && o < out.size(); ++o) {
      if (n.outputs[o].empty()) continue;
      // Split's outputs all have the input's type; Dropout's mask and MaxPool's indices do not.
      if (out[o].dtype == DType::Undefined && from >= 0 && (o == 0 || n.op_type == "Split") &&
          static_cast<size_t>(from) < in_types.size())
        out[o].dtype = in_types[static_cast<size_t>(from)].dtype;
      types_[n.outputs[o]] = out[o];
    }
  }
}

bool Rewriter::can_fuse(const std::vector<size_t>& gone, size_t root) const {
  std::set<size_t> match(gone.begin(), gone.end());
  match.insert(root);
  if (match.size() != gone.size() + 1) return false;
  for (size_t i : match)
    if (dead_[i]) return false;
  for (size_t g : gone)
    for (const auto& o : graph_.nodes[g].outputs) {
      if (o.empty()) continue;
      if (outside_reads_.count(o)) return false;
      if (auto it = readers_.find(o); it != readers_.end())
        for (size_t reader : it->second)
          if (!match.count(reader)) return false;
    }
  return true;
}

bool Rewriter::fuse(const std::vector<size_t>& gone, size_t root, Node fused) {
  if (!can_fuse(gone, root) ||
      !SchemaRegistry::builtin().find(fused.op_type, fused.domain, fused.opset))
    return false;
  std::set<size_t> match(gone.begin(), gone.end());
  match.insert(root);
  for (size_t i : match) {
    index_reads(i, -1);
    for (const auto& o : graph_.nodes[i].outputs) {
      producer_.erase(o);
      if (std::find(fused.outputs.begin(), fused.outputs.end(), o) == fused.outputs.end())
        graph_.value_info.erase(o);
    }
  }
  for (size_t g : gone) dead_[g] = 1;
  removed_ += static_cast<int>(gone.size());
  graph_.nodes[root] = std::move(fused);
  index_reads(root, +1);
  for (const auto& o : graph_.nodes[root].outputs)
    if (!o.empty()) producer_[o] = root;
  return true;
}

bool Rewriter::to_initializer(size_t i, Tensor value) {
  const Node& n = graph_.nodes[i];
  if (dead_[i] || n.outputs.size() != 1 || n.outputs[0].empty()) return false;
  const std::string name = n.outputs[0];
  index_reads(i, -1);
  producer_.erase(name);
  dead_[i] = 1;
  ++removed_;
  if (typed_) types_[name] = TypeShape::of(value);
  graph_.initializers[name] = std::move(value);
  return true;
}

std::string Rewriter::add_initializer(const std::string& base, Tensor value) {
  const std::string name = names_.fresh(base);
  local_.insert(name);
  if (typed_) types_[name] = TypeShape::of(value);
  graph_.initializers[name] = std::move(value);
  return name;
}

void Rewriter::finish() {
  std::vector<Node> kept;
  kept.reserve(graph_.nodes.size());
  for (size_t i = 0; i < graph_.nodes.size(); ++i) {
    if (auto it = spliced_.find(i); it != spliced_.end()) {
      for (Node& n : it->second) kept.push_back(std::move(n));
    } else if (!dead_[i]) {
      kept.push_back(std::move(graph_.nodes[i]));
    }
  }
  graph_.nodes = std::move(kept);
  std::set<std::string> read(outside_reads_.begin(), outside_reads_.end());
  read.insert(formal_.begin(), formal_.end());
  for (const auto& n : graph_.nodes) {
    read.insert(n.inputs.begin(), n.inputs.end());
    read.insert(n.implicit_inputs.begin(), n.implicit_inputs.end());
  }
  std::erase_if(graph_.initializers, [&](const auto& kv) { return !read.count(kv.first); });
}

namespace {

// Names graph g defines itself (its inputs, initializers and node outputs): they shadow outer ones.
std::set<std::string> defined_in(const Graph& g) {
  std::set<std::string> out;
  for (const auto& in : g.inputs) out.insert(in.name);
  for (const auto& [name, _] : g.initializers) out.insert(name);
  for (const auto& n : g.nodes)
    for (const auto& o : n.outputs)
      if (!o.empty()) out.insert(o);
  return out;
}

void rename_in(std::vector<std::string>& names, const std::map<std::string, std::string>& to) {
  for (auto& v : names)
    if (auto it = to.find(v); it != to.end()) v = it->second;
}

// Renames, in the subgraphs of g's nodes, the outer values they read (where no subgraph in
// between defines a value of that name).
void rename_outer_reads(Graph& g, std::map<std::string, std::string> to);

void rename_subgraph_reads(Node& n, const std::map<std::string, std::string>& to) {
  rename_in(n.implicit_inputs, to);
  for (auto& [_, a] : n.attributes) {
    if (a.g) rename_outer_reads(*a.g, to);
    for (auto& sub : a.graphs) rename_outer_reads(*sub, to);
  }
}

void rename_outer_reads(Graph& g, std::map<std::string, std::string> to) {
  for (const auto& name : defined_in(g)) to.erase(name);
  if (to.empty()) return;
  for (auto& n : g.nodes) {
    rename_in(n.inputs, to);
    rename_subgraph_reads(n, to);
  }
  for (auto& out : g.outputs)
    if (auto it = to.find(out.name); it != to.end()) out.name = it->second;
}

}  // namespace

bool Rewriter::visible(const std::string& v) const {
  return defines(v) || (parent_ && parent_->visible(v));
}

bool Rewriter::inline_graph(size_t i, Graph body) {
  if (dead_[i]) return false;
  const Node& n = graph_.nodes[i];
  if (!body.inputs.empty() || body.outputs.size() != n.outputs.size()) return false;
  const std::set<std::string> defined = defined_in(body);
  // The body's outputs take the node's output names: a value the body makes is renamed to it;
  // an outer value, or one already given a name, goes through an Identity.
  std::map<std::string, std::string> to;
  std::vector<Node> identities;
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    const std::string &out = n.outputs[k], &made = body.outputs[k].name;
    if (out.empty()) continue;
    if (defined.count(made) && !to.count(made)) {
      to[made] = out;
    } else {
      identities.push_back(make_node("Identity", n, 1, {made}, {out}));
      identities.back().name = n.name.empty() ? out : n.name + "/" + out;
    }
  }
  // Values of the body named like one this graph or an enclosing one defines get fresh names.
  for (const auto& name : defined)
    if (!to.count(name) && visible(name)) to[name] = names_.fresh(name);
  for (auto& bn : body.nodes) {
    rename_in(bn.inputs, to);
    rename_in(bn.outputs, to);
    rename_subgraph_reads(bn, to);
  }
  for (auto& id : identities) rename_in(id.inputs, to);

  index_reads(i, -1);
  for (const auto& o : n.outputs) producer_.erase(o);
  dead_[i] = 1;
  ++removed_;
  for (auto& [name, value] : body.initializers) {
    auto it = to.find(name);
    const std::string& as = it == to.end() ? name : it->second;
    local_.insert(as);
    graph_.initializers[as] = std::move(value);
  }
  for (auto& [name, info] : body.value_info) {
    auto it = to.find(name);
    info.name = it == to.end() ? name : it->second;
    graph_.value_info[info.name] = std::move(info);
  }
  std::vector<Node>& nodes = spliced_[i];
  for (auto& bn : body.nodes) nodes.push_back(std::move(bn));
  for (auto& id : identities) nodes.push_back(std::move(id));
  for (const auto& bn : nodes)
    for (const auto& o : bn.outputs) local_.insert(o);
  // Types are inferred again on first use (the new nodes are not among them: unknown).
  typed_ = false;
  types_.clear();
  return true;
}

void Rewriter::drop_unread(const std::vector<size_t>& nodes) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const size_t j = *it;
    if (dead_[j]) continue;
    const Node& n = graph_.nodes[j];
    const bool read = std::any_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) {
      auto r = readers_.find(o);
      return outside_reads_.count(o) || (r != readers_.end() && !r->second.empty());
    });
    if (read) continue;
    index_reads(j, -1);
    for (const auto& o : n.outputs) producer_.erase(o);
    dead_[j] = 1;
    ++removed_;
  }
}

// ---- helpers ----

bool is_op(const Node* n, const char* op_type) {
  return n && n->domain.empty() && n->op_type == op_type;
}

bool near(std::optional<double> v, double want) {
  return v && std::fabs(*v - want) <= 1e-4 * std::fabs(want);
}

Node make_node(const std::string& op_type, const Node& like, int64_t min_opset,
               std::vector<std::string> inputs, std::vector<std::string> outputs) {
  Node n;
  n.name = like.name;
  n.op_type = op_type;
  n.opset = std::max(like.opset, min_opset);
  n.index = like.index;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  return n;
}

namespace {

Attribute& fresh_attr(Node& n, const std::string& name, Attribute::Kind kind) {
  Attribute& a = n.attributes[name] = Attribute{};
  a.name = name;
  a.kind = kind;
  return a;
}

}  // namespace

void set_attr(Node& n, const std::string& name, float v) {
  fresh_attr(n, name, Attribute::Kind::Float).f = v;
}

void set_attr(Node& n, const std::string& name, int64_t v) {
  fresh_attr(n, name, Attribute::Kind::Int).i = v;
}

void set_attr(Node& n, const std::string& name, const std::string& v) {
  fresh_attr(n, name, Attribute::Kind::String).s = v;
}

namespace {

void expand(const Rewriter& r, const std::string& v, const Node* reader, Product& p) {
  const Node* n = r.producer(v);
  const bool through = n && (!reader || r.sole_reader(v) == reader) && n->inputs.size() == 2;
  if (through && (is_op(n, "Mul") || is_op(n, "Div"))) {
    const bool div = n->op_type == "Div";
    if (!div || r.scalar(n->inputs[1])) {
      p.nodes.push_back(r.index_of(n));
      for (size_t s = 0; s < 2; ++s) {
        const std::string& in = n->inputs[s];
        if (std::optional<double> c = r.scalar(in)) {
          p.k = div && s == 1 ? p.k / *c : p.k * *c;
          p.constant_rank = std::max(p.constant_rank, r.scalar_rank(in));
        } else {
          expand(r, in, n, p);
        }
      }
      return;
    }
  }
  if (through && is_op(n, "Pow") && !r.scalar(n->inputs[0])) {
    const std::optional<double> e = r.scalar(n->inputs[1]);
    if (e == 2.0 || e == 3.0) {
      p.nodes.push_back(r.index_of(n));
      p.constant_rank = std::max(p.constant_rank, r.scalar_rank(n->inputs[1]));
      for (int i = 0; i < static_cast<int>(*e); ++i) p.leaves.push_back(n->inputs[0]);
      return;
    }
  }
  p.leaves.push_back(v);
}

}  // namespace

Product product_of(const Rewriter& r, const std::string& v, const Node* reader) {
  Product p;
  expand(r, v, reader, p);
  return p;
}

bool keeps_shape(const Rewriter& r, const std::string& x, const std::string& out,
                 int64_t constant_rank) {
  if (constant_rank == 0) return true;
  const TypeShape &tx = r.type(x), &to = r.type(out);
  return tx.has_shape && to.has_shape && tx.dims.size() == to.dims.size();
}

}  // namespace quilt::optimize
