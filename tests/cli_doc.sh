#!/usr/bin/env bash
# CTest cli_doc: docs/CLI.md and the CLI's own help agree.
#  - every command `hbg --help` lists has a section "## `hbg CMD`" in
#    docs/CLI.md, and every such section is a command the help lists;
#  - for each command, the long options its `--help` names (every --word
#    in the text) are the options of the section's tables (the first cell
#    of rows that start with "| `--"), both ways; --help itself is left
#    out of the comparison (every command takes it; selfcheck's usage does
#    not list it), and is checked to exit 0 instead;
#  - every option key `hbg devices` lists for a backend (mem=, chunk=, ...)
#    has a row "| `KEY=" in that backend's "### `NAME`" section.
#   cli_doc.sh HBG SOURCE_DIR
set -u
hbg=$1; doc=$2/docs/CLI.md
fails=0
fail() { echo "cli_doc: $*" >&2; fails=$((fails + 1)); }
[ -f "$doc" ] || { echo "cli_doc: no $doc" >&2; exit 1; }

# The commands: indented "  NAME  description" lines of `hbg --help`.
help_cmds=$("$hbg" --help | awk '/^commands:/ {m=1; next} m && /^  [a-z]/ {print $1}' | sort -u)
doc_cmds=$(sed -n 's/^## `hbg \([a-z]*\)`$/\1/p' "$doc" | sort -u)
[ -n "$help_cmds" ] || fail "hbg --help lists no command"
for c in $help_cmds; do
  grep -qx "$c" <<<"$doc_cmds" || fail "command '$c' (hbg --help) has no section '## \`hbg $c\`' in docs/CLI.md"
done
for c in $doc_cmds; do
  grep -qx "$c" <<<"$help_cmds" || fail "docs/CLI.md documents 'hbg $c', which hbg --help does not list"
done

# The lines of section "## `hbg CMD`" (to the next "## ").
section() {
  awk -v h="## \`hbg $1\`" '$0 == h {m=1; next} m && /^## / {exit} m' "$doc"
}
long_opts() { grep -o -- '--[a-z][a-z0-9-]*' | grep -vx -- '--help' | sort -u; }

for c in $help_cmds; do
  [ "$c" = version ] && continue   # no options, no --help of its own
  out=$("$hbg" "$c" --help 2>&1) || fail "hbg $c --help exits non-zero"
  h=$(long_opts <<<"$out")
  d=$(section "$c" | grep '^| `--' | cut -d'|' -f2 | long_opts)
  for o in $h; do
    grep -qx -- "$o" <<<"$d" || fail "hbg $c: '$o' is in --help but has no row in docs/CLI.md"
  done
  for o in $d; do
    grep -qx -- "$o" <<<"$h" || fail "hbg $c: docs/CLI.md has a row for '$o', which hbg $c --help does not list"
  done
  echo "cli_doc: hbg $c: $(wc -w <<<"$h") options in --help, $(wc -w <<<"$d") in docs/CLI.md"
done

# Device option keys: "NAME  available|unavailable  summary" lines.
while read -r name _ summary; do
  sec=$(awk -v h="### \`$name\`" '$0 == h {m=1; next} m && /^##/ {exit} m' "$doc")
  if [ -z "$sec" ]; then
    fail "device '$name' (hbg devices) has no section '### \`$name\`' in docs/CLI.md"; continue
  fi
  for k in $(grep -o '[a-z_][a-z0-9_]*=' <<<"$summary" | sort -u); do
    grep -q "^| \`$k" <<<"$sec" ||
      fail "device $name: option '$k' (hbg devices) has no row in docs/CLI.md"
  done
done < <("$hbg" devices | awk 'NR > 1 && $2 ~ /available$/')

if [ "$fails" != 0 ]; then
  echo "cli_doc: $fails mismatch(es) between the CLI's help and docs/CLI.md" >&2
  exit 1
fi
echo "cli_doc: docs/CLI.md matches the CLI's help"
