// CPU kernels of the attention op family. Attention (opsets 23 and 24) here; RotaryEmbedding and
// RMSNormalization in attention_rope_rms.cpp.
//
// Attention works in float for float32 and float16 inputs (rounded once at the end) and in
// double for float64. Each task takes a block of query rows of one (batch, head): scores, bias,
// softmax and the product with V happen in a small buffer, so memory stays bounded for long
// sequences and blocks spread over the pool.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "backends/cpu/blas.hpp"
#include "backends/cpu/kernel.hpp"
#include "backends/cpu/kernels/attention_util.hpp"
#include "core/ops/attention_dims.hpp"

namespace quilt::cpu {

void register_cpu_rotary_embedding(KernelRegistry& r);   // attention_rope_rms.cpp
void register_cpu_rms_normalization(KernelRegistry& r);  // attention_rope_rms.cpp

namespace {

constexpr int64_t kRowBlock = 32;  // query rows per task
// OpenBLAS 0.3.21 runs an sgemm of up to 4 * 65536 multiply-adds on one thread and threads
// larger ones; calling those from several pool threads at once oversubscribes the cores.
constexpr int64_t kBlasThreadedMacs = 4 * 65536;
constexpr int64_t kScoresBudget = 1 << 20;  // score elements per block of a large head

// Row-major C[m x n] = alpha * A[m x k] * op(B), op(B) = B^T (n x k) when trans_b else B (k x n).
void gemm(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          const float* b, int64_t ldb, float* c) {
  sgemm(false, trans_b, m, n, k, alpha, a, k, b, ldb, 0.f, c, n);
}

void gemm(bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
          const double* b, int64_t ldb, double* c) {
  for (int64_t i = 0; i < m; ++i) {
    double* ci = c + i * n;
    std::fill(ci, ci + n, 0.0);
    for (int64_t p = 0; p < k; ++p) {
      const double aip = alpha * a[i * k + p];
      if (trans_b) {
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * b[j * ldb + p];
      } else {
        const double* bp = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  }
}

// A (batch, seq, heads * size) tensor as (batch, heads, seq, size); a 4-D one as is.
template <class A>
std::vector<A> load_heads(const Tensor& t, bool three_d, int64_t heads) {
  std::vector<A> flat(static_cast<size_t>(t.numel()));
  load_as(t, flat.data());
  if (!three_d) return flat;
  const int64_t batch = t.dim(0), seq = t.dim(1), size = t.dim(2) / heads;
  std::vector<A> out(flat.size());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h)
        std::copy_n(flat.data() + ((b * seq + s) * heads + h) * size, size,
                    out.data() + ((b * heads + h) * seq + s) * size);
  return out;
}

// past (batch, heads, past_seq, size) followed by cur (batch, heads, seq, size) along the
// sequence axis.
template <class A>
std::vector<A> concat_past(const Tensor* past, std::vector<A> cur, int64_t batch, int64_t heads,
                           int64_t seq, int64_t size) {
  if (!past || past->dim(2) == 0) return cur;
  const int64_t past_seq = past->dim(2), total = past_seq + seq;
  std::vector<A> p(static_cast<size_t>(past->numel()));
  load_as(*past, p.data());
  std::vector<A> out(static_cast<size_t>(batch * heads * total * size));
  for (int64_t bh = 0; bh < batch * heads; ++bh) {
    std::copy_n(p.data() + bh * past_seq * size, past_seq * size, out.data() + bh * total * size);
    std::copy_n(cur.data() + bh * seq * size, seq * size,
                out.data() + (bh * total + past_seq) * size);
  }
  return out;
}

// In-place softmax of one row, computed in precision P.
template <class P, class A>
void softmax_row(A* row, int64_t n) {
  P max = -std::numeric_limits<P>::infinity();
  for (int64_t j = 0; j < n; ++j) max = std::max<P>(max, static_cast<P>(row[j]));
  // A row masked everywhere has max = -inf and gives NaN, as the spec's Softmax does.
  P sum = 0;
  if constexpr (std::is_same_v<P, A>) {
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const P inv = P(1) / sum;
    for (int64_t j = 0; j < n; ++j) row[j] *= inv;
  } else {  // wider than the row: exponentials recomputed rather than stored
    for (int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<P>(row[j]) - max);
    for (int64_t j = 0; j < n; ++j)
      row[j] = static_cast<A>(std::exp(static_cast<P>(row[j]) - max) / sum);
  }
}

struct AttentionAttrs {
  bool causal = false;
  float scale = 0;  // 0 = 1 / sqrt(head_size)
  float softcap = 0;
  int64_t qk_mode = 0;
  bool softmax_double = false;
};

AttentionAttrs attention_attrs(const Node& node) {
  AttentionAttrs a;
  a.causal = node.attr_int("is_causal", 0) != 0;
  a.scale = node.has_attr("scale") ? node.attr_float("scale", 0) : 0.f;
  a.softcap = node.attr_float("softcap", 0);
  a.qk_mode = node.attr_int("qk_matmul_output_mode", 0);
  a.softmax_double = node.attr_int("softmax_precision", 1) == static_cast<int64_t>(DType::Float64);
  return a;
}

template <class A>
void run_attention(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& q = ctx.input(0);
  const Tensor& k = ctx.input(1);
  const Tensor& v = ctx.input(2);
  const Tensor* mask = ctx.optional_input(3);
  const Tensor* past_key = ctx.optional_input(4);
  const Tensor* past_value = ctx.optional_input(5);
  const Tensor* nonpad = ctx.optional_input(6);
  const AttentionDims d = attention_dims(
      node, q.shape(), k.shape(), v.shape(), mask ? &mask->shape() : nullptr,
      past_key ? &past_key->shape() : nullptr, past_value ? &past_value->shape() : nullptr,
      nonpad ? &nonpad->shape() : nullptr);
  const AttentionAttrs at = attention_attrs(node);
  const int64_t batch = d.batch, hq = d.q_heads, hkv = d.kv_heads, sq = d.q_seq;
  const int64_t total = d.total_seq, hs = d.head_size, vhs = d.v_head_size, past = d.past_seq;

  const std::vector<A> qa = load_heads<A>(q, d.three_d, hq);
  const std::vector<A> ka =
      concat_past(past_key, load_heads<A>(k, d.three_d, hkv), batch, hkv, d.kv_seq, hs);
  const std::vector<A> va =
      concat_past(past_value, load_heads<A>(v, d.three_d, hkv), batch, hkv, d.kv_seq, vhs);
  if (ctx.wants_output(1)) store_as(ka.data(), ctx.output(1), 0, static_cast<int64_t>(ka.size()));
  if (ctx.wants_output(2)) store_as(va.data(), ctx.output(2), 0, static_cast<int64_t>(va.size()));
  Tensor& y = ctx.output(0);
  Tensor* qk = ctx.wants_output(3) ? &ctx.output(3) : nullptr;
  if (total == 0 || sq == 0 || batch == 0 || hq == 0) return;  // Y stays zero: no keys to mix

  // The mask as additive bias in A, with its broadcast strides over (batch, heads, q_seq, key).
  std::vector<A> bias;
  int64_t mstride[4] = {0, 0, 0, 0}, mask_len = 0;
  if (mask) {
    bias.resize(static_cast<size_t>(mask->numel()));
    load_mask(*mask, bias.data());
    std::vector<int64_t> ms(4 - mask->shape().size(), 1);
    ms.insert(ms.end(), mask->shape().begin(), mask->shape().end());
    int64_t s = 1;
    for (int i = 3; i >= 0; --i) {
      mstride[i] = ms[i] == 1 ? 0 : s;
      s *= ms[i];
    }
    // Opset 24 pads a short key axis with -inf (the key axis is never broadcast); opset 23
    // broadcasts a key axis of 1.
    mask_len = ms[3];
    if (node.opset >= 24 || ms[3] != 1) {
      mstride[3] = 1;
    } else {
      mstride[3] = 0;
      mask_len = total;
    }
  }
  std::vector<int64_t> valid_keys;  // per batch, from nonpad_kv_seqlen
  if (nonpad) valid_keys.assign(nonpad->data<int64_t>(), nonpad->data<int64_t>() + batch);

  const A scale = at.scale != 0 ? static_cast<A>(at.scale)
                                : static_cast<A>(1.0 / std::sqrt(static_cast<double>(hs)));
  const A softcap = static_cast<A>(at.softcap);
  const A neg_inf = -std::numeric_limits<A>::infinity();
  const int64_t group = hq / hkv;

  // Scores of query row qi of (batch, head) bh: softcap, bias, softmax in place; the optional
  // qk output taken at the stage its mode names.
  auto finish_row = [&](int64_t bh, int64_t qi, A* row) {
    const int64_t b = bh / hq, h = bh % hq;
    const int64_t qk_off = (bh * sq + qi) * total;
    if (qk && at.qk_mode == 0) store_as(row, *qk, qk_off, total);
    if (at.softcap > 0)
      for (int64_t j = 0; j < total; ++j) row[j] = softcap * std::tanh(row[j] / softcap);
    if (qk && at.qk_mode == 1) store_as(row, *qk, qk_off, total);
    if (mask) {
      const A* m = bias.data() + b * mstride[0] + h * mstride[1] + qi * mstride[2];
      const int64_t n = std::min(mask_len, total);
      for (int64_t j = 0; j < n; ++j) row[j] += m[j * mstride[3]];
      for (int64_t j = n; j < total; ++j) row[j] = neg_inf;
    }
    // Upper-left aligned causal mask, shifted by the cached keys.
    if (at.causal)
      for (int64_t j = std::max<int64_t>(0, qi + past + 1); j < total; ++j) row[j] = neg_inf;
    if (nonpad)
      for (int64_t j = std::max<int64_t>(0, valid_keys[b]); j < total; ++j) row[j] = neg_inf;
    if (qk && at.qk_mode == 2) store_as(row, *qk, qk_off, total);
    if (at.softmax_double)
      softmax_row<double>(row, total);
    else
      softmax_row<A>(row, total);
    if (qk && at.qk_mode == 3) store_as(row, *qk, qk_off, total);
  };
  // Query rows [r0, r0 + rows) of (batch, head) bh; scores and out are scratch buffers of
  // rows * total and rows * v_head_size. The row work is split over the pool when `pool` is
  // given (the products then run on one thread each, OpenBLAS threading them itself).
  auto run_block = [&](int64_t bh, int64_t r0, int64_t rows, A* scores, A* out,
                       const ThreadPool* pool) {
    const int64_t b = bh / hq, h = bh % hq, kvh = h / group;
    const A* qp = qa.data() + (bh * sq + r0) * hs;
    const A* kp = ka.data() + (b * hkv + kvh) * total * hs;
    const A* vp = va.data() + (b * hkv + kvh) * total * vhs;
    if (hs > 0)
      gemm(true, rows, total, hs, scale, qp, kp, hs, scores);
    else
      std::fill_n(scores, rows * total, A(0));
    auto rows_fn = [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) finish_row(bh, r0 + r, scores + r * total);
    };
    if (pool)
      pool->parallel_for(rows, std::max<int64_t>(1, 16384 / total), rows_fn);
    else
      rows_fn(0, rows);
    if (vhs == 0) return;
    gemm(false, rows, vhs, total, A(1), scores, vp, vhs, out);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t qi = r0 + r;
      const int64_t y_off = d.three_d ? (b * sq + qi) * hq * vhs + h * vhs : (bh * sq + qi) * vhs;
      store_as(out + r * vhs, y, y_off, vhs);
    }
  };

  const int64_t head_macs = sq * total * std::max(hs, vhs);
  if (std::is_same_v<A, float> && head_macs > kBlasThreadedMacs) {
    // Large heads: one head at a time, blocks of rows as large as the scratch budget allows,
    // so that OpenBLAS's threads get big products.
    const int64_t block = std::clamp<int64_t>(kScoresBudget / total, 1, sq);
    std::vector<A> scores(static_cast<size_t>(block * total)),
        out(static_cast<size_t>(block * vhs));
    for (int64_t bh = 0; bh < batch * hq; ++bh)
      for (int64_t r0 = 0; r0 < sq; r0 += block)
        run_block(bh, r0, std::min(block, sq - r0), scores.data(), out.data(), &ctx.pool);
    return;
  }
  // Small heads: products below OpenBLAS's threading threshold, so tasks of a block of rows of
  // one head run on the pool.
  const int64_t blocks = (sq + kRowBlock - 1) / kRowBlock;
  const int64_t cost = std::min(sq, kRowBlock) * total * (hs + vhs + 8);
  ctx.pool.parallel_for(batch * hq * blocks,
                        std::max<int64_t>(1, 65536 / std::max<int64_t>(cost, 1)),
                        [&](int64_t begin, int64_t end) {
                          std::vector<A> scores(static_cast<size_t>(kRowBlock * total));
                          std::vector<A> out(static_cast<size_t>(kRowBlock * vhs));
                          for (int64_t task = begin; task < end; ++task) {
                            const int64_t r0 = (task % blocks) * kRowBlock;
                            run_block(task / blocks, r0, std::min(kRowBlock, sq - r0),
                                      scores.data(), out.data(), nullptr);
                          }
                        });
}

bool is_attention_float(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64;
}

std::string attention_support(const NodeSignature& sig) {
  const Node& node = sig.node;
  const DType t = sig.inputs[0].dtype;
  if (t != DType::Undefined && !is_attention_float(t))
    return std::string("Q is ") + dtype_name(t) + "; the CPU kernel supports float32, float16, " +
           "float64";
  const char* names[] = {"Q", "K", "V", "attn_mask", "past_key", "past_value"};
  for (size_t i : {1, 2, 4, 5}) {
    if (!node.has_input(i) || i >= sig.inputs.size()) continue;
    DType ti = sig.inputs[i].dtype;
    if (ti != DType::Undefined && t != DType::Undefined && ti != t)
      return std::string(names[i]) + " is " + dtype_name(ti) + " but Q is " + dtype_name(t) +
             "; the CPU kernel needs one float type for Q, K, V and the caches";
  }
  // The spec's mask is bool or "of the same type as query" (its function body adds it to the
  // scores as is).
  if (node.has_input(3) && sig.inputs.size() > 3) {
    const DType m = sig.inputs[3].dtype;
    if (m != DType::Undefined && m != DType::Bool && t != DType::Undefined && m != t)
      return std::string("attn_mask is ") + dtype_name(m) + "; it must be bool or Q's type " +
             dtype_name(t);
  }
  const int64_t mode = node.attr_int("qk_matmul_output_mode", 0);
  if (mode < 0 || mode > 3)
    return "qk_matmul_output_mode " + std::to_string(mode) + " is not one of 0, 1, 2, 3";
  if (node.has_attr("softmax_precision")) {
    const int64_t p = node.attr_int("softmax_precision", 1);
    // The softmax runs in float (float32 and float16 inputs) or double (float64 inputs, or when
    // float64 is asked): at least the precision asked for. float16 is accepted only for float16
    // inputs, where it is the default anyway.
    const bool ok = p == static_cast<int64_t>(DType::Float32) ||
                    p == static_cast<int64_t>(DType::Float64) ||
                    (p == static_cast<int64_t>(DType::Float16) && t == DType::Float16);
    if (!ok)
      return "softmax_precision " + std::to_string(p) +
             " is not supported (float32 and float64 are; float16 for float16 inputs)";
  }
  return "";
}

void attention_kernel(KernelContext& ctx) {
  if (ctx.input(0).dtype() == DType::Float64)
    run_attention<double>(ctx);
  else
    run_attention<float>(ctx);
}

}  // namespace

void register_cpu_attention(KernelRegistry& r) {
  r.add("Attention", attention_support, attention_kernel);
  register_cpu_rotary_embedding(r);
  register_cpu_rms_normalization(r);
}

}  // namespace quilt::cpu
