"""Cases of the detection op family: NonMaxSuppression, RoiAlign, GridSample, AffineGrid,
CenterCropPad, Col2Im. Expected values come from onnxruntime unless a case says otherwise."""
import numpy as np
from onnx.reference import ReferenceEvaluator
from onnx import helper

from casegen import Cases, rand, randint

cases = Cases("detection")


def reference(op_type, inputs: dict, opset, **attrs):
    """Expected output from onnx's reference implementation, for what onnxruntime lacks."""
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return {"y": ReferenceEvaluator(model).run(None, inputs)[0]}


# ---- NonMaxSuppression ----

def random_boxes(batches, n, spread=1.0):
    """Corner boxes [y1, x1, y2, x2] with random corner order, overlapping a lot."""
    a = rand(batches, n, 2, low=0, high=spread)
    b = a + rand(batches, n, 2, low=0.05, high=0.6)
    boxes = np.concatenate([a, b], axis=2)
    flip = rand(batches, n, 1) > 0
    return np.where(flip, boxes[:, :, [2, 3, 0, 1]], boxes).astype(np.float32)


def nms(name, boxes, scores, max_out=None, iou=None, score=None, opset=11, constant=True, **attrs):
    extra = {}
    if max_out is not None:
        extra["max_output_boxes_per_class"] = np.array([max_out], dtype=np.int64)
    if iou is not None:
        extra["iou_threshold"] = np.array([iou], dtype=np.float32)
    if score is not None:
        extra["score_threshold"] = np.array([score], dtype=np.float32)
    if constant:
        cases.node(name, "NonMaxSuppression", {"boxes": boxes, "scores": scores},
                   initializers=extra, opset=opset, **attrs)
    else:
        cases.node(name, "NonMaxSuppression", {"boxes": boxes, "scores": scores, **extra},
                   opset=opset, **attrs)


nms("nms_basic", random_boxes(1, 12), rand(1, 1, 12, low=0, high=1), 5, 0.5)
nms("nms_runtime_thresholds", random_boxes(1, 12), rand(1, 1, 12, low=0, high=1), 4, 0.3, 0.2,
    constant=False)
nms("nms_multi", random_boxes(3, 20), rand(3, 4, 20, low=0, high=1), 6, 0.4, 0.3)
nms("nms_score_only", random_boxes(2, 9), rand(2, 2, 9, low=0, high=1), 100, 1.0, 0.5)
nms("nms_no_threshold", random_boxes(1, 10), rand(1, 2, 10, low=0, high=1), 3)
nms("nms_no_max", random_boxes(1, 10), rand(1, 1, 10, low=0, high=1))  # selects nothing
nms("nms_zero_max", random_boxes(1, 10), rand(1, 1, 10, low=0, high=1), 0, 0.5)
nms("nms_opset10", random_boxes(2, 15), rand(2, 3, 15, low=0, high=1), 4, 0.5, 0.1, opset=10)
centers = np.concatenate([rand(2, 16, 2, low=0, high=2), rand(2, 16, 2, low=0.2, high=1)], axis=2)
nms("nms_center_point", centers.astype(np.float32), rand(2, 2, 16, low=0, high=1), 5, 0.3,
    center_point_box=1)
# Equal scores: the lower box index wins.
nms("nms_ties", random_boxes(1, 8), np.full((1, 2, 8), 0.5, dtype=np.float32), 8, 0.2)
nms("nms_all_below", random_boxes(1, 6), rand(1, 1, 6, low=0, high=0.4), 5, 0.5, 0.9)
cases.node("nms_scalar_inputs", "NonMaxSuppression",
           {"boxes": random_boxes(1, 10), "scores": rand(1, 2, 10, low=0, high=1)},
           initializers={"max_output_boxes_per_class": np.array(3, dtype=np.int64),
                         "iou_threshold": np.array(0.4, dtype=np.float32),
                         "score_threshold": np.array(0.1, dtype=np.float32)}, opset=11)
nms("nms_empty_boxes", np.zeros((1, 0, 4), np.float32), np.zeros((1, 1, 0), np.float32), 3, 0.5)

# ---- RoiAlign ----

def rois_for(n, size):
    a = rand(n, 2, low=0, high=size * 0.6)
    b = a + rand(n, 2, low=0.5, high=size * 0.5)
    return np.concatenate([a, b], axis=1).astype(np.float32)


x = rand(2, 3, 11, 9)
rois = rois_for(5, 9)
bi = np.array([0, 1, 1, 0, 1], dtype=np.int64)
cases.node("roialign_default", "RoiAlign", {"X": x, "rois": rois, "batch_indices": bi}, opset=16)
cases.node("roialign_avg", "RoiAlign", {"X": x, "rois": rois, "batch_indices": bi}, opset=16,
           output_height=4, output_width=3, sampling_ratio=2, spatial_scale=1.0)
cases.node("roialign_adaptive", "RoiAlign", {"X": x, "rois": rois * 2, "batch_indices": bi},
           opset=16, output_height=3, output_width=5, spatial_scale=0.5)
cases.node("roialign_output_half_pixel", "RoiAlign", {"X": x, "rois": rois, "batch_indices": bi},
           opset=16, output_height=2, output_width=2,
           coordinate_transformation_mode="output_half_pixel")
cases.node("roialign_max", "RoiAlign", {"X": x, "rois": rois, "batch_indices": bi}, opset=16,
           output_height=3, output_width=3, sampling_ratio=2, mode="max")
cases.node("roialign_opset10", "RoiAlign", {"X": x, "rois": rois, "batch_indices": bi}, opset=10,
           output_height=3, output_width=2)
# Rois reaching outside the image (samples beyond -1 or the far edge read nothing).
out_rois = np.array([[-3, -2, 4, 5], [6, 8, 14, 13], [-1.5, 2, 12, 9.5]], dtype=np.float32)
cases.node("roialign_outside", "RoiAlign",
           {"X": x, "rois": out_rois, "batch_indices": np.array([1, 0, 1], dtype=np.int64)},
           opset=16, output_height=4, output_width=4, sampling_ratio=3)
# Rois far larger than the image: an adaptive grid of ~500 x 500 samples a bin, almost all outside
# it (the kernel plans only the samples inside, found by bisection); a half_pixel roi reversed
# (no samples, 0) and one with a fixed grid reaching past both edges.
far_rois = np.array([[-1000, -900, 1000, 1100], [3, 4, 2, 1], [-400, 2, 6, 500]], dtype=np.float32)
for mode in ["avg", "max"]:
    cases.node("roialign_far_" + mode, "RoiAlign",
               {"X": x, "rois": far_rois, "batch_indices": np.array([0, 1, 1], dtype=np.int64)},
               opset=16, output_height=2, output_width=3, mode=mode)
cases.node("roialign_far_fixed_grid", "RoiAlign",
           {"X": x, "rois": far_rois, "batch_indices": np.array([1, 0, 1], dtype=np.int64)},
           opset=10, output_height=3, output_width=2, sampling_ratio=40)
cases.node("roialign_float64", "RoiAlign",
           {"X": x.astype(np.float64), "rois": rois.astype(np.float64), "batch_indices": bi},
           opset=16, output_height=2, output_width=3)

# ---- GridSample ----

x4 = rand(2, 3, 5, 7)
grid4 = rand(2, 4, 6, 2, low=-1.3, high=1.3)
for mode16, mode20 in [("bilinear", "linear"), ("nearest", "nearest"), ("bicubic", "cubic")]:
    for pad in ["zeros", "border", "reflection"]:
        for align in [0, 1]:
            cases.node(f"gridsample_{mode20}_{pad}_align{align}", "GridSample",
                       {"X": x4, "grid": grid4}, opset=20, mode=mode20, padding_mode=pad,
                       align_corners=align)
    cases.node(f"gridsample_opset16_{mode16}", "GridSample", {"X": x4, "grid": grid4}, opset=16,
               mode=mode16, padding_mode="reflection")
cases.node("gridsample_default", "GridSample", {"X": x4, "grid": grid4}, opset=20)
far = rand(1, 3, 5, 2, low=-4, high=4)
for pad in ["zeros", "border", "reflection"]:
    cases.node(f"gridsample_far_{pad}", "GridSample", {"X": rand(1, 2, 4, 3), "grid": far},
               opset=20, padding_mode=pad)
cases.node("gridsample_float64", "GridSample",
           {"X": x4.astype(np.float64), "grid": grid4.astype(np.float64)}, opset=20,
           mode="cubic", padding_mode="border")
# 3-D (volumetric): onnxruntime handles linear and nearest.
x5 = rand(2, 2, 4, 3, 5)
grid5 = rand(2, 3, 2, 4, 3, low=-1.2, high=1.2)
for mode in ["linear", "nearest"]:
    for pad in ["zeros", "border", "reflection"]:
        for align in [0, 1]:
            cases.node(f"gridsample_3d_{mode}_{pad}_align{align}", "GridSample",
                       {"X": x5, "grid": grid5}, opset=20, mode=mode, padding_mode=pad,
                       align_corners=align)
# Cubic in 3-D and 1-D spatial input: onnxruntime lacks them; the ONNX reference.
for pad in ["zeros", "reflection"]:
    cases.node(f"gridsample_3d_cubic_{pad}", "GridSample", {"X": x5, "grid": grid5}, opset=20,
               mode="cubic", padding_mode=pad,
               expected=reference("GridSample", {"X": x5, "grid": grid5}, 20, mode="cubic",
                                  padding_mode=pad))
x3, grid3 = rand(2, 3, 6), rand(2, 5, 1, low=-1.2, high=1.2)
cases.node("gridsample_1d_linear", "GridSample", {"X": x3, "grid": grid3}, opset=20,
           padding_mode="border",
           expected=reference("GridSample", {"X": x3, "grid": grid3}, 20, padding_mode="border"))
# Integer data in nearest mode is an exact gather: the ONNX reference.
xi = randint(1, 2, 4, 5, low=-50, high=50, dtype=np.int32)
gi = rand(1, 3, 3, 2, low=-1.1, high=1.1)
cases.node("gridsample_int32_nearest", "GridSample", {"X": xi, "grid": gi}, opset=20,
           mode="nearest", padding_mode="zeros",
           expected=reference("GridSample", {"X": xi, "grid": gi}, 20, mode="nearest"))

# ---- AffineGrid ----

for align in [0, 1]:
    theta2 = rand(3, 2, 3)
    cases.node(f"affine_grid_2d_align{align}", "AffineGrid", {"theta": theta2},
               initializers={"size": np.array([3, 2, 5, 7], dtype=np.int64)}, opset=20,
               align_corners=align)
    theta3 = rand(2, 3, 4)
    cases.node(f"affine_grid_3d_align{align}", "AffineGrid", {"theta": theta3},
               initializers={"size": np.array([2, 1, 3, 4, 6], dtype=np.int64)}, opset=20,
               align_corners=align)
cases.node("affine_grid_runtime_size", "AffineGrid",
           {"theta": rand(1, 2, 3), "size": np.array([1, 1, 4, 4], dtype=np.int64)}, opset=20)
cases.node("affine_grid_size1", "AffineGrid", {"theta": rand(2, 2, 3)},
           initializers={"size": np.array([2, 3, 1, 5], dtype=np.int64)}, opset=20)

# ---- CenterCropPad ----

def ccp(name, x, shape, **attrs):
    cases.node(name, "CenterCropPad", {"x": x},
               initializers={"shape": np.array(shape, dtype=np.int64)}, opset=18, **attrs)


ccp("ccp_crop_odd", rand(9, 8, 3), [4, 5, 3])
ccp("ccp_pad_odd", rand(4, 5, 2), [7, 8, 2])
ccp("ccp_crop_and_pad", rand(10, 3, 4), [5, 8, 4])
ccp("ccp_axes", rand(3, 11, 7), [6, 10], axes=[1, 2])
ccp("ccp_negative_axes", rand(9, 6, 3), [4, 9], axes=[-3, -2])
ccp("ccp_axes_unordered", rand(5, 6, 7), [8, 3], axes=[2, 0])
ccp("ccp_int64", randint(6, 7, high=100), [3, 10])
ccp("ccp_uint8", randint(4, 4, 4, high=255, dtype=np.uint8), [6, 2, 5])
ccp("ccp_bool", rand(5, 6) > 0, [3, 9])
ccp("ccp_to_zero", rand(4, 5), [0, 5])
# int32 shape: onnxruntime's function expansion of CenterCropPad mixes int32 and int64.
ccp_in = {"x": rand(6, 9), "shape": np.array([3, 12], dtype=np.int32)}
cases.node("ccp_runtime_shape_int32", "CenterCropPad", ccp_in, opset=18,
           expected=reference("CenterCropPad", ccp_in, 18))
cases.node("ccp_runtime_shape", "CenterCropPad",
           {"x": rand(6, 9), "shape": np.array([3, 12], dtype=np.int64)}, opset=18)

# ---- Col2Im ----

def col2im(name, x, image, block, **attrs):
    cases.node(name, "Col2Im", {"input": x},
               initializers={"image_shape": np.array(image, dtype=np.int64),
                             "block_shape": np.array(block, dtype=np.int64)}, opset=18, **attrs)


col2im("col2im_basic", rand(2, 3 * 4, 12), [4, 5], [2, 2])
col2im("col2im_strides", rand(1, 2 * 6, 6), [5, 7], [2, 3], strides=[2, 2])
col2im("col2im_dilations", rand(1, 2 * 4, 6), [5, 5], [2, 2], dilations=[2, 3])
col2im("col2im_pads", rand(2, 1 * 9, 24), [4, 6], [3, 3], pads=[1, 0, 1, 2])
col2im("col2im_all", rand(1, 3 * 6, 9), [6, 6], [2, 3], strides=[2, 1], dilations=[1, 2],
       pads=[0, 1, 1, 0])
col2im("col2im_3d", rand(1, 2 * 8, 12), [3, 3, 4], [2, 2, 2])
# onnxruntime only has float32 Col2Im: the ONNX reference for float64 and int32 (exact sums).
for name, xc in [("col2im_float64", rand(2, 4, 16, dtype=np.float64)),
                 ("col2im_int32", randint(2, 4, 16, low=-20, high=20, dtype=np.int32))]:
    shapes = {"image_shape": np.array([5, 5], np.int64), "block_shape": np.array([2, 2], np.int64)}
    cases.node(name, "Col2Im", {"input": xc}, initializers=shapes, opset=18,
               expected=reference("Col2Im", {"input": xc, **shapes}, 18))

# ---- Larger inputs, split across threads ----
cases.node("gridsample_large", "GridSample",
           {"X": rand(2, 8, 32, 32), "grid": rand(2, 40, 40, 2, low=-1.1, high=1.1)}, opset=20,
           mode="cubic", padding_mode="reflection")
cases.node("roialign_large", "RoiAlign",
           {"X": rand(2, 16, 24, 24), "rois": rois_for(60, 24),
            "batch_indices": randint(60, high=2)}, opset=16, output_height=7, output_width=7)
col2im("col2im_large", rand(2, 16 * 9, 30 * 30), [32, 32], [3, 3])
nms("nms_large", random_boxes(2, 300, spread=4), rand(2, 5, 300, low=0, high=1), 20, 0.5, 0.05)

# ---- float16: computed in float32, rounded once ----
x16, g16 = rand(1, 2, 5, 6, dtype=np.float16), rand(1, 3, 4, 2, low=-1.1, high=1.1, dtype=np.float16)
cases.node("gridsample_float16", "GridSample", {"X": x16, "grid": g16}, opset=20,
           padding_mode="border", rtol=1e-2, atol=1e-2)
cases.node("roialign_float16", "RoiAlign",
           {"X": rand(1, 2, 8, 8, dtype=np.float16), "rois": rois_for(3, 8).astype(np.float16),
            "batch_indices": np.zeros(3, np.int64)}, opset=16, output_height=2, output_width=2,
           rtol=1e-2, atol=1e-2)
cases.node("affine_grid_float16", "AffineGrid", {"theta": rand(2, 2, 3, dtype=np.float16)},
           initializers={"size": np.array([2, 1, 3, 4], dtype=np.int64)}, opset=20, rtol=1e-2,
           atol=1e-2)
ccp("ccp_float16", rand(5, 4, dtype=np.float16), [3, 7])
