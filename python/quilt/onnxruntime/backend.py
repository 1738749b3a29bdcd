"""onnxruntime.backend on Quilt: onnx's backend interface (quilt.backend)."""
from ..backend import QuiltBackend, QuiltRep, is_compatible, prepare, run, run_model, run_node, supports_device  # noqa: F401
