#!/usr/bin/env bash
# The device module embedded in libhbg holds an sm_90 cubin and compute_90
# PTX, and names every entry point: the embedded bytes are written out and
# listed by the dumper's own fatbin reader, and by cuobjdump when the
# toolkit has it.
# Usage: cuda_fatbin.sh CUDA_FATBIN_DUMP OUTFILE [CUOBJDUMP]
set -eu
dump=$1 out=$2 cuobjdump=${3:-}
list=$("$dump" "$out")
echo "$list"
echo "$list" | grep -q '^elf sm_90 ' || { echo "cuda_fatbin: no sm_90 cubin" >&2; exit 1; }
echo "$list" | grep -q '^ptx compute_90 ' || { echo "cuda_fatbin: no compute_90 PTX" >&2; exit 1; }
# Every entry point the backend resolves at open (cuda_module.c) is named
# in it (the ELF's symbol table and the PTX carry the names as text).
for entry in hbg_dc_check_window hbg_dc_exec hbg_dc_node; do
  grep -a -q "$entry" "$out" || { echo "cuda_fatbin: no entry point $entry" >&2; exit 1; }
done
if [ -n "$cuobjdump" ] && [ -x "$cuobjdump" ]; then
  elf=$("$cuobjdump" --list-elf "$out")
  ptx=$("$cuobjdump" --list-ptx "$out")
  echo "cuobjdump: $elf; $ptx"
  echo "$elf" | grep -q 'sm_90' || { echo "cuda_fatbin: cuobjdump lists no sm_90 ELF" >&2; exit 1; }
  echo "$ptx" | grep -q 'sm_90' || { echo "cuda_fatbin: cuobjdump lists no sm_90 PTX" >&2; exit 1; }
else
  echo "cuobjdump not installed: checked with the dumper's reader only"
fi
echo "cuda_fatbin: ok"
