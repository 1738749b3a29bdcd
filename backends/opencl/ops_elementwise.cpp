// Element-wise ops (kernels_cl/elementwise.cl): binary ops with numpy broadcasting, and unary
// activations whose ONNX attributes become the kernel's (alpha, beta).
#include <cmath>
#include <cstring>
#include <limits>

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
    return "";
  }
  return std::string(op) + " is not a binary op";
}

Status enqueue_binary(Launch& launch, const NodeDesc& desc) {
  auto a = launch.dims(desc.inputs[0]), b = launch.dims(desc.inputs[1]);
  auto c = launch.dims(desc.outputs[0]);
  const int64_t n = element_count(c);
  if (n == 0) return {};
  // Strides of a and b over c's dims (0 where broadcast), then dims of size 1 dropped and
  // neighbours merged where both operands are contiguous across them.
  const size_t rank = c.size();
  std::vector<int64_t> sa(rank, 0), sb(rank, 0);
  auto strides = [&](std::span<const int64_t> d, std::vector<int64_t>& s) {
    int64_t stride = 1;
    for (size_t i = 0; i < d.size(); ++i) {
      size_t k = d.size() - 1 - i;
      s[rank - 1 - i] = d[k] == 1 ? 0 : stride;
      stride *= d[k];
    }
  };
  strides(a, sa);
  strides(b, sb);
  std::vector<int64_t> dims, xa, xb;
  for (size_t i = 0; i < rank; ++i) {
    if (c[i] == 1) continue;
    if (!dims.empty() && xa.back() == sa[i] * c[i] && xb.back() == sb[i] * c[i]) {
      dims.back() *= c[i];
      xa.back() = sa[i];
      xb.back() = sb[i];
      continue;
    }
    dims.push_back(c[i]);
    xa.push_back(sa[i]);
    xb.push_back(sb[i]);
  }
  const cl_int count = static_cast<cl_int>(n);
  cl_mem pa = launch.buffer(desc.inputs[0]), pb = launch.buffer(desc.inputs[1]);
  cl_mem pc = launch.buffer(desc.outputs[0]);
  if (dims.size() <= 1 && (dims.empty() || (xa[0] == 1 && xb[0] == 1)))
    return launch.run("elementwise", desc.kernel + "_flat", {chunks(n), 1, 1}, {kLocal1d, 1, 1}, pa,
                      pb, pc, count);
  // The innermost collapsed dim has stride 1 or 0 (broadcast) in each operand. Long enough for
  // a chunk, a work-item takes kVectorWidth elements of a row; otherwise one element each.
  const bool rows = dims.back() >= kVectorWidth;
  const size_t outer = rows ? dims.size() - 1 : dims.size();
  if (outer > 8) return fail(QUILT_STATUS_NOT_IMPLEMENTED, "broadcast over more than 8 dims");
  cl_int8 vd{}, va{}, vb{};
  for (size_t i = 0; i < outer; ++i) {
    vd.s[i] = static_cast<cl_int>(dims[i]);
    va.s[i] = static_cast<cl_int>(xa[i]);
    vb.s[i] = static_cast<cl_int>(xb[i]);
  }
  const cl_int r = static_cast<cl_int>(outer);
  if (rows) {
    const int64_t inner = dims.back();
    return launch.run("elementwise", desc.kernel + "_rows",
                      {chunks(inner), static_cast<size_t>(n / inner), 1}, {kLocal1d / 8, 8, 1}, pa,
                      pb, pc, static_cast<cl_int>(inner), static_cast<cl_int>(n / inner), r, vd, va,
                      vb, static_cast<cl_int>(xa.back()), static_cast<cl_int>(xb.back()));
  }
  return launch.run("elementwise", desc.kernel + "_bcast", {static_cast<size_t>(n), 1, 1},
                    {kLocal1d, 1, 1}, pa, pb, pc, count, r, vd, va, vb);
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
