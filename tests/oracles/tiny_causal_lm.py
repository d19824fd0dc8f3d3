#!/usr/bin/env python3
"""A tiny random checkpoint of a causal-LM architecture hookscope's LibTorch engine does not port,
written by transformers from its own config class, with a tokenizer written by `tokenizers`.

    tiny_causal_lm.py --out DIR --arch gpt2|mistral|phi3|gemma [--prompt TEXT]

DIR/tiny-ARCH/ is an ordinary HF folder: config.json, model.safetensors (safe_serialization),
generation_config.json, tokenizer.json + tokenizer_config.json (a byte-level BPE trained here on
a few sentences, loaded by AutoTokenizer as a PreTrainedTokenizerFast). Nothing is downloaded.
Prints {"architecture", "model_type", "no_split", "layers", "vocab_size", "tied", "prompt_ids"}:
prompt_ids is the prompt as transformers' AutoTokenizer encodes it from the folder.
"""
import argparse
import json
import os
import shutil
import tempfile

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402

VOCAB = 320
CORPUS = ["The capital of France is Paris.", "The capital of Italy is Rome.",
          "A hook moves the weights of a module to its device before the forward.",
          "Offloaded layers are loaded from the cpu or the disk for each call."] * 4


def common(**kw):
    base = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                initializer_range=0.2, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    base.update(kw)
    return base


def configs():
    """Each architecture's config, from transformers' own config class, as small as it goes."""
    return {
        # GPT-2: learned positions, Conv1D projections, tied lm_head; its own field names.
        "gpt2": lambda: transformers.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                                                initializer_range=0.2, bos_token_id=1, eos_token_id=2,
                                                pad_token_id=0),
        # Mistral: GQA, a sliding window longer than any test prompt.
        "mistral": lambda: transformers.MistralConfig(**common(sliding_window=64, tie_word_embeddings=False)),
        # Phi-3: fused qkv_proj and gate_up_proj.
        "phi3": lambda: transformers.Phi3Config(**common(tie_word_embeddings=False, original_max_position_embeddings=128)),
        # Gemma: scaled embeddings, GELU MLP, (1 + w) RMSNorm, tied lm_head.
        "gemma": lambda: transformers.GemmaConfig(**common(head_dim=16, tie_word_embeddings=True)),
    }


def write_tokenizer(folder):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB - 16, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                                eos_token="</s>")
    fast.save_pretrained(folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--arch", required=True, choices=sorted(configs()))
    ap.add_argument("--prompt", default="The capital of France is")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(1234)
    model = transformers.AutoModelForCausalLM.from_config(configs()[a.arch]()).eval()
    target = os.path.join(a.out, "tiny-" + a.arch)  # named apart: oracles cache by folder name
    tmp = tempfile.mkdtemp(prefix=".model-", dir=a.out)
    model.save_pretrained(tmp, safe_serialization=True)
    write_tokenizer(tmp)
    shutil.rmtree(target, ignore_errors=True)
    os.rename(tmp, target)
    tok = transformers.AutoTokenizer.from_pretrained(target, local_files_only=True)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(target, local_files_only=True)
    print(json.dumps({"architecture": loaded.config.architectures[0], "model_type": loaded.config.model_type,
                      "no_split": sorted(loaded._no_split_modules), "layers": loaded.config.num_hidden_layers,
                      "vocab_size": loaded.config.vocab_size, "tied": loaded.config.tie_word_embeddings,
                      "prompt_ids": tok(a.prompt, add_special_tokens=True)["input_ids"]}))


if __name__ == "__main__":
    main()
