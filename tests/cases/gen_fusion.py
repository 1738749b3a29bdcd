"""Activation fusion in the CPU backend (backends/cpu/fusion.hpp): Conv and Gemm followed by an
activation, the SiLU pair Sigmoid + Mul, and the shapes where fusing would be wrong (the
intermediate value is also a graph output, has a second reader, or Clip's bounds are run-time
inputs). Expected outputs come from onnxruntime; every output is compared, intermediates too."""
from onnx import TensorProto, helper

from casegen import Cases, rand

c = Cases("fusion")
N = helper.make_node
W = {"w": rand(6, 3, 3, 3), "b": rand(6)}
X = {"x": rand(2, 3, 9, 8, low=-2, high=2)}


def conv(out="c", **attrs):
    return N("Conv", ["x", "w", "b"], [out], pads=[1, 1, 1, 1], **attrs)


for op, attrs in [("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}),
                  ("HardSwish", {}), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
                  ("Gelu", {}), ("Gelu", {"approximate": "tanh"})]:
    name = f"conv_{op.lower()}" + ("_tanh" if attrs.get("approximate") else "")
    opset = 20 if op == "Gelu" else 17
    c.model(name, [conv(), N(op, ["c"], ["y"], **attrs)], X, ["y"], W, opset=opset)

# Clip with constant bounds (Relu6), and with run-time bounds (not fused: still correct).
c.model("conv_clip_relu6", [conv(), N("Clip", ["c", "lo", "hi"], ["y"])], X, ["y"],
        {**W, "lo": rand(low=0, high=0), "hi": rand(low=6, high=6)})
c.model("conv_clip_runtime_bounds", [conv(), N("Clip", ["c", "lo", "hi"], ["y"])],
        {**X, "lo": rand(low=-0.5, high=-0.5), "hi": rand(low=0.5, high=0.5)}, ["y"], W)
# SiLU as exporters write it, both operand orders; a depthwise and a strided conv; a 1x1 conv.
c.model("conv_silu", [conv(), N("Sigmoid", ["c"], ["s"]), N("Mul", ["c", "s"], ["y"])], X, ["y"], W)
c.model("conv_silu_swapped", [conv(), N("Sigmoid", ["c"], ["s"]), N("Mul", ["s", "c"], ["y"])], X,
        ["y"], W)
c.model("depthwise_silu", [N("Conv", ["x", "wd"], ["c"], group=3, pads=[2, 2, 2, 2], strides=[2, 2]),
                           N("Sigmoid", ["c"], ["s"]), N("Mul", ["c", "s"], ["y"])],
        X, ["y"], {"wd": rand(3, 1, 5, 5)})
c.model("pointwise_hardswish", [N("Conv", ["x", "w1"], ["c"]), N("HardSwish", ["c"], ["y"])], X, ["y"],
        {"w1": rand(7, 3, 1, 1)})
# Dilation so large that most kernel offsets only read padding (DeepLabV3's atrous convs).
c.model("atrous_conv_relu", [N("Conv", ["x", "w", "b"], ["c"], pads=[6, 6, 6, 6], dilations=[6, 6]),
                             N("Relu", ["c"], ["y"])], X, ["y"], W)
c.model("atrous_all_padding", [N("Conv", ["x", "w", "b"], ["y"], pads=[20, 20, 20, 20], dilations=[20, 20])],
        X, ["y"], W)
# Only the centre offset reads inside (DeepLabV3's dilation-24/36 convs on 14x14): one product
# over the input as it is, with the bias and the activation in its epilogue.
c.model("atrous_centre_only_hardswish", [
    N("Conv", ["x", "w", "b"], ["c"], pads=[20, 20, 20, 20], dilations=[20, 20]),
    N("HardSwish", ["c"], ["y"])], X, ["y"], W)
# Not fused: the conv output is a graph output too / read twice / SiLU's Sigmoid read elsewhere.
c.model("intermediate_is_output", [conv(), N("Relu", ["c"], ["y"])], X, ["c", "y"], W)
c.model("two_readers", [conv(), N("Relu", ["c"], ["r"]), N("Add", ["c", "r"], ["y"])], X, ["y"], W)
c.model("silu_sigmoid_read_twice", [conv(), N("Sigmoid", ["c"], ["s"]), N("Mul", ["c", "s"], ["m"]),
                                    N("Add", ["m", "s"], ["y"])], X, ["y"], W)
# Chains: conv -> relu -> conv -> silu, and Gemm + activation (a classifier head).
c.model("chain", [conv("c1"), N("Relu", ["c1"], ["r1"]), N("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
                  N("Sigmoid", ["c2"], ["s"]), N("Mul", ["s", "c2"], ["y"])],
        X, ["y"], {**W, "w2": rand(4, 6, 3, 3)})
c.model("gemm_relu", [N("Gemm", ["a", "wg", "bg"], ["g"], transB=1), N("Relu", ["g"], ["y"])],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(8, 16), "bg": rand(8)})
c.model("gemm_row_sigmoid", [N("Gemm", ["a", "wg"], ["g"]), N("Sigmoid", ["g"], ["y"])],
        {"a": rand(1, 16)}, ["y"], {"wg": rand(16, 8)})
# Gemm and MatMul with constant weights take the packed-weights path (backends/cpu/gemm_packed):
# transA, beta on a [1, N] bias, a full [M, N] C (not packed), MatMul with batch dims folded
# into M, and MatMul with run-time B (attention's per-head products).
c.model("gemm_transa_beta", [N("Gemm", ["a", "wg", "bg"], ["y"], transA=1, beta=0.5)],
        {"a": rand(16, 5)}, ["y"], {"wg": rand(16, 50), "bg": rand(1, 50)})
c.model("gemm_full_c", [N("Gemm", ["a", "wg", "bg"], ["y"], transB=1)],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(8, 16), "bg": rand(5, 8)})
c.model("matmul_weights_gelu", [N("MatMul", ["a", "wm"], ["m"]), N("Gelu", ["m"], ["y"])],
        {"a": rand(2, 7, 33)}, ["y"], {"wm": rand(33, 100)}, opset=20)
c.model("matmul_heads", [N("MatMul", ["q", "k"], ["y"])],
        {"q": rand(2, 3, 9, 16), "k": rand(2, 3, 16, 11)}, ["y"])
# MatMul + constant row bias (+ activation): BERT/ViT's projections; the bias first or second,
# as [N] or [1, 1, N]; a bias that broadcasts the product to a larger shape is not fused.
c.model("matmul_bias_gelu", [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["m", "bm"], ["s"]),
                             N("Gelu", ["s"], ["y"])],
        {"a": rand(2, 7, 33)}, ["y"], {"wm": rand(33, 100), "bm": rand(100)}, opset=20)
c.model("matmul_bias_first_3d", [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["bm", "m"], ["y"])],
        {"a": rand(2, 7, 33)}, ["y"], {"wm": rand(33, 20), "bm": rand(1, 1, 20)})
c.model("matmul_bias_broadcasts_up", [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["m", "bm"], ["y"])],
        {"a": rand(7, 33)}, ["y"], {"wm": rand(33, 20), "bm": rand(3, 1, 20)})
c.model("matmul_runtime_b_bias_relu", [N("MatMul", ["a", "b"], ["m"]), N("Add", ["m", "bm"], ["s"]),
                                       N("Relu", ["s"], ["y"])],
        {"a": rand(2, 5, 8), "b": rand(2, 8, 6)}, ["y"], {"bm": rand(6)})
# Convolutions computed window offset by window offset (most of the unfolded input would be
# padding): groups, stride, no bias, a batch, SiLU after.
c.model("atrous_grouped_strided_silu", [
    N("Conv", ["x", "wa"], ["c"], pads=[5, 4, 5, 4], dilations=[5, 4], strides=[2, 1], group=3),
    N("Sigmoid", ["c"], ["s"]), N("Mul", ["c", "s"], ["y"])],
    {"x": rand(2, 6, 7, 6)}, ["y"], {"wa": rand(9, 2, 3, 3)})
# Small images with many output channels (ResNet-50's 7x7 stage): rows of 49 or 36 floats are
# not whole cache lines, so the GEMM splits its rows across threads, not its column strips. A 3x3
# conv with bias and Relu over a batch, a strided 1x1 conv, and a pointwise one without bias.
c.model("small_map_3x3_relu", [N("Conv", ["x", "w96", "b96"], ["c"], pads=[1, 1, 1, 1]),
                                    N("Relu", ["c"], ["y"])],
        {"x": rand(2, 16, 7, 7)}, ["y"], {"w96": rand(96, 16, 3, 3), "b96": rand(96)})
c.model("small_map_1x1_strided", [N("Conv", ["x", "w144", "b144"], ["y"], strides=[2, 2])],
        {"x": rand(1, 24, 13, 13)}, ["y"], {"w144": rand(144, 24, 1, 1), "b144": rand(144)})
c.model("small_map_pointwise", [N("Conv", ["x", "w48"], ["y"])],
        {"x": rand(1, 40, 7, 7)}, ["y"], {"w48": rand(48, 40, 1, 1)})
# Residual connections (fusion.hpp: Conv -> Add(c, r) -> activation). The shortcut computed
# after the main conv, as ResNet's downsample (the fused conv moves after it), on a product big
# enough for several GEMM tasks; a padded 3x3 whose product is wider than the output; a batch of
# small images; a depthwise conv; a dilated conv computed offset by offset; a small map
# (gemm_channels); a 3-D conv; SiLU after the sum; shifted inputs of more than 4 MB, multiplied
# a band of output rows at a time (conv.cpp's run_shifted_bands: a product wider than the
# output, and one as wide). The input itself is the residual in most.
c.model("residual_downsample_relu", [
    N("Conv", ["x", "wm", "bm72"], ["m"]), N("Conv", ["x", "ws"], ["s"]),
    N("Add", ["m", "s"], ["a"]), N("Relu", ["a"], ["y"])],
    {"x": rand(1, 48, 20, 20)}, ["y"],
    {"wm": rand(72, 48, 1, 1), "bm72": rand(72), "ws": rand(72, 48, 1, 1)})
c.model("residual_3x3_wide", [N("Conv", ["x", "w6", "b6"], ["c"], pads=[1, 1, 1, 1]),
                              N("Add", ["x", "c"], ["a"]), N("Relu", ["a"], ["y"])],
        {"x": rand(1, 6, 11, 9)}, ["y"], {"w6": rand(6, 6, 3, 3), "b6": rand(6)})
c.model("residual_3x3_in_bands_relu", [N("Conv", ["x", "w16", "b16"], ["c"], pads=[1, 1, 1, 1]),
                                       N("Add", ["x", "c"], ["a"]), N("Relu", ["a"], ["y"])],
        {"x": rand(1, 16, 262, 262)}, ["y"], {"w16": rand(16, 16, 3, 3), "b16": rand(16)})
c.model("residual_2x2_stride2_in_bands_relu", [N("Conv", ["x", "w2"], ["c"], strides=[2, 2]),
                                               N("Add", ["c", "r"], ["a"]), N("Relu", ["a"], ["y"])],
        {"x": rand(1, 16, 264, 264), "r": rand(1, 8, 132, 132)}, ["y"], {"w2": rand(8, 16, 2, 2)})
# The same stored straight into y (rows of 32 or more): the residual read back and the
# activation applied in the product's registers; Tanh, which they have no form for, keeps the
# wide product and its copy.
c.model("residual_narrow_hardswish", [N("Conv", ["x", "w24", "b24"], ["c"], pads=[1, 1, 1, 1]),
                                      N("Add", ["c", "r"], ["a"]), N("HardSwish", ["a"], ["y"])],
        {"x": rand(1, 16, 34, 40), "r": rand(1, 24, 34, 40)}, ["y"],
        {"w24": rand(24, 16, 3, 3), "b24": rand(24)})
c.model("narrow_tanh", [N("Conv", ["x", "w8"], ["c"], pads=[1, 1, 1, 1]), N("Tanh", ["c"], ["y"])],
        {"x": rand(1, 8, 20, 40)}, ["y"], {"w8": rand(8, 8, 3, 3)})
c.model("residual_small_batch", [N("Conv", ["x", "w6"], ["c"], pads=[1, 1, 1, 1]),
                                 N("Add", ["c", "x"], ["a"]), N("Relu", ["a"], ["y"])],
        {"x": rand(3, 6, 8, 8)}, ["y"], {"w6": rand(6, 6, 3, 3)})
c.model("residual_depthwise_hardswish", [
    N("Conv", ["x", "wdw6"], ["c"], group=6, pads=[1, 1, 1, 1]), N("Add", ["c", "x"], ["a"]),
    N("HardSwish", ["a"], ["y"])], {"x": rand(1, 6, 9, 10)}, ["y"], {"wdw6": rand(6, 1, 3, 3)})
c.model("residual_atrous_relu", [
    N("Conv", ["x", "w4"], ["c"], pads=[6, 6, 6, 6], dilations=[6, 6]),
    N("Add", ["c", "x"], ["a"]), N("Relu", ["a"], ["y"])],
    {"x": rand(1, 4, 7, 7)}, ["y"], {"w4": rand(4, 4, 3, 3)})
# Pointwise convs of depth 256-511 on maps up to 28x28 go to gemm_channels too (ResNet-50's
# 256 -> 1024 on 14x14 with its residual, and its stride-2 downsample; a ragged depth and a
# channel tail: 120 = 64 + 56).
c.model("residual_small_map_pointwise_deep", [
    N("Conv", ["x", "wp", "bp"], ["c"]), N("Add", ["c", "r"], ["a"]), N("Relu", ["a"], ["y"])],
    {"x": rand(1, 256, 14, 14), "r": rand(1, 120, 14, 14)}, ["y"],
    {"wp": rand(120, 256, 1, 1), "bp": rand(120)})
# The residual and the activation finished in gemm_channels' store: SiLU on a 28x28 map in
# output-row bands (q0 > 0), and Tanh, which has no 16-lane form, finished in a pass after.
c.model("residual_small_map_pointwise_silu", [
    N("Conv", ["x", "wq", "bq"], ["c"]), N("Add", ["c", "r"], ["a"]),
    N("Sigmoid", ["a"], ["s"]), N("Mul", ["a", "s"], ["y"])],
    {"x": rand(1, 256, 28, 28), "r": rand(1, 120, 28, 28)}, ["y"],
    {"wq": rand(120, 256, 1, 1), "bq": rand(120)})
c.model("residual_small_map_tanh", [
    N("Conv", ["x", "wt", "bt"], ["c"], pads=[1, 1, 1, 1]), N("Add", ["c", "x"], ["a"]),
    N("Tanh", ["a"], ["y"])], {"x": rand(1, 64, 6, 6)}, ["y"],
    {"wt": rand(64, 64, 3, 3), "bt": rand(64)})
c.model("small_map_pointwise_strided_deep", [N("Conv", ["x", "ws"], ["y"], strides=[2, 2])],
        {"x": rand(1, 300, 27, 28)}, ["y"], {"ws": rand(128, 300, 1, 1)})
c.model("residual_small_map_hardswish", [
    N("Conv", ["x", "w72", "b72"], ["c"], pads=[1, 1, 1, 1]), N("Add", ["c", "x"], ["a"]),
    N("HardSwish", ["a"], ["y"])], {"x": rand(1, 72, 6, 6)}, ["y"],
    {"w72": rand(72, 72, 3, 3), "b72": rand(72)})
# Few input channels (conv_few_channels.cpp): the residual added after the direct kernel, and an
# activation act16 has no form for (Tanh, applied to y's rows after the transpose).
c.model("residual_few_channels_relu", [
    N("Conv", ["x", "wf", "bf"], ["c"], pads=[1, 2, 1, 2], strides=[2, 2]),
    N("Add", ["c", "r"], ["a"]), N("Relu", ["a"], ["y"])],
    {"x": rand(2, 3, 17, 20), "r": rand(2, 40, 9, 10)}, ["y"], {"wf": rand(40, 3, 3, 5), "bf": rand(40)})
c.model("few_channels_tanh", [N("Conv", ["x", "wt", "bt"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
                              N("Tanh", ["c"], ["y"])],
        {"x": rand(1, 2, 15, 13)}, ["y"], {"wt": rand(40, 2, 4, 4), "bt": rand(40)})
# Dilated convs on small maps with constant weights, offset by offset (run_by_tap_channels), two
# groups: only the centre offset live, the activation in its product; and several offsets, the
# activation after the last.
c.model("atrous_small_map_centre_hardswish", [
    N("Conv", ["x", "wg"], ["c"], group=2, pads=[7, 7, 7, 7], dilations=[7, 7]),
    N("HardSwish", ["c"], ["y"])], {"x": rand(1, 16, 6, 6)}, ["y"], {"wg": rand(24, 8, 3, 3)})
c.model("atrous_small_map_group_relu", [
    N("Conv", ["x", "wg", "bg"], ["c"], group=2, pads=[4, 4, 4, 4], dilations=[4, 4]),
    N("Relu", ["c"], ["y"])], {"x": rand(1, 16, 7, 8)}, ["y"],
    {"wg": rand(24, 8, 3, 3), "bg": rand(24)})
c.model("residual_3d", [N("Conv", ["x", "w3d"], ["c"], pads=[1, 1, 1, 1, 1, 1]),
                        N("Add", ["c", "x"], ["y"])],
        {"x": rand(1, 3, 4, 5, 6)}, ["y"], {"w3d": rand(3, 3, 3, 3, 3)})
c.model("residual_silu", [N("Conv", ["x", "w6"], ["c"], pads=[1, 1, 1, 1]),
                          N("Add", ["c", "x"], ["a"]), N("Sigmoid", ["a"], ["s"]),
                          N("Mul", ["a", "s"], ["y"])],
        {"x": rand(1, 6, 12, 12)}, ["y"], {"w6": rand(6, 6, 3, 3)})
# Gemm followed by a row bias Add (GPT-2's projections), with and without its own C.
c.model("gemm_add_bias_tanh", [N("Gemm", ["a", "wg"], ["g"]), N("Add", ["g", "bm"], ["s"]),
                               N("Tanh", ["s"], ["y"])],
        {"a": rand(6, 16)}, ["y"], {"wg": rand(16, 50), "bm": rand(50)})
c.model("gemm_c_and_add_bias", [N("Gemm", ["a", "wg", "bg"], ["g"], beta=2.0), N("Add", ["bm", "g"], ["y"])],
        {"a": rand(6, 16)}, ["y"], {"wg": rand(16, 50), "bg": rand(50), "bm": rand(50)})
c.model("gemm_runtime_b_add_bias", [N("Gemm", ["a", "b"], ["g"], alpha=0.5), N("Add", ["g", "bm"], ["s"]),
                                    N("Relu", ["s"], ["y"])],
        {"a": rand(6, 16), "b": rand(16, 5)}, ["y"], {"bm": rand(5)})

