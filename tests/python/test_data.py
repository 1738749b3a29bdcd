"""numpy <-> Quilt: every dtype, inputs read in place, outputs owning Quilt's buffers (alive after
the session is gone), strided and non-array inputs, bfloat16/float8 through ml_dtypes, and runs
from many threads with the GIL released."""
import gc
import subprocess
import sys
import textwrap
import threading
import time

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from conftest import mlp_bytes, model_bytes, vi
from onnx import TensorProto, helper, numpy_helper

import quilt
import quilt.onnxruntime as qort

DTYPES = [(TensorProto.FLOAT, np.float32), (TensorProto.DOUBLE, np.float64), (TensorProto.FLOAT16, np.float16),
          (TensorProto.INT8, np.int8), (TensorProto.INT16, np.int16), (TensorProto.INT32, np.int32),
          (TensorProto.INT64, np.int64), (TensorProto.UINT8, np.uint8), (TensorProto.UINT16, np.uint16),
          (TensorProto.UINT32, np.uint32), (TensorProto.UINT64, np.uint64), (TensorProto.BOOL, np.bool_),
          (TensorProto.BFLOAT16, ml_dtypes.bfloat16), (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
          (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz), (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
          (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz)]


def identity_bytes(elem, shape=(2, 3)):
    return model_bytes([helper.make_node("Identity", ["x"], ["y"])], [vi("x", elem, list(shape))],
                       [vi("y", elem, list(shape))], opset=21, ir_version=10)


@pytest.mark.parametrize("elem,dtype", DTYPES, ids=[np.dtype(d).name for _, d in DTYPES])
def test_every_dtype_goes_in_and_comes_out_as_numpy(elem, dtype):
    values = np.array([[0, 1, 2], [3, 0.5, -1]], np.float32) if np.dtype(dtype).kind in "fV" else [[0, 1, 2], [3, 4, 1]]
    x = np.array(values).astype(dtype)
    y = quilt.Session(identity_bytes(elem)).run({"x": x})["y"]
    assert y.dtype == x.dtype and y.shape == x.shape
    assert y.tobytes() == x.tobytes()
    assert qort.InferenceSession(identity_bytes(elem)).get_inputs()[0].type.startswith("tensor(")


def test_bfloat16_from_a_cast_matches_ml_dtypes_rounding():
    model = model_bytes([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
                        [vi("x", TensorProto.FLOAT, [5])], [vi("y", TensorProto.BFLOAT16, [5])])
    x = np.array([1.0, 1.00390625, 3.14159, -2.5e-3, 65504.0], np.float32)
    y = quilt.Session(model).run({"x": x})["y"]
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_without_ml_dtypes_bfloat16_outputs_fail_clearly_and_float32_still_works():
    # A child process where `import ml_dtypes` fails, as on an install without it.
    cast = model_bytes([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
                       [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.BFLOAT16, [2, 3])])
    script = textwrap.dedent(f"""
        import sys
        sys.modules["ml_dtypes"] = None
        import numpy as np, quilt
        x = np.ones((2, 3), np.float32)
        try:
            quilt.Session({cast!r}).run({{"x": x}})
        except quilt.NotImplemented as e:
            print(e)
        try:  # raw bits without their dtype are not taken for bfloat16
            quilt.Session({identity_bytes(TensorProto.BFLOAT16)!r}).run({{"x": x.astype(np.uint16)}})
        except quilt.InvalidArgument as e:
            print(e)
        print(quilt.Session({identity_bytes(TensorProto.FLOAT)!r}).run({{"x": x}})["y"].sum())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "output 'y' is bfloat16, which numpy holds only through the ml_dtypes package: pip install ml_dtypes",
        "input 'x' has dtype uint16, expected bfloat16",
        "6.0"], out.stdout


def test_outputs_own_quilts_buffers_and_outlive_the_session():
    s = quilt.Session(mlp_bytes())
    x = np.random.default_rng(0).standard_normal((64, 8)).astype(np.float32)
    y = s.run({"x": x})["y"]
    want = y.copy()
    assert not y.flags.owndata and y.base is not None  # numpy did not allocate it
    assert y.flags.writeable and y.flags.c_contiguous
    del s
    gc.collect()
    # New sessions and runs reuse whatever memory was freed; y's must not have been.
    for seed in range(20):
        quilt.Session(mlp_bytes(seed)).run({"x": x + seed})
    np.testing.assert_array_equal(y, want)
    y += 1  # and it is the caller's to change
    np.testing.assert_array_equal(y, want + 1)


def peak_rss_growth(script: str) -> float:
    """MiB by which a child process's peak resident set grows over the statement `run()`."""
    code = textwrap.dedent("""
        import numpy as np, quilt
        def peak():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    """) + textwrap.dedent(script) + textwrap.dedent("""
        before = peak()
        run()
        print(peak() - before)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return float(out.stdout.strip())


def test_contiguous_inputs_are_read_in_place_and_strided_ones_copied_once():
    # ReduceMax of a 256 MiB input: reading it in place adds nothing to the peak memory; the
    # strided view of a 512 MiB array is copied once (256 MiB), which shows the measure works.
    model = model_bytes([helper.make_node("ReduceMax", ["x"], ["m"], keepdims=0)], [vi("x", TensorProto.FLOAT, ["n"])],
                        [vi("m", TensorProto.FLOAT, [])], opset=18)
    setup = f"""
        s = quilt.Session({model!r}, threads=1)
        big = np.ones({64 << 21}, np.float32)
        big[12345] = 7.0
    """
    in_place = peak_rss_growth(setup + """
        def run():
            assert s.run({"x": big[: 64 << 20]})["m"] == 7.0
    """)
    strided = peak_rss_growth(setup + """
        def run():
            assert s.run({"x": big[1::2]})["m"] == 7.0
    """)
    assert in_place < 16, in_place
    assert 200 < strided < 400, strided


def test_strided_lists_and_scalars_are_converted_like_onnxruntime():
    o, q = ort.InferenceSession(mlp_bytes()), qort.InferenceSession(mlp_bytes())
    base = np.random.default_rng(1).standard_normal((8, 6)).astype(np.float32)
    for x in (base.T, base.T[::2], np.asfortranarray(base.T), base.T.tolist()):
        for w, g in zip(o.run(None, {"x": x}), q.run(None, {"x": x})):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    scalar = model_bytes([helper.make_node("Mul", ["s", "s"], ["y"])], [vi("s", TensorProto.FLOAT, [])],
                         [vi("y", TensorProto.FLOAT, [])])
    s = np.array(3, np.float32)
    assert qort.InferenceSession(scalar).run(None, {"s": s})[0] == ort.InferenceSession(scalar).run(None, {"s": s})[0]
    assert qort.InferenceSession(scalar).run(None, {"s": 3})[0] == 9  # onnxruntime refuses a Python int


def test_zero_sized_inputs_give_zero_sized_outputs_like_onnxruntime():
    o, q = ort.InferenceSession(mlp_bytes()), qort.InferenceSession(mlp_bytes())
    x = np.zeros((0, 8), np.float32)
    for w, g in zip(o.run(None, {"x": x}), q.run(None, {"x": x})):
        assert g.shape == w.shape and g.dtype == w.dtype


def chain_bytes(n=512, depth=8):
    rng = np.random.default_rng(7)
    inits, nodes, prev = [], [], "x"
    for i in range(depth):
        inits.append(numpy_helper.from_array((rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32), f"W{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"h{i}"]))
        prev = f"h{i}"
    nodes.append(helper.make_node("Identity", [prev], ["y"]))
    return model_bytes(nodes, [vi("x", TensorProto.FLOAT, ["batch", n])], [vi("y", TensorProto.FLOAT, ["batch", n])], inits)


def test_eight_threads_two_hundred_runs_each_on_one_session_give_identical_results():
    s = qort.InferenceSession(mlp_bytes())
    inputs = [np.random.default_rng(i).standard_normal((16, 8)).astype(np.float32) for i in range(8)]
    want = [s.run(None, {"x": x}) for x in inputs]
    errors = []

    def worker(i):
        try:
            for _ in range(200):
                got = s.run(None, {"x": inputs[i]})
                if not all(np.array_equal(g, w) for g, w in zip(got, want[i])):
                    errors.append(f"thread {i}: a result differs")
                    return
        except Exception as e:  # reported below
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_the_gil_is_released_while_a_run_computes():
    s = quilt.Session(chain_bytes(), threads=1)
    x = np.ones((256, 512), np.float32)
    s.run({"x": x})
    span = {}

    def work():
        span["start"] = time.perf_counter()
        s.run({"x": x})
        span["end"] = time.perf_counter()

    t = threading.Thread(target=work)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
    t.join()
    during = [tick for tick in ticks if span["start"] + 0.002 < tick < span["end"] - 0.002]
    assert span["end"] - span["start"] > 0.01
    assert len(during) > 100, (len(during), span)  # Python kept running beside the run
