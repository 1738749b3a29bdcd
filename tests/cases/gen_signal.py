"""Cases of the signal family: DFT (opsets 17 and 20), STFT, HannWindow, HammingWindow,
BlackmanWindow and MelWeightMatrix (17).

Expected values come from onnxruntime, except where noted:
- IRFFT (DFT with inverse=1, onesided=1) is not implemented by onnxruntime; numpy's irfft in
  double precision is the reference.
- Long transforms compare with numpy's FFT in double precision, which is more accurate than
  onnxruntime's float32 FFT, so the tolerance can stay tight.
- STFT of a complex signal: onnxruntime returns garbage (values near 1e26); numpy in double
  precision is the reference.
- Float64 Hamming and Blackman windows follow onnx's reference: onnxruntime computes them with
  float32 coefficients (and Hamming's are 25/46 and 21/46 in the spec, not 0.54 and 0.46).
"""
import numpy as np
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from casegen import Cases, rand

cases = Cases("signal")
F32, F64, F16 = np.float32, np.float64, np.float16


def out_type(dtype):
    return {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}


def np_dft(x, axis, n=None, inverse=False, onesided=False):
    """DFT in double precision with the ONNX layout (last dim 1 = real, 2 = complex)."""
    axis = axis % x.ndim
    c = x[..., 0].astype(F64)
    if x.shape[-1] == 2:
        c = c + 1j * x[..., 1].astype(F64)
    if inverse and onesided:
        n = n or 2 * (x.shape[axis] - 1)
        return np.fft.irfft(c, n=n, axis=axis)[..., np.newaxis].astype(x.dtype)
    n = n or x.shape[axis]
    y = np.fft.ifft(c, n=n, axis=axis) if inverse else np.fft.fft(c, n=n, axis=axis)
    if onesided:
        y = np.take(y, range(n // 2 + 1), axis=axis)
    return np.stack([y.real, y.imag], axis=-1).astype(x.dtype)


def dft(name, x, opset=17, dft_length=None, axis=None, runtime=(), expected=None, rtol=1e-4,
        atol=1e-5, **attrs):
    """One DFT node. At opset >= 20 axis is an input, before that an attribute. dft_length and
    the axis input are constants unless named in `runtime`."""
    inputs, consts, names = {"x": x}, {}, ["x"]
    values = [("dft_length", dft_length)]
    if opset >= 20:
        values.append(("axis", axis))
    elif axis is not None:
        attrs["axis"] = axis
    for key, val in values:
        if val is None:
            names.append("")
            continue
        arr = np.array(val, np.int64)
        (inputs if key in runtime else consts)[key] = arr
        names.append(key)
    while names[-1] == "":
        names.pop()
    node = helper.make_node("DFT", names, ["y"], name=name, **attrs)
    if expected is not None:
        expected = {"y": expected}
    cases.model(name, [node], inputs, ["y"], consts, opset=opset, rtol=rtol, atol=atol,
                expected=expected, output_types=out_type(x.dtype))


# ---- DFT, opset 17 (axis attribute, default 1) ----
dft("dft17_real_default_axis", rand(2, 8, 1))
dft("dft17_complex", rand(2, 8, 2), axis=1)
dft("dft17_real_axis2_rank4", rand(2, 3, 6, 1), axis=2)
dft("dft17_complex_axis0", rand(5, 3, 2), axis=0)
dft("dft17_negative_axis", rand(2, 3, 7, 2), axis=-2)
dft("dft17_negative_axis_m3", rand(2, 5, 4, 1), axis=-3)
dft("dft17_odd_length", rand(3, 15, 1), axis=1)
dft("dft17_prime_length", rand(2, 13, 2), axis=1)
dft("dft17_length_one", rand(4, 1, 2), axis=1)
# No elements, but a transform length of 2^31 - 1 along the axis: the output is empty too, and no
# plan is made for it (fuzz_run: the plan's tables asked for 32 GiB).
dft("dft17_empty_long_axis", np.zeros((0, 2**31 - 1, 1), np.float32), axis=1,
    expected=np.zeros((0, 2**31 - 1, 2), np.float32))
dft("dft17_onesided_even", rand(2, 10, 1), axis=1, onesided=1)
dft("dft17_onesided_odd", rand(2, 9, 1), axis=1, onesided=1)
# A one-sided forward DFT of complex input is not in the spec (RFFT takes real input); Quilt and
# onnxruntime 1.32 refuse it (tests/python/test_errors.py).
dft("dft17_inverse_complex", rand(2, 12, 2), axis=1, inverse=1)
dft("dft17_inverse_real", rand(2, 6, 1), axis=1, inverse=1)
dft("dft17_inverse_axis2", rand(2, 3, 5, 2), axis=2, inverse=1)
dft("dft17_pad", rand(2, 6, 1), axis=1, dft_length=10)
dft("dft17_truncate", rand(2, 9, 2), axis=1, dft_length=4)
dft("dft17_pad_onesided", rand(2, 5, 1), axis=1, dft_length=11, onesided=1)
dft("dft17_pad_inverse", rand(2, 5, 2), axis=1, dft_length=8, inverse=1)
dft("dft17_runtime_length", rand(2, 7, 1), axis=1, dft_length=9, runtime=("dft_length",))
dft("dft17_float64", rand(2, 12, 2, dtype=F64), axis=1, rtol=1e-10, atol=1e-12)
dft("dft17_float16", rand(2, 8, 2, dtype=F16), axis=1, rtol=1e-2, atol=1e-2)
dft("dft17_pow2_64", rand(3, 64, 2), axis=1, atol=1e-4)
dft("dft17_inner_dims", rand(2, 16, 3, 2, 2), axis=1, atol=1e-4)
# Long transforms (radix-2 and Bluestein) against numpy in double precision.
for n in (1024, 100, 97, 1000):
    x = rand(2, n, 2)
    dft(f"dft17_long_{n}", x, axis=1, expected=np_dft(x, 1), atol=1e-4)
    dft(f"dft17_long_{n}_inverse", x, axis=1, inverse=1, expected=np_dft(x, 1, inverse=True),
        atol=1e-6)
for n in (997, 2048):  # Bluestein and radix-2 are exact to double rounding
    x = rand(2, n, 2, dtype=F64)
    dft(f"dft17_long_float64_{n}", x, axis=1, expected=np_dft(x, 1), rtol=1e-9, atol=1e-10)
x = rand(0, 8, 2)
dft("dft17_empty_batch", x, axis=1, expected=np_dft(x, 1))
x = rand(3, 250, 1)
dft("dft17_long_onesided_pad", x, axis=1, onesided=1, dft_length=300,
    expected=np_dft(x, 1, n=300, onesided=True), atol=1e-4)

# ---- DFT, opset 20 (axis input, default -2) ----
dft("dft20_default_axis", rand(2, 3, 8, 1), opset=20)
dft("dft20_axis_input", rand(2, 8, 3, 2), opset=20, axis=1)
dft("dft20_axis_runtime", rand(2, 8, 3, 1), opset=20, axis=1, runtime=("axis",))
dft("dft20_negative_axis", rand(4, 6, 3, 2), opset=20, axis=-3)
dft("dft20_inverse", rand(2, 9, 2), opset=20, axis=1, inverse=1)
dft("dft20_onesided", rand(2, 3, 12, 1), opset=20, onesided=1)
dft("dft20_length_and_axis", rand(2, 7, 4, 1), opset=20, dft_length=5, axis=1)
dft("dft20_all_runtime", rand(2, 7, 4, 2), opset=20, dft_length=10, axis=1,
    runtime=("dft_length", "axis"))
dft("dft20_float64", rand(3, 10, 2, dtype=F64), opset=20, axis=1, rtol=1e-10, atol=1e-12)
dft("dft19_axis_attr", rand(2, 5, 6, 1), opset=19, axis=2)
# IRFFT: onnxruntime does not implement it (numpy's irfft is the reference).
for name, shape, axis, n, opset in [
    ("dft20_irfft", (2, 6, 3, 2), 1, None, 20),
    ("dft20_irfft_odd_length", (2, 6, 2), 1, 11, 20),
    ("dft20_irfft_pad", (2, 4, 2), 1, 12, 20),
    ("dft20_irfft_truncate", (2, 9, 2), 1, 6, 20),
    ("dft20_irfft_default_axis", (3, 5, 2), None, None, 20),
    ("dft17_irfft", (2, 5, 2), 1, None, 17),
    ("dft17_irfft_long", (2, 129, 2), 1, None, 17),
]:
    x = rand(*shape)
    dft(name, x, opset=opset, dft_length=n, axis=axis, inverse=1, onesided=1, atol=1e-5,
        expected=np_dft(x, -2 if axis is None else axis, n=n, inverse=True, onesided=True))


# ---- STFT ----
def np_stft(signal, step, window=None, frame_length=None, onesided=1):
    """STFT in double precision with the ONNX layout."""
    n = frame_length or (len(window) if window is not None else signal.shape[1])
    w = np.ones(n) if window is None else window.astype(F64)
    frames = 1 + (signal.shape[1] - n) // step
    x = np.stack([signal[:, f * step:f * step + n] * w[:, None] for f in range(frames)], axis=1)
    y = np_dft(x.astype(F64), 2, onesided=bool(onesided))
    return y.astype(signal.dtype)


def stft(name, signal, step, window=None, frame_length=None, runtime=(), expected=None,
         rtol=1e-4, atol=1e-5, **attrs):
    inputs, consts, names = {"signal": signal}, {}, ["signal"]
    for key, val in [("frame_step", np.array(step, np.int64)), ("window", window),
                     ("frame_length", None if frame_length is None else
                      np.array(frame_length, np.int64))]:
        if val is None:
            names.append("")
            continue
        (inputs if key in runtime or key == "window" else consts)[key] = val
        names.append(key)
    while names[-1] == "":
        names.pop()
    node = helper.make_node("STFT", names, ["y"], name=name, **attrs)
    if expected is not None:
        expected = {"y": expected}
    cases.model(name, [node], inputs, ["y"], consts, opset=17, rtol=rtol, atol=atol,
                expected=expected, output_types=out_type(signal.dtype))


stft("stft_frame_length", rand(1, 64, 1), 8, frame_length=16)
stft("stft_window", rand(2, 64, 1), 8, window=rand(16))
stft("stft_window_and_length", rand(2, 50, 1), 5, window=rand(10), frame_length=10)
stft("stft_two_sided", rand(1, 40, 1), 4, frame_length=8, onesided=0)
x, w = rand(2, 40, 2), rand(12)
stft("stft_complex_two_sided", x, 6, window=w, onesided=0,
     expected=np_stft(x, 6, window=w, onesided=0))
x = rand(2, 33, 2)
stft("stft_complex_onesided", x, 5, frame_length=9,  # the truncated full spectrum
     expected=np_stft(x, 5, frame_length=9))
stft("stft_odd_frame", rand(1, 61, 1), 7, window=rand(15))
stft("stft_step_leaves_tail", rand(3, 30, 1), 4, frame_length=7)
stft("stft_step_larger_than_frame", rand(1, 40, 1), 9, frame_length=4)
stft("stft_one_frame", rand(1, 12, 1), 3, frame_length=12)
stft("stft_runtime_step", rand(2, 48, 1), 6, frame_length=12, runtime=("frame_step",))
stft("stft_float64", rand(2, 40, 1, dtype=F64), 5, window=rand(8, dtype=F64), rtol=1e-10,
     atol=1e-12)
stft("stft_float16", rand(1, 32, 1, dtype=F16), 4, window=rand(8, dtype=F16), rtol=1e-2,
     atol=1e-2)
x, w = rand(1, 600, 1), rand(200)
stft("stft_long_frame", x, 100, window=w, expected=np_stft(x, 100, window=w), atol=1e-4)
stft("stft_pow2_frame", rand(2, 512, 1), 64, window=rand(128), atol=1e-4)


# ---- windows ----
def window(name, op, size, size_dtype=np.int64, expected=None, rtol=1e-5, atol=1e-6, **attrs):
    x = np.array(size, size_dtype)
    dtype = attrs.get("output_datatype", TensorProto.FLOAT)
    node = helper.make_node(op, ["size"], ["y"], name=name, **attrs)
    if expected is not None:
        expected = {"y": expected}
    cases.model(name, [node], {"size": x}, ["y"], opset=17, rtol=rtol, atol=atol,
                expected=expected, output_types={"y": dtype})


for op in ("HannWindow", "HammingWindow", "BlackmanWindow"):
    short = op[: -len("Window")].lower()
    for size in (1, 2, 7, 10, 64):
        window(f"{short}_periodic_{size}", op, size)
        if size > 1:  # size 1 symmetric divides by zero (NaN)
            window(f"{short}_symmetric_{size}", op, size, periodic=0)
    window(f"{short}_empty", op, 0)
    window(f"{short}_int32_size", op, 9, size_dtype=np.int32, periodic=0)
    window(f"{short}_float16", op, 11, output_datatype=TensorProto.FLOAT16, rtol=1e-3, atol=1e-3)
    window(f"{short}_int32_out", op, 10, output_datatype=TensorProto.INT32)
    window(f"{short}_uint8_out", op, 9, output_datatype=TensorProto.UINT8, periodic=0)
    window(f"{short}_int64_out", op, 12, output_datatype=TensorProto.INT64)
    if op != "HannWindow":  # onnxruntime's float64 coefficients are float32 (see top)
        for periodic in (0, 1):
            node = helper.make_node(op, ["size"], ["y"], periodic=periodic,
                                    output_datatype=TensorProto.DOUBLE)
            ref = ReferenceEvaluator(node).run(None, {"size": np.array(13, np.int64)})[0]
            window(f"{short}_float64_{periodic}", op, 13, expected=ref, rtol=1e-12, atol=1e-14,
                   periodic=periodic, output_datatype=TensorProto.DOUBLE)
    else:
        window(f"{short}_float64", op, 13, output_datatype=TensorProto.DOUBLE, rtol=1e-12,
               atol=1e-14)
        window(f"{short}_float64_symmetric", op, 13, output_datatype=TensorProto.DOUBLE,
               rtol=1e-12, atol=1e-14, periodic=0)


# ---- MelWeightMatrix ----
def mel(name, bins, length, rate, low, high, edge_dtype=F32, int_dtype=np.int64, reference=False,
        **attrs):
    inputs = {
        "num_mel_bins": np.array(bins, int_dtype),
        "dft_length": np.array(length, int_dtype),
        "sample_rate": np.array(rate, int_dtype),
        "lower_edge_hertz": np.array(low, edge_dtype),
        "upper_edge_hertz": np.array(high, edge_dtype),
    }
    dtype = attrs.get("output_datatype", TensorProto.FLOAT)
    node = helper.make_node("MelWeightMatrix", list(inputs), ["y"], name=name, **attrs)
    expected = {"y": ReferenceEvaluator(node).run(None, inputs)[0]} if reference else None
    cases.model(name, [node], inputs, ["y"], opset=17, output_types={"y": dtype},
                expected=expected)


mel("mel_basic", 8, 16, 8192, 0.0, 4096.0, int_dtype=np.int32)
mel("mel_speech", 5, 64, 16000, 100.0, 7000.0)
mel("mel_many_bands", 40, 512, 16000, 20.0, 8000.0)
mel("mel_narrow_bands", 20, 32, 8000, 0.0, 4000.0)  # several bands share a bin
mel("mel_odd_length", 6, 33, 22050, 50.0, 10000.0)
# onnxruntime has no float64-edge kernel: onnx's reference is the expected value.
mel("mel_float64_edges", 10, 128, 44100, 30.0, 16000.0, edge_dtype=F64, reference=True)
mel("mel_float64_out", 7, 100, 16000, 0.0, 8000.0, output_datatype=TensorProto.DOUBLE)
mel("mel_int32_out", 8, 64, 8000, 0.0, 4000.0, output_datatype=TensorProto.INT32)
mel("mel_float16_out", 8, 64, 8000, 0.0, 4000.0, output_datatype=TensorProto.FLOAT16,
    reference=True)  # no float16 kernel in onnxruntime
