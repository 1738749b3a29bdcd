"""End-to-end tests of `quilt plan` (text, JSON, DOT rendered by Graphviz), the backend-selection
options it shares with `quilt run`, and `quilt devices` with plugins.

usage: test_plan.py QUILT_BINARY WORK_DIR REPO_ROOT [BUILD_DIR]
The models are built here with onnx's helper. The example plugin (tests/plugins/example) is
BUILD_DIR/plugins/libquilt_example.so (or QUILT_EXAMPLE_PLUGIN); the checks that need it are skipped,
and say so, when it is not built. Prints one line per failed check and "N passed, N failed".
"""
import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUILT, WORK, ROOT = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), Path(sys.argv[3])
BUILD = Path(sys.argv[4]) if len(sys.argv) > 4 else QUILT.parent
DOT = shutil.which("dot") or "/usr/bin/dot"
WORK.mkdir(parents=True, exist_ok=True)
passed = failed = 0


def quilt(*args, env=None):
    return subprocess.run([str(QUILT), *map(str, args)], capture_output=True, text=True, timeout=120,
                          env=env)


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print(f"FAIL {name}: {detail}")


def expect(name, args, code, *parts, stream="stderr", env=None):
    r = quilt(*args, env=env)
    text = getattr(r, stream)
    codes = code if isinstance(code, tuple) else (code,)
    ok = r.returncode in codes and all(p in text for p in parts)
    check(name, ok, f"exit {r.returncode} (want {code}); {stream}: {text.strip()[:800]!r}; "
                    f"stderr: {r.stderr.strip()[:400]!r}; want {parts}")
    return r


def vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


# mixed: y = Mul(Softmax(Relu(x @ W + b)), k) with k = w1 + w2 folded at level 1. MatMul, Add and
# Relu are what the example plugin runs; Softmax and Mul stay on the CPU. One name has quotes.
rng = np.random.default_rng(0)
mixed = helper.make_model(helper.make_graph(
    [helper.make_node("MatMul", ["x", "W"], ["mm_out"], name="mm0"),
     helper.make_node("Add", ["mm_out", "b"], ["add_out"], name="add0"),
     helper.make_node("Relu", ["add_out"], ["r0_out"], name="r0"),
     helper.make_node("Softmax", ["r0_out"], ["sm_out"], name="sm", axis=-1),
     helper.make_node("Add", ["w1", "w2"], ["k"], name="fold_me"),
     helper.make_node("Mul", ["sm_out", "k"], ["y"], name='scale "q"')],
    "mixed", [vi("x", [2, 4])], [vi("y", [2, 3])],
    [numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W"),
     numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
     numpy_helper.from_array(np.ones(3, np.float32), "w1"),
     numpy_helper.from_array(np.full(3, 2.0, np.float32), "w2")]),
    opset_imports=[helper.make_opsetid("", 17)])
mixed.ir_version = 8
MODEL = WORK / "mixed.onnx"
onnx.save(mixed, MODEL)
NODE_COUNT = len(mixed.graph.node)


def find_example_plugin():
    if os.environ.get("QUILT_EXAMPLE_PLUGIN"):
        return Path(os.environ["QUILT_EXAMPLE_PLUGIN"])
    for candidate in (BUILD / "plugins" / "libquilt_example.so", BUILD / "libquilt_example.so"):
        if candidate.exists():
            return candidate
    return None


def svg_titles(svg_text, cls):
    """Titles of the <g class=cls> groups of an SVG written by Graphviz."""
    ns = {"svg": "http://www.w3.org/2000/svg"}
    root = ET.fromstring(svg_text)
    return [g.find("svg:title", ns).text for g in root.iter("{http://www.w3.org/2000/svg}g")
            if g.get("class") == cls and g.find("svg:title", ns) is not None]


def check_plan(label, extra):
    """Runs plan in the three formats with the given options; checks each; returns the JSON."""
    r = expect(f"{label}: json", ["plan", MODEL, "--format", "json", *extra], 0, stream="stdout")
    try:
        plan = json.loads(r.stdout)
    except json.JSONDecodeError as e:
        check(f"{label}: json parses", False, f"{e}: {r.stdout[:400]!r}")
        return None
    nodes, patches, transfers = plan["nodes"], plan["patches"], plan["transfers"]
    check(f"{label}: json format", plan.get("format") == "quilt-plan/1", plan.get("format"))
    check(f"{label}: json model", plan["model"].endswith("mixed.onnx"), plan["model"])
    # Folded nodes may be listed (patch null) or only counted; rewritten ones are counted.
    listed_folded = sum(1 for n in nodes if n["patch"] is None)
    rewritten = plan["totals"]["rewritten_away"]
    check(f"{label}: every node reported",
          len(nodes) - listed_folded + plan["totals"]["folded_nodes"] + rewritten == NODE_COUNT,
          f"{len(nodes)} nodes listed, {plan['totals']['folded_nodes']} folded, {rewritten} rewritten away; "
          f"the model has {NODE_COUNT}")
    check(f"{label}: rewrites add up", rewritten == sum(w["nodes_removed"] for w in plan["rewrites"]),
          json.dumps(plan["rewrites"]))
    check(f"{label}: node names", {n["name"] for n in nodes} <= {n.name for n in mixed.graph.node},
          [n["name"] for n in nodes])
    placed = [n for n in nodes if n["patch"] is not None]
    check(f"{label}: placed nodes are in their patch",
          all(i in patches[n["patch"]]["nodes"] and patches[n["patch"]]["backend"] == n["backend"]
              for i, n in enumerate(nodes) if n["patch"] is not None), json.dumps(patches))
    check(f"{label}: every placed node in exactly one patch",
          sorted(i for p in patches for i in p["nodes"]) == [i for i, n in enumerate(nodes) if n["patch"] is not None],
          json.dumps(patches))
    totals = plan["totals"]
    check(f"{label}: totals", sum(totals["nodes"].values()) == len(placed)
          and totals["folded_nodes"] >= listed_folded and totals["patches"] == len(patches)
          and totals["transfers"] == len(transfers)
          and totals["transfer_bytes"] == sum(t["bytes"] for t in transfers if t["bytes"] is not None),
          json.dumps(totals))

    # text: header, one line per patch and per transfer, fallbacks, totals
    r = expect(f"{label}: text", ["plan", MODEL, *extra], 0, "totals:", "fallbacks", stream="stdout")
    lines = r.stdout.splitlines()
    check(f"{label}: text header", bool(lines) and lines[0].startswith("model: ")
          and "mixed.onnx" in lines[0] and "backends: " in lines[0], lines[:1])
    patch_lines = [l for l in lines if l.startswith("patch ")]
    check(f"{label}: text patch lines", len(patch_lines) == len(patches)
          and all(l.startswith(f"patch {p['id']}  {p['backend']}  ") for l, p in zip(patch_lines, patches)),
          patch_lines)
    check(f"{label}: text transfer lines",
          len([l for l in lines if l.startswith("transfer  ")]) == len(transfers), r.stdout)
    for n in nodes:
        if n["reason"]:
            check(f"{label}: text fallback {n['name']}", n["reason"] in r.stdout, r.stdout)

    # dot -> svg: one graph node per model node and per transfer, one cluster per patch
    r = expect(f"{label}: dot", ["plan", MODEL, "--format", "dot", *extra], 0, "digraph", stream="stdout")
    svg = subprocess.run([DOT, "-Tsvg"], input=r.stdout, capture_output=True, text=True, timeout=60)
    check(f"{label}: dot renders", svg.returncode == 0 and not svg.stderr.strip(),
          f"exit {svg.returncode}: {svg.stderr.strip()[:400]}")
    if svg.returncode == 0:
        titles = svg_titles(svg.stdout, "node")
        ops = [t for t in titles if re.fullmatch(r"n\d+", t)]
        copies = [t for t in titles if re.fullmatch(r"t\d+", t)]
        clusters = [t for t in svg_titles(svg.stdout, "cluster") if re.fullmatch(r"cluster_p\d+", t)]
        check(f"{label}: svg op nodes", len(ops) == len(nodes), f"{len(ops)} op nodes: {titles}")
        check(f"{label}: svg transfer nodes", len(copies) == len(transfers), f"{copies} vs {len(transfers)}")
        check(f"{label}: svg patch clusters", len(clusters) == len(patches), f"{clusters} vs {len(patches)}")
        check(f"{label}: svg legend", "legend" in svg.stdout and "cpu" in svg.stdout)
    return plan


# ---- usage and errors ---------------------------------------------------------------------
expect("help lists plan", ["--help"], 0, "plan MODEL", stream="stdout")
expect("plan --help", ["plan", "--help"], 0, "usage: quilt plan MODEL", "--format", "--output", "--plugin",
       "--strict", "--pin NODE=BACKEND", "--no-cost-rule", "--backend-option BACKEND:KEY=VALUE",
       "--optimization-level", stream="stdout")
expect("run --help has backend options", ["run", "--help"], 0, "--plugin PATH", "--strict", "--pin",
       "--no-cost-rule", "--backend-option", stream="stdout")
expect("test-onnx --help has backend options", ["test-onnx", "--help"], 0, "--plugin PATH", "--strict",
       stream="stdout")
expect("plan without model", ["plan"], 2, "quilt plan needs a MODEL")
expect("plan two models", ["plan", MODEL, MODEL], 2, "takes one MODEL")
expect("plan missing model", ["plan", WORK / "nope.onnx"], 2, "nope.onnx")
not_onnx = WORK / "not_onnx.onnx"
not_onnx.write_text("not a model\n")
expect("plan malformed model", ["plan", not_onnx], 2, "not_onnx.onnx")
expect("plan bad format", ["plan", MODEL, "--format", "svg"], 2, "--format expects text, json or dot, got 'svg'")
expect("plan format without value", ["plan", MODEL, "--format"], 2, "--format needs a value")
expect("plan unknown option", ["plan", MODEL, "--fast"], 2, "unknown option '--fast' for quilt plan")
expect("plan unknown backend", ["plan", MODEL, "--backend", "tpu,cpu"], 2, "unknown backend 'tpu'", "available: cpu")
expect("plan malformed backend list", ["plan", MODEL, "--backend", "cpu,,x"], 2, "is not a backend name")
# A device chosen by a part of its name reaches the session, which resolves it (or says why not).
plugin_for_names = find_example_plugin()
if plugin_for_names:
    r = expect("plan --backend example:name=accelerator 1",
               ["plan", MODEL, "--plugin", plugin_for_names, "--backend", "example:name=accelerator 1,cpu"],
               0, "example:1", stream="stdout")
    expect("plan --backend example:name=tpu", ["plan", MODEL, "--plugin", plugin_for_names,
                                                 "--backend", "example:name=tpu,cpu"],
           2, "no example device name contains 'tpu'")
expect("plan --backend cpu:name= (empty name part)", ["plan", MODEL, "--backend", "cpu:name="], 2,
       "is not a backend name")
expect("plan bad pin", ["plan", MODEL, "--pin", "r0"], 2, "--pin expects NODE=BACKEND", "got 'r0'")
expect("plan pin to unknown backend", ["plan", MODEL, "--pin", "r0=tpu"], 2, "unknown backend 'tpu'")
expect("plan bad backend option", ["plan", MODEL, "--backend-option", "memory_limit=5"], 2,
       "--backend-option expects BACKEND:KEY=VALUE")
expect("plan option for unknown backend", ["plan", MODEL, "--backend-option", "tpu:x=1"], 2, "unknown backend 'tpu'")
expect("plan missing plugin", ["plan", MODEL, "--plugin", WORK / "libmissing.so", "--backend", "missing,cpu"], 2,
       "--plugin", "libmissing.so: not loaded: file not found")
expect("plan bad optimization level", ["plan", MODEL, "--optimization-level", "x"], 2,
       "--optimization-level expects a non-negative integer")
expect("plan unwritable output", ["plan", MODEL, "--output", WORK / "no" / "such" / "dir" / "plan.txt"], 2,
       "cannot write")
expect("run unknown backend", ["run", MODEL, "--backend", "tpu"], 2, "unknown backend 'tpu'")
expect("run bad cpu layout option", ["run", MODEL, "--backend-option", "cpu:layout=nhwc"], (1, 2),
       "[cpu] option layout is 'nhwc', expected auto, blocked or nchw")
expect("run bad QUILT_CPU_LAYOUT", ["run", MODEL], (1, 2),
       "[cpu] QUILT_CPU_LAYOUT is 'NCHWc', expected auto, blocked or nchw",
       env={**os.environ, "QUILT_CPU_LAYOUT": "NCHWc"})
# Every value the option takes runs (auto, the default, is blocked or NCHW by the CPU: `quilt
# devices` says which, test_cpu_runtime.cpp checks that).
for value in ("auto", "blocked", "nchw"):
    expect(f"run cpu layout={value}", ["run", MODEL, "--backend-option", f"cpu:layout={value}"], 0,
           "outputs:", stream="stdout")
expect("run cpu unknown option lists layout", ["run", MODEL, "--backend-option", "cpu:lay=1"], (1, 2),
       "unknown option 'lay'; known options: layout, precision, threads")
expect("run bad pin", ["run", MODEL, "--pin", "=cpu"], 2, "--pin expects NODE=BACKEND")

# ---- the CPU alone ------------------------------------------------------------------------
plan = check_plan("cpu", [])
if plan:
    check("cpu: every placed node on the cpu", all(n["backend"] == "cpu" for n in plan["nodes"] if n["patch"] is not None),
          json.dumps(plan["nodes"]))
    check("cpu: no transfers", plan["transfers"] == [], json.dumps(plan["transfers"]))
    check("cpu: constant subgraph folded", plan["totals"]["folded_nodes"] >= 1
          and all(n["folded"] for n in plan["nodes"] if n["name"] == "fold_me"), json.dumps(plan))
plan0 = check_plan("cpu level 0", ["--optimization-level", "0"])
if plan0:
    check("level 0: nothing folded", plan0["totals"]["folded_nodes"] == 0, json.dumps(plan0["totals"]))
    check("level 0: nothing rewritten", plan0["rewrites"] == [] and plan0["totals"]["rewritten_away"] == 0,
          json.dumps(plan0["rewrites"]))

# ---- what the rewrites did ----------------------------------------------------------------
# Conv -> BN -> hard-swish written out (paddle2onnx), with its weights as Constant nodes, then
# MatMul + Add: counted per pattern in text, JSON and DOT; level 0 rewrites nothing.
def scalar(name, v):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(v, np.float32), name))


rw_nodes = [scalar("three", 3.0), scalar("zero", 0.0), scalar("six", 6.0),
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
            helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["n"], name="bn"),
            helper.make_node("Add", ["n", "three"], ["a"], name="hs_add"),
            helper.make_node("Clip", ["a", "zero", "six"], ["cl"], name="hs_clip"),
            helper.make_node("Div", ["cl", "six"], ["d"], name="hs_div"),
            helper.make_node("Mul", ["n", "d"], ["h"], name="hs_mul"),
            helper.make_node("Flatten", ["h"], ["f"], name="flat"),
            helper.make_node("MatMul", ["f", "wm"], ["mm"], name="fc"),
            helper.make_node("Add", ["mm", "bm"], ["y"], name="fc_bias")]
rw_model = helper.make_model(helper.make_graph(
    rw_nodes, "rewrites", [vi("x", [1, 2, 4, 4])], [vi("y", [1, 3])],
    [numpy_helper.from_array(v, k) for k, v in {
        "w": rng.standard_normal((4, 2, 1, 1)).astype(np.float32), "s": np.ones(4, np.float32),
        "b": np.zeros(4, np.float32), "m": np.zeros(4, np.float32), "v": np.ones(4, np.float32),
        "wm": rng.standard_normal((64, 3)).astype(np.float32), "bm": np.ones(3, np.float32)}.items()]),
    opset_imports=[helper.make_opsetid("", 11)])
rw_model.ir_version = 7
RW = WORK / "rewrites.onnx"
onnx.save(rw_model, RW)
want_line = "rewrites: constant nodes 3, matmul+add into gemm 1, batchnorm into conv 1, hardswish 1"
r = expect("plan lists the rewrites", ["plan", RW], 0, want_line, "rewritten away 8", stream="stdout")
r = expect("plan json rewrites", ["plan", RW, "--format", "json"], 0, stream="stdout")
rw = json.loads(r.stdout) if r.returncode == 0 else {"rewrites": [], "nodes": [], "totals": {}}
check("json rewrites: pattern, count, nodes removed", rw["rewrites"] == [
    {"pattern": "constant nodes", "count": 3, "nodes_removed": 3},
    {"pattern": "matmul+add into gemm", "count": 1, "nodes_removed": 1},
    {"pattern": "batchnorm into conv", "count": 1, "nodes_removed": 1},
    {"pattern": "hardswish", "count": 1, "nodes_removed": 3}], json.dumps(rw["rewrites"]))
check("json: the rewritten nodes", [(n["name"], n["op_type"]) for n in rw["nodes"]] ==
      [("conv", "Conv"), ("hs_mul", "HardSwish"), ("flat", "Flatten"), ("fc_bias", "Gemm")], json.dumps(rw["nodes"]))
check("json: every node accounted for", len(rw["nodes"]) + rw["totals"].get("rewritten_away", 0) == len(rw_nodes),
      json.dumps(rw["totals"]))
expect("plan dot rewrites", ["plan", RW, "--format", "dot"], 0, "\\n" + want_line, stream="stdout")
expect("plan level 0: rewrites none", ["plan", RW, "--optimization-level", "0"], 0, "rewrites: none",
       stream="stdout")
# A pin of a node the rewrites replaced is not an error, but it is said (level 0 keeps the node).
expect("pin of a rewritten node", ["plan", RW, "--pin", "hs_add=cpu"], 0, "node 'hs_add' was fused into another",
       "optimization_level 0 keeps every node")
expect("pin of a rewritten node at level 0", ["plan", RW, "--pin", "hs_add=cpu", "--optimization-level", "0"], 0,
       'Add "hs_add"', stream="stdout")
check_plan("cpu options", ["--backend", "cpu", "--strict", "--no-cost-rule", "--pin", "r0=cpu"])

out = WORK / "plan.json"
r = expect("plan --output", ["plan", MODEL, "--format", "json", "--output", out], 0)
check("plan --output writes the file, nothing on stdout", out.exists() and r.stdout == ""
      and out.read_text() == quilt("plan", MODEL, "--format", "json").stdout, r.stdout[:200])
expect("run accepts backend options", ["run", MODEL, "--backend", "cpu", "--no-cost-rule", "--strict", "--pin",
                                       "sm=cpu"], 0, "y: float32 [2, 3]", stream="stdout")

# ---- half precision: the nodes computed in float32 are named ---------------------------------
# Conv and Relu have float32 kernels only: the CPU widens their float16 inputs and rounds the
# outputs back, and the plan says so; Reshape moves float16 as it is and is not listed.
def half_model(elem, np_type):
    values = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w = (numpy_helper.from_array(values.astype(np_type), "W") if np_type
         else helper.make_tensor("W", elem, values.shape, values.flatten().tolist()))
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("Reshape", ["r", "shape"], ["y"], name="flat")],
        "half", [helper.make_tensor_value_info("x", elem, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", elem, [1, 256])],
        [w, numpy_helper.from_array(np.array([1, 256], np.int64), "shape")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


for elem, np_type, name in [(TensorProto.FLOAT16, np.float16, "float16"), (TensorProto.BFLOAT16, None, "bfloat16")]:
    path = WORK / f"half_{name}.onnx"
    onnx.save(half_model(elem, np_type), path)
    # One patch: x is widened once, y rounded once; Conv and Relu pass float32 to each other.
    conv_note = relu_note = f"{name} held and computed in float32 in the CPU patch (converted only at the patch's edges)"
    r = expect(f"plan {name}: notes", ["plan", path], 0, "notes:\n", f'Conv "conv" on cpu: {conv_note}\n',
               f'Relu "relu" on cpu: {relu_note}\n', stream="stdout")
    check(f"plan {name}: Reshape not widened", "Reshape \"flat\" on" not in r.stdout, r.stdout)
    r = expect(f"plan {name}: json", ["plan", path, "--format", "json"], 0, stream="stdout")
    if r.returncode == 0:
        plan = json.loads(r.stdout)
        notes = {n["name"]: n["note"] for n in plan["nodes"]}
        check(f"plan {name}: json notes", notes == {"conv": conv_note, "relu": relu_note, "flat": ""}, notes)
        check(f"plan {name}: json noted", plan["totals"]["noted"] == 2, plan["totals"])
    expect(f"run {name}: widened nodes run", ["run", path], 0, "y:", stream="stdout")
r = expect("plan float32: no notes", ["plan", MODEL], 0, "totals:", stream="stdout")
check("plan float32: no notes section", "notes:" not in r.stdout, r.stdout)

# ---- devices ------------------------------------------------------------------------------
expect("devices --help", ["devices", "--help"], 0, "usage: quilt devices", "--plugin PATH", stream="stdout")
expect("devices bad argument", ["devices", "--json"], 2, "unexpected argument '--json'")
expect("devices plugin without path", ["devices", "--plugin"], 2, "--plugin needs a library path")
r = expect("devices", ["devices"], 0, "backend cpu (", "ABI 1.2, built-in)", "device 0: ", "memory: ",
           "flags: ", stream="stdout")
check("devices: cpu first", r.stdout.startswith("backend cpu "), r.stdout[:200])
expect("devices missing plugin", ["devices", "--plugin", "/nonexistent/libquilt_x.so"], 0, "backend cpu",
       "failed: /nonexistent/libquilt_x.so: file not found", stream="stdout")
garbage = WORK / "libgarbage.so"
garbage.write_text("not a shared library\n")
expect("devices garbage plugin", ["devices", "--plugin", garbage], 0, f"failed: {garbage}: cannot load",
       stream="stdout")
env = dict(os.environ, QUILT_PLUGIN_PATH=str(WORK / "no_such_dir"))
expect("devices unreadable QUILT_PLUGIN_PATH", ["devices"], 0, "no_such_dir", stream="stdout", env=env)

# A plugin built for another major ABI version must be refused, naming both versions.
cc = shutil.which("cc") or shutil.which("gcc")
if cc:
    src = WORK / "future_plugin.c"
    src.write_text(r'''
#include <quilt/backend.h>
static quilt_backend_t backend;
QUILT_BACKEND_EXPORT quilt_status_t quilt_backend_init(const quilt_host_api_t* host,
                                                       const quilt_backend_t** out) {
  (void)host;
  backend.struct_size = sizeof backend;
  backend.abi_version = (QUILT_BACKEND_ABI_MAJOR + 1) << 16;
  backend.name = "future";
  backend.version = "9.0";
  *out = &backend;
  return 0;
}
''')
    lib = WORK / "libquilt_future.so"
    b = subprocess.run([cc, "-shared", "-fPIC", "-I", str(ROOT / "include"), "-o", str(lib), str(src)],
                       capture_output=True, text=True)
    if b.returncode == 0:
        expect("devices ABI mismatch", ["devices", "--plugin", lib], 0, f"failed: {lib}: ABI mismatch",
               "2.0", "this Quilt speaks 1.", stream="stdout")
        expect("plan with a refused plugin", ["plan", MODEL, "--plugin", lib, "--backend", "future,cpu"], 2,
               "libquilt_future.so: not loaded", "ABI mismatch")
    else:
        check("build the ABI-mismatch plugin", False, b.stderr[:400])
else:
    print("SKIP ABI mismatch: no C compiler")

# ---- with the example plugin --------------------------------------------------------------
plugin = find_example_plugin()
if plugin is None:
    print(f"SKIP example-plugin checks: {BUILD}/plugins/libquilt_example.so is not built "
          "(or set QUILT_EXAMPLE_PLUGIN)")
else:
    P = ["--plugin", plugin]
    expect("devices with plugin", ["devices", *P], 0, "backend cpu", "backend example (version ", f"{plugin})",
           "device 0: ", stream="stdout")
    env = dict(os.environ, QUILT_PLUGIN_PATH=str(plugin.parent))
    expect("devices via QUILT_PLUGIN_PATH", ["devices"], 0, "backend example (", stream="stdout", env=env)

    plan = check_plan("example", [*P, "--backend", "example,cpu", "--no-cost-rule"])
    if plan:
        by_name = {n["name"]: n for n in plan["nodes"]}
        # MatMul + the bias Add are one Gemm named after the Add (the level-1 rewrites).
        check("example: Gemm/Relu on the plugin", "mm0" not in by_name and by_name["add0"]["op_type"] == "Gemm"
              and all(by_name[k]["backend"].startswith("example") for k in ("add0", "r0")), json.dumps(by_name))
        check("example: Softmax and Mul fall back to the cpu with a reason",
              all(by_name[k]["backend"] == "cpu" and "example" in by_name[k]["reason"] for k in ("sm", 'scale "q"')),
              json.dumps(by_name))
        check("example: x copied to the device",
              any(t["value"] == "x" and t["from"] == "host" and t["to"].startswith("example") and t["bytes"] == 32
                  for t in plan["transfers"]), json.dumps(plan["transfers"]))
        check("example: r0_out copied back",
              any(t["value"] == "r0_out" and t["to"] == "host" for t in plan["transfers"]), json.dumps(plan["transfers"]))
        text = quilt("plan", MODEL, *P, "--backend", "example,cpu", "--no-cost-rule").stdout
        check("example: text transfer line", "transfer  x  host -> example:0  32 B" in text, text)
        dot = quilt("plan", MODEL, *P, "--backend", "example,cpu", "--no-cost-rule", "--format", "dot").stdout
        check("example: dot copies are red dashed", "style=dashed, color=red" in dot and "copy x 32 B" in dot, dot[:600])
    plan = check_plan("example pinned", [*P, "--backend", "example,cpu", "--no-cost-rule", "--pin", "r0=cpu"])
    if plan:
        r0 = next(n for n in plan["nodes"] if n["name"] == "r0")
        check("pinned node on the cpu with a reason", r0["backend"] == "cpu" and r0["reason"], json.dumps(r0))
    check_plan("example with cost rule", [*P, "--backend", "example,cpu"])
    expect("strict: fallback refused", ["plan", MODEL, *P, "--backend", "example", "--strict"], (1, 2), "sm")
    expect("unknown device option", ["plan", MODEL, *P, "--backend", "example,cpu", "--backend-option",
                                     "example:bogus_key=1"], (1, 2), "bogus_key")
    # run with the plugin gives the CPU's answer
    x = WORK / "x.npy"
    np.save(x, rng.standard_normal((2, 4)).astype(np.float32))
    for name, extra in (("cpu", []), ("example", [*P, "--backend", "example,cpu", "--no-cost-rule"])):
        expect(f"run on {name}", ["run", MODEL, "--input", f"x={x}", "--output-dir", WORK / f"out_{name}", *extra], 0,
               stream="stdout")
    a, b = WORK / "out_cpu" / "y.npy", WORK / "out_example" / "y.npy"
    check("run with the plugin equals the cpu", a.exists() and b.exists() and np.allclose(np.load(a), np.load(b), atol=1e-5),
          f"{a.exists()} {b.exists()}")

# --dim fixes a symbolic dim: the digits CNN's batch, so the plan knows its sizes.
digits = ROOT / "tools" / "models" / "digits_cnn.onnx"
plugin = find_example_plugin()
if plugin:
    args = ["plan", digits, "--backend", "example,cpu", "--plugin", plugin, "--format", "json"]
    unknown = json.loads(quilt(*args).stdout)["transfers"]
    check("plan without --dim: copy sizes unknown", unknown and all(t["bytes"] is None for t in unknown),
          unknown)
    r = expect("plan --dim batch=360", args + ["--dim", "batch=360"], 0, stream="stdout")
    known = json.loads(r.stdout)["transfers"] if r.returncode == 0 else []
    check("plan --dim: every copy has its size", known and all(t["bytes"] for t in known), known)
    check("plan --dim: the image copy is 360x1x8x8 floats",
          any(t["value"] == "image" and t["bytes"] == 360 * 64 * 4 for t in known), known)
expect("plan --dim of an unknown dim", ["plan", digits, "--dim", "nope=3"], 2,
       "fixed_dims names 'nope'", "its symbolic dims: batch")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
