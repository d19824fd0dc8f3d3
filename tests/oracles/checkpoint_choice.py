#!/usr/bin/env python3
"""Which weights transformers loads from a folder holding both model.safetensors and
model.safetensors.index.json (+ shards), each with other weights.

Writes OUT/model: the sharded tiny checkpoint SRC as it is, plus a model.safetensors holding the
same tensors halved (saved by transformers). Prints {"prompt_ids", "logits" (the last prompt
position's logits of AutoModelForCausalLM.from_pretrained(OUT/model)), "shard_logits" (the same
from SRC alone), "loaded": "single" | "shards"}.
"""
import argparse
import json
import shutil
import tempfile
from pathlib import Path

from tiny_fixture import quiet

quiet()
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--src", required=True)
args = ap.parse_args()

src, out = Path(args.src), Path(args.out) / "model"
shutil.rmtree(out, ignore_errors=True)
shutil.copytree(src, out, ignore=shutil.ignore_patterns(".complete", "reference.json"))
prompt = json.loads((src / "reference.json").read_text())["prompt_ids"]


def last_logits(folder):
    m = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        return m(torch.tensor([prompt])).logits[0, -1]


halved = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager")
with torch.no_grad():
    for p in halved.parameters():
        p.mul_(0.5)
with tempfile.TemporaryDirectory() as tmp:
    halved.save_pretrained(tmp, max_shard_size="10GB")
    shutil.copy(Path(tmp) / "model.safetensors", out / "model.safetensors")

got, shards = last_logits(out), last_logits(src)
halved_logits = halved.eval()(torch.tensor([prompt])).logits[0, -1].detach()
print(json.dumps({"prompt_ids": prompt, "logits": got.tolist(), "shard_logits": shards.tolist(),
                  "loaded": "single" if torch.allclose(got, halved_logits) else "shards"}))
