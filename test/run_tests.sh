#!/usr/bin/env bash
# Builds and runs every test, then prints one closing line "N passed, N failed, N skipped"
# counted from the gtest XML reports (a test target that failed to build or crashed before
# writing its report counts as one failure). Extra arguments go to `bazel test`.
set -uo pipefail
cd "$(dirname "$0")/.."
# Explicit roots rather than //...: Bazel 4 would also walk its own bazel-<dir> symlink.
ROOTS=(//src/... //backends/... //examples/... //test/... //docs/...)
bazel test --keep_going "$@" "${ROOTS[@]}" 2>&1 | tail -n 60
rc=${PIPESTATUS[0]}

passed=0 failed=0 skipped=0
testlogs=$(bazel info bazel-testlogs "$@" 2>/dev/null)
all="$(IFS=+; echo "${ROOTS[*]}" | sed 's/+/ + /g')"
# Tests tagged manual are not run by `bazel test` patterns: leave them out of the count.
query="tests($all) except attr(tags, manual, tests($all))"
for target in $(bazel query "$query" 2>/dev/null); do
  path=${target#//}
  xml="$testlogs/${path/://}/test.xml"
  if [[ ! -f "$xml" ]]; then
    echo "no report for $target" >&2
    failed=$((failed + 1))
    continue
  fi
  # gtest: one <testcase> per test; failures carry a <failure> child; skips result="skipped".
  cases=$(grep -c '<testcase ' "$xml" || true)
  skips=$(grep -c 'result="skipped"' "$xml" || true)
  if [[ "$cases" -eq 0 ]]; then
    # Not a gtest report (Bazel writes a stub for crashed or non-gtest tests).
    if grep -qE '<failure|<error ' "$xml" || grep -q 'errors="[1-9]' "$xml"; then
      failed=$((failed + 1))
    else
      passed=$((passed + 1))
    fi
    continue
  fi
  # A case with several failed assertions has several <failure> lines: count cases. A crash
  # leaves Bazel's stub report, whose single case carries an <error>.
  failcases=$(awk '/<testcase /{c=1} /<failure|<error /{ if (c) { n++; c=0 } } END{print n+0}' "$xml")
  failed=$((failed + failcases))
  skipped=$((skipped + skips))
  passed=$((passed + cases - failcases - skips))
done
echo "$passed passed, $failed failed, $skipped skipped"
if [[ $rc -ne 0 || $failed -ne 0 ]]; then
  exit 1
fi
