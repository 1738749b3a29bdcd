// GRU on the CPU. Gates stacked in W, R and B in the order z (update), r (reset), h (hidden):
//   z = f(Xt Wz^T + H Rz^T + Wbz + Rbz),  r = f(Xt Wr^T + H Rr^T + Wbr + Rbr)
//   h = g(Xt Wh^T + (r . H) Rh^T + Rbh + Wbh)          linear_before_reset = 0
//   h = g(Xt Wh^T + r . (H Rh^T + Rbh) + Wbh)          linear_before_reset = 1
//   H' = (1 - z) . h + z . H
// With linear_before_reset = 0 the hidden gate's recurrence needs r first, so each step runs
// two GEMMs: H * [Rz Rr]^T, then (r . H) * Rh^T.
#include <algorithm>

#include "backends/cpu/kernels/rnn_common.hpp"

namespace quilt::cpu::rnn {

namespace {

template <class T>
void gru_impl(KernelContext& ctx, const RnnAttrs& a, bool linear_before_reset,
              const TransposedWeights<float>* made) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(2);
  const Tensor* bias_t = ctx.optional_input(3);
  const Tensor* h0_t = ctx.optional_input(5);
  const int64_t seq = x.dim(a.layout == 0 ? 0 : 1), batch = x.dim(a.layout == 0 ? 1 : 0);
  const int64_t input = x.dim(2), hid = r.dim(2), dirs = a.dirs, g3 = 3 * hid;
  // No rows: every output is empty (and the per-batch buffers below would be too: offsets into
  // their null data are undefined, which UBSan reported on the batch-0 case).
  if (batch == 0) return;
  const Layout lay{a.layout, seq, batch, dirs, hid};
  const auto lens = sequence_lengths(ctx, 4, seq, batch);
  T* y = ctx.wants_output(0) ? ctx.output(0).data<T>() : nullptr;
  T* yh = ctx.wants_output(1) ? ctx.output(1).data<T>() : nullptr;
  std::optional<TransposedWeights<T>> local;
  const TransposedWeights<T>& wts = transposed_weights<T>(ctx, made, g3, local);

  // The directions are independent: run them side by side.
  ctx.pool.parallel_for(dirs, 1, [&](int64_t d_begin, int64_t d_end) {
    const size_t state = static_cast<size_t>(batch * hid);
    std::vector<T> xw(static_cast<size_t>(seq * batch * g3)), h(state), hr(state * 3), z(state),
        rh(state), wb(static_cast<size_t>(g3)), rb(static_cast<size_t>(g3)),
        rg(static_cast<size_t>(hid));
    for (int64_t d = d_begin; d < d_end; ++d) {
      const bool backward = a.reverse || d == 1;
      const Activation& f = a.act(d, 0);
      const Activation& g = a.act(d, 1);
      gemm_nn(seq * batch, g3, input, x.data<T>(), input, wts.w(d), g3, T(0), xw.data(), g3,
              &ctx.pool);
      for (int64_t j = 0; j < g3; ++j) {
        wb[j] = bias_t ? bias_t->data<T>()[d * 2 * g3 + j] : T(0);
        rb[j] = bias_t ? bias_t->data<T>()[d * 2 * g3 + g3 + j] : T(0);
      }
      for (int64_t b = 0; b < batch; ++b)
        for (int64_t j = 0; j < hid; ++j)
          h[b * hid + j] = h0_t ? h0_t->data<T>()[lay.state_offset(d, b) + j] : T(0);
      const T* rt = wts.r(d);

      for (int64_t s = 0; s < seq; ++s) {
        // H * [Rz Rr Rh]^T, or only the z and r blocks when Rh waits for r.
        gemm_nn(batch, linear_before_reset ? g3 : 2 * hid, hid, h.data(), hid, rt, g3, T(0),
                hr.data(), g3, &ctx.pool);
        auto row = [&](int64_t b) {
          const int64_t len = lens[b];
          return xw.data() + lay.x_row(backward ? len - 1 - s : s, b) * g3;
        };
        for (int64_t b = 0; b < batch; ++b) {
          if (s >= lens[b]) continue;
          const T* xr = row(b);
          const T* hrb = hr.data() + b * g3;
          // Whole-gate passes so the activations vectorise.
          T* zb = z.data() + b * hid;
          T* rhb = rh.data() + b * hid;
          for (int64_t j = 0; j < hid; ++j) {
            zb[j] = xr[j] + hrb[j] + wb[j] + rb[j];
            rg[j] = xr[hid + j] + hrb[hid + j] + wb[hid + j] + rb[hid + j];
          }
          clip_all(zb, hid, a.clip);
          clip_all(rg.data(), hid, a.clip);
          f.apply(zb, hid);
          f.apply(rg.data(), hid);
          if (linear_before_reset) {
            // The candidate state, combined below.
            for (int64_t j = 0; j < hid; ++j) {
              const int64_t k = 2 * hid + j;
              rhb[j] = xr[k] + rg[j] * (hrb[k] + rb[k]) + wb[k];
            }
            clip_all(rhb, hid, a.clip);
            g.apply(rhb, hid);
          } else {
            for (int64_t j = 0; j < hid; ++j) rhb[j] = rg[j] * h[b * hid + j];
          }
        }
        if (!linear_before_reset)
          gemm_nn(batch, hid, hid, rh.data(), hid, rt + 2 * hid, g3, T(0), hr.data() + 2 * hid, g3,
                  &ctx.pool);
        for (int64_t b = 0; b < batch; ++b) {
          const int64_t len = lens[b];
          if (s >= len) continue;
          const int64_t t = backward ? len - 1 - s : s;
          const T* xr = row(b);
          const T* hrb = hr.data() + b * g3;
          T* hb = h.data() + b * hid;
          const T* zb = z.data() + b * hid;
          T* cand = rh.data() + b * hid;  // r . H was consumed by the GEMM above
          if (!linear_before_reset) {
            for (int64_t j = 0; j < hid; ++j) {
              const int64_t k = 2 * hid + j;
              cand[j] = xr[k] + hrb[k] + rb[k] + wb[k];
            }
            clip_all(cand, hid, a.clip);
            g.apply(cand, hid);
          }
          for (int64_t j = 0; j < hid; ++j) hb[j] = (T(1) - zb[j]) * cand[j] + zb[j] * hb[j];
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

void run_gru(KernelContext& ctx, const RnnAttrs& attrs, bool linear_before_reset,
             const TransposedWeights<float>* weights) {
  if (ctx.input(0).dtype() == DType::Float64)
    gru_impl<double>(ctx, attrs, linear_before_reset, weights);
  else
    gru_impl<float>(ctx, attrs, linear_before_reset, weights);
}

}  // namespace quilt::cpu::rnn
