"""Reference trajectories of Lion and Muon for tests/optim/test_custom_optimizer.cpp.

A 5-6-3 MLP (two 2-D weights, two biases), f32, trained for STEPS steps on a
fixed batch with loss mean((relu(x W1^T + b1) W2^T + b2 - y)^2). Lion follows
lucidrains/lion-pytorch; Muon follows modded-nanogpt (momentum via lerp,
nesterov, quintic Newton-Schulz with (3.4445, -4.7750, 2.0315), 5 steps, f32
here, scale sqrt(max(1, rows/cols))) with torch.optim.AdamW's arithmetic for
the biases. Writes lion_muon_trajectory.txt next to this file:
  <name> <numel> <values...>   (%.9g: exact f32 round trip)
Run: /work/pyenv/bin/python tests/optim/ref/lion_muon_reference.py
"""
import math
import os

import numpy as np
import torch

STEPS = 8
LION = dict(lr=1e-3, beta1=0.9, beta2=0.99, weight_decay=0.1)
MUON = dict(lr=0.02, momentum=0.95, ns_steps=5, weight_decay=0.01, adamw_lr_scale=0.015,
            beta1=0.9, beta2=0.95, eps=1e-8)

rng = np.random.default_rng(36)
init = {
    "x": rng.standard_normal((8, 5)),
    "y": rng.standard_normal((8, 3)),
    "W1": rng.standard_normal((6, 5)) * 0.4,
    "b1": rng.standard_normal(6) * 0.1,
    "W2": rng.standard_normal((3, 6)) * 0.4,
    "b2": rng.standard_normal(3) * 0.1,
}
init = {k: torch.tensor(v, dtype=torch.float32) for k, v in init.items()}
NAMES = ["W1", "b1", "W2", "b2"]


def loss_fn(p):
    h = torch.relu(init["x"] @ p["W1"].T + p["b1"])
    return ((h @ p["W2"].T + p["b2"] - init["y"]) ** 2).mean()


def newton_schulz5(g, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    x = g.float()
    tall = g.size(0) > g.size(1)
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(steps):
        A = x @ x.T
        B = b * A + c * (A @ A)
        x = a * x + B @ x
    if tall:
        x = x.T
    return x


def run(kind):
    p = {k: init[k].clone().requires_grad_(True) for k in NAMES}
    state = {k: {} for k in NAMES}
    out = []
    for step in range(1, STEPS + 1):
        for t in p.values():
            t.grad = None
        loss_fn(p).backward()
        with torch.no_grad():
            for k in NAMES:
                w, g, st = p[k], p[k].grad, state[k]
                if kind == "lion":
                    o = LION
                    m = st.setdefault("exp_avg", torch.zeros_like(w))
                    w.mul_(1 - o["lr"] * o["weight_decay"])
                    update = m.clone().mul_(o["beta1"]).add(g, alpha=1 - o["beta1"]).sign_()
                    w.add_(update, alpha=-o["lr"])
                    m.mul_(o["beta2"]).add_(g, alpha=1 - o["beta2"])
                elif w.dim() == 2:
                    o = MUON
                    buf = st.setdefault("momentum_buffer", torch.zeros_like(w))
                    buf.lerp_(g, 1 - o["momentum"])
                    u = g.lerp(buf, o["momentum"])
                    O = newton_schulz5(u, o["ns_steps"])
                    w.mul_(1 - o["lr"] * o["weight_decay"])
                    w.add_(O, alpha=-o["lr"] * max(1, w.size(0) / w.size(1)) ** 0.5)
                else:
                    o = MUON
                    lr = o["lr"] * o["adamw_lr_scale"]
                    m = st.setdefault("exp_avg", torch.zeros_like(w))
                    v = st.setdefault("exp_avg_sq", torch.zeros_like(w))
                    w.mul_(1 - lr * o["weight_decay"])
                    m.lerp_(g, 1 - o["beta1"])
                    v.mul_(o["beta2"]).addcmul_(g, g, value=1 - o["beta2"])
                    bc1 = 1 - o["beta1"] ** step
                    bc2 = 1 - o["beta2"] ** step
                    denom = (v.sqrt() / math.sqrt(bc2)).add_(o["eps"])
                    w.addcdiv_(m, denom, value=-lr / bc1)
        for k in NAMES:
            out.append((f"{kind}.{step}.{k}", p[k].detach().clone()))
    return out


rows = [(k, init[k]) for k in ["x", "y"] + NAMES] + run("lion") + run("muon")
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lion_muon_trajectory.txt")
with open(path, "w") as f:
    f.write("# tests/optim/ref/lion_muon_reference.py (torch %s): name numel values\n" % torch.__version__)
    for name, t in rows:
        vals = t.reshape(-1).tolist()
        f.write(name + " " + str(len(vals)) + " " + " ".join("%.9g" % v for v in vals) + "\n")
print("wrote", path, len(rows), "tensors")
