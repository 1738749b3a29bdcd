// QLinearMatMul and QLinearConv: exact int32 accumulation of (x - x_zero_point) * (w -
// w_zero_point), then requantization y = saturate(round_half_even(acc * multiplier) + y_zp) with
// multiplier = x_scale * w_scale / y_scale computed in the scales' type (float16 scales round
// after each operation) and the product taken in double, as onnx's reference does.
#include <algorithm>
#include <string>

#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/quantization_common.hpp"

namespace quilt::cpu {
namespace {

// Per-output-channel (or per-column) multipliers a_scale * b_scale[j] / y_scale.
std::vector<double> multipliers(const Tensor& a_scale, const Tensor& b_scale, const Tensor& y_scale,
                                int64_t count) {
  const bool half = b_scale.dtype() == DType::Float16;
  const float as = load_float(a_scale, 0), ys = load_float(y_scale, 0);
  std::vector<double> m(static_cast<size_t>(count));
  for (int64_t j = 0; j < count; ++j) {
    const float bs = load_float(b_scale, b_scale.numel() == 1 ? 0 : j);
    const float v = half ? round_to_half(round_to_half(as * bs) / ys) : as * bs / ys;
    m[static_cast<size_t>(j)] = v;
  }
  return m;
}

template <class T>
void store_requantized(const int32_t* acc, int64_t n, const double* m, int64_t m_step, int64_t zp,
                       T* y) {
  for (int64_t j = 0; j < n; ++j) y[j] = saturate_round<T>(acc[j] * m[j * m_step], zp);
}

template <class T>
std::vector<int32_t> centered(const Tensor& t, const std::vector<int64_t>& zp, int64_t group) {
  // t - zp, where zp has one value or one per `group` consecutive elements (per output channel).
  std::vector<int32_t> out(static_cast<size_t>(t.numel()));
  const T* p = t.data<T>();
  for (int64_t i = 0; i < t.numel(); ++i)
    out[static_cast<size_t>(i)] =
        static_cast<int32_t>(p[i]) -
        static_cast<int32_t>(zp.size() == 1 ? zp[0] : zp[static_cast<size_t>(i / group)]);
  return out;
}

std::vector<int32_t> centered_any(const Tensor& t, const std::vector<int64_t>& zp, int64_t group) {
  return t.dtype() == DType::Int8 ? centered<int8_t>(t, zp, group)
                                  : centered<uint8_t>(t, zp, group);
}

std::string int8_input(const NodeSignature& sig, size_t i, const char* what) {
  if (unholdable_input(sig, i))
    return std::string(what) + " has a float8 type, which Quilt's tensors cannot hold";
  if (!dtype_in(sig.inputs[i].dtype, {DType::Int8, DType::UInt8}))
    return std::string(what) + " is " + dtype_name(sig.inputs[i].dtype) + ", expected int8/uint8";
  return "";
}

std::string per_tensor(const NodeSignature& sig, size_t i, const char* what) {
  const int64_t n = known_numel(sig, i);
  if (n > 1)
    return std::string(what) + " has " + std::to_string(n) +
           " values; the CPU kernel supports per-tensor values only here";
  return "";
}

// ---- QLinearMatMul ----

std::string qlinear_matmul_support(const NodeSignature& sig) {
  for (auto [i, what] : {std::pair<size_t, const char*>{0, "a"}, {3, "b"}, {7, "y_zero_point"}})
    if (auto r = int8_input(sig, i, what); !r.empty()) return r;
  for (size_t i : {1, 4, 6})
    if (unholdable_input(sig, i) ||
        !dtype_in(sig.inputs[i].dtype, {DType::Float32, DType::Float16}))
      return "scales must be float32 or float16 (bfloat16 cannot be held)";
  // onnx's reference broadcasts a 1-D a/y scale along columns, the spec along rows: refused.
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "a_scale"},
                         {2, "a_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}})
    if (auto r = per_tensor(sig, i, what); !r.empty()) return r;
  return "";
}

template <class Y>
void qlinear_matmul(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(3);
  Tensor& y = ctx.output(0);
  for (size_t i : {1, 2, 6, 7})
    if (ctx.input(i).numel() != 1)
      ctx.node.fail("input " + std::to_string(i) + " must hold one value (per-tensor)",
                    ErrorCode::NotImplemented);
  std::vector<int64_t> as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (ctx.input(4).numel() != 1 && ctx.input(4).numel() != n)
    ctx.node.fail("b_scale must hold 1 or " + std::to_string(n) + " values");
  if (ctx.input(5).numel() != 1 && ctx.input(5).numel() != n)
    ctx.node.fail("b_zero_point must hold 1 or " + std::to_string(n) + " values");
  if (y.numel() == 0) return;
  const std::vector<double> mult = multipliers(ctx.input(1), ctx.input(4), ctx.input(6), n);
  const int64_t yzp = int_values(&ctx.input(7), 1)[0];
  const std::vector<int32_t> aq = centered_any(a, int_values(&ctx.input(2), 1), 1);
  // b's zero point is per column: element i is column i % n.
  std::vector<int32_t> bq(static_cast<size_t>(b.numel()));
  {
    const std::vector<int64_t> bzp = int_values(&ctx.input(5), 1);
    const bool i8 = b.dtype() == DType::Int8;
    for (int64_t i = 0; i < b.numel(); ++i)
      bq[static_cast<size_t>(i)] =
          (i8 ? b.data<int8_t>()[i] : b.data<uint8_t>()[i]) -
          static_cast<int32_t>(bzp[bzp.size() == 1 ? 0 : static_cast<size_t>(i % n)]);
  }
  // Batch dims broadcast numpy-style: offsets of each output batch in a and b.
  const std::vector<int64_t> ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const size_t rank = std::max(ab.size(), bb.size());
  std::vector<int64_t> ob(rank), ad(rank, 1), bd(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    if (d >= rank - ab.size()) ad[d] = ab[d - (rank - ab.size())];
    if (d >= rank - bb.size()) bd[d] = bb[d - (rank - bb.size())];
    ob[d] = std::max(ad[d], bd[d]);
  }
  int64_t batches = 1;
  for (int64_t d : ob) batches *= d;
  std::vector<int64_t> a_off(static_cast<size_t>(batches)), b_off(static_cast<size_t>(batches));
  for (int64_t t = 0; t < batches; ++t) {
    int64_t rem = t, ai = 0, bi = 0, astr = 1, bstr = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t idx = rem % ob[d];
      rem /= ob[d];
      if (ad[d] != 1) ai += idx * astr;
      if (bd[d] != 1) bi += idx * bstr;
      astr *= ad[d];
      bstr *= bd[d];
    }
    a_off[static_cast<size_t>(t)] = ai * m * k;
    b_off[static_cast<size_t>(t)] = bi * k * n;
  }
  Y* yp = y.data<Y>();
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, k * n));
  ctx.pool.parallel_for(batches * m, grain, [&](int64_t rb, int64_t re) {
    std::vector<int32_t> acc(static_cast<size_t>(n));
    for (int64_t r = rb; r < re; ++r) {
      const int64_t t = r / m, i = r % m;
      const int32_t* arow = aq.data() + a_off[static_cast<size_t>(t)] + i * k;
      const int32_t* bmat = bq.data() + b_off[static_cast<size_t>(t)];
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t p = 0; p < k; ++p) {
        const int32_t av = arow[p];
        const int32_t* brow = bmat + p * n;
        for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += av * brow[j];
      }
      store_requantized(acc.data(), n, mult.data(), 1, yzp, yp + r * n);
    }
  });
}

void run_qlinear_matmul(KernelContext& ctx) {
  if (ctx.input(7).dtype() == DType::Int8) return qlinear_matmul<int8_t>(ctx);
  qlinear_matmul<uint8_t>(ctx);
}

// ---- QLinearConv ----

std::string qlinear_conv_support(const NodeSignature& sig) {
  for (auto [i, what] : {std::pair<size_t, const char*>{0, "x"},
                         {2, "x_zero_point"},
                         {3, "w"},
                         {5, "w_zero_point"},
                         {7, "y_zero_point"}})
    if (auto r = int8_input(sig, i, what); !r.empty()) return r;
  for (size_t i : {1, 4, 6})
    if (!dtype_in(sig.inputs[i].dtype, {DType::Float32})) return "scales must be float32";
  for (auto [i, what] : {std::pair<size_t, const char*>{1, "x_scale"},
                         {2, "x_zero_point"},
                         {6, "y_scale"},
                         {7, "y_zero_point"}})
    if (auto r = per_tensor(sig, i, what); !r.empty()) return r;
  return "";
}

// Leading pads; the output size is already fixed by inference.
std::vector<int64_t> conv_pad_begins(const Node& node, const std::vector<int64_t>& x,
                                     const std::vector<int64_t>& kernel,
                                     const std::vector<int64_t>& y) {
  const size_t sp = x.size() - 2;
  const std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  std::vector<int64_t> begins(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    if (auto_pad == "NOTSET") {
      begins[i] = pads[i];
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const int64_t dk = (kernel[i] - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (y[i + 2] - 1) * strides[i] + dk - x[i + 2]);
      begins[i] = auto_pad == "SAME_UPPER" ? total / 2 : (total + 1) / 2;
    }
  }
  return begins;
}

template <class Y>
void qlinear_conv(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(3);
  Tensor& y = ctx.output(0);
  const int64_t batch = x.dim(0), c_in = x.dim(1), c_out = w.dim(0);
  const int64_t group = node.attr_int("group", 1);
  const int64_t cg = c_in / group, mg = c_out / group;
  for (size_t i : {1, 2, 6, 7})
    if (ctx.input(i).numel() != 1)
      node.fail("input " + std::to_string(i) + " must hold one value (per-tensor)",
                ErrorCode::NotImplemented);
  for (size_t i : {4, 5})
    if (ctx.input(i).numel() != 1 && ctx.input(i).numel() != c_out)
      node.fail("input " + std::to_string(i) + " must hold 1 or " + std::to_string(c_out) +
                " values");
  if (y.numel() == 0) return;
  const size_t sp = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> in(x.shape().begin() + 2, x.shape().end());
  const std::vector<int64_t> kernel(w.shape().begin() + 2, w.shape().end());
  const std::vector<int64_t> out(y.shape().begin() + 2, y.shape().end());
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pad = conv_pad_begins(node, x.shape(), kernel, y.shape());
  int64_t in_size = 1, k_size = 1, out_size = 1;
  for (size_t i = 0; i < sp; ++i) {
    in_size *= in[i];
    k_size *= kernel[i];
    out_size *= out[i];
  }
  const std::vector<double> mult = multipliers(ctx.input(1), ctx.input(4), ctx.input(6), c_out);
  const int64_t yzp = int_values(&ctx.input(7), 1)[0];
  const int64_t xzp = int_values(&ctx.input(2), 1)[0];
  const std::vector<int32_t> wq = centered_any(w, int_values(&ctx.input(5), 1), cg * k_size);
  std::vector<int32_t> bias(static_cast<size_t>(c_out), 0);
  if (const Tensor* b = ctx.optional_input(8)) std::copy_n(b->data<int32_t>(), c_out, bias.begin());
  const int64_t rows = cg * k_size;
  std::vector<int32_t> col(static_cast<size_t>(rows * out_size));
  const bool x_i8 = x.dtype() == DType::Int8;
  const int8_t* x_s8 = x_i8 ? x.data<int8_t>() : nullptr;
  const uint8_t* x_u8 = x_i8 ? nullptr : x.data<uint8_t>();
  Y* yp = y.data<Y>();
  for (int64_t nb = 0; nb < batch; ++nb) {
    for (int64_t g = 0; g < group; ++g) {
      const int64_t x_base = (nb * c_in + g * cg) * in_size;
      // im2col: row (c, kernel offset), column = output position; padding is 0 after centering.
      ctx.pool.parallel_for(
          rows, std::max<int64_t>(1, 8192 / out_size), [&](int64_t rb, int64_t re) {
            std::vector<int64_t> kpos(sp), opos(sp);
            for (int64_t r = rb; r < re; ++r) {
              const int64_t c = r / k_size;
              int64_t kr = r % k_size;
              for (size_t d = sp; d-- > 0;) {
                kpos[d] = kr % kernel[d];
                kr /= kernel[d];
              }
              std::fill(opos.begin(), opos.end(), 0);
              int32_t* dst = col.data() + r * out_size;
              for (int64_t o = 0; o < out_size; ++o) {
                int64_t idx = 0;
                bool inside = true;
                for (size_t d = 0; d < sp && inside; ++d) {
                  const int64_t p = opos[d] * strides[d] - pad[d] + kpos[d] * dilations[d];
                  inside = p >= 0 && p < in[d];
                  idx = idx * in[d] + p;
                }
                int32_t v = 0;
                if (inside) {
                  const int64_t xi = x_base + c * in_size + idx;
                  v = (x_i8 ? static_cast<int32_t>(x_s8[xi]) : static_cast<int32_t>(x_u8[xi])) -
                      static_cast<int32_t>(xzp);
                }
                dst[o] = v;
                for (size_t d = sp; d-- > 0;) {
                  if (++opos[d] < out[d]) break;
                  opos[d] = 0;
                }
              }
            }
          });
      // Per output channel: acc = bias + w_row . col, then requantize.
      ctx.pool.parallel_for(mg, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, rows * out_size)),
                            [&](int64_t mb, int64_t me) {
                              std::vector<int32_t> acc(static_cast<size_t>(out_size));
                              for (int64_t mi = mb; mi < me; ++mi) {
                                const int64_t oc = g * mg + mi;
                                std::fill(acc.begin(), acc.end(), bias[static_cast<size_t>(oc)]);
                                const int32_t* wrow = wq.data() + oc * rows;
                                for (int64_t r = 0; r < rows; ++r) {
                                  const int32_t wv = wrow[r];
                                  if (wv == 0) continue;
                                  const int32_t* crow = col.data() + r * out_size;
                                  for (int64_t o = 0; o < out_size; ++o)
                                    acc[static_cast<size_t>(o)] += wv * crow[o];
                                }
                                store_requantized(acc.data(), out_size, mult.data() + oc, 0, yzp,
                                                  yp + (nb * c_out + oc) * out_size);
                              }
                            });
    }
  }
}

void run_qlinear_conv(KernelContext& ctx) {
  if (ctx.input(7).dtype() == DType::Int8) return qlinear_conv<int8_t>(ctx);
  qlinear_conv<uint8_t>(ctx);
}

}  // namespace

void register_cpu_qlinear(KernelRegistry& r) {
  r.add("QLinearMatMul", qlinear_matmul_support, run_qlinear_matmul);
  r.add("QLinearConv", qlinear_conv_support, run_qlinear_conv);
}

}  // namespace quilt::cpu
