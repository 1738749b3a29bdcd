"""The zoo's "small" family: models of the size that run thousands of times a second, written out
with onnx.helper the way their exporters write them (no torch needed), with random weights from a
fixed seed.

- vad:      a streaming voice-activity detector shaped like Silero VAD: one 512-sample chunk and an
            LSTM state in, a speech probability and the next state out; the sample rate picks one
            of two If branches (16 kHz / 8 kHz), each an STFT-as-Conv, four conv blocks, an LSTM
            step and a sigmoid head, reading the chunk and the state from the outer scope.
- ocr_cls:  a text-direction classifier shaped like PaddleOCR's (a small MobileNetV3 on a 48x192
            crop), as paddle2onnx writes it: opset 11, every weight a Constant node, a
            BatchNormalization after every Conv, hard-swish written out as Add -> Clip -> Div -> Mul.
- mlp:      a 3-layer perceptron (256 -> 512 -> 512 -> 10), MatMul + Add + Relu as exporters write
            Linear layers with a batch dim.
- kws:      a keyword-spotting DS-CNN (49x10 MFCC in, 12 classes): Conv + BN + Relu, four depthwise-
            separable blocks, average pool, Gemm, Softmax.

Each builder returns (model, inputs) with inputs a dict name -> numpy array.
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

SEED = 0


class Graph:
    """Collects nodes and initializers; weights become initializers or, with constants=True,
    Constant nodes (as paddle2onnx and old tf2onnx write them)."""

    def __init__(self, seed, constants=False):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.constants, self.count = [], [], constants, 0

    def name(self, prefix):
        self.count += 1
        return f"{prefix}_{self.count}"

    def tensor(self, value, prefix="w"):
        name = self.name(prefix)
        value = np.asarray(value)
        if self.constants:
            self.nodes.append(helper.make_node("Constant", [], [name], name=name + "_const",
                                               value=numpy_helper.from_array(value, name)))
        else:
            self.inits.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, *shape, fan_in=None):
        fan_in = fan_in or int(np.prod(shape[1:])) or 1
        return self.tensor((self.rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32))

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    def conv(self, x, c_in, c_out, k, stride=1, group=1, bias=True, pads=None):
        kh, kw = (k, k) if isinstance(k, int) else k
        sh, sw = (stride, stride) if isinstance(stride, int) else stride
        w = self.weight(c_out, c_in // group, kh, kw)
        ins = [x, w] + ([self.tensor(self.rng.normal(0, 0.1, c_out).astype(np.float32), "b")] if bias else [])
        pads = pads if pads is not None else [kh // 2, kw // 2, kh // 2, kw // 2]
        return self.op("Conv", ins, kernel_shape=[kh, kw], strides=[sh, sw], pads=pads, group=group)

    def bn(self, x, c):
        r = self.rng
        params = [r.uniform(0.5, 1.5, c), r.normal(0, 0.1, c), r.normal(0, 0.1, c), r.uniform(0.5, 1.5, c)]
        return self.op("BatchNormalization", [x] + [self.tensor(p.astype(np.float32), "bn") for p in params],
                       epsilon=1e-5)

    def scalar(self, v, dtype=np.float32):
        return self.tensor(np.array(v, dtype=dtype), "c")


def _model(graph, name, inputs, outputs, opset, ir_version=8):
    g = helper.make_graph(graph.nodes, name, inputs, outputs, graph.inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="quilt-zoo-small")
    m.ir_version = ir_version
    return m


# ---- vad -------------------------------------------------------------------------------------
def _vad_branch(seed, chunk, hidden, name):
    """One sample-rate branch: STFT as a Conv1d, magnitude, 4 conv blocks, one LSTM step, head."""
    g = Graph(seed)
    n_fft = 256 if chunk == 512 else 128
    hop = n_fft // 2
    bins = n_fft // 2 + 1
    x = g.op("Unsqueeze", ["x", g.tensor(np.array([1], np.int64), "axes")])          # [1, 1, chunk]
    x = g.op("Pad", [x, g.tensor(np.array([0, 0, n_fft // 4, 0, 0, n_fft // 4], np.int64), "pads")],
             mode="reflect")
    spec = g.op("Conv", [x, g.weight(2 * bins, 1, n_fft)], kernel_shape=[n_fft], strides=[hop])
    re_ = g.op("Slice", [spec, g.tensor(np.array([0], np.int64)), g.tensor(np.array([bins], np.int64)),
                         g.tensor(np.array([1], np.int64))])
    im = g.op("Slice", [spec, g.tensor(np.array([bins], np.int64)), g.tensor(np.array([2 * bins], np.int64)),
                        g.tensor(np.array([1], np.int64))])
    mag = g.op("Sqrt", [g.op("Add", [g.op("Mul", [re_, re_]), g.op("Mul", [im, im])])])
    h, c = mag, bins
    for c_out, stride in [(128, 1), (64, 2), (64, 2), (128, 1)]:
        w = g.weight(c_out, c, 3)
        b = g.tensor(g.rng.normal(0, 0.1, c_out).astype(np.float32), "b")
        h = g.op("Relu", [g.op("Conv", [h, w, b], kernel_shape=[3], strides=[stride], pads=[1, 1])])
        c = c_out
    # [1, 128, T] -> mean over time -> [1, 1, 128] as the LSTM's one step
    h = g.op("ReduceMean", [h], axes=[2], keepdims=0)                                     # [1, 128]
    h = g.op("Unsqueeze", [h, g.tensor(np.array([0], np.int64), "axes")])                 # [1, 1, 128]
    h0 = g.op("Gather", ["state", g.tensor(np.array([0], np.int64))], axis=0)           # [1, 1, 128]
    c0 = g.op("Gather", ["state", g.tensor(np.array([1], np.int64))], axis=0)
    W = g.weight(1, 4 * hidden, 128)
    R = g.weight(1, 4 * hidden, hidden)
    B = g.tensor(g.rng.normal(0, 0.1, (1, 8 * hidden)).astype(np.float32), "b")
    _, hn, cn = g.op("LSTM", [h, W, R, B, "", h0, c0], n_out=3, hidden_size=hidden)
    state_out = g.op("Concat", [hn, cn], axis=0)                                          # [2, 1, 128]
    y = g.op("Relu", [g.op("Squeeze", [hn, g.tensor(np.array([0], np.int64), "axes")])])  # [1, 128]
    y = g.op("Sigmoid", [g.op("Gemm", [y, g.weight(1, hidden), g.tensor(np.zeros(1, np.float32), "b")],
                              transB=1)])                                                 # [1, 1]
    g.nodes.append(helper.make_node("Identity", [y], [f"{name}_prob"], name=f"{name}_prob"))
    g.nodes.append(helper.make_node("Identity", [state_out], [f"{name}_state"], name=f"{name}_state"))
    return helper.make_graph(
        g.nodes, name, [],
        [helper.make_tensor_value_info(f"{name}_prob", TensorProto.FLOAT, [1, 1]),
         helper.make_tensor_value_info(f"{name}_state", TensorProto.FLOAT, [2, 1, hidden])], g.inits)


def build_vad():
    hidden = 128
    g = Graph(SEED)
    is16k = g.op("Equal", ["sr", g.tensor(np.array(16000, np.int64), "sr16k")])
    prob, state = g.op("If", [is16k], n_out=2, then_branch=_vad_branch(SEED + 1, 512, hidden, "vad16k"),
                       else_branch=_vad_branch(SEED + 2, 256, hidden, "vad8k"))
    g.nodes.append(helper.make_node("Identity", [prob], ["output"], name="output"))
    g.nodes.append(helper.make_node("Identity", [state], ["stateN"], name="stateN"))
    model = _model(g, "vad",
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 512]),
                    helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 1, hidden]),
                    helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
                   [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1]),
                    helper.make_tensor_value_info("stateN", TensorProto.FLOAT, [2, 1, hidden])], opset=16)
    rng = np.random.default_rng(SEED)
    inputs = {"x": (rng.standard_normal((1, 512)) * 0.1).astype(np.float32),
              "state": np.zeros((2, 1, hidden), np.float32), "sr": np.array(16000, np.int64)}
    return model, inputs


# ---- ocr_cls ---------------------------------------------------------------------------------
def _hardswish_paddle(g, x):
    """x * clip(x + 3, 0, 6) / 6 as paddle2onnx writes it (opset 11: Clip bounds are inputs)."""
    t = g.op("Add", [x, g.scalar(3.0)])
    t = g.op("Clip", [t, g.scalar(0.0), g.scalar(6.0)])
    t = g.op("Div", [t, g.scalar(6.0)])
    return g.op("Mul", [x, t])


def _hardsigmoid_paddle(g, x):
    """clip(x * 0.2 + 0.5, 0, 1) as Mul -> Add -> Clip."""
    t = g.op("Add", [g.op("Mul", [x, g.scalar(0.2)]), g.scalar(0.5)])
    return g.op("Clip", [t, g.scalar(0.0), g.scalar(1.0)])


def build_ocr_cls():
    g = Graph(SEED, constants=True)

    def conv_bn(x, c_in, c_out, k, stride=1, group=1, act="hardswish"):
        y = g.bn(g.conv(x, c_in, c_out, k, stride, group, bias=False), c_out)
        if act == "hardswish":
            return _hardswish_paddle(g, y)
        return g.op("Relu", [y]) if act == "relu" else y

    def se(x, c):
        s = g.op("GlobalAveragePool", [x])
        s = g.op("Relu", [g.conv(s, c, max(8, c // 4), 1)])
        s = _hardsigmoid_paddle(g, g.conv(s, max(8, c // 4), c, 1))
        return g.op("Mul", [x, s])

    # MobileNetV3-small at scale 0.35 (PaddleOCR's classifier): (kernel, expand, out, se, act,
    # stride); channels rounded to multiples of 8.
    def ch(v):
        return max(8, int(v * 0.35 + 4) // 8 * 8)

    cfg = [(3, 16, 16, True, "relu", (2, 1)), (3, 72, 24, False, "relu", (2, 1)),
           (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hardswish", (2, 1)),
           (5, 240, 40, True, "hardswish", 1), (5, 240, 40, True, "hardswish", 1),
           (5, 120, 48, True, "hardswish", 1), (5, 144, 48, True, "hardswish", 1),
           (5, 288, 96, True, "hardswish", (2, 1)), (5, 576, 96, True, "hardswish", 1),
           (5, 576, 96, True, "hardswish", 1)]
    cfg = [(k, ch(e), ch(o), s, a, st) for k, e, o, s, a, st in cfg]
    c = ch(16)
    x = conv_bn("x", 3, c, 3, 2)
    for k, exp, out, use_se, act, stride in cfg:
        y = conv_bn(x, c, exp, 1, act=act)
        y = conv_bn(y, exp, exp, k, stride, group=exp, act=act)
        if use_se:
            y = se(y, exp)
        y = conv_bn(y, exp, out, 1, act=None)
        x = g.op("Add", [x, y]) if stride == 1 and c == out else y
        c = out
    x = conv_bn(x, c, ch(576), 1)
    x = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
    x = g.op("GlobalAveragePool", [x])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(ch(576), 2), g.tensor(np.zeros(2, np.float32), "b")])
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="softmax", axis=1))
    model = _model(g, "ocr_cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 48, 192])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 2])], opset=11, ir_version=6)
    inputs = {"x": np.random.default_rng(SEED).standard_normal((1, 3, 48, 192), dtype=np.float32)}
    return model, inputs


# ---- mlp -------------------------------------------------------------------------------------
def build_mlp():
    g = Graph(SEED)
    x, c = "x", 256
    for i, width in enumerate([512, 512, 10]):
        x = g.op("Add", [g.op("MatMul", [x, g.weight(c, width, fan_in=c)]),
                         g.tensor(g.rng.normal(0, 0.1, width).astype(np.float32), "b")])
        if i < 2:
            x = g.op("Relu", [x])
        c = width
    g.nodes.append(helper.make_node("Identity", [x], ["logits"], name="logits"))
    model = _model(g, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=17)
    inputs = {"x": np.random.default_rng(SEED).standard_normal((1, 256), dtype=np.float32)}
    return model, inputs


# ---- kws -------------------------------------------------------------------------------------
def build_kws():
    g = Graph(SEED)
    x = g.op("Relu", [g.bn(g.conv("x", 1, 64, (10, 4), (2, 2), pads=[4, 1, 5, 2]), 64)])
    for _ in range(4):
        x = g.op("Relu", [g.bn(g.conv(x, 64, 64, 3, 1, group=64), 64)])
        x = g.op("Relu", [g.bn(g.conv(x, 64, 64, 1), 64)])
    x = g.op("AveragePool", [x], kernel_shape=[25, 5])
    x = g.op("Flatten", [x], axis=1)
    x = g.op("Gemm", [x, g.weight(12, 64), g.tensor(np.zeros(12, np.float32), "b")], transB=1)
    g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="softmax", axis=1))
    model = _model(g, "kws", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 49, 10])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 12])], opset=13)
    inputs = {"x": np.random.default_rng(SEED).standard_normal((1, 1, 49, 10), dtype=np.float32)}
    return model, inputs


SMALL_MODELS = {"vad": build_vad, "ocr_cls": build_ocr_cls, "mlp": build_mlp, "kws": build_kws}
