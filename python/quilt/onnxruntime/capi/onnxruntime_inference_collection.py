"""onnxruntime's InferenceSession, IOBinding and OrtValue on Quilt.

Providers are Quilt backends: "CPUExecutionProvider" (or "cpu") is the CPU backend, and any
other name is a Quilt backend ("opencl", "opencl:1", "opencl:name=pthread", a plugin's name);
a provider's options become that backend's options. A provider that is not available
(CUDAExecutionProvider, or a plugin without a device) is skipped with onnxruntime's warning, and
the CPU runs what the others do not claim.
"""
from __future__ import annotations

import collections.abc
import ctypes
import datetime
import enum
import json
import os
import threading
import time
import warnings

import numpy as np

from ... import _quilt
from . import onnxruntime_pybind11_state as C

_CPU = "CPUExecutionProvider"

# The session config entry that get_provider_graph_assignment_info needs, as in onnxruntime.
_RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


class OrtDeviceVendorId(enum.IntEnum):
    """PCI vendor ids (onnxruntime's OrtDeviceVendorId). Quilt's values are host memory, so a
    vendor_id argument does not change where they live."""
    NONE = 0x0000
    AMD = 0x1002
    NVIDIA = 0x10DE
    ARM = 0x13B5
    MICROSOFT = 0x1414
    HUAWEI = 0x19E5
    QUALCOMM = 0x5143
    INTEL = 0x8086


def _normalize_providers(providers, provider_options, plugins):
    """[(name, {str: str})] for the providers given, warning (as onnxruntime does) about
    unavailable and duplicate ones, and raising ValueError for malformed arguments. The
    backends are listed only when a provider other than the CPU is named: listing loads every
    plugin (the OpenCL one maps LLVM), which a CPU-only session should not pay for."""
    if providers is None:
        return []
    if not isinstance(providers, collections.abc.Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence.")
    pairs = []
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        pairs = list(zip(providers, provider_options))
    else:
        for p in providers:
            if isinstance(p, str):
                pairs.append((p, {}))
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                pairs.append(p)
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    names = [name for name, _ in pairs]
    if "TensorrtExecutionProvider" in names and "NvTensorRTRTXExecutionProvider" in names:
        raise ValueError("Cannot enable both 'TensorrtExecutionProvider' and 'NvTensorRTRTXExecutionProvider' "
                         "in the same session.")
    out, seen, available = [], set(), None
    for name, options in pairs:
        if name == "cpu":
            name = _CPU
        base = name.split(":", 1)[0]
        if name != _CPU and available is None:
            available = C.available_backends(plugins)
        if name != _CPU and base not in available:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available)}'")
            continue
        if name in seen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            continue
        seen.add(name)
        out.append((name, {str(k): str(v) for k, v in options.items()}))
    return out


def _log_level(severity: int) -> _quilt.LogLevel:
    if severity < 0:
        severity = C.default_logger_severity()
    return [_quilt.LogLevel.Debug, _quilt.LogLevel.Info, _quilt.LogLevel.Warning][severity] \
        if severity < 3 else _quilt.LogLevel.Error


def _quilt_options(so: C.SessionOptions, providers):
    """The quilt.SessionOptions for onnxruntime's SessionOptions and providers."""
    o = _quilt.SessionOptions()
    o.threads = max(int(so.intra_op_num_threads), 0)
    o.optimization_level = 0 if so.graph_optimization_level == C.GraphOptimizationLevel.ORT_DISABLE_ALL else 1
    o.log_level = _log_level(int(so.log_severity_level))
    o.fixed_dims = dict(so._free_dims)
    pinned, backend_options = {}, {}
    for key, value in so._config.items():
        if not key.startswith("quilt."):
            continue  # onnxruntime's own entries: no effect
        if key == "quilt.plugins":
            o.plugins = [p for p in value.split(os.pathsep) if p]
        elif key == "quilt.cpu_fallback":
            o.cpu_fallback = value not in ("0", "false", "False")
        elif key == "quilt.partition_cost_rule":
            o.partition_cost_rule = value not in ("0", "false", "False")
        elif key == "quilt.precision":
            o.precision = value
        elif key == "quilt.cache_dir":
            o.cache_dir = value
        elif key.startswith("quilt.pin.") and len(key) > len("quilt.pin."):
            pinned[key[len("quilt.pin."):]] = value
        else:
            known = ", ".join(C.QUILT_CONFIG_KEYS)
            raise C.ort_error(C.InvalidArgument, f"session config entry '{key}' is not one of Quilt's ({known})")
    o.pinned_nodes = pinned
    backends = []
    for name, options in providers:
        backends.append("cpu" if name == _CPU else name)
        options = dict(options or {})
        # "cache_dir", as OpenVINO's provider option: the session's executable cache (compiled
        # patches kept for later sessions and processes), not an option of the backend's devices.
        if "cache_dir" in options:
            cache_dir = str(options.pop("cache_dir"))
            if o.cache_dir and o.cache_dir != cache_dir:
                raise C.ort_error(C.InvalidArgument, f"provider option cache_dir '{cache_dir}' of {name} "
                                  f"differs from the session's executable cache '{o.cache_dir}' (one per session)")
            o.cache_dir = cache_dir
        if name != _CPU and options:
            backend_options[name.split(":", 1)[0]] = options
    if "cpu" not in backends:
        backends.append("cpu")
    o.backends = backends
    o.backend_options = backend_options
    return o


class InferenceSession:
    """onnxruntime.InferenceSession on Quilt (see the module's doc for providers)."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)):
            self._model_path, self._model_bytes = os.fspath(path_or_bytes), None
        elif isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            self._model_path, self._model_bytes = None, path_or_bytes
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        self._sess_options = sess_options if sess_options is not None else C.SessionOptions()
        self._enable_fallback = True
        self._read_config_from_model = kwargs.get("read_config_from_model", False)  # no effect
        self._create_session(providers, provider_options)

    def _create_session(self, providers, provider_options):
        so = self._sess_options
        plugins = [p for p in so._config.get("quilt.plugins", "").split(os.pathsep) if p]
        chosen = _normalize_providers(providers, provider_options, plugins)
        options = _quilt_options(so, chosen)
        model = self._model_path if self._model_path is not None else self._model_bytes
        try:
            self._sess = _quilt.Session(model, options, "")
        except _quilt.Error as e:
            if self._model_path is not None and getattr(e, "code", "") == "Io" and not os.path.exists(self._model_path):
                raise C.ort_error(C.NoSuchFile, f"Load model from {self._model_path} failed:{e}") from None
            raise C.from_quilt_error(e) from None
        self._options = options
        if not any(name == _CPU for name, _ in chosen):
            chosen.append((_CPU, {}))
        self._providers = [name for name, _ in chosen]
        self._provider_options = {name: opts for name, opts in chosen}
        self._inputs_meta = [C.NodeArg(v) for v in self._sess.inputs]
        self._outputs_meta = [C.NodeArg(v) for v in self._sess.outputs]
        self._overridable_initializers = [C.NodeArg(v) for v in self._sess.overridable_initializers]
        self._input_names = [v.name for v in self._inputs_meta]
        self._model_meta = C.ModelMetadata(self._sess.metadata)
        self._run_list = self._sess.run_list
        self._profile = _quilt.Profile() if so.enable_profiling else None
        self._profiling_start_ns = time.time_ns() if so.enable_profiling else 0
        self._record_assignment = so._config.get(_RECORD_ASSIGNMENT) == "1"

    # --- metadata -------------------------------------------------------------------------
    def get_session_options(self):
        return self._sess_options

    def get_inputs(self):
        return self._inputs_meta

    def get_outputs(self):
        return self._outputs_meta

    def get_overridable_initializers(self):
        return self._overridable_initializers

    def get_modelmeta(self):
        return self._model_meta

    def get_providers(self):
        return self._providers

    def get_provider_options(self):
        return self._provider_options

    def get_provider_graph_assignment_info(self):
        """One OrtEpAssignedSubgraph per patch of Quilt's plan, in issue order: ep_name is the
        backend that runs it ('CPUExecutionProvider' for the CPU and for control flow, which the
        core runs on the host; another backend as the plan names it, with its device:
        'opencl:0'), its nodes as the plan has them (after Quilt's rewrites; nodes folded into
        constants run nowhere and are in none). Needs the session config entry
        session.record_ep_graph_assignment_info = "1" at creation, as with onnxruntime."""
        if not self._record_assignment:
            raise C.ort_error(C.Fail, f"Session configuration entry '{_RECORD_ASSIGNMENT}' must be set to \"1\" "
                              "to retrieve EP graph assignment information.")
        plan = json.loads(self._sess.plan_json())
        subgraphs = []
        for patch in plan["patches"]:
            backend = patch["backend"]
            ep = _CPU if backend.split(":", 1)[0] in ("cpu", "host") else backend
            nodes = []
            for index in patch["nodes"]:
                node = plan["nodes"][index]
                domain, _, op_type = node["op_type"].rpartition(".")
                nodes.append(C.OrtEpAssignedNode(node["name"], domain, op_type))
            subgraphs.append(C.OrtEpAssignedSubgraph(ep, nodes))
        return subgraphs

    def set_providers(self, providers=None, provider_options=None):
        """Re-creates the session on other providers (all available ones when None)."""
        if providers is None:
            plugins = [p for p in self._sess_options._config.get("quilt.plugins", "").split(os.pathsep) if p]
            providers = C.available_backends(plugins)
        self._create_session(providers, provider_options)

    def disable_fallback(self):
        self._enable_fallback = False  # no effect: a failing Quilt run is not retried elsewhere

    def enable_fallback(self):
        self._enable_fallback = True

    # --- running --------------------------------------------------------------------------
    def _error(self, e: _quilt.Error, feed) -> Exception:
        missing = [n for n in self._input_names if n not in feed]
        if missing:
            return ValueError(f"Required inputs ({missing}) are missing from input feed ({list(feed)}).")
        return C.from_quilt_error(e)

    def _check_ort_values(self, values, action="used with"):
        """onnxruntime's check: an OrtValue made by a session's allocator
        (create_ortvalue_from_shape_and_type) belongs to that session."""
        for v in values:
            if isinstance(v, OrtValue) and v._session is not None and v._session is not self._sess:
                raise ValueError(f"Session-scoped OrtValue must be {action} the session that created it.")

    def run(self, output_names, input_feed, run_options=None):
        """The outputs named (all when None or empty) as numpy arrays, in that order."""
        self._check_ort_values(input_feed.values())
        if run_options is not None and run_options.terminate:
            raise C.ort_error(C.Fail, "Exiting due to terminate flag being set to true.")
        try:
            return self._run_list(output_names, input_feed, self._profile)
        except _quilt.Error as e:
            raise self._error(e, input_feed) from None

    def run_async(self, output_names, input_feed, callback, user_data, run_options=None):
        """Runs on a new thread, then calls callback(outputs, user_data, error_text)."""
        def work():
            try:
                outputs = self.run(output_names, input_feed, run_options)
            except Exception as e:  # reported to the callback, as onnxruntime does
                callback([], user_data, str(e))
            else:
                callback(outputs, user_data, "")
        threading.Thread(target=work, daemon=True).start()

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        self._check_ort_values(input_dict_ort_values.values())
        feed = {k: v.numpy() if isinstance(v, OrtValue) else v for k, v in input_dict_ort_values.items()}
        return [OrtValue(a) for a in self.run(output_names, feed, run_options)]

    def io_binding(self):
        return IOBinding(self)

    def run_with_iobinding(self, iobinding, run_options=None):
        if iobinding._sess is not self._sess:
            raise ValueError("IOBinding must be used with the session that created it.")
        iobinding._run(self, run_options)

    def create_ortvalue_from_shape_and_type(self, shape, element_type, device_type, device_id=0, vendor_id=-1):
        """An uninitialised host OrtValue that belongs to this session, as onnxruntime's does:
        run, run_with_ort_values and io_binding of another session refuse it (ValueError)."""
        _check_cpu(device_type, "InferenceSession.create_ortvalue_from_shape_and_type")
        dtype = _numeric_dtype(element_type)
        return OrtValue(np.empty(tuple(int(d) for d in shape), dtype), session=self._sess)

    def release_captured_graph(self, graph_annotation_id: int = 0) -> None:
        """No effect, as onnxruntime for providers without graph capture: Quilt captures none."""

    def set_ep_dynamic_options(self, options) -> None:
        """No effect, as onnxruntime's CPU provider: Quilt's backends take their options at
        session creation (provider options). An empty dict is refused, as by onnxruntime."""
        if not options:
            raise RuntimeError("No options were provided")

    # --- profiling ------------------------------------------------------------------------
    def end_profiling(self) -> str:
        """Writes the runs made since the session was created (with enable_profiling) as a
        Chrome trace, a lane per device, and returns the file's name: PREFIX_DATE_TIME_MS.json
        in the working directory, stamped with the session's creation as onnxruntime 1.32 does.
        Later runs are not profiled; "" when not profiling."""
        if self._profile is None:
            return ""
        start = datetime.datetime.fromtimestamp(self._profiling_start_ns / 1e9)
        stamp = f"{start:%Y-%m-%d_%H-%M-%S}_{start.microsecond // 1000:03d}"
        path = f"{self._sess_options.profile_file_prefix}_{stamp}.json"
        model = self._model_path or "<bytes>"
        with open(path, "w") as f:
            f.write(self._profile.to_chrome_trace(f"quilt {model}"))
        self._profile = None
        return path

    def get_profiling_start_time_ns(self) -> int:
        return self._profiling_start_ns


_ONNX_OF_NUMPY = {np.dtype(np.float32): 1, np.dtype(np.uint8): 2, np.dtype(np.int8): 3,
                  np.dtype(np.uint16): 4, np.dtype(np.int16): 5, np.dtype(np.int32): 6,
                  np.dtype(np.int64): 7, np.dtype(np.bool_): 9, np.dtype(np.float16): 10,
                  np.dtype(np.float64): 11, np.dtype(np.uint32): 12, np.dtype(np.uint64): 13}
_NUMPY_OF_ONNX = {v: k for k, v in _ONNX_OF_NUMPY.items()}


def _numpy_dtype(element_type) -> np.dtype:
    if isinstance(element_type, (int, np.integer)) and not isinstance(element_type, bool):
        if int(element_type) not in _NUMPY_OF_ONNX:
            raise C.ort_error(C.InvalidArgument, f"element type {element_type} has no numpy dtype here")
        return _NUMPY_OF_ONNX[int(element_type)]
    return np.dtype(element_type)


def _numeric_dtype(element_type) -> np.dtype:
    """The numpy dtype of a numeric tensor type (onnxruntime's rule for values it allocates)."""
    try:
        dtype = _numpy_dtype(element_type)
    except (C.InvalidArgument, TypeError):
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise RuntimeError("Creation of OrtValues is currently only supported for numeric tensor types")
    return dtype


def _check_cpu(device_type, what):
    if str(device_type).lower() != "cpu":
        raise C.ort_error(C.InvalidArgument, f"{what}: device '{device_type}': Quilt binds host (cpu) buffers "
                          "only; its backends copy to their devices themselves")


def _array_at(buffer_ptr: int, element_type, shape) -> np.ndarray:
    """The caller's memory at buffer_ptr as an array (no copy)."""
    dtype = _numpy_dtype(element_type)
    shape = tuple(int(d) for d in shape)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes == 0:
        return np.empty(shape, dtype)
    raw = (ctypes.c_byte * nbytes).from_address(int(buffer_ptr))
    return np.frombuffer(raw, dtype=dtype).reshape(shape)


class OrtValue:
    """A host tensor: a numpy array (onnxruntime's OrtValue on the CPU)."""

    __slots__ = ("_array", "_session")

    def __init__(self, array: np.ndarray, session=None):
        self._array = array
        self._session = session  # the _quilt.Session it belongs to (create_ortvalue_from_shape_and_type)

    @classmethod
    def ortvalue_from_numpy(cls, numpy_obj, device_type="cpu", device_id=0, vendor_id=-1):
        _check_cpu(device_type, "OrtValue.ortvalue_from_numpy")
        return cls(np.asarray(numpy_obj))

    @classmethod
    def ortvalue_from_numpy_with_onnx_type(cls, data, onnx_element_type):
        return cls(np.asarray(data).view(_numpy_dtype(onnx_element_type)))

    @classmethod
    def ortvalue_from_shape_and_type(cls, shape, element_type, device_type="cpu", device_id=0, vendor_id=-1,
                                     memory_info=None):
        if memory_info is not None:
            raise C.ort_error(C.InvalidArgument, "OrtValue.ortvalue_from_shape_and_type: memory_info: Quilt has no "
                              "OrtMemoryInfo (its OrtValues are host memory); leave it None")
        _check_cpu(device_type, "OrtValue.ortvalue_from_shape_and_type")
        return cls(np.empty(tuple(shape), _numpy_dtype(element_type)))

    @classmethod
    def from_dlpack(cls, data, /):
        """An OrtValue over a DLPack tensor's memory (no copy): an object with __dlpack__ or a
        raw 'dltensor' capsule, on the CPU and contiguous, as onnxruntime requires."""
        if hasattr(data, "__dlpack__"):
            source = data
        elif type(data).__name__ == "PyCapsule":
            source = _Capsule(data)
        else:
            raise TypeError("from_dlpack expected a valid DLPack capsule named 'dltensor'")
        try:
            array = np.from_dlpack(source)
        except (BufferError, RuntimeError, ValueError) as e:
            raise RuntimeError(f"OrtValue.from_dlpack: {e} (Quilt's OrtValues are host memory)") from None
        if not array.flags.c_contiguous:
            raise RuntimeError(f"OrtValue.from_dlpack: the tensor of shape {list(array.shape)} is not contiguous; "
                               "onnxruntime, and Quilt, take only contiguous tensors")
        return cls(array)

    def __dlpack__(self, *, stream=None):
        return self._array.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def data_ptr(self) -> int:
        return self._array.ctypes.data

    def device_name(self) -> str:
        return "cpu"

    def shape(self):
        return list(self._array.shape)

    def data_type(self) -> str:
        return f"tensor({C.ONNX_TYPE_NAMES.get(self.element_type(), 'undefined')})"

    def element_type(self) -> int:
        return _ONNX_OF_NUMPY.get(self._array.dtype, 0)

    def tensor_size_in_bytes(self) -> int:
        return self._array.nbytes

    def has_value(self) -> bool:
        return True

    def is_tensor(self) -> bool:
        return True

    def is_sparse_tensor(self) -> bool:
        return False

    def is_tensor_sequence(self) -> bool:
        return False

    def numpy(self) -> np.ndarray:
        return self._array

    def update_inplace(self, data) -> None:
        """Copies data (a numpy array or an OrtValue with as many elements) into this value's
        memory, converting its dtype as numpy.copyto does (onnxruntime copies the bytes)."""
        if isinstance(data, OrtValue):
            if data.tensor_size_in_bytes() != self.tensor_size_in_bytes():
                raise RuntimeError("The source and destination OrtValues must have the same size")
            data = data._array
        elif not isinstance(data, np.ndarray):
            raise TypeError("data must be a numpy.ndarray or an OrtValue.")
        if data.size != self._array.size:
            raise RuntimeError("The input size of numpy arrays does not match the size of the OrtValue.")
        np.copyto(self._array, data.reshape(self._array.shape))

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype, copy=False)


class _Capsule:
    """A raw DLPack capsule as numpy.from_dlpack takes it (numpy reads the device from it)."""

    def __init__(self, capsule):
        self._capsule = capsule

    def __dlpack__(self, stream=None):
        return self._capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU; numpy refuses a capsule on another device


class IOBinding:
    """Inputs and outputs bound to host buffers. Bound inputs are read in place; an output bound
    to a buffer (bind_output with buffer_ptr, bind_ortvalue_output) receives a copy of the
    result, one bound by name alone gets Quilt's own buffer."""

    def __init__(self, session: InferenceSession):
        self._session = session
        self._sess = session._sess  # the Quilt session it was made for (set_providers makes another)
        self._inputs = {}
        self._outputs = {}  # name -> OrtValue to fill, or None
        self._results = []

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = arr_on_cpu

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        _check_cpu(device_type, f"bind_input('{name}')")
        self._inputs[name] = _array_at(buffer_ptr, element_type, shape)

    def bind_ortvalue_input(self, name, ortvalue):
        self._session._check_ort_values([ortvalue], "bound to")
        self._inputs[name] = ortvalue.numpy()

    def synchronize_inputs(self):
        pass

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        _check_cpu(device_type, f"bind_output('{name}')")
        if buffer_ptr is not None:
            if element_type is None or shape is None:
                raise C.ort_error(C.InvalidArgument, f"bind_output('{name}'): a buffer_ptr needs element_type and shape")
            self._outputs[name] = OrtValue(_array_at(buffer_ptr, element_type, shape))
        else:
            self._outputs[name] = None

    def bind_ortvalue_output(self, name, ortvalue):
        self._session._check_ort_values([ortvalue], "bound to")
        self._outputs[name] = ortvalue

    def synchronize_outputs(self):
        pass

    def get_outputs(self):
        return list(self._results)

    def get_outputs_as_ortvaluevector(self):
        return self.get_outputs()

    def copy_outputs_to_cpu(self):
        return [v.numpy() for v in self._results]

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._outputs = {}
        self._results = []

    def _run(self, session: InferenceSession, run_options):
        names = list(self._outputs) or [o.name for o in session.get_outputs()]
        arrays = session.run(names, self._inputs, run_options)
        results = []
        for name, array in zip(names, arrays):
            target = self._outputs.get(name)
            if target is None:
                results.append(OrtValue(array))
                continue
            dest = target.numpy()
            if dest.shape != array.shape or dest.dtype != array.dtype:
                raise C.ort_error(C.InvalidArgument,
                                  f"output '{name}' is {array.dtype} {list(array.shape)} but the buffer bound to "
                                  f"it is {dest.dtype} {list(dest.shape)}")
            np.copyto(dest, array)
            results.append(target)
        self._results = results
