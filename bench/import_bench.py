#!/usr/bin/env python3
"""Kineto trace import: hookscope's streaming importer vs json.load and orjson.loads of the same file.

A real torch.profiler trace of a tiny Llama (tests/oracles/profile_trace.py) is recorded once,
then its events are repeated (times shifted) into a large trace of about --mb MB. In one run, in
interleaved rounds (the fastest of each side kept):
  - bench_import (hookscope's importer into a fresh capture, SQLite rows included);
  - json.load(file) and orjson.loads(bytes), each in a fresh Python process (parse only);
each with seconds, events/s and peak RSS. Prints the ratios against both peers and the file
size, with issue 36's targets beside them. No assertions: a measurement.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PARSE_ONLY = r"""
import json, resource, sys, time
if sys.argv[2] == "orjson":
    import orjson
    t0 = time.perf_counter()
    with open(sys.argv[1], "rb") as f:
        doc = orjson.loads(f.read())
else:
    t0 = time.perf_counter()
    with open(sys.argv[1]) as f:
        doc = json.load(f)
dt = time.perf_counter() - t0
n = len(doc["traceEvents"])
print(json.dumps({"events": n, "seconds": dt, "events_per_s": n / dt,
                  "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def seed_trace(work):
    seed = os.path.join(work, "seed")
    trace = os.path.join(seed, "trace.json")
    if not os.path.exists(trace):
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/oracles/profile_trace.py"), "--out", seed],
                       check=True, stdout=subprocess.DEVNULL)
    return trace


def write_big_trace(seed, path, mb):
    """Repeats the seed's timed events, each copy shifted past the previous one, to ~mb MB."""
    with open(seed) as f:
        doc = json.load(f)
    events = [e for e in doc.pop("traceEvents") if e.get("ph") != "M" and isinstance(e.get("pid"), int)]
    start = min(e["ts"] for e in events)
    span = max(e["ts"] + e.get("dur", 0) for e in events) - start + 1000.0
    chunk = ",\n".join(json.dumps(e) for e in events).encode()
    copies = max(1, int(mb * 1e6 / len(chunk)))
    with open(path, "w") as out:
        head = json.dumps(doc)[:-1]  # the seed's other keys, object left open
        out.write(head + ', "traceEvents": [\n')
        for k in range(copies):
            shifted = []
            for e in events:
                e = dict(e)
                e["ts"] = round(e["ts"] + k * span, 3)
                shifted.append(json.dumps(e))
            out.write((",\n" if k else "") + ",\n".join(shifted))
        out.write("\n]}\n")
    return copies * len(events)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="the bench_import binary")
    ap.add_argument("--dir", required=True, help="work folder (the trace and captures go here)")
    ap.add_argument("--mb", type=float, default=200.0, help="size of the generated trace")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the fastest of each side is kept")
    args = ap.parse_args()
    work = os.path.join(args.dir, "import_bench")
    os.makedirs(work, exist_ok=True)
    big = os.path.join(work, "big.json")
    events = write_big_trace(seed_trace(work), big, args.mb)
    size = os.path.getsize(big)
    print(f"trace: {size / 1e6:.0f} MB, {events} events (a real torch.profiler trace, repeated)")

    def run(cmd):
        return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)

    # Interleaved rounds, the fastest of each kept (the machines are noisy).
    sides = {
        "hookscope import (simdjson + SQLite rows)": [args.bench, big, os.path.join(work, "capture.hscope")],
        "python json.load (parse only)": [sys.executable, "-c", PARSE_ONLY, big, "json"],
        "orjson.loads (parse only)": [sys.executable, "-c", PARSE_ONLY, big, "orjson"],
    }
    best = {}
    for _ in range(args.rounds):
        for name, cmd in sides.items():
            r = run(cmd)
            if name not in best or r["seconds"] < best[name]["seconds"]:
                best[name] = r
    for name, r in best.items():
        print(f"  {name:42s} {r['seconds']:7.2f} s  {r['events_per_s'] / 1e3:8.1f} k events/s  "
              f"peak RSS {r['peak_rss_bytes'] / 1e6:7.0f} MB = {r['peak_rss_bytes'] / size:5.2f} x file")
    hs, py, oj = best.values()
    print(f"  hookscope vs json.load: {hs['events_per_s'] / py['events_per_s']:.2f}x the events/s (target >= 10x)")
    print(f"  hookscope vs orjson.loads: {hs['events_per_s'] / oj['events_per_s']:.2f}x the events/s (target > 1x)")
    print(f"  hookscope peak RSS: {hs['peak_rss_bytes'] / size:.2f}x the file (target <= 1x)")


if __name__ == "__main__":
    main()
