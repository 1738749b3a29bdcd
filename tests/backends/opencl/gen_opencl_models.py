"""Builds the models of the OpenCL backend's tests (tests/backends/opencl/test_opencl.cpp).

usage: gen_opencl_models.py OUT_DIR
Built with onnx.helper from fixed seeds; nothing is downloaded.
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(7)
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out / f"{name}.onnx")


def vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def weight(name, *shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


N = helper.make_node

# A small MLP: MatMul-Add-Relu-Softmax-MatMul, odd sizes (37, 19 and 11 divide no tile or group).
save("mlp", [N("MatMul", ["x", "W1"], ["a"], name="mm1"), N("Add", ["a", "B1"], ["b"], name="add"),
             N("Relu", ["b"], ["c"], name="relu"), N("Softmax", ["c"], ["d"], name="softmax"),
             N("MatMul", ["d", "W2"], ["y"], name="mm2")],
     [vi("x", ["n", 37])], [vi("y", ["n", 11])], [weight("W1", 37, 19), weight("B1", 19), weight("W2", 19, 11)])

# Broadcasting in every direction, views inside the patch and at its boundary.
save("broadcast", [N("Add", ["x", "y"], ["s"], name="add"),              # [3,1,5] + [4,1] -> [3,4,5]
                   N("Mul", ["s", "k"], ["m"], name="mul"),              # * scalar
                   N("PRelu", ["m", "slope"], ["p"], name="prelu"),      # slope [5]
                   N("Reshape", ["p", "shape"], ["r"], name="reshape"),  # view inside: [12, 5]
                   N("Sub", ["r", "row"], ["z"], name="sub"),            # [12,5] - [12,1]
                   N("Flatten", ["z"], ["flat"], name="flatten", axis=0),  # view at the boundary
                   N("Div", ["x", "y2"], ["q"], name="div")],            # [3,1,5] / [1,7,1]
     [vi("x", [3, 1, 5]), vi("y", [4, 1])], [vi("flat", [1, 60]), vi("q", [3, 7, 5])],
     [numpy_helper.from_array(np.array(1.5, np.float32), "k"), weight("slope", 5), ints("shape", [12, 5]),
      weight("row", 12, 1), numpy_helper.from_array(np.linspace(1, 2, 7, dtype=np.float32).reshape(1, 7, 1), "y2")])

# Gemm with transA, transB, alpha, beta and a broadcast C; sizes that divide no tile.
save("gemm", [N("Gemm", ["a", "B", "C"], ["y"], name="gemm", transA=1, transB=1, alpha=0.5, beta=2.0)],
     [vi("a", [67, 33])], [vi("y", [33, 129])], [weight("B", 129, 67), weight("C", 129)])

# Batched MatMul with broadcast batch dims and a rank-1 operand.
save("batched", [N("MatMul", ["x", "W"], ["y"], name="mm"), N("MatMul", ["y", "v"], ["z"], name="mv")],
     [vi("x", [2, 3, 9, 17])], [vi("z", [2, 3, 9])], [weight("W", 3, 17, 13), weight("v", 13)])

# A node OpenCL does not claim (Cos) in the middle: opencl, cpu, opencl patches and transfers.
save("fallback", [N("MatMul", ["x", "W"], ["a"], name="mm"), N("Cos", ["a"], ["b"], name="cos"),
                  N("Relu", ["b"], ["y"], name="relu")],
     [vi("x", [4, 8])], [vi("y", [4, 8])], [weight("W", 8, 8)])

# Unary activations chained, with attributes.
save("activations", [N("LeakyRelu", ["x"], ["a"], alpha=0.2), N("Elu", ["a"], ["b"], alpha=0.7),
                     N("HardSigmoid", ["b"], ["c"], alpha=0.3, beta=0.4), N("Tanh", ["c"], ["d"]),
                     N("Clip", ["x", "lo", "hi"], ["e"]), N("Add", ["d", "e"], ["y"])],
     [vi("x", [1000])], [vi("y", [1000])],
     [numpy_helper.from_array(np.array(-0.5, np.float32), "lo"), numpy_helper.from_array(np.array(0.5, np.float32), "hi")])

# Broadcasts whose innermost dim is long enough for the 16-wide row kernel (37: two chunks and a
# tail; 15 rows, not a multiple of the work-group's 8), with the broadcast operand on either
# side, then every vectorised unary op on values that include NaN and +-inf.
save("vector_rows",
     [N("Add", ["x", "bias"], ["a"], name="add_row"),            # [5,3,37] + [37]
      N("Max", ["a", "col"], ["b"], name="max_col"),             # [5,3,37] max [5,3,1]
      N("Sub", ["row", "b"], ["c"], name="sub_row_first"),       # [1,37] - [5,3,37]
      N("Min", ["c", "x"], ["d"], name="min_same"),              # same shape, flat
      N("PRelu", ["d", "slope"], ["e0"], name="prelu_row"),      # slope [37]
      N("Pow", ["e0", "three"], ["e1"], name="pow_3"),           # products for 2 and 3
      N("Pow", ["e1", "two"], ["e2"], name="pow_2"),
      N("Pow", ["e2", "half"], ["e"], name="pow_half")] +        # pow() otherwise
     [N(op, ["x"], [op.lower()], name=op.lower(), **attrs) for op, attrs in [
         ("Relu", {}), ("LeakyRelu", {"alpha": 0.3}), ("Sigmoid", {}), ("Tanh", {}), ("Exp", {}),
         ("Log", {}), ("Sqrt", {}), ("Neg", {}), ("Abs", {}), ("Erf", {}), ("Reciprocal", {}),
         ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("HardSwish", {}), ("Softplus", {}),
         ("Elu", {"alpha": 0.7}), ("Selu", {})]] +
     [N("Clip", ["x", "lo", "hi"], ["clip"], name="clip")],
     [vi("x", [5, 3, 37]), vi("col", [5, 3, 1]), vi("row", [1, 37])],
     [vi("e", [5, 3, 37])] + [vi(op.lower(), [5, 3, 37]) for op in [
         "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Neg", "Abs", "Erf",
         "Reciprocal", "HardSigmoid", "HardSwish", "Softplus", "Elu", "Selu", "Clip"]],
     [weight("bias", 37), weight("slope", 37),
      numpy_helper.from_array(np.array(3.0, np.float32), "three"),
      numpy_helper.from_array(np.array(2.0, np.float32), "two"),
      numpy_helper.from_array(np.array([0.5], np.float32), "half"),
      numpy_helper.from_array(np.array(-0.5, np.float32), "lo"),
      numpy_helper.from_array(np.array(0.5, np.float32), "hi")])

# Where with a bool condition: a run-time mask [1,1,8,37] over [2,3,8,37] scores and a constant
# scalar (GPT-2's causal mask), a constant condition broadcast along rows, and a short innermost
# dim (5) that takes the one-value-per-work-item kernel.
save("where",
     [N("Where", ["mask", "x", "neg"], ["a"], name="where_mask"),
      N("Where", ["rowmask", "a", "x"], ["b"], name="where_const_cond"),
      N("Where", ["small_mask", "s", "t"], ["c"], name="where_short")],
     [helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 1, 8, 37]), vi("x", [2, 3, 8, 37]),
      helper.make_tensor_value_info("small_mask", TensorProto.BOOL, [4, 1]), vi("s", [4, 5]),
      vi("t", [5])],
     [vi("b", [2, 3, 8, 37]), vi("c", [4, 5])],
     [numpy_helper.from_array(np.array(-1e4, np.float32), "neg"),
      numpy_helper.from_array(rng.random(37) < 0.5, "rowmask")])

# Conv + activation pairs the OpenCL patch folds (the activation applied as the conv stores its
# tile): direct + Relu, depthwise + HardSwish, 1x1 + Clip (Relu6), strided + Sigmoid,
# LeakyRelu, HardSigmoid; and pairs it must not fold: the conv's output read twice, and the
# conv's output a graph output.
save("conv_act",
     [N("Conv", ["x", "cw1", "cb1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
      N("Relu", ["c1"], ["r1"], name="relu1"),
      N("Conv", ["r1", "cwd"], ["c2"], name="dw", group=8, pads=[2, 2, 2, 2], strides=[2, 2]),
      N("HardSwish", ["c2"], ["h2"], name="hswish2"),
      N("Conv", ["h2", "cw3", "cb3"], ["c3"], name="pw3"),
      N("Clip", ["c3", "zero", "six"], ["y3"], name="relu6_3"),
      N("Conv", ["x", "cw4"], ["c4"], name="conv4", strides=[2, 2]),
      N("Sigmoid", ["c4"], ["s4"], name="sigmoid4"),
      N("LeakyRelu", ["s4"], ["l4"], name="leaky4", alpha=0.3),
      N("Conv", ["x", "cw5"], ["c5"], name="conv5", pads=[1, 1, 1, 1]),
      N("LeakyRelu", ["c5"], ["l5"], name="leaky5", alpha=0.2),
      N("HardSigmoid", ["l5"], ["y5"], name="hsig5", alpha=0.3, beta=0.4),
      N("Conv", ["x", "cw6"], ["c6"], name="conv6", pads=[1, 1, 1, 1]),
      N("HardSigmoid", ["c6"], ["g6"], name="hsig6", alpha=0.25, beta=0.5),
      N("Add", ["c6", "g6"], ["y6"], name="two_readers"),
      N("Conv", ["x", "cw7"], ["c7"], name="conv7", pads=[1, 1, 1, 1]),
      N("Relu", ["c7"], ["y7"], name="relu_of_output"),
      # SiLU (Sigmoid then Mul) in both operand orders, and one whose Sigmoid is read twice
      N("Conv", ["x", "cw8"], ["c8"], name="conv8", pads=[1, 1, 1, 1]),
      N("Sigmoid", ["c8"], ["s8"], name="silu_sigmoid8"),
      N("Mul", ["c8", "s8"], ["y8"], name="silu_mul8"),
      N("Conv", ["x", "cw9"], ["c9"], name="conv9", strides=[2, 2]),
      N("Sigmoid", ["c9"], ["s9"], name="silu_sigmoid9"),
      N("Mul", ["s9", "c9"], ["y9"], name="silu_mul9"),
      N("Conv", ["x", "cw10"], ["c10"], name="conv10", pads=[1, 1, 1, 1]),
      N("Sigmoid", ["c10"], ["s10"], name="sigmoid10"),
      N("Mul", ["c10", "s10"], ["m10"], name="mul10"),
      N("Add", ["m10", "s10"], ["y10"], name="sigmoid_read_twice")],
     [vi("x", ["n", 8, "h", "w"])],
     [vi("y3", ["n", 40, "h3", "w3"]), vi("l4", ["n", 12, "h4", "w4"]), vi("y5", ["n", 8, "h", "w"]),
      vi("y6", ["n", 8, "h", "w"]), vi("c7", ["n", 8, "h", "w"]), vi("y7", ["n", 8, "h", "w"]),
      vi("y8", ["n", 8, "h", "w"]), vi("y9", ["n", 8, "h9", "w9"]), vi("y10", ["n", 8, "h", "w"])],
     [weight("cw1", 8, 8, 3, 3), weight("cb1", 8), weight("cwd", 8, 1, 5, 5),
      weight("cw3", 40, 8, 1, 1), weight("cb3", 40), weight("cw4", 12, 8, 3, 3),
      weight("cw5", 8, 8, 3, 3), weight("cw6", 8, 8, 3, 3), weight("cw7", 8, 8, 3, 3),
      weight("cw8", 8, 8, 3, 3), weight("cw9", 8, 8, 3, 3), weight("cw10", 8, 8, 3, 3),
      numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
      numpy_helper.from_array(np.array(6.0, np.float32), "six")])

# A big intermediate, for the allocation-failure test (max_alloc_bytes).
save("big", [N("Relu", ["x"], ["a"], name="relu"), N("Neg", ["a"], ["y"], name="neg")],
     [vi("x", ["n", 1024])], [vi("y", ["n", 1024])])

# B computed at run time (packed by the pack_b kernel at each run, not at compile).
save("runtime_b", [N("MatMul", ["x", "y"], ["z"], name="mm"),                    # [2,1,5,7] @ [3,7,18]
                   N("Gemm", ["a", "b"], ["g"], name="gemm", transB=1, alpha=1.5)],  # [5,7] x [9,7]^T
     [vi("x", [2, 1, 5, 7]), vi("y", [3, 7, 18]), vi("a", [5, 7]), vi("b", [9, 7])],
     [vi("z", [2, 3, 5, 18]), vi("g", [5, 9])])

# The MLP again with other weights of the same shapes: constants shared between the sessions open
# on a device are keyed by their content, never by shape alone.
save("mlp_other_weights",
     [N("MatMul", ["x", "W1"], ["a"], name="mm1"), N("Add", ["a", "B1"], ["b"], name="add"),
      N("Relu", ["b"], ["c"], name="relu"), N("Softmax", ["c"], ["d"], name="softmax"),
      N("MatMul", ["d", "W2"], ["y"], name="mm2")],
     [vi("x", ["n", 37])], [vi("y", ["n", 11])], [weight("W1", 37, 19), weight("B1", 19), weight("W2", 19, 11)])
