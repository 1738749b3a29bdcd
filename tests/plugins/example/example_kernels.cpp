// The op table: for each op, what the example device accepts and a plain float32 kernel.
// Adding an op is one prepare/run pair and one line in kOps.
#include <algorithm>
#include <cstring>

#include "example.hpp"

namespace quilt::example {

namespace {

using Dims = std::vector<int64_t>;

const quilt_attribute_t* find_attribute(const quilt_node_t& node, const char* name) {
  for (size_t i = 0; i < node.num_attributes; ++i)
    if (std::strcmp(node.attributes[i].name, name) == 0) return &node.attributes[i];
  return nullptr;
}

const quilt_value_t* input_value(const quilt_graph_t& graph, const quilt_node_t& node, size_t i) {
  if (i >= node.num_inputs || node.inputs[i] < 0) return nullptr;
  return &graph.values[node.inputs[i]];
}

Status shape_mismatch(const NodeDesc& desc, const char* op, std::span<const int64_t> got,
                      const Dims& expected) {
  return fail(QUILT_STATUS_INVALID_ARGUMENT, std::string(op) + " node '" + desc.name +
                                                 "': output shape " + format_dims(got) +
                                                 " but the inputs give " + format_dims(expected));
}

// Row-major strides of `dims` seen as `rank` trailing-aligned dims of a broadcast result:
// a broadcast (size 1 or missing) dimension gets stride 0.
Dims broadcast_strides(std::span<const int64_t> dims, size_t rank) {
  Dims strides(rank, 0);
  int64_t stride = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    size_t d = dims.size() - 1 - i;
    strides[rank - 1 - i] = dims[d] == 1 ? 0 : stride;
    stride *= dims[d];
  }
  return strides;
}

// numpy broadcasting of two shapes; false when they are incompatible.
bool broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b, Dims* out) {
  size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return false;
    (*out)[rank - 1 - i] = da == 1 ? db : da;
  }
  return true;
}

// Calls fn(offset_a, offset_b) for every index of `shape`, in row-major order, with the
// element offsets given by two stride vectors of shape's rank.
template <class F>
void for_each_index(const Dims& shape, const Dims& stride_a, const Dims& stride_b, F fn) {
  int64_t total = element_count(shape);
  Dims index(shape.size(), 0);
  int64_t off_a = 0, off_b = 0;
  for (int64_t n = 0; n < total; ++n) {
    fn(off_a, off_b);
    for (size_t d = shape.size(); d-- > 0;) {  // odometer step
      off_a += stride_a[d], off_b += stride_b[d];
      if (++index[d] < shape[d]) break;
      off_a -= stride_a[d] * shape[d], off_b -= stride_b[d] * shape[d];
      index[d] = 0;
    }
  }
}

// ---- MatMul (numpy matmul: batch dims broadcast; rank-1 operands promoted, then squeezed) ----

std::string prepare_matmul(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc*) {
  for (size_t i = 0; i < 2; ++i)
    if (input_value(graph, node, i)->info.rank == 0)
      return std::string("MatMul: input '") + input_value(graph, node, i)->name +
             "' is a scalar, expected rank >= 1";
  return "";
}

Status run_matmul(const NodeDesc& desc, std::span<const TensorView> in,
                  std::span<const TensorView> out) {
  bool a_vector = in[0].dims.size() == 1, b_vector = in[1].dims.size() == 1;
  Dims a = a_vector ? Dims{1, in[0].dims[0]} : Dims(in[0].dims.begin(), in[0].dims.end());
  Dims b = b_vector ? Dims{in[1].dims[0], 1} : Dims(in[1].dims.begin(), in[1].dims.end());
  int64_t m = a[a.size() - 2], k = a.back(), n = b.back();
  if (b[b.size() - 2] != k)
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "MatMul node '" + desc.name + "': inner dims of " +
                                                   format_dims(in[0].dims) + " and " +
                                                   format_dims(in[1].dims) + " differ");
  std::span<const int64_t> batch_a(a.data(), a.size() - 2), batch_b(b.data(), b.size() - 2);
  Dims batch;
  if (!broadcast_shape(batch_a, batch_b, &batch))
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "MatMul node '" + desc.name + "': batch dims of " +
                                                   format_dims(in[0].dims) + " and " +
                                                   format_dims(in[1].dims) + " do not broadcast");
  Dims expected = batch;
  if (!a_vector) expected.push_back(m);
  if (!b_vector) expected.push_back(n);
  if (!std::ranges::equal(expected, out[0].dims))
    return shape_mismatch(desc, "MatMul", out[0].dims, expected);

  const float* pa = in[0].data;
  const float* pb = in[1].data;
  float* pc = out[0].data;
  if (element_count(expected) == 0) return {};
  std::fill_n(pc, element_count(expected), 0.0f);
  Dims stride_a = broadcast_strides(batch_a, batch.size());
  Dims stride_b = broadcast_strides(batch_b, batch.size());
  int64_t batch_index = 0;
  for_each_index(batch, stride_a, stride_b, [&](int64_t ia, int64_t ib) {
    const float* ma = pa + ia * m * k;
    const float* mb = pb + ib * k * n;
    float* mc = pc + batch_index++ * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t p = 0; p < k; ++p) {
        float av = ma[i * k + p];
        for (int64_t j = 0; j < n; ++j) mc[i * n + j] += av * mb[p * n + j];
      }
  });
  return {};
}

// ---- Gemm (Y = alpha * A' * B' + beta * C, C broadcast to [M, N]) ----
// Quilt's core writes MatMul + Add of a constant bias as a Gemm (optimisation level 1), so a
// device that runs MatMul and Add keeps such layers by running Gemm too.

std::string prepare_gemm(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc) {
  if (node.opset < 7) return "Gemm: legacy broadcast attribute (opset < 7) not supported";
  for (size_t i = 0; i < 2; ++i)
    if (input_value(graph, node, i)->info.rank != 2)
      return std::string("Gemm: input '") + input_value(graph, node, i)->name + "' has rank " +
             std::to_string(input_value(graph, node, i)->info.rank) + ", expected 2";
  if (const quilt_value_t* c = input_value(graph, node, 2); c && c->info.rank > 2)
    return std::string("Gemm: C '") + c->name + "' has rank " + std::to_string(c->info.rank) +
           ", expected at most 2";
  GemmParams& p = desc->gemm;
  if (const quilt_attribute_t* a = find_attribute(node, "transA")) p.trans_a = a->i != 0;
  if (const quilt_attribute_t* a = find_attribute(node, "transB")) p.trans_b = a->i != 0;
  if (const quilt_attribute_t* a = find_attribute(node, "alpha")) p.alpha = a->f;
  if (const quilt_attribute_t* a = find_attribute(node, "beta")) p.beta = a->f;
  return "";
}

Status run_gemm(const NodeDesc& desc, std::span<const TensorView> in,
                std::span<const TensorView> out) {
  const GemmParams& p = desc.gemm;
  const int64_t m = in[0].dims[p.trans_a ? 1 : 0], k = in[0].dims[p.trans_a ? 0 : 1];
  const int64_t n = in[1].dims[p.trans_b ? 0 : 1];
  if (in[1].dims[p.trans_b ? 1 : 0] != k)
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "Gemm node '" + desc.name + "': inner dims of " +
                                                   format_dims(in[0].dims) + " and " +
                                                   format_dims(in[1].dims) + " differ");
  const Dims expected{m, n};
  if (!std::ranges::equal(expected, out[0].dims))
    return shape_mismatch(desc, "Gemm", out[0].dims, expected);
  const bool has_c = in.size() > 2 && in[2].data;
  Dims with_c;
  if (has_c && (!broadcast_shape(in[2].dims, expected, &with_c) || with_c != expected))
    return fail(QUILT_STATUS_INVALID_ARGUMENT,
                "Gemm node '" + desc.name + "': C " + format_dims(in[2].dims) +
                    " does not broadcast to " + format_dims(expected));
  const Dims c_stride = has_c ? broadcast_strides(in[2].dims, 2) : Dims{0, 0};
  const float *a = in[0].data, *b = in[1].data;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0.0f;
      for (int64_t q = 0; q < k; ++q)
        sum += a[p.trans_a ? q * m + i : i * k + q] * b[p.trans_b ? j * k + q : q * n + j];
      float y = p.alpha * sum;
      if (has_c) y += p.beta * in[2].data[i * c_stride[0] + j * c_stride[1]];
      out[0].data[i * n + j] = y;
    }
  return {};
}

// ---- Add (numpy broadcasting, any ranks) ----

std::string prepare_add(const quilt_graph_t&, const quilt_node_t& node, NodeDesc*) {
  if (const quilt_attribute_t* b = find_attribute(node, "broadcast"); b && b->i != 0)
    return "Add: legacy broadcast attribute (opset < 7) not supported";
  return "";
}

Status run_add(const NodeDesc& desc, std::span<const TensorView> in,
               std::span<const TensorView> out) {
  Dims expected;
  if (!broadcast_shape(in[0].dims, in[1].dims, &expected))
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "Add node '" + desc.name +
                                                   "': " + format_dims(in[0].dims) + " and " +
                                                   format_dims(in[1].dims) + " do not broadcast");
  if (!std::ranges::equal(expected, out[0].dims))
    return shape_mismatch(desc, "Add", out[0].dims, expected);
  const float* a = in[0].data;
  const float* b = in[1].data;
  float* c = out[0].data;
  for_each_index(expected, broadcast_strides(in[0].dims, expected.size()),
                 broadcast_strides(in[1].dims, expected.size()),
                 [&](int64_t ia, int64_t ib) { *c++ = a[ia] + b[ib]; });
  return {};
}

// ---- Relu ----

std::string prepare_relu(const quilt_graph_t&, const quilt_node_t&, NodeDesc*) {
  return "";
}

Status run_relu(const NodeDesc& desc, std::span<const TensorView> in,
                std::span<const TensorView> out) {
  if (!std::ranges::equal(in[0].dims, out[0].dims))
    return shape_mismatch(desc, "Relu", out[0].dims, Dims(in[0].dims.begin(), in[0].dims.end()));
  int64_t n = element_count(in[0].dims);
  for (int64_t i = 0; i < n; ++i) out[0].data[i] = std::max(in[0].data[i], 0.0f);
  return {};
}

// ---- Conv (2-D, NCHW; ONNX attribute names and defaults) ----

std::string prepare_conv(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc) {
  int32_t rank = input_value(graph, node, 0)->info.rank;
  if (rank != 4) {
    if (rank >= 3) return "Conv: " + std::to_string(rank - 2) + "-D convolution not supported";
    return "Conv: input has rank " + std::to_string(rank) + ", expected 4 (N, C, H, W)";
  }
  if (input_value(graph, node, 1)->info.rank != 4)
    return "Conv: weight has rank " + std::to_string(input_value(graph, node, 1)->info.rank) +
           ", expected 4";
  if (const quilt_value_t* bias = input_value(graph, node, 2); bias && bias->info.rank != 1)
    return "Conv: bias has rank " + std::to_string(bias->info.rank) + ", expected 1";
  ConvParams& p = desc->conv;
  if (const quilt_attribute_t* a = find_attribute(node, "auto_pad")) {
    std::string mode(a->s, a->s_size);
    if (mode == "NOTSET")
      p.auto_pad = ConvParams::AutoPad::NotSet;
    else if (mode == "VALID")
      p.auto_pad = ConvParams::AutoPad::Valid;
    else if (mode == "SAME_UPPER")
      p.auto_pad = ConvParams::AutoPad::SameUpper;
    else if (mode == "SAME_LOWER")
      p.auto_pad = ConvParams::AutoPad::SameLower;
    else
      return "Conv: auto_pad '" + mode + "' not supported";
  }
  if (const quilt_attribute_t* a = find_attribute(node, "group")) p.group = a->i;
  if (p.group < 1) return "Conv: group " + std::to_string(p.group) + " is not positive";
  struct IntsAttribute {
    const char* name;
    Dims* dims;
    size_t size;
  };
  for (auto [name, dims, size] :
       {IntsAttribute{"strides", &p.strides, 2}, IntsAttribute{"dilations", &p.dilations, 2},
        IntsAttribute{"pads", &p.pads, 4}, IntsAttribute{"kernel_shape", &p.kernel_shape, 2}}) {
    const quilt_attribute_t* a = find_attribute(node, name);
    if (!a) continue;
    if (a->count != size)
      return std::string("Conv: ") + name + " has " + std::to_string(a->count) +
             " values, expected " + std::to_string(size);
    dims->assign(a->ints, a->ints + a->count);
    bool pads = std::strcmp(name, "pads") == 0;
    for (int64_t v : *dims)
      if (pads ? v < 0 : v < 1)
        return std::string("Conv: ") + name + " " + format_dims(*dims) + " not supported";
  }
  return "";
}

Status run_conv(const NodeDesc& desc, std::span<const TensorView> in,
                std::span<const TensorView> out) {
  const ConvParams& p = desc.conv;
  auto x = in[0].dims, w = in[1].dims;
  int64_t batch = x[0], channels = x[1], height = x[2], width = x[3];
  int64_t maps = w[0], group_channels = w[1], kh = w[2], kw = w[3];
  auto invalid = [&](const std::string& what) {
    return fail(QUILT_STATUS_INVALID_ARGUMENT, "Conv node '" + desc.name + "': " + what);
  };
  if (group_channels * p.group != channels || maps % p.group != 0)
    return invalid("input " + format_dims(x) + " and weight " + format_dims(w) +
                   " do not fit group " + std::to_string(p.group));
  if (!p.kernel_shape.empty() && (p.kernel_shape[0] != kh || p.kernel_shape[1] != kw))
    return invalid("kernel_shape " + format_dims(p.kernel_shape) + " but weight " + format_dims(w));
  if (in.size() > 2 && in[2].data && element_count(in[2].dims) != maps)
    return invalid("bias " + format_dims(in[2].dims) + " for " + std::to_string(maps) + " maps");

  // Pads per spatial axis (begin, end); SAME modes derive them from the output size ONNX gives.
  int64_t input_size[2] = {height, width}, kernel[2] = {kh, kw};
  int64_t pad_begin[2], pad_end[2];
  Dims expected{batch, maps, 0, 0};
  for (int d = 0; d < 2; ++d) {
    int64_t extent = (kernel[d] - 1) * p.dilations[d] + 1;
    pad_begin[d] = p.pads[d], pad_end[d] = p.pads[d + 2];
    if (p.auto_pad == ConvParams::AutoPad::Valid) pad_begin[d] = pad_end[d] = 0;
    if (p.auto_pad == ConvParams::AutoPad::SameUpper ||
        p.auto_pad == ConvParams::AutoPad::SameLower) {
      int64_t target = (input_size[d] + p.strides[d] - 1) / p.strides[d];
      int64_t total = std::max<int64_t>(0, (target - 1) * p.strides[d] + extent - input_size[d]);
      pad_begin[d] = p.auto_pad == ConvParams::AutoPad::SameUpper ? total / 2 : total - total / 2;
      pad_end[d] = total - pad_begin[d];
    }
    int64_t padded = input_size[d] + pad_begin[d] + pad_end[d];
    if (padded < extent)
      return invalid("kernel extent " + std::to_string(extent) + " exceeds padded input " +
                     std::to_string(padded));
    expected[2 + d] = (padded - extent) / p.strides[d] + 1;
  }
  if (!std::ranges::equal(expected, out[0].dims))
    return shape_mismatch(desc, "Conv", out[0].dims, expected);

  const float* xs = in[0].data;
  const float* ws = in[1].data;
  const float* bias = in.size() > 2 ? in[2].data : nullptr;
  float* ys = out[0].data;
  int64_t out_h = expected[2], out_w = expected[3], maps_per_group = maps / p.group;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t m = 0; m < maps; ++m) {
      int64_t first_channel = m / maps_per_group * group_channels;
      for (int64_t oh = 0; oh < out_h; ++oh)
        for (int64_t ow = 0; ow < out_w; ++ow) {
          float sum = bias ? bias[m] : 0.0f;
          for (int64_t c = 0; c < group_channels; ++c)
            for (int64_t i = 0; i < kh; ++i) {
              int64_t ih = oh * p.strides[0] - pad_begin[0] + i * p.dilations[0];
              if (ih < 0 || ih >= height) continue;
              for (int64_t j = 0; j < kw; ++j) {
                int64_t iw = ow * p.strides[1] - pad_begin[1] + j * p.dilations[1];
                if (iw < 0 || iw >= width) continue;
                sum += xs[((n * channels + first_channel + c) * height + ih) * width + iw] *
                       ws[((m * group_channels + c) * kh + i) * kw + j];
              }
            }
          ys[((n * maps + m) * out_h + oh) * out_w + ow] = sum;
        }
    }
  return {};
}

const OpDef kOps[] = {
    {"MatMul", 2, 2, prepare_matmul, run_matmul}, {"Gemm", 2, 3, prepare_gemm, run_gemm},
    {"Add", 2, 2, prepare_add, run_add},          {"Relu", 1, 1, prepare_relu, run_relu},
    {"Conv", 2, 3, prepare_conv, run_conv},
};

}  // namespace

const OpDef* find_op(const char* op_type) {
  for (const OpDef& op : kOps)
    if (std::strcmp(op.op_type, op_type) == 0) return &op;
  return nullptr;
}

std::string check_node(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc) {
  std::string op_type = node.op_type;
  if (node.domain && node.domain[0] != '\0')
    return std::string(node.domain) + "." + op_type +
           " is not supported (only the default ONNX domain)";
  const OpDef* op = find_op(node.op_type);
  if (!op) return op_type + " is not supported";
  size_t inputs = node.num_inputs;
  while (inputs > 0 && node.inputs[inputs - 1] < 0) --inputs;  // trailing absent optionals
  if (inputs < op->min_inputs || inputs > op->max_inputs)
    return op_type + ": " + std::to_string(inputs) + " inputs, expected " +
           std::to_string(op->min_inputs) +
           (op->max_inputs > op->min_inputs ? " to " + std::to_string(op->max_inputs) : "");
  for (size_t i = 0; i < op->min_inputs; ++i)
    if (node.inputs[i] < 0) return op_type + ": required input " + std::to_string(i) + " absent";
  auto check_value = [&](int32_t index, const char* role) -> std::string {
    if (index < 0) return "";
    if (static_cast<size_t>(index) >= graph.num_values)
      return op_type + ": " + role + " index " + std::to_string(index) + " out of range";
    const quilt_value_t& v = graph.values[index];
    if (v.info.dtype != QUILT_DTYPE_FLOAT32)
      return op_type + ": " + role + " '" + v.name + "' is " + dtype_name(v.info.dtype) +
             ", only float32";
    if (v.info.rank < 0) return op_type + ": " + role + " '" + v.name + "' has unknown rank";
    return "";
  };
  for (size_t i = 0; i < node.num_inputs; ++i)
    if (std::string why = check_value(node.inputs[i], "input"); !why.empty()) return why;
  if (node.num_outputs < 1 || node.outputs[0] < 0) return op_type + ": output absent";
  for (size_t i = 0; i < node.num_outputs; ++i)
    if (std::string why = check_value(node.outputs[i], "output"); !why.empty()) return why;
  desc->name = node.name ? node.name : "";
  desc->op = op;
  desc->inputs.assign(node.inputs, node.inputs + node.num_inputs);
  desc->outputs.assign(node.outputs, node.outputs + node.num_outputs);
  return op->prepare(graph, node, desc);
}

}  // namespace quilt::example
