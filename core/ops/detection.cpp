// Schemas and shape inference of the detection op family: NonMaxSuppression (10), RoiAlign (10,
// 16), GridSample (16, 20), AffineGrid (20), CenterCropPad (18) and Col2Im (18).
#include <algorithm>
#include <cmath>
#include <string>

#include "core/checked.hpp"
#include "core/op_schema.hpp"
#include "core/ops/detection_nms.hpp"

namespace quilt {
namespace {

std::string join(const std::vector<int64_t>& v) {
  return to_string(v);
}

void check_choice(const InferenceContext& ctx, const std::string& name, const std::string& value,
                  const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  ctx.fail("attribute " + name + " is '" + value + "', expected one of: " + list + " (opset " +
           std::to_string(ctx.opset()) + ")");
}

void check_bool(const InferenceContext& ctx, const std::string& name) {
  const int64_t v = ctx.node().attr_int(name, 0);
  if (v != 0 && v != 1)
    ctx.fail("attribute " + name + " is " + std::to_string(v) + ", expected 0 or 1");
}

void check_rank(const InferenceContext& ctx, size_t i, const std::string& what, int64_t rank) {
  if (ctx.input_rank(i) != rank)
    ctx.fail(what + " has shape " + join(ctx.input_shape(i)) + ", expected rank " +
             std::to_string(rank));
}

// Two dims that must agree; unknown (-1) agrees with anything.
void check_dim(const InferenceContext& ctx, int64_t a, int64_t b, const std::string& what) {
  if (a >= 0 && b >= 0 && a != b)
    ctx.fail(what + ": " + std::to_string(a) + " vs " + std::to_string(b) + ", expected equal");
}

void check_float_input(const InferenceContext& ctx, size_t i, const std::string& what) {
  const DType d = ctx.input_dtype(i);
  if (d != DType::Float32 && d != DType::Float64 && d != DType::Float16 && d != DType::Undefined)
    ctx.fail(what + " is " + dtype_name(d) + ", expected float16, float32 or float64");
}

// ---- NonMaxSuppression ----

void infer_nms(InferenceContext& ctx) {
  const int64_t center = ctx.node().attr_int("center_point_box", 0);
  if (center != 0 && center != 1)
    ctx.fail("attribute center_point_box is " + std::to_string(center) + ", expected 0 or 1");
  check_rank(ctx, 0, "boxes", 3);
  check_rank(ctx, 1, "scores", 3);
  const auto& boxes = ctx.input_shape(0);
  const auto& scores = ctx.input_shape(1);
  check_dim(ctx, boxes[2], 4, "boxes' last dim");
  check_dim(ctx, boxes[0], scores[0], "batch size of boxes and scores");
  check_dim(ctx, boxes[1], scores[2], "number of boxes in boxes and scores");
  if (ctx.input_dtype(0) != DType::Float32 || ctx.input_dtype(1) != DType::Float32)
    ctx.fail("boxes and scores must be float32");
  for (size_t i = 2; i < 5; ++i)
    if (ctx.has_input(i) && ctx.input_rank(i) > 1)
      ctx.fail("input " + std::to_string(i) + " has shape " + join(ctx.input_shape(i)) +
               ", expected a scalar or a 1-element 1-D tensor");
  const Tensor* b = ctx.input_value(0);
  const Tensor* s = ctx.input_value(1);
  bool values_known = b && s;
  for (size_t i = 2; i < 5; ++i)
    if (ctx.has_input(i) && !ctx.input_value(i)) values_known = false;
  if (!values_known) {
    ctx.set_output(0, DType::Int64, {-1, 3});
    return;
  }
  const NmsParams p =
      nms_params(ctx.node(), ctx.input_value(2), ctx.input_value(3), ctx.input_value(4));
  const auto selected =
      non_max_suppression(b->data<float>(), s->data<float>(), b->dim(0), s->dim(1), b->dim(1), p);
  ctx.set_output(0, DType::Int64, {static_cast<int64_t>(selected.size()), 3});
}

// ---- RoiAlign ----

void infer_roi_align(InferenceContext& ctx) {
  const Node& node = ctx.node();
  check_choice(ctx, "mode", node.attr_string("mode", "avg"), {"avg", "max"});
  if (ctx.opset() >= 16)
    check_choice(ctx, "coordinate_transformation_mode",
                 node.attr_string("coordinate_transformation_mode", "half_pixel"),
                 {"half_pixel", "output_half_pixel"});
  const int64_t oh = node.attr_int("output_height", 1);
  const int64_t ow = node.attr_int("output_width", 1);
  if (oh <= 0 || ow <= 0)
    ctx.fail("output_height and output_width are " + std::to_string(oh) + " and " +
             std::to_string(ow) + ", expected > 0");
  if (const float scale = node.attr_float("spatial_scale", 1.0f); !std::isfinite(scale))
    ctx.fail("spatial_scale is " + std::to_string(scale) + ", expected a finite number");
  if (node.attr_int("sampling_ratio", 0) < 0)
    ctx.fail("sampling_ratio is " + std::to_string(node.attr_int("sampling_ratio", 0)) +
             ", expected >= 0");
  check_float_input(ctx, 0, "X");
  if (ctx.input_dtype(1) != ctx.input_dtype(0))
    ctx.fail(std::string("rois is ") + dtype_name(ctx.input_dtype(1)) + ", expected " +
             dtype_name(ctx.input_dtype(0)) + " like X");
  if (ctx.input_dtype(2) != DType::Int64)
    ctx.fail(std::string("batch_indices is ") + dtype_name(ctx.input_dtype(2)) +
             ", expected int64");
  check_rank(ctx, 0, "X", 4);
  check_rank(ctx, 1, "rois", 2);
  check_rank(ctx, 2, "batch_indices", 1);
  const auto& x = ctx.input_shape(0);
  const auto& rois = ctx.input_shape(1);
  check_dim(ctx, rois[1], 4, "rois' last dim");
  check_dim(ctx, rois[0], ctx.input_shape(2)[0], "number of rois and batch_indices");
  const int64_t n = rois[0] >= 0 ? rois[0] : ctx.input_shape(2)[0];
  ctx.set_output(0, ctx.input_dtype(0), {n, x[1], oh, ow});
}

// ---- GridSample ----

void infer_grid_sample(InferenceContext& ctx) {
  const Node& node = ctx.node();
  const bool v16 = ctx.opset() < 20;
  if (v16)
    check_choice(ctx, "mode", node.attr_string("mode", "bilinear"),
                 {"bilinear", "nearest", "bicubic"});
  else
    check_choice(ctx, "mode", node.attr_string("mode", "linear"), {"linear", "nearest", "cubic"});
  check_choice(ctx, "padding_mode", node.attr_string("padding_mode", "zeros"),
               {"zeros", "border", "reflection"});
  check_bool(ctx, "align_corners");
  check_float_input(ctx, 1, "grid");
  const auto& x = ctx.input_shape(0);
  const auto& grid = ctx.input_shape(1);
  if (v16 && x.size() != 4)
    ctx.fail("X has shape " + join(x) + ", expected rank 4 (opset " + std::to_string(ctx.opset()) +
             ")");
  if (x.size() < 3) ctx.fail("X has shape " + join(x) + ", expected rank >= 3");
  if (grid.size() != x.size())
    ctx.fail("grid has shape " + join(grid) + ", expected rank " + std::to_string(x.size()) +
             " like X");
  check_dim(ctx, grid[0], x[0], "batch size of grid and X");
  check_dim(ctx, grid.back(), static_cast<int64_t>(x.size()) - 2,
            "grid's last dim and X's number of spatial dims");
  std::vector<int64_t> dims = {x[0] >= 0 ? x[0] : grid[0], x[1]};
  dims.insert(dims.end(), grid.begin() + 1, grid.end() - 1);
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

// ---- AffineGrid ----

void infer_affine_grid(InferenceContext& ctx) {
  check_bool(ctx, "align_corners");
  check_float_input(ctx, 0, "theta");
  check_rank(ctx, 0, "theta", 3);
  check_rank(ctx, 1, "size", 1);
  const auto& theta = ctx.input_shape(0);
  const auto size = ctx.input_ints(1);
  if (!size) {
    const int64_t n = ctx.input_shape(1)[0];
    if (n != -1 && n != 4 && n != 5)
      ctx.fail("size has " + std::to_string(n) + " values, expected 4 (N, C, H, W) or 5");
    if (n == -1) {
      ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
      return;
    }
    std::vector<int64_t> dims(static_cast<size_t>(n - 1), -1);
    dims[0] = theta[0];
    dims.back() = n - 2;
    ctx.set_output(0, ctx.input_dtype(0), dims);
    return;
  }
  const auto& sz = *size;
  if (sz.size() != 4 && sz.size() != 5)
    ctx.fail("size is " + join(sz) + ", expected 4 values (N, C, H, W) or 5 (N, C, D, H, W)");
  for (int64_t d : sz)
    if (d <= 0) ctx.fail("size is " + join(sz) + ", expected positive values");
  const auto sp = static_cast<int64_t>(sz.size()) - 2;
  check_dim(ctx, theta[0], sz[0], "theta's batch size and size[0]");
  check_dim(ctx, theta[1], sp, "theta's dim 1 and the number of spatial dims");
  check_dim(ctx, theta[2], sp + 1, "theta's dim 2 and the number of spatial dims + 1");
  std::vector<int64_t> dims = {sz[0]};
  dims.insert(dims.end(), sz.begin() + 2, sz.end());
  dims.push_back(sp);
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

// ---- CenterCropPad ----

void infer_center_crop_pad(InferenceContext& ctx) {
  const auto& in = ctx.input_shape(0);
  const auto rank = static_cast<int64_t>(in.size());
  check_rank(ctx, 1, "shape", 1);
  std::vector<int64_t> axes;
  if (ctx.node().has_attr("axes")) {
    for (int64_t a : ctx.node().attr_ints("axes")) {
      const int64_t axis = normalize_axis(ctx, a, rank);
      if (std::find(axes.begin(), axes.end(), axis) != axes.end())
        ctx.fail("axes contains axis " + std::to_string(a) + " twice");
      axes.push_back(axis);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
  }
  check_dim(ctx, ctx.input_shape(1)[0], static_cast<int64_t>(axes.size()),
            "number of values in shape and number of axes");
  std::vector<int64_t> dims = in;
  const auto shape = ctx.input_ints(1);
  if (shape && shape->size() != axes.size())
    ctx.fail("shape has " + std::to_string(shape->size()) + " values, expected " +
             std::to_string(axes.size()) + " (one per axis)");
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t& d = dims[static_cast<size_t>(axes[i])];
    if (!shape) {
      d = -1;
      continue;
    }
    if ((*shape)[i] < 0) ctx.fail("shape is " + join(*shape) + ", expected non-negative values");
    d = (*shape)[i];
  }
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

// ---- Col2Im ----

void infer_col2im(InferenceContext& ctx) {
  const Node& node = ctx.node();
  check_rank(ctx, 0, "input", 3);
  check_rank(ctx, 1, "image_shape", 1);
  check_rank(ctx, 2, "block_shape", 1);
  const auto& in = ctx.input_shape(0);
  const auto image = ctx.input_ints(1);
  const auto block = ctx.input_ints(2);
  if (!image || !block) {
    const int64_t sp = ctx.input_shape(1)[0];
    if (sp < 0) {
      ctx.set_output_unknown_shape(0, ctx.input_dtype(0));
      return;
    }
    std::vector<int64_t> dims(static_cast<size_t>(sp + 2), -1);
    dims[0] = in[0];
    if (image) std::copy(image->begin(), image->end(), dims.begin() + 2);
    ctx.set_output(0, ctx.input_dtype(0), dims);
    return;
  }
  const size_t sp = image->size();
  if (sp < 1 || block->size() != sp)
    ctx.fail("image_shape " + join(*image) + " and block_shape " + join(*block) +
             " must have the same, non-zero number of values");
  const auto dilations = node.attr_ints("dilations", std::vector<int64_t>(sp, 1));
  const auto pads = node.attr_ints("pads", std::vector<int64_t>(2 * sp, 0));
  const auto strides = node.attr_ints("strides", std::vector<int64_t>(sp, 1));
  if (dilations.size() != sp || strides.size() != sp || pads.size() != 2 * sp)
    ctx.fail("dilations, strides and pads have " + std::to_string(dilations.size()) + ", " +
             std::to_string(strides.size()) + " and " + std::to_string(pads.size()) +
             " values, expected " + std::to_string(sp) + ", " + std::to_string(sp) + " and " +
             std::to_string(2 * sp));
  int64_t block_size = 1, blocks = 1;
  for (size_t i = 0; i < sp; ++i) {
    if ((*block)[i] <= 0 || (*image)[i] < 0 || dilations[i] <= 0 || strides[i] <= 0 ||
        pads[i] < 0 || pads[i + sp] < 0)
      ctx.fail("image_shape " + join(*image) + ", block_shape " + join(*block) + ", dilations " +
               join(dilations) + ", strides " + join(strides) + ", pads " + join(pads) +
               ": expected positive block, dilation and stride values and non-negative others");
    const Checked c(node, "block count");
    block_size = c.mul(block_size, (*block)[i]);
    const int64_t span = c.add(c.mul(dilations[i], (*block)[i] - 1), 1);
    const int64_t padded = c.add(c.add((*image)[i], pads[i]), pads[i + sp]);
    if (padded < span)
      ctx.fail("block " + join(*block) + " (dilated) does not fit in the padded image " +
               join(*image));
    blocks = c.mul(blocks, (padded - span) / strides[i] + 1);
  }
  if (in[1] >= 0 && in[1] % block_size != 0)
    ctx.fail("input dim 1 is " + std::to_string(in[1]) +
             ", expected a multiple of the block size " + std::to_string(block_size));
  check_dim(ctx, in[2], blocks, "input dim 2 and the number of blocks");
  std::vector<int64_t> dims = {in[0], in[1] >= 0 ? in[1] / block_size : -1};
  dims.insert(dims.end(), image->begin(), image->end());
  ctx.set_output(0, ctx.input_dtype(0), dims);
}

}  // namespace

void register_detection_schemas(SchemaRegistry& r) {
  // Opset 11 only clarified the box format (flipped corners are allowed); one semantics.
  r.add({.op_type = "NonMaxSuppression",
         .min_opset = 10,
         .min_inputs = 2,
         .max_inputs = 5,
         .value_inputs = {0, 1, 2, 3, 4},
         .infer = infer_nms});
  // Opset 16 added coordinate_transformation_mode (default half_pixel); before it the rois
  // were used as given (output_half_pixel).
  r.add({.op_type = "RoiAlign",
         .min_opset = 10,
         .max_opset = 15,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_roi_align});
  r.add({.op_type = "RoiAlign",
         .min_opset = 16,
         .min_inputs = 3,
         .max_inputs = 3,
         .infer = infer_roi_align});
  // Opset 20 renamed the modes (bilinear -> linear, bicubic -> cubic) and allowed N-D input.
  r.add({.op_type = "GridSample",
         .min_opset = 16,
         .max_opset = 19,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_grid_sample});
  r.add({.op_type = "GridSample",
         .min_opset = 20,
         .min_inputs = 2,
         .max_inputs = 2,
         .infer = infer_grid_sample});
  r.add({.op_type = "AffineGrid",
         .min_opset = 20,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_affine_grid});
  r.add({.op_type = "CenterCropPad",
         .min_opset = 18,
         .min_inputs = 2,
         .max_inputs = 2,
         .value_inputs = {1},
         .infer = infer_center_crop_pad});
  r.add({.op_type = "Col2Im",
         .min_opset = 18,
         .min_inputs = 3,
         .max_inputs = 3,
         .value_inputs = {1, 2},
         .infer = infer_col2im});
}

}  // namespace quilt
