"""The core's optimisation passes (core/optimize/): each pattern in the spellings real exporters
write (torch TorchScript and dynamo, tf2onnx/Keras, paddle2onnx), and the near misses that must
not be rewritten (an intermediate value read elsewhere, a constant that is really an input, a
constant that does not fit). Expected outputs come from onnxruntime on the model as written;
case_runner runs every case at levels 0 and 1 and checks the plan's rewrite counts against the
`rewrites` each case declares (none at level 0)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from casegen import Cases, rand

c = Cases("optimize")
N = helper.make_node


def s(v):
    """A rank-0 float32 constant."""
    return np.array(v, np.float32)


def const(name, value):
    """A Constant node holding value (paddle2onnx and old tf2onnx write weights this way)."""
    return N("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def bn_params(ch, p="bn"):
    return {f"{p}_s": rand(ch, low=0.5, high=1.5), f"{p}_b": rand(ch), f"{p}_m": rand(ch),
            f"{p}_v": rand(ch, low=0.5, high=1.5)}


def bn(x, y, p="bn", **attrs):
    return N("BatchNormalization", [x, f"{p}_s", f"{p}_b", f"{p}_m", f"{p}_v"], [y], epsilon=1e-3, **attrs)


X4 = {"x": rand(2, 3, 9, 8, low=-2, high=2)}

# ---- constant nodes ---------------------------------------------------------------------------
# Every attribute form Quilt holds: value (a tensor), value_float(s), value_int(s); a Constant
# that is also a graph output.
c.model("constant_forms", [
    N("Constant", [], ["f"], value_float=0.5), N("Constant", [], ["fs"], value_floats=[1.0, 2.0, 3.0, 4.0]),
    N("Constant", [], ["shape"], value_ints=[4, 6]), N("Constant", [], ["i"], value_int=2),
    const("t", rand(6, 4)),
    N("Add", ["x", "f"], ["a"]), N("Mul", ["a", "fs"], ["m"]), N("Reshape", ["m", "shape"], ["r"]),
    N("MatMul", ["r", "t"], ["y"]), N("Cast", ["i"], ["ic"], to=TensorProto.FLOAT), N("Mul", ["y", "ic"], ["z"])],
    {"x": rand(2, 3, 4)}, ["z", "t"], opset=13, rewrites={"constant nodes": 5})

# ---- batchnorm into conv / convtranspose / gemm -----------------------------------------------
W = {"w": rand(6, 3, 3, 3), "b": rand(6)}
c.model("conv_bn", [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), bn("c", "y")], X4, ["y"],
        {**W, **bn_params(6)}, rewrites={"batchnorm into conv": 1})
c.model("conv_no_bias_bn_opset9", [N("Conv", ["x", "w"], ["c"], strides=[2, 2]), bn("c", "y")], X4, ["y"],
        {"w": W["w"], **bn_params(6)}, opset=9, rewrites={"batchnorm into conv": 1})
c.model("depthwise_conv_bn_opset15", [N("Conv", ["x", "wd"], ["c"], group=3, pads=[2, 2, 2, 2]), bn("c", "y")],
        X4, ["y"], {"wd": rand(3, 1, 5, 5), **bn_params(3)}, opset=15, rewrites={"batchnorm into conv": 1})
c.model("conv1d_bn", [N("Conv", ["x", "w1"], ["c"]), bn("c", "y")], {"x": rand(2, 4, 20)}, ["y"],
        {"w1": rand(5, 4, 3), **bn_params(5)}, rewrites={"batchnorm into conv": 1})
# As paddle2onnx writes it: opset 11, every weight and BN parameter a Constant node, then the
# hard-swish written out (Add -> Clip -> Div -> Mul).
pw = {"w": rand(8, 3, 3, 3), **bn_params(8), "three": s(3), "zero": s(0), "six": s(6), "six_": s(6)}
c.model("paddle_conv_bn_hardswish", [const(k, v) for k, v in pw.items()] + [
    N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), bn("c", "n"), N("Add", ["n", "three"], ["a"]),
    N("Clip", ["a", "zero", "six"], ["cl"]), N("Div", ["cl", "six_"], ["d"]), N("Mul", ["n", "d"], ["y"])],
    X4, ["y"], opset=11, rewrites={"constant nodes": len(pw), "batchnorm into conv": 1, "hardswish": 1})
c.model("conv_transpose_grouped_bn",
        [N("ConvTranspose", ["x", "wt", "bt"], ["c"], group=3, strides=[2, 2], pads=[1, 1, 1, 1]), bn("c", "y")],
        {"x": rand(2, 6, 5, 4)}, ["y"], {"wt": rand(6, 2, 3, 3), "bt": rand(6), **bn_params(6)},
        rewrites={"batchnorm into convtranspose": 1})
c.model("gemm_bn", [N("Gemm", ["a", "wg", "bg"], ["g"], transB=1, alpha=0.5, beta=2.0), bn("g", "y")],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(8, 16), "bg": rand(8), **bn_params(8)},
        rewrites={"batchnorm into gemm": 1})
c.model("gemm_full_c_bn", [N("Gemm", ["a", "wg", "bg"], ["g"]), bn("g", "y")],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(16, 8), "bg": rand(5, 8), **bn_params(8)},
        rewrites={"batchnorm into gemm": 1})
c.model("gemm_no_c_bn", [N("Gemm", ["a", "wg"], ["g"]), bn("g", "y")],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(16, 8), **bn_params(8)}, rewrites={"batchnorm into gemm": 1})
# Two convs share one weight: each gets its own folded copy, the shared weight is not modified.
c.model("shared_weight_two_bns", [
    N("Conv", ["x", "w", "b"], ["c1"], pads=[1, 1, 1, 1]), bn("c1", "y1", "p"),
    N("Conv", ["x", "w", "b"], ["c2"], pads=[1, 1, 1, 1]), bn("c2", "y2", "q"),
    N("Conv", ["x", "w", "b"], ["y3"], pads=[1, 1, 1, 1])],
    X4, ["y1", "y2", "y3"], {**W, **bn_params(6, "p"), **bn_params(6, "q")}, rewrites={"batchnorm into conv": 2})
# Not folded: the conv output has another reader / is a graph output; a BN parameter is an
# input (overridable initializer at IR 8, a run-time input); the conv weight is a run-time value.
c.model("conv_bn_conv_read_twice", [N("Conv", ["x", "w", "b"], ["c"]), bn("c", "n"), N("Add", ["n", "c"], ["y"])],
        X4, ["y"], {**W, **bn_params(6)}, rewrites={})
c.model("conv_bn_conv_is_output", [N("Conv", ["x", "w", "b"], ["c"]), bn("c", "y")], X4, ["y", "c"],
        {**W, **bn_params(6)}, rewrites={})
c.model("conv_bn_overridable_mean", [N("Conv", ["x", "w", "b"], ["c"]), bn("c", "y")], X4, ["y"],
        {**W, **bn_params(6)}, graph_inputs=["bn_m"], rewrites={})
c.model("conv_bn_runtime_weight", [N("Conv", ["x", "wr"], ["c"]), bn("c", "y")],
        {**X4, "wr": rand(6, 3, 3, 3)}, ["y"], bn_params(6), rewrites={})
# IR 3: every initializer had to be listed as an input, and they are constants all the same.
c.model("conv_bn_ir3_initializers_listed", [N("Conv", ["x", "w", "b"], ["c"]), bn("c", "y")], X4, ["y"],
        {**W, **bn_params(6)}, opset=8, ir_version=3, graph_inputs=list({**W, **bn_params(6)}),
        rewrites={"batchnorm into conv": 1})

# ---- mul / add / sub of a constant into conv / convtranspose / gemm ---------------------------
# One value or one per output channel, in either operand order (Sub: the constant subtracted).
WC = {"w": W["w"], "b": W["b"]}
c.model("conv_mul_scalar_residual", [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                                     N("Mul", ["c", "fifth"], ["m"]), N("Add", ["m", "r"], ["y"])],
        {**X4, "r": rand(2, 6, 9, 8)}, ["y"], {**WC, "fifth": s(0.2)}, rewrites={"mul into conv": 1})
c.model("conv_mul_channels_first_operand", [N("Conv", ["x", "w"], ["c"]), N("Mul", ["k", "c"], ["y"])],
        X4, ["y"], {"w": W["w"], "k": rand(1, 6, 1, 1, low=-2, high=2)}, rewrites={"mul into conv": 1})
c.model("conv_bias_add_tf", [N("Conv", ["x", "w"], ["c"], strides=[2, 2]), N("Add", ["c", "k"], ["y"])],
        X4, ["y"], {"w": W["w"], "k": rand(6, 1, 1)}, rewrites={"add into conv": 1})
c.model("conv_sub_scalar_then_mul", [N("Conv", ["x", "w", "b"], ["c"]), N("Sub", ["c", "half"], ["d"]),
                                     N("Mul", ["d", "k"], ["y"])],
        X4, ["y"], {**WC, "half": s(0.5), "k": rand(6, 1, 1)}, rewrites={"add into conv": 1, "mul into conv": 1})
c.model("conv1d_mul_channels", [N("Conv", ["x", "w1"], ["c"]), N("Mul", ["c", "k"], ["y"])],
        {"x": rand(2, 4, 20)}, ["y"], {"w1": rand(5, 4, 3), "k": rand(5, 1)}, rewrites={"mul into conv": 1})
c.model("conv_transpose_grouped_mul_add",
        [N("ConvTranspose", ["x", "wt"], ["c"], group=3, strides=[2, 2]), N("Mul", ["c", "k"], ["m"]),
         N("Add", ["m", "t"], ["y"])],
        {"x": rand(2, 6, 5, 4)}, ["y"], {"wt": rand(6, 2, 3, 3), "k": rand(1, 6, 1, 1), "t": s(0.25)},
        rewrites={"mul into convtranspose": 1, "add into convtranspose": 1})
c.model("gemm_mul_add", [N("Gemm", ["a", "wg", "bg"], ["g"], transB=1, alpha=0.5, beta=2.0),
                         N("Mul", ["g", "k"], ["m"]), N("Add", ["t", "m"], ["y"])],
        {"a": rand(5, 16)}, ["y"], {"wg": rand(8, 16), "bg": rand(8), "k": rand(8), "t": rand(1, 8)},
        rewrites={"mul into gemm": 1, "add into gemm": 1})
# Not folded: the constant minus the conv; a constant that varies over pixels or has more dims
# than the output (it broadcasts the output up); a non-finite scale; the conv read twice; a
# written-out HardSigmoid after a conv (its Add of 3 is left for that rewrite).
c.model("constant_sub_conv", [N("Conv", ["x", "w", "b"], ["c"]), N("Sub", ["half", "c"], ["y"])],
        X4, ["y"], {**WC, "half": s(0.5)}, rewrites={})
c.model("conv_mul_spatial", [N("Conv", ["x", "w", "b"], ["c"]), N("Mul", ["c", "k"], ["y"])],
        X4, ["y"], {**WC, "k": rand(1, 1, 7, 6)}, rewrites={})
c.model("conv_mul_rank5", [N("Conv", ["x", "w", "b"], ["c"]), N("Mul", ["c", "k"], ["y"])],
        X4, ["y"], {**WC, "k": rand(1, 1, 1, 1, 1)}, rewrites={})
c.model("conv_mul_inf", [N("Conv", ["x", "w", "b"], ["c"]), N("Mul", ["c", "k"], ["y"])],
        X4, ["y"], {**WC, "k": np.array([np.inf], np.float32)}, rewrites={})
c.model("conv_add_read_twice", [N("Conv", ["x", "w", "b"], ["c"]), N("Add", ["c", "half"], ["a"]),
                                N("Mul", ["a", "c"], ["y"])],
        X4, ["y"], {**WC, "half": s(0.5)}, rewrites={})

# ---- matmul + add -> gemm ---------------------------------------------------------------------
A = {"a": rand(5, 16)}
for name, bias, first in [("matmul_add_row", rand(8), False), ("matmul_add_bias_first", rand(8), True),
                          ("matmul_add_1xn", rand(1, 8), False), ("matmul_add_mxn", rand(5, 8), False),
                          ("matmul_add_scalar_bias", rand(1), True)]:
    c.model(name, [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["bm", "m"] if first else ["m", "bm"], ["y"])],
            A, ["y"], {"wm": rand(16, 8), "bm": bias}, rewrites={"matmul+add into gemm": 1})
c.model("mlp_opset11", [N("MatMul", ["a", "w1"], ["m1"]), N("Add", ["m1", "b1"], ["s1"]), N("Relu", ["s1"], ["r1"]),
                        N("MatMul", ["r1", "w2"], ["m2"]), N("Add", ["m2", "b2"], ["y"])],
        {"a": rand(1, 16)}, ["y"], {"w1": rand(16, 32), "b1": rand(32), "w2": rand(32, 4), "b2": rand(4)},
        opset=11, rewrites={"matmul+add into gemm": 2})
# Not rewritten: A is 3-D, B is a run-time value, the bias a run-time value, the product an output.
c.model("matmul_add_3d", [N("MatMul", ["a3", "wm"], ["m"]), N("Add", ["m", "bm"], ["y"])],
        {"a3": rand(2, 5, 16)}, ["y"], {"wm": rand(16, 8), "bm": rand(8)}, rewrites={})
c.model("matmul_add_runtime_b", [N("MatMul", ["a", "b"], ["m"]), N("Add", ["m", "bm"], ["y"])],
        {**A, "b": rand(16, 8)}, ["y"], {"bm": rand(8)}, rewrites={})
c.model("matmul_add_runtime_bias", [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["m", "bm"], ["y"])],
        {**A, "bm": rand(8)}, ["y"], {"wm": rand(16, 8)}, rewrites={})
c.model("matmul_add_product_is_output", [N("MatMul", ["a", "wm"], ["m"]), N("Add", ["m", "bm"], ["y"])],
        A, ["y", "m"], {"wm": rand(16, 8), "bm": rand(8)}, rewrites={})

# ---- hardswish / hardsigmoid ------------------------------------------------------------------
XA = {"x": rand(2, 3, 7, 5, low=-5, high=5)}
HS = {"three": s(3), "zero": s(0), "six": s(6), "sixth": s(1 / 6), "half": s(0.5), "one": s(1)}
clip06 = N("Clip", ["a", "zero", "six"], ["cl"])
c.model("hardswish_paddle", [N("Add", ["x", "three"], ["a"]), clip06, N("Div", ["cl", "six"], ["d"]),
                             N("Mul", ["x", "d"], ["y"])], XA, ["y"], HS, opset=11, rewrites={"hardswish": 1})
c.model("hardswish_torch", [N("Add", ["x", "three"], ["a"]), clip06, N("Mul", ["x", "cl"], ["m"]),
                            N("Div", ["m", "six"], ["y"])], XA, ["y"], HS, opset=13, rewrites={"hardswish": 1})
c.model("hardswish_keras", [N("Add", ["three", "x"], ["a"]), clip06, N("Mul", ["cl", "sixth"], ["d"]),
                            N("Mul", ["d", "x"], ["y"])], XA, ["y"], HS, opset=13, rewrites={"hardswish": 1})
c.model("hardswish_via_hardsigmoid", [N("HardSigmoid", ["x"], ["h"], alpha=1 / 6, beta=0.5),
                                      N("Mul", ["x", "h"], ["y"])], XA, ["y"], opset=13, rewrites={"hardswish": 1})
c.model("hardswish_clip_attributes_opset9", [N("Add", ["x", "three"], ["a"]), N("Clip", ["a"], ["cl"], min=0.0, max=6.0),
                                             N("Div", ["cl", "six"], ["d"]), N("Mul", ["x", "d"], ["y"])],
        XA, ["y"], HS, opset=9, rewrites={"hardswish": 1})
# A [1] constant cannot change the shape of a rank-4 x: still rewritten.
c.model("hardswish_rank1_constants", [N("Add", ["x", "three1"], ["a"]), clip06, N("Div", ["cl", "six1"], ["d"]),
                                      N("Mul", ["x", "d"], ["y"])], XA, ["y"],
        {**HS, "three1": np.array([3], np.float32), "six1": np.array([6], np.float32)}, opset=11,
        rewrites={"hardswish": 1})
c.model("hardswish_add_is_output", [N("Add", ["x", "three"], ["a"]), clip06, N("Div", ["cl", "six"], ["d"]),
                                    N("Mul", ["x", "d"], ["y"])], XA, ["y", "a"], HS, opset=11,
        rewrites={"hardsigmoid": 1})  # clip(a, 0, 6) / 6 of the Add's output, which stays
c.model("hardswish_clip_read_twice", [N("Add", ["x", "three"], ["a"]), clip06, N("Div", ["cl", "six"], ["d"]),
                                      N("Mul", ["x", "d"], ["m"]), N("Add", ["m", "cl"], ["y"])],
        XA, ["y"], HS, opset=11, rewrites={})
c.model("hardswish_wrong_bound", [N("Add", ["x", "three"], ["a"]), N("Clip", ["a", "zero", "five"], ["cl"]),
                                  N("Div", ["cl", "six"], ["d"]), N("Mul", ["x", "d"], ["y"])],
        XA, ["y"], {**HS, "five": s(5)}, opset=11, rewrites={})
c.model("hardsigmoid_paddle", [N("Mul", ["x", "fifth"], ["m"]), N("Add", ["m", "half"], ["a"]),
                               N("Clip", ["a", "zero", "one"], ["y"])],
        XA, ["y"], {**HS, "fifth": s(0.2)}, opset=11, rewrites={"hardsigmoid": 1})
c.model("hardsigmoid_torch", [N("Add", ["x", "three"], ["a"]), clip06, N("Div", ["cl", "six"], ["y"])],
        XA, ["y"], HS, opset=13, rewrites={"hardsigmoid": 1})
c.model("hardsigmoid_clip_attributes", [N("Mul", ["x", "fifth"], ["m"]), N("Add", ["m", "half"], ["a"]),
                                        N("Clip", ["a"], ["y"], min=0.0, max=1.0)],
        XA, ["y"], {**HS, "fifth": s(0.2)}, opset=10, rewrites={"hardsigmoid": 1})
# MobileNetV3's squeeze-excite gate: x * hardsigmoid(conv(...)), the gate's input not x.
c.model("se_gate_hardsigmoid", [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Add", ["c", "three"], ["a"]),
                                clip06, N("Div", ["cl", "six"], ["d"]), N("Mul", ["x6", "d"], ["y"])],
        {**XA, "x6": rand(2, 6, 7, 5)}, ["y"], {**HS, "w": rand(6, 3, 3, 3)}, opset=11, rewrites={"hardsigmoid": 1})

# ---- gelu ---------------------------------------------------------------------------------------
XG = {"x": rand(3, 40, low=-4, high=4)}
G = {"sqrt2": s(1.4142135381698608), "rsqrt2": s(0.7071067811865476), "one": s(1), "half": s(0.5)}
c.model("gelu_erf_torch", [N("Div", ["x", "sqrt2"], ["u"]), N("Erf", ["u"], ["e"]), N("Add", ["e", "one"], ["a"]),
                           N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "half"], ["y"])],
        XG, ["y"], G, rewrites={"gelu": 1})
c.model("gelu_erf_dynamo", [N("Mul", ["x", "half"], ["h"]), N("Mul", ["x", "rsqrt2"], ["u"]), N("Erf", ["u"], ["e"]),
                            N("Add", ["e", "one"], ["a"]), N("Mul", ["h", "a"], ["y"])],
        XG, ["y"], G, opset=18, rewrites={"gelu": 1})
c.model("gelu_erf_tf", [N("Mul", ["half", "x"], ["h"]), N("Div", ["x", "sqrt2"], ["u"]), N("Erf", ["u"], ["e"]),
                        N("Add", ["one", "e"], ["a"]), N("Mul", ["h", "a"], ["y"])],
        XG, ["y"], G, opset=13, rewrites={"gelu": 1})
c.model("gelu_erf_erf_read_twice", [N("Div", ["x", "sqrt2"], ["u"]), N("Erf", ["u"], ["e"]),
                                    N("Add", ["e", "one"], ["a"]), N("Mul", ["x", "a"], ["m"]),
                                    N("Mul", ["m", "half"], ["g"]), N("Add", ["g", "e"], ["y"])],
        XG, ["y"], G, rewrites={})
c.model("gelu_erf_wrong_half", [N("Div", ["x", "sqrt2"], ["u"]), N("Erf", ["u"], ["e"]), N("Add", ["e", "one"], ["a"]),
                                N("Mul", ["x", "a"], ["m"]), N("Mul", ["m", "third"], ["y"])],
        XG, ["y"], {**G, "third": s(1 / 3)}, rewrites={})


# GELU written out with tanh (GPT-2's gelu_new), in the exporter's operand order and swapped;
# a near miss (another cubic coefficient) is not rewritten and still right; x read elsewhere too.
def gelu_tanh_chain(x, y, coeff=0.044715, swap=False, p=""):
    def mul(a, b, out):
        return N("Mul", [b, a] if swap else [a, b], [out])
    return [mul(x, p + "half", p + "m"), N("Pow", [x, p + "three"], [p + "cube"]),
            mul(p + "cube", p + "coeff", p + "mc"), N("Add", [p + "mc", x] if swap else [x, p + "mc"], [p + "s"]),
            mul(p + "s", p + "k", p + "u"), N("Tanh", [p + "u"], [p + "t"]),
            N("Add", [p + "t", p + "one"], [p + "a"]), mul(p + "m", p + "a", y)], \
        {p + "half": s(0.5), p + "three": s(3), p + "coeff": s(coeff), p + "k": s(0.7978845608), p + "one": s(1)}


for name, kwargs, rw in [("gelu_tanh_chain", {}, {"gelu tanh": 1}),
                         ("gelu_tanh_chain_swapped", {"swap": True}, {"gelu tanh": 1}),
                         ("gelu_tanh_chain_near_miss", {"coeff": 0.05}, {})]:
    nodes, consts = gelu_tanh_chain("x", "y", **kwargs)
    c.model(name, nodes, XG, ["y"], consts, rewrites=rw)
nodes, consts = gelu_tanh_chain("h", "g", p="q_")
c.model("gemm_gelu_tanh_chain_x_read_twice",
        [N("Gemm", ["a", "wg"], ["h"])] + nodes + [N("Add", ["g", "h"], ["y"])],
        {"a": rand(4, 16)}, ["y"], {"wg": rand(16, 24), **consts}, rewrites={"gelu tanh": 1})
# x^3 as two Muls (tf2onnx), and Megatron's sqrt(2/pi) * x * (1 + 0.044715 x^2).
GT = {"k": s(0.7978845608028654), "coeff": s(0.044715), "one": s(1), "half": s(0.5)}
c.model("gelu_tanh_cube_as_muls", [
    N("Mul", ["x", "x"], ["x2"]), N("Mul", ["x2", "x"], ["x3"]), N("Mul", ["coeff", "x3"], ["c3"]),
    N("Add", ["x", "c3"], ["sm"]), N("Mul", ["k", "sm"], ["u"]), N("Tanh", ["u"], ["t"]),
    N("Add", ["one", "t"], ["a"]), N("Mul", ["half", "x"], ["h"]), N("Mul", ["h", "a"], ["y"])],
    XG, ["y"], GT, rewrites={"gelu tanh": 1})
c.model("gelu_tanh_megatron", [
    N("Mul", ["x", "k"], ["kx"]), N("Mul", ["coeff", "x"], ["cx"]), N("Mul", ["cx", "x"], ["cx2"]),
    N("Add", ["one", "cx2"], ["p"]), N("Mul", ["kx", "p"], ["u"]), N("Tanh", ["u"], ["t"]),
    N("Add", ["one", "t"], ["a"]), N("Mul", ["x", "half"], ["h"]), N("Mul", ["h", "a"], ["y"])],
    XG, ["y"], GT, rewrites={"gelu tanh": 1})

# ---- mish / swish -------------------------------------------------------------------------------
c.model("mish_softplus", [N("Softplus", ["x"], ["sp"]), N("Tanh", ["sp"], ["t"]), N("Mul", ["x", "t"], ["y"])],
        XG, ["y"], rewrites={"mish": 1})
c.model("mish_log_exp", [N("Exp", ["x"], ["e"]), N("Add", ["e", "one"], ["a"]), N("Log", ["a"], ["sp"]),
                         N("Tanh", ["sp"], ["t"]), N("Mul", ["t", "x"], ["y"])],
        XG, ["y"], {"one": s(1)}, opset=13, rewrites={"mish": 1})
c.model("silu", [N("Sigmoid", ["x"], ["sg"]), N("Mul", ["x", "sg"], ["y"])], XG, ["y"], rewrites={"swish": 1})
c.model("silu_swapped_after_conv", [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                                    N("Sigmoid", ["c"], ["sg"]), N("Mul", ["sg", "c"], ["y"])],
        X4, ["y"], W, rewrites={"swish": 1})
c.model("swish_beta", [N("Mul", ["x", "beta"], ["bx"]), N("Sigmoid", ["bx"], ["sg"]), N("Mul", ["x", "sg"], ["y"])],
        XG, ["y"], {"beta": s(1.702)}, rewrites={"swish": 1})
c.model("silu_sigmoid_is_output", [N("Sigmoid", ["x"], ["sg"]), N("Mul", ["x", "sg"], ["y"])], XG, ["y", "sg"],
        rewrites={})

# ---- layernorm / rmsnorm / softmax ------------------------------------------------------------
XL = {"x": rand(2, 5, 16, low=-3, high=3)}
LN = {"two": s(2), "eps": s(1e-5), "gamma": rand(16), "beta": rand(16)}


def layer_norm(axes=(-1,), opset=13, square="pow", divide="div", gamma="gamma", beta="beta", x="x", y="y"):
    ax = {} if opset >= 18 else {"axes": list(axes)}
    ins = ["axes"] if opset >= 18 else []
    nodes = [N("ReduceMean", [x] + ins, ["mean"], **ax), N("Sub", [x, "mean"], ["d"]),
             N("Pow", ["d", "two"], ["sq"]) if square == "pow" else N("Mul", ["d", "d"], ["sq"]),
             N("ReduceMean", ["sq"] + ins, ["var"], **ax), N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"])]
    out = "n" if gamma or beta else y
    if divide == "div":
        nodes.append(N("Div", ["d", "sd"], [out]))
    else:
        nodes += [N("Reciprocal", ["sd"], ["rs"]), N("Mul", ["d", "rs"], [out])]
    if gamma:
        nodes.append(N("Mul", ["n", gamma], ["g" if beta else y]))
    if beta:
        nodes.append(N("Add", ["g" if gamma else "n", beta], [y]))
    return nodes


c.model("layernorm_torch", layer_norm(), XL, ["y"], LN, rewrites={"layernorm": 1})
c.model("layernorm_mul_self_reciprocal_opset18", layer_norm(opset=18, square="mul", divide="reciprocal"), XL, ["y"],
        {**LN, "axes": np.array([-1], np.int64)}, opset=18, rewrites={"layernorm": 1})
c.model("layernorm_no_affine", layer_norm(gamma=None, beta=None), XL, ["y"], LN, rewrites={"layernorm": 1})
c.model("layernorm_positive_axis_gamma_1xn", layer_norm(axes=(2,), gamma="g1n", beta=None), XL, ["y"],
        {**LN, "g1n": rand(1, 16)}, rewrites={"layernorm": 1})
c.model("layernorm_two_axes", layer_norm(axes=(-2, -1)), XL, ["y"], LN, rewrites={"layernorm": 1})
c.model("layernorm_runtime_gamma", layer_norm(beta=None, gamma="gr"), {**XL, "gr": rand(16)}, ["y"], LN,
        rewrites={"layernorm": 1})
# gamma [1, 1, 1, 16] makes the product rank 4: not a LayerNormalization of the rank-3 x (the
# normalisation itself still is one, the Mul stays).
c.model("layernorm_gamma_raises_rank", layer_norm(beta=None, gamma="g4"), XL, ["y"], {**LN, "g4": rand(1, 1, 1, 16)},
        rewrites={"layernorm": 1})
c.model("layernorm_not_last_axis", layer_norm(axes=(1,)), XL, ["y"], {**LN, "gamma": rand(16), "beta": rand(16)},
        rewrites={})
# d = x - mean is read outside: no LayerNormalization, but d * rsqrt(mean(d^2) + eps) * gamma is
# an RMSNormalization of d (the Add of beta stays).
c.model("layernorm_centred_is_output", layer_norm(), XL, ["y", "d"], LN, rewrites={"rmsnorm": 1})
# x of a shape known only at run time (a Reshape to a computed shape, as in transformers with a
# symbolic sequence length): the normalised dims come from gamma, the dtype from the Reshape's input.
c.model("layernorm_shape_known_at_run_time",
        [N("Shape", ["x_in"], ["shp"]), N("Reshape", ["x_in", "shp"], ["x"])] + layer_norm(), {"x_in": rand(2, 5, 16)},
        ["y"], LN, rewrites={"layernorm": 1})
c.model("gelu_shape_known_at_run_time",
        [N("Shape", ["x_in"], ["shp"]), N("Reshape", ["x_in", "shp"], ["x"]), N("Div", ["x", "sqrt2"], ["u"]),
         N("Erf", ["u"], ["e"]), N("Add", ["e", "one"], ["a"]), N("Mul", ["x", "a"], ["m"]),
         N("Mul", ["m", "half"], ["y"])], {"x_in": rand(3, 40)}, ["y"], G, rewrites={"gelu": 1})
RMS = {"two": s(2), "eps": s(1e-6), "w": rand(16), "one": s(1)}
c.model("rmsnorm_llama", [N("Pow", ["x", "two"], ["sq"]), N("ReduceMean", ["sq"], ["ms"], axes=[-1]),
                          N("Add", ["ms", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Reciprocal", ["sd"], ["rs"]),
                          N("Mul", ["x", "rs"], ["n"]), N("Mul", ["w", "n"], ["y"])],
        XL, ["y"], RMS, rewrites={"rmsnorm": 1})
c.model("rmsnorm_div_opset18", [N("Mul", ["x", "x"], ["sq"]), N("ReduceMean", ["sq", "axes"], ["ms"]),
                                N("Add", ["eps", "ms"], ["ve"]), N("Sqrt", ["ve"], ["sd"]), N("Div", ["x", "sd"], ["y"])],
        XL, ["y"], {**RMS, "axes": np.array([-1], np.int64)}, opset=18, rewrites={"rmsnorm": 1})
c.model("rmsnorm_one_over_sqrt", [N("Pow", ["x", "two"], ["sq"]), N("ReduceMean", ["sq"], ["ms"], axes=[2]),
                                  N("Add", ["ms", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]),
                                  N("Div", ["one", "sd"], ["rs"]), N("Mul", ["rs", "x"], ["n"]),
                                  N("Mul", ["n", "w"], ["y"])],
        XL, ["y"], RMS, rewrites={"rmsnorm": 1})


def softmax(axis=-1, opset=11, divide="div"):
    ins_max = ["ax"] if opset >= 18 else []
    ins_sum = ["ax"] if opset >= 13 else []
    am = {} if opset >= 18 else {"axes": [axis]}
    asum = {} if opset >= 13 else {"axes": [axis]}
    nodes = [N("ReduceMax", ["x"] + ins_max, ["mx"], **am), N("Sub", ["x", "mx"], ["sh"]), N("Exp", ["sh"], ["e"]),
             N("ReduceSum", ["e"] + ins_sum, ["z"], **asum)]
    if divide == "div":
        return nodes + [N("Div", ["e", "z"], ["y"])]
    return nodes + [N("Reciprocal", ["z"], ["rz"]), N("Mul", ["rz", "e"], ["y"])]


AX = {"ax": np.array([-1], np.int64)}
c.model("softmax_opset11", softmax(), XL, ["y"], opset=11, rewrites={"softmax": 1})
c.model("softmax_opset13_axis1_reciprocal", softmax(axis=1, opset=13, divide="recip"), XL, ["y"],
        {"ax": np.array([1], np.int64)}, opset=13, rewrites={"softmax": 1})
c.model("softmax_opset18", softmax(opset=18), XL, ["y"], AX, opset=18, rewrites={"softmax": 1})
c.model("softmax_exp_is_output", softmax(), XL, ["y", "e"], opset=11, rewrites={})
c.model("softmax_axes_differ", [N("ReduceMax", ["x"], ["mx"], axes=[1]), N("Sub", ["x", "mx"], ["sh"]),
                                N("Exp", ["sh"], ["e"]), N("ReduceSum", ["e"], ["z"], axes=[2]),
                                N("Div", ["e", "z"], ["y"])], XL, ["y"], opset=11, rewrites={})

# ---- subgraphs ----------------------------------------------------------------------------------
# An If whose branches hold a BN after a conv of an outer value and a written-out hard-swish and
# SiLU, with a Constant node: rewritten inside each branch.
def branch(name, act):
    g = [const(name + "_w", rand(6, 3, 3, 3)), N("Conv", ["x", name + "_w"], [name + "_c"], pads=[1, 1, 1, 1]),
         N("BatchNormalization", [name + "_c", "bn_s", "bn_b", "bn_m", "bn_v"], [name + "_n"])]
    if act == "hardswish":
        g += [N("Add", [name + "_n", "three"], [name + "_a"]), N("Clip", [name + "_a", "zero", "six"], [name + "_cl"]),
              N("Div", [name + "_cl", "six"], [name + "_d"]), N("Mul", [name + "_n", name + "_d"], [name + "_y"])]
    else:
        g += [N("Sigmoid", [name + "_n"], [name + "_s"]), N("Mul", [name + "_n", name + "_s"], [name + "_y"])]
    return helper.make_graph(g, name, [], [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, None)])


c.model("if_branches", [N("If", ["cond"], ["y"], then_branch=branch("then", "hardswish"),
                              else_branch=branch("else", "silu"))],
        {**X4, "cond": np.array(True)}, ["y"], {**bn_params(6), **HS}, opset=13,
        rewrites={"constant nodes": 2, "batchnorm into conv": 2, "hardswish": 1, "swish": 1})
# A Loop body carrying x through three SiLUs written out, one iteration at a time.
loop_body = helper.make_graph(
    [N("Identity", ["cond_in"], ["cond_out"]), N("Sigmoid", ["x_in"], ["sg"]), N("Mul", ["x_in", "sg"], ["x_out"])],
    "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
             helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [3, 40])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [3, 40])])
c.model("loop_body_silu", [N("Loop", ["trips", "", "x"], ["y"], body=loop_body)], XG, ["y"],
        {"trips": np.array(3, np.int64)}, opset=13, rewrites={"swish": 1})

# ---- If on a condition known at load ------------------------------------------------------------
def graph_of(nodes, name, outputs, initializers=None):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                             [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])


THEN = graph_of([N("Mul", ["x", "k"], ["t_m"]), N("Add", ["t_m", "x"], ["t_y"])], "then", ["t_y"], {"k": rand(4)})
ELSE = graph_of([N("Neg", ["x"], ["e_y"])], "else", ["e_y"])
X2 = {"x": rand(3, 4)}
# `if self.training` as torch writes it: a Constant condition; each branch taken once.
for flag in (True, False):
    c.model(f"if_constant_{str(flag).lower()}",
            [N("Constant", [], ["cond"], value=numpy_helper.from_array(np.array(flag), "cond")),
             N("If", ["cond"], ["y"], then_branch=THEN, else_branch=ELSE), N("Relu", ["y"], ["z"])],
            X2, ["z"], opset=13, rewrites={"constant nodes": 1, "constant if": 1})
# `if x.shape[1] == 4`: Shape -> Gather -> Equal folds on the static shape; the chain goes too.
c.model("if_shape_folds",
        [N("Shape", ["x"], ["sh"]), N("Gather", ["sh", "one"], ["d1"]), N("Equal", ["d1", "four"], ["eq"]),
         N("Not", ["eq"], ["ne"]), N("If", ["ne"], ["y"], then_branch=ELSE, else_branch=THEN)],
        X2, ["y"], {"one": np.array(1, np.int64), "four": np.array(4, np.int64)}, opset=13,
        rewrites={"constant if": 1})
# The branch's outputs: an outer value (through an Identity), a branch initializer, the same
# value twice; a value named like one of the outer graph's, renamed. onnxruntime refuses an outer
# value as a subgraph output (the spec allows it), so the expected values are numpy's.
C0 = rand(2)
SIG = 1 / (1 + np.exp(-X2["x"].astype(np.float64)))
c.model("if_outputs_outer_and_initializer",
        [N("Relu", ["x"], ["r"]),
         N("If", ["cond"], ["y1", "y2", "y3", "y4"],
           then_branch=graph_of([N("Sigmoid", ["x"], ["r"]), N("Add", ["r", "x"], ["s"])], "then",
                                ["x", "c0", "s", "s"], {"c0": C0}),
           else_branch=graph_of([N("Neg", ["x"], ["n"])], "else", ["n", "c1", "n", "n"], {"c1": rand(2)})),
         N("Add", ["y1", "r"], ["z"])],
        X2, ["z", "y2", "y3", "y4"], {"cond": np.array(True)}, opset=13, rewrites={"constant if": 1},
        expected={"z": X2["x"] + np.maximum(X2["x"], 0), "y2": C0, "y3": (SIG + X2["x"]).astype(np.float32),
                  "y4": (SIG + X2["x"]).astype(np.float32)})
# Nested: the taken branch holds an If on an outer constant, inlined in the next round.
INNER = N("If", ["cond2"], ["i_y"], then_branch=graph_of([N("Tanh", ["x"], ["tt"])], "t2", ["tt"]),
          else_branch=graph_of([N("Abs", ["x"], ["aa"])], "e2", ["aa"]))
c.model("if_nested",
        [N("If", ["cond"], ["y"], then_branch=graph_of([INNER, N("Mul", ["i_y", "x"], ["o_y"])], "then", ["o_y"]),
           else_branch=ELSE)],
        X2, ["y"], {"cond": np.array([True]), "cond2": np.array(False)}, opset=13, rewrites={"constant if": 2})
# Inside a Loop body, on a constant of the outer graph.
LOOP_IF = helper.make_graph(
    [N("Identity", ["c_in"], ["c_out"]),
     N("If", ["flag"], ["x_out"], then_branch=graph_of([N("Sigmoid", ["x_in"], ["lt"])], "lt", ["lt"]),
       else_branch=graph_of([N("Neg", ["x_in"], ["le"])], "le", ["le"]))],
    "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
             helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
             helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [3, 4])],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
     helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [3, 4])])
c.model("if_in_loop_body", [N("Loop", ["trips", "", "x"], ["y"], body=LOOP_IF)], X2, ["y"],
        {"trips": np.array(3, np.int64), "flag": np.array(True)}, opset=13, rewrites={"constant if": 1})
# Near misses: the condition is a graph input, or an initializer a graph input overrides, or
# comes from a shape known only at run time: the If stays.
c.model("if_condition_input", [N("If", ["cond"], ["y"], then_branch=THEN, else_branch=ELSE)],
        {**X2, "cond": np.array(False)}, ["y"], opset=13, rewrites={})
c.model("if_condition_overridable", [N("If", ["cond"], ["y"], then_branch=THEN, else_branch=ELSE)],
        X2, ["y"], {"cond": np.array(True)}, graph_inputs=["cond"], opset=13, rewrites={})
# Thirty Ifs nested in their then-branches (real exports nest up to about 25 deep), each on an
# outer constant: all inlined, one round each. Expected from numpy: onnxruntime's session
# creation grows about 2x per level of this nesting (2.2 s at 16, 15.6 s at 20).
deep = graph_of([N("Mul", ["x", "two"], ["d_y"])], "d30", ["d_y"])
for depth in range(29, 0, -1):
    deep = graph_of([N("If", ["cond"], [f"d{depth}_y"], then_branch=deep, else_branch=graph_of(
        [N("Neg", ["x"], [f"d{depth}_n"])], f"e{depth}", [f"d{depth}_n"]))], f"d{depth}", [f"d{depth}_y"])
c.model("if_nested_30_deep", [N("If", ["cond"], ["y"], then_branch=deep, else_branch=ELSE)], X2, ["y"],
        {"cond": np.array(True), "two": s(2)}, opset=13, rewrites={"constant if": 30}, expected={"y": X2["x"] * 2})
