#!/usr/bin/env bash
# scripts/bench-headline.sh with very few rounds: it prints docs/BENCHMARKS.md's
# headline tables for qwen3-14b and dsv4 with every policy (and Python vs C
# on ctypes where a python3 with numpy is there), each table well formed
# (every row as many cells as its header), with the commit, date and
# machine; a bad option is a usage error.
# Usage: bench_headline.sh SOURCE_DIR HBG_CLI LIBHBG [plain|sanitized]
# (sanitized: the library cannot load into an interpreter that is not
# instrumented, so the Python part is left out with --python no).
set -eu
src=$1; cli=$2; lib=$3; build=${4:-plain}
t_name=bench_headline_script
. "$(cd "$(dirname "$0")" && pwd)/sh_helpers.sh"
script=$src/scripts/bench-headline.sh

HBG=$cli expect_rc 2 "$script" --rounds x
HBG=$cli expect_rc 2 "$script" --python maybe

export HBG=$cli HBG_LIBRARY=$lib HBG_PY_NATIVE_MODULE=none
pyopt=auto; [ "$build" = sanitized ] && pyopt=no
expect_rc 0 "$script" --rounds 2 --warmup 1 --repeat 1 --python "$pyopt" --out "$tmp/run"
out=$tmp/out

# Every table: header, separator, rows, each with the header's cell count.
awk '
  function cells(s) { return gsub(/\|/, "|", s) }
  /^\|/ { if (!intab) { n = cells($0); intab = 1; line = NR; next }
          if (cells($0) != n) { printf "line %d: %d cells, header (line %d) has %d\n", NR, cells($0), line, n; bad = 1 }
          next }
  { intab = 0 }
  END { exit bad }' "$out" || fail "a table is not well formed"

policy_rows() { # policy_rows TITLE: the table rows after "### TITLE"
  awk -v t="### $1" '$0 == t { on = 1; next } on && /^### / { exit } on && /^\|/' "$out"
}
for w in qwen3-14b dsv4; do
  rows=$(policy_rows "Four policies on $w")
  [ -n "$rows" ] || fail "no table for $w"
  [ "$(printf '%s\n' "$rows" | sed -n 1p)" = "| policy | control_plane µs | ratio to deferred |" ] ||
    fail "$w: header is '$(printf '%s\n' "$rows" | sed -n 1p)'"
  [ "$(printf '%s\n' "$rows" | sed -n 2p)" = "|---|---:|---:|" ] || fail "$w: separator"
  got=$(printf '%s\n' "$rows" | sed -n '3,$p' | cut -d'|' -f2 | tr -d ' ' | tr '\n' ' ')
  [ "$got" = "deferred pinned-eager coalesced pinned-bulk " ] || fail "$w: policies '$got'"
  printf '%s\n' "$rows" | sed -n '3,$p' |
    grep -Eqv '^\| [a-z-]+ \| [0-9]+\.[0-9] \| [0-9]+\.[0-9]{3} \|$' &&
    fail "$w: a row is not 'policy | median | ratio': $(printf '%s\n' "$rows" | sed -n '3,$p')"
  printf '%s\n' "$rows" | grep -q '^| deferred | [0-9.]* | 1\.000 |$' || fail "$w: deferred's ratio is not 1.000"
done
grep -Eq '^Measured at commit [0-9a-f]{4,}( \(with uncommitted changes\))? on [0-9]{4}-[0-9]{2}-[0-9]{2} .*machine: .*, [0-9]+ CPUs \(`nproc`\)' "$out" ||
  fail "no 'Measured at commit ... machine ...' line"
grep -q -- '--workload qwen3-14b --rounds 2 --warmup 1 --host-alloc retain' "$out" || fail "the command is not printed"
grep -q '^coalesced / deferred control_plane in each process: [0-9.]*\.$' "$out" || fail "no per-process ratio line"
grep -q 'scripts/gpu-check.sh' "$out" || fail "the GPU table's script is not named"
grep -q 'scripts/upstream-table.sh' "$out" || fail "the upstream table's script is not named"

py=
[ "$pyopt" = no ] || for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' >/dev/null 2>&1; then py=$cand; break; fi
done
if [ -n "$py" ]; then
  rows=$(policy_rows "Python vs C control plane")
  [ "$(printf '%s\n' "$rows" | sed -n 1p)" = "| policy | backend | arm | host_orch µs (× C) | control_plane µs (× C) | graph calls µs | control_plane ÷ C, runs 1 |" ] ||
    fail "python: header is '$(printf '%s\n' "$rows" | sed -n 1p)'"
  got=$(printf '%s\n' "$rows" | sed -n '3,$p' | awk -F' [|] ' '{ printf "%s/%s/%s ", substr($1, 3), $2, $3 }')
  want="coalesced/ctypes/C coalesced/ctypes/Python coalesced/ctypes/Python+n pinned-eager/ctypes/C pinned-eager/ctypes/Python pinned-eager/ctypes/Python+n deferred/ctypes/C deferred/ctypes/Python deferred/ctypes/Python+n "
  [ "$got" = "$want" ] || fail "python rows: '$got'"
else
  grep -q '^(Python vs C: not run' "$out" || fail "no python3 with numpy, and the script does not say so"
  echo "$t_name: Python vs C left out (--python $pyopt, or no python3 with numpy): its table was not checked"
fi
echo "$t_name: ok"
