"""One matrix cell: the measurements of a mode on a dispatched scenario (see driver.py), from what
the process holds for its cells (process.py)."""
from __future__ import annotations

import contextlib
import sys
import time
import traceback

import torch

from hookscope_torch import dynamo_facts, measure, progress
from hookscope_torch.process import Driver, Reference
from hookscope_torch.spec import CellSpec


def _latency(runs: list[measure.GenerateRun]) -> dict:
    return {"prefill_ms": [r.prefill_ms for r in runs],
            "decode_ms_per_token": [r.decode_ms_per_token for r in runs if r.decode_ms_per_token is not None],
            "generate_ms": [r.wall_ms for r in runs]}


class CellRun:
    def __init__(self, driver: Driver, ref: Reference, cell: CellSpec):
        self.d, self.ref, self.cell, self.spec = driver, ref, cell, driver.spec
        self.prep = driver.scenario(cell.scenario)
        self.r = driver.base_result(cell, self.prep)
        self.r["model"] = ref.model_info

    def run(self) -> dict:
        t0 = time.perf_counter()
        dynamo_facts.reset()
        dynamo_facts.mark_cell(self.cell.id)
        if self.prep is None:
            self.r.update(error=self.d.prepare_error, wall_s=round(time.perf_counter() - t0, 3))
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
        first = self.gen.run(phase="first generate")
        self._first_facts(first)
        w, n = self.spec.warmup, self.spec.repeats
        for i in range(w):
            self.gen.run(phase=f"warm-up {i + 1}/{w}")
        runs = [self.gen.run(phase=f"measured {i + 1}/{n}") for i in range(n)]
        self.r["latency"] = _latency(runs)
        self.r["measurement"] = (f"a first generate (facts), {self.spec.warmup} warm-up(s), then "
                                 f"{self.spec.repeats} measured generate(s) back to back; the profiled generate "
                                 "(hook ranges installed) follows, not measured")
        self.r["status"] = "ok"
        self._profile(first.tokens)

    def _compiled(self) -> None:
        self._explain()
        model = self.prep.model
        compiled = torch.compile(self.forward, **self._compile_options())
        model.forward = compiled
        first = self.gen.run(phase="first generate (compiles)")  # a fullgraph refusal raises here
        self.r["compile_time_s"] = round(first.step_ms[0] / 1e3, 6)
        self._first_facts(first)
        eager_runs, compiled_runs = [], []
        w, n = self.spec.warmup, self.spec.repeats
        for i in range(w + n):
            which = f"warm-up {i + 1}/{w}" if i < w else f"measured {i - w + 1}/{n}"
            model.forward = self.forward
            a = self.gen.run(phase=which + " eager")
            model.forward = compiled
            b = self.gen.run(phase=which + " compiled")
            if i >= self.spec.warmup:
                eager_runs.append(a)
                compiled_runs.append(b)
        self.r.update(dynamo_facts.run_facts())
        if self.r["cudagraph_skips"] and not self.r["cudagraph_skip_reasons"]:
            self.r["diagnostics"].append(
                f"Inductor skipped CUDA graphs for {self.r['cudagraph_skips']} graph(s) (its counter cudagraph_skips); "
                "for graphs without CUDA tensors it counts the skip and logs no reason")
        self.r["latency"], self.r["eager_latency"] = _latency(compiled_runs), _latency(eager_runs)
        self.r["measurement"] = (f"the first generate compiles (compile_time_s = its prefill; not measured); then "
                                 f"{self.spec.warmup} warm-up and {self.spec.repeats} measured round(s), each an eager "
                                 "generate (eager_latency) then a compiled one (latency) on the same dispatched model: "
                                 "A B A B; the profiled generate (hook ranges installed) follows, not measured")
        self.r["status"] = "ok"
        self._profile(first.tokens)

    def _compile_options(self) -> dict:
        backend = self.spec.backend or "inductor"
        opts = {"backend": backend, "fullgraph": self.cell.fullgraph}
        if self.cell.mode == "reduce-overhead":
            if backend == "inductor":
                opts["mode"] = "reduce-overhead"
                if self.prep.execution_device.type != "cuda":
                    self.r["diagnostics"].append("reduce-overhead without an accelerator: no CUDA graphs "
                                                 "(see cudagraph_skips)")
            else:
                self.r["diagnostics"].append(f"reduce-overhead is an Inductor mode: backend {backend} compiles "
                                             "without it")
        return opts

    # -- facts ----------------------------------------------------------------------------------

    def _explain(self) -> None:
        """Dynamo's graphs and breaks for this scenario's prefill forward (explain once per scenario).

        The cell starts with an eager generate, which records the prefill's arguments and
        initialises accelerate's lazy compiler-disable wrappers (their first call under Dynamo
        would break at the wrapper's own setup, GB0007, which no later call does)."""
        name = self.cell.scenario
        kwargs = self.gen.prefill_kwargs()
        if name not in self.d.explained:
            self.d.explained[name] = dynamo_facts.explain(self.forward, kwargs)
            dynamo_facts.reset()
        ex = self.d.explained[name]
        self.r.update(graph_count=ex.graph_count, graph_break_count=ex.graph_break_count, op_count=ex.op_count,
                      break_reasons=ex.break_reasons)
        progress(f"cell {self.cell.id}: explain: {ex.graph_count} graphs, {ex.graph_break_count} breaks")

    def _first_facts(self, first: measure.GenerateRun) -> None:
        # The reference is the undispatched checkpoint in the same dtype: what is compared is
        # what the dispatch changes, not what the dtype does.
        self.r["prefill_argmax"] = int(first.prefill_logits.argmax())
        self.r["argmax_match"] = self.r["prefill_argmax"] == self.ref.argmax
        if self.cell.scenario != "sharded":
            self.r.update(measure.compare_logits(first.prefill_logits, self.ref.logits))
        self.r["params_on_meta_after"] = self.prep.params_on_meta()
        self.r["tokens"] = first.tokens
        self.r["new_tokens"] = len(first.tokens)
        self.r["tokens_match_reference"] = first.tokens == self.ref.tokens

    def _profile(self, tokens: list[int]) -> None:
        """One more generate under torch.profiler with the hook ranges installed: trace-<id>.json.

        The ranges replace accelerate's hook functions, which compiled code guards on: in a
        compiled cell the profiled generate may recompile (counted in `profiled_run`). The cell's
        other numbers come from runs without them. A compiled cell without graph breaks runs its
        hooks inside the graph, where no range can record: the ranges are not installed there."""
        if not self.spec.profile:
            return
        name = f"trace-{self.cell.id}.json"
        before = len(torch._dynamo.utils.get_compilation_metrics())
        with self._hook_ranges(self.cell.compiled and self.r["graph_break_count"] == 0):
            run = self.gen.profiled(self.spec.out_dir / name, self.cell.id, self.spec.repeats, tokens)
        self.r["trace"] = name
        # Kineto times the trace on CLOCK_REALTIME; the capture's clock is CLOCK_MONOTONIC
        # (std::chrono::steady_clock): their difference now, midway between two monotonic reads.
        before_ns = time.monotonic_ns()
        real_ns = time.time_ns()
        self.r["trace_clock_offset_ns"] = (before_ns + time.monotonic_ns()) // 2 - real_ns
        self.r["profiled_run"] = {"generate_ms": run.wall_ms, **dynamo_facts.compiles_since(before)}
        if self.r["profiled_run"]["recompiles"] or self.r["profiled_run"]["recompile_limit_hits"]:
            self.r["diagnostics"].append(
                "the hook ranges replace accelerate's hook functions, which the compiled code guards on: the "
                f"profiled generate recompiled {self.r['profiled_run']['recompiles']} frame(s) and hit the recompile "
                f"limit {self.r['profiled_run']['recompile_limit_hits']} time(s)")
        if run.tokens != tokens:
            self.r["diagnostics"].append(f"the profiled generate produced {run.tokens}, not {tokens}: its step "
                                         "ranges name the tokens of the first generate")
        if self.d.ranges is None:
            self.r["diagnostics"].append("no hook ranges in the trace: hookscope_torch.instrument is not installed")

    def _hook_ranges(self, skip: bool):
        if skip or self.d.ranges is None:
            return contextlib.nullcontext()
        return self.d.ranges(self.prep.model)

    def _peak_reset(self) -> None:
        for dev in self.d.accel:
            torch.cuda.reset_peak_memory_stats(dev)

    def _peak_read(self) -> None:
        self.r["peak_memory_bytes"] = {str(d.index): int(torch.cuda.max_memory_allocated(d)) for d in self.d.accel}


def run_cell(driver: Driver, ref: Reference, cell: CellSpec) -> dict:
    return CellRun(driver, ref, cell).run()
