"""Sequences, maps and optionals: the ops the core runs on the host for them
(core/ops/sequence.cpp, SequenceMap in core/control_flow.cpp) and If/Loop carrying them.

Each case's expected outputs come from onnxruntime, and onnx's reference implementation must
agree with them (the generator stops if it does not), so every case checks Quilt against both.
Values are written as the ONNX suite writes them: SequenceProto, MapProto and OptionalProto.
"""
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from casegen import Cases

ML = "ai.onnx.ml"
c = Cases("sequence")
RNG = np.random.default_rng(3)


def tensor_type(dtype=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_type_proto(dtype, shape)


def seq_type(elem):
    return helper.make_sequence_type_proto(elem)


def map_type(key, value_dtype=TensorProto.FLOAT):
    return helper.make_map_type_proto(key, tensor_type(value_dtype))


def opt_type(elem):
    return helper.make_optional_type_proto(elem)


def to_proto(value, t: onnx.TypeProto, name=""):
    """value (array, list, dict or None) as the proto of type t."""
    kind = t.WhichOneof("value")
    if kind == "tensor_type":
        arr = np.asarray(value, dtype=helper.tensor_dtype_to_np_dtype(t.tensor_type.elem_type))
        return numpy_helper.from_array(arr, name)
    if kind == "sequence_type":
        p = onnx.SequenceProto(name=name)
        et = t.sequence_type.elem_type
        ek = et.WhichOneof("value")
        p.elem_type = {"tensor_type": 1, "sequence_type": 3, "map_type": 4, "optional_type": 5}[ek]
        field = {"tensor_type": p.tensor_values, "sequence_type": p.sequence_values,
                 "map_type": p.map_values, "optional_type": p.optional_values}[ek]
        for x in value:
            field.append(to_proto(x, et))
        return p
    if kind == "map_type":
        p = onnx.MapProto(name=name)
        p.key_type = t.map_type.key_type
        if p.key_type == TensorProto.STRING:
            p.string_keys.extend(k.encode() for k in value)
        else:
            p.keys.extend(int(k) for k in value)
        vt = t.map_type.value_type
        p.values.CopyFrom(to_proto([np.asarray(v) for v in value.values()], seq_type(vt)))
        return p
    assert kind == "optional_type"
    p = onnx.OptionalProto(name=name)
    et = t.optional_type.elem_type
    ek = et.WhichOneof("value")
    p.elem_type = {"tensor_type": 1, "sequence_type": 3, "map_type": 4}[ek]
    if value is not None:
        sub = to_proto(value, et)
        {"tensor_type": p.tensor_value, "sequence_type": p.sequence_value,
         "map_type": p.map_value}[ek].CopyFrom(sub)
    return p


def same(a, b, rtol=1e-5, atol=1e-6):
    """onnxruntime's answer against the reference implementation's."""
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            same(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(
            same(x, y, rtol, atol) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "OUS":
        return a.astype(str).tolist() == b.astype(str).tolist()
    return np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol, atol=atol,
                       equal_nan=True)


def case(name, nodes, inputs, outputs, opset=18, ml=None, initializers=None, reference=True):
    """inputs: name -> (value, TypeProto); outputs: name -> TypeProto. Expected outputs from
    onnxruntime; with reference=True, onnx's ReferenceEvaluator must give the same."""
    assert name not in c.names, name
    c.names.add(name)
    graph = helper.make_graph(
        nodes, name, [helper.make_value_info(k, t) for k, (_, t) in inputs.items()],
        [helper.make_value_info(k, t) for k, t in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(ML, ml)] if ml else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 9
    feeds = {k: v for k, (v, _) in inputs.items()}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    got = ort.InferenceSession(model.SerializeToString(), so,
                               providers=["CPUExecutionProvider"]).run(list(outputs), feeds)
    if reference:
        ref = ReferenceEvaluator(model).run(list(outputs), feeds)
        for o, a, b in zip(outputs, got, ref):
            assert same(a, b), f"{name}: onnxruntime and the reference differ on {o}: {a} vs {b}"
    case_dir = c.dir / name
    data = case_dir / "test_data_set_0"
    data.mkdir(parents=True)
    onnx.save(model, case_dir / "model.onnx")
    for i, (k, (v, t)) in enumerate(inputs.items()):
        (data / f"input_{i}.pb").write_bytes(to_proto(v, t, k).SerializeToString())
    for i, (o, v) in enumerate(zip(outputs, got)):
        (data / f"output_{i}.pb").write_bytes(to_proto(v, outputs[o], o).SerializeToString())
    (case_dir / "tolerance").write_text("1e-5 1e-6\n")


def r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


F = tensor_type()
SF = seq_type(F)
SI = seq_type(tensor_type(TensorProto.INT64))
I64 = tensor_type(TensorProto.INT64, [])
n = helper.make_node

# ---- the sequence ops ----
case("construct_at", [n("SequenceConstruct", ["a", "b", "c"], ["s"]),
                      n("SequenceAt", ["s", "i"], ["y"])],
     {"a": (r(2, 3), F), "b": (r(1, 3), F), "c": (r(4), F), "i": (np.array(-2, np.int64), I64)},
     {"y": F})
case("construct_seq_out", [n("SequenceConstruct", ["a", "b"], ["s"])],
     {"a": (r(2, 3), F), "b": (r(5), F)}, {"s": SF})
case("seq_identity_roundtrip", [n("Identity", ["s"], ["t"])],
     {"s": ([r(2), r(3, 1), r(0)], SF)}, {"t": SF})
case("empty_insert_length", [n("SequenceEmpty", [], ["e"], dtype=TensorProto.INT64),
                             n("SequenceInsert", ["e", "x"], ["s1"]),
                             n("SequenceInsert", ["s1", "x2", "zero"], ["s2"]),
                             n("SequenceLength", ["s2"], ["len"])],
     {"x": (np.array([1, 2, 3], np.int64), tensor_type(TensorProto.INT64)),
      "x2": (np.array([[7]], np.int64), tensor_type(TensorProto.INT64)),
      "zero": (np.array(0, np.int32), tensor_type(TensorProto.INT32, []))},
     {"s2": SI, "len": I64})
# position = length appends (the spec, onnxruntime); onnx 1.22's reference inserts at the front.
case("insert_at_end", [n("SequenceInsert", ["s", "x", "p"], ["t"])],
     {"s": ([r(2), r(2)], SF), "x": (r(3), F), "p": (np.array(2, np.int64), I64)}, {"t": SF},
     reference=False)
case("erase_default_and_negative", [n("SequenceErase", ["s"], ["t"]),
                                    n("SequenceErase", ["t", "p"], ["u"])],
     {"s": ([r(1), r(2), r(3), r(4)], SF), "p": (np.array(-3, np.int64), I64)}, {"t": SF, "u": SF})
case("split_to_sequence_default", [n("SplitToSequence", ["x"], ["s"], axis=1)],
     {"x": (r(2, 3, 2), F)}, {"s": SF})
case("split_to_sequence_nokeepdims", [n("SplitToSequence", ["x"], ["s"], axis=-1, keepdims=0)],
     {"x": (r(2, 3), F)}, {"s": SF})
case("split_to_sequence_scalar", [n("SplitToSequence", ["x", "k"], ["s"])],
     {"x": (r(7, 2), F), "k": (np.array(3, np.int64), I64)}, {"s": SF})
case("split_to_sequence_lengths", [n("SplitToSequence", ["x", "k"], ["s"], axis=1)],
     {"x": (r(2, 6), F), "k": (np.array([1, 0, 5], np.int64), tensor_type(TensorProto.INT64))},
     {"s": SF})
case("split_concat_roundtrip", [n("SplitToSequence", ["x"], ["s"], axis=0, keepdims=0),
                                n("ConcatFromSequence", ["s"], ["y"], axis=1, new_axis=1)],
     {"x": (r(3, 4), F)}, {"y": F})
case("concat_from_sequence", [n("ConcatFromSequence", ["s"], ["y"], axis=-1)],
     {"s": ([r(2, 1), r(2, 3), r(2, 2)], SF)}, {"y": F})
case("concat_strings", [n("ConcatFromSequence", ["s"], ["y"], axis=0)],
     {"s": ([np.array(["a", "bc"], dtype=object), np.array(["d"], dtype=object)],
            seq_type(tensor_type(TensorProto.STRING)))}, {"y": tensor_type(TensorProto.STRING)})
case("sequence_then_cpu", [n("SequenceConstruct", ["a", "b"], ["s"]),
                           n("ConcatFromSequence", ["s"], ["c"], axis=0),
                           n("Relu", ["c"], ["y"])],
     {"a": (r(2, 2), F), "b": (r(1, 2), F)}, {"y": F})

# ---- SequenceMap: a subgraph per element, with a tensor given whole every time ----
body = helper.make_graph([n("Add", ["e", "t"], ["sum"]), n("Shape", ["e"], ["shape"])], "body",
                         [helper.make_tensor_value_info("e", TensorProto.FLOAT, None),
                          helper.make_tensor_value_info("t", TensorProto.FLOAT, None)],
                         [helper.make_tensor_value_info("sum", TensorProto.FLOAT, None),
                          helper.make_tensor_value_info("shape", TensorProto.INT64, None)])
case("sequence_map_with_tensor", [n("SequenceMap", ["s", "t"], ["sums", "shapes"], body=body)],
     {"s": ([r(3), r(2, 3), r(1, 3)], SF), "t": (r(3), F)}, {"sums": SF, "shapes": SI})
body2 = helper.make_graph([n("Mul", ["a", "b"], ["m"])], "body2",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("m", TensorProto.FLOAT, None)])
case("sequence_map_two_sequences", [n("SequenceMap", ["s", "u"], ["m"], body=body2)],
     {"s": ([r(2), r(3)], SF), "u": ([r(2), r(1)], SF)}, {"m": SF})

# ---- optionals ----
OF = opt_type(F)
case("optional_of_tensor", [n("Optional", ["x"], ["o"]),
                            n("OptionalHasElement", ["o"], ["has"]),
                            n("OptionalGetElement", ["o"], ["y"])],
     {"x": (r(2, 2), F)}, {"has": tensor_type(TensorProto.BOOL, []), "y": F},
     reference=False)  # onnx 1.22's reference returns OptionalGetElement's tensor in a list
case("optional_input_some", [n("OptionalHasElement", ["o"], ["has"]), n("Identity", ["o"], ["p"])],
     {"o": (r(3), OF)}, {"has": tensor_type(TensorProto.BOOL, []), "p": OF})
case("optional_input_none", [n("OptionalHasElement", ["o"], ["has"]), n("Identity", ["o"], ["p"])],
     {"o": (None, OF)}, {"has": tensor_type(TensorProto.BOOL, []), "p": OF},
     reference=False)  # onnx 1.22's reference Identity refuses an empty optional
case("optional_of_sequence", [n("Optional", ["s"], ["o"]), n("OptionalGetElement", ["o"], ["t"]),
                              n("SequenceLength", ["t"], ["len"])],
     {"s": ([r(1), r(2)], SF)}, {"len": I64}, reference=False)  # the reference's list wrapping
# onnx 1.22's reference says an Optional made without an input has an element.
case("optional_empty_from_type", [n("Optional", [], ["o"], type=F),
                                  n("OptionalHasElement", ["o"], ["has"])],
     {"x": (r(1), F)}, {"has": tensor_type(TensorProto.BOOL, [])}, reference=False)
case("optional_has_element_absent_input", [n("OptionalHasElement", [""], ["has"])],
     {"x": (r(1), F)}, {"has": tensor_type(TensorProto.BOOL, [])})

# ---- If and Loop carrying sequences ----
then_g = helper.make_graph([n("SequenceConstruct", ["a"], ["s"])], "then", [],
                           [helper.make_value_info("s", SF)])
else_g = helper.make_graph([n("SequenceConstruct", ["a", "a"], ["s"])], "else", [],
                           [helper.make_value_info("s", SF)])
for flag in (True, False):
    case(f"if_sequence_{str(flag).lower()}",
         [n("If", ["cond"], ["s"], then_branch=then_g, else_branch=else_g)],
         {"cond": (np.array(flag), tensor_type(TensorProto.BOOL, [])), "a": (r(2), F)}, {"s": SF})
loop_body = helper.make_graph(
    [n("Cast", ["i"], ["f"], to=TensorProto.FLOAT), n("Mul", ["f", "x"], ["fx"]),
     n("SequenceInsert", ["acc", "fx"], ["acc_out"]), n("Identity", ["c"], ["c_out"])], "loop_body",
    [helper.make_tensor_value_info("i", TensorProto.INT64, []),
     helper.make_tensor_value_info("c", TensorProto.BOOL, []), helper.make_value_info("acc", SF)],
    [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_value_info("acc_out", SF)])
case("loop_builds_sequence", [n("SequenceEmpty", [], ["e"]),
                              n("Loop", ["trips", "", "e"], ["s"], body=loop_body),
                              n("ConcatFromSequence", ["s"], ["y"], axis=0)],
     {"trips": (np.array(4, np.int64), I64), "x": (r(2), F)}, {"s": SF, "y": F},
     reference=False)  # onnx 1.22's reference loses a Loop's sequence state

# ---- maps: ZipMap, CastMap, DictVectorizer ----
MSF = map_type(TensorProto.STRING)
MIF = map_type(TensorProto.INT64)
# ZipMap and CastMap: onnxruntime only (onnx's reference implementation has neither).
case("zipmap_strings", [n("ZipMap", ["x"], ["z"], domain=ML, classlabels_strings=["a", "b", "c"])],
     {"x": (r(4, 3), tensor_type(TensorProto.FLOAT, [4, 3]))}, {"z": seq_type(MSF)}, ml=1, reference=False)
case("zipmap_int64", [n("ZipMap", ["x"], ["z"], domain=ML, classlabels_int64s=[10, 20])],
     {"x": (r(3, 2), tensor_type(TensorProto.FLOAT, [3, 2]))}, {"z": seq_type(MIF)}, ml=1, reference=False)
case("zipmap_rank1", [n("ZipMap", ["x"], ["z"], domain=ML, classlabels_int64s=[1, 2, 3])],
     {"x": (r(3), tensor_type(TensorProto.FLOAT, [3]))}, {"z": seq_type(MIF)}, ml=1, reference=False)
int_map = {3: np.float32(0.5), 1: np.float32(-2.0), 0: np.float32(7.25)}
case("cast_map_dense_float", [n("CastMap", ["m"], ["y"], domain=ML, cast_to="TO_FLOAT")],
     {"m": (int_map, MIF)}, {"y": tensor_type(TensorProto.FLOAT)}, ml=1, reference=False)
case("cast_map_sparse_int64", [n("CastMap", ["m"], ["y"], domain=ML, cast_to="TO_INT64",
                                 map_form="SPARSE", max_map=6)],
     {"m": (int_map, MIF)}, {"y": tensor_type(TensorProto.INT64)}, ml=1, reference=False)
case("cast_map_to_string", [n("CastMap", ["m"], ["y"], domain=ML, cast_to="TO_STRING")],
     {"m": (int_map, MIF)}, {"y": tensor_type(TensorProto.STRING)}, ml=1, reference=False)
# DictVectorizer: onnxruntime's [1, V] (onnx's reference returns [V]).
case("dict_vectorizer_strings", [n("DictVectorizer", ["m"], ["y"], domain=ML,
                                   string_vocabulary=["b", "a", "z", "c"])],
     {"m": ({"a": np.float32(1.5), "c": np.float32(-1), "q": np.float32(9)}, MSF)},
     {"y": tensor_type(TensorProto.FLOAT)}, ml=1, reference=False)
case("dict_vectorizer_int64", [n("DictVectorizer", ["m"], ["y"], domain=ML,
                                 int64_vocabulary=[4, 2, 9])],
     {"m": ({2: np.float32(0.25), 9: np.float32(3)}, MIF)},
     {"y": tensor_type(TensorProto.FLOAT)}, ml=1, reference=False)
