"""Quilt's own Python API: quilt.Session with every SessionOptions field, plan() against `quilt
plan`, devices() against `quilt devices`, profiles, metadata and the version. The example
plugin (tests/plugins) is the second backend."""
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import example_plugin, mlp_bytes, model_bytes, run_cli, vi
from onnx import TensorProto, helper, numpy_helper

import quilt


def test_run_takes_and_gives_dicts_of_arrays():
    s = quilt.Session(mlp_bytes(), threads=2)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    out = s.run({"x": x})
    assert list(out) == ["y", "z"]
    np.testing.assert_allclose(out["z"], out["y"].sum(axis=1) * 2, rtol=1e-5)
    assert list(s.run({"x": x}, outputs=["z"])) == ["z"]
    assert [repr(v) for v in s.inputs] == ["ValueInfo(name='x', dtype='float32', shape=[batch, 8])"]
    assert [(v.name, v.dtype, v.shape) for v in s.outputs] == [("y", "float32", ["batch", 6]), ("z", "float32", ["batch"])]
    assert s.overridable_initializers == []


def test_metadata_and_version():
    model = model_bytes([helper.make_node("Relu", ["x"], ["y"])], [vi("x", shape=[2])], [vi("y", shape=[2])],
                        producer_name="p", producer_version="1.2", model_version=4, doc_string="d",
                        metadata_props={"a": "b"}, graph_name="gg", graph_doc="gd", domain="dom")
    m = quilt.Session(model).metadata
    assert (m.producer_name, m.producer_version, m.model_version, m.description, m.custom, m.graph_name,
            m.graph_description, m.domain, m.ir_version, m.opsets) == ("p", "1.2", 4, "d", {"a": "b"}, "gg", "gd",
                                                                       "dom", 8, {"": 17})
    assert quilt.Session(mlp_bytes()).metadata.model_version is None
    assert run_cli("--version").stdout.strip() == f"quilt {quilt.__version__}"


def plan_model(save):
    return save(mlp_bytes())


def test_plan_is_quilt_plan_json_text_and_dot(save):
    path = plan_model(save)
    plugin = example_plugin()
    s = quilt.Session(path, backends=["example", "cpu"], plugins=[plugin])
    cli = ["plan", path, "--plugin", plugin, "--backend", "example,cpu"]
    assert s.plan() == json.loads(run_cli(*cli, "--format", "json").stdout)
    assert s.plan_text() == run_cli(*cli).stdout
    assert s.plan_dot() == run_cli(*cli, "--format", "dot").stdout
    plan = s.plan()
    assert plan["totals"]["nodes"] == {"example:0": 2, "cpu": 3}
    assert [n["backend"] for n in plan["nodes"]] == ["example:0"] * 2 + ["cpu"] * 3


def test_strict_mode_pinning_and_the_cost_rule(save):
    plugin = example_plugin()
    with pytest.raises(quilt.NotImplemented) as strict:
        quilt.Session(mlp_bytes(), backends=["example"], cpu_fallback=False, plugins=[plugin])
    message = str(strict.value)
    assert "CPU fallback is off" in message and 'Softmax node "softmax"' in message
    pinned = quilt.Session(mlp_bytes(), backends=["example", "cpu"], plugins=[plugin], pinned_nodes={"relu": "cpu"})
    relu = next(n for n in pinned.plan()["nodes"] if n["name"] == "relu")
    assert relu["backend"] == "cpu" and relu["reason"] == "pinned to cpu"
    # Relu alone between two CPU nodes: the cost rule keeps it on the CPU unless told not to.
    island = model_bytes([helper.make_node("Softmax", ["x"], ["a"], name="s1"), helper.make_node("Relu", ["a"], ["b"], name="r"),
                          helper.make_node("Softmax", ["b"], ["y"], name="s2")], [vi("x", shape=[2, 4])], [vi("y", shape=[2, 4])])
    kept = quilt.Session(island, backends=["example", "cpu"], plugins=[plugin]).plan()
    honoured = quilt.Session(island, backends=["example", "cpu"], plugins=[plugin], partition_cost_rule=False).plan()
    assert [n["backend"] for n in kept["nodes"]] == ["cpu", "cpu", "cpu"]
    assert [n["backend"] for n in honoured["nodes"]] == ["cpu", "example:0", "cpu"]
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(quilt.Session(island).run({"x": x})["y"],
                               quilt.Session(island, backends=["example", "cpu"], plugins=[plugin],
                                             partition_cost_rule=False).run({"x": x})["y"], rtol=1e-6)


def test_backend_options_reach_the_backend():
    plugin = example_plugin()
    x = np.ones((64, 8), np.float32)
    roomy = quilt.Session(mlp_bytes(), backends=["example", "cpu"], plugins=[plugin])
    np.testing.assert_allclose(roomy.run({"x": x})["z"], quilt.Session(mlp_bytes()).run({"x": x})["z"], rtol=1e-6)
    tight = quilt.Session(mlp_bytes(), backends=["example", "cpu"], plugins=[plugin],
                          backend_options={"example": {"memory_limit": 4096}})
    with pytest.raises(quilt.Error) as got:
        tight.run({"x": x})
    assert got.value.code == "OutOfMemory" and "example" in str(got.value)
    with pytest.raises(quilt.InvalidArgument, match="colour"):
        quilt.Session(mlp_bytes(), backends=["example", "cpu"], plugins=[plugin], backend_options={"example": {"colour": 1}})


def test_fixed_dims_optimization_level_and_options_object():
    s = quilt.Session(mlp_bytes(), fixed_dims={"batch": 4})
    assert s.inputs[0].shape == [4, 8]
    with pytest.raises(quilt.InvalidArgument, match="dim 0 is 3, expected 4"):
        s.run({"x": np.ones((3, 8), np.float32)})
    with pytest.raises(quilt.InvalidArgument, match="'width', which is not a symbolic dim"):
        quilt.Session(mlp_bytes(), fixed_dims={"width": 4})
    model = model_bytes([helper.make_node("Neg", ["k"], ["nk"]), helper.make_node("Add", ["x", "nk"], ["y"])],
                        [vi("x", shape=[2])], [vi("y", shape=[2])], [numpy_helper.from_array(np.ones(2, np.float32), "k")])
    assert quilt.Session(model).plan()["totals"]["folded_nodes"] == 1
    options = quilt.SessionOptions()
    options.optimization_level = 0
    options.log_level = quilt.LogLevel.Error
    as_written = quilt.Session(model, options)
    assert as_written.plan()["totals"]["folded_nodes"] == 0
    assert as_written.run({"x": np.ones(2, np.float32)})["y"].tolist() == [0, 0]
    with pytest.raises(TypeError, match="either options or keyword arguments"):
        quilt.Session(model, options, threads=2)


def test_debug_log_level_logs_the_plan(capfd):
    quilt.Session(mlp_bytes(), log_level="debug")
    err = capfd.readouterr().err
    assert "plan for '<bytes>': 1 patches, 0 transfers" in err
    quilt.Session(mlp_bytes(), log_level="error")
    assert "plan for" not in capfd.readouterr().err


def test_profile_collects_spans_on_every_lane():
    plugin = example_plugin()
    s = quilt.Session(mlp_bytes(), backends=["example", "cpu"], plugins=[plugin])
    profile = quilt.Profile()
    for _ in range(2):
        s.run({"x": np.ones((2, 8), np.float32)}, profile=profile)
    spans = profile.spans()
    assert len(profile) == len(spans) > 0
    lanes = {lane for _, lane, _, _, _ in spans}
    kinds = {kind for _, _, kind, _, _ in spans}
    assert "cpu" in lanes and "example:0" in lanes and {"patch", "transfer"} <= kinds
    assert sum(1 for _, lane, kind, _, _ in spans if kind == "patch" and lane == "cpu") == 2
    trace = json.loads(profile.to_chrome_trace("quilt test"))
    assert trace["traceEvents"][0]["args"]["name"] == "quilt test"
    profile.clear()
    assert len(profile) == 0


def test_devices_and_list_backends_match_quilt_devices():
    plugin = example_plugin()
    backends, failures = quilt.list_backends([plugin, "/nonexistent/libquilt_x.so"])
    text = run_cli("devices", "--plugin", plugin).stdout
    for b in backends:
        assert f"backend {b['name']} " in text
        for d in b["devices"]:
            assert f"  device {d['index']}: {d['name']}\n" in text
    assert backends[0]["name"] == "cpu" and backends[0]["library"] == "built-in"
    assert {"library": "/nonexistent/libquilt_x.so", "reason": "file not found"} in failures
    devices = quilt.devices([plugin])
    cpu = devices[0]
    assert (cpu["backend"], cpu["index"], cpu["host_memory"], cpu["synchronous"]) == ("cpu", 0, True, True)
    assert int(cpu["properties"]["cores"]) > 0
    example = [d for d in devices if d["backend"] == "example"]
    assert example and example[0]["memory_bytes"] > 0


def test_precision_bf16_is_a_session_option():
    """precision="bf16": the MLP's Gemm on bfloat16 operands, close to float32 but not equal; a
    value Quilt does not know is refused naming the valid ones."""
    x = np.random.default_rng(1).standard_normal((16, 8)).astype(np.float32)
    fp32 = quilt.Session(mlp_bytes(), precision="fp32").run({"x": x})["y"]
    from quilt._session import make_options
    assert make_options(precision="bf16").precision == "bf16"
    if "bf16 (AVX512-BF16" not in quilt.devices([])[0]["properties"]["precisions"]:
        with pytest.raises(quilt.NotImplemented, match="precision bf16 needs AVX512-BF16"):
            quilt.Session(mlp_bytes(), precision="bf16")
    else:
        bf16 = quilt.Session(mlp_bytes(), precision="bf16").run({"x": x})["y"]
        np.testing.assert_allclose(bf16, fp32, rtol=0.05, atol=0.02)
        assert not np.array_equal(bf16, fp32)
        assert (bf16.argmax(1) == fp32.argmax(1)).mean() >= 0.9
    with pytest.raises(quilt.InvalidArgument, match="SessionOptions.precision is 'fp8', expected fp32 or bf16"):
        quilt.Session(mlp_bytes(), precision="fp8")


def test_the_readme_python_example_runs(monkeypatch, capsys):
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    section = readme[readme.index("## Python"):]
    code = section[section.index("```python") + len("```python"): section.index("```\n", section.index("```python") + 9)]
    assert len(code.strip().splitlines()) == 5
    monkeypatch.chdir(root)
    exec(compile(code, "README.md", "exec"), {})
    digit, providers = capsys.readouterr().out.strip().split(" ", 1)
    assert 0 <= int(digit) <= 9 and providers.endswith("'CPUExecutionProvider']")
