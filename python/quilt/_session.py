"""quilt.Session: Quilt's own API, with every field of the C++ SessionOptions."""
from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping

from . import _quilt

_LOG_LEVELS = {"error": _quilt.LogLevel.Error, "warning": _quilt.LogLevel.Warning,
               "info": _quilt.LogLevel.Info, "debug": _quilt.LogLevel.Debug}


def _log_level(level) -> _quilt.LogLevel:
    if isinstance(level, _quilt.LogLevel):
        return level
    try:
        return _LOG_LEVELS[str(level).lower()]
    except KeyError:
        raise _quilt.InvalidArgument(
            f"log_level {level!r}: expected one of {', '.join(_LOG_LEVELS)} or a quilt.LogLevel") from None


def make_options(*, threads: int = 0, backends: Iterable[str] = ("cpu",), cpu_fallback: bool = True,
                 pinned_nodes: Mapping[str, str] | None = None, partition_cost_rule: bool = True,
                 plugins: Iterable[str | os.PathLike] = (),
                 backend_options: Mapping[str, Mapping[str, Any]] | None = None,
                 fixed_dims: Mapping[str, int] | None = None, optimization_level: int = 1,
                 log_level="warning", precision: str = "fp32",
                 cache_dir: str | os.PathLike = "") -> _quilt.SessionOptions:
    """A quilt.SessionOptions from keyword arguments (the C++ field names and defaults)."""
    o = _quilt.SessionOptions()
    o.threads = int(threads)
    o.backends = [str(b) for b in backends]
    o.cpu_fallback = bool(cpu_fallback)
    o.pinned_nodes = {str(k): str(v) for k, v in (pinned_nodes or {}).items()}
    o.partition_cost_rule = bool(partition_cost_rule)
    o.plugins = [os.fspath(p) for p in plugins]
    o.backend_options = {str(b): {str(k): str(v) for k, v in kv.items()}
                         for b, kv in (backend_options or {}).items()}
    o.fixed_dims = {str(k): int(v) for k, v in (fixed_dims or {}).items()}
    o.optimization_level = int(optimization_level)
    o.log_level = _log_level(log_level)
    o.precision = str(precision)
    o.cache_dir = os.fspath(cache_dir)
    return o


class Session:
    """A model ready to run: Quilt's plan of it on the listed backends.

    model: a path, or the serialized ModelProto as bytes. Keyword arguments are the fields of
    C++ quilt::SessionOptions (threads, backends, cpu_fallback, pinned_nodes,
    partition_cost_rule, plugins, backend_options, fixed_dims, optimization_level, log_level,
    precision, cache_dir), or give a quilt.SessionOptions as `options`. external_data_dir: where a model given as
    bytes finds its external-data files. Errors are quilt.Error subclasses.
    """

    def __init__(self, model, options: _quilt.SessionOptions | None = None, *,
                 external_data_dir: str | os.PathLike = "", **kwargs):
        if options is not None and kwargs:
            raise TypeError("give either options or keyword arguments, not both")
        self.options = options if options is not None else make_options(**kwargs)
        self._session = _quilt.Session(model, self.options, os.fspath(external_data_dir))

    @property
    def inputs(self) -> list[_quilt.ValueInfo]:
        """The graph inputs a run takes (name, dtype, shape with ints, symbol names and None)."""
        return self._session.inputs

    @property
    def outputs(self) -> list[_quilt.ValueInfo]:
        return self._session.outputs

    @property
    def overridable_initializers(self) -> list[_quilt.ValueInfo]:
        """Initializers a run may also be given (graph inputs with a default, IR version >= 4)."""
        return self._session.overridable_initializers

    @property
    def metadata(self) -> _quilt.ModelMetadata:
        return self._session.metadata

    def run(self, inputs: Mapping[str, Any], outputs: Iterable[str] | None = None,
            profile: _quilt.Profile | None = None) -> dict:
        """Runs the model: {name: numpy array} in, {name: numpy array} out (all outputs, or
        those named). C-contiguous arrays are read in place; outputs own Quilt's buffers.
        profile: a quilt.Profile that collects the run's spans (Profile.to_chrome_trace)."""
        return self._session.run(inputs, list(outputs or ()), profile)

    def plan(self) -> dict:
        """Where each node runs and the copies: the object `quilt plan --format json` prints."""
        return json.loads(self._session.plan_json())

    def plan_text(self) -> str:
        """The plan as `quilt plan` prints it."""
        return self._session.plan_text()

    def plan_dot(self) -> str:
        """The plan as a Graphviz graph (`quilt plan --format dot`)."""
        return self._session.plan_dot()


def list_backends(plugins: Iterable[str | os.PathLike] = ()) -> tuple[list[dict], list[dict]]:
    """Every backend Quilt can load (`quilt devices`): ([backend, ...], [failure, ...]). A backend
    is {name, version, library, abi_version, error, devices}; a failure {library, reason}.
    Plugins come from `plugins`, quilt-backends/ next to libquilt and QUILT_PLUGIN_PATH."""
    return _quilt.list_backends([os.fspath(p) for p in plugins])


def devices(plugins: Iterable[str | os.PathLike] = ()) -> list[dict]:
    """Every device of every backend: {backend, index, name, memory_bytes, host_memory,
    synchronous, properties}. `f"{d['backend']}:{d['index']}"` selects it in `backends`."""
    backends, _ = list_backends(plugins)
    return [d for b in backends for d in b["devices"]]
