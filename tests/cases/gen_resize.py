"""Cases of the resize family: Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9).

Expected values come from onnxruntime, except where noted: align_corners with a scale whose
product with the input size is not an integer follows the ONNX reference (and the conformance
tests), which onnxruntime does not; nearest with `sizes` (outside tf_crop_and_resize) is
computed in exact arithmetic (nearest_sizes_exact), which onnxruntime 1.32 matches except where
its float32 coordinate misses an exact integer under floor or ceil.
"""
import math
from fractions import Fraction

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from casegen import Cases, rand, randint

cases = Cases("resize")

X4 = rand(1, 2, 5, 7)  # odd sizes so no scale maps pixels one-to-one
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = {
    "up2": [1, 1, 2, 2],
    "up_frac": [1, 1, 1.7, 2.3],
    "down": [1, 1, 0.6, 0.45],
    "mixed": [1, 1, 1.5, 0.7],
}
SIZES = {"sizes_up": [1, 2, 9, 11], "sizes_down": [1, 2, 3, 4], "sizes_one": [1, 2, 1, 1]}
ROI = np.array([0, 0, 0.2, -0.3, 1, 1, 0.9, 1.2], np.float32)  # reaches outside on the last axis
F32 = np.float32


def resize(name, x, scales=None, sizes=None, roi=None, opset=19, runtime=(), expected=None,
           rtol=1e-4, atol=1e-5, **attrs):
    """One Resize node. scales/sizes/roi are constants unless named in `runtime`."""
    consts, inputs = {}, {"x": x}
    names = ["x"]
    values = [("roi", roi), ("scales", scales), ("sizes", sizes)]
    if opset == 10:
        values = [("scales", scales)]
    for key, val in values:
        if val is None:
            names.append("")
            continue
        arr = np.array(val, np.int64 if key == "sizes" else F32)
        (inputs if key in runtime else consts)[key] = arr
        names.append(key)
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], name=name, **attrs)
    cases.model(name, [node], inputs, ["y"], consts, opset=opset, expected=expected, rtol=rtol,
                atol=atol, output_types=out_type(x))


def out_type(x):
    # onnxruntime refuses a model whose output dtype is UNDEFINED, so declare it.
    return {"y": helper.np_dtype_to_tensor_dtype(x.dtype)}


def upsample(name, x, opset, scales, **attrs):
    if opset >= 9:
        node = helper.make_node("Upsample", ["x", "scales"], ["y"], name=name, **attrs)
        consts = {"scales": np.array(scales, F32)}
    else:
        node = helper.make_node("Upsample", ["x"], ["y"], name=name,
                                scales=[float(s) for s in scales], **attrs)
        consts = {}
    cases.model(name, [node], {"x": x}, ["y"], consts, opset=opset, output_types=out_type(x))


def output_of(case):
    """The expected output already written for another case."""
    path = cases.dir / case / "test_data_set_0" / "output_0.pb"
    return onnx.numpy_helper.to_array(onnx.load_tensor(str(path)))


def reference(x, scales=None, sizes=None, roi=None, opset=19, **attrs):
    """The ONNX reference implementation's answer (for behaviour onnxruntime does not follow)."""
    names = ["x", "roi" if roi is not None else "", "scales" if scales is not None else "",
             "sizes" if sizes is not None else ""]
    inits = [onnx.numpy_helper.from_array(np.array(v, t), n)
             for n, v, t in [("roi", roi, F32), ("scales", scales, F32), ("sizes", sizes, np.int64)]
             if v is not None]
    graph = helper.make_graph([helper.make_node("Resize", names, ["y"], **attrs)], "g",
                              [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return {"y": ReferenceEvaluator(model).run(None, {"x": x})[0]}


def scale_case_ok(coord, scales):
    # onnxruntime maps align_corners onto the rounded output size; with scales whose product is
    # not an integer that differs from the spec's reference, so those go through reference().
    return coord != "align_corners" or all(float(s * d).is_integer()
                                           for s, d in zip(scales, X4.shape))


def nearest_sizes_exact(x, sizes, coord, nearest_mode):
    """Nearest Resize with `sizes` in exact arithmetic: the scale is out/in, so every source
    coordinate is a fraction, and one exactly on a pixel or halfway between two rounds as
    nearest_mode says. onnxruntime 1.32 computes it in float32 and agrees except where that
    misses an exact integer under floor or ceil (nearest_half_pixel_floor_sizes_one: 5x7 -> 1x1,
    width coordinate 0.5 * 7 - 0.5 = 3, which float32 makes 2.9999998, floor 2): there the spec's
    answer is this one."""
    def coordinate(o, n_in, n_out):
        o, s = Fraction(o), Fraction(n_out, n_in)
        if coord in ("half_pixel", "half_pixel_symmetric"):  # symmetric: no offset when s = out/in
            return (o + Fraction(1, 2)) / s - Fraction(1, 2)
        if coord == "pytorch_half_pixel":
            return (o + Fraction(1, 2)) / s - Fraction(1, 2) if n_out > 1 else Fraction(0)
        if coord == "asymmetric":
            return o / s
        if coord == "align_corners":
            return o * (n_in - 1) / (n_out - 1) if n_out > 1 else Fraction(0)
        if coord == "tf_half_pixel_for_nn":
            return (o + Fraction(1, 2)) / s
        raise ValueError(coord)

    def index(c, downsample):
        fl = math.floor(c)
        rounded = {"round_prefer_floor": fl if c - fl <= Fraction(1, 2) else fl + 1,
                   "round_prefer_ceil": fl if c - fl < Fraction(1, 2) else fl + 1,
                   "floor": fl, "ceil": math.ceil(c)}[nearest_mode]
        return rounded

    out = x
    for axis, (n_in, n_out) in enumerate(zip(x.shape, sizes)):
        if n_in == n_out:
            continue
        idx = [min(max(index(coordinate(o, n_in, n_out), n_out < n_in), 0), n_in - 1) for o in range(n_out)]
        out = np.take(out, idx, axis=axis)
    return out


# ---- nearest: every coordinate mode x nearest_mode, up/down/fractional and sizes ----
for coord in COORDS:
    for nm in NEAREST_MODES:
        for sname, sc in SCALES.items():
            roi = ROI if coord == "tf_crop_and_resize" else None
            name = f"nearest_{coord}_{nm}_{sname}"
            if not scale_case_ok(coord, sc):
                # Near-integer source coordinates make the reference's float64 rounding fragile;
                # linear and cubic cover these mappings.
                continue
            resize(name, X4, scales=sc, roi=roi, mode="nearest", nearest_mode=nm,
                   coordinate_transformation_mode=coord, extrapolation_value=7.0)
        for zname, sz in SIZES.items():
            roi = ROI if coord == "tf_crop_and_resize" else None
            expected = None if roi is not None else {"y": nearest_sizes_exact(X4, sz, coord, nm)}
            resize(f"nearest_{coord}_{nm}_{zname}", X4, sizes=sz, roi=roi, mode="nearest",
                   nearest_mode=nm, coordinate_transformation_mode=coord, extrapolation_value=-2.0,
                   expected=expected)

# ---- linear and cubic: every coordinate mode, up/down/fractional and sizes ----
for mode in ["linear", "cubic"]:
    for coord in COORDS:
        roi = ROI if coord == "tf_crop_and_resize" else None
        for sname, sc in SCALES.items():
            name = f"{mode}_{coord}_{sname}"
            if scale_case_ok(coord, sc):
                resize(name, X4, scales=sc, roi=roi, mode=mode,
                       coordinate_transformation_mode=coord, extrapolation_value=3.0)
            else:
                resize(name, X4, scales=sc, roi=roi, mode=mode,
                       coordinate_transformation_mode=coord,
                       expected=reference(X4, scales=sc, roi=roi, mode=mode,
                                          coordinate_transformation_mode=coord))
        for zname, sz in SIZES.items():
            resize(f"{mode}_{coord}_{zname}", X4, sizes=sz, roi=roi, mode=mode,
                   coordinate_transformation_mode=coord)

# cubic attributes: cubic_coeff_a and exclude_outside
for coord in ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"]:
    for a in [-0.75, -0.5]:
        for ex in [0, 1]:
            for zname, sz in [("up", [1, 2, 8, 13]), ("down", [1, 2, 3, 4])]:
                resize(f"cubic_{coord}_a{-a}_ex{ex}_{zname}", X4, sizes=sz, mode="cubic",
                       coordinate_transformation_mode=coord, cubic_coeff_a=a, exclude_outside=ex)

# half_pixel_symmetric (opset 19) in every mode, with scales whose output is rounded down
for mode in ["nearest", "linear", "cubic"]:
    for sname, sc in SCALES.items():
        resize(f"{mode}_half_pixel_symmetric_{sname}", X4, scales=sc, mode=mode,
               coordinate_transformation_mode="half_pixel_symmetric")
    for zname, sz in SIZES.items():
        resize(f"{mode}_half_pixel_symmetric_{zname}", X4, sizes=sz, mode=mode,
               coordinate_transformation_mode="half_pixel_symmetric")
for nm in NEAREST_MODES:
    resize(f"nearest_half_pixel_symmetric_{nm}", X4, scales=[1, 1, 0.7, 1.3], mode="nearest",
           nearest_mode=nm, coordinate_transformation_mode="half_pixel_symmetric")

# ---- antialias (opset 18+) ----
for mode in ["linear", "cubic"]:
    for coord in ["half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners"]:
        for ex in [0, 1]:
            for zname, sz in [("down", [1, 2, 3, 3]), ("down_more", [1, 2, 2, 2]),
                              ("up", [1, 2, 8, 9])]:
                resize(f"antialias_{mode}_{coord}_ex{ex}_{zname}", rand(1, 2, 9, 11), sizes=sz,
                       mode=mode, antialias=1, coordinate_transformation_mode=coord,
                       exclude_outside=ex)
    resize(f"antialias_{mode}_scales_down", rand(1, 1, 16, 12), scales=[1, 1, 0.3, 0.45], mode=mode,
           antialias=1)
    resize(f"antialias_{mode}_tf_crop", rand(1, 1, 10, 10), sizes=[1, 1, 4, 3],
           roi=[0, 0, 0.1, -0.2, 1, 1, 0.9, 1.1], mode=mode, antialias=1,
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=5.0)

# ---- axes and keep_aspect_ratio_policy (opset 18+) ----
for policy in ["stretch", "not_larger", "not_smaller"]:
    for mode in ["nearest", "linear"]:
        if mode == "nearest":  # without axes the policy scales N and C too
            resize(f"policy_{policy}_{mode}", X4, sizes=[1, 2, 9, 9], mode=mode,
                   keep_aspect_ratio_policy=policy)
        resize(f"policy_{policy}_{mode}_axes", X4, sizes=[4, 10], axes=[2, 3], mode=mode,
               keep_aspect_ratio_policy=policy)
        # onnxruntime mishandles negative axes; the same node with positive axes gives the answer.
        resize(f"policy_{policy}_{mode}_axes_pos", X4, sizes=[10, 4], axes=[3, 2], mode=mode,
               keep_aspect_ratio_policy=policy)
        resize(f"policy_{policy}_{mode}_axes_neg", X4, sizes=[10, 4], axes=[-1, -2], mode=mode,
               keep_aspect_ratio_policy=policy,
               expected={"y": output_of(f"policy_{policy}_{mode}_axes_pos")})
for mode in ["nearest", "linear", "cubic"]:
    resize(f"axes_scales_{mode}", X4, scales=[1.6, 0.5], axes=[2, 3], mode=mode)
    resize(f"axes_scales_reversed_{mode}", X4, scales=[0.5, 1.6], axes=[3, 2], mode=mode)
resize("axes_tf_crop", X4, sizes=[4, 9], axes=[2, 3], roi=[0.1, -0.1, 0.8, 1.2], mode="linear",
       coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=1.5)
resize("axes_one_nearest", X4, scales=[3.0], axes=[3], mode="nearest")
resize("axes_opset18", X4, sizes=[3, 4], axes=[2, 3], mode="linear", opset=18)

# ---- other ranks and layouts ----
resize("nearest_rank1", rand(6), scales=[1.5], mode="nearest")
resize("nearest_rank3", rand(2, 3, 4), scales=[1, 2, 0.5], mode="nearest")
resize("nearest_rank5", rand(1, 2, 3, 4, 5), scales=[1, 1, 2, 1.5, 0.6], mode="nearest")
resize("nearest_batch_channel", rand(2, 3, 4, 4), scales=[2, 1.5, 1, 1], mode="nearest")
resize("linear_rank2", rand(5, 6), scales=[1.8, 0.7], mode="linear")
resize("linear_rank2_align", rand(5, 6), sizes=[7, 3], mode="linear",
       coordinate_transformation_mode="align_corners")
resize("linear_rank5", rand(1, 2, 3, 4, 5), scales=[1, 1, 2, 1.5, 0.6], mode="linear")
resize("linear_nhwc", rand(1, 5, 6, 3), scales=[1, 1.6, 0.5, 1], mode="linear")
resize("cubic_rank2", rand(5, 6), scales=[1.8, 0.7], mode="cubic")
resize("linear_identity", X4, scales=[1, 1, 1, 1], mode="linear")
resize("nearest_to_one", X4, sizes=[1, 2, 1, 1], mode="nearest")
# With `sizes` the scale is out/in exactly, so a nearest coordinate can land exactly on a pixel
# or halfway between two, and rounds as nearest_mode says. Output 1 of 2 from 14, asymmetric:
# 1 * 14/2 = 7 exactly, floor 7. onnxruntime 1.32 (like 1.23) computes 6.9999995 in float32 and
# takes 6, against the spec; the expected indices here are exact integer arithmetic. (Ties such
# as 7/2 under round_prefer_ceil, which onnxruntime 1.32 rounds exactly, are checked against it
# in nearest_asymmetric_round_prefer_ceil_sizes_down.)
x_tie = rand(1, 2, 3, 14)
resize("nearest_asymmetric_floor_sizes_exact", x_tie, sizes=[1, 2, 3, 2], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor",
       expected={"y": x_tie[..., [0, 7]]})
resize("linear_from_one", rand(1, 1, 1, 1), sizes=[1, 1, 3, 2], mode="linear")
resize("cubic_from_two", rand(1, 1, 2, 2), sizes=[1, 1, 5, 3], mode="cubic")
resize("linear_large", rand(2, 3, 40, 50), scales=[1, 1, 1.5, 2], mode="linear")
resize("cubic_large", rand(2, 3, 40, 50), scales=[1, 1, 0.7, 1.3], mode="cubic")
resize("nearest_large", rand(2, 3, 40, 50), scales=[1, 1, 2, 2], mode="nearest")
resize("nearest_empty", rand(0, 2, 3, 3), scales=[1, 1, 2, 2], mode="nearest")

# ---- seed-model patterns ----
resize("yolo_nearest_asym_x2", rand(1, 8, 10, 10), scales=[1, 1, 2, 2], mode="nearest",
       coordinate_transformation_mode="asymmetric", nearest_mode="floor", opset=13)
resize("esrgan_nearest_x2", rand(1, 4, 9, 7), roi=[], scales=[1, 1, 2, 2], mode="nearest", opset=11)
resize("deeplab_bilinear_sizes", rand(1, 6, 9, 9), sizes=[1, 6, 65, 65], mode="linear",
       coordinate_transformation_mode="pytorch_half_pixel", opset=11, roi=[], scales=[])
resize("fcn_bilinear_half_pixel", rand(1, 6, 7, 9), sizes=[1, 6, 56, 72], mode="linear",
       coordinate_transformation_mode="half_pixel", opset=13)

# ---- float16 (computed in float32, rounded once) ----
X4H = X4.astype(np.float16)
for mode in ["nearest", "linear", "cubic"]:
    resize(f"float16_{mode}_up", X4H, scales=[1, 1, 1.7, 2], mode=mode, rtol=2e-3, atol=2e-3)
    resize(f"float16_{mode}_down", X4H, sizes=[1, 2, 3, 4], mode=mode, rtol=2e-3, atol=2e-3,
           coordinate_transformation_mode="align_corners")
    resize(f"float16_{mode}_tf_crop", X4H, sizes=[1, 2, 4, 6], roi=ROI, mode=mode,
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.5,
           rtol=2e-3, atol=2e-3)
resize("float16_linear_antialias", rand(1, 1, 9, 11).astype(np.float16), sizes=[1, 1, 4, 3],
       mode="linear", antialias=1, rtol=2e-3, atol=2e-3)

# ---- integer dtypes (nearest) ----
for dt, x in [("int8", randint(1, 2, 5, 7, low=-100, high=100, dtype=np.int8)),
              ("uint8", randint(1, 2, 5, 7, low=0, high=255, dtype=np.uint8)),
              ("int32", randint(1, 2, 5, 7, low=-1000, high=1000, dtype=np.int32))]:
    resize(f"nearest_{dt}_up", x, scales=[1, 1, 1.7, 2], mode="nearest")
    resize(f"nearest_{dt}_down", x, sizes=[1, 2, 3, 4], mode="nearest", nearest_mode="ceil",
           coordinate_transformation_mode="asymmetric")
    resize(f"nearest_{dt}_tf_crop", x, sizes=[1, 2, 4, 6], roi=ROI, mode="nearest",
           coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=9.0)
x64 = randint(1, 2, 5, 7, low=-(2 ** 40), high=2 ** 40, dtype=np.int64)
for name, kw in [("up", dict(scales=[1, 1, 1.7, 2])), ("down", dict(sizes=[1, 2, 3, 4])),
                 ("tf_crop", dict(sizes=[1, 2, 4, 6], roi=ROI, extrapolation_value=-3.0,
                                  coordinate_transformation_mode="tf_crop_and_resize"))]:
    # onnxruntime has no int64 Resize. Nearest is a pure gather, so resizing the element indices
    # (as float32, exact below 2^24) with it says which element lands where; -1 marks the
    # extrapolated positions.
    idx = np.arange(x64.size, dtype=F32).reshape(x64.shape)
    kw_idx = dict(kw, extrapolation_value=-1.0) if "roi" in kw else kw
    resize(f"int64_index_probe_{name}", idx, mode="nearest", **kw_idx)
    where = output_of(f"int64_index_probe_{name}").astype(np.int64)
    want = np.where(where < 0, np.int64(kw.get("extrapolation_value", 0)), x64.reshape(-1)[where])
    resize(f"nearest_int64_{name}", x64, mode="nearest", expected={"y": want}, **kw)

# ---- inputs known only at run time, optional-input spellings per opset ----
resize("runtime_scales", X4, scales=[1, 1, 1.7, 0.6], mode="linear", runtime=("scales",))
resize("runtime_sizes", X4, sizes=[1, 2, 4, 9], mode="cubic", runtime=("sizes",))
resize("runtime_roi", X4, sizes=[1, 2, 4, 9], roi=ROI, mode="linear", runtime=("roi",),
       coordinate_transformation_mode="tf_crop_and_resize")
resize("opset11_empty_scales_sizes", X4, roi=[], scales=[], sizes=[1, 2, 8, 4], mode="linear",
       opset=11)
resize("opset11_scales", X4, roi=[], scales=[1, 1, 1.4, 2], mode="nearest", opset=11,
       coordinate_transformation_mode="align_corners", nearest_mode="ceil")
for nm in NEAREST_MODES:
    resize(f"opset11_tf_half_pixel_for_nn_{nm}", X4, roi=[], scales=[1, 1, 1.7, 0.6],
           mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn", nearest_mode=nm,
           opset=11)
resize("opset13_sizes_only", X4, sizes=[1, 2, 6, 6], mode="linear", opset=13)
resize("opset13_cubic_scales", X4, scales=[1, 1, 1.3, 0.8], mode="cubic", opset=13,
       exclude_outside=1)
for sname, sc in SCALES.items():
    for mode in ["nearest", "linear"]:
        resize(f"opset10_{mode}_{sname}", X4, scales=sc, mode=mode, opset=10)

# ---- Upsample (deprecated): opset 7-8 scales attribute, opset 9 scales input ----
for mode in ["nearest", "linear"]:
    for sname, sc in [("x2", [1, 1, 2, 2]), ("frac", [1, 1, 1.5, 2.7]), ("one", [1, 1, 1, 3])]:
        upsample(f"upsample7_{mode}_{sname}", X4, 7, sc, mode=mode)
        upsample(f"upsample9_{mode}_{sname}", X4, 9, sc, mode=mode)
upsample("upsample8_nearest_int32", randint(1, 1, 3, 4, dtype=np.int32), 8, [1, 1, 2, 3])
upsample("upsample9_nearest_uint8", randint(1, 1, 3, 4, low=0, high=255, dtype=np.uint8), 9,
         [1, 1, 3, 2])
upsample("upsample9_linear_rank2", rand(3, 4), 9, [2, 1.5], mode="linear")


# ---- dims unknown at session creation: the output shape is inferred at run time ----
def make_dynamic(name):
    path = cases.dir / name / "model.onnx"
    m = onnx.load(path)
    for d in m.graph.input[0].type.tensor_type.shape.dim:
        d.dim_param = "d"
    for d in m.graph.output[0].type.tensor_type.shape.dim:
        d.dim_param = "e"
    onnx.save(m, path)


resize("dynamic_scales", X4, scales=[1, 1, 2, 0.5], mode="linear")
make_dynamic("dynamic_scales")
resize("dynamic_policy", X4, sizes=[1, 2, 9, 9], mode="nearest",
       keep_aspect_ratio_policy="not_larger")
make_dynamic("dynamic_policy")
