"""Builds the models of the OpenCL part-2 op tests (tests/backends/opencl/test_opencl_ops2.cpp):
conv, pooling, normalisation, reductions, tensor ops, a small CNN and a transformer block.

usage: gen_opencl_ops2_models.py OUT_DIR
Built with onnx.helper from fixed seeds; nothing is downloaded.
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(11)
F = TensorProto.FLOAT
N = helper.make_node


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    # Outputs declared without a shape get the inferred one (the checker wants a shape).
    inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
    inferred.update({v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.output})
    for o in model.graph.output:
        if not o.type.tensor_type.HasField("shape") and o.name in inferred:
            o.type.CopyFrom(inferred[o.name].type)
        if not o.type.tensor_type.HasField("shape"):  # not inferred: rank 4, dims unnamed
            for _ in range(4):
                o.type.tensor_type.shape.dim.add()
    onnx.checker.check_model(model)
    onnx.save(model, out / f"{name}.onnx")


def vi(name, shape):
    if shape is None:  # inferred in save()
        v = helper.make_tensor_value_info(name, F, [])
        v.type.tensor_type.ClearField("shape")
        return v
    return helper.make_tensor_value_info(name, F, shape)


def weight(name, *shape, scale=0.2):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * scale, name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


X4 = vi("x", ["n", 8, "h", "w"])  # NCHW, 8 channels, any batch and size

# ---- conv: every kernel path, each node its own output ----
conv_nodes, conv_outputs, conv_inits = [], [], []


def conv(name, m, k, op="Conv", cin=8, bias=True, **attrs):
    kh, kw = k
    w = weight(f"{name}_w", *((cin, m // attrs.get("group", 1)) if op == "ConvTranspose"
                             else (m, cin // attrs.get("group", 1))), kh, kw)
    conv_inits.append(w)
    ins = ["x", w.name]
    if bias:
        conv_inits.append(weight(f"{name}_b", m))
        ins.append(f"{name}_b")
    conv_nodes.append(N(op, ins, [name], name=name, **attrs))
    conv_outputs.append(vi(name, None))


conv("direct_3x3", 20, (3, 3), pads=[1, 1, 1, 1])                       # 20 = 16 + 4 channels
conv("pointwise", 19, (1, 1))                                            # conv1x1
conv("strided_dilated", 5, (3, 3), bias=False, strides=[2, 2], dilations=[2, 2], pads=[0, 1, 2, 1])
conv("depthwise", 8, (3, 3), group=8, strides=[2, 2], pads=[1, 1, 1, 1])
conv("depthwise_5x5", 8, (5, 5), group=8, pads=[2, 2, 2, 2], bias=False)
# strided depthwise (its row buffer), dilated, and one whose row span (7 * 3 + 4 * 11 + 1 = 66)
# is too wide for the buffer
conv("depthwise_s2_dilated", 8, (5, 5), group=8, strides=[2, 2], dilations=[2, 2],
     pads=[3, 4, 2, 1])
conv("depthwise_wide_span", 8, (3, 5), group=8, strides=[3, 3], dilations=[1, 11],
     pads=[1, 22, 1, 22])
conv("multiplier2", 16, (3, 3), group=8, pads=[1, 1, 1, 1])            # Cg == 1, Mg == 2: direct
conv("group2_same_upper", 6, (3, 3), group=2, strides=[2, 2], auto_pad="SAME_UPPER")
conv("same_lower", 7, (4, 4), auto_pad="SAME_LOWER", bias=False)
conv("valid_7x1", 3, (7, 1), auto_pad="VALID")
conv("large_pads", 4, (2, 2), pads=[5, 4, 3, 6])
conv("pointwise_stride2", 9, (1, 1), strides=[2, 2])
conv("conv_transpose", 5, (3, 3), op="ConvTranspose", strides=[2, 2], pads=[1, 1, 1, 1],
     output_padding=[1, 1])
conv("conv_transpose_group", 6, (2, 3), op="ConvTranspose", group=2, bias=False,
     dilations=[2, 1], strides=[1, 3], pads=[0, 1, 1, 0])
save("conv", conv_nodes, [X4], conv_outputs, conv_inits)

# The ResNet-50-sized 3x3 conv (64 -> 64, 56 x 56) for the benchmark.
save("conv3x3_64", [N("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
     [vi("x", [1, 64, 56, 56])], [vi("y", [1, 64, 56, 56])],
     [weight("w", 64, 64, 3, 3, scale=0.05), weight("b", 64)])

# ---- pooling ----
save("pool", [
    N("MaxPool", ["x"], ["max_2x2"], name="max_2x2", kernel_shape=[2, 2], strides=[2, 2]),
    N("MaxPool", ["x"], ["max_3x3_ceil"], name="max_3x3_ceil", kernel_shape=[3, 3], strides=[2, 2],
      pads=[1, 1, 1, 1], ceil_mode=1),
    N("MaxPool", ["x"], ["max_dilated"], name="max_dilated", kernel_shape=[2, 3], dilations=[2, 1],
      pads=[1, 0, 2, 1]),
    N("MaxPool", ["x"], ["max_same"], name="max_same", kernel_shape=[3, 3], strides=[2, 2],
      auto_pad="SAME_UPPER"),
    N("AveragePool", ["x"], ["avg_excl"], name="avg_excl", kernel_shape=[3, 3], strides=[2, 2],
      pads=[1, 1, 1, 1]),
    N("AveragePool", ["x"], ["avg_incl_ceil"], name="avg_incl_ceil", kernel_shape=[3, 3],
      strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1, ceil_mode=1),
    N("AveragePool", ["x"], ["avg_large_pads"], name="avg_large_pads", kernel_shape=[5, 5],
      pads=[2, 3, 4, 1], count_include_pad=1),
    N("AveragePool", ["x"], ["avg_same_lower"], name="avg_same_lower", kernel_shape=[2, 2],
      auto_pad="SAME_LOWER"),
    N("GlobalAveragePool", ["x"], ["gap"], name="gap"),
    N("GlobalMaxPool", ["x"], ["gmp"], name="gmp"),
], [X4], [vi(n, None) for n in ["max_2x2", "max_3x3_ceil", "max_dilated", "max_same", "avg_excl",
                                "avg_incl_ceil", "avg_large_pads", "avg_same_lower", "gap", "gmp"]])

# ---- normalisation ----
save("norm", [
    N("BatchNormalization", ["x", "s", "b", "mean", "var"], ["bn"], name="bn", epsilon=1e-3),
    N("InstanceNormalization", ["x", "s", "b"], ["in"], name="in", epsilon=1e-4),
    N("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], name="ln", axis=-1),
    N("LayerNormalization", ["x", "ln2_s"], ["ln2"], name="ln2", axis=1, epsilon=1e-3),
], [X4], [vi(n, None) for n in ["bn", "in", "ln", "ln2"]],
    [weight("s", 8), weight("b", 8), weight("mean", 8),
     numpy_helper.from_array(rng.uniform(0.5, 2, 8).astype(np.float32), "var"),
     weight("ln_s", 13), weight("ln_b", 13), weight("ln2_s", 8, 7, 13)])

# ---- reductions (opset 18: axes as an input) ----
red_nodes, red_outputs = [], []
for op in ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2"]:
    for tag, axes, keep in [("hw", [2, 3], 1), ("c", [1], 0), ("neg", [-1], 1), ("all", None, 0),
                            ("nh", [0, 2], 0)]:
        name = f"{op}_{tag}"
        ins = ["x"] if axes is None else ["x", f"axes_{tag}"]
        red_nodes.append(N(op, ins, [name], name=name, keepdims=keep))
        red_outputs.append(vi(name, None))
red_nodes.append(N("ReduceSum", ["x", "axes_empty"], ["noop"], name="noop", noop_with_empty_axes=1))
red_outputs.append(vi("noop", None))
# No axis reduced, but ReduceL2 still takes sqrt(x^2) = |x| (the spec's composite reductions).
red_nodes.append(N("ReduceL2", ["x", "axes_empty"], ["noop_l2"], name="noop_l2", noop_with_empty_axes=1))
red_outputs.append(vi("noop_l2", None))
save("reduce", red_nodes, [X4], red_outputs,
     [ints("axes_hw", [2, 3]), ints("axes_c", [1]), ints("axes_neg", [-1]), ints("axes_nh", [0, 2]),
      ints("axes_empty", [])], opset=18)
# Opset 13 (axes attribute; ReduceSum takes them as an input since 13).
save("reduce13", [N("ReduceMean", ["x"], ["mean"], name="mean", axes=[1, -1], keepdims=1),
                  N("ReduceMax", ["x"], ["max"], name="max", axes=[0]),
                  N("ReduceSum", ["x", "axes"], ["sum"], name="sum", keepdims=0)],
     [X4], [vi("mean", None), vi("max", None), vi("sum", None)], [ints("axes", [3, 1])], opset=13)

# ---- tensor ops ----
save("tensor", [
    N("Transpose", ["x"], ["t0213"], name="t0213", perm=[0, 2, 1, 3]),
    N("Transpose", ["x"], ["t_rev"], name="t_rev"),
    N("Concat", ["x", "x2", "x"], ["cat1"], name="cat1", axis=1),
    N("Concat", ["x", "x"], ["cat_last"], name="cat_last", axis=-1),
    N("Split", ["x", "split"], ["s0", "s1", "s2"], name="split", axis=1),
    N("Split", ["x"], ["e0", "e1"], name="split_even", axis=-1, num_outputs=2),
    N("Slice", ["x", "starts", "ends", "axes", "steps"], ["sl"], name="slice"),
    N("Slice", ["x", "starts2", "ends2"], ["sl2"], name="slice_default"),
    N("Gather", ["x", "idx"], ["g1"], name="gather_c", axis=1),
    N("Gather", ["x", "idx_scalar"], ["g0"], name="gather_scalar", axis=-1),
    N("Pad", ["x", "pads"], ["pad"], name="pad"),
    N("Pad", ["x", "pads_neg", "pad_value"], ["pad_neg"], name="pad_neg"),
    N("Resize", ["x", "", "scales_up"], ["up_nearest"], name="up_nearest", mode="nearest"),
    N("Resize", ["x", "", "scales_up"], ["up_linear"], name="up_linear", mode="linear"),
    N("Resize", ["x", "", "", "sizes"], ["rs_align"], name="rs_align", mode="linear",
      coordinate_transformation_mode="align_corners", axes=[2, 3]),
    N("Resize", ["x", "", "", "sizes"], ["rs_asym"], name="rs_asym", mode="nearest",
      coordinate_transformation_mode="asymmetric", nearest_mode="floor", axes=[-2, -1]),
    N("Resize", ["x", "", "scales_down"], ["rs_pt"], name="rs_pt", mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel"),
    N("Resize", ["x", "", "scales_down"], ["rs_near_ceil"], name="rs_near_ceil", mode="nearest",
      nearest_mode="round_prefer_ceil"),
    # Sizes: exact coordinates, ties included (width 70 -> 4: output 1 at 17.5 exactly, 3 -> 4:
    # output 2 at 1.5), rounded as the CPU rounds them.
    N("Resize", ["x", "", "", "sizes"], ["rs_tie"], name="rs_tie", mode="nearest",
      coordinate_transformation_mode="asymmetric", nearest_mode="round_prefer_ceil", axes=[2, 3]),
    N("Resize", ["x", "", "", "sizes"], ["rs_tie_hp"], name="rs_tie_hp", mode="nearest",
      coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor", axes=[2, 3]),
], [X4, vi("x2", ["n", 3, "h", "w"])],
    [vi(n, None) for n in ["t0213", "t_rev", "cat1", "cat_last", "s0", "s1", "s2", "e0", "e1", "sl",
                           "sl2", "g1", "g0", "pad", "pad_neg", "up_nearest", "up_linear",
                           "rs_align", "rs_asym", "rs_pt", "rs_near_ceil", "rs_tie", "rs_tie_hp"]],
    [ints("split", [2, 5, 1]), ints("starts", [1, -1, 0]), ints("ends", [7, -100, 1000]),
     ints("axes", [1, 3, 2]), ints("steps", [2, -2, 3]), ints("starts2", [0, 1]),
     ints("ends2", [1, 5]), ints("idx", [[7, 0], [2, -1]]),
     numpy_helper.from_array(np.array(1, dtype=np.int64), "idx_scalar"),
     ints("pads", [0, 1, 2, 3, 1, 0, 4, 2]), ints("pads_neg", [0, 0, -1, 2, 0, 0, 3, -2]),
     floats("pad_value", 1.5), floats("scales_up", [1, 1, 2, 1.5]),
     floats("scales_down", [1, 1, 0.6, 0.5]), ints("sizes", [9, 4])], opset=18)

# ---- what OpenCL refuses (each node runs on the CPU, with the reason in the plan) ----
save("refused", [
    N("Resize", ["x", "", "scales_up"], ["cubic"], name="cubic", mode="cubic"),
    N("Pad", ["x", "pads"], ["reflect"], name="reflect", mode="reflect"),
    N("Conv", ["x1d", "w1d"], ["conv1d"], name="conv1d"),
    N("MaxPool", ["x"], ["maxpool", "indices"], name="maxpool_indices", kernel_shape=[2, 2]),
    N("Gather", ["x", "idx"], ["gather_runtime"], name="gather_runtime", axis=1),
    N("LayerNormalization", ["x", "one"], ["ln_broadcast"], name="ln_broadcast", axis=2),
    N("Relu", ["cubic"], ["after"], name="relu"),  # back on OpenCL after a refused node
], [X4, vi("x1d", ["n", 8, 9]), helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
    [vi(n, None) for n in ["reflect", "conv1d", "maxpool", "gather_runtime", "ln_broadcast",
                           "after"]] + [helper.make_tensor_value_info("indices", TensorProto.INT64, None)],
    [floats("scales_up", [1, 1, 2, 1.5]), ints("pads", [0, 0, 1, 2, 0, 0, 2, 1]),
     floats("one", [1.0]), weight("w1d", 4, 8, 3)])

# Conv and ConvTranspose whose weights are graph inputs (packed by a kernel at each run).
save("conv_runtime_weights", [
    N("Conv", ["x", "w"], ["conv"], name="conv", pads=[1, 0, 2, 1], strides=[1, 2]),
    N("Conv", ["x", "w1"], ["pointwise"], name="pointwise"),
    N("ConvTranspose", ["x", "wt", "bt"], ["convt"], name="convt", strides=[2, 2], group=2),
], [X4, vi("w", [19, 8, 3, 2]), vi("w1", [5, 8, 1, 1]), vi("wt", [8, 3, 3, 3]), vi("bt", [6])],
    [vi("conv", None), vi("pointwise", None), vi("convt", None)])

# ---- a small CNN: Conv-BN-Relu-MaxPool-Conv-GlobalAveragePool-Flatten-Gemm ----
save("cnn", [
    N("Conv", ["img", "c1_w", "c1_b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    N("BatchNormalization", ["c1", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
    N("Relu", ["bn"], ["r"], name="relu"),
    N("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
    N("Conv", ["p", "c2_w", "c2_b"], ["c2"], name="conv2", strides=[2, 2], pads=[1, 1, 1, 1]),
    N("GlobalAveragePool", ["c2"], ["gap"], name="gap"),
    N("Flatten", ["gap"], ["f"], name="flatten"),
    N("Gemm", ["f", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
], [vi("img", ["n", 3, 28, 28])], [vi("logits", ["n", 10])],
    [weight("c1_w", 16, 3, 3, 3), weight("c1_b", 16), weight("bn_s", 16), weight("bn_b", 16),
     weight("bn_m", 16), numpy_helper.from_array(rng.uniform(0.5, 2, 16).astype(np.float32), "bn_v"),
     weight("c2_w", 32, 16, 3, 3), weight("c2_b", 32), weight("fc_w", 10, 32), weight("fc_b", 10)])

# ---- a transformer block: LayerNorm, attention (MatMul, Transpose, Reshape, Softmax), MLP ----
D, H = 32, 4
save("transformer", [
    N("LayerNormalization", ["x", "ln1_s", "ln1_b"], ["h"], name="ln1", axis=-1),
    N("MatMul", ["h", "wq"], ["q0"], name="q"), N("MatMul", ["h", "wk"], ["k0"], name="k"),
    N("MatMul", ["h", "wv"], ["v0"], name="v"),
    N("Reshape", ["q0", "heads"], ["q1"], name="q_heads"),
    N("Reshape", ["k0", "heads"], ["k1"], name="k_heads"),
    N("Reshape", ["v0", "heads"], ["v1"], name="v_heads"),
    N("Transpose", ["q1"], ["q"], name="q_t", perm=[0, 2, 1, 3]),
    N("Transpose", ["k1"], ["kT"], name="k_t", perm=[0, 2, 3, 1]),
    N("Transpose", ["v1"], ["v"], name="v_t", perm=[0, 2, 1, 3]),
    N("MatMul", ["q", "kT"], ["s0"], name="scores"),
    N("Mul", ["s0", "scale"], ["s"], name="scale"),
    N("Softmax", ["s"], ["a"], name="softmax", axis=-1),
    N("MatMul", ["a", "v"], ["o0"], name="attend"),
    N("Transpose", ["o0"], ["o1"], name="o_t", perm=[0, 2, 1, 3]),
    N("Reshape", ["o1", "merge"], ["o2"], name="merge"),
    N("MatMul", ["o2", "wo"], ["o"], name="proj"),
    N("Add", ["x", "o"], ["r1"], name="residual1"),
    N("LayerNormalization", ["r1", "ln2_s", "ln2_b"], ["h2"], name="ln2", axis=-1),
    N("MatMul", ["h2", "w1"], ["m1"], name="fc1"), N("Add", ["m1", "b1"], ["m2"], name="fc1_bias"),
    N("Relu", ["m2"], ["m3"], name="act"),
    N("MatMul", ["m3", "w2"], ["m4"], name="fc2"),
    N("Add", ["r1", "m4"], ["y"], name="residual2"),
], [vi("x", ["b", "t", D])], [vi("y", ["b", "t", D])],
    [weight("ln1_s", D), weight("ln1_b", D), weight("wq", D, D), weight("wk", D, D),
     weight("wv", D, D), ints("heads", [0, 0, H, D // H]), floats("scale", 1 / np.sqrt(D // H)),
     ints("merge", [0, 0, D]), weight("wo", D, D), weight("ln2_s", D), weight("ln2_b", D),
     weight("w1", D, 4 * D), weight("b1", 4 * D), weight("w2", 4 * D, D)])
