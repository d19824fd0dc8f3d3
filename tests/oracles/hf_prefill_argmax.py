#!/usr/bin/env python3
"""transformers' own prefill argmax in a dtype, as a user gets it: the checkpoint loaded with
`from_pretrained(MODEL, dtype=...)` (transformers' default attention), undispatched, and one
greedy `generate` step on the prompt ids with `output_logits=True` (the forward's logits, before
any processor). Prints

  {"dtype": "bf16", "argmax": N, "runner_up": M, "margin": x}

`dtype` is read from the loaded model's parameters, in hookscope's names (f32, bf16, f16);
`margin` is the gap between the two largest logits (a near-tie makes an argmax comparison
fragile). No hookscope code is imported. --out DIR (the test suite's cached_oracle) is created
for it; the result is stdout."""
import argparse
import json
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
ap.add_argument("--dtype", choices=list(DTYPES), required=True)
ap.add_argument("--out")
args = ap.parse_args()
if args.out:
    os.makedirs(args.out, exist_ok=True)
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=DTYPES[args.dtype], local_files_only=True).eval()
loaded = next(model.parameters()).dtype
ids = torch.tensor([[int(t) for t in args.prompt_ids.split(",")]])
gc = model.generation_config
pad = gc.pad_token_id if gc.pad_token_id is not None else gc.eos_token_id
with torch.no_grad():
    out = model.generate(ids, max_new_tokens=1, do_sample=False, output_logits=True, return_dict_in_generate=True,
                         pad_token_id=pad, disable_compile=True)
logits = out.logits[0][0]
top = logits.float().topk(2)
print(json.dumps({"dtype": {v: k for k, v in DTYPES.items()}.get(loaded, str(loaded)),
                  "argmax": int(logits.argmax()), "runner_up": int(top.indices[1]),
                  "margin": float(top.values[0] - top.values[1])}))
