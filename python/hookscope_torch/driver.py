"""One process, one policy: every cell of the spec through real transformers, accelerate and
torch.compile, one results.jsonl line per cell (docs/torch-engine.md).

Per process: the policy is applied before anything is dispatched; the undispatched checkpoint
gives the reference (prefill logits, argmax, greedy tokens). Per scenario: the checkpoint is
loaded and dispatched once and shared by the scenario's consecutive cells. Per cell: Dynamo is
reset, a ``hookscope_cell`` marker goes into the TORCH_TRACE log, then

- eager: a first generate (facts: argmax, logits, params on meta), warm-ups, measured repeats;
- compiled: ``torch._dynamo.explain`` of the prefill forward (once per scenario: it depends on
  neither mode nor fullgraph), then ``model.forward = torch.compile(forward, ...)``; the first
  generate compiles (its prefill is compile_time_s; fullgraph refusals end the cell as
  ``unsupported``), then warm-ups and repeats each run eager then compiled on the same model
  (A B A B), so drift favours neither;
- one more generate under torch.profiler, with the hook ranges installed: trace-<id>.json.

A failure in one cell is that cell's ``failed`` line; the next cell starts from a clean Dynamo.
"""
from __future__ import annotations

import json
import sys
import time

from hookscope_torch import dynamo_facts, measure, progress
from hookscope_torch.cells import run_cell
from hookscope_torch.process import Driver, Reference
from hookscope_torch.spec import Spec


def run(spec: Spec) -> int:
    """Runs every cell of `spec`; returns the process exit status."""
    t0 = time.perf_counter()
    d = Driver(spec)
    v = d.versions
    progress(f"policy {spec.policy}: torch {v['torch']}, transformers {v['transformers']}, accelerate "
             f"{v['accelerate']} ({v['accelerate_file']}), device {v['device']}")
    ref = Reference(spec, d.main, d.sync)
    progress(f"reference ({ref.dtype}): {ref.ids.shape[1]} prompt tokens, prefill argmax {ref.argmax}, "
             f"tokens {ref.tokens}")
    out = spec.out_dir / "results.jsonl"
    with open(out, "w", encoding="utf-8") as f:
        for i, cell in enumerate(spec.cells):
            progress(f"cell {cell.id} ({i + 1}/{len(spec.cells)}): {cell.label()}")
            r = run_cell(d, ref, cell)
            f.write(json.dumps(r) + "\n")
            f.flush()
            progress(f"cell {cell.id} done: {summary(r)}")
    progress(f"done: {len(spec.cells)} cells in {time.perf_counter() - t0:.1f} s, results in {out}")
    return 0


def serve(spec: Spec) -> int:
    """`serve`: the cells come one per line on stdin ({"cell": {...}}), each answered on the
    reply channel by {"type": "result", "id": ..., **result} (and appended to results.jsonl);
    stdin's end ends the process. One cell at a time, so the CLI decides the order (and
    interleaves policies) while only one process works."""
    import hookscope_torch as pkg
    from hookscope_torch.spec import parse_cell
    d = Driver(spec)
    v = d.versions
    progress(f"policy {spec.policy}: torch {v['torch']}, transformers {v['transformers']}, accelerate "
             f"{v['accelerate']} ({v['accelerate_file']}), device {v['device']}")
    ref = Reference(spec, d.main, d.sync)
    progress(f"reference ({ref.dtype}): {ref.ids.shape[1]} prompt tokens, prefill argmax {ref.argmax}")
    with open(spec.out_dir / "results.jsonl", "a", encoding="utf-8") as f:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                cell = parse_cell(json.loads(line).get("cell"), "request")
            except (ValueError, AttributeError) as e:
                pkg.reply({"type": "fatal", "error": f"bad request {line.strip()[:200]!r}: {e}"})
                return 2
            r = run_cell(d, ref, cell)
            f.write(json.dumps(r) + "\n")
            f.flush()
            progress(f"cell {cell.id} done: {summary(r)}")
            pkg.reply({"type": "result", "id": cell.id, "out_dir": str(spec.out_dir),
                       "torch_trace_dir": str(spec.out_dir / "torch_trace"), **r})
    return 0


def summary(r: dict) -> str:
    if r["status"] == "failed":
        return f"failed: {r['error']}"
    if r["status"] == "unsupported":
        return f"unsupported (fullgraph): {dynamo_facts.gb_type(r['error'] or '')}"
    parts = ["ok"]
    if r["graph_break_count"] is not None:
        parts.append(f"{r['graph_break_count']} breaks, {r['graph_count']} graphs")
    lat = measure.stats(r["latency"]["decode_ms_per_token"] if r["latency"] else [])
    if lat:
        parts.append(f"decode {lat['median']:.2f} ms/token")
    eager = measure.stats(r["eager_latency"]["decode_ms_per_token"] if r["eager_latency"] else [])
    if eager:
        parts.append(f"eager {eager['median']:.2f} ms/token")
    return ", ".join(parts)
