// LSTM on the CPU. Gates stacked in W, R and B in the order i, o, f, c; peepholes P in i, o, f:
//   i = f(Xt Wi^T + H Ri^T + Pi . C + Wbi + Rbi)
//   f = f(Xt Wf^T + H Rf^T + Pf . C + Wbf + Rbf)     (input_forget = 1: f = 1 - i)
//   c = g(Xt Wc^T + H Rc^T + Wbc + Rbc)
//   C' = f . C + i . c
//   o = f(Xt Wo^T + H Ro^T + Po . C' + Wbo + Rbo)
//   H' = o . h(C')
// clip bounds every gate's input before its activation. input_forget couples the gates the way
// onnxruntime does (the spec does not give a formula).
#include <algorithm>

#include "backends/cpu/kernels/rnn_common.hpp"

namespace quilt::cpu::rnn {

namespace {

template <class T>
void lstm_impl(KernelContext& ctx, const RnnAttrs& a, bool input_forget,
               const TransposedWeights<float>* made) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(2);
  const Tensor* bias_t = ctx.optional_input(3);
  const Tensor* h0_t = ctx.optional_input(5);
  const Tensor* c0_t = ctx.optional_input(6);
  const Tensor* p_t = ctx.optional_input(7);
  const int64_t seq = x.dim(a.layout == 0 ? 0 : 1), batch = x.dim(a.layout == 0 ? 1 : 0);
  const int64_t input = x.dim(2), hid = r.dim(2), dirs = a.dirs, g4 = 4 * hid;
  // No rows: every output is empty, whatever the sequence's length (fuzz_run: an empty batch
  // declared 2^31 steps long ran them all, two minutes of nothing).
  if (batch == 0) return;
  const Layout lay{a.layout, seq, batch, dirs, hid};
  const auto lens = sequence_lengths(ctx, 4, seq, batch);
  T* y = ctx.wants_output(0) ? ctx.output(0).data<T>() : nullptr;
  T* yh = ctx.wants_output(1) ? ctx.output(1).data<T>() : nullptr;
  T* yc = ctx.wants_output(2) ? ctx.output(2).data<T>() : nullptr;
  std::optional<TransposedWeights<T>> local;
  const TransposedWeights<T>& wts = transposed_weights<T>(ctx, made, g4, local);

  // The directions are independent: run them side by side.
  ctx.pool.parallel_for(dirs, 1, [&](int64_t d_begin, int64_t d_end) {
    const size_t state = static_cast<size_t>(batch * hid);
    std::vector<T> xw(static_cast<size_t>(seq * batch * g4)), h(state), c(state), hr(state * 4),
        bias(static_cast<size_t>(g4)), peep(static_cast<size_t>(3 * hid)),
        gates(static_cast<size_t>(g4)), hc(static_cast<size_t>(hid));
    for (int64_t d = d_begin; d < d_end; ++d) {
      const bool backward = a.reverse || d == 1;
      const Activation& f = a.act(d, 0);
      const Activation& g = a.act(d, 1);
      const Activation& ha = a.act(d, 2);
      gemm_nn(seq * batch, g4, input, x.data<T>(), input, wts.w(d), g4, T(0), xw.data(), g4,
              &ctx.pool);
      for (int64_t j = 0; j < g4; ++j)
        bias[j] = bias_t
                      ? bias_t->data<T>()[d * 2 * g4 + j] + bias_t->data<T>()[d * 2 * g4 + g4 + j]
                      : T(0);
      for (int64_t j = 0; j < 3 * hid; ++j) peep[j] = p_t ? p_t->data<T>()[d * 3 * hid + j] : T(0);
      const T* pi = peep.data();
      const T* po = pi + hid;
      const T* pf = po + hid;
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < hid; ++j) {
          h[b * hid + j] = h0_t ? h0_t->data<T>()[lay.state_offset(d, b) + j] : T(0);
          c[b * hid + j] = c0_t ? c0_t->data<T>()[lay.state_offset(d, b) + j] : T(0);
        }
      for (int64_t s = 0; s < seq; ++s) {
        gemm_nn(batch, g4, hid, h.data(), hid, wts.r(d), g4, T(0), hr.data(), g4, &ctx.pool);
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t len = lens[b];
          if (s >= len) continue;
          const int64_t t = backward ? len - 1 - s : s;
          const T* xr = xw.data() + lay.x_row(t, b) * g4;
          const T* hrb = hr.data() + b * g4;
          T* hb = h.data() + b * hid;
          T* cb = c.data() + b * hid;
          // Whole-gate passes (rather than one element at a time) so the activations vectorise.
          T* gi = gates.data();
          T* go = gi + hid;
          T* gf = go + hid;
          T* gc = gf + hid;
          for (int64_t k = 0; k < g4; ++k) gi[k] = xr[k] + hrb[k] + bias[k];
          if (p_t)
            for (int64_t j = 0; j < hid; ++j) {
              gi[j] += pi[j] * cb[j];
              gf[j] += pf[j] * cb[j];
            }
          clip_all(gi, hid, a.clip);
          clip_all(gf, 2 * hid, a.clip);  // f and c
          f.apply(gi, hid);
          if (input_forget)
            for (int64_t j = 0; j < hid; ++j) gf[j] = T(1) - gi[j];
          else
            f.apply(gf, hid);
          g.apply(gc, hid);
          for (int64_t j = 0; j < hid; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
          if (p_t)
            for (int64_t j = 0; j < hid; ++j) go[j] += po[j] * cb[j];
          clip_all(go, hid, a.clip);
          f.apply(go, hid);
          std::copy(cb, cb + hid, hc.data());
          ha.apply(hc.data(), hid);
          for (int64_t j = 0; j < hid; ++j) hb[j] = go[j] * hc[j];
          if (y) std::copy(hb, hb + hid, y + lay.y_offset(t, d, b));
        }
      }
      for (int64_t b = 0; b < batch; ++b) {
        if (yh)
          std::copy(h.data() + b * hid, h.data() + (b + 1) * hid, yh + lay.state_offset(d, b));
        if (yc)
          std::copy(c.data() + b * hid, c.data() + (b + 1) * hid, yc + lay.state_offset(d, b));
      }
    }
  });
}

}  // namespace

void run_lstm(KernelContext& ctx, const RnnAttrs& attrs, bool input_forget,
              const TransposedWeights<float>* weights) {
  if (ctx.input(0).dtype() == DType::Float64)
    lstm_impl<double>(ctx, attrs, input_forget, weights);
  else
    lstm_impl<float>(ctx, attrs, input_forget, weights);
}

}  // namespace quilt::cpu::rnn
