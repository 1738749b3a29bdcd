// Schemas of the smaller ops the misc family picked up from the conformance suite: BitCast,
// TensorScatter, CausalConvWithState, the preview training optimisers (Adagrad, Adam,
// Momentum) and the ai.onnx.ml Binarizer and ArrayFeatureExtractor.
#include <algorithm>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/misc_image.hpp"

namespace quilt {

void register_misc_extra_schemas(SchemaRegistry& r);

namespace {

std::string str(int64_t v) {
  return std::to_string(v);
}

void infer_bitcast(InferenceContext& ctx) {
  const DType in = ctx.input_dtype(0);
  const auto to = static_cast<DType>(ctx.node().attr_int("to", 0));
  if (!dtype_supported(to))
    ctx.fail("attribute 'to' is " + str(static_cast<int64_t>(to)) + ", not a type Quilt holds");
  if (in != DType::Undefined && dtype_size(in) != dtype_size(to))
    ctx.fail(std::string("cannot bit-cast ") + dtype_name(in) + " to " + dtype_name(to) +
             ": the element sizes differ");
  ctx.set_output(0, to, ctx.input_shape(0));
}

void infer_tensor_scatter(InferenceContext& ctx) {
  const auto& cache = ctx.input_shape(0);
  const auto& update = ctx.input_shape(1);
  const std::string mode = ctx.node().attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular")
    ctx.fail("attribute 'mode' is '" + mode + "', expected 'linear' or 'circular'");
  if (cache.size() != update.size())
    ctx.fail("past_cache " + to_string(cache) + " and update " + to_string(update) +
             " have different ranks");
  const auto rank = static_cast<int64_t>(cache.size());
  const int64_t axis = normalize_axis(ctx, ctx.node().attr_int("axis", -2), rank);
  if (axis == 0) ctx.fail("axis must not be the batch axis 0");
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t a = cache[static_cast<size_t>(d)], b = update[static_cast<size_t>(d)];
    if (a < 0 || b < 0) continue;
    if (d == axis ? b > a : a != b)
      ctx.fail("update " + to_string(update) + " does not fit past_cache " + to_string(cache) +
               " (axis " + str(axis) + ")");
  }
  if (ctx.input_dtype(1) != DType::Undefined && ctx.input_dtype(0) != DType::Undefined &&
      ctx.input_dtype(1) != ctx.input_dtype(0))
    ctx.fail("past_cache and update have different dtypes");
  ctx.set_output(0, ctx.input_dtype(0), cache);
}

void infer_causal_conv(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  const auto& w = ctx.input_shape(1);
  if (x.size() != 3) ctx.fail("input has shape " + to_string(x) + ", expected [B, C, L]");
  if (w.size() != 3 || (w[1] >= 0 && w[1] != 1) || (w[0] >= 0 && x[1] >= 0 && w[0] != x[1]))
    ctx.fail("weight has shape " + to_string(w) + ", expected [C, 1, k] with C = " + str(x[1]));
  const std::string act = ctx.node().attr_string("activation", "none");
  if (act != "none" && act != "silu" && act != "swish")
    ctx.fail("attribute 'activation' is '" + act + "', expected 'none', 'silu' or 'swish'");
  ctx.set_output(0, ctx.input_dtype(0), x);
  ctx.set_output(1, ctx.input_dtype(0), {x[0], x[1], w[2] < 0 ? -1 : w[2] - 1});
}

// Adagrad (3 tensors per group: X, G, H), Momentum (X, G, V), Adam (X, G, V, H): inputs are
// R, T, then the groups; outputs are the new X, then the new state tensors.
InferFn infer_optimizer(size_t groups_in, size_t groups_out) {
  return [groups_in, groups_out](InferenceContext& ctx) {
    const size_t tensors = ctx.num_inputs() - 2;
    if (tensors == 0 || tensors % groups_in != 0)
      ctx.fail("has " + str(static_cast<int64_t>(ctx.num_inputs())) +
               " inputs, expected R, T and " + str(static_cast<int64_t>(groups_in)) +
               " tensors per optimised input");
    const size_t n = tensors / groups_in;
    if (ctx.num_outputs() != n * groups_out)
      ctx.fail("has " + str(static_cast<int64_t>(ctx.num_outputs())) + " outputs, expected " +
               str(static_cast<int64_t>(n * groups_out)));
    for (size_t i = 0; i < n; ++i)
      for (size_t g = 1; g < groups_in; ++g)
        if (ctx.input_shape(2 + g * n + i) != ctx.input_shape(2 + i))
          ctx.fail("input " + str(static_cast<int64_t>(2 + g * n + i)) + " has shape " +
                   to_string(ctx.input_shape(2 + g * n + i)) + ", expected that of X " +
                   to_string(ctx.input_shape(2 + i)));
    for (size_t g = 0; g < groups_out; ++g)
      for (size_t i = 0; i < n; ++i)
        ctx.set_output(g * n + i, ctx.input_dtype(2 + i), ctx.input_shape(2 + i));
  };
}

void infer_array_feature_extractor(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  const auto& idx = ctx.input_shape(1);
  int64_t count = 1;
  const Checked c(ctx.node(), "element count");
  for (int64_t d : idx) count = c.mul_dims(count, d);
  std::vector<int64_t> dims = x.size() <= 1 ? std::vector<int64_t>{1} : x;
  if (x.empty()) ctx.fail("input X is a scalar, expected rank >= 1");
  if (x.size() == 1)
    dims.push_back(count);
  else
    dims.back() = count;
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

void infer_linear_attention(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const int64_t hq = n.attr_int("q_num_heads", 0), hkv = n.attr_int("kv_num_heads", 0);
  if (hq <= 0 || hkv <= 0 || hq % hkv != 0)
    ctx.fail("q_num_heads (" + str(hq) + ") must be a positive multiple of kv_num_heads (" +
             str(hkv) + ")");
  const std::string rule = n.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta")
    ctx.fail("attribute 'update_rule' is '" + rule +
             "', expected 'linear', 'gated', 'delta' or 'gated_delta'");
  const auto& q = ctx.input_shape(0);
  const auto& k = ctx.input_shape(1);
  const auto& v = ctx.input_shape(2);
  for (const auto* s : {&q, &k, &v})
    if (s->size() != 3) ctx.fail("query, key and value must have rank 3 [B, T, heads * dim]");
  auto per_head = [&](int64_t d, int64_t heads, const char* what) -> int64_t {
    if (d < 0) return -1;
    if (d % heads != 0)
      ctx.fail(std::string(what) + " last dim " + str(d) + " is not divisible by " + str(heads));
    return d / heads;
  };
  const int64_t dk = per_head(q[2], hq, "query"), dv = per_head(v[2], hkv, "value");
  per_head(k[2], hkv, "key");
  ctx.set_output(0, ctx.input_dtype(0),
                 {q[0], q[1], Checked(ctx.node(), "output hidden size").mul_dims(hq, dv)});
  const DType state = ctx.has_input(3) ? ctx.input_dtype(3) : ctx.input_dtype(0);
  ctx.set_output(1, state, {q[0], hkv, dk, dv});
}

void infer_deform_conv(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const auto& x = ctx.input_shape(0);
  const auto& w = ctx.input_shape(1);
  const auto& off = ctx.input_shape(2);
  if (x.size() < 3) ctx.fail("X has shape " + to_string(x) + ", expected [N, C, spatial...]");
  const size_t sp = x.size() - 2;
  if (w.size() != x.size() || off.size() != x.size())
    ctx.fail("W " + to_string(w) + " and offset " + to_string(off) + " must have the rank of X " +
             to_string(x));
  const int64_t group = n.attr_int("group", 1), og = n.attr_int("offset_group", 1);
  if (group < 1 || og < 1) ctx.fail("group and offset_group must be >= 1");
  std::vector<int64_t> kernel(w.begin() + 2, w.end());
  if (n.has_attr("kernel_shape")) {
    kernel = n.attr_ints("kernel_shape");
    for (size_t d = 0; d < kernel.size() && d + 2 < w.size(); ++d)
      if (w[d + 2] >= 0 && w[d + 2] != kernel[d])
        ctx.fail("kernel_shape " + to_string(kernel) + " does not match W's shape " + to_string(w));
  }
  if (x[0] >= 0 && off[0] >= 0 && off[0] != x[0])
    ctx.fail("offset has batch " + str(off[0]) + ", X has " + str(x[0]));
  const auto pads = n.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto strides = n.attr_ints("strides", std::vector<int64_t>(sp, 1));
  const auto dil = n.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  if (kernel.size() != sp || pads.size() != 2 * sp || strides.size() != sp || dil.size() != sp)
    ctx.fail("kernel_shape, pads, strides or dilations do not match " +
             str(static_cast<int64_t>(sp)) + " spatial dims");
  for (size_t d = 0; d < sp; ++d)
    if (strides[d] <= 0 || dil[d] <= 0 || pads[d] < 0 || pads[d + sp] < 0)
      ctx.fail("strides " + to_string(strides) + ", dilations " + to_string(dil) + " and pads " +
               to_string(pads) + ": expected positive strides and dilations, non-negative pads");
  const Checked c(n, "DeformConv size");
  if (x[1] >= 0 && w[1] >= 0 && x[1] != c.mul(w[1], group))
    ctx.fail("X has " + str(x[1]) + " channels, expected W's " + str(w[1]) + " times group " +
             str(group));
  if (w[0] >= 0 && w[0] % group != 0)
    ctx.fail("W has " + str(w[0]) + " output channels, not divisible by group " + str(group));
  if (x[1] >= 0 && x[1] % og != 0)
    ctx.fail("X has " + str(x[1]) + " channels, not divisible by offset_group " + str(og));
  int64_t taps = 1;
  for (int64_t k : kernel) taps = c.mul_dims(taps, k);
  const int64_t offsets = c.mul_dims(c.mul_dims(og, taps), static_cast<int64_t>(sp));
  if (off[1] >= 0 && offsets >= 0 && off[1] != offsets)
    ctx.fail("offset has " + str(off[1]) + " channels, expected offset_group * prod(kernel) * " +
             str(static_cast<int64_t>(sp)) + " = " + str(offsets));
  std::vector<int64_t> y = {x[0], w[0]};
  for (size_t d = 0; d < sp; ++d) {
    const int64_t in = x[d + 2];
    int64_t o = -1;
    if (in >= 0 && kernel[d] >= 0) {
      const int64_t dk = c.add(c.mul(kernel[d] - 1, dil[d]), 1);
      o = c.sub(c.add(c.add(in, pads[d]), pads[d + sp]), dk) / strides[d] + 1;
    }
    if (o >= 0 && off[d + 2] >= 0 && off[d + 2] != o)
      ctx.fail("offset has spatial shape " + to_string(off) + ", expected output size " + str(o) +
               " in spatial dim " + str(static_cast<int64_t>(d)));
    y.push_back(o >= 0 ? o : off[d + 2]);
  }
  if (ctx.has_input(3)) {
    const auto& b = ctx.input_shape(3);
    if (b.size() != 1 || (b[0] >= 0 && w[0] >= 0 && b[0] != w[0]))
      ctx.fail("B has shape " + to_string(b) + ", expected [" + str(w[0]) +
               "] (W's output channels)");
  }
  if (ctx.has_input(4)) {
    const auto& m = ctx.input_shape(4);
    std::vector<int64_t> expect = y;
    expect[1] = c.mul_dims(og, taps);
    if (m != expect && ctx.runtime())
      ctx.fail("mask has shape " + to_string(m) + ", expected " + to_string(expect));
  }
  ctx.set_output(0, ctx.input_dtype(0), y);
}

void infer_tfidf(InferenceContext& ctx) {
  const Node& n = ctx.node();
  const std::string mode = n.attr_string("mode", "");
  if (mode != "TF" && mode != "IDF" && mode != "TFIDF")
    ctx.fail("attribute 'mode' is '" + mode + "', expected 'TF', 'IDF' or 'TFIDF'");
  const auto indexes = n.attr_ints("ngram_indexes");
  if (indexes.empty()) ctx.fail("attribute 'ngram_indexes' is required");
  const int64_t min = n.attr_int("min_gram_length", 0), max = n.attr_int("max_gram_length", 0);
  if (min < 1 || max < min)
    ctx.fail("min_gram_length " + str(min) + " and max_gram_length " + str(max) +
             " must satisfy 1 <= min <= max");
  if (n.attr_int("max_skip_count", 0) < 0) ctx.fail("max_skip_count must be >= 0");
  int64_t width = 0;
  const Checked c(n, "output width");
  for (int64_t i : indexes) {
    if (i < 0) ctx.fail("ngram_indexes has a negative entry");
    width = std::max(width, c.add(i, 1));
  }
  const auto& x = ctx.input_shape(0);
  if (x.size() == 1)
    ctx.set_output(0, DType::Float32, {width});
  else if (x.size() == 2)
    ctx.set_output(0, DType::Float32, {x[0], width});
  else
    ctx.fail("input has shape " + to_string(x) + ", expected [C] or [N, C]");
}

void infer_flex_attention(InferenceContext& ctx) {
  const auto& q = ctx.input_shape(0);
  const auto& k = ctx.input_shape(1);
  const auto& v = ctx.input_shape(2);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4)
    ctx.fail("Q, K and V must have rank 4 [B, heads, seq, dim]; got " + to_string(q) + ", " +
             to_string(k) + ", " + to_string(v));
  auto differ = [](int64_t a, int64_t b) { return a >= 0 && b >= 0 && a != b; };
  if (differ(k[1], v[1]) || differ(k[2], v[2]))
    ctx.fail("K " + to_string(k) + " and V " + to_string(v) + " must share heads and length");
  if (differ(q[3], k[3]) || differ(q[0], k[0]) || differ(q[0], v[0]))
    ctx.fail("Q " + to_string(q) + " and K " + to_string(k) + " must share batch and head size");
  if (q[1] > 0 && k[1] > 0 && q[1] % k[1] != 0)
    ctx.fail("Q's " + str(q[1]) + " heads are not a multiple of K's " + str(k[1]));
  for (size_t i = 1; i < 3; ++i)
    if (ctx.input_dtype(i) != ctx.input_dtype(0)) ctx.fail("Q, K and V must have the same dtype");
  ctx.set_output(0, ctx.input_dtype(0), {q[0], q[1], q[2], v[3]});
}

void infer_tree_ensemble(InferenceContext& ctx) {
  const auto& x = ctx.input_shape(0);
  if (x.size() != 2) ctx.fail("X has shape " + to_string(x) + ", expected [N, features]");
  const int64_t targets = ctx.node().attr_int("n_targets", -1);
  if (targets < 1) ctx.fail("attribute 'n_targets' must be >= 1");
  for (const char* a : {"nodes_splits", "nodes_modes", "leaf_weights"})
    if (!ctx.node().attr_tensor(a)) ctx.fail(std::string("attribute '") + a + "' is required");
  ctx.set_output(0, ctx.input_dtype(0), {x[0], targets});
}

void infer_image_decoder(InferenceContext& ctx) {
  const std::string format = ctx.node().attr_string("pixel_format", "RGB");
  if (format != "RGB" && format != "BGR" && format != "Grayscale")
    ctx.fail("attribute 'pixel_format' is '" + format + "', expected RGB, BGR or Grayscale");
  if (ctx.input_dtype(0) != DType::UInt8 || ctx.input_shape(0).size() != 1)
    ctx.fail("input must be a 1-D uint8 tensor of encoded bytes");
  const Tensor* bytes = ctx.input_value(0);
  DecodedImage image;
  bool unsupported = false;
  const std::string err = decode_image(bytes->data<uint8_t>(), static_cast<size_t>(bytes->numel()),
                                       image, &unsupported);
  if (!err.empty())
    ctx.node().fail(err, unsupported ? ErrorCode::NotImplemented : ErrorCode::InvalidArgument);
  ctx.set_output(0, DType::UInt8, {image.height, image.width, image_channels(format)});
}

}  // namespace

void register_misc_extra_schemas(SchemaRegistry& r) {
  r.add({.op_type = "BitCast", .min_opset = 26, .infer = infer_bitcast});
  r.add({.op_type = "TensorScatter",
         .min_opset = 24,
         .min_inputs = 2,
         .max_inputs = 3,
         .infer = infer_tensor_scatter});
  r.add({.op_type = "CausalConvWithState",
         .min_opset = 27,
         .min_inputs = 2,
         .max_inputs = 4,
         .min_outputs = 2,
         .max_outputs = 2,
         .infer = infer_causal_conv});
  r.add({.op_type = "LinearAttention",
         .min_opset = 27,
         .min_inputs = 3,
         .max_inputs = 6,
         .min_outputs = 1,
         .max_outputs = 2,
         .infer = infer_linear_attention});
  r.add({.op_type = "DeformConv",
         .min_opset = 19,
         .min_inputs = 3,
         .max_inputs = 5,
         .infer = infer_deform_conv});
  r.add({.op_type = "TfIdfVectorizer", .min_opset = 9, .infer = infer_tfidf});
  r.add({.op_type = "FlexAttention",
         .domain = "ai.onnx.preview",
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_flex_attention});
  r.add({.op_type = "TreeEnsemble",
         .domain = "ai.onnx.ml",
         .min_opset = 5,
         .infer = infer_tree_ensemble});
  r.add({.op_type = "ImageDecoder",
         .min_opset = 20,
         .value_inputs = {0},
         .infer = infer_image_decoder});
  const std::string training = "ai.onnx.preview.training";
  r.add({.op_type = "Adagrad",
         .domain = training,
         .min_inputs = 5,
         .max_inputs = 1 << 20,
         .max_outputs = 1 << 20,
         .infer = infer_optimizer(3, 2)});
  r.add({.op_type = "Momentum",
         .domain = training,
         .min_inputs = 5,
         .max_inputs = 1 << 20,
         .max_outputs = 1 << 20,
         .infer = infer_optimizer(3, 2)});
  r.add({.op_type = "Adam",
         .domain = training,
         .min_inputs = 6,
         .max_inputs = 1 << 20,
         .max_outputs = 1 << 20,
         .infer = infer_optimizer(4, 3)});
  r.add({.op_type = "Binarizer", .domain = "ai.onnx.ml", .infer = infer_same_as_input0});
  r.add({.op_type = "ArrayFeatureExtractor",
         .domain = "ai.onnx.ml",
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_array_feature_extractor});
}

}  // namespace quilt
