#!/usr/bin/env python3
"""Reference outputs of the HuggingFace `tokenizers` package for hookscope's C++ tokenizer tests.

Usage:
  tokenizer_oracle.py expect --tokenizer PATH --out OUT.json
      Encodes/decodes the fixed test strings with the tokenizer.json at PATH.
  tokenizer_oracle.py variant NAME --out DIR
      Builds the tokenizer variant NAME with `tokenizers` itself (training a byte-level BPE on
      the built-in corpus where needed), writes DIR/tokenizer.json and DIR/expected.json.
  tokenizer_oracle.py list
      Prints the variant names.
  tokenizer_oracle.py long_words --tokenizer PATH --out DIR
      Long single words (one pre-token each, tens of thousands of characters) and their ids:
      with the tokenizer.json at PATH, a merge-less byte-level tokenizer, one whose merges
      cascade (a, aa, aaaa, ...) and that one with whitespace added tokens (lstrip / rstrip;
      short cases too, where an rstrip swallows later matches), all written to DIR; DIR/long_words.json lists
      {tokenizer: "given" | FILE, text, ids} (add_special_tokens=False).

expected.json holds: strings, ids (add_special_tokens=True), ids_no_special,
decode / decode_skip (decode of `ids` with skip_special_tokens False / True), decode_no_special
(decode of ids_no_special), id_lists
(seeded random id sequences, incl. ones that decode to invalid UTF-8) with their decodes,
added_tokens ({content, id, special}), probe_ids with id_to_token (probe_tokens) and the
token_to_id of those strings (probe_token_ids, null when absent), vocab_size.
Everything is deterministic (fixed lists + random.Random with fixed seeds).
"""
import argparse
import json
import os
import random
import sys
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers, processors, trainers

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                  r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
CHATML_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# ----------------------------------------------------------------------------------------------
# Test strings


def nfd(s):
    return unicodedata.normalize("NFD", s)


FIXED = [
    "",
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "Hello world",
    "Hello, world!",
    " Hello world",
    "Hello world ",
    "   leading and trailing   ",
    "  multiple   spaces\n\nnew",
    "line1\nline2\r\nline3\rline4",
    "tabs\tand\t\ttabs\t",
    "mixed \t \n \r\n  whitespace\n\n\n\n",
    "trailing newlines\n\n",
    "\n\n\nleading newlines",
    "DON'T", "I'll", "We'RE", "you've", "She'd", "it's", "I'M", "they'LL", "O'Neil's 'quoted'",
    "don't won't can't shouldn't",
    "'s 't 're",
    "12345",
    "3.14159265358979",
    "1,000,000 and 1 000 000",
    "Call 555-0199 or +1 (800) 123-4567.",
    "year 2024, version v1.2.3, 0x1F, 1e-9",
    "123456789012345678901234567890",
    "a1b2c3d4",
    "١٢٣ ٤٥٦ (Arabic-Indic digits) ½ ² Ⅻ",
    "日本語のテキストです。",
    "中文测试：你好，世界！",
    "한국어 문장입니다.",
    "Emoji: 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇩🇪",
    "café naïve résumé Ångström",
    nfd("café naïve résumé Ångström"),
    "e\u0301 vs \u00e9",
    "Zoë Saldaña, São Paulo, Kraków, Reykjavík",
    nfd("Zoë Saldaña, São Paulo, Kraków, Reykjavík"),
    "ﬁne ﬂower ＡＢＣ ｱｲｳ ℌ ㎏",
    "Ελληνικά κείμενο, Русский текст, Українська",
    "עברית מימין לשמאל",
    "العربية من اليمين إلى اليسار",
    "mixed עברית and English",
    "हिन्दी पाठ और தமிழ்",
    "ไทยภาษา",
    "def add(a, b):\n    return a + b\n",
    "for (int i = 0; i < n; ++i) { sum += x[i]; }",
    "if x == 1:\n\tprint('one')\nelse:\n\tprint(\"other\")",
    "<div class=\"a\">&amp;</div>",
    "SELECT * FROM t WHERE id >= 10;",
    "path/to/file.txt C:\\Windows\\System32",
    "https://example.com/a?b=c&d=e#frag",
    "user@example.com",
    "!!!???...,,,;;;",
    "--- *** ___ ===",
    "«quotes» „German“ “curly” ‘single’",
    "\u00a0non\u00a0breaking\u00a0spaces\u00a0",
    "ideographic\u3000space",
    "line\u2028separator\u2029para",
    "nel\u0085char vt\u000bff\u000cx",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "ſtraße Kelvin: K, 'ſ 'Ŝ",
    "İstanbul ǅemal ß ẞ",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat is 12345?<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "<|endoftext|><|endoftext|>",
    "text<|endoftext|>more",
    " <|im_end|> ",
    "<|im_start|",
    "<|im_end",
    "<|begin_of_text|>Hello",
    "<|begin_of_text|><|begin_of_text|>",
    "<|reserved_special_token_0|>",
    "<s></s>",
    "x" * 300,
    "ab" * 200,
    "word " * 100,
    " " * 50,
    "\n" * 30,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "The quick brown fox jumps over the lazy dog.",
    "THE QUICK BROWN FOX",
    "CamelCaseIdentifier snake_case_identifier kebab-case",
    "\U0001F600",
    "\u00ff\u0100\u0101",
    "Ġ Ċ ĉ",
    "\x00\x01\x02 control \x7f",
    # Unicode-version gaps: HF normalizes with Unicode 9.0 tables (U+1AC5 has no combining class
    # there, U+10789 and U+1F16C no compatibility mapping), matches regexes with Unicode 16
    # (Egyptian hieroglyphs Ext-A, CJK Ext-H, Kawi digits are letters/digits) and runs Digits
    # with Rust's Unicode 17 (Tolong Siki digits).
    "a\u0345\u1ac5 \U00010789 \U0001F16C",
    "\U000135DC're \U00031350's \U00011F50\U00011F51 x",
    "\U00011DE2\u00f1 \U00011DE3 42",
]

FRAGMENTS = [
    "hello", "world", " the", " a", "cat", "DOG", "isn't", "We'll", "I'M", "  ", " ", "\n", "\t",
    "\r\n", "\n\n", "42", "3.14", "2024", "1234567", "0", "!", "?", "...", "()", "{}", "[]",
    "->", "==", "+=", "#", "@", "$", "%", "^", "&", "*", "日本", "語", "中文", "😀", "👍🏽", "é",
    "e\u0301", "ñ", "n\u0303", "Å", "A\u030a", "ß", "Ω", "שלום", "مرحبا", "Привет", "ﬁ",
    "\u00a0", "\u3000", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|begin_of_text|>",
    "<|im_", "|>", "<", ">", "'s", "'T", "'re", "'LL", "don't", "x", "Ġ", "\x00", "def", " return",
    "    ", "\t\t", "_", "-", "—", "“", "”", "…", "ǅ", "İ", "K",
]


def make_strings(extra=()):
    rng = random.Random(20240611)
    strings = list(FIXED) + list(extra)
    for _ in range(160):
        n = rng.randint(1, 12)
        strings.append("".join(rng.choice(FRAGMENTS) for _ in range(n)))
    for _ in range(20):  # random code points from assorted blocks
        n = rng.randint(1, 16)
        chars = []
        for _ in range(n):
            block = rng.choice([(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF),
                                (0x590, 0x6FF), (0x900, 0x97F), (0x3040, 0x30FF), (0x4E00, 0x4FFF),
                                (0xAC00, 0xACFF), (0x1F300, 0x1F64F), (0x2000, 0x206F), (0x300, 0x36F)])
            chars.append(chr(rng.randint(*block)))
        strings.append("".join(chars))
    return strings


# ----------------------------------------------------------------------------------------------
# Built-in training corpus (for the trained variants)

BASE_TEXT = """\
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs.
It's a truth universally acknowledged that a single model in possession of good weights must be in want of a tokenizer.
We'll see whether they're right; I'd say you've got to test it, and I'm sure it'll work. DON'T PANIC.
Hello world! Hello, World. HELLO WORLD? hello-world hello_world helloWorld
def tokenize(text: str) -> list[int]:
    return [vocab[t] for t in pre_tokenize(normalize(text))]
for (size_t i = 0; i < n; ++i) { total += values[i] * weights[i]; }
if __name__ == "__main__":
    main()
SELECT name, count(*) FROM users WHERE age >= 18 GROUP BY name ORDER BY 2 DESC;
<html><body class="main"><p>Paragraph &amp; text</p></body></html>
The year 2024 had 366 days; 1,000,000 people; pi is 3.14159; call 555-0100 at 10:30.
Version 1.2.3 was released on 2023-11-05 with 42 fixes and 7 features.
Café, naïve, résumé, jalapeño, São Paulo, Zürich, Kraków, Ångström, façade, coöperate.
日本語の文章はスペースを使いません。東京は日本の首都です。
中文文本也没有空格。北京是中国的首都。你好，世界！
한국어는 띄어쓰기를 사용합니다. 서울은 한국의 수도입니다.
Русский язык использует кириллицу. Москва — столица России.
Ελληνικά: Η Αθήνα είναι η πρωτεύουσα της Ελλάδας.
עברית נכתבת מימין לשמאל. ירושלים.
العربية تكتب من اليمين إلى اليسار. القاهرة.
हिन्दी देवनागरी लिपि में लिखी जाती है।
Emoji are tokens too 😀 😃 😄 👍 🎉 🚀 ❤️ 🇺🇸
<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
The capital of France is Paris.<|im_end|>
"""

WORDS = ("the of and to in is was for on that with as by at from it an be this are or which "
         "model token layer device weight offload hook graph compile break memory tensor cache "
         "transformer attention decoder encoder shard dispatch accelerate profile timeline event "
         "running tested quickly slowly better faster stronger numbers values results errors "
         "Paris London Tokyo Berlin Madrid Rome Moscow Beijing Seoul Cairo "
         "don't can't won't isn't it's I'm you're we've they'll she'd").split()


SYLLABLES = ("ka ri to mo na shi be la ven dor ex pre con tra ing ed er ly tion ment able ous "
             "al ic ist ize qu str th ph ch sh gr bl cr fl pl st tr wh zo yu").split()


def corpus():
    rng = random.Random(7)
    # Pseudo-words (Zipf-like reuse below) give the trainer enough distinct pairs for a few
    # thousand merges.
    lexicon = WORDS + ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4)))
                       for _ in range(3000)]
    lines = BASE_TEXT.splitlines() * 20
    for _ in range(12000):
        n = rng.randint(3, 14)
        words = [lexicon[min(int(rng.paretovariate(0.7)) - 1, len(lexicon) - 1)]
                 if rng.random() < 0.5 else rng.choice(lexicon) for _ in range(n)]
        if rng.random() < 0.3:
            words[0] = words[0].capitalize()
        if rng.random() < 0.2:
            words.insert(rng.randrange(len(words)), str(rng.randint(0, 99999)))
        sep = rng.choice([" ", " ", " ", "  ", "\t"])
        lines.append(sep.join(words) + rng.choice([".", "!", "?", ",", "", "\n"]))
    return lines


def train(pre_tokenizer, normalizer, vocab_size=4000):
    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    return tok


def qwen_pre_tokenizer():
    return pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])


def qwen_style():
    tok = train(qwen_pre_tokenizer(), normalizers.NFC())
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in CHATML_SPECIALS])
    return tok


def to_dict(tok):
    return json.loads(tok.to_str())


def from_dict(d):
    return Tokenizer.from_str(json.dumps(d))


def variant(name):
    """Returns (tokenizer.json as a dict, extra test strings). The dict is written verbatim, so
    forms that `tokenizers` would re-serialize differently (legacy merges) reach the C++ side."""
    if name == "qwen_pairs":
        tok = qwen_style()
        d = to_dict(tok)
        assert isinstance(d["model"]["merges"][0], list), "expected pair-form merges"
        return d, []
    if name == "qwen_strings":  # same, merges rewritten into the legacy "a b" form
        d = to_dict(qwen_style())
        merges = d["model"]["merges"]
        assert all(" " not in a and " " not in b for a, b in merges)
        d["model"]["merges"] = ["#version: 0.2"] + [f"{a} {b}" for a, b in merges]
        from_dict(d)  # must load in `tokenizers` as well
        return d, []
    if name == "llama3_style":
        pre = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        tok = train(pre, None)
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                                for s in ["<|begin_of_text|>", "<|end_of_text|>",
                                          "<|reserved_special_token_0|>"]])
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                          pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                          special_tokens=[("<|begin_of_text|>", bos)]),
        ])
        d = to_dict(tok)
        d["model"]["ignore_merges"] = True
        return d, []
    if name == "gpt2_digits_prefix":
        # SmolLM-like: individual digits, then the GPT-2 regex with add_prefix_space; a
        # normalizer Sequence; a template with a special token on both sides.
        d = to_dict(qwen_style())
        d["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "NFC"}]}
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}
        tok = from_dict(d)
        s = tok.token_to_id("<|im_start|>")
        e = tok.token_to_id("<|im_end|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|im_start|> $A <|im_end|>", special_tokens=[("<|im_start|>", s), ("<|im_end|>", e)])
        return to_dict(tok), []
    if name == "split_behaviors":
        d = to_dict(qwen_style())
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"String": ", "}, "behavior": "MergedWithPrevious", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"[.!?]"}, "behavior": "MergedWithNext", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"\s"}, "behavior": "Contiguous", "invert": False},
            {"type": "Digits", "individual_digits": False},
            {"type": "Split", "pattern": {"String": "("}, "behavior": "Removed", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
        return d, ["a, b, c. d! e? f", "x(y)z (1) ((2))", "1 2  3\t\t4"]
    if name == "split_invert_classes":
        # invert + Removed keeps only the matches; \w \d \s; a pattern with far-off empty matches
        # (onig's FindMatches drops the first empty match after a non-empty one: "xxab" -> "xx", "ab").
        d = to_dict(qwen_style())
        d["normalizer"] = {"type": "NFKC"}
        d["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\w+|\s+|\d"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"x+|(?=b)"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"\bq|q\B|\h{2,}"}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"Regex": r"[^\p{P}]+"}, "behavior": "Removed", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]}
        sweeps = [(0xA0, 0x250), (0x2B0, 0x370), (0x483, 0x48A), (0x900, 0x980), (0xBE6, 0xC00),
                  (0x1680, 0x1681), (0x180B, 0x1810), (0x2000, 0x2070), (0x2070, 0x20A0),
                  (0x20D0, 0x20F1), (0x2150, 0x2190), (0x2460, 0x2500), (0x3000, 0x3010),
                  (0xFF10, 0xFF40), (0x1F100, 0x1F1A0), (0x10780, 0x107BB), (0x1AB0, 0x1ACF)]
        extra = ["".join(chr(c) for c in range(a, b)) for a, b in sweeps]
        return d, extra + ["xxab", "xab", "ab", "b", "xxb", "bxb", "xxaxxbx", "axbxc", "x", "xx yy",
                           "a.b,c;d", "x.x", "abba xbab", "q qq aq qa q_q", "deadbeef 0xCAFE ghij",
                           "café" + "\u0301q", "a\u00b2q \u00bdq"]
    if name == "added_token_flags":
        # lstrip / rstrip / single_word / normalized added tokens; NFKC so normalized forms differ.
        tok = qwen_style()
        d = to_dict(tok)
        d["normalizer"] = {"type": "NFKC"}
        tok = from_dict(d)
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, special=True, normalized=False)])
        tok.add_tokens([
            AddedToken("[SW]", single_word=True, normalized=False),
            AddedToken("<r>", rstrip=True, normalized=False),
            AddedToken("<both>", lstrip=True, rstrip=True, normalized=False),
            AddedToken("café", normalized=True),
            AddedToken("ﬁx", normalized=True),          # matched as its NFKC form "fix"
            AddedToken("sw2", single_word=True, normalized=True),
            AddedToken("<mask><mask>", normalized=False),  # longest match wins
            AddedToken("hello", normalized=False),
        ])
        extra = ["a <mask> b", "a   <mask>b", "\n\t <mask>", "<mask>  x", "x<mask><mask>y",
                 "[SW] x[SW] [SW]x [SW]", "é[SW]", "_[SW]", "[SW][SW]", "<r>   next", "<r>\n\nx",
                 "a  <both>  b", "<both><both>", "café " + nfd("café") + " CAFÉ", "ﬁx fix ﬁxed",
                 "sw2 asw2 sw2b sw2", "hello hellohello Hello", "<mask><mask><mask>",
                 " <mask> <r> <both> [SW] café ﬁx sw2 hello "]
        return to_dict(tok), extra
    if name == "no_decoder_unk":
        # No ByteLevel step: the model sees raw characters; unknown ones become a fused unk.
        d = to_dict(qwen_style())
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN},
                              "behavior": "Isolated", "invert": False}
        d["decoder"] = None
        d["model"]["unk_token"] = "Ġ"
        d["model"]["fuse_unk"] = True
        return d, []
    if name == "raw_dropped":
        # Same without unk_token: characters missing from the vocab are dropped (HF behaviour).
        d = to_dict(qwen_style())
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN},
                              "behavior": "Isolated", "invert": False}
        return d, []
    raise SystemExit(f"unknown variant {name!r}")


VARIANTS = ["qwen_pairs", "qwen_strings", "llama3_style", "gpt2_digits_prefix", "split_behaviors",
            "split_invert_classes", "added_token_flags", "no_decoder_unk", "raw_dropped"]

# ----------------------------------------------------------------------------------------------


def expected(tok, extra=()):
    strings = make_strings(extra)
    ids = [e.ids for e in tok.encode_batch(strings, add_special_tokens=True)]
    ids_ns = [e.ids for e in tok.encode_batch(strings, add_special_tokens=False)]
    out = {
        "strings": strings,
        "ids": ids,
        "ids_no_special": ids_ns,
        "decode": tok.decode_batch(ids, skip_special_tokens=False),
        "decode_skip": tok.decode_batch(ids, skip_special_tokens=True),
        "decode_no_special": tok.decode_batch(ids_ns, skip_special_tokens=False),
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
    }
    added = tok.get_added_tokens_decoder()
    out["added_tokens"] = [{"id": i, "content": t.content, "special": t.special}
                           for i, t in sorted(added.items())]
    vocab_n = max(tok.get_vocab(with_added_tokens=True).values()) + 1
    rng = random.Random(99)
    specials = [i for i, t in added.items() if t.special]
    id_lists = []
    for _ in range(120):
        n = rng.randint(1, 10)
        lst = []
        for _ in range(n):
            r = rng.random()
            if r < 0.15 and specials:
                lst.append(rng.choice(specials))
            elif r < 0.5:
                lst.append(rng.randrange(min(vocab_n, 256)))  # single-byte tokens: partial UTF-8
            else:
                lst.append(rng.randrange(vocab_n))
        id_lists.append(lst)
    out["id_lists"] = id_lists
    out["id_lists_decode"] = tok.decode_batch(id_lists, skip_special_tokens=False)
    out["id_lists_decode_skip"] = tok.decode_batch(id_lists, skip_special_tokens=True)
    probe = sorted(set(rng.randrange(vocab_n) for _ in range(200)) | set(added.keys()))
    out["probe_ids"] = probe
    out["probe_tokens"] = [tok.id_to_token(i) for i in probe]
    out["probe_token_ids"] = [tok.token_to_id(t) for t in out["probe_tokens"]]
    return out


# ----------------------------------------------------------------------------------------------
# Long words (BPE must stay O(n log n) in a word's length and give the same ids)


def byte_vocab():
    return {ch: i for i, ch in enumerate(pre_tokenizers.ByteLevel.alphabet())}


def byte_level_bpe(vocab, merges):
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def mergeless_tokenizer():
    return byte_level_bpe(byte_vocab(), [])


def cascade_tokenizer():
    """Merges a+a, aa+a, aa+aa, aaa+aaa, aaaa+aaaa, ... and b+a, ab+... so long runs merge in
    many overlapping rounds (stale queue entries everywhere)."""
    vocab = byte_vocab()
    merges = []

    def add(a, b):
        if a + b not in vocab:
            vocab[a + b] = len(vocab)
        merges.append((a, b))

    add("a", "a")
    add("aa", "a")
    add("b", "a")
    add("aa", "aa")
    add("ba", "aa")
    add("aaa", "aaa")
    n = 4
    while n <= 512:
        add("a" * n, "a" * n)
        n *= 2
    add("a", "b")
    add("ab", "ab")
    return byte_level_bpe(vocab, merges)


def added_whitespace_tokenizer():
    tok = cascade_tokenizer()
    tok.add_tokens([AddedToken("\t", lstrip=True, rstrip=True, normalized=False)])
    return tok


def added_edges_tokenizer():
    """An rstrip token that swallows later matches (HF then drops their empty pieces and
    encodes the swallowed whitespace again after a later token's stop)."""
    tok = cascade_tokenizer()
    tok.add_tokens([AddedToken("A", rstrip=True, normalized=False), AddedToken("\t", normalized=False),
                    AddedToken("B", lstrip=True, normalized=False)])
    return tok


def long_word_cases(rng, scale=1):
    """(tokenizer key, text) pairs; one pre-token each under the GPT-2 regex unless noted."""
    latin = "abcdefghijklmnopqrstuvwxyz"
    mixed = latin + "ÄéøßЖжлЛλΣ中文日本한국ꙮ"  # letters (\p{L}) of several scripts
    return [
        ("given", "\ua66e" * (20000 * scale)),
        ("given", "".join(rng.choice(latin) for _ in range(20000 * scale))),
        ("given", "".join(rng.choice(mixed) for _ in range(20000 * scale))),
        ("given", "1" * (20000 * scale)),
        ("given", " " * (20000 * scale) + "x"),  # \s+(?!\S) then ' x'
        ("mergeless", "a" * (50000 * scale)),
        ("cascade", "a" * (50000 * scale)),
        ("cascade", "".join(rng.choice("aaab") for _ in range(50000 * scale))),
        # a whitespace added token with lstrip + rstrip in a long run of whitespace
        ("added_ws", "x" + "\t " * (5000 * scale) + "y"),
        ("added_ws", "\t\t"),
        ("added_edges", "A \t x"),
        ("added_edges", "A \t \t x"),
        ("added_edges", "A \t B x"),
        ("added_edges", "x\t \t y"),
        ("added_edges", "A \tB"),
        ("added_edges", "A " + "\t " * (2000 * scale) + "B"),
    ]


def long_words(tokenizer_path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    toks = {"given": Tokenizer.from_file(tokenizer_path)}
    for name, make in (("mergeless", mergeless_tokenizer), ("cascade", cascade_tokenizer),
                       ("added_ws", added_whitespace_tokenizer), ("added_edges", added_edges_tokenizer)):
        path = os.path.join(out_dir, name + ".json")
        make().save(path)
        toks[name] = Tokenizer.from_file(path)  # the oracle answers for exactly the written file
    cases = []
    for key, text in long_word_cases(random.Random(34)):
        cases.append({"tokenizer": key if key == "given" else key + ".json", "text": text,
                      "ids": toks[key].encode(text, add_special_tokens=False).ids})
    dump(cases, os.path.join(out_dir, "long_words.json"))


def dump(obj, path):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=True)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("expect")
    e.add_argument("--tokenizer", required=True)
    e.add_argument("--out", required=True)
    v = sub.add_parser("variant")
    v.add_argument("name")
    v.add_argument("--out", required=True)
    sub.add_parser("list")
    lw = sub.add_parser("long_words")
    lw.add_argument("--tokenizer", required=True)
    lw.add_argument("--out", required=True)
    args = ap.parse_args()
    if args.cmd == "list":
        print("\n".join(VARIANTS))
    elif args.cmd == "long_words":
        long_words(args.tokenizer, args.out)
    elif args.cmd == "expect":
        dump(expected(Tokenizer.from_file(args.tokenizer)), args.out)
    else:
        d, extra = variant(args.name)
        os.makedirs(args.out, exist_ok=True)
        path = os.path.join(args.out, "tokenizer.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(d, f, ensure_ascii=False, indent=1)
        tok = Tokenizer.from_file(path)  # the oracle answers for exactly the written file
        dump(expected(tok, extra), os.path.join(args.out, "expected.json"))


if __name__ == "__main__":
    sys.exit(main())
