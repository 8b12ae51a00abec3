#!/usr/bin/env bash
# Runs the README's two commands as a new user and as CI would: each in its own fresh clone of this
# repository's committed HEAD (uncommitted changes are not in it), with ccache disabled so every
# object is compiled, and prints the wall time of each with its phase table.
#   bash scripts/fresh_machine_check.sh            # both: the demo, then the tests
#   bash scripts/fresh_machine_check.sh demo|tests # one of them
# Env: KEEP=1 keeps the clones (printed), CCACHE_CHECK=private uses an empty private ccache instead
# of none. Budget (issue 14, on the 2-core machine): demo <= 8 min, tests <= 40 min.
# What this cannot undo here: Debian and PyPI packages already installed stay installed (bootstrap
# is idempotent), so on a truly new machine add bootstrap's install time (about a minute here).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WHICH=${1:-both}
case $WHICH in demo | tests | both) ;; *) echo "usage: $0 [demo|tests|both]" >&2; exit 2 ;; esac

# The two commands, read from the README's first code block, so the check follows what users read.
mapfile -t COMMANDS < <(awk '/^```bash/{inside=1; next} /^```/{if (inside) exit} inside && /^bash /' README.md |
                        sed 's/ *#.*//')
[ "${#COMMANDS[@]}" -eq 2 ] || { echo "error: expected the README to start with two bash commands, found: ${COMMANDS[*]}" >&2; exit 1; }
DEMO_CMD=${COMMANDS[0]}
TESTS_CMD=${COMMANDS[1]}

WORK=$(mktemp -d /tmp/tessera-fresh.XXXXXX)
[ "${KEEP:-0}" = 1 ] && echo "work dir (kept): $WORK" || trap 'rm -rf "$WORK"' EXIT
if [ "${CCACHE_CHECK:-none}" = private ]; then
  export CCACHE_DIR=$WORK/ccache   # empty: every object is a miss, then cached for the second clone
else
  export CCACHE_DISABLE=1
fi

run_in_fresh_clone() {  # $1: label, $2: command line from the README
  local label=$1 cmd=$2 dir=$WORK/$1 start rc=0
  git clone -q "$ROOT" "$dir"
  echo "== $label: '$cmd' in a fresh clone at $dir (commit $(git -C "$dir" rev-parse --short HEAD))"
  start=$SECONDS
  set +e
  (cd "$dir" && PHASE_LOG=$WORK/$label.phases bash -c "$cmd") 2>&1 | tee "$WORK/$label.log" | sed "s/^/  [$label] /"
  rc=${PIPESTATUS[0]}
  set -e
  local took=$((SECONDS - start))
  printf '%-6s %5d s (%d min %02d s)  exit %d  %s\n' "$label" "$took" $((took / 60)) $((took % 60)) "$rc" "$cmd" >>"$WORK/summary"
  if [ -f "$WORK/$label.phases" ]; then
    while IFS=$'\t' read -r name secs status; do
      printf '    %-14s %6s s  %s\n' "$name" "$secs" "$status" >>"$WORK/summary"
    done <"$WORK/$label.phases"
  fi
}

: >"$WORK/summary"
[ "$WHICH" = tests ] || run_in_fresh_clone demo "$DEMO_CMD"
[ "$WHICH" = demo ] || run_in_fresh_clone tests "$TESTS_CMD"
echo
echo "fresh-machine check ($(nproc) cores, ccache: ${CCACHE_CHECK:-disabled}):"
cat "$WORK/summary"
! grep -q "exit [1-9]" "$WORK/summary"
