"""Ranges for hook systems beyond accelerate's, for `hookscope profile` (docs/profile.md).

The same ``hookscope::`` range names as accelerate's (``hookscope_torch.instrument``,
docs/torch-engine.md "Ranges in the trace"), so the Kineto importer files them in the same
tables:

- **diffusers' hooks** (``diffusers.hooks.ModelHook`` attached through ``HookRegistry``: group
  offloading, layerwise casting, any other diffusers hook): ``hookscope::pre_forward`` /
  ``hookscope::post_forward`` with ``hook`` (the hook's class), ``module`` (FQN) and ``device``
  (a group offloading hook's onload device, ``none`` for others); and for group offloading one
  ``hookscope::weight_onload`` / ``hookscope::weight_offload`` per ``ModuleGroup.onload_()`` /
  ``offload_()`` call (diffusers moves a group in one call: a module list block, a leaf, or the
  top-level module's own tensors): ``module`` (the FQN of the group's onload leader, its first
  module), ``tensor`` (``*`` when the group moves exactly that module's tensors, else the group's
  modules and loose tensors as FQNs joined by ``+``), ``bytes`` (every tensor the group moves, each counted
  once), ``dtype`` (``mixed`` when they differ), ``source`` (``cpu``, ``disk`` for
  ``offload_to_disk_path``, ``device`` for an accelerator offload device) and ``device`` (the onload
  device) for onloads, ``device`` (the offload device, or ``disk``) for offloads, and
  ``pinned=1`` when the group uses a stream (its CPU copies are pinned); ``send_to_device`` of the
  hook's inputs as accelerate's.
- **plain module hooks** (``register_forward_pre_hook`` / ``register_forward_hook`` of
  ``torch.nn.Module``, and the global ``register_module_forward_pre_hook`` /
  ``register_module_forward_hook``): ``hookscope::pre_forward`` / ``hookscope::post_forward`` with
  ``hook`` (the function's ``__qualname__``), ``module`` (the FQN where the module belongs to a
  model hookscope has seen, its class otherwise), ``device=none``. Functions, bound methods and
  ``functools.partial`` objects are recorded; hook *objects* (torch's weight_norm,
  spectral_norm and pruning hooks, which torch finds again by their class) and torch's own hook
  functions are left as they are, as are transformers' output-capturing hooks (installed on
  every layer, inactive unless outputs are requested).

Module FQNs come from the models hookscope sees: given to accelerate's dispatch functions
(profile_inject), to diffusers' ``apply_group_offloading`` / ``apply_layerwise_casting`` (and so
``ModelMixin.enable_group_offload`` / ``enable_layerwise_casting``), or to ``torch.compile`` /
``Module.compile``.

As in instrument.py: nothing is recorded unless a profiler records; a compiler-disabled function
is disabled again around its recording wrapper (``ModuleGroup.onload_`` / ``offload_``, a user's
``torch.compiler.disable``d hook), so Dynamo meets the same boundaries; a function Dynamo traces
calls straight through while compiling (no range: that work is in the graph).
"""
from __future__ import annotations

import functools
import importlib.abc
import sys
import types
import weakref

import torch

from hookscope_torch import instrument
from hookscope_torch.instrument import _dev, _disabled_parts

_is_compiling = torch.compiler.is_compiling
_profiling = torch._C._autograd._profiler_enabled  # a C function: no frame for Dynamo to compile

__all__ = ["Diffusers", "PlainHooks", "after_import"]

_PHASES = ("pre_forward", "post_forward")
_MAX_MEMBERS = 16  # group members named in a swap's `tensor` before "+(N_more)"


def _name(what: str, **keys) -> str:
    return "hookscope::" + what + "".join(f" {k}={v}" for k, v in keys.items())


def _token(value) -> str:
    """A range value: never empty, never with a space."""
    text = str(value).replace(" ", "_").replace("\t", "_").replace("\n", "_")
    return text or "_"


def _eager_frame(fn, wrapped):
    """`fn` (a wrapper) named as `wrapped`, its code marked for Dynamo's frame evaluation as a frame
    it never compiles, whose callees it compiles as usual (torch's own `skip_code`, what
    ``torch.compiler.disable(recursive=False)`` uses, without the disable: Dynamo still inlines the
    wrapper where it traces the call). A hook called from a frame Dynamo runs eagerly is then
    compiled as its own frame, as without hookscope, never as a recompile of one wrapper frame
    shared by every hook."""
    skip_code = getattr(getattr(torch._dynamo, "eval_frame", None), "skip_code", None)
    if skip_code is not None:
        skip_code(fn.__code__)
    return functools.update_wrapper(fn, wrapped)


def _fqn(inst, module) -> str:
    return inst._fqn.get(id(module), type(module).__name__)


# The recording work a wrapper does around the function it wraps runs compiler-disabled: the
# wrapper's own frame is one Dynamo never compiles (_eager_frame), and the Python it would call
# (titles, contexts, ranges) must not become frames Dynamo compiles either. Only the wrapped
# function is called from the wrapper's frame itself.
@torch.compiler.disable
def _open(title: str):
    r = instrument._Range(title)
    r.__enter__()
    return r


@torch.compiler.disable
def _close(r) -> None:
    r.__exit__(None, None, None)


@torch.compiler.disable
def _open_plain(plain, phase: str, name: str, module):
    return _open(plain.title(phase, name, module))


@torch.compiler.disable
def _open_phase(diffusers, phase: str, hook, module):
    """A diffusers hook phase's range, and its context on the instrumentation's stack (the
    send_to_device it calls is attributed to its module)."""
    inst = diffusers.inst
    ctx = instrument._Context(hook, module, _fqn(inst, module))
    r = _open(diffusers.title(phase, hook, module))
    inst._stack().append(ctx)
    return r, ctx


@torch.compiler.disable
def _close_phase(diffusers, opened) -> None:
    r, ctx = opened
    stack = diffusers.inst._stack()
    if stack and stack[-1] is ctx:
        stack.pop()
    r.__exit__(None, None, None)


# -- running code after a module is imported --------------------------------------------------
class _ThenLoader(importlib.abc.Loader):
    """The module's own loader, then `then(module)`."""

    def __init__(self, loader, then):
        self._loader, self._then = loader, then

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # The module's code sees its own loader (resources, inspect.getsource).
        module.__loader__ = self._loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._then(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        try:
            sys.meta_path.remove(self)  # once
        except ValueError:
            pass
        spec.loader = _ThenLoader(spec.loader, self.then)
        return spec


def after_import(name: str, then) -> None:
    """Calls then(module) once module `name` has been imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


# -- diffusers --------------------------------------------------------------------------------
class Diffusers:
    """diffusers' hooks recorded through `inst` (a profile_inject Watching instrumentation:
    `_fqn`, `_replace`, `_stack`, `_wrap_send`, `learn`). `patch()` once diffusers.hooks
    is imported (after_import); errors go to `inst.errors`."""

    def __init__(self, inst):
        self.inst = inst
        self.base = None  # diffusers.hooks.hooks.ModelHook: its identity phases record nothing
        self._done: set = set()
        self._titles: dict = {}
        self._swap_titles = weakref.WeakKeyDictionary()  # ModuleGroup -> (onload title, offload title)

    def patch(self, package=None) -> None:
        """after_import's call (`package`: diffusers.hooks, unused)."""
        try:
            self._patch()
        except Exception as e:  # noqa: BLE001  (the program's own import must go on)
            self.inst.errors.append(f"diffusers' hooks are not recorded: {type(e).__name__}: {e}")

    def _patch(self) -> None:
        inst = self.inst
        hooks_mod = sys.modules["diffusers.hooks.hooks"]
        self.base = hooks_mod.ModelHook
        registry = hooks_mod.HookRegistry
        register = registry.register_hook
        diffusers = self

        @functools.wraps(register)
        def register_hook(reg, hook, *args, **kwargs):
            # Before diffusers takes `hook.pre_forward` (a bound method): the class's is ours then.
            diffusers.learn_classes(type(hook))
            return register(reg, hook, *args, **kwargs)

        inst._replace(registry, "register_hook", register_hook)
        go = sys.modules.get("diffusers.hooks.group_offloading")
        if go is not None:
            group = go.ModuleGroup
            inst._replace(group, "onload_", self._wrap_swap(group.__dict__["onload_"], True))
            inst._replace(group, "offload_", self._wrap_swap(group.__dict__["offload_"], False))
            if hasattr(go, "send_to_device"):  # accelerate's, imported by name
                inst._replace(go, "send_to_device", inst._wrap_send(go.send_to_device))
        # The models' FQNs: learned from the module given to the public entry points.
        pkg = sys.modules.get("diffusers.hooks")
        lc = sys.modules.get("diffusers.hooks.layerwise_casting")
        for owner, names in ((go, ("apply_group_offloading",)), (lc, ("apply_layerwise_casting",)),
                             (pkg, ("apply_group_offloading", "apply_layerwise_casting",
                                    "apply_layerwise_casting_hook"))):
            for name in names:
                fn = getattr(owner, name, None) if owner is not None else None
                if fn is not None and not getattr(fn, "_hookscope_learning", False):
                    inst._replace(owner, name, self._learning(fn))

    def _learning(self, fn):
        inst = self.inst

        @functools.wraps(fn)
        def learning(*args, **kwargs):
            module = args[0] if args else kwargs.get("module")
            inst.learn(module)
            return fn(*args, **kwargs)

        learning._hookscope_learning = True
        return learning

    def learn_classes(self, cls: type) -> None:
        for c in cls.__mro__:
            if c is object or c is self.base or c in self._done:
                continue
            self._done.add(c)
            for phase in _PHASES:
                if phase in c.__dict__:
                    self.inst._replace(c, phase, self._wrap_phase(c.__dict__[phase], phase))

    @staticmethod
    def _device(hook):
        group = getattr(hook, "group", None)
        return getattr(group, "onload_device", None) if group is not None else getattr(hook, "execution_device", None)

    def title(self, phase: str, hook, module) -> str:
        key = (phase, type(hook), id(module))
        title = self._titles.get(key)
        if title is None:
            title = _name(phase, hook=type(hook).__name__, module=_token(_fqn(self.inst, module)),
                          device=_dev(self._device(hook)))
            if id(module) in self.inst._fqn:  # an unnamed module's id may be reused by another
                self._titles[key] = title
        return title

    def _wrap_phase(self, original, phase: str):
        inner, rewrap = _disabled_parts(original)
        diffusers = self

        def recorded(hook, module, *args, **kwargs):
            if _is_compiling() or not _profiling():
                return inner(hook, module, *args, **kwargs)
            opened = _open_phase(diffusers, phase, hook, module)
            try:
                return inner(hook, module, *args, **kwargs)
            finally:
                _close_phase(diffusers, opened)

        new = rewrap(_eager_frame(recorded, inner), original)
        new._hookscope_instrumented = True
        return new

    def _wrap_swap(self, original, onload: bool):
        inner, rewrap = _disabled_parts(original)  # onload_ / offload_ are compiler-disabled
        titles = self._swap_title

        def recorded(group, *args, **kwargs):
            if _is_compiling() or not _profiling():
                return inner(group, *args, **kwargs)
            r = _open(titles(group, onload))
            try:
                return inner(group, *args, **kwargs)
            finally:
                _close(r)

        new = rewrap(_eager_frame(recorded, inner), original)
        new._hookscope_instrumented = True
        return new

    def _swap_title(self, group, onload: bool) -> str:
        try:
            cached = self._swap_titles.get(group)
        except TypeError:  # not weak-referenceable
            cached = None
        if cached is not None:
            return cached[0 if onload else 1]
        inst = self.inst
        leader = getattr(group, "onload_leader", None) or group.offload_leader
        modules = list(group.modules)
        loose = list(group.parameters) + list(group.buffers)
        tensors, seen = [], set()
        for t in (t for m in modules for t in (*m.parameters(), *m.buffers())):
            if id(t) not in seen:
                seen.add(id(t))
                tensors.append(t)
        loose = [t for t in loose if id(t) not in seen]  # the top-level group lists its modules' too
        for t in loose:
            if id(t) not in seen:
                seen.add(id(t))
                tensors.append(t)
        nbytes = sum(t.numel() * t.element_size() for t in tensors)
        dtypes = {t.dtype for t in tensors}
        dtype = str(next(iter(dtypes))).removeprefix("torch.") if len(dtypes) == 1 else "mixed"
        name = _fqn(inst, leader)
        if seen == {id(t) for t in (*leader.parameters(), *leader.buffers())}:
            members = ["*"]  # all of the leader's tensors, and only those
        else:
            prefix = "" if name == "<root>" else name + "."
            local = {id(t): n for n, t in (*leader.named_parameters(), *leader.named_buffers())}
            members = [_fqn(inst, m) for m in modules] + [prefix + local.get(id(t), "?") for t in loose]
            if len(members) > _MAX_MEMBERS:
                members = members[:_MAX_MEMBERS] + [f"({len(members) - _MAX_MEMBERS}_more)"]
        disk = bool(getattr(group, "offload_to_disk_path", None))
        offload_device = group.offload_device
        source = "disk" if disk else ("device" if torch.device(offload_device).type not in ("cpu", "meta") else "cpu")
        common = {"module": _token(name), "tensor": _token("+".join(members)), "bytes": nbytes, "dtype": dtype}
        pinned = {"pinned": 1} if getattr(group, "stream", None) is not None else {}
        titles = (_name("weight_onload", **common, source=source, device=_dev(group.onload_device), **pinned),
                  _name("weight_offload", **common, device="disk" if disk else _dev(offload_device)))
        if all(id(m) in inst._fqn for m in [leader, *modules]):
            try:
                self._swap_titles[group] = titles
            except TypeError:
                pass
        return titles[0 if onload else 1]


# -- plain torch module hooks ------------------------------------------------------------------
_PLAIN = (types.FunctionType, types.MethodType, functools.partial)
_LEFT_AS_THEY_ARE = ("transformers.utils.output_capturing",)


class PlainHooks:
    """register_forward_pre_hook / register_forward_hook (and the global ones) wrap the hooks they
    are given in recording functions (see the module doc)."""

    def __init__(self, inst):
        self.inst = inst
        self._titles: dict = {}

    def patch(self) -> None:
        inst, m = self.inst, torch.nn.Module
        inst._replace(m, "register_forward_pre_hook", self._registering(m.register_forward_pre_hook, "pre_forward"))
        inst._replace(m, "register_forward_hook", self._registering(m.register_forward_hook, "post_forward"))
        import torch.nn.modules as modules
        import torch.nn.modules.module as module_py
        for name, phase in (("register_module_forward_pre_hook", "pre_forward"),
                            ("register_module_forward_hook", "post_forward")):
            original = getattr(module_py, name, None)
            if original is None:
                continue
            wrapped = self._registering_global(original, phase)
            inst._replace(module_py, name, wrapped)
            if getattr(modules, name, None) is original:
                inst._replace(modules, name, wrapped)

    def _registering(self, register, phase: str):
        plain = self

        @functools.wraps(register)
        def registering(module, hook, *args, **kwargs):
            if _is_compiling():  # a hook registered in code Dynamo traces: as without hookscope
                return register(module, hook, *args, **kwargs)
            return register(module, plain.wrap(hook, phase), *args, **kwargs)

        return registering

    def _registering_global(self, register, phase: str):
        plain = self

        @functools.wraps(register)
        def registering(hook, *args, **kwargs):
            if _is_compiling():
                return register(hook, *args, **kwargs)
            return register(plain.wrap(hook, phase), *args, **kwargs)

        return registering

    def wrap(self, hook, phase: str):
        """`hook`, recording a `phase` range per call; hooks it does not record, unchanged."""
        if not isinstance(hook, _PLAIN) or getattr(hook, "_hookscope_hook", False):
            return hook
        if isinstance(hook, types.MethodType):  # its function may be compiler-disabled
            function, rewrap = _disabled_parts(hook.__func__)
            inner = types.MethodType(function, hook.__self__)
        else:
            function, rewrap = _disabled_parts(hook)
            inner = function
        target = function.func if isinstance(function, functools.partial) else function
        home = getattr(target, "__module__", None) or ""
        if home == "torch" or home.startswith("torch.") or home in _LEFT_AS_THEY_ARE:
            return hook
        name = _token(getattr(target, "__qualname__", None) or type(target).__name__)
        plain = self

        def recorded(module, *args, **kwargs):
            if _is_compiling() or not _profiling():
                return inner(module, *args, **kwargs)
            r = _open_plain(plain, phase, name, module)
            try:
                return inner(module, *args, **kwargs)
            finally:
                _close(r)

        new = rewrap(_eager_frame(recorded, inner), hook)
        new._hookscope_hook = True
        return new

    def title(self, phase: str, name: str, module) -> str:
        key = (phase, name, id(module))
        title = self._titles.get(key)
        if title is None:
            title = _name(phase, hook=name, module=_token(_fqn(self.inst, module)), device="none")
            if id(module) in self.inst._fqn:
                self._titles[key] = title
        return title
