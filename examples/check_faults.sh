#!/usr/bin/env bash
# ctest script (fault injection): hg-train killed by SIGKILL at random moments
# and hit by failing writes and renames (HG_TEST_FAIL_IO, core/atomic_file.h)
# must, once resumed to the end, leave a checkpoint byte-identical to an
# uninterrupted run's and every metrics line (all fields but the timings).
#   check_faults.sh <hg-train> <cpu|cuda> <work folder>
set -uo pipefail
H=$1 DEV=$2 W=$3
rm -rf "$W" && mkdir -p "$W" || exit 1
# 600 samples / batch 100: 6 steps an epoch, 18 in all, a checkpoint every 2.
A=(--limit 600 --test-limit 200 --epochs 3 --batch-size 100 --warmup-steps 2 --checkpoint-every 2 --device "$DEV"
   --precision amp-fp16)  # the seed recipe: the scaler's state travels too
fail() { echo "check_faults: FAIL: $*" >&2; exit 1; }
metrics() { sed -E 's/,"(seconds|samples_per_second)":[^,}]*//g' "$1/metrics.jsonl" 2>/dev/null; }
hash_of() { sha256sum <"$1/checkpoint.safetensors" 2>/dev/null; }
# Runs hg-train on $1 (resuming when there is a checkpoint) with a kill
# timeout of $2 ms (0: none); the exit status is hg-train's (137: killed).
run() {
  local dir=$1 ms=$2 mode=--overwrite
  [ -f "$dir/checkpoint.safetensors" ] && mode=--resume
  if [ "$ms" -gt 0 ]; then
    # --preserve-status: a run that ends by itself just as the timer fires
    # returns its own status (0), not timeout's 124 for "timed out".
    timeout --foreground --preserve-status -s KILL "$((ms / 1000)).$(printf '%03d' $((ms % 1000)))" "$H" "${A[@]}" --out "$dir" $mode
  else
    "$H" "${A[@]}" --out "$dir" $mode
  fi
}
same_as_ref() {
  [ "$(hash_of "$1")" = "$REF_HASH" ] || fail "$2: the checkpoint differs from the uninterrupted run's"
  [ "$(metrics "$1")" = "$REF_METRICS" ] || fail "$2: metrics.jsonl differs:
$(metrics "$1")
expected:
$REF_METRICS"
  ! ls "$1" | grep -q '\.tmp\.' || fail "$2: temp files were left behind: $(ls "$1")"
}

t0=$(date +%s%N)
"$H" "${A[@]}" --out "$W/ref" >/dev/null || fail "the uninterrupted run failed"
TOTAL_MS=$((($(date +%s%N) - t0) / 1000000))
REF_HASH=$(hash_of "$W/ref")
REF_METRICS=$(metrics "$W/ref")
[ "$(grep -c '"type":"epoch"' "$W/ref/metrics.jsonl")" -eq 3 ] || fail "the uninterrupted run has no 3 epoch lines"
[ "$(grep -c '"type":"step"' "$W/ref/metrics.jsonl")" -eq 18 ] || fail "the uninterrupted run has no 18 step lines (one a step)"

# 1. SIGKILL at random moments (a seeded RANDOM: reproducible delays), each
#    time resumed; a run that finishes before its kill is checked and the
#    folder starts over, until four runs were killed (at most 16 tries).
RANDOM=${HG_FAULT_SEED:-2026}
kills=0
finished=0
for _ in $(seq 16); do
  [ $kills -ge 4 ] && break
  ms=$((TOTAL_MS / 8 + RANDOM % (TOTAL_MS * 3 / 4 + 1)))
  run "$W/kill" "$ms" >/dev/null 2>"$W/kill.err"
  rc=$?
  if [ $rc -eq 137 ]; then
    kills=$((kills + 1))
  elif [ $rc -eq 0 ]; then
    same_as_ref "$W/kill" "a run finished after $kills SIGKILLs"
    finished=$((finished + 1))
    rm -rf "$W/kill"
  else
    fail "a run after a kill failed (rc $rc): $(cat "$W/kill.err")"
  fi
done
run "$W/kill" 0 >/dev/null 2>"$W/kill.err" || fail "the final resume failed: $(cat "$W/kill.err")"
[ $kills -ge 4 ] || fail "only $kills of 16 runs were killed (the run takes $TOTAL_MS ms); the test exercised too little"
same_as_ref "$W/kill" "after $kills SIGKILLs"

# 2. A failing write (ENOSPC) or rename (EIO) at chosen points: a clear
#    error (exit 1, no abort), nothing half-written, and the resume completes.
for spec in write:1 rename:1 write:12 rename:4 rename:9; do
  dir=$W/io_${spec/:/_}
  HG_TEST_FAIL_IO=$spec run "$dir" 0 >/dev/null 2>"$dir.err"
  rc=$?
  if [ $rc -ne 0 ]; then
    [ $rc -eq 1 ] || fail "$spec: hg-train died (rc $rc): $(cat "$dir.err")"
    grep -qE "hg-train: .*(disk is full|cannot rename)" "$dir.err" || fail "$spec: unclear error: $(cat "$dir.err")"
    grep -q "internal error" "$dir.err" && fail "$spec: $(cat "$dir.err")"
    run "$dir" 0 >/dev/null 2>"$dir.err" || fail "$spec: the resume failed: $(cat "$dir.err")"
  fi
  same_as_ref "$dir" "$spec"
done
rm -rf "$W"
echo "check_faults: $kills SIGKILLs ($finished runs finished between them) and 5 injected I/O failures; every resume bit-exact, no metrics line lost"
