#!/usr/bin/env python3
"""halfgrad against PyTorch on the same workloads, in the same invocation.

    benchmarks/compare_torch.py --hg-bench build/cpu/benchmarks/hg-bench [suite...] [--quick]

For every timed workload hg-bench lists (`hg-bench --list`), this script runs
halfgrad (`hg-bench --only NAME`, a subprocess) and the same shapes and dtypes
in PyTorch, alternating A/B/A/B (--rounds, default 2; with --quick one round,
three where a round takes under a second) so that machine noise hits both;
each side's figure is the median over its rounds of the median of
>= 20 timed runs after a warm-up, timed the same way (CUDA events on a GPU,
a monotonic clock on the CPU). The ratio printed is

    speed ratio = PyTorch time / halfgrad time     (> 1: halfgrad is faster)

For the accuracy suite, the same error measures (max ulps of the output dtype,
share of correctly rounded outputs against an f64 reference) are computed for
PyTorch's kernels on halfgrad's very inputs (normal and hard sets), which
hg-bench writes with --accuracy-inputs: a maximum over rare cancellations
(a matmul output near zero) depends on the values, so only the same values
compare the kernels.

PyTorch counterparts: 16-bit "+f32-masters" training in halfgrad is compared
with PyTorch's standard mixed precision (fp32 weights, torch.autocast in that
dtype, GradScaler for f16); AdamW uses fused=True where PyTorch supports it.
Not done yet: CUDA graphs and torch.compile variants on a GPU.

Exit status: 0 with ratios; 3 when torch cannot be imported (says so).
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:  # said clearly, as the issue asks
    torch = None

MLP_NOTE = "PyTorch: fp32 weights + autocast"


def rounds_text(args):
    if args.adaptive_rounds:
        return f"1 A/B round (3 where the first took under {args.cheap_round_s:g} s)"
    return f"{args.rounds} A/B round{'s' if args.rounds != 1 else ''}"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("suites", nargs="*", help="hg-bench suites (default: all)")
    p.add_argument("--hg-bench", required=True, help="path of the hg-bench binary")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--rounds", type=int, default=None,
                   help="A/B rounds per workload (default 2: A/B/A/B; with --quick 1, or 3 where the first "
                        "round took under --cheap-round-s)")
    p.add_argument("--cheap-round-s", type=float, default=1.0,
                   help="with --quick and no --rounds: a workload whose first A/B round (both processes, "
                        "warm-ups included) took less than this many seconds gets two more rounds, so that a "
                        "noisy second hits one side of one round, not the row (default 1)")
    p.add_argument("--max-call-s", type=float, default=None,
                   help="a PyTorch workload whose first (warm-up) call takes longer than this is not timed "
                        "20 times: its one call is reported, marked '~', outside the geometric mean "
                        "(default: 2 s with --quick, no limit otherwise)")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--warmup", type=int, default=None,
                   help="untimed warm-up calls per workload and side (default 3; 1 with --quick, as hg-bench)")
    p.add_argument("--device", default="auto", help="cpu | cuda | auto")
    p.add_argument("--json", help="append one JSON line per comparison to this file")
    p.add_argument("--hg-json", help="also keep halfgrad's own results: run hg-bench's ceilings suite first, pass "
                                     "its ceilings to every `--only` run (so fractions are reported), append "
                                     "halfgrad's JSON line of each workload (the first A run) to this file and print "
                                     "halfgrad's table at the end. ./run bench uses it so that halfgrad's work is "
                                     "done once, not once for the table and again for the ratios")
    p.add_argument("--only", action="append", default=[], help="only these workload names")
    p.add_argument("--set", help="only hg-bench's named set of workloads (hg-bench --set; gpu-check)")
    p.add_argument("--suite", "-s", action="append", default=[], help="same as the positional names")
    args, unknown = p.parse_known_args()
    if unknown:
        print(f"compare_torch.py: ignoring hg-bench options it does not use: {' '.join(unknown)}", file=sys.stderr)
    args.suites = args.suites + args.suite
    if args.warmup is None:
        args.warmup = 1 if args.quick else 3
    args.adaptive_rounds = args.rounds is None and args.quick
    if args.rounds is None:
        args.rounds = 1 if args.quick else 2
    if args.max_call_s is None and args.quick:
        args.max_call_s = 2.0
    return args


# ---- timing --------------------------------------------------------------------------

def time_fn(fn, dev, runs, warmup, before=None):
    for _ in range(warmup):
        if before:
            before()
        fn()
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t = []
    for _ in range(runs):
        if before:
            before()
        if dev.type == "cuda":
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            t.append(s.elapsed_time(e) * 1e-3)
        else:
            t0 = time.perf_counter()
            fn()
            t.append(time.perf_counter() - t0)
    return statistics.median(t), min(t), max(t)


DT = {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "f64": "float64"}


def dtype(name):
    return getattr(torch, DT[name])


def l2_flush(dev):
    if dev.type != "cuda":
        return None
    buf = torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.uint8, device=dev)
    return buf.zero_


def gpt_step(p, dev):
    """hg-bench's train-gpt step: nanoGPT's model (nn/models/gpt.h maps it), AdamW with its two groups.

    The vocabulary is padded as the workload says (padded_vocab_size: 50304 for GPT-2 by default, as in
    nanoGPT; equal to vocab_size for the unpadded row), so both sides run the same GEMM shapes. As in nanoGPT
    the loss here is the cross-entropy over all padded columns; halfgrad's leaves the padding columns out of the
    softmax (the same work to within 0.1%), which only changes what the padding rows learn.
    """
    nn, F = torch.nn, torch.nn.functional
    L, H, C, block, vocab = p["n_layer"], p["n_head"], p["n_embd"], p["block_size"], p["vocab_size"]
    padded = p.get("padded_vocab_size", vocab)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(b, t, H, C // H).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, C)
            x = x + self.attn_proj(y)
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(padded, C), nn.Embedding(block, C)
            self.h = nn.ModuleList([Block() for _ in range(L)])
            self.ln_f = nn.LayerNorm(C)

        def forward(self, idx, targets):
            x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
            for blk in self.h:
                x = blk(x)
            logits = self.ln_f(x) @ self.wte.weight.t()
            return F.cross_entropy(logits.view(-1, padded), targets.view(-1))

    model = Gpt().to(dev)
    groups = [{"params": [q for q in model.parameters() if q.dim() >= 2], "weight_decay": 0.1},
              {"params": [q for q in model.parameters() if q.dim() < 2], "weight_decay": 0.0}]
    try:
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), fused=True)
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95))
    idx = torch.randint(0, vocab, (p["batch"], p["tokens"] + 1), device=dev)
    x, y = idx[:, :-1].contiguous(), idx[:, 1:].contiguous()
    dt = dtype(p["dtype"])
    scaler = torch.amp.GradScaler(dev.type, enabled=(dt == torch.float16))

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(dev.type, dtype=dt if dt != torch.float32 else torch.bfloat16,
                            enabled=(dt != torch.float32)):
            loss = model(x, y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    note = "eager fp32" if dt == torch.float32 else f"eager, fp32 weights + autocast({p['dtype']})"
    return step, None, 1, note + ("; GradScaler" if dt == torch.float16 else "") + "; F.scaled_dot_product_attention"


def attention_variants(p, dev):
    """hg-bench's attention workload: F.scaled_dot_product_attention on [B, H, T, D] contiguous q, k, v, the
    forward alone or the forward and torch.autograd.grad of q, k, v (the backward). On a GPU one variant per
    backend PyTorch can run at this shape (flash, cuDNN); on the CPU PyTorch's default choice."""
    F = torch.nn.functional
    dt = dtype(p["dtype"])
    shape = (p["b"], p["h"], p["t"], p["d"])
    g = torch.Generator(device="cpu").manual_seed(1)
    q, k, v, d_out = (torch.randn(*shape, generator=g).to(device=dev, dtype=dt) for _ in range(4))
    backward = p["backward"]
    if backward:
        for x in (q, k, v):
            x.requires_grad_(True)

    def run():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=p["causal"])
        if backward:
            torch.autograd.grad(out, (q, k, v), d_out)
    what = "F.scaled_dot_product_attention" + (" + autograd.grad(q, k, v)" if backward else "")
    if dev.type != "cuda":
        return [(run, None, 1, what + "; default CPU backend")]
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return [(run, None, 1, what + "; default backend (no torch.nn.attention in this PyTorch)")]
    variants = []
    for label in ("FLASH_ATTENTION", "CUDNN_ATTENTION"):
        backend = getattr(SDPBackend, label, None)
        if backend is None:
            continue

        def pinned(backend=backend):
            with sdpa_kernel(backend):
                run()
        try:  # a backend that cannot run this shape/dtype raises "No available kernel"
            pinned()
        except RuntimeError as e:
            print(f"compare_torch.py: {label} cannot run {shape} {p['dtype']}: {str(e).splitlines()[0]}",
                  file=sys.stderr)
            continue
        variants.append((pinned, None, 1, f"{what}; SDPBackend.{label}"))
    return variants or None


def torch_workload(p, dev):
    """(fn, before, inner, note) running workload params p in PyTorch; None if there is no counterpart."""
    k = p["kind"]
    flush = l2_flush(dev)
    if k == "copy":
        src = torch.ones(p["bytes"], dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        return (lambda: dst.copy_(src)), flush, 1, ""
    if k == "gemm":
        dt = dtype(p["dtype"])
        a = torch.randn(p["m"], p["k"], device=dev).to(dt)
        if p["trans_b"]:
            w = torch.randn(p["n"], p["k"], device=dev).to(dt)
            return (lambda: torch.matmul(a, w.t())), None, 1, ""
        w = torch.randn(p["k"], p["n"], device=dev).to(dt)
        return (lambda: torch.matmul(a, w)), None, 1, ""
    if k == "gemm_fp8":
        # torch._scaled_mm: fp8 E4M3 x E4M3 with f32 tensor scales, bf16 out; it wants the
        # second operand column-major (w.t() of a row-major [N, K]), as cuBLASLt's TN layout.
        if dev.type != "cuda" or not hasattr(torch, "_scaled_mm") or torch.cuda.get_device_capability(dev) < (8, 9):
            return None
        a = torch.randn(p["m"], p["k"], device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(p["n"], p["k"], device=dev).to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev, dtype=torch.float32)
        return (lambda: torch._scaled_mm(a, w.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)), None, 1, \
            "torch._scaled_mm"
    if k == "tiny_op":
        x = torch.ones(1, device=dev)
        y = torch.ones(1, device=dev)
        return (lambda: torch.add(x, y)), None, 1000, ""
    if k == "cast":
        x = torch.randn(p["n"], device=dev).to(dtype(p["from"]))
        to = dtype(p["to"])
        return (lambda: x.to(to)), flush, 1, ""
    if k in ("add", "gelu", "sum_all"):
        x = torch.randn(p["n"], device=dev).to(dtype(p["dtype"]))
        y = torch.randn(p["n"], device=dev).to(dtype(p["dtype"]))
        f = {"add": lambda: torch.add(x, y), "gelu": lambda: torch.nn.functional.gelu(x),
             "sum_all": lambda: torch.sum(x)}[k]
        return f, flush, 1, ""
    if k in ("softmax", "log_softmax", "sum_rows", "cross_entropy"):
        x = torch.randn(p["rows"], p["cols"], device=dev).to(dtype(p["dtype"]))
        if k == "cross_entropy":
            t = torch.arange(p["rows"], device=dev)
            return (lambda: torch.nn.functional.cross_entropy(x, t)), flush, 1, ""
        f = {"softmax": lambda: torch.softmax(x, -1), "log_softmax": lambda: torch.log_softmax(x, -1),
             "sum_rows": lambda: torch.sum(x, -1)}[k]
        return f, flush, 1, ""
    if k in ("layer_norm", "layer_norm_backward"):
        dt = dtype(p["dtype"])
        c = p["cols"]
        x = torch.randn(p["rows"], c, device=dev).to(dt)
        w = torch.randn(c, device=dev).to(dt)
        b = torch.randn(c, device=dev).to(dt)
        if k == "layer_norm":
            return (lambda: torch.nn.functional.layer_norm(x, [c], w, b, 1e-5)), flush, 1, ""
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, [c], w, b, 1e-5)
        dy = torch.randn(p["rows"], c, device=dev).to(dt)
        return (lambda: torch.ops.aten.native_layer_norm_backward(dy, x, [c], mean, rstd, w, b,
                                                                   [True, True, True])), flush, 1, \
            "aten.native_layer_norm_backward"
    if k == "adamw":
        dt = dtype(p["dtype"])
        g = torch.Generator(device="cpu").manual_seed(1)
        params = []
        for s in p["shapes"]:
            # 16-bit in halfgrad keeps f32 masters; PyTorch's mixed-precision
            # optimizer state is the fp32 weights themselves: fp32 params.
            q = torch.nn.Parameter(torch.randn(*s, generator=g).to(dev))
            q.grad = torch.randn(*s, generator=g).to(dev)
            params.append(q)
        note = "fp32 params (PyTorch mixed precision keeps fp32 weights)" if dt != torch.float32 else ""
        try:
            opt = torch.optim.AdamW(params, lr=1e-4, fused=True)
            note = (note + "; " if note else "") + "fused=True"
        except (RuntimeError, TypeError):
            opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
            note = (note + "; " if note else "") + "foreach=True"
        if p.get("scaler"):
            # halfgrad's f32+grad-scaler variant: the AMP step (unscale, the
            # inf check, AdamW, update). scale() once makes the scale tensor.
            scaler = torch.amp.GradScaler(dev.type, init_scale=1.0)
            scaler.scale(torch.ones((), device=dev))

            unscale = bool(p.get("unscale"))

            def scaled_step():
                if unscale:  # halfgrad's f32+grad-scaler+unscale_: unscale_ first
                    scaler.unscale_(opt)
                scaler.step(opt)
                scaler.update()
            return scaled_step, None, 1, note + "; GradScaler" + ("; unscale_(opt) first" if unscale else "")
        return opt.step, None, 1, note
    if k == "cnn":
        # hg-train's CNN (nn/models/cnn.cpp), layer for layer.
        batch, dt, nn = p["batch"], dtype(p["dtype"]), torch.nn
        model = nn.Sequential(
            nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(1),
            nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev)
        try:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        except (RuntimeError, TypeError):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(batch, 784, device=dev)
        y = (torch.arange(batch, device=dev) * 7) % 10
        scaler = torch.amp.GradScaler(dev.type, enabled=(dt == torch.float16))

        def cnn_step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=dt if dt != torch.float32 else torch.bfloat16,
                                enabled=(dt != torch.float32)):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        if dt == torch.float32:
            return cnn_step, None, 1, "eager fp32"
        return cnn_step, None, 1, f"eager, fp32 weights + autocast({p['dtype']})" + (" + GradScaler" if dt == torch.float16 else "")
    if k == "gpt":
        return gpt_step(p, dev)
    if k == "attention":
        return attention_variants(p, dev)
    if k == "mlp":
        dims, batch, dt = p["dims"], p["batch"], dtype(p["dtype"])
        layers = []
        for i in range(len(dims) - 1):
            layers.append(torch.nn.Linear(dims[i], dims[i + 1]))
            if i + 2 < len(dims):
                layers.append(torch.nn.ReLU())
        model = torch.nn.Sequential(*layers).to(dev)
        try:
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        except (RuntimeError, TypeError):
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        x = torch.randn(batch, dims[0], device=dev)
        y = (torch.arange(batch, device=dev) * 7) % dims[-1]
        if dt == torch.float32:
            def step():
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
            return step, None, 1, "eager fp32"
        scaler = torch.amp.GradScaler(dev.type, enabled=(dt == torch.float16))

        def amp_step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast(dev.type, dtype=dt):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        return amp_step, None, 1, f"eager, fp32 weights + autocast({p['dtype']})" + (" + GradScaler" if dt == torch.float16 else "")
    return None


# ---- accuracy ------------------------------------------------------------------------

FMT = {"f16": (10, -14, 65504.0), "bf16": (7, -126, (2 - 2 ** -7) * 2.0 ** 127),
       "f32": (23, -126, 3.4028234663852886e38)}


def ulp(dt, r):
    mant, emin, mx = FMT[dt]
    a = torch.clamp(r.abs(), max=mx)
    _, ex = torch.frexp(a)
    e = torch.where(a > 0, torch.clamp(ex.to(torch.float64) - 1, min=emin), torch.tensor(float(emin), dtype=torch.float64))
    return torch.pow(2.0, e - mant)


def round_to(dt, r):
    if dt == "f32":
        return r.to(torch.float32).to(torch.float64)
    mant, emin, mx = FMT[dt]
    u = ulp(dt, r)
    out = torch.round(r / u) * u  # round half to even
    big = r.abs() >= mx + u / 2
    out = torch.where(big, torch.copysign(torch.tensor(math.inf, dtype=torch.float64), r), out)
    return torch.where(torch.isfinite(r) & (r != 0), out, r)


def compare(dt, o, r):
    o, r = o.to(torch.float64).flatten().cpu(), r.to(torch.float64).flatten().cpu()
    rr = round_to(dt, r)
    nan = torch.isnan(r) | torch.isnan(o)
    nan_ok = torch.isnan(r) & torch.isnan(o)
    inf = torch.isinf(o) | torch.isinf(rr)
    exact = (o == rr)
    err = (o - r).abs() / ulp(dt, r)
    err = torch.where(inf, torch.where(exact, 0.0, math.inf), err)
    err = torch.where(nan, torch.where(nan_ok, 0.0, math.inf), err)
    correct = torch.where(nan, nan_ok, exact)
    return float(err.max()), float(correct.double().mean()), o.numel()


def load_inputs(directory, name):
    """The inputs hg-bench's accuracy workload `name` gave its kernel (hg-bench --accuracy-inputs): a list of
    float32 tensors with their shapes and halfgrad dtype names, or None when they were not written."""
    base = os.path.join(directory, name.replace("/", "_"))
    if not (os.path.exists(base + ".json") and os.path.exists(base + ".bin")):
        return None
    with open(base + ".json") as f:
        manifest = json.load(f)["inputs"]
    with open(base + ".bin", "rb") as f:
        flat = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
    out, at = [], 0
    for m in manifest:
        n = math.prod(m["shape"])
        out.append((flat[at:at + n].reshape(m["shape"]).clone(), m["dtype"]))
        at += n
    if at != flat.numel():
        raise RuntimeError(f"{base}.bin holds {flat.numel()} values, its manifest {at}")
    return out


def unary_ops():
    return {"exp": torch.exp, "log": torch.log, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
            "gelu": lambda x: torch.nn.functional.gelu(x),
            "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
            "silu": torch.nn.functional.silu}


def unary_refs():
    """f64 references where PyTorch's own f64 op cancels: GELU's 1 + erf(z) and 1 + tanh(u) are 0 in f64 far
    in the negative tail while the function is not; the same forms as hg-bench's (benchmarks/accuracy.cpp)."""
    def gelu_tanh(x):
        u = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)
        return x / (1.0 + torch.exp(-2.0 * u))
    return {"gelu": lambda x: 0.5 * x * torch.special.erfc(-x / math.sqrt(2.0)), "gelu_tanh": gelu_tanh}


def torch_accuracy(family, dt_name, inputs, dev):
    """(output dtype, out, ref) for PyTorch's kernel on halfgrad's very inputs (load_inputs: every value is
    exact in the dtype hg-bench gave the kernel, f32 for the cast family's source)."""
    dt = dtype(dt_name)
    xs = [x.to(dtype(d)) for x, d in inputs]
    if family == "cast-from-f32":
        x = xs[0]
        return dt_name, x.to(dev).to(dt), x.double()
    if family in ("add", "mul"):
        a, b = xs
        o = (a.to(dev) + b.to(dev)) if family == "add" else (a.to(dev) * b.to(dev))
        r = (a.double() + b.double()) if family == "add" else (a.double() * b.double())
        return dt_name, o, r
    if family in unary_ops():
        f = unary_ops()[family]
        return dt_name, f(xs[0].to(dev)), unary_refs().get(family, f)(xs[0].double())
    if family in ("softmax", "log_softmax"):
        f = torch.softmax if family == "softmax" else torch.log_softmax
        return dt_name, f(xs[0].to(dev), -1), f(xs[0].double(), -1)
    if family == "cross_entropy":
        x = xs[0]
        t = torch.ones(1, dtype=torch.long)  # hg-bench's target: class 1 in every row
        outs = [torch.nn.functional.cross_entropy(x[r:r + 1].to(dev), t.to(dev)) for r in range(x.shape[0])]
        refs = [torch.nn.functional.cross_entropy(x[r:r + 1].double(), t) for r in range(x.shape[0])]
        out = torch.stack([o.float().cpu() for o in outs])
        # PyTorch returns the loss in the logits' dtype: measured in ulps of that.
        return (dt_name if outs[0].dtype != torch.float32 else "f32"), out, torch.stack(refs)
    if family.startswith("reduce-"):
        op = family[len("reduce-"):]
        f = {"sum": lambda t: t.sum(-1), "mean": lambda t: t.mean(-1), "norm": lambda t: torch.linalg.vector_norm(t, dim=-1)}[op]
        return dt_name, f(xs[0].to(dev)), f(xs[0].double())
    if family == "matmul":
        a, b = xs
        return dt_name, a.to(dev) @ b.to(dev), a.double() @ b.double()
    return None


# ---- driver --------------------------------------------------------------------------

def hg_lines(hg, args, extra):
    cmd = [hg] + (["--quick"] if args.quick else []) + extra
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({res.returncode}):\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return res.stdout


HG_KEEP = {"ceilings": [], "rows": [], "header": "", "file": None}  # --hg-json


def run_hg(hg, args, name, device, keep=False):
    """One `hg-bench --only name` run; with keep (--hg-json), its JSON line and table row are kept."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        text = hg_lines(hg, args, ["--only", name, "--json", f.name, "--device", device,
                                   "--runs", str(args.runs), "--warmup", str(args.warmup)] + HG_KEEP["ceilings"])
        raw = [x for x in open(f.name) if x.strip()]
    if keep and HG_KEEP["file"]:
        HG_KEEP["file"].write(raw[-1] if raw[-1].endswith("\n") else raw[-1] + "\n")
        HG_KEEP["file"].flush()
        HG_KEEP["rows"].append((name.split("/")[0], [x for x in text.splitlines() if x.startswith(name + " ")]))
    return json.loads(raw[-1])


def hg_ceilings(args, device):
    """--hg-json: hg-bench's ceilings suite, once; its lines are kept and its figures passed on as --ceiling."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        text = hg_lines(args.hg_bench, args, ["--suite", "ceilings", "--json", f.name, "--device", device,
                                              "--runs", str(args.runs), "--warmup", str(args.warmup)])
        raw = [x for x in open(f.name) if x.strip()]
    HG_KEEP["header"] = text.split("\n== ")[0]
    for line in raw:
        HG_KEEP["file"].write(line if line.endswith("\n") else line + "\n")
        r = json.loads(line)
        HG_KEEP["rows"].append(("ceilings", [x for x in text.splitlines() if x.startswith(r["name"] + " ")]))
        parts = r["name"].split("/")
        if parts[1] == "copy" and "gbps" in r.get("metrics", {}):
            HG_KEEP["ceilings"] += ["--ceiling", f"copy_gbps={r['metrics']['gbps']}"]
        elif parts[1] == "gemm-peak" and "tflops" in r.get("metrics", {}):
            HG_KEEP["ceilings"] += ["--ceiling", f"gemm_{parts[2]}={r['metrics']['tflops']}"]
    HG_KEEP["file"].flush()


def print_hg_table():
    print("\nhalfgrad's results (the first A run of each workload; --hg-json has the JSON lines)\n")
    print(HG_KEEP["header"].rstrip("\n"))
    last = None
    for suite, rows in HG_KEEP["rows"]:
        if suite != last:
            print(f"\n== {suite} ==\n{'workload':44} {'median':>11} {'[min .. max]':>23} {'cpu':>5}  result")
            last = suite
        for row in rows:
            print(row)


def fmt_s(s):
    return f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.2f} us"


def main():
    args = parse_args()
    if torch is None:
        print("compare_torch.py: PyTorch is not installed for this Python "
              f"({sys.executable}); no halfgrad/PyTorch ratios. ./run bench --torch installs it into build/torch-venv.")
        return 3
    dev_name = args.device
    if dev_name == "auto":
        dev_name = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(dev_name)
    suite_args = []
    for s in args.suites:
        suite_args += ["--suite", s]
    set_args = ["--set", args.set] if args.set else []
    listed = [json.loads(x) for x in hg_lines(args.hg_bench, args, suite_args + set_args + ["--list"]).splitlines()
              if x.strip()]
    if args.only:  # in the order given
        by_name = {w["name"]: w for w in listed}
        listed = [by_name[n] for n in args.only if n in by_name]
    out = open(args.json, "a") if args.json else None
    if args.hg_json:
        HG_KEEP["file"] = open(args.hg_json, "a")
        hg_ceilings(args, dev_name)
    cpu_cap = ""
    if dev.type == "cpu" and hasattr(torch.backends, "cpu") and hasattr(torch.backends.cpu, "get_cpu_capability"):
        cpu_cap = f", CPU capability {torch.backends.cpu.get_cpu_capability()}"
    print(f"compare_torch.py: PyTorch {torch.__version__} on {dev}{cpu_cap} ({torch.get_num_threads()} threads, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', 'unset')}), {rounds_text(args)} per workload, "
          f"{args.warmup} warm-up call(s) then the median of {args.runs} runs each")
    print("speed ratio = PyTorch time / halfgrad time (> 1: halfgrad faster)\n")
    print(f"{'workload':46} {'halfgrad':>11} {'PyTorch':>11} {'ratio':>7}  PyTorch variant")
    ratios = []
    acc = [w for w in listed if w["params"]["kind"] == "accuracy"]
    for w in listed:
        p = w["params"]
        if p["kind"] == "accuracy":
            continue  # the accuracy suite below
        keep = w["suite"] != "ceilings"  # with --hg-json, halfgrad's ceilings lines come from hg_ceilings
        made = None if p["kind"] in ("pending", "empty_kernel") else torch_workload(p, dev)
        if made is None:
            if args.hg_json and keep:  # no PyTorch twin: halfgrad's line still belongs in its results
                try:
                    run_hg(args.hg_bench, args, w["name"], dev_name, keep=True)
                except Exception as e:
                    print(f"{w['name']:46} FAILED: {e}")
            continue
        # A workload may have several PyTorch variants (attention: the flash and the
        # cuDNN backends): one row each; halfgrad's line is kept from the first.
        variants = made if isinstance(made, list) else [made]
        for vi, (fn, before, inner, note) in enumerate(variants):
            keep_v = keep and vi == 0

            def torch_run():
                def many():
                    for _ in range(inner):
                        fn()
                # the --max-call-s probe was PyTorch's first warm-up call
                m, lo, hi = time_fn(many, dev, args.runs, max(0, args.warmup - probed), before)
                return m / inner
            hg_t, pt_t = [], []
            probed = 0
            if args.max_call_s is not None:
                probed = 1
                t0 = time.perf_counter()
                for _ in range(inner):
                    fn()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                one = (time.perf_counter() - t0) / inner
                if one > args.max_call_s:
                    try:
                        h = run_hg(args.hg_bench, args, w["name"], dev_name, keep=keep_v)["median_s"]
                    except Exception as e:
                        print(f"{w['name']:46} FAILED: {e}")
                        continue
                    print(f"{w['name']:46} {fmt_s(h):>11} {fmt_s(one):>11} ~{one / h:5.2f}x  {note}"
                          f"{'; ' if note else ''}PyTorch: one call (> --max-call-s {args.max_call_s:g} s), "
                          "not in the mean", flush=True)
                    if out:
                        out.write(json.dumps({"name": w["name"], "suite": w["suite"], "params": p, "halfgrad_s": [h],
                                              "torch_s": [one], "torch_single_call": True,
                                              "speed_ratio_estimate": one / h, "torch": torch.__version__,
                                              "torch_threads": torch.get_num_threads(), "device": dev_name,
                                              "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
                                              "torch_variant": note}) + "\n")
                        out.flush()
                    continue
            try:
                rounds, i, t_first = args.rounds, 0, time.perf_counter()
                while i < rounds:  # A/B, or A/B/A/B
                    hg_t.append(run_hg(args.hg_bench, args, w["name"], dev_name, keep=keep_v and i == 0)["median_s"])
                    pt_t.append(torch_run())
                    probed = 0  # later rounds warm up in full
                    if i == 0 and args.adaptive_rounds and time.perf_counter() - t_first < args.cheap_round_s:
                        rounds = 3  # a cheap workload: A/B/A/B/A/B
                    i += 1
            except Exception as e:  # one failed workload does not stop the rest
                print(f"{w['name']:46} FAILED: {e}")
                continue
            h, t = statistics.median(hg_t), statistics.median(pt_t)
            ratio = t / h
            ratios.append(ratio)
            print(f"{w['name']:46} {fmt_s(h):>11} {fmt_s(t):>11} {ratio:6.2f}x  {note}", flush=True)
            if out:
                out.write(json.dumps({"name": w["name"], "suite": w["suite"], "params": p, "halfgrad_s": hg_t,
                                      "torch_s": pt_t, "speed_ratio": ratio, "torch": torch.__version__,
                                      "torch_threads": torch.get_num_threads(), "device": dev_name,
                                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset"),
                                      "torch_variant": note}) + "\n")
                out.flush()
    if acc:
        with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
            inputs_dir = tempfile.mkdtemp(prefix="hg-accuracy-inputs-")
            text = hg_lines(args.hg_bench, args, ["--suite", "accuracy", "--json", f.name, "--device", dev_name,
                                                  "--accuracy-inputs", inputs_dir])
            raw = [line for line in open(f.name) if line.strip()]
            rows = [json.loads(line) for line in raw]
            if HG_KEEP["file"]:
                for line, r in zip(raw, rows):
                    HG_KEEP["file"].write(line if line.endswith("\n") else line + "\n")
                    HG_KEEP["rows"].append(("accuracy", [x for x in text.splitlines() if x.startswith(r["name"] + " ")]))
                HG_KEEP["file"].flush()
            hg_acc = {x["name"]: x["metrics"] for x in rows if "metrics" in x}
        print(f"\n{'accuracy: max ulp / % correctly rounded':46} {'halfgrad':>26} {'PyTorch':>26}")
        print("(ulps of each side's output dtype, named after the figures: PyTorch returns a 16-bit loss\n"
              " from 16-bit logits, halfgrad an f32 one)")
        for w in acc:
            p = w["params"]
            given = load_inputs(inputs_dir, w["name"])
            if given is None:
                print(f"{w['name']:46} halfgrad wrote no inputs: no PyTorch figure")
                continue
            res = torch_accuracy(p["family"], p["dtype"], given, dev)
            if res is None:
                continue
            odt, o, r = res
            mu, share, n = compare(odt, o, r)
            h = hg_acc.get(w["name"], {})
            hmu = h.get("max_ulps", "?")
            hs = (f"{hmu if isinstance(hmu, str) else f'{hmu:.2f}'} / {100 * h.get('correctly_rounded', 0):.1f}%"
                  f" {h.get('output_dtype', '?')}")
            ts = f"{'inf' if math.isinf(mu) else f'{mu:.2f}'} / {100 * share:.1f}% {odt}"
            hdt = h.get("output_dtype")
            if hdt in FMT and odt in FMT and hdt != odt and isinstance(hmu, (int, float)):
                # Different output dtypes (the loss): halfgrad's error also in ulps of PyTorch's output
                # dtype, where both are normal numbers: the ulps differ by 2^(mantissa bits difference).
                ts += f"  (halfgrad: {hmu * 2.0 ** (FMT[odt][0] - FMT[hdt][0]):.2g} {odt} ulp)"
            print(f"{w['name']:46} {hs:>26} {ts:>26}")
            if out:
                out.write(json.dumps({"name": w["name"], "suite": "accuracy", "params": p, "halfgrad": h,
                                      "torch": {"max_ulps": "inf" if math.isinf(mu) else mu,
                                                "correctly_rounded": share, "outputs": n, "output_dtype": odt},
                                      "torch_version": torch.__version__, "device": dev_name}) + "\n")
        shutil.rmtree(inputs_dir, ignore_errors=True)
    if HG_KEEP["file"]:
        print_hg_table()
    if ratios:
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"\n{len(ratios)} timed workloads; geometric mean speed ratio {geo:.2f}x (PyTorch time / halfgrad time)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
