"""Errors through quilt.onnxruntime: the class onnxruntime raises for the same mistake, a message
that names what is wrong, and a session that still works afterwards. Quilt's own API raises
quilt.Error subclasses for the same cases."""
import numpy as np
import onnxruntime as ort
import pytest
from conftest import add_bytes, mlp_bytes, model_bytes, vi
from onnx import TensorProto, helper

import quilt
import quilt.onnxruntime as qort

X = np.ones((2, 8), np.float32)

# (what, feed, output names, words Quilt's message must hold)
RUN_MISTAKES = [
    ("unknown input name", {"x": X, "q": X}, None, ["unknown input 'q'", "inputs are: x"]),
    ("wrong dtype", {"x": X.astype(np.float64)}, None, ["input 'x'", "float64", "expected float32"]),
    ("wrong rank", {"x": X.reshape(16)}, None, ["input 'x'", "rank 1", "expected rank 2"]),
    ("wrong dim", {"x": np.ones((2, 5), np.float32)}, None, ["input 'x'", "dim 1 is 5, expected 8"]),
    ("unknown output", {"x": X}, ["y", "nope"], ["unknown output 'nope'", "outputs are: y, z"]),
]


@pytest.mark.parametrize("what,feed,names,words", RUN_MISTAKES, ids=[m[0] for m in RUN_MISTAKES])
def test_run_mistakes_raise_onnxruntimes_class_and_say_what_is_wrong(what, feed, names, words):
    o, q = ort.InferenceSession(mlp_bytes()), qort.InferenceSession(mlp_bytes())
    with pytest.raises(Exception) as want:
        o.run(names, feed)
    with pytest.raises(Exception) as got:
        q.run(names, feed)
    assert type(got.value).__name__ == type(want.value).__name__ == "InvalidArgument"
    assert type(got.value).__module__ == "quilt." + type(want.value).__module__
    message = str(got.value)
    assert message.startswith("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : ")
    for w in words:
        assert w in message, message
    # The session still works.
    assert q.run(["z"], {"x": X})[0].shape == (2,)


def test_missing_input_is_a_value_error_with_onnxruntimes_message():
    model = model_bytes([helper.make_node("Add", ["a", "b"], ["c"])], [vi("a", shape=[2]), vi("b", shape=[2])],
                        [vi("c", shape=[2])])
    o, q = ort.InferenceSession(model), qort.InferenceSession(model)
    a = np.ones(2, np.float32)
    with pytest.raises(ValueError) as want:
        o.run(None, {"a": a})
    with pytest.raises(ValueError) as got:
        q.run(None, {"a": a})
    assert str(got.value) == str(want.value) == "Required inputs (['b']) are missing from input feed (['a'])."


def test_inputs_numpy_cannot_hold_as_a_tensor_are_refused_with_the_input_named():
    q = qort.InferenceSession(add_bytes())
    strings = np.array(["a", "b", "c", "d"])
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument) as got:
        q.run(None, {"a": strings, "b": np.ones(4, np.float32)})
    assert "input 'a' has dtype string, expected float32" in str(got.value)
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="input 'a' has numpy dtype complex64"):
        q.run(None, {"a": np.ones(4, np.complex64), "b": np.ones(4, np.float32)})
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="input 'a' has numpy dtype >f4.*byte order"):
        q.run(None, {"a": np.ones(4, ">f4"), "b": np.ones(4, np.float32)})
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="input 'b' cannot be read as an array"):
        q.run(None, {"a": np.ones(4, np.float32), "b": [[1.0], [1.0, 2.0]]})


def test_model_files_that_cannot_be_read_or_parsed(tmp_path):
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(mlp_bytes()[:40])
    text = tmp_path / "text.onnx"
    text.write_text("this is not an ONNX model\n")
    cases = [(str(tmp_path / "missing.onnx"), "NoSuchFile", "missing.onnx"),
             (str(truncated), "InvalidProtobuf", "not a valid ONNX protobuf"),
             (str(text), "InvalidProtobuf", "not a valid ONNX protobuf"),
             (b"garbage", "InvalidProtobuf", "not a valid ONNX protobuf")]
    for source, cls, words in cases:
        with pytest.raises(Exception) as want:
            ort.InferenceSession(source)
        with pytest.raises(Exception) as got:
            qort.InferenceSession(source)
        assert type(got.value).__name__ == type(want.value).__name__ == cls, source
        assert words in str(got.value)
        with pytest.raises(quilt.Error) as own:
            quilt.Session(source)
        assert own.value.code == ("Io" if cls == "NoSuchFile" else "InvalidModel")


def test_invalid_graphs_raise_what_onnxruntime_raises_for_each():
    # onnxruntime raises InvalidArgument, Fail or InvalidGraph depending on the check; Quilt's
    # InvalidModel is each of them.
    relu = helper.make_node
    models = {
        "'nowhere'": model_bytes([relu("Relu", ["nowhere"], ["y"], name="r")], [vi("x", shape=[2])], [vi("y", shape=[2])]),
        "cycle": model_bytes([relu("Relu", ["b"], ["a"], name="r1"), relu("Relu", ["a"], ["b"], name="r2"),
                              relu("Relu", ["x"], ["y"], name="r3")], [vi("x", shape=[2])], [vi("y", shape=[2])]),
        "'zz' is never produced": model_bytes([relu("Relu", ["x"], ["y"], name="r")], [vi("x", shape=[2])],
                                              [vi("y", shape=[2]), vi("zz", shape=[2])]),
    }
    state = qort.capi.onnxruntime_pybind11_state
    for words, model in models.items():
        with pytest.raises(Exception) as want:
            ort.InferenceSession(model)
        with pytest.raises(state.InvalidModel) as got:
            qort.InferenceSession(model)
        ort_class = getattr(state, type(want.value).__name__)
        assert isinstance(got.value, ort_class), (words, type(want.value))
        assert words in str(got.value) and str(got.value).startswith("[ONNXRuntimeError] : 10 : INVALID_GRAPH : ")


def test_unsupported_op_is_not_implemented_as_in_onnxruntime():
    # An op each runtime lacks: onnxruntime has no ImageDecoder kernel, Quilt no GlobalLpPool.
    decoder = model_bytes([helper.make_node("ImageDecoder", ["img"], ["pixels"])], [vi("img", TensorProto.UINT8, [None])],
                          [vi("pixels", TensorProto.UINT8, None)], opset=20, ir_version=9)
    with pytest.raises(Exception) as want:
        ort.InferenceSession(decoder)
    encoder = model_bytes([helper.make_node("GlobalLpPool", ["x"], ["y"])],
                          [vi("x", TensorProto.FLOAT, [1, 3, 2, 2])], [vi("y", TensorProto.FLOAT, None)])
    with pytest.raises(Exception) as got:
        qort.InferenceSession(encoder)
    assert type(got.value).__name__ == type(want.value).__name__ == "NotImplemented"
    assert "[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : " in str(got.value)
    assert "GlobalLpPool" in str(got.value)
    with pytest.raises(quilt.NotImplemented) as own:
        quilt.Session(encoder)
    assert isinstance(own.value, NotImplementedError) and own.value.code == "NotImplemented"


def test_unknown_backend_is_invalid_argument_naming_what_is_available():
    with pytest.raises(quilt.InvalidArgument) as got:
        quilt.Session(add_bytes(), backends=["warp-drive"])
    assert "unknown backend 'warp-drive'" in str(got.value) and "available: cpu" in str(got.value)
    with pytest.raises(quilt.InvalidArgument, match="log_level 'loud'"):
        quilt.Session(add_bytes(), log_level="loud")
    with pytest.raises(quilt.InvalidArgument, match="threads is -1"):
        quilt.Session(add_bytes(), threads=-1)


def test_quilt_errors_are_python_exception_families():
    assert issubclass(quilt.InvalidArgument, quilt.Error) and issubclass(quilt.InvalidArgument, ValueError)
    assert issubclass(quilt.Io, OSError) and issubclass(quilt.OutOfMemory, MemoryError)
    assert issubclass(quilt.Error, RuntimeError)
    s = quilt.Session(add_bytes())
    with pytest.raises(quilt.InvalidArgument) as got:
        s.run({"a": np.ones(4, np.float32)})
    assert got.value.code == "InvalidArgument" and "missing input 'b' (float32 [4])" in str(got.value)


def test_a_onesided_forward_dft_of_complex_input_is_refused_like_onnxruntime():
    """The spec: onesided=1 with inverse=0 (RFFT) takes real input only (last dim 1)."""
    model = model_bytes([helper.make_node("DFT", ["x"], ["y"], name="rfft", axis=1, onesided=1)],
                        [vi("x", shape=[2, 8, 2])], [vi("y", shape=None)])
    with pytest.raises(Exception) as want:
        ort.InferenceSession(model)
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.Fail) as got:
        qort.InferenceSession(model)
    assert type(want.value).__name__ == "Fail" and "one-sided DFT requires real input" in str(want.value)
    message = str(got.value)
    assert "DFT node \"rfft\"" in message and "needs real input (last dim 1), got complex (last dim 2)" in message
    # Real input is fine on both.
    real = model_bytes([helper.make_node("DFT", ["x"], ["y"], name="rfft", axis=1, onesided=1)],
                       [vi("x", shape=[2, 8, 1])], [vi("y", shape=None)])
    x = np.random.default_rng(0).standard_normal((2, 8, 1)).astype(np.float32)
    np.testing.assert_allclose(qort.InferenceSession(real).run(None, {"x": x})[0],
                               ort.InferenceSession(real).run(None, {"x": x})[0], rtol=1e-4, atol=1e-5)


def test_pad_errors_found_by_the_kernel_name_the_axis_and_the_session_keeps_working():
    """Reflect, edge and wrap padding of an axis that is empty has nothing to copy. With the pads a
    constant, the CPU kernel makes its plan once for a static shape; here the dim is symbolic, so
    each run makes its own and reports this from there, and the next run is fine."""
    pads = helper.make_tensor("pads", TensorProto.INT64, [4], [0, 1, 0, 1])
    for mode in ("reflect", "edge", "wrap"):
        model = model_bytes([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode=mode)],
                            [vi("x", shape=[2, "n"])], [vi("y", shape=None)], [pads])
        s = qort.InferenceSession(model)
        with pytest.raises(Exception) as got:
            s.run(None, {"x": np.ones((2, 0), np.float32)})
        message = str(got.value)
        assert "Pad node \"pad\"" in message and f"cannot pad axis 1 of size 0 in mode '{mode}'" in message
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(s.run(None, {"x": x})[0],
                                      ort.InferenceSession(model).run(None, {"x": x})[0])


def test_max_unpool_indices_of_another_shape_than_x_are_refused_at_load_or_run():
    """MaxUnpool takes one index per element of X. With both shapes known the load refuses other
    indices; with dims known only at run time the CPU kernel checks (fuzz_run: an I smaller than
    X was read past its end), and the session then runs matching inputs."""
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])
    known = model_bytes([node], [vi("x", shape=[1, 1, 2, 2]), vi("i", TensorProto.INT64, [1, 1, 1, 2])],
                        [vi("y", shape=None)])
    with pytest.raises(Exception) as got:
        qort.InferenceSession(known)
    assert "indices I have shape [1, 1, 1, 2], expected the shape of X [1, 1, 2, 2]" in str(got.value)
    symbolic = model_bytes([node], [vi("x", shape=["n", 1, 2, 2]), vi("i", TensorProto.INT64, [1, 1, "h", 2])],
                           [vi("y", shape=None)])
    s = qort.InferenceSession(symbolic)
    x = np.arange(8, dtype=np.float32).reshape(2, 1, 2, 2)
    with pytest.raises(Exception) as got:
        s.run(None, {"x": x, "i": np.zeros((1, 1, 2, 2), np.int64)})
    assert ("MaxUnpool node \"unpool\"" in str(got.value) and
            "indices I have shape [1, 1, 2, 2], expected the shape of X [2, 1, 2, 2]" in str(got.value))
    feeds = {"x": x[:1], "i": np.array([0, 3, 8, 15], np.int64).reshape(1, 1, 2, 2)}
    np.testing.assert_array_equal(s.run(None, feeds)[0], ort.InferenceSession(symbolic).run(None, feeds)[0])


def test_tfidf_index_at_int64_max_is_an_error_even_when_the_input_shape_is_unknown():
    """An n-gram index of INT64_MAX makes the output width overflow. Inference refuses it; with
    an input of unknown rank it had not, and the CPU kernel computed INT64_MAX + 1 (fuzz_model,
    UBSan)."""
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="tfidf", mode="TF", min_gram_length=1,
                            max_gram_length=1, max_skip_count=0, ngram_counts=[0],
                            ngram_indexes=[0, (1 << 63) - 1], pool_int64s=[1, 2])
    model = model_bytes([node], [helper.make_tensor_value_info("x", TensorProto.INT64, None)],
                        [vi("y", shape=None)], opset=9)
    with pytest.raises(Exception) as got:
        qort.InferenceSession(model)
    assert "output width overflows int64: 9223372036854775807 + 1" in str(got.value)


def test_pad_without_pads_in_a_scan_body_of_unknown_types_is_an_error_on_the_run():
    """A Scan body whose state has no element type: inference cannot check the Pad inside it at
    load (no rank), and the body is compiled on the run. The CPU kernel read pads[0] of an empty
    list there (fuzz_run, UBSan); the run now fails naming the node and what pads needs."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
    from make_seeds import scan_pad_without_pads
    s = qort.InferenceSession(scan_pad_without_pads().SerializeToString())
    with pytest.raises(Exception) as got:
        s.run(None, {"initial": np.zeros(2, np.float32), "x": np.ones((3, 2), np.float32)})
    assert "Pad node \"pad\"" in str(got.value) and "expected 2 (2 per padded axis" in str(got.value)


def test_conv_window_of_size_zero_taken_from_w_is_refused_at_load():
    """No kernel_shape, and W [1, 1, 0, 3]: a window of height 0. The CPU depthwise kernel
    indexed its empty tap list (fuzz_run, UBSan); the load now says what is wrong."""
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[0, 7, 1, 1], strides=[2, 2])
    data = model_bytes([node], [vi("x", shape=[1, 1, "h", 48]), vi("w", shape=[1, 1, 0, 3])],
                       [vi("y", shape=None)])
    with pytest.raises(Exception) as got:
        qort.InferenceSession(data)
    assert "Conv node \"conv\"" in str(got.value) and "has a spatial dim of 0" in str(got.value)
