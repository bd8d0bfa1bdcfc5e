#!/usr/bin/env bash
# ctest script: hg-train's --out rules and the misuse it must refuse with a
# clear message (exit 1, never an abort) before it trains.
#   check_run_folder.sh <hg-train> <cpu|cuda> <work folder>
set -uo pipefail
H=$1 DEV=$2 W=$3
rm -rf "$W" && mkdir -p "$W" || exit 1
A=(--limit 400 --test-limit 100 --epochs 2 --batch-size 100 --warmup-steps 2 --device "$DEV")
P=(--precision amp-fp16)  # the seed recipe: a loss scaler, shown in the progress lines
fail() { echo "check_run_folder: FAIL: $*" >&2; exit 1; }
# expect <rc> <regex for stderr+stdout> <hg-train args...>; rc "cli": any
# command-line error (CLI11's codes), never a signal.
expect() {
  local want_rc=$1 pattern=$2 out rc
  shift 2
  out=$("$H" "$@" 2>&1)
  rc=$?
  if [ "$want_rc" = cli ]; then [ $rc -gt 0 ] && [ $rc -lt 128 ]; else [ $rc -eq "$want_rc" ]; fi || fail "hg-train $* exited $rc, expected $want_rc:
$out"
  grep -qE -- "$pattern" <<<"$out" || fail "hg-train $* did not say /$pattern/:
$out"
  LAST=$out
}
hash_of() { sha256sum <"$1/checkpoint.safetensors"; }

# Without --out, each fresh run gets a folder of its own (runs/hg-train, then
# runs/hg-train-2) and says so; --resume continues the last one.
(cd "$W" && expect 0 "runs/hg-train holds" "${A[@]}" && expect 0 "runs/hg-train-2 holds" "${A[@]}" &&
  expect 0 "runs/hg-train-2 holds" "${A[@]}" --resume) || exit 1
[ -f "$W/runs/hg-train/checkpoint.safetensors" ] && [ -f "$W/runs/hg-train-2/checkpoint.safetensors" ] &&
  [ ! -e "$W/runs/hg-train-3" ] || fail "the default run folders are not runs/hg-train and runs/hg-train-2"

# A finished run's folder is not overwritten by a run without --resume.
expect 0 "done in" "${A[@]}" --out "$W/a"
# The default precision is auto; the first line names what it picked and the
# seed recipe's flag.
grep -qE -- "^hg-train: precision (fp32|amp-bf16|amp-fp16) \(--precision auto: .*--precision amp-fp16" \
  <<<"$(tr '\n' ' ' <<<"$LAST" | tr -s ' ')" ||
  fail "the first lines do not name the auto precision and the seed recipe: $LAST"
before=$(hash_of "$W/a")
expect 1 "already holds files .*--resume.*--overwrite" "${A[@]}" --out "$W/a" --lr 0.01
[ "$(hash_of "$W/a")" = "$before" ] || fail "the refused run changed the checkpoint"
expect cli "excludes" "${A[@]}" --out "$W/a" --resume --overwrite
expect 0 "done in" "${A[@]}" --out "$W/a" --overwrite --lr 0.01
# 4 steps an epoch: a step record each (--log-every defaults to 1% of an epoch, at least 1) and an epoch record.
[ "$(grep -c '"type":"epoch"' "$W/a/metrics.jsonl")" -eq 2 ] && [ "$(wc -l <"$W/a/metrics.jsonl")" -eq 10 ] ||
  fail "--overwrite left stale metrics lines: $(cat "$W/a/metrics.jsonl")"

# A second run on a locked folder is refused (this shell takes the same flock first).
exec 9>>"$W/a/.hg-train.lock"
flock -n 9 || fail "cannot take the lock for the test"
expect 1 "in use by another hg-train" "${A[@]}" --out "$W/a" --resume
exec 9>&-

# Not writable: refused before any data is read or a step is taken.
expect 1 "is not writable" "${A[@]}" --out /proc
! grep -q "epoch 1" <<<"$LAST" || fail "the unwritable --out was noticed only after training started"
if [ "$(id -u)" -ne 0 ]; then  # root writes through permission bits
  mkdir -p "$W/ro" && chmod 555 "$W/ro"
  expect 1 "is not writable" "${A[@]}" --out "$W/ro"
  chmod 755 "$W/ro"
fi

# Temp files of killed saves are removed at start (a dead pid: 2^22 - 1 > pid_max on most systems... so check it).
dead=4194303
kill -0 $dead 2>/dev/null && dead=4194302
: >"$W/a/checkpoint.safetensors.tmp.$dead.0"
expect 0 "removed 1 temp file" "${A[@]}" --out "$W/a" --resume --lr 0.01
[ ! -e "$W/a/checkpoint.safetensors.tmp.$dead.0" ] || fail "the stale temp file is still there"

# A metrics line holding null (how JSON stores a NaN loss) no longer blocks --resume.
sed -i '1s/"train_loss":[-0-9.eE+]*/"train_loss":null/' "$W/a/metrics.jsonl"
grep -q '"train_loss":null' "$W/a/metrics.jsonl" || fail "could not write the null line for the test"
expect 0 "done in" "${A[@]}" --out "$W/a" --resume --lr 0.01

# Bad options: a clear message, not a silent fallback, with human ranges
# (not CLI11's "in range 1 - 1.79769e+308" or a 300-digit number).
expect cli "--seed: must be a whole number in \[0, 18446744073709551615\] .*got '-1'" "${A[@]}" --out "$W/b" --seed -1
expect cli "--clip-grad: must be a number >= 0, got 'nan'" "${A[@]}" --out "$W/b" --clip-grad nan
expect cli "--epochs: must be an integer >= 1, got '0'" "${A[@]}" --out "$W/b" --epochs 0
[ ${#LAST} -lt 200 ] || fail "--epochs 0 printed ${#LAST} characters: $LAST"
expect cli "--lr: must be at most 3.4e38 .*got 'inf'" "${A[@]}" --out "$W/b" --lr inf
# --help shows the defaults; --version the CMake project version.
expect 0 "--epochs INT=8" --help
LAST=$(tr '\n' ' ' <<<"$LAST")
grep -qE -- "--precision .*=auto .*--epochs INT=8 .*--batch-size INT=128" <<<"$LAST" || fail "--help shows no defaults: $LAST"
if [ -n "${HG_EXPECTED_VERSION:-}" ]; then
  expect 0 "^hg-train \(halfgrad\) ${HG_EXPECTED_VERSION//./\\.}$" --version
fi

expect 0 "hg-train: cpu: F16C" "${A[@]}" --out "$W/f32" --precision fp32  # the capability report, in every mode

# Terminal output. Not a tty: plain lines that fit $COLUMNS, else 80 columns
# (issue: a ~93-column line wrapped in an 80-column terminal).
widest() { awk '{ if (length($0) > n) n = length($0) } END { print n + 0 }'; }
out=$(env -u COLUMNS "$H" "${A[@]}" "${P[@]}" --out "$W/t" 2>&1) || fail "the 80-column run failed: $out"
# amp-fp16's checkpoint carries the loss scaler.
LC_ALL=C grep -aq '"scaler.state"' "$W/t/checkpoint.safetensors" || fail "the amp-fp16 checkpoint has no scaler state"
grep -qE "^  epoch 1/2  1/4  loss [0-9.]+  scale 2\^16  skip 0  [0-9:]+ eta [0-9:-]+" <<<"$out" ||
  fail "no progress line with the loss scale, skipped steps, elapsed time and ETA: $out"
[ "$(widest <<<"$out")" -le 80 ] || fail "a line is wider than 80 columns: $out"
out=$(COLUMNS=50 "$H" "${A[@]}" "${P[@]}" --out "$W/t" --overwrite 2>&1) || fail "the 50-column run failed: $out"
[ "$(widest <<<"$out")" -le 50 ] || fail "a line is wider than COLUMNS=50: $out"
# A terminal (a pty from util-linux's script, 80 columns): the line is redrawn
# in place (\r) every 10 steps, with a bar, and the evaluation shows progress;
# every redraw fits (TIOCGWINSZ).
if script -qec true /dev/null </dev/null >/dev/null 2>&1; then
  out=$(script -qec "stty cols 80 && exec $H --limit 1200 --test-limit 100 --batch-size 100 --warmup-steps 2 \
        --epochs 1 --device $DEV --precision amp-fp16 --out $W/tty" /dev/null </dev/null | tr '\r' '\n' | sed 's/\x1b\[K//g')
  grep -qE "^epoch 1/1 \[#+\.*\] 10/12  loss [0-9.]+  scale 2\^16  skip 0  [0-9:]+ eta [0-9:]+$" <<<"$out" ||
    fail "no in-place progress line on a tty: $out"
  grep -qE "^epoch 1/1  evaluating \[#+\] 1/1" <<<"$out" || fail "no evaluation progress on a tty: $out"
  [ "$(widest <<<"$out")" -le 80 ] || fail "a redraw is wider than the 80-column pty: $out"
else
  echo "check_run_folder: util-linux script cannot open a pty here; the tty checks are left out"
fi

# Resume with another precision: said as such, not as a dtype mismatch.
expect 0 "stopped after step 2" "${A[@]}" --out "$W/p" --max-steps 2
expect 1 "precision differs" "${A[@]}" --out "$W/p" --resume --max-steps 2 --precision bf16-master
# Another --lr: the values in decimal (the checkpoint stores the exact hex
# form), and no source file:line in a message meant for the user.
expect 1 "--lr = 0.002, this run has 0.0015; use the same options" "${A[@]}" --out "$W/p" --resume --lr 0.0015
! grep -qE "0x1|\.cpp:[0-9]|\(at " <<<"$LAST" || fail "the mismatch message shows hex or a source location: $LAST"
# Resuming a run already at --max-steps takes no step and leaves the checkpoint alone.
before=$(hash_of "$W/p")
expect 0 "nothing to do" "${A[@]}" --out "$W/p" --resume --max-steps 2
[ "$(hash_of "$W/p")" = "$before" ] || fail "a resume at --max-steps changed the checkpoint"

# Crafted checkpoints (same-length edits of the JSON header): a clear error, not an abort.
craft() {  # craft <from> <to>: a copy of p's checkpoint with one header string replaced
  rm -rf "$W/c" && mkdir "$W/c" && LC_ALL=C sed "s/$1/$2/" "$W/p/checkpoint.safetensors" >"$W/c/checkpoint.safetensors"
}
craft '"extra.epoch_batches"' '"extra.epoch_batchez"'
expect 1 "lacks 'epoch_batches'" "${A[@]}" --out "$W/c" --resume
craft '"extra.epoch_batches":"2"' '"extra.epoch_batches":"x"'
expect 1 "'epoch_batches' = 'x' is not an integer" "${A[@]}" --out "$W/c" --resume
craft '"progress.epoch":"0"' '"progress.epoch":"9"'
expect 1 "outside this run's 2 epochs" "${A[@]}" --out "$W/c" --resume
craft '"progress.global_step":"2"' '"progress.global_step":"7"'
expect 1 "counters disagree" "${A[@]}" --out "$W/c" --resume

# A diverging run stops with a message and saves nothing non-finite.
expect 1 "diverged" "${A[@]}" --out "$W/nan" --lr 1e30 --checkpoint-every 1
# (A checkpoint at step 1 writes the metrics of that finite step first.)
! grep -qiE "null|nan|inf" "$W/nan/metrics.jsonl" 2>/dev/null || fail "the diverged run wrote non-finite metrics"
if [ -e "$W/nan/checkpoint.safetensors" ]; then
  expect 0 "" "${A[@]}" --out "$W/nan" --resume --lr 1e30 --checkpoint-every 1 --max-steps 1  # a finite state
fi

# Past the file size limit: a clear error instead of death by SIGXFSZ.
out=$( (ulimit -f 64 && "$H" "${A[@]}" --out "$W/fsize") 2>&1)
rc=$?
[ $rc -eq 1 ] && grep -q "file size limit" <<<"$out" || fail "ulimit -f: rc $rc:
$out"
rm -rf "$W"
echo "check_run_folder: all refusals clear"
