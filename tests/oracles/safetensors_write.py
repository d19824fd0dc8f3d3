"""Oracle for tests/safetensors_test.cpp: writes safetensors files with the real `safetensors` and
`transformers` packages, plus JSON dumps of what they hold, for the C++ reader to compare against.

usage: safetensors_write.py --out DIR [--seed N] [--what mixed|checkpoints|all]

DIR/mixed.safetensors  many dtypes/shapes (0-rank, empty, specials, unsupported FP8/U16) + metadata
DIR/mixed.json         {"metadata": {...}, "order": [names by data offset],
                        "tensors": {name: {"dtype", "shape", "hex", "values"}}}
DIR/single/            tiny Llama saved by transformers' save_pretrained (one model.safetensors)
DIR/sharded/           the same model with save_pretrained(max_shard_size=...) -> index + shards
DIR/checkpoint.json    {"tensors": {name: {"dtype", "shape", "hex"}}, "weight_map": {...}}
"""
import argparse
import json
import os
import struct

import torch
from safetensors.torch import save_file

ST_DTYPE = {
    torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64",
    torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
    torch.uint8: "U8", torch.bool: "BOOL", torch.float8_e4m3fn: "F8_E4M3", torch.uint16: "U16",
}


def raw_hex(t: torch.Tensor) -> str:
    t = t.detach().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes().hex()


def values(t: torch.Tensor):
    if t.dtype in (torch.float8_e4m3fn, torch.uint16):
        return None
    flat = t.detach().reshape(-1)
    if t.dtype.is_floating_point:
        d = flat.double()
        if not bool(torch.isfinite(d).all()):
            return None
        return d.tolist()
    return flat.long().tolist()


def header_order(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return [k for k, _ in sorted(h.items(), key=lambda kv: (kv[1]["data_offsets"], kv[0]))]


def write_mixed(out, seed):
    g = torch.Generator().manual_seed(seed)
    t = {
        "f32": torch.randn(3, 4, generator=g),
        "bf16": torch.randn(5, generator=g).to(torch.bfloat16),
        "f16": torch.randn(2, 3, generator=g).to(torch.float16),
        "f64": torch.randn(2, generator=g, dtype=torch.float64),
        "i64": torch.randint(-(2**62), 2**62, (3,), generator=g, dtype=torch.int64),
        "i32": torch.randint(-(2**31), 2**31 - 1, (2, 2), generator=g, dtype=torch.int32),
        "i16": torch.randint(-(2**15), 2**15 - 1, (4,), generator=g, dtype=torch.int16),
        "i8": torch.randint(-128, 127, (3,), generator=g, dtype=torch.int8),
        "u8": torch.randint(0, 255, (5,), generator=g, dtype=torch.uint8),
        "bool": torch.rand(6, generator=g) > 0.5,
        "scalar": torch.tensor(float(torch.randn(1, generator=g))),
        "scalar_i64": torch.tensor(-7, dtype=torch.int64),
        "empty": torch.zeros(0, 3),
        "empty_bf16": torch.zeros(0, dtype=torch.bfloat16),
        "specials": torch.tensor([float("nan"), float("inf"), float("-inf"), -0.0, 1e-45]),
        "fp8": torch.randn(4, generator=g).to(torch.float8_e4m3fn),
        "u16": torch.tensor([1, 65535, 300], dtype=torch.uint16),
        "model.layers.0.mlp.weight": torch.randn(2, 3, 4, generator=g).to(torch.bfloat16),
    }
    path = os.path.join(out, "mixed.safetensors")
    meta = {"format": "pt", "seed": str(seed), "note": "written by safetensors.torch.save_file"}
    save_file(t, path, metadata=meta)
    dump = {
        "metadata": meta,
        "order": header_order(path),
        "tensors": {
            k: {"dtype": ST_DTYPE[v.dtype], "shape": list(v.shape), "hex": raw_hex(v),
                "values": values(v)}
            for k, v in t.items()
        },
    }
    with open(os.path.join(out, "mixed.json"), "w") as f:
        json.dump(dump, f)


def write_checkpoints(out, seed):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=128, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=False,
                      max_position_embeddings=64)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    single = os.path.join(out, "single")
    sharded = os.path.join(out, "sharded")
    model.save_pretrained(single)
    model.save_pretrained(sharded, max_shard_size="16KB")
    with open(os.path.join(sharded, "model.safetensors.index.json")) as f:
        index = json.load(f)
    sd = model.state_dict()
    dump = {
        "tensors": {k: {"dtype": ST_DTYPE[v.dtype], "shape": list(v.shape), "hex": raw_hex(v)}
                    for k, v in sd.items()},
        "weight_map": index["weight_map"],
    }
    with open(os.path.join(out, "checkpoint.json"), "w") as f:
        json.dump(dump, f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--what", choices=["mixed", "checkpoints", "all"], default="all")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.what in ("mixed", "all"):
        write_mixed(a.out, a.seed)
    if a.what in ("checkpoints", "all"):
        write_checkpoints(a.out, a.seed)


if __name__ == "__main__":
    main()
