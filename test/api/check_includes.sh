#!/usr/bin/env bash
# Checks the preprocessor's include listings made by :include_listings (gcc -M -MG, one
# per program):
#  - embedder.cpp, which includes only kiln/kiln.h, must pull in no low-level IR header,
#    no generated instruction header, no glog, no LLVM, no Memory or Passes header, no
#    runtime internals, no Backend.h and no private header of src/ or backends/;
#  - it must pull in the headers the embedder API is made of (so an empty or truncated
#    listing cannot pass);
#  - the backend-author header kiln/backend.h must be caught by the same rules (so the
#    rules are not vacuous).
# Usage: check_includes.sh EMBEDDER_DEPS EMBEDDER_TREE BACKEND_DEPS
set -u
embedder_deps=$1 embedder_tree=$2 backend_deps=$3

# Headers an embedder must never see, as extended regular expressions over paths.
FORBIDDEN=(
  'kiln/IR/'
  'AutoGenInstrs'
  '(^|/)glog/'
  '(^|/)llvm(-c)?/|/llvm-[0-9]+/'
  'kiln/Memory/'
  'kiln/Passes/'
  'kiln/Runtime/(DeviceManager|Executor|MultiDevice|Partitioner|Provisioner)\.h'
  'kiln/Backend/Backend\.h'
  'kiln/backend\.h'
  '(^|/)(src|backends)/'
)
# Headers the embedder API consists of.
REQUIRED=(
  'kiln/kiln\.h'
  'kiln/Base/Check\.h'
  'kiln/Base/Error\.h'
  'kiln/Base/Tensor\.h'
  'kiln/Backend/CompileOptions\.h'
  'kiln/Backend/ExecutionContext\.h'
  'kiln/ExecutionEngine/ExecutionEngine\.h'
  'kiln/Graph/Graph\.h'
  'kiln/Graph/AutoGenBuilders\.h'
  'kiln/Importer/ONNX\.h'
  'kiln/Runtime/HostManager\.h'
  'kiln/Runtime/RuntimeTypes\.h'
)

# gcc -M prints "target: dep dep \<newline> dep ..."; one path per line, target dropped.
paths() { sed -e 's/\\$//' "$1" | tr ' ' '\n' | grep -v -e '^$' -e ':$'; }

fail=0
embedder=$(paths "$embedder_deps")
echo "kiln/kiln.h pulls in $(echo "$embedder" | wc -l) files"
for re in "${FORBIDDEN[@]}"; do
  hits=$(echo "$embedder" | grep -E "$re")
  if [[ -n "$hits" ]]; then
    echo "FAIL: kiln/kiln.h pulls in headers matching '$re':"
    echo "$hits" | sed 's/^/    /'
    fail=1
  fi
done
for re in "${REQUIRED[@]}"; do
  if ! echo "$embedder" | grep -qE "$re"; then
    echo "FAIL: kiln/kiln.h no longer includes a header matching '$re'"
    fail=1
  fi
done
if [[ $fail -ne 0 ]]; then
  echo "Kiln, glog and LLVM headers in the include tree of embedder.cpp (gcc -H; the dots"
  echo "give the depth, so the line above an offending header at one dot less includes it):"
  grep -E '^\.+ .*(kiln/|glog/|llvm)' "$embedder_tree" | sed 's/^/    /'
fi

# The control: the backend-author umbrella header includes the IR and the internals.
backend=$(paths "$backend_deps")
for re in 'kiln/IR/IR\.h' 'AutoGenInstrs\.h' 'kiln/Memory/' 'kiln/Passes/' \
          'kiln/Runtime/DeviceManager\.h' 'kiln/Backend/Backend\.h'; do
  if ! echo "$backend" | grep -qE "$re"; then
    echo "FAIL: the rules' control, kiln/backend.h, does not pull in '$re'"
    fail=1
  fi
done

if [[ $fail -eq 0 ]]; then
  echo "PASS: kiln/kiln.h pulls in none of the backend-author headers"
fi
exit $fail
