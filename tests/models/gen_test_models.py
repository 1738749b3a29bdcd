"""Builds the models the core, session and CLI tests use (good ones and deliberately broken ones).

usage: gen_test_models.py OUT_DIR
Every model is built with onnx.helper; nothing is downloaded.
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
OPSET = [helper.make_opsetid("", 17)]


def save(model, name):
    model.ir_version = 8
    onnx.save(model, out / name)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


# add_relu: y = Relu(x + w), x: float32 [batch, 4]
w = np.array([0.5, -1.0, 2.0, -0.25], dtype=np.float32)
add_relu = helper.make_model(helper.make_graph(
    [helper.make_node("Add", ["x", "w"], ["s"], name="add"),
     helper.make_node("Relu", ["s"], ["y"], name="relu")],
    "add_relu", [vi("x", TensorProto.FLOAT, ["batch", 4])], [vi("y", TensorProto.FLOAT, ["batch", 4])],
    [numpy_helper.from_array(w, "w")]), opset_imports=OPSET)
save(add_relu, "add_relu.onnx")
data = add_relu.SerializeToString()
(out / "truncated.onnx").write_bytes(data[: len(data) // 2])
(out / "not_onnx.onnx").write_text("this is not an ONNX model\n")
(out / "empty.onnx").write_bytes(b"")

# Model metadata (Session::metadata) on a copy of add_relu.
meta = onnx.ModelProto()
meta.CopyFrom(add_relu)
meta.producer_name, meta.producer_version, meta.domain = "quilt-tests", "2.5", "org.quilt.tests"
meta.model_version, meta.doc_string = 7, "adds w, then Relu"
meta.graph.doc_string = "the add_relu graph"
helper.set_model_props(meta, {"author": "quilt", "licence": "none"})
save(meta, "metadata.onnx")

# Overridable initializers: w is listed as a graph input too (y = x + w, bias b is not listed).
# Under IR 4+ a run may give w; under IR 3 every initializer is listed and none is overridable.
over_graph = helper.make_graph(
    [helper.make_node("Add", ["x", "w"], ["s"], name="add"), helper.make_node("Add", ["s", "b"], ["y"], name="bias")],
    "overridable", [vi("x", TensorProto.FLOAT, [2, 4]), vi("w", TensorProto.FLOAT, [4])],
    [vi("y", TensorProto.FLOAT, [2, 4])],
    [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.full(4, 10, np.float32), "b")])
save(helper.make_model(over_graph, opset_imports=OPSET), "overridable.onnx")
ir3 = helper.make_model(over_graph, opset_imports=[helper.make_opsetid("", 8)])
ir3.graph.input.append(vi("b", TensorProto.FLOAT, [4]))
ir3.ir_version = 3
onnx.save(ir3, out / "overridable_ir3.onnx")

# two outputs, for output subsets: y1 = Relu(x), y2 = Neg(x)
two = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y1"], name="relu"), helper.make_node("Neg", ["x"], ["y2"], name="neg")],
    "two_outputs", [vi("x", TensorProto.FLOAT, [2, 3])],
    [vi("y1", TensorProto.FLOAT, [2, 3]), vi("y2", TensorProto.FLOAT, [2, 3])]), opset_imports=OPSET)
save(two, "two_outputs.onnx")

# A cycle: a = Relu(b), b = Relu(a)
cycle = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second"),
     helper.make_node("Relu", ["x"], ["y"], name="ok")],
    "cycle", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]), opset_imports=OPSET)
save(cycle, "cycle.onnx")

# Unknown ops: two FooBar nodes and one custom-domain op, among valid ones
unknown = helper.make_model(helper.make_graph(
    [helper.make_node("FooBar", ["x"], ["a"], name="foo1"), helper.make_node("FooBar", ["a"], ["b"], name="foo2"),
     helper.make_node("Frobnicate", ["b"], ["c"], name="frob", domain="com.example"),
     helper.make_node("Relu", ["c"], ["y"], name="relu")],
    "unknown", [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]),
    opset_imports=OPSET + [helper.make_opsetid("com.example", 1)])
save(unknown, "unknown_op.onnx")

# Several structural problems at once: undefined input, duplicate output, missing graph output
broken = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["nowhere"], ["a"], name="reads_undefined"),
     helper.make_node("Relu", ["x"], ["a"], name="duplicate_a")],
    "broken", [vi("x", TensorProto.FLOAT, [2])], [vi("never", TensorProto.FLOAT, [2])]), opset_imports=OPSET)
save(broken, "broken.onnx")

# Initializers in every typed field (no raw_data), returned through Identity
typed = [
    helper.make_tensor("f32", TensorProto.FLOAT, [2], [1.5, -2.0]),
    helper.make_tensor("f64", TensorProto.DOUBLE, [2], [1.25, -3.5]),
    helper.make_tensor("i64", TensorProto.INT64, [3], [1, -2, 1 << 40]),
    helper.make_tensor("i32", TensorProto.INT32, [2], [7, -8]),
    helper.make_tensor("i8", TensorProto.INT8, [2], [-128, 127]),
    helper.make_tensor("u8", TensorProto.UINT8, [2], [0, 255]),
    helper.make_tensor("u16", TensorProto.UINT16, [2], [0, 65535]),
    helper.make_tensor("i16", TensorProto.INT16, [2], [-32768, 32767]),
    helper.make_tensor("u32", TensorProto.UINT32, [2], [0, 4294967295]),
    helper.make_tensor("u64", TensorProto.UINT64, [1], [18446744073709551615]),
    helper.make_tensor("b", TensorProto.BOOL, [3], [True, False, True]),
    helper.make_tensor("f16", TensorProto.FLOAT16, [2], [1.5, -0.25]),  # stored as fp16 bits in int32_data
]
typed_model = helper.make_model(helper.make_graph(
    [helper.make_node("Identity", [t.name], [t.name + "_out"], name="id_" + t.name) for t in typed],
    "typed", [], [vi(t.name + "_out", t.data_type, list(t.dims)) for t in typed], typed), opset_imports=OPSET)
save(typed_model, "typed_initializers.onnx")

# Attributes of every kind, including a subgraph, kept on a node (If is parsed, not executed here)
then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [vi("t", TensorProto.FLOAT, [2])])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [vi("e", TensorProto.FLOAT, [2])])
attrs = helper.make_model(helper.make_graph(
    [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
    "attrs", [vi("cond", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]),
    opset_imports=OPSET)
attrs.graph.node[0].attribute.extend([
    helper.make_attribute("f", 0.5), helper.make_attribute("i", 3), helper.make_attribute("s", "text"),
    helper.make_attribute("fs", [1.0, 2.0]), helper.make_attribute("is", [4, 5, 6]),
    helper.make_attribute("ss", ["a", "b"]),
    helper.make_attribute("t", numpy_helper.from_array(np.array([1, 2], dtype=np.int64)))])
save(attrs, "attributes.onnx")


# External data: the weight of add_relu stored next to the model
def external(name, location, offset=0, length=None, write=True):
    d = out / name
    d.mkdir(exist_ok=True)
    m = onnx.ModelProto()
    m.CopyFrom(add_relu)
    init = m.graph.initializer[0]
    init.ClearField("raw_data")
    init.data_location = TensorProto.EXTERNAL
    entries = {"location": location, "offset": str(offset)}
    if length is not None:
        entries["length"] = str(length)
    for k, v in entries.items():
        init.external_data.append(onnx.StringStringEntryProto(key=k, value=v))
    if write:
        (d / "weights.bin").write_bytes(b"\0" * 8 + w.tobytes())
    onnx.save(m, d / "model.onnx")


external("external_ok", "weights.bin", offset=8, length=16)
external("external_missing", "nothing_here.bin", write=False)
external("external_range", "weights.bin", offset=20)
external("external_escape", "../add_relu.onnx")
external("external_offset_text", "weights.bin", offset="12abc")
external("external_offset_huge", "weights.bin", offset="99999999999999999999")
external("external_length_negative", "weights.bin", offset=8, length=-16)

# Declarations that contradict inference: onnxruntime refuses these, and so must Quilt.
def relu_declared(name, out_dtype, out_shape):
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], name,
        [vi("x", TensorProto.FLOAT, [2])], [vi("y", out_dtype, out_shape)]), opset_imports=OPSET)
    save(m, name + ".onnx")


relu_declared("declared_wrong_dtype", TensorProto.INT64, [2])
relu_declared("declared_wrong_shape", TensorProto.FLOAT, [3])
relu_declared("declared_wrong_rank", TensorProto.FLOAT, [2, 1])
relu_declared("declared_symbolic_ok", TensorProto.FLOAT, ["n"])

# A pool whose padding is as wide as its window: a window could hold only padding.
for op in ["MaxPool", "AveragePool"]:
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], name="pool", kernel_shape=[3, 3], pads=[0, 3, 0, 0])],
        "pool_pad", [vi("x", TensorProto.FLOAT, [1, 1, 5, 5])], [vi("y", TensorProto.FLOAT, None)]),
        opset_imports=OPSET)
    save(m, f"{op.lower()}_pad_too_large.onnx")

# Versions from the future, and an opset_import of version 0.
for name, ir, opset in [("opset_99", 8, 99), ("ir_99", 99, 17), ("opset_0", 8, 0)]:
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], name,
        [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])]),
        opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    onnx.save(m, out / (name + ".onnx"))

# The README's C++ example runs "model.onnx" with input "input" [1, 3, 224, 224] and output "output".
(out / "readme_example").mkdir(exist_ok=True)
readme = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["input"], ["output"], name="relu")], "readme_example",
    [vi("input", TensorProto.FLOAT, [1, 3, 224, 224])], [vi("output", TensorProto.FLOAT, [1, 3, 224, 224])]),
    opset_imports=OPSET)
readme.ir_version = 8
onnx.save(readme, out / "readme_example" / "model.onnx")

# Output names that --output-dir must keep apart: 'a/b' and 'a_b' (and '%' itself).
names = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["a/b"], name="r1"), helper.make_node("Neg", ["x"], ["a_b"], name="r2"),
     helper.make_node("Abs", ["x"], ["a%2Fb"], name="r3"), helper.make_node("Identity", ["x"], [".."], name="r4")],
    "names", [vi("x", TensorProto.FLOAT, [2])],
    [vi("a/b", TensorProto.FLOAT, [2]), vi("a_b", TensorProto.FLOAT, [2]), vi("a%2Fb", TensorProto.FLOAT, [2]),
     vi("..", TensorProto.FLOAT, [2])]), opset_imports=OPSET)
save(names, "output_names.onnx")

# Wire-format corners of the initializer splitter (core/onnx_wire.cpp), each meant to load
# exactly as protobuf alone reads it: add_relu's bytes, rearranged.
def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def field(number, wire, payload):
    return varint(number << 3 | wire) + (varint(len(payload)) + payload if wire == 2 else payload)


def without_graph(model):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.ClearField("graph")
    return m.SerializeToString()


add_relu.ir_version = 8
graph_rest = onnx.GraphProto()
graph_rest.CopyFrom(add_relu.graph)
del graph_rest.initializer[:]
w_bytes = add_relu.graph.initializer[0].SerializeToString()
# The graph in two fields (protobuf merges them), the initializer in the second.
(out / "wire_two_graph_fields.onnx").write_bytes(
    without_graph(add_relu) + field(7, 2, graph_rest.SerializeToString()) + field(7, 2, field(5, 2, w_bytes)))
# raw_data twice in one tensor: the last one counts; a field of the initializer's number but
# another wire type is an unknown field; an unknown group makes the splitter hand the whole file
# to protobuf; ir_version as an overlong (non-canonical) varint.
w_twice = field(9, 2, b"bad") + w_bytes
graph_bytes = graph_rest.SerializeToString() + field(5, 2, w_twice) + field(5, 0, varint(7))
(out / "wire_corners.onnx").write_bytes(
    bytes([0x08, 0x88, 0x80, 0x00]) + without_graph(add_relu)[2:] + field(7, 2, graph_bytes))
assert without_graph(add_relu)[:2] == bytes([0x08, 8])  # ir_version comes first, as 8
(out / "wire_group.onnx").write_bytes(add_relu.SerializeToString() + varint(100 << 3 | 3) + varint(100 << 3 | 4))
# Initializers only folded nodes read (B, freed once folded) next to one that is a graph output
# (A): y = x + Transpose(B), a = A.
folded = helper.make_model(helper.make_graph(
    [helper.make_node("Transpose", ["B"], ["Bt"], name="transpose"),
     helper.make_node("Add", ["x", "Bt"], ["y"], name="add")],
    "folded_inputs", [vi("x", TensorProto.FLOAT, [2, 3])],
    [vi("y", TensorProto.FLOAT, [2, 3]), vi("A", TensorProto.FLOAT, [2])],
    [numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), "B"),
     numpy_helper.from_array(np.array([7, 8], dtype=np.float32), "A")]), opset_imports=OPSET)
save(folded, "folded_inputs.onnx")
# raw_data of 3 bytes for 4 floats.
short = onnx.ModelProto()
short.CopyFrom(add_relu)
short.graph.initializer[0].raw_data = b"abc"
save(short, "raw_size_mismatch.onnx")
# Truncated inside a weight's raw_data.
big = helper.make_model(helper.make_graph(
    [helper.make_node("Add", ["x", "w"], ["y"], name="add")], "big", [vi("x", TensorProto.FLOAT, [1024])],
    [vi("y", TensorProto.FLOAT, [1024])], [numpy_helper.from_array(np.ones(1024, np.float32), "w")]),
    opset_imports=OPSET)
big.ir_version = 8
data = big.SerializeToString()
(out / "truncated_weights.onnx").write_bytes(data[: data.index(np.ones(1024, np.float32).tobytes()) + 100])

# A declared size that overflows / exceeds memory (raw_data left empty: the size check comes first)
def raw_tensor(name, dims):
    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=dims)
    t.raw_data = b""
    return t


huge = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")], "huge", [vi("x", TensorProto.FLOAT, [2])],
    [vi("y", TensorProto.FLOAT, [2])],
    [raw_tensor("giant", [1 << 20, 1 << 20, 1 << 20])]),
    opset_imports=OPSET)
save(huge, "huge_initializer.onnx")
overflow = helper.make_model(helper.make_graph(
    [helper.make_node("Relu", ["x"], ["y"], name="relu")], "overflow", [vi("x", TensorProto.FLOAT, [2])],
    [vi("y", TensorProto.FLOAT, [2])],
    [raw_tensor("over", [1 << 40, 1 << 40])]),
    opset_imports=OPSET)
save(overflow, "overflow_initializer.onnx")
# A valid model whose input declares a dim of 2^31: creating its session must not allocate by
# that dim (the CPU's Pad planned an index per output position at creation: 16 GB; fuzz_model).
pad_declared_huge = helper.make_model(helper.make_graph(
    [helper.make_node("Pad", ["x"], ["y"], name="pad", mode="reflect", pads=[0, 0, 1, 1, 0, 0, 1, 1])],
    "pad_declared_huge", [vi("x", TensorProto.FLOAT, [1, 1 << 31, 2, 4])],
    [vi("y", TensorProto.FLOAT, [1, 1 << 31, 4, 6])]),
    opset_imports=[helper.make_opsetid("", 6)])
save(pad_declared_huge, "pad_declared_huge.onnx")
# An empty input whose other dims are 2^62: no bytes, but the output's dims sum past int64 (the
# kernel's check of how large a plan to make at creation once summed them).
pad_empty_wide = helper.make_model(helper.make_graph(
    [helper.make_node("Pad", ["x"], ["y"], name="pad", pads=[0, 0, 0, 0, 0, 2])],
    "pad_empty_wide", [vi("x", TensorProto.FLOAT, [0, 1 << 62, 1 << 62])], [vi("y", TensorProto.FLOAT, None)]),
    opset_imports=[helper.make_opsetid("", 6)])
save(pad_empty_wide, "pad_empty_wide.onnx")

# Expected output of add_relu for the tests' input
x = np.arange(-4, 4, dtype=np.float32).reshape(2, 4)
np.save(out / "add_relu_x.npy", x)
np.save(out / "add_relu_y.npy", np.maximum(x + w, 0))
np.save(out / "int_input.npy", np.zeros((2, 4), dtype=np.int64))
print(f"wrote test models to {out}")

# Graph inputs/outputs of types Quilt cannot hold: sequences of sparse tensors
sparse_seq = helper.make_sequence_type_proto(helper.make_sparse_tensor_type_proto(TensorProto.FLOAT, None))
seq = helper.make_model(helper.make_graph(
    [helper.make_node("Identity", ["s"], ["t"], name="id")], "sequence",
    [helper.make_value_info("s", sparse_seq)], [helper.make_value_info("t", sparse_seq)]),
    opset_imports=OPSET)
save(seq, "sequence_io.onnx")
strings = helper.make_model(helper.make_graph(
    [helper.make_node("Identity", ["s"], ["t"], name="id")], "strings",
    [vi("s", TensorProto.STRING, [2])], [vi("t", TensorProto.STRING, [2])]), opset_imports=OPSET)
save(strings, "string_io.onnx")
# A string op Quilt has no host kernel for (Transpose on strings), and string labels mapped to
# numbers that the CPU backend then scales (a host step feeding a CPU patch).
save(helper.make_model(helper.make_graph(
    [helper.make_node("Transpose", ["s"], ["t"], name="flip")], "string_transpose",
    [vi("s", TensorProto.STRING, [2, 3])], [vi("t", TensorProto.STRING, [3, 2])]), opset_imports=OPSET),
    "string_transpose.onnx")
save(helper.make_model(helper.make_graph(
    [helper.make_node("LabelEncoder", ["s"], ["ids"], name="encode", domain="ai.onnx.ml",
                      keys_strings=["a", "b"], values_floats=[1.0, 2.0], default_float=0.0),
     helper.make_node("Mul", ["ids", "ids"], ["sq"], name="square")], "string_to_cpu",
    [vi("s", TensorProto.STRING, [3])], [vi("sq", TensorProto.FLOAT, [3])]),
    opset_imports=OPSET + [helper.make_opsetid("ai.onnx.ml", 2)]), "string_to_cpu.onnx")

# ---- sequences, maps and optionals (tests/core/test_values.cpp) ----
seq_f = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
save(helper.make_model(helper.make_graph(
    [helper.make_node("Identity", ["s"], ["t"], name="copy"),
     helper.make_node("SequenceLength", ["s"], ["n"], name="length"),
     helper.make_node("ConcatFromSequence", ["s"], ["c"], name="concat", axis=0),
     helper.make_node("Relu", ["c"], ["r"], name="relu"),
     helper.make_node("SequenceAt", ["s", "zero"], ["first"], name="first")], "seq_io",
    [helper.make_value_info("s", seq_f)],
    [helper.make_value_info("t", seq_f), vi("n", TensorProto.INT64, []),
     vi("r", TensorProto.FLOAT, None), vi("first", TensorProto.FLOAT, None)],
    [helper.make_tensor("zero", TensorProto.INT64, [], [0])]), opset_imports=OPSET), "seq_io.onnx")
save(helper.make_model(helper.make_graph(
    [helper.make_node("ZipMap", ["x"], ["z"], name="zip", domain="ai.onnx.ml",
                      classlabels_int64s=[3, 8])], "zipmap_io",
    [vi("x", TensorProto.FLOAT, ["N", 2])],
    [helper.make_value_info("z", helper.make_sequence_type_proto(helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.FLOAT, None))))]),
    opset_imports=OPSET + [helper.make_opsetid("ai.onnx.ml", 1)]), "zipmap_io.onnx")
save(helper.make_model(helper.make_graph(
    [helper.make_node("OptionalHasElement", ["o"], ["has"], name="has")], "optional_io",
    [helper.make_value_info("o", helper.make_optional_type_proto(
        helper.make_tensor_type_proto(TensorProto.FLOAT, None)))],
    [vi("has", TensorProto.BOOL, [])]), opset_imports=[helper.make_opsetid("", 18)]),
    "optional_io.onnx")

# ---- heterogeneous models: the example plugin claims MatMul, Add, Relu and Conv (float32) ----
rng = np.random.default_rng(7)


def weight(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)


def hetero(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, [vi(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [vi(n, TensorProto.FLOAT, s) for n, s in outputs], inits)
    save(helper.make_model(g, opset_imports=OPSET), name + ".onnx")


N = helper.make_node
# MatMul -> Add -> Relu on the plugin, Softmax on the CPU, MatMul on the plugin again.
hetero("hetero_mlp", [N("MatMul", ["x", "W1"], ["a"], name="mm1"), N("Add", ["a", "B1"], ["b"], name="add1"),
                      N("Relu", ["b"], ["c"], name="relu1"), N("Softmax", ["c"], ["d"], name="sm"),
                      N("MatMul", ["d", "W2"], ["y"], name="mm2")],
       [("x", [8, 64])], [("y", [8, 32])], [weight("W1", 64, 64), weight("B1", 64), weight("W2", 64, 32)])
# The diamond: grouping mm, relu, add and mm_out into one plugin patch would need the CPU's
# softmax both before and after it.
hetero("hetero_diamond", [N("MatMul", ["x", "W"], ["a"], name="mm"), N("Relu", ["a"], ["b"], name="relu"),
                          N("Softmax", ["a"], ["c"], name="softmax"), N("Add", ["b", "c"], ["d"], name="add"),
                          N("MatMul", ["d", "W2"], ["y"], name="mm_out")],
       [("x", [16, 32])], [("y", [16, 8])], [weight("W", 32, 32), weight("W2", 32, 8)])
# A lone cheap op between CPU nodes: the cost rule keeps it on the CPU.
hetero("hetero_island", [N("Softmax", ["x"], ["a"], name="sm1"), N("Relu", ["a"], ["b"], name="relu"),
                         N("Softmax", ["b"], ["y"], name="sm2")],
       [("x", [4, 16])], [("y", [4, 16])], [])
# Two independent branches, one per backend, joined on the CPU: the plugin's MatMul/Relu on x,
# and enough CPU work on x2 (six element-wise ops on 1M elements) to overlap with it.
cpu_chain = [N("Sigmoid", ["x2"], ["s0"], name="sig_b")]
for i, op in enumerate(["Tanh", "Sigmoid", "Tanh", "Sigmoid", "Tanh"]):
    cpu_chain.append(N(op, [f"s{i}"], [f"s{i + 1}"], name=f"b{i}"))
hetero("hetero_branches", [N("MatMul", ["x", "WA"], ["a"], name="mm_a"), N("Relu", ["a"], ["ya"], name="relu_a")]
       + cpu_chain + [N("ReduceMean", ["s5"], ["yb"], name="mean_b", keepdims=0),
                      N("Mul", ["ya", "yb"], ["y"], name="join")],
       [("x", [64, 256]), ("x2", [1024, 1024])], [("y", [64, 256])], [weight("WA", 256, 256)])
# One download of `a` shared by two CPU patches; one upload of `x` shared by two plugin patches.
hetero("hetero_shared", [N("MatMul", ["x", "W1"], ["a"], name="mm1"), N("Softmax", ["a"], ["s"], name="sm"),
                         N("MatMul", ["s", "W2"], ["z"], name="mm2"), N("Add", ["z", "x"], ["zx"], name="add_x"),
                         N("Mul", ["a", "zx"], ["y"], name="mul")],
       [("x", [8, 32])], [("y", [8, 32])], [weight("W1", 32, 32), weight("W2", 32, 32)])
# Everything claimed by the plugin (strict mode succeeds); a Conv for good measure.
hetero("hetero_all_claimed", [N("Conv", ["x", "K", "KB"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                              N("Relu", ["c"], ["r"], name="relu"), N("Add", ["r", "x"], ["y"], name="residual")],
       [("x", [1, 4, 8, 8])], [("y", [1, 4, 8, 8])], [weight("K", 4, 4, 3, 3), weight("KB", 4)])
# A symbolic batch: transfer sizes are known only at run time; batch 0 means empty copies.
g = helper.make_graph([N("MatMul", ["x", "W"], ["a"], name="mm"), N("Softmax", ["a"], ["b"], name="sm"),
                       N("Relu", ["b"], ["c"], name="relu"), N("MatMul", ["c", "W2"], ["y"], name="mm2")],
                      "hetero_dynamic", [vi("x", TensorProto.FLOAT, ["n", 64])], [vi("y", TensorProto.FLOAT, ["n", 16])],
                      [weight("W", 64, 16), weight("W2", 16, 16)])
save(helper.make_model(g, opset_imports=OPSET), "hetero_dynamic.onnx")

# hetero_mid_run_types: x's product on the example plugin (its own thread) while the core runs
# an If whose branches give different shapes, so the run's types change while the plugin's lane
# reads them (ThreadSanitizer found the types' first change racing with those reads).
then_g = helper.make_graph([N("Identity", ["x"], ["t"])], "then", [], [vi("t", TensorProto.FLOAT, None)])
else_g = helper.make_graph([N("ReduceSum", ["x"], ["e"], keepdims=0)], "else", [],
                           [vi("e", TensorProto.FLOAT, None)])
g = helper.make_graph([N("MatMul", ["x", "W"], ["a"], name="mm"), N("Relu", ["a"], ["y"], name="relu"),
                       N("If", ["c"], ["z"], name="if", then_branch=then_g, else_branch=else_g)],
                      "hetero_mid_run_types", [vi("x", TensorProto.FLOAT, [64, 64]), vi("c", TensorProto.BOOL, [])],
                      [vi("y", TensorProto.FLOAT, [64, 64]), vi("z", TensorProto.FLOAT, None)],
                      [weight("W", 64, 64)])
save(helper.make_model(g, opset_imports=OPSET), "hetero_mid_run_types.onnx")

# max_unpool: y = MaxUnpool(x, i), 2x2 windows: y [1, 4, 128, 128] (256 KB, a size the buffer
# cache keeps) is zero except where the indices point. Its output comes from the host, and
# MaxUnpool writes only the indexed elements.
unpool = helper.make_model(helper.make_graph(
    [helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])],
    "max_unpool", [vi("x", TensorProto.FLOAT, [1, 4, 64, 64]), vi("i", TensorProto.INT64, [1, 4, 64, 64])],
    [vi("y", TensorProto.FLOAT, [1, 4, 128, 128])]), opset_imports=[helper.make_opsetid("", 11)])
save(unpool, "max_unpool.onnx")

# stress_dynamic (tests/core/test_stress.cpp): symbolic batch and spatial dims, so each run of
# one session infers shapes, sizes its buffers and tiles its kernels anew. Conv -> Relu is one
# output ([n, 8, h, w]); global pooling -> MatMul -> Softmax the other ([n, 4]).
g = helper.make_graph([N("Conv", ["x", "SK", "SB"], ["c"], name="conv", pads=[1, 1, 1, 1]),
                       N("Relu", ["c"], ["features"], name="relu"),
                       N("GlobalAveragePool", ["features"], ["p"], name="gap"),
                       N("Flatten", ["p"], ["f"], name="flatten", axis=1),
                       N("MatMul", ["f", "SW"], ["logits"], name="mm"),
                       N("Softmax", ["logits"], ["probs"], name="softmax", axis=-1)],
                      "stress_dynamic", [vi("x", TensorProto.FLOAT, ["n", 3, "h", "w"])],
                      [vi("features", TensorProto.FLOAT, ["n", 8, "h", "w"]), vi("probs", TensorProto.FLOAT, ["n", 4])],
                      [weight("SK", 8, 3, 3, 3), weight("SB", 8), weight("SW", 8, 4)])
save(helper.make_model(g, opset_imports=OPSET), "stress_dynamic.onnx")
# stress_weights: 4 MiB of weights, so that creating a session needs memory (the file read, the
# parsed tensor, the packed GEMM operand): test_stress.cpp creates it under address-space caps.
g = helper.make_graph([N("MatMul", ["x", "BW"], ["y"], name="mm")], "stress_weights",
                      [vi("x", TensorProto.FLOAT, ["n", 1024])], [vi("y", TensorProto.FLOAT, ["n", 1024])],
                      [weight("BW", 1024, 1024)])
save(helper.make_model(g, opset_imports=OPSET), "stress_weights.onnx")
# stress_conv_transpose: a ConvTranspose, which runs on OpenBLAS's sgemm on every CPU: its first
# call under an address-space cap must be an OutOfMemory error, not OpenBLAS's endless retry.
g = helper.make_graph([N("ConvTranspose", ["x", "TW"], ["y"], name="deconv", strides=[2, 2])],
                      "stress_conv_transpose", [vi("x", TensorProto.FLOAT, [1, 64, 16, 16])],
                      [vi("y", TensorProto.FLOAT, [1, 32, 33, 33])], [weight("TW", 64, 32, 3, 3)])
save(helper.make_model(g, opset_imports=OPSET), "stress_conv_transpose.onnx")

# ---- float -> integer results that C++ leaves undefined (NaN, inf, out of range) ----
# Pow with an int32 base and a float exponent (0 ^ -1.5 = inf, 2 ^ 40), found by fuzz_run, and
# Cast of float to every integer type (tests/backends/cpu/test_float_to_int.cpp).
g = helper.make_graph([helper.make_node("Pow", ["x", "e"], ["y"], name="pow")], "pow_int_float",
                      [vi("x", TensorProto.INT32, [4]), vi("e", TensorProto.FLOAT, [4])],
                      [vi("y", TensorProto.INT32, [4])])
save(helper.make_model(g, opset_imports=OPSET), "pow_int_float.onnx")
int_targets = {"i8": TensorProto.INT8, "u8": TensorProto.UINT8, "i16": TensorProto.INT16,
               "u16": TensorProto.UINT16, "i32": TensorProto.INT32, "u32": TensorProto.UINT32,
               "i64": TensorProto.INT64, "u64": TensorProto.UINT64}
g = helper.make_graph([helper.make_node("Cast", ["x"], [k], to=t, name="cast_" + k)
                       for k, t in int_targets.items()], "cast_float_to_ints",
                      [vi("x", TensorProto.FLOAT, [8])], [vi(k, t, [8]) for k, t in int_targets.items()])
save(helper.make_model(g, opset_imports=OPSET), "cast_float_to_ints.onnx")

# ---- RoiAlign on hostile rois and attributes (tests/backends/cpu/test_roi_align.cpp) ----
# fuzz_run found spatial_scale 7.6e22: the adaptive grid's float -> int64 conversion overflowed.
def roi_align_model(name, **attrs):
    g = helper.make_graph(
        [helper.make_node("RoiAlign", ["x", "rois", "bi"], ["y"], name="roi_align", **attrs)], name,
        [vi("x", TensorProto.FLOAT, [1, 2, 8, 8]), vi("rois", TensorProto.FLOAT, ["n", 4]),
         vi("bi", TensorProto.INT64, ["n"])], [vi("y", TensorProto.FLOAT, None)])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 16)]), name + ".onnx")


roi_align_model("roialign_rois", output_height=2, output_width=2)
roi_align_model("roialign_huge_scale", output_height=2, output_width=2, spatial_scale=7.5e22,
                mode="max", coordinate_transformation_mode="output_half_pixel")
roi_align_model("roialign_huge_sampling", output_height=2, output_width=2, sampling_ratio=100000)
roi_align_model("roialign_inf_scale", spatial_scale=float("inf"))

# A Conv without inputs (fuzz_model: the QDQ fusion indexed its inputs before anything checked
# their count, a segfault in `quilt plan`); validation must refuse it.
g = helper.make_graph([helper.make_node("Conv", [], ["y"], name="conv")], "conv_no_inputs", [],
                      [vi("y", TensorProto.FLOAT, None)])
save(helper.make_model(g, opset_imports=OPSET), "conv_no_inputs.onnx")
