#!/usr/bin/env bash
# CTest entry for the Python package: pick an interpreter that imports
# pytest and numpy (one that imports torch too, where there is one), say
# which, then run the pytest suite on the package from the source tree
# twice: with the C extension hbg._native (when it was built;
# HBG_PY_NATIVE=1, so that a broken one fails instead of falling back) and
# on ctypes (HBG_PY_NATIVE=0). TESTS (optional): the test files to run,
# relative to python/tests (default: all of them).
#   python_run.sh LIBHBG HBG_CLI CORPUS_GEN SOURCE_DIR NATIVE_MODULE|none [TESTS...]
set -u
. "$(dirname "$0")/py_helpers.sh"
lib=$1; cli=$2; gen=$3; src=$4; native=${5:-none}
shift 5 2>/dev/null || shift $#
targets=()
for t in "$@"; do targets+=("$src/python/tests/$t"); done
[ ${#targets[@]} = 0 ] && targets=("$src/python/tests")
pick_python 'import pytest, numpy, torch' 'import pytest, numpy'
if [ -z "$py" ]; then
  echo "python test: no python3 with pytest and numpy (tried /usr/bin/python3, python3)." >&2
  echo "  as root: apt-get update && apt-get install -y --no-install-recommends python3-pytest python3-numpy python3-torch" >&2
  exit 1
fi
echo "python test: using $py ($("$py" -c 'import sys, numpy, pytest; print(sys.version.split()[0], "numpy", numpy.__version__, "pytest", pytest.__version__)'); torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo 'not installed'))"
if [ "${HBG_TEST_REQUIRE_TORCH:-}" = 1 ] &&
   ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "python test: HBG_TEST_REQUIRE_TORCH=1 but no python3 with pytest and numpy imports torch (the DLPack tests need it)." >&2
  echo "  as root: apt-get update && apt-get install -y --no-install-recommends python3-torch" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HBG_CLI=$cli HBG_CORPUS_GEN=$gen HBG_LIBRARY=$lib
# The package's sources, without whatever a local install left in them.
stage_hbg "$src" "$tmp"
export PYTHONPATH=$tmp${PYTHONPATH:+:$PYTHONPATH}
cd "$tmp" || exit 1
rc=0
if [ "$native" != none ]; then
  cp "$native" "$tmp/hbg/"
  echo "python test: backend native ($(basename "$native"))"
  HBG_PY_NATIVE=1 "$py" -m pytest -q -p no:cacheprovider "${targets[@]}" || rc=1
else
  echo "python test: hbg._native was not built (no Python headers; Debian: python3-dev): ctypes only"
fi
echo "python test: backend ctypes (HBG_PY_NATIVE=0)"
HBG_PY_NATIVE=0 "$py" -m pytest -q -p no:cacheprovider "${targets[@]}" || rc=1
exit $rc
