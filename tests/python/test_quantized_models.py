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
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quilt

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
        per_channel=True)
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
