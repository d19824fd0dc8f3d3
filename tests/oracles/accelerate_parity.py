#!/usr/bin/env python3
"""Runs accelerate's hook scenarios on CPU and prints what can be observed, as JSON.

The C++ parity suite (tests/hooks_test.cpp) runs the same scenarios through hookscope and
compares: tensor devices after attach / forward / remove, outputs, exception messages, files
written to the offload folder. Scenario names carry case numbers shared with the C++ tests.

  accelerate_parity.py --out DIR [--device cuda:0]
                                     writes DIR/weights.safetensors (ModelForTest weights and
                                     the input), then DIR/<scenario>/ folders as needed, and
                                     prints {"scenarios": {name: observation}}
"""
import argparse
import json
import os
import shutil
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import torch  # noqa: E402
from torch import nn  # noqa: E402
from safetensors.torch import save_file  # noqa: E402
from accelerate import cpu_offload, cpu_offload_with_hook, disk_offload, dispatch_model  # noqa: E402
from accelerate.hooks import (  # noqa: E402
    AlignDevicesHook, CpuOffload, ModelHook, SequentialHook, add_hook_to_module, attach_align_device_hook,
    attach_execution_device_hook, remove_hook_from_module, remove_hook_from_submodules)
from accelerate.utils import set_module_tensor_to_device  # noqa: E402


class ModelForTest(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(3, 4)
        self.batchnorm = nn.BatchNorm1d(4)
        self.linear2 = nn.Linear(4, 5)

    def forward(self, x):
        return self.linear2(self.batchnorm(self.linear1(x)))


class PreForwardHook(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        return (args[0] + 1,) + args[1:], kwargs


class PostForwardHook(ModelHook):
    def post_forward(self, module, output):
        return output + 1


class CountingHook(ModelHook):
    def __init__(self, name, log):
        self.name, self.log = name, log

    def init_hook(self, module):
        self.log.append(f"{self.name}.init")
        return module

    def detach_hook(self, module):
        self.log.append(f"{self.name}.detach")
        return module


def make_model():
    torch.manual_seed(0)
    m = ModelForTest()
    # Non-trivial batchnorm statistics so the buffers matter.
    with torch.no_grad():
        m.batchnorm.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3, -0.4]))
        m.batchnorm.running_var.copy_(torch.tensor([1.5, 0.5, 2.0, 0.8]))
        m.batchnorm.weight.copy_(torch.tensor([1.1, 0.9, 1.2, 0.7]))
        m.batchnorm.bias.copy_(torch.tensor([0.05, -0.05, 0.1, 0.0]))
    return m.eval()


def name(device):
    """A device as hookscope writes it: an accelerator by its index ("0"), else "cpu", "meta"."""
    return str(device.index or 0) if device.type == "cuda" else str(device)


def devices(model):
    out = {}
    for n, p in model.named_parameters():
        out[n] = name(p.device)
    for n, b in model.named_buffers():
        out[n] = name(b.device)
    return out


def run(model, x):
    with torch.no_grad():
        y = model(x)
    return {"out": y.flatten().tolist(), "out_shape": list(y.shape), "out_device": name(y.device)}


def files(folder):
    if not os.path.isdir(folder):
        return None
    names = sorted(os.listdir(folder))
    idx = None
    if "index.json" in names:
        with open(os.path.join(folder, "index.json")) as f:
            idx = json.load(f)
    return {"files": names, "index": idx}


def observe(model, x, attach, remove=None, folder=None):
    obs = {}
    try:
        attach(model)
        obs["after_attach"] = devices(model)
        obs.update(run(model, x))
        obs["after_forward"] = devices(model)
        if folder:
            obs["folder"] = files(folder)
        if remove:
            remove(model)
            obs["after_remove"] = devices(model)
            obs["after_remove_out"] = run(model, x)["out"]
    except Exception as e:  # noqa: BLE001 - the message is what we compare
        obs["error"] = f"{type(e).__name__}: {e}"
    return obs


def scenarios(out_dir, x, E):
    """E: the execution device of the upstream tests' scenarios (cpu, or cuda:0 on a GPU)."""
    S = {}

    def case7(offload_buffers):
        def attach(m):
            for mod in (m.linear1, m.batchnorm, m.linear2):
                add_hook_to_module(mod, AlignDevicesHook(execution_device=E, offload=True, offload_buffers=offload_buffers))
        def remove(m):
            for mod in (m.linear1, m.batchnorm, m.linear2):
                remove_hook_from_module(mod)
        return attach, remove

    for ob in (False, True):
        a, r = case7(ob)
        S[f"case07_hook_level_offload{'_buffers' if ob else ''}"] = observe(make_model(), x, a, r)
        S[f"case08_attach_align_device_hook{'_buffers' if ob else ''}"] = observe(
            make_model(), x, lambda m, ob=ob: attach_align_device_hook(m, execution_device=E, offload=True, offload_buffers=ob),
            remove_hook_from_submodules)
        S[f"case09_attach_with_weights_map{'_buffers' if ob else ''}"] = observe(
            make_model(), x,
            lambda m, ob=ob: attach_align_device_hook(m, execution_device=E, offload=True, weights_map=m.state_dict(),
                                                      offload_buffers=ob),
            remove_hook_from_submodules)
        S[f"case17_cpu_offload{'_buffers' if ob else ''}"] = observe(
            make_model(), x, lambda m, ob=ob: cpu_offload(m, E, offload_buffers=ob), remove_hook_from_submodules)
        d = os.path.join(out_dir, f"case20_disk_offload{'_buffers' if ob else ''}")
        S[f"case20_disk_offload{'_buffers' if ob else ''}"] = observe(
            make_model(), x, lambda m, ob=ob, d=d: disk_offload(m, d, E, offload_buffers=ob), remove_hook_from_submodules,
            folder=d)

    # Hooks replace unless appended (cases 3, 4).
    def pre_twice(m):
        add_hook_to_module(m, PreForwardHook())
        add_hook_to_module(m, PreForwardHook())
    S["case03_pre_forward_replaced"] = observe(make_model(), x, pre_twice, lambda m: remove_hook_from_module(m))
    S["case03_pre_forward_sequential"] = observe(
        make_model(), x, lambda m: add_hook_to_module(m, SequentialHook(PreForwardHook(), PreForwardHook())),
        lambda m: remove_hook_from_module(m))
    S["case04_post_forward_sequential"] = observe(
        make_model(), x, lambda m: add_hook_to_module(m, SequentialHook(PostForwardHook(), PostForwardHook())),
        lambda m: remove_hook_from_module(m))

    # Append semantics (case 2): init/detach order.
    log = []
    m = make_model()
    add_hook_to_module(m, CountingHook("a", log))
    add_hook_to_module(m, CountingHook("b", log), append=True)
    remove_hook_from_module(m)
    S["case02_append_init_detach_order"] = {"log": log}

    # Replacing an offload hook without append does not detach it (quirk 6).
    m = make_model()
    add_hook_to_module(m.linear1, AlignDevicesHook(execution_device=E, offload=True))
    add_hook_to_module(m.linear1, ModelHook())
    S["quirk06_replace_does_not_detach"] = {"after": devices(m)}

    # dispatch_model on CPU (cases 24, 37, 38).
    d = os.path.join(out_dir, "dispatch_cpu_disk")
    S["dispatch_cpu_cpu_disk"] = observe(
        make_model(), x,
        lambda m: dispatch_model(m, {"linear1": "cpu", "batchnorm": "cpu", "linear2": "disk"}, offload_dir=d),
        remove_hook_from_submodules, folder=d)
    d = os.path.join(out_dir, "case37_disk_only")
    S["case37_disk_only"] = observe(
        make_model(), x,
        lambda m: dispatch_model(m, {"linear1": "disk", "batchnorm": "disk", "linear2": "disk"}, offload_dir=d),
        remove_hook_from_submodules, folder=d)
    d = os.path.join(out_dir, "dispatch_disk_buffers")
    S["dispatch_disk_offload_buffers"] = observe(
        make_model(), x,
        lambda m: dispatch_model(m, {"linear1": "cpu", "batchnorm": "disk", "linear2": "disk"}, offload_dir=d,
                                 offload_buffers=True),
        remove_hook_from_submodules, folder=d)
    S["case38_force_hooks"] = observe(
        make_model(), x, lambda m: dispatch_model(m, {"": "cpu"}, force_hooks=True), remove_hook_from_submodules)
    S["dispatch_single_device_no_hooks"] = observe(make_model(), x, lambda m: dispatch_model(m, {"": "cpu"}))
    S["dispatch_disk_without_offload_dir"] = observe(
        make_model(), x, lambda m: dispatch_model(m, {"linear1": "cpu", "batchnorm": "cpu", "linear2": "disk"}))

    # set_module_tensor_to_device (cases 47-49).
    obs = {}
    m = make_model()
    set_module_tensor_to_device(m, "linear1.weight", "meta")
    obs["to_meta"] = str(m.linear1.weight.device)
    for label, fn in [
        ("meta_without_value", lambda: set_module_tensor_to_device(m, "linear1.weight", "cpu")),
        ("bad_shape", lambda: set_module_tensor_to_device(m, "linear1.weight", "cpu", value=torch.zeros(2, 2))),
        ("unknown_name", lambda: set_module_tensor_to_device(m, "linear1.nope", "cpu")),
    ]:
        try:
            fn()
            obs[label] = None
        except Exception as e:  # noqa: BLE001
            obs[label] = f"{type(e).__name__}: {e}"
    set_module_tensor_to_device(m, "linear1.weight", "cpu", value=torch.ones(4, 3), dtype=torch.float16)
    obs["with_dtype"] = str(m.linear1.weight.dtype)
    S["case47_49_set_module_tensor_to_device"] = obs

    # send_to_device's skip_keys (to meta, which a CPU can do): skipped keys keep their
    # tensors at every level of nested dicts, lists and tuples.
    from accelerate.utils import send_to_device

    def tree():
        t = torch.ones(2)
        return {"a": t, "b": {"a": t, "c": t}, "d": [t, {"a": t, "c": t}], "e": (t, 3), "c": t}

    def placed(v, path=""):
        if isinstance(v, torch.Tensor):
            return {path: str(v.device)}
        out = {}
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, (list, tuple)) else ()
        for k, e in items:
            out.update(placed(e, f"{path}.{k}" if path else str(k)))
        return out

    # Layerwise casting (attach_layerwise_casting_hooks): Linear weights stored in bfloat16,
    # computed in float32; a pattern or a class skips a module.
    from accelerate.big_modeling import attach_layerwise_casting_hooks

    def dtypes(m):
        return {n: str(t.dtype) for n, t in list(m.named_parameters()) + list(m.named_buffers())}

    for label, kw in [("all", {}), ("skip_linear2", {"skip_modules_pattern": ["linear2"]}),
                      ("skip_linear_class", {"skip_modules_classes": (nn.Linear,)})]:
        m = make_model()
        attach_layerwise_casting_hooks(m, storage_dtype=torch.bfloat16, compute_dtype=torch.float32, **kw)
        obs = {"after_attach": dtypes(m)}
        obs.update(run(m, x))
        obs["after_forward"] = dtypes(m)
        S[f"layerwise_casting_{label}"] = obs

    S.update(offload_hook_scenarios(x))
    S["send_to_device_skip_keys"] = {
        "none": placed(send_to_device(tree(), "meta")),
        "a": placed(send_to_device(tree(), "meta", skip_keys=["a"])),
        "a_c": placed(send_to_device(tree(), "meta", skip_keys=["a", "c"])),
        "c_as_str": placed(send_to_device(tree(), "meta", skip_keys="c")),
    }
    return S


def hooked(model):
    """The modules (by name, "" = the root) that carry a hook, and the hook's class."""
    return {n: type(m._hf_hook).__name__ for n, m in model.named_modules() if hasattr(m, "_hf_hook")}


def step(obs, label, fn):
    """Runs fn, recording its error (if any) as obs[label]; True when it succeeded."""
    try:
        fn()
        return True
    except Exception as e:  # noqa: BLE001 - the message is what we compare
        obs[label] = f"{type(e).__name__}: {e}"
        return False


def offload_hook_scenarios(x):
    """CpuOffload, cpu_offload_with_hook (its UserCpuOffloadHook's offload / remove and the
    prev_module_hook chain) and attach_execution_device_hook. With only a CPU, "meta" is the
    second device: moving to it is real (the data is dropped), and moving back fails the way
    accelerate's own offload does, which shows whether an offload was attempted."""
    S = {}
    M = torch.device("meta")
    for label, dev in (("cpu", torch.device("cpu")), ("meta", M)):
        # add_hook_to_module(m, CpuOffload(...)): init_hook moves to cpu, pre_forward to the device.
        m = make_model()
        obs = {}
        add_hook_to_module(m, CpuOffload(execution_device=dev))
        obs["hooked"] = hooked(m)
        obs["after_attach"] = devices(m)
        with torch.no_grad():
            y = m(x)
        obs["out_device"] = name(y.device)
        if dev != M:
            obs["out"] = y.flatten().tolist()
        obs["after_forward"] = devices(m)
        S[f"cpu_offload_hook_{label}"] = obs

        # cpu_offload_with_hook: the handle's offload() puts the model back on the cpu,
        # remove() takes the hook off.
        m = make_model()
        obs = {}
        m, handle = cpu_offload_with_hook(m, execution_device=dev)
        obs["hooked"] = hooked(m)
        with torch.no_grad():
            y = m(x)
        obs["out_device"] = name(y.device)
        obs["after_forward"] = devices(m)
        if step(obs, "offload_error", handle.offload):
            obs["after_offload"] = devices(m)
        handle.remove()
        obs["hooked_after_remove"] = hooked(m)
        S[f"cpu_offload_with_hook_{label}"] = obs

        # A pipeline of two models: b's forward offloads a first when a is not on the cpu.
        a, b = make_model(), make_model()
        obs = {}
        a, ha = cpu_offload_with_hook(a, execution_device=dev)
        b, hb = cpu_offload_with_hook(b, execution_device=dev, prev_module_hook=ha)
        with torch.no_grad():
            ya = a(x)
            obs["a_after_forward"] = devices(a)
            if step(obs, "b_forward_error", lambda: b(x)):
                obs["a_after_b"] = devices(a)
                obs["b_after_forward"] = devices(b)
        obs["a_out_device"] = name(ya.device)
        S[f"cpu_offload_chain_{label}"] = obs

    # attach_execution_device_hook: an AlignDevicesHook on every module with a state dict (a
    # preload class stops the recursion); inputs go to the execution device, weights stay.
    for label, kw in (("all", {}), ("preload_root", {"preload_module_classes": ["ModelForTest"]})):
        m = make_model().to(M)
        obs = {}
        attach_execution_device_hook(m, M, **kw)
        obs["hooked"] = hooked(m)
        with torch.no_grad():
            y = m(x)
        obs["out_device"] = name(y.device)
        obs["after_forward"] = devices(m)
        S[f"attach_execution_device_hook_{label}"] = obs
    # On the cpu with weights on the cpu: outputs as without hooks.
    m = make_model()
    attach_execution_device_hook(m, torch.device("cpu"))
    S["attach_execution_device_hook_cpu"] = {"hooked": hooked(m), **run(m, x)}
    return S


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu", help="execution device of the upstream scenarios (cuda:0 on a GPU)")
    args = ap.parse_args()
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    torch.manual_seed(1)
    x = torch.randn(2, 3)
    m = make_model()
    save_file({**{k: v.contiguous() for k, v in m.state_dict().items()}, "__input__": x},
              os.path.join(args.out, "weights.safetensors"))
    with torch.no_grad():
        ref = m(x)
    res = {"reference": ref.flatten().tolist(), "scenarios": scenarios(args.out, x, torch.device(args.device))}
    json.dump(res, sys.stdout)


if __name__ == "__main__":
    main()
