"""The four scenarios, dispatched by accelerate itself on a freshly loaded checkpoint.

The maps mirror the LibTorch engine's (engines/scenarios.cpp) with real devices:

- ``sharded``: over N >= 2 real accelerators, accelerate's ``infer_auto_device_map`` with
  ``max_memory`` = largest block + total/N per accelerator (and 4x the model on the cpu), which
  must leave nothing on cpu/disk. With fewer than 2 accelerators: every block on the one device
  (cuda:0, or cpu) dispatched with ``force_hooks=True`` — the same hooks a sharded map attaches,
  labelled so in the scenario note;
- ``cpu-offload``: ``accelerate.cpu_offload`` (weights kept on the cpu, run on the main device);
- ``disk-offload``: ``accelerate.disk_offload`` into OFFLOAD_DIR/offload-disk;
- ``mixed``: embeddings (token and rotary) on the main device; the first half of the decoder
  layers over the accelerators, the next quarter on the cpu, the rest on disk
  (OFFLOAD_DIR/offload-mixed); the final norm and lm_head on the last accelerator. With no
  accelerator the main device is the cpu, where accelerate does not offload "cpu" blocks: the
  first half runs on the cpu in place and the rest is offloaded to disk.
"""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Optional, Union

import torch
from transformers import AutoModelForCausalLM

import accelerate
from accelerate.utils import compute_module_sizes, infer_auto_device_map

Device = Union[int, str]

# hookscope's dtype names (spec.DTYPES, the CLI's --dtype, the LibTorch engine's model.dtype) and torch's.
TORCH_DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    """hookscope's name of a torch dtype ("bf16"); torch's own without "torch." for any other."""
    for name, t in TORCH_DTYPES.items():
        if t == dtype:
            return name
    return str(dtype).removeprefix("torch.")


def model_dtype(model: torch.nn.Module) -> torch.dtype:
    """The dtype the model's weights are in (its first parameter's: meta tensors keep theirs)."""
    return next(model.parameters()).dtype


@dataclasses.dataclass
class Prepared:
    """A model dispatched for one scenario."""
    scenario: str
    model: torch.nn.Module
    device_map: dict[str, Device]       # accelerate's form: module FQN -> int | "cpu" | "disk"
    execution_device: torch.device       # where the forward runs (the main device)
    offloaded_params: list[str]          # parameters accelerate keeps off the model (on meta between forwards)
    dtype: str                           # the weights' dtype as loaded, hookscope's name ("f32", "bf16", "f16")
    note: Optional[str] = None           # how this scenario differs from its name on this machine

    @property
    def weight_devices(self) -> list[str]:
        """Where the weights live, as the LibTorch engine names them: "0", "cpu", "disk"."""
        return sorted({str(d) for d in self.device_map.values()})

    @property
    def hooked_modules(self) -> int:
        return sum(1 for m in self.model.modules() if hasattr(m, "_hf_hook"))

    def params_on_meta(self) -> Optional[bool]:
        """Whether every offloaded parameter is back on meta (None when nothing is offloaded)."""
        if not self.offloaded_params:
            return None
        params = dict(self.model.named_parameters(remove_duplicate=False))
        return all(params[n].device.type == "meta" for n in self.offloaded_params)


def accelerators(requested: int) -> list[torch.device]:
    """The real accelerators a run may use: the first min(requested, available) CUDA devices."""
    n = min(requested, torch.cuda.device_count()) if torch.cuda.is_available() else 0
    return [torch.device("cuda", i) for i in range(n)]


def load(model_dir: Path, dtype: str = "f32") -> torch.nn.Module:
    """The checkpoint in `dtype` (hookscope's name) from local files only, in eval mode, undispatched:
    transformers' own `from_pretrained(..., dtype=...)`, so what it keeps in float32 (rotary
    inv_freq, a model's `_keep_in_fp32_modules`) stays float32, as it does for a user."""
    model = AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=TORCH_DTYPES[dtype], local_files_only=True)
    return model.eval()


def blocks(model: torch.nn.Module) -> list[str]:
    """The modules a device map assigns, in model order: every no-split module (decoder layer) and
    every other top-most module that holds no decoder layer but has parameters or buffers."""
    no_split = set(getattr(model, "_no_split_modules", None) or [])

    def is_layer(m: torch.nn.Module) -> bool:
        return type(m).__name__ in no_split

    out: list[str] = []

    def walk(prefix: str, mod: torch.nn.Module) -> None:
        for name, child in mod.named_children():
            full = prefix + name
            if is_layer(child) or not any(is_layer(m) for m in child.modules()):
                if next(child.parameters(), None) is not None or next(child.buffers(), None) is not None:
                    out.append(full)
            else:
                walk(full + ".", child)

    walk("", model)
    return out


def decoder_layers(model: torch.nn.Module, names: list[str]) -> list[str]:
    no_split = set(getattr(model, "_no_split_modules", None) or [])
    return [n for n in names if type(model.get_submodule(n)).__name__ in no_split]


def _under(param: str, modules: list[str]) -> bool:
    return any(m == "" or param == m or param.startswith(m + ".") for m in modules)


def _offloaded(model: torch.nn.Module, device_map: dict[str, Device], main_is_cpu: bool) -> list[str]:
    off = [m for m, d in device_map.items() if d == "disk" or (d == "cpu" and not main_is_cpu)]
    return [n for n, _ in model.named_parameters(remove_duplicate=False) if _under(n, off)]


def _device_key(dev: torch.device) -> Device:
    return dev.index if dev.type == "cuda" else dev.type


def _fresh_folder(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def _sharded(model, accel: list[torch.device]) -> tuple[dict[str, Device], Optional[str]]:
    names = blocks(model)
    if len(accel) < 2:
        dev = accel[0] if accel else torch.device("cpu")
        why = "one accelerator" if accel else "no accelerator"
        return ({n: _device_key(dev) for n in names},
                f"every block on {dev} with force_hooks=True ({why}): the hooks a sharded map attaches, "
                "without moving activations between devices")
    dtype = model_dtype(model)
    sizes = compute_module_sizes(model, dtype=dtype)
    largest = max(sizes[n] for n in names)
    total = sizes[""]
    max_memory: dict[Device, int] = {i: largest + total // len(accel) for i in range(len(accel))}
    max_memory["cpu"] = total * 4
    device_map = infer_auto_device_map(model, max_memory=max_memory, no_split_module_classes=model._no_split_modules,
                                       dtype=dtype)
    spill = [m for m, d in device_map.items() if d in ("cpu", "disk")]
    if spill:
        raise RuntimeError(f"sharded: the max_memory split leaves {spill[0]!r} on {device_map[spill[0]]}")
    return dict(device_map), None


def _mixed(model, accel: list[torch.device]) -> tuple[dict[str, Device], Optional[str]]:
    names = blocks(model)
    layers = decoder_layers(model, names)
    if not layers:
        raise RuntimeError("mixed: the model has no decoder layers (no _no_split_modules)")
    n, L = len(accel), len(layers)
    acc_end = max(1, L // 2)
    cpu_end = acc_end if n == 0 else max(acc_end + 1, (3 * L) // 4)
    main: Device = 0 if n else "cpu"
    last: Device = n - 1 if n else "cpu"
    device_map: dict[str, Device] = {}
    for name in names:
        if name in layers:
            i = layers.index(name)
            device_map[name] = ((i * n) // acc_end if n else "cpu") if i < acc_end else "cpu" if i < cpu_end else "disk"
        else:  # before the layers, or without parameters (rotary embeddings): the main device
            before = names.index(name) < names.index(layers[0])
            params = next(model.get_submodule(name).parameters(), None) is not None
            device_map[name] = main if before or not params else last
    note = None if n else ("no accelerator: the first half of the decoder layers runs on the cpu in place and the rest "
                           "is offloaded to disk (accelerate offloads 'cpu' blocks only when the main device is an "
                           "accelerator)")
    return device_map, note


def prepare(scenario: str, model_dir: Path, accel: list[torch.device], offload_dir: Path,
            dtype: str = "f32") -> Prepared:
    """Loads the checkpoint in `dtype` and dispatches it for `scenario`; raises RuntimeError naming
    the scenario."""
    model = load(model_dir, dtype)
    loaded = dtype_name(model_dtype(model))  # what transformers gave, not what was asked
    main = accel[0] if accel else torch.device("cpu")
    note = None
    if scenario == "sharded":
        device_map, note = _sharded(model, accel)
        accelerate.dispatch_model(model, device_map, force_hooks=True)
    elif scenario == "mixed":
        device_map, note = _mixed(model, accel)
        accelerate.dispatch_model(model, device_map, offload_dir=str(_fresh_folder(offload_dir / "offload-mixed")))
    elif scenario == "cpu-offload":
        device_map = {"": "cpu"}
        accelerate.cpu_offload(model, execution_device=main)
        if not accel:
            note = "no accelerator: weights kept on the cpu and onloaded to the cpu for each forward"
    elif scenario == "disk-offload":
        device_map = {"": "disk"}
        accelerate.disk_offload(model, str(_fresh_folder(offload_dir / "offload-disk")), execution_device=main)
    else:
        raise RuntimeError(f"unknown scenario '{scenario}'")
    if scenario in ("cpu-offload", "disk-offload"):
        offloaded = [n for n, _ in model.named_parameters(remove_duplicate=False)]
    else:
        offloaded = _offloaded(model, device_map, main.type == "cpu")
    return Prepared(scenario, model, device_map, main, offloaded, loaded, note)
