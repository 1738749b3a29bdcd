// CPU kernels of the misc op family: Unique, Det and the random generators (Einsum is in
// misc_einsum.cpp, the smaller suite ops in misc_extra.cpp).
#include <cmath>
#include <cstring>
#include <random>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/broadcast.hpp"
#include "core/half.hpp"
#include "core/ops/misc_unique.hpp"

namespace quilt::cpu {

void register_cpu_misc_einsum(KernelRegistry& r);
void register_cpu_misc_extra(KernelRegistry& r);
void register_cpu_misc_tree(KernelRegistry& r);
void register_cpu_ml_tree(KernelRegistry& r);
void register_cpu_ml(KernelRegistry& r);
void register_cpu_misc_flex_attention(KernelRegistry& r);
void register_cpu_misc_tfidf(KernelRegistry& r);
void register_cpu_misc_deform_conv(KernelRegistry& r);
void register_cpu_misc_linear_attention(KernelRegistry& r);

namespace {

void unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Node& n = ctx.node;
  int64_t outer = 1, count = x.numel(), inner = 1;
  if (n.has_attr("axis")) {
    int64_t axis = n.attr_int("axis", 0);
    if (axis < 0) axis += x.rank();
    count = x.dim(axis);
    for (int64_t d = 0; d < axis; ++d) outer *= x.dim(d);
    for (int64_t d = axis + 1; d < x.rank(); ++d) inner *= x.dim(d);
  }
  UniqueGroups g;
  if (!unique_groups(x, outer, count, inner, n.attr_int("sorted", 1) != 0, g))
    n.fail(std::string("Unique on ") + dtype_name(x.dtype()) + " is not supported");
  const auto u = static_cast<int64_t>(g.first.size());
  Tensor& y = ctx.output(0);
  const size_t esize = dtype_size(x.dtype());
  const auto* src = static_cast<const char*>(x.raw_data());
  auto* dst = static_cast<char*>(y.raw_data());
  const size_t run = static_cast<size_t>(inner) * esize;
  // Nothing to copy when the output is empty (empty slices, or none along the axis): the loop
  // over `outer` alone took 11 s under ASan for an empty input declaring 2^32 of them, and 58 s
  // for 2^32 - 2 with an empty axis (fuzz_run).
  for (int64_t o = 0; y.numel() != 0 && o < outer; ++o)
    for (int64_t j = 0; j < u; ++j)
      std::memcpy(
          dst + static_cast<size_t>((o * u + j) * inner) * esize,
          src + static_cast<size_t>((o * count + g.first[static_cast<size_t>(j)]) * inner) * esize,
          run);
  const std::vector<int64_t>* lists[] = {&g.first, &g.inverse, &g.counts};
  for (size_t i = 1; i < 4; ++i)
    if (ctx.wants_output(i))
      std::copy(lists[i - 1]->begin(), lists[i - 1]->end(), ctx.output(i).data<int64_t>());
  if (ctx.wants_output(2) && g.inverse.empty())  // every slice empty: all in group 0
    std::fill_n(ctx.output(2).data<int64_t>(), count, int64_t{0});
}

// Determinant of an m x m row-major matrix by LU with partial pivoting, in double.
double determinant(std::vector<double>& a, int64_t m) {
  double det = 1.0;
  for (int64_t c = 0; c < m; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < m; ++r)
      if (std::fabs(a[static_cast<size_t>(r * m + c)]) >
          std::fabs(a[static_cast<size_t>(pivot * m + c)]))
        pivot = r;
    const double p = a[static_cast<size_t>(pivot * m + c)];
    if (p == 0.0) return 0.0;
    if (pivot != c) {
      for (int64_t k = 0; k < m; ++k)
        std::swap(a[static_cast<size_t>(pivot * m + k)], a[static_cast<size_t>(c * m + k)]);
      det = -det;
    }
    det *= p;
    for (int64_t r = c + 1; r < m; ++r) {
      const double f = a[static_cast<size_t>(r * m + c)] / p;
      if (f == 0.0) continue;
      for (int64_t k = c + 1; k < m; ++k)
        a[static_cast<size_t>(r * m + k)] -= f * a[static_cast<size_t>(c * m + k)];
    }
  }
  return det;
}

double to_double(float v) {
  return v;
}
double to_double(double v) {
  return v;
}
double to_double(uint16_t h) {
  return half_to_float(h);
}
template <class T>
T from_double(double v) {
  if constexpr (std::is_same_v<T, uint16_t>)
    return float_to_half(static_cast<float>(v));
  else
    return static_cast<T>(v);
}

template <class T>
void det(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t m = x.dim(x.rank() - 1);
  Tensor& y = ctx.output(0);
  const T* src = static_cast<const T*>(x.raw_data());
  T* dst = static_cast<T*>(y.raw_data());
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, m * m * m));
  ctx.pool.parallel_for(y.numel(), grain, [&](int64_t begin, int64_t end) {
    std::vector<double> a(static_cast<size_t>(m * m));
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t i = 0; i < m * m; ++i) a[static_cast<size_t>(i)] = to_double(src[b * m * m + i]);
      dst[b] = from_double<T>(determinant(a, m));
    }
  });
}

// A generator seeded from the 'seed' attribute (the same values on every run), else from the
// system's entropy.
std::mt19937_64 make_generator(const Node& n) {
  if (n.has_attr("seed")) {
    const float seed = n.attr_float("seed", 0.0f);
    uint32_t bits;
    std::memcpy(&bits, &seed, sizeof bits);
    return std::mt19937_64(bits);
  }
  std::random_device rd;
  return std::mt19937_64((static_cast<uint64_t>(rd()) << 32) ^ rd());
}

// Fills y with draws of `sample()` (a double) converted to y's dtype.
template <class Sample>
void fill_random(Tensor& y, Sample&& sample) {
  const int64_t n = y.numel();
  switch (y.dtype()) {
    case DType::Float32:
      for (int64_t i = 0; i < n; ++i) y.data<float>()[i] = static_cast<float>(sample());
      break;
    case DType::Float64:
      for (int64_t i = 0; i < n; ++i) y.data<double>()[i] = sample();
      break;
    case DType::Float16:
      for (int64_t i = 0; i < n; ++i)
        static_cast<uint16_t*>(y.raw_data())[i] = float_to_half(static_cast<float>(sample()));
      break;
    default:
      throw Error(ErrorCode::Runtime, std::string("random output dtype ") + dtype_name(y.dtype()) +
                                          " is not supported");
  }
}

void random_uniform(KernelContext& ctx) {
  const double low = ctx.node.attr_float("low", 0.0f), high = ctx.node.attr_float("high", 1.0f);
  std::mt19937_64 gen = make_generator(ctx.node);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  fill_random(ctx.output(0), [&] { return low + (high - low) * dist(gen); });
}

void random_normal(KernelContext& ctx) {
  const double mean = ctx.node.attr_float("mean", 0.0f), scale = ctx.node.attr_float("scale", 1.0f);
  std::mt19937_64 gen = make_generator(ctx.node);
  std::normal_distribution<double> dist(0.0, 1.0);
  fill_random(ctx.output(0), [&] { return mean + scale * dist(gen); });
}

void bernoulli(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  std::mt19937_64 gen = make_generator(ctx.node);
  std::uniform_real_distribution<double> dist(0.0, 1.0);
  std::vector<char> bits(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    double p = 0;
    if (x.dtype() == DType::Float32) p = x.data<float>()[i];
    if (x.dtype() == DType::Float64) p = x.data<double>()[i];
    if (x.dtype() == DType::Float16)
      p = half_to_float(static_cast<const uint16_t*>(x.raw_data())[i]);
    bits[static_cast<size_t>(i)] = dist(gen) < p;
  }
  if (y.dtype() == DType::Float16) {
    for (size_t i = 0; i < bits.size(); ++i)
      static_cast<uint16_t*>(y.raw_data())[i] = float_to_half(bits[i] ? 1.0f : 0.0f);
    return;
  }
  visit_dtype(y.dtype(), AllTypes{}, [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < bits.size(); ++i) y.data<T>()[i] = static_cast<T>(bits[i] ? 1 : 0);
  });
}

const std::vector<DType> kFloatTypes = {DType::Float32, DType::Float64, DType::Float16};

bool is_float(DType d) {
  return d == DType::Undefined ||
         std::find(kFloatTypes.begin(), kFloatTypes.end(), d) != kFloatTypes.end();
}

// Random ops: supported when the output is a float type.
std::string random_support(const NodeSignature& sig) {
  const DType out = sig.outputs.empty() ? DType::Undefined : sig.outputs[0].dtype;
  if (!is_float(out))
    return std::string("output dtype ") + dtype_name(out) + " is not float16, float or double";
  return "";
}

}  // namespace

void register_cpu_misc(KernelRegistry& r) {
  r.add("Unique",
        dtypes_of_input({DType::Float32, DType::Float64, DType::Int8, DType::Int16, DType::Int32,
                         DType::Int64, DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64,
                         DType::Bool}),
        unique);
  r.add("Det", dtypes_of_input(kFloatTypes), [](KernelContext& ctx) {
    switch (ctx.input(0).dtype()) {
      case DType::Float32:
        return det<float>(ctx);
      case DType::Float64:
        return det<double>(ctx);
      default:
        return det<uint16_t>(ctx);
    }
  });
  r.add("RandomUniform", random_support, random_uniform);
  r.add("RandomNormal", random_support, random_normal);
  r.add("RandomUniformLike", random_support, random_uniform);
  r.add("RandomNormalLike", random_support, random_normal);
  r.add(
      "Bernoulli",
      [](const NodeSignature& sig) -> std::string {
        if (!is_float(sig.inputs[0].dtype))
          return std::string("input is ") + dtype_name(sig.inputs[0].dtype) +
                 ", expected float16, float or double";
        const DType out = sig.outputs[0].dtype;
        if (out != DType::Undefined && out != DType::Float16 &&
            !visit_dtype(out, AllTypes{}, [](auto) {}))
          return std::string("output dtype ") + dtype_name(out) + " is not supported";
        return "";
      },
      bernoulli);
  register_cpu_misc_einsum(r);
  register_cpu_misc_extra(r);
  register_cpu_misc_tree(r);
  register_cpu_ml_tree(r);
  register_cpu_ml(r);
  register_cpu_misc_flex_attention(r);
  register_cpu_misc_tfidf(r);
  register_cpu_misc_deform_conv(r);
  register_cpu_misc_linear_attention(r);
}

}  // namespace quilt::cpu
