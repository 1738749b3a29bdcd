#!/usr/bin/env python3
"""The zoo: the classic models and the small ones; export them offline, run them with Quilt,
compare with onnxruntime.

    tools/zoo.py export   [--only NAME,...] [--family classic|small|quantized|ml] [--opset N]
    tools/zoo.py quantize [--only NAME,...]
    tools/zoo.py check    [--only NAME,...] [--family classic|small|quantized|ml] [--backends "cpu;opencl,cpu"] [--iterations N]
    tools/zoo.py bench    [--only NAME,...] [--family classic|small|quantized|ml] [--backends "cpu"] [--threads 2] [--iterations N] [--rounds R]
    tools/zoo.py list

The small family (tools/zoo_small.py: a streaming VAD, an OCR-style classifier, an MLP, a
keyword-spotting net) is written out with onnx.helper and needs no torch; its benchmark goes to
docs/BENCHMARKS-small.md and the README's small-models table.

The ml family (tools/zoo_ml.py: scikit-learn pipelines converted by skl2onnx, an XGBoost and a
LightGBM classifier converted by onnxmltools, trained at export time) is checked by labels and
probabilities (compare_ml) and benchmarked into docs/BENCHMARKS-ml.md.

The quantized family (`quantize`: dynamic, QDQ and QOperator int8 variants of ResNet-50,
MobileNetV3, BERT, GPT-2 and YOLOv5s, and a 4-bit MatMulNBits GPT-2, written from the exported
fp32 files by onnxruntime's quantizer) is checked by quantization steps (compare_quantized) and
benchmarked into docs/BENCHMARKS-quantized.md and the README's quantized-models table.

`export` builds each model with random weights from a fixed seed (nothing comes from a model hub),
exports it to ONNX in $QUILT_ZOO_DIR (default ~/.cache/quilt/zoo) with torch.onnx.export's
defaults (`<model>.onnx`: the dynamo exporter, opset 20) and at opset 17 (`<model>-op17.onnx`:
the TorchScript exporter), checks both with onnx.checker and writes the inputs
(`<model>.inputs/NAME.npy`). `check` runs every exported model with `quilt run` on each backend
list and with onnxruntime on the same inputs and thread count (2), compares every output (see
`compare`), prints a table and exits 1 on any mismatch, failure or missing file. `bench` runs
`quilt bench --json` and onnxruntime (in a child process, `ort-bench`) alternately on each
`<model>.onnx` and writes docs/BENCHMARKS.md, docs/benchmarks.png and the README's table.

On first use the script installs what it needs into the project venv (.venv), the way
tools/setup.sh does: tools/requirements.txt, and for `export` and `bench` tools/requirements-zoo.txt (torch,
torchvision, transformers, onnxscript — gigabytes, which is why neither setup.sh nor test.sh
installs them).
Then it re-runs itself with the venv's Python. docs/ZOO.md describes the models and the tolerance.
"""
import argparse
import hashlib
import math
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

try:  # the one dependency of the pure parts (compare, tables); main() re-runs in .venv first
    import numpy as np
except ImportError:
    np = None

sys.path.insert(0, str(Path(__file__).resolve().parent))
from zoo_small import SMALL_MODELS  # noqa: E402  (needs numpy and onnx only when called)
from zoo_ml import ML_INPUTS, ML_MODELS, compare_ml, export_ml, ml_bench_text  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
VENV_PYTHON = VENV / "bin" / "python"
REQUIREMENTS = ROOT / "tools" / "requirements.txt"
REQUIREMENTS_ZOO = ROOT / "tools" / "requirements-zoo.txt"

SEED = 0
THREADS = 2
SEQ_LEN = 128
EXTRA_OPSET = 17

# Tolerance of `compare` (docs/ZOO.md says why).
ATOL_SCALE = 1e-4  # atol = ATOL_SCALE * max|reference|
RTOL = 1e-3
MIN_COSINE = 0.9999


def log(msg):
    print(msg, flush=True)


# ------------------------------------------------------------------ environment ----
def _install(requirement_files, stamp):
    """pip-installs requirement_files into .venv unless stamp already holds their text."""
    text = "".join(f.read_text() for f in requirement_files)
    if stamp.exists() and stamp.read_text() == text:
        return
    names = ", ".join(str(f.relative_to(ROOT)) for f in requirement_files)
    log(f"[zoo] installing Python packages from {names} into .venv")
    cmd = [str(VENV_PYTHON), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    for f in requirement_files:
        cmd += ["-r", str(f)]
    subprocess.run(cmd, check=True)
    stamp.write_text(text)


def ensure_environment(need_torch):
    """Creates/updates .venv as needed, then re-executes this script with its Python."""
    if not VENV_PYTHON.exists():
        log("[zoo] creating the Python venv in .venv")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    # The same stamp as tools/setup.sh, so the two never install requirements.txt twice.
    _install([REQUIREMENTS], VENV / ".quilt-requirements")
    if need_torch:
        # Installed together with requirements.txt so pip keeps the onnx/numpy pins.
        _install([REQUIREMENTS, REQUIREMENTS_ZOO], VENV / ".quilt-requirements-zoo")
    if Path(sys.prefix).resolve() != VENV.resolve():
        os.execv(str(VENV_PYTHON), [str(VENV_PYTHON), str(Path(__file__).resolve())] + sys.argv[1:])


def zoo_dir():
    return Path(os.environ.get("QUILT_ZOO_DIR", Path.home() / ".cache" / "quilt" / "zoo")).expanduser()


# ------------------------------------------------------------------------ models ----
# name -> (builder, inputs, output names); inputs are (name, shape, kind) with kind "image", a vocabulary size
# for token ids, or "ones" for an attention mask. Builders import torch lazily so that `check`
# and the tests need numpy only.
IMAGE224 = [("input", (1, 3, 224, 224), "image")]


def _tokens(vocab):
    return [("input_ids", (1, SEQ_LEN), vocab), ("attention_mask", (1, SEQ_LEN), "ones")]


def build_mnist():
    import torch.nn as nn

    # The mnist-8 architecture (ONNX model zoo): two 5x5 "same" convolutions with ReLU and max
    # pooling (2x2, then 3x3 stride 3), then a 256 -> 10 fully-connected layer.
    return nn.Sequential(
        nn.Conv2d(1, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(8, 16, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 3),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


def _torchvision(name):
    def build():
        import torch
        import torchvision

        model = getattr(torchvision.models, name)(weights=None)
        if name.startswith("vit_"):
            # torchvision initialises ViT's classification head to zeros: the logits would be all
            # zero whatever the rest computes, and every comparison would pass trivially.
            torch.nn.init.normal_(model.heads.head.weight, std=0.02)
        return model
    return build


def _segmentation(name):
    def build():
        import torch.nn as nn
        import torchvision

        class OutOnly(nn.Module):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def forward(self, x):
                return self.model(x)["out"]

        return OutOnly(getattr(torchvision.models.segmentation, name)(
            weights=None, weights_backbone=None, aux_loss=False))
    return build


def build_bert():
    from transformers import BertConfig, BertForMaskedLM

    return _logits_only(BertForMaskedLM(BertConfig(attn_implementation="eager")))


def build_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    return _logits_only(GPT2LMHeadModel(GPT2Config(use_cache=False, attn_implementation="eager")))


def _logits_only(model):
    import torch.nn as nn

    class LogitsOnly(nn.Module):
        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              return_dict=False)[0]
    return LogitsOnly(model)


def build_yolov5s(depth=0.33, width=0.50, num_classes=80):
    """YOLOv5s (v6 layout): CSP backbone of C3 blocks, SPPF, the PANet neck and the Detect head with
    the standard COCO anchors, in inference mode: one [1, 25200, 85] tensor of decoded boxes
    (xywh in pixels, objectness, 80 class scores) for a 640x640 image."""
    import math

    import torch
    import torch.nn as nn

    def ch(c):  # width multiple, rounded up to a multiple of 8 as YOLOv5 does
        return int(math.ceil(c * width / 8) * 8)

    def n(count):  # depth multiple
        return max(round(count * depth), 1)

    class Conv(nn.Module):  # Conv2d (no bias) + BatchNorm + SiLU, "same" padding
        def __init__(self, c1, c2, k=1, s=1, p=None):
            super().__init__()
            self.conv = nn.Conv2d(c1, c2, k, s, k // 2 if p is None else p, bias=False)
            self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
            self.act = nn.SiLU()

        def forward(self, x):
            return self.act(self.bn(self.conv(x)))

    class Bottleneck(nn.Module):
        def __init__(self, c1, c2, shortcut=True):
            super().__init__()
            self.cv1, self.cv2 = Conv(c1, c2, 1), Conv(c2, c2, 3)
            self.add = shortcut and c1 == c2

        def forward(self, x):
            y = self.cv2(self.cv1(x))
            return x + y if self.add else y

    class C3(nn.Module):  # CSP bottleneck with 3 convolutions
        def __init__(self, c1, c2, count=1, shortcut=True):
            super().__init__()
            c_ = c2 // 2
            self.cv1, self.cv2, self.cv3 = Conv(c1, c_, 1), Conv(c1, c_, 1), Conv(2 * c_, c2, 1)
            self.m = nn.Sequential(*(Bottleneck(c_, c_, shortcut) for _ in range(count)))

        def forward(self, x):
            return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))

    class SPPF(nn.Module):  # spatial pyramid pooling, fast: three chained 5x5 max pools
        def __init__(self, c1, c2, k=5):
            super().__init__()
            c_ = c1 // 2
            self.cv1, self.cv2 = Conv(c1, c_, 1), Conv(c_ * 4, c2, 1)
            self.m = nn.MaxPool2d(k, 1, k // 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.m(x)
            y2 = self.m(y1)
            return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))

    class Detect(nn.Module):
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119], [116, 90, 156, 198, 373, 326]]
        strides = [8, 16, 32]

        def __init__(self, nc, chs, image=640):
            super().__init__()
            self.nc, self.no, self.na = nc, nc + 5, 3
            self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in chs)
            for i, s in enumerate(self.strides):  # constant grids for a fixed image size
                ny = nx = image // s
                yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
                grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).expand(1, self.na, ny, nx, 2)
                anchor = torch.tensor(self.anchors[i], dtype=torch.float32).view(1, self.na, 1, 1, 2)
                self.register_buffer(f"grid{i}", grid.float() - 0.5)
                self.register_buffer(f"anchor_grid{i}", anchor.expand(1, self.na, ny, nx, 2).clone())

        def forward(self, xs):
            z = []
            for i, x in enumerate(xs):
                x = self.m[i](x)
                bs, _, ny, nx = x.shape
                x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
                xy, wh, conf = x.sigmoid().split((2, 2, self.nc + 1), 4)
                xy = (xy * 2 + getattr(self, f"grid{i}")) * self.strides[i]
                wh = (wh * 2) ** 2 * getattr(self, f"anchor_grid{i}")
                z.append(torch.cat((xy, wh, conf), 4).view(bs, self.na * nx * ny, self.no))
            return torch.cat(z, 1)

    class YOLOv5(nn.Module):
        def __init__(self):
            super().__init__()
            c64, c128, c256, c512, c1024 = ch(64), ch(128), ch(256), ch(512), ch(1024)
            self.b0 = Conv(3, c64, 6, 2, 2)                                    # P1/2
            self.b1 = Conv(c64, c128, 3, 2)                                    # P2/4
            self.b2 = C3(c128, c128, n(3))
            self.b3 = Conv(c128, c256, 3, 2)                                   # P3/8
            self.b4 = C3(c256, c256, n(6))
            self.b5 = Conv(c256, c512, 3, 2)                                   # P4/16
            self.b6 = C3(c512, c512, n(9))
            self.b7 = Conv(c512, c1024, 3, 2)                                  # P5/32
            self.b8 = C3(c1024, c1024, n(3))
            self.b9 = SPPF(c1024, c1024, 5)
            self.h10 = Conv(c1024, c512, 1, 1)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.h13 = C3(c1024, c512, n(3), shortcut=False)
            self.h14 = Conv(c512, c256, 1, 1)
            self.h17 = C3(c512, c256, n(3), shortcut=False)                    # P3 out
            self.h18 = Conv(c256, c256, 3, 2)
            self.h20 = C3(c512, c512, n(3), shortcut=False)                    # P4 out
            self.h21 = Conv(c512, c512, 3, 2)
            self.h23 = C3(c1024, c1024, n(3), shortcut=False)                  # P5 out
            self.detect = Detect(num_classes, (c256, c512, c1024))

        def forward(self, x):
            p3 = self.b4(self.b3(self.b2(self.b1(self.b0(x)))))
            p4 = self.b6(self.b5(p3))
            h10 = self.h10(self.b9(self.b8(self.b7(p4))))
            h14 = self.h14(self.h13(torch.cat((self.up(h10), p4), 1)))
            o3 = self.h17(torch.cat((self.up(h14), p3), 1))
            o4 = self.h20(torch.cat((self.h18(o3), h14), 1))
            o5 = self.h23(torch.cat((self.h21(o4), h10), 1))
            return self.detect([o3, o4, o5])

    return YOLOv5()


def build_realesrgan(num_feat=64, num_block=23, num_grow_ch=32):
    """Real-ESRGAN x4's generator, RRDBNet: 23 residual-in-residual dense blocks (64 features,
    growth 32, residuals scaled by 0.2), then two nearest-neighbour x2 upsamplings, each followed
    by a 3x3 convolution and LeakyReLU(0.2). Weights: Kaiming normal scaled by 0.1, as published."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def init(*convs, scale=0.1):
        for conv in convs:
            nn.init.kaiming_normal_(conv.weight)
            conv.weight.data *= scale
            nn.init.zeros_(conv.bias)

    class ResidualDenseBlock(nn.Module):
        def __init__(self):
            super().__init__()
            f, g = num_feat, num_grow_ch
            self.convs = nn.ModuleList(nn.Conv2d(f + i * g, g if i < 4 else f, 3, 1, 1) for i in range(5))
            self.lrelu = nn.LeakyReLU(0.2)
            init(*self.convs)

        def forward(self, x):
            features = [x]
            for conv in self.convs[:4]:
                features.append(self.lrelu(conv(torch.cat(features, 1))))
            return self.convs[4](torch.cat(features, 1)) * 0.2 + x

    class RRDB(nn.Module):
        def __init__(self):
            super().__init__()
            self.rdbs = nn.Sequential(ResidualDenseBlock(), ResidualDenseBlock(), ResidualDenseBlock())

        def forward(self, x):
            return self.rdbs(x) * 0.2 + x

    class RRDBNet(nn.Module):
        def __init__(self):
            super().__init__()
            f = num_feat
            self.conv_first = nn.Conv2d(3, f, 3, 1, 1)
            self.body = nn.Sequential(*(RRDB() for _ in range(num_block)))
            self.conv_body = nn.Conv2d(f, f, 3, 1, 1)
            self.conv_up1 = nn.Conv2d(f, f, 3, 1, 1)
            self.conv_up2 = nn.Conv2d(f, f, 3, 1, 1)
            self.conv_hr = nn.Conv2d(f, f, 3, 1, 1)
            self.conv_last = nn.Conv2d(f, 3, 3, 1, 1)
            self.lrelu = nn.LeakyReLU(0.2)

        def forward(self, x):
            feat = self.conv_first(x)
            feat = feat + self.conv_body(self.body(feat))
            feat = self.lrelu(self.conv_up1(F.interpolate(feat, scale_factor=2, mode="nearest")))
            feat = self.lrelu(self.conv_up2(F.interpolate(feat, scale_factor=2, mode="nearest")))
            return self.conv_last(self.lrelu(self.conv_hr(feat)))

    return RRDBNet()


MODELS = {
    "mnist": (build_mnist, [("input", (1, 1, 28, 28), "image")], ["output"]),
    "resnet50": (_torchvision("resnet50"), IMAGE224, ["logits"]),
    "mobilenet_v3_large": (_torchvision("mobilenet_v3_large"), IMAGE224, ["logits"]),
    "efficientnet_b0": (_torchvision("efficientnet_b0"), IMAGE224, ["logits"]),
    "vit_b_16": (_torchvision("vit_b_16"), IMAGE224, ["logits"]),
    "deeplabv3_mobilenet_v3_large": (_segmentation("deeplabv3_mobilenet_v3_large"), IMAGE224, ["out"]),
    "fcn_resnet50": (_segmentation("fcn_resnet50"), IMAGE224, ["out"]),
    "yolov5s": (build_yolov5s, [("images", (1, 3, 640, 640), "image")], ["output0"]),
    "realesrgan_x4": (build_realesrgan, [("input", (1, 3, 64, 64), "image")], ["output"]),
    "bert_base": (build_bert, _tokens(30522), ["logits"]),
    "gpt2": (build_gpt2, _tokens(50257), ["logits"]),
    # The small family: builders return (onnx model, inputs); the inputs are "given".
    "vad": (SMALL_MODELS["vad"], [("x", (1, 512), "given"), ("state", (2, 1, 128), "given"),
                                  ("sr", (), "given")], ["output", "stateN"]),
    "ocr_cls": (SMALL_MODELS["ocr_cls"], [("x", (1, 3, 48, 192), "given")], ["probs"]),
    "mlp": (SMALL_MODELS["mlp"], [("x", (1, 256), "given")], ["logits"]),
    "kws": (SMALL_MODELS["kws"], [("x", (1, 1, 49, 10), "given")], ["probs"]),
    # The ml family (tools/zoo_ml.py): builders return (onnx model, inputs); outputs as converted.
    **{name: (builder, ML_INPUTS[name], []) for name, builder in ML_MODELS.items()},
}
FAMILIES = ("classic", "small", "quantized", "ml")
DEFAULT_FAMILIES = ("classic", "small", "ml")  # what export and check take without --family


# ---------------------------------------------------------------- quantized family ----
# Variants of five classic models written by onnxruntime's own quantizer (`tools/zoo.py quantize`,
# from the exported fp32 `<model>.onnx`): `<model>-int8-dynamic` (quantize_dynamic),
# `<model>-int8-qdq` and `<model>-int8-qop` (quantize_static, QDQ and QOperator formats,
# calibrated on generated inputs), and `gpt2-int4` (MatMulNBitsQuantizer). Each takes the inputs
# of its fp32 model, copied to `<name>.inputs/`.
QUANT_SOURCES = ("resnet50", "mobilenet_v3_large", "bert_base", "gpt2", "yolov5s")
QUANT_VARIANTS = ("int8-dynamic", "int8-qdq", "int8-qop")
QUANT_MODELS = {f"{source}-{variant}": (source, variant)
                for source in QUANT_SOURCES for variant in QUANT_VARIANTS}
QUANT_MODELS["gpt2-int4"] = ("gpt2", "int4")
for _name, (_source, _variant) in QUANT_MODELS.items():
    MODELS[_name] = (None, MODELS[_source][1], MODELS[_source][2])
CALIBRATION_SAMPLES = 4  # generated inputs per static quantization (seeds 1..4)
INT4_BLOCK_SIZE = 32


def family(name):
    if name in QUANT_MODELS:
        return "quantized"
    if name in ML_MODELS:
        return "ml"
    return "small" if name in SMALL_MODELS else "classic"


def calibration_inputs(specs, count=CALIBRATION_SAMPLES):
    """Generated calibration inputs, like make_inputs but from seeds 1..count (the checked input,
    seed 0, is not among them)."""
    return [make_inputs(specs, seed) for seed in range(1, count + 1)]


def gemm_as_matmul(model):
    """Rewrites each Gemm with a constant B, alpha = beta = 1 and no transposed A into MatMul (B
    transposed into a new initializer when transB) and an Add of C; returns how many. The dynamo
    exporter writes GPT-2's Conv1D layers as Gemm, which MatMulNBitsQuantizer does not quantize
    (it takes MatMul): MatMul + Add is the graph other exporters write for them."""
    import onnx
    from onnx import helper, numpy_helper

    inits = {t.name: t for t in model.graph.initializer}
    nodes, count = [], 0
    for node in model.graph.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if (node.op_type != "Gemm" or node.input[1] not in inits or attrs.get("transA", 0)
                or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0):
            nodes.append(node)
            continue
        weight = node.input[1]
        if attrs.get("transB", 0):
            t = numpy_helper.from_array(numpy_helper.to_array(inits[weight]).T.copy(), weight + "_t")
            model.graph.initializer.append(t)
            weight = t.name
        has_bias = len(node.input) > 2 and node.input[2]
        product = node.output[0] + "_matmul" if has_bias else node.output[0]
        nodes.append(helper.make_node("MatMul", [node.input[0], weight], [product], name=node.name))
        if has_bias:
            nodes.append(helper.make_node("Add", [product, node.input[2]], [node.output[0]],
                                          name=node.name + "_bias"))
        count += 1
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    used = {i for n in model.graph.node for i in n.input}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    onnx.checker.check_model(model)
    return count


def quantize_file(source, target, variant, specs):
    """Writes `target` from the fp32 `source` with onnxruntime's quantizer; returns a description
    of what was called."""
    import onnx
    from onnxruntime import quantization as q

    with tempfile.TemporaryDirectory(prefix="quilt-zoo-quant-") as tmp:
        model = onnx.load(str(source))
        # quantize_static quantizes Gemm (QGemm, or Q/DQ around it) and quantize_dynamic turns it
        # into MatMul itself; MatMulNBitsQuantizer takes MatMul only.
        rewritten = gemm_as_matmul(model) if variant == "int4" else 0
        if rewritten:  # quantize the MatMul form (see gemm_as_matmul)
            source = Path(tmp) / "source.onnx"
            onnx.save(model, str(source))
        del model
        how = _quantize_file(source, target, variant, specs)
    return how + (f"; {rewritten} Gemm written as MatMul + Add first" if rewritten else "")


def _quantize_file(source, target, variant, specs):
    import onnx
    from onnxruntime import quantization as q

    if variant == "int8-dynamic":
        q.quantize_dynamic(str(source), str(target))
        return "quantize_dynamic (defaults: int8 weights, DynamicQuantizeLinear activations)"
    if variant in ("int8-qdq", "int8-qop"):
        class Reader(q.CalibrationDataReader):
            def __init__(self):
                self.samples = iter(calibration_inputs(specs))

            def get_next(self):
                return next(self.samples, None)

        fmt = q.QuantFormat.QDQ if variant == "int8-qdq" else q.QuantFormat.QOperator
        with tempfile.TemporaryDirectory(prefix="quilt-zoo-calib-") as tmp:
            cwd = os.getcwd()
            os.chdir(tmp)  # the calibrator writes its augmented model into the working directory
            try:
                q.quantize_static(str(source), str(target), Reader(), quant_format=fmt)
            finally:
                os.chdir(cwd)
        return (f"quantize_static (quant_format={fmt.name}, MinMax calibration on "
                f"{CALIBRATION_SAMPLES} generated inputs, int8 activations and weights)")
    if variant == "int4":
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig, MatMulNBitsQuantizer)

        config = DefaultWeightOnlyQuantConfig(block_size=INT4_BLOCK_SIZE, is_symmetric=True,
                                              quant_format=q.QuantFormat.QOperator)
        quantizer = MatMulNBitsQuantizer(onnx.load(str(source)), algo_config=config)
        quantizer.process()
        onnx.save(quantizer.model.model, str(target))
        return (f"MatMulNBitsQuantizer (4-bit, block {INT4_BLOCK_SIZE}, symmetric, "
                "accuracy_level unset: fp32 products)")
    raise ValueError(f"unknown quantized variant {variant!r}")


def quantize(args):
    """`tools/zoo.py quantize`: the quantized family from the exported fp32 models."""
    return quantize_models(select(args.only, "quantized"))


def quantize_models(names):
    import logging
    import shutil

    import onnx

    logging.disable(logging.WARNING)  # the quantizers' per-node messages and pre-processing advice
    out = zoo_dir()
    failures = 0
    for name in names:
        source_name, variant = QUANT_MODELS[name]
        source, target = out / f"{source_name}.onnx", out / f"{name}.onnx"
        if not source.exists():
            failures += 1
            log(f"{target.name:<40} FAILED: {source} missing: tools/zoo.py export --only {source_name}")
            continue
        t0 = time.perf_counter()
        try:
            how = quantize_file(source, target, variant, MODELS[source_name][1])
            onnx.checker.check_model(str(target))
        except Exception as e:  # report and go on with the other variants
            failures += 1
            log(f"{target.name:<40} FAILED: {_first_line(e)}")
            continue
        inputs_dir = out / f"{name}.inputs"
        inputs_dir.mkdir(exist_ok=True)
        for f in (out / f"{source_name}.inputs").glob("*.npy"):
            shutil.copyfile(f, inputs_dir / f.name)
        ops = {}
        for node in onnx.load(str(target), load_external_data=False).graph.node:
            if any(k in node.op_type.lower() for k in ("integer", "qlinear", "quantize", "nbits", "qgemm")):
                ops[node.op_type] = ops.get(node.op_type, 0) + 1
        log(f"{target.name:<40} {target.stat().st_size / 2**20:6.1f} MiB  "
            f"{time.perf_counter() - t0:5.1f} s  checker ok  {how}; "
            + ", ".join(f"{v} {k}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])))
    return 1 if failures else 0


def quantization_step(path):
    """The quantization step of a quantized model's output: the scale of the DequantizeLinear that
    writes a graph output, else max|reference| / 127 is used (see compare_quantized)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path), load_external_data=False)
    outputs = {o.name for o in model.graph.output}
    inits = {t.name: t for t in model.graph.initializer}
    steps = {}
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.output[0] in outputs and node.input[1] in inits:
            steps[node.output[0]] = float(np.max(numpy_helper.to_array(inits[node.input[1]])))
    return steps


# Tolerance of check --family quantized (docs/ZOO.md says why): an output passes when every
# element is within QUANT_STEPS steps of the output's quantization (its scale, or max|ref| / 127
# where the output is not dequantized from int8) and the cosine is at least QUANT_MIN_COSINE.
QUANT_STEPS = 4
QUANT_MIN_COSINE = 0.999
QUANT_NOISE = 1e-3  # within_quantization_noise's margin in cosine


def _cosine(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    return float(np.dot(a, b) / (na * nb)) if na and nb else float(na == nb)


def as_close_to_float(actual, reference, fp32):
    """(ok, cosine of actual to fp32, cosine of reference to fp32): ok when actual (Quilt's
    quantized output) is as close to the float model's output fp32 as reference (onnxruntime's
    quantized output) is, to QUANT_NOISE."""
    quilt_cos, ort_cos = _cosine(actual, fp32), _cosine(reference, fp32)
    return quilt_cos >= ort_cos - QUANT_NOISE, quilt_cos, ort_cos


def within_quantization_noise(name, outputs, reference, float_refs, input_files):
    """For a quantized model beyond QUANT_STEPS: whether Quilt's output is as close to the fp32
    model's (onnxruntime's run of the source model, cached in float_refs) as onnxruntime's
    quantized output is, to QUANT_NOISE in cosine. Both then carry the model's quantization noise,
    one rounding tie apart (docs/ZOO.md); a wrong kernel moves Quilt away from the float model.
    Returns (ok, note)."""
    source = QUANT_MODELS[name][0]
    if source not in float_refs:
        inputs = {k: np.load(v) for k, v in input_files.items()}
        float_refs[source] = run_ort(zoo_dir() / f"{source}.onnx", inputs, 1)[0]
    ok, notes = True, []
    for out_name, ref in reference.items():
        fp32 = float_refs[source].get(out_name, next(iter(float_refs[source].values())))
        if out_name not in outputs or fp32.shape != ref.shape:
            return False, f"{out_name}: no fp32 output of that shape to compare with"
        good, quilt_cos, ort_cos = as_close_to_float(outputs[out_name], ref, fp32)
        ok &= good
        notes.append(f"{out_name}: cosine to the fp32 model Quilt {quilt_cos:.5f}, ORT {ort_cos:.5f}")
    return ok, "; ".join(notes)


def compare_quantized(actual, reference, step=None):
    """compare() for quantized models: (ok, max_abs_diff, cosine, why), allclose with atol =
    QUANT_STEPS quantization steps and no rtol, cosine >= QUANT_MIN_COSINE."""
    reference = np.asarray(reference)
    if step is None and reference.size and np.issubdtype(reference.dtype, np.floating):
        step = float(np.abs(reference).max()) / 127
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    atol_scale = QUANT_STEPS * step / scale if step and scale else 0.0
    ok, max_diff, cosine, why = compare(actual, reference, atol_scale=atol_scale, rtol=0.0,
                                        min_cosine=QUANT_MIN_COSINE)
    if step and why:
        why += f" (step {step:.3g}: max diff {max_diff / step:.1f} steps)"
    return ok, max_diff, cosine, why



def make_inputs(specs, seed=SEED):
    """The inputs of a model, deterministic: images ~ N(0,1), token ids in [0, vocab), attention
    masks all ones; seed 0 (SEED) for the checked input."""
    values = {}
    for name, shape, kind in specs:
        rng = np.random.default_rng(seed)
        if kind == "image":
            values[name] = rng.standard_normal(shape, dtype=np.float32)
        elif kind == "ones":
            values[name] = np.ones(shape, dtype=np.int64)
        else:
            values[name] = rng.integers(0, kind, size=shape, dtype=np.int64)
    return values


def randomize_norms(model, torch):
    """Random affine parameters and running statistics for every normalization layer.

    Freshly built BatchNorm/LayerNorm layers are identities (weight 1, bias 0, mean 0, var 1), which
    would hide bugs in their kernels and in Conv+BatchNorm folding; values near 1 and 0 keep the
    activations' scale."""
    norms = (torch.nn.modules.batchnorm._NormBase, torch.nn.LayerNorm, torch.nn.GroupNorm)
    with torch.no_grad():
        for m in model.modules():
            if not isinstance(m, norms):
                continue
            if getattr(m, "weight", None) is not None:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
            if getattr(m, "running_mean", None) is not None:
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)


def model_files(directory, name):
    """The files of model `name` to check: `<name>.onnx`, `<name>-op17.onnx`, then any other
    `<name>-opN.onnx` (from `export --opset N`); the first two whether they exist or not. A small
    model has one file, at the opset its exporter style uses."""
    if family(name) in ("small", "quantized", "ml"):
        return [directory / f"{name}.onnx"]
    files = [directory / f"{name}.onnx", directory / f"{name}-op{EXTRA_OPSET}.onnx"]
    return files + sorted(set(directory.glob(f"{name}-op*.onnx")) - set(files))


def select(only, family_name=None):
    """The models --only names, else every model of --family (without one: the classic and the
    small families)."""
    if not only:
        return [n for n in MODELS if family(n) in ((family_name,) if family_name else DEFAULT_FAMILIES)]
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"zoo: unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}")
    wrong = [n for n in names if family_name not in (None, family(n))]
    if wrong:
        sys.exit(f"zoo: {', '.join(wrong)} not in the {family_name} family")
    return names


# ------------------------------------------------------------------------ export ----
def _first_line(e):
    return f"{type(e).__name__}: " + (str(e).strip().splitlines() or [""])[0]


def export_file(torch, model, example, path, input_names, output_names, opset):
    """Exports model to path and returns the exporter used.

    opset None: torch.onnx.export as it comes (torch 2.9's default is the dynamo exporter, whose
    default opset is newer than 17). An explicit opset: the TorchScript exporter (dynamo=False),
    which writes the graphs most published ONNX files have, and the dynamo exporter at that opset
    when the TorchScript exporter fails on the model."""
    names = dict(input_names=input_names, output_names=output_names)
    if opset is None:
        torch.onnx.export(model, example, str(path), external_data=False, verbose=False, **names)
        return "dynamo (default)"
    try:
        torch.onnx.export(model, example, str(path), opset_version=opset, dynamo=False,
                          do_constant_folding=True, **names)
        return "torchscript"
    except Exception as e:
        torch.onnx.export(model, example, str(path), opset_version=opset, dynamo=True,
                          external_data=False, verbose=False, **names)
        fixed = _split_sizes_as_input(path) if opset < 18 else 0
        return (f"dynamo (torchscript failed: {_first_line(e)})"
                + (f"; {fixed} Split num_outputs -> split input" if fixed else ""))


def _split_sizes_as_input(path):
    """Rewrites Split nodes that carry opset 18's num_outputs attribute into opset 13's form (the
    sizes as the `split` input): onnx's version converter, which the dynamo exporter uses below
    its own opset, leaves the attribute in place and the checker rejects the model."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    splits = [n for n in model.graph.node
              if n.op_type == "Split" and any(a.name == "num_outputs" for a in n.attribute)]
    if not splits:
        return 0
    inferred = onnx.shape_inference.infer_shapes(model).graph
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.value_info) + list(inferred.input) + list(inferred.output)}
    shapes.update({t.name: list(t.dims) for t in model.graph.initializer})
    for i, node in enumerate(splits):
        attrs = {a.name: a for a in node.attribute}
        count, axis = attrs["num_outputs"].i, attrs["axis"].i if "axis" in attrs else 0
        dim = shapes[node.input[0]][axis]
        chunk = -(-dim // count)  # as opset 18 splits: equal chunks, the last one smaller
        sizes = np.array([chunk] * (count - 1) + [dim - chunk * (count - 1)], dtype=np.int64)
        name = f"zoo_split_sizes_{i}"
        model.graph.initializer.append(numpy_helper.from_array(sizes, name))
        del node.input[1:]
        node.input.append(name)
        kept = [a for a in node.attribute if a.name != "num_outputs"]
        del node.attribute[:]
        node.attribute.extend(kept)
    onnx.save(model, str(path))
    return len(splits)


def export_small(names):
    """Writes each small model and its inputs; onnx.checker (full check, shapes included) on each."""
    import onnx

    out = zoo_dir()
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        t0 = time.perf_counter()
        model, inputs = MODELS[name][0]()
        path = out / f"{name}.onnx"
        onnx.save(model, path)
        onnx.checker.check_model(str(path), full_check=True)
        inputs_dir = out / f"{name}.inputs"
        inputs_dir.mkdir(exist_ok=True)
        for input_name, value in inputs.items():
            np.save(inputs_dir / f"{input_name}.npy", value)
        opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
        log(f"{path.name:<40} opset {opset:>2}  {path.stat().st_size / 2**20:6.2f} MiB  "
            f"{len(model.graph.node)} nodes  build {time.perf_counter() - t0:.1f} s  checker ok  onnx.helper")
    return 0


def export(args):
    names = select(args.only, args.family)
    if args.precision == "fp16":
        return export_fp16(names)
    small = [n for n in names if family(n) == "small"]
    classic = [n for n in names if family(n) == "classic"]
    quantized = [n for n in names if family(n) == "quantized"]
    if small:
        export_small(small)
    ml = [n for n in names if family(n) == "ml"]
    if ml:
        export_ml(ml, zoo_dir(), log)
    status = export_classic(args, classic) if classic else 0
    return max(status, quantize_models(quantized)) if quantized else status


def export_fp16(names):
    """`export --precision fp16`: each exported <name>.onnx converted to float16 with
    onnxconverter-common (keep_io_types=False: inputs, outputs, weights and activations float16,
    as a model shipped in half precision is), as <name>-fp16.onnx, and its float inputs as float16
    in <name>-fp16.inputs/. Needs the float32 export first; no torch."""
    import onnx
    from onnxconverter_common import float16

    out = zoo_dir()
    failures = 0
    for name in names:
        source, target = out / f"{name}.onnx", out / f"{name}-fp16.onnx"
        if not source.exists():
            failures += 1
            log(f"{target.name:<40} FAILED: {source} missing: tools/zoo.py export --only {name} first")
            continue
        t0 = time.perf_counter()
        original = onnx.load(str(source))
        # The model's own Casts to float32 (torch's `.to(torch.float32)`, e.g. BERT's attention
        # mask) mean "to the model's float type": onnxconverter-common keeps them float32, and the
        # Sub that mixes their output with its float16 constants was refused by both runtimes.
        # Its own Casts (around the ops it keeps in float32) are new nodes and stay as they are.
        to_float = {n.name for n in original.graph.node if n.op_type == "Cast" and any(
            a.name == "to" and a.i == onnx.TensorProto.FLOAT for a in n.attribute)}
        model = float16.convert_float_to_float16(original, keep_io_types=False)
        retyped = set()
        for node in model.graph.node:
            if node.op_type == "Cast" and node.name in to_float:
                for a in node.attribute:
                    if a.name == "to" and a.i == onnx.TensorProto.FLOAT:
                        a.i = onnx.TensorProto.FLOAT16
                        retyped.update(node.output)
        for v in model.graph.value_info:  # their outputs' recorded types follow
            if v.name in retyped:
                v.type.tensor_type.elem_type = onnx.TensorProto.FLOAT16
        onnx.save(model, str(target))
        onnx.checker.check_model(str(target))
        inputs_dir = out / f"{name}-fp16.inputs"
        inputs_dir.mkdir(exist_ok=True)
        for f in (out / f"{name}.inputs").glob("*.npy"):
            value = np.load(f)
            np.save(inputs_dir / f.name, value.astype(np.float16) if value.dtype == np.float32 else value)
        log(f"{target.name:<40} {target.stat().st_size / 2**20:6.2f} MiB  convert "
            f"{time.perf_counter() - t0:.1f} s  checker ok  onnxconverter-common float16")
    return 1 if failures else 0


def export_classic(args, names):
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import logging
    import warnings

    import onnx
    import torch
    import transformers

    warnings.filterwarnings("ignore")  # tracer and deprecation warnings
    for logger in ("torch.onnx", "onnxscript"):  # torchvision op schemas, version conversion
        logging.getLogger(logger).setLevel(logging.ERROR)
    transformers.logging.set_verbosity_error()
    torch.set_num_threads(THREADS)
    out = zoo_dir()
    out.mkdir(parents=True, exist_ok=True)
    log(f"zoo: exporting to {out} with torch {torch.__version__}, torchvision "
        f"{__import__('torchvision').__version__}, transformers {transformers.__version__}, "
        f"onnx {onnx.__version__}")
    if args.opset:
        opsets = [(args.opset, f"-op{args.opset}")]
    else:
        opsets = [(None, ""), (EXTRA_OPSET, f"-op{EXTRA_OPSET}")]
    failures = 0
    for name in names:
        builder, specs, output_names = MODELS[name]
        torch.manual_seed(SEED)
        t0 = time.perf_counter()
        model = builder()
        randomize_norms(model, torch)
        model.eval()
        build_s = time.perf_counter() - t0
        inputs = make_inputs(specs)
        inputs_dir = out / f"{name}.inputs"
        inputs_dir.mkdir(exist_ok=True)
        for input_name, value in inputs.items():
            np.save(inputs_dir / f"{input_name}.npy", value)
        example = tuple(torch.from_numpy(inputs[s[0]]) for s in specs)
        for opset, suffix in opsets:
            path = out / f"{name}{suffix}.onnx"
            t0 = time.perf_counter()
            try:
                exporter = export_file(torch, model, example, path, [s[0] for s in specs],
                                       output_names, opset)
                onnx.checker.check_model(str(path))
            except Exception as e:  # report and go on with the other models
                failures += 1
                log(f"{path.name:<40} FAILED: {_first_line(e)}")
                continue
            seconds = time.perf_counter() - t0
            opset_read = next(o.version for o in onnx.load(str(path), load_external_data=False)
                              .opset_import if o.domain in ("", "ai.onnx"))
            log(f"{path.name:<40} opset {opset_read:>2}  {path.stat().st_size / 2**20:6.1f} MiB  "
                f"export {seconds:5.1f} s (build {build_s:.1f} s)  checker ok  {exporter}")
    return 1 if failures else 0


# ------------------------------------------------------------------------- check ----
def compare(actual, reference, atol_scale=ATOL_SCALE, rtol=RTOL, min_cosine=MIN_COSINE):
    """Compares one output with its reference; returns (ok, max_abs_diff, cosine, why).

    allclose with atol = atol_scale * max|reference| (an absolute tolerance relative to the
    output's scale, since deep random-weight networks end with values of any magnitude and
    near-zero elements that are differences of large ones) and rtol, and the cosine similarity
    of the flattened tensors at least min_cosine. Integer and bool outputs must match exactly."""
    actual, reference = np.asarray(actual), np.asarray(reference)
    if actual.shape != reference.shape:
        return False, float("nan"), float("nan"), f"shape {list(actual.shape)} != {list(reference.shape)}"
    if actual.dtype != reference.dtype:
        return False, float("nan"), float("nan"), f"dtype {actual.dtype} != {reference.dtype}"
    if actual.size == 0:
        return True, 0.0, 1.0, ""
    if not np.issubdtype(reference.dtype, np.floating):
        diff = np.abs(actual.astype(np.float64) - reference.astype(np.float64))
        same = bool(np.array_equal(actual, reference))
        return same, float(diff.max()), 1.0 if same else 0.0, "" if same else "values differ"
    a, r = actual.astype(np.float64).ravel(), reference.astype(np.float64).ravel()
    if not np.all(np.isfinite(a) == np.isfinite(r)):
        return False, float("nan"), float("nan"), "non-finite values where the reference has none"
    finite = np.isfinite(r)
    if not np.array_equal(a[~finite], r[~finite]):
        return False, float("nan"), float("nan"), "non-finite values differ"
    a, r = a[finite], r[finite]
    if a.size == 0:
        return True, 0.0, 1.0, ""
    diff = np.abs(a - r)
    max_diff = float(diff.max())
    atol = atol_scale * float(np.abs(r).max())
    close = bool(np.all(diff <= atol + rtol * np.abs(r)))
    na, nr = float(np.linalg.norm(a)), float(np.linalg.norm(r))
    if na == 0.0 and nr == 0.0:
        cosine = 1.0
    elif na == 0.0 or nr == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.dot(a, r) / (na * nr))
    why = []
    if not close:
        why.append(f"not allclose (atol {atol:.3g}, rtol {rtol:g})")
    if cosine < min_cosine:
        why.append(f"cosine {cosine:.6f} < {min_cosine}")
    return close and cosine >= min_cosine, max_diff, cosine, "; ".join(why)


# --precision bf16 compares with onnxruntime's float32 run by accuracy, not by tolerance: the
# products' operands are rounded to bfloat16 (8 significant bits), so elements move by ~1e-2 of
# the output's scale while what the model decides stays. Targets from issue 20.
BF16_MIN_COSINE = 0.999
BF16_MIN_ARGMAX = 0.99


def argmax_agreement(actual, reference):
    """The fraction of positions whose argmax over the class axis is the same: the last axis
    (logits [batch, classes], per-token [batch, seq, vocab or hidden], detections [batch, boxes,
    fields]), or axis 1 of a 4-D output (a segmentation map's per-pixel class, an image's channels).
    None for scalar or non-float outputs."""
    actual, reference = np.asarray(actual), np.asarray(reference)
    if reference.ndim == 0 or not np.issubdtype(reference.dtype, np.floating) or reference.size == 0:
        return None
    axis = 1 if reference.ndim == 4 else -1
    return float(np.mean(actual.argmax(axis=axis) == reference.argmax(axis=axis)))


def compare_reduced(actual, reference):
    """compare() for reduced-precision runs: (ok, max_abs_diff, cosine, argmax agreement, why)
    with ok = cosine >= BF16_MIN_COSINE and argmax agreement >= BF16_MIN_ARGMAX."""
    _, max_diff, cosine, why = compare(actual, reference, atol_scale=1e30, min_cosine=BF16_MIN_COSINE)
    agree = argmax_agreement(actual, reference)
    reasons = [why] if why else []
    if agree is not None and agree < BF16_MIN_ARGMAX:
        reasons.append(f"argmax agreement {agree:.4f} < {BF16_MIN_ARGMAX}")
    return not reasons, max_diff, cosine, agree, "; ".join(reasons)


def format_table(header, rows):
    """A Markdown table with columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                     + [line(r) for r in rows])


def available_backends(quilt):
    """Backend names that `quilt devices` lists with at least one device."""
    text = subprocess.run([quilt, "devices"], capture_output=True, text=True).stdout
    names, current = set(), None
    for line in text.splitlines():
        m = re.match(r"backend (\S+)", line)
        if m:
            current = m.group(1)
        elif current and re.match(r"\s+device \d+", line):
            names.add(current)
    return names


def error_line(stderr, stdout=""):
    """The first line of Quilt's error message."""
    lines = [l.strip() for l in (stderr + "\n" + stdout).splitlines() if l.strip()]
    if not lines:
        return "no message"
    i = next((i for i, l in enumerate(lines)
              if re.search(r"error|unsupported|not (supported|implement)|fail|\[", l, re.IGNORECASE)), 0)
    line = lines[i]
    if line.endswith(":"):  # "uses ops Quilt does not implement:" and the list below it
        line += " " + "; ".join(l.lstrip("- ") for l in lines[i + 1:i + 4])
    return line


def run_ort(path, inputs, iterations):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    outputs = session.run(None, inputs)
    times = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        session.run(None, inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, outputs)), float(np.median(times))


def run_quilt(quilt, path, input_files, backend, iterations, timeout, precision="fp32"):
    """Returns (outputs or None, median ms or None, error line)."""
    with tempfile.TemporaryDirectory(prefix="quilt-zoo-") as tmp:
        # One run more than ORT's timed ones: Quilt's median counts its first run too.
        cmd = [quilt, "run", str(path), "--output-dir", tmp, "--backend", backend,
               "--threads", str(THREADS), "--iterations", str(iterations + 1), "--precision", precision]
        for name, file in input_files.items():
            cmd += ["--input", f"{name}={file}"]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, None, f"timed out after {timeout} s"
        if p.returncode != 0:
            return None, None, f"exit {p.returncode}: {error_line(p.stderr, p.stdout)}"
        m = re.search(r"latency: (?:median )?([\d.]+) ms", p.stdout)
        outputs = {f.stem: np.load(f) for f in Path(tmp).glob("*.npy")}
        outputs.update({f.stem: json.loads(f.read_text()) for f in Path(tmp).glob("*.json")})  # maps
        return outputs, float(m.group(1)) if m else None, ""


def check(args):
    import onnx

    quilt = args.quilt or os.environ.get("QUILT_BIN") or str(ROOT / "build" / "quilt")
    if not Path(quilt).exists():
        log(f"[zoo] {quilt} is missing: building Quilt with tools/setup.sh")
        subprocess.run(["bash", str(ROOT / "tools" / "setup.sh")], check=True)
    directory = zoo_dir()
    available = available_backends(quilt)
    backend_lists = [b.strip() for b in args.backends.split(";") if b.strip()]
    fp16 = args.model_precision == "fp16"
    reduced = args.precision != "fp32" or fp16
    header = ["model", "opset", "backend", "status", "max abs diff", "max abs ref", "cosine",
              *(["argmax agree"] if reduced else []), "quilt ms", "ort ms", "note"]
    rows, bad, float_refs = [], 0, {}
    for name in select(args.only, args.family):
        specs = MODELS[name][1]
        suffix = "-fp16" if fp16 else ""
        input_files = {s[0]: directory / f"{name}{suffix}.inputs" / f"{s[0]}.npy" for s in specs}
        missing_inputs = [str(f) for f in input_files.values() if not f.exists()]
        digests = {}
        for path in [directory / f"{name}-fp16.onnx"] if fp16 else model_files(directory, name):
            if not path.exists() or missing_inputs:
                what = path if not path.exists() else missing_inputs[0]
                rows.append([path.stem, "", "", "MISSING", "", "", "", "", "",
                             f"{what} missing: tools/zoo.py export --only {name}"
                             + (" --precision fp16" if fp16 else "")])
                bad += 1
                continue
            inputs = {k: np.load(v) for k, v in input_files.items()}
            model = onnx.load(str(path), load_external_data=False)
            opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                         "")  # an XGBoost model imports ai.onnx.ml only
            del model
            label = path.stem
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest in digests:  # e.g. <model>-op17.onnx when the exporter's default is 17
                rows.append([label, opset, "", "same", "", "", "", "", "",
                             f"byte-identical to {digests[digest]}: not run again"])
                continue
            digests[digest] = path.name
            steps = quantization_step(path) if family(name) == "quantized" else None
            try:
                reference, ort_ms = run_ort(path, inputs, args.iterations)
            except Exception as e:
                rows.append([label, opset, "ort", "FAIL", "", "", "", "", "", f"onnxruntime: {str(e).splitlines()[0]}"])
                bad += 1
                continue
            for backend in backend_lists:
                missing = [b.split(":")[0] for b in backend.split(",") if b.split(":")[0] not in available]
                if missing:
                    rows.append([label, opset, backend, "skipped", "", "", "", "", _fmt(ort_ms, "ms"),
                                 f"backend {', '.join(missing)} not available (quilt devices)"])
                    continue
                outputs, quilt_ms, err = run_quilt(quilt, path, input_files, backend,
                                                   args.iterations, args.timeout, args.precision)
                q_ms = _fmt(quilt_ms, "ms") if quilt_ms is not None else ""
                if outputs is None:
                    rows.append([label, opset, backend, "FAIL", "", "", "", q_ms, _fmt(ort_ms, "ms"), err])
                    bad += 1
                    log(f"  {label} {backend}: FAIL {err}")
                    continue
                ok, max_diff, min_cos, min_agree, notes = True, 0.0, 1.0, None, []
                scale = max(float(np.abs(r).max()) if isinstance(r, np.ndarray) and r.size
                            and r.dtype.kind in "fiu" else 0.0 for r in reference.values())
                for out_name, ref in reference.items():
                    if out_name not in outputs:
                        ok, notes = False, notes + [f"{out_name}: no output file"]
                        continue
                    if reduced:
                        good, d, c, agree, why = compare_reduced(outputs[out_name].astype(np.float32),
                                                                 ref.astype(np.float32))
                        if agree is not None:
                            min_agree = agree if min_agree is None else min(min_agree, agree)
                    elif steps is not None:
                        good, d, c, why = compare_quantized(outputs[out_name], ref, steps.get(out_name))
                    elif family(name) == "ml":  # labels exact, probabilities to 1e-5, ZipMap's dicts
                        good, d, why = compare_ml(outputs[out_name], ref)
                        c = 1.0 if good else 0.0
                    else:
                        good, d, c, why = compare(outputs[out_name], ref)
                    ok &= good
                    max_diff, min_cos = max(max_diff, d), min(min_cos, c)
                    if why:
                        notes.append(f"{out_name}: {why}")
                status = "ok" if ok else "MISMATCH"
                if not ok and steps is not None and not reduced:
                    noise, why = within_quantization_noise(name, outputs, reference, float_refs,
                                                           input_files)
                    status, notes = ("ok (noise)" if noise else status), notes + [why]
                bad += 0 if status.startswith("ok") else 1
                agree_cell = [("" if min_agree is None else f"{min_agree:.4f}")] if reduced else []
                rows.append([label, opset, backend, status, f"{max_diff:.3g}",
                             f"{scale:.3g}", f"{min_cos:.7f}", *agree_cell, q_ms, _fmt(ort_ms, "ms"),
                             "; ".join(notes)])
                log(f"  {label} {backend}: {rows[-1][3]} max diff {max_diff:.3g} cosine {min_cos:.7f} "
                    f"(max abs ref {scale:.3g})" + (f" argmax agreement {agree_cell[0]}" if reduced else ""))
    log("")
    if reduced:  # rows without a comparison (missing, skipped, failed) get an empty agreement cell
        rows = [r if len(r) == len(header) else r[:7] + [""] + r[7:] for r in rows]
    log(format_table(header, rows))
    counts = {s: sum(r[3] == s for r in rows)
              for s in ("ok", "ok (noise)", "MISMATCH", "FAIL", "MISSING", "skipped", "same")}
    log("\ncheck: " + ", ".join(f"{v} {k.lower()}" for k, v in counts.items())
        + f"  (threads {THREADS}; times: ORT median of {args.iterations} runs after a warm-up, "
        f"Quilt's median of {args.iterations + 1} runs)")
    return 1 if bad else 0


# ------------------------------------------------------------------------- bench ----
BENCHMARKS_MD = ROOT / "docs" / "BENCHMARKS.md"
BENCHMARKS_PNG = ROOT / "docs" / "benchmarks.png"
README = ROOT / "README.md"
README_SECTION = "benchmarks-table"
# The small family's benchmark: its own page and README table, no chart (no matplotlib needed).
BENCHMARKS_SMALL_MD = ROOT / "docs" / "BENCHMARKS-small.md"
README_SMALL_SECTION = "benchmarks-small-table"
# The quantized family's benchmark: its own page and README table, no chart.
BENCHMARKS_QUANT_MD = ROOT / "docs" / "BENCHMARKS-quantized.md"
README_QUANT_SECTION = "benchmarks-quantized-table"
# Half precision (issue: Quilt's bf16 compute on float32 models; float16 models in both
# runtimes): their own pages, no README table.
BENCHMARKS_BF16_MD = ROOT / "docs" / "BENCHMARKS-bf16.md"
BENCHMARKS_FP16_MD = ROOT / "docs" / "BENCHMARKS-fp16.md"
# The ml family's benchmark: its own page, no README table, no chart.
BENCHMARKS_ML_MD = ROOT / "docs" / "BENCHMARKS-ml.md"


def half_bench_text(bf16, pins):
    """(models_text, chart, reproduce, title, rewrites) of the half-precision benchmark pages."""
    exported = (f"models exported with torch {pins.get('torch', '?')} (`tools/zoo.py export`)")
    if bf16:
        return ((f"the classic {exported}, float32 files `<model>.onnx`: Quilt runs them with "
                 "`--precision bf16` (Conv, MatMul and Gemm with constant weights on bfloat16 "
                 "operands, float32 accumulation; README, \"The CPU backend\"), onnxruntime at float32. "
                 "*Quilt fp32 ms* is Quilt's float32 run of the same file in the same round; "
                 "accuracy of these runs: `tools/zoo.py check --precision bf16` (docs/ZOO.md)"),
                "", "tools/zoo.py export        # the models and their inputs into $QUILT_ZOO_DIR",
                "Benchmark of bf16 compute: Quilt `--precision bf16` against onnxruntime float32",
                "this file")
    return ((f"the classic {exported} and converted to float16 by `tools/zoo.py export --precision "
             "fp16` (onnxconverter-common, inputs and outputs float16): `<model>-fp16.onnx`, run by "
             "both runtimes; *Quilt fp32 ms* is Quilt's run of the float32 `<model>.onnx` in the same "
             "round; accuracy: `tools/zoo.py check --model-precision fp16` (docs/ZOO.md)"),
            "", "tools/zoo.py export && tools/zoo.py export --precision fp16",
            "Benchmark of float16 models: Quilt and onnxruntime side by side", "this file")



def quantized_bench_text():
    """(models_text, chart, reproduce, title, rewrites) of the quantized family's benchmark page."""
    import onnxruntime

    return (f"the quantized family, written from the default-opset fp32 files by onnxruntime "
            f"{onnxruntime.__version__}'s quantizer (`tools/zoo.py quantize`, docs/ZOO.md), with "
            "the fp32 models' inputs",
            "",
            "tools/zoo.py export --only resnet50,mobilenet_v3_large,bert_base,gpt2,yolov5s\n"
            "tools/zoo.py quantize     # the quantized family into $QUILT_ZOO_DIR",
            "Benchmarks of the quantized models: Quilt and onnxruntime side by side",
            "this file and the README's quantized-models benchmark table")
GENERATED_NOTE = ("<!-- Generated by `tools/zoo.py bench`: never edit it by hand, re-run it "
                  "(docs/ZOO.md). -->")


def vm_hwm_mib():
    """This process's peak resident memory (VmHWM) in MiB, as `quilt bench` reports its own."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def ort_child(args):
    """`zoo.py ort-bench`: what `quilt bench` does, with onnxruntime, in a process of its own
    that only loads and runs the model, so its VmHWM compares with Quilt's. Prints one JSON line."""
    import json

    import onnxruntime as ort

    inputs = {f.stem: np.load(f) for f in sorted(Path(args.inputs).glob("*.npy"))}
    baseline = vm_hwm_mib()  # the interpreter, numpy and onnxruntime's library, before the model
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    creation_ms = (time.perf_counter() - t0) * 1e3
    for _ in range(args.warmup):
        session.run(None, inputs)
    times = []
    for _ in range(args.iterations):
        t0 = time.perf_counter()
        session.run(None, inputs)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"session_creation_ms": creation_ms, "times_ms": times,
                      "median_ms": float(np.median(times)), "peak_memory_mib": vm_hwm_mib(),
                      "baseline_memory_mib": baseline, "version": ort.__version__}))
    return 0


def _last_json(stdout):
    import json

    for line in reversed(stdout.splitlines()):
        if line.strip().startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in the output")


def bench_quilt_once(quilt, path, input_files, backend, args, precision="fp32"):
    """One `quilt bench --json` process: (median ms, creation ms, peak MiB) or an error string."""
    cmd = [quilt, "bench", str(path), "--backend", backend, "--threads", str(args.threads),
           "--iterations", str(args.iterations), "--warmup", str(args.warmup), "--json"]
    if precision != "fp32":
        cmd += ["--precision", precision]
    for name, file in input_files.items():
        cmd += ["--input", f"{name}={file}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    if p.returncode != 0:
        return f"exit {p.returncode}: {error_line(p.stderr, p.stdout)}"
    r = _last_json(p.stdout)
    return (r["latency_ms"]["median"], r["session_creation_ms"], r["peak_memory_mib"],
            sorted(r.get("plan", {}).get("patches", {})))


def timed_runs(quilt, path, input_files, backend, args):
    """args with the timed runs per process for this model: --iterations, or more when that many
    take under --min-seconds (a short probe run of Quilt says how long one takes), so that a fast
    model's median is not ten samples of a noisy machine (MobileNetV3: 6.8 ms as the median of
    10-run medians, 4.0-4.3 ms over 200 runs right after). At most 10,000."""
    model_args = argparse.Namespace(**vars(args))
    if args.min_seconds <= 0:
        return model_args
    probe = bench_quilt_once(quilt, path, input_files, backend,
                             argparse.Namespace(**{**vars(args), "iterations": 3, "warmup": 1}))
    if isinstance(probe, tuple) and probe[0] > 0:
        wanted = math.ceil(args.min_seconds * 1000 / probe[0])
        model_args.iterations = max(args.iterations, min(10000, wanted))
    return model_args


def bench_ort_once(path, inputs_dir, args):
    """One onnxruntime child process: (median ms, creation ms, peak MiB, baseline MiB, version)."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "ort-bench", str(path),
           "--inputs", str(inputs_dir), "--threads", str(args.threads),
           "--iterations", str(args.iterations), "--warmup", str(args.warmup)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {args.timeout} s"
    if p.returncode != 0:
        return f"exit {p.returncode}: " + ((p.stderr.strip().splitlines() or ["no message"])[-1])
    r = _last_json(p.stdout)
    return (r["median_ms"], r["session_creation_ms"], r["peak_memory_mib"],
            r["baseline_memory_mib"], r["version"])


def geometric_mean(values):
    values = [v for v in values if v is not None and v > 0 and np.isfinite(v)]
    return float(np.exp(np.mean(np.log(values)))) if values else None


def summarize(samples):
    """The median of the per-round values (None when no round succeeded)."""
    return float(np.median(samples)) if samples else None


def _fmt(value, digits=1):
    if value is None:
        return "—"
    if digits == "ms":  # 3 significant digits at least, so MNIST's 0.1 ms keeps its precision
        return f"{value:.3g}" if value < 10 else f"{value:.1f}"
    return f"{value:.{digits}f}"


def bench_table(results, backend_lists, half=None):
    """(header, rows, geometric means per backend list) of the benchmark table. half: the
    column label of a half-precision run ("bf16 compute", "fp16 model"), whose rows also
    carry Quilt's float32 run of the float32 model (results[name]["fp32"]) and the ratio."""
    first = backend_lists[0]
    header = ["model", f"Quilt ms ({first}{', ' + half if half else ''})", "ORT ms", "Quilt/ORT"]
    for backend in backend_lists[1:]:
        header += [f"Quilt ms ({backend})", f"Quilt/ORT ({backend})"]
    if half:
        header += [f"Quilt fp32 ms ({first})", f"{half} / Quilt fp32"]
    quilt = "Quilt" if len(backend_lists) == 1 else f"Quilt ({first})"
    header += [f"creation ms {quilt}", "creation ms ORT", f"peak MiB {quilt}", "peak MiB ORT"]
    rows, ratios = [], {b: [] for b in backend_lists}
    for name, r in results.items():
        ort_ms = r["ort"]["ms"]
        row = [name]
        for i, backend in enumerate(backend_lists):
            q = r["quilt"][backend]["ms"]
            ratio = q / ort_ms if q is not None and ort_ms else None
            ratios[backend].append(ratio)
            row += [_fmt(q, "ms")] + ([_fmt(ort_ms, "ms")] if i == 0 else []) + [_fmt(ratio, 2)]
        if half:
            q, f = r["quilt"][first]["ms"], r["fp32"]["ms"]
            row += [_fmt(f, "ms"), _fmt(q / f if q is not None and f else None, 2)]
        row += [_fmt(r["quilt"][first]["creation"]), _fmt(r["ort"]["creation"]),
                _fmt(r["quilt"][first]["peak"]), _fmt(r["ort"]["peak"])]
        rows.append(row)
    return header, rows, {b: geometric_mean(v) for b, v in ratios.items()}


def multiply_adds(path):
    """The multiply-adds of a model's Conv, ConvTranspose, Gemm and MatMul nodes (top-level graph,
    the shapes it was exported with), from onnx's shape inference; None when a shape they need
    is unknown. A Conv counts its live kernel taps only (_live_taps). The other ops' arithmetic
    is left out: it is small beside these in the classic models, and has no one multiply-add
    measure."""
    import onnx
    from onnx import helper, shape_inference
    model = shape_inference.infer_shapes(onnx.load(str(path)))
    shapes = {i.name: list(i.dims) for i in model.graph.initializer}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        t = vi.type.tensor_type
        if t.HasField("shape"):
            shapes[vi.name] = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    total = 0
    for node in model.graph.node:
        if node.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        a, b, y = (shapes.get(n) for n in (node.input[0], node.input[1], node.output[0]))
        if any(s is None or None in s for s in (a, b, y)):
            return None
        if node.op_type == "Conv":  # each output: (C / group) x the live kernel taps
            total += math.prod(y) * b[1] * math.prod(_live_taps(attrs, a[2:], b[2:], y[2:]))
        elif node.op_type == "ConvTranspose":  # each input: (C_out / group) x kernel taps
            total += math.prod(a) * math.prod(b[1:])
        elif node.op_type == "Gemm":
            total += math.prod(y) * (a[0] if attrs.get("transA", 0) else a[-1])
        else:
            total += math.prod(y) * a[-1]
    return total


def _live_taps(attrs, in_dims, kernel, out_dims):
    """Per spatial dim, the kernel taps that read inside the input for some output: a tap that
    only ever reads padding (DeepLabV3's dilation-24 and -36 convs on 14x14 maps) is no work that
    either runtime does, so it is not counted."""
    n = len(kernel)
    strides = attrs.get("strides", [1] * n)
    dilations = attrs.get("dilations", [1] * n)
    pads = attrs.get("pads", [0] * (2 * n))
    auto_pad = attrs.get("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    live = []
    for d in range(n):
        size, k, s, dil, out = in_dims[d], kernel[d], strides[d], dilations[d], out_dims[d]
        begin = pads[d]
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            total = max(0, (out - 1) * s + (k - 1) * dil + 1 - size)
            begin = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
        elif auto_pad == "VALID":
            begin = 0
        count = 0
        for tap in range(k):
            offset = tap * dil - begin  # output o reads input o * s + offset
            first = 0 if offset >= 0 else (-offset + s - 1) // s
            last = min(out - 1, (size - 1 - offset) // s) if size - 1 - offset >= 0 else -1
            count += first <= last
        live.append(count)
    return live


def fma_peak(quilt, threads):
    """GFLOP/s of the float32 multiply-add peak at `threads` threads (build/quilt_fma_peak,
    tools/fma_peak.cpp), or None when the tool is missing or fails."""
    tool = Path(quilt).parent / "quilt_fma_peak"
    if not tool.exists():
        return None
    r = subprocess.run([str(tool), "--threads", str(threads), "--json"], capture_output=True,
                       text=True, timeout=60)
    return json.loads(r.stdout)["gflops"] if r.returncode == 0 else None


def cores_shared(one, many, threads):
    """Whether an FMA peak of `many` GFLOP/s at `threads` threads, against `one` at one thread,
    says the threads share physical cores (below 80 % of threads x one). None (unmeasured):
    no."""
    return bool(one and many and threads >= 2 and many < 0.8 * threads * one)


def shared_cores_warning(quilt, threads, when):
    """Warns when `threads` threads reach less than 80 % of `threads` times one thread's FMA
    peak: the VM's virtual CPUs then share physical cores. On the AMD EPYC Zen 3 VM this came
    and went for an hour at a time: 2 threads measured 102 GFLOP/s against 99 at one (197-200
    minutes later), and every timing of those hours read 20-60 % slow and noisy. Returns
    whether it warned."""
    if threads < 2:
        return False
    one, many = fma_peak(quilt, 1), fma_peak(quilt, threads)
    if not cores_shared(one, many, threads):
        return False
    log(f"[zoo] warning ({when}): {threads} threads reach {many:.0f} GFLOP/s of float32 FMA "
        f"against {one:.0f} at one thread: the CPUs are shared right now, and the timings will "
        f"read slow and noisy (build/quilt_fma_peak --threads {threads})")
    return True


def compute_section(results, backend, directory, quilt, threads):
    """The classic page's table of each model's multiply-adds and the GFLOP/s both runtimes
    reach at their median latency, against the machine's measured float32 FMA peak."""
    peak = fma_peak(quilt, threads)
    rows = []
    for name, r in results.items():
        macs = multiply_adds(directory / f"{name}.onnx")
        q, o = r["quilt"][backend]["ms"], r["ort"]["ms"]
        def rate(ms):
            return 2 * macs / (ms / 1e3) / 1e9 if macs and ms else None
        def share(ms):
            return 100 * rate(ms) / peak if rate(ms) and peak else None
        rows.append([name, _fmt(macs / 1e9 if macs else None, "ms"), _fmt(rate(q)), _fmt(share(q), 0),
                     _fmt(rate(o)), _fmt(share(o), 0)])
    table = format_table(["model", "G multiply-adds", f"Quilt GFLOP/s ({backend})",
                          "% of peak", "ORT GFLOP/s", "% of peak (ORT)"], rows)
    peak_text = (f"{peak:.0f} GFLOP/s at {threads} thread{'s' if threads != 1 else ''}"
                 if peak else "not measured (build/quilt_fma_peak is missing)")
    return f"""
## Compute against the machine's peak

The float32 multiply-add peak of this machine, measured just after the runs by
`build/quilt_fma_peak --threads {threads}` (tools/fma_peak.cpp: every thread runs fused
multiply-adds on registers only, best of 5; nothing else should run meanwhile): **{peak_text}**.
Each model's multiply-adds are those of its Conv, ConvTranspose, Gemm and MatMul nodes (the
other ops' arithmetic is left out; a Conv's kernel taps that only ever read padding are left out
too), counted from onnx's shape inference; GFLOP/s = 2 x multiply-adds / median latency.

{table}
"""


def device_name(backend_list):
    """The backend name of a backend list's first entry: "opencl" for "opencl:1,cpu"."""
    return backend_list.split(",")[0].split(":")[0]


def runtime_memory(quilt, backend, threads, timeout=600):
    """MiB that the device runtimes of a backend list add to a process by being loaded and used,
    whatever the model: the peak resident memory (VmHWM) of `quilt bench` on a small model
    (two 3x3 convolutions on 32 x 32 x 32, 74 KB of weights) planned on the list's first backend
    (the plan is checked: None when it put the model elsewhere), minus the same on `cpu`. On
    PoCL this is its LLVM and Clang libraries; the difference of two processes, so within a
    MiB or so of noise."""
    import tempfile

    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, inits, x = [], [], "x"
    for i in range(2):
        w = numpy_helper.from_array(rng.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.05,
                                    f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("Conv", [x, w.name], [f"y{i}"], pads=[1, 1, 1, 1]))
        x = f"y{i}"
    graph = helper.make_graph(
        nodes, "runtime_memory", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 32, 32])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 32, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    device, name = backend.split(",")[0], device_name(backend)
    peaks = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runtime_memory.onnx"
        onnx.save(model, str(path))
        # The device twice, its second run counted: a first build of the model's kernels adds
        # the compiler's working memory (PoCL: ~20 MiB more) that a cached build does not.
        for b in ("cpu", device, device):
            r = subprocess.run([quilt, "bench", str(path), "--backend", b, "--threads", str(threads),
                                "--iterations", "3", "--warmup", "1", "--json"],
                               capture_output=True, text=True, timeout=timeout)
            if r.returncode != 0:
                return None
            out = _last_json(r.stdout)
            patches = out.get("plan", {}).get("patches", {})
            if b != "cpu" and not any(k.split(":")[0] == name for k in patches):
                return None  # the plan kept the model on the CPU: nothing measured
            peaks[b] = out["peak_memory_mib"]
    return max(0.0, peaks[device] - peaks["cpu"])


def memory_section(results, backend_lists, quilt, threads):
    """The classic page's table of peak memory per backend list against the first list's, raw
    and without the fixed memory of the device runtimes (runtime_memory), when a list other than
    the first runs on a device."""
    first = backend_lists[0]
    others = [b for b in backend_lists[1:] if device_name(b) != "cpu"]
    if not others:
        return ""
    header = ["model", f"peak MiB ({first})"]
    fixed = {}
    for b in others:
        fixed[b] = runtime_memory(quilt, b, threads)
        header += [f"peak MiB ({b})", f"({b}) / ({first})", "the same without the runtime"]
    rows = []
    for name, r in results.items():
        base = r["quilt"][first]["peak"]
        row = [name, _fmt(base)]
        for b in others:
            peak = r["quilt"][b]["peak"]
            ratio = peak / base if peak and base else None
            # A plan that put nothing on the device never loaded its runtime: nothing to leave
            # out (the small models, which the cost rule keeps on the CPU).
            used = any(d.split(":")[0] == device_name(b) for d in r["quilt"][b].get("devices", []))
            if not used:
                net = ratio
            else:
                net = (peak - fixed[b]) / base if peak and base and fixed[b] is not None else None
            row += [_fmt(peak), _fmt(ratio, 2), _fmt(net, 2) + ("" if used else " (not used)")]
        rows.append(row)
    fixed_text = "; ".join(
        f"`{b}`: **{_fmt(v)} MiB**" if v is not None else f"`{b}`: not measured (the small model "
        "did not plan on the device)" for b, v in fixed.items())
    return f"""
## Peak memory by backend

The peak resident memory (VmHWM) of the rounds above, per backend list, against the `{first}`
run's. A device's runtime costs a process memory of its own as soon as a patch runs on it,
whatever the model: for PoCL, its LLVM and Clang libraries. Measured just after the runs as the
peak of `quilt bench` on a small model (two 3x3 convolutions, 32 channels, 32 x 32) planned on
the device minus the same on `cpu` ({fixed_text}); the last column leaves it out, so it shows
what the model's own tensors cost on each backend list (with PoCL's host memory used in place,
no copies: README, "The OpenCL backend"). *not used*: the plan put nothing on the device, so
its runtime was never loaded and nothing is left out.

{format_table(header, rows)}
"""


def machine_info(quilt, int8=False):
    cpu = "unknown"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    devices = subprocess.run([quilt, "devices"], capture_output=True, text=True).stdout
    blas = next((l.strip() for l in devices.splitlines() if l.strip().startswith("blas:")), "blas: ?")
    if int8:  # the integer kernels' instruction set, for the quantized family
        blas += "`, `" + next((l.strip() for l in devices.splitlines()
                               if l.strip().startswith("int8 gemm:")), "int8 gemm: ?")
    mem = next((l.split()[1] for l in Path("/proc/meminfo").read_text().splitlines()
                if l.startswith("MemTotal:")), "0")
    return cpu, os.cpu_count(), int(mem) / 2**20, blas


def versions_info():
    def git(*a):
        return subprocess.run(["git", *a], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    commit = git("rev-parse", "--short=12", "HEAD") or "unknown"
    # Changes to the runtime's sources (not the generated docs or the tools) make the commit inexact.
    if git("status", "--porcelain", "--", "core", "backends", "include", "kernels_cl",
           "partitioner", "CMakeLists.txt"):
        commit += " + uncommitted changes"
    pins = {}
    for line in REQUIREMENTS_ZOO.read_text().splitlines():
        m = re.match(r"([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1)] = m.group(2)
    return commit, pins


def write_chart(results, backend_lists, geomeans, threads, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(results)
    width = 0.8 / len(backend_lists)
    fig, ax = plt.subplots(figsize=(max(8, 0.8 * len(names) + 2), 4.8), dpi=110)
    x = np.arange(len(names))
    for i, backend in enumerate(backend_lists):
        ratios = []
        for n in names:
            q, o = results[n]["quilt"][backend]["ms"], results[n]["ort"]["ms"]
            ratios.append(q / o if q is not None and o else 0.0)
        offset = (i - (len(backend_lists) - 1) / 2) * width
        gm = geomeans[backend]
        bars = ax.bar(x + offset, ratios, width, label=f"Quilt {backend} / ORT"
                      + (f" (geometric mean {gm:.2f})" if gm else ""))
        for bar, ratio in zip(bars, ratios):
            ax.annotate(f"{ratio:.2f}" if ratio else "failed", (bar.get_x() + bar.get_width() / 2,
                        bar.get_height()), ha="center", va="bottom", fontsize=7,
                        xytext=(0, 2), textcoords="offset points")
    ax.axhline(1.0, color="black", linewidth=1, linestyle="--")
    ax.set_ylim(0, max([1.2] + [p.get_height() * 1.15 for p in ax.patches]))
    ax.set_xticks(x)
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("median latency, Quilt / onnxruntime (lower is faster)")
    ax.set_title(f"Quilt vs onnxruntime: median latency ratio, {threads} threads, batch 1")
    fig.legend(fontsize=8, loc="lower center", ncol=len(backend_lists))
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path)
    plt.close(fig)


def readme_section(benchmarks_text, page="BENCHMARKS.md", command="tools/zoo.py bench"):
    """The README's benchmarks section: the table and the geometric mean from the docs page."""
    m = re.search(r"<!-- table -->\n(.*?)\n<!-- /table -->", benchmarks_text, re.S)
    if not m:
        raise SystemExit(f"zoo: docs/{page} has no <!-- table --> section: run {command}")
    return (m.group(1) + f"\n\nGenerated by `{command}` on a shared, noisy 2-core machine; "
            f"machine, versions and method: [docs/{page}](docs/{page}).")


def update_readme(readme=README, benchmarks=BENCHMARKS_MD, name=README_SECTION,
                  command="tools/zoo.py bench"):
    """Fills the README's benchmarks section `name` from the docs page `benchmarks`."""
    text = readme.read_text()
    body = (f"<!-- {name} -->\n{readme_section(benchmarks.read_text(), benchmarks.name, command)}"
            f"\n<!-- /{name} -->")
    if f"<!-- {name} -->" in text and f"<!-- /{name} -->" in text:
        text = re.sub(rf"<!-- {name} -->.*?<!-- /{name} -->", lambda _: body, text, count=1, flags=re.S)
    else:
        raise SystemExit(f"zoo: {readme.name} has no <!-- {name} --> ... <!-- /{name} --> markers")
    readme.write_text(text)


def bench(args):
    quilt = args.quilt or os.environ.get("QUILT_BIN") or str(ROOT / "build" / "quilt")
    small = args.family == "small"
    quantized = args.family == "quantized"
    page, section = {"small": (BENCHMARKS_SMALL_MD, README_SMALL_SECTION),
                     "quantized": (BENCHMARKS_QUANT_MD, README_QUANT_SECTION),
                     "ml": (BENCHMARKS_ML_MD, None)}.get(
                         args.family, (BENCHMARKS_MD, README_SECTION))
    family_arg = f" --family {args.family}" if args.family != "classic" else ""
    fp16 = args.model_precision == "fp16"
    half = "bf16 compute" if args.precision == "bf16" else "fp16 model" if fp16 else None
    if half:
        if args.family != "classic" or args.update_readme:
            sys.exit("zoo: --precision bf16 and --model-precision fp16 bench the classic family only, "
                     "and write their own page (no README table)")
        if args.precision == "bf16" and fp16:
            sys.exit("zoo: --precision bf16 runs float32 models; use it without --model-precision fp16")
        page = BENCHMARKS_BF16_MD if args.precision == "bf16" else BENCHMARKS_FP16_MD
        family_arg = " --precision bf16" if args.precision == "bf16" else " --model-precision fp16"
    if args.update_readme and section:
        update_readme(benchmarks=page, name=section, command=f"tools/zoo.py bench{family_arg}")
        log(f"zoo: filled README.md's {section} section from {page.relative_to(ROOT)}")
        return 0
    if not Path(quilt).exists():
        log(f"[zoo] {quilt} is missing: building Quilt with tools/setup.sh")
        subprocess.run(["bash", str(ROOT / "tools" / "setup.sh")], check=True)
    directory = zoo_dir()
    available = available_backends(quilt)
    backend_lists = [b.strip() for b in args.backends.split(";") if b.strip()]
    for backend in backend_lists:
        missing = [b.split(":")[0] for b in backend.split(",") if b.split(":")[0] not in available]
        if missing:
            sys.exit(f"zoo: backend {', '.join(missing)} of {backend!r} is not available (quilt devices)")
    started = time.time()
    shared_cores_warning(quilt, args.threads, "before the runs")
    commit, pins = versions_info()
    results, failures, notes, ort_version, baselines, spreads = {}, 0, [], "?", [], []
    iteration_counts = {}
    for name in select(args.only, args.family):
        specs = MODELS[name][1]
        suffix = "-fp16" if fp16 else ""
        path = directory / f"{name}{suffix}.onnx"
        inputs_dir = directory / f"{name}{suffix}.inputs"
        input_files = {s[0]: inputs_dir / f"{s[0]}.npy" for s in specs}
        fp32_path = directory / f"{name}.onnx"
        fp32_inputs = {s[0]: directory / f"{name}.inputs" / f"{s[0]}.npy" for s in specs}
        needed = [path, *input_files.values()] + ([fp32_path, *fp32_inputs.values()] if half else [])
        missing = [str(f) for f in needed if not f.exists()]
        if missing:
            sys.exit(f"zoo: {missing[0]} is missing: tools/zoo.py export --only {name}"
                     + (" (then again with --precision fp16)" if fp16 else ""))
        quilt_runs = {b: [] for b in backend_lists}
        fp32_runs = []  # half: Quilt's float32 run of the float32 model, first backend list
        ort_runs = []
        errors = []
        t0 = time.perf_counter()
        model_args = timed_runs(quilt, path, input_files, backend_lists[0], args)
        iteration_counts[name] = model_args.iterations
        for _ in range(args.rounds):  # alternating, so every runtime sees the same machine state
            for backend in backend_lists:
                r = bench_quilt_once(quilt, path, input_files, backend, model_args, args.precision)
                (quilt_runs[backend].append(r) if isinstance(r, tuple) else errors.append(f"Quilt {backend}: {r}"))
            if half:
                r = bench_quilt_once(quilt, fp32_path, fp32_inputs, backend_lists[0], model_args)
                (fp32_runs.append(r) if isinstance(r, tuple) else errors.append(f"Quilt fp32: {r}"))
            r = bench_ort_once(path, inputs_dir, model_args)
            if isinstance(r, tuple):
                ort_runs.append(r)
                ort_version = r[4]
                baselines.append(r[3])
            else:
                errors.append(f"ORT: {r}")
        entry = {"quilt": {}, "ort": {
            "ms": summarize([r[0] for r in ort_runs]), "creation": summarize([r[1] for r in ort_runs]),
            "peak": max([r[2] for r in ort_runs], default=None)},
            "fp32": {"ms": summarize([r[0] for r in fp32_runs])}}
        for backend in backend_lists:
            runs = quilt_runs[backend]
            entry["quilt"][backend] = {"ms": summarize([r[0] for r in runs]),
                                       "creation": summarize([r[1] for r in runs]),
                                       "peak": max([r[2] for r in runs], default=None),
                                       "devices": sorted({d for r in runs for d in r[3]})}
        for samples in [[r[0] for r in ort_runs]] + [[r[0] for r in quilt_runs[b]] for b in backend_lists]:
            if len(samples) > 1:
                spreads.append((max(samples) - min(samples)) / float(np.median(samples)))
        results[name] = entry
        if errors:
            failures += 1
            notes.append(f"- `{name}`: " + "; ".join(sorted(set(errors))))
        q = entry["quilt"][backend_lists[0]]["ms"]
        o = entry["ort"]["ms"]
        log(f"  {name:<30} Quilt {_fmt(q, 'ms'):>7} ms  ORT {_fmt(o, 'ms'):>7} ms  ratio "
            f"{_fmt(q / o if q and o else None, 2):>5}  ({time.perf_counter() - t0:.0f} s)"
            + (f"  errors: {'; '.join(errors)}" if errors else ""))
    header, rows, geomeans = bench_table(results, backend_lists, half)
    table = format_table(header, rows)
    gm_lines = [f"**Geometric mean of Quilt/ORT ({b}): {_fmt(g, 2)}** over {len(results)} models"
                for b, g in geomeans.items()]
    if half:
        first = backend_lists[0]
        gm_lines.append(f"**Geometric mean of {half} / Quilt fp32 ({first}): " + _fmt(geometric_mean(
            [r["quilt"][first]["ms"] / r["fp32"]["ms"] for r in results.values()
             if r["quilt"][first]["ms"] and r["fp32"]["ms"]]), 2) + f"** over {len(results)} models")
    log("")
    log(table)
    log("\n" + "\n".join(gm_lines))
    cpu, cores, mem_gib, blas = machine_info(quilt, int8=quantized)
    minutes = (time.time() - started) / 60
    only = f" --only {args.only}" if args.only else ""
    command = (f"tools/zoo.py bench{family_arg}{only} --backends \"{args.backends}\" --threads {args.threads} "
               f"--iterations {args.iterations} --warmup {args.warmup} --rounds {args.rounds}"
               + (f" --min-seconds {args.min_seconds:g}" if args.min_seconds != 1.0 else ""))
    baseline = summarize(baselines)
    more = {n: c for n, c in iteration_counts.items() if c != args.iterations}
    runs_text = ("timed runs per process: " + ", ".join(f"{n} {c}" for n, c in more.items())
                 + f"; the others {args.iterations}") if more else f"every model took {args.iterations}"
    if spreads:
        spread = (f"Here, the medians of the {args.rounds} processes of one runtime on one model "
                  f"differed by {100 * float(np.median(spreads)):.0f} % of their median in the "
                  f"typical case and by up to {100 * max(spreads):.0f} %")
    else:
        spread = "Run with --rounds 2 or more to see how much the rounds differ"
    if quantized:
        models_text, chart, reproduce, title, rewrites = quantized_bench_text()
    elif half:
        models_text, chart, reproduce, title, rewrites = half_bench_text(args.precision == "bf16", pins)
    elif args.family == "ml":
        (models_text, reproduce, title, rewrites), chart = ml_bench_text(), ""
    elif small:
        models_text = ("the small family, written out with onnx.helper by tools/zoo_small.py (random "
                       "weights, seed 0), from `tools/zoo.py export --family small`, with their inputs "
                       "`<model>.inputs/*.npy`")
        chart = ""
        reproduce = ("tools/zoo.py export --family small   # the models and their inputs into "
                     "$QUILT_ZOO_DIR (~/.cache/quilt/zoo)")
        title = "Benchmarks of the small models: Quilt and onnxruntime side by side"
        rewrites = "this file and the README's small-models benchmark table"
    else:
        models_text = (f"models exported with torch {pins.get('torch', '?')}, torchvision "
                       f"{pins.get('torchvision', '?')}, transformers {pins.get('transformers', '?')}, "
                       f"onnxscript {pins.get('onnxscript', '?')} (tools/requirements-zoo.txt): the "
                       "default-opset files `<model>.onnx` (opset 20, dynamo exporter) from "
                       "`tools/zoo.py export`, with their inputs `<model>.inputs/*.npy`")
        chart = "\n![Quilt/ORT latency ratio per model](benchmarks.png)\n"
        reproduce = ("tools/zoo.py export        # the models and their inputs into $QUILT_ZOO_DIR "
                     "(~/.cache/quilt/zoo)")
        title = "Benchmarks: Quilt and onnxruntime side by side"
        rewrites = "this file, `docs/benchmarks.png` and the README's benchmarks table"
    shared_cores_warning(quilt, args.threads, "after the runs")
    compute = (compute_section(results, backend_lists[0], directory, quilt, args.threads)
               if args.family == "classic" and not half else "")
    memory = (memory_section(results, backend_lists, quilt, args.threads)
              if args.family == "classic" and not half else "")
    doc = f"""{GENERATED_NOTE}
# {title}

Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))} ({minutes:.1f} min).

**Machine.** {cpu}, {cores} cores, {mem_gib:.0f} GiB; `quilt devices`: `{blas}`. The machine is
a shared virtual machine (KVM): other work may run on it at the same time, so timings are
noisy. {spread}; read ratios within that of 1.0 as even.

**Versions.** Quilt commit `{commit}` (`{quilt if args.quilt else 'build/quilt'}`); onnxruntime {ort_version}
(CPU execution provider); {models_text}.

**Method.** Per model, {args.rounds} rounds, each of them a fresh `quilt bench MODEL --backend LIST
--threads {args.threads} --warmup {args.warmup} --iterations {args.iterations} --json` process per
backend list, then a fresh onnxruntime process (`tools/zoo.py ort-bench`:
`intra_op_num_threads={args.threads}`, `inter_op_num_threads=1`, sequential execution, default
graph optimisations) doing the same: create the session, {args.warmup} warm-up runs, {args.iterations}
timed runs, or more where {args.iterations} take under {args.min_seconds:g} s: as many as take about
that long, by a 3-run probe of Quilt first ({runs_text}). Both run the same input files. The runtimes alternate, so both see the same machine
state. *Latency* is the median over the rounds of each process's median of its timed runs;
*creation* the median of the rounds' session-creation times (reading the file included);
*peak* the largest VmHWM (peak resident memory) of the rounds' processes, each of which only
loads and runs the model. ORT's figure includes its Python interpreter, numpy and the
onnxruntime library: {_fmt(baseline)} MiB before the model is loaded; Quilt's includes
the `quilt` executable and OpenBLAS.

<!-- table -->
{table}

{chr(10).join(gm_lines)} (ratio < 1: Quilt is faster).
<!-- /table -->
{('' if not notes else chr(10) + 'Failures:' + chr(10) + chr(10) + chr(10).join(notes) + chr(10))}{chart}{compute}{memory}
## Reproduce

```sh
tools/setup.sh             # builds Quilt in build/
{reproduce}
{command}
```

`tools/zoo.py bench{family_arg}` rewrites {rewrites}.
Options: `--only NAME,...`, `--backends "cpu;opencl,cpu"` (a Quilt column and ratio per backend
list), `--threads`, `--iterations`, `--warmup`, `--rounds`, `--quilt PATH`, `--precision bf16`,
`--model-precision fp16`; `--update-readme` only refills the README's table from this file.
"""
    page.write_text(doc)
    written = [str(page.relative_to(ROOT))]
    if half:
        log(f"\nwrote {written[0]} ({minutes:.1f} min)")
        return 1 if failures else 0
    if args.family == "classic":
        write_chart(results, backend_lists, geomeans, args.threads, BENCHMARKS_PNG)
        written.append(str(BENCHMARKS_PNG.relative_to(ROOT)))
    if section:
        update_readme(benchmarks=page, name=section, command=f"tools/zoo.py bench{family_arg}")
        written.append(f"README.md's {section} section")
    log(f"\nwrote {', '.join(written)} ({minutes:.1f} min)")
    return 1 if failures else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    family_help = ("one family only: classic (torch-exported), small (onnx.helper), quantized, "
                   "ml (scikit-learn, XGBoost, LightGBM)")
    p = sub.add_parser("export", help="build the models with random weights and export ONNX")
    p.add_argument("--only", help="comma-separated model names (default: all)")
    p.add_argument("--family", choices=FAMILIES, help=family_help + " (default: classic, small and ml)")
    p.add_argument("--precision", choices=["fp32", "fp16"], default="fp32",
                   help="fp16: convert each exported <model>.onnx to <model>-fp16.onnx "
                        "(onnxconverter-common, everything float16) with float16 inputs (default fp32)")
    p.add_argument("--opset", type=int,
                   help=f"export only at this opset, as <model>-opN.onnx (default: the exporter's "
                        f"default as <model>.onnx and {EXTRA_OPSET} as <model>-op{EXTRA_OPSET}.onnx)")
    p = sub.add_parser("check", help="run the exported models with Quilt and onnxruntime, compare")
    p.add_argument("--only", help="comma-separated model names (default: all)")
    p.add_argument("--family", choices=FAMILIES, help=family_help + " (default: classic, small and ml)")
    p.add_argument("--backends", default="cpu;opencl,cpu",
                   help='backend lists separated by ";" (default "cpu;opencl,cpu")')
    p.add_argument("--iterations", type=int, default=3, help="timed runs per model (default 3)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per quilt run (default 1800)")
    p.add_argument("--quilt", help="the quilt binary (default $QUILT_BIN or build/quilt)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="Quilt's --precision; bf16 is checked against onnxruntime's float32 run by "
                        f"cosine >= {BF16_MIN_COSINE} and argmax agreement >= {BF16_MIN_ARGMAX} "
                        "instead of the tolerance (default fp32)")
    p.add_argument("--model-precision", choices=["fp32", "fp16"], default="fp32",
                   help="fp16: check the <model>-fp16.onnx files (export --precision fp16) against "
                        "onnxruntime's run of the same file, by the same cosine and argmax agreement")
    p = sub.add_parser("bench", help="benchmark Quilt and onnxruntime side by side, write docs/BENCHMARKS.md")
    p.add_argument("--only", help="comma-separated model names (default: all of the family)")
    p.add_argument("--family", choices=FAMILIES, default="classic",
                   help=family_help + "; small writes docs/BENCHMARKS-small.md (default classic)")
    p.add_argument("--backends", default="cpu",
                   help='Quilt backend lists separated by ";" (default "cpu"; e.g. "cpu;opencl,cpu")')
    p.add_argument("--threads", type=int, default=THREADS, help=f"threads of both (default {THREADS})")
    p.add_argument("--iterations", type=int, default=10, help="timed runs per process (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per process first (default 2)")
    p.add_argument("--rounds", type=int, default=5,
                   help="alternating Quilt/ORT rounds per model, a process each (default 5)")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per process (default 1800)")
    p.add_argument("--quilt", help="the quilt binary (default $QUILT_BIN or build/quilt)")
    p.add_argument("--min-seconds", type=float, default=1.0,
                   help="a model whose --iterations runs take less than this gets more timed runs, "
                        "the same for both runtimes, as many as take about this long (default 1; "
                        "0: exactly --iterations)")
    p.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                   help="Quilt's --precision: bf16 runs the float32 models with bfloat16 GEMM and conv "
                        "operands against onnxruntime's float32 run; writes docs/BENCHMARKS-bf16.md")
    p.add_argument("--model-precision", choices=["fp32", "fp16"], default="fp32",
                   help="fp16: both runtimes run the <model>-fp16.onnx files (export --precision fp16); "
                        "writes docs/BENCHMARKS-fp16.md")
    p.add_argument("--update-readme", action="store_true",
                   help="only fill the README's benchmarks table from docs/BENCHMARKS.md")
    p = sub.add_parser("ort-bench", help=argparse.SUPPRESS)  # bench's onnxruntime child process
    p.add_argument("model")
    p.add_argument("--inputs", required=True)
    p.add_argument("--threads", type=int, default=THREADS)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p = sub.add_parser("quantize", help="write the quantized family with onnxruntime's quantizer")
    p.add_argument("--only", help="comma-separated quantized model names (default: all)")
    p.add_argument("--family", default="quantized", help=argparse.SUPPRESS)
    sub.add_parser("list", help="list the models")
    args = parser.parse_args(argv)
    if args.command == "ort-bench":
        return ort_child(args)
    if args.command == "list":
        for name, (_, specs, outputs) in MODELS.items():
            log(f"{name:<30} " + ", ".join(f"{n} {list(s)}" for n, s, _ in specs) + f" -> {', '.join(outputs)}")
        return 0
    # torch (and matplotlib, for the classic benchmark's chart) only where a classic model needs it.
    classic = any(family(n) == "classic" for n in select(args.only, args.family))
    fp16_export = args.command == "export" and args.precision == "fp16"
    ensure_environment(need_torch=args.command in ("export", "bench") and classic and not fp16_export)
    return {"export": export, "check": check, "bench": bench, "quantize": quantize}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
