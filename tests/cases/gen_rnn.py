"""Cases of the rnn op family: RNN, GRU and LSTM (float32, and float64 for GRU/LSTM), over
directions, layouts, sequence_lens, initial states, peepholes, clip, activations and opsets.
Expected values come from onnxruntime unless noted."""
import numpy as np
import onnx

from casegen import Cases, rand
from onnx import helper

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]

c = Cases("rnn")


def case(name, op, seq=3, batch=2, inp=4, hid=None, direction="forward", layout=0, bias=False,
         lens=None, h0=False, c0=False, peep=False, outputs=(0, 1), opset=17, dtype=np.float32,
         const_weights=False, expected=None, scale=1.0, symbolic=False, rtol=1e-4, atol=1e-5,
         **attrs):
    """One RNN/GRU/LSTM node. outputs: indices of the outputs to request (others left empty).
    lens: per-batch sequence_lens. scale widens the input range (to reach clip and saturation).
    symbolic: declare every input dim as a named symbol, so that shapes are known only at run
    time."""
    g = GATES[op]
    hid = hid or attrs.get("hidden_size", 5)
    dirs = 2 if direction == "bidirectional" else 1
    x_shape = (seq, batch, inp) if layout == 0 else (batch, seq, inp)
    state = (dirs, batch, hid) if layout == 0 else (batch, dirs, hid)
    vals = {
        "X": rand(*x_shape, dtype=dtype) * scale,
        "W": rand(dirs, g * hid, inp, dtype=dtype),
        "R": rand(dirs, g * hid, hid, dtype=dtype),
    }
    if bias:
        vals["B"] = rand(dirs, 2 * g * hid, dtype=dtype)
    if lens is not None:
        vals["sequence_lens"] = np.array(lens, dtype=np.int32)
    if h0:
        vals["initial_h"] = rand(*state, dtype=dtype)
    if c0:
        vals["initial_c"] = rand(*state, dtype=dtype)
    if peep:
        vals["P"] = rand(dirs, 3 * hid, dtype=dtype)
    last = max(NAMES.index(k) for k in vals)
    node_inputs = [k if k in vals else "" for k in NAMES[: last + 1]]
    out_names = ["Y", "Y_h", "Y_c"][: max(outputs) + 1]
    node_outputs = [o if i in outputs else "" for i, o in enumerate(out_names)]
    if direction != "forward":
        attrs["direction"] = direction
    if layout:
        attrs["layout"] = layout
    node = helper.make_node(op, node_inputs, node_outputs, name=name, **attrs)
    inits = {}
    if const_weights:
        inits = {k: vals.pop(k) for k in ("W", "R", "B") if k in vals}
    wanted = [o for o in node_outputs if o]
    tdtype = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    if expected is not None:
        feed = dict(vals, **inits)
        expected = dict(zip(wanted, expected(node, feed, wanted)))
    c.model(name, [node], vals, wanted, inits, opset, expected=expected,
            output_types={o: tdtype for o in wanted}, rtol=rtol, atol=atol)
    if symbolic:
        path = c.dir / name / "model.onnx"
        model = onnx.load(path)
        for vi in list(model.graph.input) + list(model.graph.output):
            for i, dim in enumerate(vi.type.tensor_type.shape.dim):
                dim.dim_param = f"{vi.name}_{i}"
        onnx.save(model, path)


def numpy_rnn(node, feed, wanted):
    """A plain numpy RNN with Tanh, layout 0, no sequence_lens (onnxruntime's CPU provider has
    no float64 RNN and onnx's reference evaluator only one direction)."""
    x, w, r = feed["X"], feed["W"], feed["R"]
    dirs, hid = w.shape[0], r.shape[2]
    b = feed.get("B", np.zeros((dirs, 2 * hid), x.dtype))
    h0 = feed.get("initial_h", np.zeros((dirs, x.shape[1], hid), x.dtype))
    y = np.zeros((x.shape[0], dirs, x.shape[1], hid), x.dtype)
    for d in range(dirs):
        h = h0[d]
        steps = range(x.shape[0]) if d == 0 else reversed(range(x.shape[0]))
        for t in steps:
            h = np.tanh(x[t] @ w[d].T + h @ r[d].T + b[d, :hid] + b[d, hid:])
            y[t, d] = h
        h0 = h0.copy()
        h0[d] = h
    return [y if o == "Y" else h0 for o in wanted]


def reference(node, feed, wanted):
    """onnx's reference evaluator (onnxruntime's CPU provider has no float64 GRU or LSTM)."""
    from onnx.reference import ReferenceEvaluator

    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for k, v in feed.items()],
        [helper.make_empty_tensor_value_info(o) for o in wanted])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return ReferenceEvaluator(model).run(wanted, feed)


def ort_with(drop=(), **extra):
    """onnxruntime on the node with extra attributes and without those in drop (it insists on
    hidden_size, which the spec lets a model leave out: the size then comes from R)."""
    def run(node, feed, wanted):
        import onnxruntime as ort

        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute
                 if a.name not in drop}
        n = helper.make_node(node.op_type, node.input, node.output, **extra, **attrs)
        graph = helper.make_graph(
            [n], "g",
            [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in feed.items()],
            [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(feed["X"].dtype),
                                           None) for o in wanted])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(wanted, feed)
    return run


def via_layout0(node, feed, wanted):
    """onnxruntime lacks layout 1 (batch first): run the layout-0 node on transposed inputs and
    transpose its outputs back."""
    feed = dict(feed)
    feed["X"] = feed["X"].transpose(1, 0, 2)
    for k in ("initial_h", "initial_c"):
        if k in feed:
            feed[k] = feed[k].transpose(1, 0, 2)
    outs = ort_with(drop=("layout",))(node, feed, wanted)
    return [y.transpose(2, 0, 1, 3) if name == "Y" else y.transpose(1, 0, 2)
            for name, y in zip(wanted, outs)]


for op in ("RNN", "GRU", "LSTM"):
    o = op.lower()
    all_out = (0, 1, 2) if op == "LSTM" else (0, 1)
    extra = dict(c0=True) if op == "LSTM" else {}
    case(f"{o}_defaults", op, hidden_size=5)
    case(f"{o}_no_hidden_size_attr", op, expected=ort_with(hidden_size=5))
    case(f"{o}_symbolic_dims", op, bias=True, h0=True, lens=[3, 1], outputs=all_out,
         symbolic=True, hidden_size=5, **extra)
    case(f"{o}_symbolic_dims_no_hidden_size", op, direction="bidirectional", outputs=all_out,
         symbolic=True, expected=ort_with(hidden_size=5))
    case(f"{o}_bias", op, bias=True, hidden_size=5)
    case(f"{o}_initial_h", op, bias=True, h0=True, outputs=all_out, hidden_size=5, **extra)
    case(f"{o}_only_y", op, bias=True, outputs=(0,), hidden_size=5)
    case(f"{o}_only_y_h", op, bias=True, outputs=(1,), hidden_size=5)
    case(f"{o}_reverse", op, direction="reverse", bias=True, h0=True, outputs=all_out,
         hidden_size=5, **extra)
    case(f"{o}_bidirectional", op, direction="bidirectional", bias=True, h0=True,
         outputs=all_out, hidden_size=5, **extra)
    case(f"{o}_seq_lens", op, seq=5, batch=4, lens=[5, 2, 1, 3], bias=True, h0=True,
         outputs=all_out, hidden_size=5, **extra)
    case(f"{o}_seq_lens_reverse", op, seq=5, batch=3, lens=[3, 5, 1], direction="reverse",
         bias=True, outputs=all_out, hidden_size=5)
    case(f"{o}_seq_lens_bidirectional", op, seq=4, batch=3, lens=[2, 4, 3],
         direction="bidirectional", bias=True, h0=True, outputs=all_out, hidden_size=5, **extra)
    case(f"{o}_layout1", op, layout=1, bias=True, h0=True, outputs=all_out, opset=14,
         hidden_size=5, expected=via_layout0, **extra)
    case(f"{o}_layout1_bidirectional_seq_lens", op, seq=4, batch=3, layout=1, lens=[4, 1, 3],
         direction="bidirectional", bias=True, h0=True, outputs=all_out, opset=22,
         hidden_size=3, expected=via_layout0, **extra)
    case(f"{o}_opset7", op, bias=True, h0=True, outputs=all_out, opset=7, hidden_size=5,
         **extra)
    case(f"{o}_opset22", op, bias=True, outputs=all_out, opset=22, hidden_size=4)
    case(f"{o}_clip", op, bias=True, scale=4.0, outputs=all_out, clip=0.7, hidden_size=5)
    case(f"{o}_seq1_batch1", op, seq=1, batch=1, inp=1, hid=1, bias=True, hidden_size=1)
    case(f"{o}_odd_large", op, seq=7, batch=5, inp=17, hid=33, direction="bidirectional",
         bias=True, h0=True, outputs=all_out, hidden_size=33, **extra)
    case(f"{o}_const_weights", op, seq=6, batch=3, inp=8, hid=6, bias=True, h0=True,
         const_weights=True, outputs=all_out, hidden_size=6, **extra)
    # W and R transposed once at creation: a streaming step (batch 1, one time step, VAD-sized)
    # and a batch wide enough for the input projection to go through sgemm.
    case(f"{o}_const_weights_stream_step", op, seq=1, batch=1, inp=128, hid=128, bias=True,
         h0=True, const_weights=True, outputs=all_out, hidden_size=128, **extra)
    case(f"{o}_const_weights_wide_batch_bidirectional", op, seq=5, batch=9, inp=20, hid=16,
         direction="bidirectional", bias=True, h0=True, const_weights=True, outputs=all_out,
         hidden_size=16, **extra)
    case(f"{o}_long_sequence", op, seq=40, batch=2, inp=3, hid=8, bias=True, outputs=all_out,
         hidden_size=8)
    # onnxruntime aborts on an empty batch; the outputs are empty too.
    case(f"{o}_batch0_empty", op, seq=3, batch=0, outputs=all_out, hidden_size=4,
         expected=lambda node, feed, wanted: [
             np.zeros((3, 1, 0, 4) if w == "Y" else (1, 0, 4), np.float32) for w in wanted])
    # The same 2^31 steps long (fuzz_run: LSTM ran every step on no rows, two minutes); Y_h only.
    case(f"{o}_batch0_long_empty", op, seq=2**31, batch=0, outputs=(1,), hidden_size=4,
         expected=lambda node, feed, wanted: [np.zeros((1, 0, 4), np.float32)])

# ---- RNN activations (one per direction) ----
case("rnn_relu", "RNN", bias=True, activations=["Relu"], hidden_size=5)
case("rnn_sigmoid", "RNN", bias=True, activations=["Sigmoid"], hidden_size=5)
case("rnn_bidirectional_relu_tanh", "RNN", direction="bidirectional", bias=True,
     activations=["Relu", "Tanh"], hidden_size=5)
case("rnn_leakyrelu_alpha", "RNN", bias=True, scale=3.0, activations=["LeakyRelu"],
     activation_alpha=[0.2], hidden_size=5)
case("rnn_hardsigmoid", "RNN", bias=True, scale=3.0, activations=["HardSigmoid"],
     activation_alpha=[0.3], activation_beta=[0.4], hidden_size=5)
case("rnn_affine", "RNN", bias=True, activations=["Affine"], activation_alpha=[0.5],
     activation_beta=[0.1], hidden_size=5)
case("rnn_scaledtanh", "RNN", bias=True, activations=["ScaledTanh"], activation_alpha=[1.5],
     activation_beta=[0.7], hidden_size=5)
case("rnn_elu", "RNN", bias=True, scale=3.0, activations=["Elu"], activation_alpha=[0.8],
     hidden_size=5)
case("rnn_thresholdedrelu", "RNN", bias=True, scale=3.0, activations=["ThresholdedRelu"],
     activation_alpha=[0.3], hidden_size=5)
case("rnn_softsign", "RNN", bias=True, scale=3.0, activations=["Softsign"], hidden_size=5)
case("rnn_softplus", "RNN", bias=True, activations=["Softplus"], hidden_size=5)
case("rnn_bidirectional_leaky_elu", "RNN", direction="bidirectional", bias=True, scale=3.0,
     activations=["LeakyRelu", "Elu"], activation_alpha=[0.1, 0.6], hidden_size=4)
# onnxruntime's CPU provider has no float64 RNN.
case("rnn_float64", "RNN", bias=True, h0=True, dtype=np.float64, hidden_size=5,
     expected=numpy_rnn)
case("rnn_float64_bidirectional", "RNN", direction="bidirectional", bias=True, dtype=np.float64,
     hidden_size=4, expected=numpy_rnn)

# ---- GRU ----
case("gru_linear_before_reset", "GRU", bias=True, h0=True, linear_before_reset=1, hidden_size=5)
case("gru_linear_before_reset_bidirectional_seq_lens", "GRU", seq=4, batch=3, lens=[1, 4, 2],
     direction="bidirectional", bias=True, h0=True, linear_before_reset=1, hidden_size=5)
case("gru_linear_before_reset_clip", "GRU", bias=True, scale=4.0, linear_before_reset=1,
     clip=0.5, hidden_size=5)
case("gru_activations_relu_tanh", "GRU", bias=True, activations=["HardSigmoid", "Relu"],
     activation_alpha=[0.25], activation_beta=[0.45], hidden_size=5)
case("gru_bidirectional_activations", "GRU", direction="bidirectional", bias=True, scale=2.0,
     activations=["Sigmoid", "LeakyRelu", "HardSigmoid", "Softsign"],
     activation_alpha=[0.3, 0.15], activation_beta=[0.55], hidden_size=4)
case("gru_affine_leakyrelu", "GRU", bias=True, activations=["Affine", "LeakyRelu"],
     activation_alpha=[0.3, 0.5], activation_beta=[0.2], hidden_size=3)
case("gru_lowercase_activations", "GRU", bias=True, activations=["sigmoid", "relu"],
     hidden_size=5)
case("gru_float64", "GRU", bias=True, h0=True, dtype=np.float64, hidden_size=5,
     expected=reference)
case("gru_float64_linear_before_reset", "GRU", bias=True, dtype=np.float64,
     linear_before_reset=1, hidden_size=5, expected=reference)

# ---- LSTM ----
case("lstm_peepholes", "LSTM", bias=True, h0=True, c0=True, peep=True, outputs=(0, 1, 2),
     hidden_size=5)
case("lstm_peepholes_bidirectional_seq_lens", "LSTM", seq=5, batch=3, lens=[5, 2, 4],
     direction="bidirectional", bias=True, h0=True, c0=True, peep=True, outputs=(0, 1, 2),
     hidden_size=4)
case("lstm_peepholes_no_bias", "LSTM", peep=True, outputs=(0, 1, 2), hidden_size=4)
case("lstm_input_forget", "LSTM", bias=True, h0=True, c0=True, outputs=(0, 1, 2),
     input_forget=1, hidden_size=5)
case("lstm_input_forget_peepholes", "LSTM", bias=True, c0=True, peep=True, outputs=(0, 1, 2),
     input_forget=1, hidden_size=5)
case("lstm_clip_peepholes", "LSTM", bias=True, scale=4.0, c0=True, peep=True,
     outputs=(0, 1, 2), clip=0.6, hidden_size=5)
case("lstm_only_y_c", "LSTM", bias=True, c0=True, outputs=(2,), hidden_size=5)
case("lstm_activations", "LSTM", bias=True, activations=["HardSigmoid", "Tanh", "Softsign"],
     activation_alpha=[0.25], activation_beta=[0.45], outputs=(0, 1, 2), hidden_size=5)
case("lstm_bidirectional_activations", "LSTM", direction="bidirectional", bias=True,
     activations=["Sigmoid", "Relu", "Tanh", "Sigmoid", "Tanh", "Elu"], activation_alpha=[0.7],
     outputs=(0, 1, 2), hidden_size=4)
# onnxruntime's CPU provider has no float64 LSTM.
case("lstm_float64", "LSTM", bias=True, h0=True, c0=True, peep=True, dtype=np.float64,
     outputs=(0, 1), hidden_size=5, expected=reference)
case("lstm_float64_no_bias", "LSTM", seq=5, batch=3, dtype=np.float64, outputs=(0, 1),
     hidden_size=3, expected=reference)

# Small batch, wide hidden: the recurrence product is split over threads by column stripes
# (the last one partial for GRU's 3 * 300 columns). Sums of hundreds of products of inputs in
# [-1, 1] differ from onnxruntime's by ~1e-5 with another summation order: atol 1e-4.
case("lstm_wide_small_batch", "LSTM", seq=3, batch=2, inp=8, bias=True, h0=True, c0=True,
     outputs=(0, 1, 2), hidden_size=256, atol=1e-4)
case("gru_wide_batch1", "GRU", seq=3, batch=1, inp=5, bias=True, h0=True, hidden_size=300,
     atol=1e-4)
case("rnn_wide_bidirectional", "RNN", seq=3, batch=3, inp=5, bias=True,
     direction="bidirectional", hidden_size=700, atol=1e-4)


def via_float32(node, feed, wanted):
    """float16 runs in float32: onnxruntime's float32 answer on the widened inputs, rounded to
    float16 (its CPU provider has no float16 RNN, GRU or LSTM)."""
    wide = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in feed.items()}
    return [y.astype(np.float16) for y in ort_with()(node, wide, wanted)]


# float16 outputs may differ by one float16 ulp (~1e-3) where float32 answers straddle a
# rounding boundary.
F16 = dict(dtype=np.float16, expected=via_float32, rtol=2e-3, atol=1e-3)
case("rnn_float16", "RNN", bias=True, h0=True, hidden_size=5, **F16)
case("gru_float16_bidirectional_seq_lens", "GRU", seq=4, batch=3, lens=[4, 2, 1],
     direction="bidirectional", bias=True, h0=True, hidden_size=6, **F16)
case("lstm_float16_peepholes", "LSTM", bias=True, h0=True, c0=True, peep=True,
     outputs=(0, 1, 2), hidden_size=5, **F16)
