"""String tensors through Quilt's Python APIs and the CLI: numpy str_, bytes_ and object arrays in,
object arrays of str out (as onnxruntime returns them), compared with onnxruntime on the same
models; a wrong type is refused naming the input; `quilt run` reads and writes strings as .npy
(numpy str_). The per-op cases against onnxruntime are tests/cases/gen_strings.py."""
import numpy as np
import onnxruntime as ort
import pytest
from conftest import model_bytes, run_cli, vi
from onnx import TensorProto, helper

import quilt
import quilt.onnxruntime as qort

ML = "ai.onnx.ml"


def encoder_model():
    """words (string [N]) -> ids = LabelEncoder(words) * 10 (int64, on the CPU backend), and
    names = CategoryMapper(ids / 10) back to strings."""
    ten = helper.make_tensor("ten", TensorProto.INT64, [], [10])
    nodes = [helper.make_node("LabelEncoder", ["words"], ["raw"], domain=ML, keys_strings=["cat", "dog"],
                              values_int64s=[1, 2], default_int64=0),
             helper.make_node("Mul", ["raw", "ten"], ["ids"]),
             helper.make_node("Div", ["ids", "ten"], ["back"]),
             helper.make_node("CategoryMapper", ["back"], ["names"], domain=ML, cats_strings=["cat", "dog"],
                              cats_int64s=[1, 2], default_string="other")]
    return model_bytes(nodes, [vi("words", TensorProto.STRING, ["n"])],
                       [vi("ids", TensorProto.INT64, ["n"]), vi("names", TensorProto.STRING, ["n"])],
                       [ten], domains=[(ML, 2)])


@pytest.mark.parametrize("words", [
    np.array(["dog", "cat", "émeu", ""]),                     # numpy str_ ('<U4')
    np.array([b"dog", b"cat", b"\xc3\xa9meu", b""]),          # numpy bytes_ ('|S5')
    np.array(["dog", "cat", "émeu", ""], dtype=object),      # what onnxruntime returns
    ["dog", "cat", "émeu", ""],                                # a list, for a string input
])
def test_string_inputs_and_outputs_match_onnxruntime(words):
    model = encoder_model()
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(
        None, {"words": np.array(["dog", "cat", "émeu", ""], dtype=object)})
    got = qort.InferenceSession(model).run(None, {"words": words})
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].dtype == object and want[1].dtype == object
    assert got[1].tolist() == want[1].tolist() == ["dog", "cat", "other", "other"]
    ref = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    assert [(a.name, a.type) for a in qort.InferenceSession(model).get_outputs()] == \
        [(a.name, a.type) for a in ref.get_outputs()] == [("ids", "tensor(int64)"), ("names", "tensor(string)")]
    s = quilt.Session(model)
    assert [i.dtype for i in s.inputs] == ["string"]
    out = s.run({"words": words})
    assert out["names"].tolist() == ["dog", "cat", "other", "other"]


def test_string_shapes_and_unicode_round_trip():
    model = model_bytes([helper.make_node("Identity", ["s"], ["t"])], [vi("s", TensorProto.STRING, None)],
                        [vi("t", TensorProto.STRING, None)])
    s = qort.InferenceSession(model)
    for value in [np.array("scalar"), np.array([["a", "bb"], ["ccc", "😀"]]), np.zeros((0, 3), dtype=str)]:
        got = s.run(None, {"s": value})[0]
        assert got.dtype == object and got.shape == value.shape
        assert got.tolist() == value.astype(object).tolist()


def test_a_wrong_type_is_refused_naming_the_input():
    s = qort.InferenceSession(encoder_model())
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="input 'words' has dtype float32, expected string"):
        s.run(None, {"words": np.ones(3, np.float32)})
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="input 'words' is an array of strings, but element 1 is .*int.*expected str or bytes"):
        s.run(None, {"words": np.array(["a", 3], dtype=object)})


def test_cli_reads_and_writes_string_npy(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(encoder_model())
    np.save(tmp_path / "words.npy", np.array(["dog", "émeu", "cat"]))
    r = run_cli("run", path, "--input", f"words={tmp_path / 'words.npy'}", "--output-dir", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    assert 'names: string [3]' in r.stdout and '["dog", "other", "cat"]' in r.stdout
    names = np.load(tmp_path / "out" / "names.npy")
    assert names.dtype.kind == "U" and names.tolist() == ["dog", "other", "cat"]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "ids.npy"), [20, 0, 10])
    # Generated string inputs (no --input) run too.
    r = run_cli("run", path)
    assert r.returncode == 0, r.stderr
    # Object arrays are pickles, which Quilt does not read: the error says what to do.
    np.save(tmp_path / "objects.npy", np.array(["a"], dtype=object), allow_pickle=True)
    r = run_cli("run", path, "--input", f"words={tmp_path / 'objects.npy'}")
    assert r.returncode != 0 and "object arrays are pickled Python objects" in r.stderr
    assert "np.array(values, dtype=str)" in r.stderr


def test_plan_says_why_string_nodes_run_on_the_host():
    plan = quilt.Session(encoder_model()).plan()
    by_op = {n["op_type"]: n for n in plan["nodes"]}
    assert by_op["ai.onnx.ml.LabelEncoder"]["backend"] == "host"
    assert "string tensors do not cross the backend ABI" in by_op["ai.onnx.ml.LabelEncoder"]["reason"]
    assert by_op["Mul"]["backend"] == "cpu"


def tokenizer_model(**attrs):
    node = helper.make_node("Tokenizer", ["text"], ["tokens"], domain="com.microsoft", name="tok", **attrs)
    return model_bytes([node], [vi("text", TensorProto.STRING, ["n"])], [vi("tokens", TensorProto.STRING, None)],
                       domains=[("com.microsoft", 1)])


@pytest.mark.parametrize("attrs, words", [
    (dict(pad_value="#", mark=0, mincharnum=1), "one of the attributes 'tokenexp' and 'separators' is required"),
    (dict(pad_value="#", mark=0, mincharnum=0, tokenexp="[a-z]+"), "'mincharnum' is 0, expected >= 1"),
    (dict(mark=0, mincharnum=1, tokenexp="[a-z]+"), "attribute 'pad_value' is required"),
    (dict(pad_value="#", tokenexp="[a-z", mincharnum=1), "'[a-z' is not a valid regular expression"),
    (dict(pad_value="#", tokenexp="[a-z]+", separators=[" "]), "'tokenexp' and 'separators' are both set"),
    (dict(pad_value="#", separators=["", " "]), "an empty separator among others"),
])
def test_malformed_tokenizers_are_load_errors_naming_the_node(attrs, words):
    with pytest.raises(quilt.InvalidModel) as e:
        quilt.Session(tokenizer_model(**attrs))
    assert 'Tokenizer node "tok"' in str(e.value) and words in str(e.value), str(e.value)


def test_tokenizer_matches_onnxruntime_on_unicode_and_3d_output():
    model = tokenizer_model(pad_value="", mark=1, mincharnum=2, separators=[" ", ";"])
    text = np.array(["été à Paris;ok", "a b", "ü"], dtype=object)
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"text": text})[0]
    got = qort.InferenceSession(model).run(None, {"text": text})[0]
    assert got.tolist() == want.tolist()


def test_string_reshape_to_a_wrong_count_is_a_run_error():
    nodes = [helper.make_node("Reshape", ["text", "shape"], ["out"], name="reshape")]
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 2])
    model = model_bytes(nodes, [vi("text", TensorProto.STRING, ["n"])], [vi("out", TensorProto.STRING, None)],
                        [shape])
    session = quilt.Session(model)
    assert session.run({"text": np.array(list("abcd"), dtype=object)})["out"].shape == (2, 2)
    with pytest.raises(quilt.InvalidArgument) as e:
        session.run({"text": np.array(list("abc"), dtype=object)})
    assert 'Reshape node "reshape"' in str(e.value) and "cannot reshape [3] (3 strings) to [2, 2]" in str(e.value)
