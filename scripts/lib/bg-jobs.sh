# Background jobs for the evaluation scripts (sourced): bg FILE CMD... runs CMD in the background with its stdout in
# FILE (stderr too when FILE ends in .log), at most $BG_JOBS at a time when that is set; wait_all waits for them and
# exits 1, naming the files, if any failed.
PIDS=()
NAMES=()
bg() {
  local f=$1
  shift
  if [ -n "${BG_JOBS:-}" ]; then
    while [ "$(jobs -rp | wc -l)" -ge "$BG_JOBS" ]; do sleep 1; done
  fi
  if [[ $f == *.log ]]; then "$@" > "$f" 2>&1 & else "$@" > "$f" & fi
  PIDS+=($!)
  NAMES+=("$f")
}
wait_all() {
  local failed=0
  for i in "${!PIDS[@]}"; do
    wait "${PIDS[$i]}" || { echo "$(basename "$0"): failed: ${NAMES[$i]}" >&2; failed=1; }
  done
  PIDS=()
  NAMES=()
  [ $failed = 0 ] || exit 1
}
