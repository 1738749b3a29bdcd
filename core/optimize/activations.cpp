// Activations that exporters write out as several element-wise nodes, back to the one ONNX op:
//
//   HardSwish    x * clip(x + 3, 0, 6) / 6 in any association of the product (paddle2onnx:
//                Add -> Clip -> Div -> Mul; torch: Add -> Clip -> Mul -> Div; Keras/tf2onnx:
//                ... -> Mul(1/6) -> Mul), and x * HardSigmoid(x, 1/6, 0.5) (torch, opset < 14)
//   HardSigmoid  clip(a * x + b, 0, 1) (Mul -> Add -> Clip) and clip(x + b, 0, c) / c
//   Gelu         0.5 * x * (1 + erf(x / sqrt 2)) (Div by 1.414... or Mul by 0.707...), and
//                0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) -> approximate="tanh"
//                (x^3 as Pow or Muls; also sqrt(2/pi) * x * (1 + 0.044715 x^2))
//   Mish         x * tanh(softplus(x)), softplus as the op or as log(exp(x) + 1)
//   Swish        x * sigmoid(alpha * x) (SiLU for alpha = 1) -> Swish (opset 24)
//
// Clip's bounds are opset-11 inputs or opset-6 attributes; every product is read through
// product_of, so the order and grouping of the multiplies and the constants do not matter.
// The rewritten node takes the name of the last node and, where the op is newer than the
// model's import, the opset the op first appears in. float32 only: the half and double forms
// would round differently from the chain they replace in more than the last place.
#include <algorithm>
#include <cfloat>
#include <functional>

#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// The nodes of a match and the highest rank among its constants.
struct Matched {
  std::vector<size_t> nodes;
  int64_t constant_rank = 0;
  void add(const Product& p) {
    nodes.insert(nodes.end(), p.nodes.begin(), p.nodes.end());
    constant_rank = std::max(constant_rank, p.constant_rank);
  }
  void add(const Rewriter& r, const Node* n) { nodes.push_back(r.index_of(n)); }
  void constant(const Rewriter& r, const std::string& v) {
    constant_rank = std::max(constant_rank, r.scalar_rank(v));
  }
};

// clamp(a * x + b, lo, hi), from a HardSigmoid or a Clip of Add(product of x, b).
struct ClampedAffine {
  std::string x;
  double a = 1, b = 0, lo = -DBL_MAX, hi = DBL_MAX;
  Matched m;
};

// Clip's bounds, from its attributes (before opset 11) or its constant inputs.
bool clip_bounds(const Rewriter& r, const Node& clip, ClampedAffine& c) {
  if (clip.opset < 11) {
    c.lo = clip.attr_float("min", -FLT_MAX);
    c.hi = clip.attr_float("max", FLT_MAX);
    return true;
  }
  for (size_t i = 1; i < 3; ++i) {
    if (!clip.has_input(i)) continue;
    const std::optional<double> v = r.scalar(clip.inputs[i]);
    if (!v) return false;
    (i == 1 ? c.lo : c.hi) = *v;
    c.m.constant(r, clip.inputs[i]);
  }
  return true;
}

std::optional<ClampedAffine> clamped_affine(const Rewriter& r, const std::string& v) {
  const Node* n = r.producer(v);
  ClampedAffine c;
  if (is_op(n, "HardSigmoid")) {
    c = {n->inputs[0], n->attr_float("alpha", 0.2f), n->attr_float("beta", 0.5f), 0, 1, {}};
    c.m.add(r, n);
    return c;
  }
  if (!is_op(n, "Clip") || n->inputs.empty() || !clip_bounds(r, *n, c)) return std::nullopt;
  c.m.add(r, n);
  std::string u = n->inputs[0];
  const Node* reader = n;
  if (const Node* add = r.producer(u);
      is_op(add, "Add") && add->inputs.size() == 2 && r.sole_reader(u) == n) {
    for (size_t s = 0; s < 2; ++s)
      if (const std::optional<double> b = r.scalar(add->inputs[s])) {
        c.b = *b;
        c.m.constant(r, add->inputs[s]);
        c.m.add(r, add);
        u = add->inputs[1 - s];
        reader = add;
        break;
      }
  }
  const Product p = product_of(r, u, reader);
  if (p.leaves.size() != 1) return std::nullopt;
  c.x = p.leaves[0];
  c.a = p.k;
  c.m.add(p);
  return c;
}

bool float32(const Rewriter& r, const std::string& v) {
  return r.type(v).dtype == DType::Float32;
}

// Replaces the match rooted at node `root` (whose output becomes the new op's) by op_type(x).
bool replace(Rewriter& r, size_t root, Matched& m, const std::string& x, const char* op_type,
             int64_t min_opset, const std::function<void(Node&)>& attrs = nullptr) {
  const Node& last = r.node(root);
  if (!float32(r, x) || !keeps_shape(r, x, last.outputs[0], m.constant_rank)) return false;
  std::vector<size_t> gone;
  for (size_t n : m.nodes)
    if (n != root && std::find(gone.begin(), gone.end(), n) == gone.end()) gone.push_back(n);
  Node fused = make_node(op_type, last, min_opset, {x}, {last.outputs[0]});
  if (attrs) attrs(fused);
  return r.fuse(gone, root, std::move(fused));
}

// The output of a two-leaf product at the root: (x, other leaf) pairs, both ways round.
std::vector<std::pair<std::string, std::string>> pairs(const Product& p) {
  if (p.leaves.size() != 2) return {};
  return {{p.leaves[0], p.leaves[1]}, {p.leaves[1], p.leaves[0]}};
}

bool hard_swish(Rewriter& r, size_t root, const Product& p) {
  for (const auto& [x, q] : pairs(p)) {
    std::optional<ClampedAffine> c = clamped_affine(r, q);
    const double k = p.k;
    if (!c || c->x != x || c->lo != 0 || k <= 0 || !near(k * c->hi, 1) ||
        !near(k * c->a, 1.0 / 6) || !near(k * c->b, 0.5))
      continue;
    c->m.add(p);
    if (replace(r, root, c->m, x, "HardSwish", 14)) return true;
  }
  return false;
}

bool hard_sigmoid(Rewriter& r, size_t root) {
  const Node& last = r.node(root);
  Product p;
  std::optional<ClampedAffine> c;
  if (is_op(&last, "Clip")) {
    c = clamped_affine(r, last.outputs[0]);
  } else {
    p = product_of(r, last.outputs[0]);
    if (p.leaves.size() == 1) c = clamped_affine(r, p.leaves[0]);
  }
  if (!c || c->lo != 0 || p.k <= 0 || !near(p.k * c->hi, 1)) return false;
  c->m.add(p);
  if (c->m.nodes.size() < 2) return false;  // a lone Clip or HardSigmoid: nothing to fuse
  const auto alpha = static_cast<float>(p.k * c->a), beta = static_cast<float>(p.k * c->b);
  return replace(r, root, c->m, c->x, "HardSigmoid", 6, [&](Node& n) {
    set_attr(n, "alpha", alpha);
    set_attr(n, "beta", beta);
  });
}

// v = 1 + f(arg) for the unary op f: the f node (arg is its input), with the Add and f matched.
const Node* one_plus(const Rewriter& r, const std::string& v, const char* f, Matched& m) {
  const Node* add = r.producer(v);
  if (!is_op(add, "Add") || add->inputs.size() != 2) return nullptr;
  for (size_t s = 0; s < 2; ++s) {
    const Node* fn = r.producer(add->inputs[1 - s]);
    if (near(r.scalar(add->inputs[s]), 1) && is_op(fn, f) && fn->inputs.size() == 1) {
      m.add(r, add);
      m.add(r, fn);
      m.constant(r, add->inputs[s]);
      return fn;
    }
  }
  return nullptr;
}

// sqrt(2/pi) * (x + 0.044715 x^3), or sqrt(2/pi) * x * (1 + 0.044715 x^2).
bool gelu_tanh_argument(const Rewriter& r, const std::string& arg, const Node* tanh,
                        const std::string& x, Matched& m) {
  const Product outer = product_of(r, arg, tanh);
  if (!near(outer.k, 0.7978845608028654)) return false;
  m.add(outer);
  if (outer.leaves.size() == 1) {  // x + 0.044715 x^3
    const Node* sum = r.producer(outer.leaves[0]);
    if (!is_op(sum, "Add") || sum->inputs.size() != 2) return false;
    for (size_t s = 0; s < 2; ++s) {
      const Product cube = product_of(r, sum->inputs[1 - s], sum);
      if (sum->inputs[s] == x && near(cube.k, 0.044715) &&
          cube.leaves == std::vector<std::string>(3, x)) {
        m.add(r, sum);
        m.add(cube);
        return true;
      }
    }
    return false;
  }
  if (outer.leaves.size() != 2) return false;  // x * (1 + 0.044715 x^2)
  for (size_t s = 0; s < 2; ++s) {
    const Node* sum = r.producer(outer.leaves[1 - s]);
    if (outer.leaves[s] != x || !is_op(sum, "Add") || sum->inputs.size() != 2) continue;
    for (size_t t = 0; t < 2; ++t) {
      const Product square = product_of(r, sum->inputs[1 - t], sum);
      if (near(r.scalar(sum->inputs[t]), 1) && near(square.k, 0.044715) &&
          square.leaves == std::vector<std::string>(2, x)) {
        m.add(r, sum);
        m.constant(r, sum->inputs[t]);
        m.add(square);
        return true;
      }
    }
  }
  return false;
}

// 0.5 * x * (1 + erf(x / sqrt 2)) or the tanh form; returns the pattern name matched.
const char* gelu(Rewriter& r, size_t root, const Product& p) {
  if (!near(p.k, 0.5)) return nullptr;
  for (const auto& [x, q] : pairs(p)) {
    for (const char* f : {"Erf", "Tanh"}) {
      Matched m;
      m.add(p);
      const Node* fn = one_plus(r, q, f, m);
      if (!fn) continue;
      if (fn->op_type == "Erf") {
        const Product scaled = product_of(r, fn->inputs[0], fn);
        if (scaled.leaves != std::vector<std::string>{x} || !near(scaled.k, 0.7071067811865476))
          continue;
        m.add(scaled);
        if (replace(r, root, m, x, "Gelu", 20)) return "gelu";
      } else if (gelu_tanh_argument(r, fn->inputs[0], fn, x, m) &&
                 replace(r, root, m, x, "Gelu", 20,
                         [](Node& n) { set_attr(n, "approximate", std::string("tanh")); })) {
        return "gelu tanh";
      }
    }
  }
  return nullptr;
}

// x * tanh(softplus(x)), softplus as the op or as Log(Add(Exp(x), 1)).
bool mish(Rewriter& r, size_t root, const Product& p) {
  if (!near(p.k, 1)) return false;
  for (const auto& [x, q] : pairs(p)) {
    const Node* tanh = r.producer(q);
    if (!is_op(tanh, "Tanh")) continue;
    Matched m;
    m.add(p);
    m.add(r, tanh);
    const Node* sp = r.producer(tanh->inputs[0]);
    if (is_op(sp, "Softplus") && sp->inputs[0] == x) {
      m.add(r, sp);
    } else if (is_op(sp, "Log")) {
      m.add(r, sp);
      const Node* exp = one_plus(r, sp->inputs[0], "Exp", m);
      if (!exp || exp->inputs[0] != x) continue;
    } else {
      continue;
    }
    if (replace(r, root, m, x, "Mish", 18)) return true;
  }
  return false;
}

// x * sigmoid(alpha * x).
bool swish(Rewriter& r, size_t root, const Product& p) {
  if (!near(p.k, 1)) return false;
  for (const auto& [x, q] : pairs(p)) {
    const Node* sig = r.producer(q);
    if (!is_op(sig, "Sigmoid")) continue;
    const Product arg = product_of(r, sig->inputs[0], sig);
    if (arg.leaves != std::vector<std::string>{x}) continue;
    Matched m;
    m.add(p);
    m.add(r, sig);
    m.add(arg);
    const auto alpha = static_cast<float>(arg.k);
    if (replace(r, root, m, x, "Swish", 24, [&](Node& n) {
          if (alpha != 1.f) set_attr(n, "alpha", alpha);
        }))
      return true;
  }
  return false;
}

bool product_root(const Node& n) {
  return (is_op(&n, "Mul") || is_op(&n, "Div")) && n.outputs.size() == 1;
}

}  // namespace

void fuse_activations(Rewriter& r) {
  // One sweep per pattern, largest matches first: HardSwish before the HardSigmoid inside it.
  for (size_t i : r.reverse_order())
    if (r.live(i) && product_root(r.node(i)) &&
        hard_swish(r, i, product_of(r, r.node(i).outputs[0])))
      r.count("hardswish");
  for (size_t i : r.reverse_order()) {
    if (!r.live(i) || !product_root(r.node(i))) continue;
    if (const char* name = gelu(r, i, product_of(r, r.node(i).outputs[0]))) r.count(name);
  }
  for (size_t i : r.reverse_order())
    if (r.live(i) && is_op(&r.node(i), "Mul") && mish(r, i, product_of(r, r.node(i).outputs[0])))
      r.count("mish");
  for (size_t i : r.reverse_order())
    if (r.live(i) && is_op(&r.node(i), "Mul") && swish(r, i, product_of(r, r.node(i).outputs[0])))
      r.count("swish");
  for (size_t i : r.reverse_order())
    if (r.live(i) && (product_root(r.node(i)) || is_op(&r.node(i), "Clip")) && hard_sigmoid(r, i))
      r.count("hardsigmoid");
}

}  // namespace quilt::optimize
