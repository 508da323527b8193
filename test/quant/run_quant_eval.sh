#!/usr/bin/env bash
# The accuracy figures of docs/Quantization.md. Builds the tools, writes the inputs
# (make_quant_data.py) and runs quant_eval on the digits model and the corpus models, and
# image-classifier float32 vs --quantize on every held-out digit. Slow on the Interpreter:
# run it niced, in the background.
#
#   bash test/quant/run_quant_eval.sh [OUT_DIR] [MODEL...]     # default /tmp/kiln-quant
#
# MODELs are names under /tmp/kiln-models (../shared/bench/setup-peers.sh); default
# squeezenet1_1 mobilenet_v2 resnet50; "none" skips the corpus.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-/tmp/kiln-quant}
shift || true
MODELS=("$@")
[[ ${#MODELS[@]} -eq 0 ]] && MODELS=(squeezenet1_1 mobilenet_v2 resnet50)
PY=/usr/bin/python3
nice -n 15 bazel build //test/quant:quant_eval //src/tools:kiln-run //src/tools:image-classifier
BIN=bazel-bin
mkdir -p "$OUT"

echo "== digits (examples/digits/digits.onnx)"
$PY test/quant/make_quant_data.py digits --out "$OUT/digits" --png
$BIN/test/quant/quant_eval --name digits --model examples/digits/digits.onnx \
  --calibration "$OUT/digits/calib" --test "$OUT/digits/test" \
  --labels "$OUT/digits/test_labels.txt" --calibrates minmax,percentile,mse

echo "== image-classifier on the held-out digits, float32 vs --quantize"
$BIN/src/tools/kiln-run --model examples/digits/digits.onnx \
  --quant-profile "$OUT/digits/profile.json" --calibration "$OUT/digits/calib"
IC=($BIN/src/tools/image-classifier --model examples/digits/digits.onnx --mean 0.5 --std 0.5 --top-k 1)
"${IC[@]}" "$OUT"/digits/png/*.png > "$OUT/digits/ic_float.txt"
for schema in asymmetric symmetric symmetric-uint8 power2; do
  "${IC[@]}" --quantize "$OUT/digits/profile.json" --schema $schema "$OUT"/digits/png/*.png \
    > "$OUT/digits/ic_$schema.txt" 2> "$OUT/digits/ic_$schema.log"
  $PY - "$OUT/digits/ic_float.txt" "$OUT/digits/ic_$schema.txt" $schema <<'PYEOF'
import re, sys
def top1(path):
    out = {}
    for line in open(path):
        m = re.match(r"^(\S+\.png): (\S+)$", line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out
f, q = top1(sys.argv[1]), top1(sys.argv[2])
truth = {k: re.search(r"digit_(\d)_", k).group(1) for k in f}
diff = [k for k in f if f[k] != q.get(k)]
fa = sum(f[k] == truth[k] for k in f); qa = sum(q.get(k) == truth[k] for k in f)
print(f"image-classifier {sys.argv[3]}: {len(f)} images, top-1 equal to float32 on "
      f"{len(f) - len(diff)}; correct: float32 {fa}, int8 {qa}; differing: "
      + (", ".join(f"{k.split('/')[-1]} (float {f[k]}, int8 {q.get(k)})" for k in diff) or "none"))
PYEOF
done

[[ "${MODELS[0]}" == none ]] && exit 0
echo "== corpus: 16 calibration and 16 test images (synthetic, make_quant_data.py images)"
$PY test/quant/make_quant_data.py images --out "$OUT/images" --count 32 --seed 1
for m in "${MODELS[@]}"; do
  $BIN/test/quant/quant_eval --name "$m" --model "/tmp/kiln-models/$m/model.onnx" \
    --calibration "$OUT/images/calib" --test "$OUT/images/test" \
    --profile-out "$OUT/images/$m.profile.json" \
    --schemas asymmetric,symmetric,symmetric-uint8,power2 --calibrates minmax \
    --weights per-tensor,per-channel
done
