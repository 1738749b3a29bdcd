"""Sequences, maps and optionals through Quilt's Python APIs and the CLI: lists, dicts and None
in and out as onnxruntime takes and returns them, the declared types in ONNX's notation, the
errors for a value of the wrong kind, and `quilt run --output-dir` writing them (a folder of
.npy for a sequence of tensors, .json for maps).
The per-op cases against onnxruntime and onnx's reference are tests/cases/gen_sequence.py."""
import json

import numpy as np
import onnxruntime as ort
import pytest
from conftest import model_bytes, run_cli, vi
from onnx import TensorProto, helper

import quilt
import quilt.onnxruntime as qort

F = helper.make_tensor_type_proto(TensorProto.FLOAT, None)
SEQ = helper.make_sequence_type_proto(F)


def seq_model():
    return model_bytes([helper.make_node("SequenceInsert", ["s", "x"], ["t"]),
                        helper.make_node("SequenceLength", ["t"], ["n"])],
                       [helper.make_value_info("s", SEQ), vi("x")],
                       [helper.make_value_info("t", SEQ), vi("n", TensorProto.INT64, [])])


def zipmap_model():
    zip_type = helper.make_sequence_type_proto(helper.make_map_type_proto(TensorProto.STRING, F))
    return model_bytes([helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml",
                                         classlabels_strings=["cat", "dog"])],
                       [vi("x", TensorProto.FLOAT, ["N", 2])], [helper.make_value_info("z", zip_type)],
                       domains=[("ai.onnx.ml", 1)])


def optional_model():
    return model_bytes([helper.make_node("OptionalHasElement", ["o"], ["has"])],
                       [helper.make_value_info("o", helper.make_optional_type_proto(F))],
                       [vi("has", TensorProto.BOOL, [])], opset=18)


def test_lists_in_and_out_as_onnxruntime():
    feed = {"s": [np.ones(2, np.float32), np.zeros((1, 3), np.float32)], "x": np.arange(3, dtype=np.float32)}
    want = ort.InferenceSession(seq_model(), providers=["CPUExecutionProvider"]).run(None, feed)
    session = qort.InferenceSession(seq_model())
    assert [i.type for i in session.get_inputs()] == ["seq(tensor(float))", "tensor(float)"]
    assert session.get_outputs()[0].type == "seq(tensor(float))"
    got = session.run(None, feed)
    assert isinstance(got[0], list) and len(got[0]) == 3
    for g, w in zip(got[0], want[0]):
        np.testing.assert_array_equal(g, w)
    assert got[1] == want[1] == 3
    # An empty list is an empty sequence.
    assert quilt.Session(seq_model()).run({"s": [], "x": np.ones(1, np.float32)})["n"] == 1


def test_zipmap_gives_a_list_of_dicts_and_optionals_none():
    x = np.array([[0.25, 0.75], [1, 0]], np.float32)
    got = qort.InferenceSession(zipmap_model()).run(None, {"x": x})[0]
    want = ort.InferenceSession(zipmap_model(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert got == want == [{"cat": 0.25, "dog": 0.75}, {"cat": 1.0, "dog": 0.0}]
    assert all(type(k) is str and type(v) is float for row in got for k, v in row.items())
    # Maps that do not share their keys (a caller's list of dicts through Identity): each keeps
    # its own, int keys and float64 values too.
    maps = helper.make_sequence_type_proto(helper.make_map_type_proto(
        TensorProto.INT64, helper.make_tensor_type_proto(TensorProto.DOUBLE, None)))
    identity = model_bytes([helper.make_node("Identity", ["m"], ["y"])], [helper.make_value_info("m", maps)],
                           [helper.make_value_info("y", maps)])
    feed = [{1: 0.5, 2: 0.25}, {1: 1.5, 2: 2.5}, {7: 1.0}, {3: -1.0, 4: 2.0}]
    out = quilt.Session(identity).run({"m": feed})["y"]
    assert out == feed and all(type(k) is int and type(v) is float for row in out for k, v in row.items())
    s = quilt.Session(optional_model())
    assert s.inputs[0].type == "optional(tensor(float))"
    assert bool(s.run({"o": None})["has"]) is False
    assert bool(s.run({"o": np.ones(1, np.float32)})["has"]) is True


def test_a_value_of_the_wrong_kind_names_the_input_and_its_type():
    s = quilt.Session(seq_model())
    with pytest.raises(quilt.InvalidArgument, match=r"input 's' is a numpy.ndarray, expected seq\(tensor\(float\)\) \(a list\)"):
        s.run({"s": np.ones(2, np.float32), "x": np.ones(1, np.float32)})
    with pytest.raises(quilt.InvalidArgument, match=r"input 's' is seq\(tensor\(int64\)\), expected seq\(tensor\(float\)\)"):
        s.run({"s": [np.ones(2, np.int64)], "x": np.ones(1, np.float32)})
    with pytest.raises(quilt.InvalidArgument, match=r"input 'x' is a list, expected tensor\(float\)|input 'x'"):
        s.run({"s": [], "x": {"a": 1}})
    # Types that cannot meet are load errors naming the node.
    with pytest.raises(quilt.InvalidModel, match=r"\[SequenceInsert node #0\] the tensor is int64, the sequence holds float32"):
        quilt.Session(model_bytes([helper.make_node("SequenceInsert", ["s", "x"], ["t"])],
                                  [helper.make_value_info("s", SEQ), vi("x", TensorProto.INT64)],
                                  [helper.make_value_info("t", SEQ)]))


def test_a_tensor_op_given_a_sequence_is_refused_at_load():
    bad = model_bytes([helper.make_node("Relu", ["s"], ["y"], name="r")], [helper.make_value_info("s", SEQ)],
                      [vi("y")])
    with pytest.raises(quilt.InvalidModel, match=r"Relu node \"r\"\] input 0 \('s'\) is seq\(tensor\(float\)\), but Relu takes tensors"):
        quilt.Session(bad)


def test_cli_writes_sequences_as_folders_and_maps_as_json(tmp_path):
    model = tmp_path / "seq.onnx"
    model.write_bytes(seq_model())
    seq_dir = tmp_path / "in_s"
    seq_dir.mkdir()
    np.save(seq_dir / "0.npy", np.array([1, 2], np.float32))
    np.save(seq_dir / "1.npy", np.array([[3]], np.float32))
    out = tmp_path / "out"
    r = run_cli("run", model, "--input", f"s={seq_dir}", "--output-dir", out)
    assert r.returncode == 0, r.stderr
    assert "t: seq(tensor(float))  3 values" in r.stdout
    np.testing.assert_array_equal(np.load(out / "t" / "1.npy"), [[3]])
    assert sorted(p.name for p in (out / "t").iterdir()) == ["0.npy", "1.npy", "2.npy"]
    assert np.load(out / "n.npy") == 3
    # A sequence input given as a .npy file is a clear usage error.
    r = run_cli("run", model, "--input", f"s={seq_dir / '0.npy'}")
    assert r.returncode == 2 and "input 's' is seq(tensor(float)): give a sequence as a directory" in r.stderr
    zmodel = tmp_path / "zip.onnx"
    zmodel.write_bytes(zipmap_model())
    np.save(tmp_path / "x.npy", np.array([[0.25, 0.75]], np.float32))
    r = run_cli("run", zmodel, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", out)
    assert r.returncode == 0, r.stderr
    assert json.loads((out / "z.json").read_text()) == [{"cat": 0.25, "dog": 0.75}]


@pytest.mark.parametrize("nodes,inputs,outputs,feed,error,message", [
    ([helper.make_node("SequenceAt", ["s", "i"], ["y"], name="at")],
     [helper.make_value_info("s", SEQ), vi("i", TensorProto.INT64, [])], [vi("y")],
     {"s": [np.ones(1, np.float32)], "i": np.array(1, np.int64)}, quilt.InvalidArgument,
     r'\[SequenceAt node "at"\] position 1 is out of range for a sequence of 1 tensors \(valid: -1 to 0\)'),
    ([helper.make_node("SplitToSequence", ["x", "k"], ["s"], name="split")],
     [vi("x", TensorProto.FLOAT, [4]), vi("k", TensorProto.INT64, [2])], [helper.make_value_info("s", SEQ)],
     {"x": np.ones(4, np.float32), "k": np.array([1, 2], np.int64)}, quilt.InvalidArgument,
     r'\[SplitToSequence node "split"\] split lengths sum to 3 but axis 0 has 4'),
    ([helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=0)],
     [helper.make_value_info("s", SEQ)], [vi("y")], {"s": []}, quilt.InvalidArgument,
     r'\[ConcatFromSequence node "cat"\] cannot concatenate an empty sequence'),
    ([helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=0)],
     [helper.make_value_info("s", SEQ)], [vi("y")],
     {"s": [np.ones((1, 2), np.float32), np.ones((1, 3), np.float32)]}, quilt.InvalidArgument,
     r"tensor 1 has shape \[1, 3\], which differs from tensor 0's off axis 0"),
    # A tensor of lower rank with new_axis at the last axis: refused before the axis is inserted
    # (inserting it first wrote past the shape's end; found by fuzz_run).
    ([helper.make_node("ConcatFromSequence", ["s"], ["y"], name="cat", axis=-1, new_axis=1)],
     [helper.make_value_info("s", SEQ)], [vi("y")],
     {"s": [np.ones((2, 3, 4), np.float32), np.ones((3, 4), np.float32)]}, quilt.InvalidArgument,
     r'\[ConcatFromSequence node "cat"\] tensor 1 is float32 \[3, 4\], tensor 0 float32 \[2, 3, 4\]'),
    ([helper.make_node("OptionalGetElement", ["o"], ["y"], name="get")],
     [helper.make_value_info("o", helper.make_optional_type_proto(F))], [vi("y")], {"o": None},
     quilt.InvalidArgument, r"\[OptionalGetElement node \"get\"\] the optional input 'o' holds no element"),
])
def test_bad_values_are_errors_naming_the_node(nodes, inputs, outputs, feed, error, message):
    s = quilt.Session(model_bytes(nodes, inputs, outputs, opset=18))
    with pytest.raises(error, match=message):
        s.run(feed)


def test_malformed_map_attributes_are_load_errors():
    ml = [("ai.onnx.ml", 1)]
    zip_out = [helper.make_value_info("z", helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.INT64, F)))]
    with pytest.raises(quilt.InvalidModel, match=r'\[ZipMap node "z"\] X has 3 columns but there are 2 class labels'):
        quilt.Session(model_bytes([helper.make_node("ZipMap", ["x"], ["z"], name="z", domain="ai.onnx.ml",
                                                    classlabels_int64s=[1, 2])],
                                  [vi("x", TensorProto.FLOAT, [1, 3])], zip_out, domains=ml))
    with pytest.raises(quilt.InvalidModel, match="exactly one of 'classlabels_strings' and 'classlabels_int64s'"):
        quilt.Session(model_bytes([helper.make_node("ZipMap", ["x"], ["z"], name="z", domain="ai.onnx.ml")],
                                  [vi("x", TensorProto.FLOAT, [1, 3])], zip_out, domains=ml))
    int_map = helper.make_value_info("m", helper.make_map_type_proto(TensorProto.INT64, F))
    with pytest.raises(quilt.InvalidModel, match="attribute 'cast_to' is 'TO_BYTES'"):
        quilt.Session(model_bytes([helper.make_node("CastMap", ["m"], ["y"], domain="ai.onnx.ml", cast_to="TO_BYTES")],
                                  [int_map], [vi("y")], domains=ml))
    sparse = quilt.Session(model_bytes([helper.make_node("CastMap", ["m"], ["y"], name="cm", domain="ai.onnx.ml",
                                                         map_form="SPARSE", max_map=2)],
                                       [int_map], [vi("y")], domains=ml))
    with pytest.raises(quilt.InvalidArgument, match=r"map key 5 is outside \[0, max_map = 2\)"):
        sparse.run({"m": {5: 1.0}})
    with pytest.raises(quilt.InvalidModel, match="the map's keys are int64 but the vocabulary is string"):
        quilt.Session(model_bytes([helper.make_node("DictVectorizer", ["m"], ["y"], domain="ai.onnx.ml",
                                                    string_vocabulary=["a"])], [int_map], [vi("y")], domains=ml))
