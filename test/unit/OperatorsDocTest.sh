#!/usr/bin/env bash
# docs/Operators.md must be what nodegen generates from the operator table.
#   $1: the generated file, $2: the checked-in docs/Operators.md
set -u
if ! diff -u "$2" "$1"; then
  echo "docs/Operators.md differs from the operator table (src/ClassGen/NodeTable.cpp)." >&2
  echo "Regenerate it from the repository root with:" >&2
  echo "  bazel run //src/ClassGen:nodegen -- --docs \$PWD/docs/Operators.md" >&2
  exit 1
fi
echo "docs/Operators.md matches the operator table"
