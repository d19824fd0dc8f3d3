"""Greedy ``generate`` timed per step, the prefill logits, and the profiled generate.

Every forward ``generate`` makes is one step (0 = prefill). A forward pre-hook and a forward hook
on the root module (they run in ``nn.Module.__call__``, outside the compiled ``forward``) time
each step, keep the prefill's last-position logits and, in the profiled run, open and close the
``hookscope::step step=K token=T`` ranges. On an accelerator the hooks synchronise first.

Per generate: ``prefill_ms`` = the prefill forward; ``decode_ms_per_token`` = (end of the last
step − end of the prefill) / (steps − 1): the decode forwards with generate's own per-token work
between them. Generation runs exactly max_new_tokens steps (``min_new_tokens`` = max, so an end
of sequence token does not stop it; the logits kept are the forward's, before any processor).
"""
from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path
from typing import Callable, Optional

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from hookscope_torch import tick


@dataclasses.dataclass
class GenerateRun:
    tokens: list[int]                 # the generated ids, one per step
    step_ms: list[float]              # each step's forward
    prefill_ms: float
    decode_ms_per_token: Optional[float]
    wall_ms: float                    # the whole generate call
    prefill_logits: torch.Tensor      # [vocab] on cpu, in the forward's dtype: the prefill's last position


class StepClock:
    """Module hooks on the root model that time, and optionally name, each forward of a generate."""

    def __init__(self, model: torch.nn.Module, sync: Callable[[], None]):
        self.model, self.sync = model, sync
        self._handles: list = []
        self.begin(None)
        self.prefill_kwargs: Optional[dict] = None
        self.capture_prefill_kwargs = False
        self.phase = ""  # which generate of the cell this is, for the CLI's progress line
        self.steps = 0   # the decode steps a generate makes (max_new_tokens)

    def __enter__(self) -> "StepClock":
        self._handles = [self.model.register_forward_pre_hook(self._pre, with_kwargs=True),
                         self.model.register_forward_hook(self._post, with_kwargs=True)]
        return self

    def __exit__(self, *exc) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []

    def begin(self, range_tokens: Optional[list[int]]) -> None:
        """Starts a generate; with `range_tokens` each step K is a `hookscope::step` range naming
        range_tokens[K] (the token the step will produce: greedy decoding repeats itself)."""
        self.range_tokens = range_tokens
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.logits: Optional[torch.Tensor] = None
        self._range = None

    def _pre(self, module, args, kwargs):
        step = len(self.starts)
        if step == 0 and self.capture_prefill_kwargs and self.prefill_kwargs is None:
            self.prefill_kwargs = copy.deepcopy(kwargs)  # before the forward fills the cache
        if self.phase:
            tick(self.phase, step, self.steps)
        self.sync()
        if self.range_tokens is not None:
            tok = self.range_tokens[step] if step < len(self.range_tokens) else "?"
            self._range = record_function(f"hookscope::step step={step} token={tok}")
            self._range.__enter__()
        self.starts.append(time.perf_counter())

    def _post(self, module, args, kwargs, output):
        self.sync()
        self.ends.append(time.perf_counter())
        if self._range is not None:
            self._range.__exit__(None, None, None)
            self._range = None
        if len(self.ends) == 1:
            self.logits = output.logits[0, -1].detach().to("cpu").clone()


class Generator:
    """Greedy generate of one dispatched model with a fixed prompt, timed by a StepClock."""

    def __init__(self, model: torch.nn.Module, input_ids: torch.Tensor, max_new_tokens: int,
                 cache_implementation: str, sync: Callable[[], None]):
        self.model, self.ids, self.n = model, input_ids, max_new_tokens
        self.cache = cache_implementation
        self.sync = sync
        self.clock = StepClock(model, sync)
        self.clock.steps = max_new_tokens
        gc = model.generation_config
        self.pad = gc.pad_token_id if gc.pad_token_id is not None else _first(gc.eos_token_id)

    def run(self, range_tokens: Optional[list[int]] = None, phase: str = "") -> GenerateRun:
        """One greedy generate; `phase` names it on the CLI's progress line ("warm-up 1/2")."""
        self.clock.begin(range_tokens)
        self.clock.phase = phase
        t0 = time.perf_counter()
        with self.clock, torch.no_grad():
            out = self.model.generate(self.ids, max_new_tokens=self.n, min_new_tokens=self.n, do_sample=False,
                                      cache_implementation=self.cache, disable_compile=True, pad_token_id=self.pad)
        self.sync()
        wall = (time.perf_counter() - t0) * 1e3
        c = self.clock
        steps = [(e - s) * 1e3 for s, e in zip(c.starts, c.ends)]
        decode = (c.ends[-1] - c.ends[0]) * 1e3 / (len(c.ends) - 1) if len(c.ends) > 1 else None
        tokens = out[0, self.ids.shape[1]:].tolist()
        return GenerateRun(tokens, steps, steps[0], decode, wall, c.logits)

    def prefill_kwargs(self) -> dict:
        """The keyword arguments generate passes to the prefill forward (a fresh copy, cache empty),
        recorded from one eager generate."""
        self.clock.capture_prefill_kwargs, self.clock.prefill_kwargs = True, None
        try:
            self.run()
        finally:
            self.clock.capture_prefill_kwargs = False
        return self.clock.prefill_kwargs

    def profiled(self, path: Path, cell_id: str, repeat: int, range_tokens: list[int]) -> GenerateRun:
        """One generate under torch.profiler (record_shapes, profile_memory), wrapped in
        `hookscope::generate cell=ID repeat=N` with a step range per forward, exported to `path`
        as a Chrome trace."""
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
        # acc_events: one object, one generate; it only keeps torch from warning into the driver log.
        with profile(activities=acts, record_shapes=True, profile_memory=True, acc_events=True) as prof:
            with record_function(f"hookscope::generate cell={cell_id} repeat={repeat}"):
                run = self.run(range_tokens)
        prof.export_chrome_trace(str(path))
        return run


def _first(v):
    if isinstance(v, (list, tuple)):
        return v[0] if v else None
    return v


def make_sync(devices: list[torch.device]) -> Callable[[], None]:
    """Waits for the accelerators in `devices` (nothing to wait for on a cpu)."""
    cuda = [d for d in devices if d.type == "cuda"]
    if not cuda:
        return lambda: None

    def sync() -> None:
        for d in cuda:
            torch.cuda.synchronize(d)
    return sync


def stats(values: list[float]) -> Optional[dict]:
    """median, min, max, n of a list of ms values (None when empty)."""
    if not values:
        return None
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return {"median": med, "min": v[0], "max": v[-1], "n": n}


# The integer view of each floating dtype the logits may come in, and the mask of its magnitude bits.
_BITS = {torch.float32: (torch.int32, 0x7FFFFFFF), torch.bfloat16: (torch.int16, 0x7FFF),
         torch.float16: (torch.int16, 0x7FFF)}


def compare_logits(got: torch.Tensor, ref: torch.Tensor) -> dict:
    """identical (bit for bit), max |diff| and max ulp distance of two logits vectors of one dtype
    (float32, bfloat16 or float16): ulps of that dtype, as the LibTorch engine counts them."""
    if got.dtype != ref.dtype:
        raise ValueError(f"compare_logits: dtypes differ ({got.dtype} vs {ref.dtype})")
    view, magnitude = _BITS[got.dtype]

    def ordered(t: torch.Tensor) -> torch.Tensor:
        i = t.contiguous().view(view).to(torch.int64)
        return torch.where(i < 0, -(i & magnitude), i)
    return {"logits_identical": bool(torch.equal(got, ref)),
            "logits_max_abs_diff": float((got.float() - ref.float()).abs().max()),
            "logits_max_ulp": int((ordered(got) - ordered(ref)).abs().max())}
