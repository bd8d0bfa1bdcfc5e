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

Prints the validation loss at every evaluation and the final one, and the
training tokens/s (2 threads unless --threads).
"""
import argparse
import json
import math
import os
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


def main():
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
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
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
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.99), eps=1e-8)
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
    print(f"torch {torch.__version__}, {a.threads} threads, {a.precision}: {len(text)} bytes, vocabulary {len(vocab)}, "
          f"{len(train)} train / {len(val)} validation tokens, {sum(p.numel() for p in model.parameters())} parameters")
    for k in range(a.iters):
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
        if step % a.eval_every == 0 or step == a.iters:
            v = evaluate()
            val_losses.append((step, v))
            print(f"step {step}/{a.iters}: train loss {loss.item():.4f}  val loss {v:.4f}  "
                  f"{step * a.batch_size * block / train_seconds:.0f} tokens/s", flush=True)
    result = {"framework": "torch", "version": torch.__version__, "precision": a.precision, "iters": a.iters,
              "seed": a.seed, "val_loss": val_losses[-1][1], "val_losses": val_losses,
              "tokens_per_second": a.iters * a.batch_size * block / train_seconds, "threads": a.threads}
    print(f"final validation loss {result['val_loss']:.4f}; {result['tokens_per_second']:.0f} tokens/s (training only)")
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
