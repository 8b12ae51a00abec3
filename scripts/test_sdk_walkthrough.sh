#!/usr/bin/env bash
# Runs sdk/README.md's walkthrough from the text itself: every fenced bash block that follows a
# `<!-- walkthrough -->` line, in order, as one script, in an empty folder. So the guide cannot
# rot: a command that no longer works fails CI.
#   TESSERA_PREFIX=<installed tessera> bash scripts/test_sdk_walkthrough.sh
# (scripts/test_sdk.sh calls it with its own install.) Python must import the same build.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${TESSERA_PREFIX:?set TESSERA_PREFIX to an installed Tessera (cmake --install build/release --prefix <p>)}"
export TESSERA_PREFIX TESSERA_SOURCE=$PWD
WORK=$(mktemp -d /tmp/tessera-walkthrough.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT
# The marked blocks, each preceded by an echo of its number, so a failure says which step broke.
awk '
  /^<!-- walkthrough -->$/ { marked = 1; next }
  marked && /^```bash$/ { inside = 1; marked = 0; n++; print "echo \"== walkthrough block " n "\""; next }
  inside && /^```$/ { inside = 0; next }
  inside { print }
  !/^[[:space:]]*$/ { marked = marked && /^```bash$/ }
' sdk/README.md >"$WORK/walkthrough.sh"
blocks=$(grep -c '^echo "== walkthrough block' "$WORK/walkthrough.sh" || true)
[ "$blocks" -ge 5 ] || { echo "error: expected at least 5 walkthrough blocks in sdk/README.md, found $blocks" >&2; exit 1; }
cd "$WORK"
bash -euo pipefail -x walkthrough.sh
echo "walkthrough: $blocks blocks of sdk/README.md ran"
