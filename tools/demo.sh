#!/usr/bin/env bash
# Quilt's main job on the embedded default model: a small CNN trained on scikit-learn's 8x8
# digits (tools/train_digits.py), run by `quilt run` on the 360 held-out digits. Prints the
# outputs, the latency, and the accuracy next to onnxruntime's on the same model and data.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"
cd "$QUILT_ROOT"
MODELS=tools/models
OUT="${QUILT_BUILD#"$QUILT_ROOT"/}/demo"  # relative to the repository when build/ is inside it
echo "== quilt run tools/models/digits_cnn.onnx (360 held-out digits, batch of 360, 50 runs)"
"$QUILT_BUILD/quilt" run "$MODELS/digits_cnn.onnx" \
  --input image="$MODELS/digits_test_images.npy" \
  --output-dir "$OUT" --iterations 50 "$@"
echo
echo "== accuracy"
"$QUILT_PYTHON" tools/demo_accuracy.py "$MODELS" "$OUT/probabilities.npy"

# The same model split between the OpenCL backend and the CPU, when an OpenCL device exists
# (PoCL on a machine without a GPU): the plan, then the run and its accuracy.
if "$QUILT_BUILD/quilt" devices 2>/dev/null | grep -q "^backend opencl"; then
  echo
  echo "== quilt plan tools/models/digits_cnn.onnx --backend opencl,cpu"
  "$QUILT_BUILD/quilt" plan "$MODELS/digits_cnn.onnx" --backend opencl,cpu --dim batch=360
  echo
  echo "== quilt run tools/models/digits_cnn.onnx --backend opencl,cpu (50 runs)"
  "$QUILT_BUILD/quilt" run "$MODELS/digits_cnn.onnx" --backend opencl,cpu \
    --input image="$MODELS/digits_test_images.npy" \
    --output-dir "$OUT/opencl" --iterations 50 "$@"
  echo
  echo "== accuracy (opencl,cpu)"
  "$QUILT_PYTHON" tools/demo_accuracy.py "$MODELS" "$OUT/opencl/probabilities.npy"
else
  echo
  echo "(no OpenCL device: \`quilt devices\` lists none, so the opencl,cpu part is skipped)"
fi
