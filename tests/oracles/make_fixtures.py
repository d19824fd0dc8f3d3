#!/usr/bin/env python3
"""Tiny random checkpoints written by transformers, with transformers' own reference outputs.

For each fixture <out>/<name>/ holds an ordinary HF folder (config.json, safetensors,
generation_config.json) and reference.json:
  {"prompt_ids": [...], "f32": {"prefill_logits": [[...]], "decode_ids": [...],
   "decode_logits": [[...]]}, "bf16": {"prefill_argmax": [...], "decode_ids": [...]}}
decode_ids are transformers' greedy tokens; decode_logits[i] are the logits after feeding
decode_ids[i] (teacher forcing keeps both sides on the same path).
fp32 numbers come from transformers' eager attention; bf16 ones from the checkpoint reloaded
with from_pretrained(dtype=bfloat16), i.e. transformers' default SDPA attention (CPU).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
from transformers import (  # noqa: E402
    LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

DECODE_STEPS = 8
PROMPT = [5, 17, 99, 3, 250, 42, 7, 128, 64, 11, 200]


def common(**kw):
    base = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                initializer_range=0.2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    base.update(kw)
    return base


FIXTURES = {
    # Llama with llama3 RoPE scaling, untied lm_head, sharded safetensors + index.json.
    "tiny-llama": lambda: LlamaForCausalLM(LlamaConfig(**common(
        rms_norm_eps=1e-5, tie_word_embeddings=False, rope_parameters={
            "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
            "high_freq_factor": 4.0, "original_max_position_embeddings": 16}))),
    # Llama with linear RoPE scaling (position interpolation), one safetensors file. (Untied:
    # with tied embeddings this seed leaves too many bf16 near-ties to compare argmax.)
    "tiny-llama-linear-rope": lambda: LlamaForCausalLM(LlamaConfig(**common(
        rms_norm_eps=1e-5, tie_word_embeddings=False,
        rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}))),
    # Qwen2: q/k/v bias, no GQA, config rewritten to the transformers 4.x form.
    "tiny-qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**common(
        num_key_value_heads=4, rms_norm_eps=1e-6, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))),
    # Qwen3: q/k norm, explicit head_dim != hidden/heads, tied embeddings.
    "tiny-qwen3": lambda: Qwen3ForCausalLM(Qwen3Config(**common(
        head_dim=32, rms_norm_eps=1e-6, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}))),
}


def to_v4_config(path):
    """Rewrite a transformers 5.x config.json into the 4.x form (rope_theta, torch_dtype)."""
    with open(path) as f:
        cfg = json.load(f)
    rp = cfg.pop("rope_parameters", None) or {}
    cfg["rope_theta"] = rp.get("rope_theta", 10000.0)
    extra = {k: v for k, v in rp.items() if k not in ("rope_theta",)}
    cfg["rope_scaling"] = None if extra.get("rope_type", "default") == "default" else extra
    if "dtype" in cfg:
        cfg["torch_dtype"] = cfg.pop("dtype")
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)


@torch.no_grad()
def reference(model, dtype):
    model = model.to(dtype).eval()
    ids = torch.tensor([PROMPT])
    out = model(input_ids=ids, use_cache=True)
    past = out.past_key_values
    prefill = out.logits[0].float()
    tokens, logits = [], []
    nxt = int(prefill[-1].argmax())
    for _ in range(DECODE_STEPS):
        tokens.append(nxt)
        out = model(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        step = out.logits[0, -1].float()
        logits.append(step)
        nxt = int(step.argmax())
    return prefill, tokens, logits


def make(name, out_dir):
    torch.manual_seed(1234)
    model = FIXTURES[name]()
    model.config._attn_implementation = "eager"
    model.eval()
    target = os.path.join(out_dir, name)
    tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=out_dir)
    shard = "20KB" if name == "tiny-llama" else "5GB"
    model.save_pretrained(tmp, safe_serialization=True, max_shard_size=shard)
    if name == "tiny-qwen2":
        to_v4_config(os.path.join(tmp, "config.json"))
    ref = {"prompt_ids": PROMPT}
    prefill, tokens, logits = reference(model, torch.float32)
    ref["f32"] = {"prefill_logits": prefill.tolist(), "decode_ids": tokens,
                  "decode_logits": [x.tolist() for x in logits]}
    # bf16 as a user gets it: from_pretrained(dtype=bfloat16) keeps the rotary inv_freq in
    # fp32 (a plain .to(bfloat16) would round it) and attends through SDPA, its default.
    from transformers import AutoModelForCausalLM
    bf16_model = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.bfloat16, attn_implementation="sdpa")
    prefill, tokens, logits = reference(bf16_model, torch.bfloat16)
    # bf16 argmax, and the margin between the top two logits (near-ties are reported).
    top2 = prefill.topk(2, dim=-1).values
    ref["bf16"] = {"prefill_argmax": prefill.argmax(-1).tolist(), "prefill_logits": prefill.tolist(), "prefill_margin": (top2[:, 0] - top2[:, 1]).tolist(),
                   "decode_ids": tokens}
    with open(os.path.join(tmp, "reference.json"), "w") as f:
        json.dump(ref, f)
    open(os.path.join(tmp, ".complete"), "w").write("ok\n")
    if os.path.exists(target):
        shutil.rmtree(target)
    os.rename(tmp, target)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", action="append", help="fixture name (repeatable); default: all")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only or FIXTURES:
        if name not in FIXTURES:
            sys.exit(f"make_fixtures: unknown fixture '{name}' (known: {', '.join(FIXTURES)})")
        make(name, args.out)


if __name__ == "__main__":
    main()
