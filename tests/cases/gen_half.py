"""float16 and bfloat16 models on ops whose CPU kernels compute in float32 only (Conv,
ConvTranspose, MatMul, Gemm, the pools, ...): Quilt widens the half inputs, runs the float32
kernel and rounds the half outputs back (backends/cpu/widen.cpp), as onnxruntime's
InsertCastTransformer does with Cast nodes. The expected outputs are exactly that: onnxruntime
runs the float32 model on the half inputs' values, and its outputs are rounded to the half type
(to nearest even). A half result may then differ from Quilt's in its last bit where the two
float32 sums differ in theirs: the tolerance is one half-precision step."""
import ml_dtypes
import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from casegen import Cases, rand

c = Cases("half")
N = helper.make_node
HALF = {"float16": (np.float16, TensorProto.FLOAT16, 2e-3, 2e-3),
        "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16, 1.6e-2, 1.6e-2)}


def f32_outputs(nodes, inputs, outputs, initializers, opset):
    g = helper.make_graph(nodes, "ref", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                                         for k, v in inputs.items()],
                          [helper.make_empty_tensor_value_info(o) for o in outputs],
                          [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return s.run(outputs, inputs)


def case(name, nodes, inputs, outputs, initializers=None, opset=17, int_outputs=(), ref_nodes=None):
    """The model in each half type: float inputs and initializers cast to it; outputs named in
    int_outputs (indices) keep their integer type. nodes may be a function of the half type's
    TensorProto code (for attributes that name it); the reference runs ref_nodes (default: the
    same nodes, or nodes(TensorProto.FLOAT); a function of the half type's code too) in float32."""
    initializers = initializers or {}
    for tname, (npt, code, rtol, atol) in HALF.items():
        hnodes = nodes(code) if callable(nodes) else nodes
        rnodes = ref_nodes or nodes
        rnodes = rnodes(code if ref_nodes else TensorProto.FLOAT) if callable(rnodes) else rnodes
        hin = {k: v.astype(npt) for k, v in inputs.items()}
        hinit = {k: (v.astype(npt) if v.dtype == np.float32 else v) for k, v in initializers.items()}
        ref = f32_outputs(rnodes, {k: v.astype(np.float32) for k, v in hin.items()}, outputs,
                          {k: (v.astype(np.float32) if v.dtype == npt else v) for k, v in hinit.items()},
                          opset)
        expected = {o: (r if o in int_outputs else r.astype(npt)) for o, r in zip(outputs, ref)}
        types = {o: code for o in outputs if o not in int_outputs}
        c.model(f"{name}_{tname}", hnodes, hin, outputs, hinit, opset, rtol, atol, expected, types)


X = {"x": rand(2, 3, 10, 9)}
case("conv", [N("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1])], X, ["y"],
     {"w": rand(8, 3, 3, 3), "b": rand(8)})
case("conv_strided_grouped", [N("Conv", ["x6", "w"], ["y"], strides=[2, 2], group=2)],
     {"x6": rand(1, 6, 11, 9)}, ["y"], {"w": rand(4, 3, 3, 3)})
case("conv_depthwise_relu", [N("Conv", ["x", "w"], ["c"], group=3, pads=[2, 2, 2, 2]), N("Relu", ["c"], ["y"])],
     X, ["y"], {"w": rand(3, 1, 5, 5)})
case("conv_transpose", [N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1])], X,
     ["y"], {"w": rand(3, 4, 3, 3), "b": rand(4)})
case("matmul", [N("MatMul", ["a", "b"], ["y"])], {"a": rand(2, 5, 16), "b": rand(16, 7)}, ["y"])
case("matmul_constant_weight", [N("MatMul", ["a", "w"], ["y"])], {"a": rand(3, 32)}, ["y"], {"w": rand(32, 24)})
case("gemm", [N("Gemm", ["a", "w", "b"], ["y"], transB=1, alpha=0.5)], {"a": rand(4, 16)}, ["y"],
     {"w": rand(10, 16), "b": rand(10)})
case("maxpool_with_indices", [N("MaxPool", ["x"], ["y", "i"], kernel_shape=[3, 3], strides=[2, 2])], X,
     ["y", "i"], int_outputs=("i",))
case("averagepool", [N("AveragePool", ["x"], ["y"], kernel_shape=[3, 2], pads=[1, 0, 1, 0])], X, ["y"])
case("global_average_pool", [N("GlobalAveragePool", ["x"], ["y"])], X, ["y"])
# A small CNN as `model.half()` exports it: every weight and activation half.
case("small_cnn", [N("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]), N("Relu", ["c1"], ["r1"]),
                   N("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
                   N("Conv", ["p1", "w2"], ["c2"]), N("GlobalAveragePool", ["c2"], ["g"]),
                   N("Flatten", ["g"], ["f"]), N("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
                   N("Softmax", ["y"], ["probs"])],
     X, ["probs"], {"w1": rand(8, 3, 3, 3), "b1": rand(8), "w2": rand(6, 8, 3, 3), "wf": rand(5, 6), "bf": rand(5)})

# ---- a CPU patch holds its half values in float32 (backends/cpu/half_interior.hpp) ----------
# Only the patch's edges convert: these cases put the edges in every place one can be.
# A held value (the Conv's) that is also a model output and read by a node that keeps half
# (TopK): rounded once, TopK sees the rounded value (the reference rounds it too); TopK's half
# output is widened once for the held Add that reads it.
case("held_value_also_output_and_half_reader",
     [N("Conv", ["x", "w"], ["c"]), N("TopK", ["c", "k"], ["v", "i"]), N("Add", ["c", "v"], ["y"])], X,
     ["c", "y"], {"w": rand(4, 3, 3, 3), "k": np.array([7], np.int64)},
     ref_nodes=lambda t: [N("Conv", ["x", "w"], ["c"]), N("Cast", ["c"], ["ch"], to=t),
                          N("Cast", ["ch"], ["cr"], to=TensorProto.FLOAT), N("TopK", ["cr", "k"], ["v", "i"]),
                          N("Add", ["c", "v"], ["y"])])
# Casts inside the model: to float32 and back to the half type, around a float32 Mul; the Cast
# to half becomes a Cast to float32 inside the patch.
SCALE = N("Constant", [], ["s"], value=helper.make_tensor("s", TensorProto.FLOAT, [1], [0.75]))
case("casts_inside", lambda t: [SCALE, N("Cast", ["x"], ["xf"], to=TensorProto.FLOAT), N("Mul", ["xf", "s"], ["m"]),
                                N("Cast", ["m"], ["mh"], to=t), N("Conv", ["mh", "w"], ["c"]),
                                N("Relu", ["c"], ["y"])],
     X, ["y"], {"w": rand(4, 3, 3, 3)},
     ref_nodes=[SCALE, N("Mul", ["x", "s"], ["m"]), N("Conv", ["m", "w"], ["c"]), N("Relu", ["c"], ["y"])])
# Inside the patch nothing is rounded to the half type between nodes: x + 1024 - 1024 gives x
# back (rounded after each node, float16 would keep x's integer part only, bfloat16 a multiple
# of 8). Computed as written in float16, onnxruntime would return the rounded sums.
case("held_chain_not_rounded_between_nodes",
     [N("Add", ["x", "big"], ["s"]), N("Sub", ["s", "big"], ["y"])], X, ["y"],
     {"big": np.full([1], 1024, np.float32)})
# A node whose output is not a float (Greater, Cast to int32) decides on the half value as the
# model rounds it: 1000 + x rounded to float16 before the comparison / the truncation.
case("integer_output_reads_the_rounded_value",
     lambda t: [N("Add", ["x", "big"], ["s"]), N("Greater", ["s", "big"], ["g"]),
                N("Cast", ["s"], ["i"], to=TensorProto.INT32)],
     X, ["g", "i"], {"big": np.full([1], 1000, np.float32)}, int_outputs=("g", "i"),
     ref_nodes=lambda t: [N("Add", ["x", "big"], ["s0"]), N("Cast", ["s0"], ["sh"], to=t),
                          N("Cast", ["sh"], ["s"], to=TensorProto.FLOAT), N("Greater", ["s", "big"], ["g"]),
                          N("Cast", ["s"], ["i"], to=TensorProto.INT32)])
