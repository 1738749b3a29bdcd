"""An unchanged onnxruntime client (tests/python/ort_client) run three ways: on onnxruntime, with
`python -m quilt.as_onnxruntime` and with QUILT_AS_ONNXRUNTIME=1. Quilt's answers and the
client's error handling must match onnxruntime's, and the client must really be on Quilt."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import mlp_bytes

import quilt

CLIENT = Path(__file__).resolve().parent / "ort_client"
QUILT_ORT_DIR = str(Path(quilt.__file__).parent / "onnxruntime")


def run(args, env_extra=None, cwd=CLIENT):
    env = {k: v for k, v in os.environ.items() if k != "QUILT_AS_ONNXRUNTIME"}
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.fixture
def model(tmp_path):
    path = tmp_path / "scorer.onnx"
    path.write_bytes(mlp_bytes(seed=11))
    return str(path)


def report(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_client_runs_unchanged_on_quilt_and_agrees_with_onnxruntime(model):
    on_ort = report(run(["score_cli.py", model]))
    switched = report(run(["-m", "quilt.as_onnxruntime", "score_cli.py", model, "spawn"]))
    by_env = report(run(["score_cli.py", model, "spawn"], {"QUILT_AS_ONNXRUNTIME": "1"}))
    as_module = report(run(["-m", "quilt.as_onnxruntime", "-m", "score_cli", model]))
    assert not on_ort["module"].startswith(QUILT_ORT_DIR)
    for r in (switched, by_env, as_module):
        assert r["module"].startswith(QUILT_ORT_DIR), r["module"]
        assert r["version"] == on_ort["version"] + "+quilt." + quilt.__version__
        assert r["providers"] == on_ort["providers"] == ["CPUExecutionProvider"]
        assert r["features"] == on_ort["features"] == 8
        np.testing.assert_allclose(r["scores"], on_ort["scores"], rtol=1e-5, atol=1e-6)
        assert r["errors"] == on_ort["errors"] == ["cannot load MODEL.missing: NoSuchFile", "bad batch: InvalidArgument"]
    # Python processes the program starts are switched too.
    assert switched["child_module"].startswith(QUILT_ORT_DIR)
    assert by_env["child_module"].startswith(QUILT_ORT_DIR)


def test_the_switch_serves_onnxruntimes_submodules_and_nothing_it_lacks(tmp_path):
    script = tmp_path / "imports.py"
    script.write_text(
        "import onnxruntime, onnxruntime.capi.onnxruntime_pybind11_state as C\n"
        "from onnxruntime.capi._pybind_state import InvalidArgument\n"
        "from onnxruntime.capi.onnxruntime_inference_collection import InferenceSession\n"
        "import onnxruntime.backend\n"
        "import quilt.onnxruntime as q\n"
        "assert onnxruntime is q and C.InvalidArgument is InvalidArgument and InferenceSession is q.InferenceSession\n"
        "assert onnxruntime.backend.prepare is __import__('quilt.backend').backend.prepare\n"
        "try:\n"
        "    import onnxruntime.transformers\n"
        "except ModuleNotFoundError as e:\n"
        "    print('missing', e.name)\n")
    result = run(["-m", "quilt.as_onnxruntime", str(script)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "missing onnxruntime.transformers"


def test_the_switch_keeps_the_programs_argv_exit_code_and_errors(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("import sys\nprint(sys.argv)\nsys.exit(int(sys.argv[1]))\n")
    result = run(["-m", "quilt.as_onnxruntime", str(script), "3", "--flag"], cwd=tmp_path)
    assert result.returncode == 3
    assert result.stdout.strip() == str([str(script), "3", "--flag"])
    boom = tmp_path / "boom.py"
    boom.write_text("raise RuntimeError('from the program')\n")
    result = run(["-m", "quilt.as_onnxruntime", str(boom)], cwd=tmp_path)
    assert result.returncode == 1 and "RuntimeError: from the program" in result.stderr
    usage = run(["-m", "quilt.as_onnxruntime"], cwd=tmp_path)
    assert usage.returncode == 2 and "usage: python -m quilt.as_onnxruntime" in usage.stderr
    missing = run(["-m", "quilt.as_onnxruntime", "no_such_script.py"], cwd=tmp_path)
    assert missing.returncode == 2 and "cannot open 'no_such_script.py'" in missing.stderr
