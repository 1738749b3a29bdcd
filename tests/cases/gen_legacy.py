"""Cases for the legacy (opset 1-6) semantics of Add, Sub, Mul, Div, Pow (the `broadcast` and
`axis` attributes instead of numpy broadcasting), PRelu (a per-channel slope) and
BatchNormalization (`is_test`). onnxruntime has no kernels before opset 7, so the expected
values are computed here with numpy from the old spec's rules."""
import numpy as np

from casegen import Cases, rand, randint

cases = Cases("legacy")


def legacy_b(a, b, axis=None):
    """B reshaped so that numpy broadcasting aligns it with A at `axis` (default: suffix)."""
    if b.size == 1:
        return b.reshape(())
    axis = a.ndim - b.ndim if axis is None else axis
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def binary(name, op, fn, a, b, opset=6, axis=None, broadcast=1, rtol=1e-4, atol=1e-5, **attrs):
    if broadcast:
        attrs["broadcast"] = 1
    if axis is not None:
        attrs["axis"] = axis
    y = fn(a, legacy_b(a, b, axis)) if broadcast else fn(a, b)
    cases.node(name, op, {"a": a, "b": b}, opset=opset, rtol=rtol, atol=atol,
               expected={"y": np.asarray(y).astype(a.dtype)}, **attrs)


# Add/Sub/Mul/Div at opset 6: every shape form of the spec's examples.
A = rand(2, 3, 4, 5)
binary("add_bcast_scalar", "Add", np.add, A, np.array(0.5, np.float32))
binary("sub_bcast_one_element", "Sub", np.subtract, A, rand(1, 1))
binary("mul_bcast_suffix_1d", "Mul", np.multiply, A, rand(5))
binary("div_bcast_suffix_2d", "Div", np.divide, A, rand(4, 5, low=0.5, high=2.0))
binary("add_bcast_axis1", "Add", np.add, A, rand(3, 4), axis=1)
binary("sub_bcast_axis0", "Sub", np.subtract, A, rand(2), axis=0)
binary("mul_bcast_axis2", "Mul", np.multiply, A, rand(4), axis=2)
binary("add_bcast_axis_equal_rank", "Add", np.add, A, rand(2, 3, 4, 5), axis=0)
# Leading and trailing 1s of B expand (pytorch's size1 broadcast exports).
binary("add_bcast_trailing_one", "Add", np.add, rand(2, 3), rand(2, 1), axis=0)
binary("add_bcast_leading_one", "Add", np.add, rand(2, 3), rand(1, 3), axis=0)
binary("mul_bcast_ones_around", "Mul", np.multiply, A, rand(1, 3, 4, 1), axis=0)
# broadcast = 0 (the default): equal shapes.
binary("add_no_bcast", "Add", np.add, rand(3, 4), rand(3, 4), broadcast=0)
binary("div_no_bcast", "Div", np.divide, rand(3, 4), rand(3, 4, low=0.5, high=2.0), broadcast=0)
# Opsets 1-5: consumed_inputs is an in-place hint and is ignored.
binary("add_opset1_consumed_inputs", "Add", np.add, A, rand(3), axis=1, opset=1,
       consumed_inputs=[0, 0])
binary("mul_opset5", "Mul", np.multiply, rand(3, 4), rand(4), opset=5)
# Integer and float16 types (Add-6 allows int32/int64/uint32/uint64).
binary("add_int32_bcast_axis", "Add", np.add, randint(2, 3, 4, dtype=np.int32),
       randint(3, dtype=np.int32), axis=1)
binary("div_int64_bcast", "Div", lambda a, b: np.trunc(a / b).astype(np.int64),
       randint(2, 3, low=-20, high=20), randint(3, low=1, high=5))
binary("mul_float16_bcast_axis", "Mul", lambda a, b: (a.astype(np.float32) * b).astype(np.float16),
       rand(2, 3, 4, dtype=np.float16), rand(3, dtype=np.float16), axis=1, rtol=1e-3, atol=1e-3)
binary("add_float64_bcast", "Add", np.add, rand(2, 3, dtype=np.float64),
       np.array(1.0, np.float64))

# Pow (version 1 serves opsets 1-6).
P = rand(2, 3, 4, low=0.5, high=2.0)
binary("pow_no_bcast", "Pow", np.power, P, rand(2, 3, 4), broadcast=0)
binary("pow_bcast_axis1", "Pow", np.power, P, rand(3, low=-2, high=3), axis=1)
binary("pow_bcast_scalar", "Pow", np.power, P, np.array(2.0, np.float32))


# PRelu before opset 7: one slope, or one per channel.
def prelu(name, x, slope, opset=6, **attrs):
    s = slope.reshape(()) if slope.size == 1 else slope.reshape((-1,) + (1,) * (x.ndim - 2))
    cases.node(name, "PRelu", {"x": x, "slope": slope}, opset=opset,
               expected={"y": np.where(x < 0, x * s, x).astype(x.dtype)}, **attrs)


prelu("prelu_per_channel_3d", rand(2, 3, 4), rand(3))
prelu("prelu_per_channel_4d", rand(2, 3, 4, 5), rand(3))
prelu("prelu_per_channel_2d", rand(4, 3), rand(3))
prelu("prelu_shared", rand(2, 3, 4, 5), rand(1))
prelu("prelu_opset1", rand(2, 4, 3), rand(4), opset=1, consumed_inputs=[0])


# BatchNormalization before opset 7 (inference: is_test = 1).
def batch_norm(name, shape, opset=6, epsilon=1e-5, **attrs):
    c = shape[1]
    x = rand(*shape)
    scale, bias, mean = rand(c), rand(c), rand(c)
    var = rand(c, low=0.1, high=2.0)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    y = (x - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + epsilon) * \
        scale.reshape(bshape) + bias.reshape(bshape)
    cases.node(name, "BatchNormalization", {"x": x, "scale": scale, "b": bias, "mean": mean,
                                            "var": var},
               opset=opset, expected={"y": y.astype(np.float32)}, is_test=1, epsilon=epsilon,
               **attrs)


batch_norm("batch_norm_4d", (2, 3, 4, 5))
batch_norm("batch_norm_3d_momentum", (4, 5, 3), epsilon=1e-3, momentum=0.2)
batch_norm("batch_norm_5d_spatial", (2, 3, 2, 3, 2), spatial=1)
batch_norm("batch_norm_opset1", (2, 3, 4, 4), opset=1, consumed_inputs=[0, 0, 0, 1, 1])
