"""Accuracy of Quilt's demo outputs, next to onnxruntime's on the same model and inputs, and
onnxruntime's latency on them for comparison.

usage: demo_accuracy.py MODELS_DIR QUILT_PROBABILITIES.npy
Exits 1 if the two accuracies differ.
"""
import os
import sys
import time
from pathlib import Path

import numpy as np
import onnxruntime as ort

models, quilt_out = Path(sys.argv[1]), Path(sys.argv[2])
images = np.load(models / "digits_test_images.npy")
labels = np.load(models / "digits_test_labels.npy")
quilt_probs = np.load(quilt_out)
so = ort.SessionOptions()
so.intra_op_num_threads = os.cpu_count() or 1
sess = ort.InferenceSession(str(models / "digits_cnn.onnx"), so, providers=["CPUExecutionProvider"])
ort_probs = sess.run(["probabilities"], {"image": images})[0]
times = []
for _ in range(50):
    start = time.perf_counter()
    sess.run(["probabilities"], {"image": images})
    times.append((time.perf_counter() - start) * 1000)
times.sort()
quilt_acc = float((quilt_probs.argmax(1) == labels).mean())
ort_acc = float((ort_probs.argmax(1) == labels).mean())
print(f"quilt accuracy       {quilt_acc:.4f} ({int(round(quilt_acc * len(labels)))}/{len(labels)})")
print(f"onnxruntime accuracy {ort_acc:.4f} ({int(round(ort_acc * len(labels)))}/{len(labels)})")
print(f"max |quilt - onnxruntime| probability difference: {np.abs(quilt_probs - ort_probs).max():.3g}")
print(f"onnxruntime {ort.__version__} latency for comparison: median {times[len(times) // 2]:.3f} ms, "
      f"min {times[0]:.3f} ms over 50 runs ({so.intra_op_num_threads} threads)")
if quilt_acc != ort_acc:
    print("MISMATCH: Quilt and onnxruntime disagree", file=sys.stderr)
    sys.exit(1)
