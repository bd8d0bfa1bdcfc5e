#!/usr/bin/env python3
"""hg-train's default job (the Fashion-MNIST MLP) in PyTorch, for the speed and
accuracy comparison in docs/bench/history.md ("CPU backend notes (issue 11)").

What is the same as hg-train --model mlp (examples/hg_train.cpp):
  * the data: Debian's dataset-fashion-mnist IDX files; pixels (v / 255 - 0.2860)
    / 0.3530 (here normalised once before the clock starts, halfgrad's loader
    normalises each batch); a shuffled pass per epoch with the last partial
    batch dropped; the test set in batches of 1000;
  * the model: Linear 784-256, ReLU, Linear 256-128, ReLU, Linear 128-10
    (PyTorch's default init, which is also halfgrad's);
  * AdamW (lr 2e-3, betas (0.9, 0.999), eps 1e-8, weight decay 1e-4); a linear
    warmup of 200 steps then cosine decay to 0 at the last step, stepped once a
    batch; cross-entropy;
  * --precision: fp32; amp-fp16 / amp-bf16 = fp32 weights, torch.autocast in that
    dtype and a GradScaler (torch.amp), as hg-train does (a bf16 GradScaler never
    finds an overflow, so it costs time and changes nothing);
  * the timing: samples/s of each epoch is the training samples of the epoch over
    the wall time of its training loop (data, forward, backward, step), as
    hg-train's "samples/s" (the evaluation is not timed).
What differs: the random streams (init and shuffling are torch's), so the runs
agree in distribution, not bit for bit.

  /path/to/venv/bin/python scripts/mlp_fashion_torch.py [--precision fp32] [--epochs 8] [--json FILE]
  /path/to/venv/bin/python scripts/mlp_fashion_torch.py --hg-train build/cpu/examples/hg-train \\
      --precision fp32 --rounds 2

With --hg-train it runs hg-train with the same options and this script's own
loop alternately (--rounds times each, A/B/A/B) and prints each side's median
samples/s over its epochs and rounds, their ratio (halfgrad / PyTorch) and
each side's final test accuracy. 2 threads unless --threads.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530


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
        for name in (f"{stem}-{kind}-idx{3 if kind == 'images' else 1}-ubyte", ):
            for ext in ("", ".gz"):
                if os.path.exists(os.path.join(root, name + ext)):
                    return os.path.join(root, name + ext)
        sys.exit(f"mlp_fashion_torch.py: no {stem} {kind} in {root}; apt-get install dataset-fashion-mnist")
    x = read_idx(find("images")).reshape(-1, 784)
    y = read_idx(find("labels")).long()
    return x, y


def run_torch(args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    xs, ys = load(args.data, True)
    xt, yt = load(args.data, False)
    lut = ((torch.arange(256, dtype=torch.float64) / 255.0 - MEAN) / STD).float()
    xs_f = lut[xs.long()]  # normalised once, before the clock: the cheapest batches PyTorch can have
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 128),
                              torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.AdamW(net.parameters(), lr=args.lr, weight_decay=1e-4, fused=True)
    batches = xs.shape[0] // args.batch_size
    total = batches * args.epochs
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
    for epoch in range(args.epochs):
        net.train()
        start = time.perf_counter()
        perm = torch.randperm(xs.shape[0])
        loss_sum = torch.zeros(())
        for b in range(batches):
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
        seconds = time.perf_counter() - start
        net.eval()
        correct = 0
        with torch.no_grad(), torch.autocast("cpu", dtype=dtype, enabled=amp):
            for b in range(0, xt.shape[0], 1000):
                correct += (net(lut[xt[b:b + 1000].long()]).argmax(1) == yt[b:b + 1000]).sum().item()
        rec = {"epoch": epoch + 1, "train_loss": loss_sum.item() / batches,
               "test_accuracy": correct / xt.shape[0], "samples_per_second": batches * args.batch_size / seconds}
        epochs.append(rec)
        print(f"torch epoch {epoch + 1}/{args.epochs}  loss {rec['train_loss']:.4f}  "
              f"test {100 * rec['test_accuracy']:.2f}%  {rec['samples_per_second']:,.0f} samples/s", flush=True)
    return epochs


def run_hg(args):
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.hg_train, "--precision", args.precision, "--epochs", str(args.epochs), "--batch-size",
               str(args.batch_size), "--lr", str(args.lr), "--seed", str(args.seed), "--data", args.data,
               "--out", out, "--device", "cpu"]
        env = dict(os.environ, HG_NUM_THREADS=str(args.threads))
        subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
        recs = []
        with open(os.path.join(out, "metrics.jsonl")) as f:
            for line in f:
                j = json.loads(line)
                if j.get("type", "epoch") == "epoch":
                    recs.append(j)
    for r in recs:
        print(f"hg    epoch {r['epoch']}/{args.epochs}  loss {r['train_loss']:.4f}  "
              f"test {100 * r['test_accuracy']:.2f}%  {r['samples_per_second']:,.0f} samples/s", flush=True)
    return recs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--precision", default="amp-fp16", choices=["fp32", "amp-fp16", "amp-bf16"])
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--data", default=ROOT)
    p.add_argument("--hg-train", help="also run this hg-train, alternating with PyTorch")
    p.add_argument("--rounds", type=int, default=1, help="A/B rounds with --hg-train")
    p.add_argument("--json", help="append one JSON line with the results")
    args = p.parse_args()
    if args.hg_train is None:
        result = {"torch": run_torch(args)}
    else:
        hg, th = [], []
        for _ in range(args.rounds):
            hg.append(run_hg(args))
            th.append(run_torch(args))
        hg_rate = statistics.median(r["samples_per_second"] for run in hg for r in run)
        th_rate = statistics.median(r["samples_per_second"] for run in th for r in run)
        result = {"precision": args.precision, "epochs": args.epochs, "rounds": args.rounds,
                  "halfgrad_samples_per_s": hg_rate, "torch_samples_per_s": th_rate, "ratio": hg_rate / th_rate,
                  "halfgrad_test_accuracy": [run[-1]["test_accuracy"] for run in hg],
                  "torch_test_accuracy": [run[-1]["test_accuracy"] for run in th],
                  "torch_version": torch.__version__, "threads": args.threads,
                  "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")}
        print(f"{args.precision}: halfgrad {hg_rate:,.0f} samples/s, PyTorch {th_rate:,.0f} samples/s "
              f"(median over {args.rounds} round(s) x {args.epochs} epochs): {hg_rate / th_rate:.2f}x; "
              f"final test accuracy halfgrad {[f'{100 * a:.2f}%' for a in result['halfgrad_test_accuracy']]}, "
              f"PyTorch {[f'{100 * a:.2f}%' for a in result['torch_test_accuracy']]}")
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
