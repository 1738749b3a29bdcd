"""Weight-only 4-bit models as onnxruntime's own tool writes them
(onnxruntime.quantization.matmul_nbits_quantizer.MatMulNBitsQuantizer): an MLP's MatMul weights
quantized in blocks along K, either as com.microsoft MatMulNBits (QOperator) or as an int4
initializer through a blocked DequantizeLinear into MatMul (QDQ). Each runs on Quilt and
onnxruntime and the outputs must agree to float32 rounding (both compute the product of the same
dequantized weights in float32). Also: int4 tensors in and out of a session from Python, as
ml_dtypes.int4 arrays."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quilt

ort = pytest.importorskip("onnxruntime")
ml_dtypes = pytest.importorskip("ml_dtypes")
nbits = pytest.importorskip("onnxruntime.quantization.matmul_nbits_quantizer")
from onnxruntime.quantization import QuantFormat  # noqa: E402

RNG = np.random.default_rng(4)


def mlp(k=96, hidden=80, n=24):
    """x [batch, seq, k] -> MatMul (k x hidden) + bias, Relu, MatMul (hidden x n) + bias."""
    inits = {"w1": (RNG.standard_normal((k, hidden)) * 0.1).astype(np.float32),
             "b1": (RNG.standard_normal(hidden) * 0.1).astype(np.float32),
             "w2": (RNG.standard_normal((hidden, n)) * 0.1).astype(np.float32),
             "b2": (RNG.standard_normal(n) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]),
             helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h2"]),
             helper.make_node("MatMul", ["h2", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, name) for name, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("fmt", ["QOperator", "QDQ"])
@pytest.mark.parametrize("symmetric", [True, False])
@pytest.mark.parametrize("block_size", [16, 32])
def test_weight_only_mlp_matches_onnxruntime(fmt, symmetric, block_size):
    cfg = nbits.DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=symmetric,
                                             quant_format=getattr(QuantFormat, fmt))
    q = nbits.MatMulNBitsQuantizer(mlp(), algo_config=cfg)
    q.process()
    blob = q.model.model.SerializeToString()
    ops = [n.op_type for n in q.model.model.graph.node]
    if fmt == "QOperator":
        assert ops.count("MatMulNBits") == 2, ops
    else:
        assert ops.count("DequantizeLinear") == 2, ops
        int4 = [t.name for t in q.model.model.graph.initializer
                if t.data_type in (TensorProto.INT4, TensorProto.UINT4)]
        # the weights (and zero points, when asymmetric) stay 4-bit in the model
        assert len([n for n in int4 if n.endswith("_Q4")]) == 2, int4
    x = RNG.standard_normal((2, 5, 96)).astype(np.float32)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = quilt.Session(blob).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def int4_model(nodes, inputs, out_type, opset=21):
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", out_type, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


def test_int4_output_is_an_ml_dtypes_array():
    blob = int4_model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT4)],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                      TensorProto.INT4)
    x = np.arange(-7, 8, dtype=np.float32).reshape(3, 5)
    y = quilt.Session(blob).run({"x": x})["y"]
    assert y.dtype == ml_dtypes.int4 and y.shape == (3, 5)
    np.testing.assert_array_equal(y.astype(np.int8), x.astype(np.int8))


def test_int4_input_from_an_ml_dtypes_array():
    blob = int4_model([helper.make_node("DequantizeLinear", ["q", "s"], ["y"])],
                      [helper.make_tensor_value_info("q", TensorProto.UINT4, [7]),
                       helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
                      TensorProto.FLOAT)
    q = np.array([0, 1, 7, 8, 9, 14, 15], ml_dtypes.uint4)
    y = quilt.Session(blob).run({"q": q, "s": np.array(0.5, np.float32)})["y"]
    np.testing.assert_array_equal(y, q.astype(np.float32) * 0.5)
