"""Streaming: control flow called over and over with its state fed back, as small models are
deployed. The zoo's VAD (If on the sample rate, an LSTM step inside each branch, state in and
out), a Loop and a Scan are run 1 and 1000 times on one session each, every call against
onnxruntime on the same inputs, the state carried by each runtime from its own last output."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper

import quilt.onnxruntime as qort
from conftest import model_bytes, vi

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from zoo_small import build_vad  # noqa: E402


def sessions(data):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 2
    return (qort.InferenceSession(data, providers=["CPUExecutionProvider"]),
            onnxruntime.InferenceSession(data, options, providers=["CPUExecutionProvider"]))


@pytest.mark.parametrize("calls", [1, 1000])
def test_vad_stream_matches_onnxruntime_at_every_chunk(calls):
    model, inputs = build_vad()
    quilt_session, ort_session = sessions(model.SerializeToString())
    rng = np.random.default_rng(7)
    state_q = state_o = inputs["state"]
    worst = 0.0
    for k in range(calls):
        chunk = (rng.standard_normal((1, 512)) * 0.1).astype(np.float32)
        # Both sample rates, so both branches of the If run and keep their state right.
        sr = np.array(16000 if k % 7 else 8000, np.int64)
        p_q, state_q = quilt_session.run(None, {"x": chunk, "state": state_q, "sr": sr})
        p_o, state_o = ort_session.run(None, {"x": chunk, "state": state_o, "sr": sr})
        worst = max(worst, float(np.abs(p_q - p_o).max()), float(np.abs(state_q - state_o).max()))
        assert worst < 1e-4, f"call {k}: probability {p_q} against {p_o}"
    assert np.isfinite(state_q).all()


def loop_model():
    """acc' = acc * 0.5 + x * i over n iterations (the iteration count is an input)."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
         helper.make_node("Mul", ["x", "i_f"], ["xi"]),
         helper.make_node("Mul", ["acc_in", "half"], ["decayed"]),
         helper.make_node("Add", ["decayed", "xi"], ["acc_out"])],
        "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
                 vi("acc_in", shape=[1, 8])],
        [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", shape=[1, 8])],
        [helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])])
    return model_bytes([helper.make_node("Loop", ["n", "", "acc0"], ["acc"], body=body)],
                       [vi("n", TensorProto.INT64, []), vi("acc0", shape=[1, 8]), vi("x", shape=[1, 8])],
                       [vi("acc", shape=[1, 8])])


def scan_model():
    """A running sum over the rows of x, starting from the carried state."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "row"], ["sum_out"]),
         helper.make_node("Identity", ["sum_out"], ["scan_out"])],
        "body", [vi("sum_in", shape=[4]), vi("row", shape=[4])],
        [vi("sum_out", shape=[4]), vi("scan_out", shape=[4])])
    return model_bytes([helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)],
                       [vi("s0", shape=[4]), vi("x", shape=[6, 4])], [vi("s", shape=[4]), vi("ys", shape=[6, 4])])


@pytest.mark.parametrize("calls", [1, 1000])
def test_loop_and_scan_with_carried_state_match_onnxruntime(calls):
    rng = np.random.default_rng(3)
    loop_q, loop_o = sessions(loop_model())
    scan_q, scan_o = sessions(scan_model())
    acc_q = acc_o = np.zeros((1, 8), np.float32)
    s_q = s_o = np.zeros(4, np.float32)
    for k in range(calls):
        feed = {"n": np.array(k % 5, np.int64), "x": rng.standard_normal((1, 8)).astype(np.float32)}
        (acc_q,) = loop_q.run(None, {**feed, "acc0": acc_q})
        (acc_o,) = loop_o.run(None, {**feed, "acc0": acc_o})
        np.testing.assert_allclose(acc_q, acc_o, rtol=1e-5, atol=1e-5, err_msg=f"Loop call {k}")
        x = rng.standard_normal((6, 4)).astype(np.float32) * 0.01
        s_q, ys_q = scan_q.run(None, {"s0": s_q, "x": x})
        s_o, ys_o = scan_o.run(None, {"s0": s_o, "x": x})
        np.testing.assert_allclose(ys_q, ys_o, rtol=1e-5, atol=1e-5, err_msg=f"Scan call {k}")
        np.testing.assert_allclose(s_q, s_o, rtol=1e-5, atol=1e-5)


def test_shapes_known_only_at_run_time_are_worked_out_again_when_they_change():
    """A symbolic batch and a Pad whose pads are an input: the CPU kernels keep what they work
    out from a run's shapes (a conv's layout, a pool's windows, a pad plan) for the next runs with
    the same shapes. The batch changes every fourth call, and the pads change while the shapes
    stay ([1, 0] and [0, 1] pad to the same shape), so a plan kept for the wrong shapes or pads
    gives wrong answers."""
    rng = np.random.default_rng(3)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], rng.standard_normal(108).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Pad", ["r", "p"], ["d"], mode="reflect"),
             helper.make_node("MaxPool", ["d"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    data = model_bytes(nodes, [vi("x", shape=["batch", 3, 6, 6]), vi("p", TensorProto.INT64, [8])],
                       [vi("y", shape=None)], initializers=[w])
    quilt_session, ort_session = sessions(data)
    pads = [np.array(p, np.int64) for p in ([0, 0, 1, 0, 0, 0, 0, 1], [0, 0, 0, 1, 0, 0, 1, 0],
                                            [0, 0, 2, 2, 0, 0, 0, 0])]
    for k in range(24):
        # Four calls per batch size; pads 0 then 1 (the same shapes) then 2 (others).
        feeds = {"x": rng.standard_normal((1 + k // 4 % 3, 3, 6, 6)).astype(np.float32), "p": pads[k % 3]}
        (got,), (want,) = quilt_session.run(None, feeds), ort_session.run(None, feeds)
        assert got.shape == want.shape, f"call {k}"
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"call {k}")


def test_residual_fused_over_a_symbolic_batch_follows_each_runs_shapes():
    """Conv -> Add -> Relu where the Add's other operand has a batch of its own name: at creation
    both are [-1, 4, 6, 6], and the CPU backend fuses the Add into the conv (as for the
    shortcut x of the second conv, whose batch is the conv's). A run decides: equal batches add
    in the conv's epilogue; 1 against 3 (either way round) broadcast, so the conv's product is
    made alone and added after. Every call against onnxruntime."""
    rng = np.random.default_rng(5)
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 4, 3, 3], rng.standard_normal(144).astype(np.float32))
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "r"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"]),
             helper.make_node("Conv", ["x", "w"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["x", "c2"], ["s2"]),
             helper.make_node("Relu", ["s2"], ["y2"])]
    data = model_bytes(nodes, [vi("x", shape=["batch", 4, 6, 6]), vi("r", shape=["other", 4, 6, 6])],
                       [vi("y", shape=None), vi("y2", shape=None)], initializers=[w])
    quilt_session, ort_session = sessions(data)
    for k, (batch, other) in enumerate([(2, 2), (1, 3), (3, 1), (1, 1), (3, 1), (2, 2)]):
        feeds = {"x": rng.standard_normal((batch, 4, 6, 6)).astype(np.float32),
                 "r": rng.standard_normal((other, 4, 6, 6)).astype(np.float32)}
        got, want = quilt_session.run(None, feeds), ort_session.run(None, feeds)
        for g, o in zip(got, want):
            assert g.shape == o.shape, f"call {k}"
            np.testing.assert_allclose(g, o, rtol=1e-5, atol=1e-5, err_msg=f"call {k}")
