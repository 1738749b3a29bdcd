#include "backends/cpu/fusion.hpp"

#include <algorithm>
#include <optional>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {
namespace {

using Kind = Activation::Kind;

// A scalar float32 constant, if v is one.
std::optional<float> scalar_constant(const std::vector<Tensor>& constants, int32_t v) {
  if (v < 0 || !constants[v].defined()) return std::nullopt;
  const Tensor& t = constants[v];
  if (t.dtype() != DType::Float32 || t.numel() != 1) return std::nullopt;
  return t.data<float>()[0];
}

// The activation a node computes on its input 0, if it is one this pass folds.
std::optional<Activation> activation_of(const PatchNode& n, const std::vector<Tensor>& constants) {
  const Node& node = n.node;
  if (!node.domain.empty() || n.inputs.empty() || n.outputs.empty()) return std::nullopt;
  const std::string& op = node.op_type;
  if (op == "Relu") return Activation{Kind::Relu};
  if (op == "Sigmoid") return Activation{Kind::Sigmoid};
  if (op == "Tanh") return Activation{Kind::Tanh};
  if (op == "HardSwish") return Activation{Kind::HardSwish};
  // x * sigmoid(x), which the core's rewrites make of the Sigmoid + Mul exporters write.
  if (op == "Swish" && node.attr_float("alpha", 1.f) == 1.f) return Activation{Kind::Silu};
  if (op == "LeakyRelu") return Activation{Kind::LeakyRelu, node.attr_float("alpha", 0.01f)};
  if (op == "HardSigmoid")
    return Activation{Kind::HardSigmoid, node.attr_float("alpha", 0.2f),
                      node.attr_float("beta", 0.5f)};
  if (op == "Gelu")
    return Activation{node.attr_string("approximate", "none") == "tanh" ? Kind::GeluTanh
                                                                        : Kind::Gelu};
  if (op == "Clip") {
    if (node.opset < 11)
      return Activation{Kind::Clip, node.attr_float("min", -3.402823466e38f),
                        node.attr_float("max", 3.402823466e38f)};
    float lo = -3.402823466e38f, hi = 3.402823466e38f;
    for (size_t i = 1; i < 3; ++i) {
      if (i >= n.inputs.size() || n.inputs[i] < 0) continue;
      std::optional<float> c = scalar_constant(constants, n.inputs[i]);
      if (!c) return std::nullopt;  // bounds known only at run time
      (i == 1 ? lo : hi) = *c;
    }
    return Activation{Kind::Clip, lo, hi};
  }
  return std::nullopt;
}

// The node's other input when one of its two inputs is v ({-1} when not).
int32_t other_input(const PatchNode& n, int32_t v) {
  if (n.inputs.size() != 2) return -1;
  if (n.inputs[0] == v) return n.inputs[1];
  if (n.inputs[1] == v) return n.inputs[0];
  return -1;
}

bool is_op(const PatchNode& n, const char* op) {
  return n.node.op_type == op && n.node.domain.empty() && !n.outputs.empty();
}

// r when add is Add(out, r) or Add(r, out) with r another value (not out itself), else -1.
int32_t added_to(const PatchNode& add, int32_t out) {
  if (!is_op(add, "Add") || add.outputs[0] < 0) return -1;
  const int32_t r = other_input(add, out);
  return r == out ? -1 : r;
}

// Add(out, c) or Add(c, out) with c a constant float32 row of out's last dim ([N], [1, N], ...),
// so the sum has out's shape.
bool is_row_bias_add(const PatchNode& add, int32_t out, const std::vector<TypeShape>& types,
                     const std::vector<Tensor>& constants) {
  const int32_t c = added_to(add, out);
  if (c < 0 || !constants[c].defined()) return false;
  const Tensor& t = constants[c];
  const TypeShape& ot = types[out];
  if (t.dtype() != DType::Float32 || !ot.has_shape || ot.dims.empty() || ot.dims.back() < 0 ||
      t.numel() != ot.dims.back() || t.rank() > static_cast<int64_t>(ot.dims.size()))
    return false;
  for (int64_t i = 0; i + 1 < t.rank(); ++i)
    if (t.dim(i) != 1) return false;
  return types[add.outputs[0]].dtype == DType::Float32;
}

// Add(out, r) or Add(r, out) with r another float32 value whose shape equals out's (and the
// sum's), dim for dim: the sum needs no broadcast, and r is read once, element for element.
// Unknown dims (-1) compare equal here; whether they are is known on a run (residual_at_run).
bool is_residual_add(const PatchNode& add, int32_t out, const std::vector<TypeShape>& types) {
  const int32_t r = added_to(add, out);
  if (r < 0) return false;
  const TypeShape &ot = types[out], &rt = types[r], &st = types[add.outputs[0]];
  return ot.dtype == DType::Float32 && rt.dtype == DType::Float32 && st.dtype == DType::Float32 &&
         ot.has_shape && rt.has_shape && st.has_shape && ot.dims == rt.dims && st.dims == ot.dims;
}

}  // namespace

int fuse_activations(std::vector<PatchNode>& nodes, const std::vector<TypeShape>& types,
                     const std::vector<Tensor>& constants, const std::vector<char>& kept,
                     const KernelRegistry& registry) {
  std::vector<char> removed(nodes.size(), 0);
  int folded = 0;
  std::vector<std::vector<size_t>> consumers(types.size());
  for (size_t k = 0; k < nodes.size(); ++k)
    for (int32_t v : nodes[k].inputs)
      if (v >= 0 && !removed[k]) consumers[v].push_back(k);
  std::vector<size_t> order(nodes.size());  // where each node runs: its index, or a folded Add's
  for (size_t k = 0; k < nodes.size(); ++k) order[k] = k;
  auto only_consumer = [&](int32_t v) -> std::optional<size_t> {
    if (v < 0 || kept[v] || consumers[v].size() != 1) return std::nullopt;
    return consumers[v][0];
  };
  for (size_t p = 0; p < nodes.size(); ++p) {
    PatchNode& producer = nodes[p];
    if (removed[p] || producer.outputs.empty() || !producer.activation.none()) continue;
    const KernelEntry* entry = registry.find(producer.node.op_type, producer.node.domain);
    if (!entry || !entry->fuses_activation) continue;
    int32_t out = producer.outputs[0];
    if (out < 0 || types[out].dtype != DType::Float32) continue;
    // An Add that is out's only reader becomes an extra input of P at `slot` (`which` records
    // it) when `fits` accepts it; P then produces the Add's output.
    auto absorb_add = [&](int slot, int32_t& which, auto fits) {
      if (slot < 0 || which >= 0 || producer.inputs.size() > static_cast<size_t>(slot)) return;
      std::optional<size_t> a = only_consumer(out);
      if (!a || removed[*a] || !fits(nodes[*a])) return;
      const PatchNode& add = nodes[*a];
      const size_t other = add.inputs[0] == out ? 1 : 0;
      producer.inputs.resize(static_cast<size_t>(slot), -1);  // absent optional inputs stay so
      producer.node.inputs.resize(static_cast<size_t>(slot));
      which = slot;
      producer.inputs.push_back(add.inputs[other]);
      producer.node.inputs.push_back(add.node.inputs[other]);
      producer.outputs[0] = add.outputs[0];
      producer.node.outputs[0] = add.node.outputs[0];
      producer.folded.push_back(add.graph_index);
      removed[*a] = 1;
      ++folded;
      out = producer.outputs[0];
      // P may now read a value computed after it (ResNet's shortcut through the downsample
      // conv): P runs where the Add ran, where every input of the Add is ready; P's output
      // only fed the Add.
      order[p] = order[*a];
    };
    // A constant row bias added to the product (MatMul -> Add).
    absorb_add(entry->bias_slot, producer.bias_input,
               [&](const PatchNode& add) { return is_row_bias_add(add, out, types, constants); });
    // A residual Add: Add(out, r) or Add(r, out) with r another float32 value of out's shape.
    const int32_t product = out;
    absorb_add(entry->residual_slot, producer.residual_input,
               [&](const PatchNode& add) { return is_residual_add(add, out, types); });
    if (producer.residual_input >= 0 && !types[product].is_static())
      producer.residual_at_run = product;
    std::optional<size_t> a = only_consumer(out);
    if (!a || removed[*a] || nodes[*a].inputs[0] != out) continue;
    std::optional<Activation> act = activation_of(nodes[*a], constants);
    if (!act || nodes[*a].outputs[0] < 0 || types[nodes[*a].outputs[0]].dtype != DType::Float32)
      continue;
    producer.activation = *act;
    producer.outputs[0] = nodes[*a].outputs[0];
    producer.node.outputs[0] = nodes[*a].node.outputs[0];
    producer.folded.push_back(nodes[*a].graph_index);
    removed[*a] = 1;
    ++folded;
  }
  std::vector<size_t> kept_nodes;
  for (size_t k = 0; k < nodes.size(); ++k)
    if (!removed[k]) kept_nodes.push_back(k);
  std::stable_sort(kept_nodes.begin(), kept_nodes.end(),
                   [&](size_t a, size_t b) { return order[a] < order[b]; });
  std::vector<PatchNode> out;
  out.reserve(kept_nodes.size());
  for (size_t k : kept_nodes) out.push_back(std::move(nodes[k]));
  nodes = std::move(out);
  return folded;
}

}  // namespace quilt::cpu
