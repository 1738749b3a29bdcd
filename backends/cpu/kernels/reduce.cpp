// CPU kernels of the reduce op family: the Reduce* ops here; ArgMax/ArgMin, TopK and CumSum in
// reduce_index.cpp.
//
// A reduction is planned once per run: dims of size 1 are dropped and neighbouring dims that are
// both reduced or both kept are merged, which leaves alternating groups. Two loops cover every
// layout: when the innermost group is reduced each output is a reduction over contiguous runs;
// when it is kept, whole rows of outputs are accumulated at once so memory is read in order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <type_traits>

#include "backends/cpu/kernel.hpp"

namespace quilt::cpu {

void register_cpu_reduce_index(KernelRegistry& r);
void run_in_float32(KernelContext& ctx, const KernelFn& fn);  // normalization_float16.cpp

namespace {

struct ReducePlan {
  int64_t inner = 1;             // length of the innermost group
  bool inner_reduced = false;    // whether that group is reduced
  int64_t count = 1;             // elements reduced into each output
  std::vector<int64_t> bases;    // input offset of each output (row, when inner is kept)
  std::vector<int64_t> offsets;  // offsets of the reduced positions outside the inner group
};

// Offsets of every index combination of `dims` with `strides`, in row-major order.
std::vector<int64_t> enumerate_offsets(const std::vector<int64_t>& dims,
                                       const std::vector<int64_t>& strides) {
  int64_t total = 1;
  for (int64_t d : dims) total *= d;
  std::vector<int64_t> out(static_cast<size_t>(total));
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < total; ++i) {
    out[static_cast<size_t>(i)] = off;
    for (size_t d = dims.size(); d-- > 0;) {
      off += strides[d];
      if (++idx[d] < dims[d]) break;
      off -= strides[d] * dims[d];
      idx[d] = 0;
    }
  }
  return out;
}

ReducePlan make_plan(const std::vector<int64_t>& shape, const std::vector<char>& reduced) {
  ReducePlan p;
  std::vector<int64_t> dims;
  std::vector<char> red;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (reduced[i]) p.count *= shape[i];
    if (shape[i] == 1) continue;
    if (!dims.empty() && red.back() == reduced[i]) {
      dims.back() *= shape[i];
    } else {
      dims.push_back(shape[i]);
      red.push_back(reduced[i]);
    }
  }
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= dims[i];
  }
  size_t outer_groups = dims.size();
  if (!dims.empty()) {
    p.inner = dims.back();
    p.inner_reduced = red.back() != 0;
    outer_groups = dims.size() - 1;
  }
  std::vector<int64_t> kd, ks, rd, rs;
  for (size_t i = 0; i < outer_groups; ++i) {
    (red[i] ? rd : kd).push_back(dims[i]);
    (red[i] ? rs : ks).push_back(strides[i]);
  }
  p.bases = enumerate_offsets(kd, ks);
  p.offsets = enumerate_offsets(rd, rs);
  return p;
}

// Reduction policies: an accumulator, how to add one element or a contiguous run, and the final
// value. Runs are what the vectorised fast paths below speed up.
template <class T>
using Wide = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

struct Identity {
  template <class T>
  T operator()(T x) const {
    return x;
  }
};
struct Abs {
  template <class T>
  T operator()(T x) const {
    return std::fabs(x);
  }
};
struct Square {
  template <class T>
  T operator()(T x) const {
    return x * x;
  }
};

// Sum of f(x) over a float32 run: 16 float lanes over chunks of 1024 (so each lane adds only 64
// values in float), chunk totals in double. Vectorises, and stays close to a double sum.
template <class F>
double sum_lanes(const float* x, int64_t n, F f) {
  constexpr int kLanes = 16;
  constexpr int64_t kChunk = 1024;
  double total = 0;
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t m = std::min(kChunk, n - c);
    const float* p = x + c;
    float lanes[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= m; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] += f(p[i + j]);
    double chunk = 0;
    for (; i < m; ++i) chunk += f(p[i]);
    for (float l : lanes) chunk += l;
    total += chunk;
  }
  return total;
}

template <class T, class F>
struct SumOfOp {
  using Acc = Wide<T>;
  // Whether reducing a single element gives it back (a no-axis reduction is then a copy).
  static constexpr bool kIdentityOnOne = std::is_same_v<F, Identity>;
  static Acc init() { return 0; }
  static void add(Acc& a, T x) {
    if constexpr (std::is_floating_point_v<T>)
      a += F{}(static_cast<double>(x));
    else  // wraps like T would, without signed-overflow UB
      a = static_cast<Acc>(static_cast<uint64_t>(a) + static_cast<uint64_t>(F{}(x)));
  }
  static void add_run(Acc& a, const T* x, int64_t n) {
    if constexpr (std::is_same_v<T, float>) {
      a += sum_lanes(x, n, F{});
    } else {
      for (int64_t i = 0; i < n; ++i) add(a, x[i]);
    }
  }
  static T finish(Acc a, int64_t) { return static_cast<T>(a); }
};
template <class T>
struct SumOp : SumOfOp<T, Identity> {};
template <class T>
struct MeanOp : SumOp<T> {
  static T finish(double a, int64_t n) { return static_cast<T>(a / static_cast<double>(n)); }
};
template <class T>
struct L1Op : SumOfOp<T, Abs> {};
template <class T>
struct SumSquareOp : SumOfOp<T, Square> {};
template <class T>
struct L2Op : SumSquareOp<T> {
  static constexpr bool kIdentityOnOne = false;
  static T finish(double a, int64_t) { return static_cast<T>(std::sqrt(a)); }
};
template <class T>
struct LogSumOp : SumOp<T> {
  static constexpr bool kIdentityOnOne = false;
  static T finish(double a, int64_t) { return static_cast<T>(std::log(a)); }
};

template <class T>
struct ProdOp {
  using Acc = Wide<T>;
  static constexpr bool kIdentityOnOne = true;
  static Acc init() { return 1; }
  static void add(Acc& a, T x) {
    if constexpr (std::is_floating_point_v<T>)
      a *= x;
    else  // wraps like T would, without signed-overflow UB
      a = static_cast<Acc>(static_cast<uint64_t>(a) * static_cast<uint64_t>(x));
  }
  static void add_run(Acc& a, const T* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) add(a, x[i]);
  }
  static T finish(Acc a, int64_t) { return static_cast<T>(a); }
};

// Max and Min propagate NaN like numpy (and the ONNX reference).
template <class T, bool Max>
struct ExtremumOp {
  using Acc = T;
  static constexpr bool kIdentityOnOne = true;
  static Acc init() {
    if constexpr (std::is_floating_point_v<T>)
      return Max ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    return Max ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
  }
  static bool better(T x, T a) { return Max ? x > a : x < a; }
  static void add(Acc& a, T x) {
    if (better(x, a) || x != x) a = (a != a) ? a : x;
  }
  // float32 runs: 8-wide vector selects (plain float selects do not vectorise under the default
  // -ftrapping-math); NaN is tracked on the side.
  static void add_run(Acc& a, const T* x, int64_t n) {
    int64_t i = 0;
    if constexpr (std::is_same_v<T, float>) {
      using F8 = float __attribute__((vector_size(32)));
      using I8 = int32_t __attribute__((vector_size(32)));
      if (n >= 8) {
        F8 m = F8{} + a;
        I8 nan{};
        for (; i + 8 <= n; i += 8) {
          F8 v;
          std::memcpy(&v, x + i, sizeof v);
          m = Max ? (v > m ? v : m) : (v < m ? v : m);
          nan |= v != v;
        }
        for (int j = 0; j < 8; ++j) add(a, m[j]);
        for (int j = 0; j < 8; ++j)
          if (nan[j]) a = std::numeric_limits<T>::quiet_NaN();
      }
    }
    for (; i < n; ++i) add(a, x[i]);
  }
  static T finish(Acc a, int64_t) { return a; }
};
template <class T>
struct MaxOp : ExtremumOp<T, true> {};
template <class T>
struct MinOp : ExtremumOp<T, false> {};

// One pass: keeps the running maximum and the sum of exp(x - max), rescaled when max grows.
template <class T>
struct LogSumExpOp {
  static constexpr bool kIdentityOnOne = true;  // one element x: x + log(1)
  struct Acc {
    double max, sum;
  };
  static Acc init() { return {-std::numeric_limits<double>::infinity(), 0.0}; }
  static void add(Acc& a, T v) {
    double x = v;
    if (x > a.max) {
      a.sum = a.sum * std::exp(a.max - x) + 1.0;
      a.max = x;
    } else if (x == x) {
      if (x != -std::numeric_limits<double>::infinity()) a.sum += std::exp(x - a.max);
    } else {
      a.max = x;  // NaN poisons the result
    }
  }
  static void add_run(Acc& a, const T* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) add(a, x[i]);
  }
  static T finish(const Acc& a, int64_t) {
    if (std::isinf(a.max)) return static_cast<T>(a.max);  // empty set or an infinite input
    return static_cast<T>(a.max + std::log(a.sum));
  }
};

template <class T, class Op>
void run_plan(const ReducePlan& p, const T* x, T* y, const ThreadPool& pool) {
  const auto rows = static_cast<int64_t>(p.bases.size());
  const auto nofs = static_cast<int64_t>(p.offsets.size());
  const int64_t work_per_output = std::max<int64_t>(1, p.count);
  if (p.inner_reduced) {
    const int64_t len = p.inner;
    pool.parallel_for(rows, std::max<int64_t>(1, 32768 / work_per_output),
                      [&](int64_t b, int64_t e) {
                        for (int64_t o = b; o < e; ++o) {
                          typename Op::Acc acc = Op::init();
                          for (int64_t j = 0; j < nofs; ++j)
                            Op::add_run(acc, x + p.bases[o] + p.offsets[j], len);
                          y[o] = Op::finish(acc, p.count);
                        }
                      });
    return;
  }
  // Inner group kept: accumulate blocks of a row so the accumulators stay in cache.
  // Narrower blocks when there are few rows, so every thread gets a share.
  const int64_t len = p.inner;
  const int64_t want_blocks = (2 * pool.threads() + rows - 1) / std::max<int64_t>(rows, 1);
  const int64_t block =
      std::min<int64_t>(len, std::clamp<int64_t>((len + want_blocks - 1) / want_blocks, 64, 512));
  const int64_t blocks = (len + block - 1) / block;
  pool.parallel_for(rows * blocks, std::max<int64_t>(1, 32768 / (work_per_output * block)),
                    [&](int64_t b, int64_t e) {
                      // Not std::vector: vector<bool> has no bool& to accumulate into.
                      auto acc = std::make_unique<typename Op::Acc[]>(static_cast<size_t>(block));
                      for (int64_t task = b; task < e; ++task) {
                        const int64_t o = task / blocks, c0 = (task % blocks) * block;
                        const int64_t n = std::min(block, len - c0);
                        std::fill(acc.get(), acc.get() + n, Op::init());
                        for (int64_t j = 0; j < nofs; ++j) {
                          const T* src = x + p.bases[o] + p.offsets[j] + c0;
                          for (int64_t t = 0; t < n; ++t) Op::add(acc[t], src[t]);
                        }
                        T* dst = y + o * len + c0;
                        for (int64_t t = 0; t < n; ++t) dst[t] = Op::finish(acc[t], p.count);
                      }
                    });
}

// Which axes the node reduces, or nullopt when it reduces none (empty axes with
// noop_with_empty_axes = 1): then the reduction step is the identity, but composite reductions
// still apply their element-wise steps (the spec: ReduceL1 gives |x|, ReduceL2 sqrt(x^2),
// ReduceSumSquare x^2, ReduceLogSum log(x)).
std::optional<std::vector<char>> reduced_axes(const KernelContext& ctx, bool axes_from_input) {
  const Node& node = ctx.node;
  const int64_t rank = ctx.input(0).rank();
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (const Tensor* a = ctx.optional_input(1)) {
      for (int64_t i = 0; i < a->numel(); ++i)
        axes.push_back(a->dtype() == DType::Int32 ? a->data<int32_t>()[i] : a->data<int64_t>()[i]);
    }
    if (axes.empty() && node.attr_int("noop_with_empty_axes", 0) != 0) return std::nullopt;
  } else {
    axes = node.attr_ints("axes");
  }
  std::vector<char> reduced(static_cast<size_t>(rank), axes.empty() ? 1 : 0);
  for (int64_t a : axes) reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = 1;
  return reduced;
}

// Which element types a reduction supports beyond float32 and float64.
enum ExtraTypes { kFloatOnly = 0, kInts = 1, kIntsAndBool = 3 };

template <template <class> class Op, int Extra>
void run_reduce(KernelContext& ctx, int64_t first_input_axes_opset) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::Float16)
    return run_in_float32(ctx, [first_input_axes_opset](KernelContext& c) {
      run_reduce<Op, Extra>(c, first_input_axes_opset);
    });
  auto reduced = reduced_axes(ctx, ctx.node.opset >= first_input_axes_opset);
  if (!reduced && Op<float>::kIdentityOnOne) {
    ctx.set_output(0, x);
    return;
  }
  Tensor& y = ctx.output(0);
  if (y.numel() == 0) return;
  // No axis reduced: a reduction over one element each, which applies the element-wise steps.
  ReducePlan plan =
      make_plan(x.shape(), reduced ? *reduced : std::vector<char>(x.shape().size(), 0));
  auto go = [&]<class T>(T) { run_plan<T, Op<T>>(plan, x.data<T>(), y.data<T>(), ctx.pool); };
  if (x.dtype() == DType::Float32) return go(float{});
  if (x.dtype() == DType::Float64) return go(double{});
  if constexpr ((Extra & kInts) != 0) {
    if (x.dtype() == DType::Int32) return go(int32_t{});
    if (x.dtype() == DType::Int64) return go(int64_t{});
  }
  if constexpr (Extra == kIntsAndBool) {
    if (x.dtype() == DType::Bool) return go(bool{});
  }
  ctx.node.fail(std::string("unsupported dtype ") + dtype_name(x.dtype()));
}

template <template <class> class Op, int Extra = kFloatOnly>
void add_reduce(KernelRegistry& r, const char* op_type, int64_t first_input_axes_opset) {
  std::vector<DType> types = {DType::Float32, DType::Float64, DType::Float16};
  if (Extra & kInts) types.insert(types.end(), {DType::Int32, DType::Int64});
  if (Extra == kIntsAndBool) types.push_back(DType::Bool);
  r.add(op_type, dtypes_of_input(types), [first_input_axes_opset](KernelContext& ctx) {
    run_reduce<Op, Extra>(ctx, first_input_axes_opset);
  });
}

}  // namespace

void register_cpu_reduce(KernelRegistry& r) {
  add_reduce<SumOp, kInts>(r, "ReduceSum", 13);
  add_reduce<MeanOp>(r, "ReduceMean", 18);
  add_reduce<MaxOp, kIntsAndBool>(r, "ReduceMax", 18);
  add_reduce<MinOp, kIntsAndBool>(r, "ReduceMin", 18);
  add_reduce<ProdOp, kInts>(r, "ReduceProd", 18);
  add_reduce<L1Op>(r, "ReduceL1", 18);
  add_reduce<L2Op>(r, "ReduceL2", 18);
  add_reduce<SumSquareOp>(r, "ReduceSumSquare", 18);
  add_reduce<LogSumOp>(r, "ReduceLogSum", 18);
  add_reduce<LogSumExpOp>(r, "ReduceLogSumExp", 18);
  register_cpu_reduce_index(r);
}

}  // namespace quilt::cpu
