"""Cases of onnxruntime's com.microsoft quantized ops (what its quantizer writes in the QOperator
and dynamic formats): QuantizeLinear, DequantizeLinear, QLinearAdd, QLinearMul, QLinearSigmoid,
QLinearLeakyRelu, QLinearGlobalAveragePool, QLinearConcat, QLinearAveragePool, QLinearSoftmax,
QLinearWhere, QLinearReduceMean,
MatMulIntegerToFloat, DynamicQuantizeMatMul.

The QLinear* ops' expected values are their documented semantics in numpy (dequantize in
float32, the op, quantize with round half to even and saturation); every one but
QLinearReduceMean (onnxruntime has no CPU kernel for it) is also run on onnxruntime and must
agree with it within one quantization step (its kernels use other float formulas, so values at a
rounding tie may land on the other side), else the generator stops.
The float ops (MatMulIntegerToFloat, DynamicQuantizeMatMul, QGemm's float output) take
onnxruntime's outputs, which must match the spec's arithmetic in numpy (int_product) within the
tolerance; on a CPU where onnxruntime's uint8 x int8 product saturates (casegen.ort_u8s8_saturates:
x86 without VNNI) the numpy values are expected instead. com.microsoft Q/DQ take onnxruntime's
outputs."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from casegen import Cases, ort_u8s8_saturates, rand, randint, run_onnxruntime, u8s8

MS = "com.microsoft"
f32 = np.float32
RNG_COND = np.random.default_rng(18)


class ContribCases(Cases):
    def contrib(self, name, op_type, inputs, initializers=None, expected=None, out_type=None,
                rtol=1e-4, atol=1e-5, max_step=1, ort_wraps=False, ort=True, exact=None,
                **attrs):
        initializers = initializers or {}
        names = [k if not k.startswith("_") else "" for k in list(inputs) + list(initializers)]
        node = helper.make_node(op_type, names, ["y"], name=name, domain=MS, **attrs)
        feeds = {k: v for k, v in inputs.items() if not k.startswith("_")}
        if out_type is None:
            if expected is not None:
                out_type = helper.np_dtype_to_tensor_dtype(expected.dtype)
            elif op_type == "QuantizeLinear":
                out_type = helper.np_dtype_to_tensor_dtype(initializers["z"].dtype)
            else:
                out_type = TensorProto.FLOAT
        graph = helper.make_graph(
            [node], name,
            [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in feeds.items()],
            [helper.make_tensor_value_info("y", out_type, None)],
            [numpy_helper.from_array(v, k) for k, v in initializers.items()])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(MS, 1)])
        m.ir_version = 8
        got = run_onnxruntime(m, feeds, ["y"])[0] if ort else expected
        arrays = list(inputs.values()) + list(initializers.values())
        if op_type == "DynamicQuantizeMatMul":  # A is quantized to uint8 inside
            arrays.append(np.zeros(0, np.uint8))
        saturating = ort_u8s8_saturates() and u8s8(arrays)
        if expected is None and exact is not None:
            # A float op's output by the spec's arithmetic (numpy): onnxruntime's is expected
            # and must match it, but where its product saturates (casegen.ort_u8s8_saturates)
            want = exact().astype(got.dtype)
            if saturating:
                print(f"{name}: onnxruntime's uint8 x int8 product saturates on this CPU (no "
                      f"VNNI); expected from the spec's arithmetic in numpy")
                expected = want
            else:
                assert got.shape == want.shape and np.allclose(got, want, rtol=rtol, atol=atol), \
                    (name, np.abs(got.astype(np.float64) - want).max())
                expected = got
        elif expected is None:
            expected = got
        elif saturating:
            # onnxruntime's product saturates on this CPU (casegen.ort_u8s8_saturates): the
            # spec-style expected values stand alone
            print(f"{name}: onnxruntime's uint8 x int8 product saturates on this CPU (no VNNI); "
                  f"not compared with it")
        else:
            diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
            if ort_wraps:  # onnxruntime may wrap where the spec saturates at the type's maximum
                # (1.23 did; where it agrees, the check below holds everywhere)
                top = np.iinfo(expected.dtype).max
                assert (expected[diff > max_step] == top).all(), name
                diff[expected == top] = 0
            assert got.shape == expected.shape and diff.max(initial=0) <= max_step, (name, diff.max())
        case = self.dir / name
        data = case / "test_data_set_0"
        data.mkdir(parents=True)
        m.graph.output[0].CopyFrom(helper.make_tensor_value_info(
            "y", helper.np_dtype_to_tensor_dtype(expected.dtype), expected.shape))
        onnx.save(m, case / "model.onnx")
        for i, (k, v) in enumerate(feeds.items()):
            (data / f"input_{i}.pb").write_bytes(numpy_helper.from_array(v, k).SerializeToString())
        (data / "output_0.pb").write_bytes(numpy_helper.from_array(expected, "y").SerializeToString())
        (case / "tolerance").write_text(f"{rtol} {atol}\n")


c = ContribCases("quantization_contrib")


def q(shape, t):
    info = np.iinfo(t)
    return randint(*shape, low=info.min, high=info.max + 1, dtype=t)


def quantize(v, scale, zp, t):
    info = np.iinfo(t)
    r = np.rint((v / f32(scale)).astype(f32)).astype(np.float64) + zp
    return np.clip(r, info.min, info.max).astype(t)


def deq(x, scale, zp):
    return (x.astype(np.int32) - np.int32(zp)).astype(f32) * f32(scale)


# ---- QLinearAdd / QLinearMul ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    zp = (lambda v: np.array(v, t))
    for op, fn in (("QLinearAdd", np.add), ("QLinearMul", np.multiply)):
        for shape_a, shape_b in (((3, 40), (3, 40)), ((2, 3, 17), (17,)), ((4, 1, 5), (1, 6, 1)),
                                 ((70,), ())):
            a, b = q(shape_a, t), q(shape_b, t)
            az, bz, cz = zp(5 if t == np.int8 else 130), zp(-9 if t == np.int8 else 100), zp(3)
            sa, sb = f32(0.05), f32(0.03)
            sc = f32(0.08) if op == "QLinearAdd" else f32(0.6)
            want = quantize(fn(deq(a, sa, az), deq(b, sb, bz)), sc, int(cz), t)
            c.contrib(f"{op.lower()}_{tn}_{'x'.join(map(str, shape_a))}_{len(shape_b)}d", op,
                      {"a": a, "as": np.array(sa), "az": az, "b": b, "bs": np.array(sb), "bz": bz,
                       "cs": np.array(sc), "cz": cz}, expected=want)
# ---- QLinearSigmoid / QLinearLeakyRelu: every input value ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    info = np.iinfo(t)
    x = np.arange(info.min, info.max + 1, dtype=np.int64).astype(t).reshape(4, 64)
    xz, yz = np.array(3 if t == np.int8 else 128, t), np.array(info.min if t == np.int8 else 0, t)
    xs, ys = f32(0.06), f32(1 / 256)
    d = deq(x, xs, xz).astype(np.float64)
    want = quantize((1 / (1 + np.exp(-d))).astype(f32), ys, int(yz), t)
    c.contrib(f"qlinearsigmoid_{tn}", "QLinearSigmoid",
              {"x": x, "xs": np.array(xs), "xz": xz, "ys": np.array(ys), "yz": yz}, expected=want)
    for alpha in (0.1, 0.01):
        dx = deq(x, xs, xz)
        want = quantize(np.where(dx >= 0, dx, dx * f32(alpha)).astype(f32), f32(0.04), 2, t)
        c.contrib(f"qlinearleakyrelu_{tn}_{alpha}", "QLinearLeakyRelu",
                  {"x": x, "xs": np.array(xs), "xz": xz, "ys": np.array(f32(0.04)),
                   "yz": np.array(2, t)}, expected=want, alpha=alpha)

# ---- QLinearGlobalAveragePool ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    for last in (0, 1):
        x = q((2, 7, 5, 6) if not last else (2, 5, 6, 7), t)
        xz, yz = np.array(10, t), np.array(-3 if t == np.int8 else 7, t)
        xs, ys = f32(0.1), f32(0.02)
        axes = (2, 3) if not last else (1, 2)
        s = (x.astype(np.int64) - int(xz)).sum(axis=axes, keepdims=True).astype(np.float64)
        v = s * np.float64(xs) / np.float64(30) / np.float64(ys)
        info = np.iinfo(t)
        want = np.clip(np.rint(v) + int(yz), info.min, info.max).astype(t)
        c.contrib(f"qlinearglobalavgpool_{tn}_channels_last{last}", "QLinearGlobalAveragePool",
                  {"x": x, "xs": np.array(xs), "xz": xz, "ys": np.array(ys), "yz": yz},
                  expected=want, channels_last=last)

# ---- QLinearReduceMean: sum(x - x_zp) * x_scale / count / y_scale in float64 over the axes.
# onnxruntime 1.32 has its schema but no CPU kernel (NOT_IMPLEMENTED at session creation), so the
# documented semantics in numpy are the only reference (ort=False).
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    info = np.iinfo(t)
    for shape, axes, keep in (((2, 5, 7), [1], 1), ((3, 4, 9), [0, 2], 0), ((6, 11), [-1], 0),
                              ((2, 3, 4, 5), [1, 2, 3], 1)):
        x = q(shape, t)
        xz, yz = np.array(-4 if t == np.int8 else 120, t), np.array(2 if t == np.int8 else 131, t)
        xs, ys = f32(0.07), f32(0.03)
        s = (x.astype(np.int64) - int(xz)).sum(axis=tuple(axes), keepdims=bool(keep))
        count = x.size // s.size
        v = s.astype(np.float64) * np.float64(xs) / np.float64(count) / np.float64(ys)
        want = np.clip(np.rint(v) + int(yz), info.min, info.max).astype(t)
        axes_name = "_".join(str(a).replace("-", "m") for a in axes)
        c.contrib(f"qlinearreducemean_{tn}_axes{axes_name}_keep{keep}", "QLinearReduceMean",
                  {"x": x, "xs": np.array(xs), "xz": xz, "ys": np.array(ys), "yz": yz},
                  expected=want, ort=False, axes=axes, keepdims=keep)

# ---- QLinearConcat: each input requantized to Y's scale and zero point ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    info = np.iinfo(t)
    ys, yz = f32(0.05), np.array(4 if t == np.int8 else 120, t)
    for axis, shapes in ((1, ((2, 3, 5), (2, 1, 5), (2, 4, 5))), (-1, ((3, 7), (3, 2), (3, 9)))):
        # The second input shares Y's scale and zero point (copied unchanged).
        params = ((f32(0.03), 10), (ys, int(yz)), (f32(0.11), -7 if t == np.int8 else 200))
        feeds = {"ys": np.array(ys), "yz": yz}
        parts = []
        for k, (shape, (s, z)) in enumerate(zip(shapes, params)):
            x = q(shape, t)
            feeds.update({f"x{k}": x, f"s{k}": np.array(s), f"z{k}": np.array(z, t)})
            parts.append(quantize(deq(x, s, z), ys, int(yz), t))
        want = np.concatenate(parts, axis=axis)
        c.contrib(f"qlinearconcat_{tn}_axis{axis}", "QLinearConcat", feeds, expected=want,
                  axis=axis)


def avg_pool_2d(x, kernel, strides, pads, include_pad):
    """The window sums over NCHW x (int64; pads: top, left, bottom, right) and the spec's
    divisors."""
    n, ch, h, w = x.shape
    kh, kw = kernel
    oh = (h + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - kw) // strides[1] + 1
    sums = np.zeros((n, ch, oh, ow), np.int64)
    counts = np.zeros((oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * strides[0] - pads[0], j * strides[1] - pads[1]
            hs, ws = slice(max(h0, 0), min(h0 + kh, h)), slice(max(w0, 0), min(w0 + kw, w))
            win = x[:, :, hs, ws]
            sums[:, :, i, j] = win.sum(axis=(2, 3))
            counts[i, j] = kh * kw if include_pad else win.shape[2] * win.shape[3]
    return sums, counts


# ---- QLinearAveragePool: dequantize, AveragePool, quantize; the window sums exact, then
# sum * x_scale / count / y_scale in float64 (as QLinearGlobalAveragePool) ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    info = np.iinfo(t)
    xz, yz = np.array(9, t), np.array(-2 if t == np.int8 else 130, t)
    xs, ys = f32(0.07), f32(0.05)
    for kernel, strides, pads, include_pad, last in (((3, 3), (2, 2), (1, 1, 1, 1), 0, 0),
                                                     ((3, 3), (2, 2), (1, 1, 1, 1), 1, 0),
                                                     ((2, 3), (1, 2), (0, 1, 0, 0), 0, 0),
                                                     ((3, 3), (1, 1), (1, 1, 1, 1), 0, 1)):
        x = q((2, 5, 9, 10), t)
        sums, counts = avg_pool_2d(x.astype(np.int64) - int(xz), kernel, strides, pads,
                                   include_pad)
        v = sums.astype(np.float64) * np.float64(xs) / counts / np.float64(ys)
        want = np.clip(np.rint(v) + int(yz), info.min, info.max).astype(t)
        if last:
            x, want = x.transpose(0, 2, 3, 1).copy(), want.transpose(0, 2, 3, 1).copy()
        name = (f"qlinearaveragepool_{tn}_k{kernel[0]}{kernel[1]}_s{strides[0]}{strides[1]}"
                f"_pad{include_pad}_last{last}")
        c.contrib(name, "QLinearAveragePool",
                  {"x": x, "xs": np.array(xs), "xz": xz, "ys": np.array(ys), "yz": yz},
                  expected=want, kernel_shape=list(kernel), strides=list(strides),
                  pads=list(pads), count_include_pad=include_pad, channels_last=last)


# ---- QLinearSoftmax: the output scale 1/256 onnxruntime's quantizer sets ----
def softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    xz, yz = np.array(3 if t == np.int8 else 140, t), np.array(-128 if t == np.int8 else 0, t)
    ys = f32(1 / 256)
    # With scale 0.02 no probability reaches 255.5/256; with 0.2 many do and saturate.
    for shape, axis, opset, xs in (((4, 3, 20), -1, 13, 0.02), ((2, 6, 5), 1, 13, 0.02),
                                   ((3, 4, 5), 1, 11, 0.02), ((2, 6, 5), 1, 13, 0.2)):
        x = q(shape, t)
        d = deq(x, f32(xs), xz).astype(np.float64)
        if opset < 13:  # the input as a matrix at axis
            y = softmax(d.reshape(int(np.prod(shape[:axis])), -1), 1).reshape(shape)
        else:
            y = softmax(d, axis)
        want = quantize(y.astype(f32), ys, int(yz), t)
        # onnxruntime 1.23's int8 QLinearSoftmax wraps a probability that rounds to 256/256
        # around to -128; the spec (QuantizeLinear) saturates it to 127, as Quilt does (the
        # expected values are the spec's whatever onnxruntime's version gives there).
        c.contrib(f"qlinearsoftmax_{tn}_axis{axis}_opset{opset}_scale{xs}", "QLinearSoftmax",
                  {"x": x, "xs": np.array(f32(xs)), "xz": xz, "ys": np.array(ys), "yz": yz},
                  expected=want, ort_wraps=t == np.int8 and xs == 0.2, axis=axis, opset=opset)

# ---- QLinearWhere: X and Y requantized to Z's scale and zero point, broadcast ----
for t in (np.uint8, np.int8):
    tn = np.dtype(t).name
    for cshape, xshape, yshape in (((3, 8), (3, 8), (3, 8)), ((2, 1, 6), (4, 1), (6,))):
        cond = RNG_COND.random(cshape) < 0.5
        x, y = q(xshape, t), q(yshape, t)
        xs, xz = f32(0.04), np.array(6, t)
        ys, yz = f32(0.09), np.array(-20 if t == np.int8 else 200, t)
        zs, zz = f32(0.05), np.array(3 if t == np.int8 else 110, t)
        want = np.where(cond, quantize(deq(x, xs, xz), zs, int(zz), t),
                        quantize(deq(y, ys, yz), zs, int(zz), t))
        c.contrib(f"qlinearwhere_{tn}_{len(cshape)}d", "QLinearWhere",
                  {"c": cond, "a": x, "as": np.array(xs), "az": xz, "b": y, "bs": np.array(ys),
                   "bz": yz, "zs": np.array(zs), "zz": zz}, expected=want)

# ---- MatMulIntegerToFloat / DynamicQuantizeMatMul (onnxruntime's float outputs, checked
# against the spec's arithmetic in numpy: int_product) ----


def int_product(a, az, b, bz, scale, bias=None):
    """(a - az) @ (b - bz) exactly, times scale (float32, per column or one), plus bias."""
    acc = (a.astype(np.int64) - np.asarray(az).astype(np.int64)) @ \
        (b.astype(np.int64) - np.asarray(bz).astype(np.int64))
    y = acc.astype(np.float64) * np.asarray(scale, f32).astype(np.float64)
    return y + (0 if bias is None else bias.astype(np.float64))


def dynamic_quantize(x):
    """DynamicQuantizeLinear's uint8 quantization: (values, scale, zero point)."""
    lo, hi = min(f32(0), x.min()), max(f32(0), x.max())
    scale = f32((hi - lo) / f32(255))
    zp = np.clip(np.rint(-lo / scale), 0, 255).astype(np.uint8)
    return quantize(x, scale, int(zp), np.uint8), scale, zp


for ta, tb in ((np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8)):
    name = f"{np.dtype(ta).name}_{np.dtype(tb).name}"
    a, b = q((3, 9, 70), ta), q((70, 33), tb)
    a_s, b_s, az, bz, bias = f32(0.02), rand(33, low=0.01, high=0.03), np.array(7, ta), \
        q((33,), tb), rand(33)
    c.contrib(f"matmulintegertofloat_{name}", "MatMulIntegerToFloat",
              {"a": a}, initializers={"b": b, "as": np.array(a_s), "bs": b_s, "az": az,
                                      "bz": bz, "bias": bias}, rtol=1e-5, atol=1e-4,
              exact=lambda a=a, b=b, a_s=a_s, b_s=b_s, az=az, bz=bz, bias=bias:
              int_product(a, az, b, bz, a_s * b_s, bias))
a, b = q((5, 20), np.uint8), q((20, 17), np.int8)
c.contrib("matmulintegertofloat_runtime_b_no_zp", "MatMulIntegerToFloat",
          {"a": a, "b": b, "as": np.array(f32(0.1)), "bs": np.array(f32(0.05))},
          rtol=1e-5, atol=1e-4, exact=lambda: int_product(a, 0, b, 0, f32(0.1) * f32(0.05)))
for name, x, b, b_s, bz, bias in (
        ("dynamicquantizematmul", rand(4, 6, 64, low=-3, high=2), q((64, 50), np.int8),
         rand(50, low=0.01, high=0.02), np.zeros(50, np.int8), rand(50)),
        ("dynamicquantizematmul_uint8_b", rand(7, 33, low=-1, high=1), q((33, 16), np.uint8),
         np.array(f32(0.01)), np.array(128, np.uint8), None)):
    inits = {"b": b, "bs": b_s, "bz": bz} | ({"bias": bias} if bias is not None else {})
    qa, a_s, az = dynamic_quantize(x)
    c.contrib(name, "DynamicQuantizeMatMul", {"a": x}, initializers=inits, rtol=1e-4, atol=1e-3,
              exact=lambda qa=qa, a_s=a_s, az=az, b=b, b_s=b_s, bz=bz, bias=bias:
              int_product(qa, az, b, bz, a_s * b_s, bias))

# ---- com.microsoft QuantizeLinear / DequantizeLinear ----
c.contrib("ms_quantizelinear_per_axis", "QuantizeLinear",
          {"x": rand(2, 4, 40, low=-2, high=2)},
          initializers={"s": rand(4, low=0.01, high=0.02), "z": q((4,), np.int8)}, axis=1)
c.contrib("ms_dequantizelinear", "DequantizeLinear", {"x": q((3, 50), np.uint8)},
          initializers={"s": np.array(f32(0.03)), "z": np.array(9, np.uint8)})

# ---- QGemm: requantized (the spec-style numpy reference, onnxruntime within one step) and float
for ta, tb, trans_b, ty in ((np.uint8, np.int8, 1, np.uint8), (np.int8, np.int8, 0, np.int8),
                            (np.uint8, np.uint8, 1, np.uint8)):
    name = f"{np.dtype(ta).name}_{np.dtype(tb).name}_transb{trans_b}"
    m, k, n = 6, 50, 21
    a = q((m, k), ta)
    b = q((n, k) if trans_b else (k, n), tb)
    bmat = b.T if trans_b else b
    az, bz = np.array(3, ta), q((n,), tb)
    c_bias = randint(n, low=-3000, high=3000, dtype=np.int32)
    a_s, b_s, y_s, alpha = f32(0.02), rand(n, low=0.01, high=0.02), f32(0.7), 0.5
    yz = np.array(5, ty)
    acc = ((a.astype(np.int64) - int(az)) @ (bmat.astype(np.int64) - bz.astype(np.int64))
           + c_bias.astype(np.int64))
    mult = ((f32(alpha) * a_s) * b_s / y_s).astype(f32)
    info = np.iinfo(ty)
    want = np.clip(np.rint(acc * mult.astype(np.float64)) + int(yz), info.min, info.max).astype(ty)
    c.contrib(f"qgemm_{name}", "QGemm", {"a": a},
              initializers={"as": np.array(a_s), "az": az, "b": b, "bs": b_s, "bz": bz,
                            "c": c_bias, "ys": np.array(y_s), "yz": yz},
              expected=want, alpha=alpha, transB=trans_b)
a, b, c_bias = q((5, 40), np.uint8), q((40, 19), np.int8), randint(19, low=-500, high=500,
                                                                  dtype=np.int32)
c.contrib("qgemm_float_output", "QGemm", {"a": a},
          initializers={"as": np.array(f32(0.03)), "az": np.array(128, np.uint8), "b": b,
                        "bs": np.array(f32(0.01)), "bz": np.array(0, np.int8), "c": c_bias},
          rtol=1e-5, atol=1e-4,
          exact=lambda: int_product(a, 128, b, 0, f32(0.03) * f32(0.01)) +
          c_bias.astype(np.float64) * float(f32(0.03) * f32(0.01)))
