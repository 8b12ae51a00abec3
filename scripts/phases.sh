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
  local rc=$? i total=$((SECONDS - _PHASE_START)) rows=()
  ((${#_PHASE_NAMES[@]})) || return $rc
  for i in "${!_PHASE_NAMES[@]}"; do
    rows+=("${_PHASE_NAMES[$i]}"$'\t'"${_PHASE_SECONDS[$i]}"$'\t'"${_PHASE_STATUS[$i]}")
  done
  rows+=("total"$'\t'"$total"$'\t'"$( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")")
  printf '\n%-14s %8s  %s\n' phase seconds status
  local name secs status
  for i in "${!rows[@]}"; do
    IFS=$'\t' read -r name secs status <<<"${rows[$i]}"
    printf '%-14s %8d  %s\n' "$name" "$secs" "$status"
  done
  printf '(%d min %02d s)\n' $((total / 60)) $((total % 60))
  [ -z "${PHASE_LOG:-}" ] || printf '%s\n' "${rows[@]}" >"$PHASE_LOG"
  return $rc
}
trap _phase_summary EXIT
