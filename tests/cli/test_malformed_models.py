"""Robustness: `quilt run` on corrupted models (random byte flips and truncations of models from
the ONNX suite, fixed seed) must fail cleanly with exit code 1 or 2 and a message, or run —
never crash, hang or die by a signal. Models with hostile attributes (sizes overflowing int64)
must fail with exit code 2 and a message naming the node and what overflowed.

usage: test_malformed_models.py QUILT_BINARY ONNX_NODE_CASES_DIR WORK_DIR [COUNT]
"""
import random
import subprocess
import sys
from pathlib import Path

from onnx import TensorProto, helper

quilt, cases, work = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
count = int(sys.argv[4]) if len(sys.argv) > 4 else 150
work.mkdir(parents=True, exist_ok=True)
rng = random.Random(20261122)
models = sorted(cases.glob("test_*/model.onnx"))
rng.shuffle(models)
passed = failed = 0
for i, source in enumerate(models[:count]):
    data = bytearray(source.read_bytes())
    if rng.random() < 0.3:
        data = data[: rng.randrange(1, len(data))]
    for _ in range(rng.randint(1, 6)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    path = work / f"corrupt_{i}.onnx"
    path.write_bytes(bytes(data))
    try:
        r = subprocess.run([str(quilt), "run", str(path)], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        failed += 1
        print(f"FAIL {path} (from {source.parent.name}): hung for 60 s")
        continue
    stderr = r.stderr.decode("utf-8", "replace")
    # Warnings may come first (a declared output shape that inference contradicts); the error
    # after them must be Quilt's one line.
    error = "\n".join(l for l in stderr.splitlines() if not l.startswith("[quilt warning] "))
    if r.returncode in (0, 1, 2) and (r.returncode == 0 or error.startswith("quilt: ")):
        passed += 1
        path.unlink()
    else:
        failed += 1
        print(f"FAIL {path} (from {source.parent.name}): exit {r.returncode}: {stderr[-300:]!r}")

# Hostile attributes whose sizes overflow int64 (or divide by zero): exit 2 with the node and
# what overflowed, never undefined behaviour that happens to give some error or a crash.
I64_MAX, I64_2P62 = 2**63 - 1, 2**62


def check(path, args, ok):
    """Runs `quilt ARGS` (60 s at most); counts a pass when ok(result, stderr) holds."""
    global passed, failed
    try:
        r = subprocess.run([str(quilt), *args], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        failed += 1
        print(f"FAIL {path}: `quilt {args[0]}` hung for 60 s")
        return
    stderr = r.stderr.decode("utf-8", "replace")
    if ok(r, stderr):
        passed += 1
    else:
        failed += 1
        print(f"FAIL {path}: exit {r.returncode}: {stderr[-300:]!r}")


def save(filename, graph):
    """graph as an opset-19 model in work/filename; returns the path."""
    path = work / filename
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
                     .SerializeToString())
    return path


def hostile(name, node, inputs, expect):
    global passed, failed
    graph = helper.make_graph(
        [node], name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, s) for k, s in inputs],
        [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    path = work / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    r = subprocess.run([str(quilt), "run", str(path)], capture_output=True, timeout=60)
    stderr = r.stderr.decode("utf-8", "replace")
    if r.returncode == 2 and stderr.strip() == f"quilt: {expect}":
        passed += 1
        path.unlink()
    else:
        failed += 1
        print(f"FAIL {path}: exit {r.returncode}: {stderr[-300:]!r}, expected {expect!r}")


hostile("conv_huge_pads", helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[I64_MAX, 0, 0, 0]),
        [("x", [1, 1, 5, 5]), ("w", [1, 1, 3, 3])],
        '[Conv node "c"] output size overflows int64: 5 + 9223372036854775807')
# Pads that make an output too large to count, with constant weights: a clear error naming the
# shape. (fuzz_run found the conv kernel's constructor multiplying such dims, a signed overflow
# that only UBSan sees; this model, whose output is the graph's, is refused before that point.)
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "w"], ["y"], name="c", dilations=[2, 2], strides=[2, 2],
                      pads=[1, I64_2P62, 2**31, 1])], "conv_output_too_large_to_count",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.5] * 108)])
path = save("conv_output_too_large_to_count.onnx", graph)
check(path, ["run", str(path)], lambda r, err: r.returncode == 1 and
      "[2, 4, 1073741827, 2305843009213693955] (float32): byte size overflows int64" in err)
hostile("lstm_huge_hidden_size", helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="l", hidden_size=I64_2P62),
        [("x", [2, 1, 3]), ("w", [1, 4, 3]), ("r", [1, 4, 1])],
        '[LSTM node "l"] gates * hidden_size overflows int64: 4 * 4611686018427387904')
hostile("deform_conv_zero_stride",
        helper.make_node("DeformConv", ["x", "w", "o"], ["y"], name="d", strides=[0, 1]),
        [("x", [1, 1, 5, 5]), ("w", [1, 1, 3, 3]), ("o", [1, 18, 3, 3])],
        '[DeformConv node "d"] strides [0, 1], dilations [1, 1] and pads [0, 0, 0, 0]: expected '
        'positive strides and dilations, non-negative pads')

# A pool window far larger than the input is valid, only costly if the work follows the kernel:
# AveragePool's per-output counts looped over the 2^62 taps (fuzz_run timed out). Now they are
# counted in closed form; the answer is each column pair's mean over all rows.
import numpy as np  # noqa: E402

graph = helper.make_graph(
    [helper.make_node("AveragePool", ["x"], ["y"], name="p", auto_pad="SAME_LOWER",
                      kernel_shape=[I64_2P62, 2])], "huge_pool",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 32])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
hp = save("average_pool_huge_kernel.onnx", graph)
hx = np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)
np.save(work / "huge_pool_x.npy", hx)
want = np.stack([hx[:, :, :, max(0, w - 1):w + 1].mean(axis=(2, 3)) for w in range(32)], -1)


def pool_answer(r, _):
    got = np.load(work / "huge_pool_out" / "y.npy") if r.returncode == 0 else None
    return got is not None and got.shape == (1, 3, 32, 32) and np.allclose(
        got, want[:, :, None, :], atol=1e-5)


check(hp, ["run", str(hp), "--input", f"x={work / 'huge_pool_x.npy'}", "--output-dir",
           str(work / "huge_pool_out")], pool_answer)

# A Conv whose W is a graph input declared [1, 1, 1, 2^31]: valid, and the session must not
# build per-kernel-column tables from the declared shape (it built 2^31 of them, 16 GB, for over
# a minute); a run works from the W it is given.
graph = helper.make_graph(
    [helper.make_node("Conv", ["x", "w"], ["y"], name="c", auto_pad="SAME_UPPER")], "wide_w",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4]),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 1, 2**31])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
ww = save("conv_declared_wide_w.onnx", graph)
check(ww, ["plan", str(ww)], lambda r, _: r.returncode == 0 and b"patch 0  cpu  1 node" in r.stdout)

# Unnamed outputs (fuzz_run: a MaxPool whose one output was "" ran, and read the geometry of an
# output shape of rank 0). A required output cannot be unnamed (onnxruntime refuses it too); a
# node whose outputs are all optional and unnamed makes nothing and is not run.
x_info = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 5, 5])]
y_info = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
pool = helper.make_node("MaxPool", ["x"], ["y"], name="p", kernel_shape=[2, 2])
for name, extra, expect in (
        ("unnamed_required_output", helper.make_node("MaxPool", ["x"], [""], name="q", kernel_shape=[5, 5]),
         '[MaxPool node "q"] required output 0 is empty'),
        ("unnamed_optional_outputs", helper.make_node("LSTM", ["s", "w", "r"], ["", "", ""], name="l",
                                                      hidden_size=1), None)):
    lstm_weights = [helper.make_tensor(n, TensorProto.FLOAT, [1, 4, k], [0.5] * 4 * k)
                    for n, k in (("w", 2), ("r", 1))]
    s_info = [helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 1, 2])]
    path = save(f"{name}.onnx", helper.make_graph([pool, extra], name, x_info + s_info, y_info,
                                                  lstm_weights))
    check(path, ["run", str(path)],
          lambda r, err, expect=expect: (r.returncode == 2 and err.strip() == f"quilt: {expect}")
          if expect else (r.returncode == 0 and b"y: float32 [1, 1, 4, 4]" in r.stdout))

# TreeEnsemble (ai.onnx.ml 5) unrolls its trees from nodes_*: a branch back to the root recursed
# until the fuzzer's stack overflowed (under ASan, before the old 10,000-level limit), and
# branches that share subtrees unroll exponentially. Both fail the session's creation, naming
# the node (the CPU backend's compile step).
from onnx import numpy_helper  # noqa: E402


def tree_model(name, n, true_ids, false_ids, true_leafs, false_leafs):
    node = helper.make_node(
        "TreeEnsemble", ["x"], ["y"], name="t", domain="ai.onnx.ml", tree_roots=[0],
        nodes_featureids=[0] * n, nodes_truenodeids=true_ids, nodes_falsenodeids=false_ids,
        nodes_trueleafs=true_leafs, nodes_falseleafs=false_leafs,
        nodes_modes=numpy_helper.from_array(np.zeros(n, np.uint8), "modes"),
        nodes_splits=numpy_helper.from_array(np.zeros(n, np.float32), "splits"),
        leaf_targetids=[0], leaf_weights=numpy_helper.from_array(np.ones(1, np.float32), "w"),
        n_targets=1)
    graph = helper.make_graph([node], name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = work / f"{name}.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19),
                                                             helper.make_opsetid("ai.onnx.ml", 5)])
                     .SerializeToString())
    return path


for path, expect in (
        (tree_model("tree_cycle", 1, [0], [0], [0], [1]),
         '[TreeEnsemble node "t"] the trees\' branches share subtrees or loop (4 nodes unrolled '
         'from 1 nodes and 1 leaves)'),
        # 40 nodes, both branches of each to the next: 2^40 paths.
        (tree_model("tree_shared_subtrees", 40, list(range(1, 40)) + [0], list(range(1, 40)) + [0],
                    [0] * 39 + [1], [0] * 39 + [1]),
         '[TreeEnsemble node "t"] the trees\' branches share subtrees or loop (82 nodes unrolled '
         'from 40 nodes and 1 leaves)')):
    check(path, ["run", str(path)], lambda r, err, expect=expect:
          r.returncode == 1 and err.strip().endswith(f"compile: {expect}"))

# DeformConv's kernel indexes the offsets by W's kernel and X's batch: shapes that disagree are
# load errors where the shapes are known (a kernel_shape other than W's, an offset of another
# batch, a bias of another length) and run-time errors where only the run knows them (the fuzzer
# found a symbolic batch of X read past an offset of batch 1).
hostile("deform_conv_kernel_shape_not_w",
        helper.make_node("DeformConv", ["x", "w", "o"], ["y"], name="d", kernel_shape=[3, 3]),
        [("x", [1, 1, 5, 5]), ("w", [1, 1, 2, 2]), ("o", [1, 18, 3, 3])],
        '[DeformConv node "d"] kernel_shape [3, 3] does not match W\'s shape [1, 1, 2, 2]')
hostile("deform_conv_offset_batch",
        helper.make_node("DeformConv", ["x", "w", "o"], ["y"], name="d"),
        [("x", [2, 1, 3, 3]), ("w", [1, 1, 2, 2]), ("o", [1, 8, 2, 2])],
        '[DeformConv node "d"] offset has batch 1, X has 2')
hostile("deform_conv_bias_length",
        helper.make_node("DeformConv", ["x", "w", "o", "b"], ["y"], name="d"),
        [("x", [1, 1, 3, 3]), ("w", [2, 1, 2, 2]), ("o", [1, 8, 2, 2]), ("b", [3])],
        '[DeformConv node "d"] B has shape [3], expected [2] (W\'s output channels)')
graph = helper.make_graph(
    [helper.make_node("DeformConv", ["x", "w", "o"], ["y"], name="d")], "deform_run_batch",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 3, 3]),
     helper.make_tensor_value_info("w", TensorProto.FLOAT, [1, 1, 2, 2]),
     helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 8, 2, 2])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
path = save("deform_run_batch.onnx", graph)
# GatherElements addresses data by the indices' positions: indices larger than data off the axis
# read past data (the fuzzer found it); now an error naming both shapes.
graph = helper.make_graph(
    [helper.make_node("GatherElements", ["d", "i"], ["y"], name="g", axis=1)], "gather_elements",
    [helper.make_tensor_value_info("d", TensorProto.FLOAT, [2, 3]),
     helper.make_tensor_value_info("i", TensorProto.INT64, [4, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
ge = save("gather_elements_larger.onnx", graph)
r = subprocess.run([str(quilt), "run", str(ge)], capture_output=True, timeout=60)
stderr = r.stderr.decode("utf-8", "replace")
want = ('[GatherElements node "g"] indices [4, 3] is larger than data [2, 3] in dim 0 (only the '
        'axis, 1, may differ)')
if r.returncode in (1, 2) and want in stderr:
    passed += 1
    ge.unlink()
else:
    failed += 1
    print(f"FAIL {ge}: exit {r.returncode}: {stderr[-300:]!r}, expected {want!r}")
# ScatterElements addresses data the same way (and writes), one update per index.
for name, idx_shape, upd, want in [
        ("scatter_elements_larger", [4, 3], [4, 3],
         '[ScatterElements node "s"] indices [4, 3] is larger than data [2, 3] in dim 0 (only '
         'the axis, 1, may differ)'),
        ("scatter_elements_updates", [2, 2], [2, 3],  # caught by shape inference
         '[ScatterElements node "s"] indices [2, 2] and updates [2, 3] must have the same shape')]:
    graph = helper.make_graph(
        [helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="s", axis=1)], name,
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("i", TensorProto.INT64, idx_shape),
         helper.make_tensor_value_info("u", TensorProto.FLOAT, upd)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    se = save(f"{name}.onnx", graph)
    r = subprocess.run([str(quilt), "run", str(se)], capture_output=True, timeout=60)
    stderr = r.stderr.decode("utf-8", "replace")
    if r.returncode in (1, 2) and want in stderr:
        passed += 1
        se.unlink()
    else:
        failed += 1
        print(f"FAIL {se}: exit {r.returncode}: {stderr[-300:]!r}, expected {want!r}")
x3 = work / "deform_x3.npy"
with open(x3, "wb") as f:  # a .npy of float32 [3, 1, 3, 3], ones
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 1, 3, 3), }"
    header += " " * (63 - len(header)) + "\n"
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    f.write(b"\x00\x00\x80\x3f" * 27)
r = subprocess.run([str(quilt), "run", str(path), "--input", f"x={x3}"], capture_output=True,
                   timeout=60)
stderr = r.stderr.decode("utf-8", "replace")
if r.returncode == 2 and stderr.strip() == 'quilt: [DeformConv node "d"] offset has batch 1, X has 3':
    passed += 1
    path.unlink()
else:
    failed += 1
    print(f"FAIL {path}: exit {r.returncode}: {stderr[-300:]!r}, expected the batches named")

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
