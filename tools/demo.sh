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
