#!/usr/bin/env python3
"""Oracle for hooks/device_map: runs the real accelerate (utils/modeling.py) on models built
either by transformers (from_config on meta, in the requested dtype) or from a module-tree
description written by the C++ test (same class names, tensor names/shapes/dtypes, ties).

Usage: device_map_oracle.py --request REQ.json   (prints the response JSON on stdout)

Request: {"models": {ID: {"hf": DIR, "dtype": "float32"|"bfloat16"|"float16"}
                          | {"tree": TREE}},
          "ops": [{"id": OPID, "op": OP, "model": ID, ...options}]}
TREE: {"class": str, "tensors": [{"name", "shape", "dtype", "param", "persistent", "tie"}],
       "children": [[name, TREE], ...]}  -- tensors with the same "tie" id are one tensor.
Device maps and max_memory travel as [key, value] pair lists so int keys stay ints.

Ops and results (each result also has "events": [[level, message], ...] — warnings.warn and
accelerate's logger, in order; level "WARNING"/"INFO"; and "error": {"type", "message"} when
accelerate raised):
  sizes {dtype, special_dtypes, buffers_only} -> "sizes": pairs
  total_buffer {dtype} -> "value"
  max_layer {no_split} -> "value": [size, names] over the root's params + children + buffers
  tied -> "value": groups
  max_memory {max_memory|null} -> "value": pairs
  infer {max_memory, no_split (null = the model's _no_split_modules or []), dtype,
         special_dtypes, verbose, clean_result, offload_buffers, fallback_allocation}
        -> "map", "raw" (same call with clean_result=False), "stdout" (verbose prints),
           "check_error" (check_device_map on "map", or null)
  balanced {max_memory|null, no_split, dtype, low_zero} -> "value": pairs
  check {device_map} -> "ok": true
  clean {device_map} -> "map"
  convert {size} -> "value"
Top level: {"num_accelerators": torch.cuda.device_count(), "results": {OPID: result}}.
"""
import argparse
import contextlib
import io
import json
import logging
import os
import sys
import warnings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from torch import nn  # noqa: E402
from accelerate.utils import modeling as am  # noqa: E402

# ---------------------------------------------------------------- capture of messages
EVENTS = []


class _Handler(logging.Handler):
    def emit(self, record):
        EVENTS.append([record.levelname, record.getMessage()])


_logger = logging.getLogger("accelerate.utils.modeling")
_logger.setLevel(logging.DEBUG)
_logger.addHandler(_Handler())
_logger.propagate = False


def _showwarning(message, category, filename, lineno, file=None, line=None):
    EVENTS.append(["WARNING", str(message)])


warnings.showwarning = _showwarning
warnings.simplefilter("always")

# ---------------------------------------------------------------- models
_CLASSES = {}


def _cls(name):
    if name not in _CLASSES:
        _CLASSES[name] = type(name, (nn.Module,), {})
    return _CLASSES[name]


def build_tree(spec, ties):
    m = _cls(spec["class"])()
    for t in spec["tensors"]:
        tie = t.get("tie")
        if tie is not None and tie in ties:
            tensor = ties[tie]
        else:
            dtype = getattr(torch, t["dtype"])
            tensor = torch.empty(t["shape"], dtype=dtype, device="meta")
            if t["param"]:
                tensor = nn.Parameter(tensor, requires_grad=dtype.is_floating_point or dtype.is_complex)
            if tie is not None:
                ties[tie] = tensor
        if t["param"]:
            m.register_parameter(t["name"], tensor)
        else:
            m.register_buffer(t["name"], tensor, persistent=t.get("persistent", True))
    for name, child in spec["children"]:
        m.add_module(name, build_tree(child, ties))
    return m


def load_model(desc):
    if "tree" in desc:
        return build_tree(desc["tree"], {})
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(desc["hf"])
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config, dtype=getattr(torch, desc.get("dtype", "float32")))


# ---------------------------------------------------------------- conversions
def mm_in(pairs):
    if pairs is None:
        return None
    return {k: v for k, v in pairs}


def pairs_out(d):
    return [[k if not isinstance(k, torch.device) else str(k), v] for k, v in d.items()]


def dtype_in(name):
    return None if name is None else getattr(torch, name)


def special_in(d):
    if not d:
        return None
    return {k: getattr(torch, v) for k, v in d.items()}


def no_split_of(model, op):
    ns = op.get("no_split")
    if ns is None:
        ns = list(getattr(model, "_no_split_modules", None) or [])
    return ns


# ---------------------------------------------------------------- ops
def run_op(model, op):
    kind = op["op"]
    out = {}
    if kind == "sizes":
        sizes = am.compute_module_sizes(model, dtype=dtype_in(op.get("dtype")),
                                        special_dtypes=special_in(op.get("special_dtypes")),
                                        buffers_only=op.get("buffers_only", False))
        out["sizes"] = pairs_out(sizes)
    elif kind == "total_buffer":
        out["value"] = am.compute_module_total_buffer_size(model, dtype=dtype_in(op.get("dtype")))
    elif kind == "max_layer":
        sizes = am.compute_module_sizes(model, dtype=dtype_in(op.get("dtype")))
        mods = (list(model.named_parameters(recurse=False)) + list(model.named_children())
                + list(model.named_buffers(recurse=False)))
        size, names = am.get_max_layer_size(mods, sizes, no_split_of(model, op))
        out["value"] = [size, names]
    elif kind == "tied":
        out["value"] = am.find_tied_parameters(model)
    elif kind == "max_memory":
        out["value"] = pairs_out(am.get_max_memory(mm_in(op.get("max_memory"))))
    elif kind == "infer":
        kwargs = dict(no_split_module_classes=no_split_of(model, op), dtype=dtype_in(op.get("dtype")),
                      special_dtypes=special_in(op.get("special_dtypes")),
                      offload_buffers=op.get("offload_buffers", False),
                      fallback_allocation=op.get("fallback_allocation", False))
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            dm = am.infer_auto_device_map(model, max_memory=mm_in(op.get("max_memory")),
                                          verbose=op.get("verbose", False),
                                          clean_result=op.get("clean_result", True), **kwargs)
        out["map"] = pairs_out(dm)
        out["stdout"] = buf.getvalue()
        saved = list(EVENTS)
        with contextlib.redirect_stdout(io.StringIO()):
            raw = am.infer_auto_device_map(model, max_memory=mm_in(op.get("max_memory")), clean_result=False,
                                           **kwargs)
        out["raw"] = pairs_out(raw)
        try:
            am.check_device_map(model, dm)
            out["check_error"] = None
        except ValueError as e:
            out["check_error"] = str(e)
        EVENTS[:] = saved
    elif kind == "balanced":
        mm = am.get_balanced_memory(model, max_memory=mm_in(op.get("max_memory")),
                                    no_split_module_classes=op.get("no_split") or None,
                                    dtype=dtype_in(op.get("dtype")), low_zero=op.get("low_zero", False))
        out["value"] = pairs_out(mm)
    elif kind == "check":
        am.check_device_map(model, {k: v for k, v in op["device_map"]})
        out["ok"] = True
    elif kind == "clean":
        out["map"] = pairs_out(am.clean_device_map({k: v for k, v in op["device_map"]}))
    elif kind == "convert":
        out["value"] = am.convert_file_size_to_int(op["size"])
    else:
        raise SystemExit(f"unknown op {kind}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--request", required=True)
    args = ap.parse_args()
    with open(args.request) as f:
        req = json.load(f)
    models = {}
    results = {}
    for op in req["ops"]:
        mid = op.get("model")
        model = None
        if mid:
            if mid not in models:
                models[mid] = load_model(req["models"][mid])
            model = models[mid]
        EVENTS.clear()
        try:
            res = run_op(model, op)
        except Exception as e:  # accelerate's own errors are results to compare
            res = {"error": {"type": type(e).__name__, "message": str(e)}}
        res["events"] = list(EVENTS)
        results[op["id"]] = res
    json.dump({"num_accelerators": torch.cuda.device_count(), "results": results}, sys.stdout)


if __name__ == "__main__":
    main()
