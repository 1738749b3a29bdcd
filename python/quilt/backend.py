"""onnx's backend interface (onnx.backend.base) on Quilt, for onnx.backend.test.BackendTest and
other code written against it.

    import quilt.backend as backend
    rep = backend.prepare(model_proto, "CPU", backends=["opencl", "cpu"])  # quilt.Session options
    outputs = rep.run([x])                      # a namedtuple of numpy arrays, by output name
    backend.run_node(onnx.helper.make_node("Relu", ["x"], ["y"]), [x])

Devices: "CPU" (onnx's device names); which Quilt backends run the model is the `backends`
keyword (default the CPU alone), like every other quilt.Session option.
"""
from __future__ import annotations

import inspect
import os

import numpy as np
import onnx
from onnx import helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from ._session import Session, make_options

_OPTION_NAMES = set(inspect.signature(make_options).parameters)


class QuiltRep(BackendRep):
    """A prepared model: run(inputs) with inputs a list (in the order of the graph's inputs
    that are not initializers), a single array, or a dict by name."""

    def __init__(self, session: Session):
        self.session = session
        self._inputs = [v.name for v in session.inputs]
        self._outputs = [v.name for v in session.outputs]

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            feed = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) > len(self._inputs):
                raise ValueError(f"{len(inputs)} inputs given, the model takes {len(self._inputs)}: "
                                 f"{', '.join(self._inputs)}")
            feed = dict(zip(self._inputs, inputs))
        outputs = self.session._session.run_list(None, feed, None)
        return namedtupledict("Outputs", self._outputs)(*outputs)


class QuiltBackend(Backend):
    @classmethod
    def is_compatible(cls, model, device: str = "CPU", **kwargs) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except (AttributeError, ValueError):
            return False

    @classmethod
    def prepare(cls, model, device: str = "CPU", **kwargs) -> QuiltRep:
        """model: a ModelProto, its bytes or a path. Keyword arguments that are quilt.Session
        options are used (threads, backends, ...); others (a test's rtol, atol) are ignored."""
        if not cls.supports_device(device):
            raise ValueError(f"device '{device}': Quilt's onnx backend runs on 'CPU' (choose Quilt "
                             "backends with backends=[...])")
        if isinstance(model, onnx.ModelProto):
            model = model.SerializeToString()
        elif isinstance(model, os.PathLike):
            model = os.fspath(model)
        options = {k: v for k, v in kwargs.items() if k in _OPTION_NAMES}
        return QuiltRep(Session(model, **options))

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Runs one node on inputs (arrays, in the node's input order; missing optional inputs
        are empty names in node.input). opset_version: the model's opset (default onnx's)."""
        given = [name for name in node.input if name]
        if len(inputs) < len(given):
            raise ValueError(f"{node.op_type} node: {len(given)} inputs named, {len(inputs)} given")
        arrays = [np.asarray(x) for x in inputs[: len(given)]]
        graph_inputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                        for name, a in zip(given, arrays)]
        outputs = [name for name in node.output if name]
        if outputs_info:
            graph_outputs = [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape)
                             for name, (dt, shape) in zip(outputs, outputs_info)]
        else:
            graph_outputs = [helper.make_empty_tensor_value_info(name) for name in outputs]
        opset = kwargs.pop("opset_version", None) or onnx.defs.onnx_opset_version()
        opsets = [helper.make_opsetid("", opset)]
        if node.domain not in ("", "ai.onnx"):
            opsets.append(helper.make_opsetid(node.domain, 1))
        model = helper.make_model(helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs),
                                  opset_imports=opsets)
        model.ir_version = onnx.IR_VERSION
        return cls.prepare(model, device, **kwargs).run(arrays)


is_compatible = QuiltBackend.is_compatible
prepare = QuiltBackend.prepare
run_model = QuiltBackend.run_model
run_node = QuiltBackend.run_node
supports_device = QuiltBackend.supports_device
run = run_model
