#!/usr/bin/env python3
"""The HF GPT-2 export's file layout, checked with Python's standard library only.

  safetensors_layout.py <test_interop> <fixture dir> <work dir>

Runs test_interop "[torch-export]" (HG_INTEROP_OUT=<work dir>), which writes
  hf_fixture/   halfgrad's save_pretrained_hf of the fixture it loaded
  hf/           halfgrad's save_pretrained_hf of a GPT of its own
  nanogpt.safetensors   halfgrad's nanoGPT-named state dict of another
and reads every safetensors file with json + struct (no numpy, no
safetensors package, no torch: this check runs everywhere):

  - each file keeps the format's rules: u64 little-endian header length, a
    JSON header, data_offsets that tile the buffer in order, sizes that match
    dtype x shape, "__metadata__" {"format": "pt"} as transformers requires,
    plus halfgrad's integrity hash "halfgrad.data_xxh64" (XXH64, seed 0, of
    the data section), recomputed here;
  - hf_fixture/model.safetensors has exactly the names, dtypes, shapes and
    bytes of the file transformers' save_pretrained wrote (Conv1D weights
    [in, out], wte unpadded, no lm_head.weight);
  - hf/ has the same names, dtypes and shapes (a model halfgrad made is laid
    out as transformers lays out GPT-2), and a config.json transformers reads;
  - nanogpt.safetensors has nanoGPT's names and Linear [out, in] shapes.

Exit 0: passed; 1: failed.
"""
import json
import os
import struct
import subprocess
import sys

test_interop, fixture, work = sys.argv[1:4]
DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "U8": 1, "BOOL": 1}
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def xxh64(data, seed=0):
    """XXH64 of bytes, from the algorithm's specification (xxHash's doc/xxhash_spec.md)."""
    p1, p2, p3, p4, p5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x85EBCA77C2B2AE63,
                          0x27D4EB2F165667C5)
    m = (1 << 64) - 1
    rotl = lambda x, r: ((x << r) | (x >> (64 - r))) & m
    def rnd(acc, lane):
        return (rotl((acc + lane * p2) & m, 31) * p1) & m
    def merge(acc, v):
        return ((acc ^ rnd(0, v)) * p1 + p4) & m
    n, i = len(data), 0
    if n >= 32:
        v = [(seed + p1 + p2) & m, (seed + p2) & m, seed, (seed - p1) & m]
        while i + 32 <= n:
            for k in range(4):
                v[k] = rnd(v[k], struct.unpack_from("<Q", data, i + 8 * k)[0])
            i += 32
        acc = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & m
        for x in v:
            acc = merge(acc, x)
    else:
        acc = (seed + p5) & m
    acc = (acc + n) & m
    while i + 8 <= n:
        acc = (rotl(acc ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * p1 + p4) & m
        i += 8
    if i + 4 <= n:
        acc = (rotl(acc ^ ((struct.unpack_from("<I", data, i)[0] * p1) & m), 23) * p2 + p3) & m
        i += 4
    while i < n:
        acc = (rotl(acc ^ ((data[i] * p5) & m), 11) * p1) & m
        i += 1
    acc ^= acc >> 33
    acc = (acc * p2) & m
    acc ^= acc >> 29
    acc = (acc * p3) & m
    return acc ^ (acc >> 32)


# Published XXH64 values (seed 0), so that a wrong port fails here, not below.
assert xxh64(b"") == 0xEF46DB3751D8E999
assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
assert xxh64(b"abc") == 0x44BC2CF5AD770999


def halfgrad_metadata(path, metadata, buffer_hash):
    """halfgrad's files: {"format": "pt"} plus the integrity hash of the data section."""
    check(metadata.get("format") == "pt", f"{path}: metadata format is {metadata.get('format')!r}, not 'pt'")
    check(metadata.get("halfgrad.data_xxh64") == f"{buffer_hash:016x}",
          f"{path}: halfgrad.data_xxh64 {metadata.get('halfgrad.data_xxh64')!r} != the data's {buffer_hash:016x}")
    check(set(metadata) <= {"format", "halfgrad.data_xxh64"}, f"{path}: unexpected metadata {sorted(metadata)}")


def read(path):
    """{name: (dtype, shape, bytes)} and the metadata of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    buffer = blob[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors, end = {}, 0
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"]):
        begin, stop = entry["data_offsets"]
        numel = 1
        for d in entry["shape"]:
            numel *= d
        check(begin == end, f"{path}: {name} starts at {begin}, the previous tensor ended at {end}")
        check(stop - begin == numel * DTYPE_BYTES[entry["dtype"]], f"{path}: {name} has the wrong byte size")
        tensors[name] = (entry["dtype"], entry["shape"], buffer[begin:stop])
        end = stop
    check(end == len(buffer), f"{path}: {len(buffer) - end} bytes after the last tensor")
    metadata["_data_hash"] = xxh64(buffer)
    return tensors, metadata


env = dict(os.environ, HG_INTEROP_OUT=work)
subprocess.run([test_interop, "[torch-export]", "--warn", "NoTests"], env=env, check=True, stdout=subprocess.DEVNULL)

hf_ref, _ = read(os.path.join(fixture, "model.safetensors"))
again, meta = read(os.path.join(work, "hf_fixture", "model.safetensors"))
halfgrad_metadata("hf_fixture", meta, meta.pop("_data_hash"))
check(sorted(again) == sorted(hf_ref), f"names differ: {sorted(set(again) ^ set(hf_ref))}")
for name, (dtype, shape, data) in hf_ref.items():
    if name in again:
        check(again[name][:2] == (dtype, shape), f"{name}: {again[name][:2]} != transformers' {(dtype, shape)}")
        check(again[name][2] == data, f"{name}: bytes differ from transformers' file")
check("lm_head.weight" not in again, "lm_head.weight written (transformers ties it to wte)")
check(hf_ref["transformer.h.0.attn.c_attn.weight"][1] == [32, 96], "the fixture's c_attn is not Conv1D [in, out]")

own, meta = read(os.path.join(work, "hf", "model.safetensors"))
halfgrad_metadata("hf", meta, meta.pop("_data_hash"))
check({k: v[:2] for k, v in own.items()} == {k: v[:2] for k, v in hf_ref.items()},
      "halfgrad's own GPT is not laid out as transformers' GPT-2")
with open(os.path.join(work, "hf", "config.json")) as f:
    config = json.load(f)
for key, value in {"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 32, "n_positions": 16,
                   "vocab_size": 100, "activation_function": "gelu_new", "tie_word_embeddings": True}.items():
    check(config.get(key) == value, f"config.json {key}: {config.get(key)!r} != {value!r}")

nano, _ = read(os.path.join(work, "nanogpt.safetensors"))
check(nano["transformer.h.0.attn.c_attn.weight"][:2] == ("F32", [96, 32]), "nanoGPT c_attn is not Linear [out, in]")
check(nano["transformer.wte.weight"][1] == [128, 32], "nanoGPT wte is not the padded [128, 32]")
check("lm_head.weight" not in nano, "nanoGPT export has lm_head.weight (tied to wte)")

print(f"{len(hf_ref)} tensors: halfgrad's HF export matches transformers' file; "
      f"{'FAILED' if failures else 'passed'}")
sys.exit(1 if failures else 0)
