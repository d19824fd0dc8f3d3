#!/usr/bin/env python3
"""The Python twin of hookscope's "logits bit-identical" check, through the real accelerate.

Loads MODEL with transformers (float32 unless --dtype says otherwise), computes the prefill
logits of PROMPT_IDS undispatched (the reference), then for each offload scenario a fresh copy
of the model dispatched by accelerate, and compares the last position's logits:

  cpu-offload   cpu_offload(model, execution_device="cpu")
  disk-offload  disk_offload(model, OUT/disk, execution_device="cpu")
  mixed         dispatch_model(model, {...: "cpu" | "disk"}, main_device="cpu",
                               offload_dir=OUT/mixed, force_hooks=True)

usage: offload_logits.py --model DIR --prompt-ids 5,17,99 --out DIR [--dtype f32|bf16|f16]
stdout: {"torch": version, "accelerate": version,
         "scenarios": {name: {"identical": bool, "max_abs_diff": float}}}
"""
import argparse
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import accelerate  # noqa: E402
import torch  # noqa: E402
from accelerate import cpu_offload, disk_offload, dispatch_model  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def load(path, dtype):
    # Eager attention: the path hookscope's port computes.
    return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, attn_implementation="eager").eval()


def prefill(model, ids):
    with torch.inference_mode():
        return model(ids, use_cache=True).logits[0, -1].detach().clone()


def mixed_map(model):
    """Blocks alternate between cpu and disk; everything else stays on cpu."""
    names = [n for n, _ in model.named_children()]
    dm = {}
    base = model.model
    for n, _ in base.named_children():
        if n == "layers":
            for i in range(len(base.layers)):
                dm[f"model.layers.{i}"] = "disk" if i % 2 == 0 else "cpu"
        else:
            dm[f"model.{n}"] = "cpu"
    for n in names:
        if n != "model":
            dm[n] = "cpu"
    return dm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    a = ap.parse_args()
    dtype = DTYPES[a.dtype]
    ids = torch.tensor([[int(t) for t in a.prompt_ids.split(",")]], dtype=torch.int64)
    ref = prefill(load(a.model, dtype), ids)

    runs = {
        "cpu-offload": lambda m: cpu_offload(m, execution_device="cpu"),
        "disk-offload": lambda m: disk_offload(m, os.path.join(a.out, "disk"), execution_device="cpu"),
        "mixed": lambda m: dispatch_model(m, mixed_map(m), main_device="cpu",
                                          offload_dir=os.path.join(a.out, "mixed"), force_hooks=True),
    }
    result = {"torch": torch.__version__, "accelerate": accelerate.__version__, "scenarios": {}}
    for name, dispatch in runs.items():
        model = load(a.model, dtype)
        dispatch(model)
        got = prefill(model, ids)
        diff = (got.float() - ref.float()).abs().max().item()
        result["scenarios"][name] = {"identical": bool(torch.equal(got, ref)), "max_abs_diff": diff}
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
