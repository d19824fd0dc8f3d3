"""The run spec the C++ CLI hands the driver (docs/torch-engine.md), read and checked.

Nothing here imports torch: the spec is read before TORCH_TRACE is set and before accelerate is
put on sys.path, both of which must happen before torch/accelerate are imported.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Optional

SCENARIOS = ("sharded", "cpu-offload", "disk-offload", "mixed")
MODES = ("eager", "default", "reduce-overhead")
CACHES = ("dynamic", "static")
DTYPES = ("f32", "bf16", "f16")  # hookscope's names (--dtype); scenarios.TORCH_DTYPES maps them to torch's
BUILTIN_POLICIES = ("whole-hook", "offload-only")


class SpecError(ValueError):
    """The spec cannot be run (missing model, unknown scenario/mode/policy, bad accelerate_path, ...)."""


@dataclasses.dataclass(frozen=True)
class CellSpec:
    id: str
    scenario: str
    mode: str
    fullgraph: bool

    @property
    def compiled(self) -> bool:
        return self.mode != "eager"

    def label(self) -> str:
        return f"{self.scenario} {self.mode}" + (" fullgraph" if self.fullgraph else "")


@dataclasses.dataclass(frozen=True)
class Spec:
    model: Path
    policy: str
    accelerate_path: Optional[Path]  # the folder that holds accelerate/ (resolved; accelerate:NAME only)
    prompt: Optional[str]
    prompt_ids: Optional[list[int]]
    max_new_tokens: int
    repeats: int
    warmup: int
    devices: int
    dtype: str  # the weights' dtype the checkpoint is loaded in: "f32", "bf16" or "f16"
    cache_implementation: str
    backend: Optional[str]
    cells: list[CellSpec]
    offload_dir: Path
    out_dir: Path
    profile: bool
    threads: Optional[int]  # torch.set_num_threads for the process (None: torch's default)

    @property
    def accelerate_name(self) -> Optional[str]:
        return self.policy.split(":", 1)[1] if self.policy.startswith("accelerate:") else None


def _int(d: dict, key: str, default: int, minimum: int) -> int:
    v = d.get(key, default)
    if v is None:
        v = default
    if not isinstance(v, int) or isinstance(v, bool) or v < minimum:
        raise SpecError(f"'{key}' must be an integer >= {minimum} (got {v!r})")
    return v


def _policy(d: dict) -> tuple[str, Optional[Path]]:
    policy = d.get("policy")
    if not isinstance(policy, str) or not policy:
        raise SpecError("'policy' is missing")
    if policy in BUILTIN_POLICIES:
        return policy, None
    if not policy.startswith("accelerate:") or not policy.split(":", 1)[1]:
        raise SpecError(f"unknown policy '{policy}' (expected whole-hook, offload-only or accelerate:NAME)")
    raw = d.get("accelerate_path")
    if not raw:
        raise SpecError(f"policy '{policy}' needs 'accelerate_path' (an accelerate source tree)")
    return policy, accelerate_root(Path(raw).expanduser())


def accelerate_root(tree: Path) -> Path:
    """The folder to put on sys.path for an accelerate tree: TREE if it holds accelerate/, else
    TREE/src (a git clone of accelerate). Raises SpecError when neither holds the package."""
    for root in (tree, tree / "src"):
        if (root / "accelerate" / "__init__.py").is_file():
            return root.resolve()
    raise SpecError(f"accelerate_path '{tree}' holds no accelerate package (looked for accelerate/__init__.py "
                    f"in it and in its src/)")


def _cells(d: dict, serve: bool = False) -> list[CellSpec]:
    raw = d.get("cells")
    if serve and raw in (None, []):
        return []  # `serve`: the cells come one by one on stdin
    if not isinstance(raw, list) or not raw:
        raise SpecError("'cells' must be a non-empty list")
    cells, seen = [], set()
    for i, c in enumerate(raw):
        cell = parse_cell(c, f"cells[{i}]")
        if cell.id in seen:
            raise SpecError(f"cells[{i}]: duplicate id '{cell.id}'")
        seen.add(cell.id)
        cells.append(cell)
    return cells


def parse_cell(c: object, where: str) -> CellSpec:
    """One cell object ({"id", "scenario", "mode", "fullgraph"}); raises SpecError naming `where`."""
    if not isinstance(c, dict):
        raise SpecError(f"{where} is not an object")
    cid, scenario, mode, fg = c.get("id"), c.get("scenario"), c.get("mode"), c.get("fullgraph", False)
    if not isinstance(cid, str) or not cid or any(ch.isspace() for ch in cid):
        raise SpecError(f"{where}: 'id' must be a non-empty string without spaces")
    if scenario not in SCENARIOS:
        raise SpecError(f"cell {cid}: unknown scenario '{scenario}' (expected {', '.join(SCENARIOS)})")
    if mode not in MODES:
        raise SpecError(f"cell {cid}: unknown mode '{mode}' (expected {', '.join(MODES)})")
    if not isinstance(fg, bool):
        raise SpecError(f"cell {cid}: 'fullgraph' must be true or false")
    if fg and mode == "eager":
        raise SpecError(f"cell {cid}: fullgraph needs a compiled mode (default or reduce-overhead)")
    return CellSpec(cid, scenario, mode, fg)


def _prompt(d: dict, model: Path) -> tuple[Optional[str], Optional[list[int]]]:
    ids = d.get("prompt_ids")
    if ids is not None:
        if not isinstance(ids, list) or not ids or not all(isinstance(x, int) and x >= 0 for x in ids):
            raise SpecError("'prompt_ids' must be a non-empty list of token ids")
        return None, ids
    prompt = d.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise SpecError("give 'prompt' or 'prompt_ids'")
    if not any((model / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")):
        raise SpecError(f"model '{model}' has no tokenizer to encode 'prompt': give 'prompt_ids'")
    return prompt, None


def parse(d: dict, serve: bool = False) -> Spec:
    """Checks a spec document; raises SpecError naming the first problem."""
    if not isinstance(d, dict):
        raise SpecError("the spec is not a JSON object")
    raw_model = d.get("model")
    if not isinstance(raw_model, str) or not raw_model:
        raise SpecError("'model' is missing")
    model = Path(raw_model).expanduser()
    if not (model / "config.json").is_file():
        raise SpecError(f"model '{model}' is not a Hugging Face folder (no config.json)")
    policy, acc = _policy(d)
    prompt, prompt_ids = _prompt(d, model)
    dtype = d.get("dtype", "f32")
    if dtype is None:
        dtype = "f32"
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise SpecError(f"'dtype' must be f32, bf16 or f16 (got {dtype!r})")
    cache = d.get("cache_implementation") or "dynamic"
    if cache not in CACHES:
        raise SpecError(f"unknown cache_implementation '{cache}' (expected dynamic or static)")
    backend = d.get("backend")
    if backend is not None and (not isinstance(backend, str) or not backend):
        raise SpecError("'backend' must be null or a torch.compile backend name")
    if not d.get("out_dir"):
        raise SpecError("'out_dir' is missing")
    out_dir = Path(d["out_dir"]).expanduser().resolve()
    offload_dir = Path(d.get("offload_dir") or out_dir / "offload").expanduser().resolve()
    profile = d.get("profile", True)
    if not isinstance(profile, bool):
        raise SpecError("'profile' must be true or false")
    threads = d.get("threads")
    if threads is not None and (not isinstance(threads, int) or isinstance(threads, bool) or threads < 1):
        raise SpecError(f"'threads' must be null or an integer >= 1 (got {threads!r})")
    return Spec(model=model.resolve(), policy=policy, accelerate_path=acc, prompt=prompt, prompt_ids=prompt_ids,
                max_new_tokens=_int(d, "max_new_tokens", 4, 1), repeats=_int(d, "repeats", 2, 1),
                warmup=_int(d, "warmup", 1, 0), devices=_int(d, "devices", 0, 0), dtype=dtype,
                cache_implementation=cache, backend=backend, cells=_cells(d, serve), offload_dir=offload_dir,
                out_dir=out_dir, profile=profile, threads=threads)


def load(path: str | os.PathLike, serve: bool = False) -> Spec:
    """Reads and checks SPEC.json; raises SpecError with the file's name on any problem."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except OSError as e:
        raise SpecError(f"cannot read spec '{path}': {e.strerror}") from e
    except json.JSONDecodeError as e:
        raise SpecError(f"spec '{path}' is not JSON: {e}") from e
    return parse(d, serve)
