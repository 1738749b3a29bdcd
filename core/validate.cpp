#include "core/validate.hpp"

#include <set>

namespace quilt {
namespace {

struct Problems {
  std::vector<std::string> structural;
  std::map<std::string, std::vector<std::string>> unsupported;  // "Op (opset N)" -> nodes
  std::vector<std::string> unsupported_values;
};

void validate_graph(const Graph& g, const std::set<std::string>& outer,
                    const SchemaRegistry& schemas, Problems& p, const std::string& scope) {
  std::set<std::string> defined = outer;
  std::set<std::string> graph_defined;
  for (const auto& [name, _] : g.initializers) graph_defined.insert(name);
  for (const auto& in : g.inputs) {
    if (in.name.empty())
      p.structural.push_back(scope + "a graph input has an empty name");
    else if (!graph_defined.insert(in.name).second && !g.initializers.count(in.name))
      p.structural.push_back(scope + "graph input '" + in.name + "' is declared twice");
  }
  defined.insert(graph_defined.begin(), graph_defined.end());
  std::map<std::string, const Node*> producer;
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      if (graph_defined.count(o))
        p.structural.push_back(scope + "[" + n.display() + "] output '" + o +
                               "' has the same name as a graph input or initializer");
      auto [it, fresh] = producer.emplace(o, &n);
      if (!fresh)
        p.structural.push_back(scope + "value '" + o + "' is produced twice: by " +
                               it->second->display() + " and by " + n.display());
    }
  }
  for (const auto& [name, _] : producer) defined.insert(name);
  for (const auto& n : g.nodes) {
    for (const auto& in : n.inputs)
      if (!in.empty() && !defined.count(in))
        p.structural.push_back(scope + "[" + n.display() + "] input '" + in +
                               "' is not a graph input, an initializer or any node's output");
    if (n.opset == 0) {
      p.structural.push_back(scope + "[" + n.display() + "] its domain '" + n.domain +
                             "' has no opset_import in the model");
    } else if (const OpSchema* schema = schemas.find(n.op_type, n.domain, n.opset)) {
      check_arity(*schema,
                  n);  // the optimizer's patterns index inputs (a Conv without any crashed)
    } else {
      std::string key = (n.domain.empty() ? "" : n.domain + ".") + n.op_type + " (opset " +
                        std::to_string(n.opset) + ")";
      // append(), not "#" + ...: GCC 12 warns falsely (-Wrestrict, bug 105329) on the latter.
      p.unsupported[key].push_back(n.name.empty() ? std::string("#").append(std::to_string(n.index))
                                                  : std::string("\"").append(n.name).append("\""));
    }
    for (const auto& [_, a] : n.attributes) {
      std::vector<std::shared_ptr<Graph>> subs = a.graphs;
      if (a.g) subs.push_back(a.g);
      for (const auto& sub : subs)
        validate_graph(*sub, defined, schemas, p,
                       scope + "[" + n.display() + " subgraph '" + a.name + "'] ");
    }
  }
  for (const auto& [name, what] : g.unsupported_types)
    p.unsupported_values.push_back(scope + "'" + name + "' is " + what);
  for (const auto& out : g.outputs)
    if (!defined.count(out.name))
      p.structural.push_back(scope + "graph output '" + out.name + "' is never produced");
  try {
    g.topological_order();
  } catch (const Error& e) {
    p.structural.push_back(scope + e.what());
  }
}

}  // namespace

void validate_model(const Model& model, const SchemaRegistry& schemas) {
  Problems p;
  validate_graph(model.graph, {}, schemas, p, "");
  if (p.structural.empty() && p.unsupported.empty() && p.unsupported_values.empty()) return;
  std::string msg;
  if (!p.structural.empty()) {
    msg = "model '" + model.path + "' is invalid (" + std::to_string(p.structural.size()) +
          (p.structural.size() == 1 ? " problem" : " problems") + "):";
    for (const auto& s : p.structural) msg += "\n  - " + s;
  }
  if (!p.unsupported.empty()) {
    if (!msg.empty()) msg += "\n";
    msg += "model '" + model.path + "' uses ops Quilt does not implement:";
    for (const auto& [op, nodes] : p.unsupported) {
      msg += "\n  - " + op + " at node" + (nodes.size() > 1 ? "s " : " ");
      for (size_t i = 0; i < nodes.size() && i < 10; ++i) msg += (i ? ", " : "") + nodes[i];
      if (nodes.size() > 10) msg += " and " + std::to_string(nodes.size() - 10) + " more";
    }
  }
  if (!p.unsupported_values.empty()) {
    if (!msg.empty()) msg += "\n";
    msg += "model '" + model.path +
           "' has graph inputs/outputs of types Quilt cannot hold (it holds tensors of "
           "float16/32/64, bfloat16, float8, float8e8m0, float4e2m1, int2, int4, int8-64, uint2, "
           "uint4, "
           "uint8-64, bool and string, and "
           "sequences, maps of scalars and optionals of them):";
    for (const auto& v : p.unsupported_values) msg += "\n  - " + v;
  }
  throw Error(p.structural.empty() ? ErrorCode::NotImplemented : ErrorCode::InvalidModel, msg);
}

}  // namespace quilt
