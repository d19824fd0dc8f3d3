"""The offload-only policy: accelerate's AlignDevicesHook with only the offload work compiler-disabled.

accelerate (1.15) wraps the whole ``AlignDevicesHook.pre_forward`` / ``post_forward`` in its lazy
``_compiler_disable`` decorator, so under ``torch.compile`` every hooked module boundary is a graph
break and ``fullgraph=True`` raises. The proposed change ("only disable the compiler on the
offload path") moves the weight swapping into two new methods and disables only those:

- ``_onload_weights(module)``: materialise every offloaded tensor of the module from
  ``weights_map`` onto ``execution_device`` (tied-parameter bookkeeping included);
- ``_offload_weights(module)``: put them back on ``meta`` and release the tied-parameter entries;
- ``pre_forward`` / ``post_forward`` are no longer disabled: recording the input device for
  ``io_same_device``, ``send_to_device`` of args/kwargs and of the output stay exactly as accelerate
  writes them and are traced by Dynamo.

A dispatched model without offload then captures as one graph; an offloaded one still breaks, now
at ``_onload_weights`` / ``_offload_weights``.

The change exists once, as source text (``PATCHED_METHODS``), and is applied two ways:

- ``apply()`` swaps the methods of the ``accelerate.hooks.AlignDevicesHook`` imported in this
  process (the ``offload-only`` policy of the torch engine);
- ``source_patch(tree)`` edits ``accelerate/hooks.py`` of a copied accelerate source tree on disk
  (for running a patched tree as an ``--accelerate NAME=PATH`` policy).

Both first check that the installed ``pre_forward`` / ``post_forward`` are the ones the change was
written against (their syntax trees, comments and formatting aside) and raise
``OffloadOnlyMismatch`` otherwise: re-implementing different methods would silently drop or
duplicate accelerate's changes.
"""
from __future__ import annotations

import ast
import hashlib
import linecache
import os
import textwrap
from pathlib import Path

__all__ = ["OffloadOnlyMismatch", "PATCHED_METHODS", "apply", "is_applied", "state",
           "source_patch", "hooks_file"]

# The accelerate release the change is written against (its AlignDevicesHook).
BASE_VERSION = "1.15"

# The new methods of AlignDevicesHook, as class-body source (4-space indent). The statements are
# accelerate 1.15's, moved; names resolve in accelerate.hooks' namespace (find_device,
# send_to_device, named_module_tensors, set_module_tensor_to_device, is_*_available,
# _compiler_disable).
PATCHED_METHODS = {
    "pre_forward": '''
    def pre_forward(self, module, *args, **kwargs):
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            self._onload_weights(module)

        return send_to_device(args, self.execution_device), send_to_device(
            kwargs, self.execution_device, skip_keys=self.skip_keys
        )
''',
    "_onload_weights": '''
    @_compiler_disable
    def _onload_weights(self, module):
        # Weight swapping changes module state at run time: the only part kept out of the graph.
        self.tied_pointers_to_remove = set()

        for name, _ in named_module_tensors(
            module,
            include_buffers=self.offload_buffers,
            recurse=self.place_submodules,
            remove_non_persistent=True,
        ):
            value = self.weights_map[name]
            fp16_statistics = self._maybe_get_fp16_statistics(name, value)

            # In case we are using offloading with tied weights, we need to keep track of the offloaded weights
            # that are loaded on device at this point, as we will need to remove them as well from the dictionary
            # self.tied_params_map in order to allow to free memory.
            if name in self.tied_params_names and value.data_ptr() not in self.tied_params_map:
                self.tied_params_map[value.data_ptr()] = {}

            if (
                value is not None
                and self.tied_params_map is not None
                and value.data_ptr() in self.tied_params_map
                and self.execution_device not in self.tied_params_map[value.data_ptr()]
            ):
                self.tied_pointers_to_remove.add((value.data_ptr(), self.execution_device))

            set_module_tensor_to_device(
                module,
                name,
                self.execution_device,
                value=value,
                fp16_statistics=fp16_statistics,
                tied_params_map=self.tied_params_map,
            )
''',
    "post_forward": '''
    def post_forward(self, module, output):
        if self.offload:
            self._offload_weights(module)
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)

        return output
''',
    "_offload_weights": '''
    @_compiler_disable
    def _offload_weights(self, module):
        for name, _ in named_module_tensors(
            module,
            include_buffers=self.offload_buffers,
            recurse=self.place_submodules,
            remove_non_persistent=True,
        ):
            set_module_tensor_to_device(module, name, "meta")
            if type(module).__name__ == "Linear8bitLt":
                module.state.SCB = None
                module.state.CxB = None

        # We may have loaded tied weights into self.tied_params_map (avoiding to load them several times in e.g. submodules): remove them from
        # this dictionary to allow the garbage collector to do its job.
        for value_pointer, device in self.tied_pointers_to_remove:
            if isinstance(device, int):
                if is_npu_available():
                    device = f"npu:{device}"
                elif is_mlu_available():
                    device = f"mlu:{device}"
                elif is_musa_available():
                    device = f"musa:{device}"
            if device in self.tied_params_map[value_pointer]:
                del self.tied_params_map[value_pointer][device]
        self.tied_pointers_to_remove = set()
''',
}

# Fingerprints (sha256 of ast.unparse) of accelerate 1.15's AlignDevicesHook methods that the change
# replaces: the code the patched methods above were split from.
ORIGINAL_FINGERPRINTS = {
    "pre_forward": "8bd73771fd1e1334",
    "post_forward": "38d3978530d24aa6",
}

# The synthetic file name the runtime patch's code objects carry (registered in linecache, so
# Dynamo's messages and tracebacks show the patched lines).
PATCH_FILENAME = "<hookscope offload-only patch of accelerate/hooks.py>"
_MARK = "_hookscope_offload_only"


class OffloadOnlyMismatch(RuntimeError):
    """accelerate's AlignDevicesHook is not the one the offload-only change was written against."""


def _fingerprint(node: ast.AST) -> str:
    # ast.unparse: the code without comments or formatting, stable across Python versions.
    return hashlib.sha256(ast.unparse(node).encode()).hexdigest()[:16]


def _class_node(source: str, filename: str) -> ast.ClassDef:
    tree = ast.parse(source, filename)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "AlignDevicesHook":
            return node
    raise OffloadOnlyMismatch(f"{filename}: no class AlignDevicesHook")


def _methods(cls: ast.ClassDef) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}


def _patched_fingerprints() -> dict[str, str]:
    out = {}
    for name, src in PATCHED_METHODS.items():
        (fn,) = ast.parse(textwrap.dedent(src)).body
        out[name] = _fingerprint(fn)
    return out


def _shape(source: str, filename: str) -> str:
    """'whole-hook' (the 1.15 methods), 'offload-only' (already patched); raises otherwise."""
    methods = _methods(_class_node(source, filename))
    if all(n in methods and _fingerprint(methods[n]) == fp for n, fp in _patched_fingerprints().items()):
        return "offload-only"
    diffs = []
    for name, expected in ORIGINAL_FINGERPRINTS.items():
        got = _fingerprint(methods[name]) if name in methods else "missing"
        if got != expected:
            diffs.append(f"AlignDevicesHook.{name} differs from accelerate {BASE_VERSION}'s "
                         f"(code fingerprint {got}, expected {expected})")
    if diffs or "_onload_weights" in methods or "_offload_weights" in methods:
        what = ", ".join(diffs) or "AlignDevicesHook already has _onload_weights/_offload_weights of its own"
        raise OffloadOnlyMismatch(
            f"{filename}: {what}. The offload-only change re-implements accelerate {BASE_VERSION}'s "
            "pre_forward/post_forward; applying it to different code would silently drop or duplicate "
            "accelerate's changes. Patch that accelerate by hand and run it as an --accelerate NAME=PATH "
            "policy instead.")
    return "whole-hook"


def hooks_file(tree: str | os.PathLike) -> Path:
    """accelerate/hooks.py of a source tree: TREE/accelerate/hooks.py or TREE/src/accelerate/hooks.py."""
    tree = Path(tree)
    for cand in (tree / "accelerate" / "hooks.py", tree / "src" / "accelerate" / "hooks.py"):
        if cand.is_file():
            return cand
    raise FileNotFoundError(f"{tree}: no accelerate/hooks.py (nor src/accelerate/hooks.py) in this tree")


def _hooks_module():
    import accelerate.hooks as hooks
    return hooks


def state() -> str:
    """What AlignDevicesHook in this process is: 'whole-hook', 'offload-only' (patched at run time
    by apply(), or an accelerate whose source already has the change). Raises OffloadOnlyMismatch
    for an AlignDevicesHook that is neither."""
    hooks = _hooks_module()
    if getattr(hooks.AlignDevicesHook, _MARK, None):
        return "offload-only"
    path = hooks.__file__
    return _shape(Path(path).read_text(), path)


def is_applied() -> bool:
    """True when AlignDevicesHook in this process has the offload-only shape."""
    return state() == "offload-only"


def apply() -> None:
    """Patches accelerate.hooks.AlignDevicesHook in this process (idempotent).

    Afterwards pre_forward/post_forward are plain (traced by Dynamo) and call the compiler-disabled
    _onload_weights/_offload_weights when the hook offloads. Affects every hook, including those
    already attached. Raises OffloadOnlyMismatch if the installed accelerate differs from the one
    the change was written against."""
    hooks = _hooks_module()
    if state() == "offload-only":
        return
    cls = hooks.AlignDevicesHook
    if any(getattr(cls.__dict__.get(n), "_hookscope_instrumented", False)
           for n in ("pre_forward", "post_forward")):
        raise RuntimeError("offload_only.apply(): hookscope's instrumentation is installed on "
                           "AlignDevicesHook; apply the patch first, then install it")
    source = "class AlignDevicesHook:\n" + "".join(PATCHED_METHODS.values())
    linecache.cache[PATCH_FILENAME] = (len(source), None, source.splitlines(True), PATCH_FILENAME)
    namespace: dict = {}
    exec(compile(source, PATCH_FILENAME, "exec"), hooks.__dict__, namespace)
    originals = {n: cls.__dict__[n] for n in ("pre_forward", "post_forward")}
    for name in PATCHED_METHODS:
        fn = namespace["AlignDevicesHook"].__dict__[name]
        fn.__module__ = cls.__module__
        setattr(cls, name, fn)
    setattr(cls, _MARK, {"base": BASE_VERSION, "originals": originals})


def source_patch(tree: str | os.PathLike) -> Path:
    """Applies the same change to a copied accelerate source tree on disk (idempotent).

    TREE is the folder holding accelerate/ (or src/accelerate/). Rewrites accelerate/hooks.py in
    place and returns its path. Raises OffloadOnlyMismatch (file untouched) if its AlignDevicesHook
    is not accelerate's 1.15 one, FileNotFoundError if there is no hooks.py."""
    path = hooks_file(tree)
    text = path.read_text()
    if _shape(text, str(path)) == "offload-only":
        return path
    methods = _methods(_class_node(text, str(path)))
    lines = text.splitlines(True)

    def span(fn: ast.FunctionDef) -> tuple[int, int]:
        first = min([fn.lineno] + [d.lineno for d in fn.decorator_list])
        return first - 1, fn.end_lineno  # 0-based [start, end)

    # Replace from the bottom up so earlier line numbers stay valid.
    edits = sorted([(span(methods["pre_forward"]), ("pre_forward", "_onload_weights")),
                    (span(methods["post_forward"]), ("post_forward", "_offload_weights"))],
                   reverse=True)
    for (start, end), names in edits:
        new = "\n\n".join(textwrap.dedent(PATCHED_METHODS[n]).strip("\n") for n in names)
        new = textwrap.indent(new, "    ", lambda s: s.strip() != "") + "\n"
        lines[start:end] = [new]
    patched = "".join(lines)
    if _shape(patched, str(path)) != "offload-only":  # the edit itself went wrong
        raise OffloadOnlyMismatch(f"{path}: the patched file does not have the offload-only shape")
    path.write_text(patched)
    return path
