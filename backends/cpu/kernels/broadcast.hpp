// Numpy-style broadcasting for CPU kernels.
//
// A BroadcastPlan maps every element of an output shape to an element of each input. Dims that
// are 1 everywhere are dropped and neighbouring dims that broadcast the same way in every input
// are merged, so the common cases become few, long contiguous runs: same-shape inputs are one
// run, a scalar operand is one run with step 0, a trailing vector (bias) is rows of runs.
//
//   BroadcastPlan plan(out.shape(), {&a.shape(), &b.shape()});
//   parallel_runs(ctx.pool, plan, kGrain, [&](int64_t o, const int64_t* in, int64_t n,
//                                              const int64_t* step) {
//     // out[o + i] = f(a[in[0] + i * step[0]], b[in[1] + i * step[1]]) for i in [0, n)
//   });
//
// broadcast_binary() wraps this for the common two-input case with loops the compiler vectorises.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "backends/cpu/inline_vector.hpp"
#include "backends/cpu/thread_pool.hpp"
#include "quilt/quilt.hpp"

namespace quilt::cpu {

// ---- dtype dispatch ----
// A list of element types; visit_dtype calls fn(T{}) for the T in the list whose dtype is d.
// (float16 is not listed anywhere: its uint16_t storage would collide with uint16.)
template <class... Ts>
struct TypeList {};
using FloatTypes = TypeList<float, double>;
using SignedIntTypes = TypeList<int8_t, int16_t, int32_t, int64_t>;
using IntTypes = TypeList<int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t>;
using SignedTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t>;
using NumericTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                              uint32_t, uint64_t>;
using AllTypes = TypeList<float, double, int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t,
                          uint32_t, uint64_t, bool>;

template <class... Ts, class Fn>
bool visit_dtype(DType d, TypeList<Ts...>, Fn&& fn) {
  return ((d == dtype_of<Ts>() ? (fn(Ts{}), true) : false) || ...);
}

template <class... Ts>
std::vector<DType> dtypes_of(TypeList<Ts...>) {
  return {dtype_of<Ts>()...};
}

// Elements per parallel chunk for cheap elementwise work: small tensors stay on one thread.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

class BroadcastPlan {
 public:
  // in_shapes must each be broadcastable to out_shape (numpy rules, aligned at the right).
  BroadcastPlan(const std::vector<int64_t>& out_shape,
                const std::vector<std::vector<int64_t>>& in_shapes)
      : num_inputs_(in_shapes.size()) {
    init(out_shape, [&](size_t k) -> const std::vector<int64_t>& { return in_shapes[k]; });
  }
  // The same without copying the shapes: BroadcastPlan(out.shape(), {&a.shape(), &b.shape()}).
  BroadcastPlan(const std::vector<int64_t>& out_shape,
                std::initializer_list<const std::vector<int64_t>*> in_shapes)
      : num_inputs_(in_shapes.size()) {
    init(out_shape, [&](size_t k) -> const std::vector<int64_t>& { return *in_shapes.begin()[k]; });
  }

  int64_t numel() const { return numel_; }
  size_t num_inputs() const { return num_inputs_; }
  // True when every input has the output's element layout (a single plain loop).
  bool all_same_shape() const {
    if (dims_.size() != 1) return false;
    for (size_t k = 0; k < num_inputs_; ++k)
      if (strides_[k] != 1 && dims_[0] != 1) return false;
    return true;
  }

  // Visits the contiguous output runs covering [begin, end) in order:
  // fn(out_offset, in_offsets, n, in_steps) where in_offsets[k] is input k's element offset at
  // out_offset and in_steps[k] is 1 when input k advances with the output, 0 when it repeats.
  template <class Fn>
  void for_each_run(int64_t begin, int64_t end, Fn&& fn) const {
    if (begin >= end) return;
    const size_t r = dims_.size();
    const int64_t inner = dims_[r - 1];
    Small idx(r, 0), off(num_inputs_, 0), step(num_inputs_, 0);
    for (size_t k = 0; k < num_inputs_; ++k) step[k] = strides_[k * r + r - 1];
    int64_t rem = begin;
    for (size_t d = r; d-- > 0;) {
      idx[d] = rem % dims_[d];
      rem /= dims_[d];
      for (size_t k = 0; k < num_inputs_; ++k) off[k] += idx[d] * strides_[k * r + d];
    }
    int64_t pos = begin;
    while (pos < end) {
      const int64_t n = std::min(inner - idx[r - 1], end - pos);
      fn(pos, static_cast<const int64_t*>(off.data()), n, static_cast<const int64_t*>(step.data()));
      pos += n;
      if (pos >= end) break;
      // The run ended at the end of a row: move to the next row, carrying outwards.
      for (size_t k = 0; k < num_inputs_; ++k) off[k] -= idx[r - 1] * step[k];
      idx[r - 1] = 0;
      for (size_t d = r - 1; d-- > 0;) {
        ++idx[d];
        for (size_t k = 0; k < num_inputs_; ++k) off[k] += strides_[k * r + d];
        if (idx[d] < dims_[d]) break;
        for (size_t k = 0; k < num_inputs_; ++k) off[k] -= idx[d] * strides_[k * r + d];
        idx[d] = 0;
      }
    }
  }

 private:
  template <class ShapeOf>
  void init(const std::vector<int64_t>& out_shape, ShapeOf shape_of) {
    const size_t rank = out_shape.size();
    numel_ = 1;
    for (int64_t d : out_shape) numel_ *= d;
    // Each input padded to the output's rank with leading 1s: padded[k * rank + d].
    Small padded(num_inputs_ * rank, 1);
    for (size_t k = 0; k < num_inputs_; ++k) {
      const std::vector<int64_t>& s = shape_of(k);
      if (s.size() > rank)
        throw Error(ErrorCode::Runtime, "broadcast: input of rank " + std::to_string(s.size()) +
                                            " does not fit output " + to_string(out_shape));
      for (size_t i = 0; i < s.size(); ++i) padded[k * rank + rank - s.size() + i] = s[i];
      for (size_t d = 0; d < rank; ++d)
        if (padded[k * rank + d] != out_shape[d] && padded[k * rank + d] != 1)
          throw Error(ErrorCode::Runtime, "broadcast: input shape " + to_string(s) +
                                              " does not broadcast to " + to_string(out_shape));
    }
    // Collapse: keep dims of size != 1, merge a dim into the previous kept one when every input
    // is broadcast in both or in neither. full[k * rank + j]: input k not broadcast in kept dim j.
    Small full(num_inputs_ * std::max<size_t>(rank, 1), 0);
    for (size_t d = 0; d < rank; ++d) {
      if (out_shape[d] == 1) continue;
      const size_t j = dims_.size();
      bool mergeable = j > 0;
      for (size_t k = 0; k < num_inputs_ && mergeable; ++k)
        if ((padded[k * rank + d] != 1) != (full[k * rank + j - 1] != 0)) mergeable = false;
      if (mergeable) {
        dims_.back() *= out_shape[d];
      } else {
        dims_.push_back(out_shape[d]);
        for (size_t k = 0; k < num_inputs_; ++k) full[k * rank + j] = padded[k * rank + d] != 1;
      }
    }
    const size_t stride_of_full = std::max<size_t>(rank, 1);
    if (dims_.empty()) {  // scalar output (or all dims 1)
      dims_.push_back(1);
      for (size_t k = 0; k < num_inputs_; ++k) full[k * stride_of_full] = 1;
    }
    const size_t r = dims_.size();
    strides_.assign(num_inputs_ * r, 0);
    for (size_t k = 0; k < num_inputs_; ++k) {
      int64_t s = 1;
      for (size_t d = r; d-- > 0;) {
        if (full[k * stride_of_full + d]) {
          strides_[k * r + d] = s;
          s *= dims_[d];
        }
      }
    }
  }

  using Small = InlineVector<int64_t, 16>;  // no allocation for the usual ranks and arities
  size_t num_inputs_;
  int64_t numel_ = 0;
  Small dims_;     // collapsed output dims, outermost first; never empty
  Small strides_;  // [k * rank + d]: input k's element stride in dim d, 0 = broadcast
};

// Runs plan.for_each_run over the whole output, split across the pool in chunks of >= grain.
template <class Fn>
void parallel_runs(const ThreadPool& pool, const BroadcastPlan& plan, int64_t grain, Fn&& fn) {
  if (plan.numel() == 0) return;
  pool.parallel_for(plan.numel(), grain,
                    [&](int64_t begin, int64_t end) { plan.for_each_run(begin, end, fn); });
}

// out[i] = op(a[i], b[i]) for i in [0, n), with either operand possibly repeated (step 0).
// Four separate loops so each one vectorises.
template <class O, class A, class B, class Op>
inline void binary_run(O* out, const A* a, int64_t step_a, const B* b, int64_t step_b, int64_t n,
                       Op op) {
  if (n < 8) {  // short rows (e.g. [N, 3] + [3]): skip the vector loop set-up
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i * step_a], b[i * step_b]);
  } else if (step_a && step_b) {
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], b[i]);
  } else if (step_a) {
    const B bv = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = op(a[i], bv);
  } else if (step_b) {
    const A av = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = op(av, b[i]);
  } else {
    const O v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i) out[i] = v;
  }
}

// out = op(a, b) elementwise with numpy broadcasting; out must already have the broadcast shape.
template <class A, class B, class O, class Op>
void broadcast_binary(const ThreadPool& pool, const Tensor& a, const Tensor& b, Tensor& out, Op op,
                      int64_t grain = kElementwiseGrain) {
  const A* pa = a.data<A>();
  const B* pb = b.data<B>();
  O* po = out.data<O>();
  // Operands of the output's shape or of one element need no plan: one loop (a plan costs ten
  // allocations, more than an op on 64 floats).
  const int64_t n = out.numel();
  const bool a_full = a.numel() == n && a.shape() == out.shape(), a_one = a.numel() == 1;
  const bool b_full = b.numel() == n && b.shape() == out.shape(), b_one = b.numel() == 1;
  if ((a_full || a_one) && (b_full || b_one)) {
    if (n == 0) return;
    pool.parallel_for(n, grain, [&](int64_t begin, int64_t end) {
      binary_run(po + begin, pa + (a_full ? begin : 0), a_full ? 1 : 0, pb + (b_full ? begin : 0),
                 b_full ? 1 : 0, end - begin, op);
    });
    return;
  }
  BroadcastPlan plan(out.shape(), {&a.shape(), &b.shape()});
  parallel_runs(pool, plan, grain, [&](int64_t o, const int64_t* in, int64_t n, const int64_t* s) {
    binary_run(po + o, pa + in[0], s[0], pb + in[1], s[1], n, op);
  });
}

}  // namespace quilt::cpu
