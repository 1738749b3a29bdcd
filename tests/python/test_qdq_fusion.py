"""The QDQ fusion in the plan: every model of the qdq op cases (tests/cases/gen_qdq.py, written
by CTest's cases_qdq_generate into the build directory) is planned at optimization level 1 with
the op its name ends with (after "__") and none of the float ops it replaces (for the
data-movement ops: no QuantizeLinear / DequantizeLinear but the input's and the output's), and at
level 0 as written. Their outputs are checked against onnxruntime by cases_qdq."""
import os
from pathlib import Path

import pytest

import quilt

CASES = Path(os.environ.get("QUILT_BUILD_DIR", "build")) / "cases" / "qdq"
FLOAT_OPS = {"Conv", "MatMul", "Gemm", "Add", "Mul", "Sigmoid", "LeakyRelu", "GlobalAveragePool",
             "MatMulInteger", "Cast", "Concat", "AveragePool", "Softmax", "Where"}
# Ops that run on the integers when the scale and zero point around them are the same: their
# DequantizeLinear / QuantizeLinear pairs go, leaving only the input's Q and the output's DQ.
MOVERS = {"MaxPool", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Resize"}
MODELS = sorted(CASES.glob("*/model.onnx")) if CASES.exists() else []


def op_types(model, level):
    plan = quilt.Session(str(model), optimization_level=level).plan()
    return [n["op_type"] for n in plan["nodes"] if not n["folded"]]


@pytest.mark.skipif(not MODELS, reason=f"no qdq cases under {CASES} (run cases_qdq_generate)")
@pytest.mark.parametrize("model", MODELS, ids=[m.parent.name for m in MODELS])
def test_qdq_groups_are_planned_as_quantized_ops(model):
    want = model.parent.name.split("__")[1]
    fused = op_types(model, 1)
    assert want in fused, fused
    if want not in FLOAT_OPS:  # the negative cases keep their float op
        assert not FLOAT_OPS & set(fused), fused
    if want in MOVERS:
        assert fused.count("QuantizeLinear") + fused.count("DequantizeLinear") == 2, fused
    written = op_types(model, 0)
    assert want not in written or want in FLOAT_OPS or want in MOVERS, written
