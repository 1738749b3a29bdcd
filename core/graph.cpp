// Node attribute access and topological ordering.
#include "core/graph.hpp"

#include <algorithm>
#include <queue>
#include <set>

namespace quilt {

const char* attribute_kind_name(Attribute::Kind kind) {
  switch (kind) {
    case Attribute::Kind::Float:
      return "float";
    case Attribute::Kind::Int:
      return "int";
    case Attribute::Kind::String:
      return "string";
    case Attribute::Kind::Tensor:
      return "tensor";
    case Attribute::Kind::Graph:
      return "graph";
    case Attribute::Kind::Floats:
      return "floats";
    case Attribute::Kind::Ints:
      return "ints";
    case Attribute::Kind::Strings:
      return "strings";
    case Attribute::Kind::Tensors:
      return "tensors";
    case Attribute::Kind::Graphs:
      return "graphs";
    case Attribute::Kind::Other:
      return "other";
  }
  return "other";
}

std::string Node::display() const {
  if (!name.empty()) return op_type + " node \"" + name + "\"";
  return op_type + " node #" + std::to_string(index);
}

void Node::fail(const std::string& what, ErrorCode code) const {
  throw Error(code, "[" + display() + "] " + what);
}

const Attribute* Node::attr(const std::string& n) const {
  auto it = attributes.find(n);
  return it == attributes.end() ? nullptr : &it->second;
}

namespace {
const Attribute* typed(const Node& node, const std::string& n, Attribute::Kind kind) {
  const Attribute* a = node.attr(n);
  if (a && a->kind != kind)
    node.fail("attribute '" + n + "' is of type " + attribute_kind_name(a->kind) + ", expected " +
              attribute_kind_name(kind));
  return a;
}
}  // namespace

int64_t Node::attr_int(const std::string& n, int64_t def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Int);
  return a ? a->i : def;
}
float Node::attr_float(const std::string& n, float def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Float);
  return a ? a->f : def;
}
std::string Node::attr_string(const std::string& n, const std::string& def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::String);
  return a ? a->s : def;
}
std::vector<int64_t> Node::attr_ints(const std::string& n, std::vector<int64_t> def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Ints);
  return a ? a->ints : def;
}
std::vector<float> Node::attr_floats(const std::string& n, std::vector<float> def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Floats);
  return a ? a->floats : def;
}
std::vector<std::string> Node::attr_strings(const std::string& n,
                                            std::vector<std::string> def) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Strings);
  return a ? a->strings : def;
}
const Tensor* Node::attr_tensor(const std::string& n) const {
  const Attribute* a = typed(*this, n, Attribute::Kind::Tensor);
  return a ? &a->t : nullptr;
}

std::vector<size_t> Graph::topological_order() const {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) producer.emplace(o, i);
  std::vector<std::vector<size_t>> consumers(nodes.size());
  std::vector<size_t> pending(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::set<size_t> deps;
    std::vector<std::string> reads = nodes[i].inputs;
    reads.insert(reads.end(), nodes[i].implicit_inputs.begin(), nodes[i].implicit_inputs.end());
    for (const auto& in : reads) {
      auto it = producer.find(in);
      if (!in.empty() && it != producer.end() && it->second != i) deps.insert(it->second);
      if (!in.empty() && it != producer.end() && it->second == i) deps.insert(i);
    }
    for (size_t d : deps) {
      consumers[d].push_back(i);
      ++pending[i];
    }
  }
  // Kahn's algorithm; the min-heap keeps file order among ready nodes, so the order is stable.
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<size_t> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    size_t n = ready.top();
    ready.pop();
    order.push_back(n);
    for (size_t c : consumers[n])
      if (--pending[c] == 0) ready.push(c);
  }
  if (order.size() != nodes.size()) {
    std::string names;
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (pending[i] == 0) continue;
      if (!names.empty()) names += ", ";
      names += nodes[i].display();
    }
    throw Error(ErrorCode::InvalidModel,
                "graph \"" + name + "\" has a cycle; nodes on or after it: " + names);
  }
  return order;
}

std::vector<std::string> resolve_implicit_inputs(Graph& graph) {
  std::set<std::string> defined;
  for (const auto& [name, _] : graph.initializers) defined.insert(name);
  for (const auto& in : graph.inputs) defined.insert(in.name);
  for (const auto& n : graph.nodes)
    for (const auto& o : n.outputs) defined.insert(o);
  std::set<std::string> free;
  for (auto& n : graph.nodes) {
    std::set<std::string> implicit;
    for (auto& [_, a] : n.attributes) {
      std::vector<std::shared_ptr<Graph>> subs = a.graphs;
      if (a.g) subs.push_back(a.g);
      for (auto& sub : subs)
        for (auto& name : resolve_implicit_inputs(*sub)) implicit.insert(name);
    }
    n.implicit_inputs.assign(implicit.begin(), implicit.end());
    for (const auto& name : n.inputs)
      if (!name.empty() && !defined.count(name)) free.insert(name);
    for (const auto& name : n.implicit_inputs)
      if (!defined.count(name)) free.insert(name);
  }
  return {free.begin(), free.end()};
}

}  // namespace quilt
