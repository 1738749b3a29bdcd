"""End-to-end cases: small multi-op models shaped like pieces of the seed models (MLP, CNN blocks,
attention, dynamic-shape arithmetic, upsampling), compared with onnxruntime. They exercise
constant folding, value-dependent shape inference and buffer release across nodes."""
import numpy as np
from onnx import TensorProto, helper

from casegen import Cases, rand

c = Cases("e2e")
N = helper.make_node


def const_i64(name, values):
    return N("Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values))


# MLP with a softmax head
c.model("mlp", [
    N("MatMul", ["x", "w1"], ["h1"]), N("Add", ["h1", "b1"], ["h2"]), N("Relu", ["h2"], ["h3"]),
    N("MatMul", ["h3", "w2"], ["h4"]), N("Add", ["h4", "b2"], ["h5"]), N("Softmax", ["h5"], ["y"], axis=-1)],
    {"x": rand(5, 16)}, ["y"],
    {"w1": rand(16, 32), "b1": rand(32), "w2": rand(32, 10), "b2": rand(10)})

# CNN: conv-bn-relu, maxpool, depthwise conv + hardswish, global pool, gemm
c.model("cnn", [
    N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
    N("BatchNormalization", ["c1", "s", "bb", "m", "v"], ["bn"]),
    N("Relu", ["bn"], ["r1"]), N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    N("Conv", ["p1", "wd"], ["c2"], group=8, pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    N("HardSwish", ["c2"], ["h"]), N("GlobalAveragePool", ["h"], ["g"]), N("Flatten", ["g"], ["f"]),
    N("Gemm", ["f", "wf", "bf"], ["y"], transB=1)],
    {"x": rand(2, 3, 12, 12)}, ["y"],
    {"w1": rand(8, 3, 3, 3), "b1": rand(8), "s": rand(8, low=0.5, high=1.5), "bb": rand(8), "m": rand(8),
     "v": rand(8, low=0.5, high=2.0), "wd": rand(8, 1, 3, 3), "wf": rand(4, 8), "bf": rand(4)})

# ResNet basic block with a residual Add
c.model("residual_block", [
    N("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1]), N("Relu", ["a"], ["b"]),
    N("Conv", ["b", "w2"], ["d"], pads=[1, 1, 1, 1]), N("Add", ["d", "x"], ["e"]), N("Relu", ["e"], ["y"])],
    {"x": rand(1, 4, 9, 7)}, ["y"], {"w1": rand(4, 4, 3, 3), "w2": rand(4, 4, 3, 3)})

# Dynamic reshape computed from Shape at run time (batch is symbolic in ORT exports)
c.model("dynamic_reshape", [
    N("Shape", ["x"], ["s"]), const_i64("zero", [0]), N("Gather", ["s", "zero"], ["batch"], axis=0),
    const_i64("minus1", [-1]), N("Concat", ["batch", "minus1"], ["shape"], axis=0),
    N("Reshape", ["x", "shape"], ["r"]), N("Relu", ["r"], ["y"])],
    {"x": rand(3, 6, 4)}, ["y"])

# Shape arithmetic on int64: ConstantOfShape, Cast, Mul, Div, Expand, Range
c.model("shape_arithmetic", [
    N("Shape", ["x"], ["s"]), const_i64("two", [2]), N("Mul", ["s", "two"], ["s2"]),
    N("Div", ["s2", "two"], ["s3"]), N("ConstantOfShape", ["s3"], ["ones"],
                                      value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
    N("Add", ["x", "ones"], ["y"]),
    N("Cast", ["s"], ["sf"], to=TensorProto.FLOAT), N("ReduceSum", ["sf"], ["y2"], keepdims=0)],
    {"x": rand(2, 3, 5)}, ["y", "y2"])

# Self-attention block (BERT/ViT-like): LayerNorm, Q/K/V, heads, scaled dot product, residual, Gelu
B, S, D, H = 2, 5, 8, 2
nodes = [N("LayerNormalization", ["x", "ln_s", "ln_b"], ["ln"], axis=-1, epsilon=1e-5)]
for p in "qkv":
    nodes += [N("MatMul", ["ln", f"w{p}"], [f"{p}0"]),
              N("Reshape", [f"{p}0", "heads"], [f"{p}1"]),
              N("Transpose", [f"{p}1"], [f"{p}"], perm=[0, 2, 1, 3] if p != "k" else [0, 2, 3, 1])]
nodes += [N("MatMul", ["q", "k"], ["qk"]), N("Div", ["qk", "scale"], ["qks"]), N("Softmax", ["qks"], ["att"], axis=-1),
          N("MatMul", ["att", "v"], ["o0"]), N("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
          N("Reshape", ["o1", "flat"], ["o2"]), N("Add", ["o2", "x"], ["res"]),
          N("Div", ["res", "sqrt2"], ["g0"]), N("Erf", ["g0"], ["g1"]), N("Add", ["g1", "one"], ["g2"]),
          N("Mul", ["res", "g2"], ["g3"]), N("Mul", ["g3", "half"], ["y"])]
c.model("attention_block", nodes, {"x": rand(B, S, D)}, ["y"], {
    "ln_s": rand(D), "ln_b": rand(D), "wq": rand(D, D), "wk": rand(D, D), "wv": rand(D, D),
    "heads": np.array([B, S, H, D // H], dtype=np.int64), "flat": np.array([B, S, D], dtype=np.int64),
    "scale": np.array(np.sqrt(D // H), dtype=np.float32), "sqrt2": np.array(np.sqrt(2), dtype=np.float32),
    "one": np.array(1, dtype=np.float32), "half": np.array(0.5, dtype=np.float32)})

# Causal mask (GPT-2-like): Range, Unsqueeze, Less, Where
c.model("causal_mask", [
    N("Shape", ["x"], ["s"]), const_i64("idx", [1]), N("Gather", ["s", "idx"], ["n1"], axis=0),
    N("Squeeze", ["n1"], ["n"]),
    N("Constant", [], ["start"], value=helper.make_tensor("start", TensorProto.INT64, [], [0])),
    N("Constant", [], ["step"], value=helper.make_tensor("step", TensorProto.INT64, [], [1])),
    N("Range", ["start", "n", "step"], ["r"]), const_i64("ax0", [0]), const_i64("ax1", [1]),
    N("Unsqueeze", ["r", "ax1"], ["rows"]), N("Unsqueeze", ["r", "ax0"], ["cols"]),
    N("Less", ["rows", "cols"], ["future"]), N("Where", ["future", "neg", "x"], ["masked"]),
    N("Softmax", ["masked"], ["y"], axis=-1)],
    {"x": rand(2, 6, 6)}, ["y"], {"neg": np.array(-1e4, dtype=np.float32)})

# Upsampling path (YOLO/ESRGAN-like): conv, nearest x2, concat, conv
c.model("upsample_concat", [
    N("Conv", ["x", "w1"], ["a"], strides=[2, 2], pads=[1, 1, 1, 1]),
    N("Resize", ["a", "", "scales"], ["u"], mode="nearest"),
    N("Concat", ["u", "x"], ["cat"], axis=1), N("Conv", ["cat", "w2"], ["y"], pads=[1, 1, 1, 1]),
    N("LeakyRelu", ["y"], ["z"], alpha=0.2)],
    {"x": rand(1, 3, 8, 8)}, ["z"],
    {"w1": rand(4, 3, 3, 3), "scales": np.array([1, 1, 2, 2], dtype=np.float32), "w2": rand(5, 7, 3, 3)})

# Segmentation head: bilinear resize back to the input size, ArgMax
c.model("segmentation_head", [
    N("Conv", ["x", "w"], ["a"], strides=[2, 2]), N("Sigmoid", ["a"], ["s"]),
    N("Resize", ["s", "", "", "sizes"], ["u"], mode="linear", coordinate_transformation_mode="half_pixel"),
    N("ArgMax", ["u"], ["y"], axis=1, keepdims=0)],
    {"x": rand(1, 3, 10, 10)}, ["u", "y"],
    {"w": rand(6, 3, 2, 2), "sizes": np.array([1, 6, 10, 10], dtype=np.int64)})

# Split/slice/concat plumbing (YOLO head-like) with TopK at the end
c.model("split_slice_topk", [
    N("Split", ["x", "split"], ["a", "b"], axis=1),
    N("Slice", ["a", "st", "en", "ax"], ["sa"]), N("Sigmoid", ["b"], ["sb"]),
    N("Concat", ["sa", "sb"], ["cat"], axis=1), N("Flatten", ["cat"], ["f"], axis=1),
    N("TopK", ["f", "k"], ["vals", "idx"], axis=-1)],
    {"x": rand(2, 6, 4)}, ["vals", "idx"],
    {"split": np.array([2, 4], dtype=np.int64), "st": np.array([-1], dtype=np.int64),
     "en": np.array([2], dtype=np.int64), "ax": np.array([1], dtype=np.int64), "k": np.array([5], dtype=np.int64)})
