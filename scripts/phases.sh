# Sourced by scripts/test.sh and scripts/demo.sh: runs each step as a named phase and prints its
# wall time, then a table of every phase and the total when the script ends (also when a phase
# fails, so a red run still says where its time went).
#   phase NAME COMMAND...   runs COMMAND; prints "== phase NAME: N s (ok|FAILED, exit S)"
# The table goes to stdout and, when PHASE_LOG is set, to that file as "name<TAB>seconds<TAB>status".

_PHASE_NAMES=()
_PHASE_SECONDS=()
_PHASE_STATUS=()
_PHASE_START=$SECONDS

phase() {
  local name=$1
  shift
  local start=$SECONDS rc=0
  printf '\n== phase %s: %s\n' "$name" "$*"
  "$@" || rc=$?
  local took=$((SECONDS - start))
  _PHASE_NAMES+=("$name")
  _PHASE_SECONDS+=("$took")
  if ((rc == 0)); then _PHASE_STATUS+=(ok); else _PHASE_STATUS+=("FAILED (exit $rc)"); fi
  printf '== phase %s: %d s (%s)\n' "$name" "$took" "${_PHASE_STATUS[-1]}"
  return $rc
}

_phase_summary() {
  local rc=$? i total=$((SECONDS - _PHASE_START))
  ((${#_PHASE_NAMES[@]})) || return $rc
  printf '\n%-14s %8s  %s\n' phase seconds status
  for i in "${!_PHASE_NAMES[@]}"; do
    printf '%-14s %8d  %s\n' "${_PHASE_NAMES[$i]}" "${_PHASE_SECONDS[$i]}" "${_PHASE_STATUS[$i]}"
  done
  printf '%-14s %8d  (%d min %02d s)%s\n' total "$total" $((total / 60)) $((total % 60)) \
    "$( ((rc == 0)) || echo ", exit $rc")"
  if [ -n "${PHASE_LOG:-}" ]; then
    : >"$PHASE_LOG"
    for i in "${!_PHASE_NAMES[@]}"; do
      printf '%s\t%d\t%s\n' "${_PHASE_NAMES[$i]}" "${_PHASE_SECONDS[$i]}" "${_PHASE_STATUS[$i]}" >>"$PHASE_LOG"
    done
    printf 'total\t%d\t%s\n' "$total" "$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")" >>"$PHASE_LOG"
  fi
  return $rc
}
trap _phase_summary EXIT
