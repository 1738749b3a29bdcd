// The attributes the ai.onnx.ml ops share, read and checked once: post_transform, the float
// lists that v3 may give as double tensors (*_as_tensor), and the tree ensembles' node arrays
// compiled into a flat forest. The schemas (core/ops/ml.cpp) compile a forest at session creation
// so that a malformed ensemble is an InvalidModel error naming what is wrong; the CPU kernels
// (backends/cpu/kernels/ml_tree.cpp) compile the one they run.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/graph.hpp"

namespace quilt::ml {

enum class PostTransform { None, Logistic, Softmax, SoftmaxZero, Probit };

inline PostTransform post_transform_of(const Node& n) {
  const std::string s = n.attr_string("post_transform", "NONE");
  if (s == "NONE") return PostTransform::None;
  if (s == "LOGISTIC") return PostTransform::Logistic;
  if (s == "SOFTMAX") return PostTransform::Softmax;
  if (s == "SOFTMAX_ZERO") return PostTransform::SoftmaxZero;
  if (s == "PROBIT") return PostTransform::Probit;
  n.fail("attribute 'post_transform' is '" + s +
         "', expected NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT");
}

// Float values of an attribute given as floats or as a tensor (the *_as_tensor variants of
// tree ensembles v3), converted to T; fails naming both when the node has both.
template <class T>
std::vector<T> floats_or_tensor(const Node& n, const std::string& name) {
  const std::string tname = name + "_as_tensor";
  const bool has_f = n.has_attr(name), has_t = n.has_attr(tname);
  if (has_f && has_t) n.fail("attributes '" + name + "' and '" + tname + "' are both set");
  std::vector<T> out;
  if (has_t) {
    const Tensor* t = n.attr_tensor(tname);
    if (t->dtype() != DType::Float32 && t->dtype() != DType::Float64)
      n.fail("attribute '" + tname + "' is " + dtype_name(t->dtype()) +
             ", expected float or double");
    for (int64_t i = 0; i < t->numel(); ++i)
      out.push_back(t->dtype() == DType::Float32 ? static_cast<T>(t->data<float>()[i])
                                                 : static_cast<T>(t->data<double>()[i]));
    return out;
  }
  for (float f : n.attr_floats(name)) out.push_back(static_cast<T>(f));
  return out;
}

enum class Mode : uint8_t { Leq, Lt, Gte, Gt, Eq, Neq, Leaf };
enum class Aggregate { Average, Sum, Min, Max };

inline Mode mode_of(const Node& n, const std::string& s) {
  if (s == "BRANCH_LEQ") return Mode::Leq;
  if (s == "BRANCH_LT") return Mode::Lt;
  if (s == "BRANCH_GTE") return Mode::Gte;
  if (s == "BRANCH_GT") return Mode::Gt;
  if (s == "BRANCH_EQ") return Mode::Eq;
  if (s == "BRANCH_NEQ") return Mode::Neq;
  if (s == "LEAF") return Mode::Leaf;
  n.fail("nodes_modes has '" + s +
         "', expected BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ or LEAF");
}

inline Aggregate aggregate_of(const Node& n) {
  const std::string s = n.attr_string("aggregate_function", "SUM");
  if (s == "AVERAGE") return Aggregate::Average;
  if (s == "SUM") return Aggregate::Sum;
  if (s == "MIN") return Aggregate::Min;
  if (s == "MAX") return Aggregate::Max;
  n.fail("attribute 'aggregate_function' is '" + s + "', expected AVERAGE, SUM, MIN or MAX");
}

// The compiled ensemble. T is the threshold and score type.
template <class T>
struct Forest {
  struct Flat {
    T value = 0;
    int32_t feature = -1;  // -1: a leaf
    int32_t yes = 0;       // branch: index of the true child; leaf: first weight
    int32_t no = 0;        // branch: index of the false child; leaf: number of weights
    Mode mode = Mode::Leaf;
    bool missing_true = false;
  };
  struct Weight {
    int32_t target;
    T value;
  };
  std::vector<Flat> nodes;
  std::vector<Weight> weights;
  std::vector<int32_t> roots;
  int64_t max_feature = -1;
  bool all_leq = true;  // every branch is BRANCH_LEQ without a missing-value track

  // The child of branch nd that row x goes to.
  template <bool kAllLeq>
  const Flat* step(const Flat* nd, const T* x) const {
    const T v = x[nd->feature];
    bool go;
    if constexpr (kAllLeq) {
      go = v <= nd->value;
    } else {
      switch (nd->mode) {
        case Mode::Leq:
          go = v <= nd->value;
          break;
        case Mode::Lt:
          go = v < nd->value;
          break;
        case Mode::Gte:
          go = v >= nd->value;
          break;
        case Mode::Gt:
          go = v > nd->value;
          break;
        case Mode::Eq:
          go = v == nd->value;
          break;
        default:
          go = v != nd->value;
      }
      if (nd->missing_true && std::isnan(v)) go = true;
    }
    return nodes.data() + (go ? nd->yes : nd->no);
  }

  template <bool kAllLeq>
  const Flat& leaf(int32_t root, const T* x) const {
    const Flat* nd = nodes.data() + root;
    while (nd->feature >= 0) nd = step<kAllLeq>(nd, x);
    return *nd;
  }

  // The leaves of n <= kLanes rows (x, x + stride, ...) in the tree at root, walked in lockstep:
  // their chains of dependent loads overlap instead of running one after the other.
  template <bool kAllLeq, int kLanes>
  void leaves(int32_t root, const T* x, int64_t stride, int n, const Flat** out) const {
    for (int i = 0; i < n; ++i) out[i] = nodes.data() + root;
    for (bool moved = true; moved;) {
      moved = false;
      for (int i = 0; i < n; ++i)
        if (out[i]->feature >= 0) {
          out[i] = step<kAllLeq>(out[i], x + i * stride);
          moved = true;
        }
    }
  }
};

// Compiles the nodes_* arrays and the `prefix`_ids/_nodeids/_treeids/_weights of node n
// ("target" for the regressor, "class" for the classifier) with `targets` outputs.
template <class T>
Forest<T> compile(const Node& n, const std::string& prefix, int64_t targets) {
  const auto tree_ids = n.attr_ints("nodes_treeids");
  const auto node_ids = n.attr_ints("nodes_nodeids");
  const auto features = n.attr_ints("nodes_featureids");
  const auto modes = n.attr_strings("nodes_modes");
  const auto true_ids = n.attr_ints("nodes_truenodeids");
  const auto false_ids = n.attr_ints("nodes_falsenodeids");
  const auto values = floats_or_tensor<T>(n, "nodes_values");
  const auto missing = n.attr_ints("nodes_missing_value_tracks_true");
  const size_t count = tree_ids.size();
  if (count == 0) n.fail("attribute 'nodes_treeids' is empty: the ensemble has no node");
  auto same = [&](const char* name, size_t size, bool optional = false) {
    if (size != count && !(optional && size == 0))
      n.fail(std::string("attribute '") + name + "' has " + std::to_string(size) +
             " entries, nodes_treeids " + std::to_string(count));
  };
  same("nodes_nodeids", node_ids.size());
  same("nodes_featureids", features.size());
  same("nodes_modes", modes.size());
  same("nodes_truenodeids", true_ids.size());
  same("nodes_falsenodeids", false_ids.size());
  same("nodes_values", values.size());
  same("nodes_missing_value_tracks_true", missing.size(), true);
  if (count > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2))
    n.fail("the ensemble has too many nodes");

  std::map<std::pair<int64_t, int64_t>, int32_t> index;  // (tree, node id) -> attribute index
  std::vector<int32_t> roots_attr;
  std::map<int64_t, bool> seen_tree;
  for (size_t i = 0; i < count; ++i) {
    if (!index.emplace(std::pair{tree_ids[i], node_ids[i]}, static_cast<int32_t>(i)).second)
      n.fail("node " + std::to_string(node_ids[i]) + " of tree " + std::to_string(tree_ids[i]) +
             " appears twice");
    if (seen_tree.emplace(tree_ids[i], true).second)
      roots_attr.push_back(static_cast<int32_t>(i));  // a tree's first node is its root
  }
  auto where = [&](size_t i) {
    return "node " + std::to_string(node_ids[i]) + " of tree " + std::to_string(tree_ids[i]);
  };

  // Weights per leaf, in attribute order.
  const std::string p = prefix + "_";
  const auto w_ids = n.attr_ints(p + "ids");
  const auto w_nodes = n.attr_ints(p + "nodeids");
  const auto w_trees = n.attr_ints(p + "treeids");
  const auto w_values = floats_or_tensor<T>(n, p + "weights");
  for (const auto& [name, size] :
       {std::pair{p + "nodeids", w_nodes.size()}, std::pair{p + "treeids", w_trees.size()},
        std::pair{p + "weights", w_values.size()}})
    if (size != w_ids.size())
      n.fail("attribute '" + name + "' has " + std::to_string(size) + " entries, " + p + "ids " +
             std::to_string(w_ids.size()));
  std::vector<std::vector<std::pair<int32_t, T>>> leaf_weights(count);
  for (size_t k = 0; k < w_ids.size(); ++k) {
    if (w_ids[k] < 0 || w_ids[k] >= targets)
      n.fail("attribute '" + p + "ids' has " + std::to_string(w_ids[k]) + ", out of range for " +
             std::to_string(targets) + (prefix == "class" ? " classes" : " targets"));
    const auto it = index.find({w_trees[k], w_nodes[k]});
    if (it == index.end())
      n.fail("a weight is for node " + std::to_string(w_nodes[k]) + " of tree " +
             std::to_string(w_trees[k]) + ", which is not in the ensemble");
    leaf_weights[static_cast<size_t>(it->second)].emplace_back(static_cast<int32_t>(w_ids[k]),
                                                               w_values[k]);
  }

  Forest<T> f;
  std::vector<int32_t> out(count, -1);
  std::vector<uint8_t> state(count, 0);  // 0 unvisited, 1 on the current path, 2 done
  struct Frame {
    int32_t attr;
    int stage;  // 0: true child next, 1: false child next, 2: done
  };
  auto child_of = [&](size_t i, bool yes) -> int32_t {
    const int64_t id = yes ? true_ids[i] : false_ids[i];
    const auto it = index.find({tree_ids[i], id});
    if (it == index.end())
      n.fail(where(i) + " has " + (yes ? "true" : "false") + " child " + std::to_string(id) +
             ", which is not in the tree");
    return it->second;
  };
  auto emit = [&](int32_t a) {
    const auto i = static_cast<size_t>(a);
    out[i] = static_cast<int32_t>(f.nodes.size());
    state[i] = 1;
    typename Forest<T>::Flat nd;
    nd.mode = mode_of(n, modes[i]);
    if (nd.mode == Mode::Leaf) {
      if (leaf_weights[i].empty()) n.fail(where(i) + " is a leaf without a weight");
      nd.yes = static_cast<int32_t>(f.weights.size());
      nd.no = static_cast<int32_t>(leaf_weights[i].size());
      for (const auto& [t, w] : leaf_weights[i]) f.weights.push_back({t, w});
      state[i] = 2;
    } else {
      if (features[i] < 0 || features[i] > std::numeric_limits<int32_t>::max())
        n.fail(where(i) + " has feature id " + std::to_string(features[i]));
      nd.feature = static_cast<int32_t>(features[i]);
      nd.value = values[i];
      nd.missing_true = !missing.empty() && missing[i] != 0;
      f.max_feature = std::max<int64_t>(f.max_feature, nd.feature);
      if (nd.mode != Mode::Leq || nd.missing_true) f.all_leq = false;
    }
    f.nodes.push_back(nd);
  };
  std::vector<Frame> stack;
  for (int32_t root : roots_attr) {
    if (state[static_cast<size_t>(root)] == 0) emit(root);
    f.roots.push_back(out[static_cast<size_t>(root)]);
    if (state[static_cast<size_t>(root)] == 1) stack.push_back({root, 0});
    while (!stack.empty()) {
      const Frame fr = stack.back();
      const auto i = static_cast<size_t>(fr.attr);
      if (fr.stage == 2) {
        state[i] = 2;
        stack.pop_back();
        continue;
      }
      ++stack.back().stage;
      const int32_t c = child_of(i, fr.stage == 0);
      const auto ci = static_cast<size_t>(c);
      if (state[ci] == 1)
        n.fail("tree " + std::to_string(tree_ids[i]) + " has a cycle: " + where(i) +
               " leads back to node " + std::to_string(node_ids[ci]));
      const bool fresh = state[ci] == 0;
      if (fresh) emit(c);
      auto& parent = f.nodes[static_cast<size_t>(out[i])];
      (fr.stage == 0 ? parent.yes : parent.no) = out[ci];
      if (fresh && state[ci] == 1) stack.push_back({c, 0});
    }
  }
  return f;
}

// Checks every attribute of a TreeEnsembleRegressor (classifier = false) or
// TreeEnsembleClassifier node, failing (InvalidModel) naming the first that is wrong.
inline void check_tree_ensemble(const Node& n, bool classifier) {
  post_transform_of(n);
  const int64_t targets = classifier
                              ? static_cast<int64_t>(n.attr_ints("classlabels_int64s").size())
                              : n.attr_int("n_targets", 0);
  if (!classifier) aggregate_of(n);
  compile<double>(n, classifier ? "class" : "target", targets);
  const auto base = floats_or_tensor<double>(n, "base_values");
  if (!base.empty() && base.size() != 1 && static_cast<int64_t>(base.size()) != targets)
    n.fail("attribute 'base_values' has " + std::to_string(base.size()) + " entries, expected " +
           std::to_string(targets) + (classifier ? " (one per class)" : " (one per target)"));
}

// A LinearRegressor's or LinearClassifier's attributes, checked.
struct LinearModel {
  std::vector<float> coefficients, intercepts;
  std::vector<int64_t> labels;  // classifier: classlabels_ints
  int64_t outputs = 1;          // regressor: targets; classifier: classes (intercepts)
  PostTransform transform = PostTransform::None;

  static LinearModel regressor(const Node& n) {
    LinearModel m = common(n);
    m.outputs = n.attr_int("targets", 1);
    if (m.outputs < 1) n.fail("attribute 'targets' must be >= 1");
    if (m.coefficients.size() % static_cast<size_t>(m.outputs) != 0)
      n.fail("attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
             " entries, not a multiple of targets " + std::to_string(m.outputs));
    if (!m.intercepts.empty() && m.intercepts.size() != static_cast<size_t>(m.outputs))
      n.fail("attribute 'intercepts' has " + std::to_string(m.intercepts.size()) +
             " entries, expected " + std::to_string(m.outputs) + " (one per target)");
    return m;
  }
  static LinearModel classifier(const Node& n) {
    LinearModel m = common(n);
    m.labels = n.attr_ints("classlabels_ints");
    m.outputs = static_cast<int64_t>(m.intercepts.size());
    if (m.outputs < 1) n.fail("attribute 'intercepts' is required (one per class)");
    if (m.coefficients.size() % m.intercepts.size() != 0)
      n.fail("attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
             " entries, not a multiple of the " + std::to_string(m.intercepts.size()) +
             " intercepts");
    if (m.outputs > 1 && m.labels.size() != m.intercepts.size())
      n.fail("attribute 'classlabels_ints' has " + std::to_string(m.labels.size()) +
             " labels for " + std::to_string(m.intercepts.size()) + " classes (intercepts)");
    return m;
  }
  int64_t features() const { return static_cast<int64_t>(coefficients.size()) / outputs; }

 private:
  static LinearModel common(const Node& n) {
    LinearModel m;
    m.coefficients = n.attr_floats("coefficients");
    m.intercepts = n.attr_floats("intercepts");
    m.transform = post_transform_of(n);
    if (m.coefficients.empty()) n.fail("attribute 'coefficients' is required");
    return m;
  }
};

enum class SvmKernel { Linear, Poly, Rbf, Sigmoid };

// An SVMRegressor's or SVMClassifier's attributes, checked. svc: support vectors (libsvm);
// else the coefficients are one linear model per class (liblinear).
struct SvmModel {
  SvmKernel kernel = SvmKernel::Linear;
  float gamma = 0, coef0 = 0, degree = 0;
  std::vector<float> coefficients, support, rho, prob_a, prob_b;
  std::vector<int64_t> per_class, start, labels;
  int64_t classes = 0, pairs = 0, vectors = 0, features = 0;
  bool svc = false, proba = false, all_positive = true, one_class = false;
  PostTransform transform = PostTransform::None;

  static SvmModel regressor(const Node& n) {
    SvmModel m = common(n);
    m.vectors = n.attr_int("n_supports", 0);
    m.one_class = n.attr_int("one_class", 0) != 0;
    if (m.vectors < 0) n.fail("attribute 'n_supports' is negative");
    m.svc = m.vectors > 0;
    if (m.svc) {
      if (m.support.empty() || m.support.size() % static_cast<size_t>(m.vectors) != 0)
        n.fail("attribute 'support_vectors' has " + std::to_string(m.support.size()) +
               " entries, not a multiple of n_supports " + std::to_string(m.vectors));
      if (m.coefficients.size() != static_cast<size_t>(m.vectors))
        n.fail("attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
               " entries, expected n_supports " + std::to_string(m.vectors));
      m.features = static_cast<int64_t>(m.support.size()) / m.vectors;
    } else {
      m.kernel = SvmKernel::Linear;
      m.features = static_cast<int64_t>(m.coefficients.size());
    }
    return m;
  }

  static SvmModel classifier(const Node& n) {
    SvmModel m = common(n);
    m.prob_a = n.attr_floats("prob_a");
    m.prob_b = n.attr_floats("prob_b");
    m.per_class = n.attr_ints("vectors_per_class");
    m.labels = n.attr_ints("classlabels_ints");
    m.classes = static_cast<int64_t>(m.labels.size());
    if (m.classes < 1) n.fail("attribute 'classlabels_ints' is required");
    m.pairs = m.classes * (m.classes - 1) / 2;
    if (m.prob_a.size() != m.prob_b.size())
      n.fail("attributes 'prob_a' (" + std::to_string(m.prob_a.size()) + ") and 'prob_b' (" +
             std::to_string(m.prob_b.size()) + ") differ in length");
    for (int64_t v : m.per_class) {
      if (v < 0) n.fail("attribute 'vectors_per_class' has a negative entry");
      m.start.push_back(m.vectors);
      m.vectors += v;
    }
    m.svc = m.vectors > 0;
    const auto size = [](const auto& v) { return static_cast<int64_t>(v.size()); };
    if (m.svc) {
      if (size(m.per_class) != m.classes)
        n.fail("attribute 'vectors_per_class' has " + std::to_string(m.per_class.size()) +
               " entries for " + std::to_string(m.classes) + " classes");
      if (m.support.size() % static_cast<size_t>(m.vectors) != 0)
        n.fail("attribute 'support_vectors' has " + std::to_string(m.support.size()) +
               " entries, not a multiple of the " + std::to_string(m.vectors) + " vectors");
      m.features = size(m.support) / m.vectors;
      if (size(m.coefficients) != (m.classes - 1) * m.vectors)
        n.fail("attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
               " entries, expected (classes - 1) x vectors = " +
               std::to_string((m.classes - 1) * m.vectors));
      if (size(m.rho) < m.pairs)
        n.fail("attribute 'rho' has " + std::to_string(m.rho.size()) +
               " entries, expected one per pair of classes (" + std::to_string(m.pairs) + ")");
      if (!m.prob_a.empty() && size(m.prob_a) < m.pairs)
        n.fail("attribute 'prob_a' has " + std::to_string(m.prob_a.size()) + " entries, expected " +
               std::to_string(m.pairs));
    } else {
      m.kernel = SvmKernel::Linear;
      if (m.coefficients.size() % static_cast<size_t>(m.classes) != 0)
        n.fail("attribute 'coefficients' has " + std::to_string(m.coefficients.size()) +
               " entries, not a multiple of the " + std::to_string(m.classes) + " classes");
      m.features = size(m.coefficients) / m.classes;
    }
    for (float c : m.coefficients)
      if (c < 0) m.all_positive = false;
    m.proba = !m.prob_a.empty();
    return m;
  }

 private:
  static SvmModel common(const Node& n) {
    SvmModel m;
    const std::string k = n.attr_string("kernel_type", "LINEAR");
    if (k == "LINEAR")
      m.kernel = SvmKernel::Linear;
    else if (k == "POLY")
      m.kernel = SvmKernel::Poly;
    else if (k == "RBF")
      m.kernel = SvmKernel::Rbf;
    else if (k == "SIGMOID")
      m.kernel = SvmKernel::Sigmoid;
    else
      n.fail("attribute 'kernel_type' is '" + k + "', expected LINEAR, POLY, RBF or SIGMOID");
    const auto params = n.attr_floats("kernel_params");
    if (!params.empty()) {
      if (params.size() != 3)
        n.fail("attribute 'kernel_params' has " + std::to_string(params.size()) +
               " entries, expected 3 (gamma, coef0, degree)");
      m.gamma = params[0];
      m.coef0 = params[1];
      m.degree = params[2];
    }
    m.coefficients = n.attr_floats("coefficients");
    m.support = n.attr_floats("support_vectors");
    m.rho = n.attr_floats("rho");
    m.transform = post_transform_of(n);
    if (m.coefficients.empty()) n.fail("attribute 'coefficients' is required");
    if (m.rho.empty()) n.fail("attribute 'rho' is required");
    return m;
  }
};

}  // namespace quilt::ml
