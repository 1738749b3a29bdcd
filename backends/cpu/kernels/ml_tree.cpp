// The CPU kernels of ai.onnx.ml TreeEnsembleRegressor and TreeEnsembleClassifier (v1 and v3: the
// *_as_tensor attributes too). At session creation the node arrays are compiled into one flat
// array of nodes per ensemble (core/ops/ml_attrs.hpp), each tree laid out depth-first from its
// root, with the children as absolute indices and the leaves pointing at their weights; malformed
// ensembles are refused by the schema before that. Float ensembles that qualify are laid out once
// more as complete trees walked 16 at a time without branches (ml_tree_complete.hpp); the others
// walk blocks of rows through every tree (trees outer, rows inner, so a tree's nodes stay in
// cache), eight rows at a time in lockstep so that their chains of dependent loads overlap. The
// row blocks spread over the pool; a few rows and many trees split the trees over the pool
// instead, and a run of under 1,024 walk steps stays on the calling thread. Aggregation, base
// values, post-transforms and the binary-classifier conventions follow onnxruntime's, in the
// threshold type (double for double X, float otherwise) as it does, so that labels agree exactly.
#include <cmath>
#include <map>
#include <utility>

#include "backends/cpu/kernels/ml_common.hpp"
#include "backends/cpu/kernels/ml_tree_complete.hpp"

namespace quilt::cpu {

void register_cpu_ml_tree(KernelRegistry& r);

namespace {

using namespace ml;

// Per-row accumulators: a score and whether any leaf wrote it, per target.
template <class T>
struct Scores {
  std::vector<T> s;
  std::vector<uint8_t> has;
  void reset(size_t n) {
    s.assign(n, T(0));
    has.assign(n, 0);
  }
};

template <class T>
class TreeKernel : public Kernel {
 public:
  TreeKernel(const Node& n, bool classifier)
      : classifier_(classifier),
        transform_(post_transform_of(n)),
        aggregate_(classifier ? Aggregate::Sum : aggregate_of(n)) {
    if (classifier) {
      labels_ = n.attr_ints("classlabels_int64s");
      targets_ = static_cast<int64_t>(labels_.size());
    } else {
      targets_ = n.attr_int("n_targets", 0);
    }
    forest_ = compile<T>(n, classifier ? "class" : "target", targets_);
    if constexpr (std::is_same_v<T, float>) {
      // Dense rows of weights only where the leaves are summed (MIN and MAX take the leaf walk).
      const bool sums = aggregate_ == Aggregate::Sum || aggregate_ == Aggregate::Average;
      complete_ = CompleteForest::build(forest_, sums ? targets_ : 0);
    }
    base_ = floats_or_tensor<T>(n, "base_values");  // its length checked by the schema
    if (classifier) {
      std::vector<uint8_t> used(static_cast<size_t>(targets_), 0);
      size_t distinct = 0;
      for (const auto& w : forest_.weights) {
        distinct += used[static_cast<size_t>(w.target)] == 0;
        used[static_cast<size_t>(w.target)] = 1;
        if (w.value < 0) all_positive_ = false;
      }
      binary_ = targets_ == 2 && distinct == 1;
    }
  }

  void run(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const Rows<T> rows = rows_of<T>(x);
    if (forest_.max_feature >= rows.cols)
      ctx.node.fail("the trees read feature " + std::to_string(forest_.max_feature) +
                        " but X has " + std::to_string(rows.cols) + " features",
                    ErrorCode::InvalidArgument);
    const auto targets = static_cast<size_t>(targets_);
    float* z = classifier_ ? (ctx.wants_output(1) ? ctx.output(1).template data<float>() : nullptr)
                           : ctx.output(0).template data<float>();
    int64_t* y =
        classifier_ && ctx.wants_output(0) ? ctx.output(0).template data<int64_t>() : nullptr;
    std::vector<float> z_scratch;
    std::vector<int64_t> y_scratch;
    if (!z) {
      z_scratch.resize(static_cast<size_t>(rows.rows) * targets);
      z = z_scratch.data();
    }
    if (classifier_ && !y) {
      y_scratch.resize(static_cast<size_t>(rows.rows));
      y = y_scratch.data();
    }
    const int threads = ctx.pool.threads();
    // Units of work along the trees: groups of 16 trees in the complete layout, else trees.
    const bool complete = complete_ok();
    const auto units = complete ? complete_.groups() : static_cast<int64_t>(forest_.roots.size());
    // Rows x units small enough (in walk steps) to stay on the calling thread: one row through a
    // 500-tree, depth-8 forest is 256 steps, a few microseconds, less than handing half of it to
    // another core costs.
    const bool inline_run =
        threads == 1 || (complete && rows.rows * units * complete_.depth() < 1024);
    if (!inline_run && rows.rows < threads && units >= 2 * threads) {
      // Few rows, many trees: each task evaluates a range of trees on every row.
      std::vector<Scores<T>> part(static_cast<size_t>(rows.rows) * static_cast<size_t>(threads));
      ctx.pool.for_each_task(threads, [&](int64_t t) {
        const int64_t u0 = units * t / threads, u1 = units * (t + 1) / threads;
        for (int64_t r = 0; r < rows.rows; ++r) {
          Scores<T>& sc = part[static_cast<size_t>(t * rows.rows + r)];
          sc.reset(targets);
          accumulate(rows.data + r * rows.cols, rows.cols, u0, u1, sc);
        }
      });
      for (int64_t r = 0; r < rows.rows; ++r) {
        Scores<T>& total = part[static_cast<size_t>(r)];
        for (int t = 1; t < threads; ++t)
          merge(total, part[static_cast<size_t>(t * rows.rows + r)]);
        finalize(total, z + static_cast<size_t>(r) * targets, y ? y + r : nullptr);
      }
      return;
    }
    // Row blocks as large as the threads allow up to 256 rows (each block reads every tree once;
    // 64-row blocks read a 500-tree forest four times as often and ran ~1.5x slower on 1,000 rows).
    const int64_t block = inline_run
                              ? std::max<int64_t>(rows.rows, 1)
                              : std::clamp<int64_t>((rows.rows + threads - 1) / threads, 8, 256);
    const int64_t blocks = (rows.rows + block - 1) / block;
    auto run_blocks = [&](int64_t b0, int64_t b1) {
      std::vector<Scores<T>> sc(static_cast<size_t>(block));
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t r0 = b * block, r1 = std::min(rows.rows, r0 + block);
        for (int64_t r = r0; r < r1; ++r) sc[static_cast<size_t>(r - r0)].reset(targets);
        if (complete) {
          accumulate_rows(rows.data + r0 * rows.cols, rows.cols, r1 - r0, sc.data());
        } else {
          walk_rows(rows.data + r0 * rows.cols, rows.cols, r1 - r0, sc.data());
        }
        for (int64_t r = r0; r < r1; ++r)
          finalize(sc[static_cast<size_t>(r - r0)], z + static_cast<size_t>(r) * targets,
                   y ? y + r : nullptr);
      }
    };
    if (inline_run)
      run_blocks(0, blocks);
    else
      ctx.pool.parallel_for(blocks, 1, run_blocks);
  }

 private:
  bool complete_ok() const {
    if constexpr (std::is_same_v<T, float>) return complete_.ok();
    return false;
  }

  // Adds the leaves row x reaches in units [u0, u1): groups of 16 trees in the complete layout,
  // else trees, walked node by node.
  void accumulate(const T* x, int64_t cols, int64_t u0, int64_t u1, Scores<T>& sc) const {
    if constexpr (std::is_same_v<T, float>) {
      if (complete_.ok()) {
        constexpr int kWalks = CompleteForest::kMaxWalks;
        int64_t groups[kWalks];
        const float* rows[kWalks] = {x, x, x, x};
        int32_t slots[kWalks * CompleteForest::kLanes];
        for (int64_t g = u0; g < u1; g += kWalks) {
          const int n = static_cast<int>(std::min<int64_t>(kWalks, u1 - g));
          for (int j = 0; j < n; ++j) groups[j] = g + j;
          complete_.walk(groups, rows, n, cols, slots);
          add_slots(slots, n * CompleteForest::kLanes, x, sc);
        }
        return;
      }
    }
    for (int64_t t = u0; t < u1; ++t) {
      const int32_t root = forest_.roots[static_cast<size_t>(t)];
      add_leaf(forest_.all_leq ? forest_.template leaf<true>(root, x)
                               : forest_.template leaf<false>(root, x),
               sc);
    }
  }

  // Adds the leaves of n rows (x, x + cols, ...) in every group of the complete layout: group by
  // group (a group's branches, 32 KB at depth 8, stay in cache for all the rows), four rows'
  // walks at a time; fewer rows than that walk four groups at a time instead.
  void accumulate_rows(const T* x, int64_t cols, int64_t n, Scores<T>* sc) const {
    if constexpr (std::is_same_v<T, float>) {
      constexpr int kWalks = CompleteForest::kMaxWalks;
      if (n < kWalks) {
        for (int64_t r = 0; r < n; ++r)
          accumulate(x + r * cols, cols, 0, complete_.groups(), sc[r]);
        return;
      }
      int64_t groups[kWalks];
      const float* rows[kWalks];
      int32_t slots[kWalks * CompleteForest::kLanes];
      for (int64_t g = 0; g < complete_.groups(); ++g) {
        std::fill(groups, groups + kWalks, g);
        for (int64_t r = 0; r < n; r += kWalks) {
          const int m = static_cast<int>(std::min<int64_t>(kWalks, n - r));
          for (int j = 0; j < m; ++j) rows[j] = x + (r + j) * cols;
          complete_.walk(groups, rows, m, cols, slots);
          for (int j = 0; j < m; ++j)
            add_slots(slots + j * CompleteForest::kLanes, CompleteForest::kLanes, rows[j],
                      sc[r + j]);
        }
      }
    }
  }

  // Adds what the complete layout's walk of row x reached: dense rows of weights, or leaves;
  // a tail slot is first walked on node by node to its leaf.
  void add_slots(int32_t* slots, int n, const T* x, Scores<T>& sc) const {
    if constexpr (std::is_same_v<T, float>) {
      if (complete_.tails())
        for (int i = 0; i < n; ++i) {
          if (slots[i] >= -1) continue;
          const int32_t node = CompleteForest::tail_node(slots[i]);
          const auto& leaf = forest_.all_leq ? forest_.template leaf<true>(node, x)
                                             : forest_.template leaf<false>(node, x);
          const auto id = static_cast<int32_t>(&leaf - forest_.nodes.data());
          slots[i] = complete_.dense() ? complete_.dense_row(id) : id;
        }
      if (complete_.dense()) {
        // Every leaf writes every target.
        complete_.add_dense(slots, n, sc.s.data());
        if (slots[0] >= 0) std::fill(sc.has.begin(), sc.has.end(), uint8_t{1});
        return;
      }
    }
    for (int i = 0; i < n; ++i)
      if (slots[i] >= 0) add_leaf(forest_.nodes[static_cast<size_t>(slots[i])], sc);
  }

  // Adds the leaves of n rows (x, x + cols, ...) in every tree, walked node by node, eight rows in
  // lockstep so that their chains of dependent loads overlap.
  void walk_rows(const T* x, int64_t cols, int64_t n, Scores<T>* sc) const {
    constexpr int kLanes = 8;
    const auto trees = static_cast<int64_t>(forest_.roots.size());
    for (int64_t t = 0; t < trees; ++t) {
      const int32_t root = forest_.roots[static_cast<size_t>(t)];
      for (int64_t r = 0; r < n; r += kLanes) {
        const int m = static_cast<int>(std::min<int64_t>(kLanes, n - r));
        const typename Forest<T>::Flat* found[kLanes];
        if (forest_.all_leq)
          forest_.template leaves<true, kLanes>(root, x + r * cols, cols, m, found);
        else
          forest_.template leaves<false, kLanes>(root, x + r * cols, cols, m, found);
        for (int i = 0; i < m; ++i) add_leaf(*found[i], sc[r + i]);
      }
    }
  }

  void add_leaf(const typename Forest<T>::Flat& leaf, Scores<T>& sc) const {
    const auto* w = forest_.weights.data() + leaf.yes;
    for (int32_t k = 0; k < leaf.no; ++k, ++w) {
      const auto i = static_cast<size_t>(w->target);
      T& s = sc.s[i];
      switch (aggregate_) {
        case Aggregate::Min:
          s = !sc.has[i] || w->value < s ? w->value : s;
          break;
        case Aggregate::Max:
          s = !sc.has[i] || w->value > s ? w->value : s;
          break;
        default:
          s += w->value;
      }
      sc.has[i] = 1;
    }
  }

  void merge(Scores<T>& a, const Scores<T>& b) const {
    for (size_t i = 0; i < a.s.size(); ++i) {
      if (!b.has[i]) continue;
      switch (aggregate_) {
        case Aggregate::Min:
          a.s[i] = a.has[i] && a.s[i] < b.s[i] ? a.s[i] : b.s[i];
          break;
        case Aggregate::Max:
          a.s[i] = a.has[i] && a.s[i] > b.s[i] ? a.s[i] : b.s[i];
          break;
        default:
          a.s[i] += b.s[i];
      }
      a.has[i] = 1;
    }
  }

  void finalize(Scores<T>& sc, float* z, int64_t* y) const {
    if (classifier_)
      finalize_classifier(sc, z, y);
    else
      finalize_regressor(sc, z);
  }

  void finalize_regressor(Scores<T>& sc, float* z) const {
    const auto trees = static_cast<T>(forest_.roots.size());
    if (targets_ == 1) {
      const T origin = base_.size() == 1 ? base_[0] : T(0);
      T v = sc.s[0];
      switch (aggregate_) {
        case Aggregate::Average:
          v = v / trees + origin;
          break;
        case Aggregate::Sum:
          v += origin;
          break;
        default:
          v = sc.has[0] ? v + origin : origin;
      }
      z[0] = transform_ == PostTransform::Probit ? probit(static_cast<float>(v))
                                                 : static_cast<float>(v);
      return;
    }
    const bool use_base = static_cast<int64_t>(base_.size()) == targets_;
    for (size_t k = 0; k < sc.s.size(); ++k) {
      const T base = use_base ? base_[k] : T(0);
      T v = sc.s[k];
      switch (aggregate_) {
        case Aggregate::Average:
          v = v / trees + base;
          break;
        case Aggregate::Sum:
          v += base;
          break;
        default:
          v = base + (sc.has[k] ? v : T(0));
      }
      // A target no leaf wrote is 0, whatever its base value (onnxruntime's reading).
      z[k] = sc.has[k] ? static_cast<float>(v) : 0.0f;
    }
    transform_row(transform_, z, sc.s.size());
  }

  void finalize_classifier(Scores<T>& sc, float* z, int64_t* y) const {
    auto& s = sc.s;
    auto& has = sc.has;
    int second = -1;
    size_t count = s.size();
    if (targets_ > 2) {
      for (size_t k = 0; k < base_.size(); ++k) {
        s[k] = has[k] ? s[k] + base_[k] : base_[k];
        has[k] = 1;
      }
      int64_t best = -1;
      for (size_t k = 0; k < count; ++k)
        if (has[k] && (best < 0 || s[k] > s[static_cast<size_t>(best)]))
          best = static_cast<int64_t>(k);
      *y = labels_[static_cast<size_t>(std::max<int64_t>(best, 0))];
    } else {
      if (base_.size() == 2) {
        if (has[1]) {
          // onnxruntime's reading of a binary ensemble with two base values: the margin is
          // base_values[1] plus the class-0 score (the spec leaves this case open).
          s[1] = base_[1] + s[0];
          s[0] = -s[1];
        } else {
          s[1] += base_[1];
          s[0] += base_[0];
        }
      } else if (base_.size() == 1) {
        s[0] += base_[0];
        if (!has[1]) count = 1;
      } else {
        second = 3;
        if (!has[1]) count = 1;
      }
      const T pos = count == 2 && has[1] ? s[1] : (has[0] ? s[0] : T(0));
      if (binary_) {
        if (all_positive_) {
          second = pos > T(0.5) ? 0 : 1;
        } else {
          second = pos > 0 ? 2 : 3;
        }
        *y = labels_[second == 0 || second == 2 ? 1 : 0];
      } else {
        *y = pos > 0 ? 1 : 0;  // onnxruntime's labels for this case, whatever the class labels
      }
    }
    // A class no leaf (nor a base value, above two classes) wrote scores 0 before the transform:
    // onnxruntime's reading, which the binary conventions rely on.
    if (count >= 2) {
      for (size_t k = 0; k < count; ++k) z[k] = has[k] ? static_cast<float>(s[k]) : 0.0f;
      transform_row(transform_, z, count);
    } else {
      write_binary(transform_, second, has[0] ? static_cast<float>(s[0]) : 0.0f, z);
    }
  }

  bool classifier_;
  PostTransform transform_;
  Aggregate aggregate_;
  int64_t targets_ = 0;
  std::vector<int64_t> labels_;
  std::vector<T> base_;
  Forest<T> forest_;
  CompleteForest complete_;  // float ensembles that qualify (ml_tree_complete.hpp)
  bool binary_ = false, all_positive_ = true;
};

SupportFn tree_support() {
  return [](const NodeSignature& sig) { return numeric_x(sig); };
}

KernelFactory tree_factory(bool classifier) {
  return [classifier](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
    if (sig.inputs[0].dtype == DType::Float64)
      return std::make_unique<TreeKernel<double>>(sig.node, classifier);
    return std::make_unique<TreeKernel<float>>(sig.node, classifier);
  };
}

}  // namespace

void register_cpu_ml_tree(KernelRegistry& r) {
  r.add("TreeEnsembleRegressor", tree_support(), tree_factory(false), "ai.onnx.ml");
  r.add("TreeEnsembleClassifier", tree_support(), tree_factory(true), "ai.onnx.ml");
}

}  // namespace quilt::cpu
