#!/usr/bin/env bash
# The GPU's link, done offline with the toolkit's own tools: the dispatch
# hbg generates compiles (ptxas), and nvlink joins it with the relocatable
# executor libhbg embeds and the example's user kernels (nvcc -rdc PTX and
# fatbin) into one image defining the executor, the dispatch and the
# kernels; without the dispatch the executor's references to it are
# undefined. What cuLinkComplete does at run time, short of loading.
# Usage: cuda_user_kernel_nvlink.sh DISPATCH_DUMP RDC_FATBIN UK_PTX UK_FATBIN
#        NVCC OUTDIR
set -eu
dump=$1 rdc=$2 ukptx=$3 ukfat=$4 nvcc=$5 out=$6
bin=$(dirname "$nvcc")
ptxas=$bin/ptxas nvlink=$bin/nvlink
if [ ! -x "$ptxas" ] || [ ! -x "$nvlink" ]; then
  echo "SKIP: no ptxas or nvlink next to $nvcc"
  exit 77
fi
mkdir -p "$out"
"$dump" "$out/dispatch.ptx"
"$ptxas" -arch=sm_90 -c "$out/dispatch.ptx" -o "$out/dispatch.cubin"
"$ptxas" -arch=sm_90 -c "$ukptx" -o "$out/user.cubin"
for user in "$out/user.cubin" "$ukfat"; do
  "$nvlink" -arch=sm_90 "$rdc" "$out/dispatch.cubin" "$user" -o "$out/linked.cubin"
  for sym in hbg_dc_exec hbg_dcu_info hbg_dcu_call uk_rms_scale uk_axpby; do
    grep -a -q "$sym" "$out/linked.cubin" ||
      { echo "cuda_user_kernel_nvlink: $sym not in the image linked with $user" >&2; exit 1; }
  done
  echo "linked: executor + dispatch + $(basename "$user"): $(wc -c < "$out/linked.cubin") bytes"
done
if "$nvlink" -arch=sm_90 "$rdc" "$out/user.cubin" -o "$out/nodispatch.cubin" \
     > "$out/nodispatch.log" 2>&1; then
  echo "cuda_user_kernel_nvlink: linked without the dispatch" >&2
  exit 1
fi
grep -q "Undefined reference to 'hbg_dcu_call'" "$out/nodispatch.log" ||
  { cat "$out/nodispatch.log" >&2; exit 1; }
echo "cuda_user_kernel_nvlink: ok"
