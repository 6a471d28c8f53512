#!/usr/bin/env python3
"""Writes the tokenizer fixtures and the reference ids the data tests read.

Trains small tokenizers here with the libraries people use (Hugging Face
`tokenizers`, `sentencepiece`) on local text (English prose and code, and
sentences in many scripts, all kept in this file), writes them under
tests/data/fixtures/tokenizers/, then encodes a hard test corpus with the
reference libraries (`tokenizers`, `sentencepiece`, `tiktoken`) and writes the
expected ids and decoded texts beside them. The tests read only the committed
files, so they need neither network nor Python.

    pip install tokenizers==0.23.* sentencepiece==0.2.* tiktoken==0.14.* mistral-common==1.13.*
    python3 tools/gen_tokenizer_refs.py

Rerunning rewrites every fixture together with its expected ids (the versions
used are recorded in each expected file). Byte-level BPE and SentencePiece
training is reproducible; the SentencePiece-style BPE in tokenizer.json breaks
ties in its alphabet differently between runs, so those two files change.
"""

import base64
import json
import os
import shutil
import sys

import sentencepiece as spm
import tiktoken
import tokenizers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "tests", "data", "fixtures", "tokenizers")

# Sentences in many scripts, so the small vocabularies hold merges there too.
MULTILINGUAL = [
    "数据并行训练把批次分给多个设备，每个设备保存完整的模型副本。",
    "東京の研究者は大規模言語モデルを訓練している。ひらがなとカタカナも使う。",
    "대규모 언어 모델은 많은 텍스트로 훈련됩니다.",
    "يتم تدريب النماذج اللغوية الكبيرة على كميات ضخمة من النصوص العربية.",
    "बड़े भाषा मॉडल बहुत सारे पाठ पर प्रशिक्षित होते हैं। हिन्दी देवनागरी लिपि में लिखी जाती है।",
    "แบบจำลองภาษาขนาดใหญ่ได้รับการฝึกฝนด้วยข้อความจำนวนมาก",
    "Большие языковые модели обучаются на огромных объёмах текста.",
    "Τα μεγάλα γλωσσικά μοντέλα εκπαιδεύονται σε πολλά κείμενα.",
    "Les modèles de langue apprennent à prédire le mot suivant; c'est simple, n'est-ce pas?",
    "Große Sprachmodelle lernen aus Straßennamen, Flüssen und Bäumen.",
    "emoji 😀😃 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 flags 🇫🇷🇯🇵 and 1234567890 digits 3.14159",
]

# The hard test corpus: every text must get exactly the reference ids.
CORPUS = [
    "Hello world",
    " Hello world",
    "Hello, world! How's it going? I'm fine, we'll see; they've done it, you'd know.",
    "HOW'S IT GOING? I'M FINE, WE'LL SEE",
    "",
    " ",
    "   leading and trailing spaces   ",
    "tabs\tand\t\tmore\ttabs\t",
    "line one\nline two\r\nline three\n\n\nafter blank lines\n",
    "  \n  \t \n mixed whitespace runs \u00a0\u2003non-breaking and em spaces\u3000ideographic",
    "digits 0 12 345 6789 1234567890123 3.14159 1,000,000 2026-12-01",
    "数据并行训练把批次分给多个设备。",
    "東京の研究者は大規模言語モデルを訓練している",
    "대규모 언어 모델은 텍스트로 훈련됩니다",
    "يتم تدريب النماذج اللغوية الكبيرة",
    "हिन्दी देवनागरी लिपि में लिखी जाती है।",
    "แบบจำลองภาษาขนาดใหญ่",
    "Большие языковые модели",
    "emoji 😀😃 👩‍💻 👨‍👩‍👧‍👦 🏳️‍🌈 🇫🇷🇯🇵 ✋🏽",
    "combining marks: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Z\u0351\u0368\u0307\u0352 precomposed: é ä ñ",
    "NFKC: ｆｕｌｌｗｉｄｔｈ ①②③ ﬁ ligature ㎏ Ⅻ",
    "control chars: \x00\x01\x07\x08\x1b[31mred\x1b[0m\x7f end",
    "special tokens inside text: <|endoftext|> and <s> and </s> and <|im_start|>user<|im_end|>",
    "<|endoftext|>starts with a special token",
    "<s>",
    "<|begin_of_text|>Llama 3 header<|eot_id|>",
    "a" * 300,
    "Pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilisticexpialidocious "
    "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz",
    "x" + "\u0301" * 40,
    "snake_case_identifier CamelCaseIdentifier __dunder__ http://example.com/a?b=c&d=e#f",
    "def f(x):\n    return x ** 2  # squared\n\n\tif x >= 10: print(f'{x:>8}')\n",
    "punctuation!!! ??? ... --- ___ *** ((())) [[[]]] {{{}}} \"quoted\" 'single' «guillemets»",
    "mixed 中文English한국어العربيةहिन्दी123abc",
    "\u200b zero width \u200c joiner \u200d marks \ufeff bom",
    "surrogate-range emoji 𝕳𝖊𝖑𝖑𝖔 𝟙𝟚𝟛 and music 𝄞",
    "▁already▁has▁metaspace ▁ chars",
    "<0x41> looks like a byte token",
    "trailing newline\n",
    "ﷺ ﷽ long Arabic ligatures",
]


# English prose and code, so that the vocabularies hold common words and
# programming tokens. Kept here rather than read from the repository's docs,
# so that editing those does not change the fixtures.
ENGLISH = [
    "Conveyor trains GPT models the way Megatron-LM does: tensor, pipeline and data "
    "parallelism, a distributed optimizer, and checkpoints that load on any layout.",
    "The data pipeline reads indexed datasets: a .bin file holds the token ids of every "
    "document, and a .idx file holds where each sequence starts and how long it is.",
    "Preprocessing turns JSON lines into token ids with the tokenizer the model will use; "
    "each worker tokenizes documents while the writer keeps their order.",
    "A tokenizer splits text into pieces, then merges bytes or characters into the tokens "
    "of its vocabulary, lowest rank first, until no known merge remains.",
    "The learning rate warms up linearly, then decays along a cosine to its minimum; "
    "gradients are clipped to a global norm of 1.0 before the optimizer step.",
    "If the loss is not finite, the run stops and names the iteration, or skips the step "
    "and counts it, as --nan-policy says.",
    "It's what they'd do, isn't it? We'll see: you're right, I've checked, and she'll agree.",
    "for (int i = 0; i < n; ++i) { sum += x[i] * w[i]; }  // dot product",
    "def attention(q, k, v):\n    scores = q @ k.T / math.sqrt(q.shape[-1])\n    return softmax(scores) @ v",
    "    if (!status.ok()) return status;\n\treturn absl::OkStatus();",
    "Numbers: 0, 1, 2, 10, 42, 100, 1024, 65536, 3.14159, 2.71828, 1e-5, 0x7f, 2026-12-01.",
    "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG. The quick brown fox jumps over the lazy dog.",
]


def training_text():
    return (ENGLISH + MULTILINGUAL) * 20


SPECIALS_GPT2 = ["<|endoftext|>"]
SPECIALS_LLAMA3 = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
SPECIALS_QWEN2 = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?"
                  r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?"
                 r"[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Megatron's --tiktoken-pattern v1 and v2 (megatron/training/tokenizer/tokenizer.py).
TIKTOKEN_V1 = r"[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+"
TIKTOKEN_V2 = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
               r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
               r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def byte_level_bpe(specials, split_pattern=None, add_prefix_space=False, nfc=False,
                   bos=None, ignore_merges=False, vocab_size=1200):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if nfc:
        tok.normalizer = normalizers.NFC()
    if split_pattern is None:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(tokenizers.Regex(split_pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space, use_regex=False),
        ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(training_text(), trainer)
    if bos is not None:
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", special_tokens=[(bos, tok.token_to_id(bos))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def sentencepiece_style_bpe(metaspace, prepend_scheme="first", split=False):
    """Llama 2 / Mistral tokenizer.json: BPE over '▁'-marked text, byte fallback."""
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    if metaspace:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme=prepend_scheme,
                                                     split=split)
        tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁",
                                                            prepend_scheme=prepend_scheme,
                                                            split=split),
                                         decoders.ByteFallback(), decoders.Fuse()])
    else:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"),
                                               normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=["<unk>", "<s>", "</s>"] + byte_tokens,
                                  show_progress=False, limit_alphabet=300)
    tok.train_from_iterator(training_text(), trainer)
    # The byte tokens are ordinary vocabulary entries in Llama 2's file, not added tokens.
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in byte_tokens]
    tok = Tokenizer.from_str(json.dumps(spec))
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return tok


def other_components_bpe():
    """The remaining normalizers and pre-tokenizers in one file: NFKC, Lowercase, Split
    with a String pattern and each behaviour (Gemma splits on " " MergedWithPrevious),
    invert, Digits; character BPE with an unknown token and no byte fallback."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=False))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                           normalizers.Replace(tokenizers.Regex(r"\s+"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="merged_with_previous"),
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.Split(tokenizers.Regex(r"\p{P}+"), behavior="contiguous"),
        pre_tokenizers.Split(tokenizers.Regex(r"[\p{L}\p{M}]+"), behavior="merged_with_next",
                             invert=True),
        pre_tokenizers.Split(tokenizers.Regex(r"\p{Cc}"), behavior="removed"),
    ])
    tok.decoder = decoders.Fuse()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<unk>", "</s>"],
                                  show_progress=False, limit_alphabet=200)
    tok.train_from_iterator(training_text(), trainer)
    return tok


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def hf_fixture(name, tok, eod_token):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.json")
    # Compact, but one line per vocabulary/merge entry would be larger; the library
    # writes the form it reads back, which is what matters.
    tok.save(path, pretty=False)
    tok = Tokenizer.from_file(path)
    cases = []
    for text in CORPUS:
        ids = tok.encode(text).ids
        # The first half of the ids may end inside a character: lossy decoding.
        half = ids[:len(ids) // 2]
        cases.append({"text": text, "ids": ids,
                      "decoded": tok.decode(ids, skip_special_tokens=False),
                      "half_ids": half, "half_decoded": tok.decode(half, skip_special_tokens=False)})
    write_json(os.path.join(folder, "expected.json"), {
        "generator": f"tokenizers {tokenizers.__version__}",
        "vocab_size": tok.get_vocab_size(with_added_tokens=True),
        "eod": tok.token_to_id(eod_token),
        "cases": cases,
    })


def train_sentencepiece(name, model_type, byte_fallback, normalization, vocab_size):
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    text_file = os.path.join(folder, "train.txt")
    with open(text_file, "w", encoding="utf-8") as f:
        for part in training_text():
            f.write(part.replace("\r", "") + "\n")
    spm.SentencePieceTrainer.train(
        input=text_file, model_prefix=os.path.join(folder, "tokenizer"), model_type=model_type,
        vocab_size=vocab_size, byte_fallback=byte_fallback, character_coverage=0.9995,
        normalization_rule_name=normalization, num_threads=1, minloglevel=2,
        # Llama 2 keeps whitespace as it is (identity rules only strip nothing then).
        remove_extra_whitespaces=normalization != "identity")
    os.remove(text_file)
    os.remove(os.path.join(folder, "tokenizer.vocab"))
    return os.path.join(folder, "tokenizer.model")


class MegatronSentencePiece:
    """Megatron's _SentencePieceTokenizer: the model's pieces, then <CLS> <SEP> <EOD> <MASK>,
    pad, bos, eos and <extra_id_i> added when missing; special strings in text are
    matched first (earliest occurrence, the first added on ties)."""

    def __init__(self, path, vocab_extra_ids):
        self.sp = spm.SentencePieceProcessor(model_file=path)
        self.vocab = {self.sp.id_to_piece(i): i for i in range(len(self.sp))}
        self.special = {}

        def add(t):
            if t not in self.vocab:
                self.vocab[t] = len(self.vocab)
            self.special[t] = self.vocab[t]

        for t in ["<CLS>", "<SEP>", "<EOD>", "<MASK>"]:
            add(t)
        for getter, fallback in [(self.sp.pad_id, "<PAD>"), (self.sp.bos_id, "<BOS>"),
                                 (self.sp.eos_id, "<EOS>")]:
            i = getter()
            add(self.sp.id_to_piece(i) if 0 <= i < len(self.sp) else fallback)
        for i in range(vocab_extra_ids):
            add(f"<extra_id_{i}>")
        self.eod = self.vocab["<EOD>"]

    def tokenize(self, text):
        ids, idx = [], 0
        while True:
            found = {t: text.find(t, idx) for t in self.special if text.find(t, idx) >= 0}
            if not found:
                break
            token = min(found, key=found.get)
            ids += self.sp.encode_as_ids(text[idx:found[token]])
            ids.append(self.special[token])
            idx = found[token] + len(token)
        return ids + self.sp.encode_as_ids(text[idx:])


def mistral_sentencepiece_model(name):
    """Mistral 7B v0.1's tokenizer.model, as the `mistral-common` package ships it
    (Apache-2.0); a real Llama-style SentencePiece BPE model with byte fallback."""
    import mistral_common
    source = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tokenizer.model.v1")
    folder = os.path.join(OUT, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "tokenizer.model")
    shutil.copyfile(source, path)
    return path


def sentencepiece_fixture(name, path):
    sp = spm.SentencePieceProcessor(model_file=path)
    megatron = MegatronSentencePiece(path, vocab_extra_ids=0)
    megatron_extra = MegatronSentencePiece(path, vocab_extra_ids=3)
    cases = []
    for text in CORPUS:
        ids = sp.encode_as_ids(text)
        cases.append({"text": text, "ids": ids, "decoded": sp.decode_ids(ids),
                      "megatron_ids": megatron.tokenize(text),
                      "megatron_extra_ids": megatron_extra.tokenize(text)})
    write_json(os.path.join(OUT, name, "expected.json"), {
        "generator": f"sentencepiece {spm.__version__}",
        "pieces": len(sp), "bos": sp.bos_id(), "eos": sp.eos_id(),
        "megatron_vocab_size": len(megatron.vocab), "megatron_eod": megatron.eod,
        "megatron_extra_vocab_size": len(megatron_extra.vocab),
        "cases": cases,
    })


def write_rank_file(source_tok):
    """A rank file (Megatron's JSON list) made from a trained byte-level BPE: the 256
    bytes, then each merge result in merge order."""
    folder = os.path.join(OUT, "tiktoken")
    os.makedirs(folder, exist_ok=True)
    spec = json.loads(source_tok.to_str())
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    # GPT-2's byte -> stand-in character map, inverted.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    stand_in, n = {}, 0
    for b in range(256):
        if b in printable:
            stand_in[chr(b)] = b
        else:
            stand_in[chr(256 + n)] = b
            n += 1
    assert set(stand_in) == set(alphabet)
    ranks = [bytes([b]) for b in range(256)]
    seen = set(ranks)
    for merge in spec["model"]["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        token = bytes(stand_in[c] for c in left + right)
        if token not in seen:
            seen.add(token)
            ranks.append(token)
    write_json(os.path.join(folder, "ranks.json"),
               [{"rank": i, "token_bytes": base64.b64encode(t).decode("ascii"),
                 "token_str": t.decode("utf-8", errors="replace")} for i, t in enumerate(ranks)])
    return len(ranks)


def tiktoken_fixture(pattern_name, num_special_tokens, vocab_size):
    with open(os.path.join(OUT, "tiktoken", "ranks.json"), encoding="utf-8") as f:
        ranks = [base64.b64decode(x["token_bytes"]) for x in json.load(f)]
    pattern = TIKTOKEN_V1 if pattern_name == "v1" else TIKTOKEN_V2
    # Megatron's CustomTikTokenizer: specials first, the ranks shifted after them and
    # cut to vocab_size - num_special_tokens.
    specials = ["<unk>", "<s>", "</s>"]
    specials += [f"<SPECIAL_{i}>" for i in range(len(specials), num_special_tokens)]
    inner = ranks[:vocab_size - num_special_tokens]
    assert len(inner) == vocab_size - num_special_tokens, "Megatron needs that many ranks"
    enc = tiktoken.Encoding(name="ranks", pat_str=pattern,
                            mergeable_ranks={t: i + num_special_tokens for i, t in enumerate(inner)},
                            special_tokens={t: i for i, t in enumerate(specials)})
    cases = []
    for text in CORPUS:
        ids = enc.encode_ordinary(text)
        half = ids[:len(ids) // 2]
        cases.append({"text": text, "ids": ids,
                      "decoded": enc.decode_bytes(ids).decode("utf-8", errors="replace"),
                      "half_ids": half,
                      "half_decoded": enc.decode_bytes(half).decode("utf-8", errors="replace")})
    write_json(os.path.join(OUT, "tiktoken", f"expected_{pattern_name}.json"), {
        "generator": f"tiktoken {tiktoken.__version__}",
        "pattern": pattern_name, "num_special_tokens": num_special_tokens,
        "vocab_size": vocab_size, "eod": 2, "cases": cases,
    })


def main():
    os.makedirs(OUT, exist_ok=True)
    gpt2 = byte_level_bpe(SPECIALS_GPT2)
    hf_fixture("hf_gpt2", gpt2, "<|endoftext|>")
    hf_fixture("hf_neox_prefix_space", byte_level_bpe(SPECIALS_GPT2, add_prefix_space=True),
               "<|endoftext|>")
    hf_fixture("hf_llama3", byte_level_bpe(SPECIALS_LLAMA3, split_pattern=LLAMA3_PATTERN,
                                           bos="<|begin_of_text|>", ignore_merges=True),
               "<|end_of_text|>")
    hf_fixture("hf_qwen2", byte_level_bpe(SPECIALS_QWEN2, split_pattern=QWEN2_PATTERN, nfc=True),
               "<|endoftext|>")
    hf_fixture("hf_llama2_spm_bpe", sentencepiece_style_bpe(metaspace=False), "</s>")
    hf_fixture("hf_metaspace_bpe", sentencepiece_style_bpe(metaspace=True), "</s>")
    hf_fixture("hf_metaspace_split_bpe",
               sentencepiece_style_bpe(metaspace=True, prepend_scheme="always", split=True), "</s>")
    hf_fixture("hf_other_components", other_components_bpe(), "</s>")
    # T5 style (NFKC rules in the model) and Llama 2 style (no normalisation, byte fallback).
    sentencepiece_fixture("spm_unigram_nfkc",
                          train_sentencepiece("spm_unigram_nfkc", "unigram", False, "nmt_nfkc", 450))
    sentencepiece_fixture("spm_bpe_byte_fallback",
                          train_sentencepiece("spm_bpe_byte_fallback", "bpe", True, "identity", 800))
    sentencepiece_fixture("spm_mistral_v1", mistral_sentencepiece_model("spm_mistral_v1"))
    ranks = write_rank_file(gpt2)
    # v2 cuts the last 100 ranks (Megatron keeps vocab_size - num_special_tokens); v1 keeps all.
    tiktoken_fixture("v2", num_special_tokens=10, vocab_size=ranks + 10 - 100)
    tiktoken_fixture("v1", num_special_tokens=3, vocab_size=ranks + 3)
    print("wrote", OUT)


if __name__ == "__main__":
    sys.exit(main())
