// Schemas and shape inference of the attention op family: Attention (opsets 23 and 24),
// RotaryEmbedding and RMSNormalization (opset 23).
#include <string>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/attention_dims.hpp"

namespace quilt {
namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

// The common value of two dims that must agree (-1 = unknown); fails when both are known and
// differ.
int64_t same_dim(const Node& node, int64_t a, int64_t b, const std::string& what) {
  if (a >= 0 && b >= 0 && a != b) node.fail(what + " disagree: " + str(a) + " vs " + str(b));
  return a >= 0 ? a : b;
}

// hidden / heads, or -1 when hidden is unknown; fails when not divisible.
int64_t split_heads(const Node& node, int64_t hidden, int64_t heads, const std::string& what) {
  if (hidden < 0) return -1;
  if (hidden % heads != 0)
    node.fail(what + " hidden size " + str(hidden) + " is not divisible by its " + str(heads) +
              " heads");
  return hidden / heads;
}

bool is_float_type(DType d) {
  return d == DType::Float32 || d == DType::Float16 || d == DType::Float64 || d == DType::Undefined;
}

void expect_float(InferenceContext& ctx, size_t i, const char* what) {
  if (ctx.has_input(i) && !is_float_type(ctx.input_dtype(i)))
    ctx.fail(std::string(what) + " must be a float tensor, got " + dtype_name(ctx.input_dtype(i)));
}

void expect_same_dtype(InferenceContext& ctx, size_t i, size_t j, const char* what_i,
                       const char* what_j) {
  if (!ctx.has_input(i) || !ctx.has_input(j)) return;
  DType a = ctx.input_dtype(i), b = ctx.input_dtype(j);
  if (a != DType::Undefined && b != DType::Undefined && a != b)
    ctx.fail(std::string(what_i) + " is " + dtype_name(a) + " but " + what_j + " is " +
             dtype_name(b) + "; they must have the same type");
}

const std::vector<int64_t>* optional_shape(InferenceContext& ctx, size_t i) {
  return ctx.has_input(i) ? &ctx.input_shape(i) : nullptr;
}

void infer_attention(InferenceContext& ctx) {
  expect_float(ctx, 0, "Q");
  expect_float(ctx, 1, "K");
  expect_float(ctx, 2, "V");
  expect_same_dtype(ctx, 0, 1, "Q", "K");
  expect_same_dtype(ctx, 0, 4, "Q", "past_key");
  expect_same_dtype(ctx, 2, 5, "V", "past_value");
  if (ctx.has_input(3) && ctx.input_dtype(3) == DType::String)
    ctx.fail("attn_mask must be bool or numeric, got string");
  if (ctx.has_input(6) && ctx.input_dtype(6) != DType::Int64 &&
      ctx.input_dtype(6) != DType::Undefined)
    ctx.fail(std::string("nonpad_kv_seqlen must be int64, got ") + dtype_name(ctx.input_dtype(6)));
  const AttentionDims d =
      attention_dims(ctx.node(), ctx.input_shape(0), ctx.input_shape(1), ctx.input_shape(2),
                     optional_shape(ctx, 3), optional_shape(ctx, 4), optional_shape(ctx, 5),
                     optional_shape(ctx, 6));
  const DType q_type = ctx.input_dtype(0);
  if (d.three_d)
    ctx.set_output(0, q_type,
                   {d.batch, d.q_seq,
                    Checked(ctx.node(), "output hidden size").mul_dims(d.q_heads, d.v_head_size)});
  else
    ctx.set_output(0, q_type, {d.batch, d.q_heads, d.q_seq, d.v_head_size});
  ctx.set_output(1, ctx.input_dtype(1), {d.batch, d.kv_heads, d.total_seq, d.head_size});
  ctx.set_output(2, ctx.input_dtype(2), {d.batch, d.kv_heads, d.total_seq, d.v_head_size});
  ctx.set_output(3, q_type, {d.batch, d.q_heads, d.q_seq, d.total_seq});
}

void infer_rotary_embedding(InferenceContext& ctx) {
  const Node& node = ctx.node();
  for (size_t i = 0; i < 3; ++i) {
    DType t = ctx.input_dtype(i);
    if (t != DType::Float32 && t != DType::Float16 && t != DType::Undefined)
      ctx.fail("input " + str(static_cast<int64_t>(i)) + " must be float32 or float16, got " +
               dtype_name(t));
  }
  expect_same_dtype(ctx, 0, 1, "X", "cos_cache");
  expect_same_dtype(ctx, 0, 2, "X", "sin_cache");
  const auto& x = ctx.input_shape(0);
  int64_t batch = -1, seq = -1, head_size = -1;
  const int64_t num_heads = node.attr_int("num_heads", 0);
  if (num_heads < 0) ctx.fail("num_heads must be positive, got " + str(num_heads));
  if (x.size() == 4) {
    if (num_heads > 0) same_dim(node, num_heads, x[1], "num_heads and X's head dim");
    batch = x[0];
    seq = x[2];
    head_size = x[3];
  } else if (x.size() == 3) {
    if (num_heads == 0) ctx.fail("attribute 'num_heads' is required when X is 3-D");
    batch = x[0];
    seq = x[1];
    head_size = split_heads(node, x[2], num_heads, "X's");
  } else {
    ctx.fail("X must be 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, head_size), got " +
             to_string(x));
  }
  const int64_t rotary_dim_attr = node.attr_int("rotary_embedding_dim", 0);
  if (rotary_dim_attr < 0)
    ctx.fail("rotary_embedding_dim must be >= 0, got " + str(rotary_dim_attr));
  const int64_t rotary_dim = rotary_dim_attr > 0 ? rotary_dim_attr : head_size;
  if (rotary_dim >= 0) {
    if (rotary_dim % 2 != 0) ctx.fail("the rotary dimension " + str(rotary_dim) + " must be even");
    if (head_size >= 0 && rotary_dim > head_size)
      ctx.fail("rotary_embedding_dim " + str(rotary_dim) + " exceeds the head size " +
               str(head_size));
  }
  const int64_t half = rotary_dim >= 0 ? rotary_dim / 2 : -1;
  const bool has_positions = ctx.has_input(3);
  if (has_positions && ctx.input_dtype(3) != DType::Int64 && ctx.input_dtype(3) != DType::Undefined)
    ctx.fail(std::string("position_ids must be int64, got ") + dtype_name(ctx.input_dtype(3)));
  if (has_positions) {
    const auto& p = ctx.input_shape(3);
    if (p.size() != 2) ctx.fail("position_ids must be 2-D (batch, seq), got " + to_string(p));
    same_dim(node, p[0], batch, "position_ids' batch and X's batch");
    same_dim(node, p[1], seq, "position_ids' length and X's sequence length");
  }
  for (size_t i = 1; i <= 2; ++i) {
    const char* what = i == 1 ? "cos_cache" : "sin_cache";
    const auto& c = ctx.input_shape(i);
    if (has_positions) {
      if (c.size() != 2)
        ctx.fail(std::string(what) + " must be 2-D (max_position + 1, rotary_dim / 2) with " +
                 "position_ids, got " + to_string(c));
    } else {
      if (c.size() != 3)
        ctx.fail(std::string(what) + " must be 3-D (batch, seq, rotary_dim / 2) without " +
                 "position_ids, got " + to_string(c));
      same_dim(node, c[0], batch, std::string(what) + "'s batch and X's batch");
      same_dim(node, c[1], seq, std::string(what) + "'s length and X's sequence length");
    }
    same_dim(node, c.back(), half, std::string(what) + "'s last dim and rotary_dim / 2");
  }
  infer_same_as_input0(ctx);
}

void infer_rms_normalization(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  const auto& scale = ctx.input_shape(1);
  expect_float(ctx, 0, "X");
  expect_float(ctx, 1, "scale");
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank == 0) ctx.fail("X must have rank >= 1");
  normalize_axis(ctx, ctx.node().attr_int("axis", -1), rank);
  bool ok = scale.size() <= x.size();
  for (size_t d = 0; ok && d < scale.size(); ++d) {
    int64_t sd = scale[scale.size() - 1 - d], xd = x[x.size() - 1 - d];
    ok = sd < 0 || xd < 0 || sd == 1 || sd == xd;
  }
  if (!ok)
    ctx.fail("scale has shape " + to_string(scale) + ", which does not broadcast to X " +
             to_string(x));
  ctx.set_output(0, ctx.input_dtype(1), x);
}

}  // namespace

AttentionDims attention_dims(const Node& node, const std::vector<int64_t>& q,
                             const std::vector<int64_t>& k, const std::vector<int64_t>& v,
                             const std::vector<int64_t>* attn_mask,
                             const std::vector<int64_t>* past_key,
                             const std::vector<int64_t>* past_value,
                             const std::vector<int64_t>* nonpad_kv_seqlen) {
  AttentionDims d;
  if (q.size() != 3 && q.size() != 4)
    node.fail("Q must be 3-D (batch, seq, hidden) or 4-D (batch, heads, seq, head_size), got " +
              to_string(q));
  if (k.size() != q.size() || v.size() != q.size())
    node.fail("Q, K and V must have the same rank, got " + to_string(q) + ", " + to_string(k) +
              ", " + to_string(v));
  d.three_d = q.size() == 3;
  d.batch =
      same_dim(node, same_dim(node, q[0], k[0], "Q's and K's batch"), v[0], "Q's and V's batch");
  const bool has_q_heads = node.has_attr("q_num_heads"),
             has_kv_heads = node.has_attr("kv_num_heads");
  const int64_t q_heads_attr = node.attr_int("q_num_heads", 0);
  const int64_t kv_heads_attr = node.attr_int("kv_num_heads", 0);
  if ((has_q_heads && q_heads_attr <= 0) || (has_kv_heads && kv_heads_attr <= 0))
    node.fail("q_num_heads and kv_num_heads must be positive");
  if (d.three_d) {
    if (!has_q_heads || !has_kv_heads)
      node.fail("attributes 'q_num_heads' and 'kv_num_heads' are required when Q, K and V are 3-D");
    d.q_heads = q_heads_attr;
    d.kv_heads = kv_heads_attr;
    d.q_seq = q[1];
    d.kv_seq = same_dim(node, k[1], v[1], "K's and V's sequence lengths");
    d.head_size = split_heads(node, q[2], d.q_heads, "Q's");
    d.head_size = same_dim(node, d.head_size, split_heads(node, k[2], d.kv_heads, "K's"),
                           "Q's and K's head sizes");
    d.v_head_size = split_heads(node, v[2], d.kv_heads, "V's");
  } else {
    d.q_heads = q[1];
    d.kv_heads = same_dim(node, k[1], v[1], "K's and V's head counts");
    if (has_q_heads) same_dim(node, q_heads_attr, d.q_heads, "q_num_heads and Q's head dim");
    if (has_kv_heads) same_dim(node, kv_heads_attr, d.kv_heads, "kv_num_heads and K's head dim");
    d.q_seq = q[2];
    d.kv_seq = same_dim(node, k[2], v[2], "K's and V's sequence lengths");
    d.head_size = same_dim(node, q[3], k[3], "Q's and K's head sizes");
    d.v_head_size = v[3];
  }
  if (d.q_heads >= 0 && d.kv_heads >= 0 && (d.kv_heads == 0 || d.q_heads % d.kv_heads != 0))
    node.fail("the " + str(d.q_heads) + " query heads are not a multiple of the " +
              str(d.kv_heads) + " key/value heads");
  if ((past_key == nullptr) != (past_value == nullptr))
    node.fail("past_key and past_value must be given together");
  d.past_seq = 0;
  if (past_key) {
    const auto& pk = *past_key;
    const auto& pv = *past_value;
    if (pk.size() != 4 || pv.size() != 4)
      node.fail("past_key and past_value must be 4-D (batch, kv_heads, past_seq, head_size), got " +
                to_string(pk) + " and " + to_string(pv));
    same_dim(node, pk[0], d.batch, "past_key's batch and Q's batch");
    same_dim(node, pv[0], d.batch, "past_value's batch and Q's batch");
    same_dim(node, pk[1], d.kv_heads, "past_key's head count and the key/value heads");
    same_dim(node, pv[1], d.kv_heads, "past_value's head count and the key/value heads");
    d.head_size = same_dim(node, pk[3], d.head_size, "past_key's head size and K's head size");
    d.v_head_size =
        same_dim(node, pv[3], d.v_head_size, "past_value's head size and V's head size");
    d.past_seq = same_dim(node, pk[2], pv[2], "past_key's and past_value's sequence lengths");
  }
  d.total_seq = Checked(node, "total sequence length").add_dims(d.past_seq, d.kv_seq);
  if (attn_mask) {
    const auto& m = *attn_mask;
    if (m.empty() || m.size() > 4)
      node.fail("attn_mask must have rank 1 to 4, got " + to_string(m));
    // Broadcasts to (batch, q_heads, q_seq, total_seq); the last dim may be shorter (padded).
    const int64_t target[4] = {d.batch, d.q_heads, d.q_seq, d.total_seq};
    for (size_t i = 0; i + 1 < m.size(); ++i) {
      int64_t md = m[m.size() - 2 - i], td = target[2 - i];
      if (md >= 0 && td >= 0 && md != 1 && md != td)
        node.fail("attn_mask of shape " + to_string(m) +
                  " does not broadcast to (batch, q_heads, q_seq, total_seq) = " +
                  to_string(std::vector<int64_t>(target, target + 4)));
    }
    // Opset 24 pads a short key axis with -inf; opset 23 broadcasts it like the other axes.
    if (m.back() >= 0 && d.total_seq >= 0) {
      if (node.opset >= 24 && m.back() > d.total_seq)
        node.fail("attn_mask's last dim " + str(m.back()) + " exceeds the total sequence length " +
                  str(d.total_seq));
      if (node.opset < 24 && m.back() != 1 && m.back() != d.total_seq)
        node.fail("attn_mask's last dim " + str(m.back()) + " is neither 1 nor the total " +
                  "sequence length " + str(d.total_seq) + " (padding it needs opset 24)");
    }
  }
  if (nonpad_kv_seqlen) {
    const auto& n = *nonpad_kv_seqlen;
    if (n.size() != 1) node.fail("nonpad_kv_seqlen must be 1-D (batch), got " + to_string(n));
    same_dim(node, n[0], d.batch, "nonpad_kv_seqlen's length and the batch");
  }
  return d;
}

void register_attention_schemas(SchemaRegistry& r) {
  // Opset 24 adds the nonpad_kv_seqlen input.
  r.add({.op_type = "Attention",
         .min_opset = 23,
         .max_opset = 23,
         .min_inputs = 3,
         .max_inputs = 6,
         .min_outputs = 1,
         .max_outputs = 4,
         .infer = infer_attention});
  r.add({.op_type = "Attention",
         .min_opset = 24,
         .min_inputs = 3,
         .max_inputs = 7,
         .min_outputs = 1,
         .max_outputs = 4,
         .infer = infer_attention});
  r.add({.op_type = "RotaryEmbedding",
         .min_opset = 23,
         .min_inputs = 3,
         .max_inputs = 4,
         .infer = infer_rotary_embedding});
  r.add({.op_type = "RMSNormalization",
         .min_opset = 23,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_rms_normalization});
}

}  // namespace quilt
