// The CPU TreeEnsemble kernel (ai.onnx.ml opset 5): the trees are unrolled from the node arrays
// at creation; each row walks every tree to a leaf and the leaf weights are aggregated per target.
#include <cmath>
#include <limits>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_misc_tree(KernelRegistry& r);

namespace {

std::vector<double> tensor_values(const Tensor* t) {
  std::vector<double> out;
  if (!t) return out;
  for (int64_t i = 0; i < t->numel(); ++i) {
    switch (t->dtype()) {
      case DType::Float32:
        out.push_back(t->data<float>()[i]);
        break;
      case DType::Float64:
        out.push_back(t->data<double>()[i]);
        break;
      case DType::Float16:
        out.push_back(half_to_float(static_cast<const uint16_t*>(t->raw_data())[i]));
        break;
      case DType::UInt8:
        out.push_back(t->data<uint8_t>()[i]);
        break;
      case DType::Int32:
        out.push_back(t->data<int32_t>()[i]);
        break;
      case DType::Int64:
        out.push_back(static_cast<double>(t->data<int64_t>()[i]));
        break;
      default:
        throw Error(ErrorCode::NotImplemented,
                    std::string("TreeEnsemble: attribute of dtype ") + dtype_name(t->dtype()));
    }
  }
  return out;
}

class TreeEnsemble : public Kernel {
 public:
  explicit TreeEnsemble(const Node& n) : node_(n) {
    splits_ = tensor_values(n.attr_tensor("nodes_splits"));
    modes_ = tensor_values(n.attr_tensor("nodes_modes"));
    features_ = n.attr_ints("nodes_featureids");
    true_ids_ = n.attr_ints("nodes_truenodeids");
    false_ids_ = n.attr_ints("nodes_falsenodeids");
    true_leafs_ = n.attr_ints("nodes_trueleafs");
    false_leafs_ = n.attr_ints("nodes_falseleafs");
    missing_true_ = n.attr_ints("nodes_missing_value_tracks_true");
    leaf_targets_ = n.attr_ints("leaf_targetids");
    leaf_weights_ = tensor_values(n.attr_tensor("leaf_weights"));
    const auto members = tensor_values(n.attr_tensor("membership_values"));
    targets_ = n.attr_int("n_targets", 0);
    aggregate_ = n.attr_int("aggregate_function", 1);
    const size_t count = splits_.size();
    if (modes_.size() != count || features_.size() != count || true_ids_.size() != count ||
        false_ids_.size() != count || true_leafs_.size() != count || false_leafs_.size() != count ||
        (!missing_true_.empty() && missing_true_.size() != count))
      n.fail("the nodes_* attributes must all have " + std::to_string(count) + " entries");
    if (leaf_targets_.size() != leaf_weights_.size())
      n.fail("leaf_targetids and leaf_weights differ in length");
    for (int64_t t : leaf_targets_)
      if (t < 0 || t >= targets_) n.fail("leaf target " + std::to_string(t) + " is out of range");
    size_t next_member = 0;
    const std::vector<int64_t> roots = n.attr_ints("tree_roots");
    // Each tree holds each node at most once; more unrolled nodes than that means the branches
    // share subtrees, which unroll exponentially, or loop (a fuzzed ensemble's root was its own
    // child), and is refused.
    max_nodes_ = (2 * count + leaf_weights_.size() + 1) * std::max<size_t>(roots.size(), 1);
    for (int64_t root : roots) {
      check_node(root);
      const auto r = static_cast<size_t>(root);
      const bool leaf = true_leafs_[r] && false_leafs_[r] && true_ids_[r] == false_ids_[r];
      roots_.push_back(build(root, leaf, members, next_member, 0));
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.output(0);
    const int64_t rows = x.dim(0), cols = x.rank() > 1 ? x.dim(1) : 1;
    for (const auto& nd : nodes_)
      if (nd.feature >= cols)
        ctx.node.fail("feature " + std::to_string(nd.feature) + " is out of range for " +
                          std::to_string(cols) + " columns",
                      ErrorCode::Runtime);
    const double init = aggregate_ == 2   ? std::numeric_limits<double>::max()
                        : aggregate_ == 3 ? std::numeric_limits<double>::lowest()
                                          : 0.0;
    const bool is_double = x.dtype() == DType::Float64;
    const double big = is_double ? std::numeric_limits<double>::max()
                                 : static_cast<double>(std::numeric_limits<float>::max());
    std::vector<double> row(static_cast<size_t>(cols)), result(static_cast<size_t>(targets_));
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < cols; ++j)
        row[static_cast<size_t>(j)] =
            is_double ? x.data<double>()[i * cols + j] : x.data<float>()[i * cols + j];
      // MIN / MAX start from the type's extremes, as the spec's reference does.
      std::fill(result.begin(), result.end(),
                aggregate_ == 2   ? big
                : aggregate_ == 3 ? -big
                                  : init);
      for (int32_t root : roots_) {
        int32_t cur = root;
        while (nodes_[static_cast<size_t>(cur)].leaf < 0) {
          const auto& nd = nodes_[static_cast<size_t>(cur)];
          cur =
              goes_true(nd, row[static_cast<size_t>(nd.feature)]) ? nd.true_child : nd.false_child;
        }
        const auto leaf = static_cast<size_t>(nodes_[static_cast<size_t>(cur)].leaf);
        double& out = result[static_cast<size_t>(leaf_targets_[leaf])];
        const double w = leaf_weights_[leaf];
        switch (aggregate_) {
          case 0:
            out += w / static_cast<double>(roots_.size());
            break;
          case 2:
            out = std::min(out, w);
            break;
          case 3:
            out = std::max(out, w);
            break;
          default:
            out += w;
        }
      }
      for (int64_t t = 0; t < targets_; ++t) {
        if (is_double)
          y.data<double>()[i * targets_ + t] = result[static_cast<size_t>(t)];
        else
          y.data<float>()[i * targets_ + t] = static_cast<float>(result[static_cast<size_t>(t)]);
      }
    }
  }

 private:
  struct TNode {
    int mode = 0;
    int64_t feature = 0;
    double split = 0;
    std::vector<double> members;
    bool missing_true = false;
    int32_t true_child = -1, false_child = -1;
    int64_t leaf = -1;  // >= 0: a leaf with this index into leaf_weights
  };

  static bool goes_true(const TNode& nd, double v) {
    if (std::isnan(v) && nd.missing_true) return true;
    switch (nd.mode) {
      case 0:
        return v <= nd.split;
      case 1:
        return v < nd.split;
      case 2:
        return v >= nd.split;
      case 3:
        return v > nd.split;
      case 4:
        return v == nd.split;
      case 5:
        return v != nd.split;
      default:
        for (double m : nd.members)
          if (m == v) return true;
        return false;
    }
  }

  void check_node(int64_t i) const {
    if (i < 0 || i >= static_cast<int64_t>(splits_.size()))
      node_.fail("node id " + std::to_string(i) + " is out of range");
  }

  // Unrolls the subtree at `index` (a leaf index when is_leaf) into nodes_, in the reference's
  // order: the node, its true branch, its false branch (set members are consumed in that order).
  // Depth is bounded at 1,000 levels: the recursion's frames must fit a thread's stack (10,000
  // overflowed the fuzzer's 8 MiB under AddressSanitizer on a cycle).
  int32_t build(int64_t index, bool is_leaf, const std::vector<double>& members, size_t& next,
                int depth) {
    if (depth > 1000) node_.fail("the trees are deeper than 1000 levels or have a cycle");
    if (nodes_.size() >= max_nodes_)
      node_.fail("the trees' branches share subtrees or loop (" + std::to_string(nodes_.size()) +
                 " nodes unrolled from " + std::to_string(splits_.size()) + " nodes and " +
                 std::to_string(leaf_weights_.size()) + " leaves)");
    const auto me = static_cast<int32_t>(nodes_.size());
    nodes_.emplace_back();
    if (is_leaf) {
      if (index < 0 || index >= static_cast<int64_t>(leaf_weights_.size()))
        node_.fail("leaf id " + std::to_string(index) + " is out of range");
      nodes_[static_cast<size_t>(me)].leaf = index;
      return me;
    }
    check_node(index);
    const auto i = static_cast<size_t>(index);
    TNode nd;
    nd.mode = static_cast<int>(modes_[i]);
    if (nd.mode < 0 || nd.mode > 6)
      node_.fail("node mode " + std::to_string(nd.mode) + " is unknown");
    nd.feature = features_[i];
    if (nd.feature < 0) node_.fail("negative feature id");
    nd.split = splits_[i];
    nd.missing_true = !missing_true_.empty() && missing_true_[i] != 0;
    if (nd.mode == 6) {
      while (next < members.size() && !std::isnan(members[next]))
        nd.members.push_back(members[next++]);
      if (next >= members.size()) node_.fail("membership_values has too few NaN-separated sets");
      ++next;
    }
    nd.true_child = build(true_ids_[i], true_leafs_[i] != 0, members, next, depth + 1);
    nd.false_child = build(false_ids_[i], false_leafs_[i] != 0, members, next, depth + 1);
    nodes_[static_cast<size_t>(me)] = std::move(nd);
    return me;
  }

  const Node& node_;  // used while building only: run() reports through its context
  std::vector<double> splits_, modes_, leaf_weights_;
  std::vector<int64_t> features_, true_ids_, false_ids_, true_leafs_, false_leafs_, missing_true_,
      leaf_targets_;
  int64_t targets_ = 0, aggregate_ = 1;
  std::vector<TNode> nodes_;
  size_t max_nodes_ = 0;  // build's bound on nodes_
  std::vector<int32_t> roots_;
};

}  // namespace

void register_cpu_misc_tree(KernelRegistry& r) {
  r.add(
      "TreeEnsemble",
      [](const NodeSignature& sig) -> std::string {
        const DType d = sig.inputs[0].dtype;
        if (d != DType::Float32 && d != DType::Float64)
          return std::string("X is ") + dtype_name(d) +
                 "; the CPU kernel supports float and double";
        if (sig.node.attr_int("post_transform", 0) != 0)
          return "post_transform other than NONE is not supported";
        const int64_t agg = sig.node.attr_int("aggregate_function", 1);
        if (agg < 0 || agg > 3) return "unknown aggregate_function " + std::to_string(agg);
        return "";
      },
      KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
        return std::make_unique<TreeEnsemble>(sig.node);
      }),
      "ai.onnx.ml");
}

}  // namespace quilt::cpu
