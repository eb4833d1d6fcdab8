#!/usr/bin/env bash
# libhbg and the CLI carry no dynamic dependency on a CUDA library: the cuda
# backend loads the driver with dlopen at device open.
# Usage: no_cuda_needed.sh LIBHBG HBG_CLI
set -eu
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
for f in "$@"; do
  needed=$(readelf -d "$f" | grep NEEDED) || { echo "no_cuda_needed: $f: no NEEDED entries?" >&2; exit 1; }
  echo "$f:"
  echo "$needed"
  if echo "$needed" | grep -Eiq 'libcuda|libcudart|libnvrtc|libcublas'; then
    echo "no_cuda_needed: $f links a CUDA library" >&2
    exit 1
  fi
done
echo "no_cuda_needed: ok"
