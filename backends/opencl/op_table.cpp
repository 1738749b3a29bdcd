// The op table: what the OpenCL device runs. supports() and compile() both read it, so a claim
// and a kernel never disagree. Adding an op is its prepare/enqueue pair in an ops_*.cpp file and
// one line here.
#include <algorithm>
#include <cstring>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

constexpr uint32_t kInput1 = 1u << 1;

const OpDef kOps[] = {
    // element-wise binary, numpy broadcasting (ops_elementwise.cpp)
    {"Add", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Sub", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Mul", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Div", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Pow", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Max", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"Min", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    {"PRelu", 2, 2, "elementwise", 0, prepare_binary, enqueue_binary},
    // Where(bool condition, X, Y), three-way broadcasting (ops_elementwise.cpp)
    {"Where", 3, 3, "elementwise", 0, prepare_where, enqueue_where, nullptr, 1u},
    // element-wise unary (ops_elementwise.cpp)
    {"Relu", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"LeakyRelu", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Sigmoid", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Tanh", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Exp", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Log", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Sqrt", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Neg", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Abs", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Erf", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Reciprocal", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Clip", 1, 3, "elementwise", 0, prepare_unary, enqueue_unary},
    {"HardSigmoid", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"HardSwish", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Softplus", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Gelu", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Swish", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Mish", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Elu", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    {"Selu", 1, 1, "elementwise", 0, prepare_unary, enqueue_unary},
    // GEMM-shaped (ops_gemm.cpp)
    {"MatMul", 2, 2, "gemm", 0, prepare_matmul, enqueue_matmul, upload_gemm},
    {"Gemm", 2, 3, "gemm", 0, prepare_gemm, enqueue_gemm, upload_gemm},
    // normalisation (ops_softmax.cpp)
    {"Softmax", 1, 1, "softmax", 0, prepare_softmax, enqueue_softmax},
    {"LogSoftmax", 1, 1, "softmax", 0, prepare_softmax, enqueue_softmax},
    // views: no kernel, a copy only at the patch boundary (ops_view.cpp)
    {"Reshape", 2, 2, nullptr, kInput1, prepare_view, nullptr},
    {"Flatten", 1, 1, nullptr, 0, prepare_view, nullptr},
    {"Squeeze", 1, 2, nullptr, kInput1, prepare_view, nullptr},
    {"Unsqueeze", 1, 2, nullptr, kInput1, prepare_view, nullptr},
    {"Identity", 1, 1, nullptr, 0, prepare_view, nullptr},
    // part 2 ops: conv (ops_conv.cpp)
    {"Conv", 2, 3, "conv", 0, prepare_conv, enqueue_conv, upload_conv},
    {"ConvTranspose", 2, 3, "conv", 0, prepare_conv_transpose, enqueue_conv_transpose, upload_conv},
    // pooling (ops_pool.cpp)
    {"MaxPool", 1, 1, "pool", 0, prepare_pool, enqueue_pool},
    {"AveragePool", 1, 1, "pool", 0, prepare_pool, enqueue_pool},
    {"GlobalAveragePool", 1, 1, "pool", 0, prepare_global_pool, enqueue_global_pool},
    {"GlobalMaxPool", 1, 1, "pool", 0, prepare_global_pool, enqueue_global_pool},
    // normalisation (ops_norm.cpp)
    {"BatchNormalization", 5, 5, "norm", 0, prepare_batchnorm, enqueue_batchnorm, upload_batchnorm},
    {"InstanceNormalization", 3, 3, "norm", 0, prepare_instancenorm, enqueue_instancenorm},
    {"LayerNormalization", 2, 3, "norm", 0, prepare_layernorm, enqueue_layernorm},
    {"RMSNormalization", 2, 2, "norm", 0, prepare_rmsnorm, enqueue_rmsnorm},
    // reductions (ops_reduce.cpp)
    {"ReduceSum", 1, 2, "reduce", kInput1, prepare_reduce, enqueue_reduce},
    {"ReduceMean", 1, 2, "reduce", kInput1, prepare_reduce, enqueue_reduce},
    {"ReduceMax", 1, 2, "reduce", kInput1, prepare_reduce, enqueue_reduce},
    {"ReduceMin", 1, 2, "reduce", kInput1, prepare_reduce, enqueue_reduce},
    {"ReduceL2", 1, 2, "reduce", kInput1, prepare_reduce, enqueue_reduce},
    // tensor ops (ops_tensor.cpp); Split is the one op with several outputs (check_node)
    {"Transpose", 1, 1, "tensor", 0, prepare_transpose, enqueue_transpose},
    {"Concat", 1, 1u << 20, "tensor", 0, prepare_concat, enqueue_concat},
    {"Split", 1, 2, "tensor", kInput1, prepare_split, enqueue_split},
    {"Slice", 1, 5, "tensor", kInput1 | 1u << 2 | 1u << 3 | 1u << 4, prepare_slice, enqueue_slice},
    {"Gather", 2, 2, "tensor", kInput1, prepare_gather, enqueue_gather, upload_gather},
    {"Pad", 1, 4, "tensor", kInput1 | 1u << 3, prepare_pad, enqueue_pad},
    {"Resize", 1, 4, "tensor", 1u << 3, prepare_resize, enqueue_resize},
    // end of part 2 ops
};

}  // namespace

const OpDef* find_op(const char* op_type) {
  for (const OpDef& op : kOps)
    if (std::strcmp(op.op_type, op_type) == 0) return &op;
  return nullptr;
}

const quilt_attribute_t* NodeView::attribute(const char* name) const {
  for (size_t i = 0; i < node.num_attributes; ++i)
    if (std::strcmp(node.attributes[i].name, name) == 0) return &node.attributes[i];
  return nullptr;
}

int64_t NodeView::int_attribute(const char* name, int64_t fallback) const {
  const quilt_attribute_t* a = attribute(name);
  return a && a->kind == QUILT_ATTRIBUTE_INT ? a->i : fallback;
}

float NodeView::float_attribute(const char* name, float fallback) const {
  const quilt_attribute_t* a = attribute(name);
  return a && a->kind == QUILT_ATTRIBUTE_FLOAT ? a->f : fallback;
}

bool broadcast_shape(std::span<const int64_t> a, std::span<const int64_t> b,
                     std::vector<int64_t>* out) {
  size_t rank = std::max(a.size(), b.size());
  out->assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da >= 0 && db >= 0 && da != db && da != 1 && db != 1) return false;
    (*out)[rank - 1 - i] = da == 1 ? db : (db == 1 ? da : (da < 0 ? db : da));
  }
  return true;
}

std::string check_node(const quilt_graph_t& graph, const quilt_node_t& node, NodeDesc* desc) {
  std::string op_type = node.op_type;
  desc->name = node.name && node.name[0] ? op_type + " node '" + node.name + "'"
                                         : op_type + " node #" + std::to_string(node.index);
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
  auto check_value = [&](int32_t index, const char* role, bool int64_constant,
                         bool boolean) -> std::string {
    if (index < 0) return "";
    if (static_cast<size_t>(index) >= graph.num_values)
      return op_type + ": " + role + " index " + std::to_string(index) + " out of range";
    const quilt_value_t& v = graph.values[index];
    if (int64_constant) {
      if (v.info.dtype != QUILT_DTYPE_INT64 || !v.constant)
        return op_type + ": " + role + " '" + v.name + "' must be an int64 constant";
      return "";
    }
    const quilt_dtype_t want = boolean ? QUILT_DTYPE_BOOL : QUILT_DTYPE_FLOAT32;
    if (v.info.dtype != want)
      return op_type + ": " + role + " '" + v.name + "' is " + dtype_name(v.info.dtype) +
             ", only " + dtype_name(want);
    if (v.info.rank < 0) return op_type + ": " + role + " '" + v.name + "' has unknown rank";
    if (v.info.rank > 8) return op_type + ": " + role + " '" + v.name + "' has rank > 8";
    return "";
  };
  for (size_t i = 0; i < node.num_inputs; ++i)
    if (std::string why = check_value(node.inputs[i], "input", op->int64_constant_inputs >> i & 1,
                                      op->bool_inputs >> i & 1);
        !why.empty())
      return why;
  if (node.num_outputs < 1 || node.outputs[0] < 0) return op_type + ": output absent";
  for (size_t i = 1; i < node.num_outputs; ++i)
    if (node.outputs[i] >= 0 && op_type != "Split")  // Split: prepare_split checks its outputs
      return op_type + ": optional outputs not supported";
  if (std::string why = check_value(node.outputs[0], "output", false, false); !why.empty())
    return why;
  desc->op = op;
  desc->inputs.assign(node.inputs, node.inputs + node.num_inputs);
  desc->outputs.assign(node.outputs, node.outputs + 1);
  return op->prepare(NodeView{graph, node}, desc);
}

}  // namespace quilt::opencl
