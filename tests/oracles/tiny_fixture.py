"""The tiny checkpoints of make_fixtures.py for Python tests, shared with the C++ tests' cache.

Same protocol as tests/test_util.cpp's tiny_checkpoint(): FIXTURES/<name>/.complete marks a
finished fixture; FIXTURES/.lock (flock) serialises writing it across concurrent tests.
"""
import fcntl
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def tiny_checkpoint(fixtures: str, name: str) -> Path:
    """FIXTURES/NAME, written by make_fixtures.py --only NAME if it is not there yet."""
    root = Path(fixtures)
    target = root / name
    if (target / ".complete").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not (target / ".complete").exists():
                subprocess.run([sys.executable, str(HERE / "make_fixtures.py"), "--out", str(root),
                                "--only", name], check=True, stdout=subprocess.DEVNULL)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if not (target / ".complete").exists():
        raise RuntimeError(f"make_fixtures.py did not produce {target}")
    return target


def quiet() -> None:
    """Environment for the real stack in a test: offline, no progress bars or info logging."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
