#!/usr/bin/env python3
"""Dump transformers' module tree of a checkpoint: FQN, class, parameters, buffers.

Prints JSON: {"modules": [{"name", "class", "params": [[n, shape]], "buffers": [[n, shape, persistent]]}],
"no_split_modules": [...], "tied": {...}}
"""
import argparse
import json
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoConfig, AutoModelForCausalLM  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
args = ap.parse_args()
config = AutoConfig.from_pretrained(args.model)
with torch.device("meta"):
    model = AutoModelForCausalLM.from_config(config)
mods = []
for name, m in model.named_modules():
    mods.append({
        "name": name, "class": type(m).__name__,
        "params": [[n, list(p.shape)] for n, p in m.named_parameters(recurse=False)],
        "buffers": [[n, list(b.shape), n not in m._non_persistent_buffers_set]
                    for n, b in m.named_buffers(recurse=False)],
    })
tied = getattr(model, "_tied_weights_keys", None) or {}
if not config.tie_word_embeddings:
    tied = {}
print(json.dumps({"modules": mods, "no_split_modules": list(model._no_split_modules or []),
                  "tied": tied if isinstance(tied, dict) else {}}))
