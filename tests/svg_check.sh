#!/usr/bin/env bash
# Checks an `hbg bench --svg` chart with xmllint: in every panel, each bar's
# stacked segments add up to its labelled total (within the label's rounding),
# on the scale given by the panel's axis ticks; and every policy with a
# non-zero total is drawn at least MIN_SHARE of the plot width wide in some
# panel. Usage: svg_check.sh FILE [MIN_SHARE (default 0.02)]. Exit 77 when
# xmllint is missing.
set -eu
svg=$1; min_share=${2:-0.02}
command -v xmllint >/dev/null || { echo "svg_check: no xmllint" >&2; exit 77; }
fail() { echo "svg_check: $svg: $*" >&2; exit 1; }
q() { xmllint --xpath "$1" "$svg" 2>/dev/null || true; }
el() { printf "*[local-name()='%s']" "$1"; }
panel="(//$(el g)[@class='panel'])"

np=$(q "count($panel)")
[ "${np:-0}" -ge 1 ] || fail "no panel"
widest=$(mktemp); trap 'rm -f "$widest"' EXIT
for i in $(seq 1 "$np"); do
  # tick x positions and values: the first and last give the scale
  ticks=$(q "$panel[$i]//$(el text)[@class='tick']" |
          sed -n 's/.*x="\([-0-9.]*\)"[^>]*>\([-0-9.]*\)<.*/\1 \2/p')
  [ "$(printf '%s\n' "$ticks" | grep -c .)" -ge 2 ] || fail "panel $i: fewer than 2 ticks"
  scale=$(printf '%s\n' "$ticks" | awk 'NR==1{x0=$1;v0=$2} {x1=$1;v1=$2}
    END{if (v1<=v0 || x1<=x0) exit 1; printf "%.9g %.9g\n", (x1-x0)/(v1-v0), x1-x0}') ||
    fail "panel $i: ticks do not increase"
  set -- $scale; px_per_us=$1; plot_w=$2
  nb=$(q "count($panel[$i]/$(el g)[@class='bar'])")
  [ "${nb:-0}" -ge 1 ] || fail "panel $i: no bar"
  for j in $(seq 1 "$nb"); do
    bar="$panel[$i]/$(el g)[@class='bar'][$j]"
    name=$(q "string($bar/$(el text)[1])")
    total=$(q "string($bar//$(el tspan)[@class='total'])")
    widths=$(q "$bar/$(el rect)[@class='seg']/@width" |
             sed -n 's/.*width="\([-0-9.]*\)".*/\1/p' | tr '\n' ' ')
    [ -n "$name" ] && [ -n "$total" ] && [ -n "$widths" ] ||
      fail "panel $i bar $j: name, total or segments missing"
    awk -v t="$total" -v s="$px_per_us" -v pw="$plot_w" -v w="$widths" \
        -v name="$name" -v where="panel $i" 'BEGIN {
      n = split(w, a, " "); sum = 0
      for (k = 1; k <= n; k++) sum += a[k]
      d = index(t, ".") ? length(t) - index(t, ".") : 0
      tol = 0.5 * 10 ^ -d + 0.002 * n / s + 1e-9
      us = sum / s
      if (us - t > tol || t - us > tol) {
        printf "%s, %s: segments sum to %.4f us, label says %s\n", where, name, us, t > "/dev/stderr"
        exit 1
      }
      printf "%s %.6f\n", name, (t > 0 ? sum / pw : -1)
    }' >> "$widest" || fail "segments do not add up to the label"
  done
done
# per policy, the widest drawing over all panels
bad=$(awk -v m="$min_share" '{ if (!($1 in w) || $2 > w[$1]) w[$1] = $2 }
  END { for (n in w) if (w[n] >= 0 && w[n] < m) printf "%s (%.4f) ", n, w[n] }' "$widest")
[ -z "$bad" ] || fail "bars narrower than $min_share of the plot in every panel: $bad"
echo "svg_check: ok ($np panel(s))"
