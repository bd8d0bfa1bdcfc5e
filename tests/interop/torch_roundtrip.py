#!/usr/bin/env python3
"""PyTorch round trips of halfgrad's checkpoints, as CTest tests.

  torch_roundtrip.py torch <test_interop> <test_nn> <work dir>
      needs torch and safetensors:
      (1) PyTorch's load_state_dict takes halfgrad's model-only export of a
          Sequential (tests/nn/torch_state_dict.py, on what test_nn leaves with
          HG_STATE_DICT_OUT) and gives halfgrad's output;
      (2) PyTorch's safetensors reads halfgrad's file of every dtype bit for
          bit (tests/nn/fixtures/check_safetensors.py check);
      (3) a nanoGPT GPT in PyTorch loads halfgrad's GPT state dict (strict,
          nanoGPT names, padded wte) and gives halfgrad's logits;
      (4) halfgrad loads a nanoGPT state dict PyTorch saved (unpadded wte)
          and gives PyTorch's logits (test_interop "[torch-import]").
  torch_roundtrip.py hf <test_interop> <test_nn> <work dir>
      needs torch, safetensors and transformers: transformers'
      GPT2LMHeadModel.from_pretrained loads halfgrad's save_pretrained_hf
      folder with no missing or unexpected keys and gives halfgrad's logits.

Exit 0: passed; 77: skipped, with the missing module named (CTest reports
SKIPPED, never passed); 1: failed.
"""
import importlib
import math
import os
import shutil
import subprocess
import sys

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

mode, test_interop, test_nn, work = sys.argv[1:5]
needs = ["torch", "safetensors"] + (["transformers"] if mode == "hf" else [])
for module in needs:
    try:
        importlib.import_module(module)
    except ImportError:
        print(f"skipped: {module} is not importable by {sys.executable} "
              f"(configure with -DHG_INTEROP_PYTHON=<a python with {', '.join(needs)}>)")
        sys.exit(SKIP)

import torch  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

# Whole f32 models against each other: the reduction row of tests/kernels/tolerance.h.
RTOL, ATOL = 1.3e-6, 1e-5
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(cmd, **env):
    if cmd[0] in (test_interop, test_nn):
        cmd = cmd + ["--warn", "NoTests"]  # a filter that matches nothing fails, not passes
    print("+", " ".join(cmd), " ".join(f"{k}={v}" for k, v in env.items()))
    result = subprocess.run(cmd, env={**os.environ, **env})
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(cmd)}")


def close(actual, expected, what):
    actual, expected = actual.double(), expected.double()
    err = ((actual - expected).abs() - RTOL * expected.abs()).max().item()
    print(f"{what}: max |diff| - rtol |ref| = {err:.3g} (atol {ATOL})")
    if not err <= ATOL:
        sys.exit(f"FAIL: {what}")


class Attention(torch.nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = torch.nn.Linear(c, 3 * c)
        self.c_proj = torch.nn.Linear(c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Mlp(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c_fc = torch.nn.Linear(c, 4 * c)
        self.c_proj = torch.nn.Linear(4 * c, c)

    def forward(self, x):
        return self.c_proj(torch.nn.functional.gelu(self.c_fc(x)))


class Block(torch.nn.Module):
    def __init__(self, c, n_head):
        super().__init__()
        self.ln_1, self.attn = torch.nn.LayerNorm(c), Attention(c, n_head)
        self.ln_2, self.mlp = torch.nn.LayerNorm(c), Mlp(c)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class NanoGPT(torch.nn.Module):
    """nanoGPT's model.py GPT, module for module and name for name."""

    def __init__(self, vocab, n_layer=2, n_head=2, c=32, block=16):
        super().__init__()
        self.transformer = torch.nn.ModuleDict(dict(
            wte=torch.nn.Embedding(vocab, c), wpe=torch.nn.Embedding(block, c),
            h=torch.nn.ModuleList([Block(c, n_head) for _ in range(n_layer)]), ln_f=torch.nn.LayerNorm(c)))

    def forward(self, idx):
        tr = self.transformer
        x = tr.wte(idx) + tr.wpe(torch.arange(idx.shape[1]))
        for block in tr.h:
            x = block(x)
        return tr.ln_f(x) @ tr.wte.weight.t()


def torch_checks():
    # (1) and (2): the existing by-hand checks of tests/nn, now driven here.
    sd = os.path.join(work, "state_dict")
    run([test_nn, "save_state_dict writes PyTorch's state_dict keys and loads back"], HG_STATE_DICT_OUT=sd)
    run([sys.executable, os.path.join(ROOT, "tests/nn/torch_state_dict.py"), sd])
    dtypes = os.path.join(work, "every_dtype.safetensors")
    run([test_nn, "round trip of every dtype keeps bits*"], HG_SAFETENSORS_OUT=dtypes)
    run([sys.executable, os.path.join(ROOT, "tests/nn/fixtures/check_safetensors.py"), "check", dtypes])

    # (3) halfgrad -> PyTorch, nanoGPT names.
    out = os.path.join(work, "export")
    run([test_interop, "[torch-export]"], HG_INTEROP_OUT=out)
    ref = load_file(os.path.join(out, "halfgrad_logits.safetensors"))
    state = load_file(os.path.join(out, "nanogpt.safetensors"))
    model = NanoGPT(vocab=state["transformer.wte.weight"].shape[0]).eval()  # 128: halfgrad's padded wte
    model.load_state_dict(state)  # strict: every key under nanoGPT's name
    with torch.no_grad():
        close(model(ref["idx"])[:, :, :100], ref["nanogpt_logits"], "PyTorch nanoGPT on halfgrad's state dict")

    # (4) PyTorch -> halfgrad, nanoGPT names, unpadded wte.
    inp = os.path.join(work, "import")
    os.makedirs(inp)
    torch.manual_seed(7)
    model = NanoGPT(vocab=100).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(inp, "torch_nanogpt.safetensors"))
    idx = torch.tensor([[5, 17, 42, 99, 0, 63, 64, 8], [1, 2, 3, 4, 5, 6, 7, 8]])
    with torch.no_grad():
        logits = model.double()(idx)
    save_file({"idx": idx, "logits": logits.contiguous()}, os.path.join(inp, "torch_io.safetensors"))
    run([test_interop, "[torch-import]"], HG_INTEROP_IN=inp)
    print(f"torch round trip passed (PyTorch {torch.__version__})")


def hf_checks():
    import transformers
    from transformers import GPT2LMHeadModel

    out = os.path.join(work, "export")
    run([test_interop, "[torch-export]"], HG_INTEROP_OUT=out)
    ref = load_file(os.path.join(out, "halfgrad_logits.safetensors"))
    model, info = GPT2LMHeadModel.from_pretrained(os.path.join(out, "hf"), output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"FAIL: transformers reports {problems} loading halfgrad's export")
    model.eval()
    with torch.no_grad():
        close(model(ref["idx"]).logits, ref["hf_logits"], "transformers GPT2LMHeadModel on halfgrad's export")
    print(f"HF export loads in transformers {transformers.__version__} (PyTorch {torch.__version__})")


{"torch": torch_checks, "hf": hf_checks}[mode]()
