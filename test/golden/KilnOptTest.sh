#!/bin/bash
# kiln-opt on bad input: every failure is a clear message and a non-zero exit, never a crash.
set -u
OPT=src/tools/kiln-opt
IN=test/golden/cse.txt
OPT="$OPT --split-input-file"
fail=0

expect_error() { # expected-substring, args...
  local want="$1"; shift
  local out rc
  out=$("$@" 2>&1); rc=$?
  if [[ $rc -eq 0 || $rc -ge 128 ]]; then
    echo "FAIL: '$*' exited with $rc (want a clean error)"; fail=1; return
  fi
  if [[ "$out" != *"$want"* ]]; then
    echo "FAIL: '$*' said: $out"; echo "      (want: $want)"; fail=1
  fi
}

expect_error "unknown pass 'no-such-pass'" $OPT --pass=cse,no-such-pass $IN
expect_error "known passes: dce" $OPT --pass=bogus $IN
expect_error "expected ',' or ')'" $OPT "--pass=(cse,dce" $IN
expect_error "unknown pipeline 'fast'" $OPT --pipeline=fast $IN
expect_error "no backend named 'NoSuchBackend'" $OPT --pipeline=default --backend=NoSuchBackend $IN
expect_error "cannot open input file" $OPT --pass=dce /nonexistent/file.txt
expect_error "unknown option" $OPT --frobnicate $IN
expect_error "--dump-after: unknown pass 'nope'" $OPT --pass=dce --dump-after=nope $IN
expect_error "<stdin>" src/tools/kiln-opt --pass=dce <<< "function main { %a = Bogus( }"
expect_error "<stdin>" src/tools/kiln-opt --pass=dce <<< "placeholder @x : float<2"

# The happy paths: a pass list, the default pipeline with timing, dump-after.
out=$($OPT --pass=cse,dce $IN 2>&1) || { echo "FAIL: --pass=cse,dce: $out"; fail=1; }
out=$($OPT --pipeline=default --backend=Interpreter --time-passes $IN 2>&1) ||
  { echo "FAIL: default pipeline: $out"; fail=1; }
[[ "$out" == *"Graph pass timing"* ]] || { echo "FAIL: no timing table: $out"; fail=1; }
out=$($OPT --pass=cse,dce --dump-after=cse $IN 2>&1 >/dev/null)
[[ "$out" == *"after cse"* ]] || { echo "FAIL: no dump after cse: $out"; fail=1; }
out=$($OPT --list-passes) && [[ "$out" == *"sink-transposes"* ]] ||
  { echo "FAIL: --list-passes: $out"; fail=1; }

[[ $fail -eq 0 ]] && echo PASS
exit $fail
