"""The torch engine's recording overhead: greedy generate of the same dispatched model with
torch.profiler + hookscope's hook ranges on, against the same generate with both off,
interleaved (off, on, off, on, ...) so machine drift favours neither; prints the ratio.

    PYTHONPATH=python .venv/bin/python bench/torch_engine_overhead.py --model DIR \
        [--scenario sharded|cpu-offload] [--tokens 8] [--repeats 5]

A benchmark, not a test: it reports, it asserts nothing.
"""
import argparse
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--scenario", default="sharded")
    ap.add_argument("--tokens", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        prep = scenarios.prepare(a.scenario, Path(a.model), [], Path(tmp))
        model = prep.model
        ids = torch.tensor([[1, 504, 3458, 282, 4649, 314]])
        generate(model, ids, a.tokens)  # warm-up
        off, on = [], []
        for _ in range(a.repeats):
            off.append(generate(model, ids, a.tokens))
            with Instrumentation(model), profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                                                 profile_memory=True):
                with record_function("hookscope::generate cell=bench repeat=0"):
                    on.append(generate(model, ids, a.tokens))
    m_off, m_on = statistics.median(off), statistics.median(on)
    print(f"torch engine recording overhead ({a.scenario}, {a.tokens} tokens, {a.repeats} interleaved pairs, 1 thread):")
    print(f"  generate, recording off: median {m_off:.1f} ms (min {min(off):.1f}, max {max(off):.1f})")
    print(f"  generate, torch.profiler + hook ranges on: median {m_on:.1f} ms (min {min(on):.1f}, max {max(on):.1f})")
    print(f"  ratio on/off: {m_on / m_off:.2f}x")


if __name__ == "__main__":
    main()
