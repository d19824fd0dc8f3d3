"""torch.profiler ranges around accelerate's hook work, named as docs/torch-engine.md says.

    with instrument.Instrumentation(model):          # or inst = install(model); inst.uninstall()
        with torch.profiler.profile(...) as prof:
            model.generate(...)

While installed, and only while a profiler is recording, every call of a hook's entry points
opens ``record_function`` ranges whose names the Kineto importer reads:

- ``hookscope::pre_forward`` / ``hookscope::post_forward``: ``hook`` (class), ``module`` (FQN,
  ``<root>`` for the model itself), ``device`` (the hook's execution_device, ``none`` without one);
- ``hookscope::weight_onload`` per tensor: ``module``, ``tensor`` (name relative to the hooked
  module), ``bytes`` / ``dtype`` (the tensor as materialised on the device), ``source`` (``cpu``:
  the weights_map holds it in memory, ``disk``: it is read from a file, ``device``: it is already
  on an accelerator), ``device``. The range spans the weights_map lookup (the disk read) and the
  copy;
- ``hookscope::weight_offload`` per tensor: ``module``, ``tensor``, ``bytes``, ``dtype``,
  ``device`` (``meta``);
- ``hookscope::send_to_device`` per call that carries tensors to a device: ``module``, ``bytes`` (of the
  tensors whose device differs from ``dst``: 0 when the call moves nothing, as on a CPU-only
  machine), ``src``, ``dst``.

How: the hook classes' methods are replaced by wrappers, class-wide (the same function objects
for every hook, as accelerate's own, so Dynamo's guards and recompiles are unchanged), and
accelerate.hooks' ``set_module_tensor_to_device`` / ``send_to_device`` by recording versions.
A method that is compiler-disabled (accelerate's lazy ``_compiler_disable``, or
``torch.compiler.disable``) is re-disabled the same way around the recording wrapper, so the
graph-break structure Dynamo sees is the original's. Where Dynamo traces a hook method (the
offload-only policy's pre_forward / post_forward), the wrapper calls straight through while
compiling: no range, no graph break — that work is part of the compiled graph. The ranges then
come from the parts that run eagerly (``_onload_weights`` / ``_offload_weights``, frames Dynamo
skipped, eager mode).

What Dynamo compiles is unchanged too. While a compiled model runs eagerly between its graphs,
Dynamo's frame evaluation sees every Python frame called: the code of every function this module
runs on the recording path (the wrappers, the per-thread stack, the weights_map proxy, the
helpers that name a range) is marked with torch's ``skip_code`` (``_never_compiled``), a flag of
the code object that Dynamo reads, free per call: it never compiles such a frame, still evaluates
its callees (the hook's own method, accelerate's ``send_to_device``: compiled as their own frames,
as without hookscope), and still inlines the wrapper where it traces the call. Each wrapped method
gets a code object of its own (``_own_code``): Dynamo keeps its compiled code and guards per code
object (accelerate's lazy ``_compiler_disable`` wrapper guards on ``fn.__code__``), so one
wrapper code shared by every method would merge what Dynamo keeps apart without hookscope.
Where Dynamo inlines a wrapper it is still a frame level of its own, and a graph break inside the
wrapped method then lands one level deeper: ``stop_wrapping_traced`` gives back the methods
Dynamo traces before a program compiles (hookscope profile calls it).

Works for accelerate as installed (whole-hook), after ``offload_only.apply()``, and for a
patched source tree; apply the offload-only patch before installing.
"""
from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Mapping

import torch

__all__ = ["Instrumentation", "install"]


# Code objects to mark for Dynamo (_never_compiled) once torch._dynamo is imported: importing it
# takes seconds, and until it is nothing can compile.
_UNMARKED: list = []
_awaiting_dynamo = False


def _never_compiled(*functions):
    """Marks the code of each function (a method's: its ``__func__``) as a frame Dynamo's frame
    evaluation never compiles while still evaluating its callees (torch's ``skip_code``, what
    ``torch.compiler.disable(recursive=False)`` applies, without the disable: Dynamo still inlines
    the function where it traces a call to it); now if Dynamo is imported, else when it is (see
    ``_mark_when_dynamo_loads``). Returns the last function."""
    fn = None
    for fn in functions:
        code = getattr(getattr(fn, "__func__", fn), "__code__", None)
        if code is not None:
            _UNMARKED.append(code)
    _mark_unmarked()
    return fn


def _mark_unmarked(_module=None) -> bool:
    """Marks the waiting code objects if torch._dynamo is imported; whether it is."""
    skip_code = getattr(sys.modules.get("torch._dynamo.eval_frame"), "skip_code", None)
    if skip_code is None:
        return False
    while _UNMARKED:
        skip_code(_UNMARKED.pop())
    return True


def _mark_when_dynamo_loads() -> None:
    global _awaiting_dynamo
    if not _mark_unmarked() and not _awaiting_dynamo:
        _awaiting_dynamo = True
        from hookscope_torch.hook_systems import after_import
        after_import("torch._dynamo.eval_frame", _mark_unmarked)


def _own_code(fn):
    """`fn` with a copy of its code: a code object of its own, for Dynamo's per-code cache and
    guards (``___check_obj_id(fn.__code__)``), never compiled as a frame (_never_compiled)."""
    fn.__code__ = fn.__code__.replace()
    return _never_compiled(fn)


_PHASES = ("pre_forward", "post_forward")     # ranges of their own
_SWAPS = ("_onload_weights", "_offload_weights")  # the offload-only policy's disabled helpers


# Whether a profiler records: a C function (no Python frame per call).
_profiling = torch._C._autograd._profiler_enabled


_DEV_NAMES: dict = {}  # device value -> its name: torch.device() and str() are slow per call


def _dev(device) -> str:
    """'cpu', 'cuda:0', 'meta'; 'none' without one (a value never contains spaces)."""
    try:
        return _DEV_NAMES[device]
    except (KeyError, TypeError):  # TypeError: an unhashable value
        pass
    if device is None:
        name = "none"
    else:
        try:
            name = str(torch.device(device))
        except (RuntimeError, TypeError):
            name = str(device).replace(" ", "_")
    try:
        if len(_DEV_NAMES) < 4096:
            _DEV_NAMES[device] = name
    except TypeError:
        pass
    return name


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


class _SlowRange:
    """What ``torch.autograd.profiler.record_function(name)`` records (a ``user_annotation``
    range), entered through the profiler ops directly: for a torch without
    ``_RecordFunctionFast``."""

    __slots__ = ("name", "record")
    _enter = torch.ops.profiler._record_function_enter_new
    _exit = torch.ops.profiler._record_function_exit._RecordFunction

    def __init__(self, name: str):
        self.name, self.record = name, None

    def __enter__(self):
        self.record = _SlowRange._enter(self.name, None)
        return self

    def __exit__(self, *exc):
        with torch._C.DisableTorchFunctionSubclass():
            _SlowRange._exit(self.record)


# A range as the profiler records it. torch's `_RecordFunctionFast` (a C object: about 0.8 us a
# range against 4.6 us through record_function's ops, at thousands of ranges per generate)
# records a `cpu_op`, not a `user_annotation`; the Kineto importer files every `hookscope::`
# range as a user_annotation whichever category it arrives with, so the ranges never count as ops.
_Range = getattr(getattr(torch._C, "_profiler", None), "_RecordFunctionFast", None) or _SlowRange


def _name(what: str, **keys) -> str:
    return "hookscope::" + what + "".join(f" {k}={v}" for k, v in keys.items())


def _range(what: str, **keys):
    return _Range(_name(what, **keys))


def _tensors(obj, skip_keys):
    """The tensors send_to_device would move: nested lists / tuples / mappings, skip_keys left out."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x, None)
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            if not skip_keys or k not in skip_keys:
                yield from _tensors(v, None)


def _weight_source(weights_map, key: str) -> str:
    """Where an onload reads `key` of a hook's weights_map from: 'cpu', 'disk' or 'device'."""
    from accelerate.utils.offload import OffloadedWeightsLoader, PrefixedDataset
    while isinstance(weights_map, PrefixedDataset):
        key, weights_map = weights_map.prefix + key, weights_map.dataset
    value = None
    if isinstance(weights_map, OffloadedWeightsLoader):
        if key not in weights_map.state_dict:
            return "disk"
        value = weights_map.state_dict[key]
    elif isinstance(weights_map, dict):
        value = weights_map.get(key)
    if isinstance(value, torch.Tensor) and value.device.type not in ("cpu", "meta"):
        return "device"
    return "cpu"


def _lookup(module, name: str):
    for part in name.split("."):
        module = getattr(module, part)
    return module


class _Context:
    """One hook method running eagerly: the hook, its module's FQN, and an onload range open
    between a weights_map lookup and the copy that follows it."""

    __slots__ = ("hook", "module", "fqn", "open_onload")

    def __init__(self, hook, module, fqn: str):
        self.hook, self.module, self.fqn = hook, module, fqn
        self.open_onload = None


class _RangedWeights(Mapping):
    """A hook's weights_map while it onloads: a lookup opens the tensor's weight_onload range
    (closed by the set_module_tensor_to_device that follows), so the range covers the read."""

    def __init__(self, ctx: _Context, weights_map):
        self._ctx, self._map = ctx, weights_map

    def __getitem__(self, key):
        ctx = self._ctx
        if ctx.open_onload is None:  # a second lookup (int8 statistics) belongs to the same tensor
            try:
                target = _lookup(ctx.module, key)  # the meta tensor the hook replaces: what lands on the device
                rf = _range("weight_onload", module=ctx.fqn, tensor=key, bytes=_nbytes(target),
                            dtype=_dtype(target), source=_weight_source(self._map, key),
                            device=_dev(ctx.hook.execution_device))
                rf.__enter__()
                ctx.open_onload = (key, rf)
            except AttributeError:
                pass  # not a module tensor: no range
        try:
            return self._map[key]
        except BaseException:
            _close_onload(ctx)
            raise

    def __contains__(self, key):
        return key in self._map

    def __iter__(self):
        return iter(self._map)

    def __len__(self):
        return len(self._map)


def _close_onload(ctx: _Context) -> None:
    if ctx.open_onload is not None:
        _, rf = ctx.open_onload
        ctx.open_onload = None
        rf.__exit__(None, None, None)


class Instrumentation:
    """Records hookscope:: ranges for the hooks of one model while installed (see the module doc).

    `model` is walked once for module FQNs and the hook classes it carries (AlignDevicesHook is
    always instrumented). install() / uninstall() are idempotent; the object is also a context
    manager. One Instrumentation at a time per process: install() raises RuntimeError while
    another is installed. Install and uninstall from one thread; recording works on any."""

    def __init__(self, model: torch.nn.Module):
        self._fqn = {id(m): (name or "<root>") for name, m in model.named_modules()}
        self._model = model  # keeps the ids above valid
        self._hook_classes = self._collect_hook_classes(model)
        self._saved: list[tuple[object, str, object]] = []  # (owner, attribute, original or _ABSENT)
        self._local = threading.local()
        self._titles: dict = {}  # (method, hook class, id(module), execution_device) -> range name
        self._compiling = False  # stop_wrapping_traced was called

    # -- install / uninstall -------------------------------------------------------------
    def install(self) -> "Instrumentation":
        if self._saved:
            return self
        import accelerate.hooks as hooks
        if getattr(hooks.send_to_device, "_hookscope_instrumented", False):
            raise RuntimeError("hookscope instrumentation is already installed in this process "
                               "(for another model?): uninstall that one first")
        for cls in self._hook_classes:
            self._instrument_class(cls)
        self._replace(hooks, "set_module_tensor_to_device",
                      self._wrap_set_tensor(hooks.set_module_tensor_to_device))
        self._replace(hooks, "send_to_device", self._wrap_send(hooks.send_to_device))
        _mark_when_dynamo_loads()
        return self

    def _instrument_class(self, cls: type) -> None:
        for name in _PHASES + _SWAPS:
            if name in cls.__dict__ and not (self._compiling and not _compiler_disabled(cls.__dict__[name])):
                self._replace(cls, name, self._wrap_method(cls.__dict__[name], name))

    def stop_wrapping_traced(self) -> None:
        """Gives back the hook methods Dynamo traces (those not compiler-disabled: the
        offload-only policy's pre_forward / post_forward, CpuOffload's), and wraps no more of
        them: called before the program compiles. A wrapper Dynamo inlines is a frame of its own
        between the caller and the hook method, and a graph break inside the method then lands
        one level deeper, which changes what Dynamo compiles (the frames it resumes, skips and
        recompiles) — so the wrappers Dynamo would inline go. The compiler-disabled ones
        (whole-hook's phases, the offload helpers) stay: Dynamo stops at them as without
        hookscope."""
        self._compiling = True
        keep = []
        for owner, name, original in self._saved:
            if getattr(getattr(owner, "__dict__", {}).get(name), "_hookscope_traced", False):
                setattr(owner, name, original)
            else:
                keep.append((owner, name, original))
        self._saved = keep

    def uninstall(self) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)

    def __enter__(self) -> "Instrumentation":
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    @property
    def installed(self) -> bool:
        return bool(self._saved)

    @staticmethod
    def _collect_hook_classes(model) -> list[type]:
        import accelerate.hooks as hooks
        found = {hooks.AlignDevicesHook: None}
        stack = [getattr(m, "_hf_hook", None) for m in model.modules()]
        while stack:
            hook = stack.pop()
            if hook is None:
                continue
            for cls in type(hook).__mro__:
                if cls is not object and cls is not hooks.ModelHook:
                    found[cls] = None
            stack.extend(getattr(hook, "hooks", ()))  # SequentialHook
        return list(found)

    def _replace(self, owner, name: str, new) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, new)

    # -- the per-thread stack of eager hook calls ----------------------------------------
    def _stack(self) -> list[_Context]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _current(self) -> _Context | None:
        stack = self._stack()
        return stack[-1] if stack else None

    def _run_in_context(self, hook, module, range_, inner, args, kwargs):
        """Runs inner(hook, module, *args, **kwargs) as the current eager hook call, in `range_`
        (None: no range of its own), with an offloading hook's weights_map proxied so each lookup
        opens its onload range. Straight-line code: it runs for every hooked call recorded."""
        weights = getattr(hook, "weights_map", None)
        if type(weights) is _RangedWeights:  # not isinstance: a Mapping's is Python (abc) per call
            # _onload_weights / _offload_weights inside this hook's eager pre/post_forward.
            if range_ is None:
                return inner(hook, module, *args, **kwargs)
            with range_:
                return inner(hook, module, *args, **kwargs)
        ctx = _Context(hook, module, self._fqn.get(id(module)) or type(module).__name__)
        proxied = weights is not None and getattr(hook, "offload", False)
        if proxied:
            hook.weights_map = _RangedWeights(ctx, weights)
        stack = self._stack()
        stack.append(ctx)
        try:
            if range_ is None:
                return inner(hook, module, *args, **kwargs)
            with range_:
                return inner(hook, module, *args, **kwargs)
        finally:
            if ctx.open_onload is not None:
                _close_onload(ctx)
            stack.pop()
            if proxied:
                hook.weights_map = weights

    # -- wrappers ----------------------------------------------------------------------
    def _wrap_method(self, original, name: str):
        inner, rewrap = _disabled_parts(original)
        inst = self

        @functools.wraps(inner)
        def instrumented(hook, module, *args, **kwargs):
            if torch.compiler.is_compiling() or not _profiling():
                return inner(hook, module, *args, **kwargs)
            range_ = None
            if name in _PHASES:
                device = getattr(hook, "execution_device", None)
                key = (name, type(hook), id(module), device)
                try:
                    title = inst._titles[key]
                except (KeyError, TypeError):  # TypeError: an unhashable execution_device
                    title = _name(name, hook=type(hook).__name__,
                                  module=inst._fqn.get(id(module), type(module).__name__), device=_dev(device))
                    if id(module) in inst._fqn:  # an unnamed module's id may be reused by another
                        try:
                            inst._titles[key] = title
                        except TypeError:
                            pass
                range_ = _Range(title)
            return inst._run_in_context(hook, module, range_, inner, args, kwargs)

        new = rewrap(_own_code(instrumented), original)
        new._hookscope_instrumented = True
        new._hookscope_traced = not _compiler_disabled(original)
        return new

    def _wrap_set_tensor(self, original):
        inst = self

        @functools.wraps(original)
        def set_module_tensor_to_device(module, tensor_name, device, *args, **kwargs):
            ctx = None if torch.compiler.is_compiling() or not _profiling() else inst._current()
            if ctx is None or module is not ctx.module:
                return original(module, tensor_name, device, *args, **kwargs)
            if _dev(device) == "meta":
                old = _lookup(module, tensor_name)
                with _range("weight_offload", module=ctx.fqn, tensor=tensor_name, bytes=_nbytes(old),
                            dtype=_dtype(old), device="meta"):
                    return original(module, tensor_name, device, *args, **kwargs)
            if ctx.open_onload is None:  # no lookup seen (a value passed in directly)
                value = kwargs.get("value", args[0] if args else None)
                if value is None:
                    return original(module, tensor_name, device, *args, **kwargs)
                with _range("weight_onload", module=ctx.fqn, tensor=tensor_name, bytes=_nbytes(value),
                            dtype=_dtype(value), source="device" if value.device.type not in ("cpu", "meta")
                            else "cpu", device=_dev(device)):
                    return original(module, tensor_name, device, *args, **kwargs)
            try:
                return original(module, tensor_name, device, *args, **kwargs)
            finally:
                _close_onload(ctx)

        return _never_compiled(set_module_tensor_to_device)

    def _wrap_send(self, original):
        inst = self
        names: dict = {}  # (module, bytes, src, dst) -> range name

        @functools.wraps(original)
        def send_to_device(tensor, device, *args, **kwargs):
            ctx = None if torch.compiler.is_compiling() or not _profiling() else inst._current()
            if ctx is None or device is None:  # send_to_device(x, None) moves nothing
                return original(tensor, device, *args, **kwargs)
            if isinstance(tensor, torch.Tensor):  # most calls: one tensor (skip_keys apply to mappings)
                tensors = (tensor,)
            else:
                skip = kwargs.get("skip_keys", args[1] if len(args) > 1 else None)
                skip = [skip] if isinstance(skip, str) else skip
                tensors = list(_tensors(tensor, skip))
                if not tensors:
                    return original(tensor, device, *args, **kwargs)
            dst = _dev(device)
            moved = [t for t in tensors if _dev(t.device) != dst]
            key = (ctx.fqn, sum(_nbytes(t) for t in moved), _dev((moved or tensors)[0].device), dst)
            title = names.get(key)
            if title is None:
                title = _name("send_to_device", module=key[0], bytes=key[1], src=key[2], dst=dst)
                if len(names) < 65536:
                    names[key] = title
            with _Range(title):
                return original(tensor, device, *args, **kwargs)

        _never_compiled(send_to_device)
        send_to_device._hookscope_instrumented = True
        return send_to_device


def _compiler_disabled(method) -> bool:
    """Whether Dynamo stops at `method` (accelerate's lazy `_compiler_disable`, or
    `torch.compiler.disable`) rather than tracing it."""
    return _disabled_parts(method)[0] is not method


def _disabled_parts(method):
    """(the function to instrument, how to wrap the instrumented one like `method` was).

    accelerate's lazy `_compiler_disable` wrapper and `torch.compiler.disable` are re-applied;
    a plain function is returned as is."""
    import accelerate.hooks as hooks
    lazy = getattr(hooks, "_compiler_disable", None)
    if lazy is not None and getattr(method, "__code__", None) is lazy(lambda: None).__code__:
        def rewrap(fn, original):
            new = lazy(fn)
            if hasattr(original, "_compiled_fn"):  # already resolved: keep that state
                new._compiled_fn = torch.compiler.disable(fn)
            return new
        return method.__wrapped__, rewrap
    if getattr(method, "_torchdynamo_disable", False):
        return method._torchdynamo_orig_callable, lambda fn, original: torch.compiler.disable(fn)
    return method, lambda fn, original: fn


# Every function of this module that runs on the recording path, while a compiled model may run
# eagerly between its graphs (the wrappers are marked where they are made).
_never_compiled(_dev, _dtype, _nbytes, _name, _range, _tensors, _weight_source, _lookup, _close_onload,
                _SlowRange.__init__, _SlowRange.__enter__, _SlowRange.__exit__, _Context.__init__,
                _RangedWeights.__init__, _RangedWeights.__getitem__, _RangedWeights.__contains__,
                _RangedWeights.__iter__, _RangedWeights.__len__,
                Instrumentation._stack, Instrumentation._current, Instrumentation._run_in_context)


def install(model: torch.nn.Module) -> Instrumentation:
    """Installs the ranges for `model`'s hooks; returns the Instrumentation (call uninstall())."""
    return Instrumentation(model).install()
