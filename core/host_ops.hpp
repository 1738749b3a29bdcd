// Ops the core runs itself, on the host, because their values do not cross the backend ABI.
//
// The ABI (include/quilt/backend.h) carries dense tensors of fixed-size elements. A string
// tensor's elements are std::string objects (quilt::Tensor of DType::String), which no
// backend can read: every node with a string input or output is a host step, like control
// flow, run by a kernel registered here (core/ops/strings.cpp). The plan names the reason
// (PlanReport::Node::reason) for each such node.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/graph.hpp"
#include "core/op_schema.hpp"

namespace quilt {

// Computes a node's outputs (one per node output; undefined for an output not wanted) from its
// inputs (undefined for an absent optional input). Throws Error naming the node on bad values.
using HostKernel = std::function<std::vector<Tensor>(const Node&, const std::vector<Tensor>&)>;
// The same on values of any kind (sequences, maps, optionals: core/ops/sequence.cpp).
using ValueKernel = std::function<std::vector<Value>(const Node&, const std::vector<Value>&)>;

// Why the core runs this node rather than a backend (its creation-time input and output types
// hold a string tensor, a sequence, a map or an optional), or "" when it goes to a backend.
std::string host_reason(const std::vector<TypeShape>& inputs,
                        const std::vector<TypeShape>& outputs);

// Makes one node's kernel. The ops whose attributes make a table (LabelEncoder's and
// CategoryMapper's lookups, OneHotEncoder's categories, Tokenizer's pattern, StringNormalizer's
// stopwords, ZipMap's labels) build it here, once per node, instead of on every run; the node
// must outlive the kernel. Throws Error naming the node on bad attributes.
using HostPrepare = ValueKernel (*)(const Node&);
using OpKey = std::pair<std::string, std::string>;  // (domain, op type)

// Throws Error(NotImplemented) naming the node when the core has no kernel for its op on
// these types.
void require_host_kernel(const Node& node);
// The kernel for a node that host_reason() keeps in the core, made for this node. Throws like
// require_host_kernel; a node whose attributes are bad gets a kernel that throws their error
// when it runs, as the op's other checks do.
ValueKernel make_host_kernel(const Node& node);
// True if the core has a host kernel for this op (on string tensors or other kinds of value),
// for `quilt ops`.
bool has_host_kernel(const std::string& domain, const std::string& op_type);
// The host ops on sequences, maps and optionals (core/ops/sequence.cpp).
const std::map<OpKey, HostPrepare>& value_ops();
// A tensor, or an error naming the node and what the value is instead.
const Tensor& tensor_input(const Node& node, const Value& v, size_t i);

}  // namespace quilt

namespace quilt {

// Classifiers with string class labels (TreeEnsembleClassifier, LinearClassifier, SVMClassifier
// with classlabels_strings) become the same classifier on the labels' indices
// (classlabels_int64s 0..n-1, run by a backend like any numeric classifier) followed by a
// LabelEncoder from index to label (a host step). Run on a model's graph before validation;
// a node that also has integer labels is left for validation to refuse. Returns how many.
int lower_string_class_labels(Graph& graph);

// TfIdfVectorizer on strings (pool_strings, as skl2onnx converts a TfidfVectorizer) becomes a
// LabelEncoder from each word to its id in the pool (-1 for a word outside it; a host step)
// followed by the same TfIdfVectorizer on those ids (pool_int64s, run by a backend). Run on a
// model's graph before validation. Returns how many.
int lower_string_tfidf(Graph& graph);

}  // namespace quilt
