# Shared by the shell drivers of the Python tests and examples (sourced).

# pick_python NEED...: set py to the first of /usr/bin/python3 and python3
# that runs `python -c NEED` (each NEED in turn, the first being the most
# wanted), or to "" when none does.
pick_python() {
  py=
  local need cand
  for need in "$@"; do
    for cand in /usr/bin/python3 python3; do
      if command -v "$cand" >/dev/null 2>&1 &&
         "$cand" -c "$need" >/dev/null 2>&1; then
        py=$(command -v "$cand")
        return 0
      fi
    done
  done
}

# stage_hbg SRC DEST: a copy of SRC's package (python/src/hbg) as DEST/hbg,
# without what a build may have left in it (caches, a library copy, the
# extension), so that the library and extension the test names are used.
stage_hbg() {
  cp -r "$1/python/src/hbg" "$2/hbg"
  rm -rf "$2/hbg/__pycache__" "$2/hbg/"libhbg.so* "$2/hbg/hbg" \
    "$2/hbg/"_native*.so
}
