"""Oracle for the torch engine: torch._dynamo.explain and a fullgraph=True compile of a tiny
checkpoint dispatched by accelerate itself, in this process, independently of the driver.

    dynamo_explain.py --model DIR --scenario sharded|cpu-offload --policy whole-hook|offload-only
                      --prompt-ids 1,2,3 [--offload-dir DIR]

explain runs on the prefill forward with the arguments greedy generate passes it.
Prints {"graph_count", "graph_break_count", "fullgraph_ok", "fullgraph_error", "gb_codes"} as
JSON. `sharded` on a machine without accelerators is what the engine runs there: every block
on the cpu with force_hooks=True. offload-only applies the repository's runtime patch (tested
against the seed's change by offload_only_test.py) before anything is dispatched.
"""
import argparse
import copy
import functools
import json
import os
import re
import sys

import torch
import accelerate
from transformers import AutoModelForCausalLM


def holds_tensors(module):
    return next(module.parameters(), None) is not None or next(module.buffers(), None) is not None


def sharded_map(model):
    """Every block on the cpu, whatever the architecture names them: each decoder layer (the items
    of the base model's ModuleList: Llama's model.layers, GPT-2's transformer.h), the base model's
    other children and the model's own (lm_head) that hold weights or buffers."""
    prefix = model.base_model_prefix
    device_map = {}
    for name, child in getattr(model, prefix).named_children():
        if isinstance(child, torch.nn.ModuleList):
            device_map.update({f"{prefix}.{name}.{i}": "cpu" for i in range(len(child))})
        elif holds_tensors(child):
            device_map[f"{prefix}.{name}"] = "cpu"
    device_map.update({n: "cpu" for n, c in model.named_children() if n != prefix and holds_tensors(c)})
    return device_map


def dispatch(model, scenario, offload_dir):
    if scenario == "sharded":
        accelerate.dispatch_model(model, sharded_map(model), force_hooks=True)
    elif scenario == "cpu-offload":
        accelerate.cpu_offload(model, execution_device=torch.device("cpu"))
    elif scenario == "disk-offload":
        accelerate.disk_offload(model, offload_dir, execution_device=torch.device("cpu"))
    else:
        raise SystemExit(f"unknown scenario {scenario}")


def prefill_kwargs(model, ids):
    """The keyword arguments greedy `generate` passes to the prefill forward (its cache still
    empty): what a compiled generate's first call sees."""
    seen = {}
    hooked = model.forward

    # functools.wraps keeps forward's signature visible: generate inspects it to decide what to
    # pass (position_ids, logits_to_keep), and Dynamo's graphs depend on those arguments.
    @functools.wraps(hooked)
    def spy(*args, **kwargs):
        if not seen:
            seen.update(copy.deepcopy(kwargs))
        return hooked(*args, **kwargs)

    model.forward = spy
    try:
        model.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False, cache_implementation="dynamic",
                       disable_compile=True, pad_token_id=model.config.pad_token_id or model.config.eos_token_id or 0)
    finally:
        model.forward = hooked
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--policy", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--offload-dir", default="/tmp/hs-oracle-offload")
    a = ap.parse_args()
    if a.policy == "offload-only":
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
        from hookscope_torch import offload_only
        offload_only.apply()
    ids = torch.tensor([[int(x) for x in a.prompt_ids.split(",")]])
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, local_files_only=True).eval()
    dispatch(model, a.scenario, a.offload_dir)
    with torch.no_grad():
        kwargs = prefill_kwargs(model, ids)  # also initialises accelerate's lazy compiler-disable wrappers
        ex = torch._dynamo.explain(model)(**copy.deepcopy(kwargs))
        torch._dynamo.reset()
        ok, err = True, None
        try:
            torch.compile(model, fullgraph=True, backend="eager")(**copy.deepcopy(kwargs))
        except Exception as e:  # Dynamo's Unsupported (a fullgraph refusal)
            ok, err = False, str(e).splitlines()[0]
    codes = sorted({m for r in ex.break_reasons for m in re.findall(r"GB\d{4}", str(r.reason))})
    json.dump({"graph_count": ex.graph_count, "graph_break_count": ex.graph_break_count, "fullgraph_ok": ok,
               "fullgraph_error": err, "gb_codes": codes}, sys.stdout)


if __name__ == "__main__":
    main()
