"""End-to-end tests of the executable cache (SessionOptions::cache_dir, `--cache-dir`): separate
`quilt` processes on one cache directory.

usage: test_executable_cache.py QUILT_BINARY WORK_DIR
- opencl (when `quilt devices` lists it): the first process compiles and stores the patch, the
  second loads it and compiles nothing (its report and `quilt plan --json` say "loaded"), with
  outputs equal to the first's and to the CPU's; another model (other weights, same graph) gets
  an entry of its own; a truncated, a corrupt, a foreign (another key's) and a garbage entry are
  each ignored with a warning naming what is wrong, compiled again and replaced; a disk that
  fills partway through writing an entry (RLIMIT_FSIZE) leaves a warning and nothing behind.
- the example plugin (QUILT_EXAMPLE_PLUGIN), which has no executable_serialize/deserialize, and
  the same plugin presenting an ABI 1.1 table (QUILT_EXAMPLE_FAULTY_PLUGIN with a struct_size
  that ends at event_timestamps): both run, store nothing and say why.
The models are built here with onnx's helper. Prints one line per failed check and
"N passed, N failed"; exit code 77 (skipped) when neither opencl nor the example plugin exists.
"""
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from cli_checks import check, configure, finish, quilt
from onnx import TensorProto, helper, numpy_helper

QUILT, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
configure(QUILT)
shutil.rmtree(WORK, ignore_errors=True)
WORK.mkdir(parents=True)


def make_model(path, seed):
    """Conv + Relu + MatMul + Add: weights the OpenCL plugin packs (conv, gemm) and uploads."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal([8, 3, 3, 3]).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal([8]).astype(np.float32), "b")
    m = numpy_helper.from_array(rng.standard_normal([36, 5]).astype(np.float32), "m")
    c = numpy_helper.from_array(rng.standard_normal([5]).astype(np.float32), "c")
    shape = numpy_helper.from_array(np.array([2, 8 * 6 * 6 // 36, 36], np.int64), "shape")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["y"], ["r"], name="relu"),
        helper.make_node("Reshape", ["r", "shape"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "m"], ["p"], name="mm"),
        helper.make_node("Add", ["p", "c"], ["out"], name="add"),
    ]
    graph = helper.make_graph(nodes, "cached",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8, 5])],
                              [w, b, m, c, shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def run(model, backend, cache, out_dir, *extra, env=None):
    return quilt("run", model, "--backend", backend, "--no-cost-rule", "--input", f"x={X}",
                 "--cache-dir", cache, "--output-dir", out_dir, *extra, env=env)


def summary(result):
    m = re.search(r"executable cache: (\d+) loaded, (\d+) compiled and stored, (\d+) compiled, "
                  r"not stored", result.stdout)
    return tuple(int(g) for g in m.groups()) if m else None


def entries(cache):
    return sorted(Path(cache).glob("*.qexe"))


model_a, model_b = WORK / "a.onnx", WORK / "b.onnx"
make_model(model_a, 1)
make_model(model_b, 2)
X = WORK / "x.npy"
np.save(X, np.random.default_rng(0).standard_normal([2, 3, 6, 6]).astype(np.float32))

devices = quilt("devices").stdout
have_opencl = re.search(r"^backend opencl", devices, re.M) is not None
example = os.environ.get("QUILT_EXAMPLE_PLUGIN", "")
faulty = os.environ.get("QUILT_EXAMPLE_FAULTY_PLUGIN", "")
if not have_opencl and not example:
    print("skipped: no opencl device and no example plugin")
    sys.exit(77)

if have_opencl:
    cache = WORK / "cache"
    cpu = quilt("run", model_a, "--input", f"x={X}", "--output-dir", WORK / "cpu")
    check("cpu run", cpu.returncode == 0, cpu.stderr)
    reference = np.load(WORK / "cpu" / "out.npy")

    first = run(model_a, "opencl", cache, WORK / "first")
    check("first process runs", first.returncode == 0, first.stderr)
    check("first process compiles and stores", summary(first) == (0, 1, 0), first.stdout)
    check("one entry stored", len(entries(cache)) == 1, entries(cache))
    check("no temporary file left", not list(cache.glob("*.tmp*")), list(cache.iterdir()))

    second = run(model_a, "opencl", cache, WORK / "second")
    check("second process runs", second.returncode == 0, second.stderr)
    check("second process compiles nothing", summary(second) == (1, 0, 0), second.stdout)
    check("second process warns of nothing", "warning" not in second.stderr, second.stderr)
    out1, out2 = np.load(WORK / "first" / "out.npy"), np.load(WORK / "second" / "out.npy")
    check("outputs equal across processes", np.array_equal(out1, out2), np.abs(out1 - out2).max())
    check("outputs match the cpu", np.allclose(out2, reference, rtol=1e-4, atol=1e-4),
          np.abs(out2 - reference).max())

    plan = quilt("plan", model_a, "--backend", "opencl", "--no-cost-rule", "--cache-dir", cache,
                 "--format", "json")
    check("plan runs", plan.returncode == 0, plan.stderr)
    if plan.returncode == 0:
        patch = json.loads(plan.stdout)["patches"][0]
        check("plan says loaded", patch["cache"] == "loaded" and
              patch["cache_detail"] == str(entries(cache)[0]), patch)
    text = quilt("plan", model_a, "--backend", "opencl", "--no-cost-rule", "--cache-dir", cache)
    check("plan text says loaded", "cache: loaded" in text.stdout, text.stdout)

    # Other weights, same graph: another key, another entry; outputs of its own.
    other = run(model_b, "opencl", cache, WORK / "other")
    check("other weights compile", summary(other) == (0, 1, 0), other.stdout)
    check("other weights have their own entry", len(entries(cache)) == 2, entries(cache))
    check("other weights give other outputs",
          not np.array_equal(np.load(WORK / "other" / "out.npy"), out1))
    # Other device options: another key.
    opts = run(model_a, "opencl", cache, WORK / "opts", "--backend-option", "opencl:gemm=own")
    check("other options compile", summary(opts) == (0, 1, 0), opts.stdout)

    # Damaged entries: each is ignored with a warning saying what is wrong, then replaced.
    for p in entries(cache):
        p.unlink()
    run(model_a, "opencl", cache, WORK / "fresh")
    [entry] = entries(cache)
    good = entry.read_bytes()

    def damaged(name, data, expect):
        entry.write_bytes(data)
        r = run(model_a, "opencl", cache, WORK / name)
        check(f"{name}: runs", r.returncode == 0, r.stderr)
        check(f"{name}: warns", "warning" in r.stderr and expect in r.stderr and
              str(entry) in r.stderr, r.stderr)
        check(f"{name}: recompiled and stored", summary(r) == (0, 1, 0), r.stdout)
        check(f"{name}: outputs", np.array_equal(np.load(WORK / name / "out.npy"), out1))
        again = run(model_a, "opencl", cache, WORK / (name + "-again"))
        check(f"{name}: replaced by a good entry", summary(again) == (1, 0, 0), again.stdout)

    damaged("truncated", good[: len(good) // 2], "truncated")
    damaged("header-only", good[:100], "truncated")
    corrupt = bytearray(good)
    corrupt[-10] ^= 0xFF
    damaged("corrupt", bytes(corrupt), "corrupt (checksum mismatch)")
    damaged("garbage", b"x" * 5000, "not a Quilt executable cache entry")
    foreign = bytearray(good)
    foreign[16] ^= 0x01  # the key in the header
    damaged("foreign", bytes(foreign), "its key is")
    # The disk fills partway through writing an entry: the process may write files of at most
    # half the entry's size (RLIMIT_FSIZE; SIGXFSZ ignored, as the disposition survives exec, so
    # the write fails with EFBIG as on a full disk). The session still runs, the warning says what
    # failed, and neither the entry nor its temporary file is left for a later session to load.
    entry_bytes = len(good)
    for p in entries(cache):
        p.unlink()

    def small_disk():
        resource.setrlimit(resource.RLIMIT_FSIZE, (entry_bytes // 2, entry_bytes // 2))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    full = subprocess.run(
        [str(QUILT), "run", model_a, "--backend", "opencl", "--no-cost-rule", "--input", f"x={X}",
         "--cache-dir", cache, "--output-dir", WORK / "disk-full"],
        capture_output=True, text=True, timeout=300, preexec_fn=small_disk)
    check("disk full mid-entry: runs", full.returncode == 0, full.stderr)
    check("disk full mid-entry: warns what failed",
          "warning" in full.stderr and "File too large" in full.stderr and
          "nothing stored in the executable cache" in full.stderr, full.stderr)
    check("disk full mid-entry: compiled, not stored", summary(full) == (0, 0, 1), full.stdout)
    check("disk full mid-entry: outputs",
          full.returncode == 0 and np.array_equal(np.load(WORK / "disk-full" / "out.npy"), out1))
    check("disk full mid-entry: no entry or temporary file left",
          not entries(cache) and not list(cache.glob("*.tmp*")), list(cache.iterdir()))
    after = run(model_a, "opencl", cache, WORK / "after-full")
    check("after a full disk: the next process compiles and stores", summary(after) == (0, 1, 0),
          after.stdout + after.stderr)
    check("after a full disk: the entry is whole", entries(cache) and
          entries(cache)[0].stat().st_size == entry_bytes, entries(cache))

    # An unreadable directory position (a file where the directory should be): runs, warns.
    blocked = WORK / "blocked"
    blocked.write_text("a file, not a directory")
    r = run(model_a, "opencl", blocked, WORK / "blocked-out")
    check("unwritable cache dir: runs", r.returncode == 0, r.stderr)
    check("unwritable cache dir: says so", summary(r) == (0, 0, 1) and "warning" in r.stderr,
          r.stdout + r.stderr)

if example:
    cache = WORK / "example-cache"
    r = run(model_a, "example,cpu", cache, WORK / "example", "--plugin", example)
    check("example runs", r.returncode == 0, r.stderr)
    check("example stores nothing", summary(r) and summary(r)[:2] == (0, 0) and not entries(cache),
          r.stdout)
    plan = quilt("plan", model_a, "--backend", "example,cpu", "--no-cost-rule", "--plugin", example,
                 "--cache-dir", cache, "--format", "json")
    check("example plan runs", plan.returncode == 0, plan.stderr)
    if plan.returncode == 0:
        patches = [p for p in json.loads(plan.stdout)["patches"] if p["backend"] == "example:0"]
        check("example plan says why", patches and all(
            p["cache"] == "compiled" and "has no executable_serialize" in p["cache_detail"]
            for p in patches), patches)
    if faulty:
        # An ABI 1.1 table: struct_size ends at event_timestamps (22 pointers after two u32s).
        size = 8 + 21 * 8
        r = run(model_a, "example,cpu", cache, WORK / "old", "--plugin", faulty,
                env={"QUILT_EXAMPLE_STRUCT_SIZE": str(size), "QUILT_EXAMPLE_ABI_MINOR": "1"})
        check("ABI 1.1 plugin runs", r.returncode == 0, r.stderr)
        check("ABI 1.1 plugin stores nothing",
              summary(r) and summary(r)[:2] == (0, 0) and not entries(cache), r.stdout)
        ref = np.load(WORK / "example" / "out.npy")
        check("ABI 1.1 plugin outputs", np.array_equal(np.load(WORK / "old" / "out.npy"), ref))

finish()
