"""Cases of the nn op family: Conv, ConvTranspose, Gemm, MatMul and the pools (MaxPool,
AveragePool, LpPool, MaxUnpool, global pools), float32 unless noted."""
import numpy as np

from casegen import DEFAULT_OPSET, Cases, rand, randint
from onnx import TensorProto, helper


class NnCases(Cases):
    """Cases.node with declared output types: onnxruntime rejects outputs of type
    UNDEFINED, which Cases.node declares. Output 0 has input 0's dtype (int32 for the
    *Integer ops); output 1 (MaxPool's Indices) is int64."""

    def node(self, name, op_type, inputs, n_outputs=1, initializers=None, opset=DEFAULT_OPSET,
             rtol=1e-4, atol=1e-5, expected=None, domain="", **attrs):
        names = list(inputs) + list(initializers or {})
        outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
        dtype = helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype)
        if op_type in ("MatMulInteger", "ConvInteger"):
            dtype = TensorProto.INT32
        types = {o: TensorProto.INT64 if i == 1 else dtype for i, o in enumerate(outs)}
        node = helper.make_node(op_type, names, outs, name=name, domain=domain, **attrs)
        self.model(name, [node], inputs, outs, initializers, opset, rtol, atol, expected,
                   output_types=types)


def pool_negative_same(op_type, x, kernel_shape, strides, auto_pad):
    """MaxPool/AveragePool/LpPool (p = 2) with auto_pad SAME where the spec's total padding
    (out - 1) * stride + kernel - in is negative (out = ceil(in / stride)): split as a positive
    total is (SAME_UPPER: head = total // 2, SAME_LOWER: head = total - total // 2), a negative
    head skips input pixels at the start. Each window then lies inside the input (the cases
    below), so no pad value enters a max or a mean."""
    spatial = x.shape[2:]
    starts = []
    for n, k, st in zip(spatial, kernel_shape, strides):
        out = -(-n // st)
        total = (out - 1) * st + k - n
        assert total < 0 and total % 2 == 0, "the cases below: an even negative total"
        head = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        starts.append([o * st - head for o in range(out)])
    reduce = {"MaxPool": np.max, "AveragePool": np.mean,
              "LpPool": lambda w, axis: np.sqrt(np.sum(w.astype(np.float64) ** 2, axis=axis))}[op_type]
    y = np.empty(x.shape[:2] + tuple(len(s_) for s_ in starts), x.dtype)
    for pos in np.ndindex(*y.shape[2:]):
        window = tuple(slice(starts[d][p], starts[d][p] + kernel_shape[d]) for d, p in enumerate(pos))
        assert all(0 <= w.start and w.stop <= n for w, n in zip(window, spatial))
        y[(...,) + pos] = reduce(x[(...,) + window], axis=tuple(range(2, x.ndim)))
    return y


c = NnCases("nn")
CONV_TOL = dict(rtol=1e-4, atol=1e-4)

# ---- Conv ----
c.node("conv2d_basic", "Conv", {"x": rand(1, 3, 7, 7), "w": rand(4, 3, 3, 3)}, **CONV_TOL)
c.node("conv2d_bias_pads", "Conv", {"x": rand(2, 3, 6, 5), "w": rand(5, 3, 3, 3), "b": rand(5)},
       pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_asym_pads_strides", "Conv", {"x": rand(1, 2, 9, 8), "w": rand(3, 2, 3, 2)},
       pads=[0, 2, 1, 0], strides=[2, 3], **CONV_TOL)
c.node("conv2d_dilations", "Conv", {"x": rand(1, 2, 10, 9), "w": rand(3, 2, 3, 3)},
       dilations=[2, 3], pads=[1, 1, 2, 2], **CONV_TOL)
# A keyword spotter's first conv: one input channel, 10x4 stride 2 onto a 25x5 map, whose GEMM
# rows are wider than the output rows (copied out a masked vector per row on AVX-512); with a
# constant weight and bias, and as a 64-channel layer.
c.node("conv2d_kws_first_layer", "Conv", {"x": rand(1, 1, 49, 10)}, pads=[4, 1, 5, 2], strides=[2, 2],
       initializers={"w": rand(64, 1, 10, 4), "b": rand(64)}, **CONV_TOL)
c.node("conv2d_narrow_output_rows", "Conv", {"x": rand(2, 3, 13, 12), "w": rand(5, 3, 3, 3)},
       pads=[1, 1, 1, 1], strides=[2, 2], **CONV_TOL)
c.node("conv2d_pad_larger_than_kernel", "Conv", {"x": rand(1, 2, 4, 5), "w": rand(2, 2, 2, 2)},
       pads=[3, 4, 3, 2], **CONV_TOL)
c.node("conv2d_stride_gt_kernel", "Conv", {"x": rand(1, 3, 11, 10), "w": rand(2, 3, 2, 2)},
       strides=[4, 3], **CONV_TOL)
# A shifted input of more than 4 MB is laid out and multiplied a band of output rows at a time
# (conv.cpp, run_shifted_bands): stride 2 (four phase planes, the product as wide as the output)
# and stride 1 padded (the product wider than the output, copied out).
c.node("conv2d_shifted_in_bands_stride2", "Conv", {"x": rand(1, 16, 272, 272), "w": rand(8, 16, 3, 3),
       "b": rand(8)}, pads=[1, 1, 1, 1], strides=[2, 2], **CONV_TOL)
c.node("conv2d_shifted_in_bands_padded", "Conv", {"x": rand(1, 16, 262, 262), "w": rand(5, 16, 3, 3)},
       pads=[1, 1, 1, 1], **CONV_TOL)
# Copies just past the bands' 4 MB threshold: a dilated 5x5 (a halo of 9 rows) on a tall map, and
# a 3x1 kernel at stride (2, 1) (two row phases) on a batch of two (each image in its own bands).
c.node("conv2d_dilated_in_bands", "Conv", {"x": rand(1, 8, 1100, 120), "w": rand(4, 8, 5, 5),
       "b": rand(4)}, pads=[4, 4, 4, 4], dilations=[2, 2], **CONV_TOL)
c.node("conv2d_tall_kernel_in_bands_batch2", "Conv", {"x": rand(2, 8, 340, 400),
       "w": rand(4, 8, 3, 1)}, pads=[1, 0, 1, 0], strides=[2, 1], **CONV_TOL)
# Products over shifted rows wider than the output's rows (32 columns or more) store the output
# columns straight into y (gemm_packed's NarrowCols): a depth of 864 (two depth blocks: the
# partial sums read back) onto 20 channels (a tail of 4 rows); a 1x17 kernel padded 8 on each
# side (rows 56 wide: whole vectors dropped); stride 2 (phase planes, 33 columns);
# two groups; a row of exactly 32.
c.node("conv2d_narrow_deep", "Conv", {"x": rand(1, 96, 40, 36)}, pads=[1, 1, 1, 1],
       initializers={"w": rand(20, 96, 3, 3), "b": rand(20)}, rtol=1e-4, atol=1e-3)
c.node("conv2d_narrow_wide_padding", "Conv", {"x": rand(1, 4, 9, 40), "w": rand(6, 4, 1, 17)},
       pads=[0, 8, 0, 8], **CONV_TOL)
c.node("conv2d_narrow_stride2", "Conv", {"x": rand(1, 8, 70, 66)}, strides=[2, 2],
       pads=[1, 1, 1, 1], initializers={"w": rand(16, 8, 3, 3), "b": rand(16)}, **CONV_TOL)
c.node("conv2d_narrow_group", "Conv", {"x": rand(1, 16, 34, 33), "w": rand(16, 8, 3, 3)},
       group=2, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_narrow_32", "Conv", {"x": rand(1, 6, 12, 32), "w": rand(5, 6, 3, 3)},
       pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_1x1", "Conv", {"x": rand(2, 8, 5, 7), "w": rand(6, 8, 1, 1), "b": rand(6)},
       **CONV_TOL)
c.node("conv2d_1x1_stride2", "Conv", {"x": rand(1, 4, 7, 7), "w": rand(6, 4, 1, 1)},
       strides=[2, 2], **CONV_TOL)
c.node("conv2d_1x1_pad", "Conv", {"x": rand(1, 4, 3, 3), "w": rand(2, 4, 1, 1)},
       pads=[1, 0, 1, 2], **CONV_TOL)
c.node("conv2d_group2", "Conv", {"x": rand(2, 4, 6, 6), "w": rand(6, 2, 3, 3), "b": rand(6)},
       group=2, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_group2_1x1", "Conv", {"x": rand(1, 6, 5, 5), "w": rand(4, 3, 1, 1)}, group=2,
       **CONV_TOL)
c.node("conv2d_depthwise", "Conv", {"x": rand(2, 5, 9, 8), "w": rand(5, 1, 3, 3), "b": rand(5)},
       group=5, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_depthwise_stride2", "Conv", {"x": rand(1, 4, 10, 11), "w": rand(4, 1, 5, 5)},
       group=4, strides=[2, 2], pads=[2, 2, 2, 2], **CONV_TOL)
c.node("conv2d_depthwise_dilated", "Conv", {"x": rand(1, 3, 9, 9), "w": rand(3, 1, 3, 3)},
       group=3, dilations=[2, 2], pads=[2, 1, 0, 3], **CONV_TOL)
c.node("conv2d_depthwise_multiplier2", "Conv", {"x": rand(1, 3, 6, 6), "w": rand(6, 1, 3, 3)},
       group=3, **CONV_TOL)
# Hostile geometry: huge strides (one output along the dim, whatever the stride) and padding far
# wider than the window. These once spun for minutes or asked for terabytes; onnxruntime runs
# them at once, and so must Quilt (the direct kernel, conv_direct.cpp, for the wide padding).
HUGE = 2 ** 40
c.node("conv2d_depthwise_huge_stride", "Conv", {"x": rand(1, 1, 7, 5), "w": rand(1, 1, 3, 3)},
       strides=[1, HUGE], **CONV_TOL)
c.node("conv2d_depthwise_huge_strides_8ch", "Conv", {"x": rand(1, 8, 7, 5), "w": rand(8, 1, 3, 3)},
       group=8, strides=[HUGE, 2 ** 32], **CONV_TOL)
c.node("conv2d_dense_huge_stride", "Conv", {"x": rand(1, 3, 7, 5), "w": rand(4, 3, 3, 3), "b": rand(4)},
       strides=[HUGE, HUGE], **CONV_TOL)
c.node("conv3d_depthwise_huge_stride", "Conv", {"x": rand(1, 2, 3, 4, 5), "w": rand(2, 1, 2, 2, 2)},
       group=2, strides=[HUGE, 1, HUGE], **CONV_TOL)
c.node("conv2d_depthwise_huge_pads_and_stride", "Conv", {"x": rand(1, 4, 7, 5), "w": rand(4, 1, 3, 3)},
       group=4, strides=[1, HUGE], pads=[0, HUGE, 0, HUGE], **CONV_TOL)
c.node("conv2d_direct_wide_padding", "Conv", {"x": rand(1, 4, 5, 6), "w": rand(6, 2, 3, 3), "b": rand(6)},
       group=2, strides=[201, 202], pads=[200, 200, 200, 200], **CONV_TOL)
c.node("conv2d_same_upper", "Conv", {"x": rand(1, 2, 7, 6), "w": rand(3, 2, 4, 3)},
       auto_pad="SAME_UPPER", strides=[2, 2], **CONV_TOL)
c.node("conv2d_same_lower", "Conv", {"x": rand(1, 2, 7, 6), "w": rand(3, 2, 4, 3)},
       auto_pad="SAME_LOWER", **CONV_TOL)
c.node("conv2d_same_lower_stride", "Conv", {"x": rand(1, 2, 8, 9), "w": rand(3, 2, 3, 3)},
       auto_pad="SAME_LOWER", strides=[2, 2], **CONV_TOL)
c.node("conv2d_depthwise_same_upper", "Conv", {"x": rand(1, 3, 8, 8), "w": rand(3, 1, 3, 3)},
       group=3, auto_pad="SAME_UPPER", strides=[2, 2], **CONV_TOL)
c.node("conv2d_valid", "Conv", {"x": rand(1, 2, 7, 8), "w": rand(3, 2, 3, 2)}, auto_pad="VALID",
       strides=[2, 3], **CONV_TOL)
c.node("conv2d_kernel_shape_attr", "Conv", {"x": rand(1, 2, 5, 5), "w": rand(2, 2, 3, 3)},
       kernel_shape=[3, 3], **CONV_TOL)
c.node("conv2d_weights_const", "Conv", {"x": rand(2, 3, 8, 8)},
       initializers={"w": rand(4, 3, 3, 3), "b": rand(4)}, pads=[1, 1, 1, 1], strides=[2, 2],
       **CONV_TOL)
c.node("conv2d_resnet_stem", "Conv", {"x": rand(1, 3, 32, 32)},
       initializers={"w": rand(8, 3, 7, 7), "b": rand(8)}, pads=[3, 3, 3, 3], strides=[2, 2],
       **CONV_TOL)
c.node("conv2d_odd_large", "Conv", {"x": rand(3, 7, 13, 11), "w": rand(9, 7, 3, 3)},
       pads=[1, 1, 1, 1], **CONV_TOL)
# Large enough for the GEMM's blocking (depth > 256, more than 64 output channels with a row
# tail, many 48-column strips, two images) on the shifted-input path (ConvKernel's ShiftedInput):
# stride 1; strides and dilations that use several phase planes with asymmetric pads; a strided
# 1x1 conv whose planes are exactly the output's width.
c.node("conv2d_shifted_blocks", "Conv", {"x": rand(2, 40, 23, 21)},
       initializers={"w": rand(70, 40, 3, 3), "b": rand(70)}, pads=[1, 1, 1, 1],
       rtol=1e-4, atol=1e-3)
c.node("conv2d_shifted_phases", "Conv", {"x": rand(1, 24, 30, 27)},
       initializers={"w": rand(20, 24, 3, 5)}, pads=[2, 3, 1, 4], strides=[2, 3],
       dilations=[2, 1], rtol=1e-4, atol=1e-3)
c.node("conv2d_shifted_wide_pads", "Conv", {"x": rand(1, 8, 30, 17)},
       initializers={"w": rand(4, 8, 2, 2), "b": rand(4)}, pads=[5, 4, 3, 6], **CONV_TOL)
c.node("conv2d_shifted_1x1_stride2", "Conv", {"x": rand(1, 16, 31, 30)},
       initializers={"w": rand(24, 16, 1, 1), "b": rand(24)}, strides=[2, 2], **CONV_TOL)
# Small maps with constant weights go to gemm_channels (64 output channels x up to 7 pixels per
# tile): depth past its 1024 block with a 7 + 2 pixel row, two images and a channel tail
# (70 = 64 + 6); a strided grouped conv onto 7x7; a 1x1 map (squeeze-excitation); a 20x20 map
# deep enough for the path; a 1x1 conv onto 7x7 with a tail of 16 channels.
c.node("conv2d_small_map_deep", "Conv", {"x": rand(2, 130, 7, 9)},
       initializers={"w": rand(70, 130, 3, 3), "b": rand(70)}, pads=[1, 1, 1, 1],
       rtol=1e-4, atol=1e-3)
c.node("conv2d_small_map_group_stride", "Conv", {"x": rand(1, 64, 13, 13)},
       initializers={"w": rand(96, 32, 3, 3)}, group=2, strides=[2, 2], pads=[1, 1, 1, 1],
       rtol=1e-4, atol=1e-3)
c.node("conv2d_small_map_pixel", "Conv", {"x": rand(1, 200, 1, 1)},
       initializers={"w": rand(72, 200, 1, 1), "b": rand(72)}, **CONV_TOL)
c.node("conv2d_small_map_20x20", "Conv", {"x": rand(1, 64, 20, 20)},
       initializers={"w": rand(128, 64, 3, 3), "b": rand(128)}, pads=[1, 1, 1, 1],
       rtol=1e-4, atol=1e-3)
# A dilated 3x3 conv on 14x14 (FCN's dilated layers): gemm_channels over shifted rows on every
# CPU, the map's pixels only where gemm_packed would compute the padded width and drop it.
c.node("conv2d_small_map_dilated", "Conv", {"x": rand(1, 32, 14, 14)},
       initializers={"w": rand(72, 32, 3, 3), "b": rand(72)}, pads=[2, 2, 2, 2],
       dilations=[2, 2], rtol=1e-4, atol=1e-3)
c.node("conv2d_small_map_1x1", "Conv", {"x": rand(1, 96, 7, 7)},
       initializers={"w": rand(80, 96, 1, 1), "b": rand(80)}, **CONV_TOL)
# A dilated conv on a small map whose offsets mostly read padding: computed offset by offset
# from the weights packed for gemm_channels (ConvKernel::run_by_tap_channels); rectangles at
# every edge, several pixels wide.
c.node("conv2d_small_map_atrous", "Conv", {"x": rand(2, 24, 7, 8)},
       initializers={"w": rand(40, 24, 3, 3), "b": rand(40)}, pads=[4, 4, 4, 4],
       dilations=[4, 4], rtol=1e-4, atol=1e-3)
# 1-D convs on small maps with constant weights: gemm_channels (vectors along the output
# channels), as the 2-D ones; the first is the VAD's STFT written as a strided conv.
c.node("conv1d_small_map_const_stft", "Conv", {"x": rand(1, 1, 640)},
       initializers={"w": rand(258, 1, 256), "b": rand(258)}, strides=[128], **CONV_TOL)
c.node("conv1d_small_map_const_pads", "Conv", {"x": rand(2, 129, 5)},
       initializers={"w": rand(128, 129, 3), "b": rand(128)}, pads=[1, 1], **CONV_TOL)
c.node("conv1d_small_map_const_group_stride", "Conv", {"x": rand(1, 8, 23)},
       initializers={"w": rand(16, 4, 5)}, group=2, strides=[2], pads=[2, 1], **CONV_TOL)
# Constant weights with taps that only ever read padding (left out of the GEMM's K, the rest
# packed once per shape): the VAD's last convs, stride 2 onto one sample and 3 taps on one
# sample (2 of 3 taps dead: a product per live tap); a 2-D one whose second kernel row
# reads only padding, two groups. dyn_conv_dead_taps below is
# the first with a symbolic length, whose live taps are found at run time.
c.node("conv1d_const_dead_taps_stride", "Conv", {"x": rand(1, 64, 2)},
       initializers={"w": rand(64, 64, 3), "b": rand(64)}, pads=[1, 1], strides=[2], **CONV_TOL)
c.node("conv1d_const_dead_taps_one_sample", "Conv", {"x": rand(1, 64, 1)},
       initializers={"w": rand(128, 64, 3), "b": rand(128)}, pads=[1, 1], **CONV_TOL)
c.node("conv2d_const_dead_taps_groups", "Conv", {"x": rand(2, 8, 3, 6)},
       initializers={"w": rand(6, 4, 2, 3)}, group=2, dilations=[4, 1], pads=[0, 0, 4, 0],
       **CONV_TOL)
# Few input channels (at most 4) and a window at most 64 deep, strided, at least 32 output
# channels, constant weights, maps up to 4096 pixels: the direct kernel with output channels
# along the vectors (conv_few_channels.cpp). The keyword-spotting net's first conv (1 -> 64,
# 10x4, stride 2, asymmetric pads); a ragged channel count (70: a full block of 64 and a 6-channel
# one) with dilation and mixed strides over a batch (images split across threads); 3 groups of
# one input channel and 32 outputs each, no bias; a map large enough to split its pixels across
# threads (3844 pixels, 64 deep, 48 channels); a 1-D conv with stride, dilation and pads.
c.node("conv2d_few_channels_kws", "Conv", {"x": rand(1, 1, 49, 10)},
       initializers={"w": rand(64, 1, 10, 4), "b": rand(64)}, strides=[2, 2], pads=[4, 1, 5, 2],
       **CONV_TOL)
c.node("conv2d_few_channels_ragged", "Conv", {"x": rand(2, 2, 17, 19)},
       initializers={"w": rand(70, 2, 3, 5), "b": rand(70)}, strides=[1, 3], dilations=[2, 1],
       pads=[2, 0, 1, 3], **CONV_TOL)
c.node("conv2d_few_channels_groups", "Conv", {"x": rand(1, 3, 11, 12)},
       initializers={"w": rand(96, 1, 5, 5)}, group=3, strides=[2, 1], pads=[2, 2, 2, 2],
       **CONV_TOL)
c.node("conv2d_few_channels_split", "Conv", {"x": rand(1, 1, 130, 130)},
       initializers={"w": rand(48, 1, 8, 8), "b": rand(48)}, strides=[2, 2], rtol=1e-4, atol=1e-3)
c.node("conv1d_few_channels", "Conv", {"x": rand(1, 3, 50)},
       initializers={"w": rand(33, 3, 7), "b": rand(33)}, strides=[3], dilations=[2], pads=[3, 2],
       **CONV_TOL)
c.node("conv1d_basic", "Conv", {"x": rand(2, 3, 10), "w": rand(4, 3, 3), "b": rand(4)},
       **CONV_TOL)
c.node("conv1d_strides_pads_dil", "Conv", {"x": rand(1, 2, 17), "w": rand(3, 2, 4)},
       strides=[3], pads=[2, 1], dilations=[2], **CONV_TOL)
c.node("conv1d_depthwise", "Conv", {"x": rand(1, 4, 12), "w": rand(4, 1, 5)}, group=4,
       pads=[2, 2], **CONV_TOL)
c.node("conv1d_same_upper", "Conv", {"x": rand(1, 2, 9), "w": rand(2, 2, 4)},
       auto_pad="SAME_UPPER", **CONV_TOL)
c.node("conv3d_basic", "Conv", {"x": rand(1, 2, 5, 6, 7), "w": rand(3, 2, 3, 3, 3), "b": rand(3)},
       **CONV_TOL)
c.node("conv3d_pads_strides_dil", "Conv", {"x": rand(2, 2, 6, 7, 8), "w": rand(4, 2, 2, 3, 2)},
       pads=[1, 0, 1, 0, 2, 1], strides=[2, 1, 3], dilations=[1, 2, 1], **CONV_TOL)
c.node("conv3d_group", "Conv", {"x": rand(1, 4, 4, 5, 5), "w": rand(4, 2, 2, 2, 2)}, group=2,
       **CONV_TOL)
c.node("conv3d_depthwise", "Conv", {"x": rand(1, 3, 5, 5, 5), "w": rand(3, 1, 3, 3, 3)}, group=3,
       pads=[1, 1, 1, 1, 1, 1], **CONV_TOL)
c.node("conv3d_1x1", "Conv", {"x": rand(1, 3, 3, 4, 5), "w": rand(2, 3, 1, 1, 1)}, **CONV_TOL)
c.node("conv2d_opset1", "Conv", {"x": rand(1, 2, 5, 5), "w": rand(2, 2, 3, 3)}, opset=1,
       **CONV_TOL)
c.node("conv2d_opset11", "Conv", {"x": rand(1, 2, 5, 5), "w": rand(2, 2, 3, 3)}, opset=11,
       pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_opset22", "Conv", {"x": rand(1, 2, 5, 5), "w": rand(2, 2, 3, 3)}, opset=22,
       strides=[2, 2], **CONV_TOL)

# ---- ConvTranspose ----
c.node("convt2d_basic", "ConvTranspose", {"x": rand(1, 2, 3, 3), "w": rand(2, 3, 3, 3)},
       **CONV_TOL)
c.node("convt2d_bias_strides", "ConvTranspose",
       {"x": rand(2, 3, 4, 3), "w": rand(3, 2, 3, 3), "b": rand(2)}, strides=[2, 3], **CONV_TOL)
c.node("convt2d_pads", "ConvTranspose", {"x": rand(1, 2, 4, 4), "w": rand(2, 3, 3, 3)},
       strides=[2, 2], pads=[1, 0, 1, 2], **CONV_TOL)
c.node("convt2d_output_padding", "ConvTranspose", {"x": rand(1, 2, 3, 4), "w": rand(2, 2, 3, 3)},
       strides=[3, 2], output_padding=[2, 1], pads=[1, 1, 1, 1], **CONV_TOL)
c.node("convt2d_dilations", "ConvTranspose", {"x": rand(1, 2, 4, 4), "w": rand(2, 2, 3, 2)},
       dilations=[2, 3], **CONV_TOL)
c.node("convt2d_group", "ConvTranspose",
       {"x": rand(2, 4, 3, 3), "w": rand(4, 3, 2, 2), "b": rand(6)}, group=2, strides=[2, 2],
       **CONV_TOL)
c.node("convt2d_depthwise", "ConvTranspose", {"x": rand(1, 3, 4, 4), "w": rand(3, 1, 3, 3)},
       group=3, strides=[2, 2], pads=[1, 1, 1, 1], **CONV_TOL)
c.node("convt2d_output_shape", "ConvTranspose", {"x": rand(1, 2, 3, 3), "w": rand(2, 2, 3, 3)},
       strides=[3, 2], output_shape=[10, 8], **CONV_TOL)
c.node("convt2d_output_shape_odd", "ConvTranspose", {"x": rand(1, 2, 4, 4), "w": rand(2, 2, 3, 3)},
       strides=[2, 2], output_shape=[8, 7], **CONV_TOL)
c.node("convt2d_same_upper", "ConvTranspose", {"x": rand(1, 2, 3, 4), "w": rand(2, 2, 3, 3)},
       strides=[2, 2], auto_pad="SAME_UPPER", **CONV_TOL)
c.node("convt2d_same_lower", "ConvTranspose", {"x": rand(1, 2, 3, 4), "w": rand(2, 2, 3, 3)},
       strides=[2, 2], auto_pad="SAME_LOWER", **CONV_TOL)
c.node("convt2d_valid", "ConvTranspose", {"x": rand(1, 2, 3, 4), "w": rand(2, 2, 2, 3)},
       strides=[2, 1], auto_pad="VALID", **CONV_TOL)
c.node("convt2d_kernel_shape", "ConvTranspose", {"x": rand(1, 1, 3, 3), "w": rand(1, 2, 3, 3)},
       kernel_shape=[3, 3], strides=[3, 2], output_padding=[1, 1], **CONV_TOL)
c.node("convt2d_const_weights", "ConvTranspose", {"x": rand(1, 4, 5, 5)},
       initializers={"w": rand(4, 4, 4, 4), "b": rand(4)}, strides=[2, 2], pads=[1, 1, 1, 1],
       **CONV_TOL)
c.node("convt1d", "ConvTranspose", {"x": rand(2, 3, 5), "w": rand(3, 2, 3), "b": rand(2)},
       strides=[2], **CONV_TOL)
c.node("convt1d_pads_dil", "ConvTranspose", {"x": rand(1, 2, 6), "w": rand(2, 3, 4)},
       strides=[3], pads=[2, 1], dilations=[2], **CONV_TOL)
c.node("convt3d", "ConvTranspose", {"x": rand(1, 2, 3, 4, 3), "w": rand(2, 3, 3, 2, 3)},
       strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1], **CONV_TOL)
c.node("convt2d_opset1", "ConvTranspose", {"x": rand(1, 2, 3, 3), "w": rand(2, 2, 2, 2)},
       opset=1, strides=[2, 2], **CONV_TOL)
c.node("convt2d_opset11", "ConvTranspose", {"x": rand(1, 2, 3, 3), "w": rand(2, 2, 2, 2)},
       opset=11, strides=[2, 2], **CONV_TOL)

# ---- Gemm ----
c.node("gemm_basic", "Gemm", {"a": rand(3, 5), "b": rand(5, 4)})
c.node("gemm_bias_matrix", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(3, 4)})
c.node("gemm_bias_row", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(4)})
c.node("gemm_bias_row2d", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(1, 4)})
c.node("gemm_bias_col", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(3, 1)})
c.node("gemm_bias_scalar", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand()})
c.node("gemm_bias_single", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(1)})
c.node("gemm_trans_a", "Gemm", {"a": rand(5, 3), "b": rand(5, 4), "c": rand(4)}, transA=1)
c.node("gemm_trans_b", "Gemm", {"a": rand(3, 5), "b": rand(4, 5), "c": rand(4)}, transB=1)
c.node("gemm_trans_both", "Gemm", {"a": rand(6, 2), "b": rand(7, 6), "c": rand(2, 7)}, transA=1,
       transB=1, alpha=0.5, beta=-2.0)
c.node("gemm_alpha_beta", "Gemm", {"a": rand(4, 3), "b": rand(3, 6), "c": rand(4, 6)}, alpha=2.5,
       beta=0.25)
c.node("gemm_beta_zero", "Gemm", {"a": rand(4, 3), "b": rand(3, 6), "c": rand(4, 6)}, beta=0.0)
c.node("gemm_fc_const", "Gemm", {"a": rand(2, 64)},
       initializers={"b": rand(10, 64), "c": rand(10)}, transB=1)
c.node("gemm_opset7", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(4)}, opset=7)
c.node("gemm_opset9", "Gemm", {"a": rand(3, 5), "b": rand(5, 4), "c": rand(3, 4)}, opset=9,
       alpha=0.5)
c.node("gemm_opset11_no_c", "Gemm", {"a": rand(3, 5), "b": rand(4, 5)}, opset=11, transB=1)
c.node("gemm_opset13", "Gemm", {"a": rand(1, 7), "b": rand(7, 1), "c": rand(1)}, opset=13)

# ---- MatMul ----
c.node("matmul_2d", "MatMul", {"a": rand(3, 4), "b": rand(4, 5)})
c.node("matmul_1d_1d", "MatMul", {"a": rand(6), "b": rand(6)})
c.node("matmul_1d_2d", "MatMul", {"a": rand(4), "b": rand(4, 3)})
c.node("matmul_2d_1d", "MatMul", {"a": rand(3, 4), "b": rand(4)})
c.node("matmul_1d_3d", "MatMul", {"a": rand(4), "b": rand(2, 4, 3)})
c.node("matmul_3d_1d", "MatMul", {"a": rand(2, 3, 4), "b": rand(4)})
c.node("matmul_3d_2d_fold", "MatMul", {"a": rand(2, 3, 4), "b": rand(4, 5)})
c.node("matmul_4d_2d_fold", "MatMul", {"a": rand(2, 3, 5, 4), "b": rand(4, 6)})
c.node("matmul_3d_3d", "MatMul", {"a": rand(3, 2, 4), "b": rand(3, 4, 5)})
c.node("matmul_2d_3d", "MatMul", {"a": rand(2, 4), "b": rand(3, 4, 5)})
c.node("matmul_bcast_batch", "MatMul", {"a": rand(2, 1, 3, 4), "b": rand(1, 3, 4, 5)})
c.node("matmul_bcast_rank", "MatMul", {"a": rand(3, 4), "b": rand(2, 2, 4, 2)})
c.node("matmul_bcast_mixed", "MatMul", {"a": rand(4, 1, 2, 3), "b": rand(5, 3, 2)})
c.node("matmul_attention", "MatMul", {"a": rand(1, 4, 7, 8), "b": rand(1, 4, 8, 7)})
c.node("matmul_const_b", "MatMul", {"a": rand(2, 5, 16)}, initializers={"b": rand(16, 9)})
c.node("matmul_opset1", "MatMul", {"a": rand(3, 4), "b": rand(4, 2)}, opset=1)
c.node("matmul_opset9", "MatMul", {"a": rand(2, 3, 4), "b": rand(2, 4, 2)}, opset=9)
c.node("matmul_opset13", "MatMul", {"a": rand(2, 3, 4), "b": rand(4)}, opset=13)

# ---- MaxPool ----
c.node("maxpool2d_basic", "MaxPool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[2, 2],
       strides=[2, 2])
c.node("maxpool2d_pads", "MaxPool", {"x": rand(2, 3, 5, 7)}, kernel_shape=[3, 3],
       pads=[1, 1, 1, 1])
c.node("maxpool2d_asym_pads_strides", "MaxPool", {"x": rand(1, 2, 9, 8)}, kernel_shape=[3, 2],
       pads=[2, 0, 1, 1], strides=[2, 3])
c.node("maxpool2d_stride_gt_kernel", "MaxPool", {"x": rand(1, 2, 11, 10)}, kernel_shape=[2, 2],
       strides=[4, 3])
# A stride of 2^63 - 1 along a dim with one output (fuzz_run: rounding the valid outputs up
# overflowed), for each pool; and a dilation as large under a kernel of 1.
for _op in ["MaxPool", "AveragePool", "LpPool"]:
    c.node(f"{_op.lower()}3d_stride_huge", _op, {"x": rand(2, 3, 5, 5, 5)}, kernel_shape=[2, 2, 2],
           pads=[1, 1, 1, 1, 1, 1], strides=[2, 2, 2**63 - 1])
c.node("maxpool2d_dilation_huge_kernel1", "MaxPool", {"x": rand(1, 2, 5, 6)},
       kernel_shape=[1, 2], dilations=[2**62, 1], pads=[0, 1, 0, 1])
c.node("maxpool2d_dilations", "MaxPool", {"x": rand(1, 2, 9, 9)}, kernel_shape=[2, 3],
       dilations=[2, 2], opset=12)
c.node("maxpool2d_ceil", "MaxPool", {"x": rand(1, 2, 7, 8)}, kernel_shape=[3, 3], strides=[2, 2],
       ceil_mode=1)
c.node("maxpool2d_ceil_pads", "MaxPool", {"x": rand(1, 1, 6, 6)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
c.node("maxpool2d_ceil_last_window_in_pad", "MaxPool", {"x": rand(1, 1, 5, 5)},
       kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
c.node("maxpool2d_same_upper", "MaxPool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 2],
       strides=[2, 2], auto_pad="SAME_UPPER")
c.node("maxpool2d_same_lower", "MaxPool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 3],
       auto_pad="SAME_LOWER")
c.node("maxpool2d_valid", "MaxPool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 2],
       strides=[2, 2], auto_pad="VALID")
# Stride 1 without dilation: row maxima first, then down the columns (YOLOv5s's SPPF; uneven
# window and pads).
c.node("maxpool2d_sppf", "MaxPool", {"x": rand(1, 8, 20, 20)}, kernel_shape=[5, 5],
       pads=[2, 2, 2, 2])
c.node("maxpool2d_stride1_uneven", "MaxPool", {"x": rand(2, 3, 9, 11)}, kernel_shape=[3, 4],
       pads=[0, 2, 2, 1])
# Stride 1, padded: read in place 16 columns at a time on AVX-512, the last kernel-height row
# maxima in registers (heights 2, 3, 4, 5, 7; any other recomputes them); float64 keeps the
# separable form. Rows of 37 outputs: two whole vectors and a 5-lane tail.
c.node("maxpool2d_stride1_wide", "MaxPool", {"x": rand(1, 3, 7, 37)}, kernel_shape=[5, 5],
       pads=[2, 2, 2, 2])
c.node("maxpool2d_stride1_k2x3", "MaxPool", {"x": rand(2, 2, 9, 18)}, kernel_shape=[2, 3],
       pads=[0, 1, 1, 1])
c.node("maxpool2d_stride1_k4x1", "MaxPool", {"x": rand(1, 2, 11, 5)}, kernel_shape=[4, 1],
       pads=[2, 0, 1, 0])
c.node("maxpool2d_stride1_k7x3", "MaxPool", {"x": rand(1, 2, 9, 20)}, kernel_shape=[7, 3],
       pads=[3, 1, 3, 1])
c.node("maxpool2d_stride1_k6_any_height", "MaxPool", {"x": rand(1, 2, 10, 19)},
       kernel_shape=[6, 6], pads=[3, 2, 2, 3])
c.node("maxpool2d_stride1_same_upper", "MaxPool", {"x": rand(1, 2, 8, 21)}, kernel_shape=[4, 4],
       auto_pad="SAME_UPPER")
c.node("maxpool2d_stride1_float64", "MaxPool", {"x": rand(1, 2, 6, 9, dtype=np.float64)},
       kernel_shape=[3, 3], pads=[1, 1, 1, 1])
c.node("maxpool2d_resnet", "MaxPool", {"x": rand(1, 4, 16, 16)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1])
c.node("maxpool2d_indices", "MaxPool", {"x": rand(2, 3, 6, 5)}, n_outputs=2, kernel_shape=[3, 2],
       strides=[2, 1], pads=[1, 0, 1, 1])
c.node("maxpool2d_indices_col_major", "MaxPool", {"x": rand(2, 3, 6, 5)}, n_outputs=2,
       kernel_shape=[2, 2], strides=[2, 2], storage_order=1)
c.node("maxpool1d", "MaxPool", {"x": rand(2, 3, 11)}, kernel_shape=[3], strides=[2], pads=[1, 1])
c.node("maxpool1d_indices", "MaxPool", {"x": rand(2, 3, 11)}, n_outputs=2, kernel_shape=[4],
       strides=[3])
c.node("maxpool3d", "MaxPool", {"x": rand(1, 2, 5, 6, 7)}, kernel_shape=[2, 3, 2],
       strides=[2, 2, 1], pads=[1, 1, 0, 0, 1, 1])
c.node("maxpool3d_indices", "MaxPool", {"x": rand(1, 2, 4, 4, 5)}, n_outputs=2,
       kernel_shape=[2, 2, 2], strides=[2, 2, 2])
c.node("maxpool3d_dilations_ceil", "MaxPool", {"x": rand(1, 1, 7, 7, 8)}, kernel_shape=[2, 2, 2],
       dilations=[2, 2, 1], strides=[2, 2, 3], ceil_mode=1)
c.node("maxpool2d_opset1", "MaxPool", {"x": rand(1, 2, 5, 5)}, kernel_shape=[2, 2], opset=1)
c.node("maxpool2d_opset8_indices", "MaxPool", {"x": rand(1, 2, 5, 5)}, n_outputs=2,
       kernel_shape=[2, 2], opset=8)
c.node("maxpool2d_opset10_ceil", "MaxPool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[3, 3],
       strides=[2, 2], ceil_mode=1, opset=10)
c.node("maxpool2d_uint8", "MaxPool", {"x": rand(1, 2, 6, 5, low=0, high=255).astype(np.uint8)},
       kernel_shape=[3, 3], pads=[1, 1, 1, 1], opset=12)
c.node("maxpool2d_int8_indices", "MaxPool",
       {"x": rand(1, 2, 6, 5, low=-128, high=127).astype(np.int8)}, n_outputs=2,
       kernel_shape=[2, 2], strides=[2, 1], opset=12)
c.node("maxpool2d_float64", "MaxPool", {"x": rand(2, 2, 5, 5, dtype=np.float64)},
       kernel_shape=[3, 2], strides=[2, 2], pads=[1, 1, 0, 0])
c.node("maxpool2d_opset22", "MaxPool", {"x": rand(1, 2, 5, 5)}, kernel_shape=[2, 2], opset=22)

# ---- AveragePool ----
c.node("avgpool2d_basic", "AveragePool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[2, 2],
       strides=[2, 2])
c.node("avgpool2d_pads", "AveragePool", {"x": rand(2, 3, 5, 7)}, kernel_shape=[3, 3],
       pads=[1, 1, 1, 1])
c.node("avgpool2d_pads_include", "AveragePool", {"x": rand(2, 3, 5, 7)}, kernel_shape=[3, 3],
       pads=[1, 2, 1, 0], count_include_pad=1)
# Windows wider than the output row: summed by window_sums_wide (8 columns at a time, even and odd
# rows in two registers), with and without padding, wider than 8 columns, in 1-D and 3-D.
c.node("avgpool2d_whole_map_kws", "AveragePool", {"x": rand(1, 64, 25, 5)}, kernel_shape=[25, 5])
# One window over the whole plane runs as plane means: also with padding that is not counted,
# and not when it is (the padded window holds more than the plane).
c.node("avgpool2d_whole_map_pads", "AveragePool", {"x": rand(2, 3, 4, 5)}, kernel_shape=[6, 7],
       pads=[1, 1, 1, 1])
c.node("avgpool2d_whole_map_pads_include", "AveragePool", {"x": rand(2, 3, 4, 5)},
       kernel_shape=[6, 7], pads=[1, 1, 1, 1], count_include_pad=1)
c.node("avgpool2d_wide_window_pads", "AveragePool", {"x": rand(2, 3, 6, 11)}, kernel_shape=[3, 10],
       strides=[2, 3], pads=[1, 2, 1, 2])
c.node("avgpool2d_wide_window_pads_include", "AveragePool", {"x": rand(1, 2, 6, 11)},
       kernel_shape=[4, 9], strides=[1, 2], pads=[1, 3, 2, 3], count_include_pad=1)
c.node("avgpool1d_wide_window", "AveragePool", {"x": rand(1, 4, 19)}, kernel_shape=[17], strides=[2])
c.node("avgpool3d_wide_window", "AveragePool", {"x": rand(1, 2, 4, 5, 6)}, kernel_shape=[2, 3, 6],
       pads=[0, 1, 1, 1, 0, 1])
c.node("avgpool2d_asym_strides", "AveragePool", {"x": rand(1, 2, 9, 8)}, kernel_shape=[3, 2],
       pads=[2, 0, 1, 1], strides=[2, 3])
c.node("avgpool2d_ceil", "AveragePool", {"x": rand(1, 2, 7, 8)}, kernel_shape=[3, 3],
       strides=[2, 2], ceil_mode=1)
c.node("avgpool2d_ceil_include_pad", "AveragePool", {"x": rand(1, 2, 6, 7)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1)
c.node("avgpool2d_ceil_include_pad_opset19", "AveragePool", {"x": rand(1, 2, 6, 7)},
       kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1,
       opset=19)
c.node("avgpool1d_ceil_include_nopad_opset19", "AveragePool", {"x": rand(1, 2, 6)},
       kernel_shape=[4], strides=[3], ceil_mode=1, count_include_pad=1, opset=19)
c.node("avgpool1d_ceil_include_nopad", "AveragePool", {"x": rand(1, 2, 6)},
       kernel_shape=[4], strides=[3], ceil_mode=1, count_include_pad=1)
c.node("avgpool1d_dil_ceil_include_opset19", "AveragePool", {"x": rand(1, 2, 9)},
       kernel_shape=[2], strides=[2], pads=[1, 1], dilations=[3], ceil_mode=1, count_include_pad=1,
       opset=19)
c.node("avgpool2d_opset22_include", "AveragePool", {"x": rand(1, 2, 7, 7)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1, opset=22)
c.node("avgpool2d_ceil_pads", "AveragePool", {"x": rand(1, 2, 6, 7)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
c.node("avgpool2d_same_upper", "AveragePool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 2],
       strides=[2, 2], auto_pad="SAME_UPPER")
c.node("avgpool2d_same_lower", "AveragePool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 3],
       auto_pad="SAME_LOWER")
c.node("avgpool2d_same_upper_include", "AveragePool", {"x": rand(1, 2, 7, 6)},
       kernel_shape=[3, 3], auto_pad="SAME_UPPER", count_include_pad=1)
c.node("avgpool2d_valid", "AveragePool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 2],
       strides=[2, 2], auto_pad="VALID")
c.node("avgpool2d_dilations", "AveragePool", {"x": rand(1, 2, 9, 9)}, kernel_shape=[2, 3],
       dilations=[2, 2], opset=19)
c.node("avgpool2d_dilations_pads", "AveragePool", {"x": rand(1, 2, 9, 8)}, kernel_shape=[2, 2],
       dilations=[2, 3], pads=[1, 1, 1, 1], strides=[2, 1], opset=19)
c.node("avgpool1d", "AveragePool", {"x": rand(2, 3, 11)}, kernel_shape=[3], strides=[2],
       pads=[1, 1])
c.node("avgpool3d", "AveragePool", {"x": rand(1, 2, 5, 6, 7)}, kernel_shape=[2, 3, 2],
       strides=[2, 2, 1], pads=[1, 1, 0, 0, 1, 1])
c.node("avgpool3d_include", "AveragePool", {"x": rand(1, 2, 5, 6, 7)}, kernel_shape=[3, 3, 2],
       strides=[2, 2, 2], pads=[1, 1, 0, 1, 1, 1], count_include_pad=1)
c.node("avgpool2d_opset7", "AveragePool", {"x": rand(1, 2, 5, 5)}, kernel_shape=[2, 2], opset=7)
c.node("avgpool2d_opset7_include", "AveragePool", {"x": rand(1, 2, 5, 5)}, kernel_shape=[3, 3],
       pads=[1, 1, 1, 1], count_include_pad=1, opset=7)
c.node("avgpool2d_opset10_ceil", "AveragePool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[3, 3],
       strides=[2, 2], ceil_mode=1, opset=10)
c.node("avgpool2d_opset11", "AveragePool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[3, 3],
       strides=[2, 2], pads=[1, 1, 1, 1], opset=11)

# ---- Global pools ----
for op, name in (("GlobalAveragePool", "gap"), ("GlobalMaxPool", "gmp")):
    c.node(f"{name}_2d", op, {"x": rand(2, 3, 5, 7)})
    c.node(f"{name}_1d", op, {"x": rand(2, 4, 9)})
    c.node(f"{name}_3d", op, {"x": rand(1, 3, 3, 4, 5)})
    c.node(f"{name}_1x1", op, {"x": rand(1, 6, 1, 1)})
    c.node(f"{name}_large", op, {"x": rand(1, 16, 32, 32)})

# ---- a small CNN: Conv -> MaxPool -> depthwise Conv -> GlobalAveragePool -> Gemm ----
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("MaxPool", ["c1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2],
                     pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["p1", "w2"], ["c2"], group=8, pads=[1, 1, 1, 1]),
    helper.make_node("Conv", ["c2", "w3"], ["c3"]),
    helper.make_node("GlobalAveragePool", ["c3"], ["g"]),
    helper.make_node("Flatten", ["g"], ["f"]),
    helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
]
c.model("tiny_cnn", nodes, {"x": rand(2, 3, 20, 20)}, ["y"],
        initializers={"w1": rand(8, 3, 3, 3), "b1": rand(8), "w2": rand(8, 1, 3, 3),
                      "w3": rand(12, 8, 1, 1), "fw": rand(5, 12), "fb": rand(5)},
        rtol=1e-4, atol=1e-4, output_types={"y": TensorProto.FLOAT})

# ---- single-row products (the GEMV path) ----
c.node("gemm_m1_trans_b", "Gemm", {"a": rand(1, 300)}, initializers={"b": rand(37, 300),
       "c": rand(37)}, transB=1, alpha=0.7, beta=1.5)
c.node("gemm_m1", "Gemm", {"a": rand(1, 70), "b": rand(70, 130), "c": rand(1, 130)}, beta=0.5)
c.node("gemm_m1_trans_a", "Gemm", {"a": rand(45, 1), "b": rand(45, 9)}, transA=1)
c.node("gemm_m1_no_c", "Gemm", {"a": rand(1, 33), "b": rand(21, 33)}, transB=1)
c.node("matmul_m1_1d", "MatMul", {"a": rand(200), "b": rand(200, 77)})
c.node("matmul_m1_3d", "MatMul", {"a": rand(1, 1, 64)}, initializers={"b": rand(64, 300)})


# ---- symbolic dims at session creation: shapes are inferred again at run time ----
def make_dynamic(case, dims):
    """Rewrites case's model so that the given (input index, axis) dims are symbolic."""
    import onnx
    path = c.dir / case / "model.onnx"
    m = onnx.load(path)
    for i, axis in dims:
        d = m.graph.input[i].type.tensor_type.shape.dim[axis]
        d.ClearField("dim_value")
        d.dim_param = f"d{i}_{axis}"
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    onnx.save(m, path)


c.node("dyn_conv", "Conv", {"x": rand(2, 3, 9, 8)}, initializers={"w": rand(4, 3, 3, 3)},
       pads=[1, 1, 1, 1], strides=[2, 2], **CONV_TOL)
make_dynamic("dyn_conv", [(0, 0), (0, 2), (0, 3)])
c.node("dyn_conv_same", "Conv", {"x": rand(2, 3, 9, 8)}, initializers={"w": rand(4, 3, 3, 3)},
       auto_pad="SAME_LOWER", strides=[2, 2], **CONV_TOL)
make_dynamic("dyn_conv_same", [(0, 0), (0, 3)])
c.node("dyn_convt", "ConvTranspose", {"x": rand(2, 3, 4, 5)}, initializers={"w": rand(3, 2, 3, 3)},
       strides=[2, 2], auto_pad="SAME_UPPER", **CONV_TOL)
make_dynamic("dyn_convt", [(0, 0), (0, 2)])
c.node("dyn_conv_dead_taps", "Conv", {"x": rand(1, 64, 2)},
       initializers={"w": rand(64, 64, 3), "b": rand(64)}, pads=[1, 1], strides=[2], **CONV_TOL)
make_dynamic("dyn_conv_dead_taps", [(0, 2)])
c.node("dyn_maxpool", "MaxPool", {"x": rand(2, 3, 9, 8)}, kernel_shape=[3, 3], strides=[2, 2],
       ceil_mode=1)
make_dynamic("dyn_maxpool", [(0, 0), (0, 1), (0, 2)])
c.node("dyn_avgpool", "AveragePool", {"x": rand(2, 3, 9, 8)}, kernel_shape=[3, 3],
       auto_pad="SAME_UPPER")
make_dynamic("dyn_avgpool", [(0, 2), (0, 3)])
c.node("dyn_gap", "GlobalAveragePool", {"x": rand(2, 3, 9, 8)})
make_dynamic("dyn_gap", [(0, 0), (0, 2), (0, 3)])
c.node("dyn_gemm", "Gemm", {"a": rand(5, 6)}, initializers={"b": rand(4, 6), "c": rand(4)},
       transB=1)
make_dynamic("dyn_gemm", [(0, 0)])
c.node("dyn_matmul", "MatMul", {"a": rand(2, 3, 5, 6), "b": rand(3, 6, 4)})
make_dynamic("dyn_matmul", [(0, 0), (0, 2), (1, 2)])

# ---- im2col buffers larger than one block (16 MB): the output is produced in row blocks ----
c.node("conv2d_blocked_im2col", "Conv", {"x": rand(1, 32, 100, 120)},
       initializers={"w": rand(2, 32, 5, 5), "b": rand(2)}, pads=[2, 2, 2, 2], rtol=1e-3,
       atol=1e-4)
c.node("conv3d_blocked_im2col", "Conv", {"x": rand(1, 16, 12, 30, 30)},
       initializers={"w": rand(2, 16, 3, 3, 3)}, pads=[1, 1, 1, 1, 1, 1], rtol=1e-3, atol=1e-4)

# ---- auto_pad with dilations (onnxruntime's Conv refuses this combination) ----


def reference(op_type, inputs, opset, **attrs):
    """Expected output from onnx's reference implementation, for where onnxruntime departs from
    the spec."""
    from onnx.reference import ReferenceEvaluator
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT,
                              v.shape) for k, v in inputs.items()],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return {"y": ReferenceEvaluator(model).run(None, inputs)[0]}


# onnxruntime sizes SAME pools with the undilated kernel (out 7x6 here); the spec and onnx's
# shape inference say ceil(in / stride) with the dilated kernel's padding, and onnx's reference
# agrees on this case. (It disagrees with onnx's own shape inference on others, e.g. SAME_LOWER
# with strides, so only this one is used.)
x = {"x": rand(1, 2, 9, 8)}
attrs = dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", dilations=[2, 3])
c.node("maxpool2d_same_upper_dilated", "MaxPool", x, opset=19,
       expected=reference("MaxPool", x, 19, **attrs), **attrs)
c.node("convt2d_same_upper_dilated", "ConvTranspose", {"x": rand(1, 2, 4, 3),
       "w": rand(2, 2, 3, 3)}, auto_pad="SAME_UPPER", dilations=[2, 1], strides=[2, 2], **CONV_TOL)
c.node("matmul_b_unit_batch", "MatMul", {"a": rand(2, 3, 5, 4), "b": rand(1, 1, 4, 6)})
c.node("matmul_b_unit_batch_higher_rank", "MatMul", {"a": rand(3, 4), "b": rand(1, 1, 4, 2)})

# ---- LpPool ----
c.node("lppool2d_p2", "LpPool", {"x": rand(1, 2, 6, 7)}, kernel_shape=[3, 3], strides=[2, 2],
       pads=[1, 1, 1, 1])
c.node("lppool2d_p1", "LpPool", {"x": rand(2, 2, 5, 5)}, kernel_shape=[2, 3], p=1)
c.node("lppool2d_p3", "LpPool", {"x": rand(1, 2, 5, 6)}, kernel_shape=[2, 2], p=3, strides=[1, 2])
c.node("lppool1d", "LpPool", {"x": rand(1, 3, 9)}, kernel_shape=[3], strides=[2])
c.node("lppool3d", "LpPool", {"x": rand(1, 2, 4, 5, 4)}, kernel_shape=[2, 2, 2])
c.node("lppool2d_same_upper", "LpPool", {"x": rand(1, 2, 7, 6)}, kernel_shape=[3, 2],
       auto_pad="SAME_UPPER", strides=[2, 2])
c.node("lppool2d_opset11", "LpPool", {"x": rand(1, 2, 6, 6)}, kernel_shape=[3, 3], opset=11)
c.node("lppool2d_opset18_dil_ceil", "LpPool", {"x": rand(1, 2, 9, 9)}, kernel_shape=[2, 2],
       dilations=[2, 2], strides=[2, 2], ceil_mode=1, opset=18)

# ---- depthwise paths: wide stride-1 rows in place, everything else through phase planes ----
c.node("conv2d_depthwise_wide_rows", "Conv", {"x": rand(1, 3, 5, 70), "w": rand(3, 1, 3, 3),
       "b": rand(3)}, group=3, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_depthwise_wide_rows_dilated", "Conv", {"x": rand(2, 2, 4, 80), "w": rand(2, 1, 2, 3)},
       group=2, pads=[0, 3, 1, 0], dilations=[2, 3], **CONV_TOL)
c.node("conv2d_depthwise_s2_dil_asym", "Conv", {"x": rand(1, 2, 11, 13), "w": rand(2, 1, 3, 3),
       "b": rand(2)}, group=2, strides=[2, 3], dilations=[2, 1], pads=[1, 2, 0, 1], **CONV_TOL)
c.node("conv2d_depthwise_s3_pad_gt_kernel", "Conv", {"x": rand(1, 2, 7, 8), "w": rand(2, 1, 2, 2)},
       group=2, strides=[3, 3], pads=[3, 2, 4, 3], **CONV_TOL)
c.node("conv3d_depthwise_s2", "Conv", {"x": rand(1, 2, 7, 6, 9), "w": rand(2, 1, 3, 2, 3)},
       group=2, strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0], **CONV_TOL)
c.node("conv1d_depthwise_s2_wide", "Conv", {"x": rand(1, 3, 300), "w": rand(3, 1, 4)}, group=3,
       strides=[2], pads=[1, 2], **CONV_TOL)

# ---- auto_pad SAME with a stride larger than the kernel: the total padding is negative ----
c.node("conv1d_same_upper_stride_gt_kernel", "Conv", {"x": rand(1, 2, 9), "w": rand(2, 2, 1)},
       auto_pad="SAME_UPPER", strides=[3], **CONV_TOL)
c.node("conv2d_same_lower_stride_gt_kernel", "Conv", {"x": rand(1, 2, 8, 9), "w": rand(2, 2, 2, 1)},
       auto_pad="SAME_LOWER", strides=[4, 3], **CONV_TOL)
# onnxruntime 1.32 refuses MaxPool and AveragePool here ("padding values must be non-negative"),
# and onnx 1.22's reference evaluator fails on them; the spec defines them (output
# ceil(in / stride) and its SAME padding formula), so pool_negative_same computes their answer.
# LpPool compares with onnxruntime 1.32 under SAME_UPPER; under SAME_LOWER onnxruntime starts at
# (total + 1) / 2 = 0 in C's division where the spec splits -2 evenly (-1, -1), as
# pool_negative_same does (1.23 did the same for all three).
for op in ("MaxPool", "AveragePool", "LpPool"):
    for name, x, attrs in (
            ("1d_same_upper_stride_gt_kernel", rand(1, 2, 9),
             dict(kernel_shape=[1], auto_pad="SAME_UPPER", strides=[3])),
            ("2d_same_lower_stride_gt_kernel", rand(1, 2, 8, 9),
             dict(kernel_shape=[2, 1], auto_pad="SAME_LOWER", strides=[4, 3])),
            ("2d_same_upper_stride_gt_kernel", rand(1, 2, 8, 9),
             dict(kernel_shape=[2, 1], auto_pad="SAME_UPPER", strides=[4, 3]))):
        ort_ok = op == "LpPool" and attrs["auto_pad"] == "SAME_UPPER"
        expected = None if ort_ok else {"y": pool_negative_same(op, x, **attrs)}
        c.node(f"{op.lower()}{name}", op, {"x": x}, expected=expected, **attrs)
c.node("convt2d_same_upper_stride_gt_kernel", "ConvTranspose",
       {"x": rand(1, 2, 5, 4), "w": rand(2, 2, 1, 2)}, auto_pad="SAME_UPPER", strides=[3, 3],
       **CONV_TOL)
c.node("convt1d_same_lower_stride_gt_kernel", "ConvTranspose", {"x": rand(2, 2, 6), "w": rand(2, 1, 1)},
       auto_pad="SAME_LOWER", strides=[2], group=2, **CONV_TOL)

# ---- MaxUnpool (fed by MaxPool's indices) ----
for name, xshape, attrs in (("2d", (2, 3, 6, 6), dict(kernel_shape=[2, 2], strides=[2, 2])),
                            ("2d_pads", (1, 2, 5, 7), dict(kernel_shape=[3, 3], strides=[2, 2],
                                                           pads=[1, 1, 1, 1])),
                            ("1d", (1, 2, 9), dict(kernel_shape=[3], strides=[3])),
                            ("3d", (1, 2, 4, 4, 6), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2]))):
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], **attrs),
             helper.make_node("MaxUnpool", ["p", "i"], ["y"], **attrs)]
    c.model(f"maxunpool_{name}", nodes, {"x": rand(*xshape)}, ["y"],
            output_types={"y": TensorProto.FLOAT})
# With output_shape: onnxruntime indexes the requested shape, the spec's reference and
# conformance tests put the unpooled tensor in its leading corner; Quilt follows the latter.
x = rand(1, 2, 4, 4)
pooled = x.reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))
flat = x.reshape(1, 2, 2, 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(1, 2, 2, 2, 4)
arg = flat.argmax(axis=-1)
rows = np.arange(2)[:, None] * 2 + arg // 2
cols = np.arange(2)[None, :] * 2 + arg % 2
indices = (np.arange(2)[None, :, None, None] * 16 + rows * 4 + cols).astype(np.int64)
expected = np.zeros((1, 2, 5, 6), np.float32)
unpooled = np.zeros(2 * 16, np.float32)
unpooled[indices.ravel()] = pooled.ravel()
expected[:, :, :4, :4] = unpooled.reshape(1, 2, 4, 4)
node = helper.make_node("MaxUnpool", ["p", "i", "shape"], ["y"], kernel_shape=[2, 2],
                        strides=[2, 2])
c.model("maxunpool_output_shape", [node], {"p": pooled, "i": indices}, ["y"],
        initializers={"shape": np.array([1, 2, 5, 6], np.int64)}, expected={"y": expected})
c.model("maxunpool_output_shape_runtime", [node], {"p": pooled, "i": indices,
        "shape": np.array([1, 2, 5, 6], np.int64)}, ["y"], expected={"y": expected})

# ---- MatMul for the other dtypes onnxruntime has (plain loops) ----
c.node("matmul_float64_batched", "MatMul", {"a": rand(2, 3, 4, dtype=np.float64),
       "b": rand(2, 4, 5, dtype=np.float64)})
c.node("matmul_float64_1d", "MatMul", {"a": rand(6, dtype=np.float64),
       "b": rand(3, 6, 2, dtype=np.float64)})
c.node("matmul_int32", "MatMul", {"a": randint(3, 4, low=-9, high=9, dtype=np.int32),
       "b": randint(4, 5, low=-9, high=9, dtype=np.int32)})
c.node("matmul_int64_bcast", "MatMul", {"a": randint(2, 1, 3, 4, low=-9, high=9),
       "b": randint(3, 4, 2, low=-9, high=9)})
c.node("matmul_uint32", "MatMul", {"a": randint(1, 5, high=20, dtype=np.uint32),
       "b": randint(5, 3, high=20, dtype=np.uint32)})
c.node("matmul_uint64_vec", "MatMul", {"a": randint(2, 3, 5, high=20, dtype=np.uint64),
       "b": randint(5, high=20, dtype=np.uint64)})
# Products and sums that overflow wrap around (two's complement), as numpy's and onnxruntime's:
# fuzz_run found the int32 kernel's overflow undefined (UBSan: 2 * -2147483648).
big = np.array([[2, -2147483648, 2147483647], [-2147483648, -2147483648, 7]], np.int32)
big_b = np.array([[2, 3], [2, -1], [2147483647, 5]], np.int32)
c.node("matmul_int32_wraps", "MatMul", {"a": big, "b": big_b},
       expected={"y": (big.astype(np.int64) @ big_b.astype(np.int64)).astype(np.int32)})
big64 = np.array([[2, np.iinfo(np.int64).min], [np.iinfo(np.int64).max, 3]], np.int64)
c.node("matmul_int64_wraps", "MatMul", {"a": big64, "b": big64.T.copy()},
       expected={"y": np.matmul(big64, big64.T)})

# ---- ConvTranspose col buffers larger than one block (16 MB): built in input-row blocks ----
c.node("convt2d_blocked_col", "ConvTranspose", {"x": rand(1, 4, 60, 50)},
       initializers={"w": rand(4, 64, 5, 5), "b": rand(64)}, strides=[2, 2], pads=[2, 2, 1, 1],
       rtol=1e-3, atol=1e-4)
c.node("convt3d_blocked_col", "ConvTranspose", {"x": rand(1, 2, 10, 12, 20)},
       initializers={"w": rand(2, 64, 3, 3, 3)}, strides=[1, 2, 1], pads=[1, 1, 1, 1, 1, 1],
       rtol=1e-3, atol=1e-4)
c.node("gemm_float64", "Gemm", {"a": rand(4, 3, dtype=np.float64), "b": rand(5, 4, dtype=np.float64),
       "c": rand(5, dtype=np.float64)}, transA=1, transB=1, alpha=0.5, beta=2.0)
c.node("gemm_float64_col_bias", "Gemm", {"a": rand(3, 6, dtype=np.float64),
       "b": rand(6, 2, dtype=np.float64), "c": rand(3, 1, dtype=np.float64)})
c.node("gemm_float64_no_c", "Gemm", {"a": rand(1, 6, dtype=np.float64),
       "b": rand(6, 2, dtype=np.float64)}, alpha=-1.5)

# ---- MatMulInteger ----
u8 = lambda *s: randint(*s, low=0, high=256, dtype=np.uint8)  # noqa: E731
i8 = lambda *s: randint(*s, low=-128, high=128, dtype=np.int8)  # noqa: E731
c.node("matmulint_u8", "MatMulInteger", {"a": u8(3, 5), "b": u8(5, 4)}, opset=10)
c.node("matmulint_u8_zp", "MatMulInteger", {"a": u8(3, 5), "b": u8(5, 4)},
       initializers={"azp": np.array(12, np.uint8), "bzp": np.array(200, np.uint8)})
c.node("matmulint_u8_col_zp", "MatMulInteger", {"a": u8(3, 5), "b": u8(5, 4)},
       initializers={"azp": np.array(7, np.uint8), "bzp": u8(4)})
# Per-row zero points of A are in the spec but not in onnxruntime: numpy gives the reference.
a, b, azp, bzp = u8(3, 5), u8(5, 4), u8(3), u8(4)
want = (a.astype(np.int32) - azp[:, None]) @ (b.astype(np.int32) - bzp[None, :])
c.node("matmulint_u8_row_col_zp", "MatMulInteger", {"a": a, "b": b},
       initializers={"azp": azp, "bzp": bzp}, expected={"y": want.astype(np.int32)})
# uint8 x int8: the spec's exact products expected (onnxruntime's may saturate in int16 on x86
# without VNNI, casegen.ort_u8s8_saturates, depending on the values drawn).
a, b, bzp = u8(2, 3, 7), i8(7, 6), i8(6)
want = (a.astype(np.int32) - 128) @ (b.astype(np.int32) - bzp.astype(np.int32)[None, :])
c.node("matmulint_u8_i8", "MatMulInteger", {"a": a, "b": b},
       initializers={"azp": np.array(128, np.uint8), "bzp": bzp}, expected={"y": want})
c.node("matmulint_i8_i8_batched", "MatMulInteger", {"a": i8(2, 3, 7), "b": i8(2, 7, 2)},
       initializers={"azp": np.array(-3, np.int8)})
c.node("matmulint_u8_bcast_1d", "MatMulInteger", {"a": u8(9), "b": u8(3, 9, 2)})

# ---- ConvInteger ----
c.node("convint_u8", "ConvInteger", {"x": u8(1, 2, 5, 6), "w": u8(3, 2, 3, 3)}, opset=10)
c.node("convint_u8_zp_pads", "ConvInteger", {"x": u8(2, 2, 6, 5)},
       initializers={"w": u8(4, 2, 3, 2), "xzp": np.array(100, np.uint8),
                     "wzp": np.array(120, np.uint8)}, pads=[1, 0, 2, 1], strides=[2, 1])
c.node("convint_u8_group_dil", "ConvInteger", {"x": u8(1, 4, 7, 7)},
       initializers={"w": u8(4, 2, 2, 2), "xzp": np.array(3, np.uint8)}, group=2,
       dilations=[2, 2], pads=[1, 1, 1, 1])
c.node("convint_u8_same_upper", "ConvInteger", {"x": u8(1, 2, 7, 6)},
       initializers={"w": u8(2, 2, 3, 3), "xzp": np.array(9, np.uint8)}, auto_pad="SAME_UPPER",
       strides=[2, 2])
# Right padding far wider than the input (fuzz_run: taps right of the row shifted a mask by a
# negative count, undefined behaviour).
c.node("convint_u8_wide_right_pad", "ConvInteger", {"x": u8(1, 1, 3, 3)},
       initializers={"w": u8(2, 1, 2, 2), "xzp": np.array(7, np.uint8),
                     "wzp": np.array(5, np.uint8)}, pads=[1, 1, 1, 256])
c.node("convint_u8_1d", "ConvInteger", {"x": u8(1, 3, 11)},
       initializers={"w": u8(2, 3, 3), "xzp": np.array(128, np.uint8)}, strides=[2], pads=[1, 1])
# Per-channel w_zero_point and int8 weights: numpy reference (direct sums).
def conv2d_integer_reference(x, w, xzp, wzp):
    xs = x.astype(np.int32) - np.int32(xzp)
    ws = w.astype(np.int32) - wzp.astype(np.int32)[:, None, None, None]
    n, cin, h, wd = xs.shape
    m, _, kh, kw = ws.shape
    out = np.zeros((n, m, h - kh + 1, wd - kw + 1), np.int32)
    for i in range(out.shape[2]):
        for j in range(out.shape[3]):
            out[:, :, i, j] = np.einsum("nchw,mchw->nm", xs[:, :, i:i + kh, j:j + kw], ws)
    return out
x, w, wzp = u8(1, 3, 5, 6), i8(4, 3, 2, 3), i8(4)
c.node("convint_u8_i8_per_channel", "ConvInteger", {"x": x},
       initializers={"w": w, "xzp": np.array(7, np.uint8), "wzp": wzp},
       expected={"y": conv2d_integer_reference(x, w, 7, wzp)})

# onnxruntime's opset-19 AveragePool (2-D/3-D) clips count_include_pad windows with the wrong
# dim's end pad when pads are asymmetric; onnx's reference gives the spec's answer.
for name, xshape, attrs in (
        ("avgpool2d_include_asym_pads_opset19", (1, 2, 8, 6),
         dict(kernel_shape=[3, 3], pads=[0, 1, 2, 0], strides=[1, 2], count_include_pad=1)),
        ("avgpool3d_include_asym_pads_opset19", (1, 2, 4, 8, 6),
         dict(kernel_shape=[1, 3, 3], pads=[0, 0, 0, 0, 2, 0], strides=[1, 1, 2],
              count_include_pad=1)),
        ("avgpool2d_include_dilated_opset19", (1, 2, 7, 5),
         dict(kernel_shape=[3, 1], dilations=[2, 1], pads=[1, 0, 1, 0], count_include_pad=1)),
        # ... and leaves SAME padding out of the count altogether.
        ("avgpool2d_include_same_upper_opset19", (1, 2, 7, 5),
         dict(kernel_shape=[2, 3], auto_pad="SAME_UPPER", strides=[2, 2], count_include_pad=1))):
    x = {"x": rand(*xshape)}
    c.node(name, "AveragePool", x, opset=19, expected=reference("AveragePool", x, 19, **attrs),
           **attrs)

# ---- Fast paths: small images in a batch (split across threads), 2x2/2 max pooling ----
c.node("conv2d_small_images_batch", "Conv", {"x": rand(37, 3, 8, 8), "w": rand(8, 3, 3, 3), "b": rand(8)},
       pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_small_images_batch_grouped", "Conv", {"x": rand(9, 4, 6, 5), "w": rand(6, 2, 3, 3)},
       group=2, strides=[2, 1], **CONV_TOL)
# The same with constant weights (ConvKernel's batch path: a run of images unfolded side by side,
# one GEMM, rows moved into place; rows of at most 16 unfolded by masked vectors): the digits
# demo's two convs; a pointwise one; a 16-wide output row; dilation; stride 2 (not the masked
# rows); enough output channels for gemm_channels (run_small_map, the batch split over threads).
c.node("conv2d_small_images_batch_const_digits1", "Conv", {"x": rand(41, 1, 8, 8)},
       initializers={"w": rand(8, 1, 3, 3), "b": rand(8)}, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_small_images_batch_const_digits2", "Conv", {"x": rand(23, 8, 4, 4)},
       initializers={"w": rand(16, 8, 3, 3), "b": rand(16)}, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_small_images_batch_const_1x1", "Conv", {"x": rand(19, 12, 5, 5)},
       initializers={"w": rand(10, 12, 1, 1)}, **CONV_TOL)
c.node("conv2d_small_images_batch_const_row16", "Conv", {"x": rand(5, 2, 6, 16)},
       initializers={"w": rand(4, 2, 3, 3), "b": rand(4)}, pads=[1, 1, 1, 1], **CONV_TOL)
c.node("conv2d_small_images_batch_const_dilated", "Conv", {"x": rand(9, 3, 8, 8)},
       initializers={"w": rand(4, 3, 3, 3)}, pads=[2, 1, 2, 3], dilations=[2, 2], **CONV_TOL)
c.node("conv2d_small_images_batch_const_stride2", "Conv", {"x": rand(7, 3, 13, 17)},
       initializers={"w": rand(5, 3, 3, 3), "b": rand(5)}, pads=[1, 1, 1, 1], strides=[2, 2],
       **CONV_TOL)
c.node("conv2d_small_images_batch_const_channels", "Conv", {"x": rand(6, 16, 4, 4)},
       initializers={"w": rand(70, 16, 3, 3), "b": rand(70)}, pads=[1, 1, 1, 1],
       rtol=1e-4, atol=1e-3)
c.node("maxpool2d_2x2_stride2_odd", "MaxPool", {"x": rand(3, 5, 7, 9)}, kernel_shape=[2, 2], strides=[2, 2])
x_nan = rand(1, 2, 4, 4)
x_nan[0, 0, 0, 1] = np.nan
x_nan[0, 1, 2, 2] = -np.inf
c.node("maxpool2d_2x2_stride2_nan_inf", "MaxPool", {"x": x_nan}, kernel_shape=[2, 2], strides=[2, 2])


def pool_same_clamped(op_type, x, kernel_shape, strides, auto_pad, count_include_pad=0):
    """MaxPool/AveragePool/LpPool (p = 2) with auto_pad SAME, each window clipped to the input
    (the padding adds nothing to a max, a sum or a sum of squares); AveragePool divides by the
    window's size inside the input, or by the whole kernel's with count_include_pad."""
    spatial = x.shape[2:]
    ranges = []
    for n, k, st in zip(spatial, kernel_shape, strides):
        out = -(-n // st)
        total = (out - 1) * st + k - n
        head = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        ranges.append([(max(o * st - head, 0), min(o * st - head + k, n)) for o in range(out)])
    y = np.empty(x.shape[:2] + tuple(len(r) for r in ranges), x.dtype)
    axes = tuple(range(2, x.ndim))
    for pos in np.ndindex(*y.shape[2:]):
        w = x[(...,) + tuple(slice(*ranges[d][p]) for d, p in enumerate(pos))].astype(np.float64)
        if op_type == "MaxPool":
            v = w.max(axis=axes)
        elif op_type == "LpPool":
            v = np.sqrt((w ** 2).sum(axis=axes))
        else:
            v = w.sum(axis=axes) / (np.prod(kernel_shape, dtype=np.float64) if count_include_pad
                                    else np.prod(w.shape[2:]))
        y[(...,) + pos] = v
    return y


# SAME windows far wider than the input (kernel_shape 2^31, found by fuzz_plugin): each window
# covers the whole row, and the work must follow the input, not the kernel's width (the pools
# once built a table of 2^31 kernel columns). onnxruntime's AveragePool takes a minute over the
# padding, so pool_same_clamped gives the expected values; MaxPool is compared with onnxruntime.
WIDE = 2 ** 31
c.node("maxpool2d_same_upper_kernel_2p31", "MaxPool", {"x": rand(1, 2, 6, 7)},
       kernel_shape=[2, WIDE], strides=[1, 2], auto_pad="SAME_UPPER")
for op, name, x, attrs in (
        ("MaxPool", "maxpool2d_same_lower_kernel_2p31_rows", rand(1, 2, 5, 6),
         dict(kernel_shape=[WIDE, 3], strides=[1, 1], auto_pad="SAME_LOWER")),
        ("AveragePool", "avgpool2d_same_lower_kernel_2p31", rand(1, 2, 5, 6),
         dict(kernel_shape=[WIDE, 3], strides=[2, 1], auto_pad="SAME_LOWER")),
        ("AveragePool", "avgpool2d_same_upper_kernel_2p31_include", rand(1, 2, 4, 9),
         dict(kernel_shape=[2, WIDE], strides=[1, 3], auto_pad="SAME_UPPER", count_include_pad=1)),
        ("LpPool", "lppool2d_same_upper_kernel_2p31", rand(1, 2, 4, 9),
         dict(kernel_shape=[3, WIDE], strides=[1, 1], auto_pad="SAME_UPPER"))):
    c.node(name, op, {"x": x}, expected={"y": pool_same_clamped(op, x, **attrs)}, rtol=1e-5,
           atol=1e-6, **attrs)
