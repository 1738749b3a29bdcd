"""Providers: the OpenCL plugin (on PoCL in CI) and the example plugin (tests/plugins), found
through QUILT_PLUGIN_PATH or the quilt.plugins session config entry, with provider options as
backend options; onnxruntime names and Quilt's side by side."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from conftest import example_plugin, mlp_bytes, opencl_device

import quilt
import quilt.onnxruntime as qort

STATE = qort.capi.onnxruntime_pybind11_state
X = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)


def plan_of(session):
    return json.loads(session._sess.plan_json())


@pytest.fixture
def opencl():
    if not opencl_device():
        pytest.skip("no OpenCL device (Quilt's OpenCL backend lists none)")


def test_opencl_runs_the_model_and_matches_onnxruntime(opencl):
    assert "opencl" in qort.get_available_providers()
    want = ort.InferenceSession(mlp_bytes()).run(None, {"x": X})
    for providers in (["opencl", "CPUExecutionProvider"], ["opencl:0"], [("opencl:name=pthread", {"gemm": "own"})]):
        s = qort.InferenceSession(mlp_bytes(), providers=providers)
        assert s.get_providers()[-1] == "CPUExecutionProvider"
        assert s.get_providers()[0] == (providers[0] if isinstance(providers[0], str) else providers[0][0])
        backends = {n["backend"] for n in plan_of(s)["nodes"]}
        assert "opencl:0" in backends, plan_of(s)
        for w, g in zip(want, s.run(None, {"x": X})):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert qort.InferenceSession(mlp_bytes(), providers=[("opencl", {"gemm": "own"})]).get_provider_options() == {
        "opencl": {"gemm": "own"}, "CPUExecutionProvider": {}}


def test_opencl_executable_cache_from_provider_options_and_session_options(opencl, tmp_path):
    # OpenVINO's spelling, a provider option cache_dir: the session's executable cache. The
    # second session (the first closed: nothing shared in memory) loads what the first stored.
    want = ort.InferenceSession(mlp_bytes()).run(None, {"x": X})
    so = qort.SessionOptions()
    so.add_session_config_entry("quilt.partition_cost_rule", "0")
    caches = []
    for _ in range(2):
        s = qort.InferenceSession(mlp_bytes(), so, providers=[("opencl", {"cache_dir": str(tmp_path / "p")})])
        assert s.get_provider_options()["opencl"] == {"cache_dir": str(tmp_path / "p")}
        caches.append([p["cache"] for p in plan_of(s)["patches"] if p["backend"] == "opencl:0"])
        for w, g in zip(want, s.run(None, {"x": X})):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
        del s
    assert caches[0] and set(caches[0]) == {"stored"} and set(caches[1]) == {"loaded"}, caches
    assert list((tmp_path / "p").glob("opencl-*.qexe"))
    # The session config entry, and quilt.Session's keyword.
    so.add_session_config_entry("quilt.cache_dir", str(tmp_path / "p"))
    s = qort.InferenceSession(mlp_bytes(), so, providers=["opencl"])
    assert {p["cache"] for p in plan_of(s)["patches"] if p["backend"] == "opencl:0"} == {"loaded"}
    q = quilt.Session(mlp_bytes(), backends=["opencl", "cpu"], partition_cost_rule=False,
                      cache_dir=tmp_path / "q")
    assert {p["cache"] for p in q.plan()["patches"] if p["backend"] == "opencl:0"} == {"stored"}
    with pytest.raises(STATE.InvalidArgument, match="differs from the session's executable cache"):
        qort.InferenceSession(mlp_bytes(), so, providers=[("opencl", {"cache_dir": str(tmp_path / "other")})])


def test_opencl_device_and_option_mistakes_are_reported(opencl):
    with pytest.raises(STATE.InvalidArgument, match="no opencl device name contains 'warp'"):
        qort.InferenceSession(mlp_bytes(), providers=["opencl:name=warp"])
    with pytest.raises(Exception) as bad_option:
        qort.InferenceSession(mlp_bytes(), providers=[("opencl", {"colour": "blue"})])
    assert "colour" in str(bad_option.value)
    # The same through Quilt's own API, with the session's plan on both devices.
    s = quilt.Session(mlp_bytes(), backends=["opencl", "cpu"])
    assert {d["backend"] for d in quilt.devices()} >= {"cpu", "opencl"}
    np.testing.assert_allclose(s.run({"x": X})["z"], quilt.Session(mlp_bytes()).run({"x": X})["z"], rtol=1e-4)


def test_example_plugin_from_quilt_plugin_path(monkeypatch):
    plugin = example_plugin()
    monkeypatch.setenv("QUILT_PLUGIN_PATH", os.path.dirname(plugin))
    assert "example" in qort.get_available_providers()
    s = qort.InferenceSession(mlp_bytes(), providers=["example", "CPUExecutionProvider"])
    assert s.get_providers() == ["example", "CPUExecutionProvider"]
    assert plan_of(s)["totals"]["nodes"] == {"example:0": 2, "cpu": 3}
    np.testing.assert_allclose(s.run(None, {"x": X})[1], ort.InferenceSession(mlp_bytes()).run(None, {"x": X})[1],
                               rtol=1e-5)


def test_example_plugin_from_the_session_config_with_provider_options(monkeypatch):
    monkeypatch.delenv("QUILT_PLUGIN_PATH", raising=False)
    plugin = example_plugin()
    assert "example" not in qort.get_available_providers()
    so = qort.SessionOptions()
    so.add_session_config_entry("quilt.plugins", plugin)
    s = qort.InferenceSession(mlp_bytes(), so, providers=["example", "CPUExecutionProvider"],
                              provider_options=[{"memory_limit": 1 << 20}, {}])
    assert s.get_provider_options()["example"] == {"memory_limit": "1048576"}
    assert plan_of(s)["totals"]["nodes"]["example:0"] == 2
    s.run(None, {"x": X})
    tight = qort.InferenceSession(mlp_bytes(), so, providers=[("example", {"memory_limit": 4096})])
    with pytest.raises(STATE.RuntimeException) as got:
        tight.run(None, {"x": np.ones((64, 8), np.float32)})
    assert "example" in str(got.value)
    # Without the entry the plugin is not there: onnxruntime's warning, and the CPU runs it all.
    with pytest.warns(UserWarning, match="Specified provider 'example' is not in available provider names"):
        plain = qort.InferenceSession(mlp_bytes(), providers=["example", "CPUExecutionProvider"])
    assert plain.get_providers() == ["CPUExecutionProvider"]


def test_set_providers_moves_the_session(monkeypatch):
    plugin = example_plugin()
    monkeypatch.setenv("QUILT_PLUGIN_PATH", os.path.dirname(plugin))
    s = qort.InferenceSession(mlp_bytes())
    assert plan_of(s)["totals"]["nodes"] == {"cpu": 5}
    s.set_providers(["example", "CPUExecutionProvider"])
    assert s.get_providers() == ["example", "CPUExecutionProvider"]
    assert plan_of(s)["totals"]["nodes"] == {"example:0": 2, "cpu": 3}
    s.set_providers(["CPUExecutionProvider"])
    assert plan_of(s)["totals"]["nodes"] == {"cpu": 5}


def test_a_cpu_only_session_does_not_load_the_plugins(save):
    # Listing the backends loads every plugin (the OpenCL one maps LLVM): only a session that
    # names another provider, or get_available_providers(), may do that.
    shipped = sorted((Path(quilt.__file__).parent / "quilt-backends").glob("*.so"))
    if not shipped:
        pytest.skip("the package carries no plugin (built without OpenCL)")
    script = (
        "import quilt.onnxruntime as ort\n"
        "def loaded():\n"
        f"    return {shipped[0].name!r} in open('/proc/self/maps').read()\n"
        f"ort.InferenceSession({save(mlp_bytes())!r})\n"
        f"ort.InferenceSession({save(mlp_bytes(), 'b.onnx')!r}, providers=['CPUExecutionProvider'])\n"
        "print(loaded())\n"
        "ort.get_available_providers()\n"
        "print(loaded())\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "True"], out.stdout + out.stderr
