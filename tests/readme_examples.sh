#!/usr/bin/env bash
# CTest readme_example_c / readme_example_python: the README's examples run
# as written. Each is the fenced block right after a line
# `<!-- test: readme_c -->` (or readme_python) in README.md, and what it
# prints must be what follows the line `<!-- test: readme_c output -->`:
# the fenced block right after it, or else the first `code span` of the
# next line.
#  c       compiled with the project's C compiler (C11, warnings as errors)
#          against include/ and the built shared library, then run;
#  python  run with the interpreter the python tests use (python_run.sh's
#          choice: /usr/bin/python3 or python3, the first that imports
#          pytest and numpy, preferring one that imports torch too) on the
#          package from the source tree, with the extension hbg._native
#          when it was built (HBG_PY_NATIVE=1) and on ctypes.
# Run on the sim, with no HBG_* device or policy settings from outside.
#   readme_examples.sh c SOURCE_DIR LIBHBG CC
#   readme_examples.sh python SOURCE_DIR LIBHBG NATIVE_MODULE|none
set -u
. "$(dirname "$0")/py_helpers.sh"
lang=$1; src=$2; lib=$3; extra=${4:-}
readme=$src/README.md
name=readme_example_$lang

# The fenced block after the marker line $1, or (output markers) the
# first code span of the line after it; nothing if there is no marker.
block() {
  awk -v mark="<!-- test: $1 -->" -v span="${2:-0}" '
    $0 == mark {m=1; next}
    m == 1 && /^```/ {m=2; next}
    m == 1 && NF {
      if (span && match($0, /`[^`]+`/)) print substr($0, RSTART + 1, RLENGTH - 2)
      exit
    }
    m == 2 && /^```/ {exit}
    m == 2 {print}' "$readme"
}
code=$(block "readme_$lang")
if [ -z "$code" ]; then
  echo "$name: no fenced block right after '<!-- test: readme_$lang -->' in $readme" >&2
  exit 1
fi
want=$(block "readme_$lang output" 1)
if [ -z "$want" ]; then
  echo "$name: no output after '<!-- test: readme_$lang output -->' in $readme" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in HBG_DEVICE HBG_DEVICE_OPTIONS HBG_POLICY HBG_DEPS HBG_RECORD \
         HBG_ARENA_BYTES HBG_PIPELINE_DEPTH HBG_GRAPH_CACHE_MAX; do
  unset "$v"
done

# check OUTPUT: the program's output against the one README.md shows.
check() {
  if [ "$1" != "$want" ]; then
    echo "$name: the output differs from the one README.md shows:" >&2
    diff <(printf '%s\n' "$want") <(printf '%s\n' "$1") >&2
    return 1
  fi
}

case $lang in
c)
  cc=${extra:-cc}
  printf '%s\n' "$code" >"$tmp/readme.c"
  echo "$name: $(wc -l <"$tmp/readme.c") lines, compiled with $cc"
  "$cc" -std=c11 -Wall -Wextra -Werror -I"$src/include" -o "$tmp/readme" \
    "$tmp/readme.c" "$lib" -Wl,-rpath,"$(dirname "$lib")" ||
    { echo "$name: README.md's C example does not compile" >&2; exit 1; }
  out=$("$tmp/readme") ||
    { echo "$name: README.md's C example failed (exit $?):" >&2; echo "$out" >&2; exit 1; }
  echo "$out"
  check "$out" || exit 1
  ;;
python)
  native=${extra:-none}
  pick_python 'import pytest, numpy, torch' 'import pytest, numpy'
  if [ -z "$py" ]; then
    echo "$name: no python3 with pytest and numpy (tried /usr/bin/python3, python3)" >&2
    exit 1
  fi
  printf '%s\n' "$code" >"$tmp/readme.py"
  stage_hbg "$src" "$tmp"
  backends=0
  if [ "$native" != none ]; then
    cp "$native" "$tmp/hbg/"
    backends="1 0"
  fi
  cd "$tmp" || exit 1
  for b in $backends; do
    echo "$name: $(wc -l <readme.py) lines, $py, HBG_PY_NATIVE=$b"
    out=$(HBG_LIBRARY=$lib HBG_PY_NATIVE=$b PYTHONPATH=$tmp "$py" readme.py) ||
      { echo "$name: README.md's Python example failed (HBG_PY_NATIVE=$b):" >&2
        echo "$out" >&2; exit 1; }
    echo "$out"
    check "$out" || exit 1
  done
  ;;
*)
  echo "usage: readme_examples.sh c|python SOURCE_DIR LIBHBG CC|NATIVE_MODULE" >&2
  exit 2
  ;;
esac
echo "$name: README.md's example runs as written"
