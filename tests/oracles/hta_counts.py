#!/usr/bin/env python3
"""Holistic Trace Analysis reads `hookscope export --format chrome` traces; SQL says what they hold.

Loads TRACE_DIR with `hta.trace_analysis.TraceAnalysis(trace_dir=...)` (one file per rank, the
rank in `distributedInfo`), counts the events HTA keeps per category (its parser keeps the
complete events: those with a `dur` and a `cat`), and computes from the capture with SQL how many
events of each category the exporter should have written for the run the file names
(`hookscope.run`):

  user_annotation      HOOK_EVENTS + WEIGHT_SWAPS + TRANSFERS + DISABLED_SCOPES + GENERATION_STEPS
                       + COMPILE_REGIONS without a compile id + CPU_OPS of that category
  cpu_op               COMPILE_REGIONS with a compile id + CPU_OPS of that category
  gpu_user_annotation  MODULE_COMPUTE + CPU_OPS of that category
  hookscope_transfer   2 per TRANSFERS row that moves bytes between two devices
  kernel, gpu_memcpy, gpu_memset, cuda_sync, cuda_runtime, cuda_driver: the CUPTI tables

for a capture whose CPU_OPS carry no hookscope:: ranges (the exporter writes those kinds once,
through CPU_OPS, when they do; checked). Prints one JSON line:
{"RANK": {"run": R, "hta": {cat: n}, "sql": {cat: n}}}.
"""
import argparse
import json
import logging
import sqlite3

logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402

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
    add("user_annotation", count("SELECT count(*) FROM COMPILE_REGIONS WHERE runId = ? AND compileId IS NULL"))
    add("cpu_op", count("SELECT count(*) FROM COMPILE_REGIONS WHERE runId = ? AND compileId IS NOT NULL"))
    add("gpu_user_annotation", count("SELECT count(*) FROM MODULE_COMPUTE WHERE runId = ?"))
    add("hookscope_transfer", 2 * count(
        "SELECT count(*) FROM TRANSFERS t JOIN StringIds a ON a.id = t.src JOIN StringIds b ON b.id = t.dst "
        "WHERE t.runId = ? AND t.bytes > 0 AND a.value != b.value"))
    for cat, table in CUPTI.items():
        add(cat, count("SELECT count(*) FROM %s WHERE runId = ?" % table))
    return e


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--trace-dir", required=True)
    ap.add_argument("--db", required=True)
    a = ap.parse_args()
    analyzer = TraceAnalysis(trace_dir=a.trace_dir)
    t = analyzer.t
    symbols = t.symbol_table.get_sym_table()
    con = sqlite3.connect("file:%s?mode=ro" % a.db, uri=True)
    out = {}
    for rank in t.get_ranks():
        df = t.get_trace(rank)
        hta = {str(k): int(v) for k, v in df["cat"].map(lambda i: symbols[i]).value_counts().items()}
        run = t.meta_data[rank]["hookscope"]["run"]
        out[str(rank)] = {"run": run, "hta": hta, "sql": expected(con, run)}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
