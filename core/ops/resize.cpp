// Schemas and shape inference of the resize op family: Resize (opsets 10, 11, 13, 18, 19) and
// the deprecated Upsample (opsets 7-9).
//
// Output sizes follow onnxruntime, the reference the tests compare with: from `scales` the size
// is floor(float(scale) * float(dim)) computed in float32; from `sizes` with a
// keep_aspect_ratio_policy other than "stretch" it is round(policy_scale * dim).
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/checked.hpp"
#include "core/half.hpp"
#include "core/op_schema.hpp"

namespace quilt {
namespace {

void check_choice(const InferenceContext& ctx, const std::string& name, const std::string& value,
                  const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  ctx.fail("attribute " + name + " is '" + value + "', expected one of: " + list + " (opset " +
           std::to_string(ctx.opset()) + ")");
}

void check_bool(const InferenceContext& ctx, const std::string& name) {
  int64_t v = ctx.node().attr_int(name, 0);
  if (v != 0 && v != 1)
    ctx.fail("attribute " + name + " is " + std::to_string(v) + ", expected 0 or 1");
}

// Values of a floating-point input (scales are float32; roi may be float16/32/64).
std::vector<float> float_values(const InferenceContext& ctx, size_t i) {
  const Tensor* t = ctx.input_value(i);
  std::vector<float> out(static_cast<size_t>(t->numel()));
  switch (t->dtype()) {
    case DType::Float32:
      std::copy_n(t->data<float>(), out.size(), out.begin());
      break;
    case DType::Float64:
      for (size_t k = 0; k < out.size(); ++k) out[k] = static_cast<float>(t->data<double>()[k]);
      break;
    case DType::Float16:
      for (size_t k = 0; k < out.size(); ++k) out[k] = half_to_float(t->data<uint16_t>()[k]);
      break;
    default:
      ctx.fail("input '" + ctx.node().inputs[i] + "' must be a float tensor, got " +
               dtype_name(t->dtype()));
  }
  return out;
}

// True when optional input i is given and not an empty tensor (an empty scales/roi tensor is
// how opsets 11-12 say "not given").
bool non_empty_input(const InferenceContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return false;
  const auto& shape = ctx.input_shape(i);
  return std::none_of(shape.begin(), shape.end(), [](int64_t d) { return d == 0; });
}

// Output dims from per-axis float scales; -1 input dims stay unknown.
void apply_scales(const InferenceContext& ctx, const std::vector<float>& scales,
                  const std::vector<int64_t>& axes, float min_scale, std::vector<int64_t>& dims) {
  if (scales.size() != axes.size())
    ctx.fail("scales has " + std::to_string(scales.size()) + " values, expected " +
             std::to_string(axes.size()) + " (one per resized axis)");
  for (size_t i = 0; i < axes.size(); ++i) {
    float s = scales[i];
    if (!(s > 0) || !std::isfinite(s) || s < min_scale)
      ctx.fail("scales[" + std::to_string(i) + "] is " + std::to_string(s) + ", expected " +
               (min_scale > 0 ? "a value >= 1" : "a finite value > 0"));
    int64_t& d = dims[static_cast<size_t>(axes[i])];
    if (d >= 0) d = Checked(ctx.node(), "output size").to_int64(s * static_cast<float>(d));
  }
}

void infer_resize(InferenceContext& ctx) {
  const Node& node = ctx.node();
  const int64_t opset = ctx.opset();
  const DType dtype = ctx.input_dtype(0);
  const std::vector<int64_t>& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());

  const std::string mode = node.attr_string("mode", "nearest");
  check_choice(ctx, "mode", mode, {"nearest", "linear", "cubic"});
  std::string coord = "asymmetric";
  if (opset >= 11) {
    coord = node.attr_string("coordinate_transformation_mode", "half_pixel");
    std::vector<std::string> coords = {"half_pixel", "pytorch_half_pixel", "align_corners",
                                       "asymmetric", "tf_crop_and_resize"};
    if (opset < 13) coords.push_back("tf_half_pixel_for_nn");
    if (opset >= 19) coords.push_back("half_pixel_symmetric");
    check_choice(ctx, "coordinate_transformation_mode", coord, coords);
    check_choice(ctx, "nearest_mode", node.attr_string("nearest_mode", "round_prefer_floor"),
                 {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"});
    check_bool(ctx, "exclude_outside");
  }

  std::vector<int64_t> axes;
  std::string policy = "stretch";
  if (opset >= 18) {
    check_bool(ctx, "antialias");
    policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    check_choice(ctx, "keep_aspect_ratio_policy", policy, {"stretch", "not_larger", "not_smaller"});
    if (node.has_attr("axes")) {
      for (int64_t a : node.attr_ints("axes")) {
        int64_t axis = normalize_axis(ctx, a, rank);
        if (std::find(axes.begin(), axes.end(), axis) != axes.end())
          ctx.fail("axes contains axis " + std::to_string(a) + " twice");
        axes.push_back(axis);
      }
    }
  }
  if (axes.empty())  // absent (or empty) axes: every axis
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);

  const size_t scales_input = opset == 10 ? 1 : 2;
  const bool has_scales = non_empty_input(ctx, scales_input);
  const bool has_sizes = opset >= 11 && non_empty_input(ctx, 3);
  if (has_scales == has_sizes)
    ctx.fail(has_scales ? "both scales and sizes are given, expected exactly one"
                        : "neither scales nor sizes is given, expected exactly one");

  if (coord == "tf_crop_and_resize" && non_empty_input(ctx, 1) && ctx.input_value(1)) {
    const int64_t n = ctx.input_value(1)->numel();
    if (n != 2 * static_cast<int64_t>(axes.size()))
      ctx.fail("roi has " + std::to_string(n) + " values, expected " +
               std::to_string(2 * axes.size()) + " (starts then ends of the resized axes)");
  }

  std::vector<int64_t> dims = in;
  if (has_scales) {
    if (!ctx.input_value(scales_input)) {  // only at creation; the rank is still known
      for (int64_t a : axes) dims[static_cast<size_t>(a)] = -1;
    } else {
      apply_scales(ctx, float_values(ctx, scales_input), axes, 0, dims);
    }
  } else {
    std::optional<std::vector<int64_t>> sizes = ctx.input_ints(3);
    if (!sizes) {
      for (int64_t a : axes) dims[static_cast<size_t>(a)] = -1;
    } else {
      if (sizes->size() != axes.size())
        ctx.fail("sizes has " + std::to_string(sizes->size()) + " values, expected " +
                 std::to_string(axes.size()) + " (one per resized axis)");
      for (size_t i = 0; i < axes.size(); ++i) {
        if ((*sizes)[i] < 0)
          ctx.fail("sizes[" + std::to_string(i) + "] is " + std::to_string((*sizes)[i]) +
                   ", expected >= 0");
        const int64_t d = in[static_cast<size_t>(axes[i])];
        if (d == 0 && (*sizes)[i] != 0)
          ctx.fail("sizes[" + std::to_string(i) + "] is " + std::to_string((*sizes)[i]) +
                   " but the input axis is empty, expected 0");
        dims[static_cast<size_t>(axes[i])] = (*sizes)[i];
      }
      if (policy != "stretch") {
        // One scale for all resized axes keeps the aspect ratio; it needs every input dim.
        bool known = true;
        float scale = policy == "not_larger" ? std::numeric_limits<float>::max() : 0.0f;
        for (size_t i = 0; i < axes.size(); ++i) {
          const int64_t d = in[static_cast<size_t>(axes[i])];
          if (d < 0) known = false;
          if (d <= 0) continue;
          float s = static_cast<float>((*sizes)[i]) / static_cast<float>(d);
          scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
        }
        for (int64_t a : axes) {
          int64_t& out = dims[static_cast<size_t>(a)];
          const int64_t d = in[static_cast<size_t>(a)];
          out = !known ? -1
                       : Checked(node, "output size")
                             .to_int64(std::round(scale * static_cast<float>(d)));
        }
      }
    }
  }
  for (size_t a = 0; a < dims.size(); ++a)
    if (in[a] == 0 && dims[a] > 0)
      ctx.fail("axis " + std::to_string(a) + " of the input is empty but the output size is " +
               std::to_string(dims[a]) + ", expected 0");
  ctx.set_output(0, dtype, dims);
}

void infer_upsample(InferenceContext& ctx) {
  const Node& node = ctx.node();
  const std::vector<int64_t>& in = ctx.input_shape(0);
  check_choice(ctx, "mode", node.attr_string("mode", "nearest"), {"nearest", "linear"});
  std::vector<int64_t> axes;
  for (int64_t a = 0; a < static_cast<int64_t>(in.size()); ++a) axes.push_back(a);
  std::vector<int64_t> dims = in;
  if (ctx.opset() < 9) {
    if (!node.has_attr("scales")) ctx.fail("attribute scales is required");
    apply_scales(ctx, node.attr_floats("scales"), axes, 1, dims);
  } else if (!ctx.input_value(1)) {
    std::fill(dims.begin(), dims.end(), -1);
  } else {
    apply_scales(ctx, float_values(ctx, 1), axes, 1, dims);
  }
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

}  // namespace

void register_resize_schemas(SchemaRegistry& r) {
  // Opset 10: X and scales only; asymmetric coordinates. 11: roi/sizes and the coordinate
  // attributes. 13: roi and scales become optional, tf_half_pixel_for_nn is gone. 18: antialias,
  // axes, keep_aspect_ratio_policy. 19: half_pixel_symmetric.
  r.add({.op_type = "Resize",
         .min_opset = 10,
         .max_opset = 10,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_resize});
  r.add({.op_type = "Resize",
         .min_opset = 11,
         .max_opset = 12,
         .min_inputs = 3,
         .max_inputs = 4,
         .value_inputs = {1, 2, 3},
         .infer = infer_resize});
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{13, 17}, {18, 18}, {19, 1000}})
    r.add({.op_type = "Resize",
           .min_opset = lo,
           .max_opset = hi,
           .min_inputs = 1,
           .max_inputs = 4,
           .value_inputs = {1, 2, 3},
           .infer = infer_resize});
  r.add({.op_type = "Upsample", .min_opset = 7, .max_opset = 8, .infer = infer_upsample});
  r.add({.op_type = "Upsample",
         .min_opset = 9,
         .max_opset = 9,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_upsample});
}

}  // namespace quilt
