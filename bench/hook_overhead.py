#!/usr/bin/env python3
"""Benchmark: hook overhead per hooked-module call, hookscope vs accelerate, one run.

Same module (Linear(64, 64), input [1, 64] fp32, execution device cpu) in both:
plain call, with AlignDevicesHook(execution_device=cpu), and with an offloading
AlignDevicesHook (weights materialised from a state dict for every call). Overhead =
hooked time - plain time, per call; the same on an Identity module (the hook alone, out of
the Linear's noise). Prints both sides and, per overhead, how many times lower hookscope's
is than accelerate's, with issue 36's target beside it.

  python3 bench/hook_overhead.py --bench build/bench/bench_hook_overhead
"""
import argparse
import json
import statistics
import subprocess
import time

import torch
from torch import nn
from accelerate.hooks import AlignDevicesHook, add_hook_to_module


def time_calls(module, x, seconds=0.5):
    with torch.inference_mode():
        for _ in range(50):
            module(x)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for _ in range(100):
                module(x)
            n += 100
        return (time.perf_counter() - t0) / n * 1e9


def accelerate_ns():
    def make():
        torch.manual_seed(0)
        return nn.Linear(64, 64)
    x = torch.randn(1, 64)
    plain = make()
    hooked = make()
    add_hook_to_module(hooked, AlignDevicesHook(execution_device="cpu"))
    off = make()
    add_hook_to_module(off, AlignDevicesHook(execution_device="cpu", offload=True, weights_map=off.state_dict()))
    ident = nn.Identity()
    ident_hooked = nn.Identity()
    add_hook_to_module(ident_hooked, AlignDevicesHook(execution_device="cpu"))
    return {"plain": time_calls(plain, x), "hooked": time_calls(hooked, x), "offloaded": time_calls(off, x),
            "identity_plain": time_calls(ident, x), "identity_hooked": time_calls(ident_hooked, x)}


def hookscope_ns(exe):
    out = subprocess.run([exe, "--benchmark_format=json"], capture_output=True, text=True, check=True).stdout
    res = {}
    for b in json.loads(out)["benchmarks"]:
        unit = {"ns": 1, "us": 1e3, "ms": 1e6}[b["time_unit"]]
        res[b["name"].replace("BM_", "").split("/")[0]] = b["real_time"] * unit
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", required=True, help="path of bench_hook_overhead")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    hs, acc = [], []
    for _ in range(args.repeats):  # interleaved, so machine drift hits both sides
        hs.append(hookscope_ns(args.bench))
        acc.append(accelerate_ns())
    med = lambda rows, k: statistics.median(r[k] for r in rows)  # noqa: E731
    report = {}
    for side, rows in (("hookscope", hs), ("accelerate", acc)):
        report[side] = {k: round(med(rows, k), 1)
                        for k in ("plain", "hooked", "offloaded", "identity_plain", "identity_hooked")}
        report[side]["overhead_hooked_ns"] = round(report[side]["hooked"] - report[side]["plain"], 1)
        report[side]["overhead_offloaded_ns"] = round(report[side]["offloaded"] - report[side]["plain"], 1)
        report[side]["overhead_identity_hooked_ns"] = round(
            report[side]["identity_hooked"] - report[side]["identity_plain"], 1)
    # Issue 36's targets, as "times lower than accelerate": >= 100x per hooked call (the
    # Identity pair measures the hook alone, without the Linear's ~2 us of noise), >= 50x offloaded.
    targets = {"overhead_identity_hooked_ns": 100, "overhead_hooked_ns": 100, "overhead_offloaded_ns": 50}
    for k, target in targets.items():
        times_lower = report["accelerate"][k] / max(report["hookscope"][k], 1e-9)
        report[f"{k[:-3]}_times_lower_than_accelerate"] = {"measured": round(times_lower, 1), "target": target}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
