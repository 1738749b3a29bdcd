"""Cases of the loss op family: SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss, Hardmax, LRN,
CumProd, EyeLike, ReverseSequence, Compress.

Expected values come from onnxruntime. Where a case also has a numpy reference below, that
reference is checked against onnxruntime when onnxruntime runs the case, and used alone where it
cannot: an op, dtype or rank onnxruntime has no kernel for (1.23 had no CumProd, float64
Hardmax/LRN, LRN outside 4-D or EyeLike for most dtypes; 1.32 has CumProd).
"""
import shutil

import numpy as np
from onnx import TensorProto, numpy_helper

from casegen import Cases, rand, randint

c = Cases("loss")


def case(name, op_type, inputs, ref=None, n_outputs=1, initializers=None, opset=17, rtol=1e-4,
         atol=1e-5, ort=True, **attrs):
    """One-node case. ref: the numpy answer (a list of outputs), checked against onnxruntime
    when it has a kernel and used as the expected values when it has not (or ort=False)."""
    outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
    expected = None
    if ref is not None:
        expected = dict(zip(outs, ref))
        try:
            if not ort:
                raise RuntimeError("onnxruntime's answer is not wanted here")
            c.node(name, op_type, inputs, n_outputs, initializers, opset, rtol, atol, **attrs)
            ort_ok = True
        except Exception:  # noqa: BLE001 - onnxruntime lacks this op/dtype/opset
            ort_ok = False
        if ort_ok:
            got = load_expected(name, len(outs))
            for o, want in zip(got, ref):
                np.testing.assert_allclose(np.asarray(o, np.float64), np.asarray(want, np.float64),
                                           rtol=max(rtol, 1e-3), atol=max(atol, 1e-3),
                                           err_msg=f"{name}: numpy reference disagrees with ORT")
            return
        shutil.rmtree(c.dir / name, ignore_errors=True)
        c.names.discard(name)
    c.node(name, op_type, inputs, n_outputs, initializers, opset, rtol, atol, expected=expected,
           **attrs)


def load_expected(name, n):
    """The outputs onnxruntime wrote for case `name`."""
    out = []
    for i in range(n):
        t = TensorProto()
        t.ParseFromString((c.dir / name / "test_data_set_0" / f"output_{i}.pb").read_bytes())
        out.append(numpy_helper.to_array(t))
    return out


# ---- SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss ----

def nll_ref(lp, target, weight=None, reduction="mean", ignore_index=None):
    """Spec semantics, as onnxruntime: ignored targets weigh 0, a mean divides by the weights."""
    n, cls = lp.shape[:2]
    lp3 = lp.reshape(n, cls, -1).astype(np.float64)
    t2 = target.reshape(n, -1).astype(np.int64)
    keep = np.ones_like(t2, bool) if ignore_index is None else t2 != ignore_index
    safe = np.where(keep, t2, 0)
    picked = np.take_along_axis(lp3, safe[:, None, :], axis=1)[:, 0, :]
    w = np.ones(cls) if weight is None else weight.astype(np.float64)
    wt = np.where(keep, w[safe], 0.0)
    loss = -picked * wt
    if reduction == "none":
        return loss.reshape(target.shape).astype(lp.dtype)
    if reduction == "sum":
        return np.array(loss.sum(), lp.dtype)
    return np.array(loss.sum() / wt.sum(), lp.dtype)


def log_softmax(x):
    x64 = x.astype(np.float64)
    m = x64.max(axis=1, keepdims=True)
    return x64 - m - np.log(np.exp(x64 - m).sum(axis=1, keepdims=True))


def targets(shape, cls, ignore=None, dtype=np.int64):
    t = randint(*shape, low=0, high=cls, dtype=dtype)
    if ignore is not None:
        t.flat[::3] = ignore  # every third element ignored
    return t


def losses(prefix, shape, reduction, weighted=False, ignore=None, tdtype=np.int64,
           dtype=np.float32, opsets=(13,), log_prob=False, rtol=1e-4, atol=1e-5):
    x = rand(*shape).astype(dtype) * 3
    t = targets((shape[0],) + shape[2:], shape[1], ignore, tdtype)
    inputs = {"x": x, "t": t}
    w = None
    if weighted:
        w = rand(shape[1], low=0.1, high=2.0).astype(dtype)
        inputs["w"] = w
    attrs = {"reduction": reduction}
    if ignore is not None:
        attrs["ignore_index"] = ignore
    lp = log_softmax(x)
    sce_ref = [nll_ref(lp.astype(dtype) if dtype != np.float16 else lp, t, w, reduction, ignore)]
    if log_prob:
        sce_ref.append(lp.astype(dtype))
    for opset in opsets:
        sfx = f"{prefix}_{reduction}_o{opset}"
        case(f"sce_{sfx}", "SoftmaxCrossEntropyLoss", inputs, [r.astype(dtype) for r in sce_ref],
             n_outputs=2 if log_prob else 1, opset=opset, rtol=rtol, atol=atol, **attrs)
        if not log_prob:
            lpx = lp.astype(dtype)
            case(f"nll_{sfx}", "NegativeLogLikelihoodLoss", {**inputs, "x": lpx},
                 [nll_ref(lpx, t, w, reduction, ignore)], opset=opset, rtol=rtol, atol=atol,
                 **attrs)


for red in ["none", "sum", "mean"]:
    losses("2d", (5, 4), red, opsets=(12, 13))
    losses("2d_w", (6, 3), red, weighted=True)
    losses("3d", (3, 5, 4), red)
    losses("3d_w_ii", (3, 5, 4), red, weighted=True, ignore=2)
    losses("4d_ii", (2, 3, 4, 5), red, ignore=1, log_prob=True)
    losses("5d_w", (2, 4, 3, 1, 2), red, weighted=True, log_prob=True)
    losses("neg_ii", (4, 3, 5), red, ignore=-1)
    losses("high_ii_w", (4, 3, 5), red, weighted=True, ignore=10)
    losses("i32", (4, 6, 3), red, ignore=0, tdtype=np.int32, log_prob=True)
    losses("f64_w", (3, 4, 5), red, weighted=True, ignore=3, dtype=np.float64)
    losses("f16", (3, 4, 5), red, dtype=np.float16, rtol=5e-3, atol=5e-3)
losses("f16_w_logp", (4, 5, 3), "mean", weighted=True, dtype=np.float16, log_prob=True,
       rtol=5e-3, atol=5e-3)
losses("odd", (7, 11, 13), "mean", weighted=True, ignore=5, log_prob=True)
losses("large", (4, 10, 64, 65), "mean", ignore=2, rtol=1e-4, atol=1e-4)
losses("large_none", (4, 10, 64, 65), "none", weighted=True)
losses("nll22", (3, 4, 5), "mean", weighted=True, ignore=1, opsets=(22,))

# ---- Hardmax ----

def hardmax_ref(x, axis, opset):
    if opset < 13:  # coerced to 2-D at axis
        axis = axis % x.ndim if axis < 0 else axis
        flat = x.reshape(int(np.prod(x.shape[:axis])), -1)
        return hardmax_ref(flat, 1, 13).reshape(x.shape)
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    y = np.zeros_like(x)
    np.put_along_axis(y, idx, 1, axis=axis)
    return y


for opset in (11, 13):
    x = rand(2, 3, 4)
    for axis in (0, 1, 2, -1, -2):
        case(f"hardmax_axis{axis}_o{opset}", "Hardmax", {"x": x}, [hardmax_ref(x, axis, opset)],
             opset=opset, axis=axis)
    default_axis = 1 if opset < 13 else -1
    case(f"hardmax_default_o{opset}", "Hardmax", {"x": x}, [hardmax_ref(x, default_axis, opset)],
         opset=opset)
ties = np.array([[1, 3, 3, 2], [5, 5, 5, 5], [-1, -2, -1, -3]], np.float32)
case("hardmax_ties", "Hardmax", {"x": ties}, [hardmax_ref(ties, -1, 13)], opset=13)
case("hardmax_ties_axis0", "Hardmax", {"x": ties}, [hardmax_ref(ties, 0, 13)], opset=13, axis=0)
case("hardmax_1d", "Hardmax", {"x": rand(7)}, opset=13)
x = rand(3, 5, 6)
case("hardmax_f64", "Hardmax", {"x": x.astype(np.float64)},
     [hardmax_ref(x.astype(np.float64), 1, 13)], opset=13, axis=1)
case("hardmax_f16", "Hardmax", {"x": x.astype(np.float16)},
     [hardmax_ref(x.astype(np.float16), 1, 13)], opset=13, axis=1)
case("hardmax_f16_o11", "Hardmax", {"x": x.astype(np.float16)},
     [hardmax_ref(x.astype(np.float16), 1, 11)], opset=11)
x = rand(8, 300, 40)
case("hardmax_large_axis1", "Hardmax", {"x": x}, [hardmax_ref(x, 1, 13)], opset=13, axis=1)
case("hardmax_large_last", "Hardmax", {"x": x}, [hardmax_ref(x, -1, 13)], opset=13)
case("hardmax_empty", "Hardmax", {"x": rand(0, 4)}, [np.zeros((0, 4), np.float32)], opset=13)

# ---- LRN ----

def lrn_ref(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    x64 = x.astype(np.float64)
    sq = np.zeros_like(x64)
    ch = x.shape[1]
    lo, hi = (size - 1) // 2, (size - 1) - (size - 1) // 2
    for k in range(ch):
        sq[:, k] = (x64[:, max(0, k - lo):min(ch, k + hi + 1)] ** 2).sum(axis=1)
    return (x64 / (bias + alpha / size * sq) ** beta).astype(x.dtype)


x = rand(2, 7, 5, 4) * 4
for size in (1, 2, 3, 4, 5, 9):
    case(f"lrn_size{size}", "LRN", {"x": x}, [lrn_ref(x, size)], size=size)
case("lrn_attrs", "LRN", {"x": x}, [lrn_ref(x, 3, 0.5, 0.6, 2.0)], size=3, alpha=0.5, beta=0.6,
     bias=2.0)
case("lrn_opset1", "LRN", {"x": x}, [lrn_ref(x, 3, 0.02)], opset=1, size=3, alpha=0.02)
case("lrn_f64", "LRN", {"x": x.astype(np.float64)}, [lrn_ref(x.astype(np.float64), 5, 0.1)],
     size=5, alpha=0.1)
case("lrn_f16", "LRN", {"x": x.astype(np.float16)}, [lrn_ref(x.astype(np.float16), 3, 0.1)],
     size=3, alpha=0.1, rtol=2e-3, atol=2e-3)
x3 = rand(2, 6, 9) * 3
case("lrn_3d", "LRN", {"x": x3}, [lrn_ref(x3, 3, 0.3)], size=3, alpha=0.3)
x5 = rand(1, 5, 3, 2, 4) * 3
case("lrn_5d", "LRN", {"x": x5}, [lrn_ref(x5, 4, 0.3)], size=4, alpha=0.3)
xl = rand(2, 16, 64, 64) * 3
case("lrn_large", "LRN", {"x": xl}, [lrn_ref(xl, 5, 0.01)], size=5, alpha=0.01)
# A window wider than the channels covers them all; only alpha / size still sees the size.
big = 2**62 + 1
lrn_huge = (x.astype(np.float64) / (1 + 0.5 / big * (x.astype(np.float64) ** 2).sum(axis=1, keepdims=True)) ** 0.75).astype(np.float32)
case("lrn_huge_size", "LRN", {"x": x}, [lrn_huge], ort=False, size=big, alpha=0.5)

# ---- CumProd (opset 26) ----

def cumprod_ref(x, axis, exclusive=0, reverse=0):
    y = np.flip(x, axis) if reverse else x
    if exclusive:
        ones = np.ones_like(np.take(y, [0], axis=axis))
        y = np.concatenate([ones, np.take(y, range(y.shape[axis] - 1), axis=axis)], axis=axis)
    y = np.cumprod(y, axis=axis, dtype=x.dtype)
    return np.flip(y, axis) if reverse else y


def cumprod(name, x, axis, axis_dtype=np.int64, rtol=1e-4, atol=1e-5, **attrs):
    case(name, "CumProd", {"x": x}, [cumprod_ref(x, axis, **attrs)],
         initializers={"axis": np.array(axis, axis_dtype)}, opset=26, rtol=rtol, atol=atol, **attrs)


x = rand(3, 4, 5, low=0.5, high=1.5)
for axis in (0, 1, 2, -1, -3):
    for exclusive in (0, 1):
        for reverse in (0, 1):
            cumprod(f"cumprod_axis{axis}_ex{exclusive}_rev{reverse}", x, axis,
                    exclusive=exclusive, reverse=reverse)
cumprod("cumprod_axis_i32", x, 1, axis_dtype=np.int32)
cumprod("cumprod_1d", rand(9, low=0.5, high=1.5), 0)
cumprod("cumprod_f64", x.astype(np.float64), 1, exclusive=1)
# onnxruntime 1.32 (the first with CumProd) rounds float16 products differently from the
# step-by-step float16 product (numpy, Quilt): 1.2119 against 1.2109 at [2, 1, 0], one float16 ulp
# (2^-10); rtol 2e-3 allows one ulp, as lrn_f16 does.
cumprod("cumprod_f16", x.astype(np.float16), 2, reverse=1, rtol=2e-3, atol=2e-3)
xi = randint(3, 6, low=-3, high=4)
for dt in (np.int32, np.int64, np.uint32, np.uint64):
    v = np.abs(xi).astype(dt) if np.issubdtype(dt, np.unsignedinteger) else xi.astype(dt)
    cumprod(f"cumprod_{np.dtype(dt).name}", v, 1, exclusive=1)
    cumprod(f"cumprod_{np.dtype(dt).name}_rev", v, 0, reverse=1)
cumprod("cumprod_i32_wrap", np.full((12,), 1000, np.int32), 0)  # wraps like numpy
cumprod("cumprod_large", rand(16, 64, 70, low=0.9, high=1.1), 1)
cumprod("cumprod_empty_axis", rand(3, 0, 2), 1)

# ---- EyeLike ----

def eye_ref(shape, k, dtype):
    return np.eye(shape[0], shape[1], k, dtype=dtype)


for k in (0, 1, 2, -1, -3, 5, -7):
    case(f"eyelike_k{k}".replace("-", "m"), "EyeLike", {"x": rand(4, 6)},
         [eye_ref((4, 6), k, np.float32)], k=k)
case("eyelike_tall", "EyeLike", {"x": rand(6, 3)}, [eye_ref((6, 3), -1, np.float32)], k=-1)
for dt, code in ((np.float64, 11), (np.float16, 10), (np.int32, 6), (np.int64, 7), (np.uint8, 2),
                 (np.int8, 3), (np.int16, 5), (np.uint16, 4), (np.uint32, 12),
                 (np.uint64, 13), (np.bool_, 9)):
    case(f"eyelike_to_{np.dtype(dt).name}", "EyeLike", {"x": rand(3, 4)},
         [eye_ref((3, 4), 1, dt)], dtype=code, k=1)
    case(f"eyelike_from_{np.dtype(dt).name}", "EyeLike", {"x": np.zeros((4, 4), dt)},
         [eye_ref((4, 4), 0, dt)])
case("eyelike_o9", "EyeLike", {"x": randint(3, 3, dtype=np.int32)},
     [eye_ref((3, 3), 0, np.int32)], opset=9)
case("eyelike_o22", "EyeLike", {"x": rand(3, 5)}, [eye_ref((3, 5), 2, np.float64)], opset=22,
     dtype=11, k=2)
case("eyelike_empty", "EyeLike", {"x": rand(0, 3)}, [eye_ref((0, 3), 0, np.float32)])
# k far outside the matrix: no diagonal (i + k and -k would overflow).
for k in (np.iinfo(np.int64).max, np.iinfo(np.int64).min):
    case(f"eyelike_k_{'max' if k > 0 else 'min'}", "EyeLike", {"x": rand(4, 6)},
         [np.zeros((4, 6), np.float32)], ort=False, k=int(k))

# ---- ReverseSequence ----

def revseq_ref(x, lens, batch_axis=1, time_axis=0):
    y = x.copy()
    for b, n in enumerate(lens):
        if batch_axis == 0:
            y[b, :n] = x[b, :n][::-1]
        else:
            y[:n, b] = x[:n, b][::-1]
    return y


for batch_axis, time_axis in ((1, 0), (0, 1)):
    shape = (5, 4) if time_axis == 0 else (4, 5)
    lens = np.array([5, 2, 3, 1], np.int64)
    x = rand(*shape)
    case(f"revseq_b{batch_axis}t{time_axis}", "ReverseSequence", {"x": x, "lens": lens},
         [revseq_ref(x, lens, batch_axis, time_axis)], batch_axis=batch_axis, time_axis=time_axis)
    # A length of 0 leaves the sequence as it is. onnxruntime 1.23 wrote uninitialised memory
    # there (so numpy's answer was used alone); 1.32 gets it right and is checked against numpy.
    # onnx's reference raises.
    zero = np.array([5, 0, 3, 0], np.int64)
    case(f"revseq_len0_b{batch_axis}t{time_axis}", "ReverseSequence", {"x": x, "lens": zero},
         [revseq_ref(x, zero, batch_axis, time_axis)], batch_axis=batch_axis,
         time_axis=time_axis)
    x = rand(*shape, 3, 2)
    case(f"revseq_4d_b{batch_axis}t{time_axis}", "ReverseSequence", {"x": x, "lens": lens},
         [revseq_ref(x, lens, batch_axis, time_axis)], batch_axis=batch_axis, time_axis=time_axis)
x = randint(6, 3, 2, low=-100, high=100)
lens = np.array([2, 6, 4], np.int64)
case("revseq_default_axes_i64", "ReverseSequence", {"x": x, "lens": lens}, [revseq_ref(x, lens)])
for dt in (np.int32, np.uint8, np.float64, np.float16, np.bool_, np.int8):
    v = (x > 0) if dt == np.bool_ else x.astype(dt)
    case(f"revseq_{np.dtype(dt).name}", "ReverseSequence", {"x": v, "lens": lens},
         [revseq_ref(v, lens)])
x = rand(3, 4, 2)
lens = np.array([3, 1, 2], np.int64)
case("revseq_lens_const", "ReverseSequence", {"x": x}, [revseq_ref(x, lens, 0, 1)],
     initializers={"lens": lens}, batch_axis=0, time_axis=1)
xl = rand(50, 64, 33)
ll = randint(64, low=1, high=51)
case("revseq_large", "ReverseSequence", {"x": xl, "lens": ll}, [revseq_ref(xl, ll)])

# ---- Compress ----

def compress(name, x, cond, axis=None, opset=11, const=False):
    ref = [np.compress(cond, x, axis=axis)]
    attrs = {} if axis is None else {"axis": axis}
    if const:
        case(name, "Compress", {"x": x}, ref, initializers={"cond": cond}, opset=opset, **attrs)
    else:
        case(name, "Compress", {"x": x, "cond": cond}, ref, opset=opset, **attrs)


x = rand(3, 4, 5)
compress("compress_axis0", x, np.array([1, 0, 1], bool), 0)
compress("compress_axis1", x, np.array([0, 1, 1, 0], bool), 1)
compress("compress_axis2", x, np.array([1, 0, 0, 1, 1], bool), 2)
compress("compress_axis_neg1", x, np.array([1, 0, 0, 1, 1], bool), -1)
compress("compress_axis_neg3", x, np.array([0, 1, 1], bool), -3)
compress("compress_short_cond", x, np.array([0, 1], bool), 1)
compress("compress_all_false", x, np.array([0, 0, 0, 0], bool), 1)
compress("compress_all_true", x, np.array([1, 1, 1, 1], bool), 1)
compress("compress_flat", x, np.array([1, 0, 1, 1, 0, 0, 1] * 5, bool))
compress("compress_flat_short", x, np.array([0, 1, 1], bool))
compress("compress_const_cond", x, np.array([1, 0, 1, 1], bool), 1, const=True)
compress("compress_opset9", x, np.array([1, 0, 1], bool), 0, opset=9)
compress("compress_int64", randint(4, 3), np.array([1, 1, 0], bool), 1)
compress("compress_bool", rand(4, 3) > 0, np.array([1, 0, 1, 1], bool), 0)
compress("compress_f16", rand(4, 3).astype(np.float16), np.array([0, 1, 1], bool), -1)
compress("compress_u8_flat", randint(2, 5, dtype=np.uint8), np.array([1, 0, 1] * 3, bool))
compress("compress_large", rand(64, 100, 40), randint(100, low=0, high=2) == 1, 1)
