"""Shared helpers for the Python package's tests: models built with onnx.helper, and the
environment CTest gives (tests/CMakeLists.txt): QUILT_CLI (the quilt binary),
QUILT_EXAMPLE_PLUGIN (the example backend plugin), POCL_CACHE_DIR and QUILT_OPENCL_CACHE_DIR.

The tests import the installed package (tools/setup.sh installs python/ into .venv) and compare
quilt.onnxruntime with the real onnxruntime in the same process."""
from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OPSET = 17


def pytest_sessionstart(session):
    """Under CTest (QUILT_BUILD_DIR set), refuse to test an installed package older than the
    build or than python/: tools/setup.sh reinstalls it."""
    build, source = os.environ.get("QUILT_BUILD_DIR"), os.environ.get("QUILT_SOURCE_DIR")
    if not build or not source:
        return
    import filecmp
    from pathlib import Path

    import quilt
    installed = Path(quilt.__file__).parent
    # The package carries libquilt under its SONAME's name (libquilt.so.MAJOR.MINOR).
    shipped = sorted(installed.glob("libquilt.so.*")) or [installed / "libquilt.so.*"]
    pairs = [(Path(build) / "libquilt.so", shipped[0])]
    pairs += [(f, installed / f.relative_to(Path(source) / "python" / "quilt"))
              for f in (Path(source) / "python" / "quilt").rglob("*.py")]
    stale = [str(b) for a, b in pairs if not b.exists() or not filecmp.cmp(a, b, shallow=False)]
    if stale:
        pytest.exit(f"the installed quilt package ({installed}) is older than the build or python/ "
                    f"({', '.join(stale[:3])}): run tools/setup.sh (tools/test.sh does)", returncode=1)


def vi(name, elem=TensorProto.FLOAT, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model_bytes(nodes, inputs, outputs, initializers=(), opset=OPSET, ir_version=8, domains=(), **fields):
    """A serialized model; fields set ModelProto fields (producer_name, doc_string, ...)."""
    graph = helper.make_graph(nodes, fields.pop("graph_name", "g"), inputs, outputs, list(initializers))
    if "graph_doc" in fields:
        graph.doc_string = fields.pop("graph_doc")
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = ir_version
    props = fields.pop("metadata_props", None)
    if props:
        helper.set_model_props(model, props)
    for k, v in fields.items():
        setattr(model, k, v)
    return model.SerializeToString()


def mlp_bytes(seed=0, batch="batch"):
    """y = Softmax(Relu(x @ W + b)), z = ReduceSum(y * 2) per row: x float32 [batch, 8]. Six nodes
    as written, five at level 1 (MatMul + Add become one Gemm)."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b"),
             numpy_helper.from_array(np.float32(2.0).reshape(()), "two"),
             numpy_helper.from_array(np.array([1], np.int64), "axes")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"], name="mm"),
             helper.make_node("Add", ["mm", "b"], ["h"], name="add"),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=-1),
             helper.make_node("Mul", ["y", "two"], ["y2"], name="scale"),
             helper.make_node("ReduceSum", ["y2", "axes"], ["z"], name="sum", keepdims=0)]
    return model_bytes(nodes, [vi("x", TensorProto.FLOAT, [batch, 8])],
                       [vi("y", TensorProto.FLOAT, [batch, 6]), vi("z", TensorProto.FLOAT, [batch])], inits)


def add_bytes(shape=(4,), elem=TensorProto.FLOAT):
    """c = a + b."""
    return model_bytes([helper.make_node("Add", ["a", "b"], ["c"], name="add")],
                       [vi("a", elem, list(shape)), vi("b", elem, list(shape))], [vi("c", elem, list(shape))])


@pytest.fixture
def save(tmp_path):
    """save(model_bytes, name='model.onnx') -> path of the file written."""
    def write(data, name="model.onnx"):
        path = tmp_path / name
        path.write_bytes(data)
        return str(path)
    return write


def example_plugin() -> str:
    path = os.environ.get("QUILT_EXAMPLE_PLUGIN", "")
    if not path or not os.path.exists(path):
        pytest.skip("QUILT_EXAMPLE_PLUGIN is not set to the example plugin (CTest sets it)")
    return path


def quilt_cli() -> str:
    path = os.environ.get("QUILT_CLI", "")
    if not path or not os.path.exists(path):
        pytest.skip("QUILT_CLI is not set to the quilt binary (CTest sets it)")
    return path


def opencl_device() -> bool:
    """True when Quilt's OpenCL backend has a device (PoCL in CI)."""
    import quilt
    return any(d["backend"] == "opencl" for d in quilt.devices())


def run_cli(*args, **kwargs):
    return subprocess.run([quilt_cli(), *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)
