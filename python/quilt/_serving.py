"""The model side of quilt.serve, without Ray: a loaded model, its request formats and its
batching along the batch dimension. quilt/serve.py wraps it in a Ray Serve deployment.

    server = ModelServer("model.onnx", session_options={"threads": 2}, batching=True)
    request = server.parse(body, content_type)          # RequestError (4xx) when malformed
    [outcome] = server.run([request])                   # one outcome per request, in order
    body, media_type = server.encode(outcome, request, accept)

Requests are JSON ({"inputs": {name: nested list}, "outputs": [names]}) or binary: one .npy
(a model with one input) or an .npz archive of arrays named after the inputs. Each request is
checked on its own (names, dtypes, ranks, fixed dims) before it joins a batch, so one bad
request never fails the others. The engine is Quilt (quilt.Session) or, for comparison,
onnxruntime, behind the same Runner interface.
"""
from __future__ import annotations

import io
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

JSON_TYPE = "application/json"
NPY_TYPE = "application/x-npy"
NPZ_TYPE = "application/x-npz"


class RequestError(Exception):
    """A request the model cannot take: HTTP `status` (4xx) and a message saying what is wrong."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


class RunError(Exception):
    """A run that failed for a reason that is not the request's (HTTP 5xx)."""

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status
        self.message = message


class ModelLoadError(RuntimeError):
    """A replica could not load its model: the message names the model and says why."""


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a Quilt dtype name ("float32", "bfloat16" through ml_dtypes)."""
    try:
        return np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16 and the float8 types
        return np.dtype(getattr(ml_dtypes, name))


def _shape_text(shape) -> str:
    if shape is None:
        return "[unknown rank]"
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


@dataclass
class TensorSpec:
    """An input or output of the model: shape entries are ints, symbol names or None."""
    name: str
    dtype: np.dtype
    shape: tuple | None

    def describe(self) -> str:
        return f"{self.name} {self.dtype.name} {_shape_text(self.shape)}"


# ---------------------------------------------------------------------------------------------
# Engines

class QuiltRunner:
    """The model on Quilt: quilt.Session with the C++ SessionOptions' fields as keywords."""
    engine = "quilt"

    def __init__(self, model: str | bytes, session_options: Mapping[str, Any], external_data_dir=""):
        import quilt
        self._quilt = quilt
        self.session = quilt.Session(model, external_data_dir=external_data_dir, **session_options)
        self.inputs = [TensorSpec(v.name, numpy_dtype(v.dtype), _shape_tuple(v.shape)) for v in self.session.inputs]
        self.outputs = [TensorSpec(v.name, numpy_dtype(v.dtype), _shape_tuple(v.shape)) for v in self.session.outputs]
        nodes = self.session.plan().get("totals", {}).get("nodes", {})
        used = [name for name, count in nodes.items() if name != "folded" and count]
        # "cpu", or the devices in the order the plan uses them, e.g. "opencl:0+cpu".
        self.backend = "+".join(used) or "+".join(session_options.get("backends", ["cpu"]))

    def run(self, feeds: Mapping[str, np.ndarray], outputs: Sequence[str] | None) -> dict:
        return self.session.run(feeds, outputs or None)

    def is_request_error(self, error: Exception) -> bool:
        """A failure caused by the request's data (Quilt's InvalidArgument: a bad shape, an
        index out of range) rather than by the replica."""
        return isinstance(error, self._quilt.InvalidArgument)


_ORT_TYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
              "tensor(int8)": "int8", "tensor(int16)": "int16", "tensor(int32)": "int32",
              "tensor(int64)": "int64", "tensor(uint8)": "uint8", "tensor(uint16)": "uint16",
              "tensor(uint32)": "uint32", "tensor(uint64)": "uint64", "tensor(bool)": "bool",
              "tensor(bfloat16)": "bfloat16"}


class OrtRunner:
    """The same model on onnxruntime's CPU provider, so that a deployment can be compared with
    Quilt's under the same Ray Serve code. Options: threads (intra-op threads, 0 = default),
    optimization_level (0 = ORT_DISABLE_ALL, else ORT_ENABLE_ALL)."""
    engine = "onnxruntime"

    def __init__(self, model: str | bytes, session_options: Mapping[str, Any], external_data_dir=""):
        import onnxruntime as ort
        self._ort = ort
        unknown = set(session_options) - {"threads", "optimization_level", "backends", "log_level"}
        if unknown:
            raise ValueError(f"engine onnxruntime takes the options threads and optimization_level, "
                             f"not {', '.join(sorted(unknown))}")
        backends = list(session_options.get("backends", ["cpu"]))
        if backends != ["cpu"]:
            raise ValueError(f"engine onnxruntime runs on its CPU provider only, not on {backends}")
        so = ort.SessionOptions()
        so.intra_op_num_threads = int(session_options.get("threads", 0))
        so.inter_op_num_threads = 1
        if int(session_options.get("optimization_level", 1)) == 0:
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        self.session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.inputs = [self._spec(a) for a in self.session.get_inputs()]
        self.outputs = [self._spec(a) for a in self.session.get_outputs()]
        self.backend = "CPUExecutionProvider"

    @staticmethod
    def _spec(arg) -> TensorSpec:
        if arg.type not in _ORT_TYPES:
            raise ValueError(f"'{arg.name}' has type {arg.type}, which quilt.serve does not handle")
        return TensorSpec(arg.name, numpy_dtype(_ORT_TYPES[arg.type]), _shape_tuple(arg.shape))

    def run(self, feeds: Mapping[str, np.ndarray], outputs: Sequence[str] | None) -> dict:
        names = list(outputs) if outputs else [o.name for o in self.outputs]
        return dict(zip(names, self.session.run(names, dict(feeds))))

    def is_request_error(self, error: Exception) -> bool:
        from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument
        return isinstance(error, InvalidArgument)


ENGINES = {"quilt": QuiltRunner, "onnxruntime": OrtRunner}


def _shape_tuple(shape):
    if shape is None:
        return None
    return tuple(d if d is None or isinstance(d, str) else int(d) for d in shape)


# ---------------------------------------------------------------------------------------------
# The batch dimension

@dataclass
class BatchDim:
    """How requests are batched: along axis 0, named `symbol` ("batch"), or a fixed size 1
    that the model was rewritten to take as a symbol (`rewritten`)."""
    symbol: str
    rewritten: bool


def find_batch_dim(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec],
                   fixed_dims: Mapping[str, int]) -> BatchDim | str:
    """The model's batch dimension, or why it has none: every input and output must lead with
    the same symbolic dim, or every one with a fixed 1."""
    specs = [("input", s) for s in inputs] + [("output", s) for s in outputs]
    leading = []
    for kind, spec in specs:
        if spec.shape is None:
            return f"{kind} '{spec.name}' has an unknown rank"
        if len(spec.shape) == 0:
            return f"{kind} '{spec.name}' is a scalar, so it has no batch dim"
        leading.append(spec.shape[0])
    if all(isinstance(d, str) for d in leading) and len(set(leading)) == 1:
        symbol = leading[0]
        if symbol in fixed_dims:
            return f"fixed_dims sets the batch dim '{symbol}' to {fixed_dims[symbol]}"
        return BatchDim(symbol, rewritten=False)
    if all(d == 1 for d in leading):
        return BatchDim("quilt_serve_batch", rewritten=True)
    first = [f"{kind} '{s.name}' {_shape_text(s.shape)}" for kind, s in specs]
    return ("the inputs and outputs do not all lead with one symbolic dim or a fixed 1: "
            + ", ".join(first))


class BatchRefused(Exception):
    """Why a model is served without batching (batchable_model)."""


def batchable_model(model: str | bytes, symbol: str, fixed_dims: Mapping[str, int] | None = None) -> bytes:
    """The model with its fixed leading 1 made the symbolic dim `symbol`: graph inputs and
    outputs, and the constant shapes of Reshape nodes that start with 1 (now 0, "copy the
    input's dim", with allowzero off, which means the same for shapes without zeros). Whether
    this batches correctly is checked by running it (ModelServer), not assumed. Raises
    BatchRefused when the leading 1 is a symbolic dim that fixed_dims fixes (the session shows
    it as 1)."""
    try:
        import onnx
        from onnx import numpy_helper
    except ImportError as e:
        raise RuntimeError("batching a model with a fixed batch of 1 needs the onnx package "
                           "(pip install onnx) to rewrite its batch dim") from e
    proto = onnx.load_model_from_string(model) if isinstance(model, bytes) else onnx.load(model)
    for value in list(proto.graph.input) + list(proto.graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        if dim.HasField("dim_param") and dim.dim_param in (fixed_dims or {}):
            raise BatchRefused(f"fixed_dims sets the batch dim '{dim.dim_param}' to {fixed_dims[dim.dim_param]}")
    for value in list(proto.graph.input) + list(proto.graph.output):
        dim = value.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_param = symbol
    del proto.graph.value_info[:]  # intermediate shapes with the old batch of 1
    initializers = {t.name: t for t in proto.graph.initializer}
    rewritten: dict[str, bool] = {}
    for node in proto.graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in initializers:
            continue
        name = node.input[1]
        if name not in rewritten:
            shape = numpy_helper.to_array(initializers[name])
            ok = shape.ndim == 1 and shape.size > 0 and shape[0] == 1 and not (shape == 0).any()
            if ok:
                shape = shape.copy()
                shape[0] = 0
                initializers[name].CopyFrom(numpy_helper.from_array(shape, name))
            rewritten[name] = ok
        if rewritten[name]:
            for attribute in node.attribute:
                if attribute.name == "allowzero":
                    attribute.i = 0
    return proto.SerializeToString()


def probe_inputs(inputs: Sequence[TensorSpec], rows: int, seed: int, batch_symbol: str | None = None):
    """Generated inputs: floats ~ N(0, 1), integers and bools in {0, 1} (valid token ids and
    masks), other symbolic dims 1. None when an input's rank is unknown."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for spec in inputs:
        if spec.shape is None:
            return None
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        if batch_symbol is not None and shape:
            shape[0] = rows
        if spec.dtype.kind == "f" or spec.dtype.name == "bfloat16":
            feeds[spec.name] = rng.standard_normal(shape).astype(spec.dtype)
        else:
            feeds[spec.name] = rng.integers(0, 2, shape).astype(spec.dtype)
    return feeds


# ---------------------------------------------------------------------------------------------
# Requests

@dataclass
class Request:
    """A parsed, checked request: its inputs, the outputs it asks for (None: all) and the
    format it came in ("json", "npy" or "npz")."""
    feeds: dict
    outputs: tuple | None
    format: str
    rows: int = 1  # its size along the batch dim (1 without one)
    received: float = field(default_factory=time.perf_counter)

    def batch_key(self):
        """Requests with equal keys can run as one batch."""
        return (tuple((k, v.dtype.str, v.shape[1:]) for k, v in sorted(self.feeds.items())), self.outputs)


@dataclass
class Outcome:
    """What a run gave one request: outputs, or an error (RequestError or RunError)."""
    outputs: dict | None = None
    error: Exception | None = None
    batch_rows: int = 0
    run_ms: float = 0.0


def _json_array(name: str, value, spec: TensorSpec) -> np.ndarray:
    try:
        array = np.asarray(value)
    except ValueError as e:
        raise RequestError(400, f"input '{name}': not a rectangular array ({e})") from None
    if array.dtype == object or array.dtype.kind in "USV":
        raise RequestError(400, f"input '{name}': expected numbers for {spec.dtype.name}, got "
                                f"{'a ragged or mixed list' if array.dtype == object else 'strings'}")
    kind = spec.dtype.kind
    if kind == "b":
        if array.dtype.kind not in "biu" or not np.isin(array, (0, 1)).all():
            raise RequestError(400, f"input '{name}' is bool: expected true/false or 0/1")
    elif kind in "iu":
        if array.dtype.kind == "f" and not (np.isfinite(array) & (array == np.round(array))).all():
            raise RequestError(400, f"input '{name}' is {spec.dtype.name}: got numbers that are not integers")
        if array.dtype.kind == "b":
            raise RequestError(400, f"input '{name}' is {spec.dtype.name}: got true/false")
        info = np.iinfo(spec.dtype)
        if array.size and (array.min() < info.min or array.max() > info.max):
            raise RequestError(400, f"input '{name}' is {spec.dtype.name}: values outside "
                                    f"[{info.min}, {info.max}]")
    elif array.dtype.kind == "b":
        raise RequestError(400, f"input '{name}' is {spec.dtype.name}: got true/false")
    return array.astype(spec.dtype)


def _load_npy(data: bytes, what: str) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as e:
        raise RequestError(400, f"{what}: not a .npy array numpy can read without pickle ({e})") from None
    except Exception as e:  # truncated or corrupt headers raise several kinds
        raise RequestError(400, f"{what}: not a valid .npy file ({type(e).__name__}: {e})") from None


def _load_npz(data: bytes) -> dict:
    import zipfile
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except zipfile.BadZipFile as e:
        raise RequestError(400, f"body: not a valid .npz archive ({e})") from None
    arrays = {}
    for entry in names:
        if not entry.endswith(".npy"):
            raise RequestError(400, f".npz entry '{entry}' is not a .npy file (np.savez writes NAME.npy)")
        try:
            arrays[entry[:-4]] = _load_npy(archive.read(entry), f".npz entry '{entry}'")
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise RequestError(400, f".npz entry '{entry}': cannot be read ({e})") from None
    return arrays


def detect_format(body: bytes, content_type: str | None) -> str:
    """json, npy or npz: from the body's first bytes, with the content type as a check."""
    ctype = (content_type or "").split(";")[0].strip().lower()
    if body.startswith(b"\x93NUMPY"):
        found = "npy"
    elif body.startswith(b"PK\x03\x04") or body.startswith(b"PK\x05\x06"):
        found = "npz"
    elif body.lstrip()[:1] == b"{":
        found = "json"
    else:
        raise RequestError(415, f"the body is neither JSON ({JSON_TYPE}), a .npy array ({NPY_TYPE}) "
                                f"nor an .npz archive ({NPZ_TYPE})" + (" (it is empty)" if not body else ""))
    expected = {JSON_TYPE: "json", "text/json": "json", NPY_TYPE: "npy", NPZ_TYPE: "npz",
                "application/zip": "npz"}.get(ctype)
    if expected is not None and expected != found:
        raise RequestError(415, f"Content-Type is {ctype} but the body is {found}")
    return found


def check_feeds(feeds: Mapping[str, np.ndarray], inputs: Sequence[TensorSpec], batch: BatchDim | None) -> int:
    """Checks names, dtypes, ranks and dims of a request's inputs like Quilt does; returns its
    size along the batch dim (1 without batching). Raises RequestError(400)."""
    specs = {s.name: s for s in inputs}
    unknown = [n for n in feeds if n not in specs]
    if unknown:
        raise RequestError(400, f"unknown input '{unknown[0]}' (the model's inputs: "
                                f"{', '.join(s.describe() for s in inputs)})")
    missing = [s for s in inputs if s.name not in feeds]
    if missing:
        raise RequestError(400, "missing input " + ", ".join(f"'{s.name}' ({s.describe()})" for s in missing))
    bound: dict[str, tuple[int, str]] = {}
    rows = None
    for spec in inputs:
        value = feeds[spec.name]
        if value.dtype != spec.dtype:
            raise RequestError(400, f"input '{spec.name}' has dtype {value.dtype.name}, expected {spec.dtype.name}")
        if spec.shape is None:
            continue
        if value.ndim != len(spec.shape):
            raise RequestError(400, f"input '{spec.name}' has shape {list(value.shape)}, expected "
                                    f"{_shape_text(spec.shape)}: rank {value.ndim}, expected {len(spec.shape)}")
        for axis, (got, want) in enumerate(zip(value.shape, spec.shape)):
            if isinstance(want, int) and got != want:
                if batch is not None and batch.rewritten and axis == 0:
                    want_text = "1 (the model's fixed batch; send one item per request)"
                else:
                    want_text = str(want)
                raise RequestError(400, f"input '{spec.name}' has shape {list(value.shape)}, expected "
                                        f"{_shape_text(spec.shape)}: dim {axis} is {got}, expected {want_text}")
            if isinstance(want, str):
                seen = bound.setdefault(want, (got, spec.name))
                if seen[0] != got:
                    raise RequestError(400, f"input '{spec.name}' has shape {list(value.shape)}: dim {axis} "
                                            f"('{want}') is {got}, but input '{seen[1]}' has '{want}' = {seen[0]}")
        if batch is not None:
            rows = value.shape[0] if rows is None else rows
    return rows if rows is not None else 1


# ---------------------------------------------------------------------------------------------
# The server

class ModelServer:
    """A model loaded for serving: parse, run (batched or one by one), encode, health.

    model: a path or the model's bytes. engine: "quilt" or "onnxruntime". session_options: the
    keyword arguments of quilt.Session (threads, backends, cpu_fallback, pinned_nodes,
    partition_cost_rule, plugins, backend_options, fixed_dims, optimization_level, log_level).
    batching: run requests together along the batch dim when the model has one (otherwise the
    reason is in `batching_refused`). warmup: run generated inputs once at load, so that a
    replica that cannot run its model fails at load, not on its first request."""

    def __init__(self, model: str | os.PathLike | bytes, *, engine: str = "quilt",
                 session_options: Mapping[str, Any] | None = None, batching: bool = True,
                 warmup: bool = True, external_data_dir: str | os.PathLike = ""):
        self.model_name = os.fspath(model) if not isinstance(model, bytes) else f"<{len(model)} bytes>"
        if engine not in ENGINES:
            raise ValueError(f"unknown engine '{engine}' (known: {', '.join(ENGINES)})")
        options = dict(session_options or {})
        self.engine = engine
        source = os.fspath(model) if not isinstance(model, bytes) else model
        if isinstance(source, str) and not os.path.exists(source):
            raise FileNotFoundError(f"no such file: {source}")
        make = ENGINES[engine]
        data_dir = os.fspath(external_data_dir)
        runner = make(source, options, data_dir)
        self.inputs, self.outputs = runner.inputs, runner.outputs  # as the model declares them
        self.batch: BatchDim | None = None
        self.batching_refused = "batching is off" if not batching else None
        if batching:
            found = find_batch_dim(self.inputs, self.outputs, options.get("fixed_dims") or {})
            if isinstance(found, str):
                self.batching_refused = found
            elif found.rewritten:
                try:
                    rewritten = batchable_model(source, found.symbol, options.get("fixed_dims"))
                except BatchRefused as e:
                    self.batching_refused = str(e)
                else:
                    runner = None  # one session of a large model at a time
                    batched = make(rewritten, options, data_dir)
                    del rewritten
                    self.batching_refused = self._check_batching(batched, found)
                    if self.batching_refused:
                        runner = make(source, options, data_dir)
                    else:
                        runner, self.batch = batched, found
                    del batched
            else:
                self.batch = found
        self.runner = runner
        self.backend = runner.backend
        self.probe = probe_inputs(self.inputs, 1, seed=0)
        self.broken: str | None = None
        if warmup and self.probe is not None:
            try:
                self.runner.run(self.probe, None)
            except Exception as e:
                raise RuntimeError(f"the warm-up run on generated inputs failed: {e}") from e

    def _check_batching(self, batched, batch: BatchDim) -> str | None:
        """Runs two different items together and one by one on the rewritten model; None when
        the answers agree, else why batching is refused."""
        pair = probe_inputs(self.inputs, 2, seed=1, batch_symbol=batch.symbol)
        if pair is None:
            return "an input has an unknown rank, so batching cannot be checked"
        prefix = "the model has a fixed batch of 1 and does not batch when its batch dim is made symbolic"
        try:
            together = batched.run(pair, None)
            alone = [batched.run({k: v[i:i + 1] for k, v in pair.items()}, None) for i in range(2)]
        except Exception as e:
            return f"{prefix}: a batch of 2 fails: {e}"
        for name, value in together.items():
            expected = np.concatenate([a[name] for a in alone])
            if value.shape != expected.shape:
                return f"{prefix}: output '{name}' has shape {list(value.shape)} for 2 items, expected {list(expected.shape)}"
            scale = float(np.nanmax(np.abs(expected))) if expected.size and expected.dtype.kind == "f" else 1.0
            if not np.allclose(value, expected, rtol=1e-4, atol=1e-5 * max(scale, 1.0), equal_nan=True):
                diff = np.nanmax(np.abs(value.astype(np.float64) - expected.astype(np.float64)))
                return f"{prefix}: output '{name}' of 2 items run together differs from running them one by one (by {diff:.3g})"
        return None

    # -- requests --------------------------------------------------------------------------

    def info(self) -> dict:
        """What GET returns: the model, its inputs and outputs, the engine, backend and batching."""
        def spec(s):
            return {"name": s.name, "dtype": s.dtype.name, "shape": None if s.shape is None else list(s.shape)}
        return {"model": self.model_name, "engine": self.engine, "backend": self.backend,
                "inputs": [spec(s) for s in self.inputs], "outputs": [spec(s) for s in self.outputs],
                "batching": self.batch is not None,
                "batch_dim": None if self.batch is None else (1 if self.batch.rewritten else self.batch.symbol),
                "batching_refused": self.batching_refused}

    def parse(self, body: bytes, content_type: str | None = None, query: Mapping[str, str] | None = None) -> Request:
        """A checked Request from an HTTP body, or RequestError. query["outputs"]: the outputs
        wanted, comma-separated (binary requests; JSON ones may say "outputs": [...])."""
        fmt = detect_format(body, content_type)
        outputs = None
        if fmt == "json":
            feeds, outputs = self._parse_json(body)
        elif fmt == "npy":
            if len(self.inputs) != 1:
                raise RequestError(400, f"a .npy body is one array, but the model has {len(self.inputs)} inputs "
                                        f"({', '.join(s.name for s in self.inputs)}): send an .npz archive of them")
            feeds = {self.inputs[0].name: _load_npy(body, "body")}
        else:
            feeds = _load_npz(body)
        if query and query.get("outputs"):
            if outputs is not None:
                raise RequestError(400, "outputs are given both in the body and in the query")
            outputs = [o for o in query["outputs"].split(",") if o]
        if outputs is not None:
            known = {s.name for s in self.outputs}
            bad = [o for o in outputs if o not in known]
            if bad:
                raise RequestError(400, f"unknown output '{bad[0]}' (the model's outputs: "
                                        f"{', '.join(s.name for s in self.outputs)})")
            if not outputs:
                raise RequestError(400, "outputs is empty: name at least one output, or leave it out for all")
            outputs = tuple(dict.fromkeys(outputs))
        feeds = {k: np.ascontiguousarray(v) for k, v in feeds.items()}
        rows = check_feeds(feeds, self.inputs, self.batch)
        return Request(feeds, outputs, fmt, rows)

    def _parse_json(self, body: bytes):
        try:
            document = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            raise RequestError(400, f"body: invalid JSON ({e})") from None
        if not isinstance(document, dict) or not isinstance(document.get("inputs"), dict):
            raise RequestError(400, 'JSON body: expected {"inputs": {"NAME": [...], ...}, "outputs": [...]} '
                                    '("outputs" optional)')
        extra = set(document) - {"inputs", "outputs"}
        if extra:
            raise RequestError(400, f"JSON body: unknown key '{sorted(extra)[0]}' (expected inputs, outputs)")
        specs = {s.name: s for s in self.inputs}
        feeds = {}
        for name, value in document["inputs"].items():
            if name not in specs:
                raise RequestError(400, f"unknown input '{name}' (the model's inputs: "
                                        f"{', '.join(s.describe() for s in self.inputs)})")
            feeds[name] = _json_array(name, value, specs[name])
        outputs = document.get("outputs")
        if outputs is not None and (not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs)):
            raise RequestError(400, 'JSON body: "outputs" must be a list of output names')
        return feeds, outputs

    # -- runs ------------------------------------------------------------------------------

    def run(self, requests: Sequence[Request]) -> list[Outcome]:
        """Runs requests, batched along the batch dim where their other dims and wanted outputs
        agree; one Outcome per request, in order. A batch that fails is retried request by
        request, so an error reaches only the request that caused it."""
        outcomes: list[Outcome | None] = [None] * len(requests)
        groups: dict = {}
        for i, request in enumerate(requests):
            key = request.batch_key() if self.batch is not None else i
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            group = [requests[i] for i in members]
            if len(group) > 1:
                try:
                    for i, outcome in zip(members, self._run_together(group)):
                        outcomes[i] = outcome
                    continue
                except Exception:
                    pass  # each request alone below, to find the one at fault
            for i in members:
                outcomes[i] = self._run_alone(requests[i])
        return outcomes

    def _timed_run(self, feeds, outputs):
        start = time.perf_counter()
        result = self.runner.run(feeds, outputs)
        return result, (time.perf_counter() - start) * 1e3

    def _run_together(self, group: list[Request]) -> list[Outcome]:
        feeds = {name: np.concatenate([r.feeds[name] for r in group]) for name in group[0].feeds}
        result, ms = self._timed_run(feeds, group[0].outputs)
        total = sum(r.rows for r in group)
        for name, value in result.items():
            if value.ndim == 0 or value.shape[0] != total:
                raise RunError(f"output '{name}' has shape {list(value.shape)}, which does not lead with "
                               f"the batch of {total}")
        bounds = np.cumsum([0] + [r.rows for r in group])
        return [Outcome({k: v[bounds[j]:bounds[j + 1]] for k, v in result.items()}, None, total, ms)
                for j in range(len(group))]

    def _run_alone(self, request: Request) -> Outcome:
        try:
            result, ms = self._timed_run(request.feeds, request.outputs)
            return Outcome(result, None, request.rows, ms)
        except Exception as e:
            if self.runner.is_request_error(e):
                return Outcome(error=RequestError(400, str(e)))
            self._recheck(e)
            return Outcome(error=RunError(f"the run failed on {self.backend}: {e}"))

    def _recheck(self, error: Exception) -> None:
        """After a failed run: if the generated inputs no longer run either, the session is
        broken (a device lost, ...) and check_health says so, so that Ray replaces the replica."""
        if self.probe is None:
            return
        try:
            self.runner.run(self.probe, None)
        except Exception as e:
            self.broken = (f"model {self.model_name} on {self.backend}: runs fail, generated inputs too: {e} "
                           f"(the request's run: {error})")

    def check_health(self) -> None:
        """Raises RuntimeError when the session no longer runs."""
        if self.broken:
            raise RuntimeError(self.broken)

    # -- responses -------------------------------------------------------------------------

    def encode(self, outcome: Outcome, request: Request, accept: str | None = None) -> tuple[bytes, str]:
        """The response body and its media type: the request's format (.npz for a .npy request
        that asks for several outputs), unless Accept asks for JSON, .npy or .npz."""
        wanted = [a.split(";")[0].strip().lower() for a in (accept or "").split(",")]
        if JSON_TYPE in wanted:
            fmt = "json"
        elif NPY_TYPE in wanted:
            fmt = "npy"
        elif NPZ_TYPE in wanted:
            fmt = "npz"
        else:
            fmt = "npz" if request.format == "npy" and len(outcome.outputs) != 1 else request.format
        if fmt == "json":
            doc = {"outputs": {name: {"dtype": v.dtype.name, "shape": list(v.shape), "data": v.tolist()}
                               for name, v in outcome.outputs.items()}}
            return json.dumps(doc).encode(), JSON_TYPE
        buffer = io.BytesIO()
        if fmt == "npy":
            if len(outcome.outputs) != 1:
                raise RequestError(406, f"Accept: {NPY_TYPE} holds one array, but {len(outcome.outputs)} outputs "
                                        f"were asked for ({', '.join(outcome.outputs)}): ask for {NPZ_TYPE} "
                                        f"or name one output")
            np.save(buffer, next(iter(outcome.outputs.values())), allow_pickle=False)
            return buffer.getvalue(), NPY_TYPE
        np.savez(buffer, **outcome.outputs)
        return buffer.getvalue(), NPZ_TYPE


def decode_response(body: bytes, media_type: str) -> dict:
    """A response's outputs as {name: array} (for clients and tests)."""
    media_type = media_type.split(";")[0].strip()
    if media_type == JSON_TYPE:
        doc = json.loads(body)
        return {k: np.array(v["data"], dtype=numpy_dtype(v["dtype"])).reshape(v["shape"])
                for k, v in doc["outputs"].items()}
    if media_type == NPY_TYPE:
        return {None: np.load(io.BytesIO(body), allow_pickle=False)}
    if media_type == NPZ_TYPE:
        with np.load(io.BytesIO(body), allow_pickle=False) as archive:
            return {k: archive[k] for k in archive.files}
    raise ValueError(f"not a quilt.serve response type: {media_type}")


def encode_request(feeds: Mapping[str, np.ndarray], fmt: str = "npz") -> tuple[bytes, str]:
    """A request body and its Content-Type from {input name: array} (for clients and tests)."""
    if fmt == "json":
        return json.dumps({"inputs": {k: np.asarray(v).tolist() for k, v in feeds.items()}}).encode(), JSON_TYPE
    buffer = io.BytesIO()
    if fmt == "npy":
        (value,) = feeds.values()
        np.save(buffer, np.asarray(value), allow_pickle=False)
        return buffer.getvalue(), NPY_TYPE
    np.savez(buffer, **{k: np.asarray(v) for k, v in feeds.items()})
    return buffer.getvalue(), NPZ_TYPE

