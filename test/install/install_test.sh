#!/usr/bin/env bash
# Installs Kiln into a temporary prefix with //:install and builds test/install/consumer.cpp
# against it twice, as a project outside Bazel would, then runs both programs (Interpreter
# and CPU, outputs checked against hand-computed values inside the program):
#   pkg-config   g++ -std=c++17 consumer.cpp $(pkg-config --cflags --libs kiln)
#   cmake        find_package(kiln) and kiln::kiln (test/install/CMakeLists.txt)
# Needs pkg-config and cmake (third_party/setup.sh installs them). Writes one test case per
# step (test/shell/junit.sh) to the JUnit XML report that test/run_tests.sh counts.
set -uo pipefail

src="$TEST_SRCDIR/kiln"
# --sanitize=LIST: libkiln.so was built with -fsanitize=LIST (bazel test --config=asan).
san=()
[[ "${1:-}" == --sanitize=* ]] && san=(-fsanitize="${1#--sanitize=}")
source "$src/test/shell/junit.sh"
tmp=$junit_tmp
prefix="$tmp/prefix"

need() {
  local missing=()
  for t in "$@"; do
    command -v "$t" >/dev/null || missing+=("$t")
  done
  if ((${#missing[@]})); then
    echo "missing: ${missing[*]} (bash third_party/setup.sh installs them)"
    return 1
  fi
}

install_kiln() {
  "$src/install" "$prefix" &&
    test -f "$prefix/lib/libkiln.so" &&
    test -f "$prefix/include/kiln/kiln.h" &&
    test -f "$prefix/include/kiln/Graph/AutoGenNodes.h" &&
    test -f "$prefix/lib/pkgconfig/kiln.pc" &&
    test -f "$prefix/lib/cmake/kiln/kilnConfig.cmake" &&
    ! find "$prefix/include" -type f ! -name '*.h' ! -name '*.def' | grep .
}

with_pkg_config() {
  need g++ pkg-config || return 1
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  pkg-config --exists --print-errors kiln || return 1
  echo "pkg-config --cflags --libs kiln: $(pkg-config --cflags --libs kiln)"
  local libdir
  libdir=$(pkg-config --variable=libdir kiln)
  mkdir -p "$tmp/pc" &&
    g++ -std=c++17 -Wall -Werror "${san[@]}" -o "$tmp/pc/consumer" "$src/test/install/consumer.cpp" \
      $(pkg-config --cflags --libs kiln) -Wl,-rpath,"$libdir" &&
    env -u LD_LIBRARY_PATH "$tmp/pc/consumer" Interpreter CPU
}

with_cmake() {
  local proj="$tmp/cmake-src" build="$tmp/cmake-build"
  need cmake g++ || return 1
  mkdir -p "$proj" "$build" &&
    cp "$src/test/install/CMakeLists.txt" "$src/test/install/consumer.cpp" "$proj/" &&
    cmake -S "$proj" -B "$build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_CXX_FLAGS="${san[*]}" &&
    cmake --build "$build" &&
    env -u LD_LIBRARY_PATH "$build/consumer" Interpreter CPU
}

if junit_step install install_kiln; then
  junit_step pkg_config with_pkg_config
  junit_step cmake with_cmake
fi
junit_finish install
