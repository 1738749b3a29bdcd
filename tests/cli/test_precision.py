"""End-to-end tests of `--precision` (run, plan, bench) and of what `quilt devices` says of the
precisions: a float32 CNN + MLP run with --precision bf16 against the same model at fp32 and
against onnxruntime (cosine similarity, argmax agreement, and that bf16 really changed the
numbers), bad values, and the refusal on a CPU without AVX512-BF16 (QUILT_CPU_NO_BF16=1 makes
this one behave as such).

usage: test_precision.py QUILT_BINARY WORK_DIR
Prints one line per failed check and "N passed, N failed".
"""
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from cli_checks import check, configure, expect, finish, quilt
from onnx import TensorProto, helper, numpy_helper

QUILT, WORK = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
WORK.mkdir(parents=True, exist_ok=True)
configure(QUILT)


# A small classifier: Conv 3x3 (pad 1) + Relu, Conv 3x3 stride 2 + Relu, a pointwise Conv, then
# Flatten, MatMul + Add (-> Gemm at level 1), Relu, Gemm: every product bf16 takes.
rng = np.random.default_rng(0)


def init(name, *shape, scale=None):
    fan_in = np.prod(shape[1:]) if len(shape) > 1 else shape[0]
    w = rng.standard_normal(shape).astype(np.float32) * (scale or np.sqrt(2.0 / fan_in))
    return numpy_helper.from_array(w.astype(np.float32), name)


nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1], strides=[2, 2]),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("Conv", ["r2", "w3"], ["c3"], name="conv3"),
    helper.make_node("Flatten", ["c3"], ["f"], name="flat"),
    helper.make_node("MatMul", ["f", "w4"], ["m4"], name="fc1"),
    helper.make_node("Add", ["m4", "b4"], ["a4"], name="fc1_bias"),
    helper.make_node("Relu", ["a4"], ["r4"], name="relu4"),
    helper.make_node("Gemm", ["r4", "w5", "b5"], ["logits"], name="fc2", transB=1),
]
inits = [init("w1", 32, 3, 3, 3), init("b1", 32, scale=0.1), init("w2", 64, 32, 3, 3),
         init("b2", 64, scale=0.1), init("w3", 32, 64, 1, 1), init("w4", 32 * 8 * 8, 256),
         init("b4", 256, scale=0.1), init("w5", 10, 256), init("b5", 10, scale=0.1)]
graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 16, 16])],
                          [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 10])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
model.ir_version = 8
MODEL = WORK / "cnn.onnx"
onnx.save(model, MODEL)
x = rng.standard_normal((64, 3, 16, 16)).astype(np.float32)
np.save(WORK / "x.npy", x)
want = ort.InferenceSession(str(MODEL), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def run(precision, out_dir, env=None):
    r = expect(f"run --precision {precision}", ["run", MODEL, "--input", f"x={WORK / 'x.npy'}",
                                                 "--precision", precision, "--output-dir", out_dir],
               0, "logits: float32 [64, 10]", stream="stdout", env=env)
    return np.load(Path(out_dir) / "logits.npy") if r.returncode == 0 else None


def cosine(a, b):
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


devices = quilt("devices")
has_bf16 = "bf16 (AVX512-BF16 vdpbf16ps)" in devices.stdout
check("devices lists the precisions", "precisions: fp32" in devices.stdout, devices.stdout)
expect("devices without AVX512-BF16", ["devices"], 0, "precisions: fp32; bf16 not accelerated (no AVX512-BF16",
       stream="stdout", env={"QUILT_CPU_NO_BF16": "1"})

fp32 = run("fp32", WORK / "fp32")
if fp32 is not None:
    check("fp32 equals onnxruntime", np.allclose(fp32, want, rtol=1e-4, atol=1e-4),
          np.abs(fp32 - want).max())
if has_bf16:
    bf16 = run("bf16", WORK / "bf16")
    if bf16 is not None and fp32 is not None:
        cos = min(cosine(bf16[i], want[i]) for i in range(len(want)))
        agree = float(np.mean(bf16.argmax(1) == want.argmax(1)))
        rel = np.abs(bf16 - want).max() / np.abs(want).max()
        print(f"bf16 vs onnxruntime fp32: worst per-row cosine {cos:.6f}, argmax agreement {agree:.3f}, "
              f"max |diff| / max |y| {rel:.2e}")
        check("bf16 close to fp32 (cosine per row >= 0.999)", cos >= 0.999, cos)
        check("bf16 argmax agreement >= 0.95", agree >= 0.95, agree)
        # bfloat16 has 8 significant bits: the products moved away from float32's.
        check("bf16 is not float32", rel > 1e-4, rel)
    # The plan does not change: the same nodes on the CPU.
    expect("plan --precision bf16", ["plan", MODEL, "--precision", "bf16"], 0, "patch 0  cpu", stream="stdout")
    expect("bench --precision bf16", ["bench", MODEL, "--precision", "bf16", "--iterations", "3",
                                      "--dim", "n=2"], 0, "latency", stream="stdout")
else:
    print("this CPU has no AVX512-BF16: the bf16 runs are skipped; the refusal is checked")
    expect("bf16 refused on this CPU", ["run", MODEL, "--dim", "n=1", "--precision", "bf16"], 1,
           "precision bf16 needs AVX512-BF16")

expect("bf16 refused without AVX512-BF16", ["run", MODEL, "--dim", "n=1", "--precision", "bf16"], 1,
       "precision bf16 needs AVX512-BF16 (the vdpbf16ps instruction), which this CPU lacks",
       "Use precision fp32", env={"QUILT_CPU_NO_BF16": "1"})
expect("fp32 runs without AVX512-BF16", ["run", MODEL, "--dim", "n=1", "--precision", "fp32"], 0,
       "logits", stream="stdout", env={"QUILT_CPU_NO_BF16": "1"})
expect("unknown precision", ["run", MODEL, "--dim", "n=1", "--precision", "fp16"], 2,
       "SessionOptions.precision is 'fp16', expected fp32 or bf16")
expect("--precision without a value", ["run", MODEL, "--precision"], 2, "--precision needs a value")
expect("cpu backend option precision", ["run", MODEL, "--dim", "n=1", "--backend-option", "cpu:precision=int4"],
       2, "[cpu] option precision is 'int4', expected fp32 or bf16")
for cmd in ("run", "plan", "bench"):
    expect(f"{cmd} --help lists --precision", [cmd, "--help"], 0, "--precision P", "bf16", stream="stdout")

finish()
