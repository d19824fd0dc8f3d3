#!/usr/bin/env python3
"""transformers' greedy generate (eager attention) as the oracle: prints
{"prompt_ids": [...], "new_ids": [...], "text": "...", "margins": [...], "scales": [...]}.

--dtype f32|bf16|f16 loads the weights in that dtype (hookscope's names). For each new token,
"margins" is the raw logit gap between the chosen token and the runner-up and "scales" the
largest |logit| of that step: a port in a half-precision dtype may pick another token only
where the margin is within that dtype's rounding of the scale.

--prompt-ids 5,17,99 instead of --prompt (no tokenizer needed): exactly --max-new-tokens
greedy steps (argmax of the last logits, the KV cache carried along; no eos stop), as
hookscope's greedy_generate runs by default; "text" is then absent. --out DIR (the test
suite's cached_oracle) is created for it to keep stdout in; the result is stdout."""
import argparse
import json
import os

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--model", required=True)
ap.add_argument("--prompt")
ap.add_argument("--prompt-ids")
ap.add_argument("--out")
ap.add_argument("--max-new-tokens", type=int, default=16)
ap.add_argument("--dtype", choices=["f32", "bf16", "f16"], default="f32")
args = ap.parse_args()
if (args.prompt is None) == (args.prompt_ids is None):
    ap.error("give one of --prompt and --prompt-ids")
if args.out:
    os.makedirs(args.out, exist_ok=True)
dtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[args.dtype]
model = AutoModelForCausalLM.from_pretrained(args.model, dtype=dtype, attn_implementation="eager").eval()
if args.prompt_ids is not None:
    ids = torch.tensor([[int(t) for t in args.prompt_ids.split(",")]])
    new, past, step_ids = [], None, ids
    with torch.no_grad():
        for _ in range(args.max_new_tokens):
            out = model(input_ids=step_ids, past_key_values=past, use_cache=True)
            past = out.past_key_values
            new.append(int(out.logits[0, -1].argmax()))
            step_ids = torch.tensor([[new[-1]]])
    print(json.dumps({"prompt_ids": ids[0].tolist(), "new_ids": new}))
    raise SystemExit(0)
tok = AutoTokenizer.from_pretrained(args.model)
ids = tok(args.prompt, return_tensors="pt").input_ids
with torch.no_grad():
    out = model.generate(ids, do_sample=False, max_new_tokens=args.max_new_tokens,
                         output_logits=True, return_dict_in_generate=True)
new = out.sequences[0, ids.shape[1]:].tolist()
margins, scales = [], []
for step in out.logits:
    top = step[0].float().topk(2).values
    margins.append(float(top[0] - top[1]))
    scales.append(float(step[0].float().abs().max()))
print(json.dumps({"prompt_ids": ids[0].tolist(), "new_ids": new,
                  "text": tok.decode(new, skip_special_tokens=True),
                  "margins": margins, "scales": scales}))
