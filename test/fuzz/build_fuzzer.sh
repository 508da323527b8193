#!/usr/bin/env bash
# Builds the ONNX loader's libFuzzer target with clang-14 (ASan + UBSan + libFuzzer) and
# copies it to $FUZZ_OUT (default /tmp/kiln-fuzz/onnx_loader_fuzzer).
#
#   bash test/fuzz/build_fuzzer.sh
#   /tmp/kiln-fuzz/onnx_loader_fuzzer -max_total_time=1800 -rss_limit_mb=4096 \
#       -timeout=20 /tmp/kiln-fuzz/corpus test/fuzz/corpus
#
# The build uses an output base of its own (KILN_FUZZ_OUTPUT_BASE), so that switching the C
# compiler to clang does not invalidate the regular gcc build.
set -euo pipefail
cd "$(dirname "$0")/../.."
OB=${KILN_FUZZ_OUTPUT_BASE:-$HOME/.cache/kiln-fuzz-ob}
FUZZ_OUT=${FUZZ_OUT:-/tmp/kiln-fuzz}
command -v clang++-14 >/dev/null || { echo "clang-14 is required (apt-get install clang-14 libclang-rt-14-dev)" >&2; exit 2; }
bazel --output_base="$OB" build --config=fuzz "$@" //test/fuzz:onnx_loader_fuzzer
mkdir -p "$FUZZ_OUT"
bin=$(bazel --output_base="$OB" info --config=fuzz bazel-bin 2>/dev/null)/test/fuzz/onnx_loader_fuzzer
cp -f "$bin" "$FUZZ_OUT/onnx_loader_fuzzer"
echo "built $FUZZ_OUT/onnx_loader_fuzzer"
