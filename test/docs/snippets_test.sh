#!/usr/bin/env bash
# Compiles, links and runs the C++ code blocks of the documentation: README.md, docs/*.md
# and docs/guide/*.md (any number of files, zero included), against Kiln as installed by
# //:install (libkiln.so, every backend registered, and the public headers), with
# g++ -std=c++17 -Wall -Werror. One test case per block, named FILE:LINE.
#
# Which blocks, and how (the fence's info string):
#   ```cpp            a whole translation unit. With a main it is linked into a program and
#                     run (it must exit 0 within 2 minutes); without one it is linked into
#                     a shared object with -Wl,--no-undefined, so every Kiln function it
#                     calls must exist.
#   ```cpp fragment   statements: they become the body of `int main()`, after their own
#                     #include lines and kiln/kiln.h; unused variables are allowed. Run.
#   ```cpp norun      (with either) compiled and linked but not run: e.g. a block that
#                     loads a model file that is not in the repository.
# Programs run in the repository root, so they can read repository files the test has
# (the digits model and images, examples/digits). A block that is not meant to compile
# (pseudo-code, a sketch) takes another fence: ```text, or ```c++ for highlighting only.
set -uo pipefail

src="$TEST_SRCDIR/kiln"
# --sanitize=LIST: libkiln.so was built with -fsanitize=LIST (bazel test --config=asan).
san=()
[[ "${1:-}" == --sanitize=* ]] && san=(-fsanitize="${1#--sanitize=}")
source "$src/test/shell/junit.sh"
tmp=$junit_tmp
prefix="$tmp/prefix"
work="$tmp/snippets"
mkdir -p "$work"
cd "$src" || exit 1

compile_and_run() {
  local n=$1 kind=$2 run=$3 cpp="$work/snippet-$1.cpp"
  local flags=(-std=c++17 -Wall -Werror "${san[@]}" -I"$prefix/include")
  local libs=(-L"$prefix/lib" -lkiln -Wl,-rpath,"$prefix/lib")
  [[ "$kind" == fragment ]] && flags+=(-Wno-unused-variable -Wno-unused-but-set-variable)
  if [[ "$kind" == tu ]] && ! grep -Eq '(^|[^[:alnum:]_])main[[:space:]]*\(' "$cpp"; then
    echo "no main: linking a shared object"
    g++ "${flags[@]}" -fPIC -shared -Wl,--no-undefined -o "$work/snippet-$n.so" "$cpp" "${libs[@]}"
    return
  fi
  g++ "${flags[@]}" -o "$work/snippet-$n" "$cpp" "${libs[@]}" || return 1
  if [[ "$run" == 1 ]]; then
    timeout 120 env -u LD_LIBRARY_PATH "$work/snippet-$n"
  else
    echo "norun: compiled and linked only"
  fi
}

extract() {
  shopt -s nullglob
  local files=(README.md docs/*.md docs/guide/*.md)
  echo "files: ${files[*]}"
  awk -v OUT="$work" -f test/docs/extract_snippets.awk "${files[@]}" &&
    touch "$work/manifest" &&
    echo "$(wc -l <"$work/manifest") blocks" &&
    cat "$work/manifest"
}

if junit_step install "$src/install" "$prefix" && junit_step extract extract; then
  while read -r n file line kind run; do
    junit_step "$file:$line" compile_and_run "$n" "$kind" "$run"
  done <"$work/manifest"
fi
junit_finish doc_snippets
