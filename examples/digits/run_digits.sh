#!/usr/bin/env bash
# Kiln's main job on its embedded default: classifies the handwritten digits of
# examples/digits/images with the small CNN examples/digits/digits.onnx (trained by
# train_digits.py on scikit-learn's 8x8 digits) using image-classifier, on the Interpreter
# unless told otherwise. Extra arguments go to image-classifier (e.g. --backend CPU).
#
#   bazel run //examples:digits [-- --backend CPU]
set -euo pipefail
# bazel run starts in the runfiles tree; a direct bazel-bin/examples/digits call does not.
if [[ ! -f examples/digits/digits.onnx ]]; then
  if [[ -n "${RUNFILES_DIR:-}" && -d "$RUNFILES_DIR/kiln" ]]; then
    cd "$RUNFILES_DIR/kiln"
  elif [[ -d "$0.runfiles/kiln" ]]; then
    cd "$0.runfiles/kiln"
  fi
fi
# The model was trained on (p - 0.5) / 0.5 with pixel values p in [0, 1].
exec src/tools/image-classifier --model examples/digits/digits.onnx --mean 0.5 --std 0.5 \
  --top-k 3 "$@" examples/digits/images/digit_*.png
