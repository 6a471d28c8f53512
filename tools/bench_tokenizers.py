#!/usr/bin/env python3
"""The reference libraries' side of tools/bench_tokenizers.sh.

    bench_tokenizers.py corpus WORK_DIR    writes WORK_DIR/corpus.jsonl and trains
                                           WORK_DIR/hf_llama3/tokenizer.json
    bench_tokenizers.py ref KIND MODEL THREADS JSONL [tiktoken options]
                                           prints "<tokens> <seconds>" for one library
    bench_tokenizers.py compare KIND MODEL PREFIX JSONL [tiktoken options]
                                           compares every document of PREFIX_text_document
                                           (preprocess's output) with the library's ids

Only the encoding is timed (the texts are read before the clock starts), with
the library's own batch API and thread count: Hugging Face `tokenizers`
(encode_batch, RAYON_NUM_THREADS), `sentencepiece` (encode(num_threads=)) and
`tiktoken` (encode_ordinary_batch(num_threads=)).
"""

import base64
import glob
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.dont_write_bytecode = True  # importing gen_tokenizer_refs must leave no __pycache__ in tools/


def make_corpus(work):
    import gen_tokenizer_refs as refs
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    import tokenizers

    # Local text in many forms: this repository's docs and sources, and the
    # multilingual and hard test texts, repeated to about 12 MB.
    docs = []
    for pattern in ["*.md", "docs/*.md", "*/*.cc", "*/*.h", "*/*/*.cc", "tools/*.py"]:
        for path in sorted(glob.glob(os.path.join(REPO, pattern))):
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
            # Documents of a few KB, as web text is.
            docs += [text[i:i + 4000] for i in range(0, len(text), 4000)]
    docs += refs.MULTILINGUAL * 50 + [t for t in refs.CORPUS if t] * 20
    size = sum(len(d.encode()) for d in docs)
    repeats = max(1, 12_000_000 // size)
    with open(os.path.join(work, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for r in range(repeats):
            for d in docs:
                f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")

    # A Llama 3 style byte-level BPE of a realistic size (32k) trained on it.
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(tokenizers.Regex(refs.LLAMA3_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=32000, special_tokens=refs.SPECIALS_LLAMA3,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(docs, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A",
        special_tokens=[("<|begin_of_text|>", tok.token_to_id("<|begin_of_text|>"))])
    os.makedirs(os.path.join(work, "hf_llama3"), exist_ok=True)
    tok.save(os.path.join(work, "hf_llama3", "tokenizer.json"))


def encoder(kind, model, threads, extra):
    """A function from a list of texts to their lists of ids, as the library encodes."""
    if kind == "hf":
        os.environ["RAYON_NUM_THREADS"] = str(threads)
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(model)
        return lambda texts: [e.ids for e in tok.encode_batch(texts)]
    if kind == "spm":
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_file=model)
        return lambda texts: sp.encode(texts, num_threads=threads)
    import tiktoken
    import gen_tokenizer_refs as refs
    pattern, num_special, vocab_size = extra[0], int(extra[1]), int(extra[2])
    with open(model, encoding="utf-8") as f:
        spec = json.load(f)
    entries = spec["vocab"] if isinstance(spec, dict) else spec
    ranks = {base64.b64decode(e["token_bytes"]): e["rank"] + num_special
             for e in entries[:vocab_size - num_special]}
    specials = ["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{i}>" for i in range(3, num_special)]
    enc = tiktoken.Encoding(name="bench",
                            pat_str=refs.TIKTOKEN_V1 if pattern == "v1" else refs.TIKTOKEN_V2,
                            mergeable_ranks=ranks,
                            special_tokens={t: i for i, t in enumerate(specials)})
    return lambda texts: enc.encode_ordinary_batch(texts, num_threads=threads)


def read_texts(jsonl):
    with open(jsonl, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def reference(kind, model, threads, jsonl, extra):
    texts = read_texts(jsonl)
    encode = encoder(kind, model, threads, extra)
    start = time.perf_counter()
    tokens = sum(len(ids) for ids in encode(texts))
    print(tokens, time.perf_counter() - start)


def compare(kind, model, prefix, jsonl, extra):
    """Megatron's .idx: magic, version, dtype code, sequence and document counts, then
    the int32 sizes and int64 byte offsets of the sequences (one per document here)."""
    import numpy as np
    idx = open(prefix + ".idx", "rb").read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "not a Megatron .idx"
    code = idx[17]
    n = int.from_bytes(idx[18:26], "little")
    sizes = np.frombuffer(idx, np.int32, n, 34)
    offsets = np.frombuffer(idx, np.int64, n, 34 + 4 * n)
    dtype = {1: np.uint8, 4: np.int32, 8: np.uint16}[code]
    data = np.fromfile(prefix + ".bin", dtype)
    texts = read_texts(jsonl)
    want = encoder(kind, model, 2, extra)(texts)
    assert n == len(texts), f"{n} sequences for {len(texts)} documents"
    width = np.dtype(dtype).itemsize
    bad = [i for i in range(n)
           if data[offsets[i] // width: offsets[i] // width + sizes[i]].tolist() != list(want[i])]
    print(f"{len(texts)} documents, {len(bad)} with other ids than the library's"
          + (f" (first: {bad[0]})" if bad else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    if sys.argv[1] == "corpus":
        make_corpus(sys.argv[2])
    elif sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6:])
    else:
        reference(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6:])
