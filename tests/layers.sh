#!/bin/sh
# Dependencies point down only (docs/ARCHITECTURE.md, "Layers"), checked
# twice over: the quoted #includes of the sources, and the symbols the
# built object files use. Top to bottom:
#
#   tools/, python/native/   clients: public headers (<hbg/...>) and their
#                            own files; libhbg's exported API (hbg_*) only
#   src/workload/            + device/device.h, graph, kernels, common
#   src/core/                + device/device.h, graph, kernels, common
#   src/device/              + exec, graph, kernels, common; a backend
#                            folder (device/<b>/) its own files and the
#                            device layer's top-level files, never
#                            another backend's
#   src/exec/                graph, kernels, common
#   src/graph/               kernels, common
#   src/kernels/             common
#   src/common/              nothing else
#
# The order is LAYERS below, read by both checks. Includes name narrower
# interfaces than the order alone: core and workload see the device layer
# through device/device.h only and no exec headers, workload no core
# headers (it reads the runtime through hbg.h). Symbols follow the order: a
# file may use what its own layer or one below it defines, except that
# core and workload reach no backend's own files (only the device layer's
# top-level ones: the registry and its dispatch), and a backend reaches no
# other backend's files.
#
# Usage:
#   layers.sh ROOT             every quoted #include of the sources under
#                              ROOT keeps to this; exit 1 naming each that
#                              does not
#   layers.sh --self-test ROOT the same, and the include check catches
#                              upward and sideways includes, a backend's
#                              into core, core's into a backend
#   layers.sh --link [--exports LIBHBG.so] OBJ...
#                              the object files' global symbols: each
#                              undefined symbol that another of the objects
#                              defines must come from the user's layer or
#                              one below it (as above); exit 1 naming each
#                              that does not. An OBJ argument may be a
#                              list, ;- or newline-separated (CMake's
#                              $<TARGET_OBJECTS:...> is one argument). An
#                              object's place is its path after CMake's
#                              CMakeFiles/<target>.dir/ (src/graph/def.c.o);
#                              the build's generated devcode/ (the embedded
#                              device modules) belongs to device/cuda.
#                              Clients (tools/, python/native/) may use only
#                              what LIBHBG.so exports (without --exports:
#                              names matching src/hbg.map's hbg_[a-z]*).
#                              Symbols no object defines (libc, libm,
#                              pthread, dl, xxhash, cjson) are not checked.
#   layers.sh --link-self-test objects built with cc in a temporary folder,
#                              a few of them breaking the rule: the check
#                              names exactly those
set -eu

LAYERS="workload core device exec graph kernels common"

# layer_of PATH: sets LAYER (a name of LAYERS, "client" for tools/ and
# python/native/, or empty: outside the layers), RANK (common 1, then up
# by one per layer; a client above them all; 0 outside) and BACKEND (the
# backend folder of device/<b>/..., else empty).
layer_of() {
  LAYER='' RANK=0 BACKEND=''
  case "$1" in
  tools/*|python/native/*) LAYER=client ;;
  devcode/*) LAYER=device BACKEND=cuda ;; # generated: cuda's device module
  src/*/*)
    LAYER=${1#src/}
    LAYER=${LAYER%%/*}
    case " $LAYERS " in *" $LAYER "*) ;; *) LAYER= ;; esac
    case "$1" in src/device/*/*)
      BACKEND=${1#src/device/}
      BACKEND=${BACKEND%%/*} ;;
    esac ;;
  esac
  [ -n "$LAYER" ] || return 0
  n=0
  for l in $LAYERS; do n=$((n + 1)); done
  RANK=$((n + 1))
  for l in $LAYERS; do
    [ "$l" = "$LAYER" ] && return 0
    RANK=$((RANK - 1))
  done
}

# ---- includes ----
check() {
  root=$1
  bad=$(cd "$root" && find src tools python/native -name '*.[ch]' 2>/dev/null |
    sort | while read -r f; do
      layer_of "$f"
      fl=$LAYER fr=$RANK fb=$BACKEND
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
          ok=0
          case "$fl" in
          "") ok=1 ;;   # outside the layers
          client) ;;    # public headers only: <hbg/...>
          *)
            layer_of "src/$inc"
            [ -n "$LAYER" ] && [ "$RANK" -le "$fr" ] && ok=1
            # the narrower interfaces
            case "$fl:$inc" in
            core:exec/*|workload:exec/*|workload:core/*) ok=0 ;;
            core:device/device.h|workload:device/device.h) ;;
            core:device/*|workload:device/*) ok=0 ;;
            device:device/*/*) [ "$BACKEND" = "$fb" ] || ok=0 ;;
            esac ;;
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

# ---- symbols ----
# link_check [--exports LIB] OBJ...: prints each use of a symbol against
# the layers; returns 1 when there is one, 2 when an object is missing.
link_check() {
  exports=
  if [ "${1:-}" = --exports ]; then
    exports=${2:?--exports LIB}
    shift 2
  fi
  lt=$(mktemp -d)
  link_check_in "$lt" "$exports" "$@" && rc=0 || rc=$?
  rm -rf "$lt"
  return "$rc"
}

link_check_in() {
  lt=$1 exports=$2
  shift 2
  : > "$lt/objs"
  : > "$lt/table"
  for arg in "$@"; do
    # an argument may be a list, ;- or newline-separated
    old_ifs=$IFS
    IFS=';
'
    set -f
    for o in $arg; do
      IFS=$old_ifs
      [ -n "$o" ] || continue
      if [ ! -f "$o" ]; then
        echo "layers --link: $o: no such object (build the library first)" >&2
        set +f
        return 2
      fi
      rel=${o##*/CMakeFiles/}
      case "$rel" in */*) rel=${rel#*.dir/} ;; esac
      layer_of "${rel%.o}"
      printf '%s\n' "$o" >> "$lt/objs"
      printf '%s\t%s\t%s\t%s\t%s\n' "$o" "$rel" "$LAYER" "$RANK" "$BACKEND" \
        >> "$lt/table"
    done
    set +f
    IFS=$old_ifs
  done
  [ -s "$lt/objs" ] || { echo "layers --link: no objects" >&2; return 2; }
  # nm -A -P: "FILE: NAME TYPE [VALUE SIZE]"
  tr '\n' '\0' < "$lt/objs" |
    xargs -0 nm -A -P -g --defined-only > "$lt/def" || return 2
  tr '\n' '\0' < "$lt/objs" |
    xargs -0 nm -A -P -g --undefined-only > "$lt/undef" || return 2
  : > "$lt/public"
  if [ -n "$exports" ]; then
    nm -D -P -g --defined-only "$exports" > "$lt/dyn" || return 2
    awk '{ sub(/@.*/, "", $1); print $1 }' "$lt/dyn" > "$lt/public"
  fi
  awk -v exports="$exports" '
    FILENAME == ARGV[1] { # the table: object, place, layer, rank, backend
      split($0, f, "\t")
      rel[f[1]] = f[2]; lay[f[1]] = f[3]; rank[f[1]] = f[4] + 0; be[f[1]] = f[5]
      next
    }
    FILENAME == ARGV[2] { pub[$1] = 1; next }
    { obj = $1; sub(/:$/, "", obj); sym = $2 }
    FILENAME == ARGV[3] { if (!(sym in def)) def[sym] = obj; next }
    {
      if (!(sym in def)) next # from outside the library
      d = def[sym]; u = obj
      if (lay[u] == "" || lay[d] == "") next # outside the layers
      src = rel[d]; sub(/\.o$/, "", src)
      why = ""
      if (lay[d] == "client") {
        # a client using its own files
      } else if (lay[u] == "client") {
        if (exports != "" ? !(sym in pub) : sym !~ /^hbg_[a-z]/)
          why = "not exported by libhbg: a client uses the public API only"
      } else if (rank[d] > rank[u]) {
        why = lay[d] " is above " lay[u]
      } else if (be[d] != "" && be[u] != "" && be[d] != be[u]) {
        why = "device/" be[d] " is another backend than device/" be[u]
      } else if (be[d] != "" && (lay[u] == "core" || lay[u] == "workload")) {
        why = "device/" be[d] " is a backend: " lay[u] \
              " reaches the device layer through its top-level files"
      }
      if (why != "")
        printf "%s uses %s, defined in %s (%s)\n", rel[u], sym, src, why
    }' "$lt/table" "$lt/public" "$lt/def" "$lt/undef" | sort -u > "$lt/bad"
  if [ -s "$lt/bad" ]; then
    echo "symbols used against the layers:"
    cat "$lt/bad"
    return 1
  fi
  return 0
}

link_self_test() {
  command -v cc > /dev/null || { echo "SKIP: no cc"; exit 77; }
  command -v nm > /dev/null || { echo "SKIP: no nm"; exit 77; }
  t=$(mktemp -d)
  trap 'rm -rf "$t"' EXIT
  d=$t/CMakeFiles/t.dir
  cat > "$t/decl.h" << 'DECL'
#include <string.h>
int hbg__min(int a, int b);
int hbg__k(int a);
extern int hbg__g_table[4];
int hbg__g(int a);
int hbg__e(int a);
__attribute__((visibility("default"))) int hbg_size(int a);
int hbg__up(int a);
int hbg__reg(int a);
int hbg__sim_x(int a);
int hbg__cu_x(int a);
int hbg__wl(int a);
int bench_x(int a);
extern const unsigned char hbg__cu_fatbin[1];
DECL
  # obj PATH CODE: the object of PATH (at PATH.o, as CMake places it)
  obj() {
    mkdir -p "$(dirname "$d/$1")"
    printf '#include "decl.h"\n%s\n' "$2" > "$t/x.c"
    cc -c -fPIC -fvisibility=hidden -I"$t" -o "$d/$1.o" "$t/x.c"
  }
  # The uses that keep to the layers, in every object: down, within a
  # layer, a backend to the device layer's top level and back (the
  # registry), a backend's generated device module, a client to the
  # public API and to its own files, libc.
  obj src/common/util.c 'int hbg__min(int a, int b) { return a < b ? a : b; }'
  obj src/kernels/k.c 'int hbg__k(int a) { return hbg__min(a, 1); }'
  obj src/graph/g.c 'int hbg__g_table[4];
int hbg__g(int a) { return hbg__k(a) + hbg__g_table[a & 3]; }'
  obj src/exec/e.c 'int hbg__e(int a) { return hbg__g(a); }'
  obj src/device/device.c 'int hbg__reg(int a) { return hbg__sim_x(a) + hbg__cu_x(a); }'
  obj src/device/sim/sim.c 'int hbg__sim_x(int a) { return hbg__e(a) + hbg__reg(a) + (int)strlen(""); }'
  obj src/device/cuda/cuda.c 'int hbg__cu_x(int a) { return hbg__reg(a) + hbg__cu_fatbin[0]; }'
  obj devcode/hbg_devcode_fatbin.c 'const unsigned char hbg__cu_fatbin[1] = {1};'
  obj src/core/config.c 'int hbg_size(int a) { return hbg__min(a, 2) + hbg__reg(a) + hbg__e(a); }
int hbg__up(int a) { return a; }'
  obj src/workload/wl.c 'int hbg__wl(int a) { return hbg_size(a) + hbg__reg(a) + hbg__up(a); }'
  obj tools/bench.c 'int bench_x(int a) { return a; }'
  obj tools/hbg.c 'int main(void) { return hbg_size(1) + bench_x(2); }'
  cc -shared -o "$t/libhbg.so" "$d"/src/*/*.o "$d"/src/device/*/*.o \
    "$d"/devcode/*.o
  if ! (link_check --exports "$t/libhbg.so" "$(find "$d" -name '*.o' | sort)" \
        > "$t/got"); then
    echo "link self-test: uses that keep to the layers were refused:"
    cat "$t/got"
    exit 1
  fi
  # Those that break them: upward (a function, a data object), sideways
  # between backends, a backend into core, core into a backend, a client
  # into an internal.
  obj src/kernels/k.c 'int hbg__k(int a) { return hbg__min(a, 1) + hbg__g_table[0]; }'
  obj src/graph/g.c 'int hbg__g_table[4];
int hbg__g(int a) { return hbg__k(a) + hbg__up(a); }'
  obj src/device/sim/sim.c 'int hbg__sim_x(int a) { return hbg__e(a) + hbg__cu_x(a); }'
  obj src/device/cuda/cuda.c 'int hbg__cu_x(int a) { return hbg__up(a) + hbg__cu_fatbin[0]; }'
  obj src/core/config.c 'int hbg_size(int a) { return hbg__min(a, 2) + hbg__sim_x(a); }
int hbg__up(int a) { return a; }'
  obj tools/hbg.c 'int main(void) { return hbg_size(1) + hbg__min(1, 2); }'
  cat > "$t/want" << 'WANT'
src/core/config.c.o uses hbg__sim_x, defined in src/device/sim/sim.c (device/sim is a backend: core reaches the device layer through its top-level files)
src/device/cuda/cuda.c.o uses hbg__up, defined in src/core/config.c (core is above device)
src/device/sim/sim.c.o uses hbg__cu_x, defined in src/device/cuda/cuda.c (device/cuda is another backend than device/sim)
src/graph/g.c.o uses hbg__up, defined in src/core/config.c (core is above graph)
src/kernels/k.c.o uses hbg__g_table, defined in src/graph/g.c (graph is above kernels)
tools/hbg.c.o uses hbg__min, defined in src/common/util.c (not exported by libhbg: a client uses the public API only)
WANT
  # with the exports of a library, and with hbg.map's pattern; the objects
  # as CMake passes $<TARGET_OBJECTS:...>: one ;-separated argument
  objs=$(find "$d" -name '*.o' | sort | tr '\n' ';')
  for how in exports pattern; do
    if [ $how = exports ]; then
      set -- --exports "$t/libhbg.so"
    else
      set --
    fi
    if (link_check "$@" "$objs" > "$t/got"); then
      echo "link self-test ($how): nothing was caught"
      exit 1
    fi
    grep -v '^symbols used' "$t/got" > "$t/got1" || true
    if ! cmp -s "$t/want" "$t/got1"; then
      echo "link self-test ($how): the check named"
      cat "$t/got1"
      echo "where it should name exactly"
      cat "$t/want"
      exit 1
    fi
  done
  # a missing object is an error, not a pass
  if (link_check "$d/src/absent.c.o" > /dev/null 2>&1); then
    echo "link self-test: a missing object passed"
    exit 1
  fi
  echo "layers --link: ok (the check names exactly the uses that break the layers)"
  exit 0
}

case "${1:-}" in
--self-test)
  root=${2:?ROOT}
  check "$root"
  t=$(mktemp -d)
  trap 'rm -rf "$t"' EXIT
  for case in "src/graph/x.c workload/wl.h" \
              "src/device/sim/x.c device/cuda/cuda_internal.h" \
              "src/core/x.c device/sim/sim.h" \
              "src/core/x.c workload/wl.h" \
              "src/kernels/x.c graph/image.h" \
              "src/workload/x.c core/core.h" \
              "src/core/x.c exec/exec.h" \
              "src/device/x.c device/sim/sim.h" \
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
  exit 0 ;;
--link)
  shift
  command -v nm > /dev/null || { echo "SKIP: no nm"; exit 77; }
  link_check "$@" || exit $?
  echo "layers --link: ok"
  exit 0 ;;
--link-self-test)
  link_self_test ;;
esac
check "${1:?ROOT}"
echo "layers: ok"
