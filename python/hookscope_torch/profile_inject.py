"""What `hookscope profile -- python SCRIPT.py` puts into the profiled program (docs/profile.md).

The CLI starts the command with ``python/hookscope_torch/_inject`` first on PYTHONPATH; its
``sitecustomize`` calls ``begin()`` before the program's own code runs, which:

- puts the policy in place (``HOOKSCOPE_PROFILE_POLICY``: ``whole-hook``, ``offload-only``, or
  ``accelerate:NAME`` with ``HOOKSCOPE_ACCELERATE_PATH`` first on sys.path) before anything is
  dispatched;
- installs the hook ranges of ``hookscope_torch.instrument`` for whatever the program dispatches:
  the models accelerate's ``dispatch_model`` / ``cpu_offload`` / ``disk_offload`` /
  ``cpu_offload_with_hook`` are given (their modules' FQNs) and every hook class
  ``add_hook_to_module`` attaches; and those of ``hookscope_torch.hook_systems``: diffusers'
  hooks (once the program imports diffusers.hooks) and plain ``register_forward_pre_hook`` /
  ``register_forward_hook`` hooks, named by the FQNs of the models given to diffusers' apply
  functions and to ``torch.compile`` as well;
- runs ``torch.profiler`` over the capture range (``HOOKSCOPE_PROFILE_RANGE``): ``all`` (from
  here to the program's exit), ``markers`` (between ``hookscope_torch.start()`` and ``stop()``;
  several pairs make several traces), or ``timer`` (``HOOKSCOPE_PROFILE_DELAY_S`` after the
  start, for ``HOOKSCOPE_PROFILE_DURATION_S``, 0 = to the exit; SIGALRM, so the profiler starts
  and stops on the main thread).

At exit (also after an exception or Ctrl+C) the open range is stopped and
``HOOKSCOPE_PROFILE_DIR/profile.json`` is written: the traces (``trace-K.json``, one per range),
the ranges' times, the policy, versions and ``trace_clock_offset_ns`` (CLOCK_MONOTONIC −
CLOCK_REALTIME, as the torch engine's results). TORCH_TRACE is set by the CLI itself (before
torch is imported). A failure to set up is written to ``profile-error.txt`` and ends the
process with status 70 before the program runs.
"""
from __future__ import annotations

import atexit
import json
import os
import platform
import signal
import sys
import time
from pathlib import Path
from typing import Optional

_session: Optional["Session"] = None

EXIT_SETUP_FAILED = 70


class Session:
    def __init__(self, out_dir: Path, policy: str, accelerate_path: Optional[str], capture_range: str,
                 delay_s: float, duration_s: float):
        self.out_dir = out_dir
        self.policy = policy
        self.accelerate_path = accelerate_path
        self.capture_range = capture_range
        self.delay_s = delay_s
        self.duration_s = duration_s
        self.prof = None
        self.ranges: list[dict] = []  # {"trace", "start_ns", "end_ns"} per capture range
        self.policy_info: dict = {}
        self.inst = None
        self.errors: list[str] = []

    # -- setting up ---------------------------------------------------------------------
    def begin(self) -> None:
        if self.accelerate_path:
            sys.path.insert(0, self.accelerate_path)
        import torch  # noqa: F401  (the profiler, and TORCH_TRACE read at import)
        import accelerate
        acc_file = str(Path(accelerate.__file__).resolve())
        self.policy_info = {"policy": self.policy, "accelerate": accelerate.__version__, "accelerate_file": acc_file}
        if self.policy == "offload-only":
            from hookscope_torch import offload_only
            offload_only.apply()
            self.policy_info["offload_only"] = offload_only.state()
        elif self.accelerate_path and not acc_file.startswith(str(Path(self.accelerate_path).resolve()) + "/"):
            raise RuntimeError(f"policy {self.policy}: accelerate was imported from {acc_file}, not from "
                               f"{self.accelerate_path}")
        self.inst = _watching_instrumentation()
        atexit.register(self.finish)
        # SIGTERM (hookscope passes it on) ends Python without its atexit handlers by default:
        # as SystemExit instead, so the open range is written. A program's own handler replaces this.
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
        if self.capture_range == "all":
            self.start()
        elif self.capture_range == "timer":
            signal.signal(signal.SIGALRM, self._alarm)
            signal.setitimer(signal.ITIMER_REAL, max(self.delay_s, 1e-6))

    def _alarm(self, signum, frame) -> None:
        if self.prof is None and not self.ranges:
            self.start()
            if self.duration_s > 0:
                signal.setitimer(signal.ITIMER_REAL, self.duration_s)
        else:
            self.stop()

    # -- the capture range --------------------------------------------------------------
    def start(self) -> None:
        if self.prof is not None:
            return
        import torch
        activities = [torch.profiler.ProfilerActivity.CPU]
        if torch.cuda.is_available():
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        options = dict(activities=activities, record_shapes=True, profile_memory=True)
        try:  # one profile object per range: acc_events only keeps torch from warning into the program's stderr
            self.prof = torch.profiler.profile(**options, acc_events=True)
        except TypeError:  # a torch before acc_events
            self.prof = torch.profiler.profile(**options)
        self.prof.start()
        self.ranges.append({"trace": None, "start_ns": time.monotonic_ns(), "end_ns": None})

    def stop(self) -> None:
        if self.prof is None:
            return
        prof, self.prof = self.prof, None
        r = self.ranges[-1]
        r["end_ns"] = time.monotonic_ns()  # before stop(), which processes the events: the range ends here
        prof.stop()
        name = f"trace-{len(self.ranges)}.json"
        prof.export_chrome_trace(str(self.out_dir / name))
        r["trace"] = name

    def finish(self) -> None:
        try:
            self.stop()
        except Exception as e:  # noqa: BLE001  (the program's own exit must not be lost)
            self.errors.append(f"stopping the profiler: {type(e).__name__}: {e}")
        import torch
        transformers = sys.modules.get("transformers")  # only when the program imported it
        diffusers = sys.modules.get("diffusers")
        doc = {
            "capture_range": self.capture_range,
            "ranges": self.ranges,
            "trace_clock_offset_ns": time.clock_gettime_ns(time.CLOCK_MONOTONIC) - time.time_ns(),
            "versions": {"hookscope_torch": _version(), "python": platform.python_version(),
                         "torch": torch.__version__,
                         "transformers": getattr(transformers, "__version__", None),
                         "diffusers": getattr(diffusers, "__version__", None),
                         **self.policy_info,
                         "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
                         "threads": torch.get_num_threads()},
            "models": self.inst.models() if self.inst is not None else [],
            "errors": self.errors + list(getattr(self.inst, "errors", [])),
        }
        tmp = self.out_dir / "profile.json.tmp"
        tmp.write_text(json.dumps(doc))
        tmp.replace(self.out_dir / "profile.json")


def _version() -> str:
    from hookscope_torch import __version__
    return __version__


def _watching_instrumentation():
    """hookscope_torch.instrument's ranges for models the program has not dispatched yet, and
    hookscope_torch.hook_systems' for diffusers' hooks and plain module hooks."""
    import functools
    import types

    import torch
    from hookscope_torch import instrument

    class Watching(instrument.Instrumentation):
        def __init__(self):
            super().__init__(torch.nn.Module())
            self._models: list = []
            self.errors: list[str] = []  # what could not be instrumented (profile.json "errors")

        def models(self) -> list[dict]:
            return [{"class": type(m).__name__, "modules": sum(1 for _ in m.modules())} for m in self._models]

        def learn(self, model) -> None:
            if not isinstance(model, torch.nn.Module) or any(m is model for m in self._models):
                return
            self._models.append(model)
            for name, m in model.named_modules():
                self._fqn.setdefault(id(m), name or "<root>")
            self.learn_classes(self._collect_hook_classes(model))

        def learn_classes(self, classes) -> None:
            for cls in classes:
                if cls not in self._hook_classes:
                    self._hook_classes.append(cls)
                    self._instrument_class(cls)

    inst = Watching().install()
    import accelerate
    import accelerate.big_modeling as big_modeling
    import accelerate.hooks as hooks

    def learning(fn):
        def wrapper(model, *args, **kwargs):
            out = fn(model, *args, **kwargs)
            inst.learn(model)
            return out
        wrapper.__wrapped__ = fn
        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        return wrapper

    for name in ("dispatch_model", "cpu_offload", "disk_offload", "cpu_offload_with_hook"):
        fn = getattr(big_modeling, name, None)
        if fn is None:
            continue
        wrapped = learning(fn)
        inst._replace(big_modeling, name, wrapped)
        if getattr(accelerate, name, None) is fn:
            inst._replace(accelerate, name, wrapped)
    add = hooks.add_hook_to_module

    def add_hook_to_module(module, hook, *args, **kwargs):
        out = add(module, hook, *args, **kwargs)
        classes = [c for c in type(hook).__mro__ if c not in (object, hooks.ModelHook)]
        for inner in getattr(hook, "hooks", ()):  # SequentialHook
            classes += [c for c in type(inner).__mro__ if c not in (object, hooks.ModelHook)]
        inst.learn_classes(classes)
        return out

    inst._replace(hooks, "add_hook_to_module", add_hook_to_module)
    if getattr(accelerate, "add_hook_to_module", None) is add:
        inst._replace(accelerate, "add_hook_to_module", add_hook_to_module)

    # Hook systems beyond accelerate's (hook_systems): plain module hooks, diffusers' hooks once
    # diffusers.hooks is imported (never imported here), and the models given to torch.compile
    # for their FQNs.
    from hookscope_torch import hook_systems
    hook_systems.PlainHooks(inst).patch()
    hook_systems.after_import("diffusers.hooks", hook_systems.Diffusers(inst).patch)
    compile_ = torch.compile

    @functools.wraps(compile_)
    def compile(model=None, *args, **kwargs):
        target = getattr(model, "__self__", None) if isinstance(model, types.MethodType) else model
        if isinstance(target, torch.nn.Module):  # torch.compile(model), Module.compile()
            inst.learn(target)
        inst.stop_wrapping_traced()
        return compile_(model, *args, **kwargs)

    inst._replace(torch, "compile", compile)
    # Dynamo entered another way (torch._dynamo.optimize, explain, optimize_assert): the same.
    hook_systems.after_import("torch._dynamo.eval_frame", lambda eval_frame: _before_dynamo(inst, eval_frame))
    return inst


def _before_dynamo(inst, eval_frame) -> None:
    """`inst.stop_wrapping_traced()` before each of eval_frame's entry points makes a compiled
    callable (torch.compile goes through them too)."""
    import functools

    for name in ("_optimize", "_optimize_assert"):
        entry = getattr(eval_frame, name, None)
        if entry is None:
            continue

        def entered(*args, _entry=entry, **kwargs):
            inst.stop_wrapping_traced()
            return _entry(*args, **kwargs)

        inst._replace(eval_frame, name, functools.wraps(entry)(entered))


def begin_from_environment() -> None:
    """sitecustomize's call: a session when HOOKSCOPE_PROFILE_DIR is set; a setup failure is
    written to profile-error.txt and ends the process (status 70) before the program runs. A
    Ctrl+C during the setup (torch importing) is held until it is done (a KeyboardInterrupt
    inside an import can surface as another error), then ends the process as Ctrl+C does."""
    global _session
    out = os.environ.get("HOOKSCOPE_PROFILE_DIR")
    if not out or _session is not None:
        return
    out_dir = Path(out)
    held = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        _session = Session(out_dir, os.environ.get("HOOKSCOPE_PROFILE_POLICY", "whole-hook"),
                           os.environ.get("HOOKSCOPE_ACCELERATE_PATH") or None,
                           os.environ.get("HOOKSCOPE_PROFILE_RANGE", "all"),
                           float(os.environ.get("HOOKSCOPE_PROFILE_DELAY_S", "0")),
                           float(os.environ.get("HOOKSCOPE_PROFILE_DURATION_S", "0")))
        _session.begin()
        # The program's child processes (a DataLoader's workers, a subprocess) are not profiled
        # (torch has read TORCH_TRACE by now).
        for k in ("HOOKSCOPE_PROFILE_DIR", "TORCH_TRACE"):
            os.environ.pop(k, None)
    except BaseException as e:  # noqa: BLE001
        if not held:
            import traceback
            (out_dir / "profile-error.txt").write_text(f"{type(e).__name__}: {e}\n\n{traceback.format_exc()}")
            print(f"hookscope profile: could not set up the recording: {type(e).__name__}: {e}", file=sys.stderr,
                  flush=True)
            os._exit(EXIT_SETUP_FAILED)
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:  # the program was stopped before it began: as Ctrl+C stops it
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def marker_start() -> None:
    if _session is not None and _session.capture_range == "markers":
        _session.start()


def marker_stop() -> None:
    if _session is not None and _session.capture_range == "markers":
        _session.stop()
