#!/usr/bin/env bash
# Installs Kiln for builds outside Bazel:
#
#   bazel run //:install -- PREFIX
#
#   PREFIX/lib/libkiln.so                     every backend registered (Interpreter, CPU, Sim)
#   PREFIX/include/kiln/...                   kiln/kiln.h (embedders), kiln/backend.h (backend
#                                             and pass authors) and the generated headers
#   PREFIX/lib/pkgconfig/kiln.pc              pkg-config --cflags --libs kiln
#   PREFIX/lib/cmake/kiln/kilnConfig.cmake    find_package(kiln) -> imported target kiln::kiln
#
# libkiln.so needs Debian's shared libraries it was built against at run time (libLLVM-14,
# glog, protobuf, onnx_proto). Programs compile as C++17. A PREFIX outside the loader's
# search path (not /usr/local or /usr, where this runs ldconfig when run as root) needs
# -Wl,-rpath,PREFIX/lib or LD_LIBRARY_PATH; CMake sets the build tree's rpath by itself. A relative PREFIX is taken from the directory
# `bazel run` was started in. Re-running over an existing installation replaces its files.
set -euo pipefail

KILN_VERSION=0.1.0

if [[ $# -ne 1 || "$1" == -* ]]; then
  echo "usage: bazel run //:install -- PREFIX (got $# arguments: $*)" >&2
  exit 2
fi
prefix=$1
if [[ "$prefix" != /* ]]; then
  prefix="${BUILD_WORKING_DIRECTORY:-$PWD}/$prefix"
fi

# The files to install are this script's runfiles, under the repository's name (kiln) both
# in this workspace and in a workspace that uses Kiln as @kiln.
root=""
for dir in "${RUNFILES_DIR:-}" "$0.runfiles" "${TEST_SRCDIR:-}"; do
  if [[ -n "$dir" && -f "$dir/kiln/libkiln.so" ]]; then
    root="$dir/kiln"
    break
  fi
done
if [[ -z "$root" ]]; then
  echo "install: cannot find libkiln.so in the runfiles; run this as 'bazel run //:install -- PREFIX'" >&2
  exit 1
fi

mkdir -p "$prefix/lib/pkgconfig" "$prefix/lib/cmake/kiln" "$prefix/include"
prefix=$(cd "$prefix" && pwd -P)

# The library. Installed as a new file (not over the old one) so that a running program
# that maps the old library keeps it intact.
# (cp and chmod, not install(1): in a test's runfiles, `install` may name this script.)
cp "$root/libkiln.so" "$prefix/lib/.libkiln.so.new"
chmod 755 "$prefix/lib/.libkiln.so.new"
mv -f "$prefix/lib/.libkiln.so.new" "$prefix/lib/libkiln.so"

# Headers: include/kiln as it is in the source tree (header files only), and the headers
# nodegen writes, where kiln/Graph/Nodes.h and kiln/IR/IR.h include them from.
rm -rf "$prefix/include/kiln"
(cd "$root/include" && find kiln -name '*.h' -print0) |
  while IFS= read -r -d '' h; do
    mkdir -p "$prefix/include/$(dirname "$h")"
    cp "$root/include/$h" "$prefix/include/$h"
    chmod 644 "$prefix/include/$h"
  done
for f in "$root"/src/ClassGen/AutoGen*; do
  case $(basename "$f") in
    AutoGenNodes.def | AutoGenNodes.h | AutoGenBuilders.h) dest=kiln/Graph ;;
    AutoGenInstrs.def | AutoGenInstrs.h) dest=kiln/IR ;;
    *) continue ;;
  esac
  cp "$f" "$prefix/include/$dest/"
  chmod 644 "$prefix/include/$dest/$(basename "$f")"
done
for h in kiln/kiln.h kiln/backend.h kiln/Graph/AutoGenNodes.h kiln/IR/AutoGenInstrs.h; do
  if [[ ! -f "$prefix/include/$h" ]]; then
    echo "install: $h is missing from the installed headers" >&2
    exit 1
  fi
done

subst() {
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@KILN_VERSION@|$KILN_VERSION|g" "$1" > "$2"
  chmod 644 "$2"
}
subst "$root/packaging/kiln.pc.in" "$prefix/lib/pkgconfig/kiln.pc"
subst "$root/packaging/kilnConfig.cmake.in" "$prefix/lib/cmake/kiln/kilnConfig.cmake"
subst "$root/packaging/kilnConfigVersion.cmake.in" "$prefix/lib/cmake/kiln/kilnConfigVersion.cmake"

# The loader finds libraries in /usr/local/lib through its cache.
if [[ ("$prefix" == /usr/local || "$prefix" == /usr) && $(id -u) -eq 0 ]] && command -v ldconfig >/dev/null; then
  ldconfig
fi

echo "Kiln $KILN_VERSION installed in $prefix:"
echo "  $prefix/lib/libkiln.so"
echo "  $prefix/include/kiln (kiln/kiln.h)"
echo "  pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs kiln"
echo "  CMake:      find_package(kiln) with CMAKE_PREFIX_PATH=$prefix; link kiln::kiln"
