"""`python -m hookscope_torch run --spec SPEC.json`: run one policy's cells (docs/torch-engine.md).

The order matters: the spec is read first (no torch), then TORCH_TRACE is set and an accelerate
tree is put first on sys.path, and only then are torch, transformers and accelerate imported.
Exit status: 0 when every cell has a result line (ok, unsupported or failed), 2 for a bad spec or
command line, 1 when the process could not get as far as running cells.
"""
from __future__ import annotations

import argparse
import os
import sys

from hookscope_torch import spec as spec_mod


def _prepare_process(spec: spec_mod.Spec) -> None:
    """Process-wide settings that must precede importing torch and accelerate."""
    os.environ["TORCH_TRACE"] = str(spec.out_dir / "torch_trace")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if spec.accelerate_path is not None:
        sys.path.insert(0, str(spec.accelerate_path))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hookscope_torch",
                                 description="hookscope's torch engine: run a spec's cells through real "
                                             "transformers, accelerate and torch.compile.")
    sub = ap.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every cell of SPEC.json; results go to its out_dir")
    run.add_argument("--spec", required=True, help="the run spec (docs/torch-engine.md)")
    srv = sub.add_parser("serve", help="run the cells sent one per line on stdin; replies on the file "
                                       "descriptor $HOOKSCOPE_REPLY_FD (how `hookscope capture` drives it)")
    srv.add_argument("--spec", required=True, help="the run spec, its 'cells' empty")
    args = ap.parse_args(argv)
    serving = args.command == "serve"
    if serving:
        import hookscope_torch as pkg
        fd = os.environ.get("HOOKSCOPE_REPLY_FD")
        if not fd or not fd.isdigit():
            print("hookscope_torch: serve needs HOOKSCOPE_REPLY_FD (the reply channel's file descriptor)", file=sys.stderr)
            return 2
        pkg._reply = os.fdopen(int(fd), "w", encoding="utf-8")
    try:
        spec = spec_mod.load(args.spec, serve=serving)
    except spec_mod.SpecError as e:
        print(f"hookscope_torch: bad spec: {e}", file=sys.stderr)
        return 2
    try:
        spec.out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        print(f"hookscope_torch: cannot create out_dir '{spec.out_dir}': {e.strerror}", file=sys.stderr)
        return 2
    _prepare_process(spec)
    from hookscope_torch import driver  # imports torch: after TORCH_TRACE and sys.path are set

    try:
        return driver.serve(spec) if serving else driver.run(spec)
    except spec_mod.SpecError as e:
        print(f"hookscope_torch: bad spec: {e}", file=sys.stderr)
        if serving:
            pkg.reply({"type": "fatal", "error": f"bad spec: {e}"})
        return 2


if __name__ == "__main__":
    sys.exit(main())
