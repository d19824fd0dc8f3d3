#!/usr/bin/env python3
"""Oracle for tests/offload_test.cpp: the real accelerate (1.15) disk-offload store.

usage:
  offload_oracle.py write OUT TINY_CKPT
      accelerate writes OUT/basic (offload_state_dict of many dtypes/shapes), OUT/single_<dt>
      (offload_weight + save_offload_index, spec case 77) and OUT/tiny (offload_state_dict of a
      tiny transformers model's state_dict()). stdout: {"basic"|"single_*"|"tiny":
      {"order": [index keys], "tensors": {name: {"dtype": index dtype, "shape", "hex"}}}}
  offload_oracle.py compare REF CPP [REF CPP ...]
      compares C++-written folders with accelerate-written ones: index.json text and parsed
      value (with key order), the set of files, .dat bytes, and OffloadedWeightsLoader values.
      stdout: a list of reports, one per pair.
  offload_oracle.py ckpt TINY_CKPT CPP PYOUT
      accelerate offloads the checkpoint's tensors (sorted names) into PYOUT; then as `compare`
      PYOUT CPP, plus OffloadedWeightsLoader(save_folder=CPP)[k] against the checkpoint itself.
  offload_oracle.py safetensors OUT
      writes OUT/data.safetensors and OUT/index.json with safetensors-backed entries (as
      transformers builds them: safetensors_file / weight_name / dtype, some fields omitted);
      stdout: {name: {"dtype": torch dtype, "shape", "hex"}} as OffloadedWeightsLoader loads them.
  offload_oracle.py transformers TINY_CKPT OUT
      from_pretrained(device_map with "disk" entries, dtype=bfloat16, offload_folder=OUT/offload)
      and dumps the in-memory offload index transformers hands to dispatch_model into
      OUT/index/index.json; stdout: the loader's values for every index key.
  offload_oracle.py merge FOLDER NEW_INDEX_JSON
      save_offload_index(json.load(NEW_INDEX_JSON), FOLDER).
  offload_oracle.py semantics OUT
      OffloadedWeightsLoader / PrefixedDataset / extract_submodules_state_dict behaviour
      (case 77 among them) and error texts.
"""
import json
import os
import sys

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from accelerate.utils import (  # noqa: E402
    OffloadedWeightsLoader, PrefixedDataset, extract_submodules_state_dict, offload_state_dict,
    offload_weight, save_offload_index)


def raw_hex(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous().reshape(-1)
    return t.view(torch.uint8).numpy().tobytes().hex()


def describe(t: torch.Tensor):
    return {"dtype": str(t.dtype).removeprefix("torch."), "shape": list(t.shape), "hex": raw_hex(t)}


def basic_tensors():
    g = torch.Generator().manual_seed(1234)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-40, 65504.0])
    return {
        "f32": r(2, 3),
        "f16": r(2, 3).half(),
        "bf16": r(2, 3).bfloat16(),
        "f64": r(4).double(),
        "specials_f32": specials,
        "specials_f16": specials.half(),
        "specials_bf16": specials.bfloat16(),
        "i64": torch.arange(6).reshape(2, 3) - 3,
        "i32": torch.tensor([-(2**31), 2**31 - 1, 0], dtype=torch.int32),
        "i16": torch.tensor([-32768, 32767, 5], dtype=torch.int16),
        "i8": torch.tensor([-128, 127, 3], dtype=torch.int8),
        "u8": torch.tensor([0, 255, 17], dtype=torch.uint8),
        "u16": torch.tensor([0, 65535, 9], dtype=torch.uint16),
        "u32": torch.tensor([0, 2**32 - 1, 9], dtype=torch.uint32),
        "u64": torch.tensor([0, 2**63 + 5, 9], dtype=torch.uint64),
        "bool": torch.tensor([[True, False, True], [False, False, True]]),
        "c64": torch.tensor([1 + 2j, -3.5 + 0.25j], dtype=torch.complex64),
        "c128": torch.tensor([1 + 2j], dtype=torch.complex128),
        "fp8_e4m3fn": torch.tensor([1.5, -2.0, 448.0]).to(torch.float8_e4m3fn),
        "fp8_e5m2": torch.tensor([1.5, -2.0, 57344.0]).to(torch.float8_e5m2),
        "fp8_e8m0fnu": torch.tensor([1.0, 4.0, 0.5]).to(torch.float8_e8m0fnu),
        "scalar_bf16": torch.tensor(3.5, dtype=torch.bfloat16),
        "scalar_f32": torch.tensor(-1.25),
        "scalar_i64": torch.tensor(7),
        "scalar_bool": torch.tensor(True),
        "empty_f32": torch.zeros(0, 3),
        "empty_bf16": torch.zeros(2, 0, dtype=torch.bfloat16),
        "transposed": torch.arange(12.0).reshape(3, 4).t(),
        "model.layers.0.self_attn.q_proj.weight": r(4, 4),
        "big": r(64, 96),
    }


def tiny_state_dict(ckpt):
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    return model.state_dict()


def dump_folder(folder, tensors):
    with open(os.path.join(folder, "index.json")) as f:
        order = list(json.load(f).keys())
    return {"order": order, "tensors": {k: {**describe(v), "dtype": None} for k, v in tensors.items()}}


def cmd_write(out, ckpt):
    result = {}
    basic = basic_tensors()
    offload_state_dict(os.path.join(out, "basic"), basic)
    result["basic"] = dump_folder(os.path.join(out, "basic"), basic)
    # Spec case 77: offload_weight with an explicit index, then save_offload_index.
    g = torch.Generator().manual_seed(77)
    for name, dt in [("float16", torch.float16), ("float32", torch.float32), ("bfloat16", torch.bfloat16)]:
        folder = os.path.join(out, f"single_{name}")
        os.makedirs(folder)
        w = torch.randn(2, 3, generator=g).to(dt)
        index = offload_weight(w, "weight", folder, index={})
        assert index == {"weight": {"shape": [2, 3], "dtype": name}}, index
        save_offload_index(index, folder)
        result[f"single_{name}"] = dump_folder(folder, {"weight": w})
    tiny = tiny_state_dict(ckpt)
    offload_state_dict(os.path.join(out, "tiny"), tiny)
    result["tiny"] = dump_folder(os.path.join(out, "tiny"), tiny)
    # The index dtype names, as accelerate wrote them.
    for key, entry in result.items():
        with open(os.path.join(out, key, "index.json")) as f:
            idx = json.load(f)
        for name, t in entry["tensors"].items():
            t["dtype"] = idx[name]["dtype"]
            assert t["shape"] == idx[name]["shape"]
    json.dump(result, sys.stdout)


def bits_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and list(a.shape) == list(b.shape) and raw_hex(a) == raw_hex(b)


def compare_folders(ref, cpp):
    rep = {}
    with open(os.path.join(ref, "index.json"), "rb") as f:
        ref_text = f.read()
    with open(os.path.join(cpp, "index.json"), "rb") as f:
        cpp_text = f.read()
    rep["index_text_identical"] = ref_text == cpp_text
    ref_idx, cpp_idx = json.loads(ref_text), json.loads(cpp_text)
    rep["index_equal"] = ref_idx == cpp_idx
    rep["index_order_equal"] = list(ref_idx) == list(cpp_idx)
    ref_files, cpp_files = sorted(os.listdir(ref)), sorted(os.listdir(cpp))
    rep["files_equal"] = ref_files == cpp_files
    rep["only_in_ref"] = sorted(set(ref_files) - set(cpp_files))
    rep["only_in_cpp"] = sorted(set(cpp_files) - set(ref_files))
    rep["dat_mismatch"] = []
    for name in ref_files:
        if name.endswith(".dat") and name in cpp_files:
            with open(os.path.join(ref, name), "rb") as a, open(os.path.join(cpp, name), "rb") as b:
                if a.read() != b.read():
                    rep["dat_mismatch"].append(name)
    ref_loader = OffloadedWeightsLoader(save_folder=ref)
    cpp_loader = OffloadedWeightsLoader(save_folder=cpp)
    rep["loader_keys_equal"] = list(ref_loader) == list(cpp_loader)
    rep["value_mismatch"] = [k for k in ref_loader if k not in cpp_idx or not bits_equal(ref_loader[k], cpp_loader[k])]
    rep["count"] = len(ref_loader)
    return rep


def cmd_compare(*pairs):
    assert pairs and len(pairs) % 2 == 0, "compare REF CPP [REF CPP ...]"
    json.dump([compare_folders(pairs[i], pairs[i + 1]) for i in range(0, len(pairs), 2)], sys.stdout)


def checkpoint_tensors(ckpt):
    from safetensors.torch import load_file
    index_file = os.path.join(ckpt, "model.safetensors.index.json")
    if os.path.exists(index_file):
        with open(index_file) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    sd = {}
    for s in shards:
        sd.update(load_file(os.path.join(ckpt, s)))
    return {k: sd[k] for k in sorted(sd)}


def cmd_ckpt(ckpt, cpp, pyout):
    sd = checkpoint_tensors(ckpt)
    offload_state_dict(pyout, sd)
    rep = compare_folders(pyout, cpp)  # one report, not a list
    loader = OffloadedWeightsLoader(save_folder=cpp)
    rep["source_mismatch"] = [k for k in sd if k not in loader or not bits_equal(loader[k], sd[k])]
    rep["source_count"] = len(sd)
    json.dump(rep, sys.stdout)


def cmd_safetensors(out):
    from safetensors.torch import save_file
    g = torch.Generator().manual_seed(5)
    data = {
        "w_f32": torch.randn(3, 4, generator=g),
        "w_bf16": torch.randn(2, 5, generator=g).bfloat16(),
        "w_f16": torch.randn(6, generator=g).half(),
        "ids": torch.arange(5, dtype=torch.int64),
        "flag": torch.tensor([True, False]),
        "scalar": torch.tensor(2.5),
    }
    path = os.path.abspath(os.path.join(out, "data.safetensors"))
    save_file(data, path)
    index = {
        # as transformers' accelerate_disk_offload: file, source name, target dtype
        "model.a.weight": {"safetensors_file": path, "weight_name": "w_f32", "dtype": "float32"},
        "model.b.weight": {"safetensors_file": path, "weight_name": "w_f32", "dtype": "bfloat16"},
        "model.c.weight": {"safetensors_file": path, "weight_name": "w_bf16", "dtype": "float32"},
        "model.d.weight": {"safetensors_file": path, "weight_name": "w_f16", "dtype": "float16"},
        "model.e.weight": {"safetensors_file": path, "weight_name": "w_bf16"},   # no dtype: as stored
        "w_f16": {"safetensors_file": path, "dtype": "float64"},                  # no weight_name: the key
        "ids": {"safetensors_file": path},
        "flag": {"safetensors_file": path, "weight_name": "flag", "dtype": "bool"},
        "scalar": {"safetensors_file": path, "weight_name": "scalar", "dtype": "float16"},
        "model.i64_as_f32": {"safetensors_file": path, "weight_name": "ids", "dtype": "float32"},
    }
    save_offload_index(index, out)
    loader = OffloadedWeightsLoader(save_folder=out)
    json.dump({k: describe(loader[k]) for k in loader}, sys.stdout)


def cmd_transformers(ckpt, out):
    from transformers import AutoModelForCausalLM
    from accelerate.hooks import AlignDevicesHook
    from accelerate.utils import OffloadedWeightsLoader as OWL
    device_map = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
                  "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}
    model = AutoModelForCausalLM.from_pretrained(ckpt, device_map=device_map, dtype=torch.bfloat16,
                                                 offload_folder=os.path.join(out, "offload"))
    loader = None
    for _, m in model.named_modules():
        hook = getattr(m, "_hf_hook", None)
        hooks = getattr(hook, "hooks", [hook])
        for h in hooks:
            if isinstance(h, AlignDevicesHook) and h.weights_map is not None:
                wm = h.weights_map
                wm = getattr(wm, "dataset", wm)
                if isinstance(wm, OWL) and wm.index:
                    loader = wm
    assert loader is not None, "no OffloadedWeightsLoader with an index found"
    os.makedirs(os.path.join(out, "index"))
    with open(os.path.join(out, "index", "index.json"), "w") as f:
        json.dump(loader.index, f, indent=2)
    json.dump({"values": {k: describe(loader[k]) for k in loader.index},
               "device_map": {k: str(v) for k, v in model.hf_device_map.items()}}, sys.stdout)


def cmd_merge(folder, new_index_json):
    with open(new_index_json) as f:
        save_offload_index(json.load(f), folder)


class ModelForTest(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = torch.nn.Linear(3, 4)
        self.batchnorm = torch.nn.BatchNorm1d(4)
        self.linear2 = torch.nn.Linear(4, 5)


def cmd_semantics(out):
    rep = {}
    sd = ModelForTest().state_dict()
    rep["state_dict_keys"] = list(sd)
    cpu_part = {k: v for k, v in sd.items() if "linear2" not in k}
    disk_part = {k: v for k, v in sd.items() if "linear2" in k}
    folder = os.path.join(out, "semantics")
    offload_state_dict(folder, disk_part)
    rep["written_files"] = sorted(os.listdir(folder))
    l1 = OffloadedWeightsLoader(state_dict=cpu_part, save_folder=folder)
    rep["mixed_keys"], rep["mixed_len"] = list(l1), len(l1)
    l2 = OffloadedWeightsLoader(state_dict=sd, save_folder=folder)
    rep["dup_keys"], rep["dup_len"] = list(l2), len(l2)
    rep["dup_same_object"] = l2["linear2.weight"] is sd["linear2.weight"]
    l3 = OffloadedWeightsLoader(state_dict={"zzz": torch.zeros(1), "linear2.bias": torch.ones(5)}, save_folder=folder)
    rep["order_keys"] = list(l3)
    rep["index_only_keys"] = list(OffloadedWeightsLoader(save_folder=folder))
    rep["fresh_pointer"] = l1["linear2.weight"].data_ptr() != l1["linear2.weight"].data_ptr()
    # PrefixedDataset: a prefix view over a weights map
    pd = PrefixedDataset({"a.x": 1, "a.y": 2, "b.z": 3}, "a.")
    rep["pd_list"], rep["pd_len"] = list(pd), len(pd)
    rep["pd_contains_x"], rep["pd_contains_z"] = "x" in pd, "z" in pd
    rep["pd_get_x"] = pd["x"]
    pl = PrefixedDataset(l1, "linear2.")
    rep["pd_loader_list"], rep["pd_loader_len"] = list(pl), len(pl)
    rep["pd_loader_contains_weight"] = "weight" in pl
    # extract_submodules_state_dict, case 77
    rep["extract_1"] = list(extract_submodules_state_dict({"a.1": 0, "a.10": 1, "a.2": 2}, ["a.1", "a.2"]).items())
    rep["extract_2"] = list(extract_submodules_state_dict({"a.1.a": 0, "a.10.a": 1, "a.2.a": 2}, ["a.1", "a.2"]).items())
    rep["extract_overlap"] = list(extract_submodules_state_dict({"a.b.c": 0, "a.d": 1, "a.b": 2}, ["a.b", "a"]).items())
    rep["extract_root"] = list(extract_submodules_state_dict({"a": 0, "b.c": 1}, [""]).items())
    try:
        OffloadedWeightsLoader()
    except ValueError as e:
        rep["none_error"] = str(e)
    try:
        OffloadedWeightsLoader(save_folder=os.path.join(out, "missing"))
    except FileNotFoundError as e:
        rep["missing_index_error"] = type(e).__name__
    try:
        l1["nope"]
    except KeyError as e:
        rep["missing_key_error"] = type(e).__name__
    json.dump(rep, sys.stdout)


def main(argv):
    cmd, args = argv[1], argv[2:]
    {"write": cmd_write, "compare": cmd_compare, "ckpt": cmd_ckpt, "safetensors": cmd_safetensors,
     "transformers": cmd_transformers, "merge": cmd_merge, "semantics": cmd_semantics}[cmd](*args)


if __name__ == "__main__":
    main(sys.argv)
