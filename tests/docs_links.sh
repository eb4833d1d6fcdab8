#!/usr/bin/env bash
# CTest entry for tests/docs_links.py: the docs' relative links, anchors and
# the repository paths they name in backticks (docs_links), and the check's
# own self-test (docs_links_self_test). The interpreter is picked as
# tests/python_run.sh picks it (Debian's first); none: skipped (77).
#   docs_links.sh SOURCE_DIR | --self-test
set -u
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1; then
    exec "$cand" "$(cd "$(dirname "$0")" && pwd)/docs_links.py" "$@"
  fi
done
echo "docs_links: no python3 (tried /usr/bin/python3, python3): skipped" >&2
exit 77
