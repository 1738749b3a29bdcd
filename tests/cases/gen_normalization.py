"""Cases for the normalization family: BatchNormalization, InstanceNormalization,
LayerNormalization, Softmax, LogSoftmax (expected values from ORT)."""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from casegen import DEFAULT_OPSET, Cases, rand

cases = Cases("normalization")


def node(name, op_type, inputs, n_outputs=1, initializers=None, opset=DEFAULT_OPSET, rtol=1e-4,
         atol=1e-5, expected=None, onnx_reference=False, **attrs):
    """Like Cases.node, but declares the output dtypes (from onnx shape inference): onnxruntime
    refuses models whose outputs have element type UNDEFINED, which Cases.node writes.
    onnx_reference: take expected values from onnx's reference evaluator (where ORT lacks a
    valid case)."""
    initializers = initializers or {}
    outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
    n = helper.make_node(op_type, list(inputs) + list(initializers), outs, name=name, **attrs)
    g = helper.make_graph(
        [n], name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()], [],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(m).graph.value_info
    types = {vi.name: vi.type.tensor_type.elem_type for vi in inferred}
    if onnx_reference:
        from onnx.reference import ReferenceEvaluator
        # (onnx infers no types for BatchNormalization's training outputs: x's type)
        m.graph.output.extend(helper.make_tensor_value_info(o, types.get(o, 1), None)
                              for o in outs)
        expected = dict(zip(outs, ReferenceEvaluator(m).run(None, inputs)))
    cases.model(name, [n], inputs, outs, initializers, opset, rtol, atol, expected,
                output_types=types)


def node_ort_or_reference(name, *args, **kwargs):
    """onnxruntime's answer where it has a kernel (it lacks many float16 ones), else onnx's
    reference evaluator's."""
    try:
        node(name, *args, **kwargs)
    except Exception:  # noqa: BLE001 - any ORT refusal
        cases.names.discard(name)
        node(name, *args, onnx_reference=True, **kwargs)


# ---- BatchNormalization (inference) ----
def bn_params(shape):
    return {"scale": rand(*shape), "B": rand(*shape), "mean": rand(*shape),
            "var": rand(*shape, low=0.5, high=2.0)}


for opset in (7, 9, 14, 15):
    for shape in ((2, 3, 4, 5), (2, 3), (1, 4, 7), (2, 3, 2, 3, 4)):
        tag = "x".join(map(str, shape))
        node(f"bn_o{opset}_{tag}", "BatchNormalization", {"x": rand(*shape)},
             initializers=bn_params((shape[1],)), opset=opset)
    node(f"bn_o{opset}_eps", "BatchNormalization", {"x": rand(2, 3, 4)},
         initializers=bn_params((3,)), opset=opset, epsilon=0.3)
    node(f"bn_o{opset}_runtime_params", "BatchNormalization", {"x": rand(2, 5, 3), **bn_params((5,))},
         opset=opset)
node("bn_o14_training_off", "BatchNormalization", {"x": rand(2, 3, 4)},
     initializers=bn_params((3,)), opset=14, training_mode=0)
# training_mode: the batch's statistics normalize; running_mean/var follow momentum (onnx's
# reference; onnxruntime's CPU provider has no training mode)
for shape, momentum in (((2, 3, 4, 5), 0.9), ((3, 4), 0.7), ((2, 3, 9), 0.0)):
    tag = "x".join(map(str, shape))
    node(f"bn_o15_training_{tag}", "BatchNormalization", {"x": rand(*shape, low=-3, high=5)},
         n_outputs=3, initializers=bn_params((shape[1],)), opset=15, training_mode=1,
         momentum=momentum, onnx_reference=True)
node("bn_o14_training_y_only", "BatchNormalization", {"x": rand(4, 2, 3)},
     initializers=bn_params((2,)), opset=14, training_mode=1, epsilon=0.01, onnx_reference=True)
node("bn_o7_spatial0", "BatchNormalization", {"x": rand(2, 3, 4, 5)},
     initializers=bn_params((3, 4, 5)), opset=7, spatial=0)
node("bn_big", "BatchNormalization", {"x": rand(4, 16, 32, 32)}, initializers=bn_params((16,)),
     opset=15)

# ---- InstanceNormalization ----
for shape in ((2, 3, 4, 5), (1, 2, 7), (2, 3, 2, 3, 4), (3, 1, 9)):
    c = shape[1]
    node("in_" + "x".join(map(str, shape)), "InstanceNormalization", {"x": rand(*shape)},
         initializers={"scale": rand(c), "B": rand(c)}, opset=6)
node("in_eps", "InstanceNormalization", {"x": rand(2, 3, 6)},
     initializers={"scale": rand(3), "B": rand(3)}, epsilon=0.1)
node("in_runtime_params", "InstanceNormalization", {"x": rand(2, 3, 6), "scale": rand(3), "B": rand(3)})
node("in_offset", "InstanceNormalization", {"x": rand(2, 3, 50, low=1000, high=1001)},
     initializers={"scale": rand(3), "B": rand(3)}, atol=1e-3, rtol=1e-3)
node("in_big", "InstanceNormalization", {"x": rand(2, 8, 64, 64)},
     initializers={"scale": rand(8), "B": rand(8)})

# ---- LayerNormalization ----
x = rand(2, 3, 4, 5)
for axis in (-1, -2, 0, 1, 2, 3):
    norm = x.shape[axis:]
    node(f"ln_axis{axis}".replace("-", "m"), "LayerNormalization", {"x": x},
         initializers={"scale": rand(*norm), "B": rand(*norm)}, axis=axis)
    node(f"ln_axis{axis}_stats".replace("-", "m"), "LayerNormalization", {"x": x}, n_outputs=3,
         initializers={"scale": rand(*norm), "B": rand(*norm)}, axis=axis)
node("ln_no_bias", "LayerNormalization", {"x": rand(3, 8)}, initializers={"scale": rand(8)})
node("ln_no_bias_stats", "LayerNormalization", {"x": rand(3, 8)}, n_outputs=3,
     initializers={"scale": rand(8)})
node("ln_eps", "LayerNormalization", {"x": rand(3, 8)}, initializers={"scale": rand(8), "B": rand(8)},
     epsilon=0.5)
node("ln_runtime_params", "LayerNormalization", {"x": rand(3, 8), "scale": rand(8), "B": rand(8)})
# ORT only broadcasts Scale when it matches X's rank; the spec allows any broadcast to it.
node("ln_bcast_scale", "LayerNormalization", {"x": rand(2, 4, 5)},
     initializers={"scale": rand(1, 5), "B": rand(5)}, axis=1, onnx_reference=True)
node("ln_1d", "LayerNormalization", {"x": rand(16)}, initializers={"scale": rand(16), "B": rand(16)})
# ORT computes the variance as E[x^2] - E[x]^2 in float32, which cancels catastrophically for
# inputs far from zero; the reference (and Quilt) subtract the mean first.
node("ln_offset", "LayerNormalization", {"x": rand(4, 64, low=500, high=501)},
     initializers={"scale": rand(64), "B": rand(64)}, atol=1e-3, rtol=1e-3, onnx_reference=True)
node("ln_big", "LayerNormalization", {"x": rand(128, 768)},
     initializers={"scale": rand(768), "B": rand(768)})

# ---- Softmax / LogSoftmax ----
for op in ("Softmax", "LogSoftmax"):
    short = "sm" if op == "Softmax" else "lsm"
    x = rand(2, 3, 4, low=-3, high=3)
    for opset in (11, 13):
        node(f"{short}_o{opset}_default", op, {"x": x}, opset=opset)
        for axis in (0, 1, 2, -1, -2):
            node(f"{short}_o{opset}_axis{axis}".replace("-", "m"), op, {"x": x}, opset=opset,
                 axis=axis)
        node(f"{short}_o{opset}_1d", op, {"x": rand(10)}, opset=opset, axis=0)
        node(f"{short}_o{opset}_big_last", op, {"x": rand(64, 1000, low=-5, high=5)}, opset=opset,
             axis=-1)
        node(f"{short}_o{opset}_big_middle", op, {"x": rand(4, 100, 300, low=-5, high=5)},
             opset=opset, axis=1)
    node(f"{short}_o1", op, {"x": x}, opset=1)
    node(f"{short}_large_values", op, {"x": rand(3, 7, low=1000, high=1010)}, axis=-1)
    node(f"{short}_large_values_middle", op, {"x": rand(3, 7, 5, low=-1010, high=-1000)}, axis=1)
    node(f"{short}_inf", op, {"x": np.array([[0, -np.inf, 1, 2]], np.float32)}, axis=-1)
    masked = rand(2, 5, 11, low=-3, high=3)
    masked[:, 1:3, ::3] = -np.inf  # attention-style masks, along the axis and across it
    node(f"{short}_masked_last", op, {"x": masked}, axis=-1)
    node(f"{short}_masked_middle", op, {"x": masked}, axis=1)
    node(f"{short}_wide_range", op, {"x": rand(3, 37, low=-120, high=20)}, axis=-1)

# ---- GroupNormalization (opset 18: scale/bias per group; 21: per channel) ----
for opset in (18, 21):
    for shape, groups in (((2, 6, 4, 5), 3), ((1, 4, 7), 2), ((2, 4, 3), 4), ((2, 4, 3), 1),
                          ((2, 6, 2, 3, 2), 2)):
        params = shape[1] if opset >= 21 else groups
        node(f"gn_o{opset}_" + "x".join(map(str, shape)) + f"_g{groups}", "GroupNormalization",
             {"x": rand(*shape)}, initializers={"scale": rand(params), "bias": rand(params)},
             num_groups=groups, opset=opset)
    params = 8 if opset >= 21 else 4
    node(f"gn_o{opset}_eps_runtime", "GroupNormalization",
         {"x": rand(2, 8, 5), "scale": rand(params), "bias": rand(params)}, num_groups=4,
         epsilon=0.2, opset=opset)
    node(f"gn_o{opset}_big", "GroupNormalization", {"x": rand(2, 64, 32, 32)},
         initializers={"scale": rand(64 if opset >= 21 else 32), "bias": rand(64 if opset >= 21 else 32)},
         num_groups=32, opset=opset)

# ---- LpNormalization ----
x = rand(3, 4, 5)
for p in (1, 2):
    for axis in (0, 1, 2, -1):
        node(f"lp_p{p}_axis{axis}".replace("-", "m"), "LpNormalization", {"x": x}, p=p, axis=axis)
node("lp_default", "LpNormalization", {"x": rand(4, 6)})
zero_rows = rand(3, 5)
zero_rows[1] = 0
node("lp_zero_norm", "LpNormalization", {"x": zero_rows}, axis=1)

# ---- MeanVarianceNormalization ----
for opset in (9, 13):
    node(f"mvn_o{opset}_default", "MeanVarianceNormalization", {"x": rand(2, 3, 4, 5)}, opset=opset)
node("mvn_axes_hw", "MeanVarianceNormalization", {"x": rand(2, 3, 4, 5)}, axes=[2, 3])
node("mvn_axes_all", "MeanVarianceNormalization", {"x": rand(2, 3, 4, 5)}, axes=[0, 1, 2, 3])
node("mvn_axes_last", "MeanVarianceNormalization", {"x": rand(3, 7)}, axes=[-1])
node("mvn_axes_first", "MeanVarianceNormalization", {"x": rand(6, 4, 2)}, axes=[0])

# Scale and B broadcast against X as in the spec's reference: with leading 1s, and varying over
# the leading (not normalized) dims too. ORT accepts only some of these.
node("ln_scale_leading_ones", "LayerNormalization", {"x": rand(2, 4, 5)},
     initializers={"scale": rand(1, 1, 5), "B": rand(1, 1, 5)}, axis=-1)
node("ln_scale_per_batch", "LayerNormalization", {"x": rand(2, 4, 5)},
     initializers={"scale": rand(2, 1, 5), "B": rand(5)}, axis=2, onnx_reference=True)
node("ln_scale_full", "LayerNormalization", {"x": rand(2, 4, 5)}, n_outputs=3,
     initializers={"scale": rand(2, 4, 5), "B": rand(2, 4, 5)}, axis=1, onnx_reference=True)

# ---- float16 (computed in float32, rounded once) ----
F16 = dict(rtol=2e-3, atol=2e-3)
h = rand(2, 3, 4, 5).astype(np.float16)
for op in ("Softmax", "LogSoftmax"):
    node_ort_or_reference(f"{op.lower()}_f16_last", op, {"x": h}, axis=-1, **F16)
    node_ort_or_reference(f"{op.lower()}_f16_middle", op, {"x": h}, axis=1, **F16)
node_ort_or_reference("ln_f16", "LayerNormalization", {"x": h},
                      initializers={"scale": rand(5).astype(np.float16), "B": rand(5).astype(np.float16)},
                      **F16)
node_ort_or_reference("bn_f16", "BatchNormalization", {"x": h},
                      initializers={k: v.astype(np.float16) for k, v in bn_params((3,)).items()},
                      opset=15, **F16)
node_ort_or_reference("bn_f16_float_params", "BatchNormalization", {"x": h},
                      initializers=bn_params((3,)), opset=15, **F16)
node_ort_or_reference("in_f16", "InstanceNormalization", {"x": h},
                      initializers={"scale": rand(3).astype(np.float16), "B": rand(3).astype(np.float16)},
                      **F16)
node_ort_or_reference("gn_f16", "GroupNormalization", {"x": rand(2, 4, 6).astype(np.float16)},
                      initializers={"scale": rand(4).astype(np.float16), "bias": rand(4).astype(np.float16)},
                      num_groups=2, opset=21, **F16)
node_ort_or_reference("lp_f16", "LpNormalization", {"x": h}, axis=1, **F16)
node_ort_or_reference("mvn_f16", "MeanVarianceNormalization", {"x": h}, **F16)
