"""Cases of the QDQ fusion (core/optimize/qdq.cpp): models in onnxruntime's QDQ format, float in
and out. case_runner runs each at optimization level 0 (the graph as written: DequantizeLinear,
the float op, QuantizeLinear) and 1 (fused into the quantized op), against onnxruntime with its
graph optimizations off (the unfused float arithmetic). The two can differ by one step of the
last QuantizeLinear where a value lies at a rounding tie, so the tolerance is one output
quantization step. A case's name ends with the op the fusion must produce
(tests/python/test_qdq_fusion.py checks the plans)."""
import numpy as np
from onnx import TensorProto, helper

from casegen import Cases, ort_u8s8_saturates, rand, randint, reference_outputs

c = Cases("qdq")
f32 = np.float32
U8, I8 = np.uint8, np.int8
OPSET = 17


def qdq(x, scale, zp, name):
    """x -> QuantizeLinear -> DequantizeLinear: nodes and initializers."""
    nodes = [helper.make_node("QuantizeLinear", [x, f"{name}_s", f"{name}_z"], [f"{name}_q"]),
             helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"],
                              [f"{name}_dq"])]
    return nodes, {f"{name}_s": np.array(scale, f32), f"{name}_z": np.array(zp[0], zp[1])}


def weights(w, scale, zp, name, axis=None):
    """Constant integer weights -> DequantizeLinear (per tensor, or per `axis`)."""
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_s", f"{name}_z"],
                            [f"{name}_dq"], **attrs)
    return [node], {f"{name}_q": w, f"{name}_s": np.asarray(scale, f32), f"{name}_z": zp}


def case(name, op_nodes, inputs, inits, out_scale, out_zp, out="y_f"):
    """The op's float output `out` -> Q -> DQ -> graph output "y"."""
    nodes = list(op_nodes)
    qn, qi = qdq(out, out_scale, out_zp, "y")
    nodes += qn
    nodes.append(helper.make_node("Identity", ["y_dq"], ["y"]))
    step = out_scale * 1.01
    c.model(name, nodes, inputs, ["y"], {**inits, **qi}, opset=OPSET, rtol=1e-5, atol=step)


def q(shape, t):
    info = np.iinfo(t)
    return randint(*shape, low=info.min, high=info.max + 1, dtype=t)


# ---- Conv: per-channel int8 weights, int32 bias, u8 or s8 activations ----
for t, zx in ((U8, 128), (I8, 3)):
    name = np.dtype(t).name
    xn, xi = qdq("x", 0.05, (zx, t), "x")
    m = 6
    wn, wi = weights(q((m, 4, 3, 3), I8), rand(m, low=0.004, high=0.01), np.zeros(m, I8), "w",
                     axis=0)
    bn, bi = weights(randint(m, low=-2000, high=2000, dtype=np.int32),
                     f32(0.05) * wi["w_s"], np.zeros(m, np.int32), "b", axis=0)
    conv = helper.make_node("Conv", ["x_dq", "w_dq", "b_dq"], ["y_f"], pads=[1, 1, 1, 1],
                            strides=[1, 2])
    case(f"conv_{name}__QLinearConv", xn + wn + bn + [conv], {"x": rand(2, 4, 9, 11, low=-3, high=3)},
         {**xi, **wi, **bi}, 0.08, (5 if t == I8 else 100, t))
# Per-tensor uint8 weights without a zero point input on the weights' DequantizeLinear.
xn, xi = qdq("x", 0.04, (120, U8), "x")
w_nodes = [helper.make_node("DequantizeLinear", ["w_q", "w_s"], ["w_dq"])]
conv = helper.make_node("Conv", ["x_dq", "w_dq"], ["y_f"], group=2)
case("conv_no_weight_zero_point__QLinearConv", xn + w_nodes + [conv],
     {"x": rand(1, 4, 6, 6, low=-2, high=3)},
     {**xi, "w_q": q((4, 2, 2, 2), U8), "w_s": np.array(0.003, f32)}, 0.05, (90, U8))

# ---- MatMul: per-column weights ----
xn, xi = qdq("x", 0.03, (128, U8), "x")
wn, wi = weights(q((24, 10), I8), rand(10, low=0.005, high=0.01), np.zeros(10, I8), "w", axis=1)
mm = helper.make_node("MatMul", ["x_dq", "w_dq"], ["y_f"])
case("matmul_per_column__QLinearMatMul", xn + wn + [mm], {"x": rand(3, 5, 24, low=-2, high=2)},
     {**xi, **wi}, 0.06, (128, U8))

# ---- Gemm (transB, bias) -> QGemm ----
xn, xi = qdq("x", 0.03, (128, U8), "x")
wn, wi = weights(q((12, 30), I8), rand(12, low=0.005, high=0.01), np.zeros(12, I8), "w", axis=0)
bn, bi = weights(randint(12, low=-999, high=999, dtype=np.int32), f32(0.03) * wi["w_s"],
                 np.zeros(12, np.int32), "b", axis=0)
gemm = helper.make_node("Gemm", ["x_dq", "w_dq", "b_dq"], ["y_f"], transB=1)
case("gemm_transb_bias__com.microsoft.QGemm", xn + wn + bn + [gemm],
     {"x": rand(4, 30, low=-2, high=2)}, {**xi, **wi, **bi}, 0.05, (128, U8))

# ---- Add, Mul (two quantized activations) ----
for op in ("Add", "Mul"):
    an, ai = qdq("a", 0.02, (128, U8), "a")
    bn_, bi_ = qdq("b", 0.03, (120, U8), "b")
    node = helper.make_node(op, ["a_dq", "b_dq"], ["y_f"])
    case(f"{op.lower()}__com.microsoft.QLinear{op}", an + bn_ + [node],
         {"a": rand(2, 3, 40, low=-2, high=2), "b": rand(2, 3, 40, low=-2, high=2)},
         {**ai, **bi_}, 0.05 if op == "Add" else 0.02, (128, U8))

# ---- unary ops ----
for op, attrs, shape in (("Sigmoid", {}, (3, 50)), ("LeakyRelu", {"alpha": 0.1}, (3, 50)),
                         ("GlobalAveragePool", {}, (2, 5, 6, 7))):
    xn, xi = qdq("x", 0.04, (5, I8), "x")
    node = helper.make_node(op, ["x_dq"], ["y_f"], **attrs)
    case(f"{op.lower()}__com.microsoft.QLinear{op}", xn + [node],
         {"x": rand(*shape, low=-4, high=4)}, xi, 0.01 if op == "Sigmoid" else 0.03, (-100, I8))

# ---- MaxPool: the same scale and zero point on both sides ----
xn, xi = qdq("x", 0.04, (128, U8), "x")
node = helper.make_node("MaxPool", ["x_dq"], ["y_f"], kernel_shape=[2, 2], strides=[2, 2])
case("maxpool__MaxPool", xn + [node], {"x": rand(1, 3, 8, 8, low=-4, high=4)}, xi, 0.04,
     (128, U8))

# ---- Concat: inputs of three scales -> QLinearConcat ----
nodes, inits = [], {}
for k, (scale, zp) in enumerate(((0.02, 128), (0.05, 100), (0.03, 140))):
    n_, i_ = qdq(f"x{k}", scale, (zp, U8), f"x{k}")
    nodes += n_
    inits.update(i_)
nodes.append(helper.make_node("Concat", ["x0_dq", "x1_dq", "x2_dq"], ["y_f"], axis=1))
case("concat__com.microsoft.QLinearConcat", nodes,
     {"x0": rand(2, 3, 5, low=-2, high=2), "x1": rand(2, 1, 5, low=-4, high=4),
      "x2": rand(2, 4, 5, low=-3, high=3)}, inits, 0.04, (128, U8))

# ---- AveragePool (with and without count_include_pad), Softmax -> com.microsoft.QLinear* ----
for include_pad in (0, 1):
    xn, xi = qdq("x", 0.04, (5, I8), "x")
    node = helper.make_node("AveragePool", ["x_dq"], ["y_f"], kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=include_pad)
    case(f"averagepool_pad{include_pad}__com.microsoft.QLinearAveragePool", xn + [node],
         {"x": rand(2, 3, 9, 8, low=-4, high=4)}, xi, 0.03, (-3, I8))
xn, xi = qdq("x", 0.03, (128, U8), "x")
node = helper.make_node("Softmax", ["x_dq"], ["y_f"], axis=-1)
case("softmax__com.microsoft.QLinearSoftmax", xn + [node], {"x": rand(3, 4, 12, low=-3, high=3)},
     xi, 1 / 256, (0, U8))

# ---- Where (a float condition input compared to 0) -> QLinearWhere ----
an, ai = qdq("a", 0.02, (128, U8), "a")
bn_, bi_ = qdq("b", 0.05, (100, U8), "b")
nodes = an + bn_ + [helper.make_node("Greater", ["c", "zero"], ["cond"]),
                    helper.make_node("Where", ["cond", "a_dq", "b_dq"], ["y_f"])]
case("where__com.microsoft.QLinearWhere", nodes,
     {"c": rand(2, 1, 5, low=-1, high=1), "a": rand(2, 3, 5, low=-2, high=2),
      "b": rand(3, 1, low=-4, high=4)}, {**ai, **bi_, "zero": np.array(0, f32)}, 0.04, (120, U8))

# ---- data-movement ops between equal scales and zero points: run on the integers ----
xn, xi = qdq("x", 0.04, (120, U8), "x")
rn, ri = qdq("r", 0.04, (120, U8), "r")
nodes = xn + [helper.make_node("Reshape", ["x_dq", "shape"], ["r"])] + rn + [
    helper.make_node("Transpose", ["r_dq"], ["y_f"], perm=[0, 2, 1])]
case("reshape_transpose__Transpose", nodes, {"x": rand(2, 3, 4, 5, low=-4, high=4)},
     {**xi, **ri, "shape": np.array([2, 12, 5], np.int64)}, 0.04, (120, U8))
xn, xi = qdq("x", 0.05, (-7, I8), "x")
node = helper.make_node("Resize", ["x_dq", "", "scales"], ["y_f"], mode="nearest")
case("resize_nearest__Resize", xn + [node], {"x": rand(1, 2, 3, 4, low=-4, high=4)},
     {**xi, "scales": np.array([1, 1, 2, 1.5], f32)}, 0.05, (-7, I8))
xn, xi = qdq("x", 0.05, (100, U8), "x")
fn_, fi = qdq("f", 0.05, (100, U8), "f")
nodes = xn + [helper.make_node("Unsqueeze", ["x_dq", "axes"], ["u"])]
un, ui = qdq("u", 0.05, (100, U8), "u")
nodes += un + [helper.make_node("Squeeze", ["u_dq", "axes"], ["f"])] + fn_ + [
    helper.make_node("Flatten", ["f_dq"], ["y_f"], axis=2)]
case("unsqueeze_squeeze_flatten__Flatten", nodes, {"x": rand(2, 3, 4, low=-4, high=4)},
     {**xi, **ui, **fi, "axes": np.array([1], np.int64)}, 0.05, (100, U8))

# ---- the dynamic pattern (quantize_dynamic's MatMul) -> DynamicQuantizeMatMul ----
w = q((32, 20), I8)
nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["x_q", "x_s", "x_z"]),
         helper.make_node("MatMulInteger", ["x_q", "w", "x_z", "w_z"], ["acc"]),
         helper.make_node("Cast", ["acc"], ["acc_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x_s", "w_s"], ["scale"]),
         helper.make_node("Mul", ["acc_f", "scale"], ["y"])]


def dynamic_case(name, nodes, inputs, inits):
    # MatMulInteger of uint8 by int8: where onnxruntime's product saturates
    # (casegen.ort_u8s8_saturates), onnx's reference gives the expected values.
    expected = None
    if ort_u8s8_saturates():
        expected = dict(zip(["y"], reference_outputs(name, nodes, inputs, ["y"], inits, OPSET,
                                                     8)[1]))
    c.model(name, nodes, inputs, ["y"], inits, opset=OPSET, rtol=1e-4, atol=1e-3,
            expected=expected)


dynamic_case("dynamic_matmul__com.microsoft.DynamicQuantizeMatMul", nodes,
             {"x": rand(2, 7, 32, low=-3, high=3)},
             {"w": w, "w_z": np.array(0, I8), "w_s": np.array(0.01, f32)})
# ... with the layer's bias added after (fused as the op's bias).
nodes[-1] = helper.make_node("Mul", ["acc_f", "scale"], ["y_nobias"])
nodes.append(helper.make_node("Add", ["y_nobias", "bias"], ["y"]))
dynamic_case("dynamic_matmul_bias__com.microsoft.DynamicQuantizeMatMul", nodes,
             {"x": rand(3, 32, low=-3, high=3)},
             {"w": w, "w_z": np.array(0, I8), "w_s": np.array(0.01, f32), "bias": rand(20)})

# ---- groups that must stay unfused: a float value read elsewhere too, per-tensor Q missing ----
xn, xi = qdq("x", 0.05, (128, U8), "x")
wn, wi = weights(q((3, 2, 1, 1), I8), np.array(0.01, f32), np.array(0, I8), "w")
nodes = xn + wn + [helper.make_node("Conv", ["x_dq", "w_dq"], ["y_f"]),
                   helper.make_node("Relu", ["y_f"], ["side"])]
qn, qi = qdq("y_f", 0.05, (128, U8), "y")
c.model("conv_output_read_twice__Conv", nodes + qn + [helper.make_node("Add", ["y_dq", "side"], ["y"])],
        {"x": rand(1, 2, 4, 4, low=-2, high=2)}, ["y"], {**xi, **wi, **qi}, opset=OPSET,
        rtol=1e-5, atol=0.06)
