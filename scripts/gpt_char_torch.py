#!/usr/bin/env python3
"""hg-train --model gpt's recipe in PyTorch, for the validation-loss comparison
in docs/gpt.md (the same model, data, batch and iterations).

What is the same as hg-train --model gpt (examples/train_gpt.cpp):
  * the corpus: every regular file of the folder (not recursive; symbolic links
    and strfile's *.dat skipped) in name order, concatenated; the vocabulary is
    the sorted set of distinct bytes; the first round(0.9 n) tokens train;
  * the model: nanoGPT's GPT (pre-LN blocks, causal attention through
    scaled_dot_product_attention, GELU (erf) MLP, tied lm_head, biases), GPT-2
    init (N(0, 0.02), residual projections N(0, 0.02 / sqrt(2 n_layer)));
  * AdamW with nanoGPT's two groups (weight decay on rank >= 2), betas
    (0.9, 0.99), eps 1e-8; the gradient norm clipped to 1; lr warmup (k+1)/(W+1)
    for k < W, then cosine to a tenth of the peak at the last iteration;
  * batches of random windows (batch 12, block 64); the validation loss over the
    same fixed windows as hg-train: eval_batches x batch windows at starts
    i * (n - block - 1) / (count - 1) of the validation split.
What differs: the random streams (init and batch positions come from torch's
generator, not halfgrad's), so the two runs agree in distribution, not bit for bit.

  /path/to/venv/bin/python scripts/gpt_char_torch.py [--iters 2000] [--precision fp32|amp-bf16] [--json FILE]
  /path/to/venv/bin/python scripts/gpt_char_torch.py --hg-train build/cpu/examples/hg-train \\
      --precision fp32 --iters 300 --eval-every 100 --rounds 2 [--cpu-steps 40]

Prints the validation loss at every evaluation and the final one, and the
training tokens/s (2 threads unless --threads). AdamW is fused=True where this
torch has it (PyTorch's fastest CPU AdamW; the same arithmetic).

With --hg-train it runs hg-train --model gpt with the same options and this
script's own loop alternately (--rounds times each, A/B/A/B) and prints each
side's median wall time per training step (the evaluations not timed), their
ratio (PyTorch time / halfgrad time, > 1: halfgrad faster) and each side's
final validation loss. --cpu-steps N adds a process CPU time per step with one
thread on each side, which a loaded machine moves far less than wall time:
hg-train (HG_NUM_THREADS=1) runs --max-steps 10 and --max-steps 10+N (the
difference of the two runs' CPU time over N: start-up, the corpus and the
checkpoint cancel out), PyTorch (torch.set_num_threads(1)) its CPU time over
steps 11..10+N; --rounds times each, alternated, the medians printed.
--cpu-only skips the wall-time runs (only the CPU time per step).
"""
import argparse
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


def read_corpus(path):
    if os.path.isfile(path):
        with open(path, "rb") as f:
            return f.read()
    names = sorted(os.listdir(path))
    text = b""
    for name in names:
        p = os.path.join(path, name)
        if os.path.islink(p) or not os.path.isfile(p) or name.endswith(".dat"):
            continue
        with open(p, "rb") as f:
            text += f.read()
    return text


class Attention(torch.nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = torch.nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = torch.nn.Linear(n_embd, n_embd)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(torch.nn.Module):
    def __init__(self, n_embd, n_head):
        super().__init__()
        self.ln_1 = torch.nn.LayerNorm(n_embd)
        self.attn = Attention(n_embd, n_head)
        self.ln_2 = torch.nn.LayerNorm(n_embd)
        self.c_fc = torch.nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = torch.nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class Gpt(torch.nn.Module):
    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        self.wte = torch.nn.Embedding(vocab, n_embd)
        self.wpe = torch.nn.Embedding(block, n_embd)
        self.h = torch.nn.ModuleList([Block(n_embd, n_head) for _ in range(n_layer)])
        self.ln_f = torch.nn.LayerNorm(n_embd)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0.0, 0.02 / math.sqrt(2 * n_layer))
                elif p.dim() >= 2:
                    p.normal_(0.0, 0.02)
                elif name.endswith(".bias"):
                    p.zero_()

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.t()


def lr_factor(k, warmup, total, min_ratio=0.1):
    if k < warmup:
        return (k + 1) / (warmup + 1)
    if k >= total:
        return min_ratio
    progress = (k - warmup) / (total - warmup)
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


WARM_STEPS = 10  # --cpu-steps: steps before the CPU clock starts, on both sides


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="/usr/share/games/fortunes")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--eval-every", type=int, default=250)
    ap.add_argument("--eval-batches", type=int, default=20)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup-steps", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--clip-grad", type=float, default=1.0)
    ap.add_argument("--precision", choices=["fp32", "amp-bf16"], default="fp32")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="append one JSON line with the results to this file")
    ap.add_argument("--hg-train", help="also run this hg-train --model gpt, alternating with PyTorch")
    ap.add_argument("--rounds", type=int, default=1, help="A/B rounds with --hg-train")
    ap.add_argument("--cpu-steps", type=int, default=0,
                    help="with --hg-train: also process CPU time per step, one thread each side, over N steps")
    ap.add_argument("--cpu-only", action="store_true", help="with --cpu-steps: only the CPU time per step")
    return ap.parse_args()


def run_torch(a, threads, max_steps=0):
    """One run; returns its result, or with max_steps > 0 the CPU seconds per step after WARM_STEPS."""
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    text = read_corpus(a.data)
    vocab = sorted(set(text))
    index = {b: i for i, b in enumerate(vocab)}
    tokens = torch.tensor([index[b] for b in text], dtype=torch.int64)
    cut = round(0.9 * len(tokens))
    train, val = tokens[:cut], tokens[cut:]

    count, block = a.eval_batches * a.batch_size, a.block_size
    last = len(val) - block - 1
    starts = [0 if count == 1 else i * last // (count - 1) for i in range(count)]
    vx = torch.stack([val[s:s + block] for s in starts])
    vy = torch.stack([val[s + 1:s + block + 1] for s in starts])

    model = Gpt(len(vocab), block, a.n_layer, a.n_head, a.n_embd)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.99), eps=1e-8, fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(groups, lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
    warmup = min(a.warmup_steps, a.iters // 2)
    amp = a.precision == "amp-bf16"

    def evaluate():
        model.eval()
        loss_sum, n = 0.0, 0
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            for s in range(0, count, a.batch_size):
                logits = model(vx[s:s + a.batch_size])
                y = vy[s:s + a.batch_size].reshape(-1)
                loss_sum += F.cross_entropy(logits.float().view(-1, len(vocab)), y).item() * y.numel()
                n += y.numel()
        model.train()
        return loss_sum / n

    train_seconds, val_losses = 0.0, []
    if max_steps == 0:
        print(f"torch {torch.__version__}, {threads} threads, {a.precision}: {len(text)} bytes, vocabulary "
              f"{len(vocab)}, {len(train)} train / {len(val)} validation tokens, "
              f"{sum(p.numel() for p in model.parameters())} parameters")
    cpu0 = None
    for k in range(a.iters):
        if max_steps > 0 and k == WARM_STEPS:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        for g in opt.param_groups:
            g["lr"] = a.lr * lr_factor(k, warmup, a.iters)
        pos = torch.randint(0, len(train) - block, (a.batch_size,))
        x = torch.stack([train[p:p + block] for p in pos.tolist()])
        y = torch.stack([train[p + 1:p + block + 1] for p in pos.tolist()])
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = model(x)
            loss = F.cross_entropy(logits.float().view(-1, len(vocab)), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip_grad > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip_grad)
        opt.step()
        train_seconds += time.perf_counter() - t0
        step = k + 1
        if max_steps > 0:
            if step == max_steps:
                return (time.process_time() - cpu0) / (max_steps - WARM_STEPS)
            continue
        if step % a.eval_every == 0 or step == a.iters:
            v = evaluate()
            val_losses.append((step, v))
            print(f"step {step}/{a.iters}: train loss {loss.item():.4f}  val loss {v:.4f}  "
                  f"{step * a.batch_size * block / train_seconds:.0f} tokens/s", flush=True)
    if max_steps > 0:
        sys.exit(f"gpt_char_torch.py: --cpu-steps needs --iters >= {max_steps}")
    result = {"framework": "torch", "version": torch.__version__, "precision": a.precision, "iters": a.iters,
              "seed": a.seed, "val_loss": val_losses[-1][1], "val_losses": val_losses,
              "tokens_per_second": a.iters * a.batch_size * block / train_seconds, "threads": threads,
              "seconds_per_step": train_seconds / a.iters}
    print(f"final validation loss {result['val_loss']:.4f}; {result['tokens_per_second']:.0f} tokens/s (training only), "
          f"{1e3 * result['seconds_per_step']:.1f} ms/step", flush=True)
    return result


def hg_command(a, out, **override):
    cmd = [a.hg_train, "--model", "gpt", "--device", "cpu", "--data", a.data, "--out", out, "--precision", a.precision,
           "--sample-tokens", "0"]
    for name in ("iters", "eval_every", "eval_batches", "batch_size", "block_size", "n_layer", "n_head", "n_embd",
                 "lr", "warmup_steps", "weight_decay", "clip_grad", "seed"):
        cmd += ["--" + name.replace("_", "-"), str(override.get(name, getattr(a, name)))]
    return cmd


def run_hg(a):
    """hg-train --model gpt with the same options; its eval records give the losses and the training time."""
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, HG_NUM_THREADS=str(a.threads))
        subprocess.run(hg_command(a, out), check=True, env=env, stdout=subprocess.DEVNULL)
        evals = []
        with open(os.path.join(out, "metrics.jsonl")) as f:
            for line in f:
                j = json.loads(line)
                if j.get("type") == "eval":
                    evals.append(j)
    seconds = sum(e["seconds"] for e in evals)  # each interval's training time, its evaluation left out
    for e in evals:
        print(f"hg    step {e['step']}/{a.iters}: train loss {e['train_loss']:.4f}  val loss {e['val_loss']:.4f}  "
              f"{e['tokens_per_second']:.0f} tokens/s", flush=True)
    result = {"framework": "halfgrad", "val_loss": evals[-1]["val_loss"],
              "val_losses": [(e["step"], e["val_loss"]) for e in evals], "seconds_per_step": seconds / a.iters}
    print(f"hg    final validation loss {result['val_loss']:.4f}; {1e3 * result['seconds_per_step']:.1f} ms/step",
          flush=True)
    return result


def hg_cpu_per_step(a):
    """hg-train's process CPU seconds per step, one thread: (CPU(10 + N steps) - CPU(10 steps)) / N."""
    env = dict(os.environ, HG_NUM_THREADS="1", OMP_NUM_THREADS="1")
    cpu = []
    for steps in (WARM_STEPS, WARM_STEPS + a.cpu_steps):
        with tempfile.TemporaryDirectory() as out:
            # --eval-every past the last step: no evaluation in either run
            cmd = hg_command(a, out, eval_every=a.iters) + ["--max-steps", str(steps)]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime))
    return (cpu[1] - cpu[0]) / a.cpu_steps


def main():
    a = parse_args()
    if a.hg_train is None:
        result = run_torch(a, a.threads)
    else:
        if a.cpu_steps > 0 and a.iters <= WARM_STEPS + a.cpu_steps:
            sys.exit(f"gpt_char_torch.py: --cpu-steps {a.cpu_steps} needs --iters > {WARM_STEPS + a.cpu_steps}")
        hg, th = [], []
        for _ in range(0 if a.cpu_only else a.rounds):
            hg.append(run_hg(a))
            th.append(run_torch(a, a.threads))
        result = {"model": "gpt", "precision": a.precision, "hg_train": a.hg_train}
    if a.hg_train is not None and hg:
        hg_step = statistics.median(r["seconds_per_step"] for r in hg)
        th_step = statistics.median(r["seconds_per_step"] for r in th)
        result.update({"iters": a.iters, "rounds": a.rounds,
                       "halfgrad_ms_per_step": 1e3 * hg_step, "torch_ms_per_step": 1e3 * th_step,
                       "ratio": th_step / hg_step, "halfgrad_val_loss": [r["val_loss"] for r in hg],
                       "torch_val_loss": [r["val_loss"] for r in th], "torch_version": torch.__version__,
                       "threads": a.threads, "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "")})
        print(f"gpt {a.precision}: halfgrad {1e3 * hg_step:.1f} ms/step, PyTorch {1e3 * th_step:.1f} ms/step (median "
              f"over {a.rounds} round(s), {a.threads} threads): {th_step / hg_step:.2f}x; final validation loss "
              f"halfgrad {[f'{v:.4f}' for v in result['halfgrad_val_loss']]}, "
              f"PyTorch {[f'{v:.4f}' for v in result['torch_val_loss']]}", flush=True)
    if a.hg_train is not None and a.cpu_steps > 0:
        hc, tc = [], []
        for _ in range(a.rounds):
            hc.append(hg_cpu_per_step(a))
            tc.append(run_torch(a, 1, WARM_STEPS + a.cpu_steps))
        result.update({"cpu_steps": a.cpu_steps, "halfgrad_cpu_ms_per_step": 1e3 * statistics.median(hc),
                       "torch_cpu_ms_per_step": 1e3 * statistics.median(tc),
                       "cpu_ratio": statistics.median(tc) / statistics.median(hc)})
        print(f"gpt {a.precision}, one thread, process CPU time per step (median of {a.rounds}): halfgrad "
              f"{result['halfgrad_cpu_ms_per_step']:.1f} ms, PyTorch {result['torch_cpu_ms_per_step']:.1f} ms: "
              f"{result['cpu_ratio']:.2f}x (halfgrad {[f'{1e3 * c:.1f}' for c in hc]}, "
              f"PyTorch {[f'{1e3 * c:.1f}' for c in tc]})", flush=True)
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
