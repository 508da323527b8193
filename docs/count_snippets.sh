#!/usr/bin/env bash
# count_snippets.sh PAGE=N... -- PAGES...: checks that each guide page PAGE has exactly N
# ```cpp blocks (docs/BUILD declares N, one cc_test per block), and that every page of
# PAGES (the glob of docs/guide/*.md) is declared, so no snippet goes untested.
set -uo pipefail
declare -A want
while [[ $# -gt 0 && $1 != "--" ]]; do
  want[${1%%=*}]=${1#*=}
  shift
done
shift
fail=0
for page in "$@"; do
  if [[ -z ${want[$page]+x} ]]; then
    echo "FAILED: $page is not declared in docs/BUILD (guide_snippets pages)"
    fail=1
    continue
  fi
  have=$(grep -cE '^```cpp[[:space:]]*$' "$page" || true)
  if [[ $have -ne ${want[$page]} ]]; then
    echo "FAILED: $page has $have C++ blocks; docs/BUILD declares ${want[$page]}"
    fail=1
  else
    echo "ok: $page, $have C++ blocks"
  fi
done
exit $fail
