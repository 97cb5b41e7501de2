#!/usr/bin/env python3
"""Trains small byte-level BPE tokenizers with the Hugging Face `tokenizers` package and writes,
for each, tokenizer.json and the package's own encodings of many test strings, so the C++
tokenizer test can check that ddx encodes and decodes exactly as the Rust library does.

usage: train_tokenizer.py OUT_DIR
writes OUT_DIR/<style>/tokenizer.json and OUT_DIR/<style>/cases.json for the styles
  gpt2          ByteLevel(use_regex) pre-tokenizer, merges stored as "a b" strings
  gpt2_prefix   as gpt2 with add_prefix_space, plus added tokens with lstrip/rstrip/single_word
  llama3        Sequence[Split(Llama-3 regex), ByteLevel(use_regex=false)], ignore_merges,
                <|begin_of_text|> template
Everything is generated from fixed seeds; nothing is downloaded.
"""
import json
import os
import random
import sys
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

WORDS = ("the quick brown fox jumps over lazy dog data model train token loss batch rank world "
         "shard gradient step epoch seed value cache block sample it is was were they we you "
         "don't can't I'm you're we've they'll she'd IT'S WE'RE Don'T").split()
UNICODE_WORDS = ["café", "naïve", "Ærøskøbing", "straße", "Ωμέγα", "λόγος", "привет", "Москва",
                 "東京", "日本語のテキスト", "中文字符", "한국어", "مرحبا", "שלום", "हिन्दी",
                 "ไทย", "𝐀𝐁𝐂", "ǅemal", "Ⅻ", "²³", "½", "٣٤٥", "１２３", "e\u0301", "ﬁne"]
EMOJI = ["🙂", "👍🏽", "👨‍👩‍👧", "🇯🇵", "❤️", "🚀🚀"]
PUNCT = list(".,;:!?()[]{}<>\"'-_/\\@#$%^&*+=~`|") + ["...", "--", "—", "…", "«»", "“”"]
SPACES = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ", "\u00a0", "\u2003",
          "\u3000", "\u0085", "\u2028", "\u000b", "\u000c"]
TRICKY = ["'s", "'S", "'t", "'re", "'RE", "'Ve", "'m", "'ll", "'LL", "'d", "'ſ", "''", "'x", "'",
          "12345678", "3.14159", "1,000,000", "v2", "x86_64", "2024-01-31", "0x1F"]


def assigned_code_points(rng, count):
    out = []
    while len(out) < count:
        cp = rng.randrange(0x20, 0x30000)
        cat = unicodedata.category(chr(cp))
        if cat in ("Cn", "Cs", "Co", "Cc"):
            continue
        out.append(chr(cp))
    return out


def fragment(rng, wild):
    r = rng.random()
    if r < 0.35:
        return rng.choice(WORDS)
    if r < 0.45:
        return rng.choice(UNICODE_WORDS)
    if r < 0.55:
        return str(rng.randrange(0, 10 ** rng.randrange(1, 8)))
    if r < 0.65:
        return rng.choice(PUNCT)
    if r < 0.72:
        return rng.choice(TRICKY)
    if r < 0.77:
        return rng.choice(EMOJI)
    if r < 0.85:
        return "".join(rng.choice(wild) for _ in range(rng.randrange(1, 4)))
    return rng.choice(SPACES)


def random_text(rng, wild, n):
    parts = []
    for _ in range(n):
        parts.append(fragment(rng, wild))
        if rng.random() < 0.6:
            parts.append(" ")
    return "".join(parts)


def training_corpus(seed):
    rng = random.Random(seed)
    wild = assigned_code_points(rng, 300)
    lines = []
    for _ in range(4000):
        lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 15))) + ".")
    for _ in range(1500):
        lines.append(random_text(rng, wild, rng.randrange(3, 20)))
    return lines


def test_strings(seed):
    rng = random.Random(seed)
    fixed = [
        "", " ", "Hello world", " Hello world", "Hello  world", "Hello\n\nworld\n", "  leading",
        "trailing  ", "\t\ttabs\tand spaces  \n", "I'm sure you're right, they'll see we've won.",
        "IT'S WE'RE THEY'LL", "'s's's", "numbers 1 12 123 1234 12345 123456 1234567",
        "3.14159 and 2,718 and -42", "café naïve Ærøskøbing straße", "Ωμέγα λόγος привет Москва",
        "東京 日本語のテキスト 中文字符 한국어", "مرحبا שלום हिन्दी ไทย", "emoji 🙂 👍🏽 👨‍👩‍👧 🇯🇵 ❤️ 🚀🚀",
        "math 𝐀𝐁𝐂 Ⅻ ²³ ½ ٣٤٥ １２３", "combining e\u0301 and ﬁne", "nbsp\u00a0here em\u2003space "
        "ideo\u3000space nel\u0085x ls\u2028y", "\r\n\r\nwindows\r\nlines\r\n", "(parens) [brackets] {braces}",
        "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ", "x <mask> y", "x<mask>y",
        "x  <mask>  y", "<|begin_of_text|>hi<|end_of_text|>", "...!!!???", "  \n  hello", "a\n\n\nb",
        "tab\there", "mixed\t \n \tws", "ÿ\u0100\u0101", "ſ's 'ſ", "don't DON'T Don'T",
    ]
    wild = assigned_code_points(rng, 3000)
    strings = list(fixed)
    for _ in range(1500):
        strings.append(random_text(rng, wild, rng.randrange(1, 25)))
    # Long runs stress the merge loop and the whitespace rules.
    strings.append("a" * 500)
    strings.append(" " * 300 + "x")
    strings.append("9" * 100)
    strings.append("".join(wild[:1000]))
    return strings


def build(style):
    ignore_merges = style == "llama3"
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if style == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
        special = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=(style == "gpt2_prefix"))
        special = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, min_frequency=2, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_corpus(1234), trainer)
    if style == "llama3":
        bos = tok.token_to_id("<|begin_of_text|>")
        tok.post_processor = processors.TemplateProcessing(
            single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if style == "gpt2_prefix":
        tok.add_special_tokens([AddedToken("<mask>", lstrip=True, rstrip=False, single_word=False,
                                           normalized=False)])
        tok.add_tokens([AddedToken("zz", single_word=True, normalized=False),
                        AddedToken("##", rstrip=True, normalized=False)])
    return tok


def main():
    out_dir = sys.argv[1]
    for style in ("gpt2", "gpt2_prefix", "llama3"):
        tok = build(style)
        d = os.path.join(out_dir, style)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        tok.save(path)
        if style == "gpt2":
            # Older tokenizer.json files store merges as "a b" strings; check that form too.
            with open(path, encoding="utf-8") as f:
                j = json.load(f)
            j["model"]["merges"] = [" ".join(m) if isinstance(m, list) else m for m in j["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False)
            tok = Tokenizer.from_file(path)
        cases = []
        for text in test_strings(99):
            plain = tok.encode(text, add_special_tokens=False).ids
            cases.append({
                "text": text,
                "ids": plain,
                "ids_with_template": tok.encode(text, add_special_tokens=True).ids,
                "decoded": tok.decode(plain, skip_special_tokens=False),
            })
        with open(os.path.join(d, "cases.json"), "w", encoding="utf-8") as f:
            json.dump({"vocab_size": tok.get_vocab_size(with_added_tokens=True), "cases": cases}, f,
                      ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
