"""hookscope's torch engine: the matrix cells of `hookscope capture --engine torch`, run through real
transformers, accelerate and torch.compile in a child process of the project's Python.

`python -m hookscope_torch run --spec SPEC.json` (docs/torch-engine.md is the contract with the
C++ CLI). Modules:

- spec: the run spec, read and checked without importing torch;
- scenarios: loading the checkpoint and dispatching it with accelerate (sharded, cpu-offload,
  disk-offload, mixed);
- measure: greedy ``generate`` timed per step, the prefill logits, the profiled generate;
- dynamo_facts: what Dynamo did (``torch._dynamo.explain``, counters, compile metrics) and the
  TORCH_TRACE cell markers;
- driver: one process, one policy, every cell of the spec, results.jsonl;
- process: what the process holds for its cells (the policy applied, the devices, the reference,
  the dispatched scenario);
- cells: one cell's measurements (imports process, never driver: no module imports back);
- offload_only: the offload-only policy (accelerate's hooks with only the offload work disabled);
- instrument: record_function ranges around accelerate's hook entry points;
- profile_inject: what `hookscope profile -- python SCRIPT.py` puts into a program
  (start() / stop() below mark its capture range).
"""

__version__ = "0.1.0"


_reply = None  # `serve`: the reply channel to the C++ CLI (a text file on HOOKSCOPE_REPLY_FD)


def progress(msg: str) -> None:
    """One progress event for the CLI: a single stderr line starting with "hookscope_torch: ",
    and under `serve` a {"type": "progress"} message on the reply channel."""
    import sys
    print(f"hookscope_torch: {msg}", file=sys.stderr, flush=True)
    if _reply is not None:
        reply({"type": "progress", "text": msg})


_last_tick = 0.0


def tick(phase: str, step: int, steps: int) -> None:
    """Where a cell is, for the CLI's live progress line (`serve` only): a {"type": "tick"}
    message naming the generate (`phase`, e.g. "measured 2/3") and the decode step, at most
    every 0.2 s so that it costs the measured generates nothing worth counting."""
    global _last_tick
    if _reply is None:
        return
    import time
    now = time.monotonic()
    if step != 0 and now - _last_tick < 0.2:
        return
    _last_tick = now
    reply({"type": "tick", "phase": phase, "step": step, "steps": steps})


def reply(message: dict) -> None:
    """One JSON line on the reply channel (`serve` only)."""
    import json
    _reply.write(json.dumps(message) + "\n")
    _reply.flush()


def start() -> None:
    """Under `hookscope profile --capture-range markers`: the profiler starts recording here (as
    nsys' cudaProfilerStart). Does nothing otherwise, so a script may call it unconditionally."""
    import sys
    inject = sys.modules.get("hookscope_torch.profile_inject")
    if inject is not None:
        inject.marker_start()


def stop() -> None:
    """The end of a capture range begun by start(): the trace of the range is written. Does
    nothing outside `hookscope profile --capture-range markers`."""
    import sys
    inject = sys.modules.get("hookscope_torch.profile_inject")
    if inject is not None:
        inject.marker_stop()
