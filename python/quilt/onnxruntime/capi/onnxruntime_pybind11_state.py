"""What onnxruntime.capi.onnxruntime_pybind11_state holds that clients use: the exception classes,
SessionOptions, RunOptions, the enums, NodeArg, ModelMetadata, OrtEpAssignedSubgraph/Node and
the module functions.

Quilt errors (quilt.Error) become the classes onnxruntime raises for the same failure, with its
message form "[ONNXRuntimeError] : CODE : NAME : message" and Quilt's message, which names the
input, node or file and what was expected.
"""
from __future__ import annotations

import enum
import os
import warnings

from ... import _quilt

# The onnxruntime release whose Python API this module follows.
ORT_API_VERSION = "1.32.0"


class Fail(Exception):
    pass


class InvalidArgument(Exception):
    pass


class NoSuchFile(Exception):
    pass


class NoModel(Exception):
    pass


class EngineError(Exception):
    pass


class RuntimeException(Exception):
    pass


class InvalidProtobuf(Exception):
    pass


class ModelLoaded(Exception):
    pass


class NotImplemented(Exception):  # noqa: A001 (onnxruntime's name)
    pass


class InvalidGraph(Exception):
    pass


class EPFail(Exception):
    pass


class NotFound(Exception):
    pass


class ModelLoadCanceled(Exception):
    pass


class ModelRequiresCompilation(Exception):
    pass


class InvalidModel(InvalidGraph, Fail, InvalidArgument):
    """Not an onnxruntime class: raised for a model Quilt finds malformed (a value nothing
    defines, a cycle, a name defined twice, a type clash). onnxruntime raises InvalidGraph, Fail
    or InvalidArgument for these, depending on the check that trips, so this is all three and
    `except` with any of them catches it."""


# onnxruntime's status codes, as its messages print them.
_STATUS = {Fail: (1, "FAIL"), InvalidArgument: (2, "INVALID_ARGUMENT"), NoSuchFile: (3, "NO_SUCHFILE"),
           NoModel: (4, "NO_MODEL"), EngineError: (5, "ENGINE_ERROR"),
           RuntimeException: (6, "RUNTIME_EXCEPTION"), InvalidProtobuf: (7, "INVALID_PROTOBUF"),
           ModelLoaded: (8, "MODEL_LOADED"), NotImplemented: (9, "NOT_IMPLEMENTED"),
           InvalidGraph: (10, "INVALID_GRAPH"), InvalidModel: (10, "INVALID_GRAPH"), EPFail: (11, "EP_FAIL")}

# quilt.Error.code -> the class onnxruntime raises for that kind of failure.
_BY_CODE = {"InvalidArgument": InvalidArgument, "InvalidModel": InvalidModel,
            "NotImplemented": NotImplemented, "OutOfMemory": RuntimeException, "Io": NoSuchFile,
            "Runtime": RuntimeException}


def ort_error(cls: type, message: str) -> Exception:
    """An onnxruntime exception of class cls with onnxruntime's message prefix."""
    code, name = _STATUS.get(cls, (1, "FAIL"))
    return cls(f"[ONNXRuntimeError] : {code} : {name} : {message}")


def from_quilt_error(e: _quilt.Error) -> Exception:
    """The onnxruntime exception for a Quilt one. A model whose bytes do not parse as a
    ModelProto is onnxruntime's InvalidProtobuf; other invalid models are InvalidModel."""
    message = str(e)
    cls = _BY_CODE.get(getattr(e, "code", ""), Fail)
    if cls is InvalidModel and ("is not a valid ONNX protobuf" in message or "is not an ONNX model" in message):
        cls = InvalidProtobuf
    return ort_error(cls, message)


class _Enum(enum.IntEnum):
    # str() as onnxruntime's enums print: "GraphOptimizationLevel.ORT_ENABLE_ALL".
    __str__ = enum.Enum.__str__


class GraphOptimizationLevel(_Enum):
    """ORT_DISABLE_ALL runs the graph as written (Quilt's optimization level 0); every other
    level is Quilt's level 1 (constant folding and its exact rewrites)."""
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(_Enum):
    """No effect: Quilt always runs each device's patches on their own queue, overlapping
    independent work on different devices."""
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(_Enum):
    """No effect: Quilt runs nodes in its plan's order."""
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class OrtMemType(_Enum):
    CPU_INPUT = -2
    CPU_OUTPUT = -1
    CPU = -1
    DEFAULT = 0


# Session config entries of Quilt's own (SessionOptions.add_session_config_entry).
QUILT_CONFIG_KEYS = {
    "quilt.plugins": "backend plugin libraries to load, separated by os.pathsep",
    "quilt.cpu_fallback": "'0': strict, creation fails listing every node no listed backend claims",
    "quilt.partition_cost_rule": "'0': honour every claim, even tiny islands between CPU nodes",
    "quilt.precision": "'bf16': the CPU's Conv, MatMul and Gemm products on bfloat16 operands (AVX512-BF16)",
    "quilt.pin.NODE": "run node NODE on the named backend (debugging)",
    "quilt.cache_dir": "executable cache directory: compiled patches kept for later sessions and processes",
}


class SessionOptions:
    """onnxruntime.SessionOptions. Honoured: intra_op_num_threads (Quilt's CPU threads; 0 = one
    per core), graph_optimization_level (ORT_DISABLE_ALL = as written, anything else = Quilt's
    level 1), log_severity_level, enable_profiling, profile_file_prefix,
    add_free_dimension_override_by_name (Quilt's fixed_dims) and the quilt.* config entries
    (QUILT_CONFIG_KEYS). Accepted with no effect: inter_op_num_threads, execution_mode,
    execution_order, enable_cpu_mem_arena, enable_mem_pattern, enable_mem_reuse,
    use_deterministic_compute (Quilt's kernels are deterministic), log_verbosity_level, logid,
    optimized_model_filepath (nothing is written), use_per_session_threads,
    add_free_dimension_override_by_denotation, set_ep_context_data_read_func (Quilt runs no
    EPContext nodes, so nothing calls it) and the other config entries."""

    __slots__ = ("enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
                 "execution_mode", "execution_order", "graph_optimization_level", "inter_op_num_threads",
                 "intra_op_num_threads", "log_severity_level", "log_verbosity_level", "logid",
                 "optimized_model_filepath", "profile_file_prefix", "use_deterministic_compute",
                 "use_per_session_threads", "_config", "_free_dims", "_denotation_dims",
                 "_ep_context_read")

    def __init__(self):
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_profiling = False
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.inter_op_num_threads = 0
        self.intra_op_num_threads = 0
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.profile_file_prefix = "onnxruntime_profile_"
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config = {}
        self._free_dims = {}
        self._denotation_dims = {}
        self._ep_context_read = None

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeError(f"SessionOptions does not have configuration with key: {key}") from None

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        self._free_dims[str(dim_name)] = int(dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        self._denotation_dims[str(dim_denotation)] = int(dim_value)  # no effect (see the class)

    def has_providers(self) -> bool:
        return False

    def set_load_cancellation_flag(self, value: bool) -> None:
        pass  # loading is not cancellable

    def register_custom_ops_library(self, library_path: str) -> None:
        raise ort_error(NotImplemented, f"register_custom_ops_library('{library_path}'): Quilt does not "
                        "load onnxruntime custom-op libraries; a Quilt backend plugin can claim the ops "
                        "(the quilt.plugins config entry)")

    def add_initializer(self, name: str, ortvalue) -> None:
        raise ort_error(NotImplemented, f"add_initializer('{name}'): Quilt does not replace initializers "
                        "at session creation; feed an overridable initializer to run() instead")

    def add_external_initializers(self, names, ortvalues) -> None:
        raise ort_error(NotImplemented, "add_external_initializers: Quilt reads external data from the "
                        "files the model names")

    def add_external_initializers_from_files_in_memory(self, names, buffers, lengths) -> None:
        raise ort_error(NotImplemented, "add_external_initializers_from_files_in_memory: Quilt reads "
                        "external data from the files the model names")

    def set_ep_context_data_read_func(self, read_func, max_data_size: int) -> None:
        """Checked as onnxruntime checks it, then kept with no effect: the callback supplies the
        data of EPContext nodes (an execution provider's precompiled blobs), which Quilt does not
        run (a model with one fails at creation, naming the node)."""
        if read_func is None:
            raise RuntimeError("EPContext data read callback must not be None.")
        if not callable(read_func):
            raise TypeError("set_ep_context_data_read_func(): read_func must be callable")
        if isinstance(max_data_size, bool) or not isinstance(max_data_size, int) or max_data_size < 0:
            raise TypeError("set_ep_context_data_read_func(): max_data_size must be an int >= 0")
        if max_data_size == 0 or max_data_size >= 2**64 - 1:
            raise RuntimeError("EPContext data max_data_size must be finite and greater than zero.")
        self._ep_context_read = (read_func, int(max_data_size))

    def clear_ep_context_data_read_func(self) -> None:
        self._ep_context_read = None


class RunOptions:
    """onnxruntime.RunOptions. terminate=True makes run() fail before it starts (a run in
    progress is not interrupted); the others are accepted with no effect (Quilt always runs
    only what the requested outputs need)."""

    __slots__ = ("log_severity_level", "log_verbosity_level", "logid", "terminate",
                 "only_execute_path_to_fetches", "_config")

    def __init__(self):
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        try:
            return self._config[key]
        except KeyError:
            raise RuntimeError(f"RunOptions does not have configuration with key: {key}") from None


# ONNX element type -> onnxruntime's type name.
ONNX_TYPE_NAMES = {1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
                   8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64",
                   16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
                   20: "float8e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4e2m1",
                   24: "float8e8m0", 25: "uint2", 26: "int2"}


class NodeArg:
    """A graph input or output: name, type ('tensor(float)') and shape (ints, symbolic names as
    str, None for unknown dims; [] when even the rank is unknown)."""

    __slots__ = ("name", "type", "shape")

    def __init__(self, info: _quilt.ValueInfo):
        self.name = info.name
        # Sequences, maps and optionals in ONNX's notation, as onnxruntime: seq(map(int64,tensor(float)))
        self.type = (f"tensor({ONNX_TYPE_NAMES.get(info.onnx_type, 'undefined')})"
                     if info.kind == "tensor" else info.type)
        self.shape = info.shape if info.shape is not None else []

    def __str__(self):
        return f"NodeArg(name={self.name!r}, type={self.type!r}, shape={self.shape!r})"

    __repr__ = __str__


class ModelMetadata:
    """The model's metadata. version is the model's model_version, or 2**63 - 1 when it has
    none, as onnxruntime reports it."""

    __slots__ = ("producer_name", "graph_name", "domain", "description", "graph_description",
                 "version", "custom_metadata_map")

    def __init__(self, m: _quilt.ModelMetadata):
        self.producer_name = m.producer_name
        self.graph_name = m.graph_name
        self.domain = m.domain
        self.description = m.description
        self.graph_description = m.graph_description
        self.version = m.model_version if m.model_version is not None else 2**63 - 1
        self.custom_metadata_map = dict(m.custom)


class OrtEpAssignedNode:
    """A node of an OrtEpAssignedSubgraph: its name, domain ("" for ONNX's) and op_type."""

    __slots__ = ("name", "domain", "op_type")

    def __init__(self, name: str, domain: str, op_type: str):
        self.name, self.domain, self.op_type = name, domain, op_type

    def __repr__(self):
        return f"OrtEpAssignedNode(name={self.name!r}, domain={self.domain!r}, op_type={self.op_type!r})"


class OrtEpAssignedSubgraph:
    """The nodes one provider runs together: a Quilt patch (InferenceSession.
    get_provider_graph_assignment_info)."""

    __slots__ = ("ep_name", "_nodes")

    def __init__(self, ep_name: str, nodes: list):
        self.ep_name, self._nodes = ep_name, list(nodes)

    def get_nodes(self) -> list:
        return list(self._nodes)

    def __repr__(self):
        return f"OrtEpAssignedSubgraph(ep_name={self.ep_name!r}, nodes={len(self._nodes)})"


_default_log_severity = 2


def set_default_logger_severity(level: int) -> None:
    """The log level of sessions whose SessionOptions.log_severity_level is -1."""
    global _default_log_severity
    _default_log_severity = int(level)


def default_logger_severity() -> int:
    return _default_log_severity


# Quilt's LogLevel (Error 0 ... Debug 3) -> onnxruntime's severity (0 verbose ... 4 fatal).
_ORT_SEVERITY = {0: 3, 1: 2, 2: 1, 3: 0}


def set_default_logger_callback(callback, severity: int = 2) -> None:
    """Quilt's log messages to callback(severity, category, logid, code_location, message)
    instead of stderr, as onnxruntime's: severity is onnxruntime's (0 verbose for Quilt's debug,
    1 info, 2 warning, 3 error), category "quilt", logid and code_location "". Installing one
    sets the default severity (sessions whose log_severity_level is -1 follow it); None
    restores stderr and keeps the severity. Messages logged on Quilt's worker threads, from
    inside the callback, or whose call raised (reported through sys.unraisablehook) go to
    stderr, as onnxruntime sends such messages to its platform sink."""
    severity = int(severity)
    if not 0 <= severity <= 4:
        raise RuntimeError("Invalid logging severity. 0:Verbose, 1:Info, 2:Warning, 3:Error, 4:Fatal")
    if callback is None:
        _quilt.set_log_sink(None)
        return
    if not callable(callback):
        raise RuntimeError("callback must be a callable")

    def sink(level: int, message: str) -> None:
        callback(_ORT_SEVERITY[level], "quilt", "", "", message)
    _quilt.set_log_sink(sink)
    set_default_logger_severity(severity)


def set_default_logger_verbosity(level: int) -> None:
    pass  # Quilt has one verbosity per log level


def set_seed(seed: int) -> None:
    """No effect: Quilt's random ops use their `seed` attribute (or a fixed default)."""


def enable_telemetry_events() -> None:
    pass


def disable_telemetry_events() -> None:
    pass


def get_device() -> str:
    return "CPU"


def get_version_string() -> str:
    from ... import __version__
    return f"{ORT_API_VERSION}+quilt.{__version__}"


def get_build_info() -> str:
    from ... import __version__
    return f"Quilt {__version__} with the onnxruntime {ORT_API_VERSION} Python API"


_available_cache: dict = {}


def available_backends(plugins=()) -> list[str]:
    """Names of the Quilt backends with at least one usable device (the CPU's as
    'CPUExecutionProvider', last): those of `plugins`, quilt-backends/ next to libquilt and
    QUILT_PLUGIN_PATH."""
    key = (tuple(plugins), os.environ.get("QUILT_PLUGIN_PATH", ""))
    names = _available_cache.get(key)
    if names is None:
        backends, failures = _quilt.list_backends(list(plugins))
        names = [b["name"] for b in backends if b["name"] != "cpu" and b["devices"] and not b["error"]]
        names.append("CPUExecutionProvider")
        for f in failures:
            if plugins and f["library"] in plugins:
                warnings.warn(f"Quilt backend plugin {f['library']} not loaded: {f['reason']}")
        _available_cache[key] = names
    return list(names)


def get_available_providers() -> list[str]:
    """Quilt's backends that have a device, in the order a session would prefer them, then
    'CPUExecutionProvider' (the CPU backend)."""
    return available_backends()


def get_all_providers() -> list[str]:
    return available_backends()
