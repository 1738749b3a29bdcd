"""Cases of the bfloat16 and float8 element types (FLOAT8E4M3FN, FLOAT8E4M3FNUZ, FLOAT8E5M2,
FLOAT8E5M2FNUZ): Cast / CastLike to and from float32, float16 and float64 with saturate 0 and 1,
data moves of a bfloat16 tensor (Identity, Reshape, Concat), and Quantize/DequantizeLinear with
float8.

Expected values come from onnx's ReferenceEvaluator (ml_dtypes conversions: round to nearest
even; saturate clips to the finite range first), the implementation the official backend-test
cases were generated with; onnxruntime is not used for these cases (its numpy interface does
not take the ml_dtypes arrays these cases feed). Values are float32-representable, so float64 sources
need one rounding only (no double-rounding ambiguity between implementations)."""
import ml_dtypes
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from casegen import Cases

TYPES = {
    "bfloat16": (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    "e4m3fn": (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    "e4m3fnuz": (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    "e5m2": (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    "e5m2fnuz": (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
}

# Normal values, ties (1.0625 and 1.1875 lie halfway between E4M3 neighbours; 1.125 / 1.375
# between E5M2 ones; 1 + 2^-8 + 2^-9 etc. for bfloat16), subnormals of every format, values just
# above and far beyond each format's max, +-inf, NaN, +-0.
VALUES = np.array([
    0.0, -0.0, 1.0, -1.5, 0.3, 3.14159, 1.0625, 1.1875, 1.125, 1.375, -1.0625,
    1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-12,
    2.0**-7, 2.0**-9, 2.0**-10, 3 * 2.0**-10, 2.0**-11, 2.0**-14, 2.0**-16, 2.0**-17, 2.0**-18,
    1.5 * 2.0**-17, 2.0**-130, 2.0**-149,
    240.0, 247.0, 248.0, 250.0, 448.0, 464.0, 465.0, 480.0, 500.0, -1000.0,
    57344.0, 61440.0, 61441.0, 65536.0, -1e5, 3.0e38, -3.4e38,
    np.inf, -np.inf, np.nan,
], dtype=np.float32)


class DtypeCases(Cases):
    def ref_node(self, name, op_type, inputs, opset=21, initializers=None, **attrs):
        names = list(inputs) + list(initializers or {})
        node = helper.make_node(op_type, names, ["y"], name=name, **attrs)
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in inputs.items()],
            [helper.make_empty_tensor_value_info("y")],
            [__import__("onnx").numpy_helper.from_array(v, k)
             for k, v in (initializers or {}).items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 9
        y = ReferenceEvaluator(m).run(None, {**inputs, **(initializers or {})})[0]
        self.model(name, [node], inputs, ["y"], initializers, opset, 0, 0, {"y": y})


cases = DtypeCases("dtypes")
sources = {"float32": VALUES, "float16": VALUES.astype(np.float16),
           "float64": VALUES.astype(np.float64)}
for tname, (code, npt) in TYPES.items():
    for sname, src in sources.items():
        sats = (0, 1) if tname != "bfloat16" else (1,)
        for sat in sats:
            cases.ref_node(f"cast_{sname}_to_{tname}_sat{sat}", "Cast", {"x": src}, to=code,
                           saturate=sat)
        if tname != "bfloat16":
            cases.ref_node(f"castlike_{sname}_to_{tname}_sat0", "CastLike", {"x": src},
                           initializers={"like": np.zeros(1, dtype=npt)}, saturate=0)
    # Every bit pattern back to float32 / float16 / float64.
    if tname == "bfloat16":
        bits = np.concatenate([np.arange(0, 65536, 97), [0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8001,
                                                         0x7f7f, 0x0080]]).astype(np.uint16)
    else:
        bits = np.arange(256, dtype=np.uint8)
    x = bits.view(npt)
    for dname, dcode in (("float32", TensorProto.FLOAT), ("float16", TensorProto.FLOAT16),
                         ("float64", TensorProto.DOUBLE)):
        cases.ref_node(f"cast_{tname}_to_{dname}", "Cast", {"x": x}, to=dcode)
    # float8 <-> bfloat16 and float8 -> float8 round trips through the exact value.
    if tname != "bfloat16":
        cases.ref_node(f"cast_{tname}_to_bfloat16", "Cast", {"x": x}, to=TensorProto.BFLOAT16)
        for oname, (ocode, _) in TYPES.items():
            if oname not in ("bfloat16", tname):
                cases.ref_node(f"cast_{tname}_to_{oname}_sat1", "Cast", {"x": x}, to=ocode)

# Pure data moves of a bfloat16 tensor.
b = np.arange(-12, 12, dtype=np.float32).reshape(2, 3, 4).astype(ml_dtypes.bfloat16) / 7
cases.ref_node("identity_bfloat16", "Identity", {"x": b})
cases.ref_node("reshape_bfloat16", "Reshape", {"x": b},
               initializers={"shape": np.array([4, -1], dtype=np.int64)})
cases.ref_node("concat_bfloat16", "Concat", {"a": b, "b": b[:, :1]}, axis=1)
cases.ref_node("transpose_e4m3fn", "Transpose", {"x": VALUES[:24].reshape(2, 3, 4)
                                                  .astype(ml_dtypes.float8_e4m3fn)}, perm=[2, 0, 1])

# QuantizeLinear / DequantizeLinear with float8 (zero points 0, as the spec uses them).
xq = np.array([[0.0, 1.0, 2.0, 1e5, 200.0, -3.3], [0.01, -0.02, 7.5, 9.0, 70000.0, np.nan]],
              dtype=np.float32)
for tname in ("e4m3fn", "e4m3fnuz", "e5m2", "e5m2fnuz"):
    npt = TYPES[tname][1]
    for sat in (0, 1):
        cases.ref_node(f"quantize_{tname}_sat{sat}", "QuantizeLinear",
                       {"x": xq, "s": np.array(2.0, dtype=np.float32)},
                       initializers={"z": np.zeros((), dtype=npt)}, saturate=sat)
    cases.ref_node(f"quantize_{tname}_per_axis", "QuantizeLinear",
                   {"x": xq, "s": np.array([0.5, 3.0], dtype=np.float32)},
                   initializers={"z": np.zeros(2, dtype=npt)}, axis=0)
    q = np.arange(256, dtype=np.uint8).view(npt).reshape(16, 16)
    cases.ref_node(f"dequantize_{tname}", "DequantizeLinear",
                   {"x": q, "s": np.array(0.75, dtype=np.float32)},
                   initializers={"z": np.zeros((), dtype=npt)})
    cases.ref_node(f"dequantize_{tname}_per_axis_float16", "DequantizeLinear",
                   {"x": q, "s": np.linspace(0.5, 2.0, 16).astype(np.float16)}, axis=1)

# Range of bfloat16 (Range-27): start + i * delta rounded once to bfloat16.
bf = ml_dtypes.bfloat16
cases.ref_node("range_bfloat16", "Range", {}, opset=27,
               initializers={"start": np.array(1.0, dtype=bf), "limit": np.array(300.5, dtype=bf),
                             "delta": np.array(2.3, dtype=bf)})
cases.ref_node("range_bfloat16_negative", "Range", {}, opset=27,
               initializers={"start": np.array(10.0, dtype=bf), "limit": np.array(-7, dtype=bf),
                             "delta": np.array(-0.7, dtype=bf)})
