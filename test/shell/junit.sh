# Test steps for shell tests, reported as test cases in the JUnit XML file Bazel asks for
# ($XML_OUTPUT_FILE), which test/run_tests.sh counts (one case per step). Source it, then:
#
#   junit_step NAME COMMAND [ARGS...]   runs COMMAND; its output goes to the test log, and
#                                       to the report when it fails; returns its status
#   junit_finish SUITE                  writes the report; exits 1 if a step failed
#
# Steps write their logs under $TEST_TMPDIR (or a temporary directory outside Bazel).

junit_tmp="${TEST_TMPDIR:-$(mktemp -d)}"
junit_cases=""
junit_failed=0
junit_count=0

junit_escape() {
  sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g' \
    -e 's/[^[:print:]\t]//g'
}

junit_step() {
  local name=$1
  shift
  junit_count=$((junit_count + 1))
  local log="$junit_tmp/step-$junit_count.log" t0=$SECONDS status=0
  echo "=== $name"
  "$@" >"$log" 2>&1 || status=$?
  cat "$log"
  local ename
  ename=$(printf '%s' "$name" | junit_escape)
  if ((status == 0)); then
    echo "--- $name: ok ($((SECONDS - t0)) s)"
    junit_cases+="  <testcase name=\"$ename\" time=\"$((SECONDS - t0))\"/>"$'\n'
  else
    echo "--- $name: FAILED, status $status ($((SECONDS - t0)) s)"
    local msg
    msg=$(tail -c 4000 "$log" | junit_escape)
    junit_cases+="  <testcase name=\"$ename\" time=\"$((SECONDS - t0))\"><failure message=\"status $status\">$msg</failure></testcase>"$'\n'
    junit_failed=$((junit_failed + 1))
  fi
  return $status
}

junit_finish() {
  local suite=$1
  if [[ -n "${XML_OUTPUT_FILE:-}" ]]; then
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites><testsuite name=\"$suite\" tests=\"$junit_count\" failures=\"$junit_failed\">"
      printf '%s' "$junit_cases"
      echo '</testsuite></testsuites>'
    } >"$XML_OUTPUT_FILE"
  fi
  echo "$suite: $((junit_count - junit_failed)) of $junit_count steps passed"
  ((junit_failed == 0)) || exit 1
  exit 0
}
