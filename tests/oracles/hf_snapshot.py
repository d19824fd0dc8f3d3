#!/usr/bin/env python3
"""Where huggingface_hub finds a model offline: prints snapshot_download(REPO,
local_files_only=True) under the environment it is run with (HF_HUB_CACHE, HF_HOME,
XDG_CACHE_HOME, HOME), the folder `hookscope --model REPO` must resolve to."""
import sys

from huggingface_hub import snapshot_download

print(snapshot_download(sys.argv[1], local_files_only=True))
