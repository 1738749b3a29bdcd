// The QDQ format run as integer math: onnxruntime's quantizer (QuantFormat.QDQ) writes a float
// op between DequantizeLinear nodes on its inputs and one QuantizeLinear on its output; this
// pass replaces such groups by the quantized op, as onnxruntime's QDQ transformers do:
//
//   DQ(x) DQ(w) [DQ(b, int32)] -> Conv   -> Q   =>  QLinearConv
//   DQ(a) DQ(b)                -> MatMul -> Q   =>  QLinearMatMul
//   DQ(a) DQ(b) [DQ(c, int32)] -> Gemm   -> Q   =>  com.microsoft.QGemm
//   DQ(a) DQ(b)                -> Add/Mul -> Q  =>  com.microsoft.QLinearAdd / QLinearMul
//   DQ(x) -> GlobalAveragePool / AveragePool / Sigmoid / LeakyRelu / Softmax -> Q
//                                              =>  com.microsoft.QLinear*
//   DQ(x0) DQ(x1) ... -> Concat -> Q            =>  com.microsoft.QLinearConcat
//   condition, DQ(x), DQ(y) -> Where -> Q       =>  com.microsoft.QLinearWhere
//   DQ(x) -> MaxPool / Reshape / Transpose / Flatten / Squeeze / Unsqueeze / Slice / Expand /
//            Tile / DepthToSpace / SpaceToDepth / nearest Resize -> Q, the same scale and zero
//            point on both sides                =>  the op on the integers (as onnxruntime's
//            DropQDQNodes rule: these ops only move or pick values, so x's integers are y's)
//
// and the dynamic pattern DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale product)
// [-> Add(constant bias row)] => com.microsoft.DynamicQuantizeMatMul. A group is fused only when
// its scales and zero points are per-tensor constants (per-channel for the weights), the types are
// int8/uint8, and no one else reads the float values it removes; DequantizeLinear nodes left
// without readers are removed. The fused node keeps the float op's name. Unlike the other passes
// these are not exact: the integer arithmetic can land a value at a rounding tie one quantization
// step from the float ops' (as onnxruntime's own QDQ fusion does).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

constexpr const char* kMs = "com.microsoft";

bool is_int8(DType d) {
  return d == DType::Int8 || d == DType::UInt8;
}

// A live node of op_type in the default domain or, for the quantization ops, com.microsoft's.
bool is_qdq(const Node* n, const char* op_type) {
  return n && n->op_type == op_type &&
         (n->domain.empty() || n->domain == "ai.onnx" || n->domain == kMs);
}

class Qdq {
 public:
  explicit Qdq(Rewriter& r) : r_(r) {}

  void run() {
    for (size_t i : r_.order()) {
      if (!r_.live(i)) continue;
      const Node& n = r_.node(i);
      if (!n.domain.empty() && n.domain != "ai.onnx") continue;
      if (n.op_type == "Conv")
        conv(i);
      else if (n.op_type == "MatMul")
        matmul(i);
      else if (n.op_type == "Gemm")
        gemm(i);
      else if (n.op_type == "Add" || n.op_type == "Mul")
        binary(i);
      else if (n.op_type == "GlobalAveragePool" || n.op_type == "Sigmoid" ||
               n.op_type == "LeakyRelu" || n.op_type == "Softmax" || n.op_type == "AveragePool")
        unary(i);
      else if (n.op_type == "Concat")
        concat(i);
      else if (n.op_type == "Where")
        where(i);
      else if (moves_values(n))
        drop_pair(i);
      else if (n.op_type == "MatMulInteger")
        dynamic_matmul(i);
    }
  }

 private:
  // A DequantizeLinear producing a value: its node, integer input, scale and zero point ("" if
  // none), axis.
  struct Dq {
    size_t node;
    std::string q, scale, zp;
    int64_t axis;
  };

  std::optional<Dq> dq_of(const std::string& value) const {
    const Node* n = r_.producer(value);
    if (!is_qdq(n, "DequantizeLinear") || !n->has_input(1)) return std::nullopt;
    if (n->attr_int("block_size", 0) != 0) return std::nullopt;
    if (n->opset >= 23 && n->attr_int("output_dtype", 0) != 0) return std::nullopt;
    const Tensor* s = r_.constant(n->inputs[1]);
    if (!s || s->dtype() != DType::Float32) return std::nullopt;
    const std::string zp = n->has_input(2) ? n->inputs[2] : "";
    if (!zp.empty()) {
      const Tensor* z = r_.constant(zp);
      if (!z || z->numel() != s->numel()) return std::nullopt;
    }
    return Dq{r_.index_of(n), n->inputs[0], n->inputs[1], zp, n->attr_int("axis", 1)};
  }

  // The element type of a value: a constant's, else the one inferred at creation.
  std::optional<DType> int_type(const std::string& value) const {
    if (const Tensor* t = r_.constant(value)) return t->dtype();
    const DType d = r_.type(value).dtype;
    if (d == DType::Undefined) return std::nullopt;
    return d;
  }

  // Per-tensor int8/uint8 activation: one scale, a zero point of the data's type (required, as
  // the QLinear ops' zero points are).
  bool per_tensor(const Dq& d) const {
    const auto t = int_type(d.q);
    if (!t || !is_int8(*t) || d.zp.empty()) return false;
    return r_.constant(d.scale)->numel() == 1 && r_.constant(d.zp)->dtype() == *t;
  }

  // Constant int8/uint8 weights, per tensor or per `axis` (count values).
  bool weights(const Dq& d, int64_t axis, int64_t count) const {
    const Tensor* w = r_.constant(d.q);
    if (!w || !is_int8(w->dtype())) return false;
    if (!d.zp.empty() && r_.constant(d.zp)->dtype() != w->dtype()) return false;
    const Tensor* s = r_.constant(d.scale);
    if (s->numel() == 1) return true;
    const int64_t ax = d.axis < 0 ? d.axis + w->rank() : d.axis;
    return ax == axis && s->numel() == count && s->rank() == 1;
  }

  // The sole reader of `value` when it is a per-tensor int8/uint8 QuantizeLinear.
  std::optional<size_t> q_after(const std::string& value) const {
    const Node* q = r_.sole_reader(value);
    if (!is_qdq(q, "QuantizeLinear") || !q->has_input(2) || q->inputs[0] != value)
      return std::nullopt;
    const Tensor* s = r_.constant(q->inputs[1]);
    const Tensor* z = r_.constant(q->inputs[2]);
    if (!s || !z || s->numel() != 1 || z->numel() != 1 || s->dtype() != DType::Float32 ||
        !is_int8(z->dtype()))
      return std::nullopt;
    if (q->attr_int("block_size", 0) != 0 || (q->opset >= 23 && q->attr_int("precision", 0) != 0))
      return std::nullopt;
    return r_.index_of(q);
  }

  // A zero point for weights whose DequantizeLinear has none: a new scalar 0 of their type.
  std::string zero_point_for(const Dq& d) {
    if (!d.zp.empty()) return d.zp;
    const uint8_t zero = 0;
    return r_.add_initializer(d.q + "_zero_point",
                              Tensor::from_data(r_.constant(d.q)->dtype(), {}, &zero));
  }

  // An int32 bias dequantized with zero point 0 and scale a_scale * w_scale[j]: its integers.
  std::optional<std::string> bias_of(const std::string& value, const Dq& a, const Dq& w,
                                     int64_t count) const {
    const auto d = dq_of(value);
    if (!d) return std::nullopt;
    const Tensor* b = r_.constant(d->q);
    if (!b || b->dtype() != DType::Int32 || b->numel() != count) return std::nullopt;
    if (!d->zp.empty()) {
      const Tensor* z = r_.constant(d->zp);
      for (int64_t i = 0; i < z->numel(); ++i)
        if (z->data<int32_t>()[i] != 0) return std::nullopt;
    }
    const Tensor* bs = r_.constant(d->scale);
    const float as = r_.constant(a.scale)->data<float>()[0];
    const Tensor* ws = r_.constant(w.scale);
    for (int64_t j = 0; j < count; ++j) {
      const float want = as * ws->data<float>()[ws->numel() == 1 ? 0 : j];
      const float got = bs->data<float>()[bs->numel() == 1 ? 0 : j];
      if (std::fabs(got - want) > 1e-6f * std::fabs(want)) return std::nullopt;
    }
    return d->q;
  }

  // Node `op` and its QuantizeLinear `q` become `op_type`; the DequantizeLinear nodes `dqs`
  // go when nothing else reads them.
  bool replace(size_t op, size_t q, const std::string& op_type, const char* domain,
               std::vector<std::string> inputs, std::map<std::string, Attribute> attrs,
               const std::string& pattern, std::vector<size_t> dqs) {
    Node n = make_node(op_type, r_.node(op), op_type.rfind("QLinear", 0) == 0 ? 10 : 1,
                       std::move(inputs), {r_.node(q).outputs[0]});
    if (*domain) {
      n.domain = domain;
      n.opset = 1;
    }
    n.attributes = std::move(attrs);
    if (!r_.fuse({op}, q, std::move(n))) return false;
    if (*domain && !r_.graph().opsets.count(domain)) r_.graph().opsets[domain] = 1;
    r_.count(pattern);
    std::sort(dqs.begin(), dqs.end());
    r_.drop_unread(dqs);
    return true;
  }

  // "qdq " and the op type in lower case: the plan's name of a fusion.
  static std::string pattern_of(const std::string& op_type) {
    std::string pattern = "qdq " + op_type;
    std::transform(pattern.begin(), pattern.end(), pattern.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return pattern;
  }

  static std::map<std::string, Attribute> keep(const Node& n,
                                               std::initializer_list<const char*> names) {
    std::map<std::string, Attribute> out;
    for (const char* a : names)
      if (auto it = n.attributes.find(a); it != n.attributes.end()) out[a] = it->second;
    return out;
  }

  void conv(size_t i) {
    const Node& n = r_.node(i);
    const auto x = dq_of(n.inputs[0]);
    const auto w = n.inputs.size() > 1 ? dq_of(n.inputs[1]) : std::nullopt;
    const auto q = q_after(n.outputs[0]);
    if (!x || !w || !q || !per_tensor(*x)) return;
    const Tensor* wt = r_.constant(w->q);
    if (!wt || wt->rank() < 3 || !weights(*w, 0, wt->dim(0))) return;
    std::optional<std::string> bias;
    std::vector<size_t> dqs = {x->node, w->node};
    if (n.has_input(2)) {
      bias = bias_of(n.inputs[2], *x, *w, wt->dim(0));
      if (!bias) return;
      dqs.push_back(r_.index_of(r_.producer(n.inputs[2])));
    }
    const Node& qn = r_.node(*q);
    std::vector<std::string> in = {x->q,     x->scale,           x->zp,        w->q,
                                   w->scale, zero_point_for(*w), qn.inputs[1], qn.inputs[2]};
    if (bias) in.push_back(*bias);
    replace(i, *q, "QLinearConv", "", in,
            keep(n, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}),
            "qdq conv", dqs);
  }

  // Inputs 0 and 1 of node i dequantized (input 0 per tensor), its output quantized.
  struct Pair {
    Dq a, b;
    size_t q;
  };
  std::optional<Pair> pair(size_t i) const {
    const Node& n = r_.node(i);
    if (n.inputs.size() < 2) return std::nullopt;
    const auto a = dq_of(n.inputs[0]);
    const auto b = dq_of(n.inputs[1]);
    const auto q = q_after(n.outputs[0]);
    if (!a || !b || !q || !per_tensor(*a)) return std::nullopt;
    return Pair{*a, *b, *q};
  }

  void matmul(size_t i) {
    const auto p = pair(i);
    if (!p) return;
    const Tensor* bt = r_.constant(p->b.q);
    // Per-tensor or per-column (axis 1) constant 2-D weights, or a per-tensor activation.
    if (!(bt ? bt->rank() == 2 && weights(p->b, 1, bt->dim(1)) : per_tensor(p->b))) return;
    const Node& qn = r_.node(p->q);
    const std::string bz = bt ? zero_point_for(p->b) : p->b.zp;
    replace(i, p->q, "QLinearMatMul", "",
            {p->a.q, p->a.scale, p->a.zp, p->b.q, p->b.scale, bz, qn.inputs[1], qn.inputs[2]}, {},
            "qdq matmul", {p->a.node, p->b.node});
  }

  void gemm(size_t i) {
    const Node& n = r_.node(i);
    if (n.attr_int("transA", 0) != 0 || n.attr_float("beta", 1.f) != 1.f ||
        n.attr_float("alpha", 1.f) != 1.f)
      return;
    const auto p = pair(i);
    if (!p) return;
    const Tensor* bt = r_.constant(p->b.q);
    const bool trans_b = n.attr_int("transB", 0) != 0;
    if (!bt || bt->rank() != 2) return;
    const int64_t cols = trans_b ? bt->dim(0) : bt->dim(1);
    if (!weights(p->b, trans_b ? 0 : 1, cols)) return;
    std::optional<std::string> bias;
    std::vector<size_t> dqs = {p->a.node, p->b.node};
    if (n.has_input(2)) {
      bias = bias_of(n.inputs[2], p->a, p->b, cols);
      if (!bias) return;
      dqs.push_back(r_.index_of(r_.producer(n.inputs[2])));
    }
    const Node& qn = r_.node(p->q);
    replace(i, p->q, "QGemm", kMs,
            {p->a.q, p->a.scale, p->a.zp, p->b.q, p->b.scale, zero_point_for(p->b),
             bias ? *bias : "", qn.inputs[1], qn.inputs[2]},
            keep(n, {"transB"}), "qdq gemm", dqs);
  }

  void binary(size_t i) {
    const auto p = pair(i);
    if (!p || !per_tensor(p->b)) return;
    const Node& qn = r_.node(p->q);
    const DType t = *int_type(p->a.q);
    if (*int_type(p->b.q) != t || r_.constant(qn.inputs[2])->dtype() != t) return;
    const bool add = r_.node(i).op_type == "Add";
    replace(i, p->q, add ? "QLinearAdd" : "QLinearMul", kMs,
            {p->a.q, p->a.scale, p->a.zp, p->b.q, p->b.scale, p->b.zp, qn.inputs[1], qn.inputs[2]},
            {}, add ? "qdq add" : "qdq mul", {p->a.node, p->b.node});
  }

  void unary(size_t i) {
    const Node& n = r_.node(i);
    const auto x = dq_of(n.inputs[0]);
    const auto q = q_after(n.outputs[0]);
    if (!x || !q || !per_tensor(*x)) return;
    const Node& qn = r_.node(*q);
    if (r_.constant(qn.inputs[2])->dtype() != *int_type(x->q)) return;
    std::map<std::string, Attribute> attrs;
    if (n.op_type == "LeakyRelu") attrs = keep(n, {"alpha"});
    if (n.op_type == "AveragePool") {
      // QLinearAveragePool has no dilations, and divides a count_include_pad window by the
      // kernel size even where ceil_mode makes it reach past the end padding (AveragePool
      // before opset 19 does the same).
      for (int64_t d : n.attr_ints("dilations", {}))
        if (d != 1) return;
      if (n.opset >= 19 && n.attr_int("count_include_pad", 0) != 0 &&
          n.attr_int("ceil_mode", 0) != 0)
        return;
      attrs = keep(
          n, {"auto_pad", "ceil_mode", "count_include_pad", "kernel_shape", "pads", "strides"});
    }
    if (n.op_type == "Softmax") {
      attrs = keep(n, {"axis"});
      Attribute opset;
      opset.name = "opset";
      opset.kind = Attribute::Kind::Int;
      opset.i = n.opset;
      attrs["opset"] = opset;
    }
    replace(i, *q, "QLinear" + n.op_type, kMs, {x->q, x->scale, x->zp, qn.inputs[1], qn.inputs[2]},
            attrs, pattern_of(n.op_type), {x->node});
  }

  // Ops whose outputs are some of input 0's values (moved, repeated or the max of some): run on
  // the integers they give the same integers. Resize only in nearest mode, and not
  // tf_crop_and_resize (its extrapolation value is a float).
  static bool moves_values(const Node& n) {
    static const char* const ops[] = {"MaxPool", "Reshape",      "Transpose",    "Flatten",
                                      "Squeeze", "Unsqueeze",    "Slice",        "Expand",
                                      "Tile",    "DepthToSpace", "SpaceToDepth", "Resize"};
    if (std::none_of(std::begin(ops), std::end(ops),
                     [&](const char* op) { return n.op_type == op; }))
      return false;
    if (n.op_type == "Resize")
      return n.attr_string("mode", "nearest") == "nearest" &&
             n.attr_string("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize";
    return n.op_type != "MaxPool" || n.outputs.size() < 2 || n.outputs[1].empty();
  }

  // True when DequantizeLinear x and QuantizeLinear node q have the same scale and zero point.
  bool same_params(const Dq& x, size_t q) const {
    const Node& qn = r_.node(q);
    const Tensor* xs = r_.constant(x.scale);
    const Tensor* xz = r_.constant(x.zp);
    const Tensor* ys = r_.constant(qn.inputs[1]);
    const Tensor* yz = r_.constant(qn.inputs[2]);
    return xs->data<float>()[0] == ys->data<float>()[0] && xz->dtype() == yz->dtype() &&
           std::memcmp(xz->raw_data(), yz->raw_data(), 1) == 0;
  }

  // DQ -> op -> Q with the same scale and zero point, op one of moves_values: the op on the
  // integers.
  void drop_pair(size_t i) {
    const Node& n = r_.node(i);
    const auto x = dq_of(n.inputs[0]);
    const auto q = q_after(n.outputs[0]);
    if (!x || !q || !per_tensor(*x) || !same_params(*x, *q)) return;
    std::vector<std::string> in = n.inputs;
    in[0] = x->q;
    std::vector<std::string> out = {r_.node(*q).outputs[0]};
    replace(i, *q, n.op_type, "", in, n.attributes, pattern_of(n.op_type), {x->node});
  }

  // DQ(x0) DQ(x1) ... -> Concat -> Q  =>  QLinearConcat(y_scale, y_zp, x0, s0, z0, x1, ...).
  void concat(size_t i) {
    const Node& n = r_.node(i);
    const auto q = q_after(n.outputs[0]);
    if (!q || n.inputs.empty()) return;
    const Node& qn = r_.node(*q);
    const DType t = r_.constant(qn.inputs[2])->dtype();
    std::vector<std::string> in = {qn.inputs[1], qn.inputs[2]};
    std::vector<size_t> dqs;
    for (const std::string& v : n.inputs) {
      const auto x = dq_of(v);
      if (!x || !per_tensor(*x) || *int_type(x->q) != t) return;
      in.insert(in.end(), {x->q, x->scale, x->zp});
      if (std::find(dqs.begin(), dqs.end(), x->node) == dqs.end()) dqs.push_back(x->node);
    }
    replace(i, *q, "QLinearConcat", kMs, in, keep(n, {"axis"}), "qdq concat", dqs);
  }

  // condition, DQ(x), DQ(y) -> Where -> Q  =>  QLinearWhere(condition, x, .., y, .., z_scale,
  // z_zp).
  void where(size_t i) {
    const Node& n = r_.node(i);
    if (n.inputs.size() != 3) return;
    const auto x = dq_of(n.inputs[1]);
    const auto y = dq_of(n.inputs[2]);
    const auto q = q_after(n.outputs[0]);
    if (!x || !y || !q || !per_tensor(*x) || !per_tensor(*y)) return;
    const Node& qn = r_.node(*q);
    const DType t = r_.constant(qn.inputs[2])->dtype();
    if (*int_type(x->q) != t || *int_type(y->q) != t) return;
    replace(i, *q, "QLinearWhere", kMs,
            {n.inputs[0], x->q, x->scale, x->zp, y->q, y->scale, y->zp, qn.inputs[1], qn.inputs[2]},
            {}, "qdq where", {x->node, y->node});
  }

  // DynamicQuantizeLinear(a) -> MatMulInteger(a_q, B, a_zp, b_zp) -> Cast(float) ->
  // Mul(by Mul(a_scale, b_scale)) [-> Add(constant bias row)]
  //   => DynamicQuantizeMatMul(a, B, b_scale, b_zp [, bias]).
  void dynamic_matmul(size_t i) {
    const Node& mm = r_.node(i);
    const Node* dql = r_.producer(mm.inputs[0]);
    if (!mm.has_input(2) || !dql || dql->op_type != "DynamicQuantizeLinear" ||
        !dql->domain.empty() || dql->outputs.size() < 3 || mm.inputs[2] != dql->outputs[2])
      return;
    const Tensor* b = r_.constant(mm.inputs[1]);
    if (!b || b->rank() != 2 || !is_int8(b->dtype())) return;
    if (mm.has_input(3)) {
      const Tensor* bz = r_.constant(mm.inputs[3]);
      if (!bz || bz->rank() > 1) return;
    }
    const Node* cast = r_.sole_reader(mm.outputs[0]);
    if (!is_op(cast, "Cast") || cast->attr_int("to", 0) != static_cast<int64_t>(DType::Float32))
      return;
    const Node* mul = r_.sole_reader(cast->outputs[0]);
    if (!is_op(mul, "Mul")) return;
    const std::string& scale = mul->inputs[0] == cast->outputs[0] ? mul->inputs[1] : mul->inputs[0];
    const Node* sn = r_.producer(scale);
    if (!is_op(sn, "Mul")) return;
    std::string b_scale;
    if (sn->inputs[0] == dql->outputs[1]) b_scale = sn->inputs[1];
    if (sn->inputs[1] == dql->outputs[1]) b_scale = sn->inputs[0];
    const Tensor* bs = b_scale.empty() ? nullptr : r_.constant(b_scale);
    if (!bs || bs->dtype() != DType::Float32 || bs->rank() > 1 ||
        (bs->numel() != 1 && bs->numel() != b->dim(1)))
      return;
    std::vector<std::string> inputs = {dql->inputs[0], mm.inputs[1], b_scale,
                                       mm.has_input(3) ? mm.inputs[3] : ""};
    size_t root = r_.index_of(mul);
    std::vector<size_t> gone = {i, r_.index_of(cast)};
    // A following Add of a constant row of N floats (the layer's bias) becomes the op's bias.
    if (const Node* add = r_.sole_reader(mul->outputs[0]); is_op(add, "Add")) {
      const std::string& bias = add->inputs[0] == mul->outputs[0] ? add->inputs[1] : add->inputs[0];
      const Tensor* bt = r_.constant(bias);
      if (bt && bt->dtype() == DType::Float32 && bt->rank() == 1 && bt->dim(0) == b->dim(1)) {
        inputs.push_back(bias);
        gone.push_back(root);
        root = r_.index_of(add);
      }
    }
    Node n = make_node("DynamicQuantizeMatMul", mm, 1, inputs, {r_.node(root).outputs[0]});
    n.domain = kMs;
    n.opset = 1;
    const size_t dql_i = r_.index_of(dql), sn_i = r_.index_of(sn);
    if (!r_.fuse(gone, root, std::move(n))) return;
    if (!r_.graph().opsets.count(kMs)) r_.graph().opsets[kMs] = 1;
    r_.count("dynamic matmul");
    // The scale product and the dynamic quantization go when nothing else reads them.
    r_.drop_unread(dql_i < sn_i ? std::vector<size_t>{dql_i, sn_i}
                                : std::vector<size_t>{sn_i, dql_i});
  }

  Rewriter& r_;
};

}  // namespace

void fuse_qdq(Rewriter& r) {
  Qdq(r).run();
}

}  // namespace quilt::optimize
