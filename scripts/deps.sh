#!/usr/bin/env bash
# Install what the build needs, when it is missing. As root: apt-get.
# Otherwise print the exact command to run and fail.
set -eu
PKGS="build-essential cmake pkg-config libxxhash-dev libcjson-dev"
[ "${1:-}" = "--with-clang" ] && PKGS="$PKGS clang libclang-rt-14-dev llvm"

missing=0
for tool in cc c++ make cmake pkg-config; do
  command -v "$tool" >/dev/null 2>&1 || missing=1
done
if [ $missing = 0 ]; then
  pkg-config --exists libxxhash libcjson 2>/dev/null || missing=1
fi
if [ $missing = 0 ] && [ "${1:-}" = "--with-clang" ]; then
  command -v clang >/dev/null 2>&1 || missing=1
fi

# The Python package's tests (CTest 'python', 'python_install') need an
# interpreter that imports pytest and numpy, venv and setuptools, and
# Python's headers for the extension hbg._native: installed as root,
# otherwise only a note (the C build itself does not need them).
PYPKGS="python3-pytest python3-numpy python3-setuptools python3-pip python3-wheel python3-venv python3-dev"
pyok=0
for py in /usr/bin/python3 python3; do
  command -v "$py" >/dev/null 2>&1 &&
    "$py" -c 'import pytest, numpy, ensurepip, setuptools, sysconfig, os, sys
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
      >/dev/null 2>&1 && pyok=1 && break
done
if [ $pyok = 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    [ $missing = 0 ] && PKGS="" # only the Python test packages
    PKGS="$PKGS $PYPKGS"
    missing=1
  else
    echo "hbg: note: the python tests need pytest, numpy, venv, Python headers; as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends $PYPKGS" >&2
  fi
fi
# PyTorch (CPU) and the DLPack header for the DLPack interop tests and
# the torch example (CTest python_dlpack, python_dlpack_torch_interop,
# which require torch): installed as root, otherwise only a note.
TORCHPKGS="python3-torch libdlpack-dev"
if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 ||
   [ ! -f /usr/include/dlpack/dlpack.h ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    [ $missing = 0 ] && PKGS="" # only what is missing
    PKGS="$PKGS $TORCHPKGS"
    missing=1
  else
    echo "hbg: note: the DLPack tests need PyTorch and dlpack.h; as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends $TORCHPKGS" >&2
  fi
fi
# Open MPI for `hbg bench --mpi` and its test (CTest bench_mpi): installed
# as root, otherwise only a note (without it the CLI is built without --mpi).
MPIPKGS="openmpi-bin libopenmpi-dev"
if ! command -v mpicc >/dev/null 2>&1 || ! command -v mpirun >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    [ $missing = 0 ] && PKGS="" # only what is missing
    PKGS="$PKGS $MPIPKGS"
    missing=1
  else
    echo "hbg: note: hbg bench --mpi needs Open MPI; as root:" >&2
    echo "  apt-get update && apt-get install -y --no-install-recommends $MPIPKGS" >&2
  fi
fi
[ $missing = 0 ] && exit 0

cmd="apt-get update && apt-get install -y --no-install-recommends $PKGS"
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "hbg: installing build dependencies: $PKGS" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $PKGS >/dev/null
else
  echo "hbg: missing build dependencies; run as root:" >&2
  echo "  $cmd" >&2
  exit 1
fi
