#!/bin/sh
# Dependencies point down only (docs/ARCHITECTURE.md, "Layers"): every
# quoted #include of the library, the CLI and the Python extension must
# name a layer its file may use. Top to bottom:
#
#   tools/, python/native/   public headers (<hbg/...>) and their own files
#   src/workload/            + device/device.h, graph, kernels, common
#   src/core/                + device/device.h, graph, kernels, common
#   src/device/              + exec, graph, kernels, common; a backend
#                            folder (device/<b>/) its own files and the
#                            device layer's top-level headers, never
#                            another backend's
#   src/exec/                graph, kernels, common
#   src/graph/               kernels, common
#   src/kernels/             common
#   src/common/              nothing else
#
# Usage: layers.sh ROOT. Exit 0 when every include keeps to this, else 1
# with each offending line named. `layers.sh --self-test` also checks that
# an upward, a sideways and a backend include into core are caught.
set -eu

check() {
  root=$1
  bad=$(cd "$root" && find src tools python/native -name '*.[ch]' 2>/dev/null |
    sort | while read -r f; do
      grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
        sed 's/^\([0-9]*\):.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1 \2/' |
        while read -r line inc; do
          case "$inc" in
          */*) ;;
          *) continue ;; # a file of the same folder
          esac
          case "$inc" in hbg/*) continue ;; esac # the public headers
          case "$inc" in ../*) # the CLI's subfolders use the tool's headers
            case "$f" in tools/*) continue ;; esac ;;
          esac
          top=${inc%%/*}
          ok=0
          case "$f" in
          src/common/*) [ "$top" = common ] && ok=1 ;;
          src/kernels/*) case "$top" in kernels|common) ok=1 ;; esac ;;
          src/graph/*) case "$top" in graph|kernels|common) ok=1 ;; esac ;;
          src/exec/*) case "$top" in exec|graph|kernels|common) ok=1 ;; esac ;;
          src/core/*)
            case "$inc" in core/*|graph/*|kernels/*|common/*|device/device.h) ok=1 ;; esac ;;
          src/workload/*)
            case "$inc" in workload/*|graph/*|kernels/*|common/*|device/device.h) ok=1 ;; esac ;;
          src/device/*/*)
            b=${f#src/device/}
            b=${b%%/*}
            case "$inc" in
            exec/*|graph/*|kernels/*|common/*) ok=1 ;;
            device/"$b"/*) ok=1 ;;
            device/*/*) ;;
            device/*) ok=1 ;;
            esac ;;
          src/device/*)
            case "$inc" in
            exec/*|graph/*|kernels/*|common/*) ok=1 ;;
            device/*/*) ;;
            device/*) ok=1 ;;
            esac ;;
          tools/*|python/native/*) ;; # public headers only: <hbg/...>
          *) ok=1 ;;
          esac
          [ $ok = 1 ] || echo "$f:$line: includes \"$inc\""
        done
    done)
  if [ -n "$bad" ]; then
    echo "includes that point up or sideways:"
    echo "$bad"
    return 1
  fi
  return 0
}

if [ "${1:-}" = --self-test ]; then
  root=${2:?ROOT}
  check "$root"
  t=$(mktemp -d)
  trap 'rm -rf "$t"' EXIT
  for case in "src/graph/x.c workload/wl.h" \
              "src/device/sim/x.c device/cuda/cuda_internal.h" \
              "src/core/x.c device/sim/sim.h" \
              "src/core/x.c workload/wl.h" \
              "src/kernels/x.c graph/image.h" \
              "tools/x.c common/util.h"; do
    set -- $case
    rm -rf "$t/src" "$t/tools"
    mkdir -p "$t/$(dirname "$1")"
    printf '#include "%s"\n' "$2" > "$t/$1"
    if check "$t" > /dev/null; then
      echo "self-test: $1 including \"$2\" was not caught"
      exit 1
    fi
  done
  mkdir -p "$t/src/device/cuda"
  rm -rf "$t/src/graph" "$t/src/core" "$t/src/kernels" "$t/tools" "$t/src/device/sim"
  printf '#include "device/cuda/cuda_internal.h"\n#include "device/device.h"\n#include "exec/sched_src.h"\n' \
    > "$t/src/device/cuda/x.c"
  check "$t" || { echo "self-test: a backend's own includes were refused"; exit 1; }
  echo "layers: ok (and the check catches upward and sideways includes)"
  exit 0
fi
check "${1:?ROOT}"
echo "layers: ok"
