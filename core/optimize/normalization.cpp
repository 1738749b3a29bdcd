// Normalisations that exporters write out, back to the one ONNX op:
//
//   LayerNormalization  d = x - ReduceMean(x); d / Sqrt(ReduceMean(d^2) + eps) [* gamma] [+ beta]
//                       (torch before opset 17, paddle2onnx); d^2 as Pow(d, 2) or Mul(d, d), the
//                       division as Div or Mul by Reciprocal. -> opset 17
//   RMSNormalization    x / Sqrt(ReduceMean(x^2) + eps) [* gamma] (LLaMA-style exports, the
//                       division also as Mul by Reciprocal(Sqrt) or by 1 / Sqrt) -> opset 23
//   Softmax             e = Exp(x - ReduceMax(x)); e / ReduceSum(e) -> opset 13
//
// The reductions take their axes as attributes (older opsets) or as a constant input (ReduceSum
// from opset 13, the others from 18), keep their dims, and run over the last axes (LayerNorm,
// RMSNorm) or one axis (Softmax). gamma and beta must be constants that vary only along the
// normalised axes; they are given to the op at the normalised shape. float32 only.
#include <algorithm>

#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// The axes of a reduction with keepdims = 1, each as a negative axis where the rank is known or
// the axis is already negative; nullopt when not so known (or when it reduces every axis).
std::optional<std::vector<int64_t>> kept_axes(const Rewriter& r, const Node& n) {
  if (n.attr_int("keepdims", 1) != 1 || n.inputs.empty()) return std::nullopt;
  const int64_t input_from = n.op_type == "ReduceSum" ? 13 : 18;
  std::vector<int64_t> axes;
  if (n.opset >= input_from) {
    const Tensor* t = n.has_input(1) ? r.constant(n.inputs[1]) : nullptr;
    if (!t || t->dtype() != DType::Int64) return std::nullopt;
    axes.assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  } else {
    axes = n.attr_ints("axes");
  }
  if (axes.empty()) return std::nullopt;
  const TypeShape& t = r.type(n.inputs[0]);
  for (int64_t& a : axes) {
    if (a >= 0 && !t.has_shape) return std::nullopt;
    if (a >= 0) a -= static_cast<int64_t>(t.dims.size());
  }
  std::sort(axes.begin(), axes.end());
  return axes;
}

// v's only reader when it is op_type.
const Node* next(const Rewriter& r, const std::string& v, const char* op_type) {
  const Node* n = r.sole_reader(v);
  return is_op(n, op_type) ? n : nullptr;
}

// The input of n other than v (n binary), or "".
std::string other(const Node& n, const std::string& v) {
  if (n.inputs.size() != 2) return "";
  return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : "";
}

// num / den as Div(num, den), Mul(num, Reciprocal(den)) or Mul(num, Div(1, den)): the quotient's
// node, with the nodes matched; num may be read by others.
const Node* divided(const Rewriter& r, const std::string& num, const std::string& den,
                    std::vector<size_t>& nodes) {
  for (const Node* n : r.readers(den)) {
    if (is_op(n, "Div") && n->inputs[0] == num && n->inputs[1] == den) {
      nodes.push_back(r.index_of(n));
      return n;
    }
    const bool reciprocal = is_op(n, "Reciprocal") || (is_op(n, "Div") && n->inputs[1] == den &&
                                                       near(r.scalar(n->inputs[0]), 1));
    if (!reciprocal) continue;
    for (const Node* m : r.readers(n->outputs[0]))
      if (is_op(m, "Mul") && other(*m, n->outputs[0]) == num) {
        nodes.push_back(r.index_of(n));
        nodes.push_back(r.index_of(m));
        return m;
      }
  }
  return nullptr;
}

// Sqrt(ms + eps) read from the mean of squares ms: the Sqrt's output and eps (of rank 0 or 1,
// which cannot raise the rank of the statistics).
std::optional<std::pair<std::string, float>> root_of(const Rewriter& r, const std::string& ms,
                                                     std::vector<size_t>& nodes) {
  const Node* add = next(r, ms, "Add");
  if (!add) return std::nullopt;
  const std::optional<double> eps = r.scalar(other(*add, ms));
  const Node* sqrt = next(r, add->outputs[0], "Sqrt");
  if (!eps || r.scalar_rank(other(*add, ms)) > 1 || !sqrt) return std::nullopt;
  nodes.push_back(r.index_of(add));
  nodes.push_back(r.index_of(sqrt));
  return std::make_pair(sqrt->outputs[0], static_cast<float>(*eps));
}

// The square of v as its reader Pow(v, 2) or Mul(v, v).
const Node* square_of(const Rewriter& r, const std::string& v, const Node* n) {
  if (is_op(n, "Pow") && n->inputs[0] == v && r.scalar(n->inputs[1]) == 2.0) return n;
  if (is_op(n, "Mul") && n->inputs.size() == 2 && n->inputs[0] == v && n->inputs[1] == v) return n;
  return nullptr;
}

// The dims the last `count` axes of x span, when all are known. Where x's shape is known only at
// run time (a transformer's sequence length), the dims of gamma, the constant the normalised
// value y is then multiplied by, when it has exactly `count` dims and none of 1: a model only
// multiplies by a gamma of the normalised shape (as onnxruntime's LayerNormFusion assumes).
std::optional<std::vector<int64_t>> normalised_dims(const Rewriter& r, const std::string& x,
                                                    const std::string& y, size_t count) {
  const TypeShape& t = r.type(x);
  std::vector<int64_t> dims;
  if (t.has_shape && t.dims.size() >= count) {
    dims.assign(t.dims.end() - static_cast<std::ptrdiff_t>(count), t.dims.end());
  } else if (const Node* mul = next(r, y, "Mul"); mul && !t.has_shape) {
    const Tensor* gamma = r.constant(other(*mul, y));
    if (!gamma || gamma->rank() != static_cast<int64_t>(count)) return std::nullopt;
    dims = gamma->shape();
    if (std::find(dims.begin(), dims.end(), 1) != dims.end()) return std::nullopt;
  }
  if (dims.empty() || std::any_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; }))
    return std::nullopt;
  return dims;
}

// A constant that varies only along `dims` (right-aligned) and has no more dims than x (or than
// dims, x's rank unknown), as a tensor of exactly those dims: its own name when it already is
// one, else a new initializer holding it broadcast.
std::optional<std::string> at_shape(Rewriter& r, const std::string& v, const std::string& x,
                                    const std::vector<int64_t>& dims) {
  const Tensor* t = r.constant(v);
  const TypeShape& tx = r.type(x);
  const size_t max_rank = tx.has_shape ? tx.dims.size() : dims.size();
  if (!t || t->dtype() != DType::Float32 || static_cast<size_t>(t->rank()) > max_rank)
    return std::nullopt;
  std::vector<int64_t> shape = t->shape();
  while (shape.size() > dims.size() && shape.front() == 1) shape.erase(shape.begin());
  if (shape.size() > dims.size()) return std::nullopt;
  shape.insert(shape.begin(), dims.size() - shape.size(), 1);
  for (size_t i = 0; i < dims.size(); ++i)
    if (shape[i] != 1 && shape[i] != dims[i]) return std::nullopt;
  if (t->shape() == dims) return v;
  Tensor out(DType::Float32, dims);
  const float* src = t->data<float>();
  float* dst = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i) {
    int64_t rest = i, from = 0, stride = 1;
    for (size_t d = dims.size(); d-- > 0;) {
      const int64_t at = rest % dims[d];
      rest /= dims[d];
      if (shape[d] != 1) from += at * stride;
      stride *= shape[d];
    }
    dst[i] = src[from];
  }
  return r.add_initializer(v + "_" + std::to_string(dims.size()) + "d", out);
}

// [-count, ..., -1]: the axes LayerNormalization(axis = -count) normalises.
bool last_axes(const std::vector<int64_t>& axes) {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i] != static_cast<int64_t>(i) - static_cast<int64_t>(axes.size())) return false;
  return true;
}

// y [* gamma] [+ beta] after the normalised value y, gamma and beta constants that fit the
// op (at_shape; a Mul or Add that does not fit stays after it): extends nodes, gives the output
// and the scale and bias inputs (scale ones when there is no gamma).
struct Affine {
  std::string out, scale, bias;
};
Affine affine_after(Rewriter& r, const std::string& x, const std::string& y,
                    const std::vector<int64_t>& dims, bool with_bias, std::vector<size_t>& nodes) {
  Affine a{y, "", ""};
  // Takes v's sole reader op_type into the match when its other operand fits as `into`.
  auto take = [&](const char* op_type, std::string& into) {
    const Node* n = next(r, a.out, op_type);
    const std::optional<std::string> c = n ? at_shape(r, other(*n, a.out), x, dims) : std::nullopt;
    if (!c) return false;
    into = *c;
    nodes.push_back(r.index_of(n));
    a.out = n->outputs[0];
    return true;
  };
  // A bias only after gamma or with no Mul at all: beta is added after the scaling.
  if ((take("Mul", a.scale) || !next(r, a.out, "Mul")) && with_bias) take("Add", a.bias);
  if (a.scale.empty()) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    a.scale = r.add_initializer(y + "_scale",
                                Tensor::from_vector<float>(dims, std::vector<float>(n, 1.f)));
  }
  return a;
}

// fuse()'s rule for the matched nodes with root among them, before new constants are made.
bool fusable(const Rewriter& r, std::vector<size_t> nodes, size_t root) {
  std::erase(nodes, root);
  return r.can_fuse(nodes, root);
}

// The node to rewrite into: the last matched node's name and place.
bool rewrite(Rewriter& r, std::vector<size_t> nodes, const std::string& out, Node fused) {
  const size_t root = r.index_of(r.producer(out));
  std::erase(nodes, root);
  const Node& last = r.node(root);
  fused.name = last.name;
  fused.index = last.index;
  fused.outputs = {out};
  return r.fuse(nodes, root, std::move(fused));
}

bool layer_norm(Rewriter& r, size_t i) {
  const Node& mean = r.node(i);
  const std::string& x = mean.inputs[0];
  const std::optional<std::vector<int64_t>> axes = kept_axes(r, mean);
  const Node* sub = next(r, mean.outputs[0], "Sub");
  if (!axes || !last_axes(*axes) || !sub || sub->inputs[0] != x ||
      r.type(x).dtype != DType::Float32)
    return false;
  const std::string& d = sub->outputs[0];
  std::vector<size_t> nodes = {i, r.index_of(sub)};
  for (const Node* sq : r.readers(d)) {
    if (!square_of(r, d, sq)) continue;
    const Node* var = next(r, sq->outputs[0], "ReduceMean");
    if (!var || kept_axes(r, *var) != axes) continue;
    std::vector<size_t> more = {r.index_of(sq), r.index_of(var)};
    const auto root = root_of(r, var->outputs[0], more);
    const Node* norm = root ? divided(r, d, root->first, more) : nullptr;
    const auto dims = norm ? normalised_dims(r, x, norm->outputs[0], axes->size()) : std::nullopt;
    if (!dims) continue;
    more.insert(more.end(), nodes.begin(), nodes.end());
    if (!fusable(r, more, r.index_of(norm))) continue;
    const Affine a = affine_after(r, x, norm->outputs[0], *dims, true, more);
    Node ln = make_node("LayerNormalization", mean, 17, {x, a.scale}, {});
    if (!a.bias.empty()) ln.inputs.push_back(a.bias);
    set_attr(ln, "axis", -static_cast<int64_t>(axes->size()));
    set_attr(ln, "epsilon", root->second);
    return rewrite(r, more, a.out, std::move(ln));
  }
  return false;
}

bool rms_norm(Rewriter& r, size_t i) {
  const Node& ms = r.node(i);
  const Node* sq = r.producer(ms.inputs[0]);
  if (!sq || sq->inputs.empty()) return false;
  const std::string& x = sq->inputs[0];
  const std::optional<std::vector<int64_t>> axes = kept_axes(r, ms);
  if (!square_of(r, x, sq) || !axes || !last_axes(*axes) || r.type(x).dtype != DType::Float32)
    return false;
  std::vector<size_t> nodes = {r.index_of(sq), i};
  const auto root = root_of(r, ms.outputs[0], nodes);
  const Node* norm = root ? divided(r, x, root->first, nodes) : nullptr;
  const auto dims = norm ? normalised_dims(r, x, norm->outputs[0], axes->size()) : std::nullopt;
  if (!dims || !fusable(r, nodes, r.index_of(norm))) return false;
  const Affine a = affine_after(r, x, norm->outputs[0], *dims, false, nodes);
  Node rms = make_node("RMSNormalization", ms, 23, {x, a.scale}, {});
  set_attr(rms, "axis", -static_cast<int64_t>(axes->size()));
  set_attr(rms, "epsilon", root->second);
  return rewrite(r, nodes, a.out, std::move(rms));
}

bool softmax(Rewriter& r, size_t i) {
  const Node& max = r.node(i);
  const std::string& x = max.inputs[0];
  const std::optional<std::vector<int64_t>> axes = kept_axes(r, max);
  const Node* sub = next(r, max.outputs[0], "Sub");
  const Node* exp = sub ? next(r, sub->outputs[0], "Exp") : nullptr;
  if (!axes || axes->size() != 1 || !sub || sub->inputs[0] != x || !exp ||
      r.type(x).dtype != DType::Float32)
    return false;
  const std::string& e = exp->outputs[0];
  for (const Node* sum : r.readers(e)) {
    if (!is_op(sum, "ReduceSum") || sum->inputs[0] != e || kept_axes(r, *sum) != axes) continue;
    std::vector<size_t> nodes = {i, r.index_of(sub), r.index_of(exp), r.index_of(sum)};
    const Node* out = divided(r, e, sum->outputs[0], nodes);
    if (!out) continue;
    Node sm = make_node("Softmax", max, 13, {x}, {});
    set_attr(sm, "axis", axes->front());
    return rewrite(r, nodes, out->outputs[0], std::move(sm));
  }
  return false;
}

}  // namespace

void fuse_normalizations(Rewriter& r) {
  for (size_t i : r.order())
    if (r.live(i) && is_op(&r.node(i), "ReduceMean") && layer_norm(r, i)) r.count("layernorm");
  for (size_t i : r.order())
    if (r.live(i) && is_op(&r.node(i), "ReduceMean") && rms_norm(r, i)) r.count("rmsnorm");
  for (size_t i : r.order())
    if (r.live(i) && is_op(&r.node(i), "ReduceMax") && softmax(r, i)) r.count("softmax");
}

}  // namespace quilt::optimize
