#!/usr/bin/env bash
# CTest entry for the Python package: pick an interpreter that imports
# pytest and numpy, say which, then run the pytest suite on the package from
# the source tree twice: with the C extension hbg._native (when it was
# built; HBG_PY_NATIVE=1, so that a broken one fails instead of falling
# back) and on ctypes (HBG_PY_NATIVE=0).
#   python_run.sh LIBHBG HBG_CLI CORPUS_GEN SOURCE_DIR NATIVE_MODULE|none
set -u
lib=$1; cli=$2; gen=$3; src=$4; native=${5:-none}
py=
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 &&
     "$cand" -c 'import pytest, numpy' >/dev/null 2>&1; then
    py=$(command -v "$cand"); break
  fi
done
if [ -z "$py" ]; then
  echo "python test: no python3 with pytest and numpy (tried /usr/bin/python3, python3)." >&2
  echo "  as root: apt-get update && apt-get install -y --no-install-recommends python3-pytest python3-numpy" >&2
  exit 1
fi
echo "python test: using $py ($("$py" -c 'import sys, numpy, pytest; print(sys.version.split()[0], "numpy", numpy.__version__, "pytest", pytest.__version__)'))"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HBG_CLI=$cli HBG_CORPUS_GEN=$gen HBG_LIBRARY=$lib
# The package's sources, without whatever a local install left in them.
cp -r "$src/python/src/hbg" "$tmp/hbg"
rm -rf "$tmp/hbg/__pycache__" "$tmp/hbg/"libhbg.so* "$tmp/hbg/hbg" \
  "$tmp/hbg/"_native*.so
export PYTHONPATH=$tmp${PYTHONPATH:+:$PYTHONPATH}
cd "$tmp" || exit 1
rc=0
if [ "$native" != none ]; then
  cp "$native" "$tmp/hbg/"
  echo "python test: backend native ($(basename "$native"))"
  HBG_PY_NATIVE=1 "$py" -m pytest -q -p no:cacheprovider "$src/python/tests" || rc=1
else
  echo "python test: hbg._native was not built (no Python headers; Debian: python3-dev): ctypes only"
fi
echo "python test: backend ctypes (HBG_PY_NATIVE=0)"
HBG_PY_NATIVE=0 "$py" -m pytest -q -p no:cacheprovider "$src/python/tests" || rc=1
exit $rc
