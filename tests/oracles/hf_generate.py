#!/usr/bin/env python3
"""transformers' greedy generate (fp32, eager attention) as the oracle: prints
{"prompt_ids": [...], "new_ids": [...], "text": "..."}."""
import argparse
import json
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--prompt", required=True)
ap.add_argument("--max-new-tokens", type=int, default=16)
args = ap.parse_args()
tok = AutoTokenizer.from_pretrained(args.model)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32, attn_implementation="eager").eval()
ids = tok(args.prompt, return_tensors="pt").input_ids
with torch.no_grad():
    out = model.generate(ids, do_sample=False, max_new_tokens=args.max_new_tokens)
new = out[0, ids.shape[1]:].tolist()
print(json.dumps({"prompt_ids": ids[0].tolist(), "new_ids": new,
                  "text": tok.decode(new, skip_special_tokens=True)}))
