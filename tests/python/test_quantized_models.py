"""Models quantized by onnxruntime's own quantizer (onnxruntime.quantization.quantize_static,
calibrated on generated inputs), as a user would make them: a small CNN with the ops whose
quantized forms are com.microsoft ops in the QOperator format (QLinearConcat, QLinearAveragePool,
QLinearSoftmax, QLinearConv, QGemm, ...) and data-movement ops (Reshape, Transpose, Flatten,
Squeeze, Unsqueeze, MaxPool, nearest Resize) that the QDQ format wraps in DequantizeLinear /
QuantizeLinear pairs.

Each model runs on Quilt and on onnxruntime, and their outputs must agree within two steps of the
output's quantization (onnxruntime's kernels use other float formulas, so a value at a rounding
tie can land one step away, and a step in one layer can move the next one's by one). For the QDQ
format, Quilt's plan at the default optimization level must hold only integer ops between the
input's QuantizeLinear and the output's DequantizeLinear."""
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quilt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cases"))
from casegen import ort_u8s8_saturates  # noqa: E402

# On a CPU where onnxruntime's uint8 x int8 products saturate in int16 (x86 without VNNI: its
# own documented limit), the models are quantized with reduce_range (7-bit weights), as
# onnxruntime advises there: its outputs are then exact, and a valid reference for Quilt's.
REDUCE_RANGE = ort_u8s8_saturates()

ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

RNG = np.random.default_rng(7)


def f32(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def cnn():
    """x [1, 3, 16, 16] -> conv, relu, two branches (1x1 conv; average pool) joined by Concat,
    MaxPool, nearest Resize, Reshape/Transpose/Squeeze/Unsqueeze/Flatten, Gemm, Softmax."""
    inits = {
        "w1": f32(8, 3, 3, 3, scale=0.3), "b1": f32(8, scale=0.1),
        "w2": f32(8, 8, 1, 1, scale=0.3), "b2": f32(8, scale=0.1),
        "w3": f32(6, 16, 3, 3, scale=0.15), "b3": f32(6, scale=0.1),
        "wg": f32(10, 6 * 8 * 8, scale=0.05), "bg": f32(10, scale=0.1),
        "shape1": np.array([1, 16, 8, 8], np.int64), "axes0": np.array([0], np.int64),
        "scales": np.array([1, 1, 2, 2], np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
        helper.make_node("AveragePool", ["r1"], ["ap"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["c2", "ap"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["mp", "shape1"], ["rs"]),
        helper.make_node("Transpose", ["rs"], ["tr"], perm=[0, 1, 3, 2]),
        helper.make_node("Squeeze", ["tr", "axes0"], ["sq"]),
        helper.make_node("Unsqueeze", ["sq", "axes0"], ["us"]),
        helper.make_node("Resize", ["us", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Conv", ["up", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Flatten", ["c3"], ["fl"]),
        helper.make_node("Gemm", ["fl", "wg", "bg"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["y"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


class Reader(quantization.CalibrationDataReader):
    def __init__(self):
        self.data = iter([{"x": f32(1, 3, 16, 16)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def quantize(tmp_path, fmt, activation):
    import onnx
    src, dst = tmp_path / "float.onnx", tmp_path / f"{fmt}.onnx"
    onnx.save(cnn(), src)
    quantization.quantize_static(
        str(src), str(dst), Reader(),
        quant_format=getattr(quantization.QuantFormat, fmt),
        activation_type=activation, weight_type=quantization.QuantType.QInt8,
        per_channel=True, reduce_range=REDUCE_RANGE)
    return dst


# The Softmax's output step: onnxruntime's quantizer gives QLinearSoftmax the scale 1/256.
STEP = 1 / 256

FORMATS = [("QOperator", quantization.QuantType.QUInt8), ("QOperator", quantization.QuantType.QInt8),
           ("QDQ", quantization.QuantType.QUInt8), ("QDQ", quantization.QuantType.QInt8)]


@pytest.mark.parametrize("fmt,activation", FORMATS,
                         ids=[f"{f}-{a.name}" for f, a in FORMATS])
def test_quantized_cnn_matches_onnxruntime(tmp_path, fmt, activation):
    import onnx
    path = quantize(tmp_path, fmt, activation)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    if fmt == "QOperator":
        assert {"QLinearConcat", "QLinearAveragePool", "QLinearSoftmax", "QLinearConv"} <= ops, ops
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    q = quilt.Session(str(path))
    for _ in range(3):
        x = f32(1, 3, 16, 16)
        want = sess.run(None, {"x": x})[0]
        got = q.run({"x": x})["y"]
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=0, atol=2 * STEP + 1e-6)


def planned_ops(path, level=None):
    kwargs = {} if level is None else {"optimization_level": level}
    plan = quilt.Session(str(path), **kwargs).plan()
    return [n["op_type"] for n in plan["nodes"] if not n["folded"]]


@pytest.mark.parametrize("activation", [quantization.QuantType.QUInt8, quantization.QuantType.QInt8],
                         ids=["QUInt8", "QInt8"])
def test_qdq_cnn_stays_in_int8_between_convs(tmp_path, activation):
    path = quantize(tmp_path, "QDQ", activation)
    # The whole graph runs on integers between the input's QuantizeLinear and the output's
    # DequantizeLinear: the convs, concat, pools, Gemm and Softmax as quantized ops, the
    # data-movement ops on the integers (their scale and zero point are the same on both sides).
    assert planned_ops(path) == [
        "QuantizeLinear", "QLinearConv", "QLinearConv", "com.microsoft.QLinearAveragePool",
        "com.microsoft.QLinearConcat", "MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze",
        "Resize", "QLinearConv", "Flatten", "com.microsoft.QGemm", "com.microsoft.QLinearSoftmax",
        "DequantizeLinear"]
    # As written, the graph has the float ops between DequantizeLinear / QuantizeLinear pairs.
    written = planned_ops(path, 0)
    assert "Conv" in written and "QLinearConv" not in written, written


def lstm_model(direction):
    """X [seq 5, batch 2, input 6] -> LSTM (hidden 4, bias, initial states) -> Y, Y_h, Y_c."""
    dirs = 2 if direction == "bidirectional" else 1
    inits = {"W": f32(dirs, 16, 6, scale=0.5), "R": f32(dirs, 16, 4, scale=0.5),
             "B": f32(dirs, 32, scale=0.2), "h0": f32(dirs, 2, 4), "c0": f32(dirs, 2, 4)}
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["y", "yh", "yc"],
                            hidden_size=4, direction=direction)
    graph = helper.make_graph(
        [node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 2, 6])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "yh", "yc")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("direction,per_channel", [("forward", False), ("bidirectional", True)])
def test_dynamic_quantized_lstm(tmp_path, direction, per_channel):
    """quantize_dynamic writes com.microsoft.DynamicQuantizeLSTM: Quilt runs the LSTM in float32
    on the dequantized weights, so it matches the float LSTM with those weights (onnxruntime's
    LSTM) to float rounding, and onnxruntime's DynamicQuantizeLSTM, which also quantizes X and H
    to uint8 at every step, within that activation rounding."""
    import onnx
    src, dst = tmp_path / "lstm.onnx", tmp_path / "lstm_q.onnx"
    float_model = lstm_model(direction)
    onnx.save(float_model, src)
    quantization.quantize_dynamic(str(src), str(dst), per_channel=per_channel,
                                  weight_type=quantization.QuantType.QInt8,
                                  reduce_range=REDUCE_RANGE)
    qm = onnx.load(dst)
    node = next(n for n in qm.graph.node if n.op_type == "DynamicQuantizeLSTM")
    consts = {t.name: numpy_helper.to_array(t) for t in qm.graph.initializer}
    # The float LSTM with the weights dequantized as the spec's DequantizeLinear does.
    for slot, (q, s, z) in (("W", node.input[1:2] + node.input[8:10]),
                            ("R", node.input[2:3] + node.input[10:12])):
        qv, sv, zv = consts[q], consts[s], consts[z]
        sv = sv.reshape(sv.shape[0], 1, -1)
        zv = zv.reshape(zv.shape[0], 1, -1).astype(np.int32)
        deq = ((qv.astype(np.int32) - zv).astype(np.float32) * sv).transpose(0, 2, 1)
        init = next(t for t in float_model.graph.initializer if t.name == slot)
        init.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(deq), slot))
    reference = ort.InferenceSession(float_model.SerializeToString(),
                                     providers=["CPUExecutionProvider"])
    ort_q = ort.InferenceSession(str(dst), providers=["CPUExecutionProvider"])
    q = quilt.Session(str(dst))
    for _ in range(3):
        x = f32(5, 2, 6)
        got = q.run({"x": x})
        for name, want, approx in zip(("y", "yh", "yc"), reference.run(None, {"x": x}),
                                      ort_q.run(None, {"x": x})):
            np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(got[name], approx, rtol=0, atol=0.05)
