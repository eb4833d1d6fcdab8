#!/usr/bin/env bash
# libhbg never links MPI; only the CLI does, when it was built with MPI
# (the second argument: the CLI, or - when MPI was not found).
# Usage: no_mpi_in_lib.sh LIBHBG HBG_CLI|-
set -eu
command -v readelf >/dev/null || { echo "SKIP: no readelf"; exit 77; }
lib=$1; cli=${2:--}
if readelf -d "$lib" | grep NEEDED | grep -Eiq 'libmpi|libopen-(pal|rte)|libpmix'; then
  readelf -d "$lib" | grep NEEDED >&2
  echo "no_mpi_in_lib: $lib links MPI" >&2
  exit 1
fi
if [ "$cli" != - ]; then
  # the check sees MPI where it is linked
  readelf -d "$cli" | grep NEEDED | grep -q 'libmpi' ||
    { echo "no_mpi_in_lib: $cli was built with MPI but does not link libmpi" >&2; exit 1; }
fi
echo "no_mpi_in_lib: ok"
