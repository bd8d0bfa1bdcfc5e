#!/usr/bin/env python3
"""hg-train --model cnn (the Fashion-MNIST CNN) in PyTorch, for the speed and
accuracy comparison in docs/bench/history.md ("hg-train against PyTorch on the
CPU: CNN and char-GPT").

What is the same as hg-train --model cnn (examples/hg_train.cpp, nn/models/cnn.cpp):
  * the data: Debian's dataset-fashion-mnist IDX files; pixels (v / 255 - 0.2860)
    / 0.3530 (here normalised once before the clock starts, halfgrad's loader
    normalises each batch); the first --limit training images (0 = all), a
    shuffled pass per epoch with the last partial batch dropped; the first
    --test-limit test images (0 = all) in batches of 1000, in eval mode (the
    BatchNorm running statistics);
  * the model, layer for layer: Unflatten 1x28x28, Conv2d(1, 32, 3, padding 1),
    BatchNorm2d(32), MaxPool2d(2), ReLU, Conv2d(32, 64, 3, padding 1),
    BatchNorm2d(64), MaxPool2d(2), ReLU, Flatten, Linear(3136, 128), ReLU,
    Linear(128, 10) (PyTorch's default init, which is also halfgrad's;
    BatchNorm eps 1e-5, momentum 0.1);
  * AdamW (lr 2e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-4 on every
    parameter; fused=True, PyTorch's fastest CPU AdamW); a linear warmup of 200
    steps (at most half the steps) then cosine decay to 0 at the last step,
    stepped once a batch; cross-entropy;
  * --precision: fp32; amp-fp16 / amp-bf16 = fp32 weights, torch.autocast in that
    dtype and a GradScaler (torch.amp), as hg-train does;
  * the timing: samples/s of each epoch is the training samples of the epoch over
    the wall time of its training loop (data, forward, backward, step), as
    hg-train's "samples/s" (the evaluation is not timed).
What differs: the random streams (init and shuffling are torch's), so the runs
agree in distribution, not bit for bit.

  /path/to/venv/bin/python scripts/cnn_fashion_torch.py [--precision fp32] [--epochs 8] [--json FILE]
  /path/to/venv/bin/python scripts/cnn_fashion_torch.py --hg-train build/cpu/examples/hg-train \\
      --precision fp32 --epochs 1 --limit 12800 --rounds 2 [--cpu-steps 40]

With --hg-train it runs hg-train with the same options and this script's own
loop alternately (--rounds times each, A/B/A/B) and prints each side's median
wall time per step (over its epochs and rounds), their ratio (PyTorch time /
halfgrad time, > 1: halfgrad faster) and each side's final test accuracy and
loss. 2 threads unless --threads. --cpu-steps N adds a process CPU time per
step with one thread on each side, which a loaded machine moves far less than
wall time: hg-train (HG_NUM_THREADS=1) runs --max-steps 10 and --max-steps
10+N (the difference of the two runs' CPU time over N: start-up, data loading
and the checkpoint cancel out), PyTorch (torch.set_num_threads(1)) its CPU time
over steps 11..10+N; --rounds times each, alternated, the medians printed.
--cpu-only skips the wall-time runs (only the CPU time per step).
"""
import argparse
import gzip
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
WARM_STEPS = 10  # --cpu-steps: steps before the CPU clock starts, on both sides


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return torch.frombuffer(bytearray(data[4 + 4 * ndim:]), dtype=torch.uint8).reshape(dims)


def load(root, train):
    stem = "train" if train else "t10k"
    def find(kind):
        name = f"{stem}-{kind}-idx{3 if kind == 'images' else 1}-ubyte"
        for ext in ("", ".gz"):
            if os.path.exists(os.path.join(root, name + ext)):
                return os.path.join(root, name + ext)
        sys.exit(f"cnn_fashion_torch.py: no {stem} {kind} in {root}; apt-get install dataset-fashion-mnist")
    x = read_idx(find("images")).reshape(-1, 784)
    y = read_idx(find("labels")).long()
    return x, y


def make_model():
    nn = torch.nn
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.MaxPool2d(2), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(1),
        nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def run_torch(args, threads, max_steps=0):
    """One run; returns its epoch records, or with max_steps > 0 the CPU seconds per step after WARM_STEPS."""
    torch.set_num_threads(threads)
    torch.manual_seed(args.seed)
    xs, ys = load(args.data, True)
    xt, yt = load(args.data, False)
    if args.limit > 0:
        xs, ys = xs[:args.limit], ys[:args.limit]
    if args.test_limit > 0:
        xt, yt = xt[:args.test_limit], yt[:args.test_limit]
    lut = ((torch.arange(256, dtype=torch.float64) / 255.0 - MEAN) / STD).float()
    xs_f = lut[xs.long()]  # normalised once, before the clock: the cheapest batches PyTorch can have
    net = make_model()
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4, fused=True)
    batches = xs.shape[0] // args.batch_size
    epochs_to_run = args.epochs if max_steps == 0 else -(-max_steps // max(batches, 1))
    total = batches * epochs_to_run
    warmup = min(200, total // 2)

    def lr_at(step):  # the rate for step `step` (0-based), as optim::WarmupCosineLR
        if step < warmup:
            return args.lr * (step + 1) / (warmup + 1)
        t = (step - warmup) / max(total - warmup, 1)
        return args.lr * 0.5 * (1.0 + math.cos(math.pi * min(t, 1.0)))

    amp = args.precision.startswith("amp-")
    dtype = torch.bfloat16 if args.precision == "amp-bf16" else torch.float16
    scaler = torch.amp.GradScaler("cpu", enabled=amp)
    step = 0
    epochs = []
    cpu0 = None
    for epoch in range(epochs_to_run):
        net.train()
        start = time.perf_counter()
        perm = torch.randperm(xs.shape[0])
        loss_sum = torch.zeros(())
        for b in range(batches):
            if max_steps > 0 and step == WARM_STEPS:
                cpu0 = time.process_time()
            idx = perm[b * args.batch_size:(b + 1) * args.batch_size]
            x = xs_f[idx]
            y = ys[idx]
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=dtype, enabled=amp):
                loss = F.cross_entropy(net(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            loss_sum += loss.detach().float()
            step += 1
            if max_steps > 0 and step == max_steps:
                return (time.process_time() - cpu0) / (max_steps - WARM_STEPS)
        seconds = time.perf_counter() - start
        if max_steps > 0:
            continue
        net.eval()
        correct, test_loss = 0, 0.0
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=amp):
            for b in range(0, xt.shape[0], 1000):
                logits = net(lut[xt[b:b + 1000].long()])
                test_loss += F.cross_entropy(logits.float(), yt[b:b + 1000], reduction="sum").item()
                correct += (logits.argmax(1) == yt[b:b + 1000]).sum().item()
        rec = {"epoch": epoch + 1, "train_loss": loss_sum.item() / batches, "test_loss": test_loss / xt.shape[0],
               "test_accuracy": correct / xt.shape[0], "samples_per_second": batches * args.batch_size / seconds,
               "seconds_per_step": seconds / batches}
        epochs.append(rec)
        print(f"torch epoch {epoch + 1}/{args.epochs}  loss {rec['train_loss']:.4f}  test {100 * rec['test_accuracy']:.2f}% "
              f"(loss {rec['test_loss']:.4f})  {1e3 * rec['seconds_per_step']:.1f} ms/step", flush=True)
    if max_steps > 0:
        sys.exit(f"cnn_fashion_torch.py: --cpu-steps needs {max_steps} steps, the run has {step}")
    return epochs


def hg_command(args, out):
    cmd = [args.hg_train, "--model", "cnn", "--precision", args.precision, "--epochs", str(args.epochs),
           "--batch-size", str(args.batch_size), "--lr", str(args.lr), "--seed", str(args.seed), "--data", args.data,
           "--out", out, "--device", "cpu"]
    if args.limit > 0:
        cmd += ["--limit", str(args.limit)]
    if args.test_limit > 0:
        cmd += ["--test-limit", str(args.test_limit)]
    return cmd


def run_hg(args):
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, HG_NUM_THREADS=str(args.threads))
        subprocess.run(hg_command(args, out), check=True, env=env, stdout=subprocess.DEVNULL)
        recs = []
        with open(os.path.join(out, "metrics.jsonl")) as f:
            for line in f:
                j = json.loads(line)
                if j.get("type", "epoch") == "epoch":
                    j["seconds_per_step"] = args.batch_size / j["samples_per_second"]
                    recs.append(j)
    for r in recs:
        print(f"hg    epoch {r['epoch']}/{args.epochs}  loss {r['train_loss']:.4f}  test {100 * r['test_accuracy']:.2f}% "
              f"(loss {r['test_loss']:.4f})  {1e3 * r['seconds_per_step']:.1f} ms/step", flush=True)
    return recs


def child_cpu_seconds(cmd, env):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def hg_cpu_per_step(args):
    """hg-train's process CPU seconds per step, one thread: (CPU(10 + N steps) - CPU(10 steps)) / N."""
    env = dict(os.environ, HG_NUM_THREADS="1", OMP_NUM_THREADS="1")
    batches = (args.limit if args.limit > 0 else 60000) // args.batch_size
    # enough epochs for the steps (both runs stop at --max-steps, before any evaluation)
    long_args = argparse.Namespace(**dict(vars(args), epochs=-(-(WARM_STEPS + args.cpu_steps) // batches) + 1))
    cpu = []
    for steps in (WARM_STEPS, WARM_STEPS + args.cpu_steps):
        with tempfile.TemporaryDirectory() as out:
            cpu.append(child_cpu_seconds(hg_command(long_args, out) + ["--max-steps", str(steps)], env))
    return (cpu[1] - cpu[0]) / args.cpu_steps


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="fp32", choices=["fp32", "amp-fp16", "amp-bf16"])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--limit", type=int, default=0, help="the first N training images (0 = all)")
    p.add_argument("--test-limit", type=int, default=0, help="the first N test images (0 = all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data", default=ROOT)
    p.add_argument("--hg-train", help="also run this hg-train, alternating with PyTorch")
    p.add_argument("--rounds", type=int, default=1, help="A/B rounds with --hg-train")
    p.add_argument("--cpu-steps", type=int, default=0,
                   help="with --hg-train: also process CPU time per step, one thread each side, over N steps")
    p.add_argument("--cpu-only", action="store_true", help="with --cpu-steps: only the CPU time per step")
    p.add_argument("--json", help="append one JSON line with the results")
    args = p.parse_args()
    if args.hg_train is None:
        result = {"torch": run_torch(args, args.threads)}
    else:
        hg, th = [], []
        for _ in range(0 if args.cpu_only else args.rounds):
            hg.append(run_hg(args))
            th.append(run_torch(args, args.threads))
        result = {"model": "cnn", "precision": args.precision, "limit": args.limit, "hg_train": args.hg_train}
    if args.hg_train is not None and hg:
        hg_step = statistics.median(r["seconds_per_step"] for run in hg for r in run)
        th_step = statistics.median(r["seconds_per_step"] for run in th for r in run)
        result.update({"epochs": args.epochs, "rounds": args.rounds, "halfgrad_ms_per_step": 1e3 * hg_step,
                       "torch_ms_per_step": 1e3 * th_step, "ratio": th_step / hg_step,
                       "halfgrad_test_accuracy": [run[-1]["test_accuracy"] for run in hg],
                       "torch_test_accuracy": [run[-1]["test_accuracy"] for run in th],
                       "halfgrad_test_loss": [run[-1]["test_loss"] for run in hg],
                       "torch_test_loss": [run[-1]["test_loss"] for run in th],
                       "torch_version": torch.__version__, "threads": args.threads,
                       "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")})
        print(f"cnn {args.precision}: halfgrad {1e3 * hg_step:.1f} ms/step, PyTorch {1e3 * th_step:.1f} ms/step "
              f"(median over {args.rounds} round(s) x {args.epochs} epochs, {args.threads} threads): "
              f"{th_step / hg_step:.2f}x; final test accuracy halfgrad "
              f"{[f'{100 * a:.2f}%' for a in result['halfgrad_test_accuracy']]}, "
              f"PyTorch {[f'{100 * a:.2f}%' for a in result['torch_test_accuracy']]}", flush=True)
    if args.hg_train is not None and args.cpu_steps > 0:
        hc, tc = [], []
        for _ in range(args.rounds):
            hc.append(hg_cpu_per_step(args))
            tc.append(run_torch(args, 1, WARM_STEPS + args.cpu_steps))
        result.update({"cpu_steps": args.cpu_steps, "halfgrad_cpu_ms_per_step": 1e3 * statistics.median(hc),
                       "torch_cpu_ms_per_step": 1e3 * statistics.median(tc),
                       "cpu_ratio": statistics.median(tc) / statistics.median(hc)})
        print(f"cnn {args.precision}, one thread, process CPU time per step (median of {args.rounds}): halfgrad "
              f"{result['halfgrad_cpu_ms_per_step']:.1f} ms, PyTorch {result['torch_cpu_ms_per_step']:.1f} ms: "
              f"{result['cpu_ratio']:.2f}x (halfgrad {[f'{1e3 * c:.1f}' for c in hc]}, "
              f"PyTorch {[f'{1e3 * c:.1f}' for c in tc]})", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
