#!/usr/bin/env bash
# ctest script: hg-train's launch and its messages. Every option is checked
# before a worker starts: a huge --nproc, --nproc 40 with a bad batch, a bad
# --device and --resume without a checkpoint are
# refused at once, with one message, without starting a process (run under a
# `ulimit -u` guard: a launcher that did start workers fails to fork instead
# of exhausting the machine's process IDs). Then each message names its cause
# and fix: --nproc 0, --lr out of the float range, --seed past 2^64 - 1,
# --resume in a folder with no checkpoint, a checkpoint whose loss sum or
# loss scale is corrupt (file and key named, not blamed on divergence), and
# a diverged 1-epoch run reports epoch 1.
#   check_launch.sh <hg-train> <work folder>
set -uo pipefail
H=$1 W=$2
rm -rf "$W" && mkdir -p "$W" || exit 1
B=(--limit 256 --test-limit 100 --epochs 1 --batch-size 128 --warmup-steps 1 --device cpu)
A=("${B[@]}" --precision amp-fp16)  # the seed recipe: its checkpoint has a scaler
fail() { echo "check_launch: FAIL: $*" >&2; exit 1; }
# expect <rc> <regex> <args...>: rc "cli" is any command-line error (1..127).
expect() {
  local want_rc=$1 pattern=$2 out rc
  shift 2
  out=$("$H" "$@" 2>&1)
  rc=$?
  if [ "$want_rc" = cli ]; then [ $rc -gt 0 ] && [ $rc -lt 128 ]; else [ $rc -eq "$want_rc" ]; fi ||
    fail "hg-train $* exited $rc, expected $want_rc:
$out"
  grep -qE -- "$pattern" <<<"$out" || fail "hg-train $* did not say /$pattern/:
$out"
  LAST=$out
}
# Refused in under a second, one message line, and no process started.
quick_refusal() {
  local pattern=$1 out rc start end
  shift
  start=$(date +%s%N)
  out=$(
    # The guard: this user's processes now, plus a few for the refusal itself.
    ulimit -u $(($(ps -L -u "$(id -u)" --no-headers | wc -l) + 16)) 2>/dev/null
    "$H" "$@" 2>&1
  )
  rc=$?
  end=$(date +%s%N)
  [ $rc -ne 0 ] && [ $rc -lt 128 ] || fail "hg-train $* exited $rc:
$out"
  grep -qE -- "$pattern" <<<"$out" || fail "hg-train $* did not say /$pattern/:
$out"
  [ "$(grep -c . <<<"$out")" -le 2 ] || fail "hg-train $* printed more than one refusal:
$out"
  ! grep -q "hg-run" <<<"$out" || fail "hg-train $* started hg-run:
$out"
  [ $(((end - start) / 1000000)) -lt 1000 ] || fail "hg-train $* took $(((end - start) / 1000000)) ms to refuse"
}
quick_refusal "--nproc: must be a whole number of processes from 1 to 256" "${A[@]}" --out "$W/x" --nproc 100000
quick_refusal "not divisible by the 40 processes" --limit 256 --epochs 1 --batch-size 130 --device cpu --out "$W/x" --nproc 40
mkdir -p "$W/none"
quick_refusal "no checkpoint in .*--overwrite" "${A[@]}" --out "$W/none" --nproc 2 --resume
quick_refusal "cannot parse device .nosuch." --limit 256 --epochs 1 --out "$W/x" --nproc 2 --device nosuch
quick_refusal "Fashion-MNIST folder .*nodata" "${A[@]}" --out "$W/x" --nproc 2 --data "$W/nodata"
[ ! -e "$W/x" ] || fail "a refused launch created --out"

# --nproc 0 in words, not a range with a 310-digit bound.
expect cli "--nproc: 0 processes cannot train.*leave --nproc out" "${A[@]}" --out "$W/x" --nproc 0
[ ${#LAST} -lt 300 ] || fail "--nproc 0 printed ${#LAST} characters: $LAST"
# Numbers out of range are refused, not saturated or turned into NaN.
expect cli "--lr: must be at most 3.4e38" "${A[@]}" --out "$W/x" --lr 1e39
expect cli "--lr: must be at least 1.2e-38" "${A[@]}" --out "$W/x" --lr 1e-40
expect cli "--lr: must be a number, got 'nan'" "${A[@]}" --out "$W/x" --lr nan
expect cli "--seed: must be a whole number in \[0, 18446744073709551615\].*got '18446744073709551616'" \
  "${A[@]}" --out "$W/x" --seed 18446744073709551616
# A folder where no run reached a checkpoint: --resume names the way out.
mkdir -p "$W/empty"
expect 1 "no checkpoint at .*--overwrite" "${A[@]}" --out "$W/empty" --resume
! grep -q "hg-train: hg-train:" <<<"$LAST" || fail "doubled prefix: $LAST"

# A diverged 1-epoch run says epoch 1 (the loader already points past it).
expect 1 "by step [0-9]+ \(epoch 1\): the run diverged" "${B[@]}" --precision fp32 --lr 3e38 --out "$W/diverged"

# Corrupt checkpoints: the file and key are named, and divergence is not blamed.
expect 0 "done in" "${A[@]}" --out "$W/ok"
cp -r "$W/ok" "$W/sum" && cp -r "$W/ok" "$W/scale" || exit 1
# edit <file> <metadata key> <value> | edit <file> <tensor> f32:<value>
edit() {
  python3 - "$@" <<'PY' || fail "could not edit $1"
import json, struct, sys
path, key, value = sys.argv[1:4]
data = open(path, 'rb').read()
n = struct.unpack('<Q', data[:8])[0]
header = json.loads(data[8:8 + n])
body = bytearray(data[8 + n:])
if value.startswith('f32:'):
    b, e = header[key]['data_offsets']
    body[b:e] = struct.pack('<f', float(value[4:]))
    if len(sys.argv) > 4:  # as another program would: the data changed, the integrity hash dropped
        del header['__metadata__']['halfgrad.data_xxh64']
else:
    header['__metadata__'][key] = value
text = json.dumps(header, separators=(',', ':')).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
open(path, 'wb').write(struct.pack('<Q', len(text)) + text + bytes(body))
PY
}
edit "$W/sum/checkpoint.safetensors" extra.epoch_loss_sum "not-a-number"
expect 1 "sum/checkpoint.safetensors.*'extra.epoch_loss_sum' = 'not-a-number' is not a number" \
  "${A[@]}" --out "$W/sum" --resume
cp -r "$W/ok" "$W/flipped" || exit 1
edit "$W/flipped/checkpoint.safetensors" scaler.scale f32:2048.5
expect 1 "flipped/checkpoint.safetensors.*does not match the integrity hash" "${A[@]}" --out "$W/flipped" --resume
edit "$W/scale/checkpoint.safetensors" scaler.scale f32:inf drop-hash
expect 1 "scale/checkpoint.safetensors.*'scaler.scale' holds inf.*corrupt or foreign checkpoint, not a diverged run" \
  "${A[@]}" --out "$W/scale" --resume
! grep -q -- "--lr" <<<"$LAST" || fail "a corrupt scale was blamed on the learning rate: $LAST"
echo "check_launch: passed"
