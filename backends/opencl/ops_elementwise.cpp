// Element-wise ops (kernels_cl/elementwise.cl): binary ops with numpy broadcasting, and unary
// activations whose ONNX attributes become the kernel's (alpha, beta).
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "opencl.hpp"

namespace quilt::opencl {

namespace {

struct BinaryKernel {
  const char* op_type;
  const char* kernel;
  int64_t min_opset;  // older opsets have legacy broadcast attributes or other semantics
};
constexpr BinaryKernel kBinary[] = {
    {"Add", "add", 7}, {"Sub", "sub", 7}, {"Mul", "mul", 7}, {"Div", "div", 7},
    {"Pow", "pow", 7}, {"Max", "max", 8}, {"Min", "min", 8}, {"PRelu", "prelu", 7},
};

struct UnaryKernel {
  const char* op_type;
  const char* kernel;
  float alpha, beta;  // defaults of the ONNX attributes "alpha" and "beta" (Selu: "gamma")
};
constexpr UnaryKernel kUnary[] = {
    {"Relu", "relu", 0, 0},
    {"LeakyRelu", "leaky_relu", 0.01f, 0},
    {"Sigmoid", "sigmoid", 0, 0},
    {"Tanh", "tanh_", 0, 0},
    {"Exp", "exp_", 0, 0},
    {"Log", "log_", 0, 0},
    {"Sqrt", "sqrt_", 0, 0},
    {"Neg", "neg", 0, 0},
    {"Abs", "abs_", 0, 0},
    {"Erf", "erf_", 0, 0},
    {"Reciprocal", "reciprocal", 0, 0},
    {"Clip", "clip", -std::numeric_limits<float>::infinity(),
     std::numeric_limits<float>::infinity()},
    {"HardSigmoid", "hard_sigmoid", 0.2f, 0.5f},
    {"HardSwish", "hard_swish", 0, 0},
    {"Softplus", "softplus", 0, 0},
    {"Gelu", "gelu", 0, 0},
    {"Swish", "swish", 1.0f, 0},  // opset 24; the core's rewrites make it of x * Sigmoid(x)
    {"Mish", "mish", 0, 0},
    {"Elu", "elu", 1.0f, 0},
    {"Selu", "selu", 1.67326319217681884765625f, 1.05070102214813232421875f},
};

// Elements per work-item (VW in elementwise.cl).
constexpr int64_t kVectorWidth = 16;
size_t chunks(int64_t n) {
  return static_cast<size_t>((n + kVectorWidth - 1) / kVectorWidth);
}

std::vector<int64_t> dims_of(const quilt_value_t& v) {
  return {v.info.dims, v.info.dims + v.info.rank};
}

// A Clip bound given as an input: absent, or a float32 constant scalar.
std::string clip_bound(const NodeView& view, size_t input, float* value) {
  const quilt_value_t* v = view.input(input);
  if (!v) return "";
  if (!v->constant)
    return std::string("Clip: ") + (input == 1 ? "min" : "max") +
           " is computed at run time, only constants";
  if (element_count({v->info.dims, static_cast<size_t>(v->info.rank)}) != 1)
    return "Clip: min/max must be scalars";
  std::memcpy(value, v->constant, sizeof(float));
  return "";
}

}  // namespace

std::string prepare_binary(const NodeView& view, NodeDesc* desc) {
  const char* op = view.node.op_type;
  for (const BinaryKernel& k : kBinary) {
    if (std::strcmp(k.op_type, op) != 0) continue;
    if (view.node.opset < k.min_opset)
      return std::string(op) + ": opset " + std::to_string(view.node.opset) +
             " semantics (legacy broadcast) not supported";
    std::vector<int64_t> a = dims_of(*view.input(0)), b = dims_of(*view.input(1)), c;
    if (!broadcast_shape(a, b, &c))
      return std::string(op) + ": shapes " + format_dims(a) + " and " + format_dims(b) +
             " do not broadcast";
    if (std::strcmp(op, "PRelu") == 0 && c.size() != a.size())
      return "PRelu: slope " + format_dims(b) + " has a higher rank than X " + format_dims(a);
    desc->kernel = k.kernel;
    if (const quilt_value_t* y = view.input(1);
        std::strcmp(op, "Pow") == 0 && y->constant && y->info.dtype == QUILT_DTYPE_FLOAT32 &&
        element_count({y->info.dims, static_cast<size_t>(y->info.rank)}) == 1) {
      float e;
      std::memcpy(&e, y->constant, sizeof(float));
      if (e == 2.0f) desc->kernel = "pow_2";
      if (e == 3.0f) desc->kernel = "pow_3";
    }
    return "";
  }
  return std::string(op) + " is not a binary op";
}

namespace {

// The output's dims with each operand's strides over them (0 where broadcast), dims of size 1
// dropped and neighbours merged where every operand is contiguous across them. The innermost
// collapsed dim then has stride 1 or 0 in each operand.
struct Collapsed {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides;  // per operand
};

Collapsed collapse(std::span<const int64_t> out,
                   std::initializer_list<std::span<const int64_t>> operands) {
  const size_t rank = out.size();
  std::vector<std::vector<int64_t>> full;
  for (std::span<const int64_t> d : operands) {
    std::vector<int64_t> s(rank, 0);
    int64_t stride = 1;
    for (size_t i = 0; i < d.size(); ++i) {
      const size_t k = d.size() - 1 - i;
      s[rank - 1 - i] = d[k] == 1 ? 0 : stride;
      stride *= d[k];
    }
    full.push_back(std::move(s));
  }
  Collapsed c;
  c.strides.resize(full.size());
  for (size_t i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;
    bool merge = !c.dims.empty();
    for (size_t o = 0; o < full.size() && merge; ++o)
      merge = c.strides[o].back() == full[o][i] * out[i];
    if (merge) {
      c.dims.back() *= out[i];
      for (size_t o = 0; o < full.size(); ++o) c.strides[o].back() = full[o][i];
      continue;
    }
    c.dims.push_back(out[i]);
    for (size_t o = 0; o < full.size(); ++o) c.strides[o].push_back(full[o][i]);
  }
  return c;
}

// Launches a broadcasting kernel over c: `stem`_rows when the innermost collapsed dim holds a
// chunk (kVectorWidth values of a row per work-item, work-group 8 x 8), else `stem`_bcast (one
// value per work-item). `buffers` are the N operands then the output; the kernels take the
// buffers, sizes, the outer dims, each operand's outer strides and (_rows) its innermost one.
template <size_t N, size_t... I>
Status run_broadcast(Launch& launch, const std::string& stem, const Collapsed& c, int64_t n,
                     const std::array<cl_mem, N + 1>& buffers, std::index_sequence<I...>) {
  const bool rows = c.dims.back() >= kVectorWidth;
  const size_t outer = rows ? c.dims.size() - 1 : c.dims.size();
  if (outer > 8) return fail(QUILT_STATUS_NOT_IMPLEMENTED, "broadcast over more than 8 dims");
  const cl_int8 dims = int8_of(std::span(c.dims).first(outer));
  const std::array<cl_int8, N> strides{int8_of(std::span(c.strides[I]).first(outer))...};
  const cl_int rank = static_cast<cl_int>(outer);
  const int64_t inner = c.dims.back();
  if (rows)
    return launch.run("elementwise", stem + "_rows",
                      {chunks(inner), static_cast<size_t>(n / inner), 1}, {kLocal1d / 8, 8, 1},
                      buffers[I]..., buffers[N], static_cast<cl_int>(inner),
                      static_cast<cl_int>(n / inner), rank, dims, strides[I]...,
                      static_cast<cl_int>(c.strides[I].back())...);
  return launch.run("elementwise", stem + "_bcast", {static_cast<size_t>(n), 1, 1},
                    {kLocal1d, 1, 1}, buffers[I]..., buffers[N], static_cast<cl_int>(n), rank, dims,
                    strides[I]...);
}

template <size_t N>
Status run_broadcast(Launch& launch, const std::string& stem, const Collapsed& c, int64_t n,
                     const std::array<cl_mem, N + 1>& buffers) {
  return run_broadcast<N>(launch, stem, c, n, buffers, std::make_index_sequence<N>());
}

}  // namespace

Status enqueue_binary(Launch& launch, const NodeDesc& desc) {
  auto c = launch.dims(desc.outputs[0]);
  const int64_t n = element_count(c);
  if (n == 0) return {};
  const Collapsed col = collapse(c, {launch.dims(desc.inputs[0]), launch.dims(desc.inputs[1])});
  cl_mem pa = launch.buffer(desc.inputs[0]), pb = launch.buffer(desc.inputs[1]);
  cl_mem pc = launch.buffer(desc.outputs[0]);
  if (col.dims.size() <= 1 &&
      (col.dims.empty() || (col.strides[0][0] == 1 && col.strides[1][0] == 1)))
    return launch.run("elementwise", desc.kernel + "_flat", {chunks(n), 1, 1}, {kLocal1d, 1, 1}, pa,
                      pb, pc, static_cast<cl_int>(n));
  return run_broadcast<2>(launch, desc.kernel, col, n, {pa, pb, pc});
}

std::string prepare_where(const NodeView& view, NodeDesc* desc) {
  if (view.node.opset < 9) return "Where: opset < 9";
  std::vector<int64_t> shape = dims_of(*view.input(0)), next;
  for (size_t i = 1; i < 3; ++i) {
    if (!broadcast_shape(shape, dims_of(*view.input(i)), &next))
      return "Where: shapes of condition, X and Y do not broadcast";
    shape = next;
  }
  desc->kernel = "where";
  return "";
}

Status enqueue_where(Launch& launch, const NodeDesc& desc) {
  auto out = launch.dims(desc.outputs[0]);
  const int64_t n = element_count(out);
  if (n == 0) return {};
  Collapsed col = collapse(
      out, {launch.dims(desc.inputs[0]), launch.dims(desc.inputs[1]), launch.dims(desc.inputs[2])});
  if (col.dims.empty()) col = {{1}, {{0}, {0}, {0}}};  // one value
  return run_broadcast<3>(launch, "where", col, n,
                          {launch.buffer(desc.inputs[0]), launch.buffer(desc.inputs[1]),
                           launch.buffer(desc.inputs[2]), launch.buffer(desc.outputs[0])});
}

std::string prepare_unary(const NodeView& view, NodeDesc* desc) {
  const std::string op = view.node.op_type;
  for (const UnaryKernel& k : kUnary) {
    if (op != k.op_type) continue;
    desc->kernel = k.kernel;
    desc->f = {view.float_attribute("alpha", k.alpha), view.float_attribute("beta", k.beta)};
    if (op == "Selu") desc->f[1] = view.float_attribute("gamma", k.beta);
    if (op == "Clip") {
      if (view.node.opset < 11) {
        desc->f = {view.float_attribute("min", k.alpha), view.float_attribute("max", k.beta)};
      } else {
        for (size_t i = 1; i <= 2; ++i)
          if (std::string why = clip_bound(view, i, &desc->f[i - 1]); !why.empty()) return why;
      }
    }
    if (op == "Gelu") {
      if (const quilt_attribute_t* a = view.attribute("approximate")) {
        std::string mode(a->s, a->s_size);
        if (mode == "tanh")
          desc->kernel = "gelu_tanh";
        else if (mode != "none")
          return "Gelu: approximate '" + mode + "' not supported";
      }
    }
    return "";
  }
  return op + " is not a unary op";
}

Status enqueue_unary(Launch& launch, const NodeDesc& desc) {
  const int64_t n = element_count(launch.dims(desc.outputs[0]));
  if (n == 0) return {};
  return launch.run("elementwise", desc.kernel, {chunks(n), 1, 1}, {kLocal1d, 1, 1},
                    launch.buffer(desc.inputs[0]), launch.buffer(desc.outputs[0]),
                    static_cast<cl_int>(n), desc.f[0], desc.f[1]);
}

}  // namespace quilt::opencl
