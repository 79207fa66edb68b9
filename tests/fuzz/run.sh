#!/usr/bin/env bash
# Runs one libFuzzer target of a -DQD_FUZZ=ON build for SECONDS, niced, with its seed corpus and dictionary; the
# corpus it grows lives in BUILD_DIR/fuzz-corpus/TARGET, crashes go to BUILD_DIR/fuzz-artifacts/TARGET/.
#   tests/fuzz/run.sh TARGET SECONDS [BUILD_DIR=build-fuzz]
#   TARGET: onnx_import npy npz plan plugin_attrs image calib_cache coco_json precision_config
# Prints libFuzzer's last status lines (executions, coverage), the CPU seconds the run used (a niced fuzzer beside
# other work gets a share of a core, so wall-clock time overstates it) and the artifacts found; appends a line
# "date target wall_s cpu_s executions" to BUILD_DIR/fuzz-runs.tsv; exits 1 when it found any (a slow unit or timeout
# only when its replay is slow too).
set -euo pipefail
cd "$(dirname "$0")/../.."
target=$1 seconds=$2 build=${3:-build-fuzz}
src=tests/fuzz
case $target in
  onnx_import) seeds=$src/corpus/onnx dict=$src/onnx.dict ;;
  coco_json) seeds=$src/corpus/coco dict=$src/coco.dict ;;
  *) seeds=$src/corpus/$target dict=$src/$target.dict ;;
esac
bin=$build/tests/fuzz/fuzz_$target
work=$build/fuzz-corpus/$target art=$build/fuzz-artifacts/$target
mkdir -p "$work" "$art"
args=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$art/")
[[ -f $dict ]] && args+=(-dict="$dict")
log=$build/fuzz-$target.log
status=0
TIMEFORMAT='%R %U %S'
{ time UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 nice -n 19 "$bin" "${args[@]}" "$work" "$seeds" >"$log" 2>&1 ||
  status=$?; } 2>"$log.time"
grep -E "^#[0-9]+ +DONE|^stat::number_of_executed_units|^stat::peak_rss_mb|^Done " "$log" || tail -5 "$log"
read -r wall user sys <"$log.time"
cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.0f", u + s }')
execs=$(grep -oE "^stat::number_of_executed_units: *[0-9]+" "$log" | grep -oE "[0-9]+$" || echo 0)
echo "wall ${wall%.*} s, CPU ${cpu} s"
printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u +%F)" "$target" "${wall%.*}" "$cpu" "$execs" >>"$build/fuzz-runs.tsv"
# The limits are wall-clock and the fuzzer runs niced: under load a quick input can pass them. A slow unit or a
# timeout is a finding only when its replay takes a second of CPU or more; the others move to
# BUILD_DIR/fuzz-fast-replays/TARGET/, named here.
fast=$build/fuzz-fast-replays/$target
for f in "$art"/slow-unit-* "$art"/timeout-*; do
  [[ -e $f ]] || continue
  TIMEFORMAT='%U %S'
  t=$({ time timeout 60 "$bin" "$f" >/dev/null 2>&1; } 2>&1) || true
  c=$(awk -v u="${t% *}" -v s="${t#* }" 'BEGIN { printf "%.2f", u + s }')
  if awk -v c="$c" 'BEGIN { exit !(c < 1) }'; then
    mkdir -p "$fast" && mv "$f" "$fast/"
    echo "$(basename "$f"): replays in $c s of CPU: not a finding (moved to $fast/)"
    [[ $(basename "$f") == timeout-* ]] && status=0
  fi
done
if compgen -G "$art/*" >/dev/null; then
  echo "findings ($log):"
  ls -l "$art"
  exit 1
fi
exit $status
