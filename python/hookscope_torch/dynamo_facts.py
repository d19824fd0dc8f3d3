"""What Dynamo did, in Dynamo's own terms: ``torch._dynamo.explain``, its counters and compile
metrics, and the TORCH_TRACE markers that cut the compile log into cells.

Sources, per compiled cell:
- ``explain``: graph_count, graph_break_count (= graph_count - 1, as explain computes it),
  op_count and the break reasons, from one prefill forward of the dispatched model;
- the compiled run (every ``generate`` of the cell): ``torch._dynamo.utils.counters`` (unique
  graphs, frames) and the compile metrics Dynamo records per frame compile (recompiles, recompile
  limit hits, frames that ran eagerly after a failed compile, Inductor's cudagraph skips).
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import re
from typing import Any, Callable, Iterator, Optional

import torch
import torch._dynamo
import torch._logging
from torch._dynamo.utils import counters

_GB_CODE = re.compile(r"/gb/(gb\d+)\.html", re.IGNORECASE)
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
_DISABLED_FN = re.compile(r"Skip calling function `<function ([\w.<>]+)")
_RECOMPILE_LIMIT = "Dynamo recompile limit exceeded"
METRICS_LIMIT = 1_000_000


def mark_cell(cell_id: str) -> None:
    """Writes the ``hookscope_cell`` artifact that starts a cell's records in the TORCH_TRACE log."""
    torch._logging.trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": "hookscope_cell", "encoding": "json"},
        payload_fn=lambda: json.dumps({"cell": cell_id}),
    )


@contextlib.contextmanager
def trace_log_paused() -> Iterator[None]:
    """Keeps Dynamo's structured records out of the TORCH_TRACE log for the duration (the explain
    run: its compiles are not the cell's; its findings are in results.jsonl)."""
    trace_log = torch._logging._internal.trace_log
    handlers = list(trace_log.handlers)
    for h in handlers:
        trace_log.removeHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            trace_log.addHandler(h)


def gb_code(text: str) -> Optional[str]:
    """The first graph-break code Dynamo's message links to ("GB0098"), or None."""
    m = _GB_CODE.search(text)
    return m.group(1).upper() if m else None


def gb_type(text: str) -> str:
    """Dynamo's one-line break type: the message's first line ("Skip calling `torch.compiler.disable()`d function")."""
    return text.strip().splitlines()[0] if text.strip() else ""


def _frame(fs: Any) -> str:
    path = fs.filename
    cut = path.rfind("site-packages/")
    if cut >= 0:
        path = path[cut + len("site-packages/"):]
    return f"{path}:{fs.lineno} in {fs.name}"


def break_reason(reason: str, user_stack: list) -> dict:
    """One break as results.jsonl lists it (before grouping). Addresses (" at 0x7f…") are masked so
    breaks at instances of the same hook group together."""
    text = _ADDRESS.sub("", reason)
    fn = _DISABLED_FN.search(reason)
    return {"reason": text, "gb_type": gb_type(text), "gb_code": gb_code(text),
            "user_frame": _frame(user_stack[-1]) if user_stack else None,
            "function": fn.group(1) if fn else None}


def group_breaks(items: list[dict]) -> list[dict]:
    """Identical breaks once, with a count, in first-seen order."""
    counts: collections.OrderedDict[tuple, dict] = collections.OrderedDict()
    for b in items:
        key = (b["reason"], b["user_frame"])
        if key in counts:
            counts[key]["count"] += 1
        else:
            counts[key] = dict(b, count=1)
    return list(counts.values())


@dataclasses.dataclass
class ExplainFacts:
    graph_count: int
    graph_break_count: int
    op_count: int
    break_reasons: list[dict]


def explain(fn: Callable[..., Any], kwargs: dict) -> ExplainFacts:
    """``torch._dynamo.explain(fn)(**kwargs)``, its records kept out of the compile log."""
    with trace_log_paused(), torch.no_grad():
        ex = torch._dynamo.explain(fn)(**kwargs)
    reasons = [break_reason(r.reason, r.user_stack) for r in ex.break_reasons]
    return ExplainFacts(ex.graph_count, ex.graph_break_count, ex.op_count, group_breaks(reasons))


def reset() -> None:
    """Forgets every compiled frame, the counters and the compile metrics (between cells)."""
    torch._dynamo.reset()
    counters.clear()
    torch._dynamo.utils.set_compilation_metrics_limit(METRICS_LIMIT)
    torch._dynamo.utils.clear_compilation_metrics()


def _short(text: Optional[str]) -> str:
    return gb_type(_ADDRESS.sub("", text or ""))


def run_facts() -> dict:
    """What the compiled run did since the last reset(), under results.jsonl's names."""
    metrics = torch._dynamo.utils.get_compilation_metrics()
    limit_hits = [m for m in metrics if m.fail_reason and m.fail_reason.startswith(_RECOMPILE_LIMIT)]
    failed = [m for m in metrics if m.fail_type and m not in limit_hits]
    recompiles = [m for m in metrics if m.recompile_reason and m not in limit_hits]
    skipped = [{"frame": f"{m.co_name} ({_frame_file(m)})", "compile_id": m.compile_id,
                "gb_code": gb_code(m.fail_reason or ""), "reason": _short(m.fail_reason),
                "nested_gb_codes": sorted(set(c.upper() for c in _GB_CODE.findall(m.fail_reason or "")))}
               for m in failed]
    skip_reasons = sorted({m.cudagraph_skip_reason for m in metrics if m.cudagraph_skip_reason})
    return {
        "recompiles": len(recompiles),
        "recompile_limit_hits": len(limit_hits),
        "frames_skipped": len(failed),
        "skipped_frames": skipped,
        "unique_graphs": int(counters["stats"]["unique_graphs"]),
        "frames_compiled": int(counters["frames"]["ok"]),
        "frames_total": int(counters["frames"]["total"]),
        "compile_time_total_s": round(sum(m.entire_frame_compile_time_s or 0.0 for m in metrics), 6),
        "cudagraph_skips": int(counters["inductor"]["cudagraph_skips"]),
        "cudagraph_skip_reasons": skip_reasons,
    }


def compiles_since(start: int) -> dict:
    """Recompiles and recompile-limit hits among the frame compiles after the first `start`."""
    metrics = torch._dynamo.utils.get_compilation_metrics()[start:]
    hits = [m for m in metrics if m.fail_reason and m.fail_reason.startswith(_RECOMPILE_LIMIT)]
    return {"compiles": len(metrics), "recompiles": sum(1 for m in metrics if m.recompile_reason and m not in hits),
            "recompile_limit_hits": len(hits)}


def _frame_file(m: Any) -> str:
    path = m.co_filename or "?"
    cut = path.rfind("site-packages/")
    return f"{path[cut + len('site-packages/'):] if cut >= 0 else path}:{m.co_firstlineno}"


def unsupported_error(exc: BaseException) -> bool:
    """Whether `exc` is Dynamo refusing a fullgraph capture (a result, not a failure)."""
    exc_mod = torch._dynamo.exc
    kinds = tuple(k for k in (getattr(exc_mod, "Unsupported", None), getattr(exc_mod, "FailOnRecompileLimitHit", None))
                  if k is not None)
    seen = exc
    while seen is not None:
        if isinstance(seen, kinds):
            return True
        seen = seen.__cause__
    return False
