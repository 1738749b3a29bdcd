"""Quantized ops and their float32 counterparts, Quilt against onnxruntime in one process.

usage: .venv/bin/python tools/bench_quant.py [--threads N] [--rounds N] [--calls N] [--only NAME,...]

One-node models built here (shapes of BERT-base and ResNet-50 layers): MatMulInteger and
QLinearMatMul (128 x 768 x 3072, constant weights), the float32 MatMul of the same shape,
ConvInteger / QLinearConv / float32 Conv (64 -> 64 channels, 3x3, 56x56), QLinearConv of
MobileNet / ResNet shapes (pointwise, depthwise, strided), 4-bit MatMulNBits with one row of A
(an LLM's decoding step; accuracy_level 4 and 0), QuantizeLinear and
DequantizeLinear on 16 MiB (per tensor and per axis) and DynamicQuantizeLinear. Each round times
--calls runs of one runtime; rounds alternate between the runtimes so a noisy neighbour hits
both alike (onnxruntime's threads do not spin between runs, so they leave the cores to Quilt's
round). Prints the median of the rounds per call (ms), Quilt/onnxruntime (of the medians
and of the fastest rounds), GB/s per thread
for the (de)quantize ops, the CPU model and the integer GEMM path Quilt used (QUILT_CPU_ISA
forces one). The machine may be shared: read the ratios, not the absolute times.
"""
import argparse
import os
import statistics
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

import quilt.onnxruntime as qort

RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, inits, opset=21, ms_opset=False):
    g = helper.make_graph(nodes, "bench", inputs, outputs,
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]
                          + ([helper.make_opsetid("com.microsoft", 1)] if ms_opset else []))
    m.ir_version = 10
    return m.SerializeToString()


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def cases():
    u8 = lambda *s: RNG.integers(0, 256, s, dtype=np.uint8)  # noqa: E731
    s8 = lambda *s: RNG.integers(-128, 128, s, dtype=np.int8)  # noqa: E731
    f = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731
    m, k, n = 128, 768, 3072
    a = u8(m, k)
    yield ("MatMulInteger u8xs8 128x768x3072", model(
        [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [vi("a", TensorProto.UINT8, [m, k])], [vi("y", TensorProto.INT32, [m, n])],
        {"b": s8(k, n), "az": np.array(128, np.uint8), "bz": np.array(0, np.int8)}), {"a": a}, 0)
    yield ("QLinearMatMul u8xs8 128x768x3072", model(
        [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [vi("a", TensorProto.UINT8, [m, k])], [vi("y", TensorProto.UINT8, [m, n])],
        {"as": np.array(0.02, np.float32), "az": np.array(128, np.uint8), "b": s8(k, n),
         "bs": np.array(0.01, np.float32), "bz": np.array(0, np.int8),
         "ys": np.array(4.0, np.float32), "yz": np.array(128, np.uint8)}), {"a": a}, 0)
    yield ("MatMul fp32 128x768x3072", model(
        [helper.make_node("MatMul", ["a", "b"], ["y"])], [vi("a", TensorProto.FLOAT, [m, k])],
        [vi("y", TensorProto.FLOAT, [m, n])], {"b": f(k, n)}), {"a": f(m, k)}, 0)
    x = u8(1, 64, 56, 56)
    conv = dict(pads=[1, 1, 1, 1])
    yield ("ConvInteger u8xu8 64->64 3x3 56x56", model(
        [helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **conv)],
        [vi("x", TensorProto.UINT8, [1, 64, 56, 56])], [vi("y", TensorProto.INT32, [1, 64, 56, 56])],
        {"w": u8(64, 64, 3, 3), "xz": np.array(128, np.uint8), "wz": np.array(128, np.uint8)}),
        {"x": x}, 0)
    yield ("QLinearConv u8xs8 64->64 3x3 56x56", model(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                          **conv)],
        [vi("x", TensorProto.UINT8, [1, 64, 56, 56])], [vi("y", TensorProto.UINT8, [1, 64, 56, 56])],
        {"xs": np.array(0.02, np.float32), "xz": np.array(128, np.uint8), "w": s8(64, 64, 3, 3),
         "ws": np.full(64, 0.01, np.float32), "wz": np.zeros(64, np.int8),
         "ys": np.array(4.0, np.float32), "yz": np.array(128, np.uint8),
         "b": RNG.integers(-1000, 1000, 64, dtype=np.int32)}), {"x": x}, 0)
    for name, cin, cout, k, group, stride, size in (
            ("pointwise 64->256 1x1 56x56", 64, 256, 1, 1, 1, 56),
            ("depthwise 144 3x3 56x56", 144, 144, 3, 144, 1, 56),
            ("depthwise 144 3x3 s2 56x56", 144, 144, 3, 144, 2, 56),
            ("128->128 3x3 s2 56x56", 128, 128, 3, 1, 2, 56)):
        out = (size + 2 * (k // 2) - k) // stride + 1
        yield (f"QLinearConv u8xs8 {name}", model(
            [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                              ["y"], pads=[k // 2] * 4, strides=[stride] * 2, group=group)],
            [vi("x", TensorProto.UINT8, [1, cin, size, size])],
            [vi("y", TensorProto.UINT8, [1, cout, out, out])],
            {"xs": np.array(0.02, np.float32), "xz": np.array(128, np.uint8),
             "w": s8(cout, cin // group, k, k), "ws": np.full(cout, 0.01, np.float32),
             "wz": np.zeros(cout, np.int8), "ys": np.array(4.0, np.float32),
             "yz": np.array(128, np.uint8), "b": RNG.integers(-1000, 1000, cout, dtype=np.int32)}),
            {"x": u8(1, cin, size, size)}, 0)
    yield ("Conv fp32 64->64 3x3 56x56", model(
        [helper.make_node("Conv", ["x", "w"], ["y"], **conv)],
        [vi("x", TensorProto.FLOAT, [1, 64, 56, 56])], [vi("y", TensorProto.FLOAT, [1, 64, 56, 56])],
        {"w": f(64, 64, 3, 3)}), {"x": f(1, 64, 56, 56)}, 0)
    # MatMulNBits (4-bit, blocks of 32) as an LLM decodes: one row of A, GPT-2's MLP shape;
    # accuracy_level 4 lets both runtimes quantize A to int8, 0 keeps it float32.
    k, n = 768, 3072  # (the conv loop above reuses k)
    for level in (4, 0):
        blocks = RNG.integers(0, 256, (n, k // 32, 16), dtype=np.uint8)
        yield (f"MatMulNBits 4-bit 1x{k}x{n} accuracy_level {level}", model(
            [helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=k,
                              N=n, bits=4, block_size=32, accuracy_level=level)],
            [vi("a", TensorProto.FLOAT, [1, k])], [vi("y", TensorProto.FLOAT, [1, n])],
            {"b": blocks, "s": RNG.uniform(0.01, 0.05, n * (k // 32)).astype(np.float32)},
            ms_opset=True), {"a": f(1, k)}, 0)
    count = 4 << 20  # 16 MiB of float32
    xf = f(64, count // 64)
    yield ("QuantizeLinear f32->u8 per tensor 16MiB", model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
        [vi("x", TensorProto.FLOAT, list(xf.shape))], [vi("y", TensorProto.UINT8, list(xf.shape))],
        {"s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)}), {"x": xf}, count * 4)
    yield ("QuantizeLinear f32->s8 per axis 16MiB", model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=0)],
        [vi("x", TensorProto.FLOAT, list(xf.shape))], [vi("y", TensorProto.INT8, list(xf.shape))],
        {"s": np.full(64, 0.02, np.float32), "z": np.zeros(64, np.int8)}), {"x": xf}, count * 4)
    xq = u8(64, count // 64)
    yield ("DequantizeLinear u8->f32 per tensor 4Mi elements", model(
        [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"])],
        [vi("x", TensorProto.UINT8, list(xq.shape))], [vi("y", TensorProto.FLOAT, list(xq.shape))],
        {"s": np.array(0.02, np.float32), "z": np.array(128, np.uint8)}), {"x": xq}, count * 4)
    yield ("DynamicQuantizeLinear 16MiB", model(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])],
        [vi("x", TensorProto.FLOAT, list(xf.shape))],
        [vi("y", TensorProto.UINT8, list(xf.shape)), vi("ys", TensorProto.FLOAT, []),
         vi("yz", TensorProto.UINT8, [])], {}), {"x": xf}, count * 4)


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--only", default="")
    args = ap.parse_args()
    print(f"cpu: {cpu_model()}  threads: {args.threads}  onnxruntime {onnxruntime.__version__}"
          f"  QUILT_CPU_ISA={os.environ.get('QUILT_CPU_ISA', '(best)')}")
    print(f"{'case':52s} {'quilt ms':>9s} {'ort ms':>9s} {'q/ort':>6s} {'min q/ort':>9s}"
          f" {'quilt GB/s':>10s}")
    for name, blob, feeds, nbytes in cases():
        if args.only and not any(o in name for o in args.only.split(",")):
            continue
        so = onnxruntime.SessionOptions()
        so.intra_op_num_threads = args.threads
        # Its threads would otherwise spin after each run, taking the cores from Quilt's next
        # round on a small machine.
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        ort = onnxruntime.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
        qso = qort.SessionOptions()
        qso.intra_op_num_threads = args.threads
        q = qort.InferenceSession(blob, qso, providers=["CPUExecutionProvider"])
        times = {"quilt": [], "ort": []}
        for s in (q, ort):
            for _ in range(2):
                s.run(None, feeds)
        for _ in range(args.rounds):
            for key, s in (("quilt", q), ("ort", ort)):
                t = time.perf_counter()
                for _ in range(args.calls):
                    s.run(None, feeds)
                times[key].append((time.perf_counter() - t) / args.calls * 1e3)
        mq, mo = statistics.median(times["quilt"]), statistics.median(times["ort"])
        best = min(times["quilt"]) / min(times["ort"])
        rate = f"{nbytes / (mq * 1e-3) / 1e9 / args.threads:10.2f}" if nbytes else ""
        print(f"{name:52s} {mq:9.3f} {mo:9.3f} {mq / mo:6.2f} {best:9.2f} {rate}")


if __name__ == "__main__":
    main()
