"""Helper oracle for the torch engine's tests: prints the folder of an installed package
(`print_module_dir.py accelerate`), or applies the offload-only change to a copied accelerate
source tree (`print_module_dir.py --source-patch TREE`, through hookscope_torch.offload_only,
which offload_only_test.py checks against the seed's change)."""
import importlib
import os
import sys

if sys.argv[1] == "--source-patch":
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    from hookscope_torch.offload_only import source_patch
    print(source_patch(sys.argv[2]))
else:
    print(os.path.dirname(importlib.import_module(sys.argv[1]).__file__))
