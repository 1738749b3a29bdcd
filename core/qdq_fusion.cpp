#include "core/qdq_fusion.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace quilt {
namespace {

constexpr const char* kMs = "com.microsoft";

bool is_int8(DType d) {
  return d == DType::Int8 || d == DType::UInt8;
}

bool is_op(const Node& n, const char* op) {
  return n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx");
}

bool is_qdq(const Node& n, const char* op) {
  return n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx" || n.domain == kMs);
}

class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g) {
    for (const auto& o : g.outputs) graph_outputs_.insert(o.name);
    index();
  }

  int run() {
    int fused = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_.count(i)) continue;
      const Node& n = g_.nodes[i];
      if (!n.domain.empty() && n.domain != "ai.onnx") continue;
      bool done = false;
      if (n.op_type == "Conv")
        done = conv(i);
      else if (n.op_type == "MatMul")
        done = matmul(i);
      else if (n.op_type == "Gemm")
        done = gemm(i);
      else if (n.op_type == "Add" || n.op_type == "Mul")
        done = binary(i);
      else if (n.op_type == "GlobalAveragePool" || n.op_type == "Sigmoid" ||
               n.op_type == "LeakyRelu")
        done = unary(i);
      else if (n.op_type == "MaxPool")
        done = max_pool(i);
      else if (n.op_type == "MatMulInteger")
        done = dynamic_matmul(i);
      if (done) ++fused;
    }
    if (!fused) return 0;
    // Dequantize nodes (and anything else of ours) left without readers go.
    bool removed = true;
    while (removed) {
      removed = false;
      index();
      for (size_t i = 0; i < g_.nodes.size(); ++i) {
        const Node& n = g_.nodes[i];
        if (dead_.count(i) || !(is_qdq(n, "DequantizeLinear") || created_.count(n.outputs[0])))
          continue;
        if (std::all_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) {
              return o.empty() || (!readers_.count(o) && !graph_outputs_.count(o));
            })) {
          dead_.insert(i);
          removed = true;
        }
      }
    }
    std::vector<Node> kept;
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_.count(i)) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    for (const auto& n : g_.nodes)
      if (n.domain == kMs && !g_.opsets.count(kMs)) g_.opsets[kMs] = 1;
    return fused;
  }

 private:
  // A DequantizeLinear producing `value`: its integer input, scale and zero point ("" if none).
  struct Dq {
    size_t node;
    std::string q, scale, zp;
    int64_t axis;
  };

  void index() {
    producer_.clear();
    readers_.clear();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_.count(i)) continue;
      for (const auto& o : g_.nodes[i].outputs)
        if (!o.empty()) producer_[o] = i;
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) readers_[in].push_back(i);
      for (const auto& in : g_.nodes[i].implicit_inputs) readers_[in].push_back(i);
    }
  }

  const Tensor* constant(const std::string& name) const {
    auto it = g_.initializers.find(name);
    if (it == g_.initializers.end() || producer_.count(name)) return nullptr;
    // A graph input of that name overrides it (IR < 4 lists initializers as inputs too, but an
    // overridable one is not a constant).
    for (const auto& in : g_.inputs)
      if (in.name == name) return nullptr;
    return &it->second;
  }

  // The element type of a value: an initializer's, a QuantizeLinear's zero point's, or that of
  // a node fused here.
  std::optional<DType> int_type(const std::string& value) const {
    if (const Tensor* t = constant(value)) return t->dtype();
    if (auto f = fused_types_.find(value); f != fused_types_.end()) return f->second;
    auto p = producer_.find(value);
    if (p == producer_.end()) return std::nullopt;
    const Node& q = g_.nodes[p->second];
    if (is_qdq(q, "QuantizeLinear") && q.has_input(2))
      if (const Tensor* z = constant(q.inputs[2])) return z->dtype();
    if (is_op(q, "DynamicQuantizeLinear")) return DType::UInt8;
    return std::nullopt;
  }

  std::optional<Dq> dq_of(const std::string& value) const {
    auto p = producer_.find(value);
    if (p == producer_.end()) return std::nullopt;
    const Node& n = g_.nodes[p->second];
    if (!is_qdq(n, "DequantizeLinear") || !n.has_input(1)) return std::nullopt;
    if (n.attr_int("block_size", 0) != 0) return std::nullopt;
    if (n.opset >= 23 && n.attr_int("output_dtype", 0) != 0) return std::nullopt;
    const Tensor* s = constant(n.inputs[1]);
    if (!s || s->dtype() != DType::Float32) return std::nullopt;
    std::string zp = n.has_input(2) ? n.inputs[2] : "";
    if (!zp.empty()) {
      const Tensor* z = constant(zp);
      if (!z || z->numel() != s->numel()) return std::nullopt;
    }
    return Dq{p->second, n.inputs[0], n.inputs[1], zp, n.attr_int("axis", 1)};
  }

  // Per-tensor int8/uint8 activation: one scale, a zero point of the data's type (required,
  // as the QLinear ops' zero points are).
  bool per_tensor(const Dq& d) const {
    const auto t = int_type(d.q);
    if (!t || !is_int8(*t) || d.zp.empty()) return false;
    const Tensor* z = constant(d.zp);
    return constant(d.scale)->numel() == 1 && z->dtype() == *t;
  }

  // Constant int8/uint8 weights, per tensor or per `axis` (count values).
  bool weights(const Dq& d, int64_t axis, int64_t count) const {
    const Tensor* w = constant(d.q);
    if (!w || !is_int8(w->dtype())) return false;
    const int64_t n = constant(d.scale)->numel();
    if (d.zp.empty() ? false : constant(d.zp)->dtype() != w->dtype()) return false;
    if (n == 1) return true;
    const int64_t ax = d.axis < 0 ? d.axis + w->rank() : d.axis;
    return ax == axis && n == count && constant(d.scale)->rank() == 1;
  }

  // The only reader of `value` when it is a per-tensor int8/uint8 QuantizeLinear (and `value`
  // is no graph output).
  std::optional<size_t> q_after(const std::string& value) const {
    if (graph_outputs_.count(value)) return std::nullopt;
    auto r = readers_.find(value);
    if (r == readers_.end() || r->second.size() != 1) return std::nullopt;
    const Node& q = g_.nodes[r->second[0]];
    if (!is_qdq(q, "QuantizeLinear") || !q.has_input(2) || q.inputs[0] != value)
      return std::nullopt;
    const Tensor* s = constant(q.inputs[1]);
    const Tensor* z = constant(q.inputs[2]);
    if (!s || !z || s->numel() != 1 || z->numel() != 1 || s->dtype() != DType::Float32 ||
        !is_int8(z->dtype()))
      return std::nullopt;
    if (q.attr_int("block_size", 0) != 0 || (q.opset >= 23 && q.attr_int("precision", 0) != 0))
      return std::nullopt;
    return r->second[0];
  }

  // The float value is read by `node` alone (its DequantizeLinear may stay for other readers).
  bool only_reader(const std::string& value, size_t node) const {
    auto r = readers_.find(value);
    return !graph_outputs_.count(value) && r != readers_.end() &&
           std::all_of(r->second.begin(), r->second.end(), [&](size_t i) { return i == node; });
  }

  // A zero point for weights whose DequantizeLinear has none: a new scalar 0 of their type.
  std::string zero_point_for(const Dq& d) {
    if (!d.zp.empty()) return d.zp;
    const DType t = constant(d.q)->dtype();
    const std::string name = d.q + "_zero_point_qdq";
    if (!g_.initializers.count(name)) {
      const uint8_t zero = 0;
      g_.initializers[name] = Tensor::from_data(t, {}, &zero);
    }
    return name;
  }

  // An int32 bias dequantized with scale a_scale * w_scale[j] and zero point 0: its integers.
  std::optional<std::string> bias_of(const std::string& value, const Dq& a, const Dq& w,
                                     int64_t count) const {
    const auto d = dq_of(value);
    if (!d) return std::nullopt;
    const Tensor* b = constant(d->q);
    if (!b || b->dtype() != DType::Int32 || b->numel() != count) return std::nullopt;
    if (!d->zp.empty()) {
      const Tensor* z = constant(d->zp);
      for (int64_t i = 0; i < z->numel(); ++i)
        if (z->data<int32_t>()[i] != 0) return std::nullopt;
    }
    const Tensor* bs = constant(d->scale);
    const float as = constant(a.scale)->data<float>()[0];
    const Tensor* ws = constant(w.scale);
    for (int64_t j = 0; j < count; ++j) {
      const float want = as * ws->data<float>()[ws->numel() == 1 ? 0 : j];
      const float got = bs->data<float>()[bs->numel() == 1 ? 0 : j];
      if (std::fabs(got - want) > 1e-6f * std::fabs(want)) return std::nullopt;
    }
    return d->q;
  }

  // Replaces node `op` and its QuantizeLinear `q` by one node.
  void replace(size_t op, size_t q, const std::string& op_type, const std::string& domain,
               std::vector<std::string> inputs, std::map<std::string, Attribute> attrs) {
    Node n;
    n.name = g_.nodes[op].name;
    n.op_type = op_type;
    n.domain = domain;
    n.opset = domain.empty() ? g_.opsets[""] : 1;
    n.inputs = std::move(inputs);
    n.outputs = {g_.nodes[q].outputs[0]};
    n.attributes = std::move(attrs);
    n.index = g_.nodes[op].index;
    fused_types_[n.outputs[0]] = constant(g_.nodes[q].inputs[2])->dtype();
    dead_.insert(q);
    g_.nodes[op] = std::move(n);
    index();
  }

  static std::map<std::string, Attribute> keep(const Node& n,
                                               std::initializer_list<const char*> names) {
    std::map<std::string, Attribute> out;
    for (const char* a : names)
      if (auto it = n.attributes.find(a); it != n.attributes.end()) out[a] = it->second;
    return out;
  }

  bool conv(size_t i) {
    const Node& n = g_.nodes[i];
    const auto x = dq_of(n.inputs[0]);
    const auto w = n.inputs.size() > 1 ? dq_of(n.inputs[1]) : std::nullopt;
    const auto q = q_after(n.outputs[0]);
    if (!x || !w || !q || !per_tensor(*x)) return false;
    const Tensor* wt = constant(w->q);
    if (!wt || wt->rank() < 3 || !weights(*w, 0, wt->dim(0))) return false;
    if (!only_reader(n.inputs[1], i)) return false;
    std::optional<std::string> bias;
    if (n.has_input(2)) {
      bias = bias_of(n.inputs[2], *x, *w, wt->dim(0));
      if (!bias) return false;
    }
    const Node& qn = g_.nodes[*q];
    std::vector<std::string> in = {x->q,     x->scale,           x->zp,        w->q,
                                   w->scale, zero_point_for(*w), qn.inputs[1], qn.inputs[2]};
    if (bias) in.push_back(*bias);
    replace(i, *q, "QLinearConv", "", in,
            keep(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}));
    return true;
  }

  // Inputs 0 and 1 of node i dequantized, its output quantized (per tensor), input 0 per tensor.
  struct Pair {
    Dq a, b;
    size_t q;
  };
  std::optional<Pair> pair(size_t i) const {
    const Node& n = g_.nodes[i];
    if (n.inputs.size() < 2) return std::nullopt;
    const auto a = dq_of(n.inputs[0]);
    const auto b = dq_of(n.inputs[1]);
    const auto q = q_after(n.outputs[0]);
    if (!a || !b || !q || !per_tensor(*a)) return std::nullopt;
    return Pair{*a, *b, *q};
  }

  bool matmul(size_t i) {
    const auto p = pair(i);
    if (!p) return false;
    const Dq *a = &p->a, *b = &p->b;
    const size_t* q = &p->q;
    const Tensor* bt = constant(b->q);
    // Per-tensor or per-column (axis 1) constant 2-D weights, or a per-tensor activation.
    const bool ok_b = bt ? bt->rank() == 2 && weights(*b, 1, bt->dim(1)) : per_tensor(*b);
    if (!ok_b) return false;
    const Node& qn = g_.nodes[*q];
    const std::string bz = bt ? zero_point_for(*b) : b->zp;
    replace(i, *q, "QLinearMatMul", "",
            {a->q, a->scale, a->zp, b->q, b->scale, bz, qn.inputs[1], qn.inputs[2]}, {});
    return true;
  }

  bool gemm(size_t i) {
    const Node& n = g_.nodes[i];
    if (n.attr_int("transA", 0) != 0 || n.attr_float("beta", 1.f) != 1.f ||
        n.attr_float("alpha", 1.f) != 1.f)
      return false;
    const auto p = pair(i);
    if (!p) return false;
    const Dq *a = &p->a, *b = &p->b;
    const size_t* q = &p->q;
    const Tensor* bt = constant(b->q);
    const bool trans_b = n.attr_int("transB", 0) != 0;
    if (!bt || bt->rank() != 2) return false;
    const int64_t cols = trans_b ? bt->dim(0) : bt->dim(1);
    if (!weights(*b, trans_b ? 0 : 1, cols) || !only_reader(n.inputs[1], i)) return false;
    std::optional<std::string> bias;
    if (n.has_input(2)) {
      bias = bias_of(n.inputs[2], *a, *b, cols);
      if (!bias) return false;
    }
    const Node& qn = g_.nodes[*q];
    replace(i, *q, "QGemm", kMs,
            {a->q, a->scale, a->zp, b->q, b->scale, zero_point_for(*b), bias ? *bias : "",
             qn.inputs[1], qn.inputs[2]},
            keep(n, {"transB"}));
    return true;
  }

  bool binary(size_t i) {
    const Node& n = g_.nodes[i];
    const auto p = pair(i);
    if (!p || !per_tensor(p->b)) return false;
    const Dq *a = &p->a, *b = &p->b;
    const size_t* q = &p->q;
    const Node& qn = g_.nodes[*q];
    const DType t = *int_type(a->q);
    if (*int_type(b->q) != t || constant(qn.inputs[2])->dtype() != t) return false;
    replace(i, *q, n.op_type == "Add" ? "QLinearAdd" : "QLinearMul", kMs,
            {a->q, a->scale, a->zp, b->q, b->scale, b->zp, qn.inputs[1], qn.inputs[2]}, {});
    return true;
  }

  bool unary(size_t i) {
    const Node& n = g_.nodes[i];
    const auto x = dq_of(n.inputs[0]);
    const auto q = q_after(n.outputs[0]);
    if (!x || !q || !per_tensor(*x)) return false;
    const Node& qn = g_.nodes[*q];
    if (constant(qn.inputs[2])->dtype() != *int_type(x->q)) return false;
    std::map<std::string, Attribute> attrs;
    if (n.op_type == "LeakyRelu") attrs = keep(n, {"alpha"});
    replace(i, *q, "QLinear" + n.op_type, kMs, {x->q, x->scale, x->zp, qn.inputs[1], qn.inputs[2]},
            attrs);
    return true;
  }

  // DQ -> MaxPool -> Q with the same scale and zero point: the max of the integers is the
  // integer of the max.
  bool max_pool(size_t i) {
    const Node& n = g_.nodes[i];
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) return false;
    const auto x = dq_of(n.inputs[0]);
    const auto q = q_after(n.outputs[0]);
    if (!x || !q || !per_tensor(*x)) return false;
    const Node& qn = g_.nodes[*q];
    const Tensor* xs = constant(x->scale);
    const Tensor* xz = constant(x->zp);
    const Tensor* ys = constant(qn.inputs[1]);
    const Tensor* yz = constant(qn.inputs[2]);
    if (xs->data<float>()[0] != ys->data<float>()[0] || xz->dtype() != yz->dtype() ||
        std::memcmp(xz->raw_data(), yz->raw_data(), 1) != 0)
      return false;
    std::vector<std::string> in = n.inputs;
    in[0] = x->q;
    replace(i, *q, "MaxPool", "", in, n.attributes);
    return true;
  }

  // DynamicQuantizeLinear(a) -> MatMulInteger(a_q, B, a_zp, b_zp) -> Cast(float) ->
  // Mul(by Mul(a_scale, b_scale)) => DynamicQuantizeMatMul(a, B, b_scale, b_zp).
  bool dynamic_matmul(size_t i) {
    const Node& mm = g_.nodes[i];
    auto p = producer_.find(mm.inputs[0]);
    if (p == producer_.end() || !mm.has_input(2)) return false;
    const Node& dql = g_.nodes[p->second];
    if (!is_op(dql, "DynamicQuantizeLinear") || dql.outputs.size() < 3 ||
        mm.inputs[2] != dql.outputs[2])
      return false;
    const Tensor* b = constant(mm.inputs[1]);
    if (!b || b->rank() != 2 || !is_int8(b->dtype())) return false;
    if (mm.has_input(3)) {
      const Tensor* bz = constant(mm.inputs[3]);
      if (!bz || bz->rank() > 1) return false;
    }
    // Cast, the only reader of the int32 product.
    auto r = readers_.find(mm.outputs[0]);
    if (graph_outputs_.count(mm.outputs[0]) || r == readers_.end() || r->second.size() != 1)
      return false;
    const size_t cast = r->second[0];
    const Node& cn = g_.nodes[cast];
    if (!is_op(cn, "Cast") || cn.attr_int("to", 0) != static_cast<int64_t>(DType::Float32))
      return false;
    // Mul(cast, scale) where scale = Mul(a_scale, b_scale) with b_scale constant.
    auto rc = readers_.find(cn.outputs[0]);
    if (graph_outputs_.count(cn.outputs[0]) || rc == readers_.end() || rc->second.size() != 1)
      return false;
    const size_t mul = rc->second[0];
    const Node& mn = g_.nodes[mul];
    if (!is_op(mn, "Mul")) return false;
    const std::string& scale = mn.inputs[0] == cn.outputs[0] ? mn.inputs[1] : mn.inputs[0];
    auto ps = producer_.find(scale);
    if (ps == producer_.end()) return false;
    const Node& sn = g_.nodes[ps->second];
    if (!is_op(sn, "Mul")) return false;
    std::string b_scale;
    if (sn.inputs[0] == dql.outputs[1]) b_scale = sn.inputs[1];
    if (sn.inputs[1] == dql.outputs[1]) b_scale = sn.inputs[0];
    const Tensor* bs = b_scale.empty() ? nullptr : constant(b_scale);
    if (!bs || bs->dtype() != DType::Float32 || bs->rank() > 1 ||
        (bs->numel() != 1 && bs->numel() != b->dim(1)))
      return false;
    Node n;
    n.name = mm.name;
    n.op_type = "DynamicQuantizeMatMul";
    n.domain = kMs;
    n.opset = 1;
    n.inputs = {dql.inputs[0], mm.inputs[1], b_scale, mm.has_input(3) ? mm.inputs[3] : ""};
    n.outputs = {mn.outputs[0]};
    n.index = mm.index;
    dead_.insert(cast);
    dead_.insert(mul);
    // A following Add of a constant row of N floats (the layer's bias) becomes the op's bias.
    auto ra = readers_.find(mn.outputs[0]);
    if (!graph_outputs_.count(mn.outputs[0]) && ra != readers_.end() && ra->second.size() == 1) {
      const Node& an = g_.nodes[ra->second[0]];
      if (is_op(an, "Add")) {
        const std::string& bias = an.inputs[0] == mn.outputs[0] ? an.inputs[1] : an.inputs[0];
        const Tensor* bt = constant(bias);
        if (bt && bt->dtype() == DType::Float32 && bt->rank() == 1 && bt->dim(0) == b->dim(1)) {
          n.inputs.push_back(bias);
          n.outputs = {an.outputs[0]};
          dead_.insert(ra->second[0]);
        }
      }
    }
    g_.nodes[i] = std::move(n);
    // The scale product and the dynamic quantization go when nothing else reads them.
    created_.insert(sn.outputs[0]);
    created_.insert(dql.outputs[0]);
    index();
    return true;
  }

  Graph& g_;
  std::set<std::string> graph_outputs_;
  std::map<std::string, size_t> producer_;
  std::map<std::string, std::vector<size_t>> readers_;
  std::set<size_t> dead_;
  // Outputs of nodes that may be removed once unread (the dynamic pattern's leftovers).
  std::set<std::string> created_;
  // Element types of the fused nodes' outputs (their QuantizeLinear's zero point's).
  std::map<std::string, DType> fused_types_;
};

}  // namespace

int fuse_qdq(Graph& graph) {
  return Fuser(graph).run();
}

}  // namespace quilt
