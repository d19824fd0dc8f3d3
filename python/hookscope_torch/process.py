"""What one driver process holds for its cells: the policy put in place, the devices, the
reference (the undispatched checkpoint's logits and tokens), the dispatched scenario shared by
consecutive cells and the explain facts per scenario (see driver.py for the whole run; cells.py
measures one cell against this)."""
from __future__ import annotations

import platform
import sys
import traceback
from pathlib import Path
from typing import Any, Optional

import torch
import transformers

import accelerate
from hookscope_torch import __version__, dynamo_facts, measure, progress, scenarios
from hookscope_torch.spec import CellSpec, Spec, SpecError


def apply_policy(spec: Spec) -> dict:
    """Puts the policy in place before any model is dispatched; returns what versions records of it."""
    acc_file = str(Path(accelerate.__file__).resolve())
    info: dict[str, Any] = {"policy": spec.policy, "accelerate": accelerate.__version__, "accelerate_file": acc_file}
    if spec.policy == "offload-only":
        from hookscope_torch import offload_only
        try:
            offload_only.apply()
        except offload_only.OffloadOnlyMismatch as e:
            raise SpecError(f"policy offload-only cannot patch this accelerate: {e}") from e
        info["offload_only"] = offload_only.state()
    elif spec.accelerate_path is not None and not acc_file.startswith(str(spec.accelerate_path) + "/"):
        raise SpecError(f"policy {spec.policy}: accelerate was imported from {acc_file}, not from "
                        f"accelerate_path {spec.accelerate_path}")
    return info


def versions(policy_info: dict, accel: list[torch.device]) -> dict:
    v = {"hookscope_torch": __version__, "python": platform.python_version(), "torch": torch.__version__,
         "transformers": transformers.__version__, **policy_info,
         "device": torch.cuda.get_device_name(accel[0]) if accel else "cpu", "accelerators": len(accel),
         "threads": torch.get_num_threads()}
    return v


def set_threads(n: int) -> None:
    """torch's intra-op threads, and Inductor's for the C++ kernels it generates: its
    `cpp.threads` is part of its cache key, so kernels cached for another thread count (with
    their `omp parallel num_threads(N)`) are not reused."""
    import torch._inductor.config as inductor_config
    torch.set_num_threads(n)
    inductor_config.cpp.threads = n


def instrumentation():
    """The hook ranges (hookscope_torch.instrument): a factory `model -> context manager`, or None
    when the module is not there (traces then hold the step ranges only)."""
    try:
        from hookscope_torch import instrument
    except ImportError:
        return None
    return instrument.Instrumentation


class Reference:
    """The undispatched checkpoint on the main device, loaded in the spec's dtype as the cells'
    models are: prompt ids, prefill logits, greedy tokens."""

    def __init__(self, spec: Spec, main: torch.device, sync):
        model = scenarios.load(spec.model, spec.dtype).to(main)
        self.dtype = scenarios.dtype_name(scenarios.model_dtype(model))
        # The model as the LibTorch engine describes it (its parameters counted once, tied ones
        # too): what report's setup names.
        params = list(model.parameters())
        archs = getattr(model.config, "architectures", None) or [type(model).__name__]
        self.model_info = {"id": spec.model.name, "path": str(spec.model), "dtype": self.dtype,
                           "params": sum(p.numel() for p in params),
                           "bytes": sum(p.numel() * p.element_size() for p in params), "architecture": archs[0]}
        self.ids = prompt_ids(spec, model.config.vocab_size)
        run = measure.Generator(model, self.ids.to(main), spec.max_new_tokens, spec.cache_implementation, sync).run()
        self.logits, self.tokens = run.prefill_logits, run.tokens
        self.argmax = int(self.logits.argmax())
        del model


def prompt_ids(spec: Spec, vocab_size: int) -> torch.Tensor:
    if spec.prompt_ids is not None:
        bad = [i for i in spec.prompt_ids if i >= vocab_size]
        if bad:
            raise SpecError(f"prompt_ids: {bad[0]} is not a token id of this model (vocab_size {vocab_size})")
        ids = spec.prompt_ids
    else:
        tok = transformers.AutoTokenizer.from_pretrained(str(spec.model), local_files_only=True)
        ids = tok(spec.prompt, add_special_tokens=True)["input_ids"]
        if not ids:
            raise SpecError("'prompt' encodes to no tokens")
    return torch.tensor([ids], dtype=torch.long)


class Driver:
    def __init__(self, spec: Spec):
        self.spec = spec
        if spec.threads is not None:
            set_threads(spec.threads)
        self.accel = scenarios.accelerators(spec.devices)
        self.main = self.accel[0] if self.accel else torch.device("cpu")
        self.sync = measure.make_sync(self.accel)
        self.versions = versions(apply_policy(spec), self.accel)
        self.ranges = instrumentation()
        self.prepared: Optional[scenarios.Prepared] = None
        self.prepare_error: Optional[str] = None
        self.explained: dict[str, dynamo_facts.ExplainFacts] = {}

    def scenario(self, name: str) -> Optional[scenarios.Prepared]:
        """The dispatched model of `name` (loaded and dispatched when the scenario changes)."""
        if self.prepared is not None and self.prepared.scenario == name:
            return self.prepared
        if self.prepare_error is not None and self.prepare_error.startswith(name + ":"):
            return None
        self.prepared, self.prepare_error = None, None
        try:
            self.prepared = scenarios.prepare(name, self.spec.model, self.accel, self.spec.offload_dir,
                                              self.spec.dtype)
        except Exception as e:  # noqa: BLE001 - every cell of the scenario reports it
            self.prepare_error = f"{name}: dispatch failed: {type(e).__name__}: {e}"
            traceback.print_exc(file=sys.stderr)
            return None
        p = self.prepared
        progress(f"scenario {name}: {p.hooked_modules} hooked modules, weights on {', '.join(p.weight_devices)}"
                 + (f" ({p.note})" if p.note else ""))
        return p

    def base_result(self, cell: CellSpec, prep: Optional[scenarios.Prepared]) -> dict:
        r = {"cell": cell.id, "engine": "torch", "scenario": cell.scenario, "policy": self.spec.policy,
             "mode": cell.mode, "fullgraph": cell.fullgraph,
             "backend": (self.spec.backend or "inductor") if cell.compiled else None,
             "status": "failed", "error": None, "cache_implementation": self.spec.cache_implementation,
             "versions": self.versions, "execution_device": str(self.main), "trace": None, "diagnostics": []}
        for k in ("graph_count", "graph_break_count", "op_count", "recompiles", "recompile_limit_hits",
                  "frames_skipped", "unique_graphs", "frames_compiled", "frames_total", "compile_time_s",
                  "compile_time_total_s", "cudagraph_skips", "latency", "eager_latency", "measurement",
                  "prefill_argmax", "argmax_match", "logits_identical", "logits_max_abs_diff", "logits_max_ulp",
                  "params_on_meta_after", "new_tokens", "tokens", "tokens_match_reference", "profiled_run",
                  "trace_clock_offset_ns", "wall_s"):
            r[k] = None
        r.update(break_reasons=[], skipped_frames=[], cudagraph_skip_reasons=[], peak_memory_bytes={})
        if prep is not None:
            r.update(device_map=prep.device_map, weight_devices=prep.weight_devices,
                     hooked_modules=prep.hooked_modules, scenario_note=prep.note, dtype=prep.dtype)
        else:
            r.update(device_map=None, weight_devices=[], hooked_modules=None, scenario_note=None, dtype=None)
        return r
