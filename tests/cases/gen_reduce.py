"""Cases for the reduce family: Reduce*, ArgMax/ArgMin, TopK, CumSum (expected values from ORT)."""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from casegen import DEFAULT_OPSET, Cases, rand, randint

cases = Cases("reduce")


def node(name, op_type, inputs, n_outputs=1, initializers=None, opset=DEFAULT_OPSET, rtol=1e-4,
         atol=1e-5, expected=None, onnx_reference=False, **attrs):
    """Like Cases.node, but declares the output dtypes (from onnx shape inference): onnxruntime
    refuses models whose outputs have element type UNDEFINED, which Cases.node writes.
    onnx_reference: take expected values from onnx's reference evaluator."""
    initializers = initializers or {}
    outs = [f"y{i}" for i in range(n_outputs)] if n_outputs > 1 else ["y"]
    n = helper.make_node(op_type, list(inputs) + list(initializers), outs, name=name, **attrs)
    g = helper.make_graph(
        [n], name,
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in inputs.items()], [],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    inferred = onnx.shape_inference.infer_shapes(m).graph.value_info
    types = {vi.name: vi.type.tensor_type.elem_type for vi in inferred}
    if onnx_reference:
        from onnx.reference import ReferenceEvaluator
        m.graph.output.extend(helper.make_tensor_value_info(o, types[o], None) for o in outs)
        expected = dict(zip(outs, ReferenceEvaluator(m).run(None, inputs)))
    cases.model(name, [n], inputs, outs, initializers, opset, rtol, atol, expected,
                output_types=types)


def node_ort_or_reference(name, *args, **kwargs):
    """onnxruntime's answer where it has a kernel (it lacks many float16 ones), else onnx's
    reference evaluator's."""
    try:
        node(name, *args, **kwargs)
    except Exception:  # noqa: BLE001 - any ORT refusal
        cases.names.discard(name)
        node(name, *args, onnx_reference=True, **kwargs)

REDUCE_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]
INT_OPS = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"]


def first_input_axes_opset(op):
    return 13 if op == "ReduceSum" else 18


def data_for(op, *shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return randint(*shape, low=-4, high=5, dtype=dtype)
    if op == "ReduceProd":
        return rand(*shape, low=0.8, high=1.25)  # keeps products of many elements finite
    if op == "ReduceLogSum":
        return rand(*shape, low=0.1, high=1.0)  # log of a positive sum
    return rand(*shape)


def reduce_case(name, op, x, axes=None, opset=None, runtime_axes=False, **attrs):
    """axes=None: no axes at all. Attribute before the op's input-axes opset, input from it on."""
    opset = opset or 18
    if opset < first_input_axes_opset(op):
        if axes is not None:
            attrs["axes"] = axes
        node(name, op, {"x": x}, opset=opset, **attrs)
        return
    if axes is None:
        node(name, op, {"x": x}, opset=opset, **attrs)
    elif runtime_axes:
        node(name, op, {"x": x, "axes": np.array(axes, dtype=np.int64)}, opset=opset, **attrs)
    else:
        node(name, op, {"x": x}, initializers={"axes": np.array(axes, dtype=np.int64)},
                   opset=opset, **attrs)


for op in REDUCE_OPS:
    short = op[len("Reduce"):].lower()
    for opset in ((11, 13) if op == "ReduceSum" else (13, 18)):
        tag = f"{short}_o{opset}"
        x = data_for(op, 3, 4, 5)
        for axes in (None, [0], [1], [2], [-1], [0, 2], [1, 2], [0, 1], [-3, -1]):
            for keep in (1, 0):
                axes_tag = "all" if axes is None else "_".join(str(a).replace("-", "m") for a in axes)
                reduce_case(f"{tag}_axes_{axes_tag}_k{keep}", op, x, axes, opset, keepdims=keep)
        reduce_case(f"{tag}_ones", op, data_for(op, 7, 1, 33), [0], opset)
        reduce_case(f"{tag}_mixed", op, data_for(op, 2, 3, 1, 4, 5), [1, 3], opset, keepdims=0)
        reduce_case(f"{tag}_1d", op, data_for(op, 17), [0], opset, keepdims=0)
        reduce_case(f"{tag}_rows_big", op, data_for(op, 300, 64), [0], opset)
        reduce_case(f"{tag}_cols_big", op, data_for(op, 64, 300), [1], opset, keepdims=0)
        reduce_case(f"{tag}_middle_big", op, data_for(op, 8, 200, 33), [1], opset)
        reduce_case(f"{tag}_scalar_in", op, data_for(op), None, opset, keepdims=0)
        if opset >= first_input_axes_opset(op):
            reduce_case(f"{tag}_runtime_axes", op, x, [2, 0], opset, runtime_axes=True, keepdims=0)
            # No axes with noop_with_empty_axes=1 reduces nothing, but composite reductions keep
            # their element-wise steps (the spec: ReduceL1 gives |x|, ReduceSumSquare x^2,
            # ReduceLogSum log(x)). onnxruntime does so from 1.32 on (1.23 returned x, and failed
            # on an absent axes input).
            reduce_case(f"{tag}_noop", op, x, None, opset, noop_with_empty_axes=1)
            reduce_case(f"{tag}_empty_axes", op, x, [], opset, keepdims=0)
            reduce_case(f"{tag}_empty_axes_noop", op, x, [], opset, noop_with_empty_axes=1)
        if op in INT_OPS:
            for dt in (np.int32, np.int64):
                xi = data_for(op, 3, 4, 5, dtype=dt)
                reduce_case(f"{tag}_{np.dtype(dt).name}_axes_1", op, xi, [1], opset)
                reduce_case(f"{tag}_{np.dtype(dt).name}_all", op, xi, None, opset, keepdims=0)
        reduce_case(f"{tag}_f64", op, data_for(op, 4, 6).astype(np.float64), [1], opset)
        if op in ("ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                  "ReduceSumSquare", "ReduceLogSumExp"):
            reduce_case(f"{tag}_empty_set", op, np.zeros((2, 0, 4), np.float32), [1], opset)

# Accuracy of a long sum: float32 accumulation would drift well past the tolerance.
node("sum_long_accuracy", "ReduceSum", {"x": rand(1, 200000, low=0.0, high=1.0)},
           initializers={"axes": np.array([1], np.int64)}, opset=13, rtol=1e-5)
node("logsumexp_large", "ReduceLogSumExp", {"x": rand(3, 50, low=50, high=100)}, axes=[1],
           opset=13)
node("max_bool", "ReduceMax", {"x": rand(3, 4) > 0}, initializers={"axes": np.array([1])},
           opset=20)
node("min_bool", "ReduceMin", {"x": rand(3, 4) > 0}, initializers={"axes": np.array([1])},
           opset=20)
# NaN propagates as in numpy and the ONNX reference; ORT's answer depends on the NaN's position.
x_nan = np.array([[1, np.nan, 3], [4, 5, 6], [np.nan, 1, 2]], np.float32)
node("max_nan", "ReduceMax", {"x": x_nan}, axes=[1], opset=13,
     expected={"y": np.max(x_nan, axis=1, keepdims=True)})
node("min_nan", "ReduceMin", {"x": x_nan}, axes=[0], opset=13,
     expected={"y": np.min(x_nan, axis=0, keepdims=True)})
x_nan_long = rand(4, 45)
x_nan_long[1, 3] = x_nan_long[2, 44] = x_nan_long[3, 20] = np.nan
for op, fn in (("ReduceMax", np.max), ("ReduceMin", np.min)):
    node(f"{op[6:].lower()}_nan_long", op, {"x": x_nan_long}, axes=[1], opset=13,
         expected={"y": fn(x_nan_long, axis=1, keepdims=True)})

# ---- ArgMax / ArgMin ----
for op in ("ArgMax", "ArgMin"):
    short = op.lower()
    x = rand(3, 4, 5)
    ties = randint(3, 4, 5, low=0, high=3).astype(np.float32)
    for axis in (0, 1, 2, -1, -2):
        for keep in (1, 0):
            node(f"{short}_axis{axis}_k{keep}".replace("-", "m"), op, {"x": x}, axis=axis,
                       keepdims=keep, opset=13)
    for last in (0, 1):
        for axis in (0, 2):
            node(f"{short}_ties_last{last}_axis{axis}", op, {"x": ties}, axis=axis,
                       select_last_index=last, opset=13)
    node(f"{short}_default", op, {"x": x}, opset=11)
    node(f"{short}_opset1", op, {"x": x}, axis=1, opset=1)
    node(f"{short}_1d", op, {"x": rand(37)}, keepdims=0)
    node(f"{short}_big", op, {"x": rand(64, 500)}, axis=1)
    node(f"{short}_big_axis0", op, {"x": rand(500, 64)}, axis=0)
    for dt in (np.int32, np.int64):
        node(f"{short}_{np.dtype(dt).name}", op, {"x": randint(4, 6, low=-5, high=5, dtype=dt)},
                   axis=1, select_last_index=1)
    node(f"{short}_f64", op, {"x": rand(4, 6).astype(np.float64)}, axis=0)


# ---- TopK ----
def topk_case(name, x, k, opset=11, runtime_k=False, sort_expected=False, **attrs):
    k_arr = np.array([k], np.int64)
    if opset < 10:
        node(name, "TopK", {"x": x}, n_outputs=2, opset=opset, k=k, **attrs)
        return
    inputs, inits = ({"x": x, "k": k_arr}, None) if runtime_k else ({"x": x}, {"k": k_arr})
    expected = None
    if sort_expected:
        # sorted = 0 leaves the order open; ORT returns heap order. Compare as sorted sets.
        tk = helper.make_node("TopK", list(inputs) + list(inits or {}), ["y0", "y1"], **attrs)
        import onnxruntime as ort
        g = helper.make_graph([tk], name,
                              [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                               for n, v in inputs.items()],
                              [helper.make_tensor_value_info("y0", helper.np_dtype_to_tensor_dtype(x.dtype), None),
                               helper.make_tensor_value_info("y1", onnx.TensorProto.INT64, None)],
                              [numpy_helper.from_array(v, n) for n, v in (inits or {}).items()])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        v, i = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, inputs)
        axis = attrs.get("axis", -1)
        largest = attrs.get("largest", 1)
        key_v = -v if largest else v
        order = np.lexsort((i, key_v), axis=axis)
        expected = {"y0": np.take_along_axis(v, order, axis), "y1": np.take_along_axis(i, order, axis)}
    node(name, "TopK", inputs, n_outputs=2, initializers=inits, opset=opset, expected=expected,
               **attrs)


x = rand(3, 4, 5)
ties = randint(3, 8, low=0, high=3).astype(np.float32)
for axis in (0, 1, 2, -1, -3):
    for largest in (1, 0):
        topk_case(f"topk_axis{axis}_l{largest}".replace("-", "m"), x, 2, axis=axis, largest=largest)
topk_case("topk_ties_largest", ties, 5, axis=1)
topk_case("topk_ties_smallest", ties, 5, axis=1, largest=0)
topk_case("topk_k_all", x, 5)
topk_case("topk_k1", x, 1, axis=0)
topk_case("topk_k0", x, 0)
topk_case("topk_runtime_k", x, 3, runtime_k=True, axis=1)
topk_case("topk_opset10", x, 3, opset=10, axis=1)
topk_case("topk_opset1", x, 3, opset=1, axis=2)
topk_case("topk_big", rand(16, 1000), 10)
topk_case("topk_big_axis0", rand(1000, 16), 7, axis=0)
topk_case("topk_unsorted", rand(4, 50), 7, sorted=0, sort_expected=True)
topk_case("topk_unsorted_smallest", rand(4, 50), 7, sorted=0, largest=0, sort_expected=True)
topk_case("topk_int64", randint(4, 9, low=-20, high=20), 4)
topk_case("topk_int64_ties_smallest", randint(4, 9, low=0, high=3), 4, largest=0)
topk_case("topk_f64", rand(4, 9).astype(np.float64), 3)

# ---- CumSum ----
x = rand(3, 4, 5)
for axis in (0, 1, 2, -1):
    for exclusive in (0, 1):
        for reverse in (0, 1):
            node(f"cumsum_axis{axis}_e{exclusive}_r{reverse}".replace("-", "m"), "CumSum",
                       {"x": x}, initializers={"axis": np.array(axis, np.int64)},
                       exclusive=exclusive, reverse=reverse, opset=14)
node("cumsum_opset11", "CumSum", {"x": rand(6, 7)}, initializers={"axis": np.array(1, np.int32)},
           opset=11)
node("cumsum_axis_1d", "CumSum", {"x": rand(6, 7)}, initializers={"axis": np.array([0], np.int64)})
node("cumsum_runtime_axis", "CumSum", {"x": rand(6, 7), "axis": np.array(-2, np.int32)},
           reverse=1)
node("cumsum_1d", "CumSum", {"x": rand(33)}, initializers={"axis": np.array(0, np.int64)},
           exclusive=1)
# Integer sums wrap around on overflow like numpy's.
for dt in (np.int32, np.int64):
    xi = np.array([[np.iinfo(dt).max, 1, np.iinfo(dt).min, -1, np.iinfo(dt).max]] * 2, dt)
    node(f"cumsum_{np.dtype(dt).name}_wraps", "CumSum", {"x": xi},
         initializers={"axis": np.array(1, np.int64)}, expected={"y": np.cumsum(xi, axis=1, dtype=dt)})
node("cumsum_big", "CumSum", {"x": rand(50, 3000)}, initializers={"axis": np.array(1, np.int64)},
           atol=1e-4)
node("cumsum_big_axis0", "CumSum", {"x": rand(300, 500)}, initializers={"axis": np.array(0, np.int64)},
           atol=1e-4)
for dt in (np.int32, np.int64):
    node(f"cumsum_{np.dtype(dt).name}", "CumSum", {"x": randint(4, 6, low=-9, high=9, dtype=dt)},
               initializers={"axis": np.array(1, np.int64)}, reverse=1, exclusive=1)
node("cumsum_f64", "CumSum", {"x": rand(4, 6).astype(np.float64)},
           initializers={"axis": np.array(0, np.int64)})

# ---- float16 (computed in float32, rounded once) ----
h = rand(3, 4, 10).astype(np.float16)
for op in REDUCE_OPS:
    xh = data_for(op, 3, 4, 10).astype(np.float16)
    node_ort_or_reference(f"{op[6:].lower()}_f16", op, {"x": xh},
                          initializers={"axes": np.array([2], np.int64)}, opset=18,
                          rtol=2e-3, atol=2e-3)
node_ort_or_reference("sum_f16_o13", "ReduceSum", {"x": h}, initializers={"axes": np.array([1])},
                      opset=13, rtol=2e-3, atol=2e-3)
node_ort_or_reference("mean_f16_attr", "ReduceMean", {"x": h}, axes=[0, 2], opset=13, rtol=2e-3,
                      atol=2e-3)
node_ort_or_reference("argmax_f16", "ArgMax", {"x": h}, axis=2)
node_ort_or_reference("argmin_f16", "ArgMin", {"x": h}, axis=1, keepdims=0)
node_ort_or_reference("topk_f16", "TopK", {"x": h}, n_outputs=2,
                      initializers={"k": np.array([3], np.int64)}, opset=11)
