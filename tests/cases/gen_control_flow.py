"""Control flow: If, Loop and Scan, run by the core executor with subgraph plans that read
outer-scope values. Expected outputs from onnxruntime."""
import numpy as np
from onnx import TensorProto, helper

from casegen import Cases, rand

c = Cases("control_flow")
N = helper.make_node
F = TensorProto.FLOAT


def vi(name, dtype=F, shape=None):
    return helper.make_tensor_value_info(name, dtype, shape)


def graph(nodes, name, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, list(inits))


# If: the branches read outer-scope values (x, w) and produce different shapes
then_g = graph([N("Add", ["x", "w"], ["t"])], "then", [], [vi("t")])
else_g = graph([N("Mul", ["x", "w"], ["e0"]), N("ReduceSum", ["e0"], ["e"], keepdims=0)], "else", [], [vi("e")])
for flag in (True, False):
    c.model(f"if_outer_scope_{str(flag).lower()}",
            [N("Relu", ["x0"], ["x"]), N("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)],
            {"x0": rand(2, 3), "cond": np.array(flag)}, ["y"], {"w": rand(3)})

# Nested If: an If inside a branch
inner_then = graph([N("Neg", ["x"], ["it"])], "inner_then", [], [vi("it")])
inner_else = graph([N("Abs", ["x"], ["ie"])], "inner_else", [], [vi("ie")])
outer_then = graph([N("If", ["c2"], ["o"], then_branch=inner_then, else_branch=inner_else)], "outer_then", [], [vi("o")])
outer_else = graph([N("Identity", ["x"], ["o2"])], "outer_else", [], [vi("o2")])
c.model("if_nested", [N("If", ["c1"], ["y"], then_branch=outer_then, else_branch=outer_else)],
        {"x": rand(4), "c1": np.array(True), "c2": np.array(False)}, ["y"])

# Loop: a for loop with a loop-carried accumulator, a scan output, and an outer-scope read
body = graph([N("Add", ["acc_in", "step"], ["acc_out"]), N("Identity", ["cond_in"], ["cond_out"]),
              N("Mul", ["acc_out", "acc_out"], ["sq"])],
             "body", [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("acc_in", F, [3])],
             [vi("cond_out", TensorProto.BOOL, []), vi("acc_out", F, [3]), vi("sq", F, [3])])
c.model("loop_for_with_scan_output", [N("Loop", ["trips", "", "acc0"], ["acc", "sqs"], body=body)],
        {"acc0": rand(3), "step": rand(3)}, ["acc", "sqs"], {"trips": np.array(5, dtype=np.int64)})

# Loop: a while loop that stops when the body says so (counts up to a limit)
wbody = graph([N("Add", ["v_in", "one"], ["v_out"]), N("Less", ["v_out", "limit"], ["keep"])],
              "wbody", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("v_in", F, [])],
              [vi("keep", TensorProto.BOOL, []), vi("v_out", F, [])])
c.model("loop_while", [N("Loop", ["", "go", "v0"], ["v"], body=wbody)],
        {"v0": np.array(0.5, dtype=np.float32), "go": np.array(True)}, ["v"],
        {"one": np.array(1.0, dtype=np.float32), "limit": np.array(6.0, dtype=np.float32)})

# Loop using the iteration number, with zero trips; a negative M runs no iteration either (it
# was unbounded in Quilt: fuzz_run hung on a NaN trip count cast to int64)
ibody = graph([N("Cast", ["i"], ["fi"], to=F), N("Add", ["s_in", "fi"], ["s_out"]), N("Identity", ["c"], ["c_out"])],
              "ibody", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("s_in", F, [])],
              [vi("c_out", TensorProto.BOOL, []), vi("s_out", F, [])])
for trips, tag in ((0, "0"), (7, "7"), (-1, "minus_1"), (-2**63, "int64_min")):
    c.model(f"loop_iteration_number_{tag}", [N("Loop", ["m", "", "s0"], ["s"], body=ibody)],
            {"s0": np.array(0.0, dtype=np.float32), "m": np.array(trips, dtype=np.int64)}, ["s"])

# Scan: running sum over axis 0, plus a reversed scan over axis 1 with a scan output on axis 1
sbody = graph([N("Add", ["s_in", "row"], ["s_out"]), N("Identity", ["s_out"], ["y_row"])], "sbody",
              [vi("s_in", F, [4]), vi("row", F, [4])], [vi("s_out", F, [4]), vi("y_row", F, [4])])
c.model("scan_running_sum", [N("Scan", ["s0", "xs"], ["s", "ys"], body=sbody, num_scan_inputs=1)],
        {"s0": rand(4), "xs": rand(5, 4)}, ["s", "ys"])
c.model("scan_reverse_axes", [N("Scan", ["s0", "xs"], ["s", "ys"], body=sbody, num_scan_inputs=1,
                                scan_input_axes=[1], scan_input_directions=[1],
                                scan_output_axes=[1], scan_output_directions=[1])],
        {"s0": rand(4), "xs": rand(4, 6)}, ["s", "ys"])

# Scan-8: batch axis 0 on states and scan inputs, sequence axis 1, optional sequence_lens
# (scan outputs past an entry's length stay zero), a reversed scan input (directions). onnx's
# reference and onnxruntime's CPU provider have no Scan-8: the expected values are the body's
# running sum computed here, entry by entry.
def scan8(name, s0, xs, lens=None, reverse=False):
    ins = {"s0": s0, "xs": xs}
    if lens is not None:
        ins["lens"] = lens
    s, ys = s0.copy(), np.zeros_like(xs)
    for b in range(xs.shape[0]):
        n = xs.shape[1] if lens is None else int(lens[b])
        for t in range(n):
            s[b] = s[b] + xs[b, n - 1 - t if reverse else t]
            ys[b, t] = s[b]
    node = N("Scan", ["lens" if lens is not None else "", "s0", "xs"], ["s", "ys"], body=sbody,
             num_scan_inputs=1, **({"directions": [1]} if reverse else {}))
    c.model(name, [node], ins, ["s", "ys"], opset=8, ir_version=4,
            expected={"s": s, "ys": ys})


scan8("scan8_batch", rand(3, 4), rand(3, 5, 4))
scan8("scan8_reversed", rand(3, 4), rand(3, 5, 4), reverse=True)
scan8("scan8_sequence_lens", rand(3, 4), rand(3, 5, 4), lens=np.array([5, 2, 0], np.int64))

# Scan with two scan inputs and an outer-scope weight
s2body = graph([N("Mul", ["a", "b"], ["ab"]), N("Mul", ["ab", "wt"], ["abw"]), N("Add", ["st", "abw"], ["st2"])],
               "s2body", [vi("st", F, [2]), vi("a", F, [2]), vi("b", F, [2])], [vi("st2", F, [2]), vi("abw", F, [2])])
c.model("scan_two_inputs_outer_weight", [N("Scan", ["st0", "as", "bs"], ["st", "out"], body=s2body, num_scan_inputs=2)],
        {"st0": rand(2), "as": rand(3, 2), "bs": rand(3, 2)}, ["st", "out"], {"wt": rand(2)})
