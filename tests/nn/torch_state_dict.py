#!/usr/bin/env python3
"""PyTorch loads halfgrad's model-only export. Run by the torch_roundtrip CTest
test (tests/interop/torch_roundtrip.py) where torch is importable, skipped
there otherwise (torch is not a build dependency), or by hand:

The "save_state_dict writes PyTorch's state_dict keys" test in
tests/nn/test_api.cpp leaves model.safetensors (nn::save_state_dict of
Sequential{Linear(6, 5), ReLU(), Linear(5, 3)}) and io.safetensors (an input x
and halfgrad's output y) in $HG_STATE_DICT_OUT. This script builds the same
architecture in PyTorch, loads the file with load_state_dict(load_file(...))
(strict: every key must match PyTorch's names) and compares the outputs.

  HG_STATE_DICT_OUT=/tmp/hg_sd build/cpu/tests/test_nn "save_state_dict*"
  python3 tests/nn/torch_state_dict.py /tmp/hg_sd
"""
import sys

import torch
from safetensors.torch import load_file

folder = sys.argv[1]
model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
model.load_state_dict(load_file(f"{folder}/model.safetensors"))  # strict=True
io = load_file(f"{folder}/io.safetensors")
with torch.no_grad():
    y = model(io["x"])
err = (y - io["y"]).abs().max().item()
# f32 both sides; the GEMMs may sum in another order: the f32 atol of
# tests/kernels/tolerance.h.
tol = 1e-5
print(f"PyTorch loaded {sorted(model.state_dict())}; max |y_torch - y_halfgrad| = {err:.3g} (tolerance {tol})")
sys.exit(0 if err <= tol else 1)
