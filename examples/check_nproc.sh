#!/usr/bin/env bash
# ctest script: hg-train --nproc 2 (two processes through hg-run, gloo, DDP,
# DataLoader shards) against the single-process run of the same options:
# global batch k is the same samples, so the losses agree to float rounding
# (the gradient sum order differs) and the test accuracy to a few samples.
# Rank 0 alone writes the run folder; a 2-process checkpoint resumes on one
# process; a batch the world size does not divide is refused.
#   check_nproc.sh <hg-train> <work folder>
set -uo pipefail
H=$1 W=$2
rm -rf "$W" && mkdir -p "$W" || exit 1
# fp32: the DDP equivalence itself (under amp-fp16 the two runs'
# overflow checks see differently rounded gradients and may skip other steps).
A=(--limit 1024 --test-limit 500 --epochs 2 --batch-size 64 --warmup-steps 4 --device cpu --precision fp32)
fail() { echo "check_nproc: FAIL: $*" >&2; exit 1; }
run() { local out; out=$("$H" "$@" 2>&1) || fail "hg-train $* exited $?:
$out"; echo "$out"; }
# Compares two metrics.jsonl files: train and test loss within REL, accuracy within ACC.
compare() {
  python3 - "$1" "$2" <<'PY' || fail "metrics differ: $1 vs $2"
import json, sys
# Epoch records only: sub-epoch points of a data-parallel run are rank 0's shard.
a = [r for r in map(json.loads, open(sys.argv[1])) if r.get('type', 'epoch') == 'epoch']
b = [r for r in map(json.loads, open(sys.argv[2])) if r.get('type', 'epoch') == 'epoch']
assert len(a) == len(b) == 2, (len(a), len(b))
for x, y in zip(a, b):
    print(f"epoch {x['epoch']}: train loss {x['train_loss']:.6f} vs {y['train_loss']:.6f}, "
          f"test accuracy {x['test_accuracy']:.4f} vs {y['test_accuracy']:.4f}")
    assert x['step'] == y['step'], "step counts differ"
    for k in ('train_loss', 'test_loss'):
        assert abs(x[k] - y[k]) <= 1e-4 * abs(y[k]) + 1e-6, k
    assert abs(x['test_accuracy'] - y['test_accuracy']) <= 0.003, 'test_accuracy'
PY
}
run "${A[@]}" --out "$W/one" >/dev/null
out=$(run "${A[@]}" --nproc 2 --out "$W/two")
grep -q "epoch 2/2: train loss" <<<"$out" || fail "no epoch summary from rank 0:
$out"
[ "$(grep -c 'epoch 2/2: train loss' <<<"$out")" = 1 ] || fail "more than one rank printed the summary"
[ "$(ls "$W/two" | sort | tr '\n' ' ')" = "checkpoint.safetensors curves.svg metrics.jsonl " ] ||
  fail "the run folder holds $(ls -a "$W/two")"
compare "$W/two/metrics.jsonl" "$W/one/metrics.jsonl"
# Stop a 2-process run mid-epoch, resume it on one process.
run "${A[@]}" --nproc 2 --max-steps 20 --out "$W/resumed" >/dev/null
run "${A[@]}" --resume --out "$W/resumed" >/dev/null
compare "$W/resumed/metrics.jsonl" "$W/one/metrics.jsonl"
# A batch of 64 does not split over 3 processes.
out=$("$H" "${A[@]}" --nproc 3 --out "$W/three" 2>&1) && fail "--nproc 3 with batch 64 was accepted"
grep -q "not divisible by the 3 processes" <<<"$out" || fail "unclear refusal: $out"
echo "check_nproc: passed"
