"""End-to-end tests of the `quilt` command line: exit codes, messages, outputs.

usage: test_cli.py QUILT_BINARY TEST_MODELS_DIR REPO_ROOT
Prints one line per failed check and a closing "N passed, N failed" line.
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

QUILT, MODELS, ROOT = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
passed = failed = 0


def quilt(*args, env=None):
    return subprocess.run([str(QUILT), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=None if env is None else {**os.environ, **env})


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def expect(name, args, code, *parts, stream="stderr"):
    r = quilt(*args)
    text = getattr(r, stream)
    ok = r.returncode == code and all(p in text for p in parts)
    check(name, ok, f"exit {r.returncode} (want {code}); {stream}: {text.strip()[:600]!r}; want {parts}")
    return r


# Help and usage
expect("help", ["--help"], 0, "run MODEL", "devices", stream="stdout")
expect("run --help", ["run", "--help"], 0, "--input NAME=FILE.npy", "--dim NAME=VALUE", "--output-dir",
       "--iterations", "--backend", "--threads", stream="stdout")
expect("devices --help", ["devices", "--help"], 0, "usage: quilt devices", stream="stdout")
expect("no command", [], 2, "usage: quilt")
expect("unknown command", ["fly"], 2, "unknown command 'fly'")
expect("run without model", ["run"], 2, "needs a MODEL")
expect("unknown option", ["run", MODELS / "add_relu.onnx", "--speed", "9"], 2, "unknown option '--speed'")
expect("bad threads", ["run", MODELS / "add_relu.onnx", "--threads", "many"], 2,
       "--threads expects a non-negative integer, got 'many'")
expect("bad optimization level", ["run", MODELS / "add_relu.onnx", "--optimization-level", "5"], 2,
       "optimization_level is 5")
expect("bad input syntax", ["run", MODELS / "add_relu.onnx", "--input", "x"], 2, "--input expects NAME=VALUE")
expect("bad log level", ["run", MODELS / "add_relu.onnx", "--log-level", "loud"], 2, "--log-level expects")

# Bad models
expect("missing model", ["run", MODELS / "nope.onnx"], 2, "nope.onnx", "does not exist")
expect("truncated model", ["run", MODELS / "truncated.onnx"], 2, "truncated.onnx", "not a valid ONNX protobuf")
expect("not onnx", ["run", MODELS / "not_onnx.onnx"], 2, "not_onnx.onnx")
expect("cyclic model", ["run", MODELS / "cycle.onnx"], 2, "cycle", '"first"', '"second"')
expect("unknown ops", ["run", MODELS / "unknown_op.onnx"], 1, 'FooBar (opset 17) at nodes "foo1", "foo2"',
       'com.example.Frobnicate (opset 1) at node "frob"')
expect("external data missing", ["run", MODELS / "external_missing" / "model.onnx"], 2, "nothing_here.bin")
expect("huge initializer", ["run", MODELS / "huge_initializer.onnx"], 1, "initializer 'giant'", "more than this machine")
expect("unknown backend", ["run", MODELS / "add_relu.onnx", "--backend", "tpu"], 2, "unknown backend 'tpu'")

# Bad inputs
expect("unknown input", ["run", MODELS / "add_relu.onnx", "--input", f"z={MODELS / 'add_relu_x.npy'}"], 2,
       "unknown input 'z'")
expect("wrong dtype", ["run", MODELS / "add_relu.onnx", "--input", f"x={MODELS / 'int_input.npy'}"], 2,
       "input 'x' has dtype int64, expected float32")
expect("missing npy", ["run", MODELS / "add_relu.onnx", "--input", "x=/nonexistent.npy"], 2,
       "cannot open npy file '/nonexistent.npy'")
with tempfile.TemporaryDirectory() as tmp:
    bad = Path(tmp) / "bad.npy"
    bad.write_bytes(b"\x93NUMPY\x01\x00garbage")
    expect("corrupt npy", ["run", MODELS / "add_relu.onnx", "--input", f"x={bad}"], 2, "bad.npy")

    # Real runs: given input, written outputs equal numpy's
    r = expect("run with input", ["run", MODELS / "add_relu.onnx", "--input", f"x={MODELS / 'add_relu_x.npy'}",
                                  "--output-dir", tmp, "--iterations", "3"], 0, "y: float32 [2, 4]",
               "latency: median", stream="stdout")
    out = Path(tmp) / "y.npy"
    check("output file written", out.exists(), str(list(Path(tmp).iterdir())))
    if out.exists():
        got, want = np.load(out), np.load(MODELS / "add_relu_y.npy")
        check("output matches numpy", got.shape == want.shape and np.allclose(got, want), f"{got} vs {want}")

# Generated inputs with a symbolic dim
expect("generated inputs", ["run", MODELS / "add_relu.onnx", "--dim", "batch=3"], 0, "y: float32 [3, 4]",
       stream="stdout")
expect("unknown dim", ["run", MODELS / "add_relu.onnx", "--dim", "seq=3"], 2,
       "no input has a symbolic dim named 'seq' (symbolic dims: batch)")
expect("huge generated input", ["run", MODELS / "add_relu.onnx", "--dim", "batch=100000000000"], 1,
       "generating input 'x'", "more than this machine")
expect("devices", ["devices"], 0, "backend cpu", "OpenBLAS, core", stream="stdout")
# The OpenBLAS core: QUILT_OPENBLAS_CORETYPE forces one; an inherited OPENBLAS_CORETYPE that is
# not the CPU's best is replaced, and `quilt devices` says so.
r = quilt("devices", env={"QUILT_OPENBLAS_CORETYPE": "Haswell"})
check("forced blas core", "core Haswell (QUILT_OPENBLAS_CORETYPE)" in r.stdout, r.stdout)
r = quilt("devices", env={"QUILT_OPENBLAS_CORETYPE": "NoSuchCore"})
check("unknown forced blas core", "QUILT_OPENBLAS_CORETYPE asked for 'NoSuchCore', which this OpenBLAS does not know"
      in r.stdout and r.returncode == 0, r.stdout)
r = quilt("devices", env={"OPENBLAS_CORETYPE": "Prescott"})
check("inherited blas core replaced",
      "core Prescott" not in r.stdout and "OPENBLAS_CORETYPE=Prescott from the environment not used" in r.stdout,
      r.stdout)

# The embedded default model
digits = ROOT / "tools" / "models"
with tempfile.TemporaryDirectory() as tmp:
    expect("demo model", ["run", digits / "digits_cnn.onnx", "--input", f"image={digits / 'digits_test_images.npy'}",
                          "--output-dir", tmp], 0, "probabilities: float32 [360, 10]", stream="stdout")
    p = Path(tmp) / "probabilities.npy"
    if p.exists():
        import onnxruntime as ort
        sess = ort.InferenceSession(str(digits / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
        want = sess.run(None, {"image": np.load(digits / "digits_test_images.npy")})[0]
        got = np.load(p)
        check("demo model matches onnxruntime", np.allclose(got, want, rtol=1e-4, atol=1e-6),
              f"max diff {np.abs(got - want).max()}")
        labels = np.load(digits / "digits_test_labels.npy")
        check("demo accuracy equals onnxruntime's", (got.argmax(1) == labels).mean() == (want.argmax(1) == labels).mean())

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
