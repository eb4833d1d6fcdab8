# Sourced by the shell tests: a scratch folder $tmp (removed on exit),
# fail MESSAGE (prefixed with $t_name), expect_rc CODE cmd... (runs cmd
# with stdout in $tmp/out and stderr in $tmp/err, fails unless it exits
# CODE). Set t_name before sourcing.
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "$t_name: $*" >&2; exit 1; }
expect_rc() { # expect_rc CODE cmd...
  local want=$1; shift
  set +e; "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?; set -e
  [ "$rc" = "$want" ] || { cat "$tmp/err" >&2; fail "'$*' exited $rc, expected $want"; }
}
