// CPU kernels of the tensor family's indexing ops: Gather, GatherElements, GatherND, ScatterND,
// ScatterElements (and its old name Scatter), NonZero, OneHot. Data moves as bytes; only the
// scatter reductions look at element values.
#include <array>
#include <cmath>
#include <cstring>

#include "backends/cpu/kernel.hpp"
#include "core/checked.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_tensor_index(KernelRegistry& r);

namespace {

std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

int64_t product(const std::vector<int64_t>& dims, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= dims[i];
  return p;
}

// Indices as int64 (int32 or int64 input).
std::vector<int64_t> indices_of(const Tensor& t) {
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  if (t.dtype() == DType::Int32)
    std::copy_n(t.data<int32_t>(), out.size(), out.begin());
  else
    std::copy_n(t.data<int64_t>(), out.size(), out.begin());
  return out;
}

SupportFn index_input(size_t input, bool allow_int32) {
  return dtypes_of_input(allow_int32 ? std::vector<DType>{DType::Int32, DType::Int64}
                                     : std::vector<DType>{DType::Int64},
                         input);
}

// ---- Gather family ----

void gather(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const auto idx = indices_of(ctx.input(1));
  int64_t axis = ctx.node.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  const auto a = static_cast<size_t>(axis);
  const int64_t n = data.dim(axis);
  std::vector<int64_t> rows(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) rows[i] = checked_index(ctx.node, idx[i], n);
  const int64_t outer = product(data.shape(), 0, a);
  const int64_t inner = product(data.shape(), a + 1, data.shape().size()) *
                        static_cast<int64_t>(dtype_size(data.dtype()));
  const auto count = static_cast<int64_t>(idx.size());
  const auto* src = static_cast<const uint8_t*>(data.raw_data());
  auto* dst = static_cast<uint8_t*>(ctx.output(0).raw_data());
  if (inner == 0) return;
  // Gathering single elements (e.g. from shape vectors or 1-D tables) copies words directly
  // instead of calling memcpy per element.
  auto gather_words = [&](auto word) {
    using W = decltype(word);
    const auto* s = reinterpret_cast<const W*>(src);
    auto* d = reinterpret_cast<W*>(dst);
    ctx.pool.parallel_for(outer * count, 1 << 12, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        d[t] = s[(t / count) * n + rows[static_cast<size_t>(t % count)]];
    });
  };
  switch (inner) {
    case 1:
      return gather_words(uint8_t{});
    case 2:
      return gather_words(uint16_t{});
    case 4:
      return gather_words(uint32_t{});
    case 8:
      return gather_words(uint64_t{});
    default:
      break;
  }
  ctx.pool.parallel_for(
      outer * count, std::max<int64_t>(1, 16384 / inner), [&](int64_t begin, int64_t end) {
        for (int64_t t = begin; t < end; ++t) {
          const int64_t o = t / count, k = rows[static_cast<size_t>(t % count)];
          std::memcpy(dst + t * inner, src + (o * n + k) * inner, static_cast<size_t>(inner));
        }
      });
}

// The axis of GatherElements / ScatterElements, after checking what their loops address data
// by: indices of data's rank, no larger than data off the axis (else they read or write past
// data: the fuzzer found GatherElements reading past it).
int64_t elements_axis(const KernelContext& ctx, const Tensor& data, const Tensor& indices) {
  int64_t axis = ctx.node.attr_int("axis", 0);
  if (axis < 0) axis += data.rank();
  const auto& shape = indices.shape();
  if (axis < 0 || axis >= data.rank() || indices.rank() != data.rank())
    ctx.node.fail("data " + to_string(data.shape()) + ", indices " + to_string(shape) + ", axis " +
                      std::to_string(ctx.node.attr_int("axis", 0)) +
                      ": expected indices of data's rank and an axis inside it",
                  ErrorCode::InvalidArgument);
  for (int64_t d = 0; d < data.rank(); ++d)
    if (d != axis && shape[static_cast<size_t>(d)] > data.dim(d))
      ctx.node.fail("indices " + to_string(shape) + " is larger than data " +
                        to_string(data.shape()) + " in dim " + std::to_string(d) +
                        " (only the axis, " + std::to_string(axis) + ", may differ)",
                    ErrorCode::InvalidArgument);
  return axis;
}

void gather_elements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const auto idx = indices_of(indices);
  const int64_t axis = elements_axis(ctx, data, indices);
  const auto& shape = indices.shape();
  const auto a = static_cast<size_t>(axis);
  const auto ds = contiguous_strides(data.shape());
  const size_t es = dtype_size(data.dtype());
  const auto* src = static_cast<const uint8_t*>(data.raw_data());
  auto* dst = static_cast<uint8_t*>(ctx.output(0).raw_data());
  std::vector<int64_t> wrapped(idx.size());
  for (size_t e = 0; e < idx.size(); ++e)
    wrapped[e] = checked_index(ctx.node, idx[e], data.dim(axis));
  ctx.pool.parallel_for(static_cast<int64_t>(idx.size()), 1 << 13, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> pos(shape.size());
    for (size_t d = shape.size(), rem = static_cast<size_t>(begin); d-- > 0;) {
      pos[d] = static_cast<int64_t>(rem % static_cast<size_t>(shape[d]));
      rem /= static_cast<size_t>(shape[d]);
    }
    for (int64_t e = begin; e < end; ++e) {
      int64_t off = 0;
      for (size_t d = 0; d < shape.size(); ++d)
        off += (d == a ? wrapped[static_cast<size_t>(e)] : pos[d]) * ds[d];
      std::memcpy(dst + e * static_cast<int64_t>(es), src + off * static_cast<int64_t>(es), es);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++pos[d] < shape[d]) break;
        pos[d] = 0;
      }
    }
  });
}

// Offsets (in elements of data) of the slices that GatherND / ScatterND address: one per index
// tuple, batch by batch.
std::vector<int64_t> nd_offsets(const Node& node, const Tensor& data, const Tensor& indices,
                                int64_t batch_dims) {
  const auto idx = indices_of(indices);
  const auto ds = contiguous_strides(data.shape());
  const auto k = static_cast<size_t>(indices.shape().back());
  const auto b = static_cast<size_t>(batch_dims);
  const int64_t tuples = static_cast<int64_t>(idx.size() / std::max<size_t>(k, 1));
  const int64_t batches = product(data.shape(), 0, b);
  const int64_t per_batch = batches ? tuples / batches : 0;
  const int64_t batch_stride = b ? ds[b - 1] : 0;
  std::vector<int64_t> out(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = per_batch ? (t / per_batch) * batch_stride : 0;
    for (size_t j = 0; j < k; ++j)
      off +=
          checked_index(node, idx[static_cast<size_t>(t) * k + j], data.shape()[b + j]) * ds[b + j];
    out[static_cast<size_t>(t)] = off;
  }
  return out;
}

void gather_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const int64_t b = ctx.node.opset >= 12 ? ctx.node.attr_int("batch_dims", 0) : 0;
  const auto offsets = nd_offsets(ctx.node, data, indices, b);
  const size_t es = dtype_size(data.dtype());
  const auto slice =
      product(data.shape(), static_cast<size_t>(b + indices.shape().back()), data.shape().size()) *
      static_cast<int64_t>(es);
  const auto* src = static_cast<const uint8_t*>(data.raw_data());
  auto* dst = static_cast<uint8_t*>(ctx.output(0).raw_data());
  if (slice == 0) return;
  ctx.pool.parallel_for(static_cast<int64_t>(offsets.size()), std::max<int64_t>(1, 16384 / slice),
                        [&](int64_t begin, int64_t end) {
                          for (int64_t t = begin; t < end; ++t)
                            std::memcpy(
                                dst + t * slice,
                                src + offsets[static_cast<size_t>(t)] * static_cast<int64_t>(es),
                                static_cast<size_t>(slice));
                        });
}

// ---- Scatter family ----

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const Node& node) {
  const std::string r = node.attr_string("reduction", "none");
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  return Reduction::None;
}

template <class T>
T reduce(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::Add:
      return static_cast<T>(a + b);
    case Reduction::Mul:
      return static_cast<T>(a * b);
    case Reduction::Max:
      return a > b ? a : b;
    case Reduction::Min:
      return a < b ? a : b;
    default:
      return b;
  }
}

template <class T>
void combine_as(uint8_t* dst, const uint8_t* src, int64_t n, Reduction r) {
  for (int64_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, dst + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    std::memcpy(&b, src + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
    a = reduce(a, b, r);
    std::memcpy(dst + i * static_cast<int64_t>(sizeof(T)), &a, sizeof(T));
  }
}

// dst[0..n) = dst (reduction) src, elementwise in the given dtype.
void combine(uint8_t* dst, const uint8_t* src, int64_t n, DType dtype, Reduction r) {
  if (r == Reduction::None)
    return (void)std::memcpy(dst, src, static_cast<size_t>(n) * dtype_size(dtype));
  switch (dtype) {
    case DType::Float32:
      return combine_as<float>(dst, src, n, r);
    case DType::Float64:
      return combine_as<double>(dst, src, n, r);
    case DType::Int8:
      return combine_as<int8_t>(dst, src, n, r);
    case DType::Int16:
      return combine_as<int16_t>(dst, src, n, r);
    case DType::Int32:
      return combine_as<int32_t>(dst, src, n, r);
    case DType::Int64:
      return combine_as<int64_t>(dst, src, n, r);
    case DType::UInt8:
      return combine_as<uint8_t>(dst, src, n, r);
    case DType::UInt16:
      return combine_as<uint16_t>(dst, src, n, r);
    case DType::UInt32:
      return combine_as<uint32_t>(dst, src, n, r);
    case DType::UInt64:
      return combine_as<uint64_t>(dst, src, n, r);
    case DType::Float16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t a, b;
        std::memcpy(&a, dst + 2 * i, 2);
        std::memcpy(&b, src + 2 * i, 2);
        a = float_to_half(reduce(half_to_float(a), half_to_float(b), r));
        std::memcpy(dst + 2 * i, &a, 2);
      }
      return;
    default:
      return;
  }
}

SupportFn scatter_support(size_t index_input_pos, bool allow_int32) {
  SupportFn idx = index_input(index_input_pos, allow_int32);
  return [idx](const NodeSignature& sig) -> std::string {
    std::string why = idx(sig);
    if (!why.empty()) return why;
    if (sig.node.attr_string("reduction", "none") != "none" && !sig.inputs.empty() &&
        sig.inputs[0].dtype == DType::Bool)
      return "reductions on bool data are not supported";
    return "";
  };
}

void scatter_nd(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  std::memcpy(out.raw_data(), data.raw_data(), data.nbytes());
  const auto offsets = nd_offsets(ctx.node, data, indices, 0);
  const size_t es = dtype_size(data.dtype());
  const int64_t slice =
      product(data.shape(), static_cast<size_t>(indices.shape().back()), data.shape().size());
  const Reduction r = reduction_of(ctx.node);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  // In index order, so that duplicate indices behave as in the reference (last one wins).
  for (size_t t = 0; t < offsets.size(); ++t)
    combine(dst + offsets[t] * static_cast<int64_t>(es),
            src + static_cast<int64_t>(t) * slice * static_cast<int64_t>(es), slice, data.dtype(),
            r);
}

void scatter_elements(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& updates = ctx.input(2);
  Tensor& out = ctx.output(0);
  std::memcpy(out.raw_data(), data.raw_data(), data.nbytes());
  const auto idx = indices_of(indices);
  const int64_t axis = elements_axis(ctx, data, indices);
  const auto& shape = indices.shape();
  const auto a = static_cast<size_t>(axis);
  const auto ds = contiguous_strides(data.shape());
  const size_t es = dtype_size(data.dtype());
  const Reduction r = reduction_of(ctx.node);
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  const auto* src = static_cast<const uint8_t*>(updates.raw_data());
  std::vector<int64_t> pos(shape.size(), 0);
  for (size_t e = 0; e < idx.size(); ++e) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      off += (d == a ? checked_index(ctx.node, idx[e], data.dim(axis)) : pos[d]) * ds[d];
    combine(dst + static_cast<size_t>(off) * es, src + e * es, 1, data.dtype(), r);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

// ---- NonZero, OneHot ----

bool nonzero_at(const uint8_t* p, DType dtype, size_t es) {
  switch (dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      return v != 0.0f;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, p, 8);
      return v != 0.0;
    }
    case DType::Float16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return (v & 0x7fff) != 0;
    }
    default:
      for (size_t b = 0; b < es; ++b)
        if (p[b]) return true;
      return false;
  }
}

void nonzero(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  Tensor& out = ctx.output(0);
  const int64_t nnz = out.dim(1);
  const size_t es = dtype_size(in.dtype());
  const auto* p = static_cast<const uint8_t*>(in.raw_data());
  // A scalar is treated as a vector of one element.
  const std::vector<int64_t> shape = in.rank() == 0 ? std::vector<int64_t>{1} : in.shape();
  const auto rank = shape.size();
  int64_t* o = out.data<int64_t>();
  std::vector<int64_t> pos(rank, 0);
  int64_t found = 0;
  for (int64_t i = 0; i < in.numel(); ++i) {
    if (nonzero_at(p + static_cast<size_t>(i) * es, in.dtype(), es)) {
      for (size_t d = 0; d < rank; ++d) o[static_cast<int64_t>(d) * nnz + found] = pos[d];
      ++found;
    }
    for (size_t d = rank; d-- > 0;) {
      if (++pos[d] < shape[d]) break;
      pos[d] = 0;
    }
  }
}

// Element i of a numeric tensor as int64 (floats truncate toward zero, as a cast does).
int64_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return static_cast<int64_t>(t.data<float>()[i]);
    case DType::Float64:
      return static_cast<int64_t>(t.data<double>()[i]);
    case DType::Float16:
      return static_cast<int64_t>(half_to_float(t.data<uint16_t>()[i]));
    case DType::Int8:
      return t.data<int8_t>()[i];
    case DType::Int16:
      return t.data<int16_t>()[i];
    case DType::Int32:
      return t.data<int32_t>()[i];
    case DType::Int64:
      return t.data<int64_t>()[i];
    case DType::UInt8:
      return t.data<uint8_t>()[i];
    case DType::UInt16:
      return t.data<uint16_t>()[i];
    case DType::UInt32:
      return t.data<uint32_t>()[i];
    case DType::UInt64:
      return static_cast<int64_t>(t.data<uint64_t>()[i]);
    default:
      return 0;
  }
}

// Whether element i casts to int64 (a float that is finite and within int64's range; any
// integer does).
bool castable_at(const Tensor& t, int64_t i) {
  double v;
  switch (t.dtype()) {
    case DType::Float32:
      v = t.data<float>()[i];
      break;
    case DType::Float64:
      v = t.data<double>()[i];
      break;
    case DType::Float16:
      v = half_to_float(t.data<uint16_t>()[i]);
      break;
    default:
      return true;
  }
  return std::isfinite(v) && std::fabs(v) < 0x1p63;
}

std::string one_hot_support(const NodeSignature& sig) {
  for (size_t i = 0; i < 2 && i < sig.inputs.size(); ++i)
    if (sig.inputs[i].dtype == DType::Bool)
      return std::string(i == 0 ? "indices" : "depth") + " must be numeric, got bool";
  return "";
}

void one_hot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  Tensor& out = ctx.output(0);
  int64_t axis = ctx.node.attr_int("axis", -1);
  if (axis < 0) axis += out.rank();
  const int64_t depth = out.dim(axis);
  const int64_t post = product(out.shape(), static_cast<size_t>(axis) + 1, out.shape().size());
  const size_t es = dtype_size(out.dtype());
  const auto* off = static_cast<const uint8_t*>(values.raw_data());
  const uint8_t* on = off + es;
  auto* dst = static_cast<uint8_t*>(out.raw_data());
  for (int64_t i = 0; i < out.numel(); ++i)
    std::memcpy(dst + i * static_cast<int64_t>(es), off, es);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    // A float index is cast to int64 first (the spec; onnxruntime from 1.32 on): 2.7 selects 2.
    // One that no int64 holds (NaN, infinite, huge) selects nothing, as one out of range does.
    if (!castable_at(indices, i)) continue;
    int64_t k = int_at(indices, i);
    if (k < 0) k += depth;
    if (k < 0 || k >= depth) continue;  // out of range: the row stays all off
    const int64_t p = i / post, q = i % post;
    std::memcpy(dst + ((p * depth + k) * post + q) * static_cast<int64_t>(es), on, es);
  }
}

}  // namespace

void register_cpu_tensor_index(KernelRegistry& r) {
  r.add("Gather", index_input(1, true), KernelFn(gather));
  r.add("GatherElements", index_input(1, true), KernelFn(gather_elements));
  r.add("GatherND", index_input(1, false), KernelFn(gather_nd));
  r.add("ScatterND", scatter_support(1, false), KernelFn(scatter_nd));
  r.add("ScatterElements", scatter_support(1, true), KernelFn(scatter_elements));
  r.add("Scatter", scatter_support(1, true), KernelFn(scatter_elements));
  r.add("NonZero", any_dtype(), KernelFn(nonzero));
  r.add("OneHot", one_hot_support, KernelFn(one_hot));
}

}  // namespace quilt::cpu
