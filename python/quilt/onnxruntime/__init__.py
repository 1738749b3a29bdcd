"""onnxruntime's Python API on Quilt: programs written for onnxruntime run unchanged.

    import quilt.onnxruntime as ort
    session = ort.InferenceSession("model.onnx", providers=["opencl", "CPUExecutionProvider"])
    y = session.run(None, {"x": x})[0]

Or leave the program as it is and run it with `python -m quilt.as_onnxruntime prog.py ARGS`
(or QUILT_AS_ONNXRUNTIME=1): its `import onnxruntime` then gets this module.

__version__ is that of the onnxruntime API followed, with Quilt's as a local version
("1.32.0+quilt.0.1.0"), so that clients comparing versions see the API they expect.
"""
from .capi import _pybind_state  # noqa: F401 (onnxruntime imports it too)
from .capi.onnxruntime_inference_collection import InferenceSession, IOBinding, OrtDeviceVendorId, OrtValue
from .capi.onnxruntime_pybind11_state import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    ModelMetadata,
    NodeArg,
    OrtEpAssignedNode,
    OrtEpAssignedSubgraph,
    OrtMemType,
    RunOptions,
    SessionOptions,
    disable_telemetry_events,
    enable_telemetry_events,
    get_all_providers,
    get_available_providers,
    get_build_info,
    get_device,
    get_version_string,
    set_default_logger_callback,
    set_default_logger_severity,
    set_default_logger_verbosity,
    set_seed,
)

__version__ = get_version_string()
version = __version__
package_name = "quilt"

__all__ = [
    "ExecutionMode", "ExecutionOrder", "GraphOptimizationLevel", "IOBinding", "InferenceSession",
    "ModelMetadata", "NodeArg", "OrtDeviceVendorId", "OrtEpAssignedNode", "OrtEpAssignedSubgraph",
    "OrtMemType", "OrtValue", "RunOptions", "SessionOptions",
    "disable_telemetry_events", "enable_telemetry_events", "get_all_providers",
    "get_available_providers", "get_build_info", "get_device", "get_version_string",
    "set_default_logger_callback", "set_default_logger_severity", "set_default_logger_verbosity",
    "set_seed", "__version__",
]
