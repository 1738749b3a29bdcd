"""Ops in training mode that Quilt runs: Dropout with training_mode true (a random mask, so
checked against its definition, not against fixed values) and the low-precision types through
quilt's numpy boundary."""
import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import quilt


def dropout_model(seed=None, mask=True, opset=22):
    attrs = {} if seed is None else {"seed": seed}
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "z"] if mask else ["y"], name="d",
                            **attrs)
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if mask:
        outputs.append(helper.make_tensor_value_info("z", TensorProto.BOOL, None))
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [40, 50]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("t", TensorProto.BOOL, [])], outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString()


def feeds(ratio, training=True):
    x = np.random.default_rng(0).uniform(-2, 2, (40, 50)).astype(np.float32)
    return {"x": x, "r": np.array(ratio, np.float32), "t": np.array(training)}


@pytest.mark.parametrize("ratio", [0.1, 0.5, 0.9])
def test_training_dropout_scales_the_kept_elements_and_drops_the_rest(ratio):
    f = feeds(ratio)
    out = quilt.Session(dropout_model(seed=3)).run(f)
    y, z = out["y"], out["z"]
    assert z.dtype == np.bool_ and z.shape == f["x"].shape
    np.testing.assert_allclose(y, np.where(z, f["x"] / (1 - ratio), 0), rtol=1e-6)
    kept = z.mean()  # 2000 draws: within 5 standard deviations of 1 - ratio
    assert abs(kept - (1 - ratio)) < 5 * np.sqrt(ratio * (1 - ratio) / z.size), kept


def test_training_dropout_seed_gives_the_same_mask_and_no_seed_differs():
    f = feeds(0.5)
    a = quilt.Session(dropout_model(seed=7)).run(f)["z"]
    b = quilt.Session(dropout_model(seed=7)).run(f)["z"]
    np.testing.assert_array_equal(a, b)
    unseeded = quilt.Session(dropout_model())
    assert not np.array_equal(unseeded.run(f)["z"], unseeded.run(f)["z"])


def test_dropout_with_training_false_or_ratio_0_is_the_identity():
    for f in (feeds(0.5, training=False), feeds(0.0)):
        out = quilt.Session(dropout_model(seed=1)).run(f)
        y, z = out["y"], out["z"]
        np.testing.assert_array_equal(y, f["x"])
        assert z.all()


def test_training_dropout_ratio_1_is_an_error_naming_the_node():
    with pytest.raises(quilt.Error) as e:
        quilt.Session(dropout_model(seed=1, mask=False)).run(feeds(1.0))
    assert '"d"' in str(e.value) and "ratio is 1" in str(e.value) and "[0, 1)" in str(e.value)


@pytest.mark.parametrize("elem,np_type,values", [
    (TensorProto.INT2, ml_dtypes.int2, [-2, -1, 0, 1, 1, -2, 0]),
    (TensorProto.UINT2, ml_dtypes.uint2, [0, 1, 2, 3, 3, 2, 1]),
    (TensorProto.FLOAT4E2M1, ml_dtypes.float4_e2m1fn, [0, 0.5, -1.5, 6, -6, 3, -0.0]),
    (TensorProto.FLOAT8E8M0, ml_dtypes.float8_e8m0fnu, [1, 2, 0.25, 2.0 ** 100, 2.0 ** -120, 4, 8]),
])
def test_low_precision_types_cross_the_numpy_boundary_both_ways(elem, np_type, values):
    """An ml_dtypes array in, packed by Quilt, through Cast to float32 and back out as the same
    ml_dtypes type (an Identity-free graph output of the packed type)."""
    x = np.array(values, np.float32).astype(np_type)
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["f"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["f"], ["y"], to=elem)], "g",
        [helper.make_tensor_value_info("x", elem, [len(values)])],
        [helper.make_tensor_value_info("f", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 25)])
    m.ir_version = 11
    out = quilt.Session(m.SerializeToString()).run({"x": x})
    f, y = out["f"], out["y"]
    np.testing.assert_array_equal(f, x.astype(np.float32))
    assert y.dtype == np_type
    np.testing.assert_array_equal(y.astype(np.float32), x.astype(np.float32))
