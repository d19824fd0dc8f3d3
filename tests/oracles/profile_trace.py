#!/usr/bin/env python3
"""A real torch.profiler (Kineto) Chrome trace of a tiny transformers Llama, for the importer tests.

Writes <out>/trace.json (torch.profiler's export_chrome_trace) and <out>/trace.json.gz (the same
bytes, gzip-compressed). The profiled work:
  - greedy generation (prefill + 2 decode steps) inside `hookscope::generate` / `hookscope::step`
    ranges, with forward pre/post hooks on the decoder layers that open `hookscope::pre_forward`,
    `hookscope::weight_onload`, `hookscope::send_to_device`, `hookscope::weight_offload` and
    `hookscope::post_forward` ranges the way the torch engine's driver does (docs/torch-engine.md);
  - two calls of a torch.compile(backend="eager") function with a graph break, so Dynamo's
    "Torch-Compiled Region: F/C" ranges appear (nested: the resumed frame runs inside the first);
  - profile_memory=True ([memory] instants), record_shapes=True (Input Dims), with_stack=True
    (python_function events).
Prints a JSON summary, read with json.load (floats as Decimal): {"trace", "trace_gz", "torch",
"base_ns", "events_by_cat", "hookscope_ranges", "compiled_regions", "sample"}; "sample" lists
cpu_op, user_annotation and python_function slices with their exact start_ns / end_ns
(baseTimeNanoseconds + ts * 1000).
"""
import argparse
import collections
import decimal
import gzip
import json
import os
import shutil

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

PROMPT = [5, 17, 99, 3, 250, 42]


def tiny_llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def add_hook_ranges(model):
    """Pre/post forward hooks on each decoder layer that open the driver's hookscope:: ranges."""
    for i, layer in enumerate(model.model.layers):
        fqn = f"model.layers.{i}"
        weight = layer.mlp.up_proj.weight

        def pre(mod, args, fqn=fqn, weight=weight):
            with record_function(f"hookscope::pre_forward hook=AlignDevicesHook module={fqn} device=cpu"):
                with record_function(f"hookscope::weight_onload module={fqn} tensor=mlp.up_proj.weight "
                                     f"bytes={weight.nbytes} dtype=float32 source=cpu device=cpu"):
                    weight.data.clone()
                x = args[0]
                with record_function(f"hookscope::send_to_device module={fqn} bytes={x.nbytes} src=cpu dst=cpu"):
                    x.to("cpu", copy=True)

        def post(mod, args, out, fqn=fqn, weight=weight):
            with record_function(f"hookscope::post_forward hook=AlignDevicesHook module={fqn} device=cpu"):
                with record_function(f"hookscope::weight_offload module={fqn} tensor=mlp.up_proj.weight "
                                     f"bytes={weight.nbytes} dtype=float32 device=meta"):
                    torch.empty_like(weight)

        layer.register_forward_pre_hook(pre)
        layer.register_forward_hook(post)
    # The root module's hook: its FQN is '' (written <root>).
    model.register_forward_pre_hook(lambda mod, args: None)


def compiled_fn():
    def f(x):
        y = torch.nn.functional.gelu(x) * 2
        torch._dynamo.graph_break()
        return y.sin() + 1
    return torch.compile(f, backend="eager")


@torch.no_grad()
def generate(model, steps):
    ids = torch.tensor([PROMPT])
    past = None
    with record_function("hookscope::generate cell=c0 repeat=0"):
        for step in range(steps):
            out = model(input_ids=ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            token = int(out.logits[0, -1].argmax())
            with record_function(f"hookscope::step step={step} token={token}"):
                ids = torch.tensor([[token]])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    model = tiny_llama()
    add_hook_ranges(model)
    fn = compiled_fn()
    fn(torch.randn(4, 8))  # compile outside the profile
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        generate(model, steps=3)
        fn(torch.randn(4, 8))
        fn(torch.randn(4, 8))
    trace = os.path.join(args.out, "trace.json")
    prof.export_chrome_trace(trace)
    with open(trace, "rb") as src, gzip.open(trace + ".gz", "wb") as dst:
        shutil.copyfileobj(src, dst)

    # Exact times through Decimal: base + ts * 1000 ns, never a float.
    with open(trace) as f:
        doc = json.load(f, parse_float=decimal.Decimal)
    events, base = doc["traceEvents"], int(doc.get("baseTimeNanoseconds", 0))
    by_cat = collections.Counter(e.get("cat", "(ph %s)" % e.get("ph")) for e in events)
    slices = [e for e in events if e.get("ph") == "X"]
    hs = collections.Counter(e["name"].split(" ")[0] for e in slices if e["name"].startswith("hookscope::"))
    regions = collections.Counter(e["name"] for e in slices if e["name"].startswith("Torch-Compiled Region"))

    def exact(e):
        start = base + int(e["ts"] * 1000)
        return {"cat": e["cat"], "name": e["name"], "pid": e["pid"], "tid": e["tid"], "start_ns": start,
                "end_ns": start + int(e["dur"] * 1000)}
    sample = [exact(e) for e in slices if e["cat"] == "cpu_op"][:25]
    sample += [exact(e) for e in slices if e["cat"] in ("user_annotation", "python_function")][:60]
    print(json.dumps({"trace": trace, "trace_gz": trace + ".gz", "torch": torch.__version__, "base_ns": base,
                      "events_by_cat": by_cat, "hookscope_ranges": hs, "compiled_regions": regions,
                      "sample": sample}, indent=1))


if __name__ == "__main__":
    main()
