#!/usr/bin/env python3
"""Benchmark: greedy-decode tokens/s of `hookscope generate` vs transformers' eager greedy decode.

Same model, same prompt, same token count, same machine, interleaved in one run; reports the
median of each and the ratio hookscope / transformers. Decode throughput excludes prefill and
process start-up on both sides (hookscope reports its own decode time on stderr; transformers'
decode is timed around `generate` minus a separately timed prefill).

  ./run bench                     # uses the bundled SmolLM2 sample
  python3 bench/generate_tokens_per_s.py --hookscope build/hookscope --model DIR [--tokens 64] [--repeats 3]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def hookscope_tok_s(exe, model, prompt, tokens, dtype):
    r = subprocess.run([exe, "generate", "--model", model, "--prompt", prompt, "--max-new-tokens", str(tokens),
                        "--dtype", dtype, "--ignore-eos"], capture_output=True, text=True, check=True)
    m = re.search(r"decode ([0-9.]+) tok/s", r.stderr)
    if not m:
        sys.exit(f"could not read decode speed from hookscope's stderr:\n{r.stderr}")
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hookscope", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    ap.add_argument("--threads", type=int, default=0, help="torch threads for transformers (0 = default)")
    args = ap.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = torch.float32 if args.dtype == "f32" else torch.bfloat16
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="eager").eval()
    ids = tok(args.prompt, return_tensors="pt").input_ids

    def hf_tok_s():
        with torch.no_grad():
            t0 = time.perf_counter()
            model(ids, use_cache=True)
            prefill = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = model.generate(ids, do_sample=False, max_new_tokens=args.tokens, min_new_tokens=args.tokens)
            total = time.perf_counter() - t0
        steps = out.shape[1] - ids.shape[1] - 1
        return steps / max(total - prefill, 1e-9)

    hf_tok_s()  # warm-up
    hookscope_tok_s(args.hookscope, args.model, args.prompt, 4, args.dtype)
    hs, hf = [], []
    for _ in range(args.repeats):  # interleaved, so drift hits both sides alike
        hs.append(hookscope_tok_s(args.hookscope, args.model, args.prompt, args.tokens, args.dtype))
        hf.append(hf_tok_s())
    res = {"model": args.model, "dtype": args.dtype, "new_tokens": args.tokens, "repeats": args.repeats,
           "hookscope_tok_s": {"median": statistics.median(hs), "min": min(hs), "max": max(hs)},
           "transformers_tok_s": {"median": statistics.median(hf), "min": min(hf), "max": max(hf)},
           "ratio_hookscope_over_transformers": statistics.median(hs) / statistics.median(hf)}
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
