#!/usr/bin/env bash
# CTest python_install: the install commands python/README.md gives for a
# stock Debian (the sh block after its "tested by ctest python_install"
# marker), run as written, with a `python3` first on PATH that is not
# Debian's (a stand-in that fails, as a pyenv one without `wheel` does with
# "invalid command 'bdist_wheel'"), so the block must name its interpreter,
# in a temporary folder holding a copy of the source tree's python/ and
# include/ and of the built library and CLI (build/). Then, from elsewhere
# and without HBG_LIBRARY, the installed package must load its own copy of
# libhbg, use the extension when this Python has its headers (python3-dev)
# and there is a C compiler, and run a bind.
#   python_install.sh SOURCE_DIR LIBHBG HBG_CLI
set -u
src=$1; lib=$2; cli=$3
py=/usr/bin/python3
if [ ! -x "$py" ]; then
  echo "python_install: no /usr/bin/python3 (not a Debian-like system)"; exit 77
fi
if ! "$py" -c 'import ensurepip, setuptools, wheel' >/dev/null 2>&1; then
  echo "python_install: /usr/bin/python3 lacks venv/setuptools/wheel; as root:" >&2
  echo "  apt-get install -y --no-install-recommends python3-venv python3-setuptools python3-wheel python3-pip" >&2
  exit 1
fi
readme=$src/python/README.md
cmds=$(awk '/tested by ctest python_install/ {m=1; next}
            m == 1 && /^```sh/ {m=2; next}
            m == 2 && /^```/ {exit}
            m == 2 {print}' "$readme")
if [ -z "$cmds" ]; then
  echo "python_install: no command block after the marker in $readme" >&2; exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tree=$tmp/tree
mkdir -p "$tree/build/bin" "$tmp/shim"
cp -r "$src/python" "$src/include" "$tree/"
rm -rf "$tree/python/build" "$tree/python/src/"*.egg-info \
  "$tree/python/src/hbg/"libhbg.so* "$tree/python/src/hbg/hbg" \
  "$tree/python/src/hbg/"_native*.so
cp "$(readlink -f "$lib")" "$tree/build/libhbg.so.0"
cp "$cli" "$tree/build/bin/hbg"
printf '%s\n' '#!/bin/sh' \
  'echo "python_install: the README block ran the python3 first on PATH, not Debian'"'"'s" >&2' \
  'exit 1' >"$tmp/shim/python3"
chmod +x "$tmp/shim/python3"

echo "python_install: running, in a copy of the tree:"
sed 's/^/  /' <<<"$cmds"
(cd "$tree" && env -u HBG_LIBRARY -u PYTHONPATH PATH="$tmp/shim:$PATH" \
   bash -euc "$cmds") >"$tmp/log" 2>&1
rc=$?
cat "$tmp/log"
if [ $rc != 0 ]; then
  echo "python_install: the documented commands failed (exit $rc)" >&2; exit 1
fi

want_backend=ctypes
if command -v cc >/dev/null 2>&1 && "$py" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  want_backend=native
fi
(cd "$tmp" && env -u HBG_LIBRARY -u HBG_CLI -u PYTHONPATH -u HBG_PY_NATIVE \
  "$tree/.venv/bin/python" - "$want_backend" <<'PY'
import os, sys
import numpy as np
import hbg
pkg = os.path.dirname(hbg.__file__)
assert pkg.startswith(os.path.realpath(os.path.join(sys.prefix))) or \
    pkg.startswith(sys.prefix), (pkg, sys.prefix)
assert hbg.library_path == os.path.join(pkg, "libhbg.so.0"), hbg.library_path
assert hbg.backend == sys.argv[1], (hbg.backend, hbg._backend.native_error)
assert hbg.find_cli() == os.path.join(pkg, "hbg"), hbg.find_cli()
assert os.path.exists(os.path.join(pkg, "py.typed"))  # PEP 561
with hbg.Runtime(policy="coalesced") as rt:
    x = rt.buffer(np.arange(64, dtype=np.float32))
    y = rt.alloc(x.nbytes)
    with rt.bind() as b:
        b.task(hbg.Kernel.SCALE, [x.tensor(64), y.tensor(64, mode="out")],
               scalars=[hbg.Scalar.static(2.0)])
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(64, dtype=np.float32))
print("python_install: installed package loads", hbg.library_path,
      "backend", hbg.backend, "and runs a bind")
PY
)
