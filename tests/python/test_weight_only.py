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


# ---- accuracy_level 4: A quantized to int8 per block (gemv_4bit_int8, AVX512-VNNI)
def _pack4(codes):
    """uint8 codes [rows, even count] -> bytes, the even code in the low nibble."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def nbits_int8_case(rows, k, n, block, zp, bias, seed):
    """A MatMulNBits node with accuracy_level 4 and its inputs; returns (blob, a, spec_int8,
    spec_fp32): the product with A's blocks quantized to int8 (scale max|a| / 127 in float32,
    codes rounded half to even, int64 sums: what onnxruntime's CompInt8 computes) and the
    product of float32 A with the dequantized weights, both in float64."""
    rng = np.random.default_rng(seed)
    kb = -(-k // block)
    codes = rng.integers(0, 16, (n, kb * block), dtype=np.uint8)
    codes[:, k:] = 0
    scales = rng.uniform(0.01, 0.05, n * kb).astype(np.float32)
    inits = {"b": _pack4(codes).reshape(n, kb, block // 2), "scales": scales}
    zero = np.full((n, kb), 8.0)
    if zp == "packed":
        z = rng.integers(0, 16, (n, kb + kb % 2), dtype=np.uint8)
        inits["zp"] = _pack4(z).reshape(-1)
        zero = z[:, :kb].astype(np.float64)
    elif zp == "float":
        inits["zp"] = rng.uniform(0, 15, n * kb).astype(np.float32)
        zero = inits["zp"].reshape(n, kb).astype(np.float64)
    names = ["a", "b", "scales", "zp" if zp != "none" else ""]
    if bias:
        inits["bias"] = rng.standard_normal(n).astype(np.float32)
        names += ["", "bias"]
    node = helper.make_node("MatMulNBits", names, ["y"], domain="com.microsoft", K=k, N=n, bits=4,
                            block_size=block, accuracy_level=4)
    graph = helper.make_graph(
        [node], "nbits_int8", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [rows, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, x) for x, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    a = rng.standard_normal((rows, k)).astype(np.float32)
    a[0, :min(k, block)] = 0.0  # an all-zero block of A: scale 0
    sb = scales.reshape(n, kb).astype(np.float64)
    spec_int8 = np.zeros((rows, n))
    for r in range(rows):
        for blk in range(kb):
            x = a[r, blk * block:min(k, (blk + 1) * block)]
            amax = np.float32(np.abs(x).max())
            inverse = np.float32(127) / amax if amax > 0 else np.float32(0)
            qa = np.clip(np.rint(x * inverse), -127, 127).astype(np.int64)
            c = codes[:, blk * block:blk * block + x.size].astype(np.int64)
            spec_int8[r] += float(amax / np.float32(127)) * sb[:, blk] * (c @ qa - zero[:, blk] * qa.sum())
    w = (codes[:, :k] - np.repeat(zero, block, 1)[:, :k]) * np.repeat(sb, block, 1)[:, :k]
    spec_fp32 = a.astype(np.float64) @ w.T
    if bias:
        spec_int8 += inits["bias"]
        spec_fp32 += inits["bias"]
    return m.SerializeToString(), a, spec_int8, spec_fp32


def run_with_env(blob, a, tmp_path, **env):
    """Runs the model on Quilt in a child process with the environment variables env (the
    kernel paths are chosen once per process)."""
    import os
    import subprocess
    import sys

    (tmp_path / "m.onnx").write_bytes(blob)
    np.save(tmp_path / "a.npy", a)
    code = ("import numpy as np, quilt, sys; d = sys.argv[1]; "
            "s = quilt.Session(open(d + '/m.onnx', 'rb').read()); "
            "np.save(d + '/y.npy', s.run({'a': np.load(d + '/a.npy')})['y'])")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True,
                   env={**os.environ, **env})
    return np.load(tmp_path / "y.npy")


def cpu_has_vnni():
    with open("/proc/cpuinfo") as f:
        return "avx512_vnni" in f.read()


NBITS_INT8_CASES = [  # rows, K, N, block, zero points, bias: every layout and tail of the kernel
    (1, 768, 2304, 32, "none", False),   # GPT-2's QKV projection, a token at a time
    (1, 96, 37, 32, "packed", True),     # 3 blocks of 32: a pair and a last one; N % 4 = 1
    (2, 100, 18, 16, "float", False),    # blocks of 16, K not a multiple of the block
    (3, 200, 33, 64, "packed", True),    # blocks of 64, K's last block short
    (4, 256, 16, 128, "none", False),    # blocks of 128
]


@pytest.mark.parametrize("rows,k,n,block,zp,bias", NBITS_INT8_CASES)
def test_nbits_accuracy_level_4_int8_a(rows, k, n, block, zp, bias, tmp_path):
    blob, a, spec_int8, spec_fp32 = nbits_int8_case(rows, k, n, block, zp, bias, seed=k + n)
    scale = np.abs(spec_int8).max()
    # onnxruntime quantizes A the same way: its result is the int8 spec to float32 rounding;
    # with float zero points it keeps the product in float32, and so does Quilt.
    spec = spec_fp32 if zp == "float" else spec_int8
    want = ort.InferenceSession(blob, providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    np.testing.assert_allclose(want, spec, rtol=0, atol=2e-6 * scale)
    # The two differ by A's quantization: far more than float32 rounding, so the checks below
    # tell the paths apart.
    assert np.abs(spec_int8 - spec_fp32).max() > 1e-4 * scale
    if cpu_has_vnni():
        got = run_with_env(blob, a, tmp_path, QUILT_CPU_ISA="avx512vnni")
        np.testing.assert_allclose(got, spec, rtol=0, atol=2e-6 * scale)
    # Without VNNI (forced here) the product stays float32: accuracy_level is a minimum.
    got = run_with_env(blob, a, tmp_path, QUILT_CPU_ISA="avx2")
    np.testing.assert_allclose(got, spec_fp32, rtol=0, atol=2e-6 * scale)
    # More rows than the decoding path takes: the float32 GEMM over the dequantized weights.
    got = run_with_env(blob, a, tmp_path, QUILT_NBITS_GEMV="0")
    np.testing.assert_allclose(got, spec_fp32, rtol=0, atol=2e-6 * scale)
