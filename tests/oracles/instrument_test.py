#!/usr/bin/env python3
"""Tests of hookscope_torch.instrument: the hookscope:: ranges in a real torch.profiler trace.

usage: instrument_test.py --fixtures DIR whole-hook|offload-only

For the policy (offload-only: offload_only.apply() first), on a tiny Llama written by
transformers, dispatched with force_hooks=True and cpu- / disk-offloaded:
- a Chrome trace of one eager forward (torch.profiler, export_chrome_trace) holds one
  pre_forward and one post_forward range per hooked module, with the hook's class and execution
  device; per offloaded tensor one weight_onload (bytes and dtype of the checkpoint's tensor,
  source cpu / disk) inside its module's pre_forward and one weight_offload (to meta) inside its
  post_forward; send_to_device ranges inside a hook phase of their module, moving 0 bytes
  cpu -> cpu; every name follows the key=value grammar of docs/torch-engine.md;
- without a profiler the instrumentation records nothing and changes no logits; uninstall()
  restores accelerate's functions;
- torch._dynamo.explain gives the same graph_break_count and break types with and without the
  instrumentation (and a recording profiler), for the dispatched Llama and an offloaded toy model;
- under torch.compile (Dynamo's eager backend) whole-hook hooks still record their phases (they
  run eagerly), offload-only's traced phases record none, and its _onload_weights still records
  weight_onload ranges.
Exit status 0 when every check passes; one line per check on stdout.
"""
import argparse
import json
import os
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tiny_fixture import quiet, tiny_checkpoint  # noqa: E402

quiet()

import torch  # noqa: E402
from accelerate import cpu_offload, disk_offload, dispatch_model  # noqa: E402
from accelerate.utils import named_module_tensors  # noqa: E402
from transformers import AutoModelForCausalLM  # noqa: E402

FAILURES = []
PROMPT = [[5, 17, 99, 3, 250, 42, 7]]
NAME = re.compile(r"^hookscope::(\w+)((?: [A-Za-z_]+=\S+)*)$")
KEYS = {"pre_forward": {"hook", "module", "device"}, "post_forward": {"hook", "module", "device"},
        "weight_onload": {"module", "tensor", "bytes", "dtype", "source", "device"},
        "weight_offload": {"module", "tensor", "bytes", "dtype", "device"},
        "send_to_device": {"module", "bytes", "src", "dst"}}


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + (f": {detail}" if detail and not ok else ""), flush=True)
    if not ok:
        FAILURES.append(name)


def load(path):
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def every_block_on_cpu(model):
    dm = {f"model.{n}": "cpu" for n, _ in model.model.named_children() if n != "layers"}
    dm.update({f"model.layers.{i}": "cpu" for i in range(len(model.model.layers))})
    dm.update({n: "cpu" for n, _ in model.named_children() if n != "model"})
    return dm


def forward(model):
    with torch.no_grad():
        return model(input_ids=torch.tensor(PROMPT)).logits.detach().clone()


def traced_ranges(model, run, tmp):
    """The hookscope:: ranges of the Chrome trace of run(model): [{what, keys, ts, end}]."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        run(model)
    trace = os.path.join(tmp, "trace.json")
    prof.export_chrome_trace(trace)
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    out = []
    for e in events:
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("hookscope::"):
            m = NAME.match(e["name"])
            if m is None:
                out.append({"what": "<malformed>", "name": e["name"], "keys": {}, "ts": 0, "end": 0})
                continue
            keys = dict(kv.split("=", 1) for kv in m.group(2).split())
            out.append({"what": m.group(1), "keys": keys, "ts": float(e["ts"]),
                        "end": float(e["ts"]) + float(e["dur"]), "tid": e.get("tid")})
    return out


def inside(r, ranges, what):
    """Whether range r lies within a `what` range of the same module on the same thread."""
    return any(o["what"] == what and o["keys"].get("module") == r["keys"]["module"] and o["tid"] == r["tid"]
               and o["ts"] <= r["ts"] and r["end"] <= o["end"] for o in ranges)


def hooked(model):
    return {(name or "<root>"): m._hf_hook for name, m in model.named_modules() if hasattr(m, "_hf_hook")}


def expected_swaps(model, state):
    """{(module FQN, tensor): bytes} of every tensor an offloading hook swaps, from the checkpoint."""
    out = {}
    for fqn, hook in hooked(model).items():
        if not getattr(hook, "offload", False):
            continue
        module = model if fqn == "<root>" else model.get_submodule(fqn)
        for name, _ in named_module_tensors(module, include_buffers=hook.offload_buffers,
                                            recurse=hook.place_submodules, remove_non_persistent=True):
            t = state[name if fqn == "<root>" else f"{fqn}.{name}"]
            out[(fqn, name)] = t.numel() * t.element_size()
    return out


def check_eager_trace(label, model, state, source, tmp):
    from hookscope_torch import instrument
    with instrument.Instrumentation(model):
        ranges = traced_ranges(model, forward, tmp)
    by = Counter(r["what"] for r in ranges)
    malformed = [r for r in ranges if r["what"] not in KEYS or set(r["keys"]) != KEYS[r["what"]]]
    check(f"{label}: every range follows the contract's names and keys", not malformed and ranges,
          str(malformed[:3]))
    hooks = hooked(model)
    for phase in ("pre_forward", "post_forward"):
        got = Counter(r["keys"]["module"] for r in ranges if r["what"] == phase)
        check(f"{label}: one {phase} per hooked module", got == Counter(list(hooks)), f"{sorted(got)} vs {sorted(hooks)}")
        wrong = [r for r in ranges if r["what"] == phase and (
            r["keys"]["hook"] != type(hooks[r["keys"]["module"]]).__name__
            or r["keys"]["device"] != ("none" if hooks[r["keys"]["module"]].execution_device is None
                                       else str(torch.device(hooks[r["keys"]["module"]].execution_device))))]
        check(f"{label}: {phase} carries the hook class and execution device", not wrong, str(wrong[:2]))

    swaps = expected_swaps(model, state)
    for what, phase in (("weight_onload", "pre_forward"), ("weight_offload", "post_forward")):
        got = {(r["keys"]["module"], r["keys"]["tensor"]): int(r["keys"]["bytes"]) for r in ranges if r["what"] == what}
        n = by[what]
        check(f"{label}: one {what} per offloaded tensor with the checkpoint's bytes ({len(swaps)} tensors)",
              got == swaps and n == len(swaps), f"{n} ranges; differing: "
              f"{sorted(set(got.items()) ^ set(swaps.items()))[:4]}")
        rs = [r for r in ranges if r["what"] == what]
        check(f"{label}: {what} inside its module's {phase}", all(inside(r, ranges, phase) for r in rs))
        if what == "weight_onload":
            bad = [r for r in rs if (r["keys"]["source"], r["keys"]["device"], r["keys"]["dtype"])
                   != (source, "cpu", "float32")]
        else:
            bad = [r for r in rs if (r["keys"]["device"], r["keys"]["dtype"]) != ("meta", "float32")]
        check(f"{label}: {what} source / device / dtype", not bad, str(bad[:2]))

    sends = [r for r in ranges if r["what"] == "send_to_device"]
    bad = [r for r in sends if (r["keys"]["bytes"], r["keys"]["src"], r["keys"]["dst"]) != ("0", "cpu", "cpu")
           or not (inside(r, ranges, "pre_forward") or inside(r, ranges, "post_forward"))]
    check(f"{label}: send_to_device inside a hook phase of its module, 0 bytes cpu -> cpu ({len(sends)})",
          sends and not bad, str(bad[:2]))


def check_quiet_and_uninstall(model, tmp):
    import accelerate.hooks as hooks
    from hookscope_torch import instrument
    originals = (hooks.AlignDevicesHook.__dict__["pre_forward"], hooks.AlignDevicesHook.__dict__["post_forward"],
                 hooks.send_to_device, hooks.set_module_tensor_to_device)
    reference = forward(model)
    inst = instrument.install(model)
    inst.install()
    try:
        instrument.install(model)
        check("a second Instrumentation while one is installed is refused", False, "no error")
    except RuntimeError:
        check("a second Instrumentation while one is installed is refused", True)
    same = torch.equal(forward(model), reference)
    inst.uninstall()
    inst.uninstall()
    now = (hooks.AlignDevicesHook.__dict__["pre_forward"], hooks.AlignDevicesHook.__dict__["post_forward"],
           hooks.send_to_device, hooks.set_module_tensor_to_device)
    check("installed without a profiler: same logits", same)
    check("uninstall() restores accelerate's functions", all(a is b for a, b in zip(originals, now)))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        forward(model)
    check("after uninstall() a profiled forward has no hookscope ranges",
          not any(e.name.startswith("hookscope::") for e in prof.events()))


def explain(model, args):
    torch._dynamo.reset()
    with torch.no_grad():
        e = torch._dynamo.explain(model)(**args)
    return e.graph_break_count, [r.reason.splitlines()[0] for r in e.break_reasons]


def check_break_parity(label, model, args):
    from hookscope_torch import instrument
    explain(model, args)  # resolves accelerate's lazy compiler-disable wrappers, as in any warm run
    base = explain(model, args)
    with instrument.Instrumentation(model):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            inst = explain(model, args)
    check(f"{label}: explain graph_break_count {base[0]} and break types unchanged by the instrumentation",
          inst == base, f"{base} vs {inst}")
    return base[0]


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(16, 32), torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def check_other_hook_classes(tmp):
    """Hook classes the model carries besides AlignDevicesHook: one disabled with
    torch.compiler.disable, chained with an AlignDevicesHook through SequentialHook."""
    from accelerate.hooks import AlignDevicesHook, ModelHook, add_hook_to_module
    from hookscope_torch import instrument

    class DisabledHook(ModelHook):
        @torch.compiler.disable
        def pre_forward(self, module, *args, **kwargs):
            return args, kwargs

    toy = Toy().eval()
    add_hook_to_module(toy.a, AlignDevicesHook(execution_device="cpu"))
    add_hook_to_module(toy.a, DisabledHook(), append=True)
    args = {"x": torch.ones(2, 16)}
    explain(toy, args)  # resolves accelerate's lazy compiler-disable wrappers
    base = explain(toy, args)
    with instrument.Instrumentation(toy):
        ranges = traced_ranges(toy, lambda m: m(**args), tmp)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            inst = explain(toy, args)
    got = sorted((r["what"], r["keys"].get("hook"), r["keys"]["module"]) for r in ranges
                 if r["what"] in ("pre_forward", "post_forward"))
    want = sorted([("pre_forward", "SequentialHook", "a"), ("pre_forward", "AlignDevicesHook", "a"),
                   ("pre_forward", "DisabledHook", "a"), ("post_forward", "SequentialHook", "a"),
                   ("post_forward", "AlignDevicesHook", "a")])
    check("SequentialHook and a torch.compiler.disable'd hook class record their phases", got == want, str(got))
    check(f"... and leave explain unchanged ({base[0]} breaks)", inst == base, f"{base} vs {inst}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True, help="the build's fixture cache (build/fixtures)")
    ap.add_argument("policy", choices=["whole-hook", "offload-only"])
    args = ap.parse_args()
    from hookscope_torch import instrument, offload_only
    if args.policy == "offload-only":
        offload_only.apply()
    tmp = tempfile.mkdtemp(prefix="hookscope-instrument-")
    path = tiny_checkpoint(args.fixtures, "tiny-llama")
    state = {k: v.clone() for k, v in load(path).state_dict().items()}

    base = load(path)
    disp = dispatch_model(base, every_block_on_cpu(base), force_hooks=True)
    check_eager_trace("dispatched", disp, state, None, tmp)
    check_eager_trace("cpu-offload", cpu_offload(load(path), execution_device="cpu"), state, "cpu", tmp)
    disk = disk_offload(load(path), os.path.join(tmp, "disk"), execution_device="cpu")
    check_eager_trace("disk-offload", disk, state, "disk", tmp)
    check_quiet_and_uninstall(disk, tmp)

    breaks = check_break_parity("dispatched tiny Llama", disp, {"input_ids": torch.tensor(PROMPT)})
    check(f"dispatched: {args.policy} breaks as expected", (breaks == 0) == (args.policy == "offload-only"))
    toy = cpu_offload(Toy().eval(), execution_device="cpu")
    check_break_parity("cpu-offloaded toy model", toy, {"x": torch.ones(2, 16)})
    check_other_hook_classes(tmp)

    # Under torch.compile: disabled hook code runs eagerly and records, traced hook code does not.
    torch._dynamo.reset()
    compiled = torch.compile(disp, backend="eager")
    forward(compiled)
    with instrument.Instrumentation(disp):
        ranges = traced_ranges(compiled, forward, tmp)
    phases = sum(r["what"] in ("pre_forward", "post_forward") for r in ranges)
    if args.policy == "whole-hook":
        check("compiled whole-hook: the disabled hooks still record their phases", phases > 0)
    else:
        check("compiled offload-only: the traced hook phases record no ranges (they are in the graph)",
              phases == 0, f"{phases} phase ranges")
    torch._dynamo.reset()
    toy_compiled = torch.compile(toy, backend="eager")
    toy_compiled(torch.ones(2, 16))
    with instrument.Instrumentation(toy):
        with torch.no_grad():
            ranges = traced_ranges(toy_compiled, lambda m: m(torch.ones(2, 16)), tmp)
    onloads = [r for r in ranges if r["what"] == "weight_onload"]
    check(f"compiled {args.policy}: the offloaded toy's weight_onload ranges are recorded (4 tensors)",
          len(onloads) == 4, f"{len(onloads)}")
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
