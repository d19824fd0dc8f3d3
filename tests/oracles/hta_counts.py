#!/usr/bin/env python3
"""Holistic Trace Analysis reads `hookscope export --format chrome` traces; SQL says what they hold.

Counts (default): parses TRACE_DIR with HTA's parser (`hta.common.trace.Trace`, one file per rank,
the rank in `distributedInfo`; before `TraceAnalysis`' filter, which drops what starts after the
last ProfilerStep), counts the events HTA keeps per category (its parser keeps the complete
events: those with a `dur` and a `cat`), and computes from the capture with SQL how many events of
each category the exporter should have written for the run the file names (`hookscope.run`):

  user_annotation      HOOK_EVENTS + WEIGHT_SWAPS + TRANSFERS + DISABLED_SCOPES + GENERATION_STEPS
                       + COMPILE_REGIONS without a compile id + CPU_OPS of that category
                       + one ProfilerStep#N per GENERATION_STEPS row (facts/iterations.h)
  cpu_op               COMPILE_REGIONS with a compile id + CPU_OPS of that category
  gpu_user_annotation  MODULE_COMPUTE + CPU_OPS of that category
  hookscope_transfer   2 per TRANSFERS row that moves bytes between two devices
  kernel, gpu_memcpy, gpu_memset, cuda_sync, cuda_runtime, cuda_driver: the CUPTI tables

for a capture whose CPU_OPS carry no hookscope:: ranges (the exporter writes those kinds once,
through CPU_OPS, when they do; checked). Prints one JSON line:
{"RANK": {"run": R, "hta": {cat: n}, "sql": {cat: n}}}.

--analyses: runs HTA's own analyses on the traces as a user does (`TraceAnalysis(trace_dir=...)`,
ns timestamps kept: HTA_DISABLE_NS_ROUNDING=1) and prints what they found, per rank, for the
test to check against the capture:

  "iterations"   TraceAnalysis' iterations (the ProfilerStep#N it found, the last one left out
                 as HTA does by default) and get_profiler_steps();
  "steps"        per ProfilerStep#N (loaded with include_last_profiler_step=True, so every step):
                 "n", "start_ns" / "end_ns" (the file's µs on its baseTimeNanoseconds), and what
                 HTA assigns to that iteration: "annotations" (hookscope:: user_annotation ranges
                 but the steps'), "kernels" and "kernel_ns" (cat kernel: count, summed duration);
  "temporal"     get_temporal_breakdown(): idle, compute, non-compute and kernel time, in ns;
  "idle"         get_idle_time_breakdown(): idle ns per stream and category;
  "kernels"      get_gpu_kernel_breakdown(): summed ns per kernel name (memory kernels included);
each analysis that raises (it needs GPU kernels) is {"error": "TYPE: message"} instead.
"""
import argparse
import json
import logging
import os
import sqlite3
import sys

logging.disable(logging.WARNING)

CUPTI = {
    "kernel": "CUPTI_ACTIVITY_KIND_KERNEL",
    "gpu_memcpy": "CUPTI_ACTIVITY_KIND_MEMCPY",
    "gpu_memset": "CUPTI_ACTIVITY_KIND_MEMSET",
    "cuda_sync": "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "cuda_runtime": "CUPTI_ACTIVITY_KIND_RUNTIME",
    "cuda_driver": "CUPTI_ACTIVITY_KIND_DRIVER",
}


def expected(con, run):
    def count(sql):
        return con.execute(sql, (run,)).fetchone()[0]

    carried = count("SELECT count(*) FROM CPU_OPS c JOIN StringIds s ON s.id = c.nameId "
                    "WHERE c.runId = ? AND s.value LIKE 'hookscope::%'")
    if carried:
        raise SystemExit("hta_counts: run %d's CPU_OPS carry hookscope:: ranges: not a fresh capture" % run)
    e = {}

    def add(cat, n):
        if n:
            e[cat] = e.get(cat, 0) + n

    for cat, n in con.execute("SELECT s.value, count(*) FROM CPU_OPS c JOIN StringIds s ON s.id = c.categoryId "
                              "WHERE c.runId = ? GROUP BY s.value", (run,)):
        add(cat, n)
    for table in ("HOOK_EVENTS", "WEIGHT_SWAPS", "TRANSFERS", "DISABLED_SCOPES", "GENERATION_STEPS"):
        add("user_annotation", count("SELECT count(*) FROM %s WHERE runId = ?" % table))
    add("user_annotation", count("SELECT count(*) FROM GENERATION_STEPS WHERE runId = ?"))  # ProfilerStep#N
    add("user_annotation", count("SELECT count(*) FROM COMPILE_REGIONS WHERE runId = ? AND compileId IS NULL"))
    add("cpu_op", count("SELECT count(*) FROM COMPILE_REGIONS WHERE runId = ? AND compileId IS NOT NULL"))
    add("gpu_user_annotation", count("SELECT count(*) FROM MODULE_COMPUTE WHERE runId = ?"))
    add("hookscope_transfer", 2 * count(
        "SELECT count(*) FROM TRANSFERS t JOIN StringIds a ON a.id = t.src JOIN StringIds b ON b.id = t.dst "
        "WHERE t.runId = ? AND t.bytes > 0 AND a.value != b.value"))
    for cat, table in CUPTI.items():
        add(cat, count("SELECT count(*) FROM %s WHERE runId = ?" % table))
    return e


def counts(trace_dir, db):
    from hta.common.trace import Trace
    t = Trace(trace_dir=trace_dir)
    t.parse_traces(use_multiprocessing=False)
    symbols = t.symbol_table.get_sym_table()
    con = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    out = {}
    for rank in t.get_ranks():
        df = t.get_trace(rank)
        hta = {str(k): int(v) for k, v in df["cat"].map(lambda i: symbols[i]).value_counts().items()}
        run = t.meta_data[rank]["hookscope"]["run"]
        out[str(rank)] = {"run": run, "hta": hta, "sql": expected(con, run)}
    return out


def attempt(f):
    try:
        return f()
    except Exception as e:  # noqa: BLE001 - an analysis that needs what the trace lacks
        return {"error": "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")}


def ns(us):
    return int(round(float(us) * 1000))


def steps(analyzer, rank):
    """Each ProfilerStep#N of the trace and what HTA assigns to its iteration."""
    t = analyzer.t
    df = t.get_trace(rank)
    sym = t.symbol_table.get_sym_table()
    base = t.meta_data[rank].get("baseTimeNanoseconds", 0)
    names = df["name"].map(lambda i: sym[i])
    cats = df["cat"].map(lambda i: sym[i])
    out = []
    for _, s in df[names.str.startswith("ProfilerStep#")].sort_values("ts").iterrows():
        n = int(sym[s["name"]].split("#", 1)[1])
        mine = df["iteration"] == n
        annotations = mine & cats.eq("user_annotation") & names.str.startswith("hookscope::") & \
            ~names.str.startswith("hookscope::step ")
        kernels = mine & cats.eq("kernel")
        start = base + ns(s["ts"] + t.min_ts)
        out.append({"n": n, "start_ns": start, "end_ns": start + ns(s["dur"]),
                    "annotations": int(annotations.sum()), "kernels": int(kernels.sum()),
                    "kernel_ns": ns(df[kernels]["dur"].sum())})
    return out


def temporal(analyzer, rank):
    df = analyzer.get_temporal_breakdown(visualize=False)
    row = df[df["rank"] == rank].iloc[0]
    return {k.replace("(us)", "_ns"): ns(row[k]) for k in
            ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")}


def idle(analyzer, rank):
    df, _ = analyzer.get_idle_time_breakdown(ranks=[rank], visualize=False)
    out = {}
    for _, r in df.iterrows():
        out.setdefault(str(r["stream"]), {})[str(r["idle_category"])] = ns(r["idle_time"])
    return out


def kernels(analyzer, rank):
    _, per_kernel = analyzer.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True,
                                                      duration_ratio=1.0, num_kernels=1000)
    return {str(r["name"]): ns(r["sum (us)"]) for _, r in per_kernel[per_kernel["rank"] == rank].iterrows()}


def analyses(trace_dir):
    os.environ["HTA_DISABLE_NS_ROUNDING"] = "1"
    from hta.trace_analysis import TraceAnalysis
    default = TraceAnalysis(trace_dir=trace_dir)
    every_step = TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True)
    out = {}
    for rank in default.t.get_ranks():
        out[str(rank)] = {
            "run": default.t.meta_data[rank]["hookscope"]["run"],
            "iterations": [int(i) for i in default.t.get_iterations(rank)],
            "profiler_steps": [int(i) for i in default.get_profiler_steps()],
            "steps": steps(every_step, rank),
            "temporal": attempt(lambda: temporal(default, rank)),
            "idle": attempt(lambda: idle(default, rank)),
            "kernels": attempt(lambda: kernels(default, rank)),
        }
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", required=True)
    ap.add_argument("--db")
    ap.add_argument("--analyses", action="store_true")
    a = ap.parse_args()
    if not a.analyses and not a.db:
        ap.error("--db is required without --analyses")
    out = analyses(a.trace_dir) if a.analyses else counts(a.trace_dir, a.db)
    sys.stdout.flush()
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
