// Schemas and shape inference of the signal op family: DFT (17, 20), STFT, the Hann, Hamming
// and Blackman windows, and MelWeightMatrix (17).
//
// Complex values are a trailing dim of 2 (real, imaginary); real ones a trailing dim of 1.
#include "core/checked.hpp"
#include "core/op_schema.hpp"

#include <optional>
#include <string>
#include <vector>

namespace quilt {

namespace {

bool is_float(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16;
}

void require_float(const InferenceContext& ctx, size_t i, const char* what) {
  DType d = ctx.input_dtype(i);
  if (d != DType::Undefined && !is_float(d))
    ctx.fail(std::string(what) + " is " + dtype_name(d) + ", expected float16, float32 or float64");
}

void require_flag(const InferenceContext& ctx, const char* name, int64_t value) {
  if (value != 0 && value != 1)
    ctx.fail("attribute " + std::string(name) + " is " + std::to_string(value) +
             ", expected 0 or 1");
}

// The value of a scalar (or one-element) integer input; nullopt while unknown.
std::optional<int64_t> scalar_input(const InferenceContext& ctx, size_t i, const char* what) {
  auto v = ctx.input_ints(i);
  if (!v) return std::nullopt;
  if (v->size() != 1)
    ctx.fail(std::string(what) + " must be a scalar, got " + std::to_string(v->size()) + " values");
  return (*v)[0];
}

// output_datatype of the generator ops: any numeric type; bfloat16 is valid but not held.
DType output_datatype(const InferenceContext& ctx) {
  int64_t t = ctx.node().attr_int("output_datatype", 1);
  DType d = static_cast<DType>(t);
  if (t == 16)
    ctx.node().fail("output_datatype bfloat16 is not supported", ErrorCode::NotImplemented);
  if (t <= 0 || t > 13 || d == DType::String || d == DType::Bool)
    ctx.fail("attribute output_datatype is " + std::to_string(t) +
             ", expected a numeric TensorProto.DataType (1-7, 10-13)");
  return d;
}

// Fields shared by both DFT opsets. The kernel re-derives the same values from its inputs.
void infer_dft(InferenceContext& ctx) {
  require_float(ctx, 0, "input");
  const auto& in = ctx.input_shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  if (rank < 2)
    ctx.fail("input has rank " + std::to_string(rank) +
             ", expected >= 2 (signal dims and a last dim of 1 or 2)");
  const int64_t last = in.back();
  if (last != -1 && last != 1 && last != 2)
    ctx.fail("last dim of input is " + std::to_string(last) + ", expected 1 (real) or 2 (complex)");
  const int64_t inverse = ctx.node().attr_int("inverse", 0);
  const int64_t onesided = ctx.node().attr_int("onesided", 0);
  require_flag(ctx, "inverse", inverse);
  require_flag(ctx, "onesided", onesided);

  int64_t axis = 0;
  if (ctx.opset() < 20) {
    axis = ctx.node().attr_int("axis", 1);
  } else if (ctx.has_input(2)) {
    auto a = scalar_input(ctx, 2, "axis");
    if (!a) return;  // not reached: axis is a value input
    axis = *a;
  } else {
    axis = -2;
  }
  if (axis < -rank || axis > rank - 2 || (axis < 0 && axis > -2))
    ctx.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
             ": expected [-r, -2] or [0, r-2] (the last dim holds real/imaginary parts)");
  if (axis < 0) axis += rank;

  const bool irfft = onesided && inverse;
  if (irfft && last == 1) ctx.fail("onesided inverse DFT (IRFFT) needs complex input (last dim 2)");
  // The spec: a one-sided forward DFT (RFFT) takes real input only.
  if (onesided && !inverse && last == 2)
    ctx.fail("onesided forward DFT (RFFT) needs real input (last dim 1), got complex (last dim 2)");

  int64_t n = -1;
  if (ctx.has_input(1)) {
    auto v = scalar_input(ctx, 1, "dft_length");
    if (!v) return;  // not reached: dft_length is a value input
    n = *v;
    if (n < 1) ctx.fail("dft_length is " + std::to_string(n) + ", expected >= 1");
  } else if (in[static_cast<size_t>(axis)] >= 0) {
    const int64_t dim = in[static_cast<size_t>(axis)];
    n = irfft ? Checked(ctx.node(), "default dft_length").mul(2, dim - 1) : dim;
    if (n < 1)
      ctx.fail("the default dft_length is " + std::to_string(n) + " for axis dim " +
               std::to_string(dim) + "; give dft_length or a longer axis");
  }
  std::vector<int64_t> out = in;
  out[static_cast<size_t>(axis)] = onesided && !inverse && n >= 0 ? n / 2 + 1 : n;
  out.back() = irfft ? 1 : 2;
  ctx.set_output(0, ctx.input_dtype(0), out);
}

void infer_stft(InferenceContext& ctx) {
  require_float(ctx, 0, "signal");
  const auto& in = ctx.input_shape(0);
  if (in.size() != 3)
    ctx.fail("signal has shape " + to_string(in) +
             ", expected [batch_size][signal_length][1 or 2]");
  if (in[2] != -1 && in[2] != 1 && in[2] != 2)
    ctx.fail("last dim of signal is " + std::to_string(in[2]) +
             ", expected 1 (real) or 2 (complex)");
  const int64_t onesided = ctx.node().attr_int("onesided", 1);
  require_flag(ctx, "onesided", onesided);

  auto step = scalar_input(ctx, 1, "frame_step");
  if (!step) return;  // not reached: frame_step is a value input
  if (*step < 1) ctx.fail("frame_step is " + std::to_string(*step) + ", expected >= 1");

  int64_t window_length = -1;
  if (ctx.has_input(2)) {
    const auto& w = ctx.input_shape(2);
    if (w.size() != 1) ctx.fail("window has shape " + to_string(w) + ", expected rank 1");
    DType wd = ctx.input_dtype(2), sd = ctx.input_dtype(0);
    if (wd != DType::Undefined && sd != DType::Undefined && wd != sd)
      ctx.fail(std::string("window is ") + dtype_name(wd) + " but signal is " + dtype_name(sd) +
               ", expected the same dtype");
    window_length = w[0];
  }
  int64_t frame_length = window_length;
  if (ctx.has_input(3)) {
    auto v = scalar_input(ctx, 3, "frame_length");
    if (!v) return;  // not reached: frame_length is a value input
    if (*v < 1) ctx.fail("frame_length is " + std::to_string(*v) + ", expected >= 1");
    if (window_length >= 0 && window_length != *v)
      ctx.fail("window has length " + std::to_string(window_length) + " but frame_length is " +
               std::to_string(*v) + ", expected them equal");
    frame_length = *v;
  } else if (!ctx.has_input(2)) {
    frame_length = in[1];  // neither given: one frame over the whole signal
  }
  if (frame_length == 0) ctx.fail("frame length is 0, expected >= 1");

  int64_t frames = -1;
  if (in[1] >= 0 && frame_length >= 0) {
    if (in[1] < frame_length)
      ctx.fail("signal length " + std::to_string(in[1]) + " is shorter than the frame length " +
               std::to_string(frame_length));
    frames = 1 + (in[1] - frame_length) / *step;
  }
  const int64_t bins = frame_length < 0 ? -1 : onesided ? frame_length / 2 + 1 : frame_length;
  ctx.set_output(0, ctx.input_dtype(0), {in[0], frames, bins, 2});
}

void infer_window(InferenceContext& ctx) {
  DType sd = ctx.input_dtype(0);
  if (sd != DType::Undefined && sd != DType::Int32 && sd != DType::Int64)
    ctx.fail(std::string("size is ") + dtype_name(sd) + ", expected int32 or int64");
  require_flag(ctx, "periodic", ctx.node().attr_int("periodic", 1));
  DType out = output_datatype(ctx);
  auto size = scalar_input(ctx, 0, "size");
  if (!size) return;  // not reached: size is a value input
  if (*size < 0) ctx.fail("size is " + std::to_string(*size) + ", expected >= 0");
  ctx.set_output(0, out, {*size});
}

void infer_mel_weight_matrix(InferenceContext& ctx) {
  for (size_t i = 0; i < 3; ++i) {
    DType d = ctx.input_dtype(i);
    if (d != DType::Undefined && d != DType::Int32 && d != DType::Int64)
      ctx.fail("input " + std::to_string(i) + " is " + dtype_name(d) + ", expected int32 or int64");
  }
  require_float(ctx, 3, "lower_edge_hertz");
  require_float(ctx, 4, "upper_edge_hertz");
  DType out = output_datatype(ctx);
  auto bins = scalar_input(ctx, 0, "num_mel_bins");
  auto length = scalar_input(ctx, 1, "dft_length");
  if (!bins || !length) return;  // not reached: both are value inputs
  if (*bins < 1) ctx.fail("num_mel_bins is " + std::to_string(*bins) + ", expected >= 1");
  if (*length < 1) ctx.fail("dft_length is " + std::to_string(*length) + ", expected >= 1");
  ctx.set_output(0, out, {*length / 2 + 1, *bins});
}

}  // namespace

void register_signal_schemas(SchemaRegistry& r) {
  r.add({.op_type = "DFT",
         .min_opset = 17,
         .max_opset = 19,
         .min_inputs = 1,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_dft});
  r.add({.op_type = "DFT",
         .min_opset = 20,
         .min_inputs = 1,
         .max_inputs = 3,
         .value_inputs = {1, 2},
         .infer = infer_dft});
  r.add({.op_type = "STFT",
         .min_opset = 17,
         .min_inputs = 2,
         .max_inputs = 4,
         .value_inputs = {1, 3},
         .infer = infer_stft});
  for (const char* op : {"HannWindow", "HammingWindow", "BlackmanWindow"})
    r.add({.op_type = op, .min_opset = 17, .value_inputs = {0}, .infer = infer_window});
  r.add({.op_type = "MelWeightMatrix",
         .min_opset = 17,
         .min_inputs = 5,
         .max_inputs = 5,
         .value_inputs = {0, 1},
         .infer = infer_mel_weight_matrix});
}

}  // namespace quilt
