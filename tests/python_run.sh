#!/usr/bin/env bash
# CTest entry for the Python package: pick an interpreter that imports
# pytest and numpy, say which, check that the package installs offline with
# pip (library copied next to it), then run the pytest suite.
#   python_run.sh LIBHBG HBG_CLI CORPUS_GEN SOURCE_DIR
set -u
lib=$1; cli=$2; gen=$3; src=$4
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
export HBG_CLI=$cli HBG_CORPUS_GEN=$gen

# Offline install into a target folder, the library copied into the package
# (the README's recipe), then import it from there without HBG_LIBRARY.
if "$py" -m pip --version >/dev/null 2>&1; then
  cp -r "$src/python" "$tmp/pkg"
  rm -rf "$tmp/pkg/build" "$tmp/pkg/src/hbg/"libhbg.so* "$tmp/pkg/src/hbg/hbg" \
    "$tmp/pkg/src/"*.egg-info
  cp "$(readlink -f "$lib")" "$tmp/pkg/src/hbg/libhbg.so.0"
  cp "$cli" "$tmp/pkg/src/hbg/hbg"
  if ! "$py" -m pip install -q --no-deps --no-build-isolation --no-index \
       --target "$tmp/site" "$tmp/pkg" >"$tmp/pip.log" 2>&1; then
    cat "$tmp/pip.log" >&2
    echo "python test: pip install of ./python failed" >&2
    exit 1
  fi
  (cd "$tmp" && env -u HBG_LIBRARY -u HBG_CLI PYTHONPATH="$tmp/site" "$py" -c '
import os, sys, hbg
want = os.path.join(sys.argv[1], "hbg", "libhbg.so.0")
assert hbg.library_path == want, (hbg.library_path, want)
assert hbg.__version__ and "coalesced" in hbg.policies()
assert hbg.find_cli() == os.path.join(sys.argv[1], "hbg", "hbg")
print("python test: pip-installed package loads", hbg.library_path)
' "$tmp/site") || exit 1
else
  echo "python test: pip not available, install check skipped (apt-get install python3-pip)"
fi

export HBG_LIBRARY=$lib PYTHONPATH=$src/python/src${PYTHONPATH:+:$PYTHONPATH}
cd "$tmp" && exec "$py" -m pytest -q -p no:cacheprovider "$src/python/tests"
