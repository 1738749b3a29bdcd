"""Accuracy of Quilt's demo outputs, next to onnxruntime's on the same model and inputs.

usage: demo_accuracy.py MODELS_DIR QUILT_PROBABILITIES.npy
Exits 1 if the two accuracies differ.
"""
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

models, quilt_out = Path(sys.argv[1]), Path(sys.argv[2])
images = np.load(models / "digits_test_images.npy")
labels = np.load(models / "digits_test_labels.npy")
quilt_probs = np.load(quilt_out)
sess = ort.InferenceSession(str(models / "digits_cnn.onnx"), providers=["CPUExecutionProvider"])
ort_probs = sess.run(["probabilities"], {"image": images})[0]
quilt_acc = float((quilt_probs.argmax(1) == labels).mean())
ort_acc = float((ort_probs.argmax(1) == labels).mean())
print(f"quilt accuracy       {quilt_acc:.4f} ({int(round(quilt_acc * len(labels)))}/{len(labels)})")
print(f"onnxruntime accuracy {ort_acc:.4f} ({int(round(ort_acc * len(labels)))}/{len(labels)})")
print(f"max |quilt - onnxruntime| probability difference: {np.abs(quilt_probs - ort_probs).max():.3g}")
if quilt_acc != ort_acc:
    print("MISMATCH: Quilt and onnxruntime disagree", file=sys.stderr)
    sys.exit(1)
