"""Quilt, a heterogeneous inference runtime for ONNX models, from Python.

    import numpy as np, quilt
    session = quilt.Session("model.onnx", threads=2, backends=["opencl", "cpu"])
    outputs = session.run({"x": np.zeros((1, 3, 224, 224), np.float32)})   # {name: array}
    print(session.plan()["totals"])                                      # where nodes ran

quilt.onnxruntime is the same engine behind onnxruntime's API (InferenceSession, SessionOptions,
...), and `python -m quilt.as_onnxruntime prog.py` runs an unchanged onnxruntime program on it.
quilt.backend is onnx's backend interface (prepare, run_model, run_node, supports_device).
"""
from . import _quilt
from ._quilt import (
    Error,
    InvalidArgument,
    InvalidModel,
    Io,
    LogLevel,
    ModelMetadata,
    NotImplemented,
    OutOfMemory,
    Profile,
    Runtime,
    SessionOptions,
    ValueInfo,
)
from ._session import Session, devices, list_backends

__version__ = _quilt.version()

__all__ = [
    "Error", "InvalidArgument", "InvalidModel", "Io", "LogLevel", "ModelMetadata", "NotImplemented",
    "OutOfMemory", "Profile", "Runtime", "Session", "SessionOptions", "ValueInfo", "devices", "list_backends",
    "__version__",
]
