"""Shared helpers for the op test-case generators (tests/cases/gen_<family>.py).

A case is one small ONNX model built with onnx.helper, its inputs, and the outputs onnxruntime
computes for them, written in the layout of the ONNX backend test suite:

    OUT/<family>/<case>/model.onnx
    OUT/<family>/<case>/test_data_set_0/input_<i>.pb, output_<i>.pb
    OUT/<family>/<case>/tolerance        (optional: "rtol atol")

tests/tools/case_runner.cpp runs every case through quilt::Session and compares.

    from casegen import Cases
    cases = Cases("elementwise")
    cases.node("relu_basic", "Relu", {"x": rand(3, 4)})             # one node, ORT reference
    cases.node("add_bcast", "Add", {"a": rand(2, 3), "b": rand(3)})
    cases.node("clip", "Clip", {"x": rand(5)}, min=-0.5)                # attributes as kwargs
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_OPSET = 17
RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32, low=-1.0, high=1.0):
    """Uniform random array (seeded once per process, so the cases are reproducible)."""
    return RNG.uniform(low, high, size=shape).astype(dtype)


def randint(*shape, low=0, high=10, dtype=np.int64):
    return RNG.integers(low, high, size=shape).astype(dtype)


def run_onnxruntime(model, feeds, outputs=None):
    """model's outputs (all, or those named) on onnxruntime's CPU provider with its graph
    optimizations off, as a reference."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3  # no warnings about unused initializers
    blob = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"]).run(outputs, feeds)


def ort_u8s8_saturates() -> bool:
    """Whether onnxruntime's uint8 x int8 products may be off here: on an x86 CPU without VNNI
    (AVX512-VNNI or AVX-VNNI) its kernels multiply with AVX2's vpmaddubsw, which adds each pair
    of products in int16 with saturation (two products of 255 x -128 already pass -32768),
    so QLinearConv, QGemm and the like give results a few steps from the spec's exact ones
    (seen on an AMD EPYC Zen 3). Quilt's kernels are exact on every path: where this is true,
    the generators take the spec's arithmetic as expected instead of onnxruntime's."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    x86 = "avx2" in flags or "sse2" in flags
    return x86 and "avx512_vnni" not in flags and "avx_vnni" not in flags


def u8s8(arrays) -> bool:
    """Whether the arrays mix uint8 and int8 (onnxruntime's saturating product, above)."""
    types = {np.asarray(a).dtype for a in arrays}
    return np.dtype(np.uint8) in types and np.dtype(np.int8) in types


def _value_info(name, arr):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape)


class Cases:
    """Writes the cases of one op family under $QUILT_CASES_DIR/<family> (or ./cases/<family>)."""

    def __init__(self, family: str, out_dir: str | None = None):
        root = Path(out_dir or os.environ.get("QUILT_CASES_DIR", "cases"))
        self.dir = root / family
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.names: set[str] = set()

    def model(self, name, graph_nodes, inputs: dict, outputs: list, initializers: dict | None = None,
              opset=DEFAULT_OPSET, rtol=1e-4, atol=1e-5, expected: dict | None = None,
              output_types: dict | None = None, rewrites: dict | None = None, ir_version=8,
              graph_inputs: list | None = None):
        """A whole graph. inputs: name -> array (fed at run time). initializers: name -> array
        (constants in the model). outputs: output names. expected: name -> array to use instead
        of onnxruntime (when ORT lacks the op). output_types: name -> TensorProto dtype when the
        output dtype differs from float32 (only needed with expected=None and no ORT).
        rewrites: pattern -> count the level-1 passes must report (core/optimize; case_runner
        checks it, and that level 0 rewrites nothing); {} for none. graph_inputs: initializer
        names also listed as graph inputs (overridable from IR 4 on)."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        initializers = initializers or {}
        graph = helper.make_graph(
            graph_nodes, name,
            [_value_info(k, v) for k, v in inputs.items()] +
            [_value_info(k, initializers[k]) for k in graph_inputs or []],
            [helper.make_tensor_value_info(o, output_types[o], None) if o in (output_types or {})
             else helper.make_empty_tensor_value_info(o) for o in outputs],
            [numpy_helper.from_array(v, k) for k, v in initializers.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = ir_version
        if expected is None:
            expected = dict(zip(outputs, run_onnxruntime(m, inputs, outputs)))
        # Declare the real output types so the model is self-describing.
        for o in m.graph.output:
            arr = np.asarray(expected[o.name])
            o.CopyFrom(_value_info(o.name, arr))
        case_dir = self._write(name, m, inputs, outputs, expected, rtol, atol)
        if rewrites is not None:
            (case_dir / "rewrites").write_text("".join(f"{n} {p}\n" for p, n in rewrites.items()))

    def whole(self, name, model, inputs: dict, rtol=1e-5, atol=1e-5, expected: dict | None = None):
        """A model built elsewhere (e.g. converted by skl2onnx), with its outputs from
        onnxruntime (or `expected`: output name -> array)."""
        assert name not in self.names, f"duplicate case {name}"
        self.names.add(name)
        outputs = [o.name for o in model.graph.output]
        if expected is None:
            import onnxruntime as ort
            so = ort.SessionOptions()
            so.log_severity_level = 3
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
            expected = dict(zip(outputs, sess.run(outputs, inputs)))
        self._write(name, model, inputs, outputs, expected, rtol, atol)

    def _write(self, name, model, inputs, outputs, expected, rtol, atol):
        """Writes the case's model, inputs, expected outputs and tolerance; returns its folder."""
        case_dir = self.dir / name
        data_dir = case_dir / "test_data_set_0"
        data_dir.mkdir(parents=True)
        onnx.save(model, case_dir / "model.onnx")
        for i, (k, v) in enumerate(inputs.items()):
            (data_dir / f"input_{i}.pb").write_bytes(numpy_helper.from_array(np.asarray(v), k).SerializeToString())
        for i, o in enumerate(outputs):
            (data_dir / f"output_{i}.pb").write_bytes(
                numpy_helper.from_array(np.asarray(expected[o]), o).SerializeToString())
        (case_dir / "tolerance").write_text(f"{rtol} {atol}\n")
        return case_dir

    def node(self, name, op_type, inputs: dict, n_outputs=1, initializers: dict | None = None,
             opset=DEFAULT_OPSET, rtol=1e-4, atol=1e-5, expected=None, domain="", **attrs):
        """A one-node model. inputs (runtime) come first, then initializers, in the node's input
        order as given: pass initializers={...} for inputs that must be constant (e.g. shapes).
        Use the name "" in `order` via model() when an optional input must be skipped."""
        names = list(inputs) + list(initializers or {})
        outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
        node = helper.make_node(op_type, names, outs, name=name, domain=domain, **attrs)
        self.model(name, [node], inputs, outs, initializers, opset, rtol, atol, expected)


def quantize_dequantize_cases(reference, tn, t, np_t, values, zp_lo, zp_hi):
    """QuantizeLinear (per tensor, per axis, blocked, output_dtype without a zero point, float16)
    and DequantizeLinear (per tensor, per axis, blocked, float16) cases of the integer type t
    (name tn, ml_dtypes type np_t, values(*shape) random values of its whole range, zero points
    in [zp_lo, zp_hi)), whose expected values `reference(name, nodes, inputs, outputs,
    initializers)` takes from onnx's reference. Returns the tensor q [5, 11, 3] it dequantizes,
    for more cases."""
    def zp(*shape):
        return randint(*shape, low=zp_lo, high=zp_hi, dtype=np.int8).astype(np_t)

    node = helper.make_node
    x = rand(4, 9, 7, low=-12, high=12)
    reference(f"quantize_{tn}_per_tensor", [node("QuantizeLinear", ["x", "s", "z"], ["y"])],
              {"x": x}, ["y"], {"s": np.array(0.9, np.float32), "z": np.array(zp_lo + 1, np_t)})
    reference(f"quantize_{tn}_per_axis", [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1)],
              {"x": x}, ["y"], {"s": rand(9, low=0.5, high=2), "z": zp(9)})
    reference(f"quantize_{tn}_blocked",
              [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=2, block_size=3)], {"x": x},
              ["y"], {"s": rand(4, 9, 3, low=0.5, high=2), "z": zp(4, 9, 3)})
    reference(f"quantize_{tn}_output_dtype_no_zero_point",
              [node("QuantizeLinear", ["x", "s"], ["y"], output_dtype=t)], {"x": x}, ["y"],
              {"s": np.array(1.3, np.float32)})
    reference(f"quantize_{tn}_float16", [node("QuantizeLinear", ["x", "s", "z"], ["y"])],
              {"x": x.astype(np.float16)}, ["y"],
              {"s": np.array(0.9, np.float16), "z": np.array(zp_lo + 1, np_t)})
    q = values(5, 11, 3)
    reference(f"dequantize_{tn}_per_tensor", [node("DequantizeLinear", ["q", "s", "z"], ["y"])],
              {"q": q}, ["y"], {"s": np.array(0.25, np.float32), "z": np.array(zp_lo, np_t)})
    reference(f"dequantize_{tn}_per_axis",
              [node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1)], {"q": q}, ["y"],
              {"s": rand(11, low=0.1, high=1), "z": zp(11)})
    # blocked along axis 1 in blocks of 4: the last block of 11 has 3
    reference(f"dequantize_{tn}_blocked",
              [node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1, block_size=4)],
              {"q": q}, ["y"], {"s": rand(5, 3, 3, low=0.1, high=1), "z": zp(5, 3, 3)})
    reference(f"dequantize_{tn}_float16", [node("DequantizeLinear", ["q", "s", "z"], ["y"])],
              {"q": q}, ["y"], {"s": np.array(0.25, np.float16), "z": np.array(zp_lo, np_t)})
    return q


def reference_outputs(name, nodes, inputs: dict, outputs: list, initializers: dict, opset,
                      ir_version):
    """The model of `nodes` (inputs fed at run time, initializers constants) and its outputs by
    onnx's reference implementation (the spec, for ops or types onnxruntime lacks)."""
    from onnx.reference import ReferenceEvaluator
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return m, ReferenceEvaluator(m).run(None, inputs)
