#!/usr/bin/env bash
# CTest entry for a Python example that needs torch (python/examples/):
# run it on the package from the source tree with an interpreter that
# imports numpy and torch, on the extension hbg._native when it was built
# (else ctypes). Without torch: skipped (77), or a failure under
# HBG_TEST_REQUIRE_TORCH=1; an example that skips itself (77: libhbg lacks
# what it needs) fails under HBG_TEST_REQUIRE_INTEROP=1. EXAMPLE is a
# file of python/examples, or a path relative to SOURCE_DIR when it has a
# slash (examples/qwen3_decode.py); ARGS are passed to it.
#   python_example.sh LIBHBG SOURCE_DIR NATIVE_MODULE|none EXAMPLE [ARGS...]
set -u
. "$(dirname "$0")/py_helpers.sh"
lib=$1; src=$2; native=$3; example=$4
shift 4
case $example in
  */*) script=$src/$example ;;
  *) script=$src/python/examples/$example ;;
esac
pick_python 'import numpy, torch'
if [ -z "$py" ]; then
  echo "python example: no python3 imports numpy and torch (tried /usr/bin/python3, python3)" >&2
  echo "  as root: apt-get update && apt-get install -y --no-install-recommends python3-numpy python3-torch" >&2
  [ "${HBG_TEST_REQUIRE_TORCH:-}" = 1 ] && exit 1
  exit 77
fi
echo "python example: using $py ($("$py" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__)'))"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
stage_hbg "$src" "$tmp"
export HBG_LIBRARY=$lib PYTHONPATH=$tmp${PYTHONPATH:+:$PYTHONPATH}
if [ "$native" != none ]; then
  cp "$native" "$tmp/hbg/"
  export HBG_PY_NATIVE=1
else
  export HBG_PY_NATIVE=0
fi
cd "$tmp" || exit 1
"$py" "$script" "$@"
rc=$?
if [ $rc = 77 ] && [ "${HBG_TEST_REQUIRE_INTEROP:-}" = 1 ]; then
  echo "python example: skipped itself, but HBG_TEST_REQUIRE_INTEROP=1" >&2
  exit 1
fi
exit $rc
