// Schemas and shape inference of the elementwise op family: numpy-broadcasting binary and
// variadic ops, comparisons, logic, unary activations and math, Clip, Where, Cast, CastLike.
//
// The opset 1-6 forms of Add/Sub/Mul/Div/Pow/PRelu (legacy `broadcast`/`axis`) are in
// core/ops/legacy.cpp.
#include <initializer_list>
#include <string>

#include "core/op_schema.hpp"

namespace quilt {
namespace {

// Fails unless input i's dtype is one of `allowed` (Undefined passes: not known yet).
void require_dtype(InferenceContext& ctx, size_t i, std::initializer_list<DType> allowed,
                   const char* what) {
  DType d = ctx.input_dtype(i);
  if (d == DType::Undefined) return;
  for (DType a : allowed)
    if (a == d) return;
  if (d >= DType::BFloat16 && d <= DType::Int2)  // valid ONNX types, no math kernels yet
    ctx.node().fail("input " + std::to_string(i) + " ('" + ctx.node().inputs[i] + "') is " +
                        dtype_name(d) + "; this op computes on " + what + " only",
                    ErrorCode::NotImplemented);
  ctx.fail("input " + std::to_string(i) + " ('" + ctx.node().inputs[i] + "') is " + dtype_name(d) +
           ", expected " + what);
}

// Fails unless every given input has the same dtype as input 0; returns that dtype.
DType common_dtype(InferenceContext& ctx) {
  DType first = DType::Undefined;
  size_t first_index = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    DType d = ctx.input_dtype(i);
    if (d == DType::Undefined) continue;
    if (first == DType::Undefined) {
      first = d;
      first_index = i;
    } else if (d != first) {
      ctx.fail("inputs must have the same dtype, but input " + std::to_string(first_index) +
               " is " + dtype_name(first) + " and input " + std::to_string(i) + " is " +
               dtype_name(d));
    }
  }
  return first;
}

// Broadcast shape of every given input.
std::vector<int64_t> broadcast_all(InferenceContext& ctx) {
  std::vector<int64_t> out;
  bool first = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    out = first ? ctx.input_shape(i) : broadcast_shapes(ctx, out, ctx.input_shape(i));
    first = false;
  }
  return out;
}

// Add, Sub, Mul, Div, Mod, Min, Max, Sum, Mean: same dtype in, broadcast shape out.
void infer_broadcast_same_dtype(InferenceContext& ctx) {
  DType d = common_dtype(ctx);
  ctx.set_output(0, d, broadcast_all(ctx));
}

// Equal, Less, ...: same dtype in, bool out.
void infer_compare(InferenceContext& ctx) {
  common_dtype(ctx);
  ctx.set_output(0, DType::Bool, broadcast_all(ctx));
}

void infer_logic(InferenceContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i) require_dtype(ctx, i, {DType::Bool}, "bool");
  ctx.set_output(0, DType::Bool, broadcast_all(ctx));
}

// Pow: the exponent may have another numeric dtype; the output has the base's dtype.
void infer_pow(InferenceContext& ctx) {
  ctx.set_output(0, ctx.input_dtype(0), broadcast_all(ctx));
}

void infer_float_unary(InferenceContext& ctx) {
  require_dtype(ctx, 0, {DType::Float32, DType::Float64, DType::Float16}, "a float tensor");
  infer_same_as_input0(ctx);
}

void infer_int_unary(InferenceContext& ctx) {
  require_dtype(ctx, 0,
                {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16,
                 DType::UInt32, DType::UInt64},
                "an integer tensor");
  infer_same_as_input0(ctx);
}

void infer_bitwise(InferenceContext& ctx) {
  require_dtype(ctx, 0,
                {DType::Int8, DType::Int16, DType::Int32, DType::Int64, DType::UInt8, DType::UInt16,
                 DType::UInt32, DType::UInt64},
                "an integer tensor");
  infer_broadcast_same_dtype(ctx);
}

void infer_bitshift(InferenceContext& ctx) {
  std::string dir = ctx.node().attr_string("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    ctx.fail("attribute direction is '" + dir + "', expected 'LEFT' or 'RIGHT'");
  require_dtype(ctx, 0, {DType::UInt8, DType::UInt16, DType::UInt32, DType::UInt64},
                "an unsigned integer tensor");
  infer_broadcast_same_dtype(ctx);
}

void infer_bool_of_float(InferenceContext& ctx) {
  require_dtype(ctx, 0, {DType::Float32, DType::Float64, DType::Float16}, "a float tensor");
  ctx.set_output(0, DType::Bool, ctx.input_shape(0));
}

// PRelu: slope broadcasts to X in one direction only.
void infer_prelu(InferenceContext& ctx) {
  common_dtype(ctx);
  const auto& x = ctx.input_shape(0);
  const auto& slope = ctx.input_shape(1);
  std::vector<int64_t> b = broadcast_shapes(ctx, x, slope);
  if (b.size() != x.size())
    ctx.fail("slope shape " + to_string(slope) + " has a higher rank than X " + to_string(x));
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] >= 0 && b[i] >= 0 && b[i] != x[i])
      ctx.fail("slope shape " + to_string(slope) + " does not broadcast to X shape " +
               to_string(x));
  ctx.set_output(0, ctx.input_dtype(0), x);
}

void infer_clip(InferenceContext& ctx) {
  DType d = common_dtype(ctx);
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    const auto& s = ctx.input_shape(i);
    // Opset 11 requires scalars; a one-element 1-D tensor is accepted like onnxruntime does.
    if (!(s.empty() || (s.size() == 1 && (s[0] == 1 || s[0] == -1))))
      ctx.fail(std::string(i == 1 ? "min" : "max") + " must be a scalar, got shape " +
               to_string(s));
  }
  ctx.set_output(0, d, ctx.input_shape(0));
}

void infer_where(InferenceContext& ctx) {
  require_dtype(ctx, 0, {DType::Bool}, "bool");
  DType x = ctx.input_dtype(1), y = ctx.input_dtype(2);
  if (x != DType::Undefined && y != DType::Undefined && x != y)
    ctx.fail(std::string("X and Y must have the same dtype, got ") + dtype_name(x) + " and " +
             dtype_name(y));
  ctx.set_output(0, x, broadcast_all(ctx));
}

// Cast-24+'s round_mode (float8e8m0 targets): "up" (the default), "down" or "nearest".
void check_round_mode(InferenceContext& ctx) {
  const std::string m = ctx.node().attr_string("round_mode", "up");
  if (m != "up" && m != "down" && m != "nearest")
    ctx.fail("attribute round_mode is '" + m + "', expected 'up', 'down' or 'nearest'");
}

void infer_cast(InferenceContext& ctx) {
  if (!ctx.node().has_attr("to")) ctx.fail("attribute 'to' is required");
  check_round_mode(ctx);
  int64_t to = ctx.node().attr_int("to", 0);
  DType d = static_cast<DType>(to);
  if (to <= 0 || to > 26)
    ctx.fail("attribute 'to' = " + std::to_string(to) + " is not a TensorProto.DataType");
  if (!dtype_supported(d))  // complex64/128: valid, not held
    ctx.node().fail("Cast to TensorProto.DataType " + std::to_string(to) +
                        " is not supported (supported: float32, float64, float16, bfloat16, "
                        "float8 (e4m3fn, e4m3fnuz, e5m2, e5m2fnuz, e8m0), float4e2m1, "
                        "int8..int64, uint8..uint64, int2, int4, uint2, uint4, bool, string)",
                    ErrorCode::NotImplemented);
  ctx.set_output(0, d, ctx.input_shape(0));
}

void infer_cast_like(InferenceContext& ctx) {
  check_round_mode(ctx);
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(0));
}

void infer_gelu(InferenceContext& ctx) {
  std::string a = ctx.node().attr_string("approximate", "none");
  if (a != "none" && a != "tanh")
    ctx.fail("attribute approximate is '" + a + "', expected 'none' or 'tanh'");
  infer_float_unary(ctx);
}

void infer_mod(InferenceContext& ctx) {
  int64_t fmod = ctx.node().attr_int("fmod", 0);
  if (fmod != 0 && fmod != 1)
    ctx.fail("attribute fmod is " + std::to_string(fmod) + ", expected 0 or 1");
  infer_broadcast_same_dtype(ctx);
}

}  // namespace

void register_elementwise_schemas(SchemaRegistry& r) {
  constexpr int kMaxVariadic = 1 << 20;
  auto binary = [&](const char* op, int64_t since, InferFn infer) {
    r.add({.op_type = op, .min_opset = since, .min_inputs = 2, .max_inputs = 2, .infer = infer});
  };
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) binary(op, 7, infer_broadcast_same_dtype);
  binary("Pow", 7, infer_pow);
  binary("Mod", 10, infer_mod);
  for (const char* op : {"Equal", "Less", "Greater"}) binary(op, 7, infer_compare);
  for (const char* op : {"LessOrEqual", "GreaterOrEqual"}) binary(op, 12, infer_compare);
  for (const char* op : {"And", "Or", "Xor"}) binary(op, 7, infer_logic);
  r.add({.op_type = "Not", .min_opset = 1, .infer = infer_logic});
  binary("PRelu", 7, infer_prelu);
  for (const char* op : {"BitwiseAnd", "BitwiseOr", "BitwiseXor"}) binary(op, 18, infer_bitwise);
  binary("BitShift", 11, infer_bitshift);

  // Opset 6 required equal shapes; broadcasting (opset 8) is a superset, so one schema serves.
  for (const char* op : {"Min", "Max", "Sum", "Mean"})
    r.add({.op_type = op,
           .min_opset = 6,
           .min_inputs = 1,
           .max_inputs = kMaxVariadic,
           .infer = infer_broadcast_same_dtype});

  auto unary = [&](const char* op, int64_t since, InferFn infer) {
    r.add({.op_type = op, .min_opset = since, .infer = infer});
  };
  // Float-only activations and math.
  for (const char* op : {"Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil",
                         "LeakyRelu", "Elu", "Selu", "HardSigmoid"})
    unary(op, 6, infer_float_unary);
  for (const char* op : {"Softplus", "Softsign"}) unary(op, 1, infer_float_unary);
  for (const char* op : {"Sin", "Cos"}) unary(op, 7, infer_float_unary);
  unary("Erf", 9, infer_same_as_input0);  // integer Erf exists in the spec too
  unary("Round", 11, infer_float_unary);
  unary("HardSwish", 14, infer_float_unary);
  for (const char* op : {"Tan", "Asin", "Acos", "Atan"}) unary(op, 7, infer_float_unary);
  for (const char* op : {"Sinh", "Cosh", "Asinh", "Acosh", "Atanh"})
    unary(op, 9, infer_float_unary);
  unary("ThresholdedRelu", 10, infer_float_unary);
  unary("Celu", 12, infer_float_unary);
  unary("Mish", 18, infer_float_unary);
  unary("Swish", 24, infer_float_unary);
  unary("Shrink", 9, infer_same_as_input0);
  unary("BitwiseNot", 18, infer_int_unary);
  unary("Gelu", 20, infer_gelu);
  // Numeric (also integer) unary ops.
  for (const char* op : {"Relu", "Neg", "Abs"}) unary(op, 6, infer_same_as_input0);
  unary("Sign", 9, infer_same_as_input0);
  unary("IsNaN", 9, infer_bool_of_float);
  unary("IsInf", 10, infer_bool_of_float);

  // Clip: min/max attributes until opset 10, optional scalar inputs from opset 11.
  r.add({.op_type = "Clip", .min_opset = 6, .max_opset = 10, .infer = infer_float_unary});
  r.add(
      {.op_type = "Clip", .min_opset = 11, .min_inputs = 1, .max_inputs = 3, .infer = infer_clip});

  r.add(
      {.op_type = "Where", .min_opset = 9, .min_inputs = 3, .max_inputs = 3, .infer = infer_where});
  r.add({.op_type = "Cast", .min_opset = 6, .infer = infer_cast});
  r.add({.op_type = "CastLike",
         .min_opset = 15,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_cast_like});
}

}  // namespace quilt
