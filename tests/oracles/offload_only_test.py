#!/usr/bin/env python3
"""Tests of hookscope_torch.offload_only against the real stack (transformers, accelerate, Dynamo).

usage: offload_only_test.py --fixtures DIR runtime|source

runtime  apply() in this process, on a tiny Llama and a tiny Qwen3 (tied embeddings) written by
         transformers:
         - dispatched with force_hooks=True (no offload): fullgraph raises before apply() and
           works after; torch._dynamo.explain reports 0 graph breaks, 1 graph;
         - cpu-offloaded / disk-offloaded: fullgraph still raises, at _onload_weights;
         - logits bit-identical to the unpatched run's (eager and compiled), params back on meta
           after each forward of the offloaded models; apply() twice is apply() once.
source   source_patch() on two copies of the installed accelerate (one patched, one not), each
         imported in its own process: the patched copy is offload-only and captures the
         dispatched model as one graph, the other is whole-hook; a copy whose AlignDevicesHook
         differs is refused (source_patch leaves it untouched, apply() raises when it is imported).
Exit status 0 when every check passes; one line per check on stdout.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from tiny_fixture import quiet, tiny_checkpoint  # noqa: E402

quiet()

FAILURES = []
PROMPT = [[5, 17, 99, 3, 250, 42, 7]]


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + (f": {detail}" if detail and not ok else ""), flush=True)
    if not ok:
        FAILURES.append(name)


def load(path):
    import torch
    from transformers import AutoModelForCausalLM
    return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def every_block_on_cpu(model):
    """The device map of the 'sharded' scenario on a machine without accelerators."""
    dm = {f"model.{n}": "cpu" for n, _ in model.model.named_children() if n != "layers"}
    dm.update({f"model.layers.{i}": "cpu" for i in range(len(model.model.layers))})
    dm.update({n: "cpu" for n, _ in model.named_children() if n != "model"})
    return dm


def dispatched(path):
    from accelerate import dispatch_model
    model = load(path)
    return dispatch_model(model, every_block_on_cpu(model), force_hooks=True)


def logits(model):
    import torch
    with torch.no_grad():
        return model(input_ids=torch.tensor(PROMPT)).logits.detach().clone()


def fullgraph_error(model):
    """None when torch.compile(fullgraph=True, backend='eager') runs, else the error's text."""
    import torch
    torch._dynamo.reset()
    try:
        logits(torch.compile(model, fullgraph=True, backend="eager"))
        return None
    except Exception as e:  # torch._dynamo.exc.Unsupported, as raised by Dynamo
        return f"{type(e).__name__}: {e}"


def all_on_meta(model):
    return all(p.device.type == "meta" for p in model.parameters())


def runtime(fixtures):
    import torch
    from accelerate import cpu_offload, disk_offload
    from accelerate.hooks import AlignDevicesHook
    from hookscope_torch import offload_only

    check("accelerate as installed is whole-hook", offload_only.state() == "whole-hook"
          and not offload_only.is_applied())
    tmp = tempfile.mkdtemp(prefix="hookscope-offload-only-")
    # Everything unpatched first: apply() changes AlignDevicesHook for the whole process.
    cases = {}
    for fixture in ("tiny-llama", "tiny-qwen3"):  # Qwen3: tied embeddings (tied_params_map)
        path = tiny_checkpoint(fixtures, fixture)
        models = {"dispatched": dispatched(path),
                  "cpu-offload": cpu_offload(load(path), execution_device="cpu"),
                  "disk-offload": disk_offload(load(path), os.path.join(tmp, fixture), execution_device="cpu")}
        before = {name: logits(m) for name, m in models.items()}
        check(f"{fixture} dispatched (unpatched): logits equal the undispatched model's",
              torch.equal(before["dispatched"], logits(load(path))))
        err = fullgraph_error(models["dispatched"])
        check(f"{fixture} whole-hook: fullgraph raises for the dispatched model",
              err is not None and "disable" in err, str(err)[:300])
        cases[fixture] = (models, before)

    offload_only.apply()
    offload_only.apply()
    check("apply(): is_applied()", offload_only.is_applied() and offload_only.state() == "offload-only")
    check("apply(): pre_forward/post_forward no longer disabled, _onload/_offload_weights are",
          not hasattr(AlignDevicesHook.pre_forward, "__wrapped__")
          and not hasattr(AlignDevicesHook.post_forward, "__wrapped__")
          and hasattr(AlignDevicesHook._onload_weights, "__wrapped__")
          and hasattr(AlignDevicesHook._offload_weights, "__wrapped__"))

    for fixture, (models, before) in cases.items():
        for name, model in models.items():
            after = logits(model)
            check(f"{fixture} {name}: patched eager logits bit-identical to the unpatched run's",
                  torch.equal(after, before[name]), f"max abs diff {(after - before[name]).abs().max().item()}")
            if name != "dispatched":
                check(f"{fixture} {name}: params on meta after the forward", all_on_meta(model))

        err = fullgraph_error(models["dispatched"])
        check(f"{fixture} offload-only: fullgraph works for the dispatched model", err is None, str(err)[:500])
        torch._dynamo.reset()
        compiled = logits(torch.compile(models["dispatched"], fullgraph=True, backend="eager"))
        check(f"{fixture} offload-only: compiled (fullgraph) logits bit-identical to the unpatched eager run's",
              torch.equal(compiled, before["dispatched"]))
        torch._dynamo.reset()
        with torch.no_grad():
            explain = torch._dynamo.explain(models["dispatched"])(input_ids=torch.tensor(PROMPT))
        check(f"{fixture} offload-only: explain graph_break_count 0, graph_count 1 for the dispatched model",
              explain.graph_break_count == 0 and explain.graph_count == 1,
              f"{explain.graph_break_count} breaks, {explain.graph_count} graphs")

        for name in ("cpu-offload", "disk-offload"):
            err = fullgraph_error(models[name])
            check(f"{fixture} offload-only: fullgraph raises at _onload_weights for {name}",
                  err is not None and "_onload_weights" in err and "Unsupported" in err, str(err)[:500])
            check(f"{fixture} {name}: still bit-identical and on meta after the failed compile",
                  torch.equal(logits(models[name]), before[name]) and all_on_meta(models[name]))
    shutil.rmtree(tmp, ignore_errors=True)


# Run in a child process with PYTHONPATH=<tree>: which accelerate it imported, its policy shape,
# and whether the dispatched tiny model compiles with fullgraph.
CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[2])
import offload_only_test as t
import accelerate
from hookscope_torch import offload_only
if sys.argv[3] == "apply":
    offload_only.apply()
model = t.dispatched(sys.argv[1])
print(json.dumps({"accelerate": accelerate.__file__, "state": offload_only.state(),
                  "fullgraph_error": t.fullgraph_error(model)}))
"""


def run_tree(tree, model_path, mode="look"):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(tree), str(HERE.parent.parent / "python"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(model_path), str(HERE), mode], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        return {"error": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def source(fixtures):
    import accelerate
    from hookscope_torch import offload_only

    path = tiny_checkpoint(fixtures, "tiny-llama")
    installed = Path(accelerate.__file__).parent
    tmp = Path(tempfile.mkdtemp(prefix="hookscope-accelerate-trees-"))
    trees = {}
    for name in ("main", "pr", "other"):
        trees[name] = tmp / name
        shutil.copytree(installed, trees[name] / "accelerate",
                        ignore=shutil.ignore_patterns("__pycache__"))

    hooks = offload_only.source_patch(trees["pr"])
    text = hooks.read_text()
    check("source_patch: rewrites TREE/accelerate/hooks.py", hooks == trees["pr"] / "accelerate" / "hooks.py"
          and "def _onload_weights(self, module):" in text and "def _offload_weights(self, module):" in text)
    offload_only.source_patch(trees["pr"])
    check("source_patch: idempotent", hooks.read_text() == text)

    # A tree whose AlignDevicesHook.pre_forward is not 1.15's: refused, file untouched.
    other = trees["other"] / "accelerate" / "hooks.py"
    original = other.read_text()
    changed = original.replace("self.input_device = find_device([args, kwargs])",
                               "self.input_device = find_device([kwargs, args])", 1)
    other.write_text(changed)
    try:
        offload_only.source_patch(trees["other"])
        check("source_patch: refuses a different AlignDevicesHook", False, "no error")
    except offload_only.OffloadOnlyMismatch as e:
        check("source_patch: refuses a different AlignDevicesHook (clear error)",
              "AlignDevicesHook.pre_forward" in str(e) and other.read_text() == changed, str(e))
    try:
        offload_only.source_patch(tmp / "nowhere")
        check("source_patch: a folder without accelerate/hooks.py is an error", False, "no error")
    except FileNotFoundError:
        check("source_patch: a folder without accelerate/hooks.py is an error", True)

    main, pr = run_tree(trees["main"], path), run_tree(trees["pr"], path)
    check("main tree: imported from the copy, whole-hook, fullgraph raises",
          main.get("accelerate", "").startswith(str(trees["main"])) and main.get("state") == "whole-hook"
          and main.get("fullgraph_error") is not None, json.dumps(main)[:800])
    check("pr tree: imported from the copy, offload-only, fullgraph works",
          pr.get("accelerate", "").startswith(str(trees["pr"])) and pr.get("state") == "offload-only"
          and pr.get("fullgraph_error") is None, json.dumps(pr)[:800])
    other_run = run_tree(trees["other"], path, "apply")
    check("apply() refuses an imported accelerate whose AlignDevicesHook differs",
          "OffloadOnlyMismatch" in other_run.get("error", "")
          and "AlignDevicesHook.pre_forward differs" in other_run.get("error", ""), json.dumps(other_run)[:800])
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", required=True, help="the build's fixture cache (build/fixtures)")
    ap.add_argument("what", choices=["runtime", "source"])
    args = ap.parse_args()
    (runtime if args.what == "runtime" else source)(args.fixtures)
    print(f"{len(FAILURES)} failed" if FAILURES else "all passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
