#!/usr/bin/env bash
# extract_snippet.sh PAGE N OUT: writes the N-th (from 1) ```cpp block of the markdown PAGE
# to OUT as a C++ translation unit. A block with no main() gets an empty one, so that every
# block is compiled and linked by a cc_test and only blocks with their own main() run code.
# Fails when PAGE has fewer than N blocks or a block is not closed.
set -euo pipefail
page=$1 n=$2 out=$3
awk -v want="$n" -v page="$page" '
  /^```cpp[ \t]*$/ { if (inblock) { print page ": a ```cpp block opens inside another" > "/dev/stderr"; exit 3 }
                     inblock = 1; count++
                     if (count == want) printf "#line %d \"%s\"\n", NR + 1, page
                     next }
  /^```[ \t]*$/    { if (inblock) { inblock = 0; if (count == want) done = 1 } next }
  inblock && count == want { print }
  END { if (inblock) { print page ": unclosed ```cpp block" > "/dev/stderr"; exit 3 }
        if (!done) { print page ": no ```cpp block number " want > "/dev/stderr"; exit 4 } }
' "$page" > "$out.body"
{
  echo "// ${page}, C++ block ${n} (extracted by docs/extract_snippet.sh)."
  cat "$out.body"
  if ! grep -qE '\bint[[:space:]]+main[[:space:]]*\(' "$out.body"; then
    echo "// The block has no main(): it is compiled and linked only."
    echo "int main() { return 0; }"
  fi
} > "$out"
rm -f "$out.body"
