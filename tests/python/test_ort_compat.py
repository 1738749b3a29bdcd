"""quilt.onnxruntime against onnxruntime on the same models: outputs, NodeArgs, metadata,
overridable initializers, options, module functions, OrtValue, io_binding, run_async,
run_with_ort_values and profiling."""
import json
import os
import pathlib
import re
import threading

import numpy as np
import onnxruntime as ort
import pytest
from conftest import add_bytes, mlp_bytes, model_bytes, vi
from onnx import TensorProto, helper, numpy_helper

import quilt.onnxruntime as qort


def both(model, **kwargs):
    """The same model on onnxruntime and on quilt.onnxruntime."""
    return ort.InferenceSession(model, **kwargs), qort.InferenceSession(model, **kwargs)


def node_args(args):
    return [(a.name, a.type, a.shape) for a in args]


def test_outputs_match_onnxruntime_in_every_order_and_subset():
    model = mlp_bytes()
    o, q = both(model)
    for batch in (1, 5):
        x = np.random.default_rng(batch).standard_normal((batch, 8)).astype(np.float32)
        for names in (None, [], ["y", "z"], ["z", "y"], ["z"]):
            want, got = o.run(names, {"x": x}), q.run(names, {"x": x})
            assert len(got) == len(want)
            for w, g in zip(want, got):
                assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_inputs_are_read_in_place_and_never_modified():
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    before = x.copy()
    q = qort.InferenceSession(mlp_bytes())
    q.run(None, {"x": x})
    np.testing.assert_array_equal(x, before)


def test_node_args_match_onnxruntime():
    nodes = [helper.make_node("Identity", ["f"], ["f_out"]), helper.make_node("Cast", ["i"], ["i_out"], to=TensorProto.DOUBLE),
             helper.make_node("Not", ["b"], ["b_out"]), helper.make_node("Identity", ["h"], ["h_out"]),
             helper.make_node("Identity", ["u"], ["u_out"])]
    model = model_bytes(
        nodes,
        [vi("f", TensorProto.FLOAT, ["batch", 3, None]), vi("i", TensorProto.INT64, [2, "n"]),
         vi("b", TensorProto.BOOL, [7]), vi("h", TensorProto.FLOAT16, None), vi("u", TensorProto.UINT8, [])],
        [vi("f_out", TensorProto.FLOAT, ["batch", 3, None]), vi("i_out", TensorProto.DOUBLE, [2, "n"]),
         vi("b_out", TensorProto.BOOL, [7]), vi("h_out", TensorProto.FLOAT16, None), vi("u_out", TensorProto.UINT8, [])])
    o, q = both(model)
    assert node_args(q.get_inputs()) == node_args(o.get_inputs())
    assert node_args(q.get_outputs()) == node_args(o.get_outputs())
    assert node_args(q.get_inputs())[0] == ("f", "tensor(float)", ["batch", 3, None])
    assert str(q.get_inputs()[1]) == str(o.get_inputs()[1]) == "NodeArg(name='i', type='tensor(int64)', shape=[2, 'n'])"


def test_model_metadata_matches_onnxruntime():
    model = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[2])], [vi("y", shape=[2])],
                        graph_name="the_graph", graph_doc="graph text", producer_name="tests", producer_version="3",
                        domain="org.tests", model_version=12, doc_string="model text",
                        metadata_props={"k1": "v1", "licence": "none"})
    plain = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[2])], [vi("y", shape=[2])])
    for m in (model, plain):
        o, q = both(m)
        want, got = o.get_modelmeta(), q.get_modelmeta()
        for field in ("producer_name", "graph_name", "domain", "description", "graph_description", "version",
                      "custom_metadata_map"):
            assert getattr(got, field) == getattr(want, field), field
    assert qort.InferenceSession(model).get_modelmeta().custom_metadata_map == {"k1": "v1", "licence": "none"}


def overridable_model():
    """y = x + w + b; w is also a graph input (overridable), b is not."""
    return model_bytes([helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Add", ["s", "b"], ["y"])],
                       [vi("x", shape=[2, 3]), vi("w", shape=[3])], [vi("y", shape=[2, 3])],
                       [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "w"),
                        numpy_helper.from_array(np.array([10, 20, 30], np.float32), "b")])


def test_overridable_initializers_match_onnxruntime():
    o, q = both(overridable_model())
    assert node_args(q.get_overridable_initializers()) == node_args(o.get_overridable_initializers()) == [
        ("w", "tensor(float)", [3])]
    assert node_args(q.get_inputs()) == node_args(o.get_inputs())
    x = np.ones((2, 3), np.float32)
    w = np.array([-5, 0, 5], np.float32)
    for feed in ({"x": x}, {"x": x, "w": w}):
        np.testing.assert_array_equal(q.run(None, feed)[0], o.run(None, feed)[0])
    assert q.run(None, {"x": x, "w": w})[0][0].tolist() == [6, 21, 36]


def test_session_from_path_pathlike_and_bytes(save):
    model = mlp_bytes()
    path = save(model)
    x = np.ones((2, 8), np.float32)
    want = qort.InferenceSession(model).run(None, {"x": x})
    for source in (path, pathlib.Path(path), bytearray(model), memoryview(model)):
        got = qort.InferenceSession(source).run(None, {"x": x})
        np.testing.assert_array_equal(got[0], want[0])
    s = qort.InferenceSession(path)
    assert s._model_path == path and s._model_bytes is None
    with pytest.raises(TypeError, match="Unable to load from type"):
        qort.InferenceSession(12)


def test_session_options_have_onnxruntimes_fields_and_defaults():
    o, q = ort.SessionOptions(), qort.SessionOptions()
    fields = ["enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
              "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
              "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
              "optimized_model_filepath", "profile_file_prefix", "use_deterministic_compute"]
    for f in fields:
        want, got = getattr(o, f), getattr(q, f)
        assert (int(got) if hasattr(got, "value") else got) == (int(want) if hasattr(want, "value") else want), f
    for opts in (o, q):
        with pytest.raises(AttributeError):
            opts.no_such_option = 1
        with pytest.raises(RuntimeError, match="does not have configuration with key: nope"):
            opts.get_session_config_entry("nope")
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    ro, rq = ort.RunOptions(), qort.RunOptions()
    for f in ("log_severity_level", "log_verbosity_level", "logid", "terminate", "only_execute_path_to_fetches"):
        assert getattr(rq, f) == getattr(ro, f), f
    rq.add_run_config_entry("k", "v")
    assert rq.get_run_config_entry("k") == "v"


def test_session_options_are_honoured():
    so = qort.SessionOptions()
    so.intra_op_num_threads = 3
    so.graph_optimization_level = qort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    so.execution_mode = qort.ExecutionMode.ORT_PARALLEL  # accepted, no effect
    so.add_session_config_entry("session.use_env_allocators", "1")  # onnxruntime's: no effect
    s = qort.InferenceSession(mlp_bytes(), so)
    assert s.get_session_options() is so
    assert s._options.threads == 3
    assert s._options.optimization_level == 0
    assert s._options.log_level == qort.capi.onnxruntime_pybind11_state._quilt.LogLevel.Error
    # ORT_DISABLE_ALL leaves a constant subgraph (Neg of an initializer) unfolded.
    model = model_bytes([helper.make_node("Neg", ["k"], ["nk"]), helper.make_node("Add", ["x", "nk"], ["y"])],
                        [vi("x", shape=[2])], [vi("y", shape=[2])], [numpy_helper.from_array(np.ones(2, np.float32), "k")])
    folded = json.loads(qort.InferenceSession(model)._sess.plan_json())
    as_written = json.loads(qort.InferenceSession(model, so)._sess.plan_json())
    assert folded["totals"]["folded_nodes"] == 1 and as_written["totals"]["folded_nodes"] == 0


def test_free_dimension_overrides_fix_symbolic_dims_like_onnxruntime():
    so_o, so_q = ort.SessionOptions(), qort.SessionOptions()
    for so in (so_o, so_q):
        so.add_free_dimension_override_by_name("batch", 3)
    o = ort.InferenceSession(mlp_bytes(), so_o)
    q = qort.InferenceSession(mlp_bytes(), so_q)
    assert node_args(q.get_inputs()) == node_args(o.get_inputs()) == [("x", "tensor(float)", [3, 8])]
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="dim 0 is 2, expected 3"):
        q.run(None, {"x": np.ones((2, 8), np.float32)})


def test_quilt_config_entries_and_their_errors():
    so = qort.SessionOptions()
    so.add_session_config_entry("quilt.cpu_fallback", "0")
    so.add_session_config_entry("quilt.partition_cost_rule", "0")
    so.add_session_config_entry("quilt.pin.relu", "cpu")
    s = qort.InferenceSession(mlp_bytes(), so)
    assert s._options.cpu_fallback is False and s._options.partition_cost_rule is False
    assert s._options.pinned_nodes == {"relu": "cpu"}
    bad = qort.SessionOptions()
    bad.add_session_config_entry("quilt.colour", "blue")
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="session config entry 'quilt.colour' is not one of Quilt's"):
        qort.InferenceSession(mlp_bytes(), bad)
    precision = qort.SessionOptions()
    precision.add_session_config_entry("quilt.precision", "fp64")
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="SessionOptions.precision is 'fp64', expected fp32 or bf16"):
        qort.InferenceSession(mlp_bytes(), precision)
    pin = qort.SessionOptions()
    pin.add_session_config_entry("quilt.pin.no_such_node", "cpu")
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="'no_such_node'"):
        qort.InferenceSession(mlp_bytes(), pin)


def test_unsupported_session_option_calls_say_why():
    so = qort.SessionOptions()
    state = qort.capi.onnxruntime_pybind11_state
    with pytest.raises(state.NotImplemented, match="custom-op libraries"):
        so.register_custom_ops_library("libcustom.so")
    with pytest.raises(state.NotImplemented, match="add_initializer\\('w'\\)"):
        so.add_initializer("w", qort.OrtValue.ortvalue_from_numpy(np.ones(3, np.float32)))


def test_run_options_terminate_stops_a_run_like_onnxruntime():
    o, q = both(add_bytes())
    a = np.ones(4, np.float32)
    for sess, module in ((o, ort), (q, qort)):
        ro = module.RunOptions()
        ro.terminate = True
        with pytest.raises(Exception) as info:
            sess.run(None, {"a": a, "b": a}, ro)
        assert type(info.value).__name__ == "Fail"
        assert "terminate flag" in str(info.value)
        ro.terminate = False
        assert sess.run(None, {"a": a, "b": a}, ro)[0].tolist() == [2, 2, 2, 2]


def test_module_functions_and_enums_match_onnxruntime():
    assert qort.get_device() == ort.get_device() == "CPU"
    assert qort.__version__.startswith(ort.__version__ + "+quilt.")
    assert qort.get_version_string() == qort.__version__
    assert "Quilt" in qort.get_build_info()
    assert qort.get_available_providers()[-1] == "CPUExecutionProvider"
    for name in ("GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder"):
        want, got = getattr(ort, name), getattr(qort, name)
        assert {k: int(v) for k, v in got.__members__.items()} == {k: int(v) for k, v in want.__members__.items()}
    assert str(qort.GraphOptimizationLevel.ORT_ENABLE_ALL) == str(ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
    state = qort.capi.onnxruntime_pybind11_state
    for name in ("Fail", "InvalidArgument", "NoSuchFile", "NotImplemented", "InvalidGraph", "RuntimeException",
                 "InvalidProtobuf", "EPFail"):
        assert issubclass(getattr(state, name), Exception)
        assert getattr(qort.capi._pybind_state, name) is getattr(state, name)


def test_providers_cpu_names_options_and_set_providers():
    q = qort.InferenceSession(add_bytes(), providers=[("CPUExecutionProvider", {"use_arena": 0})])
    assert q.get_providers() == ["CPUExecutionProvider"]
    assert q.get_provider_options() == {"CPUExecutionProvider": {"use_arena": "0"}}
    assert qort.InferenceSession(add_bytes(), providers=["cpu"]).get_providers() == ["CPUExecutionProvider"]
    q.set_providers(["CPUExecutionProvider"])
    a = np.arange(4, dtype=np.float32)
    assert q.run(None, {"a": a, "b": a})[0].tolist() == [0, 2, 4, 6]
    with pytest.raises(ValueError, match="same length"):
        qort.InferenceSession(add_bytes(), providers=["CPUExecutionProvider"], provider_options=[{}, {}])
    with pytest.raises(ValueError, match="either strings or"):
        qort.InferenceSession(add_bytes(), providers=[3])


def test_unavailable_provider_warns_like_onnxruntime_and_falls_back_to_the_cpu():
    for module in (ort, qort):
        with pytest.warns(UserWarning, match="Specified provider 'CUDAExecutionProvider' is not in available provider names"):
            s = module.InferenceSession(add_bytes(), providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
        assert s.get_providers() == ["CPUExecutionProvider"]
        a = np.ones(4, np.float32)
        assert s.run(None, {"a": a, "b": a})[0].tolist() == [2, 2, 2, 2]


def test_ort_values_match_onnxruntime():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    o, q = ort.OrtValue.ortvalue_from_numpy(a), qort.OrtValue.ortvalue_from_numpy(a)
    for method in ("data_type", "element_type", "shape", "device_name", "has_value", "is_tensor",
                   "is_sparse_tensor", "tensor_size_in_bytes"):
        assert getattr(q, method)() == getattr(o, method)(), method
    assert q.data_ptr() == a.ctypes.data  # no copy
    z = qort.OrtValue.ortvalue_from_shape_and_type([2, 2], np.int64)
    assert z.data_type() == "tensor(int64)" and z.shape() == [2, 2]
    assert qort.OrtValue.ortvalue_from_shape_and_type([3], 10).numpy().dtype == np.float16
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="host \\(cpu\\) buffers"):
        qort.OrtValue.ortvalue_from_numpy(a, "cuda", 0)


def test_run_with_ort_values_matches_onnxruntime():
    o, q = both(mlp_bytes())
    x = np.random.default_rng(3).standard_normal((2, 8)).astype(np.float32)
    want = o.run_with_ort_values(["z"], {"x": ort.OrtValue.ortvalue_from_numpy(x)})
    got = q.run_with_ort_values(["z"], {"x": qort.OrtValue.ortvalue_from_numpy(x)})
    np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-5)
    # run() takes OrtValues too.
    np.testing.assert_allclose(q.run(["z"], {"x": qort.OrtValue.ortvalue_from_numpy(x)})[0], want[0].numpy(), rtol=1e-5)


def test_io_binding_matches_onnxruntime():
    x = np.random.default_rng(4).standard_normal((3, 8)).astype(np.float32)
    results = {}
    for module, sess in zip((ort, qort), both(mlp_bytes())):
        # Inputs: by array, and by pointer; outputs: by name, and into the caller's buffer.
        binding = sess.io_binding()
        binding.bind_cpu_input("x", x)
        binding.bind_output("y")
        z = np.full(3, -1, np.float32)
        binding.bind_output("z", "cpu", 0, np.float32, [3], z.ctypes.data)
        binding.synchronize_inputs()
        sess.run_with_iobinding(binding)
        binding.synchronize_outputs()
        outs = binding.get_outputs()
        y = outs[0].numpy()
        by_copy = binding.copy_outputs_to_cpu()
        b2 = sess.io_binding()
        b2.bind_input("x", "cpu", 0, np.float32, list(x.shape), x.ctypes.data)
        target = module.OrtValue.ortvalue_from_shape_and_type([3], np.float32)
        b2.bind_ortvalue_output("z", target)
        sess.run_with_iobinding(b2)
        results[module] = (y, z.copy(), by_copy[1], target.numpy().copy())
        assert not np.all(z == -1)  # the result went into the caller's buffer
    for want, got in zip(results[ort], results[qort]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_io_binding_checks_the_bound_buffer():
    q = qort.InferenceSession(mlp_bytes())
    binding = q.io_binding()
    binding.bind_cpu_input("x", np.ones((3, 8), np.float32))
    small = np.zeros(2, np.float32)
    binding.bind_output("z", "cpu", 0, np.float32, [2], small.ctypes.data)
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument,
                       match="output 'z' is float32 \\[3\\] but the buffer bound to it is float32 \\[2\\]"):
        q.run_with_iobinding(binding)
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="cuda"):
        binding.bind_output("y", "cuda")


def test_run_async_calls_back_with_the_outputs():
    q = qort.InferenceSession(mlp_bytes())
    x = np.ones((2, 8), np.float32)
    done = threading.Event()
    got = {}

    def callback(outputs, user_data, error):
        got.update(outputs=outputs, user_data=user_data, error=error)
        done.set()

    q.run_async(["z"], {"x": x}, callback, "token")
    assert done.wait(30)
    assert got["error"] == "" and got["user_data"] == "token"
    np.testing.assert_array_equal(got["outputs"][0], q.run(["z"], {"x": x})[0])
    done.clear()
    q.run_async(None, {"x": np.ones((2, 7), np.float32)}, callback, None)
    assert done.wait(30)
    assert "dim 1 is 7, expected 8" in got["error"] and got["outputs"] == []


def test_end_profiling_writes_quilts_chrome_trace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = {}
    for module in (ort, qort):
        so = module.SessionOptions()
        so.enable_profiling = True
        so.profile_file_prefix = "prof"
        sess = module.InferenceSession(mlp_bytes(), so)
        assert sess.get_profiling_start_time_ns() > 0
        for _ in range(3):
            sess.run(None, {"x": np.ones((2, 8), np.float32)})
        names[module] = sess.end_profiling()
        assert sess.end_profiling() == ""
    # The same file-name pattern as onnxruntime: PREFIX_DATE_TIME_MILLISECONDS.json in the working
    # directory (onnxruntime 1.32 added the milliseconds), stamped when the session was created.
    assert os.path.exists(names[qort]) and names[qort].startswith("prof_") and names[qort].endswith(".json")
    assert re.fullmatch(r"prof_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{3}\.json", names[ort]), names[ort]
    assert re.fullmatch(r"prof_\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_\d{3}\.json", names[qort]), names[qort]
    trace = json.loads(pathlib.Path(names[qort]).read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    patches = [e for e in events if e["cat"] == "patch"]
    assert len(patches) == 3  # one CPU patch per run
    assert {e["args"]["lane"] for e in events} == {"cpu"}
    assert any(e["name"] == "Softmax node \"softmax\"" and e["cat"] == "node" for e in events)
    # Not profiling: nothing written.
    assert qort.InferenceSession(mlp_bytes()).end_profiling() == ""


# ---- onnxruntime 1.32's additions -------------------------------------------------------------

def assignment_model():
    """y = Relu(a + b) * c: three nodes, none fused by either runtime."""
    return model_bytes([helper.make_node("Add", ["a", "b"], ["s"], name="add"),
                        helper.make_node("Relu", ["s"], ["r"], name="relu"),
                        helper.make_node("Mul", ["r", "c"], ["y"], name="mul")],
                       [vi("a", shape=[4]), vi("b", shape=[4]), vi("c", shape=[4])], [vi("y", shape=[4])])


def test_provider_graph_assignment_info_matches_onnxruntime():
    so_o, so_q = ort.SessionOptions(), qort.SessionOptions()
    for so in (so_o, so_q):
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    o = ort.InferenceSession(assignment_model(), so_o)
    q = qort.InferenceSession(assignment_model(), so_q)

    def nodes(session):
        return sorted((sg.ep_name, n.name, n.domain, n.op_type)
                      for sg in session.get_provider_graph_assignment_info() for n in sg.get_nodes())
    assert nodes(q) == nodes(o) == [("CPUExecutionProvider", "add", "", "Add"),
                                    ("CPUExecutionProvider", "mul", "", "Mul"),
                                    ("CPUExecutionProvider", "relu", "", "Relu")]
    assert all(isinstance(sg, qort.OrtEpAssignedSubgraph) for sg in q.get_provider_graph_assignment_info())
    # Without the config entry both refuse, saying which entry to set.
    for module in (ort, qort):
        with pytest.raises(Exception) as info:
            module.InferenceSession(assignment_model()).get_provider_graph_assignment_info()
        assert type(info.value).__name__ == "Fail"
        assert "'session.record_ep_graph_assignment_info' must be set to \"1\"" in str(info.value)


def test_provider_graph_assignment_info_gives_the_domain_and_leaves_folded_nodes_out():
    """A com.microsoft node has its domain apart from its op_type; a node folded into a constant
    runs on no provider."""
    inits = [numpy_helper.from_array(np.ones(2, np.float32), "k"), numpy_helper.from_array(np.float32(0.5), "scale"),
             numpy_helper.from_array(np.uint8(10), "zero")]
    model = model_bytes([helper.make_node("Neg", ["k"], ["nk"], name="fold_me"),
                         helper.make_node("Add", ["x", "nk"], ["s"], name="add"),
                         helper.make_node("QuantizeLinear", ["s", "scale", "zero"], ["y"], name="quantize",
                                          domain="com.microsoft")],
                        [vi("x", shape=[2])], [vi("y", TensorProto.UINT8, [2])], inits, domains=[("com.microsoft", 1)])
    so = qort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    q = qort.InferenceSession(model, so)
    got = [(sg.ep_name, n.name, n.domain, n.op_type) for sg in q.get_provider_graph_assignment_info()
           for n in sg.get_nodes()]
    assert sorted(got) == [("CPUExecutionProvider", "add", "", "Add"),
                           ("CPUExecutionProvider", "quantize", "com.microsoft", "QuantizeLinear")]
    x = np.array([3.5, -2], np.float32)
    np.testing.assert_array_equal(q.run(None, {"x": x})[0], ort.InferenceSession(model).run(None, {"x": x})[0])


def test_session_scoped_ort_values_like_onnxruntime():
    results = {}
    for module in (ort, qort):
        s, other = module.InferenceSession(add_bytes()), module.InferenceSession(add_bytes())
        v = s.create_ortvalue_from_shape_and_type([4], np.float32, "cpu")
        assert (v.shape(), v.data_type(), v.device_name()) == ([4], "tensor(float)", "cpu")
        assert s.create_ortvalue_from_shape_and_type([2, 3], 7, "cpu").data_type() == "tensor(int64)"
        v.update_inplace(np.arange(4, dtype=np.float32))
        results[module] = s.run(None, {"a": v, "b": v})[0]
        with pytest.raises(ValueError, match="Session-scoped OrtValue must be used with the session that created it"):
            other.run(None, {"a": v, "b": v})
        with pytest.raises(ValueError, match="Session-scoped OrtValue must be used with the session that created it"):
            other.run_with_ort_values(None, {"a": v, "b": v})
        with pytest.raises(ValueError, match="Session-scoped OrtValue must be bound to the session that created it"):
            other.io_binding().bind_ortvalue_input("a", v)
        with pytest.raises(ValueError, match="IOBinding must be used with the session that created it"):
            other.run_with_iobinding(s.io_binding())
        for element_type in (np.str_, object, 8):  # 8: ONNX's string
            with pytest.raises(RuntimeError, match="only supported for numeric tensor types"):
                s.create_ortvalue_from_shape_and_type([4], element_type, "cpu")
        with pytest.raises(TypeError, match="device_type"):
            s.create_ortvalue_from_shape_and_type([4], np.float32)
        # A value that belongs to no session goes anywhere.
        free = module.OrtValue.ortvalue_from_numpy(np.ones(4, np.float32))
        assert other.run(None, {"a": free, "b": free})[0].tolist() == [2, 2, 2, 2]
    np.testing.assert_array_equal(results[qort], results[ort])
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="host \\(cpu\\) buffers"):
        qort.InferenceSession(add_bytes()).create_ortvalue_from_shape_and_type([4], np.float32, "cuda")


def test_a_binding_made_before_set_providers_is_refused_after_it():
    s = qort.InferenceSession(add_bytes())
    binding = s.io_binding()
    s.set_providers(["CPUExecutionProvider"])
    with pytest.raises(ValueError, match="IOBinding must be used with the session that created it"):
        s.run_with_iobinding(binding)


def test_graph_capture_and_dynamic_options_like_onnxruntimes_cpu_provider():
    for module in (ort, qort):
        s = module.InferenceSession(add_bytes())
        assert s.release_captured_graph() is None and s.release_captured_graph(5) is None
        s.set_ep_dynamic_options({"ep.dynamic.workload_type": "Efficient"})
        with pytest.raises(RuntimeError, match="No options were provided"):
            s.set_ep_dynamic_options({})
        a = np.ones(4, np.float32)
        assert s.run(None, {"a": a, "b": a})[0].tolist() == [2, 2, 2, 2]


def test_ort_value_dlpack_like_onnxruntime():
    for module in (ort, qort):
        a = np.arange(6, dtype=np.float32).reshape(2, 3)
        for source in (a, a.__dlpack__()):
            v = module.OrtValue.from_dlpack(source)
            assert v.shape() == [2, 3] and v.data_type() == "tensor(float)"
            np.testing.assert_array_equal(v.numpy(), a)
        v = module.OrtValue.from_dlpack(a)
        a[0, 0] = 42  # no copy
        assert v.numpy()[0, 0] == 42
        assert module.OrtValue.from_dlpack(np.array([True, False])).data_type() == "tensor(bool)"
        assert module.OrtValue.from_dlpack(np.ones(2, np.float16)).data_type() == "tensor(float16)"
        with pytest.raises(RuntimeError, match="contiguous"):
            module.OrtValue.from_dlpack(a[:, ::2])
        for bad in (3, [1, 2]):
            with pytest.raises(TypeError, match="from_dlpack expected a valid DLPack capsule named 'dltensor'"):
                module.OrtValue.from_dlpack(bad)
        # And out: numpy (or any DLPack consumer) reads the OrtValue in place.
        w = module.OrtValue.ortvalue_from_numpy(a)
        assert w.__dlpack_device__() == (1, 0)
        back = np.from_dlpack(w)
        assert back.ctypes.data == w.data_ptr()
        np.testing.assert_array_equal(back, a)


def test_update_inplace_like_onnxruntime():
    for module in (ort, qort):
        v = module.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
        v.update_inplace(np.arange(8, dtype=np.float32)[::2])  # strided source
        assert v.numpy().tolist() == [0, 2, 4, 6]
        v.update_inplace(np.ones((2, 2), np.float32))  # same size, other shape
        assert v.numpy().tolist() == [1, 1, 1, 1]
        v.update_inplace(module.OrtValue.ortvalue_from_numpy(np.full(4, 7, np.float32)))
        assert v.numpy().tolist() == [7, 7, 7, 7]
        with pytest.raises(TypeError, match="data must be a numpy.ndarray or an OrtValue"):
            v.update_inplace([1, 2, 3, 4])
        with pytest.raises(RuntimeError, match="does not match the size of the OrtValue"):
            v.update_inplace(np.ones(3, np.float32))
        with pytest.raises(RuntimeError, match="must have the same size"):
            v.update_inplace(module.OrtValue.ortvalue_from_numpy(np.ones(3, np.float32)))
    # onnxruntime copies the bytes of another dtype (float64 into float32 gives garbage); Quilt
    # converts the values.
    v = qort.OrtValue.ortvalue_from_numpy(np.zeros(4, np.float32))
    v.update_inplace(np.array([1.5, 2, 3, 4], np.float64))
    assert v.numpy().tolist() == [1.5, 2, 3, 4]


def test_vendor_ids_and_memory_info():
    assert {k: int(v) for k, v in qort.OrtDeviceVendorId.__members__.items()} == {
        k: int(v) for k, v in ort.OrtDeviceVendorId.__members__.items()}
    a = np.ones(3, np.float32)
    for module in (ort, qort):
        v = module.OrtValue.ortvalue_from_numpy(a, "cpu", 0, module.OrtDeviceVendorId.NONE)
        assert v.device_name() == "cpu"
        assert module.OrtValue.ortvalue_from_shape_and_type([2], np.float32, memory_info=None).shape() == [2]
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.InvalidArgument, match="memory_info: Quilt has no OrtMemoryInfo"):
        qort.OrtValue.ortvalue_from_shape_and_type([2], np.float32, memory_info=object())


def test_new_session_options_calls_like_onnxruntime():
    def read(name, buffer):
        pass
    for module in (ort, qort):
        so = module.SessionOptions()
        so.set_ep_context_data_read_func(read, 1 << 20)
        so.clear_ep_context_data_read_func()
        with pytest.raises(RuntimeError, match="must not be None"):
            so.set_ep_context_data_read_func(None, 100)
        with pytest.raises(RuntimeError, match="max_data_size must be finite and greater than zero"):
            so.set_ep_context_data_read_func(read, 0)
        for args in ((3, 100), (read, -1)):
            with pytest.raises(TypeError):
                so.set_ep_context_data_read_func(*args)
        # The callback changes nothing for a model without EPContext nodes.
        so.set_ep_context_data_read_func(read, 100)
        a = np.ones(4, np.float32)
        assert module.InferenceSession(add_bytes(), so).run(None, {"a": a, "b": a})[0].tolist() == [2, 2, 2, 2]
    with pytest.raises(qort.capi.onnxruntime_pybind11_state.NotImplemented, match="external data from the files"):
        qort.SessionOptions().add_external_initializers_from_files_in_memory(["w.bin"], [b"1234"], [4])


def test_tensorrt_and_tensorrt_rtx_together_are_refused():
    # onnxruntime 1.32 means to raise this ValueError; its fallback path turns it into an
    # AttributeError ('_fallback_providers') on a build without TensorRT.
    with pytest.raises(ValueError, match="Cannot enable both 'TensorrtExecutionProvider' and 'NvTensorRTRTXExecutionProvider'"):
        qort.InferenceSession(add_bytes(), providers=["TensorrtExecutionProvider", "NvTensorRTRTXExecutionProvider"])


def test_logger_callback_gets_quilts_messages_like_onnxruntimes(capfd, monkeypatch):
    got = []
    so = qort.SessionOptions()
    so.log_severity_level = 0  # Quilt's debug: the plan
    try:
        qort.set_default_logger_callback(lambda *args: got.append(args), 0)
        qort.InferenceSession(mlp_bytes(), so)
    finally:
        qort.set_default_logger_callback(None)
        qort.set_default_logger_severity(2)
    assert got, "no message reached the callback"
    assert all(len(args) == 5 and args[1:4] == ("quilt", "", "") for args in got)
    assert {args[0] for args in got} <= {0, 1, 2, 3} and any(args[0] == 0 for args in got)
    assert any(args[0] == 0 and "cpu backend:" in args[4] for args in got)
    assert "[quilt debug]" not in capfd.readouterr().err
    # Without a callback the messages go to stderr again.
    qort.InferenceSession(mlp_bytes(), so)
    assert "[quilt debug]" in capfd.readouterr().err
    # A callback that raises: the message goes to stderr and the exception to sys.unraisablehook.
    raised = []
    monkeypatch.setattr("sys.unraisablehook", lambda info: raised.append(info.exc_value))

    def broken(*args):
        raise KeyError("broken callback")
    try:
        qort.set_default_logger_callback(broken, 0)
        qort.InferenceSession(mlp_bytes(), so)
    finally:
        qort.set_default_logger_callback(None)
        qort.set_default_logger_severity(2)
    assert raised and isinstance(raised[0], KeyError)
    assert "[quilt debug]" in capfd.readouterr().err
    # Bad arguments: onnxruntime's checks and messages.
    for module in (ort, qort):
        with pytest.raises(RuntimeError, match="Invalid logging severity"):
            module.set_default_logger_callback(None, 7)
        with pytest.raises(RuntimeError, match="callback must be a callable"):
            module.set_default_logger_callback(3)
