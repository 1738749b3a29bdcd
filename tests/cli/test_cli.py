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
# Sanitizer builds (tests/CMakeLists.txt sets these) run slower, and ASan and TSan reserve
# terabytes of address space for their shadow memory, so a process under RLIMIT_AS cannot start
# there (TSan stops with "CHECK failed: sanitizer_allocator_primary64.h").
TIMEOUT = 120 * int(os.environ.get("QUILT_TIME_SCALE", "1"))
SHADOW = any(s in os.environ.get("QUILT_SANITIZE", "") for s in ("address", "thread"))


def quilt(*args, env=None):
    return subprocess.run([str(QUILT), *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT,
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
       "--threads expects an integer between 0 and 4096, got 'many'")
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

# Hardening: each of these was accepted, misread or slow before.
expect("threads above the limit", ["run", MODELS / "add_relu.onnx", "--threads", "5000"], 2,
       "--threads expects an integer between 0 and 4096, got '5000'")
expect("threads that wrap an int", ["run", MODELS / "add_relu.onnx", "--threads", "4294967297"], 2,
       "--threads expects an integer between 0 and 4096, got '4294967297'")
expect("input given twice", ["run", MODELS / "add_relu.onnx", "--input", f"x={MODELS / 'add_relu_x.npy'}",
                             "--input", f"x={MODELS / 'add_relu_x.npy'}"], 2, "--input x is given twice")
expect("dim given twice", ["run", MODELS / "add_relu.onnx", "--dim", "batch=2", "--dim", "batch=3"], 2,
       "--dim batch is given twice")
expect("plugin that is not a library", ["run", MODELS / "add_relu.onnx", "--plugin", "/etc/passwd"], 2,
       "--plugin /etc/passwd: not loaded: cannot load")
expect("run --help exit codes", ["run", "--help"], 0, "Exit codes: 0 ok", "2 bad usage", stream="stdout")
expect("--version in help", ["--help"], 0, "quilt --version", stream="stdout")
expect("version", ["--version"], 0, "quilt 0.", stream="stdout")
expect("declared output contradicts inference", ["run", MODELS / "declared_wrong_dtype.onnx"], 2,
       "output 'y' has dtype float32, but the graph declares int64")
expect("opset from the future", ["run", MODELS / "opset_99.onnx"], 1, "imports opset 99 of domain 'ai.onnx'",
       "the newest this Quilt implements is")
expect("IR version from the future", ["run", MODELS / "ir_99.onnx"], 1, "IR version 99")
expect("opset_import version 0", ["run", MODELS / "opset_0.onnx"], 2, "has version 0, expected >= 1")
expect("external offset that is not a number", ["run", MODELS / "external_offset_text" / "model.onnx"], 2,
       "initializer 'w'", "external-data offset is '12abc'")
expect("external offset beyond int64", ["run", MODELS / "external_offset_huge" / "model.onnx"], 2,
       "offset is '99999999999999999999'")


def npy_header(shape_text, descr="<f4"):
    header = ("{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)).encode()
    header += b" " * ((64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


with tempfile.TemporaryDirectory() as tmp:
    tmp = Path(tmp)
    # A small file that declares 6 GB fails at once, before allocating: under a 1 GiB address-space
    # limit, allocating first would end in "out of memory" instead.
    huge = tmp / "huge.npy"
    huge.write_bytes(npy_header("(1500000000,)") + b"\0" * 128)
    import resource

    def cap_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    r = subprocess.run([str(QUILT), "run", str(MODELS / "add_relu.onnx"), "--input", f"x={huge}"],
                       capture_output=True, text=True, timeout=TIMEOUT,
                       preexec_fn=None if SHADOW else cap_memory)
    check("npy declaring more than the file holds", r.returncode == 2 and
          "data is truncated: expected 6000000000 bytes for shape [1500000000], the file has 128" in r.stderr,
          f"exit {r.returncode}: {r.stderr[:400]!r}")
    # A dim of 2^31 declared by the model, never run: the session is made within the same cap.
    r = subprocess.run([str(QUILT), "plan", str(MODELS / "pad_declared_huge.onnx")],
                       capture_output=True, text=True, timeout=TIMEOUT,
                       preexec_fn=None if SHADOW else cap_memory)
    check("session of a model declaring a 2^31 dim", r.returncode == 0 and "Pad" in r.stdout,
          f"exit {r.returncode}: {r.stderr[:400]!r}")
    r = quilt("plan", MODELS / "pad_empty_wide.onnx")
    check("session of an empty input with dims of 2^62", r.returncode == 0 and "Pad" in r.stdout,
          f"exit {r.returncode}: {r.stderr[:400]!r}")
    for text, bad in [("(-2, 4)", "'-2'"), ("(2x, 4)", "'2x'"), ("(100000000000000000000, 4)", "'100000000000000000000'")]:
        f = tmp / "bad_shape.npy"
        f.write_bytes(npy_header(text) + b"\0" * 32)
        expect(f"npy shape {text}", ["run", MODELS / "add_relu.onnx", "--input", f"x={f}"], 2,
               f"has dim {bad}, expected a non-negative integer")
    ok = tmp / "spaced.npy"
    ok.write_bytes(npy_header("( 2 ,4 )") + np.arange(8, dtype=np.float32).tobytes())
    expect("npy shape with spaces", ["run", MODELS / "add_relu.onnx", "--input", f"x={ok}"], 0,
           "y: float32 [2, 4]", stream="stdout")

    # Distinct outputs never share a file; names that are not file names are escaped.
    out_dir = tmp / "names"
    r = expect("output names", ["run", MODELS / "output_names.onnx", "--output-dir", out_dir], 0,
               "wrote 4 output files", stream="stdout")
    files = sorted(p.name for p in out_dir.iterdir()) if out_dir.exists() else []
    check("output files escaped and distinct", files == ["%2E%2E.npy", "a%252Fb.npy", "a%2Fb.npy", "a_b.npy"], files)
    if files:
        x = np.load(out_dir / "%2E%2E.npy")  # Identity
        check("escaped files hold their outputs", np.array_equal(np.load(out_dir / "a%2Fb.npy"), np.maximum(x, 0))
              and np.array_equal(np.load(out_dir / "a_b.npy"), -x) and
              np.array_equal(np.load(out_dir / "a%252Fb.npy"), np.abs(x)), files)
    # An output directory that cannot be created is reported before the model runs.
    (tmp / "a_file").write_text("x")
    r = expect("output dir that cannot be created", ["run", MODELS / "add_relu.onnx", "--output-dir",
                                                     tmp / "a_file" / "sub"], 2,
               "--output-dir", "cannot be created")
    check("nothing ran", r.stdout == "", r.stdout)

# Progress of long runs on a terminal, and none for scripts.
digits = ROOT / "tools" / "models"
long_run = ["run", digits / "digits_cnn.onnx", "--input", f"image={digits / 'digits_test_images.npy'}",
            "--iterations", "4000"]  # about 2 s
r = quilt(*long_run)
check("no progress without a terminal", r.returncode == 0 and "run " not in r.stderr, r.stderr[:300])
import pty
pid, fd = pty.fork()
if pid == 0:
    os.execv(str(QUILT), [str(QUILT), *map(str, long_run)])
seen = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
os.waitpid(pid, 0)
check("progress on a terminal", b"/4000" in seen and b"latency: median" in seen, seen[-300:])

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
