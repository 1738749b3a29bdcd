#include "backends/cpu/fusion.hpp"

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

// Add(out, c) or Add(c, out) with c a constant float32 row of out's last dim ([N], [1, N], ...),
// so the sum has out's shape.
bool is_row_bias_add(const PatchNode& add, int32_t out, const std::vector<TypeShape>& types,
                     const std::vector<Tensor>& constants) {
  if (add.node.op_type != "Add" || !add.node.domain.empty() || add.inputs.size() != 2 ||
      add.outputs.empty() || add.outputs[0] < 0)
    return false;
  if (add.inputs[0] != out && add.inputs[1] != out) return false;
  const int32_t c = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  if (c < 0 || c == out || !constants[c].defined()) return false;
  const Tensor& t = constants[c];
  const TypeShape& ot = types[out];
  if (t.dtype() != DType::Float32 || !ot.has_shape || ot.dims.empty() || ot.dims.back() < 0 ||
      t.numel() != ot.dims.back() || t.rank() > static_cast<int64_t>(ot.dims.size()))
    return false;
  for (int64_t i = 0; i + 1 < t.rank(); ++i)
    if (t.dim(i) != 1) return false;
  return types[add.outputs[0]].dtype == DType::Float32;
}

}  // namespace

int fuse_activations(std::vector<PatchNode>& nodes, const std::vector<TypeShape>& types,
                     const std::vector<Tensor>& constants, const std::vector<char>& kept,
                     const KernelRegistry& registry) {
  std::vector<std::vector<size_t>> consumers(types.size());
  for (size_t k = 0; k < nodes.size(); ++k)
    for (int32_t v : nodes[k].inputs)
      if (v >= 0) consumers[v].push_back(k);
  auto only_consumer = [&](int32_t v) -> std::optional<size_t> {
    if (v < 0 || kept[v] || consumers[v].size() != 1) return std::nullopt;
    return consumers[v][0];
  };
  std::vector<char> removed(nodes.size(), 0);
  int folded = 0;
  for (size_t p = 0; p < nodes.size(); ++p) {
    PatchNode& producer = nodes[p];
    if (removed[p] || producer.outputs.empty() || !producer.activation.none()) continue;
    const KernelEntry* entry = registry.find(producer.node.op_type, producer.node.domain);
    if (!entry || !entry->fuses_activation) continue;
    int32_t out = producer.outputs[0];
    if (out < 0 || types[out].dtype != DType::Float32) continue;
    // A constant row bias added to the product (MatMul -> Add).
    if (entry->bias_slot >= 0 && producer.bias_input < 0 &&
        producer.inputs.size() <= static_cast<size_t>(entry->bias_slot)) {
      std::optional<size_t> a = only_consumer(out);
      if (a && !removed[*a] && is_row_bias_add(nodes[*a], out, types, constants)) {
        const PatchNode& add = nodes[*a];
        const size_t other = add.inputs[0] == out ? 1 : 0;
        const auto slot = static_cast<size_t>(entry->bias_slot);
        producer.inputs.resize(slot, -1);  // optional inputs the node leaves out stay absent
        producer.node.inputs.resize(slot);
        producer.bias_input = entry->bias_slot;
        producer.inputs.push_back(add.inputs[other]);
        producer.node.inputs.push_back(add.node.inputs[other]);
        producer.outputs[0] = add.outputs[0];
        producer.node.outputs[0] = add.node.outputs[0];
        producer.folded.push_back(add.graph_index);
        removed[*a] = 1;
        ++folded;
        out = producer.outputs[0];
      }
    }
    // The SiLU pair: P's output read by exactly a Sigmoid and a Mul of (P, Sigmoid).
    if (!kept[out] && consumers[out].size() == 2) {
      size_t s = consumers[out][0], m = consumers[out][1];
      if (nodes[s].node.op_type == "Mul") std::swap(s, m);
      const PatchNode& sig = nodes[s];
      const PatchNode& mul = nodes[m];
      if (sig.node.op_type == "Sigmoid" && sig.node.domain.empty() && mul.node.op_type == "Mul" &&
          mul.node.domain.empty() && mul.inputs.size() == 2 && !sig.outputs.empty() &&
          only_consumer(sig.outputs[0]) == m &&
          ((mul.inputs[0] == out && mul.inputs[1] == sig.outputs[0]) ||
           (mul.inputs[1] == out && mul.inputs[0] == sig.outputs[0])) &&
          types[mul.outputs[0]].dtype == DType::Float32) {
        producer.activation = Activation{Kind::Silu};
        producer.outputs[0] = mul.outputs[0];
        producer.node.outputs[0] = mul.node.outputs[0];
        producer.folded.insert(producer.folded.end(), {sig.graph_index, mul.graph_index});
        removed[s] = removed[m] = 1;
        folded += 2;
        continue;
      }
    }
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
  std::vector<PatchNode> out;
  out.reserve(nodes.size() - static_cast<size_t>(folded));
  for (size_t k = 0; k < nodes.size(); ++k)
    if (!removed[k]) out.push_back(std::move(nodes[k]));
  nodes = std::move(out);
  return folded;
}

}  // namespace quilt::cpu
