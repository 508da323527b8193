#!/usr/bin/env bash
# check_api_reference.sh TARBALL: the Doxygen reference built by //docs:api_reference (which
# fails on any doxygen warning) has its index and the pages of the API's main classes.
set -uo pipefail
listing=$(tar -tzf "$1") || { echo "FAILED: cannot read $1"; exit 1; }
fail=0
for page in index.html classkiln_1_1ExecutionEngine.html classkiln_1_1HostManager.html \
            classkiln_1_1Function.html classkiln_1_1Module.html classkiln_1_1Tensor.html \
            classkiln_1_1Error.html classkiln_1_1ONNXSession.html classkiln_1_1Backend.html \
            classkiln_1_1DeviceManager.html classkiln_1_1ConvolutionNode.html \
            kiln_8h.html backend_8h.html; do
  if grep -qx "./$page" <<<"$listing"; then
    echo "ok: $page"
  else
    echo "FAILED: no $page in the API reference"
    fail=1
  fi
done
# The generated builders are listed as members of Function (docs/doxygen_inline_builders.sh).
function_page=$(tar -xzOf "$1" ./classkiln_1_1Function.html)
if grep -q createConvolution <<<"$function_page"; then
  echo "ok: Function lists the generated builders"
else
  echo "FAILED: classkiln_1_1Function.html does not list createConvolution"
  fail=1
fi
echo "$(grep -c '\.html$' <<<"$listing") HTML pages"
exit $fail
