#!/usr/bin/env bash
# Runs each example of examples/ on every backend it advertises (they link //:kiln:
# Interpreter, CPU, Sim) and checks what it prints:
#   mlp    XOR of each input pair, to 1e-3 (the weights are set by hand; see mlp.cpp)
#   lenet  ten probabilities summing to 1; on CPU and Sim each within 1e-4 of the
#          Interpreter's (the reference)
# An unknown backend name must fail with a message listing the registered ones.
set -uo pipefail

src="$TEST_SRCDIR/kiln"
source "$src/test/shell/junit.sh"
BACKENDS=(Interpreter CPU Sim)

mlp() {
  local out
  out=$("$src/examples/mlp" "$1") || return 1
  echo "$out"
  # Lines "  A xor B = V".
  echo "$out" | awk '
    / xor .* = / { n++; want = ($1 != $3); got = $5
                   d = got - want; if (d < 0) d = -d
                   if (d > 1e-3) { printf "%s xor %s = %s, expected %d\n", $1, $3, got, want; bad++ } }
    END { if (n != 4) { printf "%d result lines, expected 4\n", n; bad++ } exit bad > 0 }'
}

lenet_probs() {
  "$src/examples/lenet" "$1" | tee /dev/stderr | awk '/class [0-9]+:/ { print $3 }'
}

lenet() {
  local ref got
  ref=$(lenet_probs Interpreter) || return 1
  if [[ "$1" == Interpreter ]]; then
    echo "$ref" | awk '{ s += $1; n++ } END {
      if (n != 10) { printf "%d probabilities, expected 10\n", n; exit 1 }
      if (s < 0.999 || s > 1.001) { printf "probabilities sum to %g\n", s; exit 1 } }'
    return
  fi
  got=$(lenet_probs "$1") || return 1
  paste <(echo "$ref") <(echo "$got") | awk -v b="$1" '
    { n++; d = $2 - $1; if (d < 0) d = -d
      if (d > 1e-4) { printf "class %d: %s on %s, %s on the Interpreter\n", n - 1, $2, b, $1; bad++ } }
    END { if (n != 10) { printf "%d probabilities, expected 10\n", n; bad++ } exit bad > 0 }'
}

unknown_backend() {
  local out
  if out=$("$src/examples/mlp" NoSuchBackend 2>&1); then
    echo "mlp NoSuchBackend succeeded"
    return 1
  fi
  echo "$out"
  echo "$out" | grep -q "registered: CPU Interpreter Sim"
}

for b in "${BACKENDS[@]}"; do
  junit_step "mlp_$b" mlp "$b"
  junit_step "lenet_$b" lenet "$b"
done
junit_step unknown_backend unknown_backend
junit_finish examples
