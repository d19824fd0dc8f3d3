#!/usr/bin/env python3
"""A real TORCH_TRACE compile log, with what tlparse and torch._dynamo.explain say about it.

Writes into --out:
  torch_trace/                 the structured log torch.compile writes (TORCH_TRACE=dir), one
                               process, cut into cells by `hookscope_cell` artifacts:
                                 hooks      torch.compile(backend="eager") of a tiny Llama
                                            dispatched with accelerate's hooks (every block on
                                            cpu, force_hooks=True): one forward
                                 explain    torch._dynamo.explain of the same model and input
                                 fullgraph  the same with fullgraph=True (raises)
                                 nohooks    the same Llama without hooks (one graph, no break)
                                 nohooks-explain  torch._dynamo.explain of that one
  cells/<cell>.log             the cell's records, the log's `str` (interning) records first
  tlparse/<cell>/              tlparse's output for each cell's slice (compile_directory.json,
                               the per-compile-id folders with dynamo_graph_break_reason_N.txt)
  tlparse/all/                 tlparse's output for the whole log
and prints a JSON object: {"log": file name, "cells": [...], "explain": {cell: {graph_count,
graph_break_count, break_reasons: [reason]}} for the explain cells, "fullgraph_error": {"type",
"message"}, "tlparse_stats": {cell or "all": {"ok": n, "unknown": n, ...}} (the counts tlparse
prints), "versions": {...}}.

Before any compile, one eager forward runs: accelerate's lazy `_compiler_disable` wrappers set
their `_compiled_fn` on first call, so every cell traces the same code (otherwise the first
compiled call sees extra breaks on that setattr, and explain's count would differ from it).
"""
import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--out", required=True)
args = parser.parse_args()
out = os.path.abspath(args.out)
trace_dir = os.path.join(out, "torch_trace")
shutil.rmtree(trace_dir, ignore_errors=True)
os.makedirs(trace_dir)
# TORCH_TRACE is read when torch is imported.
os.environ["TORCH_TRACE"] = trace_dir
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import transformers  # noqa: E402
import accelerate  # noqa: E402
from accelerate import dispatch_model  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.set_num_threads(1)


def tiny_llama():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      bos_token_id=1, eos_token_id=2, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


def mark_cell(cell):
    torch._logging.trace_structured(
        "artifact",
        metadata_fn=lambda: {"name": "hookscope_cell", "encoding": "json"},
        payload_fn=lambda: json.dumps({"cell": cell}))


def explain_facts(model, ids):
    e = torch._dynamo.explain(model)(input_ids=ids)
    return {"graph_count": e.graph_count, "graph_break_count": e.graph_break_count,
            "break_reasons": [r.reason for r in e.break_reasons]}


IDS = torch.tensor([[5, 17, 99, 3, 250, 42]])
DEVICE_MAP = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "cpu",
              "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}

hooked = dispatch_model(tiny_llama(), device_map=DEVICE_MAP, force_hooks=True)
plain = tiny_llama()
facts = {"cells": ["hooks", "explain", "fullgraph", "nohooks", "nohooks-explain"], "explain": {},
         "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "accelerate": accelerate.__version__}}
with torch.no_grad():
    hooked(input_ids=IDS)  # eager warm-up (see the docstring)

    mark_cell("hooks")
    torch._dynamo.reset()
    torch.compile(hooked, backend="eager")(input_ids=IDS)

    mark_cell("explain")
    facts["explain"]["explain"] = explain_facts(hooked, IDS)

    mark_cell("fullgraph")
    torch._dynamo.reset()
    try:
        torch.compile(hooked, backend="eager", fullgraph=True)(input_ids=IDS)
        facts["fullgraph_error"] = None
    except Exception as e:  # noqa: BLE001 - the error is the fact
        facts["fullgraph_error"] = {"type": type(e).__name__, "message": str(e).split("\n")[0]}

    mark_cell("nohooks")
    torch._dynamo.reset()
    torch.compile(plain, backend="eager")(input_ids=IDS)

    mark_cell("nohooks-explain")
    facts["explain"]["nohooks-explain"] = explain_facts(plain, IDS)

for h in list(torch._logging._internal.trace_log.handlers):
    h.flush()
    with contextlib.suppress(Exception):
        h.close()
logs = [f for f in os.listdir(trace_dir) if f.endswith(".log")]
if len(logs) != 1:
    sys.exit(f"expected one log in {trace_dir}, found {logs}")
log = os.path.join(trace_dir, logs[0])
facts["log"] = logs[0]


def cut_cells(path):
    """The log's records per cell (a record: its line plus its tab-indented payload lines)."""
    strs, cells, cell = [], {}, None
    record = []

    def flush():
        if not record:
            return
        head = record[0]
        meta = json.loads(head[head.index("{"):])
        if "str" in meta:
            strs.append("".join(record))
        elif meta.get("artifact", {}).get("name") == "hookscope_cell":
            nonlocal cell
            cell = json.loads("".join(line[1:] for line in record[1:]))["cell"]
            cells[cell] = []
        elif cell is not None:
            cells[cell].append("".join(record))
        record.clear()

    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            if not line.startswith("\t"):
                flush()
            record.append(line)
    flush()
    return strs, cells


def tlparse(src, dst):
    """Runs tlparse; returns the counts it prints ("Stats { ok: 1634, unknown: 36 }")."""
    exe = os.path.join(os.path.dirname(sys.executable), "tlparse")
    shutil.rmtree(dst, ignore_errors=True)
    done = subprocess.run([exe, src, "-o", dst, "--overwrite", "--no-browser", "--plain-text"],
                          check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    stats = re.search(r"Stats \{([^}]*)\}", done.stderr)
    if not stats:
        sys.exit(f"tlparse printed no stats for {src}: {done.stderr[-2000:]}")
    return {k.strip(): int(v) for k, v in re.findall(r"(\w+): (\d+)", stats.group(1))}


strs, cells = cut_cells(log)
os.makedirs(os.path.join(out, "cells"), exist_ok=True)
for name, records in cells.items():
    path = os.path.join(out, "cells", name + ".log")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.writelines(strs + records)
    facts.setdefault("tlparse_stats", {})[name] = tlparse(path, os.path.join(out, "tlparse", name))
facts["tlparse_stats"]["all"] = tlparse(log, os.path.join(out, "tlparse", "all"))
print(json.dumps(facts, indent=1))
