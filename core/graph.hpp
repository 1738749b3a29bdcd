// The core graph IR, imported from ONNX (core/onnx_import.cpp) and consumed by every later stage.
//
// A Graph holds nodes in the order of the model file; topological_order() gives an execution order.
// Value names are the ONNX names; an empty input name means "optional input not given".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "quilt/quilt.hpp"

namespace quilt {

struct Graph;

struct Attribute {
  enum class Kind {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    Floats,
    Ints,
    Strings,
    Tensors,
    Graphs,
    Other
  };
  std::string name;
  Kind kind = Kind::Other;
  float f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;
  std::shared_ptr<Graph> g;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
};

const char* attribute_kind_name(Attribute::Kind kind);

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  // The opset of the node's semantics: the model's opset for its domain, or newer for a node
  // the optimisation passes made (core/optimize/: a Gelu is opset 20 in any model).
  int64_t opset = 0;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attributes;
  // Outer-scope values its subgraphs read (If/Loop/Scan bodies), computed at import. They are
  // inputs for ordering and lifetimes, but not ONNX inputs: schemas and arity never see them.
  std::vector<std::string> implicit_inputs;

  // `Conv node "conv1"`, or `Conv node #3` when the node has no name; used to start messages.
  std::string display() const;
  size_t index = 0;  // position in the model file

  bool has_input(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
  bool has_attr(const std::string& n) const { return attributes.count(n) != 0; }
  const Attribute* attr(const std::string& n) const;

  // Typed attribute access with the spec's default; throws Error(InvalidModel) naming the node
  // when the attribute exists with another kind.
  int64_t attr_int(const std::string& n, int64_t def) const;
  float attr_float(const std::string& n, float def) const;
  std::string attr_string(const std::string& n, const std::string& def) const;
  std::vector<int64_t> attr_ints(const std::string& n, std::vector<int64_t> def = {}) const;
  std::vector<float> attr_floats(const std::string& n, std::vector<float> def = {}) const;
  std::vector<std::string> attr_strings(const std::string& n,
                                        std::vector<std::string> def = {}) const;
  const Tensor* attr_tensor(const std::string& n) const;

  // Throws Error(code) with message "[<display()>] <what>".
  [[noreturn]] void fail(const std::string& what, ErrorCode code = ErrorCode::InvalidModel) const;
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;   // graph inputs (may include initializer names, IR < 4)
  std::vector<ValueInfo> outputs;  // graph outputs
  std::map<std::string, ValueInfo> value_info;
  std::map<std::string, Tensor> initializers;
  std::map<std::string, int64_t> opsets;  // domain -> version ("" = ai.onnx)
  // Graph inputs/outputs whose type Quilt cannot hold, with what they are ("a sequence",
  // "a tensor of bfloat16", ...). Validation reports them as not implemented.
  std::map<std::string, std::string> unsupported_types;

  // Indices into nodes in an order where every node comes after the producers of its inputs.
  // Throws Error(InvalidModel) listing the nodes on a cycle.
  std::vector<size_t> topological_order() const;
};

// Fills Node::implicit_inputs for every node with subgraphs, recursively, and returns the names
// the graph reads without defining them (its own outer-scope values; empty for a model's graph).
std::vector<std::string> resolve_implicit_inputs(Graph& graph);

struct Model {
  Graph graph;
  int64_t ir_version = 0;
  ModelMetadata metadata;  // producer, version, descriptions, metadata_props, opsets
  std::string path;        // file it was loaded from, or "<bytes>"
};

}  // namespace quilt
