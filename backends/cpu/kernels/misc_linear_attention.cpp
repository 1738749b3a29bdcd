// The CPU LinearAttention kernel: the recurrent form of linear attention (optionally gated by a
// decay and delta-corrected by beta), one (batch, kv head) state matrix per thread, accumulated
// in float32 as the spec's reference does.
#include <cmath>

#include "backends/cpu/kernel.hpp"
#include "core/half.hpp"

namespace quilt::cpu {

void register_cpu_misc_linear_attention(KernelRegistry& r);

namespace {

// Reads element i of a float32 or float16 tensor as float.
float read(const Tensor& t, int64_t i) {
  return t.dtype() == DType::Float16 ? half_to_float(static_cast<const uint16_t*>(t.raw_data())[i])
                                     : t.data<float>()[i];
}
void write(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::Float16)
    static_cast<uint16_t*>(t.raw_data())[i] = float_to_half(v);
  else
    t.data<float>()[i] = v;
}

void linear_attention(KernelContext& ctx) {
  const Node& n = ctx.node;
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* past = ctx.optional_input(3);
  const Tensor* decay = ctx.optional_input(4);
  const Tensor* beta = ctx.optional_input(5);
  const int64_t hq = n.attr_int("q_num_heads", 0), hkv = n.attr_int("kv_num_heads", 0);
  const int64_t batch = q.dim(0), steps = q.dim(1), dk = q.dim(2) / hq, dv = v.dim(2) / hkv;
  const int64_t group = hq / hkv;
  const std::string rule = n.attr_string("update_rule", "gated_delta");
  const bool gated = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  auto bad = [&](const std::string& what) { n.fail(what, ErrorCode::Runtime); };
  if (gated != (decay != nullptr))
    bad("update_rule '" + rule + "' " + (gated ? "requires" : "forbids") + " the decay input");
  if (delta != (beta != nullptr))
    bad("update_rule '" + rule + "' " + (delta ? "requires" : "forbids") + " the beta input");
  if (k.dim(0) != batch || v.dim(0) != batch || k.dim(1) != steps || v.dim(1) != steps ||
      k.dim(2) != hkv * dk)
    bad("key " + to_string(k.shape()) + " or value " + to_string(v.shape()) +
        " does not match query " + to_string(q.shape()));
  const int64_t decay_last = decay ? decay->dim(2) : 0;
  if (decay && (decay->dim(0) != batch || decay->dim(1) != steps ||
                (decay_last != hkv && decay_last != hkv * dk)))
    bad("decay has shape " + to_string(decay->shape()) + ", expected [B, T, kv_num_heads] or " +
        "[B, T, kv_num_heads * d_k]");
  const int64_t beta_last = beta ? beta->dim(2) : 0;
  if (beta &&
      (beta->dim(0) != batch || beta->dim(1) != steps || (beta_last != hkv && beta_last != 1)))
    bad("beta has shape " + to_string(beta->shape()) + ", expected [B, T, kv_num_heads] or " +
        "[B, T, 1]");
  if (past && past->shape() != std::vector<int64_t>{batch, hkv, dk, dv})
    bad("past_state has shape " + to_string(past->shape()) + ", expected " +
        to_string(std::vector<int64_t>{batch, hkv, dk, dv}));
  float scale = n.attr_float("scale", 0.0f);
  if (scale == 0.0f) scale = 1.0f / std::sqrt(static_cast<float>(dk));

  Tensor& out = ctx.output(0);
  Tensor* present = ctx.wants_output(1) ? &ctx.output(1) : nullptr;
  ctx.pool.parallel_for(batch * hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> state(static_cast<size_t>(dk * dv)), vt(static_cast<size_t>(dv));
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / hkv, h = bh % hkv;
      for (int64_t i = 0; i < dk * dv; ++i)
        state[static_cast<size_t>(i)] = past ? read(*past, bh * dk * dv + i) : 0.0f;
      for (int64_t t = 0; t < steps; ++t) {
        const int64_t row = b * steps + t;
        if (gated)
          for (int64_t d = 0; d < dk; ++d) {
            const int64_t di = decay_last == hkv ? row * hkv + h : (row * hkv + h) * dk + d;
            const float g = std::exp(read(*decay, di));
            for (int64_t m = 0; m < dv; ++m) state[static_cast<size_t>(d * dv + m)] *= g;
          }
        for (int64_t m = 0; m < dv; ++m)
          vt[static_cast<size_t>(m)] = read(v, (row * hkv + h) * dv + m);
        const int64_t key = (row * hkv + h) * dk;
        if (delta) {
          const float bt = read(*beta, beta_last == 1 ? row : row * hkv + h);
          for (int64_t m = 0; m < dv; ++m) {
            float retrieved = 0;
            for (int64_t d = 0; d < dk; ++d)
              retrieved += state[static_cast<size_t>(d * dv + m)] * read(k, key + d);
            vt[static_cast<size_t>(m)] = bt * (vt[static_cast<size_t>(m)] - retrieved);
          }
        }
        for (int64_t d = 0; d < dk; ++d) {
          const float kd = read(k, key + d);
          for (int64_t m = 0; m < dv; ++m)
            state[static_cast<size_t>(d * dv + m)] += kd * vt[static_cast<size_t>(m)];
        }
        // Query heads h * group .. h * group + group - 1 read this kv head's state.
        for (int64_t qh = h * group; qh < (h + 1) * group; ++qh) {
          const int64_t query = (row * hq + qh) * dk;
          for (int64_t m = 0; m < dv; ++m) {
            float acc = 0;
            for (int64_t d = 0; d < dk; ++d)
              acc += read(q, query + d) * state[static_cast<size_t>(d * dv + m)];
            write(out, (row * hq + qh) * dv + m, scale * acc);
          }
        }
      }
      if (present)
        for (int64_t i = 0; i < dk * dv; ++i)
          write(*present, bh * dk * dv + i, state[static_cast<size_t>(i)]);
    }
  });
}

}  // namespace

void register_cpu_misc_linear_attention(KernelRegistry& r) {
  r.add(
      "LinearAttention",
      [](const NodeSignature& sig) -> std::string {
        for (size_t i = 0; i < sig.inputs.size(); ++i) {
          const DType d = sig.inputs[i].dtype;
          if (d != DType::Undefined && d != DType::Float32 && d != DType::Float16 &&
              sig.node.has_input(i))
            return std::string("input ") + std::to_string(i) + " is " + dtype_name(d) +
                   "; the CPU kernel supports float32 and float16";
        }
        for (const auto& o : sig.outputs)
          if (o.dtype != DType::Undefined && o.dtype != DType::Float32 && o.dtype != DType::Float16)
            return std::string("output dtype ") + dtype_name(o.dtype) + " is not supported";
        return "";
      },
      linear_attention);
}

}  // namespace quilt::cpu
