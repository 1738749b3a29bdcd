#!/usr/bin/env python3
"""Train the small digits CNN that Quilt ships as its default demo model.

The 8x8 handwritten digits data set bundled with scikit-learn (no download)
is split deterministically into train / held-out test sets, a tiny CNN is
trained with plain numpy (manual forward and backward passes, Adam), and the
result is exported to ONNX and checked against onnxruntime.

Network (node names as they appear in the ONNX graph):

    image [batch,1,8,8]
      conv1 (3x3, 1->8, pad 1) -> relu1 -> pool1 (2x2)
      conv2 (3x3, 8->16, pad 1) -> relu2 -> pool2 (2x2)
      flatten -> fc (Gemm 64->10) -> softmax
    probabilities [batch,10]

Outputs written to --out-dir (default tools/models):
    digits_cnn.onnx            the model (opset 17, IR version 8)
    digits_test_images.npy     float32 [360,1,8,8], pixels scaled to [0,1]
    digits_test_labels.npy     int64 [360]

Re-run from the repository root, with tools/requirements-train.txt and the
main test requirements installed:

    python tools/train_digits.py

Seeds are fixed, so re-running reproduces the same split and model.
"""
import argparse
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SEED = 0
REPO_ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- layers ----
def conv3x3_forward(x, w, b):
    """3x3 convolution, stride 1, pad 1. x [N,C,H,W], w [K,C,3,3], b [K]."""
    n, c, h, wd = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    # cols[n, i, j, c*9 + ky*3 + kx] = xp[n, c, i+ky, j+kx]
    cols = np.stack([xp[:, :, ky:ky + h, kx:kx + wd]
                     for ky in range(3) for kx in range(3)], axis=2)
    cols = cols.reshape(n, c * 9, h, wd).transpose(0, 2, 3, 1)
    out = cols @ w.reshape(w.shape[0], -1).T + b          # [N,H,W,K]
    return out.transpose(0, 3, 1, 2), cols


def conv3x3_backward(dout, cols, x_shape, w):
    n, c, h, wd = x_shape
    k = w.shape[0]
    d = dout.transpose(0, 2, 3, 1).reshape(-1, k)         # [N*H*W, K]
    dw = (d.T @ cols.reshape(-1, c * 9)).reshape(w.shape)
    db = d.sum(axis=0)
    dcols = (d @ w.reshape(k, -1)).reshape(n, h, wd, c, 3, 3)
    dxp = np.zeros((n, c, h + 2, wd + 2), dtype=dout.dtype)
    for ky in range(3):
        for kx in range(3):
            dxp[:, :, ky:ky + h, kx:kx + wd] += dcols[..., ky, kx].transpose(0, 3, 1, 2)
    return dxp[:, :, 1:-1, 1:-1], dw, db


def maxpool2_forward(x):
    """2x2 max pool, stride 2. Returns output and a one-hot argmax mask."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    idx = win.argmax(axis=-1)
    mask = np.eye(4, dtype=x.dtype)[idx]                  # first max wins ties
    return np.take_along_axis(win, idx[..., None], -1)[..., 0], mask


def maxpool2_backward(dout, mask):
    n, c, h2, w2, _ = mask.shape
    dwin = (mask * dout[..., None]).reshape(n, c, h2, w2, 2, 2)
    return dwin.transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h2 * 2, w2 * 2)


def softmax(z):
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# ----------------------------------------------------------------- model ----
def init_params(rng):
    def he(shape, fan_in):
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
    return {
        "conv1_w": he((8, 1, 3, 3), 9), "conv1_b": np.zeros(8, np.float32),
        "conv2_w": he((16, 8, 3, 3), 72), "conv2_b": np.zeros(16, np.float32),
        "fc_w": he((10, 64), 64), "fc_b": np.zeros(10, np.float32),
    }


def forward(p, x):
    """Returns logits and a cache for backward()."""
    a1, cols1 = conv3x3_forward(x, p["conv1_w"], p["conv1_b"])
    r1 = np.maximum(a1, 0)
    p1, m1 = maxpool2_forward(r1)
    a2, cols2 = conv3x3_forward(p1, p["conv2_w"], p["conv2_b"])
    r2 = np.maximum(a2, 0)
    p2, m2 = maxpool2_forward(r2)
    flat = p2.reshape(len(x), -1)                          # same order as ONNX Flatten
    logits = flat @ p["fc_w"].T + p["fc_b"]
    return logits, (x, a1, cols1, m1, p1, a2, cols2, m2, p2, flat)


def backward(p, cache, dlogits):
    x, a1, cols1, m1, p1, a2, cols2, m2, p2, flat = cache
    g = {"fc_w": dlogits.T @ flat, "fc_b": dlogits.sum(axis=0)}
    d = (dlogits @ p["fc_w"]).reshape(p2.shape)
    d = maxpool2_backward(d, m2) * (a2 > 0)
    d, g["conv2_w"], g["conv2_b"] = conv3x3_backward(d, cols2, p1.shape, p["conv2_w"])
    d = maxpool2_backward(d, m1) * (a1 > 0)
    _, g["conv1_w"], g["conv1_b"] = conv3x3_backward(d, cols1, x.shape, p["conv1_w"])
    return g


def predict(p, x):
    return softmax(forward(p, x)[0])


def train(p, x, y, epochs, batch_size, lr, rng):
    """Softmax cross-entropy, Adam with cosine learning-rate decay."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    m = {k: np.zeros_like(v) for k, v in p.items()}
    v = {k: np.zeros_like(v) for k, v in p.items()}
    step = 0
    for epoch in range(epochs):
        epoch_lr = lr * 0.5 * (1 + np.cos(np.pi * epoch / epochs))
        order = rng.permutation(len(x))
        total = 0.0
        for start in range(0, len(x), batch_size):
            idx = order[start:start + batch_size]
            logits, cache = forward(p, x[idx])
            prob = softmax(logits)
            total += -np.log(prob[np.arange(len(idx)), y[idx]] + 1e-12).sum()
            dlogits = prob
            dlogits[np.arange(len(idx)), y[idx]] -= 1
            grads = backward(p, cache, dlogits / len(idx))
            step += 1
            for k in p:
                m[k] = b1 * m[k] + (1 - b1) * grads[k]
                v[k] = b2 * v[k] + (1 - b2) * grads[k] ** 2
                mhat = m[k] / (1 - b1 ** step)
                vhat = v[k] / (1 - b2 ** step)
                p[k] = (p[k] - epoch_lr * mhat / (np.sqrt(vhat) + eps)).astype(np.float32)
        print(f"epoch {epoch + 1:2d}  loss {total / len(x):.4f}")


# ---------------------------------------------------------------- export ----
def export_onnx(p, path):
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["image", "conv1_w", "conv1_b"], ["conv1_out"], name="conv1", **conv),
        helper.make_node("Relu", ["conv1_out"], ["relu1_out"], name="relu1"),
        helper.make_node("MaxPool", ["relu1_out"], ["pool1_out"], name="pool1", **pool),
        helper.make_node("Conv", ["pool1_out", "conv2_w", "conv2_b"], ["conv2_out"], name="conv2", **conv),
        helper.make_node("Relu", ["conv2_out"], ["relu2_out"], name="relu2"),
        helper.make_node("MaxPool", ["relu2_out"], ["pool2_out"], name="pool2", **pool),
        helper.make_node("Flatten", ["pool2_out"], ["flatten_out"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flatten_out", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probabilities"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "digits_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 1, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", 10])],
        initializer=[numpy_helper.from_array(v, name=k) for k, v in p.items()],
    )
    model = helper.make_model(graph, producer_name="quilt-train_digits",
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model.doc_string = "8x8 digits classifier trained by tools/train_digits.py"
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return model


# ------------------------------------------------------------------ main ----
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=REPO_ROOT / "tools" / "models")
    ap.add_argument("--epochs", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.003)
    args = ap.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int64)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=0.2, random_state=SEED, stratify=y)
    print(f"train {len(x_train)} images, test {len(x_test)} images")

    rng = np.random.default_rng(SEED)
    params = init_params(rng)
    t0 = time.perf_counter()
    train(params, x_train, y_train, args.epochs, args.batch_size, args.lr, rng)
    print(f"training time {time.perf_counter() - t0:.1f} s")

    np_prob = predict(params, x_test)
    np_acc = float((np_prob.argmax(axis=1) == y_test).mean())
    if np_acc < 0.95:
        raise SystemExit(f"held-out accuracy {np_acc:.4f} is below 0.95")

    model_path = args.out_dir / "digits_cnn.onnx"
    model = export_onnx(params, model_path)
    np.save(args.out_dir / "digits_test_images.npy", x_test)
    np.save(args.out_dir / "digits_test_labels.npy", y_test)

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    ort_prob = sess.run(["probabilities"], {"image": x_test})[0]
    ort_acc = float((ort_prob.argmax(axis=1) == y_test).mean())
    max_diff = float(np.abs(ort_prob - np_prob).max())

    print("nodes: " + ", ".join(f"{n.name}({n.op_type})" for n in model.graph.node))
    print(f"model {model_path} ({model_path.stat().st_size} bytes), max |prob diff| {max_diff:.2e}")
    print(f"numpy accuracy {np_acc:.4f}, onnxruntime accuracy {ort_acc:.4f}")
    if ort_acc != np_acc or max_diff > 1e-4:
        raise SystemExit("onnxruntime output does not match the numpy model")


if __name__ == "__main__":
    main()
