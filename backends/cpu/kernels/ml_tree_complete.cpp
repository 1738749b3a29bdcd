#include "backends/cpu/kernels/ml_tree_complete.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>

#include "backends/cpu/avx512.hpp"
#include "backends/cpu/gcc12_avx512.hpp"

namespace quilt::cpu::ml {

using quilt::ml::Forest;
using quilt::ml::Mode;

namespace {

constexpr int kTooDeep = 1 << 20;
constexpr uint32_t kMissingTrue = 0x80000000u;

// Levels of branches below node i of f (0 for a leaf), or kTooDeep beyond `budget` levels.
// Memoised per node: a node reachable along several paths (a DAG) is measured once.
int depth_of(const Forest<float>& f, int32_t i, int budget, std::vector<int>& memo) {
  const auto k = static_cast<size_t>(i);
  if (memo[k] >= 0) return memo[k] <= budget ? memo[k] : kTooDeep;
  const auto& nd = f.nodes[k];
  if (nd.feature < 0) return memo[k] = 0;
  if (budget == 0) return kTooDeep;
  const int d =
      std::max(depth_of(f, nd.yes, budget - 1, memo), depth_of(f, nd.no, budget - 1, memo));
  if (d >= kTooDeep) return kTooDeep;
  return memo[k] = d + 1;
}

QUILT_GCC12_AVX512_BEGIN  // backends/cpu/gcc12_avx512.hpp

// Gathers of all 16 lanes.
__attribute__((target("avx512f"), always_inline)) inline __m512i gather_i(__m512i at,
                                                                          const int32_t* p) {
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xffff, at, p, 4);
}
__attribute__((target("avx512f"), always_inline)) inline __m512 gather_f(__m512i at,
                                                                         const float* p) {
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), 0xffff, at, p, 4);
}

// The flat arrays of a layout, for the walks.
struct Arrays {
  const int32_t* feature;
  const float* threshold;
  const int32_t* leaf;
  int64_t internal;  // branches per tree: 2^depth - 1
  int depth;
};

// kN walks in lockstep. kX: how a lane reads x[feature]: 1 a permute of the row's 16 floats,
// 2 a permute of two vectors (up to 32 features), 3 a gather.
template <bool kInclusive, int kX, int kN>
__attribute__((target("avx512f"))) void walk_avx512(const Arrays& a, const int64_t* groups,
                                                    const float* const* rows, int64_t cols,
                                                    int32_t* out) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i one = _mm512_set1_epi32(1), two = _mm512_set1_epi32(2);
  const __m512i index_bits = _mm512_set1_epi32(0x7fffffff), zero = _mm512_setzero_si512();
  const auto lo = static_cast<int>(std::min<int64_t>(cols, 16));
  const auto hi = static_cast<int>(std::clamp<int64_t>(cols - 16, 0, 16));
  __m512 x0[kN], x1[kN];
  const int32_t* feature[kN];
  const float* threshold[kN];
  __m512i node[kN];
  for (int j = 0; j < kN; ++j) {
    feature[j] = a.feature + groups[j] * a.internal * CompleteForest::kLanes;
    threshold[j] = a.threshold + groups[j] * a.internal * CompleteForest::kLanes;
    node[j] = zero;
    if constexpr (kX <= 2)
      x0[j] = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << lo) - 1), rows[j]);
    if constexpr (kX == 2)
      x1[j] = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << hi) - 1), rows[j] + 16);
  }
  for (int d = 0; d < a.depth; ++d)
    for (int j = 0; j < kN; ++j) {
      const __m512i at = _mm512_add_epi32(_mm512_slli_epi32(node[j], 4), lane);
      const __m512i f = gather_i(at, feature[j]);
      const __m512 t = gather_f(at, threshold[j]);
      const __m512i fi = _mm512_and_si512(f, index_bits);
      __m512 v;
      if constexpr (kX == 1)
        v = _mm512_permutexvar_ps(fi, x0[j]);
      else if constexpr (kX == 2)
        v = _mm512_permutex2var_ps(x0[j], fi, x1[j]);
      else
        v = gather_f(fi, rows[j]);
      const __mmask16 missing =
          _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) & _mm512_cmplt_epi32_mask(f, zero);
      const __mmask16 go = _mm512_cmp_ps_mask(v, t, kInclusive ? _CMP_LE_OQ : _CMP_LT_OQ) | missing;
      const __m512i no = _mm512_add_epi32(_mm512_slli_epi32(node[j], 1), two);
      node[j] = _mm512_mask_sub_epi32(no, go, no, one);  // the true child is 2n+1
    }
  const __m512i first_slot = _mm512_set1_epi32(static_cast<int32_t>(a.internal));
  for (int j = 0; j < kN; ++j) {
    const __m512i slot = _mm512_sub_epi32(node[j], first_slot);
    const int32_t* leaf = a.leaf + groups[j] * (a.internal + 1) * CompleteForest::kLanes;
    _mm512_storeu_si512(out + j * CompleteForest::kLanes,
                        gather_i(_mm512_add_epi32(_mm512_slli_epi32(slot, 4), lane), leaf));
  }
}

__attribute__((target("avx512f"))) void add_dense_avx512(const float* values, int64_t targets,
                                                         const int32_t* slots, int n, float* sums) {
  const auto m = static_cast<__mmask16>((1u << targets) - 1);
  __m512 acc = _mm512_maskz_loadu_ps(m, sums);
  for (int i = 0; i < n; ++i)
    if (slots[i] >= 0)
      acc = _mm512_add_ps(acc, _mm512_maskz_loadu_ps(m, values + slots[i] * targets));
  _mm512_mask_storeu_ps(sums, m, acc);
}

QUILT_GCC12_AVX512_END

template <bool kInclusive, int kX>
void walk_n(const Arrays& a, const int64_t* groups, const float* const* rows, int n, int64_t cols,
            int32_t* out) {
  switch (n) {
    case 1:
      return walk_avx512<kInclusive, kX, 1>(a, groups, rows, cols, out);
    case 2:
      return walk_avx512<kInclusive, kX, 2>(a, groups, rows, cols, out);
    case 3:
      return walk_avx512<kInclusive, kX, 3>(a, groups, rows, cols, out);
    default:
      return walk_avx512<kInclusive, kX, 4>(a, groups, rows, cols, out);
  }
}

template <bool kInclusive>
void walk_x(const Arrays& a, const int64_t* groups, const float* const* rows, int n, int64_t cols,
            int32_t* out) {
  if (cols <= 16)
    walk_n<kInclusive, 1>(a, groups, rows, n, cols, out);
  else if (cols <= 32)
    walk_n<kInclusive, 2>(a, groups, rows, n, cols, out);
  else
    walk_n<kInclusive, 3>(a, groups, rows, n, cols, out);
}

}  // namespace

bool CompleteForest::vectorized() {
  static const bool yes = [] {
    if (!has_avx512f()) return false;
    const char* isa = std::getenv("QUILT_CPU_ISA");
    return !(isa && (std::string(isa) == "avx2" || std::string(isa) == "scalar"));
  }();
  return yes;
}

CompleteForest CompleteForest::build(const Forest<float>& f, int64_t targets) {
  CompleteForest c;
  std::optional<Mode> mode;
  for (const auto& nd : f.nodes) {
    if (nd.feature < 0) continue;
    if (nd.mode == Mode::Eq || nd.mode == Mode::Neq || (mode && *mode != nd.mode)) return c;
    mode = nd.mode;
  }
  if (!mode || f.roots.empty()) return c;  // no branch at all: nothing to walk
  std::vector<int> memo(f.nodes.size(), -1);
  int depth = 0;
  bool deep = false;
  for (int32_t root : f.roots) {
    const int d = depth_of(f, root, kMaxDepth, memo);
    deep = deep || d >= kTooDeep;
    if (d < kTooDeep) depth = std::max(depth, d);
  }
  const auto trees = static_cast<int64_t>(f.roots.size());
  const int64_t groups = (trees + kLanes - 1) / kLanes;
  auto padded = [&](int d) { return groups * kLanes * ((int64_t{2} << d) - 1); };
  const int64_t room = std::max<int64_t>(kMaxGrowth * static_cast<int64_t>(f.nodes.size()), 65536);
  // Deeper or lopsided trees (LightGBM grows leaf-wise): only their top levels are laid out,
  // as deep as the room allows, and a walk that ends on a branch there finishes node by node.
  bool tails = deep;
  if (deep) depth = kMaxDepth;
  while (depth > 1 && padded(depth) > room) {
    --depth;
    tails = true;
  }
  if (padded(depth) > room) return c;
  const int64_t internal = (int64_t{1} << depth) - 1, slots = int64_t{1} << depth;

  // Dense rows where every leaf has exactly one weight per target.
  std::vector<int32_t> row(f.nodes.size(), -1);
  bool dense = targets >= 1;
  int32_t rows = 0;
  for (size_t i = 0; i < f.nodes.size() && dense; ++i) {
    const auto& nd = f.nodes[i];
    if (nd.feature >= 0) continue;
    if (nd.no != targets) dense = false;
    std::vector<uint8_t> seen(static_cast<size_t>(targets), 0);
    for (int32_t k = 0; k < nd.no && dense; ++k) {
      const auto t = static_cast<size_t>(f.weights[static_cast<size_t>(nd.yes + k)].target);
      dense = seen[t] == 0;
      seen[t] = 1;
    }
    row[i] = rows++;
  }
  if (dense) {
    c.values_.assign(static_cast<size_t>(rows) * static_cast<size_t>(targets), 0.0f);
    for (size_t i = 0; i < f.nodes.size(); ++i)
      if (row[i] >= 0)
        for (int32_t k = 0; k < f.nodes[i].no; ++k) {
          const auto& w = f.weights[static_cast<size_t>(f.nodes[i].yes + k)];
          c.values_[static_cast<size_t>(row[i]) * static_cast<size_t>(targets) +
                    static_cast<size_t>(w.target)] = w.value;
        }
  }

  // GTE and GT: the complement of LT and LEQ, with the children swapped and the missing-value
  // track flipped (a NaN fails every comparison, so it took the false child unless tracked true).
  const bool swap = *mode == Mode::Gte || *mode == Mode::Gt;
  c.inclusive_ = *mode == Mode::Leq || *mode == Mode::Gt;
  c.depth_ = depth;
  c.groups_ = groups;
  c.targets_ = targets;
  c.dense_ = dense;
  c.tails_ = tails;
  if (dense && tails) c.row_ = row;
  c.feature_.assign(static_cast<size_t>(groups * internal * kLanes), 0);
  c.threshold_.assign(c.feature_.size(), 0.0f);
  c.leaf_.assign(static_cast<size_t>(groups * slots * kLanes), -1);
  for (int64_t t = 0; t < trees; ++t) {
    const int64_t g = t / kLanes, lane = t % kLanes;
    int32_t* feature = c.feature_.data() + g * internal * kLanes + lane;
    float* threshold = c.threshold_.data() + g * internal * kLanes + lane;
    int32_t* leaf = c.leaf_.data() + g * slots * kLanes + lane;
    // Depth-first over the tree: (node, heap index, level).
    struct Item {
      int32_t node;
      int64_t heap;
      int level;
    };
    std::vector<Item> todo{{f.roots[static_cast<size_t>(t)], 0, 0}};
    while (!todo.empty()) {
      const Item it = todo.back();
      todo.pop_back();
      const auto& nd = f.nodes[static_cast<size_t>(it.node)];
      if (nd.feature >= 0 && it.level == depth) {  // a branch below the laid-out levels
        leaf[(it.heap - internal) * kLanes] = tail_slot(it.node);
        continue;
      }
      if (nd.feature < 0) {
        // Every slot of the last level below this heap position stands for this leaf; the
        // branches in between keep feature 0, and either way they lead to it.
        const int below = depth - it.level;
        const int64_t first = ((it.heap + 1) << below) - 1 - internal;
        const int32_t id = dense ? row[static_cast<size_t>(it.node)] : it.node;
        for (int64_t s = first; s < first + (int64_t{1} << below); ++s) leaf[s * kLanes] = id;
        continue;
      }
      const bool missing_true = nd.missing_true != swap;
      feature[it.heap * kLanes] = static_cast<int32_t>(static_cast<uint32_t>(nd.feature) |
                                                       (missing_true ? kMissingTrue : 0u));
      threshold[it.heap * kLanes] = nd.value;
      todo.push_back({swap ? nd.yes : nd.no, 2 * it.heap + 2, it.level + 1});
      todo.push_back({swap ? nd.no : nd.yes, 2 * it.heap + 1, it.level + 1});
    }
  }
  return c;
}

void CompleteForest::walk(const int64_t* groups, const float* const* rows, int n, int64_t cols,
                          int32_t* out) const {
  const Arrays a{feature_.data(), threshold_.data(), leaf_.data(), (int64_t{1} << depth_) - 1,
                 depth_};
  if (vectorized()) {
    if (inclusive_)
      walk_x<true>(a, groups, rows, n, cols, out);
    else
      walk_x<false>(a, groups, rows, n, cols, out);
    return;
  }
  for (int j = 0; j < n; ++j) {
    const int32_t* feature = a.feature + groups[j] * a.internal * kLanes;
    const float* threshold = a.threshold + groups[j] * a.internal * kLanes;
    const int32_t* leaf = a.leaf + groups[j] * (a.internal + 1) * kLanes;
    int32_t node[kLanes] = {};
    for (int d = 0; d < depth_; ++d)
      for (int lane = 0; lane < kLanes; ++lane) {
        const size_t at = static_cast<size_t>(node[lane]) * kLanes + static_cast<size_t>(lane);
        const auto f = static_cast<uint32_t>(feature[at]);
        const float v = rows[j][f & ~kMissingTrue];
        const bool go = (inclusive_ ? v <= threshold[at] : v < threshold[at]) ||
                        ((f & kMissingTrue) && std::isnan(v));
        node[lane] = 2 * node[lane] + (go ? 1 : 2);
      }
    for (int lane = 0; lane < kLanes; ++lane)
      out[j * kLanes + lane] =
          leaf[static_cast<size_t>(node[lane] - a.internal) * kLanes + static_cast<size_t>(lane)];
  }
}

void CompleteForest::add_dense(const int32_t* slots, int n, float* sums) const {
  if (vectorized() && targets_ <= kLanes)
    return add_dense_avx512(values_.data(), targets_, slots, n, sums);
  for (int i = 0; i < n; ++i) {
    if (slots[i] < 0) continue;
    const float* v = values_.data() + static_cast<size_t>(slots[i]) * static_cast<size_t>(targets_);
    for (int64_t k = 0; k < targets_; ++k) sums[k] += v[k];
  }
}

}  // namespace quilt::cpu::ml
