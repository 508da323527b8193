#!/usr/bin/env bash
# Doxygen input filter for kiln/Graph/Graph.h: puts the generated builders
# (AutoGenBuilders.h, from $KILN_GEN/kiln/Graph) in place of the #include inside class
# Function, so that the reference lists them as Function's members.
set -euo pipefail
sed -e "/#include \"kiln\/Graph\/AutoGenBuilders.h\"/{r ${KILN_GEN}/kiln/Graph/AutoGenBuilders.h" -e 'd}' "$1"
