#!/usr/bin/env python3
"""Tokenizer encode time on one long word at 1x and 4x its length: hookscope vs `tokenizers`.

The words are the long-word cases of tests/oracles/tokenizer_oracle.py (20,000 x U+A66E, a
random Latin and a random mixed-script word and 20,000 digits with the given tokenizer.json;
50,000 x 'a' with a merge-less byte-level tokenizer and with cascading merges; a run of 5,000
whitespace added tokens with lstrip + rstrip), each at --scale and 4 x --scale. For each: best
of 5 encodes (add_special_tokens=False) by bench_tokenizer_long_word and by `tokenizers` in this
process, the ids checked equal, and the growth ratio time(4x) / time(1x) of both (linear: 4;
hookscope's target: <= 5). No assertions: a measurement.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "oracles"))
import tokenizer_oracle as oracle  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

LABELS = ["U+A66E", "latin", "mixed", "digits", "spaces", "a merge-less", "a cascade", "ab cascade",
          "ws added"]


def hf_seconds(tok, text, repeats=5):
    best, ids = 1e30, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        best = min(best, time.perf_counter() - t0)
        if best > 0.5:  # tokenizers is quadratic on the whitespace added tokens: one run is enough
            break
    return best, ids


def ours(bench, tokenizer, text, work):
    text_path = os.path.join(work, "text.txt")
    ids_path = os.path.join(work, "ids.json")
    with open(text_path, "w", encoding="utf-8") as f:
        f.write(text)
    out = subprocess.run([bench, "--tokenizer", tokenizer, "--text", text_path, "--ids-out", ids_path,
                          "--repeats", "5"],
                         check=True, capture_output=True, text=True).stdout
    with open(ids_path) as f:
        return json.loads(out)["seconds"], json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="build/bench/bench_tokenizer_long_word")
    ap.add_argument("--tokenizer", required=True, help="the sample's tokenizer.json")
    ap.add_argument("--scale", type=int, default=1, help="1x words are the test's words times this")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="hookscope-tok-bench-") as work:
        paths = {"given": args.tokenizer}
        for name, make in (("mergeless", oracle.mergeless_tokenizer), ("cascade", oracle.cascade_tokenizer),
                           ("added_ws", oracle.added_whitespace_tokenizer)):
            paths[name] = os.path.join(work, name + ".json")
            make().save(paths[name])
        toks = {k: Tokenizer.from_file(p) for k, p in paths.items()}
        rows = []
        one = oracle.long_word_cases(random.Random(34), args.scale)
        four = oracle.long_word_cases(random.Random(34), 4 * args.scale)
        for label, (key, t1), (_, t4) in zip(LABELS, one, four):
            h1, hid1 = hf_seconds(toks[key], t1)
            h4, hid4 = hf_seconds(toks[key], t4)
            o1, oid1 = ours(args.bench, paths[key], t1, work)
            o4, oid4 = ours(args.bench, paths[key], t4, work)
            same = oid1 == hid1 and oid4 == hid4
            rows.append((label, len(t1), o1, o4, h1, h4, same))
        print(f"{'word':<13} {'chars':>7} {'ours 1x':>9} {'ours 4x':>9} {'ratio':>6}   {'HF 1x':>9} {'HF 4x':>9} "
              f"{'ratio':>6}   {'ours/HF 4x':>10}  ids")
        for label, n, o1, o4, h1, h4, same in rows:
            print(f"{label:<13} {n:>7} {o1:>9.4f} {o4:>9.4f} {o4 / o1:>6.2f}   {h1:>9.4f} {h4:>9.4f} {h4 / h1:>6.2f}   "
                  f"{o4 / h4:>10.2f}  {'same' if same else 'DIFFER'}")
        worst = max(r[3] / r[2] for r in rows)
        print(f"tokenizer long words: worst growth time(4x)/time(1x) {worst:.2f} (linear: 4, target <= 5)")
        if not all(r[6] for r in rows):
            print("tokenizer long words: ids differ from tokenizers (see 'DIFFER')")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
