"""`hookscope profile` puts this folder first on the profiled program's PYTHONPATH: Python's
`site` imports it before the program runs. It starts hookscope's recording
(hookscope_torch.profile_inject), then runs the sitecustomize it shadows, if there is one."""
import importlib.machinery
import importlib.util
import os
import sys


def _shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_shadowed()
from hookscope_torch import profile_inject  # noqa: E402  (on PYTHONPATH beside this folder)

profile_inject.begin_from_environment()
