"""Cases of the tensor op family (layout, indexing and shape ops), checked against onnxruntime."""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from casegen import DEFAULT_OPSET, Cases, rand, randint, reference_outputs


class TypedCases(Cases):
    """Declares each output's dtype (from onnx shape inference): onnxruntime refuses models whose
    outputs have element type UNDEFINED."""

    def model(self, name, graph_nodes, inputs, outputs, initializers=None, opset=DEFAULT_OPSET,
              rtol=1e-4, atol=1e-5, expected=None, output_types=None):
        initializers = initializers or {}
        if output_types is None:
            g = helper.make_graph(
                graph_nodes, name,
                [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                 for k, v in inputs.items()],
                [helper.make_tensor_value_info(o, 0, None) for o in outputs],
                [numpy_helper.from_array(v, k) for k, v in initializers.items()])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            m = onnx.shape_inference.infer_shapes(m)
            output_types = {vi.name: vi.type.tensor_type.elem_type
                            for vi in list(m.graph.value_info) + list(m.graph.output)
                            if vi.type.tensor_type.elem_type}
        try:
            super().model(name, graph_nodes, inputs, outputs, initializers, opset, rtol, atol,
                          expected, output_types)
        except Exception as e:  # noqa: BLE001 - onnxruntime lacks some dtype kernels
            if expected is not None or "NOT_IMPLEMENTED" not in str(e):
                raise
            # Expected values from the ONNX reference implementation instead.
            from onnx.reference import ReferenceEvaluator
            self.names.discard(name)
            import shutil
            shutil.rmtree(self.dir / name, ignore_errors=True)
            g = helper.make_graph(
                graph_nodes, name,
                [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                 for k, v in inputs.items()],
                [helper.make_tensor_value_info(o, output_types.get(o, 0), None) for o in outputs],
                [numpy_helper.from_array(v, k) for k, v in initializers.items()])
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
            results = ReferenceEvaluator(m).run(None, inputs)
            super().model(name, graph_nodes, inputs, outputs, initializers, opset, rtol, atol,
                          dict(zip(outputs, results)), output_types)


c = TypedCases("tensor")
I64 = np.int64


def arr(*values, dtype=I64):
    """arr(1, 2) is a vector; arr([[1, 2], [3, 4]]) takes a nested list as is."""
    if len(values) == 1 and isinstance(values[0], list):
        return np.array(values[0], dtype=dtype)
    return np.array(values, dtype=dtype)


def one(op, name, inputs, opset=17, initializers=None, outputs=("y",), skip=(), **attrs):
    """A one-node model whose node inputs are `inputs` then `initializers`, with "" at the
    positions listed in `skip` (optional inputs left out)."""
    names = list(inputs) + list(initializers or {})
    for pos in sorted(skip):
        names.insert(pos, "")
    node = helper.make_node(op, names, list(outputs), name=name, **attrs)
    c.model(name, [node], inputs, list(outputs), initializers, opset)


# ---- Reshape ----
x = rand(2, 3, 4)
c.node("reshape_basic", "Reshape", {"x": x}, initializers={"s": arr(4, 6)})
c.node("reshape_infer", "Reshape", {"x": x}, initializers={"s": arr(-1, 2)})
c.node("reshape_copy_zero", "Reshape", {"x": x}, initializers={"s": arr(0, -1)})
c.node("reshape_to_scalar", "Reshape", {"x": rand(1, 1)}, initializers={"s": np.zeros(0, I64)})
c.node("reshape_runtime_shape", "Reshape", {"x": x, "s": arr(-1, 0, 2)})
c.node("reshape_allowzero", "Reshape", {"x": rand(0, 3)}, initializers={"s": arr(3, 0)},
       opset=14, allowzero=1)
c.node("reshape_empty", "Reshape", {"x": rand(0, 3, 2)}, initializers={"s": arr(-1, 6)}, opset=13)
c.node("reshape_int8", "Reshape", {"x": randint(4, 6, dtype=np.int8)}, initializers={"s": arr(2, 12)})
c.node("reshape_bool", "Reshape", {"x": rand(4, 6) > 0}, initializers={"s": arr(-1)})

# ---- Flatten ----
for axis in (0, 1, 2, 3, -1, -3):
    c.node(f"flatten_axis{axis}".replace("-", "m"), "Flatten", {"x": rand(2, 3, 4)}, axis=axis)
c.node("flatten_default", "Flatten", {"x": rand(2, 3, 2, 2)})
c.node("flatten_opset9", "Flatten", {"x": rand(2, 3, 2)}, opset=9, axis=2)
c.node("flatten_f16", "Flatten", {"x": rand(2, 3, 2).astype(np.float16)}, axis=1)

# ---- Squeeze / Unsqueeze ----
x = rand(1, 3, 1, 2)
c.node("squeeze_all", "Squeeze", {"x": x})
c.node("squeeze_axes", "Squeeze", {"x": x}, initializers={"a": arr(0)})
c.node("squeeze_neg_axes", "Squeeze", {"x": x}, initializers={"a": arr(-2, 0)})
c.node("squeeze_runtime_axes", "Squeeze", {"x": x, "a": arr(2)})
c.node("squeeze_empty_axes", "Squeeze", {"x": x}, initializers={"a": np.zeros(0, I64)})
c.node("squeeze_opset11", "Squeeze", {"x": x}, opset=11, axes=[-4])
c.node("squeeze_to_scalar", "Squeeze", {"x": randint(1, 1, dtype=np.int32)})
c.node("unsqueeze_front", "Unsqueeze", {"x": rand(3, 4)}, initializers={"a": arr(0)})
c.node("unsqueeze_many", "Unsqueeze", {"x": rand(3, 4)}, initializers={"a": arr(-1, 0, 3)})
c.node("unsqueeze_scalar", "Unsqueeze", {"x": np.array(2.5, np.float32)}, initializers={"a": arr(0)})
c.node("unsqueeze_runtime_axes", "Unsqueeze", {"x": rand(3, 4), "a": arr(1, 2)})
c.node("unsqueeze_opset11", "Unsqueeze", {"x": rand(3, 4)}, opset=11, axes=[1, -1])
c.node("unsqueeze_bool", "Unsqueeze", {"x": rand(3, 4) > 0}, initializers={"a": arr(1)})

# ---- Identity / Dropout ----
c.node("identity", "Identity", {"x": rand(2, 3)})
c.node("identity_int64", "Identity", {"x": randint(5)})
c.node("dropout_default", "Dropout", {"x": rand(3, 4)})
c.node("dropout_mask", "Dropout", {"x": rand(3, 4)}, n_outputs=2)
c.node("dropout_ratio", "Dropout", {"x": rand(3, 4)}, initializers={"r": np.array(0.3, np.float32)},
       n_outputs=2)
c.node("dropout_training_false", "Dropout", {"x": rand(3, 4)},
       initializers={"r": np.array(0.5, np.float32), "t": np.array(False)}, n_outputs=2)
# onnxruntime returns an all-false mask before opset 12; the spec and its reference say all true.
x = rand(3, 4)
c.node("dropout_opset10", "Dropout", {"x": x}, opset=10, n_outputs=2, ratio=0.2,
       expected={"y0": x, "y1": np.ones((3, 4), bool)})
c.node("dropout_opset7", "Dropout", {"x": rand(3, 4)}, opset=7, ratio=0.2)
c.node("dropout_f64", "Dropout", {"x": rand(3, 4, dtype=np.float64)}, n_outputs=2)

# ---- Transpose ----
c.node("transpose_default", "Transpose", {"x": rand(2, 3, 4)})
c.node("transpose_2d", "Transpose", {"x": rand(37, 53)}, perm=[1, 0])
c.node("transpose_2d_big", "Transpose", {"x": rand(300, 257)}, perm=[1, 0])
c.node("transpose_nchw_nhwc", "Transpose", {"x": rand(2, 19, 17, 23)}, perm=[0, 2, 3, 1])
c.node("transpose_nhwc_nchw", "Transpose", {"x": rand(2, 17, 23, 19)}, perm=[0, 3, 1, 2])
c.node("transpose_big_nhwc", "Transpose", {"x": rand(1, 64, 56, 56)}, perm=[0, 2, 3, 1])
c.node("transpose_swap_inner", "Transpose", {"x": rand(4, 5, 6, 7)}, perm=[0, 1, 3, 2])
c.node("transpose_outer", "Transpose", {"x": rand(4, 5, 6, 7)}, perm=[1, 0, 2, 3])
c.node("transpose_5d", "Transpose", {"x": rand(2, 3, 4, 5, 3)}, perm=[4, 2, 0, 3, 1])
c.node("transpose_identity", "Transpose", {"x": rand(3, 4)}, perm=[0, 1])
c.node("transpose_ones", "Transpose", {"x": rand(1, 5, 1, 4)}, perm=[3, 2, 1, 0])
c.node("transpose_scalar", "Transpose", {"x": np.array(3.0, np.float32)})
c.node("transpose_empty", "Transpose", {"x": rand(0, 3)})
for dt in (np.float16, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64):
    c.node(f"transpose_{np.dtype(dt).name}", "Transpose",
           {"x": (rand(13, 11, 9) * 100).astype(dt)}, perm=[2, 0, 1])
c.node("transpose_bool", "Transpose", {"x": rand(13, 11) > 0})

# ---- Concat ----
c.node("concat_axis0", "Concat", {"a": rand(2, 3), "b": rand(4, 3)}, axis=0)
c.node("concat_axis1", "Concat", {"a": rand(2, 3), "b": rand(2, 1), "c": rand(2, 5)}, axis=1)
c.node("concat_neg_axis", "Concat", {"a": rand(2, 3, 4), "b": rand(2, 3, 2)}, axis=-1)
c.node("concat_middle", "Concat", {"a": rand(2, 3, 4), "b": rand(2, 1, 4)}, axis=1)
c.node("concat_empty_input", "Concat", {"a": rand(2, 0), "b": rand(2, 3)}, axis=1)
# Larger than one 64 KB piece of the parallel copy: pieces cross rows and inputs (an empty one
# between them); one image's channels (one row), and many rows.
c.node("concat_pieces_channels", "Concat",
       {"a": rand(3, 20, 70, 40), "e": rand(3, 0, 70, 40), "b": rand(3, 13, 70, 40)}, axis=1)
c.node("concat_pieces_rows", "Concat", {"a": rand(4, 5, 300, 64), "b": rand(4, 5, 100, 64)},
       axis=2)
c.node("concat_single", "Concat", {"a": rand(2, 3)}, axis=0)
c.node("concat_1d", "Concat", {"a": randint(3), "b": randint(1), "c": randint(2)}, axis=0)
c.node("concat_opset4", "Concat", {"a": rand(2, 3), "b": rand(2, 3)}, opset=4, axis=1)
c.node("concat_opset11", "Concat", {"a": rand(2, 3), "b": rand(2, 3)}, opset=11, axis=-2)
c.node("concat_big", "Concat", {"a": rand(64, 300), "b": rand(64, 200)}, axis=1)
c.node("concat_bool", "Concat", {"a": rand(2, 3) > 0, "b": rand(2, 2) > 0}, axis=1)
c.node("concat_f16", "Concat", {"a": rand(2, 3).astype(np.float16), "b": rand(1, 3).astype(np.float16)},
       axis=0)

# ---- Split ----
x = rand(6, 4)
c.node("split_equal", "Split", {"x": x}, n_outputs=3)
c.node("split_axis1", "Split", {"x": x}, n_outputs=2, axis=1)
c.node("split_neg_axis", "Split", {"x": x}, n_outputs=4, axis=-1)
c.node("split_sizes", "Split", {"x": x}, initializers={"s": arr(1, 2, 3)}, n_outputs=3)
c.node("split_sizes_zero", "Split", {"x": x}, initializers={"s": arr(2, 0, 2)}, n_outputs=3, axis=1)
c.node("split_runtime_sizes", "Split", {"x": x, "s": arr(4, 2)}, n_outputs=2)
c.node("split_opset11_attr", "Split", {"x": x}, opset=11, n_outputs=2, split=[5, 1])
c.node("split_opset2_attr", "Split", {"x": rand(2, 5)}, opset=2, n_outputs=2, axis=1, split=[2, 3])
c.node("split_num_outputs", "Split", {"x": rand(7, 2)}, opset=18, n_outputs=3, num_outputs=3)
c.node("split_num_outputs_even", "Split", {"x": rand(2, 6)}, opset=18, n_outputs=2, axis=1,
       num_outputs=2)
c.node("split_int32", "Split", {"x": randint(4, 3, dtype=np.int32)}, n_outputs=2)
c.node("split_3d_middle", "Split", {"x": rand(2, 6, 3)}, n_outputs=3, axis=1)

# ---- Slice ----
x = rand(5, 6, 7)
c.node("slice_opset1", "Slice", {"x": x}, opset=1, starts=[1, 0], ends=[3, 4], axes=[0, 2])
c.node("slice_opset1_noaxes", "Slice", {"x": x}, opset=9, starts=[1, -5], ends=[100, -1])
c.node("slice_basic", "Slice", {"x": x}, initializers={"s": arr(1, 2), "e": arr(4, 5)})
c.node("slice_axes", "Slice", {"x": x}, initializers={"s": arr(1), "e": arr(5), "a": arr(2)})
c.node("slice_neg", "Slice", {"x": x}, initializers={"s": arr(-3), "e": arr(-1), "a": arr(-1)})
c.node("slice_clamp", "Slice", {"x": x},
       initializers={"s": arr(-100, 2), "e": arr(100, np.iinfo(I64).max), "a": arr(0, 1)})
c.node("slice_steps", "Slice", {"x": x},
       initializers={"s": arr(0, 1), "e": arr(5, 7), "a": arr(0, 2), "st": arr(2, 3)})
c.node("slice_neg_step", "Slice", {"x": x},
       initializers={"s": arr(-1), "e": arr(np.iinfo(I64).min), "a": arr(1), "st": arr(-1)})
c.node("slice_neg_step2", "Slice", {"x": x},
       initializers={"s": arr(5, 10), "e": arr(0, -100), "a": arr(2, 0), "st": arr(-2, -3)})
c.node("slice_neg_step_start_before_front", "Slice", {"x": rand(1, 2)},
       initializers={"s": arr(-8), "e": arr(-7), "a": arr(-2), "st": arr(-3)})
c.node("slice_neg_step_empty_axis", "Slice", {"x": rand(0, 2)},
       initializers={"s": arr(-1), "e": arr(-10), "a": arr(0), "st": arr(-1)})
c.node("slice_empty", "Slice", {"x": x}, initializers={"s": arr(3), "e": arr(1), "a": arr(0)})
c.node("slice_runtime", "Slice", {"x": x, "s": arr(1, 1), "e": arr(-1, 4), "a": arr(2, 0)})
c.node("slice_int32_params", "Slice", {"x": x},
       initializers={"s": arr(1, dtype=np.int32), "e": arr(3, dtype=np.int32)})
c.node("slice_opset10", "Slice", {"x": x}, opset=10, initializers={"s": arr(0), "e": arr(2)})
c.node("slice_int64_data", "Slice", {"x": randint(8, 8)},
       initializers={"s": arr(7, 1), "e": arr(0, 8), "a": arr(0, 1), "st": arr(-2, 2)})
c.node("slice_big", "Slice", {"x": rand(64, 130, 30)},
       initializers={"s": arr(3, 1), "e": arr(120, 29), "a": arr(1, 2)})
one("Slice", "slice_skip_axes", {"x": x}, 13, {"s": arr(1), "e": arr(3), "st": arr(2)}, skip=[3])

# ---- Expand ----
c.node("expand_basic", "Expand", {"x": rand(3, 1)}, initializers={"s": arr(3, 4)})
c.node("expand_rank_up", "Expand", {"x": rand(1, 4)}, initializers={"s": arr(2, 3, 4)})
c.node("expand_bidirectional", "Expand", {"x": rand(3, 1)}, initializers={"s": arr(2, 1, 6)})
c.node("expand_smaller_shape", "Expand", {"x": rand(2, 3, 4)}, initializers={"s": arr(1, 4)})
c.node("expand_scalar", "Expand", {"x": np.array(7, I64)}, initializers={"s": arr(2, 3)})
c.node("expand_runtime", "Expand", {"x": rand(1, 3, 1), "s": arr(2, 1, 1, 5)})
c.node("expand_zero", "Expand", {"x": rand(1, 3)}, initializers={"s": arr(0, 3)})
c.node("expand_big", "Expand", {"x": rand(1, 200, 1)}, initializers={"s": arr(64, 200, 30)})
c.node("expand_opset8", "Expand", {"x": rand(2, 1)}, opset=8, initializers={"s": arr(2, 3)})
c.node("expand_bool", "Expand", {"x": rand(1, 3) > 0}, initializers={"s": arr(2, 3)})

# ---- Tile ----
c.node("tile_basic", "Tile", {"x": rand(2, 3)}, initializers={"r": arr(2, 3)})
c.node("tile_ones", "Tile", {"x": rand(2, 3)}, initializers={"r": arr(1, 1)})
c.node("tile_zero", "Tile", {"x": rand(2, 3)}, initializers={"r": arr(0, 2)})
c.node("tile_3d", "Tile", {"x": randint(2, 1, 3, dtype=np.int32)}, initializers={"r": arr(1, 4, 2)})
c.node("tile_runtime", "Tile", {"x": rand(3), "r": arr(5)})
c.node("tile_opset6", "Tile", {"x": rand(2, 2)}, opset=6, initializers={"r": arr(3, 1)})
c.node("tile_f16", "Tile", {"x": rand(2, 2).astype(np.float16)}, initializers={"r": arr(2, 2)})

# ---- Pad ----
x = rand(3, 4)
for mode in ("constant", "reflect", "edge", "wrap"):
    opset = 19 if mode == "wrap" else 17
    c.node(f"pad_{mode}", "Pad", {"x": x}, initializers={"p": arr(1, 2, 2, 1)}, opset=opset,
           mode=mode)
    c.node(f"pad_{mode}_3d", "Pad", {"x": rand(2, 3, 4)}, initializers={"p": arr(0, 1, 2, 0, 2, 1)},
           opset=opset, mode=mode)
    c.node(f"pad_{mode}_crop", "Pad", {"x": rand(4, 5)}, initializers={"p": arr(-1, 1, 0, -2)},
           opset=opset, mode=mode)
c.node("pad_constant_value", "Pad", {"x": x}, initializers={"p": arr(1, 1, 1, 1),
                                                           "v": np.array(2.5, np.float32)})
c.node("pad_int64_value", "Pad", {"x": randint(2, 3)}, initializers={"p": arr(0, 1, 2, 0),
                                                                    "v": np.array(-7, I64)})
c.node("pad_runtime", "Pad", {"x": x, "p": arr(0, 3, 1, 0)})
c.node("pad_axes", "Pad", {"x": rand(2, 3, 4)},
       initializers={"p": arr(1, 2, 0, 3), "v": np.array(1.0, np.float32), "a": arr(-1, 0)}, opset=18)
one("Pad", "pad_axes_no_value", {"x": rand(2, 3, 4)}, 18, {"p": arr(2, 1), "a": arr(1)}, skip=[2],
    mode="reflect")
c.node("pad_opset2", "Pad", {"x": x}, opset=2, pads=[0, 1, 1, 0], value=3.0)
c.node("pad_opset2_edge", "Pad", {"x": x}, opset=2, pads=[2, 0, 0, 2], mode="edge")
c.node("pad_opset11", "Pad", {"x": x}, opset=11, initializers={"p": arr(1, 0, 0, 1)})
c.node("pad_big", "Pad", {"x": rand(64, 100, 40)}, initializers={"p": arr(0, 2, 3, 0, 1, 4)})
c.node("pad_4d_reflect", "Pad", {"x": rand(1, 2, 5, 6)}, initializers={"p": arr(0, 0, 2, 3, 0, 0, 3, 2)},
       mode="reflect")
c.node("pad_bool", "Pad", {"x": rand(2, 3) > 0}, initializers={"p": arr(1, 1, 1, 1)})
c.node("pad_f16_edge", "Pad", {"x": rand(2, 3).astype(np.float16)}, initializers={"p": arr(1, 1, 1, 1)},
       mode="edge")
c.node("pad_1d", "Pad", {"x": rand(5)}, initializers={"p": arr(3, 2)}, mode="reflect")

# ---- Shape / Size ----
c.node("shape_basic", "Shape", {"x": rand(2, 3, 4)})
c.node("shape_scalar", "Shape", {"x": np.array(1.0, np.float32)})
c.node("shape_start", "Shape", {"x": rand(2, 3, 4)}, opset=15, start=1)
c.node("shape_end_neg", "Shape", {"x": rand(2, 3, 4)}, opset=15, end=-1)
c.node("shape_clamped", "Shape", {"x": rand(2, 3, 4)}, opset=15, start=-10, end=10)
c.node("shape_empty_range", "Shape", {"x": rand(2, 3, 4)}, opset=15, start=2, end=1)
c.node("shape_int8", "Shape", {"x": randint(2, 5, dtype=np.int8)})
c.node("size_basic", "Size", {"x": rand(2, 3, 4)})
c.node("size_scalar", "Size", {"x": np.array(1, I64)})
c.node("size_empty", "Size", {"x": rand(2, 0)})
c.node("size_bool", "Size", {"x": rand(7) > 0})

# ---- Constant ----
def constant(name, opset=17, **attrs):
    node = helper.make_node("Constant", [], ["y"], name=name, **attrs)
    c.model(name, [node], {}, ["y"], None, opset)


constant("constant_tensor", value=numpy_helper.from_array(rand(2, 3), "v"))
constant("constant_tensor_int32", value=numpy_helper.from_array(randint(4, dtype=np.int32), "v"))
constant("constant_tensor_scalar", value=numpy_helper.from_array(np.array(3, I64), "v"))
constant("constant_opset9", opset=9, value=numpy_helper.from_array(rand(3), "v"))
constant("constant_value_float", value_float=1.5)
constant("constant_value_floats", value_floats=[1.0, -2.0, 3.5])
constant("constant_value_int", value_int=-4)
constant("constant_value_ints", value_ints=[1, 2, 3, 4])
constant("constant_bool", value=numpy_helper.from_array(rand(5) > 0, "v"))
c.model("constant_into_add", [
    helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(rand(2, 3), "v")),
    helper.make_node("Concat", ["x", "k"], ["y"], axis=0)], {"x": rand(1, 3)}, ["y"])

# ---- ConstantOfShape ----
c.node("cos_default", "ConstantOfShape", {}, initializers={"s": arr(2, 3)})
c.node("cos_float", "ConstantOfShape", {}, initializers={"s": arr(4)},
       value=numpy_helper.from_array(np.array([1.25], np.float32), "v"))
c.node("cos_int32", "ConstantOfShape", {}, initializers={"s": arr(2, 2, 2)},
       value=numpy_helper.from_array(np.array([-3], np.int32), "v"))
c.node("cos_int64", "ConstantOfShape", {"s": arr(3, 1)},
       value=numpy_helper.from_array(np.array([9], I64), "v"))
c.node("cos_bool", "ConstantOfShape", {"s": arr(3)},
       value=numpy_helper.from_array(np.array([True]), "v"))
c.node("cos_f16", "ConstantOfShape", {"s": arr(2, 3)},
       value=numpy_helper.from_array(np.array([0.5], np.float16), "v"))
c.node("cos_zero_dim", "ConstantOfShape", {"s": arr(0, 3)},
       value=numpy_helper.from_array(np.array([1.0], np.float32), "v"))
c.node("cos_scalar", "ConstantOfShape", {"s": np.zeros(0, I64)},
       value=numpy_helper.from_array(np.array([2.0], np.float64), "v"))
c.node("cos_big", "ConstantOfShape", {}, initializers={"s": arr(300, 500)},
       value=numpy_helper.from_array(np.array([1.0], np.float32), "v"))

# ---- Range ----
def scalars(dtype, *v):
    return {k: np.array(x, dtype) for k, x in zip(("start", "limit", "delta"), v)}


c.node("range_float", "Range", scalars(np.float32, 0.5, 3.0, 0.5))
c.node("range_float_neg", "Range", scalars(np.float32, 3.0, -2.0, -0.7))
c.node("range_float64", "Range", scalars(np.float64, 1.0, 2.0, 0.1))
c.node("range_int32", "Range", scalars(np.int32, -5, 7, 3))
c.node("range_int64", "Range", scalars(I64, 10, 0, -3))
c.node("range_int16", "Range", scalars(np.int16, 1, 9, 2))
c.node("range_empty", "Range", scalars(I64, 5, 5, 1))
# Limits at the ends of the type: limit - start and i * delta do not fit it, the values do.
for dt in (np.int32, I64):
    lo, hi = int(np.iinfo(dt).min), int(np.iinfo(dt).max)
    step = (hi + 1) // 2  # a quarter of the type's range: 3 * step alone does not fit
    c.node(f"range_{np.dtype(dt).name}_extremes", "Range", scalars(dt, lo, hi, step),
           expected={"y": np.array([lo + k * step for k in range(4)], dt)})
    c.node(f"range_{np.dtype(dt).name}_extremes_down", "Range", scalars(dt, hi, lo, lo),
           expected={"y": np.array([hi, hi + lo], dt)})
c.node("range_empty_wrong_dir", "Range", scalars(I64, 5, 8, -1))
c.node("range_const", "Range", {}, initializers=scalars(I64, 0, 10, 1))

# ---- Trilu ----
x = rand(4, 5)
for upper in (0, 1):
    c.node(f"trilu_up{upper}", "Trilu", {"x": x}, upper=upper)
    for k in (-6, -1, 0, 2, 7):
        c.node(f"trilu_up{upper}_k{k}".replace("-", "m"), "Trilu", {"x": x},
               initializers={"k": np.array(k, I64)}, upper=upper)
    c.node(f"trilu_up{upper}_batched", "Trilu", {"x": rand(2, 3, 6, 4), "k": np.array(1, I64)},
           upper=upper)
c.node("trilu_int64", "Trilu", {"x": randint(5, 3)}, upper=0)
c.node("trilu_empty", "Trilu", {"x": rand(0, 3)})
c.node("trilu_big", "Trilu", {"x": rand(8, 128, 128)})

# ---- Gather ----
data = rand(5, 4, 3)
c.node("gather_axis0", "Gather", {"x": data, "i": arr(0, 4, 2)})
c.node("gather_axis1", "Gather", {"x": data, "i": arr(3, 0)}, axis=1)
c.node("gather_axis_last", "Gather", {"x": data, "i": arr(2, 1, 0, 1)}, axis=-1)
c.node("gather_neg_idx", "Gather", {"x": data, "i": arr(-1, -5, 1)})
c.node("gather_int32_idx", "Gather", {"x": data, "i": arr(1, 3, dtype=np.int32)}, axis=1)
c.node("gather_scalar_idx", "Gather", {"x": data, "i": np.array(2, I64)}, axis=1)
c.node("gather_2d_idx", "Gather", {"x": data, "i": arr([[0, 1], [2, -1], [1, 1]])}, axis=1)
c.node("gather_const_idx", "Gather", {"x": data}, initializers={"i": arr(4, 0)})
c.node("gather_empty_idx", "Gather", {"x": data, "i": np.zeros((0,), I64)})
c.node("gather_1d_int64", "Gather", {"x": randint(10), "i": arr([[3, 9], [0, 0]])})
c.node("gather_big", "Gather", {"x": rand(1000, 64), "i": randint(500, high=1000)})
c.node("gather_opset11", "Gather", {"x": data, "i": arr(-2)}, opset=11, axis=0)
c.node("gather_opset1", "Gather", {"x": data, "i": arr(1)}, opset=1, axis=2)
c.node("gather_bool", "Gather", {"x": rand(4, 3) > 0, "i": arr(3, 1)})

# ---- GatherElements ----
data = rand(3, 4)
c.node("gather_elements_axis0", "GatherElements", {"x": data, "i": arr([[0, 1, 2, 0], [2, 2, 1, 0]])})
c.node("gather_elements_axis1", "GatherElements", {"x": data, "i": arr([[0, 3], [1, -1], [-4, 2]])},
       axis=1)
c.node("gather_elements_neg_axis", "GatherElements",
       {"x": rand(2, 3, 4), "i": randint(2, 2, 4, high=3, dtype=np.int32)}, axis=-2)
c.node("gather_elements_int64", "GatherElements", {"x": randint(4, 4), "i": randint(2, 4, high=4)})
c.node("gather_elements_opset11", "GatherElements", {"x": data, "i": arr([[1], [0], [3]])}, opset=11,
       axis=1)

# ---- GatherND ----
data = rand(2, 3, 4)
c.node("gather_nd_full", "GatherND", {"x": data, "i": arr([[0, 1, 2], [1, 2, 3]])})
c.node("gather_nd_slice", "GatherND", {"x": data, "i": arr([[1], [0]])})
c.node("gather_nd_pairs", "GatherND", {"x": data, "i": arr([[[0, 2]], [[1, -1]]])})
c.node("gather_nd_batch1", "GatherND", {"x": data, "i": arr([[[1], [0]], [[2], [2]]])}, batch_dims=1)
c.node("gather_nd_batch1_full", "GatherND", {"x": data, "i": arr([[1, 3], [2, 0]])}, batch_dims=1)
c.node("gather_nd_batch2", "GatherND", {"x": data, "i": randint(2, 3, 1, high=4)}, batch_dims=2)
c.node("gather_nd_opset11", "GatherND", {"x": data, "i": arr([[1, 1]])}, opset=11)
c.node("gather_nd_int32_data", "GatherND", {"x": randint(3, 3, dtype=np.int32), "i": arr([[2], [0]])})

# ---- ScatterND ----
data = rand(4, 3, 2)
c.node("scatter_nd_slices", "ScatterND", {"x": data, "i": arr([[1], [3]]), "u": rand(2, 3, 2)})
c.node("scatter_nd_elements", "ScatterND",
       {"x": data, "i": arr([[0, 1, 1], [3, 2, 0]]), "u": rand(2)})
c.node("scatter_nd_neg", "ScatterND", {"x": data, "i": arr([[-1, 0]]), "u": rand(1, 2)})
for red in ("add", "mul"):
    c.node(f"scatter_nd_{red}", "ScatterND",
           {"x": data, "i": arr([[1], [1], [2]]), "u": rand(3, 3, 2)}, opset=16, reduction=red)
for red in ("max", "min"):
    c.node(f"scatter_nd_{red}", "ScatterND",
           {"x": data, "i": arr([[1, 0], [1, 0], [2, 2]]), "u": rand(3, 2)}, opset=18, reduction=red)
c.node("scatter_nd_int64_add", "ScatterND",
       {"x": randint(5), "i": arr([[1], [4], [1]]), "u": randint(3)}, opset=16, reduction="add")
c.node("scatter_nd_opset11", "ScatterND", {"x": data, "i": arr([[2]]), "u": rand(1, 3, 2)}, opset=11)

# ---- ScatterElements / Scatter ----
data = rand(3, 4)
c.node("scatter_elements_axis0", "ScatterElements",
       {"x": data, "i": arr([[1, 0, 2, 1], [0, 2, 1, 0]]), "u": rand(2, 4)})
c.node("scatter_elements_axis1", "ScatterElements",
       {"x": data, "i": arr([[3], [-1], [0]]), "u": rand(3, 1)}, axis=1)
c.node("scatter_elements_neg_axis", "ScatterElements",
       {"x": data, "i": arr([[1, 2]], dtype=np.int32), "u": rand(1, 2)}, axis=-1)
for red in ("add", "mul"):
    c.node(f"scatter_elements_{red}", "ScatterElements",
           {"x": data, "i": arr([[1, 1, 2], [0, 0, 0]]), "u": rand(2, 3)}, opset=16, reduction=red)
for red in ("max", "min"):
    c.node(f"scatter_elements_{red}", "ScatterElements",
           {"x": data, "i": arr([[2, 2], [1, 1]]), "u": rand(2, 2)}, opset=18, axis=1, reduction=red)
c.node("scatter_elements_int32", "ScatterElements",
       {"x": randint(3, 3, dtype=np.int32), "i": arr([[2, 0, 1]]), "u": randint(1, 3, dtype=np.int32)})
c.node("scatter_opset9", "Scatter", {"x": data, "i": arr([[1, 0]]), "u": rand(1, 2)}, opset=9, axis=1)
# An empty output: its buffer holds no bytes (fuzz_run: the kernel's copy of data passed a null
# pointer to memcpy, undefined behaviour that UBSan reports in asan_cases_tensor).
c.node("scatter_elements_empty", "ScatterElements",
       {"x": rand(0, 5), "i": np.zeros((0, 2), np.int64), "u": rand(0, 2)}, axis=1)

# ---- NonZero ----
c.node("nonzero_float", "NonZero", {"x": np.array([[0, 1.5, 0], [-2, 0, 3]], np.float32)})
c.node("nonzero_bool", "NonZero", {"x": rand(3, 4, 2) > 0.2})
c.node("nonzero_int64", "NonZero", {"x": arr(0, 5, 0, 0, 7)})
c.node("nonzero_none", "NonZero", {"x": np.zeros((2, 3), np.int32)})
c.node("nonzero_const", "NonZero", {}, initializers={"x": arr([1, 0], [0, 2])})
c.node("nonzero_scalar", "NonZero", {"x": np.array(3, np.int32)})
c.node("nonzero_f16", "NonZero", {"x": np.array([0, -0.0, 2, 0.5], np.float16)})

# ---- DepthToSpace / SpaceToDepth ----
x = rand(2, 8, 3, 4)
c.node("depth_to_space_dcr", "DepthToSpace", {"x": x}, blocksize=2)
c.node("depth_to_space_crd", "DepthToSpace", {"x": x}, blocksize=2, mode="CRD")
c.node("depth_to_space_b3", "DepthToSpace", {"x": rand(1, 18, 2, 3)}, blocksize=3, mode="CRD")
c.node("depth_to_space_opset1", "DepthToSpace", {"x": x}, opset=1, blocksize=2)
c.node("depth_to_space_int32", "DepthToSpace", {"x": randint(1, 4, 2, 2, dtype=np.int32)}, blocksize=2)
c.node("space_to_depth_b2", "SpaceToDepth", {"x": rand(2, 3, 4, 6)}, blocksize=2)
c.node("space_to_depth_b3", "SpaceToDepth", {"x": rand(1, 2, 6, 3)}, blocksize=3)
c.node("space_to_depth_big", "SpaceToDepth", {"x": rand(1, 32, 64, 64)}, blocksize=4)

# ---- OneHot ----
vals = np.array([0.0, 1.0], np.float32)
c.node("onehot_basic", "OneHot", {"i": arr(0, 2, 1)}, initializers={"d": np.array(3, I64), "v": vals})
c.node("onehot_axis0", "OneHot", {"i": arr([0, 2], [1, 3])},
       initializers={"d": np.array(4, I64), "v": np.array([-1, 5], np.int32)}, axis=0)
c.node("onehot_axis1", "OneHot", {"i": arr([0, -1], [1, 3])},
       initializers={"d": np.array(4, I64), "v": vals}, axis=1)
c.node("onehot_out_of_range", "OneHot", {"i": arr(0, 7, -9, 2)},
       initializers={"d": np.array(3, I64), "v": vals})
# Float indices are cast to int64 (truncated toward zero) before use, as the spec says: 2.7
# selects 2, -1.5 selects -1 (the last). onnxruntime does so from 1.32 on; 1.23 (and onnx 1.22's
# reference evaluator) selected nothing for an index that is not a whole number.
c.node("onehot_float_idx", "OneHot", {"i": np.array([1.0, 2.7, 0.0], np.float32)},
       initializers={"d": np.array(3.0, np.float32), "v": vals})
c.node("onehot_float_idx_truncated", "OneHot", {"i": np.array([-1.5, -0.4, 3.9, 2.0], np.float32)},
       initializers={"d": np.array(4.0, np.float32), "v": vals})
# An index no int64 holds (NaN, infinite, 1e30) selects nothing, like one out of range (by hand:
# the cast is undefined there, and onnxruntime's result is whatever its conversion gives).
c.node("onehot_float_idx_not_castable", "OneHot",
       {"i": np.array([np.nan, np.inf, -np.inf, 1e30, 1.0], np.float32)},
       initializers={"d": np.array(3.0, np.float32), "v": vals},
       expected={"y": np.array([[0, 0, 0]] * 4 + [[0, 1, 0]], np.float32)})
c.node("onehot_runtime_depth", "OneHot", {"i": arr(1, 2), "d": np.array([5], I64), "v": vals})
c.node("onehot_int32_idx_f64", "OneHot", {"i": arr(1, 0, dtype=np.int32)},
       initializers={"d": np.array(2, np.int32), "v": np.array([2.0, 3.0], np.float64)}, opset=11)
c.node("onehot_opset9", "OneHot", {"i": arr(1, 0)},
       initializers={"d": np.array([3], I64), "v": vals}, opset=9)

# ---- Dropout in training mode with ratio 0 is deterministic ----
c.node("dropout_training_zero_ratio", "Dropout", {"x": rand(3, 4)},
       initializers={"r": np.array(0.0, np.float32), "t": np.array(True)}, n_outputs=2)
c.node("dropout_runtime_training_false", "Dropout",
       {"x": rand(3, 4), "r": np.array(0.5, np.float32), "t": np.array(False)}, n_outputs=2)

# ---- Dims unknown at session creation: NonZero's count is known only at run time ----
H = helper.make_node
mask = np.array([[1, 0, 2, 0, 3], [0, 4, 0, 5, 6]], np.float32)  # 6 non-zeros
c.model("dynamic_transpose_reshape", [
    H("NonZero", ["x"], ["nz"]),
    H("Transpose", ["nz"], ["t"]),
    H("Reshape", ["t", "s"], ["y"])], {"x": mask}, ["y"], {"s": arr(-1, 3)})
c.model("dynamic_flatten_squeeze", [
    H("NonZero", ["x"], ["nz"]),
    H("Unsqueeze", ["nz", "a"], ["u"]),
    H("Flatten", ["u"], ["f"], axis=2),
    H("Squeeze", ["f"], ["y"])], {"x": mask}, ["y"], {"a": arr(0)})
c.model("dynamic_concat_split", [
    H("NonZero", ["x"], ["nz"]),
    H("Concat", ["nz", "nz"], ["cc"], axis=1),
    H("Split", ["cc"], ["y0", "y1", "y2"], axis=1)], {"x": mask}, ["y0", "y1", "y2"])
# Outputs left unnamed: their parts are skipped, and the outputs after them start past them
# (fuzz_run: at run time an unnamed output has no type, and the kernel read its shape). Expected
# values from onnx's reference: onnxruntime 1.32 crashes (SIGSEGV) on the first.
def split_unnamed(name, nodes, inputs, outputs, initializers=None, opset=DEFAULT_OPSET):
    _, values = reference_outputs(name, nodes, inputs, outputs, initializers or {}, opset, 8)
    c.model(name, nodes, inputs, outputs, initializers, opset,
            expected=dict(zip(outputs, values)))


split_unnamed("dynamic_split_unnamed_middle", [
    H("NonZero", ["x"], ["nz"]),
    H("Concat", ["nz", "nz"], ["cc"], axis=1),
    H("Split", ["cc"], ["y0", "", "y2"], axis=1)], {"x": mask}, ["y0", "y2"])
split_unnamed("split_unnamed_sizes", [H("Split", ["x", "s"], ["y0", "", "y2"])],
              {"x": rand(6, 3)}, ["y0", "y2"], {"s": arr(1, 2, 3)})
split_unnamed("split_unnamed_num_outputs",
              [H("Split", ["x"], ["y0", "", "y2"], num_outputs=3)], {"x": rand(7, 2)},
              ["y0", "y2"], opset=18)
c.model("dynamic_slice_pad_tile", [
    H("NonZero", ["x"], ["nz"]),
    H("Slice", ["nz", "s", "e", "ax"], ["sl"]),
    H("Pad", ["sl", "p"], ["pd"], mode="edge"),
    H("Tile", ["pd", "r"], ["y"])], {"x": mask}, ["y"],
    {"s": arr(1), "e": arr(-1), "ax": arr(1), "p": arr(0, 1, 1, 0), "r": arr(2, 1)})
c.model("dynamic_gather_shape", [
    H("NonZero", ["x"], ["nz"]),
    H("Gather", ["nz", "i"], ["g"], axis=1),
    H("Shape", ["g"], ["sh"]),
    H("ConstantOfShape", ["sh"], ["y0"], value=numpy_helper.from_array(np.array([7], I64), "v")),
    H("Size", ["nz"], ["y1"])], {"x": mask, "i": arr([[0, 5], [2, 1]])}, ["y0", "y1"])
c.model("dynamic_expand_range", [
    H("NonZero", ["x"], ["nz"]),
    H("Size", ["nz"], ["n"]),
    H("Range", ["zero", "n", "one"], ["rg"]),
    H("Expand", ["rg", "s"], ["y"])], {"x": mask}, ["y"],
    {"zero": np.array(0, I64), "one": np.array(1, I64), "s": arr(2, 1)})
c.model("shape_chain_reshape", [
    H("Shape", ["x"], ["sh"]),
    H("Slice", ["sh", "s", "e"], ["hw"]),
    H("Concat", ["neg", "hw"], ["target"], axis=0),
    H("Reshape", ["x", "target"], ["y"])], {"x": rand(2, 3, 4, 5)}, ["y"],
    {"s": arr(2), "e": arr(4), "neg": arr(-1)})

# ---- Opsets onnxruntime no longer runs: expected values from numpy ----
x = rand(2, 3, 4)
c.node("reshape_opset1", "Reshape", {"x": x}, opset=1, shape=[4, 0, -1],
       expected={"y": x.reshape(4, 3, 2)})
a, b = rand(2, 3), rand(2, 2)
c.node("concat_opset1_default_axis", "Concat", {"a": a, "b": b}, opset=1,
       expected={"y": np.concatenate([a, b], axis=1)})
c.node("pad_opset1", "Pad", {"x": a}, opset=1, paddings=[1, 0, 0, 2], value=1.5,
       expected={"y": np.pad(a, ((1, 0), (0, 2)), constant_values=1.5)})
c.node("split_opset1_input", "Split", {"x": x}, initializers={"s": arr(1, 2)}, opset=1,
       n_outputs=2, axis=1, expected={"y0": x[:, :1], "y1": x[:, 1:]})
c.node("split_opset1_attr", "Split", {"x": x}, opset=1, n_outputs=2, axis=2, split=[3, 1],
       expected={"y0": x[:, :, :3], "y1": x[:, :, 3:]})
c.node("dropout_opset6_test", "Dropout", {"x": a}, opset=6, is_test=1, expected={"y": a})

# ---- Extreme parameter values ----
c.node("slice_huge_steps", "Slice", {"x": rand(5, 6)},
       initializers={"s": arr(0, -1), "e": arr(5, -100), "a": arr(0, 1),
                     "st": arr(np.iinfo(I64).max, np.iinfo(I64).min)})
# onnxruntime overflows i + k here; mathematically nothing is kept.
c.node("trilu_huge_k", "Trilu", {"x": rand(3, 4)}, initializers={"k": np.array(np.iinfo(I64).max, I64)},
       expected={"y": np.zeros((3, 4), np.float32)})
c.node("trilu_huge_neg_k", "Trilu", {"x": rand(3, 4)},
       initializers={"k": np.array(np.iinfo(I64).min, I64)}, upper=0,
       expected={"y": np.zeros((3, 4), np.float32)})
c.node("trilu_huge_k_keep_all", "Trilu", {"x": rand(3, 4)},
       initializers={"k": np.array(np.iinfo(I64).max, I64)}, upper=0)

# ---- Gather of single elements (word copies), large enough to run on several threads ----
c.node("gather_1d_big", "Gather", {"x": rand(5000), "i": randint(20000, low=-5000, high=5000)})
c.node("gather_f16_last_axis", "Gather", {"x": rand(6, 7).astype(np.float16), "i": arr(6, 0, -1)},
       axis=1)
c.node("gather_int8_last_axis", "Gather", {"x": randint(6, 7, dtype=np.int8), "i": arr([[1, 2], [3, 4]])},
       axis=-1)

# ---- Tiled transposes for every element width ----
for dt in (np.int8, np.float16, np.int32, np.float64):
    c.node(f"transpose_tiled_{np.dtype(dt).name}", "Transpose", {"x": (rand(3, 40, 37) * 100).astype(dt)},
           perm=[0, 2, 1])

# ---- Indexing ops large enough to run on several threads ----
c.node("gather_elements_big", "GatherElements", {"x": rand(64, 300), "i": randint(64, 500, high=300)},
       axis=1)
c.node("gather_nd_big", "GatherND", {"x": rand(100, 50, 8), "i": randint(3000, 2, high=50)})

# ---- No-op layouts come back as views; the results must still be right ----
c.node("transpose_moves_ones", "Transpose", {"x": rand(1, 5, 1, 4)}, perm=[2, 1, 0, 3])
c.node("slice_full", "Slice", {"x": rand(3, 4)}, initializers={"s": arr(0, 0), "e": arr(3, 100)})
c.node("slice_leading_rows", "Slice", {"x": rand(4, 3)}, initializers={"s": arr(0), "e": arr(2)})
c.node("expand_same", "Expand", {"x": rand(2, 3)}, initializers={"s": arr(2, 3)})
c.node("expand_rank_only", "Expand", {"x": rand(2, 3)}, initializers={"s": arr(1, 1, 3)})
c.node("tile_ones_int", "Tile", {"x": randint(2, 3)}, initializers={"r": arr(1, 1)})
c.node("pad_zero", "Pad", {"x": rand(2, 3)}, initializers={"p": arr(0, 0, 0, 0)}, mode="reflect")
c.node("depth_to_space_b1", "DepthToSpace", {"x": rand(1, 4, 2, 3)}, blocksize=1)
c.model("view_outputs_both", [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                              helper.make_node("Slice", ["x", "s", "e"], ["y"])],
        {"x": rand(1, 6)}, ["t", "y"], {"s": arr(0), "e": arr(1)})
