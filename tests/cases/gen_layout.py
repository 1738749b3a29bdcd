"""The CPU's blocked layout (NCHW16c/NCHW8c, backends/cpu/layout.hpp, kernels/conv_blocked.cpp and
kernels/blocked_ops.cpp): chains
of convs whose values between them are stored blocked, the region's NCHW edges, fused residuals
in either layout, ragged channel counts (3, 17, 33: not multiples of 16), every kernel size,
stride, dilation and padding the zoo has, and the shapes where a value must stay NCHW (a graph
output, a reader without a blocked kernel). Expected outputs come from onnxruntime."""
import numpy as np
from onnx import helper

from casegen import Cases, rand

c = Cases("layout")
N = helper.make_node
TOL = {"rtol": 1e-4, "atol": 1e-4}


def conv(x, w, y, b=None, **attrs):
    return N("Conv", [x, w] + ([b] if b else []), [y], **attrs)


# Ragged channels through a dense 3x3, a strided depthwise, a 1x1 and a dilated conv with
# asymmetric pads: 3 -> 17 -> 17 -> 33 -> 16, activations the kernels apply in registers.
c.model("chain_ragged",
        [conv("x", "w1", "a", "b1", pads=[1, 1, 1, 1]), N("Relu", ["a"], ["a1"]),
         conv("a1", "w2", "d", "b2", group=17, pads=[1, 1, 1, 1], strides=[2, 2]),
         conv("d", "w3", "p", "b3"), N("HardSwish", ["p"], ["p1"]),
         conv("p1", "w4", "y", pads=[2, 1, 3, 2], dilations=[2, 2])],
        {"x": rand(2, 3, 13, 11)}, ["y"],
        {"w1": rand(17, 3, 3, 3), "b1": rand(17), "w2": rand(17, 1, 3, 3), "b2": rand(17),
         "w3": rand(33, 17, 1, 1), "b3": rand(33), "w4": rand(16, 33, 3, 3)}, **TOL)
# The keyword spotter's shape: one input channel, a 10x4 stride-2 first conv, depthwise and
# pointwise pairs on a 25x5 map.
c.model("kws_like",
        [conv("x", "w1", "a", "b1", pads=[4, 1, 5, 2], strides=[2, 2]), N("Relu", ["a"], ["a1"]),
         conv("a1", "wd", "d", "bd", group=64, pads=[1, 1, 1, 1]), N("Relu", ["d"], ["d1"]),
         conv("d1", "wp", "p", "bp"), N("Relu", ["p"], ["y"])],
        {"x": rand(1, 1, 49, 10)}, ["y"],
        {"w1": rand(64, 1, 10, 4), "b1": rand(64), "wd": rand(64, 1, 3, 3), "bd": rand(64),
         "wp": rand(64, 64, 1, 1), "bp": rand(64)}, **TOL)
# A residual connection inside the region (the Add folds into the second conv, its other operand
# blocked), then a third conv: ResNet's basic block.
c.model("residual_blocked",
        [conv("x", "w1", "a", "b1", pads=[1, 1, 1, 1]), N("Relu", ["a"], ["a1"]),
         conv("a1", "w2", "b", "b2", pads=[1, 1, 1, 1]), N("Add", ["b", "a1"], ["s"]),
         N("Relu", ["s"], ["s1"]), conv("s1", "w3", "y", strides=[2, 2])],
        {"x": rand(3, 5, 9, 10)}, ["y"],
        {"w1": rand(20, 5, 3, 3), "b1": rand(20), "w2": rand(20, 20, 3, 3), "b2": rand(20),
         "w3": rand(6, 20, 1, 1)}, **TOL)
# The residual is the graph's input (NCHW) while the conv's output stays blocked.
c.model("residual_nchw_into_blocked",
        [conv("x", "w1", "a", pads=[1, 1, 1, 1]), conv("a", "w2", "b", "b2", pads=[1, 1, 1, 1]),
         N("Add", ["x", "b"], ["s"]), N("Relu", ["s"], ["s1"]), conv("s1", "w3", "y")],
        {"x": rand(2, 17, 7, 6)}, ["y"],
        {"w1": rand(9, 17, 3, 3), "w2": rand(17, 9, 3, 3), "b2": rand(17), "w3": rand(4, 17, 1, 1)},
        **TOL)
# Values that must stay NCHW: an intermediate that is also a graph output, and one read by an op
# without a blocked kernel (MaxPool), the chain resuming after it.
c.model("intermediate_output_and_pool",
        [conv("x", "w1", "a", "b1", pads=[1, 1, 1, 1]), conv("a", "w2", "b"),
         N("MaxPool", ["b"], ["m"], kernel_shape=[2, 2], strides=[2, 2]),
         conv("m", "w3", "c3", pads=[1, 1, 1, 1]), conv("c3", "w4", "y")],
        {"x": rand(1, 3, 12, 12)}, ["a", "y"],
        {"w1": rand(8, 3, 3, 3), "b1": rand(8), "w2": rand(16, 8, 1, 1), "w3": rand(33, 16, 3, 3),
         "w4": rand(5, 33, 1, 1)}, **TOL)
# Windows wider than the map, pads larger than the kernel, a 1x1 map, stride above the kernel,
# SAME_UPPER, 7x7 stride 2 (ResNet's stem) and 5x5 depthwise (EfficientNet).
c.model("edges",
        [conv("x", "w1", "a", "b1", kernel_shape=[7, 7], pads=[3, 3, 3, 3], strides=[2, 2]),
         conv("a", "w2", "b", group=16, auto_pad="SAME_UPPER", kernel_shape=[5, 5]),
         conv("b", "w3", "c3", pads=[4, 0, 2, 5], strides=[3, 2]),
         conv("c3", "w4", "d", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
         conv("d", "w5", "y", strides=[4, 4])],
        {"x": rand(2, 3, 15, 9)}, ["y"],
        {"w1": rand(16, 3, 7, 7), "b1": rand(16), "w2": rand(16, 1, 5, 5), "w3": rand(19, 16, 2, 2),
         "w4": rand(19, 19, 3, 3), "w5": rand(7, 19, 1, 1)}, **TOL)
c.model("one_pixel_map",
        [conv("x", "w1", "a", "b1"), N("Sigmoid", ["a"], ["a1"]), conv("a1", "w2", "y", "b2")],
        {"x": rand(4, 40, 1, 1)}, ["y"],
        {"w1": rand(10, 40, 1, 1), "b1": rand(10), "w2": rand(40, 10, 1, 1), "b2": rand(40)}, **TOL)
# An activation the blocked kernels don't apply in registers (Tanh): those convs keep the NCHW
# kernels, their neighbours still chain.
c.model("tanh_breaks_the_region",
        [conv("x", "w1", "a", pads=[1, 1, 1, 1]), N("Tanh", ["a"], ["a1"]),
         conv("a1", "w2", "b"), N("Relu", ["b"], ["b1"]), conv("b1", "w3", "y")],
        {"x": rand(1, 6, 8, 8)}, ["y"],
        {"w1": rand(12, 6, 3, 3), "w2": rand(12, 12, 1, 1), "w3": rand(3, 12, 1, 1)}, **TOL)
# A depthwise conv reading the graph's input (NCHW, reordered in the kernel) and writing blocked.
c.model("depthwise_first",
        [conv("x", "wd", "d", group=20, pads=[1, 1, 1, 1], strides=[2, 1], dilations=[1, 2]),
         conv("d", "wp", "y", "bp")],
        {"x": rand(2, 20, 9, 14)}, ["y"], {"wd": rand(20, 1, 3, 3), "wp": rand(8, 20, 1, 1),
                                            "bp": rand(8)}, **TOL)
# Real-ESRGAN's dense block: a 3-channel first conv (NCHW kernels) whose output five nodes read
# blocked (reordered once), convs whose outputs are concatenated with it, the last conv scaled by
# 0.2 (folded into its weights) before the residual Add, then the block's own 0.2 scaling and
# Add (element-wise on blocked values) and a conv after.
c.model("dense_block",
        [conv("x", "w0", "f", "b0", pads=[1, 1, 1, 1]),
         conv("f", "w1", "a", pads=[1, 1, 1, 1]), N("LeakyRelu", ["a"], ["a1"], alpha=0.2),
         N("Concat", ["f", "a1"], ["c1"], axis=1),
         conv("c1", "w2", "b", pads=[1, 1, 1, 1]), N("LeakyRelu", ["b"], ["b1"], alpha=0.2),
         N("Concat", ["f", "a1", "b1"], ["c2"], axis=1),
         conv("c2", "w3", "d", pads=[1, 1, 1, 1]), N("Mul", ["d", "fifth"], ["d1"]),
         N("Add", ["d1", "f"], ["r"]), N("Mul", ["r", "fifth"], ["r1"]), N("Add", ["r1", "f"], ["s"]),
         conv("s", "w4", "y", pads=[1, 1, 1, 1])],
        {"x": rand(1, 3, 10, 12)}, ["y"],
        {"w0": rand(16, 3, 3, 3), "b0": rand(16), "w1": rand(8, 16, 3, 3), "w2": rand(8, 24, 3, 3),
         "w3": rand(16, 32, 3, 3), "fifth": np.array(0.2, np.float32), "w4": rand(5, 16, 3, 3)},
         **TOL)
# Concats whose inputs mix layouts: pooled (NCHW) branches and a blocked conv output (YOLOv5's
# SPPF) into a blocked concatenation; blocked inputs, the last ragged (5 channels), into one that
# is also a graph output (NCHW).
c.model("concat_mixed_ragged_and_output",
        [conv("x", "w1", "a", "b1", pads=[1, 1, 1, 1]), N("Relu", ["a"], ["a1"]),
         N("MaxPool", ["a1"], ["p1"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
         N("MaxPool", ["p1"], ["p2"], kernel_shape=[5, 5], pads=[2, 2, 2, 2]),
         conv("a1", "w5", "g", pads=[1, 1, 1, 1]),
         N("Concat", ["g", "p1", "p2"], ["c1"], axis=1), conv("c1", "w2", "b"),
         conv("b", "w3", "e", pads=[1, 1, 1, 1]), N("Concat", ["b", "e"], ["c2"], axis=-3),
         conv("c2", "w4", "y", strides=[2, 2])],
        {"x": rand(2, 8, 9, 11)}, ["y", "c2"],
        {"w1": rand(16, 8, 3, 3), "b1": rand(16), "w5": rand(16, 16, 3, 3),
         "w2": rand(16, 48, 1, 1), "w3": rand(5, 16, 3, 3), "w4": rand(7, 21, 1, 1)}, **TOL)
# Element-wise ops the region cannot keep: one adding the graph's input (NCHW) to a conv's
# output, a per-channel Mul (not one element), and a Sigmoid whose output is read by a Softmax.
c.model("element_wise_edges",
        [conv("x", "w1", "a", pads=[1, 1, 1, 1]), N("Add", ["a", "x"], ["s"]),
         conv("s", "w2", "b", pads=[1, 1, 1, 1]), N("Mul", ["b", "k"], ["m"]),
         conv("m", "w3", "d"), N("Sigmoid", ["d"], ["g"]), conv("g", "w4", "y1"),
         N("Softmax", ["g"], ["y2"], axis=1)],
        {"x": rand(1, 16, 6, 7)}, ["y1", "y2"],
        {"w1": rand(16, 16, 3, 3), "w2": rand(16, 16, 3, 3), "k": rand(1, 16, 1, 1),
         "w3": rand(16, 16, 1, 1), "w4": rand(9, 16, 1, 1)}, **TOL)
# MobileNetV3's and EfficientNet's inverted residual block with squeeze-excitation, all in the
# region: a 1x1 expansion, a depthwise 5x5 on a small plane (blocked tiles), the plane means
# (ReduceMean over H and W), the gate convs on 1x1 maps (NCHW), the gate multiplied into the
# blocked value per channel, the 1x1 projection with the residual Add, then the block's output
# minus its per-image channel means (GlobalAveragePool on blocked, Sub per channel).
se = [conv("x", "we", "e", "be"), N("HardSwish", ["e"], ["e1"]),
      conv("e1", "wd", "d", "bd", group=24, pads=[2, 2, 2, 2]), N("Relu", ["d"], ["d1"]),
      N("ReduceMean", ["d1", "axes"], ["s"], keepdims=1), conv("s", "ws1", "s1", "bs1"),
      N("Relu", ["s1"], ["s2"]), conv("s2", "ws2", "s3", "bs2"), N("HardSigmoid", ["s3"], ["g"]),
      N("Mul", ["d1", "g"], ["m"]), conv("m", "wp", "p", "bp"), N("Add", ["p", "x"], ["r"]),
      N("GlobalAveragePool", ["r"], ["q"]), N("Sub", ["r", "q"], ["t"]), conv("t", "wo", "y")]
c.model("squeeze_excitation_block", se, {"x": rand(2, 16, 9, 10)}, ["y"],
        {"we": rand(24, 16, 1, 1), "be": rand(24), "wd": rand(24, 1, 5, 5), "bd": rand(24),
         "axes": np.array([2, 3], np.int64), "ws1": rand(8, 24, 1, 1), "bs1": rand(8),
         "ws2": rand(24, 8, 1, 1), "bs2": rand(24), "wp": rand(16, 24, 1, 1), "bp": rand(16),
         "wo": rand(4, 16, 1, 1)},
        opset=18, **TOL)
# DeepLabV3's atrous pyramid on a 14x14 map: dilations whose taps mostly read padding stay on
# the NCHW kernels, their neighbours blocked, the branches concatenated.
c.model("atrous_pyramid",
        [conv("x", "w0", "a", pads=[1, 1, 1, 1]),
         conv("a", "w1", "b1", pads=[12, 12, 12, 12], dilations=[12, 12]),
         conv("a", "w2", "b2", pads=[2, 2, 2, 2], dilations=[2, 2]), conv("a", "w3", "b3"),
         N("Concat", ["b1", "b2", "b3"], ["c1"], axis=1), conv("c1", "w4", "y")],
        {"x": rand(1, 16, 14, 14)}, ["y"],
        {"w0": rand(32, 16, 3, 3), "w1": rand(16, 32, 3, 3), "w2": rand(16, 32, 3, 3),
         "w3": rand(16, 32, 1, 1), "w4": rand(8, 48, 1, 1)}, **TOL)
# A 3-channel value between two convs: on 8 lanes the second conv reads fewer than 8 channels as
# NCHW planes only, so the first writes NCHW; then YOLOv5s's 6x6 stride-2 stem, whose NCHW input
# the conv reads a plane at a time while writing blocked for the conv after it.
c.model("narrow_middle_and_stem",
        [conv("x", "w1", "a", "b1", pads=[1, 1, 1, 1]), N("Relu", ["a"], ["a1"]),
         conv("a1", "w2", "n", "b2", pads=[1, 1, 1, 1]), N("Sigmoid", ["n"], ["n1"]),
         conv("n1", "w3", "s", "b3", pads=[2, 2, 2, 2], strides=[2, 2]), N("Relu", ["s"], ["s1"]),
         conv("s1", "w4", "y", pads=[1, 1, 1, 1], strides=[2, 2])],
        {"x": rand(2, 16, 15, 14)}, ["y"],
        {"w1": rand(16, 16, 3, 3), "b1": rand(16), "w2": rand(3, 16, 3, 3), "b2": rand(3),
         "w3": rand(32, 3, 6, 6), "b3": rand(32), "w4": rand(24, 32, 3, 3)}, **TOL)
# Plane means read by two nodes that read them blocked (element-wise, into a Concat): the mean's
# NCHW output is reordered once for them.
c.model("plane_mean_read_twice",
        [conv("x", "w1", "a", pads=[1, 1, 1, 1]), N("GlobalAveragePool", ["a"], ["q"]),
         N("Sigmoid", ["q"], ["s"]), N("Relu", ["q"], ["u"]), N("Concat", ["s", "u"], ["c1"], axis=1),
         conv("c1", "w2", "y")],
        {"x": rand(2, 8, 10, 10)}, ["y"], {"w1": rand(16, 8, 3, 3), "w2": rand(4, 32, 1, 1)}, **TOL)
