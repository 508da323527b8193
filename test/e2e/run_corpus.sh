#!/usr/bin/env bash
# End-to-end benchmark over the model corpus of ../shared/BENCH.md: runs every model of
# $MODELS (default /tmp/kiln-models: resnet50, resnet50_b8, mobilenet_v2, squeezenet1_1,
# vgg19, alexnet, lenet5, mlp_mnist, made by ../shared/bench/setup-peers.sh) through
# kiln-run on each backend, checks it against its PyTorch reference with BENCH.md's
# tolerance, and prints a table: model x backend, match, max_abs_err, median_ms, compile_ms.
#
#   bash test/e2e/run_corpus.sh [--models DIR] [--backends "Interpreter CPU"]
#                               [--iterations 5] [--threads 1] [--only "lenet5 mlp_mnist"]
#                               [--kiln-run PATH] [--timeout 1800] [--no-fallback]
#
# --no-fallback: a node the backend cannot run is an error (kiln-run --no-fallback) instead
# of running on the Interpreter.
#
# The Interpreter runs each model once (--interpreter-iterations, default 1): it is the
# reference, not a contender. A backend this build does not register prints "n/a".
# Environment: BAZEL (default "bazel"; e.g. "bazel --output_base=...") builds kiln-run when
# --kiln-run is not given. Exit 0 when every model ran and matched on every available
# backend, 1 otherwise. The JSON line of each run is kept in $OUT_DIR (default a temp dir).
set -uo pipefail
cd "$(dirname "$0")/../.."

MODELS=/tmp/kiln-models
BACKENDS="Interpreter CPU"
ITERS=5
INTERP_ITERS=1
THREADS=1
ONLY=""
KILN_RUN=""
TIMEOUT=1800
FALLBACK=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --models) MODELS=$2; shift 2 ;;
    --backends) BACKENDS=$2; shift 2 ;;
    --iterations) ITERS=$2; shift 2 ;;
    --interpreter-iterations) INTERP_ITERS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --kiln-run) KILN_RUN=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --no-fallback) FALLBACK=(--no-fallback); shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "run_corpus.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done

if [[ ! -d "$MODELS" ]]; then
  echo "run_corpus.sh: no model corpus at $MODELS (run ../shared/bench/setup-peers.sh)" >&2
  exit 2
fi
if [[ -z "$KILN_RUN" ]]; then
  BAZEL=${BAZEL:-bazel}
  $BAZEL build //src/tools:kiln-run >&2 || { echo "run_corpus.sh: build failed" >&2; exit 2; }
  KILN_RUN="$($BAZEL info bazel-bin 2>/dev/null)/src/tools/kiln-run"
fi
[[ -x "$KILN_RUN" ]] || { echo "run_corpus.sh: no kiln-run at $KILN_RUN" >&2; exit 2; }
OUT_DIR=${OUT_DIR:-$(mktemp -d /tmp/kiln-corpus.XXXXXX)}
mkdir -p "$OUT_DIR"

# The corpus in BENCH.md's order, then anything else found in $MODELS.
ORDER="resnet50 resnet50_b8 mobilenet_v2 squeezenet1_1 vgg19 alexnet lenet5 mlp_mnist"
models=()
for m in $ORDER; do [[ -f "$MODELS/$m/model.onnx" ]] && models+=("$m"); done
for d in "$MODELS"/*/; do
  m=$(basename "$d")
  [[ -f "$d/model.onnx" && " $ORDER " != *" $m "* ]] && models+=("$m")
done
if [[ -n "$ONLY" ]]; then
  sel=()
  for m in "${models[@]}"; do [[ " $ONLY " == *" $m "* ]] && sel+=("$m"); done
  models=("${sel[@]}")
fi

# A field of a flat JSON object: number, true/false/null, or string contents.
field() { sed -n "s/.*\"$2\": *\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1"; }

rows=()
bad=0
for m in "${models[@]}"; do
  for b in $BACKENDS; do
    iters=$ITERS
    [[ "$b" == "Interpreter" ]] && iters=$INTERP_ITERS
    log="$OUT_DIR/$m.$b"
    echo "running $m on $b ($iters iterations)..." >&2
    timeout "$TIMEOUT" "$KILN_RUN" --model "$MODELS/$m/model.onnx" \
      --data "$MODELS/$m/test_data_set_0" --backend "$b" --threads "$THREADS" \
      --iterations "$iters" --warmup 1 --json "${FALLBACK[@]}" >"$log.json" 2>"$log.err"
    rc=$?
    json=$(tail -n 1 "$log.json")
    if [[ $rc -eq 2 ]] && grep -qiE "unknown backend|not registered|no backend" "$log.err"; then
      rows+=("$m|$b|n/a|-|-|-|backend not in this build")
      continue
    fi
    if [[ $rc -eq 124 ]]; then
      rows+=("$m|$b|TIMEOUT|-|-|-|over ${TIMEOUT}s")
      bad=1
      continue
    fi
    if [[ "$json" != \{* ]]; then
      rows+=("$m|$b|ERROR|-|-|-|exit $rc: $(head -c 150 "$log.err" | tr '\n' ' ')")
      bad=1
      continue
    fi
    match=$(field "$json" match)
    [[ "$match" == true && $rc -eq 0 ]] || bad=1
    rows+=("$m|$b|$match|$(field "$json" max_abs_err)|$(field "$json" median_ms)|$(field "$json" compile_ms)|$iters it, peak RSS $(( $(field "$json" peak_rss_bytes) / 1048576 )) MiB")
  done
done

printf '\n%-14s %-12s %-6s %-12s %-11s %-11s %s\n' model backend match max_abs_err median_ms compile_ms notes
printf '%-14s %-12s %-6s %-12s %-11s %-11s %s\n' -------------- ------------ ------ ------------ ----------- ----------- -----
for r in "${rows[@]}"; do
  IFS='|' read -r m b match err med comp notes <<<"$r"
  printf '%-14s %-12s %-6s %-12s %-11s %-11s %s\n' "$m" "$b" "$match" "$err" "$med" "$comp" "$notes"
done
echo
echo "kiln-run: $KILN_RUN; threads $THREADS; JSON lines in $OUT_DIR"
exit $bad
