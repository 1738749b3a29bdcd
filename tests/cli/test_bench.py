"""End-to-end tests of `quilt bench`: the text and JSON reports, the Chrome trace of --profile
(on the CPU alone and split between the example plugin and the CPU) and bad usage.

usage: test_bench.py QUILT_BINARY WORK_DIR
The model is built here with onnx's helper. The example plugin is QUILT_EXAMPLE_PLUGIN (set by the
CTest registration); the checks that need it are skipped, and say so, without it. Prints one line
per failed check and "N passed, N failed".
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUILT, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
WORK.mkdir(parents=True, exist_ok=True)
passed = failed = 0


def quilt(*args):
    return subprocess.run([str(QUILT), *map(str, args)], capture_output=True, text=True, timeout=120)


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# y = Softmax(Relu(x @ W + b)) * 2: MatMul, Add and Relu are what the example plugin runs, Softmax
# and Mul stay on the CPU, so example,cpu has a patch on each lane and copies between them. The
# batch dim is symbolic to exercise --dim.
rng = np.random.default_rng(0)
model = helper.make_model(helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["mm_out"], name="mm0"),
     helper.make_node("Add", ["mm_out", "b"], ["add_out"], name="add0"),
     helper.make_node("Relu", ["add_out"], ["r0_out"], name="r0"),
     helper.make_node("Softmax", ["r0_out"], ["sm_out"], name="sm", axis=-1),
     helper.make_node("Mul", ["sm_out", "two"], ["y"], name="scale")],
    "bench", [vi("x", ["batch", 64])], [vi("y", ["batch", 32])],
    [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "W"),
     numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b"),
     numpy_helper.from_array(np.full(32, 2.0, np.float32), "two")]),
    opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
MODEL = WORK / "bench.onnx"
onnx.save(model, MODEL)

plugin = os.environ.get("QUILT_EXAMPLE_PLUGIN")
PLUGIN = Path(plugin) if plugin and Path(plugin).exists() else None

NUMBER = r"([0-9]+(?:\.[0-9]+)?)"


def check_text(label, args, iterations, warmup):
    r = quilt("bench", MODEL, *args)
    check(f"{label}: exit 0", r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()[:600]!r}")
    out = r.stdout
    creation = re.search(rf"^session creation: {NUMBER} ms$", out, re.M)
    warm = re.search(r"^warm-up: ([0-9]+) runs?$", out, re.M)
    lat = re.search(rf"^latency: median {NUMBER} ms, p90 {NUMBER} ms, min {NUMBER} ms, "
                    rf"mean {NUMBER} ms over ([0-9]+) runs?$", out, re.M)
    mem = re.search(rf"^peak memory: {NUMBER} MiB", out, re.M)
    plan = re.search(r"^plan: ([0-9]+) patch(?:es)? \((.*)\), ([0-9]+) transfers?$", out, re.M)
    check(f"{label}: fields", all((creation, warm, lat, mem, plan)), repr(out))
    if not all((creation, warm, lat, mem, plan)):
        return None
    median, p90, lo, mean = (float(lat.group(i)) for i in range(1, 5))
    check(f"{label}: creation > 0", float(creation.group(1)) > 0, out)
    check(f"{label}: warm-up count", int(warm.group(1)) == warmup, out)
    check(f"{label}: run count", int(lat.group(5)) == iterations, out)
    check(f"{label}: latencies positive and ordered", 0 < lo <= median <= p90 and lo <= mean, out)
    check(f"{label}: peak memory > 0", float(mem.group(1)) > 0, out)
    per_backend = dict(part.rsplit(" ", 1) for part in plan.group(2).split(", "))
    check(f"{label}: patches per backend add up",
          sum(map(int, per_backend.values())) == int(plan.group(1)), out)
    return per_backend, int(plan.group(3))


def check_json(label, args, model=MODEL):
    r = quilt("bench", model, "--json", *args)
    check(f"{label}: exit 0", r.returncode == 0, f"exit {r.returncode}: {r.stderr.strip()[:600]!r}")
    try:
        j = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        check(f"{label}: parses", False, f"{e}: {r.stdout[:400]!r}")
        return None
    lat = j.get("latency_ms", {})
    check(f"{label}: fields", {"model", "threads", "session_creation_ms", "warmup", "iterations",
                               "latency_ms", "peak_memory_mib", "plan", "profile"} <= set(j)
          and {"median", "p90", "min", "mean"} <= set(lat), r.stdout)
    if {"median", "p90", "min", "mean"} <= set(lat):
        check(f"{label}: latencies positive and ordered",
              0 < lat["min"] <= lat["median"] <= lat["p90"] and lat["min"] <= lat["mean"], r.stdout)
    check(f"{label}: creation and memory positive",
          j.get("session_creation_ms", 0) > 0 and (j.get("peak_memory_mib") or 0) > 0, r.stdout)
    return j


def check_trace(label, path, want_lanes, want_transfers):
    try:
        trace = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        check(f"{label}: trace is JSON", False, str(e))
        return
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    check(f"{label}: traceEvents", isinstance(events, list) and events, repr(trace)[:400])
    if not events:
        return
    complete = [e for e in events if e.get("ph") == "X"]
    meta = [e for e in events if e.get("ph") == "M"]
    fields = {"name", "cat", "ph", "ts", "dur", "pid", "tid", "args"}
    check(f"{label}: complete events have the standard fields",
          complete and all(fields <= set(e) and e["pid"] == 1 and isinstance(e["ts"], (int, float))
                           and isinstance(e["dur"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0
                           and e["args"].get("kind") == e["cat"] for e in complete),
          json.dumps(complete[:3]))
    check(f"{label}: ts relative to the first span", min(e["ts"] for e in complete) == 0,
          min(e["ts"] for e in complete))
    lanes = {e["args"]["name"]: e["tid"] for e in meta if e.get("name") == "thread_name"}
    check(f"{label}: lanes {want_lanes}", set(want_lanes) <= set(lanes), lanes)
    check(f"{label}: a tid per lane", len(set(lanes.values())) == len(lanes), lanes)
    check(f"{label}: every event on a named lane",
          all(e["tid"] in lanes.values() for e in complete), lanes)
    kinds = {e["cat"] for e in complete}
    check(f"{label}: kinds", kinds <= {"patch", "node", "transfer", "host"}, kinds)
    patches = [e for e in complete if e["cat"] == "patch"]
    for lane in want_lanes:
        check(f"{label}: a patch on {lane}", any(e["tid"] == lanes.get(lane) for e in patches),
              json.dumps(patches))
    if want_transfers:
        check(f"{label}: transfer events", any(e["cat"] == "transfer" for e in complete), kinds)
    nodes = [e for e in complete if e["cat"] == "node"]
    check(f"{label}: node events", nodes, kinds)
    eps = 1e-3  # ts/dur are printed to the nanosecond
    outside = [n["name"] for n in nodes
               if not any(p["tid"] == n["tid"] and p["ts"] - eps <= n["ts"]
                          and n["ts"] + n["dur"] <= p["ts"] + p["dur"] + eps for p in patches)]
    check(f"{label}: nodes nest inside a patch on their lane", not outside, outside)


# ---- CPU alone -------------------------------------------------------------------------------
cpu = check_text("cpu", ["--backend", "cpu", "--threads", "2", "--iterations", "7", "--warmup", "2",
                         "--dim", "batch=8"], 7, 2)
if cpu:
    check("cpu: everything on the cpu", set(cpu[0]) == {"cpu"} and cpu[1] == 0, cpu)
check_text("cpu defaults", [], 20, 3)
check_text("cpu one run, no warm-up", ["--iterations", "1", "--warmup", "0"], 1, 0)
x = rng.standard_normal((4, 64)).astype(np.float32)
np.save(WORK / "x.npy", x)
check_text("cpu --input", ["--input", f"x={WORK / 'x.npy'}", "--iterations", "3"], 3, 3)
j = check_json("cpu json", ["--iterations", "5", "--threads", "2"])
if j:
    check("cpu json: counts", j["iterations"] == 5 and j["warmup"] == 3 and j["threads"] == 2, j)
    check("cpu json: plan", set(j["plan"]["patches"]) == {"cpu"} and j["plan"]["transfers"] == 0,
          j["plan"])
trace = WORK / "cpu_trace.json"
trace.unlink(missing_ok=True)
r = quilt("bench", MODEL, "--iterations", "2", "--profile", trace)
check("cpu profile: exit 0", r.returncode == 0 and f"written to {trace}" in r.stdout,
      f"exit {r.returncode}: {r.stdout!r} {r.stderr!r}")
check_trace("cpu profile", trace, ["cpu"], want_transfers=False)

# ---- which kernel each conv ran, in the trace ----------------------------------------------------
# Convs the CPU runs four ways: a depthwise 3x3 on a keyword spotter's 25x5 map, a 1x1 on a 28x28
# map (the input read in place by the packed GEMM), a 3x3 over shifted input rows, and one whose
# padding is far wider than its window (the direct kernel). Their node spans say so in
# args.detail; the activation folded into a conv and the Softmax say nothing.
def conv_weight(name, c_out, c_in, k):
    return numpy_helper.from_array(rng.standard_normal((c_out, c_in, k, k)).astype(np.float32), name)


paths = helper.make_model(helper.make_graph(
    [helper.make_node("Conv", ["a", "wd"], ["d"], name="dw", group=16, kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["b", "w1"], ["p"], name="pw", kernel_shape=[1, 1]),
     helper.make_node("Relu", ["p"], ["pr"], name="pw_relu"),
     helper.make_node("Conv", ["c", "w3"], ["s"], name="shifted", kernel_shape=[3, 3],
                      pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["e", "w5"], ["h"], name="wide_pad", kernel_shape=[1, 1],
                      pads=[400, 400, 400, 400], strides=[400, 400]),
     helper.make_node("Softmax", ["h"], ["hs"], name="sm", axis=1)],
    "paths", [vi("a", [1, 16, 25, 5]), vi("b", [1, 32, 28, 28]), vi("c", [1, 3, 40, 40]),
              vi("e", [1, 2, 3, 3])],
    [vi("d", None), vi("pr", None), vi("s", None), vi("hs", None)],
    [conv_weight("wd", 16, 1, 3), conv_weight("w1", 32, 32, 1), conv_weight("w3", 8, 3, 3),
     conv_weight("w5", 2, 2, 1)]), opset_imports=[helper.make_opsetid("", 17)])
paths.ir_version = 8
PATHS = WORK / "conv_paths.onnx"
onnx.save(paths, PATHS)
trace = WORK / "paths_trace.json"
trace.unlink(missing_ok=True)
r = quilt("bench", PATHS, "--iterations", "1", "--warmup", "0", "--profile", trace)
check("conv paths profile: exit 0", r.returncode == 0, f"exit {r.returncode}: {r.stderr!r}")
if r.returncode == 0:
    spans = {e["name"]: e["args"] for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("cat") == "node"}
    want = {"dw": "depthwise", "pw": "packed GEMM, input read in place",
            "shifted": "shifted input rows", "wide_pad": "direct"}
    for node, words in want.items():
        detail = spans.get(f'Conv node "{node}"', {}).get("detail", "")
        check(f"conv paths: {node} says {words!r}", words in detail, spans)
    for node in ('Relu node "pw_relu"', 'Softmax node "sm"'):
        check(f"conv paths: {node} has no detail", node in spans and "detail" not in spans[node],
              spans.get(node))

# ---- the blocked layout's nodes, in the trace ----------------------------------------------------
# With cpu:layout=blocked: a MaxPool (NCHW kernels) whose output a conv and a Concat read
# blocked is reordered after its kernel; the Concat copies channel blocks; the Mul runs
# element-wise on blocked values; the last conv writes NCHW. A second 3-channel conv ("rgb")
# reads the NCHW input and writes blocked for the conv after it.
region = helper.make_model(helper.make_graph(
    [helper.make_node("Conv", ["x", "ws"], ["t"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("MaxPool", ["t"], ["s"], name="pool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["x", "ws"], ["r"], name="rgb", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["r", "wa"], ["y2"], name="r2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("Conv", ["s", "wa"], ["a"], name="a", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
     helper.make_node("Concat", ["s", "a"], ["c"], name="cat", axis=1),
     helper.make_node("Mul", ["c", "k"], ["m"], name="scale"),
     helper.make_node("Conv", ["m", "wo"], ["y"], name="out", kernel_shape=[1, 1])],
    "region", [vi("x", [1, 3, 20, 20])], [vi("y", None), vi("y2", None)],
    [conv_weight("ws", 16, 3, 3), conv_weight("wa", 16, 16, 3), conv_weight("wo", 4, 32, 1),
     numpy_helper.from_array(np.array(0.5, np.float32), "k")]), opset_imports=[helper.make_opsetid("", 17)])
region.ir_version = 8
REGION = WORK / "blocked_region.onnx"
onnx.save(region, REGION)
trace = WORK / "region_trace.json"
trace.unlink(missing_ok=True)
r = quilt("bench", REGION, "--iterations", "1", "--warmup", "0", "--profile", trace,
          "--backend-option", "cpu:layout=blocked")
check("blocked region profile: exit 0", r.returncode == 0, f"exit {r.returncode}: {r.stderr!r}")
if r.returncode == 0:
    spans = {e["name"]: e["args"] for e in json.loads(trace.read_text())["traceEvents"]
             if e.get("cat") == "node"}
    want = {'MaxPool node "pool"': "output reordered to blocked",
            'Conv node "rgb"': "blocked layout", 'Conv node "r2"': "blocked layout",
            'Conv node "a"': "blocked layout", 'Concat node "cat"': "channel blocks copied",
            'Mul node "scale"': "element-wise over the padded channels", 'Conv node "out"': "blocked layout"}
    for node, words in want.items():
        check(f"blocked region: {node} says {words!r}", words in spans.get(node, {}).get("detail", ""), spans)

# ---- example plugin and CPU ------------------------------------------------------------------
if PLUGIN is None:
    print("SKIP example,cpu checks: QUILT_EXAMPLE_PLUGIN is not set to a built plugin")
else:
    split = ["--backend", "example,cpu", "--plugin", PLUGIN]
    ex = check_text("example,cpu", [*split, "--iterations", "5"], 5, 3)
    if ex:
        check("example,cpu: patches on both", {"example:0", "cpu"} <= set(ex[0]) and ex[1] > 0, ex)
    j = check_json("example,cpu json", [*split, "--iterations", "4", "--warmup", "1"])
    if j:
        check("example,cpu json: plan", {"example:0", "cpu"} <= set(j["plan"]["patches"])
              and j["plan"]["transfers"] > 0, j["plan"])
    trace = WORK / "example_trace.json"
    trace.unlink(missing_ok=True)
    j = check_json("example,cpu json profile", [*split, "--iterations", "3", "--profile", trace])
    if j:
        check("example,cpu json profile: names the file", j["profile"] == str(trace), j["profile"])
    check_trace("example,cpu profile", trace, ["cpu", "example:0"], want_transfers=True)

# ---- OpenCL: intermediates' buffers are reused once dead ----------------------------------------
# A chain of 24 element-wise nodes on a 16 MiB tensor: each intermediate lives until the next
# node has read it, so two buffers serve them all. Held for the whole run (as before), the 23
# intermediates took 368 MiB more than the CPU's run; PoCL itself adds about 75 MiB.
def peak_over_cpu(label, model, graph):
    """Saves the graph as `model`, runs it on cpu and on opencl,cpu (each node on the device) and
    returns how many MiB the opencl,cpu run peaked above the cpu run, or None."""
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, model)
    peaks = {}
    for backends in ("cpu", "opencl,cpu"):
        j = check_json(f"{label} {backends}", ["--backend", backends, "--no-cost-rule",
                                                "--iterations", "1", "--warmup", "1"], model=model)
        if j:
            peaks[backends] = j["peak_memory_mib"]
            if backends != "cpu":
                check(f"{label} opencl,cpu: on the device", "opencl:0" in j["plan"]["patches"],
                      j["plan"])
    return peaks["opencl,cpu"] - peaks["cpu"] if len(peaks) == 2 else None


devices = quilt("devices")
if "backend opencl" not in devices.stdout:
    print("SKIP opencl checks: `quilt devices` lists no OpenCL device")
elif "address" in os.environ.get("QUILT_SANITIZE", ""):
    # AddressSanitizer keeps freed memory in its quarantine (256 MB) and adds its shadow: a
    # process's peak says nothing about when Quilt frees its buffers.
    print("SKIP peak-memory checks: AddressSanitizer build")
else:
    ops = ["Relu", "Neg", "Sigmoid", "Abs"] * 6
    extra = peak_over_cpu("chain", WORK / "chain.onnx", helper.make_graph(
        [helper.make_node(op, ["x" if i == 0 else f"t{i - 1}"],
                          ["y" if i == len(ops) - 1 else f"t{i}"], name=f"n{i}")
         for i, op in enumerate(ops)],
        "chain", [vi("x", [1, 4, 1024, 1024])], [vi("y", [1, 4, 1024, 1024])]))
    if extra is not None:
        check("chain opencl,cpu: dead intermediates' buffers reused", extra <= 150, extra)
    # Twelve Adds of 8 MiB constants: the host frees each constant once the device has its copy,
    # node by node, so the two copies never all coexist. Released only at the end of the
    # compile, both were held at once: 147 MiB above the CPU's run, against 75 (PoCL) now.
    rng = np.random.default_rng(1)
    size = 2 * 1024 * 1024
    extra = peak_over_cpu("constants", WORK / "consts.onnx", helper.make_graph(
        [helper.make_node("Add", ["x" if i == 0 else f"t{i - 1}", f"c{i}"],
                          ["y" if i == 11 else f"t{i}"], name=f"a{i}") for i in range(12)],
        "consts", [vi("x", [1, size])], [vi("y", [1, size])],
        [numpy_helper.from_array(rng.standard_normal((1, size)).astype(np.float32), f"c{i}")
         for i in range(12)]))
    if extra is not None:
        check("constants opencl,cpu: the host's copies freed as the device takes them",
              extra <= 110, extra)

# ---- bad usage -------------------------------------------------------------------------------
def expect_usage(label, args, *parts):
    r = quilt("bench", *args)
    check(label, r.returncode == 2 and all(p in r.stderr for p in parts),
          f"exit {r.returncode} (want 2); stderr {r.stderr.strip()!r}; want {parts}")


expect_usage("no model", [], "needs a MODEL")
expect_usage("missing model file", [WORK / "nope.onnx"], "nope.onnx")
expect_usage("--iterations 0", [MODEL, "--iterations", "0"], "--iterations")
expect_usage("--iterations -1", [MODEL, "--iterations", "-1"], "--iterations")
expect_usage("--warmup x", [MODEL, "--warmup", "x"], "--warmup")
expect_usage("unknown option", [MODEL, "--frobnicate"], "--frobnicate")
expect_usage("--dim unknown", [MODEL, "--dim", "seq=4"], "seq", "batch")
expect_usage("unknown backend", [MODEL, "--backend", "nosuch"], "nosuch")
expect_usage("two models", [MODEL, MODEL], "one MODEL")
r = quilt("bench", "--help")
check("--help", r.returncode == 0 and "--profile FILE" in r.stdout and "--backend LIST" in r.stdout
      and "--input NAME=FILE.npy" in r.stdout, r.stdout)
r = quilt("--help")
check("listed in quilt --help", r.returncode == 0 and "bench MODEL" in r.stdout, r.stdout)

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
