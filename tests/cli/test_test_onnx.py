"""`quilt test-onnx` classification, isolation and outputs, on cases made for the purpose:
a pass, a wrong answer, an unsupported op, a malformed case, and a crash (a case whose
process is killed), plus the JSON and manifest files.

usage: test_test_onnx.py QUILT_BINARY WORK_DIR
"""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUILT, WORK = Path(sys.argv[1]), Path(sys.argv[2])
if WORK.exists():
    shutil.rmtree(WORK)
cases = WORK / "mini"
cases.mkdir(parents=True)
passed = failed = 0


def check(name, cond, detail=""):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    if not cond:
        print(f"FAIL {name}: {detail}")


def case(name, op, x, y, **attrs):
    d = cases / name
    (d / "test_data_set_0").mkdir(parents=True)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], name,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(y.shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, d / "model.onnx")
    (d / "test_data_set_0" / "input_0.pb").write_bytes(numpy_helper.from_array(x).SerializeToString())
    (d / "test_data_set_0" / "output_0.pb").write_bytes(numpy_helper.from_array(y).SerializeToString())


x = np.array([-1.0, 2.0, -3.0], dtype=np.float32)
case("test_relu_ok", "Relu", x, np.maximum(x, 0))
case("test_relu_wrong", "Relu", x, np.array([0.0, 2.5, 0.0], dtype=np.float32))
case("test_unknown_op", "NoSuchOp", x, x)
(cases / "test_broken").mkdir()
(cases / "test_broken" / "model.onnx").write_text("not a model")

run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--json", str(WORK / "r.json"),
                      "--write-manifest", str(WORK / "manifest.txt")], capture_output=True, text=True, timeout=120)
out = run.stdout
check("exit code 1 with a wrong answer", run.returncode == 1, f"{run.returncode} {run.stderr}")
check("wrong answer reported with its worst element", "fail        mini/test_relu_wrong: output 'y': 1 of 3 elements differ; worst at [1]: got 2, expected 2.5" in out, out)
check("unsupported op reported", "unsupported mini/test_unknown_op" in out and "NoSuchOp (opset 17)" in out, out)
check("malformed case is an error", "error       mini/test_broken" in out, out)
check("closing line", "1 passed, 2 failed, 1 unsupported" in out, out)
report = json.loads((WORK / "r.json").read_text())
statuses = {c["name"]: c["status"] for c in report["cases"]}
check("json statuses", statuses == {"mini/test_relu_ok": "pass", "mini/test_relu_wrong": "fail",
                                    "mini/test_unknown_op": "unsupported", "mini/test_broken": "error"}, statuses)
check("json summary", report["summary"]["pass"] == 1 and report["summary"]["cases"] == 4
      and report["summary"]["backend"] == "cpu" and set(report["cases"][0]) == {"name", "set", "backend", "status", "message", "seconds"},
      report["summary"])
check("manifest lists the passing case", (WORK / "manifest.txt").read_text().splitlines()[-1] == "mini/test_relu_ok")

# --expect: a listed case that does not pass is a regression; an unlisted pass is announced
(WORK / "expect.txt").write_text("# comment\nmini/test_relu_wrong\n")
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--expect", str(WORK / "expect.txt")],
                     capture_output=True, text=True, timeout=120)
check("regression fails", run.returncode == 1 and "REGRESSION mini/test_relu_wrong: fail" in run.stdout, run.stdout)
check("new pass announced", "NEW PASS mini/test_relu_ok" in run.stdout, run.stdout)
(WORK / "expect.txt").write_text("mini/test_relu_ok\n")
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--expect", str(WORK / "expect.txt")],
                     capture_output=True, text=True, timeout=120)
# No regression, but an unlisted case gives a wrong answer (and one errs): still a failure.
check("unlisted wrong answer fails", run.returncode == 1 and "0 regressions" in run.stdout, run.stdout)
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--expect", str(WORK / "expect.txt"),
                      "--filter", "relu_ok"], capture_output=True, text=True, timeout=120)
check("no regression and no failure passes", run.returncode == 0 and "0 regressions" in run.stdout, run.stdout)

# A crash and a hang in a case do not stop the run: a tiny timeout turns a slow case into
# "timeout", and the other cases still run.
big = np.random.default_rng(0).standard_normal((1 << 24,)).astype(np.float32)
case("test_slow", "Sigmoid", big, 1 / (1 + np.exp(-big)))
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--timeout", "0", "--filter", "slow|ok"],
                     capture_output=True, text=True, timeout=120)
check("timeout classified", "timeout     mini/test_slow" in run.stdout, run.stdout)

# A case with nothing to compare is an error, not a pass: no output_*.pb, or no data set at all.
case("test_no_outputs", "Relu", x, np.maximum(x, 0))
(cases / "test_no_outputs" / "test_data_set_0" / "output_0.pb").unlink()
case("test_no_data_set", "Relu", x, np.maximum(x, 0))
shutil.rmtree(cases / "test_no_data_set" / "test_data_set_0")
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--filter", "no_outputs|no_data_set"],
                     capture_output=True, text=True, timeout=120)
check("no expected outputs is an error",
      run.returncode == 1 and "error       mini/test_no_outputs: data set 0 has no output_*.pb files" in run.stdout,
      run.stdout)
check("no data set is an error", "error       mini/test_no_data_set: no test_data_set_* directory" in run.stdout,
      run.stdout)
check("nothing passes", "0 passed, 2 failed, 0 unsupported" in run.stdout, run.stdout)

# Bad usage
run = subprocess.run([str(QUILT), "test-onnx"], capture_output=True, text=True)
check("no path is bad usage", run.returncode == 2 and "needs at least one PATH" in run.stderr, run.stderr)
run = subprocess.run([str(QUILT), "test-onnx", str(WORK / "nothing")], capture_output=True, text=True)
check("missing path is bad usage", run.returncode == 2 and "not a test case or a directory" in run.stderr, run.stderr)
run = subprocess.run([str(QUILT), "test-onnx", str(cases), "--filter", "("], capture_output=True, text=True)
check("bad regex is bad usage", run.returncode == 2 and "not a valid regex" in run.stderr, run.stderr)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
