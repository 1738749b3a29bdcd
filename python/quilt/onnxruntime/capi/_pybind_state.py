"""onnxruntime.capi._pybind_state: re-exports onnxruntime_pybind11_state, as onnxruntime's does."""
from .onnxruntime_pybind11_state import *  # noqa: F401,F403
from .onnxruntime_pybind11_state import (  # noqa: F401 (names starting with nothing special)
    EPFail, EngineError, Fail, InvalidArgument, InvalidGraph, InvalidProtobuf, ModelLoadCanceled,
    ModelLoaded, ModelRequiresCompilation, NoModel, NoSuchFile, NotFound, NotImplemented,
    RuntimeException)
