#!/usr/bin/env python3
"""Seed corpora for the fuzz targets of fuzz/, written by the real libraries (never committed).

usage: make_seeds.py --out build-fuzz/seeds --work build-fuzz/seed-work
                     [--capture-seed build-fuzz/fuzz/make_capture_seed] [--force]

Writes OUT/<target>/<seed> for every target, and the fixed inputs some targets read next to
their fuzzed one (paths printed as `export` lines for ./run fuzz to eval):
  HOOKSCOPE_FUZZ_TOKENIZERS  WORK/tokenizers: tokenizer.json files made by `tokenizers`
                             (tests/oracles/tokenizer_oracle.py's variants) and one saved by
                             transformers' PreTrainedTokenizerFast.save_pretrained
  HOOKSCOPE_FUZZ_SHARDS      WORK/safetensors/sharded: a tiny Llama saved by transformers with
                             save_pretrained(max_shard_size=...) (tests/oracles/safetensors_write.py)
  HOOKSCOPE_FUZZ_OFFLOAD     WORK/offload-data: the .dat files accelerate's offload_state_dict /
                             offload_weight wrote (tests/oracles/offload_oracle.py write) and the
                             data.safetensors of its safetensors-backed index

The seeds, per target:
  tokenizer_json_fuzz     those tokenizer.json files
  tokenizer_encode_fuzz   the tokenizer tests' strings (tokenizer_oracle.make_strings), each
                          prefixed with a tokenizer selector byte and a flags byte
  safetensors_fuzz        safetensors_write.py's mixed.safetensors (many dtypes, 0-rank, empty,
                          metadata) and the sharded checkpoint's shards
  safetensors_index_fuzz  transformers' model.safetensors.index.json of that checkpoint, and
                          smaller ones (one shard, metadata dropped)
  config_fuzz             config.json and generation_config.json of tiny Llama / Qwen2 / Qwen3
                          (tests/oracles/make_fixtures.py's FIXTURES), also in the 4.x form
  offload_index_fuzz      accelerate's index.json files (offload_oracle.py write / safetensors,
                          the latter's safetensors_file made relative: "data.safetensors")
  device_map_fuzz         --max-memory strings, sizes, device names, and accelerate's
                          get_max_memory / infer_auto_device_map results as JSON
  kineto_trace_fuzz       a torch.profiler trace of a tiny op sequence (plain and gzip), a
                          digest of tests/oracles/profile_trace.py's trace (the first events of
                          every category and phase), and small traces nested around the
                          importer's depth bound
  torch_trace_fuzz        tests/oracles/compile_log.py's per-cell TORCH_TRACE logs
  capture_reader_fuzz     captures written by the real Store (fuzz/make_capture_seed, the tests'
                          synthetic writer), and one with RUNS JSON nested past the readers' bound
  btree_pages_fuzz        those captures, closed (rollback-journal mode: the page reader's files)
                          and rewritten with 512-byte pages, and a small database written by
                          Python's sqlite3 with every integer width, NULLs, REAL, TEXT, BLOB,
                          extreme rowids, added columns, a rowid alias, an index, a WITHOUT ROWID
                          table, a generated column and an overflowed record
Each part is skipped when its output is already there (--force rewrites everything).
"""
import argparse
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLES = os.path.join(os.path.dirname(HERE), "tests", "oracles")
sys.path.insert(0, ORACLES)
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

PY = sys.executable


def log(msg):
    print(f"[make_seeds] {msg}", file=sys.stderr, flush=True)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode("utf-8"))


def oracle(script, *args, cwd=None):
    subprocess.run([PY, os.path.join(ORACLES, script), *args], check=True, stdout=subprocess.DEVNULL, cwd=cwd)


class Seeds:
    def __init__(self, out, work, force):
        self.out, self.work, self.force = out, work, force

    def fresh(self, target):
        """Empties OUT/target unless it is complete (then returns False: nothing to do)."""
        d = os.path.join(self.out, target)
        if not self.force and os.path.exists(self.stamp(target)):
            return False
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return True

    def stamp(self, target):
        """Marks OUT/target complete (outside it: libFuzzer reads every file there)."""
        return os.path.join(self.work, "stamps", target)

    def done(self, target):
        d = os.path.join(self.out, target)
        n = len(os.listdir(d))
        os.makedirs(os.path.dirname(self.stamp(target)), exist_ok=True)
        open(self.stamp(target), "w").write(f"{n}\n")
        log(f"{target}: {n} seeds")

    def seed(self, target, name, data):
        write(os.path.join(self.out, target, name), data)


# ------------------------------------------------------------------------------ tokenizers

def shrink_tokenizer(d, keep=300):
    """The tokenizer.json dict `d` with its BPE vocab cut to ids < keep (the byte alphabet and
    the first merges) and the merges whose parts and result are all kept."""
    model = d.get("model") or {}
    vocab = model.get("vocab")
    if not isinstance(vocab, dict):
        return d
    kept = {t: i for t, i in vocab.items() if i < keep}
    merges = []
    for m in model.get("merges", []):
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        if a in kept and b in kept and a + b in kept:
            merges.append(m)
    model["vocab"], model["merges"] = kept, merges
    return d


def tokenizer_part(s):
    tok_dir = os.path.join(s.work, "tokenizers")
    if s.force or not os.path.exists(os.path.join(tok_dir, ".complete")):
        import tokenizer_oracle as to
        from transformers import PreTrainedTokenizerFast
        from tokenizers import Tokenizer
        shutil.rmtree(tok_dir, ignore_errors=True)
        for name in to.VARIANTS:
            d, _ = to.variant(name)
            write(os.path.join(tok_dir, name, "tokenizer.json"), json.dumps(d, ensure_ascii=False, indent=1))
        # transformers' own serialization of one of them.
        fast = PreTrainedTokenizerFast(
            tokenizer_object=Tokenizer.from_file(os.path.join(tok_dir, "qwen_pairs", "tokenizer.json")),
            eos_token="<|endoftext|>")
        fast.save_pretrained(os.path.join(tok_dir, "transformers_saved"))
        for f in os.listdir(os.path.join(tok_dir, "transformers_saved")):
            if f != "tokenizer.json":
                os.remove(os.path.join(tok_dir, "transformers_saved", f))
        open(os.path.join(tok_dir, ".complete"), "w").write("ok\n")
    files = sorted(os.path.join(tok_dir, d, "tokenizer.json") for d in os.listdir(tok_dir)
                   if os.path.isfile(os.path.join(tok_dir, d, "tokenizer.json")))
    if s.fresh("tokenizer_json_fuzz"):
        # Trained vocabularies make 200 KB files (one parse per second under ASan): each seed
        # keeps the first tokens and the merges among them, a valid tokenizer of ~10 KB.
        for f in files:
            d = shrink_tokenizer(json.load(open(f, encoding="utf-8")))
            s.seed("tokenizer_json_fuzz", os.path.basename(os.path.dirname(f)) + ".json",
                   json.dumps(d, ensure_ascii=False))
        s.done("tokenizer_json_fuzz")
    if s.fresh("tokenizer_encode_fuzz"):
        import tokenizer_oracle as to
        # The C++ target sorts the paths the same way (byte order), so byte 0 = index in `files`.
        for i, text in enumerate(to.make_strings()):
            s.seed("tokenizer_encode_fuzz", f"text-{i:03d}", bytes([i % len(files), i % 4]) + text.encode("utf-8"))
        # Long pre-tokenized words (one BPE merge queue over thousands of symbols), kept under
        # 4 KiB so that libFuzzer's max_len stays its default.
        for i, word in enumerate(["\ua66e" * 1300, "a" * 4000, "1" * 4000, " " * 4000, "\t " * 2000]):
            s.seed("tokenizer_encode_fuzz", f"long-word-{i}", bytes([i % len(files), 0]) + word.encode("utf-8"))
        s.done("tokenizer_encode_fuzz")
    return {"HOOKSCOPE_FUZZ_TOKENIZERS": tok_dir}


# ------------------------------------------------------------------------------ safetensors

def safetensors_part(s):
    st = os.path.join(s.work, "safetensors")
    if s.force or not os.path.exists(os.path.join(st, ".complete")):
        shutil.rmtree(st, ignore_errors=True)
        oracle("safetensors_write.py", "--out", st, "--what", "all")
        open(os.path.join(st, ".complete"), "w").write("ok\n")
    sharded = os.path.join(st, "sharded")
    if s.fresh("safetensors_fuzz"):
        s.seed("safetensors_fuzz", "mixed.safetensors", open(os.path.join(st, "mixed.safetensors"), "rb").read())
        for f in sorted(os.listdir(sharded)):
            if f.endswith(".safetensors"):
                s.seed("safetensors_fuzz", f, open(os.path.join(sharded, f), "rb").read())
        # Small ones by the safetensors package: metadata, 0-rank, empty, every loadable dtype.
        import torch
        from safetensors.torch import save
        s.seed("safetensors_fuzz", "small.safetensors", save(
            {"a": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor(1.5, dtype=torch.bfloat16),
             "e": torch.zeros(0, 4, dtype=torch.float16), "m": torch.tensor([True, False])},
            metadata={"format": "pt"}))
        for dt in (torch.float64, torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8):
            s.seed("safetensors_fuzz", f"one-{str(dt)[6:]}.safetensors", save({"t": torch.ones(3, dtype=dt)}))
        s.done("safetensors_fuzz")
    if s.fresh("safetensors_index_fuzz"):
        index_text = open(os.path.join(sharded, "model.safetensors.index.json"), "rb").read()
        s.seed("safetensors_index_fuzz", "transformers.index.json", index_text)
        index = json.loads(index_text)
        wm = index["weight_map"]
        first = sorted(set(wm.values()))[0]
        s.seed("safetensors_index_fuzz", "one-shard.index.json",
               json.dumps({"weight_map": {k: v for k, v in wm.items() if v == first}}))
        s.seed("safetensors_index_fuzz", "no-metadata.index.json", json.dumps({"weight_map": wm}, indent=2))
        s.done("safetensors_index_fuzz")
    return {"HOOKSCOPE_FUZZ_SHARDS": sharded}


# ------------------------------------------------------------------------------ config.json

def config_part(s):
    if not s.fresh("config_fuzz"):
        return {}
    import make_fixtures as mf
    import torch
    d = os.path.join(s.work, "configs")
    shutil.rmtree(d, ignore_errors=True)
    for name, make in mf.FIXTURES.items():
        torch.manual_seed(0)
        model = make()
        out = os.path.join(d, name)
        model.config.save_pretrained(out)
        model.generation_config.save_pretrained(out)
        s.seed("config_fuzz", f"{name}.config.json", open(os.path.join(out, "config.json"), "rb").read())
        s.seed("config_fuzz", f"{name}.generation_config.json",
               open(os.path.join(out, "generation_config.json"), "rb").read())
        mf.to_v4_config(os.path.join(out, "config.json"))  # the transformers 4.x form
        s.seed("config_fuzz", f"{name}.v4.config.json", open(os.path.join(out, "config.json"), "rb").read())
    s.done("config_fuzz")
    return {}


# ------------------------------------------------------------------------------ offload folder

def offload_part(s):
    off = os.path.join(s.work, "offload")
    data = os.path.join(s.work, "offload-data")
    if s.force or not os.path.exists(os.path.join(data, ".complete")):
        shutil.rmtree(off, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
        os.makedirs(off)
        # accelerate's offload_state_dict / offload_weight over many dtypes and a tiny model.
        oracle("offload_oracle.py", "write", off, os.path.join(s.work, "safetensors", "single"))
        # safetensors-backed entries, as transformers builds them.
        os.makedirs(os.path.join(off, "st"))
        oracle("offload_oracle.py", "safetensors", os.path.join(off, "st"))
        os.makedirs(data)
        for sub in ("basic", "tiny", "single_float32"):
            for f in os.listdir(os.path.join(off, sub)):
                if f.endswith(".dat"):
                    shutil.copy(os.path.join(off, sub, f), os.path.join(data, f))
        shutil.copy(os.path.join(off, "st", "data.safetensors"), os.path.join(data, "data.safetensors"))
        open(os.path.join(data, ".complete"), "w").write("ok\n")
    if s.fresh("offload_index_fuzz"):
        for sub in sorted(os.listdir(off)):
            p = os.path.join(off, sub, "index.json")
            if not os.path.isfile(p):
                continue
            text = open(p, "rb").read()
            if sub == "st":  # the target loads safetensors entries named "data.safetensors" only
                idx = json.loads(text)
                for e in idx.values():
                    e["safetensors_file"] = "data.safetensors"
                text = json.dumps(idx, indent=2).encode()
            s.seed("offload_index_fuzz", f"{sub}.index.json", text)
        s.done("offload_index_fuzz")
    return {"HOOKSCOPE_FUZZ_OFFLOAD": data}


# ------------------------------------------------------------------------------ device maps

def device_map_part(s):
    if not s.fresh("device_map_fuzz"):
        return {}
    # byte 0: entry point (0 parse_max_memory, 1 size, 2 device, 3 max_memory JSON, 4 device map
    # JSON); byte 1: accelerator count.
    def seed(name, mode, accelerators, text):
        s.seed("device_map_fuzz", name, bytes([mode, accelerators]) + text.encode("utf-8"))

    for i, spec in enumerate(["0=1GiB,1=1GiB,cpu=4GiB", "cpu=2GB", "0=500Mb, disk=10GB", "-1=1KiB,mps=1MB,cpu=1",
                              "0=1e3MB,1=1_000KB,cpu= 2 GiB", "0=1073741824,cpu=4GiB,disk=100GB"]):
        seed(f"max-memory-{i}", 0, 2, spec)
    for i, size in enumerate(["1GiB", "1.5GB", "500Mb", "2KiB", "1gb", "5.0GB", "0.5MiB"]):
        seed(f"size-{i}", 1, 0, size)
    for i, dev in enumerate(["0", "cpu", "disk", "meta", "mps", "cuda", "cuda:1", "12"]):
        seed(f"device-{i}", 2, 0, dev)
    # accelerate's own results on a tiny transformers Llama.
    import torch
    from accelerate.utils import get_max_memory, infer_auto_device_map, get_balanced_memory
    import make_fixtures as mf
    torch.manual_seed(0)
    model = mf.FIXTURES["tiny-llama"]()
    mm = get_max_memory({0: "60KB", 1: "60KB", "cpu": "1GB", "disk": "10GB"})
    seed("accelerate-max-memory", 3, 2, json.dumps({str(k): v for k, v in mm.items()}))
    seed("accelerate-max-memory-pairs", 3, 2, json.dumps([[k, v] for k, v in mm.items()]))
    seed("strings-max-memory", 3, 2, json.dumps({"0": "60KB", "1": "60KB", "cpu": "1GB"}))
    for i, mem in enumerate([{0: 60_000, 1: 60_000, "cpu": 10**9},
                             {0: 30_000, "cpu": 40_000, "disk": 10**9}]):
        dm = infer_auto_device_map(model, max_memory=mem, no_split_module_classes=["LlamaDecoderLayer"])
        seed(f"accelerate-device-map-{i}", 4, 2, json.dumps(dm))
        seed(f"accelerate-device-map-pairs-{i}", 4, 2, json.dumps([[k, v] for k, v in dm.items()]))
    try:
        bm = get_balanced_memory(model, max_memory={0: 200_000, 1: 200_000, "cpu": 10**9},
                                 no_split_module_classes=["LlamaDecoderLayer"])
        seed("accelerate-balanced-memory", 3, 2, json.dumps({str(k): v for k, v in bm.items()}))
    except Exception as e:  # noqa: BLE001 - a seed less, not a failure
        log(f"device_map_fuzz: no get_balanced_memory seed ({e})")
    s.done("device_map_fuzz")
    return {}


# ------------------------------------------------------------------------------ importers

def kineto_deep_seeds(s):
    """Values nested around the importer's bound (kineto::kMaxValueDepth = 256): an event's args,
    distributedInfo and a deviceProperties entry just past it, and args just within it. Written
    by hand (no library writes such a trace) and small; also added to a corpus written before
    they existed."""
    op = '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5'
    def nested(n):
        return "[" * n + "]" * n
    seeds = {
        "deep-args.json": '{"traceEvents": [%s, "args": {"Input Dims": %s}}]}' % (op, nested(300)),
        "deep-args-at-bound.json": '{"traceEvents": [%s, "args": {"Input Dims": %s}}]}' % (op, nested(254)),
        "deep-distributed.json": '{"distributedInfo": {"rank": %s}, "traceEvents": [%s}]}' % (nested(300), op),
        "deep-device.json": '{"deviceProperties": [{"id": 0, "name": %s}], "traceEvents": [%s}]}' % (nested(300), op),
    }
    for name, text in seeds.items():
        s.seed("kineto_trace_fuzz", name, text.encode())


def kineto_part(s):
    if not s.fresh("kineto_trace_fuzz"):
        kineto_deep_seeds(s)
        return {}
    kineto_deep_seeds(s)
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function
    d = os.path.join(s.work, "kineto")
    os.makedirs(d, exist_ok=True)
    # A small trace of its own: a few ops, hookscope:: ranges, memory events, shapes.
    lin = torch.nn.Linear(8, 8)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True) as prof:
        with record_function("hookscope::generate cell=c0 repeat=0"), record_function("hookscope::step step=0 token=7"):
            with record_function("hookscope::pre_forward hook=AlignDevicesHook module=lin device=cpu"):
                with record_function("hookscope::weight_onload module=lin tensor=weight bytes=256 "
                                     "dtype=float32 source=cpu device=cpu"):
                    lin.weight.data.clone()
            lin(torch.randn(2, 8))
    small = os.path.join(d, "small.json")
    prof.export_chrome_trace(small)
    text = open(small, "rb").read()
    s.seed("kineto_trace_fuzz", "small.json", text)
    s.seed("kineto_trace_fuzz", "small.json.gz", gzip.compress(text, mtime=0))
    # The importer tests' trace (generation with hook ranges, compiled regions, python stacks):
    # too large to mutate as a whole, so a digest: the first events of every (cat, ph).
    oracle("profile_trace.py", "--out", d)
    doc = json.load(open(os.path.join(d, "trace.json")))
    kept, seen = [], collections.Counter()
    for e in doc["traceEvents"]:
        key = (e.get("cat"), e.get("ph"), e.get("name", "").split(" ")[0] if e.get("name", "").startswith("hookscope::") else "")
        if seen[key] < 3:
            seen[key] += 1
            kept.append(e)
    doc["traceEvents"] = kept
    s.seed("kineto_trace_fuzz", "profile_trace-digest.json", json.dumps(doc))
    s.done("kineto_trace_fuzz")
    return {}


TINY_COMPILE = r"""
import torch
torch.set_num_threads(1)
def f(x):
    y = torch.sin(x) + 1
    print("graph break")  # a graph break: two graphs
    return torch.cos(y) * 2
g = torch.compile(f, backend="eager")
g(torch.randn(4))
g(torch.randn(4, 2))  # a recompile (shape guard)
"""


def torch_trace_records(path):
    """The log's records: (header line, [payload lines])."""
    records = []
    for line in open(path, "rb"):
        if line.startswith(b"\t") and records:
            records[-1][1].append(line)
        else:
            records.append((line, []))
    return records


def record_type(header):
    try:
        obj = json.loads(header.split(b"] ", 1)[1])
    except (IndexError, ValueError):
        return None
    envelope = {"rank", "compiled_autograd_id", "frame_id", "frame_compile_id", "attempt", "has_payload", "stack"}
    return next((k for k in obj if k not in envelope), None)


# The compilation_metrics fields the importer reads (the record is ~30 KB with all of them).
METRICS_KEPT = {"co_name", "co_filename", "co_firstlineno", "guard_count", "graph_op_count", "graph_node_count",
                "fail_type", "fail_reason", "fail_user_frame_filename", "fail_user_frame_lineno",
                "restart_reasons", "start_time", "entire_frame_compile_time_s", "backend_compile_time_s",
                "inductor_compile_time_s", "code_gen_time_s", "dynamo_time_before_restart_s", "recompile_reason"}


def trim_metrics(header):
    prefix, body = header.split(b"] ", 1)
    obj = json.loads(body)
    obj["compilation_metrics"] = {k: v for k, v in obj["compilation_metrics"].items() if k in METRICS_KEPT}
    return prefix + b"] " + json.dumps(obj).encode() + b"\n"


def torch_trace_digest(path, per_type=3, max_payload=4096):
    """The log without its bulk: every str record and cell marker, and of every other record
    type the first `per_type` records whose payload is at most `max_payload` bytes. Whole
    records are dropped, so every kept payload still matches its has_payload MD5."""
    out, seen = [], collections.Counter()
    for header, payload in torch_trace_records(path):
        t = record_type(header)
        if t == "compilation_metrics":
            header = trim_metrics(header)
        size = sum(len(p) for p in payload)
        if t == "str" or b"hookscope_cell" in header or (size <= max_payload and len(header) <= 4096
                                                          and seen[t] < per_type):
            seen[t] += 1
            out.append(header + b"".join(payload))
    return b"".join(out)


def torch_trace_part(s):
    if not s.fresh("torch_trace_fuzz"):
        return {}
    # A tiny torch.compile of its own (two graphs, a recompile), under TORCH_TRACE.
    tiny = os.path.join(s.work, "tiny_trace")
    shutil.rmtree(tiny, ignore_errors=True)
    subprocess.run([PY, "-c", TINY_COMPILE], check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, TORCH_TRACE=tiny))
    for i, f in enumerate(sorted(os.listdir(tiny))):
        s.seed("torch_trace_fuzz", f"tiny-compile-{i}.log", torch_trace_digest(os.path.join(tiny, f), per_type=10))
    # The importer tests' log (tests/oracles/compile_log.py: accelerate's hooks under
    # torch.compile, explain, fullgraph), cut into cells; MBs each, so digests.
    d = os.path.join(s.work, "compile_log")
    if not os.path.isdir(os.path.join(d, "cells")):
        shutil.rmtree(d, ignore_errors=True)
        oracle("compile_log.py", "--out", d)
    cells = os.path.join(d, "cells")
    for f in sorted(os.listdir(cells)):
        s.seed("torch_trace_fuzz", f, torch_trace_digest(os.path.join(cells, f)))
    # A record nested past the readers' bound (storage::kMaxJsonDepth = 512), and one at it.
    for name, n in (("deep-record.log", 600), ("deep-record-at-bound.log", 510)):
        s.seed("torch_trace_fuzz", name,
               ('V1201 04:54:56.531000 1 /x/convert_frame.py:1] {"dynamo_start": {"stack": %s}, "frame_id": 0, '
                '"frame_compile_id": 0, "attempt": 0}\n' % ("[" * n + "]" * n)).encode())
    s.done("torch_trace_fuzz")
    return {}


def capture_part(s, tool):
    if not s.fresh("capture_reader_fuzz"):
        return {}
    if not tool or not os.access(tool, os.X_OK):
        sys.exit(f"make_seeds: no capture seed writer at {tool} (build the make_capture_seed target)")
    d = os.path.join(s.work, "captures")
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([tool, d], check=True)
    import sqlite3
    for f in sorted(os.listdir(d)):
        if not f.endswith(".sqlite"):
            continue
        path = os.path.join(d, f)
        s.seed("capture_reader_fuzz", f, open(path, "rb").read())
        # The same capture with 512-byte pages (VACUUM keeps every row): a quarter the size,
        # so the mutations land on the tables rather than on empty page space.
        small = path[:-len(".sqlite")] + "-p512.sqlite"
        shutil.copy(path, small)
        con = sqlite3.connect(small)
        con.execute("PRAGMA page_size=512")
        con.execute("VACUUM")
        con.close()
        s.seed("capture_reader_fuzz", os.path.basename(small), open(small, "rb").read())
        if f == "sharded.sqlite":
            # JSON columns nested past the readers' bound (storage::kMaxJsonDepth = 512).
            deep = path[:-len(".sqlite")] + "-deep-json.sqlite"
            shutil.copy(small, deep)
            con = sqlite3.connect(deep)
            con.execute("UPDATE RUNS SET results = ?, versions = ?", ('{"a": %s}' % ("[" * 600 + "]" * 600),
                                                                       '{"t": %s}' % ("[" * 520 + "]" * 520)))
            con.commit()
            con.close()
            s.seed("capture_reader_fuzz", os.path.basename(deep), open(deep, "rb").read())
    s.done("capture_reader_fuzz")
    return {}


def values_db(path):
    """A small database of every kind of value the page reader meets, 512-byte pages (trees two
    and three pages deep), in rollback-journal mode."""
    import sqlite3
    if os.path.exists(path):
        os.remove(path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size=512")
    con.execute("PRAGMA journal_mode=DELETE")
    con.execute("CREATE TABLE ints (a INTEGER, b, c REAL, d TEXT, e BLOB)")
    widths = [0, 1, -1, 2, 127, -128, 128, 32767, -32768, 2**23 - 1, -2**23, 2**31 - 1, -2**31, 2**47 - 1,
              -2**47, 2**47, 2**63 - 1, -2**63]
    rows = []
    for i in range(240):
        w = widths[i % len(widths)]
        rows.append((w, None if i % 7 == 0 else i * 1000003, float(i) if i % 3 else i + 0.5,
                     None if i % 5 else "t%d" % i, bytes([i % 256]) * (i % 9) if i % 4 == 0 else None))
    con.executemany("INSERT INTO ints VALUES (?, ?, ?, ?, ?)", rows)
    # Records written before a column was added: shorter than the table.
    con.execute("ALTER TABLE ints ADD COLUMN f INTEGER")
    con.execute("ALTER TABLE ints ADD COLUMN g INTEGER DEFAULT 7")
    con.execute("INSERT INTO ints (a, f, g) VALUES (1, 2, 3)")
    # Rowids at int64's ends and below zero (last: past 2**63 - 1 SQLite picks new ones at random).
    for rowid in (-2**63, -5, -1, 2**63 - 1):
        con.execute("INSERT INTO ints (rowid, a, b) VALUES (?, ?, ?)", (rowid, rowid, 7))
    con.execute("CREATE INDEX ints_b ON ints (b)")
    con.execute("CREATE TABLE alias (id INTEGER PRIMARY KEY, v INTEGER)")
    con.executemany("INSERT INTO alias VALUES (?, ?)", [(i * 3, -i) for i in range(60)])
    con.execute("CREATE TABLE named (rowid INTEGER, oid INTEGER, x)")
    con.executemany("INSERT INTO named VALUES (?, ?, ?)", [(-i, i, i * i) for i in range(20)])
    con.execute("CREATE TABLE keyed (k INTEGER PRIMARY KEY, v) WITHOUT ROWID")
    con.executemany("INSERT INTO keyed VALUES (?, ?)", [(i, i) for i in range(30)])
    con.execute("CREATE TABLE gen (a INTEGER, b INTEGER GENERATED ALWAYS AS (a * 2) VIRTUAL, c INTEGER)")
    con.executemany("INSERT INTO gen (a, c) VALUES (?, ?)", [(i, -i) for i in range(10)])
    con.execute("CREATE TABLE big (a INTEGER, b BLOB)")
    con.executemany("INSERT INTO big VALUES (?, ?)", [(1, b"x" * 1500), (2, b"y" * 400), (3, None)])
    con.commit()
    con.close()


def btree_pages_part(s, tool):
    if not s.fresh("btree_pages_fuzz"):
        return {}
    if not tool or not os.access(tool, os.X_OK):
        sys.exit(f"make_seeds: no capture seed writer at {tool} (build the make_capture_seed target)")
    import sqlite3
    d = os.path.join(s.work, "btree-pages")
    shutil.rmtree(d, ignore_errors=True)
    subprocess.run([tool, d], check=True)
    for f in sorted(os.listdir(d)):
        if not f.endswith(".sqlite"):
            continue
        path = os.path.join(d, f)
        con = sqlite3.connect(path)
        mode = con.execute("PRAGMA journal_mode").fetchone()[0]
        con.execute("PRAGMA page_size=512")
        con.execute("VACUUM")
        con.close()
        if mode != "delete":
            sys.exit(f"make_seeds: {path} is in journal mode {mode}, not the closed capture's 'delete'")
        s.seed("btree_pages_fuzz", f[:-len(".sqlite")] + "-p512.sqlite", open(path, "rb").read())
    values = os.path.join(d, "values.sqlite")
    values_db(values)
    s.seed("btree_pages_fuzz", "values.sqlite", open(values, "rb").read())
    s.done("btree_pages_fuzz")
    return {}


PARTS = ["tokenizer", "safetensors", "config", "offload", "device_map", "kineto", "torch_trace", "capture",
         "btree_pages"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--capture-seed", help="the make_capture_seed executable")
    ap.add_argument("--only", action="append", choices=PARTS, help="parts to write (default: all)")
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()
    s = Seeds(os.path.abspath(a.out), os.path.abspath(a.work), a.force)
    os.makedirs(s.out, exist_ok=True)
    os.makedirs(s.work, exist_ok=True)
    env = {}
    parts = a.only or PARTS
    for part in PARTS:
        if part not in parts:
            continue
        if part == "offload" and "safetensors" not in parts:
            safetensors_part(s)  # the offload oracle reads the tiny checkpoint it writes
        fn = globals()[f"{part}_part"]
        env.update(fn(s, a.capture_seed) if part in ("capture", "btree_pages") else fn(s))
    for k, v in env.items():
        print(f"export {k}={v}")


if __name__ == "__main__":
    main()
