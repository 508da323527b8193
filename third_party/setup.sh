#!/usr/bin/env bash
# Installs the Debian packages Kiln builds and tests with, when any is missing. Idempotent;
# run as root on Debian 12 (bookworm). Prints nothing when everything is present.
set -euo pipefail
PACKAGES=(
  bazel-bootstrap                 # Bazel 4.2.3
  build-essential
  llvm-14-dev clang-14 libclang-rt-14-dev   # CPU backend: ORC JIT, bitcode kernels, sanitizers
  llvm-14-tools                   # FileCheck-14 for the golden tests (test/filecheck)
  libgoogle-glog-dev libeigen3-dev libpng-dev libgtest-dev libbenchmark-dev
  libonnx-dev libprotobuf-dev protobuf-compiler libonnx-testdata   # ONNX import + conformance
  doxygen                         # the API reference (//docs:api_reference)
  cmake pkg-config                # test/install: an installed Kiln used from CMake and pkg-config
)
missing=()
for p in "${PACKAGES[@]}"; do
  [[ "$p" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
