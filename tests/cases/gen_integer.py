"""Cases of the integer GEMM (backends/cpu/qgemm.cpp) through the ops on it: MatMulInteger,
QLinearMatMul, ConvInteger and QLinearConv, against the spec's arithmetic in numpy int64 (not
onnxruntime, whose integer kernels depart from the spec in places).

The shapes hit every tail of the kernels: rows of A (or output channels) 1..9 around the 8-row
tile, columns around the 16-column vector and the 48-column tile, depths not a multiple of 4.
Every operand type pair (u8 x u8, u8 x s8, s8 x u8, s8 x s8), zero points per tensor, per row
of A and per column of B (per output channel for a conv), constant (packed at session creation)
and runtime weights, and multipliers that saturate both ends. CTest runs the family once per
instruction-set path (QUILT_CPU_ISA=avx512vnni, avx2, scalar, where the CPU has it)."""
import numpy as np

from casegen import Cases, randint

c = Cases("integer")
f32 = np.float32


def q(shape, t):
    info = np.iinfo(t)
    return randint(*shape, low=info.min, high=info.max + 1, dtype=t)


def zp_value(t, per, count):
    """A zero point of type t: a scalar, or `count` values."""
    info = np.iinfo(t)
    if per:
        return randint(count, low=info.min, high=info.max + 1, dtype=t)
    return np.array(info.min + 77, t)


def matmul_ref(a, b, azp, bzp):
    """(a - azp) @ (b - bzp) in int64; azp per row of a's last matrix, bzp per column."""
    a64 = a.astype(np.int64)
    b64 = b.astype(np.int64)
    if np.ndim(azp) == 1:
        a64 = a64 - azp.astype(np.int64)[:, None]
    else:
        a64 = a64 - np.int64(azp)
    b64 = b64 - (bzp.astype(np.int64) if np.ndim(bzp) == 1 else np.int64(bzp))
    return np.matmul(a64, b64)


def requant(acc, mult, zp, t):
    """saturate(round_half_even(acc * mult) + zp) with the product in double."""
    info = np.iinfo(t)
    v = np.rint(acc.astype(np.float64) * mult.astype(np.float64)) + np.float64(zp)
    return np.clip(v, info.min, info.max).astype(t)


def multiplier(a_scale, b_scale, y_scale):
    return (np.float32(a_scale) * b_scale.astype(f32) / np.float32(y_scale)).astype(f32)


# ---- MatMulInteger ----
types = [(np.uint8, np.int8), (np.uint8, np.uint8), (np.int8, np.int8), (np.int8, np.uint8)]
shapes = [(1, 1, 1), (1, 5, 16), (2, 3, 17), (3, 4, 33), (4, 8, 47), (5, 64, 48), (7, 67, 49),
          (8, 13, 96), (9, 300, 97), (17, 129, 15), (33, 31, 130)]
for i, (m, k, n) in enumerate(shapes):
    ta, tb = types[i % len(types)]
    a, b = q((m, k), ta), q((k, n), tb)
    per_row, per_col = i % 3 == 1, i % 2 == 1
    azp, bzp = zp_value(ta, per_row, m), zp_value(tb, per_col, n)
    y = matmul_ref(a, b, azp, bzp).astype(np.int32)
    name = f"mmi_{m}x{k}x{n}_{np.dtype(ta).name}_{np.dtype(tb).name}"
    # Odd cases: B constant (packed at session creation); even ones: B fed at run time.
    if i % 2:
        c.node(name + "_const_b", "MatMulInteger", {"a": a},
               initializers={"b": b, "azp": azp, "bzp": bzp}, opset=10, expected={"y": y})
    else:
        c.node(name, "MatMulInteger", {"a": a, "b": b}, initializers={"azp": azp, "bzp": bzp},
               opset=10, expected={"y": y})
# No zero points at all; batched A with a shared B (rows folded); batched B.
a, b = q((2, 3, 20), np.uint8), q((20, 18), np.int8)
c.node("mmi_batched_a_no_zp", "MatMulInteger", {"a": a, "b": b}, opset=10,
       expected={"y": matmul_ref(a, b, 0, 0).astype(np.int32)})
a, b = q((3, 1, 5, 9), np.int8), q((4, 9, 19), np.int8)
azp, bzp = np.array(-7, np.int8), zp_value(np.int8, True, 19)
c.node("mmi_batch_broadcast", "MatMulInteger", {"a": a, "b": b},
       initializers={"azp": azp, "bzp": bzp}, opset=10,
       expected={"y": matmul_ref(a, b, azp, bzp).astype(np.int32)})
# Per-row a_zero_point with A's batch dims folded into the rows.
a, b, azp = q((2, 5, 12), np.uint8), q((12, 7), np.uint8), zp_value(np.uint8, True, 5)
c.node("mmi_per_row_batched", "MatMulInteger", {"a": a}, initializers={"b": b, "azp": azp},
       opset=10, expected={"y": matmul_ref(a, b, azp, 0).astype(np.int32)})
# The extremes: every product at its largest magnitude, a long depth.
a, b = np.full((3, 1000), 255, np.uint8), np.full((1000, 20), -128, np.int8)
c.node("mmi_extreme_u8_s8", "MatMulInteger", {"a": a, "b": b}, opset=10,
       expected={"y": matmul_ref(a, b, 0, 0).astype(np.int32)})
a, b = np.full((2, 513), -128, np.int8), np.full((513, 17), -128, np.int8)
c.node("mmi_extreme_s8_s8", "MatMulInteger", {"a": a, "b": b}, opset=10,
       expected={"y": matmul_ref(a, b, 0, 0).astype(np.int32)})

# An empty depth: every product is the empty sum (fuzz_run: the kernel divided by k = 0 for two
# empty vectors). onnxruntime 1.32 returns uninitialised values here; the spec's arithmetic is
# zeros (for QLinearMatMul, y's zero point).
a, b = np.zeros(0, np.uint8), np.zeros(0, np.uint8)
c.node("mmi_empty_vectors", "MatMulInteger", {"a": a, "b": b}, opset=10,
       expected={"y": np.array(0, np.int32)})
a, b = np.zeros((2, 0), np.uint8), np.zeros((0, 3), np.int8)
c.node("mmi_empty_depth_zero_points", "MatMulInteger", {"a": a, "b": b},
       initializers={"azp": np.array(3, np.uint8), "bzp": np.array(5, np.int8)}, opset=10,
       expected={"y": np.zeros((2, 3), np.int32)})
a, b = np.zeros((2, 2, 0), np.int8), np.zeros((0, 3), np.int8)
c.node("mmi_empty_depth_batched", "MatMulInteger", {"a": a, "b": b}, opset=10,
       expected={"y": np.zeros((2, 2, 3), np.int32)})
c.node("qmm_empty_depth", "QLinearMatMul", {"a": np.zeros((2, 0), np.uint8)},
       initializers={"as": np.array(0.1, f32), "az": np.array(3, np.uint8),
                     "b": np.zeros((0, 3), np.uint8), "bs": np.array(0.2, f32),
                     "bz": np.array(4, np.uint8), "ys": np.array(0.5, f32),
                     "yz": np.array(7, np.uint8)},
       opset=10, expected={"y": np.full((2, 3), 7, np.uint8)})

# ---- QLinearMatMul ----
for i, (m, k, n) in enumerate(shapes[::2] + [(6, 40, 50)]):
    ta, tb = types[i % len(types)]
    ty = np.int8 if i % 2 else np.uint8
    a, b = q((m, k), ta), q((k, n), tb)
    azp, yzp = zp_value(ta, False, 1), zp_value(ty, False, 1)
    per_col = i % 2 == 0
    bzp = zp_value(tb, per_col, n)
    a_s, y_s = np.array(0.02, f32), np.array(0.9 if i % 3 else 6.0, f32)  # 6.0: little saturation
    b_s = (np.linspace(0.005, 0.04, n).astype(f32) if per_col else np.array(0.025, f32))
    acc = matmul_ref(a, b, azp, bzp)
    y = requant(acc, multiplier(a_s, b_s, y_s), yzp, ty)
    inputs = {"a": a, "as": a_s, "az": azp}
    consts = {"b": b, "bs": b_s, "bz": bzp, "ys": y_s, "yz": yzp}
    c.node(f"qmm_{m}x{k}x{n}", "QLinearMatMul", inputs, initializers=consts, opset=10,
           expected={"y": y})
# Saturation at both ends: a multiplier far too large.
a, b = q((5, 33), np.uint8), q((33, 21), np.int8)
azp, bzp, yzp = np.array(128, np.uint8), np.array(0, np.int8), np.array(10, np.uint8)
y = requant(matmul_ref(a, b, azp, bzp), multiplier(f32(1), np.array(1, f32), f32(0.5)), yzp,
            np.uint8)
c.node("qmm_saturate", "QLinearMatMul",
       {"a": a, "as": np.array(1, f32), "az": azp, "b": b, "bs": np.array(1, f32), "bz": bzp,
        "ys": np.array(0.5, f32), "yz": yzp}, opset=10, expected={"y": y})
# A NaN scale (fuzz_run, on the AVX2 path's scalar store: converting NaN to int was undefined
# behaviour): every output saturates low, as the vector stores' max/min give it.
for yt, low in ((np.uint8, 0), (np.int8, -128)):
    a_n, b_n = randint(3, 5, low=0, high=255, dtype=np.uint8), randint(5, 4, low=0, high=255,
                                                                        dtype=np.uint8)
    c.node(f"qmm_nan_scale_{np.dtype(yt).name}", "QLinearMatMul",
           {"a": a_n, "as": np.array(np.nan, f32), "az": np.array(3, np.uint8), "b": b_n,
            "bs": np.array(0.5, f32), "bz": np.array(9, np.uint8), "ys": np.array(0.25, f32),
            "yz": np.array(7, yt)}, opset=10, expected={"y": np.full((3, 4), low, yt)})

# ---- ConvInteger / QLinearConv ----


def conv_ref(x, w, xzp, wzp, group=1, stride=1, pad=0, dilation=1):
    """Direct 2-D convolution of (x - xzp) and (w - wzp[m]) in int64."""
    xs = x.astype(np.int64) - np.int64(xzp)
    ws = w.astype(np.int64) - (wzp.astype(np.int64)[:, None, None, None] if np.ndim(wzp) == 1
                               else np.int64(wzp))
    xs = np.pad(xs, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, cin, h, wd = xs.shape
    m, cg, kh, kw = ws.shape
    mg = m // group
    oh = (h - (kh - 1) * dilation - 1) // stride + 1
    ow = (wd - (kw - 1) * dilation - 1) // stride + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    for g in range(group):
        xg = xs[:, g * cg:(g + 1) * cg]
        wg = ws[g * mg:(g + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dilation:i * dilation + (oh - 1) * stride + 1:stride,
                           j * dilation:j * dilation + (ow - 1) * stride + 1:stride]
                out[:, g * mg:(g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    return out


conv_shapes = [  # (n, c_in, h, w, c_out, k, group, stride, pad, dilation)
    (1, 1, 5, 5, 1, 3, 1, 1, 1, 1),
    (1, 3, 9, 7, 5, 3, 1, 1, 1, 1),
    (2, 4, 8, 8, 17, 1, 1, 1, 0, 1),     # pointwise: the input planes read as they are
    (1, 5, 11, 10, 9, 3, 1, 2, 1, 1),
    (1, 8, 7, 9, 8, 3, 8, 1, 1, 1),      # depthwise
    (1, 6, 10, 10, 12, 3, 3, 1, 2, 2),   # groups, dilation
    (1, 16, 13, 13, 33, 3, 1, 1, 1, 1),
    (1, 3, 20, 19, 48, 5, 1, 2, 2, 1),
    # Maps large enough for chunks of output rows per thread (conv_integer.cpp), the chunks a
    # whole number of 16-position panels (width 37: 16 rows) or not (the last one).
    (1, 32, 70, 37, 5, 3, 1, 1, 1, 1),
    (1, 8, 64, 64, 16, 3, 1, 1, 1, 1),
    (1, 40, 96, 96, 7, 1, 1, 1, 0, 1),   # pointwise, chunked
    # depthwise (the direct loop): strided and dilated, every operand type pair
    (2, 6, 11, 10, 6, 3, 6, 2, 1, 2),
    (1, 5, 9, 8, 5, 5, 5, 2, 2, 1),
    (1, 4, 7, 7, 4, 3, 4, 1, 0, 1),
    (1, 3, 6, 9, 3, 3, 3, 3, 1, 1),
    # Unfolded straight into the panels (stride 1 along the width, AVX-512): one input row, so
    # two of the three kernel rows read only padding; an odd width of 5 (up to four runs of
    # output rows in a panel); a map chunked by output rows
    (1, 7, 1, 40, 9, 3, 1, 1, 1, 1),
    (2, 9, 6, 5, 10, 3, 1, 1, 1, 1),
    (1, 24, 40, 45, 16, 3, 1, 1, 1, 1),
    # depthwise 5x5 of stride 1 (the AVX-512 plane kernel's generic width), both input types
    (1, 6, 9, 20, 6, 5, 6, 1, 2, 1),
    (1, 6, 9, 20, 6, 5, 6, 1, 2, 1),
]
for i, (n, cin, h, wd, m, k, group, stride, pad, dil) in enumerate(conv_shapes):
    tx, tw = types[i % len(types)]
    x, w = q((n, cin, h, wd), tx), q((m, cin // group, k, k), tw)
    xzp, wzp = zp_value(tx, False, 1), zp_value(tw, i % 2 == 1, m)
    attrs = dict(group=group, strides=[stride, stride], pads=[pad] * 4, dilations=[dil, dil])
    acc = conv_ref(x, w, xzp, wzp, group, stride, pad, dil)
    name = f"convi_{i}_{np.dtype(tx).name}_{np.dtype(tw).name}"
    consts = {"w": w, "xzp": xzp, "wzp": wzp}
    c.node(name, "ConvInteger", {"x": x}, initializers=consts, opset=10,
           expected={"y": acc.astype(np.int32)}, **attrs)
    ty = np.int8 if i % 2 else np.uint8
    yzp = zp_value(ty, False, 1)
    xs, ys = np.array(0.03, f32), np.array(0.5 if i % 3 else 4.0, f32)
    ws = np.linspace(0.01, 0.03, m).astype(f32) if i % 2 else np.array(0.02, f32)
    bias = randint(m, low=-5000, high=5000, dtype=np.int32)
    y = requant(acc + bias.astype(np.int64)[None, :, None, None],
                np.broadcast_to(multiplier(xs, np.atleast_1d(ws), ys), (m,))[None, :, None, None],
                yzp, ty)
    c.node(f"qconv_{i}_{np.dtype(tx).name}_{np.dtype(tw).name}", "QLinearConv",
           {"x": x, "xs": xs, "xz": xzp},
           initializers={"w": w, "ws": ws, "wz": wzp, "ys": ys, "yz": yzp, "b": bias}, opset=10,
           expected={"y": y}, **attrs)
# Runtime (non-constant) weights: packed on every run.
x, w = q((1, 4, 6, 6), np.uint8), q((6, 4, 3, 3), np.int8)
c.node("convi_runtime_w", "ConvInteger", {"x": x, "w": w},
       initializers={"xzp": np.array(9, np.uint8)}, opset=10, pads=[1, 1, 1, 1],
       expected={"y": conv_ref(x, w, 9, 0, pad=1).astype(np.int32)})
