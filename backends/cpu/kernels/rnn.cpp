// CPU kernels of the rnn op family: RNN here, GRU in rnn_gru.cpp, LSTM in rnn_lstm.cpp, shared
// pieces (attributes, activations, layouts, gemm) here and in rnn_common.hpp.
//
// Every kernel runs each direction as: one GEMM for the input projection of all time steps
// (X * W^T), then per time step one GEMM for the recurrence (H * R^T) and an elementwise gate
// pass. sequence_lens makes batch entries stop early: their later Y rows stay zero and their
// Y_h is the state after their last step (for the backward direction, the step at t = 0).
#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernels/rnn_common.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

namespace rnn {

namespace {

// Up to this many rows (the batch), the recurrence GEMM streams R instead of calling sgemm.
constexpr int64_t kSmallM = 4;

struct ActInfo {
  const char* name;  // lower case, as compared
  ActKind kind;
  bool alpha, beta;  // which of activation_alpha / activation_beta it reads
};

constexpr ActInfo kActs[] = {
    {"relu", ActKind::Relu, false, false},
    {"tanh", ActKind::Tanh, false, false},
    {"sigmoid", ActKind::Sigmoid, false, false},
    {"affine", ActKind::Affine, true, true},
    {"leakyrelu", ActKind::LeakyRelu, true, false},
    {"thresholdedrelu", ActKind::ThresholdedRelu, true, false},
    {"scaledtanh", ActKind::ScaledTanh, true, true},
    {"hardsigmoid", ActKind::HardSigmoid, true, true},
    {"elu", ActKind::Elu, true, false},
    {"softsign", ActKind::Softsign, false, false},
    {"softplus", ActKind::Softplus, false, false},
};

const ActInfo* find_act(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const auto& a : kActs)
    if (name == a.name) return &a;
  return nullptr;
}

// Reads activation_alpha (or _beta) for activation k of the list: in the order of the
// activations that take the value (the spec's reading and onnxruntime's GRU/LSTM). Returns "" or
// why not.
std::string take_param(const std::vector<float>& values, size_t& next, size_t k, bool positional,
                       const std::string& act, const char* what, float& out) {
  if (next >= values.size())
    return "activation " + act + " without an explicit " + what +
           " (its default differs between the spec and onnxruntime)";
  out = values[next++];
  if (positional && (k >= values.size() || values[k] != out))
    return std::string(what) +
           " is read by position in onnxruntime's RNN but in order of use by the spec; "
           "this list gives different values";
  return "";
}

}  // namespace

std::string parse_rnn_attrs(const Node& node, const std::vector<std::string>& defaults,
                            bool positional_alpha, RnnAttrs& out) {
  std::string direction = node.attr_string("direction", "forward");
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    return "direction \"" + direction + "\" is not forward, reverse or bidirectional";
  out.dirs = direction == "bidirectional" ? 2 : 1;
  out.reverse = direction == "reverse";
  out.layout = node.attr_int("layout", 0);
  if (out.layout != 0 && out.layout != 1) return "layout must be 0 or 1";
  out.clip = node.has_attr("clip") ? node.attr_float("clip", 0.f) : 0.f;
  if (node.has_attr("clip") && !(out.clip > 0.f)) return "clip must be > 0";
  out.per_dir = static_cast<int>(defaults.size());

  auto names = node.attr_strings("activations");
  if (names.empty())
    for (int64_t d = 0; d < out.dirs; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  if (static_cast<int64_t>(names.size()) != out.per_dir * out.dirs)
    return "activations has " + std::to_string(names.size()) + " names, expected " +
           std::to_string(out.per_dir * out.dirs);
  auto alphas = node.attr_floats("activation_alpha");
  auto betas = node.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  out.acts.clear();
  for (size_t k = 0; k < names.size(); ++k) {
    const ActInfo* info = find_act(names[k]);
    if (!info) return "unknown activation \"" + names[k] + "\"";
    Activation a{info->kind, 0.f, 0.f};
    std::string why;
    if (info->alpha)
      why = take_param(alphas, next_alpha, k, positional_alpha, names[k], "activation_alpha",
                       a.alpha);
    if (why.empty() && info->beta)
      why = take_param(betas, next_beta, k, positional_alpha, names[k], "activation_beta", a.beta);
    if (!why.empty()) return why;
    out.acts.push_back(a);
  }
  return "";
}

SupportFn rnn_support(std::vector<std::string> defaults, bool positional_alpha) {
  return [defaults, positional_alpha](const NodeSignature& sig) -> std::string {
    DType d = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
    if (d != DType::Float32 && d != DType::Float64 && d != DType::Float16 && d != DType::Undefined)
      return std::string("X is ") + dtype_name(d) +
             "; the CPU kernel supports float32, float64, float16";
    RnnAttrs attrs;
    return parse_rnn_attrs(sig.node, defaults, positional_alpha, attrs);
  };
}

std::vector<int64_t> sequence_lengths(const KernelContext& ctx, size_t input, int64_t seq,
                                      int64_t batch) {
  std::vector<int64_t> lens(static_cast<size_t>(batch), seq);
  const Tensor* t = ctx.optional_input(input);
  if (!t) return lens;
  for (int64_t b = 0; b < batch; ++b) {
    int64_t v = t->dtype() == DType::Int64 ? t->data<int64_t>()[b] : t->data<int32_t>()[b];
    if (v < 0 || v > seq)
      ctx.node.fail("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(v) +
                    ", expected 0.." + std::to_string(seq));
    lens[static_cast<size_t>(b)] = v;
  }
  return lens;
}

namespace {

// C = A * B (+ beta C) for a handful of rows of A. sgemm repacks B on every call, which for
// the per-step recurrence of a small batch costs more than the product: stream B instead,
// keeping a block of each C row in registers.
constexpr int64_t kBlock = 64;

// Columns [j_begin, j_end) of C; j_begin is a multiple of kBlock.
void small_m_gemm_nn(int64_t m, int64_t j_begin, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // Column stripes outside, rows inside: a stripe of B (k x 64) stays in cache for every row.
  for (int64_t j0 = j_begin; j0 < n; j0 += kBlock) {
    const int64_t nb = std::min(kBlock, n - j0);
    for (int64_t i = 0; i < m; ++i) {
      const float* ai = a + i * lda;
      float* ci = c + i * ldc + j0;
      float acc[kBlock];
      for (int64_t j = 0; j < nb; ++j) acc[j] = beta == 0.f ? 0.f : beta * ci[j];
      if (nb == kBlock) {
        for (int64_t p = 0; p < k; ++p) {
          const float av = ai[p];
          const float* bp = b + p * ldb + j0;
          for (int64_t j = 0; j < kBlock; ++j) acc[j] += av * bp[j];
        }
      } else {
        for (int64_t p = 0; p < k; ++p) {
          const float av = ai[p];
          const float* bp = b + p * ldb + j0;
          for (int64_t j = 0; j < nb; ++j) acc[j] += av * bp[j];
        }
      }
      std::copy(acc, acc + nb, ci);
    }
  }
}

}  // namespace

void gemm_nn(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
             int64_t ldb, float beta, float* c, int64_t ldc, const ThreadPool* pool) {
  if (m == 0 || n == 0) return;
  if (m <= kSmallM) {
    if (!pool) return small_m_gemm_nn(m, 0, n, k, a, lda, b, ldb, beta, c, ldc);
    // Split the column stripes over the pool, each chunk worth at least ~256K multiply-adds
    // (below that, waking the workers at every step costs more than it saves).
    const int64_t stripes = (n + kBlock - 1) / kBlock;
    const int64_t grain =
        std::max<int64_t>(1, (int64_t{1} << 18) / std::max<int64_t>(1, m * k * kBlock));
    pool->parallel_for(stripes, grain, [&](int64_t s0, int64_t s1) {
      small_m_gemm_nn(m, s0 * kBlock, std::min(n, s1 * kBlock), k, a, lda, b, ldb, beta, c, ldc);
    });
    return;
  }
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.f ? 0.f : beta * c[i * ldc + j];
    return;
  }
  sgemm(false, false, m, n, k, 1.f, a, lda, b, ldb, beta, c, ldc);
}

void gemm_nn(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b,
             int64_t ldb, double beta, double* c, int64_t ldc, const ThreadPool*) {
  for (int64_t i = 0; i < m; ++i) {
    double* ci = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) ci[j] = beta == 0.0 ? 0.0 : beta * ci[j];
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * lda + p];
      const double* bp = b + p * ldb;
      for (int64_t j = 0; j < n; ++j) ci[j] += av * bp[j];
    }
  }
}

namespace {

template <class T>
void rnn_impl(KernelContext& ctx, const RnnAttrs& a, const TransposedWeights<float>* made) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(2);
  const Tensor* bias_t = ctx.optional_input(3);
  const Tensor* h0_t = ctx.optional_input(5);
  const int64_t seq = x.dim(a.layout == 0 ? 0 : 1), batch = x.dim(a.layout == 0 ? 1 : 0);
  const int64_t input = x.dim(2), hid = r.dim(2), dirs = a.dirs;
  if (batch == 0) return;  // no rows: every output is empty (as LSTM's and GRU's)
  const Layout lay{a.layout, seq, batch, dirs, hid};
  const auto lens = sequence_lengths(ctx, 4, seq, batch);
  T* y = ctx.wants_output(0) ? ctx.output(0).data<T>() : nullptr;
  T* yh = ctx.wants_output(1) ? ctx.output(1).data<T>() : nullptr;
  std::optional<TransposedWeights<T>> local;
  const TransposedWeights<T>& wts = transposed_weights<T>(ctx, made, hid, local);

  // The directions are independent: run them side by side.
  ctx.pool.parallel_for(dirs, 1, [&](int64_t d_begin, int64_t d_end) {
    std::vector<T> xw(static_cast<size_t>(seq * batch * hid)), h(static_cast<size_t>(batch * hid)),
        hr(h.size()), bias(static_cast<size_t>(hid));
    for (int64_t d = d_begin; d < d_end; ++d) {
      const bool backward = a.reverse || d == 1;
      const Activation& f = a.act(d, 0);
      gemm_nn(seq * batch, hid, input, x.data<T>(), input, wts.w(d), hid, T(0), xw.data(), hid,
              &ctx.pool);
      for (int64_t j = 0; j < hid; ++j)
        bias[j] =
            bias_t ? bias_t->data<T>()[d * 2 * hid + j] + bias_t->data<T>()[d * 2 * hid + hid + j]
                   : T(0);
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < hid; ++j)
          h[b * hid + j] = h0_t ? h0_t->data<T>()[lay.state_offset(d, b) + j] : T(0);
      for (int64_t s = 0; s < seq; ++s) {
        gemm_nn(batch, hid, hid, h.data(), hid, wts.r(d), hid, T(0), hr.data(), hid, &ctx.pool);
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t len = lens[b];
          if (s >= len) continue;
          const int64_t t = backward ? len - 1 - s : s;
          const T* xr = xw.data() + lay.x_row(t, b) * hid;
          T* hb = h.data() + b * hid;
          const T* hrb = hr.data() + b * hid;
          for (int64_t j = 0; j < hid; ++j) hb[j] = xr[j] + hrb[j] + bias[j];
          clip_all(hb, hid, a.clip);
          f.apply(hb, hid);
          if (y) std::copy(hb, hb + hid, y + lay.y_offset(t, d, b));
        }
      }
      if (yh)
        for (int64_t b = 0; b < batch; ++b)
          std::copy(h.data() + b * hid, h.data() + (b + 1) * hid, yh + lay.state_offset(d, b));
    }
  });
}

}  // namespace

void run_rnn(KernelContext& ctx, const RnnAttrs& attrs, const TransposedWeights<float>* weights) {
  if (ctx.input(0).dtype() == DType::Float64)
    rnn_impl<double>(ctx, attrs, weights);
  else
    rnn_impl<float>(ctx, attrs, weights);
}

}  // namespace rnn

namespace {

// Parses the attributes once, at creation.
class RnnKernel : public Kernel {
 public:
  enum class Op { Rnn, Gru, Lstm };
  RnnKernel(Op op, const NodeSignature& sig, const std::vector<std::string>& defaults,
            bool positional_alpha)
      : op_(op) {
    std::string why = rnn::parse_rnn_attrs(sig.node, defaults, positional_alpha, attrs_);
    if (!why.empty()) sig.node.fail(why, ErrorCode::NotImplemented);
    linear_before_reset_ = sig.node.attr_int("linear_before_reset", 0) != 0;
    input_forget_ = sig.node.attr_int("input_forget", 0) != 0;
    // Constant float32 W and R are transposed once, here (rnn_common.hpp says why).
    const Tensor* w = sig.constants.size() > 2 ? sig.constants[1] : nullptr;
    const Tensor* r = sig.constants.size() > 2 ? sig.constants[2] : nullptr;
    if (w && r && w->dtype() == DType::Float32 && r->dtype() == DType::Float32 && w->rank() == 3 &&
        r->rank() == 3 && w->dim(0) == r->dim(0) && w->dim(1) == r->dim(1) && r->dim(2) > 0 &&
        w->dim(1) == gates_per_hidden() * r->dim(2))
      weights_.emplace(w->data<float>(), r->data<float>(), w->dim(0), w->dim(1), w->dim(2),
                       r->dim(2));
  }
  void run(KernelContext& ctx) const override {
    if (ctx.has_input(0) && ctx.input(0).dtype() == DType::Float16) return run_float16(ctx);
    run_float(ctx);
  }

 private:
  int64_t gates_per_hidden() const { return op_ == Op::Rnn ? 1 : op_ == Op::Gru ? 3 : 4; }

  void run_float(KernelContext& ctx) const {
    // The prepared weights hold only while the run's W and R are the constants they came from.
    const rnn::TransposedWeights<float>* w =
        weights_ && ctx.input(1).dtype() == DType::Float32 ? &*weights_ : nullptr;
    switch (op_) {
      case Op::Rnn:
        return rnn::run_rnn(ctx, attrs_, w);
      case Op::Gru:
        return rnn::run_gru(ctx, attrs_, linear_before_reset_, w);
      case Op::Lstm:
        return rnn::run_lstm(ctx, attrs_, input_forget_, w);
    }
  }

  // float16 runs in float32 (inputs widened exactly, outputs rounded once at the end).
  void run_float16(KernelContext& ctx) const {
    std::vector<Tensor> wide(ctx.num_inputs());
    std::vector<const Tensor*> inputs(ctx.num_inputs(), nullptr);
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor* t = ctx.optional_input(i);
      if (!t) continue;
      if (t->dtype() == DType::Float16) {
        wide[i] = Tensor(DType::Float32, t->shape());
        const uint16_t* src = t->data<uint16_t>();
        float* dst = wide[i].data<float>();
        for (int64_t k = 0; k < t->numel(); ++k) dst[k] = half_to_float(src[k]);
        inputs[i] = &wide[i];
      } else {
        inputs[i] = t;  // sequence_lens
      }
    }
    std::vector<TypeShape> types(ctx.num_outputs());
    for (size_t i = 0; i < types.size(); ++i)
      types[i] = {DType::Float32, true, ctx.output_shape(i)};
    std::vector<Tensor> outputs(ctx.num_outputs());
    KernelContext wide_ctx(ctx.node, inputs, types, outputs, ctx.pool);
    run_float(wide_ctx);
    for (size_t i = 0; i < outputs.size(); ++i) {
      if (!ctx.wants_output(i)) continue;
      const float* src = outputs[i].data<float>();
      uint16_t* dst = ctx.output(i).data<uint16_t>();
      for (int64_t k = 0; k < outputs[i].numel(); ++k) dst[k] = float_to_half(src[k]);
    }
  }

  Op op_;
  rnn::RnnAttrs attrs_;
  std::optional<rnn::TransposedWeights<float>> weights_;
  bool linear_before_reset_ = false, input_forget_ = false;
};

// com.microsoft DynamicQuantizeLSTM (what onnxruntime's quantize_dynamic writes for LSTM):
// LSTM with int8/uint8 W [dirs, input, 4 hidden] and R [dirs, hidden, 4 hidden] (LSTM's
// transposed) and their scales and zero points per direction ([dirs]) or per gate column
// ([dirs, 4 hidden]). The weights are dequantized to float32, (w - zero_point) * scale as
// DequantizeLinear does (once at creation when constant), and the LSTM runs in float32.
// onnxruntime's kernel also quantizes X and H to uint8 at every step for its integer GEMM; Quilt
// keeps them float32, so the two differ by that rounding (about 1/255 of their range).
class DqLstmKernel : public Kernel {
 public:
  explicit DqLstmKernel(const NodeSignature& sig) {
    std::string why = rnn::parse_rnn_attrs(sig.node, {"Sigmoid", "Tanh", "Tanh"}, false, attrs_);
    if (!why.empty()) sig.node.fail(why, ErrorCode::NotImplemented);
    input_forget_ = sig.node.attr_int("input_forget", 0) != 0;
    auto c = [&](size_t i) { return i < sig.constants.size() ? sig.constants[i] : nullptr; };
    if (c(1) && c(2) && c(8) && c(9) && c(10) && c(11)) {
      w_ = dequantized(sig.node, *c(1), *c(8), *c(9), "W");
      r_ = dequantized(sig.node, *c(2), *c(10), *c(11), "R");
      if (w_.rank() == 3 && r_.rank() == 3 && w_.dim(0) == r_.dim(0) && w_.dim(1) == r_.dim(1) &&
          r_.dim(2) > 0 && w_.dim(1) == 4 * r_.dim(2))
        weights_.emplace(w_.data<float>(), r_.data<float>(), w_.dim(0), w_.dim(1), w_.dim(2),
                         r_.dim(2));
    }
  }

  void run(KernelContext& ctx) const override {
    Tensor w_run, r_run;
    const Tensor* w = &w_;
    const Tensor* r = &r_;
    if (!weights_) {
      w_run = dequantized(ctx.node, ctx.input(1), ctx.input(8), ctx.input(9), "W");
      r_run = dequantized(ctx.node, ctx.input(2), ctx.input(10), ctx.input(11), "R");
      w = &w_run;
      r = &r_run;
    }
    const Tensor* inputs[8] = {&ctx.input(0), w, r};
    for (size_t i = 3; i < 8; ++i) inputs[i] = ctx.optional_input(i);
    std::vector<TypeShape> types(ctx.num_outputs());
    for (size_t i = 0; i < types.size(); ++i)
      types[i] = {DType::Float32, true, ctx.output_shape(i)};
    std::vector<Tensor> outputs(ctx.num_outputs());
    KernelContext lstm(ctx.node, inputs, types, outputs, ctx.pool);
    rnn::run_lstm(lstm, attrs_, input_forget_, weights_ ? &*weights_ : nullptr);
    for (size_t i = 0; i < outputs.size(); ++i)
      if (ctx.wants_output(i)) ctx.set_output(i, std::move(outputs[i]));
  }

 private:
  // q [dirs, k, gates] of int8/uint8 with scale and zero point per direction or per (direction,
  // gate column) -> float32 [dirs, gates, k], LSTM's layout.
  static Tensor dequantized(const Node& node, const Tensor& q, const Tensor& scale,
                            const Tensor& zero_point, const std::string& what) {
    if (q.rank() != 3)
      node.fail(what + " has shape " + to_string(q.shape()) + ", expected rank 3",
                ErrorCode::InvalidArgument);
    const int64_t dirs = q.dim(0), k = q.dim(1), gates = q.dim(2);
    if (scale.numel() != dirs && scale.numel() != dirs * gates)
      node.fail(what + "_scale has shape " + to_string(scale.shape()) + ", expected [" +
                    std::to_string(dirs) + "] or [" + std::to_string(dirs) + ", " +
                    std::to_string(gates) + "] (per direction or per gate column)",
                ErrorCode::InvalidArgument);
    if (zero_point.numel() != scale.numel() || zero_point.dtype() != q.dtype())
      node.fail(what + "_zero_point is " + dtype_name(zero_point.dtype()) + " " +
                    to_string(zero_point.shape()) + ", expected " + dtype_name(q.dtype()) + " " +
                    to_string(scale.shape()) + " like " + what + " and " + what + "_scale",
                ErrorCode::InvalidArgument);
    const bool per_col = scale.numel() == dirs * gates;
    const bool s8 = q.dtype() == DType::Int8;
    const auto* qb = static_cast<const uint8_t*>(q.raw_data());
    const auto* zb = static_cast<const uint8_t*>(zero_point.raw_data());
    auto value = [s8](uint8_t b) { return s8 ? int32_t{static_cast<int8_t>(b)} : int32_t{b}; };
    Tensor out(DType::Float32, {dirs, gates, k});
    float* o = out.data<float>();
    for (int64_t d = 0; d < dirs; ++d)
      for (int64_t g = 0; g < gates; ++g) {
        const int64_t at = per_col ? d * gates + g : d;
        const float sc = scale.data<float>()[at];
        const int32_t zp = value(zb[at]);
        for (int64_t i = 0; i < k; ++i)
          o[(d * gates + g) * k + i] =
              static_cast<float>(value(qb[(d * k + i) * gates + g]) - zp) * sc;
      }
    return out;
  }

  rnn::RnnAttrs attrs_;
  bool input_forget_ = false;
  Tensor w_, r_;
  std::optional<rnn::TransposedWeights<float>> weights_;
};

void add_rnn_kernel(KernelRegistry& r, const char* op_type, RnnKernel::Op op,
                    std::vector<std::string> defaults, bool positional_alpha) {
  r.add(op_type, rnn::rnn_support(defaults, positional_alpha),
        KernelFactory([op, defaults, positional_alpha](const NodeSignature& sig) {
          return std::make_unique<RnnKernel>(op, sig, defaults, positional_alpha);
        }));
}

}  // namespace

void register_cpu_rnn(KernelRegistry& r) {
  // onnxruntime's RNN reads activation_alpha by position; its GRU and LSTM in order of use.
  add_rnn_kernel(r, "RNN", RnnKernel::Op::Rnn, {"Tanh"}, true);
  add_rnn_kernel(r, "GRU", RnnKernel::Op::Gru, {"Sigmoid", "Tanh"}, false);
  add_rnn_kernel(r, "LSTM", RnnKernel::Op::Lstm, {"Sigmoid", "Tanh", "Tanh"}, false);
  r.add(
      "DynamicQuantizeLSTM",
      [lstm = rnn::rnn_support({"Sigmoid", "Tanh", "Tanh"}, false)](const NodeSignature& sig) {
        const DType d = sig.inputs.empty() ? DType::Undefined : sig.inputs[0].dtype;
        if (d != DType::Float32 && d != DType::Undefined)
          return std::string("X is ") + dtype_name(d) + ", expected float32";
        return lstm(sig);
      },
      KernelFactory([](const NodeSignature& sig) -> std::unique_ptr<Kernel> {
        return std::make_unique<DqLstmKernel>(sig);
      }),
      "com.microsoft");
}

}  // namespace quilt::cpu
