"""onnx's own backend test suite (onnx.backend.test.BackendTest) on quilt.backend, held to the
manifest `quilt test-onnx` checks (tests/conformance/cpu.txt): every listed case must pass here
too, and every other case must be refused as unsupported (quilt.NotImplemented), never give a
wrong answer or another error. A case that passes without being listed is reported, not failed,
as `quilt test-onnx` does.

Cases with random-number ops and training-mode Dropout are left out (and test_loop16_seq_none,
which onnx's runner cannot compare): onnx's runner compares their values, which cannot match;
`quilt test-onnx` checks them by dtype, shape and finiteness (Dropout by its definition). The 'real' cases run the
'light' models on onnx's generated inputs (ONNX_HOME: CTest points it into the build tree).
"""
import functools
import os
import re
import warnings
from pathlib import Path

import onnx
import onnx.backend.test
import pytest
from onnx.backend.test.loader import load_model_tests

import quilt
import quilt.backend

MANIFEST = Path(__file__).resolve().parents[1] / "conformance" / "cpu.txt"
# (and training-mode Dropout with a nonzero ratio: its mask is random; `quilt test-onnx` checks
# y = x * mask / (1 - ratio))
RANDOM = re.compile(r"^test_(bernoulli|random_(normal|uniform)|"
                    r"training_dropout(_default)?(_mask)?_cpu)")


def manifest_names():
    """The BackendTest name of each listed case: node/test_abs -> test_abs_cpu,
    light/light_resnet50 -> test_resnet50_cpu (the 'real' case that runs it)."""
    names = set()
    light_of_real = {}
    for case in load_model_tests(kind="real"):
        if case.url and "/light/light_" in case.url:
            light_of_real[Path(case.url).stem] = case.name
    for line in MANIFEST.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        kind, case = line.split("/", 1)
        if kind == "light":
            if case in light_of_real:
                names.add(light_of_real[case] + "_cpu")
        else:
            names.add(case + "_cpu")
    return names


LISTED = manifest_names()
backend_test = onnx.backend.test.BackendTest(quilt.backend.QuiltBackend, __name__)
backend_test.exclude(RANDOM.pattern)
# onnx's runner cannot compare a sequence of 0-d tensors (assert_similar_outputs recurses into
# each element and takes len() of a 0-d array, a TypeError whatever the runtime returns), which
# this case's Loop output is; `quilt test-onnx` compares it element by element (cpu.txt lists it).
backend_test.exclude(r"^test_loop16_seq_none")


def unsupported_or_newly_passing(name, test):
    """A case the manifest does not list: Quilt must refuse it as unsupported."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        try:
            test(*args, **kwargs)
        except quilt.NotImplemented:
            return
        warnings.warn(f"{name} passes but is not in tests/conformance/cpu.txt "
                      "(tools/conformance.py --update-manifests adds it)")
    return run


def with_tolerance(test, **tolerance):
    @functools.wraps(test)
    def run(*args, **kwargs):
        return test(*args, **kwargs, **tolerance)
    return run


# The tolerances `quilt test-onnx` uses instead of the suite's for these cases, and why, are in
# kToleranceOverrides (tools/quilt/onnx_case.cpp): numpy's float32 FFT left 1.9e-7 of rounding
# noise in the stored outputs where the exact answer is 0.
TOLERANCE_OVERRIDES = {"test_dft_inverse_cpu": {"atol": 1e-6}, "test_dft_inverse_opset19_cpu": {"atol": 1e-6}}

cases = backend_test.test_cases
for case_class in cases.values():
    for attr in list(vars(case_class)):
        if not (attr.startswith("test_") and attr.endswith("_cpu")):
            continue
        method = getattr(case_class, attr)
        if attr in TOLERANCE_OVERRIDES:
            method = with_tolerance(method, **TOLERANCE_OVERRIDES[attr])
        if attr not in LISTED:
            method = unsupported_or_newly_passing(attr, method)
        setattr(case_class, attr, method)
del case_class, attr, method
globals().update(cases)


def test_every_listed_case_is_in_the_suite():
    generated = {attr for c in cases.values() for attr in vars(c) if attr.startswith("test_")}
    missing = sorted(n for n in LISTED if n not in generated and not RANDOM.match(n))
    assert missing == []
    assert len(LISTED) > 1500


def test_the_backend_interface():
    assert quilt.backend.supports_device("CPU") and not quilt.backend.supports_device("CUDA")
    import numpy as np
    node = onnx.helper.make_node("Add", ["a", "b"], ["c"])
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    (c,) = quilt.backend.run_node(node, [a, a])
    np.testing.assert_array_equal(c, a + a)
    model = onnx.helper.make_model(
        onnx.helper.make_graph([node], "g", [onnx.helper.make_tensor_value_info(n, 1, [2, 3]) for n in "ab"],
                               [onnx.helper.make_tensor_value_info("c", 1, [2, 3])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)])
    model.ir_version = 8
    out = quilt.backend.run_model(model, {"a": a, "b": a})
    np.testing.assert_array_equal(out["c"], a + a)
    rep = quilt.backend.prepare(model, "CPU", threads=1, rtol=1e-3)  # options it does not know are ignored
    np.testing.assert_array_equal(rep.run([a, a]).c, a + a)
    with pytest.raises(ValueError, match="3 inputs given, the model takes 2"):
        rep.run([a, a, a])
    with pytest.raises(ValueError, match="device 'CUDA'"):
        quilt.backend.prepare(model, "CUDA")
