// What the optimisation passes (core/optimize/*.cpp) share: one graph under rewrite, with who
// produces and who reads each value, which values are constants, their creation-time types, and
// the one edit a pass makes: replace a matched set of nodes by one node.
//
//   void fold_something(Rewriter& r) {
//     for (size_t i : r.reverse_order()) {
//       const Node& root = r.node(i);
//       ... match upwards from root with r.producer(), r.scalar(), r.constant() ...
//       if (r.fuse({i, j}, i, make_node("Op", root, opset, {x}))) r.count("op");
//     }
//   }
//
// fuse() refuses a match whose inner values (the outputs of every matched node but the root)
// are read by anything outside the match: another node, a graph output, a subgraph. Passes
// therefore match freely and let fuse() judge, so that rule lives in one place.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt::optimize {

// Per pattern, how many times it was rewritten, in the order patterns were declared.
class Counts {
 public:
  struct Entry {
    std::string pattern;
    int count = 0, nodes_removed = 0;
  };
  void declare(const std::string& pattern);
  void add(const std::string& pattern, int nodes_removed);
  // The patterns rewritten at least once, in declaration order.
  std::vector<Entry> nonzero() const;

 private:
  std::vector<Entry> entries_;
};

// Every name the model uses in any graph, so that new values and initializers never shadow or
// collide with one (a subgraph may read an outer value by name).
class NameSet {
 public:
  explicit NameSet(const Graph& graph);
  // base when unused, else base_1, base_2, ...; the result is then used.
  std::string fresh(const std::string& base);

 private:
  void add(const Graph& graph);
  std::set<std::string> names_;
};

class Rewriter {
 public:
  // parent: the rewriter of the enclosing graph when `graph` is a subgraph (its constants and
  // types are this graph's outer scope), else nullptr. ir_version: from IR 4 on, an initializer
  // that is also a graph input may be overridden, so it is not a constant.
  Rewriter(Graph& graph, const Rewriter* parent, int64_t ir_version, NameSet& names,
           Counts& counts);

  Graph& graph() { return graph_; }
  const Node& node(size_t i) const { return graph_.nodes[i]; }
  bool live(size_t i) const { return !dead_[i]; }
  // Node indices, producers before readers; consumers first in reverse_order(), so that a pass
  // tries the largest match (rooted at its last node) before the parts of it.
  const std::vector<size_t>& order() const { return order_; }
  std::vector<size_t> reverse_order() const { return {order_.rbegin(), order_.rend()}; }

  // The live node producing v, or nullptr (graph input, initializer, outer value, absent).
  const Node* producer(const std::string& v) const;
  size_t index_of(const Node* n) const { return static_cast<size_t>(n - graph_.nodes.data()); }
  // The live node that reads v, once, when nothing else reads it (no other node, no subgraph,
  // not a graph output); else nullptr.
  const Node* sole_reader(const std::string& v) const;
  // Live nodes that read v (once per input slot).
  std::vector<const Node*> readers(const std::string& v) const;

  // v's value when v is a constant: an initializer of this graph that no graph input can
  // override, or such a constant of an enclosing graph that this graph does not shadow.
  const Tensor* constant(const std::string& v) const;
  // A one-element float or integer constant, as a double.
  std::optional<double> scalar(const std::string& v) const;
  // Rank of a scalar() constant (0 or more; numel 1), for the shape rules of the patterns.
  int64_t scalar_rank(const std::string& v) const;
  // v's creation-time type (dtype Undefined / has_shape false where unknown).
  const TypeShape& type(const std::string& v) const;

  // Replaces the nodes `gone` and `root` by `fused`, which takes root's place in the graph.
  // Returns false and changes nothing when a node is no longer live, the fused op has no schema
  // at its opset, or a value made by a node of `gone` is read outside gone + root.
  bool fuse(const std::vector<size_t>& gone, size_t root, Node fused);
  // fuse()'s rule alone (liveness, inner values read only inside the match), for passes that
  // would compute new weights first.
  bool can_fuse(const std::vector<size_t>& gone, size_t root) const;
  // Turns node i (a Constant) into an initializer of its output's name holding value.
  bool to_initializer(size_t i, Tensor value);
  // Adds an initializer named after base (unique in the model); returns its name.
  std::string add_initializer(const std::string& base, Tensor value);
  // Replaces node i (an If) by the nodes of `body`, the branch it would take: the body's
  // initializers join this graph's, its outputs take the node's output names (through an
  // Identity where the body outputs an outer value or one value twice), and its values named
  // like one this graph or an enclosing graph defines are renamed. Subgraphs of the body's nodes
  // are carried along; they are rewritten by the passes' next round.
  bool inline_graph(size_t i, Graph body);
  // Removes those of `nodes` (in the order they were found, producers first) whose outputs no
  // node, graph output or subgraph reads any more, readers first.
  void drop_unread(const std::vector<size_t>& nodes);
  // Counts one rewrite of pattern: the fuse() or to_initializer() just done.
  void count(const std::string& pattern) {
    counts_.add(pattern, removed_);
    removed_ = 0;
  }

  // Removes the replaced nodes and the initializers nothing reads any more (graph inputs and
  // outputs stay). The rewriter must not be used afterwards.
  void finish();

 private:
  void index_reads(size_t node, int sign);
  void infer_types() const;
  bool defines(const std::string& v) const { return local_.count(v) != 0; }
  // v is defined in this graph or an enclosing one.
  bool visible(const std::string& v) const;

  Graph& graph_;
  const Rewriter* parent_;
  NameSet& names_;
  Counts& counts_;
  std::vector<char> dead_;
  int removed_ = 0;  // nodes removed since the last count()
  std::vector<size_t> order_;
  std::map<size_t, std::vector<Node>> spliced_;  // inline_graph(): the nodes replacing node i
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> readers_;  // node index per reading input slot
  std::set<std::string> outside_reads_;                 // graph outputs and values subgraphs read
  std::set<std::string> formal_;  // graph inputs (overriding initializers as they may)
  std::set<std::string> local_;   // names this graph defines (shadowing outer ones)
  bool overridable_ = false;      // graph inputs override initializers of their name
  mutable bool typed_ = false;    // types_ are inferred on first use
  mutable std::map<std::string, TypeShape> types_;
};

// ---- helpers for matching and building nodes ----

// n is a live node of the default domain with this op type.
bool is_op(const Node* n, const char* op_type);
// |v - want| within a relative 1e-4 (the exporters write these constants in float32).
bool near(std::optional<double> v, double want);
// A node of op_type in the default domain, named after `like` (the node it replaces, whose
// index it takes for messages), with opset = max(like's opset, min_opset): the target op may be
// newer than the model's import (Gelu is opset 20), and each node carries its own opset.
Node make_node(const std::string& op_type, const Node& like, int64_t min_opset,
               std::vector<std::string> inputs, std::vector<std::string> outputs);
void set_attr(Node& n, const std::string& name, float v);
void set_attr(Node& n, const std::string& name, int64_t v);
void set_attr(Node& n, const std::string& name, const std::string& v);

// v as k * leaves[0] * leaves[1] * ..., read through the Mul nodes, Div by scalar constants and
// Pow(.., 2 or 3) that only this product reads, with every scalar constant gathered into k. v's
// own producer is read through when reader is null or v's sole reader (the node that reads the
// product).
struct Product {
  std::vector<std::string> leaves;
  double k = 1;
  std::vector<size_t> nodes;  // the Mul/Div/Pow nodes read through
  int64_t constant_rank = 0;  // highest rank among the constants gathered into k
};
Product product_of(const Rewriter& r, const std::string& v, const Node* reader = nullptr);

// An element-wise rewrite of x is exact when the matched constants cannot change the shape:
// they are all rank 0, or out has x's (known) rank.
bool keeps_shape(const Rewriter& r, const std::string& x, const std::string& out,
                 int64_t constant_rank);

// The passes, in the order the pipeline runs them (core/optimize/optimize.cpp).
void constants_to_initializers(Rewriter& r);  // constants.cpp
void inline_constant_ifs(Rewriter& r);        // control_flow.cpp
void fuse_qdq(Rewriter& r);                   // qdq.cpp
void matmul_add_to_gemm(Rewriter& r);         // gemm.cpp
void fold_batch_norms(Rewriter& r);           // batchnorm.cpp
void fuse_activations(Rewriter& r);           // activations.cpp
void fuse_normalizations(Rewriter& r);        // normalization.cpp
void fold_channel_affines(Rewriter& r);       // batchnorm.cpp

}  // namespace quilt::optimize
