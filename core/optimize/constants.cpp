// Constant nodes become initializers, first in the pipeline: paddle2onnx and older tf2onnx write
// every weight as a Constant node, and the later passes then see the same constants as when the
// exporter wrote initializers.
#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// The tensor a Constant node holds, for the attribute forms Quilt can hold (value, value_float,
// value_floats, value_int, value_ints); nullopt for strings and sparse tensors.
std::optional<Tensor> constant_value(const Node& n) {
  if (n.attributes.size() != 1) return std::nullopt;
  const Attribute& a = n.attributes.begin()->second;
  if (a.name == "value" && a.kind == Attribute::Kind::Tensor && a.t.defined()) return a.t;
  if (a.name == "value_float" && a.kind == Attribute::Kind::Float)
    return Tensor::from_vector<float>({}, {a.f});
  if (a.name == "value_int" && a.kind == Attribute::Kind::Int)
    return Tensor::from_vector<int64_t>({}, {a.i});
  if (a.name == "value_floats" && a.kind == Attribute::Kind::Floats)
    return Tensor::from_vector<float>({static_cast<int64_t>(a.floats.size())}, a.floats);
  if (a.name == "value_ints" && a.kind == Attribute::Kind::Ints)
    return Tensor::from_vector<int64_t>({static_cast<int64_t>(a.ints.size())}, a.ints);
  return std::nullopt;
}

}  // namespace

void constants_to_initializers(Rewriter& r) {
  for (size_t i : r.order()) {
    const Node& n = r.node(i);
    if (!is_op(&n, "Constant")) continue;
    if (std::optional<Tensor> value = constant_value(n); value && r.to_initializer(i, *value))
      r.count("constant nodes");
  }
}

}  // namespace quilt::optimize
