// If nodes whose condition is known at load are replaced by the branch they would take: the
// exporters write `if self.training`, `if x.shape[1] == 3` or a configuration flag as an If, and
// running it at every call costs a subplan launch for no decision. The condition is known when
// it is a constant, or folds to one through the small scalar ops exporters put before an If
// (Shape/Size of a statically shaped value, Gather of one dim, comparisons, Not/And/Or, Cast,
// the reshapes); the nodes that computed it go too when nothing else reads them. A nested If
// in the taken branch is inlined by the pipeline's next round (optimize.cpp).
#include <cmath>

#include "core/element.hpp"
#include "core/optimize/rewriter.hpp"

namespace quilt::optimize {
namespace {

// A value known at load, flattened: at most kMaxKnown numbers, with its rank (-1 unknown).
constexpr int64_t kMaxKnown = 64;
struct Known {
  std::vector<double> v;
  int64_t rank = -1;
};

std::optional<double> element(const Tensor& t, int64_t i) {
  const std::optional<long double> v = element_value(t, i);
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

std::optional<Known> known(const Rewriter& r, const std::string& v, std::vector<size_t>& used,
                           int depth);

// Element-wise over two known values of equal size, or one of them a single number.
std::optional<Known> binary(const Known& a, const Known& b, double (*f)(double, double)) {
  const size_t n = std::max(a.v.size(), b.v.size());
  if (a.v.size() != n && a.v.size() != 1) return std::nullopt;
  if (b.v.size() != n && b.v.size() != 1) return std::nullopt;
  Known out{{}, a.v.size() == n ? a.rank : b.rank};
  if (a.rank >= 0 && b.rank >= 0) out.rank = std::max(a.rank, b.rank);
  for (size_t i = 0; i < n; ++i)
    out.v.push_back(f(a.v[a.v.size() == 1 ? 0 : i], b.v[b.v.size() == 1 ? 0 : i]));
  return out;
}

std::optional<Known> fold(const Rewriter& r, const Node& n, std::vector<size_t>& used, int depth) {
  const std::string& op = n.op_type;
  if (n.inputs.empty() || n.inputs[0].empty()) return std::nullopt;
  if (op == "Shape" || op == "Size") {
    const TypeShape& t = r.type(n.inputs[0]);
    if (!t.is_static()) return std::nullopt;
    const auto rank = static_cast<int64_t>(t.dims.size());
    if (op == "Size") {
      double size = 1;
      for (int64_t d : t.dims) size *= static_cast<double>(d);
      return Known{{size}, 0};
    }
    auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
    const int64_t start = clamp(n.attr_int("start", 0)), end = clamp(n.attr_int("end", rank));
    Known out{{}, 1};
    for (int64_t i = start; i < end; ++i) out.v.push_back(static_cast<double>(t.dims[i]));
    return out;
  }
  std::optional<Known> a = known(r, n.inputs[0], used, depth + 1);
  if (!a) return std::nullopt;
  if (op == "Identity" || op == "Squeeze" || op == "Unsqueeze" || op == "Reshape" ||
      op == "Flatten") {
    if (a->v.size() == 1)
      a->rank = op == "Squeeze" ? 0 : -1;
    else
      a->rank = -1;
    return a;
  }
  if (op == "Cast") {
    const auto to = static_cast<DType>(n.attr_int("to", 0));
    for (double& x : a->v) {
      if (to == DType::Bool)
        x = x != 0;
      else if (to != DType::Float32 && to != DType::Float64 && to != DType::Float16)
        x = std::trunc(x);
    }
    return a;
  }
  if (op == "Not") {
    for (double& x : a->v) x = x == 0;
    return a;
  }
  if (op == "Gather") {
    if (a->rank != 1 || n.attr_int("axis", 0) != 0 || n.inputs.size() < 2) return std::nullopt;
    std::optional<Known> idx = known(r, n.inputs[1], used, depth + 1);
    if (!idx || idx->v.size() != 1 || idx->rank != 0) return std::nullopt;
    auto i = static_cast<int64_t>(idx->v[0]);
    const auto size = static_cast<int64_t>(a->v.size());
    if (i < 0) i += size;
    if (i < 0 || i >= size) return std::nullopt;  // the plan reports the bad index
    return Known{{a->v[static_cast<size_t>(i)]}, 0};
  }
  using F = double (*)(double, double);
  static const std::map<std::string, F> ops = {
      {"Equal", [](double x, double y) { return double(x == y); }},
      {"Greater", [](double x, double y) { return double(x > y); }},
      {"Less", [](double x, double y) { return double(x < y); }},
      {"GreaterOrEqual", [](double x, double y) { return double(x >= y); }},
      {"LessOrEqual", [](double x, double y) { return double(x <= y); }},
      {"And", [](double x, double y) { return double(x != 0 && y != 0); }},
      {"Or", [](double x, double y) { return double(x != 0 || y != 0); }},
      {"Xor", [](double x, double y) { return double((x != 0) != (y != 0)); }},
  };
  auto it = ops.find(op);
  if (it == ops.end() || n.inputs.size() != 2) return std::nullopt;
  std::optional<Known> b = known(r, n.inputs[1], used, depth + 1);
  if (!b) return std::nullopt;
  return binary(*a, *b, it->second);
}

std::optional<Known> known(const Rewriter& r, const std::string& v, std::vector<size_t>& used,
                           int depth) {
  if (depth > 16 || v.empty()) return std::nullopt;
  if (const Tensor* t = r.constant(v)) {
    if (t->numel() > kMaxKnown) return std::nullopt;
    Known k{{}, t->rank()};
    for (int64_t i = 0; i < t->numel(); ++i) {
      std::optional<double> e = element(*t, i);
      if (!e) return std::nullopt;
      k.v.push_back(*e);
    }
    return k;
  }
  const Node* p = r.producer(v);
  if (!p || !p->domain.empty() || p->outputs.size() != 1) return std::nullopt;
  std::optional<Known> k = fold(r, *p, used, depth);
  if (k && k->v.size() <= static_cast<size_t>(kMaxKnown)) {
    used.push_back(r.index_of(p));
    return k;
  }
  return std::nullopt;
}

}  // namespace

void inline_constant_ifs(Rewriter& r) {
  for (size_t i : r.order()) {
    const Node& n = r.node(i);
    if (!is_op(&n, "If") || !r.live(i) || !n.has_input(0)) continue;
    std::vector<size_t> used;
    std::optional<Known> cond = known(r, n.inputs[0], used, 0);
    if (!cond || cond->v.size() != 1) continue;
    const Attribute* branch = n.attr(cond->v[0] != 0 ? "then_branch" : "else_branch");
    if (!branch || !branch->g) continue;
    if (r.inline_graph(i, *branch->g)) {
      r.drop_unread(used);
      r.count("constant if");
    }
  }
}

}  // namespace quilt::optimize
