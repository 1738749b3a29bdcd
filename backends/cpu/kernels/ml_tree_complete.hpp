// A float tree ensemble re-laid out for evaluation without branches: every tree padded to a
// complete binary tree of the ensemble's depth D (a leaf above depth D fills all the slots below
// it), its branches in heap order (children of n at 2n+1, the true one, and 2n+2), and the trees
// interleaved 16 to a group, so that one walk of D steps takes a row through 16 trees at once
// (AVX-512: three gathers and a compare per step; elsewhere the same arithmetic one lane after
// the other, still with no branch that depends on the data). Up to four walks (groups of one row,
// or rows through one group) run in lockstep so that their chains of gathers overlap.
//
// A walk ends on a leaf slot. Where every leaf carries one weight per target (random forests,
// single-target regressors) the slot names a dense row of the leaf's weights, added with one
// vector add per leaf; otherwise it names the leaf's index in Forest::nodes, whose weights the
// kernel adds as the per-node walk does. Either way each target's sum is taken in tree order, so
// the scores are the per-node walk's to the last bit.
//
// The per-node walk mispredicts the branch at about every other level and waits on one
// dependent load per level; a 500-tree, depth-8 forest on one row took ~20 us. The layout is
// taken only where it fits: float thresholds; one branch mode for the whole ensemble (LEQ or LT,
// or GTE or GT, which become LT and LEQ with the children swapped; EQ and NEQ stay on the
// per-node walk). Trees deeper than kMaxDepth, or so lopsided that padding them would more than
// kMaxGrowth-fold the nodes, have only their top levels laid out; a walk that ends on a branch
// there finishes node by node (tails()).
#pragma once

#include <cstdint>
#include <vector>

#include "core/ops/ml_attrs.hpp"

namespace quilt::cpu::ml {

class CompleteForest {
 public:
  static constexpr int kLanes = 16;
  static constexpr int kMaxWalks = 4;
  static constexpr int kMaxDepth = 12;
  static constexpr int64_t kMaxGrowth = 16;

  // The layout of f, or an empty one (ok() false) where f does not qualify. `targets`: the
  // targets or classes whose weights may be kept as dense rows (0: never; the leaves are then
  // named by their node index).
  static CompleteForest build(const quilt::ml::Forest<float>& f, int64_t targets);

  bool ok() const { return groups_ > 0; }
  int depth() const { return depth_; }
  int64_t groups() const { return groups_; }
  // Whether the slots name dense rows of weights (add_dense) rather than leaves in Forest::nodes.
  bool dense() const { return dense_; }
  // Whether some trees go deeper than the laid-out levels: a walk may then end on a tail slot
  // (below -1), the branch of Forest::nodes at tail_node(slot), from which the caller walks on
  // node by node to a leaf and names it as a slot would (dense_row for a dense layout).
  bool tails() const { return tails_; }
  static int32_t tail_slot(int32_t node) { return -node - 2; }
  static int32_t tail_node(int32_t slot) { return -slot - 2; }
  int32_t dense_row(int32_t leaf_node) const { return row_[static_cast<size_t>(leaf_node)]; }

  // n <= kMaxWalks walks: row rows[i] (cols features) through the 16 trees of group groups[i].
  // Writes 16 slots per walk, lane by lane in tree order: a dense row or a leaf's index in
  // Forest::nodes, -1 for the padding lanes of the last group.
  void walk(const int64_t* groups, const float* const* rows, int n, int64_t cols,
            int32_t* out) const;

  // sums[k] += the weight for target k of each dense row in slots[0, n) (skipping -1), in order.
  void add_dense(const int32_t* slots, int n, float* sums) const;

  // Whether the AVX-512 walk is used: the CPU has AVX-512F and QUILT_CPU_ISA does not ask for
  // avx2 or scalar (the variable that forces the integer GEMM's paths).
  static bool vectorized();

 private:
  int depth_ = 0;
  int64_t groups_ = 0;
  int64_t targets_ = 0;
  bool dense_ = false;
  bool tails_ = false;
  std::vector<int32_t> row_;  // dense with tails: the dense row of each leaf node
  bool inclusive_ = true;     // the true child takes x <= threshold (else x < threshold)
  // [group][heap index < 2^D - 1][lane]: the feature (bit 31 set: a missing value goes to the
  // true child) and the threshold of each branch.
  std::vector<int32_t> feature_;
  std::vector<float> threshold_;
  // [group][slot < 2^D][lane]: the leaf (dense row or node index) each slot of the last level
  // stands for.
  std::vector<int32_t> leaf_;
  std::vector<float> values_;  // dense rows: [row][target]
};

}  // namespace quilt::cpu::ml
