#!/usr/bin/env bash
# Bundles against the JIT on models of the corpus (/tmp/kiln-models, made by
# ../shared/bench/setup-peers.sh): for each model, kiln-compile's bundle linked into
# test/bundle/run_bundle.c with gcc (plain C, nothing but the object file and libc), then
#  - its output against the reference (BENCH.md's tolerance) and the JIT's (bit for bit);
#  - run time: ROUNDS interleaved rounds of ITERATIONS runs each of the bundle and of the JIT
#    (test/bundle:jit_run, same timing), the median of each round, then their median;
#  - process start to first result, wall and CPU time: run_bundle (reads the weights, one
#    run) against kiln-run (imports, compiles, one run), with the kernel disk cache warm and
#    off;
#  - the bundle's size on disk.
#
#   bash test/bundle/bench_bundles.sh [--models "resnet50 mobilenet_v2"] [--rounds 5]
#       [--iterations 10] [--threads 1] [--target host] [--first-rounds 3]
#       [--out /tmp/kiln-bundle-bench]
#
# --target other than host compares with the JIT on the same kernels (avx512=0 for the
# AVX2 ones); --first-rounds 0 skips the start-up measurement (cold kiln-run is slow).
#
# Needs python3 with onnx (to turn the .pb data sets into raw bytes) and gcc. BAZEL
# (default "bazel") builds the tools.
set -euo pipefail
cd "$(dirname "$0")/../.."
MODELS_DIR=/tmp/kiln-models
MODELS="resnet50 mobilenet_v2"
ROUNDS=5
ITERS=10
THREADS=1
TARGET=host
FIRST=3
OUT=/tmp/kiln-bundle-bench
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) MODELS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --iterations) ITERS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --target) TARGET=$2; shift 2 ;;
    --first-rounds) FIRST=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench_bundles.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
if [[ "$THREADS" != 1 ]]; then
  echo "bench_bundles.sh: run_bundle's parallel-for starts threads per stage; compare at 1 thread" >&2
  exit 2
fi
BAZEL=${BAZEL:-bazel}
$BAZEL build //src/tools:kiln-compile //src/tools:kiln-run //test/bundle:jit_run >&2
BIN="$($BAZEL info bazel-bin 2>/dev/null)"
mkdir -p "$OUT"
# Copies, so that a rebuild while this runs changes nothing.
cp -f "$BIN/src/tools/kiln-compile" "$BIN/src/tools/kiln-run" "$BIN/test/bundle/jit_run" "$OUT/"

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
field() { grep -o "$2 [0-9.]*" <<<"$1" | awk '{ print $NF }'; }

echo "host: $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-14s | %-6s | %-9s | %-11s | %-19s | %-19s | %-34s | %s\n' model ref "=JIT bits" \
  "compile s" "bundle ms (min)" "JIT ms (min)" "first result wall/cpu: bundle / kiln-run warm / cold" \
  "size: .o + .weights"
for m in $MODELS; do
  dir="$MODELS_DIR/$m"
  [[ -f "$dir/model.onnx" ]] || { echo "no $dir/model.onnx" >&2; continue; }
  w="$OUT/$m"
  mkdir -p "$w"
  /usr/bin/python3 - "$dir/test_data_set_0" "$w" <<'EOF'
import sys, onnx
from onnx import numpy_helper
for k in ("input_0", "output_0"):
    numpy_helper.to_array(onnx.load_tensor(f"{sys.argv[1]}/{k}.pb")).tofile(f"{sys.argv[2]}/{k}.bin")
EOF
  t0=$(now_ms)
  "$OUT/kiln-compile" --model "$dir/model.onnx" --out "$w" --name "$m" --target "$TARGET" >/dev/null
  compile_s=$(awk -v a="$t0" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
  upper=$(tr a-z A-Z <<<"$m")
  gcc -std=c11 -O2 -DBUNDLE="$m" -DBUNDLE_UPPER="$upper" "-DBUNDLE_HEADER=\"$m.h\"" -I"$w" \
    test/bundle/run_bundle.c "$w/$m.o" -o "$w/run_$m"
  "$w/run_$m" "$w/$m.weights" "$w/input_0.bin" -o "$w/bundle_out.bin"
  avx512=1
  grep -q "AVX-512 kernels" "$w/$m.h" || avx512=0
  "$OUT/jit_run" "$dir/model.onnx" "$w/input_0.bin" "$w/jit_out.bin" "$THREADS" 0 "avx512=$avx512"
  ref=$(/usr/bin/python3 - "$w/bundle_out.bin" "$w/output_0.bin" <<'EOF'
import sys, numpy as np
got, ref = (np.fromfile(p, dtype=np.float32) for p in sys.argv[1:3])
err = np.abs(got - ref)
print("match" if (err <= 1e-4 * np.abs(ref).max() + 1e-3 * np.abs(ref)).all() else "MISMATCH",
      f"{err.max():.2g}")
EOF
)
  bits=no
  cmp -s "$w/bundle_out.bin" "$w/jit_out.bin" && bits=yes
  b_med=() b_min=() j_med=() j_min=() b_cpu=() j_cpu=()
  for ((r = 0; r < ROUNDS; r++)); do
    line=$("$w/run_$m" "$w/$m.weights" "$w/input_0.bin" -o "$w/bundle_out.bin" -n "$ITERS")
    b_med+=("$(field "$line" " median_ms")"); b_min+=("$(field "$line" " min_ms")")
    b_cpu+=("$(field "$line" cpu_median_ms)")
    line=$("$OUT/jit_run" "$dir/model.onnx" "$w/input_0.bin" "$w/jit_out.bin" "$THREADS" "$ITERS" "avx512=$avx512")
    j_med+=("$(field "$line" " median_ms")"); j_min+=("$(field "$line" " min_ms")")
    j_cpu+=("$(field "$line" cpu_median_ms)")
  done
  bm=$(printf '%s\n' "${b_med[@]}" | median) bn=$(printf '%s\n' "${b_min[@]}" | sort -g | head -1)
  jm=$(printf '%s\n' "${j_med[@]}" | median) jn=$(printf '%s\n' "${j_min[@]}" | sort -g | head -1)
  # Process start to first result, FIRST interleaved rounds, medians of the wall time and,
  # less sensitive to other load, of the CPU time (user + system, all threads).
  fb=() fw=() fc=()
  timed() { # appends "wall_ms/cpu_ms" of the command to the array named $1
    local -n acc=$1; shift
    /usr/bin/time -f "%e %U %S" -o "$w/time.txt" "$@" >/dev/null 2>&1 || true
    acc+=("$(awk '{ printf "%d/%d", $1 * 1000, ($2 + $3) * 1000 }' "$w/time.txt")")
  }
  for ((r = 0; r < FIRST; r++)); do
    timed fb "$w/run_$m" "$w/$m.weights" "$w/input_0.bin" -o "$w/first.bin"
    timed fw "$OUT/kiln-run" --model "$dir/model.onnx" --data "$dir/test_data_set_0" --backend CPU \
      --threads "$THREADS" --iterations 1 --warmup 0
    timed fc "$OUT/kiln-run" --model "$dir/model.onnx" --data "$dir/test_data_set_0" --backend CPU \
      --threads "$THREADS" --iterations 1 --warmup 0 --backend-opt cache-dir=off
  done
  # Median by wall time of "wall/cpu" pairs.
  pmedian() { (($# == 0)) && { echo -; return; }; printf '%s\n' "$@" | sort -t/ -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  size_o=$(stat -c %s "$w/$m.o") size_w=$(stat -c %s "$w/$m.weights")
  printf '%-14s | %-6s | %-9s | %-11s | %-19s | %-19s | %-34s | %s\n' "$m" "$ref" "$bits" "$compile_s" \
    "$bm ($bn)" "$jm ($jn)" \
    "$(pmedian "${fb[@]}") / $(pmedian "${fw[@]}") / $(pmedian "${fc[@]}") ms" \
    "$size_o + $size_w B"
  echo "  rounds, bundle medians: ${b_med[*]}; JIT medians: ${j_med[*]}"
  echo "  CPU time per run (process, all threads), median of round medians: bundle" \
    "$(printf '%s\n' "${b_cpu[@]}" | median) ms, JIT $(printf '%s\n' "${j_cpu[@]}" | median) ms;" \
    "rounds: ${b_cpu[*]}; ${j_cpu[*]}"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
