"""Cases of the 4-bit integer types and weight-only quantization: Cast to and from int4/uint4,
QuantizeLinear and DequantizeLinear with int4/uint4 (per tensor, per axis, blocked), int4
weights as constants, and onnxruntime's com.microsoft MatMulNBits.

Shapes have odd element counts and odd inner dims, so packed rows start mid-byte and the last
byte is half used. Cast, QuantizeLinear and DequantizeLinear take their expected values from
onnx's reference implementation (the spec; onnxruntime has no int4 Cast); the graphs with int4
constants only and MatMulNBits take onnxruntime's."""
import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from casegen import (Cases, quantize_dequantize_cases, rand, randint, reference_outputs,
                     run_onnxruntime)

c = Cases("int4")
I4, U4 = TensorProto.INT4, TensorProto.UINT4
NP4 = {I4: ml_dtypes.int4, U4: ml_dtypes.uint4}
RANGE4 = {I4: (-8, 8), U4: (0, 16)}


def q4(t, *shape):
    lo, hi = RANGE4[t]
    return randint(*shape, low=lo, high=hi, dtype=np.int8).astype(NP4[t])


def reference(name, nodes, inputs, outputs, initializers=None, opset=21):
    """A graph whose expected outputs come from onnx's reference implementation."""
    initializers = initializers or {}
    _, got = reference_outputs(name, nodes, inputs, outputs, initializers, opset, 10)
    c.model(name, nodes, inputs, outputs, initializers, opset=opset, ir_version=10,
            expected=dict(zip(outputs, got)), rtol=1e-6, atol=1e-6)


# ---- Cast: every value of the 4-bit range and past it (wrapping), odd counts
wide = np.arange(-20, 21, dtype=np.float32).reshape(1, 41) + np.array([[0.0], [0.7]], np.float32)
for t, tn in ((I4, "int4"), (U4, "uint4")):
    reference(f"cast_float_to_{tn}", [helper.make_node("Cast", ["x"], ["y"], to=t)],
              {"x": wide}, ["y"])
    reference(f"cast_float16_to_{tn}", [helper.make_node("Cast", ["x"], ["y"], to=t)],
              {"x": wide.astype(np.float16)}, ["y"])
    reference(f"cast_int32_to_{tn}", [helper.make_node("Cast", ["x"], ["y"], to=t)],
              {"x": np.arange(-40, 41, dtype=np.int32).reshape(3, 27)}, ["y"])
    for to, np_to in ((TensorProto.FLOAT, "float"), (TensorProto.INT8, "int8"),
                      (TensorProto.INT64, "int64"), (TensorProto.FLOAT16, "float16")):
        reference(f"cast_{tn}_to_{np_to}", [helper.make_node("Cast", ["x"], ["y"], to=to)],
                  {"x": q4(t, 5, 7)}, ["y"])
    # a 4-bit value through a second cast: one packed tensor in the middle of the graph
    reference(f"cast_{tn}_roundtrip", [helper.make_node("Cast", ["x"], ["m"], to=t),
                                       helper.make_node("Cast", ["m"], ["y"], to=TensorProto.FLOAT)],
              {"x": wide}, ["y"])
# int4 -> uint4 keeps the 4 bits (numpy wraps; onnx's reference cannot cast between them)
x4 = q4(I4, 3, 5)
c.model("cast_int4_to_uint4", [helper.make_node("Cast", ["x"], ["y"], to=U4)], {"x": x4}, ["y"],
        opset=21, ir_version=10,
        expected={"y": (x4.astype(np.int8) & 0xF).astype(np.uint8).astype(ml_dtypes.uint4)})
reference("castlike_float_to_int4", [helper.make_node("CastLike", ["x", "like"], ["y"])],
          {"x": wide, "like": q4(I4, 1)}, ["y"])

# ---- QuantizeLinear / DequantizeLinear
for t, tn in ((I4, "int4"), (U4, "uint4")):
    zp_lo, zp_hi = (-2, 3) if t == I4 else (5, 10)
    q = quantize_dequantize_cases(reference, tn, t, NP4[t], lambda *s, t=t: q4(t, *s), zp_lo,
                                  zp_hi)
    reference(f"dequantize_{tn}_blocked_no_zero_point",
              [helper.make_node("DequantizeLinear", ["q", "s"], ["y"], axis=0, block_size=2)],
              {"q": q}, ["y"], {"s": rand(3, 11, 3, low=0.1, high=1)})

# ---- int4 weights as constants: blocked DequantizeLinear -> MatMul (weight-only quantization as
# the QDQ format writes it), against onnxruntime
for t, tn in ((I4, "int4"), (U4, "uint4")):
    k, n, block = 37, 13, 16
    w = q4(t, k, n)
    scales = rand(3, n, low=0.01, high=0.1)
    zp = q4(t, 3, n)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s", "z"], ["wf"], axis=0,
                              block_size=block),
             helper.make_node("MatMul", ["x", "wf"], ["y"])]
    c.model(f"weight_only_{tn}_matmul", nodes, {"x": rand(2, 5, k)}, ["y"],
            {"w": w, "s": scales, "z": zp}, opset=21, ir_version=10)

# ---- com.microsoft MatMulNBits, against onnxruntime
MS = "com.microsoft"


def pack_codes(codes, bits):
    """codes [rows, count] of `bits` bits -> bytes, low bits first."""
    per = 8 // bits
    rows, count = codes.shape
    padded = np.zeros((rows, -(-count // per) * per), np.uint8)
    padded[:, :count] = codes
    out = np.zeros((rows, padded.shape[1] // per), np.uint8)
    for i in range(per):
        out |= (padded[:, i::per] << (i * bits)).astype(np.uint8)
    return out


def matmul_nbits(name, m_shape, k, n, bits=4, block=32, zp="none", bias=False, a_type=np.float32,
                 const_weights=True, rtol=1e-4, atol=1e-4):
    kb = -(-k // block)
    codes = randint(n, kb * block, low=0, high=1 << bits, dtype=np.uint8)
    codes[:, k:] = 0
    b = pack_codes(codes, bits).reshape(n, kb, block * bits // 8)
    scales = rand(n * kb, low=0.01, high=0.05).astype(a_type)
    consts = {"b": b, "scales": scales}
    if zp == "packed":
        consts["zp"] = pack_codes(randint(n, kb, low=0, high=1 << bits, dtype=np.uint8),
                                  bits).reshape(-1)
    elif zp == "float":
        consts["zp"] = rand(n * kb, low=0, high=(1 << bits) - 1).astype(a_type)
    else:
        consts["_zp"] = None
    if bias:
        consts["_g"] = None
        consts["bias"] = rand(n).astype(a_type)
    names = ["a"] + [x if not x.startswith("_") else "" for x in consts]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulNBits", names, ["y"], name=name, domain=MS, K=k, N=n,
                            bits=bits, block_size=block)
    inits = {x: v for x, v in consts.items() if not x.startswith("_")}
    inputs = {"a": rand(*m_shape, k).astype(a_type)}
    if not const_weights:  # B fed at run time: dequantized on every run
        inputs["b"] = inits.pop("b")
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(x, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for x, v in inputs.items()],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, x) for x, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                helper.make_opsetid(MS, 1)])
    m.ir_version = 10
    want = run_onnxruntime(m, inputs, ["y"])[0]
    # The spec's arithmetic in float64 agrees with onnxruntime (else the generator stops).
    zero = {"none": np.full((n, kb), 1 << (bits - 1), np.float64),
            "packed": None, "float": None}[zp]
    if zp == "packed":
        raw = consts["zp"].reshape(n, -1)
        per = 8 // bits
        zero = np.stack([(raw >> (i * bits)) & ((1 << bits) - 1) for i in range(per)],
                        axis=-1).reshape(n, -1)[:, :kb].astype(np.float64)
    elif zp == "float":
        zero = consts["zp"].reshape(n, kb).astype(np.float64)
    w = ((codes.astype(np.float64) - np.repeat(zero, block, axis=1))
         * np.repeat(scales.reshape(n, kb).astype(np.float64), block, axis=1))[:, :k]
    spec = inputs["a"].astype(np.float64) @ w.T
    if bias:
        spec = spec + consts["bias"].astype(np.float64)
    assert np.allclose(want.astype(np.float64), spec, rtol=1e-2, atol=1e-2), name
    c.model(name, [node], inputs, ["y"], inits, opset=21, ir_version=10, rtol=rtol, atol=atol,
            expected={"y": want})
    # model() rebuilt the same graph without the com.microsoft opset import: add it
    path = c.dir / name / "model.onnx"
    saved = onnx.load(path)
    saved.opset_import.append(helper.make_opsetid(MS, 1))
    onnx.save(saved, path)


matmul_nbits("matmul_nbits_4bit", (3,), 64, 24)
matmul_nbits("matmul_nbits_4bit_rank3_k_tail", (2, 5), 77, 19, block=16)
matmul_nbits("matmul_nbits_4bit_packed_zero_points", (4,), 96, 33, zp="packed", block=32)
matmul_nbits("matmul_nbits_4bit_odd_blocks_zero_points", (3,), 80, 5, zp="packed", block=16)
matmul_nbits("matmul_nbits_4bit_float_zero_points_bias", (2, 3), 64, 17, zp="float", bias=True)
matmul_nbits("matmul_nbits_8bit", (5,), 70, 21, bits=8, block=16, zp="packed", bias=True)
matmul_nbits("matmul_nbits_4bit_block128", (1,), 256, 40, block=128)
matmul_nbits("matmul_nbits_4bit_float16", (3,), 64, 24, a_type=np.float16, rtol=1e-2, atol=1e-2)
matmul_nbits("matmul_nbits_4bit_weights_fed", (3,), 48, 10, block=16, const_weights=False)
