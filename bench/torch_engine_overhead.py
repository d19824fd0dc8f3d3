"""The torch engine's recording overhead: greedy generate of the same dispatched model with
torch.profiler + hookscope's hook ranges on, against the same generate with both off,
interleaved (off, on, off, on, ...) so machine drift favours neither; prints the ratio, and
the same for each part alone, so the cost can be attributed:

    ranges          hookscope's hook ranges (Instrumentation) with no profiler: the wrappers' cost
    profiler        torch.profiler, CPU activity only
    +record_shapes  ... with record_shapes=True
    +profile_memory ... with profile_memory=True
    +ranges         the profiler (CPU only) with the hook ranges: what the ranges cost while recorded
    engine          what `hookscope capture --engine torch` records (measure.py's profiled()):
                    the ranges and the profiler with record_shapes and profile_memory

    PYTHONPATH=python .venv/bin/python bench/torch_engine_overhead.py --model DIR \
        [--scenario sharded|cpu-offload] [--tokens 8] [--repeats 5] [--variants engine,...]

A benchmark, not a test: it reports, it asserts nothing. Issue 36's target: engine <= 1.10x.
"""
import argparse
import contextlib
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from hookscope_torch import scenarios
from hookscope_torch.instrument import Instrumentation


def generate(model, ids, tokens):
    t0 = time.perf_counter()
    with torch.no_grad():
        model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    return (time.perf_counter() - t0) * 1e3


def recording(model, variant):
    """The context one "on" generate runs in, for `variant`."""
    stack = contextlib.ExitStack()
    if variant in ("ranges", "+ranges", "engine"):
        stack.enter_context(Instrumentation(model))
    if variant != "ranges":
        shapes = variant in ("+record_shapes", "engine")
        memory = variant in ("+profile_memory", "engine")
        stack.enter_context(profile(activities=[ProfilerActivity.CPU], record_shapes=shapes, profile_memory=memory))
        stack.enter_context(record_function("hookscope::generate cell=bench repeat=0"))
    return stack


VARIANTS = ("ranges", "profiler", "+record_shapes", "+profile_memory", "+ranges", "engine")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--scenario", default="sharded")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    a = ap.parse_args()
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"--variants: unknown variant {v!r} (known: {', '.join(VARIANTS)})")
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        prep = scenarios.prepare(a.scenario, Path(a.model), [], Path(tmp))
        model = prep.model
        ids = torch.tensor([[1, 504, 3458, 282, 4649, 314]])
        generate(model, ids, a.tokens)  # warm-up
        off = {v: [] for v in variants}
        on = {v: [] for v in variants}
        for _ in range(a.repeats):
            for v in variants:  # each variant paired with an "off" generate next to it
                off[v].append(generate(model, ids, a.tokens))
                with recording(model, v):
                    on[v].append(generate(model, ids, a.tokens))
    print(f"torch engine recording overhead ({a.scenario}, {a.tokens} tokens, {a.repeats} interleaved pairs per "
          f"variant, 1 thread):")
    result = {"scenario": a.scenario, "tokens": a.tokens, "repeats": a.repeats, "target_engine_ratio": 1.10}
    for v in variants:
        # Paired: each "on" against the "off" just before it, the median of the ratios.
        ratio = statistics.median(n / f for n, f in zip(on[v], off[v]))
        result[v] = {"off_ms": round(statistics.median(off[v]), 1), "on_ms": round(statistics.median(on[v]), 1),
                     "ratio": round(ratio, 3)}
        print(f"  {v:16s} off {result[v]['off_ms']:8.1f} ms  on {result[v]['on_ms']:8.1f} ms  ratio {ratio:.3f}x"
              + ("   (target <= 1.10x)" if v == "engine" else ""))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
