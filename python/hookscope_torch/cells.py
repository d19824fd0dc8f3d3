"""One matrix cell: the measurements of a mode on a dispatched scenario (see driver.py)."""
from __future__ import annotations

import sys
import time
import traceback
from typing import TYPE_CHECKING, Optional

import torch

from hookscope_torch import dynamo_facts, measure, progress
from hookscope_torch.spec import CellSpec

if TYPE_CHECKING:
    from hookscope_torch.driver import Driver, Reference


def _latency(runs: list[measure.GenerateRun]) -> dict:
    return {"prefill_ms": [r.prefill_ms for r in runs],
            "decode_ms_per_token": [r.decode_ms_per_token for r in runs if r.decode_ms_per_token is not None],
            "generate_ms": [r.wall_ms for r in runs]}


class CellRun:
    def __init__(self, driver: "Driver", ref: "Reference", cell: CellSpec):
        self.d, self.ref, self.cell, self.spec = driver, ref, cell, driver.spec
        self.prep = driver.scenario(cell.scenario)
        self.r = driver.base_result(cell, self.prep)

    def run(self) -> dict:
        t0 = time.perf_counter()
        dynamo_facts.reset()
        dynamo_facts.mark_cell(self.cell.id)
        if self.prep is None:
            self.r["error"] = self.d.prepare_error
            return self.r
        self.gen = measure.Generator(self.prep.model, self.ref.ids.to(self.prep.execution_device),
                                     self.spec.max_new_tokens, self.spec.cache_implementation, self.d.sync)
        self.forward = self.prep.model.forward
        try:
            self._peak_reset()
            self._compiled() if self.cell.compiled else self._eager()
            self._peak_read()
        except Exception as e:  # noqa: BLE001 - one cell's failure is that cell's result
            if self.cell.fullgraph and dynamo_facts.unsupported_error(e):
                self.r.update(status="unsupported", error=str(e))
            else:
                traceback.print_exc(file=sys.stderr)
                self.r.update(status="failed", error=f"{type(e).__name__}: {e}")
        finally:
            self.prep.model.forward = self.forward
            dynamo_facts.reset()
        self.r["wall_s"] = round(time.perf_counter() - t0, 3)
        return self.r

    # -- modes --------------------------------------------------------------------------------

    def _eager(self) -> None:
        first = self.gen.run()
        self._first_facts(first)
        for _ in range(self.spec.warmup):
            self.gen.run()
        runs = [self.gen.run() for _ in range(self.spec.repeats)]
        self.r["latency"] = _latency(runs)
        self.r["measurement"] = (f"a first generate (facts), {self.spec.warmup} warm-up(s), then {self.spec.repeats} "
                                 "measured generate(s) back to back; the profiled generate follows, not measured")
        self.r["status"] = "ok"
        self._profile(first.tokens)

    def _compiled(self) -> None:
        self._explain()
        model = self.prep.model
        compiled = torch.compile(self.forward, **self._compile_options())
        model.forward = compiled
        first = self.gen.run()  # compiles; a fullgraph refusal raises here
        self.r["compile_time_s"] = round(first.step_ms[0] / 1e3, 6)
        self._first_facts(first)
        eager_runs, compiled_runs = [], []
        for i in range(self.spec.warmup + self.spec.repeats):
            model.forward = self.forward
            a = self.gen.run()
            model.forward = compiled
            b = self.gen.run()
            if i >= self.spec.warmup:
                eager_runs.append(a)
                compiled_runs.append(b)
        self.r.update(dynamo_facts.run_facts())
        self.r["latency"], self.r["eager_latency"] = _latency(compiled_runs), _latency(eager_runs)
        self.r["measurement"] = (f"the first generate compiles (compile_time_s = its prefill; not measured); then "
                                 f"{self.spec.warmup} warm-up and {self.spec.repeats} measured round(s), each an eager "
                                 "generate (eager_latency) then a compiled one (latency) on the same dispatched model: "
                                 "A B A B; the profiled generate follows, not measured")
        self.r["status"] = "ok"
        self._profile(first.tokens)

    def _compile_options(self) -> dict:
        backend = self.spec.backend or "inductor"
        opts = {"backend": backend, "fullgraph": self.cell.fullgraph}
        if self.cell.mode == "reduce-overhead":
            if backend == "inductor":
                opts["mode"] = "reduce-overhead"
                if not any(d.type == "cuda" for d in [self.prep.execution_device]):
                    self.r["diagnostics"].append("reduce-overhead on cpu: Inductor compiles without CUDA graphs "
                                                 "(see cudagraph_skip_reasons)")
            else:
                self.r["diagnostics"].append(f"reduce-overhead is an Inductor mode: backend {backend} compiles "
                                             "without it")
        return opts

    # -- facts ----------------------------------------------------------------------------------

    def _explain(self) -> None:
        """Dynamo's graphs and breaks for this scenario's prefill forward (once per scenario)."""
        name = self.cell.scenario
        if name not in self.d.explained:
            kwargs = self.gen.prefill_kwargs()  # an eager generate: also initialises accelerate's lazy wrappers
            self.d.explained[name] = dynamo_facts.explain(self.forward, kwargs)
            dynamo_facts.reset()
        ex = self.d.explained[name]
        self.r.update(graph_count=ex.graph_count, graph_break_count=ex.graph_break_count, op_count=ex.op_count,
                      break_reasons=ex.break_reasons)
        progress(f"cell {self.cell.id}: explain: {ex.graph_count} graphs, {ex.graph_break_count} breaks")

    def _first_facts(self, first: measure.GenerateRun) -> None:
        self.r["argmax_match"] = int(first.prefill_logits.argmax()) == self.ref.argmax
        if self.cell.scenario != "sharded":
            self.r.update(measure.compare_logits(first.prefill_logits, self.ref.logits))
        self.r["params_on_meta_after"] = self.prep.params_on_meta()
        self.r["tokens"] = first.tokens
        self.r["new_tokens"] = len(first.tokens)
        self.r["tokens_match_reference"] = first.tokens == self.ref.tokens

    def _profile(self, tokens: list[int]) -> None:
        if not self.spec.profile:
            return
        name = f"trace-{self.cell.id}.json"
        run = self.gen.profiled(self.spec.out_dir / name, self.cell.id, self.spec.repeats, tokens, self.d.ranges)
        self.r["trace"] = name
        self.r["profiled_generate_ms"] = run.wall_ms
        if run.tokens != tokens:
            self.r["diagnostics"].append(f"the profiled generate produced {run.tokens}, not {tokens}: its step "
                                         "ranges name the tokens of the first generate")
        if self.d.ranges is None:
            self.r["diagnostics"].append("no hook ranges in the trace: hookscope_torch.instrument is not installed")

    def _peak_reset(self) -> None:
        for dev in self.d.accel:
            torch.cuda.reset_peak_memory_stats(dev)

    def _peak_read(self) -> None:
        self.r["peak_memory_bytes"] = {str(dev.index): int(torch.cuda.max_memory_allocated(dev)) for dev in self.d.accel}


def run_cell(driver: "Driver", ref: "Reference", cell: CellSpec) -> dict:
    return CellRun(driver, ref, cell).run()
