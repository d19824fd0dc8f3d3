#!/usr/bin/env python3
"""Oracle checks of the torch engine's driver (python/hookscope_torch), run as ctest tests.

  matrix    every scenario x policy x {eager, default, default fullgraph} through
            `python -m hookscope_torch` (Dynamo backend "eager"; --cells structure drops the
            non-fullgraph default cells), then, in a fresh process per policy, the same scenarios
            dispatched again from the device maps the driver reports: `torch._dynamo.explain` and
            a direct `torch.compile(..., fullgraph=True)` must give the driver's graph count,
            break count, gb codes and fullgraph outcome (Dynamo's message); offload runs keep their
            parameters on meta and report the logits comparison the oracle makes directly; every
            line has the documented keys; the traces hold the generate/step (and hook) ranges and
            the TORCH_TRACE log a hookscope_cell marker per cell, in order.
  inductor  one real Inductor cell (mode reduce-overhead, fullgraph, offload-only sharded):
            compiles, runs, reports compile time and what Inductor did with CUDA graphs.
  tree      policy accelerate:NAME with the installed accelerate copied to a folder: the driver
            imports that copy; a cell with an unknown backend fails alone.
  bad-spec  a missing model, an unknown scenario/mode/policy/dtype, a bad accelerate_path, bad
            threads, fullgraph in eager mode: each exits 2 with a message naming the problem.

Fixtures (tiny checkpoints written by transformers) are made once per build under --fixtures,
under the same lock the C++ tests use. Exits 1 listing every mismatch.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tiny_fixture import quiet, tiny_checkpoint  # noqa: E402

quiet()
SCENARIOS = ("sharded", "cpu-offload", "disk-offload", "mixed")
POLICIES = ("whole-hook", "offload-only")
MAX_NEW_TOKENS = 2
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")
# The keys docs/torch-engine.md promises on every results.jsonl line.
CONTRACT_KEYS = {
    "cell", "scenario", "policy", "mode", "fullgraph", "engine", "backend", "status", "error", "graph_count",
    "graph_break_count", "op_count", "break_reasons", "recompiles", "recompile_limit_hits", "frames_skipped",
    "skipped_frames", "unique_graphs", "frames_compiled", "frames_total", "compile_time_s", "compile_time_total_s",
    "cudagraph_skips", "cudagraph_skip_reasons", "latency", "eager_latency", "measurement", "dtype",
    "prefill_argmax", "argmax_match", "model",
    "logits_identical", "logits_max_abs_diff", "logits_max_ulp", "params_on_meta_after", "new_tokens", "tokens",
    "tokens_match_reference", "weight_devices", "device_map", "hooked_modules", "execution_device", "scenario_note",
    "cache_implementation", "versions", "trace", "profiled_run", "trace_clock_offset_ns", "peak_memory_bytes", "diagnostics",
    "wall_s"}


# -- fixtures and the driver ----------------------------------------------------------------------

def fixture(fixtures: Path, name: str) -> Path:
    return tiny_checkpoint(str(fixtures), name)


def driver_env() -> dict:
    env = dict(os.environ)
    src = str(HERE.parent.parent / "python")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run_driver(spec: dict, work: Path) -> subprocess.CompletedProcess:
    """Writes SPEC.json into `work` and runs the driver on it; returns the finished process."""
    work.mkdir(parents=True, exist_ok=True)
    path = work / "spec.json"
    path.write_text(json.dumps(spec, indent=1))
    return subprocess.run([sys.executable, "-m", "hookscope_torch", "run", "--spec", str(path)], env=driver_env(),
                          capture_output=True, text=True)


def base_spec(model: Path, ref: dict, work: Path, policy: str, cells: list[dict], backend) -> dict:
    return {"model": str(model), "policy": policy, "accelerate_path": None, "prompt": None,
            "prompt_ids": ref["prompt_ids"], "max_new_tokens": MAX_NEW_TOKENS, "repeats": 1, "warmup": 0,
            "devices": 0, "cache_implementation": "dynamic", "backend": backend, "cells": cells,
            "offload_dir": str(work / "offload"), "out_dir": str(work / "out"), "profile": True, "threads": 1}


def results(work: Path) -> list[dict]:
    with open(work / "out" / "results.jsonl") as f:
        return [json.loads(line) for line in f]


class Failures:
    def __init__(self):
        self.items: list[str] = []

    def check(self, ok: bool, what: str) -> None:
        if not ok:
            self.items.append(what)

    def equal(self, got, want, what: str) -> None:
        self.check(got == want, f"{what}: driver {got!r}, oracle {want!r}")

    def finish(self, label: str) -> int:
        if self.items:
            print(f"FAIL {label}: {len(self.items)} mismatch(es)")
            for m in self.items:
                print("  - " + m)
            return 1
        print(f"PASS {label}")
        return 0


def mask(text: str) -> str:
    return _ADDRESS.sub("", text or "")


def split_message(text: str) -> tuple[str, str]:
    """Dynamo's refusal as (its message before "from user code:", the innermost user frame). The
    frames in between may include the hook-range wrappers the driver installs."""
    head, _, stack = mask(text).partition("\n\nfrom user code:")
    frames = [ln.strip() for ln in stack.splitlines() if ln.strip().startswith("File ")]
    return head.strip(), frames[-1] if frames else ""


# -- the oracle (runs in its own process: one policy per process) --------------------------------

def oracle_main(args) -> int:
    import torch  # the oracle's process imports torch; the checker's does not
    torch.set_num_threads(1)  # as the driver runs in these checks (spec "threads": 1)
    if args.policy == "offload-only":
        from hookscope_torch import offload_only
        offload_only.apply()
    by_scenario = {}
    for r in results(Path(args.work)):
        by_scenario.setdefault(r["scenario"], r)
    out = {s: oracle_scenario(s, r["device_map"], Path(args.model_dir), Path(args.work) / "oracle-offload",
                              args.prompt_ids) for s, r in by_scenario.items()}
    Path(args.out).write_text(json.dumps(out))
    return 0


def _load(model_dir: Path):
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32, local_files_only=True).eval()


def _prefill_kwargs(model, ids):
    """What generate passes to the prefill forward (transformers 5.x, greedy, dynamic cache)."""
    import torch
    from transformers import DynamicCache
    return {"input_ids": ids, "past_key_values": DynamicCache(config=model.config),
            "position_ids": torch.arange(ids.shape[1])[None], "logits_to_keep": 1, "use_cache": True,
            "return_dict": True}


def _dispatch(scenario: str, device_map: dict, model_dir: Path, offload: Path):
    import accelerate
    import torch
    model = _load(model_dir)
    shutil.rmtree(offload, ignore_errors=True)
    offload.mkdir(parents=True)
    cpu = torch.device("cpu")
    if scenario == "cpu-offload":
        accelerate.cpu_offload(model, execution_device=cpu)
        offloaded = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    elif scenario == "disk-offload":
        accelerate.disk_offload(model, str(offload), execution_device=cpu)
        offloaded = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    else:
        accelerate.dispatch_model(model, device_map, offload_dir=str(offload), force_hooks=scenario == "sharded")
        on_disk = [m for m, d in device_map.items() if d == "disk"]
        offloaded = [n for n, _ in model.named_parameters(remove_duplicate=False)
                     if any(n.startswith(m + ".") for m in on_disk)]
    return model, offloaded


def oracle_scenario(scenario: str, device_map: dict, model_dir: Path, offload: Path, prompt_ids: list[int]) -> dict:
    import torch
    import torch._dynamo
    ids = torch.tensor([prompt_ids])
    ref = _load(model_dir)
    with torch.no_grad():
        ref_logits = ref(**_prefill_kwargs(ref, ids)).logits[0, -1]
    model, offloaded = _dispatch(scenario, device_map, model_dir, offload)
    with torch.no_grad():  # eager first (accelerate's lazy compiler-disable wrappers initialise here)
        logits = model(**_prefill_kwargs(model, ids)).logits[0, -1]
    params = dict(model.named_parameters(remove_duplicate=False))
    out = {"logits_identical": bool(torch.equal(logits, ref_logits)),
           "logits_max_abs_diff": float((logits - ref_logits).abs().max()),
           "argmax": int(ref_logits.argmax()), "offloaded": len(offloaded),
           "params_on_meta_after": all(params[n].device.type == "meta" for n in offloaded) if offloaded else None}
    with torch.no_grad():
        ex = torch._dynamo.explain(model.forward)(**_prefill_kwargs(model, ids))
    codes = [m.group(1).upper() for r in ex.break_reasons for m in [re.search(r"/gb/(gb\d+)\.html", r.reason)] if m]
    out.update(graph_count=ex.graph_count, graph_break_count=ex.graph_break_count, break_reasons=len(ex.break_reasons),
               gb_codes=sorted(codes))
    torch._dynamo.reset()
    compiled = torch.compile(model.forward, backend="eager", fullgraph=True)
    try:
        with torch.no_grad():
            compiled(**_prefill_kwargs(model, ids))
        out["fullgraph"] = "works"
    except Exception as e:  # noqa: BLE001 - Dynamo's refusal is the oracle's answer
        out["fullgraph"] = mask(str(e))
    torch._dynamo.reset()
    return out


def run_oracle(model_dir: Path, work: Path, policy: str, prompt_ids: list[int]) -> dict:
    out = work / "oracle.json"
    p = subprocess.run([sys.executable, __file__, "--model-dir", str(model_dir), "--work", str(work),
                        "--policy", policy, "--out", str(out), "--prompt-ids", json.dumps(prompt_ids), "oracle"],
                       env=driver_env(), capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"oracle ({policy}) failed:\n{p.stderr[-4000:]}")
    return json.loads(out.read_text())


# -- matrix ----------------------------------------------------------------------------------------

def matrix_cells(full: bool, scenarios: list[str]) -> list[dict]:
    """Per scenario: eager, default, default fullgraph. Without `full`, no default (non-fullgraph)
    cell: explain and the fullgraph outcome are still checked, the compiled generate is not."""
    cells = []
    for s in scenarios:
        cells.append({"id": f"{s}-eager", "scenario": s, "mode": "eager", "fullgraph": False})
        if full:
            cells.append({"id": f"{s}-default", "scenario": s, "mode": "default", "fullgraph": False})
        cells.append({"id": f"{s}-fullgraph", "scenario": s, "mode": "default", "fullgraph": True})
    return cells


def check_cell(f: Failures, r: dict, o: dict, label: str) -> None:
    where = f"{label} {r['cell']}"
    compiled = r["mode"] != "eager"
    if r["fullgraph"]:
        want = "ok" if o["fullgraph"] == "works" else "unsupported"
        f.equal(r["status"], want, f"{where} fullgraph outcome")
        if want == "unsupported":
            got_msg, got_frame = split_message(r["error"])
            want_msg, want_frame = split_message(o["fullgraph"])
            f.equal(got_msg, want_msg, f"{where} fullgraph message")
            f.equal(got_frame, want_frame, f"{where} fullgraph innermost user frame")
    else:
        f.equal(r["status"], "ok", f"{where} status ({r['error']})")
    if compiled:
        f.equal(r["graph_count"], o["graph_count"], f"{where} graph_count")
        f.equal(r["graph_break_count"], o["graph_break_count"], f"{where} graph_break_count")
        f.equal(sum(b["count"] for b in r["break_reasons"]), o["break_reasons"], f"{where} break reasons (count)")
        f.equal(sorted(c for b in r["break_reasons"] for c in [b["gb_code"]] * b["count"] if c), o["gb_codes"],
                f"{where} gb codes")
    if r["status"] != "ok":
        return
    f.equal(r["argmax_match"], True, f"{where} argmax_match")
    f.equal(r["tokens_match_reference"], True, f"{where} tokens_match_reference")
    f.equal(len(r["latency"]["decode_ms_per_token"]), 1, f"{where} latency repeats")
    if compiled:
        f.check(r["eager_latency"] is not None and r["compile_time_s"] > 0, f"{where}: no eager_latency/compile_time_s")
    if r["scenario"] != "sharded":
        f.equal(r["params_on_meta_after"], o["params_on_meta_after"], f"{where} params_on_meta_after")
        if r["scenario"] != "mixed" or o["offloaded"]:
            f.equal(r["params_on_meta_after"], True, f"{where} params_on_meta_after")
        if not compiled:
            f.equal(r["logits_identical"], o["logits_identical"], f"{where} logits_identical")
            f.equal(r["logits_max_abs_diff"], o["logits_max_abs_diff"], f"{where} logits_max_abs_diff")


def check_trace(f: Failures, out: Path, r: dict, o: dict, label: str) -> None:
    where = f"{label} {r['cell']}"
    if r["status"] != "ok":
        return
    path = out / (r["trace"] or "-")
    if not path.is_file():
        f.check(False, f"{where}: no trace file {path}")
        return
    names = [e.get("name", "") for e in json.loads(path.read_text()).get("traceEvents", [])]
    f.check(f"hookscope::generate cell={r['cell']} repeat=1" in names, f"{where}: no hookscope::generate range")
    steps = sorted(n for n in names if n.startswith("hookscope::step "))
    want = sorted(f"hookscope::step step={k} token={t}" for k, t in enumerate(r["tokens"]))
    f.equal(steps, want, f"{where} step ranges")
    # Hooks run eagerly (and record ranges) in eager mode and wherever Dynamo breaks; with no
    # break they are part of the compiled graph.
    if r["mode"] == "eager" or o["graph_break_count"] > 0:
        f.check(any(n.startswith("hookscope::pre_forward") for n in names), f"{where}: no hook ranges in the trace")


def log_markers(out: Path) -> list[str]:
    """The hookscope_cell payloads of the TORCH_TRACE log, in order."""
    cells = []
    for path in sorted(glob.glob(str(out / "torch_trace" / "*.log"))):
        lines = open(path).read().splitlines()
        for i, line in enumerate(lines):
            if '"name": "hookscope_cell"' in line and i + 1 < len(lines) and lines[i + 1].startswith("\t"):
                cells.append(json.loads(lines[i + 1][1:])["cell"])
    return cells


def matrix_main(args) -> int:
    model = fixture(Path(args.fixtures), args.model)
    ref = json.loads((model / "reference.json").read_text())
    f = Failures()
    for policy in args.policies.split(","):
        work = Path(args.work) / args.model / policy
        shutil.rmtree(work, ignore_errors=True)
        cells = matrix_cells(args.cells == "full", args.scenarios.split(","))
        p = run_driver(base_spec(model, ref, work, policy, cells, "eager"), work)
        if p.returncode != 0:
            print(p.stderr[-6000:])
            f.check(False, f"{policy}: driver exited {p.returncode}")
            continue
        rs = results(work)
        f.equal([r["cell"] for r in rs], [c["id"] for c in cells], f"{policy} results.jsonl cells")
        for r in rs:
            missing = CONTRACT_KEYS - set(r)
            f.check(not missing and set(r) == set(rs[0]), f"{policy} {r['cell']}: keys differ (missing {missing})")
        f.equal(log_markers(work / "out"), [c["id"] for c in cells], f"{policy} TORCH_TRACE hookscope_cell markers")
        oracle = run_oracle(model, work, policy, ref["prompt_ids"])
        for r in rs:
            check_cell(f, r, oracle[r["scenario"]], policy)
            check_trace(f, work / "out", r, oracle[r["scenario"]], policy)
        summary = {s: (o["graph_break_count"], o["fullgraph"] == "works") for s, o in oracle.items()}
        print(f"{args.model} {policy}: (breaks, fullgraph works) per scenario: {summary}")
    return f.finish(f"matrix {args.model} {args.policies} ({args.cells})")


# -- inductor, accelerate tree, bad specs ----------------------------------------------------------

def inductor_main(args) -> int:
    model = fixture(Path(args.fixtures), args.model)
    ref = json.loads((model / "reference.json").read_text())
    work = Path(args.work) / args.model / "inductor"
    shutil.rmtree(work, ignore_errors=True)
    cells = [{"id": "sharded-ro", "scenario": "sharded", "mode": "reduce-overhead", "fullgraph": True}]
    p = run_driver(base_spec(model, ref, work, args.policy, cells, None), work)
    f = Failures()
    f.equal(p.returncode, 0, f"driver exit status ({p.stderr[-3000:]})")
    if p.returncode == 0:
        (r,) = results(work)
        f.equal(r["status"], "ok", f"status ({r['error']})")
        f.equal(r["backend"], "inductor", "backend")
        f.equal(r["graph_break_count"], 0, "graph_break_count")
        f.equal(r["argmax_match"], True, "argmax_match")
        f.check((r["compile_time_s"] or 0) > 0, "compile_time_s > 0")
        if r["execution_device"] == "cpu":
            f.check(r["cudagraph_skips"] > 0 and any("CUDA graphs" in d for d in r["diagnostics"]),
                    f"Inductor's cudagraph skips on cpu reported ({r['cudagraph_skips']}, {r['diagnostics']})")
        print(f"inductor: compile {r['compile_time_s']} s, decode {r['latency']['decode_ms_per_token']} ms/token, "
              f"eager {r['eager_latency']['decode_ms_per_token']}, diagnostics: {r['diagnostics']}")
    return f.finish(f"inductor {args.model} {args.policy}")


def tree_main(args) -> int:
    """accelerate:NAME from a copied tree; and a cell that fails (an unknown backend) is that
    cell's `failed` line, not the end of the process."""
    import importlib.util
    model = fixture(Path(args.fixtures), args.model)
    ref = json.loads((model / "reference.json").read_text())
    work = Path(args.work) / args.model / "tree"
    shutil.rmtree(work, ignore_errors=True)
    installed = Path(importlib.util.find_spec("accelerate").origin).parent
    shutil.copytree(installed, work / "tree" / "src" / "accelerate")
    cells = [{"id": "broken", "scenario": "sharded", "mode": "default"},
             {"id": "e", "scenario": "sharded", "mode": "eager"}]
    spec = base_spec(model, ref, work, "accelerate:copy", cells, "no-such-backend")
    spec["accelerate_path"] = str(work / "tree")
    p = run_driver(spec, work)
    f = Failures()
    f.equal(p.returncode, 0, f"driver exit status ({p.stderr[-3000:]})")
    if p.returncode == 0:
        broken, r = results(work)
        f.equal(broken["status"], "failed", "a cell with an unknown backend")
        f.check("no-such-backend" in (broken["error"] or ""), f"its error names the backend: {broken['error']!r}")
        f.equal(r["status"], "ok", f"the next cell ({r['error']})")
        f.equal(r["policy"], "accelerate:copy", "policy")
        want = str((work / "tree" / "src" / "accelerate" / "__init__.py").resolve())
        f.equal(r["versions"]["accelerate_file"], want, "accelerate imported from the tree")
        f.equal(sorted(broken), sorted(r), "a failed cell's line has every key")
    return f.finish(f"accelerate tree {args.model}")


def bad_spec_main(args) -> int:
    model = fixture(Path(args.fixtures), args.model)
    work = Path(args.work) / "bad-spec"
    good = base_spec(model, {"prompt_ids": [5, 17]}, work, "whole-hook",
                     [{"id": "c", "scenario": "sharded", "mode": "eager"}], None)
    cases = {
        "missing model": ({"model": str(work / "nope")}, "no config.json"),
        "unknown scenario": ({"cells": [{"id": "c", "scenario": "sideways", "mode": "eager"}]},
                             "unknown scenario 'sideways'"),
        "unknown mode": ({"cells": [{"id": "c", "scenario": "sharded", "mode": "max-autotune-x"}]}, "unknown mode"),
        "unknown policy": ({"policy": "half-hook"}, "unknown policy 'half-hook'"),
        "bad accelerate_path": ({"policy": "accelerate:x", "accelerate_path": str(work)},
                                "holds no accelerate package"),
        "threads 0": ({"threads": 0}, "'threads' must be null or an integer >= 1"),
        "unknown dtype": ({"dtype": "fp8"}, "'dtype' must be f32, bf16 or f16 (got 'fp8')"),
        "fullgraph eager": ({"cells": [{"id": "c", "scenario": "sharded", "mode": "eager", "fullgraph": True}]},
                            "fullgraph needs a compiled mode"),
    }
    f = Failures()
    for name, (change, message) in cases.items():
        p = run_driver({**good, **change}, work)
        f.equal(p.returncode, 2, f"{name}: exit status")
        f.check("hookscope_torch: bad spec:" in p.stderr and message in p.stderr, f"{name}: message {p.stderr!r}")
    return f.finish("bad specs")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixtures", help="the fixture cache (build/fixtures)")
    ap.add_argument("--work", help="a scratch folder for the runs (emptied per check)")
    ap.add_argument("--model", default="tiny-llama")
    ap.add_argument("--policies", default=",".join(POLICIES), help="matrix: comma-separated")
    ap.add_argument("--policy", default="offload-only", help="inductor: the policy of its one cell")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="matrix: comma-separated")
    ap.add_argument("--cells", choices=("full", "structure"), default="full",
                    help="matrix: every mode, or only eager and fullgraph (explain and the fullgraph outcome)")
    ap.add_argument("cmd", choices=("matrix", "inductor", "tree", "bad-spec", "oracle"))
    ap.add_argument("--model-dir")
    ap.add_argument("--out")
    ap.add_argument("--prompt-ids")
    args = ap.parse_args()
    if args.cmd == "oracle":
        args.prompt_ids = json.loads(args.prompt_ids)
        return oracle_main(args)
    if not args.fixtures or not args.work:
        ap.error(f"{args.cmd} needs --fixtures and --work")
    checks = {"matrix": matrix_main, "inductor": inductor_main, "tree": tree_main, "bad-spec": bad_spec_main}
    return checks[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
