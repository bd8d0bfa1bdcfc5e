#!/usr/bin/env python3
"""Charts for docs/benchmarks.md, rendered as SVG from the JSON lines of
hg-bench (--json) and compare_torch.py (--json). Standard library only.

    benchmarks/plot_results.py --hg RESULTS.jsonl [--torch COMPARE.jsonl] --out docs/bench

Writes (each only when its data is there):
  ceilings.svg   fraction of the same run's ceiling per gemm/bandwidth/optimizer workload
  ratios.svg     halfgrad/PyTorch speed ratio per workload (PyTorch time / halfgrad time)
  accuracy.svg   max error in ulps per kernel family, halfgrad beside PyTorch
and a PNG of each when ImageMagick's `convert` exists; with --markdown FILE,
the result tables (markdown) that docs/benchmarks.md quotes.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
from html import escape

W = 900
ROW = 18
LEFT = 330


def load(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def svg(rows_h, title, subtitle, body):
    h = 70 + rows_h + 40
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{h}" font-family="sans-serif" font-size="11">\n'
            f'<rect width="100%" height="100%" fill="white"/>\n'
            f'<text x="10" y="20" font-size="15" font-weight="bold">{escape(title)}</text>\n'
            f'<text x="10" y="38" fill="#555">{escape(subtitle)}</text>\n' + body + '</svg>\n')


def bars(items, title, subtitle, xmax, ref=None, fmt="{:.2f}", log=False):
    """items: (label, value, colour). Horizontal bars from LEFT; ref draws a dashed line."""
    span = W - LEFT - 90
    lo = min(v for _, v, _ in items if v > 0) if log else 0

    def x(v):
        if log:
            a, b = math.log10(max(min(lo, 0.1), 1e-3)), math.log10(max(xmax, 10))
            return LEFT + span * (math.log10(max(v, 1e-3)) - a) / (b - a)
        return LEFT + span * min(v, xmax) / xmax
    body = []
    y = 60
    for label, v, colour in items:
        x0 = x(lo if log else 0) if not log else LEFT
        body.append(f'<text x="{LEFT - 6}" y="{y + 12}" text-anchor="end">{escape(label)}</text>')
        body.append(f'<rect x="{LEFT}" y="{y + 2}" width="{max(x(v) - x0, 1):.1f}" height="{ROW - 5}" fill="{colour}"/>')
        body.append(f'<text x="{max(x(v), LEFT) + 4:.1f}" y="{y + 12}">{fmt.format(v)}</text>')
        y += ROW
    if ref is not None:
        body.append(f'<line x1="{x(ref):.1f}" y1="55" x2="{x(ref):.1f}" y2="{y + 4}" stroke="black" stroke-dasharray="4,3"/>')
        body.append(f'<text x="{x(ref) + 3:.1f}" y="{y + 16}">{fmt.format(ref)}</text>')
    return svg(y - 60, title, subtitle, "\n".join(body) + "\n")


def context_line(rows):
    c = rows[0]
    m = c.get("machine", {})
    return (f"{m.get('cpu', '?')}, {m.get('cores', '?')} cores; commit {c.get('commit', '?')}; "
            f"{c.get('device', '?')}; {'--quick; ' if c.get('quick') else ''}load at start {m.get('loadavg_at_start', '?').split(' ')[0]}")


def write(path, text, made):
    with open(path, "w") as f:
        f.write(text)
    made.append(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hg", required=True)
    ap.add_argument("--torch")
    ap.add_argument("--out", required=True)
    ap.add_argument("--markdown", help="also write the result tables as markdown to this file")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    made = []
    hg = load(a.hg)
    timed = [r for r in hg if "metrics" in r and "median_s" in r]
    frac = []
    for r in timed:
        m = r["metrics"]
        for key, colour in (("fraction_of_peak", "#4c72b0"), ("fraction_of_copy", "#55a868")):
            if key in m:
                frac.append((r["name"], m[key], colour))
    if frac:
        write(os.path.join(a.out, "ceilings.svg"),
              bars(frac, "halfgrad: fraction of the ceiling measured in the same run",
                   "blue: GEMM / that dtype's GEMM peak; green: GB/s / copy bandwidth. " + context_line(hg),
                   xmax=max(1.2, max(v for _, v, _ in frac)), ref=1.0), made)
    if a.torch and os.path.exists(a.torch):
        cmp_rows = load(a.torch)
        ratios = [(r["name"], r["speed_ratio"], "#4c72b0" if r["speed_ratio"] >= 1 else "#c44e52")
                  for r in cmp_rows if "speed_ratio" in r]
        if ratios:
            write(os.path.join(a.out, "ratios.svg"),
                  bars(ratios, "halfgrad vs PyTorch: speed ratio (PyTorch time / halfgrad time; > 1 = halfgrad faster)",
                       f"PyTorch {cmp_rows[0].get('torch', '?')}, same machine, A/B/A/B in one invocation; log scale. "
                       + context_line(hg), xmax=max(v for _, v, _ in ratios), ref=1.0, fmt="{:.2f}x", log=True),
                  made)
        acc = [r for r in cmp_rows if r.get("suite") == "accuracy"]
        if acc:
            write(os.path.join(a.out, "accuracy.svg"), accuracy_table(acc), made)
    if shutil.which("convert"):
        for p in list(made):
            subprocess.run(["convert", p, p[:-4] + ".png"], check=False, capture_output=True)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(markdown(hg, load(a.torch) if a.torch and os.path.exists(a.torch) else []))
        made.append(a.markdown)
    for p in made:
        print(p)


def fmt_time(s):
    return f"{s:.3f} s" if s >= 1 else f"{s * 1e3:.3f} ms" if s >= 1e-3 else f"{s * 1e6:.2f} us"


def markdown(hg, cmp_rows):
    ratio = {r["name"]: r for r in cmp_rows if "speed_ratio" in r or "speed_ratio_estimate" in r}
    out = [f"Run: {context_line(hg)}; threads: OpenMP {hg[0]['threads']['omp_max_threads']}; "
           f"build {hg[0]['build']['cuda_mode']} {hg[0]['build']['type']} ({hg[0]['build']['compiler']}); "
           f"started {hg[0].get('started', '?')}.", ""]
    suites = []
    for r in hg:
        if r["suite"] not in suites:
            suites.append(r["suite"])
    for suite in suites:
        rows = [r for r in hg if r["suite"] == suite]
        out.append(f"**{suite}**")
        out.append("")
        if suite == "accuracy":
            tacc = {r["name"]: r["torch"] for r in cmp_rows if r.get("suite") == "accuracy" and "torch" in r}
            out.append("| workload | max ulp | correctly rounded | output dtype | PyTorch max ulp | PyTorch correctly rounded | PyTorch output dtype |")
            out.append("|---|---:|---:|---|---:|---:|---|")

            def ulps(v):
                return v if isinstance(v, str) else f"{v:.2f}"
            for r in rows:
                m = r.get("metrics", {})
                t = tacc.get(r["name"])
                tcols = (f"{ulps(t['max_ulps'])} | {100 * t['correctly_rounded']:.2f}% | {t['output_dtype']}"
                         if t else " | | ")
                out.append(f"| {r['name']} | {ulps(m.get('max_ulps', '?'))} | "
                           f"{100 * m.get('correctly_rounded', 0):.2f}% | {m.get('output_dtype', '?')} | {tcols} |")
            out.append("")
            continue
        out.append("| workload | median | min .. max | cpu | result | PyTorch | speed ratio |")
        out.append("|---|---:|---:|---:|---|---:|---:|")
        for r in rows:
            if "median_s" not in r:
                out.append(f"| {r['name']} | - | - | | {r.get('note', '')} | | |")
                continue
            m = r["metrics"]
            parts = []
            for key, f in (("tflops", "{:.3f} TFLOP/s"), ("gbps", "{:.1f} GB/s"), ("fraction_of_peak", "{:.0%} of peak"),
                           ("fraction_of_copy", "{:.0%} of copy"), ("us_per_op", "{:.2f} us/op"),
                           ("us_per_launch", "{:.2f} us/launch"), ("steps_per_s", "{:.1f} steps/s"),
                           ("samples_per_s", "{:.0f} samples/s"), ("tokens_per_s", "{:.0f} tokens/s"),
                           ("model_tflops", "{:.3f} model TFLOP/s"), ("host_syncs", "host syncs {}")):
                if key in m:
                    parts.append(f.format(m[key]))
            c = ratio.get(r["name"])
            pt = fmt_time(statistics.median(c["torch_s"])) if c else ""
            rt = ""
            if c and "speed_ratio" in c:
                rt = f"{c['speed_ratio']:.2f}x"
            elif c:  # compare_torch.py --max-call-s: one PyTorch call, not a median of 20
                pt += " (one call)"
                rt = f"~{c['speed_ratio_estimate']:.2f}x"
            cpu = f"{r['cpu_share']:.2f}" if "cpu_share" in r else ""
            out.append(f"| {r['name']} | {fmt_time(r['median_s'])} | {fmt_time(r['min_s'])} .. {fmt_time(r['max_s'])} | "
                       f"{cpu} | {', '.join(parts)} | {pt} | {rt} |")
        out.append("")
    return "\n".join(out) + "\n"


def accuracy_table(acc):
    """A table: family x (dtype, inputs), each cell 'halfgrad | PyTorch' max ulps, red where worse than 1 ulp."""
    cols = []
    for r in acc:
        p = r["params"]
        c = (p["dtype"], p["inputs"])
        if c not in cols:
            cols.append(c)
    fams = []
    for r in acc:
        if r["params"]["family"] not in fams:
            fams.append(r["params"]["family"])
    cell = {(r["params"]["family"], r["params"]["dtype"], r["params"]["inputs"]): r for r in acc}
    cw, x0 = 150, 130
    body = []
    y = 60
    body.append(f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end" font-weight="bold">family</text>')
    for i, (d, inp) in enumerate(cols):
        body.append(f'<text x="{x0 + i * cw + cw / 2}" y="{y + 12}" text-anchor="middle" font-weight="bold">{d} {inp}</text>')
    y += ROW + 4

    def fmt(v):
        if isinstance(v, str):
            return v
        return f"{v:.2f}" if v < 100 else f"{v:.0f}"

    def bad(v):
        return isinstance(v, str) or v > 1.0
    for fam in fams:
        body.append(f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end">{escape(fam)}</text>')
        for i, (d, inp) in enumerate(cols):
            r = cell.get((fam, d, inp))
            if not r:
                continue
            h = r["halfgrad"].get("max_ulps", "?")
            t = r["torch"].get("max_ulps", "?")
            xx = x0 + i * cw
            body.append(f'<rect x="{xx + 2}" y="{y}" width="{cw - 4}" height="{ROW - 2}" fill="#f4f4f4"/>')
            body.append(f'<text x="{xx + cw / 2 - 6}" y="{y + 12}" text-anchor="end" fill="{"#c44e52" if bad(h) else "#222"}">{fmt(h)}</text>')
            body.append(f'<text x="{xx + cw / 2}" y="{y + 12}" text-anchor="middle" fill="#999">|</text>')
            body.append(f'<text x="{xx + cw / 2 + 6}" y="{y + 12}" fill="{"#c44e52" if bad(t) else "#222"}">{fmt(t)}</text>')
        y += ROW
    return svg(y - 60, "Max error in ulps of the output dtype against f64: halfgrad | PyTorch",
               "same recipes of 16-bit inputs (normal, hard); red: above 1 ulp. cross_entropy: halfgrad's loss is f32, "
               "PyTorch's is 16-bit (ulps of each).", "\n".join(body) + "\n")


if __name__ == "__main__":
    main()
