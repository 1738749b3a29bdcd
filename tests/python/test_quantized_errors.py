"""Bad inputs to the quantized ops (integer GEMM, QLinear*, com.microsoft ops): Quilt refuses each
with an error that names the node and says what is wrong, at session creation when the shapes
are known then, else at run time."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import quilt

U8, I8, F = TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT


def model(op, inputs, inits, out_type, domain="", **attrs):
    """One node named "n" of op; inputs: (name, elem type, shape) fed at run time; inits:
    name -> array (constants). The node's inputs are the inputs then the constants, in order,
    "" for an absent optional one."""
    names = [i[0] for i in inputs] + list(inits)
    node = helper.make_node(op, [n if not n.startswith("_") else "" for n in names], ["y"],
                            name="n", domain=domain, **attrs)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(v, k) for k, v in inits.items() if not k.startswith("_")])
    opsets = [helper.make_opsetid("", 21)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(graph, opset_imports=opsets)
    m.ir_version = 10
    return m.SerializeToString()


def u8(*s):
    return np.zeros(s, np.uint8)


def i8(*s):
    return np.zeros(s, np.int8)


def f32(v):
    return np.array(v, np.float32)


def qmm(bz):
    return model("QLinearMatMul", [("a", U8, [3, 4])],
                 {"as": f32(0.1), "az": np.array(1, np.uint8), "b": i8(4, 5), "bs": f32(0.1),
                  "bz": bz, "ys": f32(0.2), "yz": np.array(0, np.uint8)}, U8)


def concat(more, axis=1):
    """QLinearConcat "n" of Y (uint8, scale 0.1, zero point 0), the fed uint8 x [2, 3] with
    its scale and zero point, then the constants `more`."""
    names = ["ys", "yz", "x", "xs", "xz"] + [f"c{i}" for i in range(len(more))]
    node = helper.make_node("QLinearConcat", names, ["y"], name="n", domain="com.microsoft",
                            axis=axis)
    inits = [f32(0.1), np.array(0, np.uint8), None, f32(0.1), np.array(0, np.uint8)] + more
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", U8, [2, 3])],
        [helper.make_tensor_value_info("y", U8, None)],
        [numpy_helper.from_array(v, k) for k, v in zip(names, inits) if v is not None])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m.SerializeToString()


def nbits(inits, a_shape=(2, 64), **attrs):
    """MatMulNBits "n": K 64, N 4, 4 bits in blocks of 32 unless attrs say otherwise; inits
    replace its constants (b, scales, zp, g)."""
    consts = {"b": u8(4, 2, 16), "scales": np.ones(8, np.float32)}
    consts.update(inits)
    if "zp" not in consts and "g" in consts:
        consts["_zp"] = None
    attrs = {"K": 64, "N": 4, "bits": 4, "block_size": 32, **attrs}
    return model("MatMulNBits", [("a", F, list(a_shape))], consts, F, domain="com.microsoft",
                 **attrs)


def int4_short_initializer():
    """DequantizeLinear "n" of an int4 initializer w of 5 elements given 2 packed bytes (3
    needed) in int32_data, into Add with x."""
    w = TensorProto(name="w", data_type=TensorProto.INT4, dims=[5])
    w.int32_data.extend([0x21, 0x43])
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"], name="n"),
             helper.make_node("Add", ["x", "wf"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [5])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [w, numpy_helper.from_array(f32(0.5), "s")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m.SerializeToString()


def packed_initializer(data_type, count, raw=None, int32=None, zero_point=None, opset=25):
    """DequantizeLinear "n" of a packed initializer w of `count` elements (raw_data bytes or
    int32_data values as given), into Add with x."""
    w = TensorProto(name="w", data_type=data_type, dims=[count])
    if raw is not None:
        w.raw_data = bytes(raw)
    else:
        w.int32_data.extend(int32)
    inits = [w, numpy_helper.from_array(f32(0.5), "s")]
    if zero_point is not None:
        inits.append(zero_point)
    nodes = [helper.make_node("DequantizeLinear", ["w", "s"] + (["z"] if zero_point else []),
                              ["wf"], name="n"),
             helper.make_node("Add", ["x", "wf"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, [count])],
                              [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 11
    return m.SerializeToString()


def float4_zero_point(value):
    z = TensorProto(name="z", data_type=TensorProto.FLOAT4E2M1, dims=[])
    z.raw_data = bytes([value])
    return z


CASES = [
    # (what, model bytes, feeds, words the message must hold)
    ("MatMulInteger b_zero_point of 3 values for 5 columns",
     model("MatMulInteger", [("a", U8, [2, 4])], {"b": u8(4, 5), "_az": None,
                                                   "bz": np.zeros(3, np.uint8)}, TensorProto.INT32),
     {"a": u8(2, 4)}, ["MatMulInteger", '"n"', "b_zero_point", "[3]", "5"]),
    ("MatMulInteger zero point of the wrong type",
     model("MatMulInteger", [("a", U8, [2, 4])], {"b": u8(4, 5), "az": np.array(1, np.int8)},
           TensorProto.INT32),
     {"a": u8(2, 4)}, ['"n"', "a_zero_point", "int8", "uint8"]),
    ("QLinearMatMul b_zero_point per column of the wrong length", qmm(np.zeros(3, np.int8)),
     {"a": u8(3, 4)}, ['"n"', "b_zero_point", "[3]", "5"]),
    ("ConvInteger w_zero_point of the wrong length",
     model("ConvInteger", [("x", U8, [1, 2, 5, 5])],
           {"w": u8(4, 2, 3, 3), "xz": np.array(1, np.uint8), "wz": np.zeros(3, np.uint8)},
           TensorProto.INT32),
     {"x": u8(1, 2, 5, 5)}, ["ConvInteger", '"n"', "w_zero_point", "[3]", "4"]),
    ("ConvInteger x_zero_point of several values",
     model("ConvInteger", [("x", U8, [1, 2, 5, 5])],
           {"w": u8(4, 2, 3, 3), "xz": np.zeros(2, np.uint8)}, TensorProto.INT32),
     {"x": u8(1, 2, 5, 5)}, ['"n"', "x_zero_point", "[2]", "one value"]),
    ("QLinearConv bias of the wrong length",
     model("QLinearConv", [("x", U8, [1, 2, 5, 5])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "w": i8(4, 2, 3, 3), "ws": f32(0.1),
            "wz": np.array(0, np.int8), "ys": f32(0.2), "yz": np.array(0, np.uint8),
            "b": np.zeros(3, np.int32)}, U8),
     {"x": u8(1, 2, 5, 5)}, ["QLinearConv", '"n"', "B", "[3]", "[4]"]),
    ("QLinearSigmoid zero point of the wrong type",
     model("QLinearSigmoid", [("x", U8, [2, 3])],
           {"xs": f32(0.1), "xz": np.array(1, np.int8), "ys": f32(0.1), "yz": np.array(0, np.uint8)},
           U8, domain="com.microsoft"),
     {"x": u8(2, 3)}, ["QLinearSigmoid", '"n"', "X_zero_point", "int8", "uint8"]),
    ("QLinearGlobalAveragePool per-channel scale",
     model("QLinearGlobalAveragePool", [("x", U8, [1, 3, 4, 4])],
           {"xs": np.full(3, 0.1, np.float32), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft"),
     {"x": u8(1, 3, 4, 4)}, ['"n"', "X_scale", "[3]", "expected a scalar"]),
    ("QLinearConcat with a triple cut short",
     concat([u8(2, 3), f32(0.1), np.array(0, np.uint8), u8(2, 3), f32(0.1)]),
     {"x": u8(2, 3)}, ["QLinearConcat", '"n"', "has 10 inputs", "(X, X_scale, X_zero_point)"]),
    ("QLinearConcat input of another type than Y_zero_point",
     concat([i8(2, 3), f32(0.1), np.array(0, np.int8)]),
     {"x": u8(2, 3)}, ['"n"', "X 1", "int8", "uint8"]),
    ("QLinearConcat shapes that do not join",
     concat([u8(2, 4), f32(0.1), np.array(0, np.uint8)], axis=0),
     {"x": u8(2, 3)}, ['"n"', "[2, 4]", "all dims except axis 0"]),
    ("QLinearWhere Y of another type than X",
     model("QLinearWhere", [("c", TensorProto.BOOL, [2, 3])],
           {"x": u8(2, 3), "xs": f32(0.1), "xz": np.array(0, np.uint8), "b": i8(2, 3),
            "bs": f32(0.1), "bz": np.array(0, np.int8), "zs": f32(0.1),
            "zz": np.array(0, np.uint8)}, U8, domain="com.microsoft"),
     {"c": np.zeros((2, 3), bool)}, ["QLinearWhere", '"n"', "Y", "int8", "uint8"]),
    ("QLinearWhere condition not bool",
     model("QLinearWhere", [("c", F, [2, 3])],
           {"x": u8(2, 3), "xs": f32(0.1), "xz": np.array(0, np.uint8), "b": u8(2, 3),
            "bs": f32(0.1), "bz": np.array(0, np.uint8), "zs": f32(0.1),
            "zz": np.array(0, np.uint8)}, U8, domain="com.microsoft"),
     {"c": np.zeros((2, 3), np.float32)}, ['"n"', "float32", "bool"]),
    ("DynamicQuantizeLSTM W_scale of the wrong length",
     model("DynamicQuantizeLSTM", [("x", F, [3, 1, 2])],
           {"W": i8(1, 2, 8), "R": i8(1, 2, 8), "_B": None, "_s": None, "_h": None, "_c": None,
            "_P": None, "ws": np.full(3, 0.1, np.float32), "wz": np.zeros(3, np.int8),
            "rs": f32([0.1]), "rz": np.zeros(1, np.int8)}, F, domain="com.microsoft",
           hidden_size=2),
     {"x": np.zeros((3, 1, 2), np.float32)},
     ["DynamicQuantizeLSTM", '"n"', "W_scale", "[3]", "[1, 8]"]),
    ("DynamicQuantizeLSTM without R_zero_point",
     model("DynamicQuantizeLSTM", [("x", F, [3, 1, 2])],
           {"W": i8(1, 2, 8), "R": i8(1, 2, 8), "_B": None, "_s": None, "_h": None, "_c": None,
            "_P": None, "ws": f32([0.1]), "wz": np.zeros(1, np.int8), "rs": f32([0.1]),
            "_rz": None}, F, domain="com.microsoft", hidden_size=2),
     {"x": np.zeros((3, 1, 2), np.float32)}, ['"n"', "R_zero_point (input 11) is required"]),
    ("QLinearSoftmax without its opset attribute",
     model("QLinearSoftmax", [("x", U8, [2, 3])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "ys": f32(1 / 256),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft"),
     {"x": u8(2, 3)}, ["QLinearSoftmax", '"n"', "'opset'", "required"]),
    ("QLinearSoftmax axis out of range",
     model("QLinearSoftmax", [("x", U8, [2, 3])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "ys": f32(1 / 256),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", opset=13, axis=2),
     {"x": u8(2, 3)}, ['"n"', "axis 2"]),
    ("QLinearAveragePool per-channel scale",
     model("QLinearAveragePool", [("x", U8, [1, 3, 4, 4])],
           {"xs": np.full(3, 0.1, np.float32), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", kernel_shape=[2, 2]),
     {"x": u8(1, 3, 4, 4)}, ["QLinearAveragePool", '"n"', "X_scale", "[3]", "expected a scalar"]),
    ("QLinearAveragePool pads as large as the window",
     model("QLinearAveragePool", [("x", U8, [1, 3, 4, 4])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", kernel_shape=[2, 2],
           pads=[2, 0, 0, 0]),
     {"x": u8(1, 3, 4, 4)}, ['"n"', "pads", "not smaller than the window"]),
    ("QLinearReduceMean without keepdims",
     model("QLinearReduceMean", [("x", U8, [2, 3])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", axes=[1]),
     {"x": u8(2, 3)}, ["QLinearReduceMean", '"n"', "'keepdims'", "required"]),
    ("QLinearReduceMean axis out of range",
     model("QLinearReduceMean", [("x", U8, [2, 3])],
           {"xs": f32(0.1), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", axes=[2], keepdims=1),
     {"x": u8(2, 3)}, ['"n"', "axis 2 is out of range for rank 2"]),
    ("QLinearReduceMean per-channel scale",
     model("QLinearReduceMean", [("x", U8, [2, 3])],
           {"xs": np.full(3, 0.1, np.float32), "xz": np.array(1, np.uint8), "ys": f32(0.1),
            "yz": np.array(0, np.uint8)}, U8, domain="com.microsoft", axes=[1], keepdims=1),
     {"x": u8(2, 3)}, ['"n"', "[3]"]),
    ("MatMulNBits B of the wrong shape",
     nbits({"b": u8(4, 3, 16)}), {"a": np.zeros((2, 64), np.float32)},
     ["MatMulNBits", '"n"', "B has shape [4, 3, 16]", "expected [4, 2, 16]"]),
    ("MatMulNBits bits of 3", nbits({}, bits=3), {"a": np.zeros((2, 64), np.float32)},
     ['"n"', "bits is 3", "4 or 8"]),
    ("MatMulNBits block_size not a power of 2", nbits({}, block_size=24),
     {"a": np.zeros((2, 64), np.float32)}, ['"n"', "block_size is 24", "power of 2"]),
    ("MatMulNBits scales of the wrong count", nbits({"scales": np.ones(5, np.float32)}),
     {"a": np.zeros((2, 64), np.float32)}, ['"n"', "scales has shape [5]", "expected 8 values"]),
    ("MatMulNBits packed zero points of the wrong count",
     nbits({"zp": np.zeros(3, np.uint8)}), {"a": np.zeros((2, 64), np.float32)},
     ['"n"', "zero_points has shape [3]", "expected 4 values"]),
    ("MatMulNBits A whose last dim is not K", nbits({}, a_shape=[2, 60]),
     {"a": np.zeros((2, 60), np.float32)}, ['"n"', "A has shape [2, 60]", "K = 64"]),
    ("MatMulNBits with g_idx", nbits({"zp": np.zeros(4, np.uint8), "g": np.zeros(64, np.int32)}),
     {"a": np.zeros((2, 64), np.float32)}, ['"n"', "g_idx"]),
    ("int4 tensor into an op without an int4 kernel",
     model("Neg", [("x", TensorProto.INT4, [3])], {}, TensorProto.INT4),
     None, ['"n"', "Neg", "int4"]),
    ("int4 initializer with too few packed values", int4_short_initializer(),
     {"x": np.zeros(5, np.float32)},
     ["'w'", "has 2 values", "needs 3 (bytes of packed int4, 2 elements a byte)"]),
    ("int2 initializer with raw_data one byte short",
     packed_initializer(TensorProto.INT2, 9, raw=[0x1B, 0xE4]), {"x": np.zeros(9, np.float32)},
     ["'w'", "raw_data has 2 bytes", "shape [9]", "int2", "need 3"]),
    ("uint2 initializer with raw_data one byte too many",
     packed_initializer(TensorProto.UINT2, 4, raw=[0x1B, 0]), {"x": np.zeros(4, np.float32)},
     ["'w'", "raw_data has 2 bytes", "uint2", "need 1"]),
    ("uint2 initializer with too few int32_data values",
     packed_initializer(TensorProto.UINT2, 5, int32=[0x1B]), {"x": np.zeros(5, np.float32)},
     ["'w'", "has 1 values", "needs 2 (bytes of packed uint2, 4 elements a byte)"]),
    ("float4e2m1 initializer with raw_data of one byte per element",
     packed_initializer(TensorProto.FLOAT4E2M1, 3, raw=[1, 2, 3]),
     {"x": np.zeros(3, np.float32)}, ["'w'", "raw_data has 3 bytes", "float4e2m1", "need 2"]),
    ("float8e8m0 initializer with raw_data one byte short",
     packed_initializer(TensorProto.FLOAT8E8M0, 3, raw=[127, 128]),
     {"x": np.zeros(3, np.float32)}, ["'w'", "raw_data has 2 bytes", "float8e8m0", "need 3"]),
    ("float4e2m1 DequantizeLinear with a nonzero zero point",
     packed_initializer(TensorProto.FLOAT4E2M1, 3, raw=[0x21, 0x03],
                        zero_point=float4_zero_point(2)),
     {"x": np.zeros(3, np.float32)}, ['"n"', "nonzero float4e2m1 zero point"]),
    ("int2 tensor into an op without an int2 kernel",
     model("Neg", [("x", TensorProto.INT2, [3])], {}, TensorProto.INT2),
     None, ['"n"', "Neg", "int2"]),
    ("Cast with an unknown round_mode",
     model("Cast", [("x", F, [3])], {}, TensorProto.FLOAT8E8M0, to=TensorProto.FLOAT8E8M0,
           round_mode="sideways"),
     None, ['"n"', "round_mode is 'sideways'", "'up', 'down' or 'nearest'"]),
    ("MatMulIntegerToFloat bias of the wrong length",
     model("MatMulIntegerToFloat", [("a", U8, [2, 4])],
           {"b": i8(4, 5), "as": f32(0.1), "bs": f32(0.1), "_az": None, "_bz": None,
            "bias": np.zeros(4, np.float32)}, F, domain="com.microsoft"),
     {"a": u8(2, 4)}, ["MatMulIntegerToFloat", '"n"', "bias", "[4]", "5 values"]),
]


@pytest.mark.parametrize("what,blob,feeds,words", CASES, ids=[c[0] for c in CASES])
def test_bad_quantized_inputs_name_the_node_and_the_problem(what, blob, feeds, words):
    with pytest.raises(quilt.Error) as got:
        session = quilt.Session(blob)
        if feeds is not None:
            session.run(feeds)
    message = str(got.value)
    for w in words:
        assert w in message, message
