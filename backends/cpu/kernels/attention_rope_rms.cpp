// CPU kernels of RotaryEmbedding and RMSNormalization (opset 23).
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/attention_util.hpp"

namespace quilt::cpu {
namespace {

int64_t grain_for(int64_t per_item) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, per_item));
}

// ---- RotaryEmbedding ----

// float32 and float16 storage, computed in float.
inline float load_elem(const float* p, int64_t i) {
  return p[i];
}
inline float load_elem(const uint16_t* p, int64_t i) {
  return half_to_float(p[i]);
}
inline void store_elem(float* p, int64_t i, float v) {
  p[i] = v;
}
inline void store_elem(uint16_t* p, int64_t i, float v) {
  p[i] = float_to_half(v);
}

template <class T>
void run_rotary(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& cos_cache = ctx.input(1);
  const Tensor& sin_cache = ctx.input(2);
  const Tensor* positions = ctx.optional_input(3);
  const bool four_d = x.rank() == 4;
  const int64_t batch = x.dim(0);
  const int64_t heads = four_d ? x.dim(1) : node.attr_int("num_heads", 0);
  const int64_t seq = four_d ? x.dim(2) : x.dim(1);
  const int64_t head_size = four_d ? x.dim(3) : x.dim(2) / heads;
  const int64_t rotary_attr = node.attr_int("rotary_embedding_dim", 0);
  const int64_t rotary = rotary_attr > 0 ? rotary_attr : head_size;
  const int64_t half = rotary / 2;
  const bool interleaved = node.attr_int("interleaved", 0) != 0;
  const int64_t max_pos = cos_cache.dim(0);
  const int64_t* pos = positions ? positions->data<int64_t>() : nullptr;
  if (pos) {
    for (int64_t i = 0; i < positions->numel(); ++i)
      if (pos[i] < 0 || pos[i] >= max_pos)
        node.fail("position_ids value " + std::to_string(pos[i]) + " is out of range [0, " +
                      std::to_string(max_pos) + ") of the caches",
                  ErrorCode::InvalidArgument);
  }
  const T* xp = x.data<T>();
  const T* cp = cos_cache.data<T>();
  const T* sp = sin_cache.data<T>();
  T* yp = ctx.output(0).data<T>();
  // One item per (batch, seq, head) vector.
  ctx.pool.parallel_for(batch * seq * heads, grain_for(head_size), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t h = item % heads, bs = item / heads, b = bs / seq, s = bs % seq;
      const int64_t off =
          four_d ? ((b * heads + h) * seq + s) * head_size : bs * heads * head_size + h * head_size;
      const int64_t row = (pos ? pos[bs] : bs) * half;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t i1 = interleaved ? 2 * i : i, i2 = interleaved ? 2 * i + 1 : i + half;
        const float c = load_elem(cp, row + i), sn = load_elem(sp, row + i);
        const float x1 = load_elem(xp, off + i1), x2 = load_elem(xp, off + i2);
        store_elem(yp, off + i1, c * x1 - sn * x2);
        store_elem(yp, off + i2, sn * x1 + c * x2);
      }
      std::copy(xp + off + rotary, xp + off + head_size, yp + off + rotary);
    }
  });
}

std::string rotary_support(const NodeSignature& sig) {
  for (size_t i = 0; i < 3 && i < sig.inputs.size(); ++i) {
    DType t = sig.inputs[i].dtype;
    if (t != DType::Undefined && t != DType::Float32 && t != DType::Float16)
      return std::string("input ") + std::to_string(i) + " is " + dtype_name(t) +
             "; the CPU kernel supports float32 and float16";
  }
  return "";
}

// ---- RMSNormalization ----

// Storage types: float, double, or float16 as uint16_t. Arithmetic "in T" for float16 is done in
// float and rounded, which for one multiplication equals float16 arithmetic.
template <class T>
struct Storage {
  using Value = T;
  static Value get(const T* p, int64_t i) { return p[i]; }
  static T round(Value v) { return v; }
};
template <>
struct Storage<uint16_t> {
  using Value = float;
  static Value get(const uint16_t* p, int64_t i) { return half_to_float(p[i]); }
  static uint16_t round(Value v) { return float_to_half(v); }
};

// T: X's and scale's storage; S: the stash type of stage one.
template <class T, class S>
void run_rms(KernelContext& ctx) {
  using St = Storage<T>;
  using V = typename St::Value;
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const int64_t rank = x.rank();
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += rank;
  const S eps = static_cast<S>(ctx.node.attr_float("epsilon", 1e-5f));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis; i < rank; ++i) inner *= x.dim(i);
  // scale broadcast to X (aligned right): element offsets split into an outer part per row
  // and an inner part per position in the row.
  std::vector<int64_t> sstride(static_cast<size_t>(rank), 0);
  {
    const auto& ss = scale.shape();
    int64_t st = 1;
    for (int64_t i = static_cast<int64_t>(ss.size()) - 1; i >= 0; --i) {
      const int64_t xi = rank - static_cast<int64_t>(ss.size()) + i;
      sstride[static_cast<size_t>(xi)] = ss[static_cast<size_t>(i)] == 1 ? 0 : st;
      st *= ss[static_cast<size_t>(i)];
    }
  }
  auto offset_of = [&](int64_t index, int64_t from, int64_t to) {
    int64_t off = 0;
    for (int64_t d = to - 1; d >= from; --d) {
      off += (index % x.dim(d)) * sstride[static_cast<size_t>(d)];
      index /= x.dim(d);
    }
    return off;
  };
  std::vector<int64_t> inner_off(static_cast<size_t>(inner));
  for (int64_t j = 0; j < inner; ++j) inner_off[static_cast<size_t>(j)] = offset_of(j, axis, rank);
  const T* xp = x.data<T>();
  const T* wp = scale.data<T>();
  T* yp = ctx.output(0).data<T>();
  ctx.pool.parallel_for(outer, grain_for(inner), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const T* xr = xp + r * inner;
      T* yr = yp + r * inner;
      const int64_t w0 = offset_of(r, 0, axis);
      double sum = 0;  // the mean of squares, accumulated in double for long rows
      for (int64_t j = 0; j < inner; ++j) {
        const S v = static_cast<S>(St::get(xr, j));
        sum += static_cast<double>(v * v);
      }
      const S rms = std::sqrt(static_cast<S>(sum / static_cast<double>(inner)) + eps);
      for (int64_t j = 0; j < inner; ++j) {
        // Normalized is cast back to X's type before the product with scale, as in the spec.
        const T n = St::round(static_cast<V>(static_cast<S>(St::get(xr, j)) / rms));
        const V w = St::get(wp, w0 + inner_off[static_cast<size_t>(j)]);
        yr[j] = St::round(St::get(&n, 0) * w);
      }
    }
  });
}

int64_t stash_type(const Node& node) {
  return node.attr_int("stash_type", 1);
}

std::string rms_support(const NodeSignature& sig) {
  const DType t = sig.inputs[0].dtype, w = sig.inputs.size() > 1 ? sig.inputs[1].dtype : t;
  if (t != DType::Undefined && t != DType::Float32 && t != DType::Float16 && t != DType::Float64)
    return std::string("X is ") + dtype_name(t) + "; the CPU kernel supports float32, float16, " +
           "float64";
  if (t != DType::Undefined && w != DType::Undefined && w != t)
    return std::string("scale is ") + dtype_name(w) + " but X is " + dtype_name(t) +
           "; the CPU kernel needs them equal";
  const int64_t st = stash_type(sig.node);
  if (st != static_cast<int64_t>(DType::Float32) && st != static_cast<int64_t>(DType::Float64))
    return "stash_type " + std::to_string(st) + " is not supported (1 = float32, 11 = float64)";
  return "";
}

void rms_kernel(KernelContext& ctx) {
  const bool stash_double = stash_type(ctx.node) == static_cast<int64_t>(DType::Float64);
  switch (ctx.input(0).dtype()) {
    case DType::Float32:
      return stash_double ? run_rms<float, double>(ctx) : run_rms<float, float>(ctx);
    case DType::Float64:
      return stash_double ? run_rms<double, double>(ctx) : run_rms<double, float>(ctx);
    case DType::Float16:
      return stash_double ? run_rms<uint16_t, double>(ctx) : run_rms<uint16_t, float>(ctx);
    default:
      ctx.node.fail(std::string("RMSNormalization kernel got ") + dtype_name(ctx.input(0).dtype()),
                    ErrorCode::NotImplemented);
  }
}

}  // namespace

void register_cpu_rotary_embedding(KernelRegistry& r) {
  r.add("RotaryEmbedding", rotary_support, [](KernelContext& ctx) {
    if (ctx.input(0).dtype() == DType::Float16)
      run_rotary<uint16_t>(ctx);
    else
      run_rotary<float>(ctx);
  });
}

void register_cpu_rms_normalization(KernelRegistry& r) {
  r.add("RMSNormalization", rms_support, rms_kernel);
}

}  // namespace quilt::cpu
