#!/usr/bin/env bash
# Tokenizer throughput: Conveyor's preprocess (tokens/s on its done: line: JSON
# parsing, tokenizing and writing .bin/.idx) against the reference library alone
# (encoding only, its batch API), on the same ~10 MB JSON-lines corpus of local
# text with the same number of threads. Prints a markdown table for the README;
# stops if any document's ids differ from the library's.
#
#   tools/bench_tokenizers.sh [THREADS...]     (default: 1 and nproc)
#
# Tokenizers: a 32k Llama 3 style tokenizer.json trained here on the corpus
# (HuggingFaceTokenizer vs `tokenizers`), Mistral 7B v0.1's tokenizer.model
# (GPTSentencePieceTokenizer vs `sentencepiece`) and Mistral's Tekken rank file,
# 131072 ids (TikTokenizer --tiktoken-pattern v2 vs `tiktoken`); the last two as
# the PyPI package mistral-common ships them.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=("$@")
((${#threads[@]})) || threads=(1 "$(nproc)")
python3 -m pip install --quiet --disable-pip-version-check tokenizers sentencepiece tiktoken \
  mistral-common >&2
bazel build //data:preprocess >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 tools/bench_tokenizers.py corpus "$work"
mistral=$(python3 -c 'import mistral_common, os; print(os.path.join(os.path.dirname(mistral_common.__file__), "data"))')
corpus=$work/corpus.jsonl
echo "corpus: $(du -m "$corpus" | cut -f1) MB, $(wc -l <"$corpus") documents, $(nproc) cores" >&2

# name | preprocess flags | reference kind | model | reference extra arguments
runs=(
  "HuggingFaceTokenizer (Llama 3 style, 32k)|--tokenizer-type HuggingFaceTokenizer --tokenizer-model $work/hf_llama3|hf|$work/hf_llama3/tokenizer.json|"
  "GPTSentencePieceTokenizer (Mistral v0.1, 32k)|--tokenizer-type GPTSentencePieceTokenizer --tokenizer-model $mistral/tokenizer.model.v1|spm|$mistral/tokenizer.model.v1|"
  "TikTokenizer (Tekken, 131k, v2)|--tokenizer-type TikTokenizer --tokenizer-model $mistral/tekken_240718.json --tiktoken-pattern v2 --tiktoken-num-special-tokens 1000 --vocab-size 131072|tiktoken|$mistral/tekken_240718.json|v2 1000 131072"
)
echo "| tokenizer | threads | Conveyor preprocess tokens/s | reference | reference tokens/s | tokens (Conveyor / reference) |"
echo "|---|---|---|---|---|---|"
for run in "${runs[@]}"; do
  IFS='|' read -r name flags kind model extra <<<"$run"
  for n in "${threads[@]}"; do
    # shellcheck disable=SC2086
    done_line=$(bazel-bin/data/preprocess --input "$corpus" --output-prefix "$work/out" \
      --workers "$n" --log-interval 1000000 $flags | grep -A1 '^done:')
    ours=$(sed -nE 's/.* ([0-9]+) tokens\/s.*/\1/p' <<<"$done_line")
    our_tokens=$(sed -nE 's/^done: [0-9]+ documents, ([0-9]+) tokens.*/\1/p' <<<"$done_line")
    # shellcheck disable=SC2086
    read -r ref_tokens ref_seconds < <(python3 tools/bench_tokenizers.py ref "$kind" "$model" "$n" "$corpus" $extra)
    ref=$(python3 -c "print(round($ref_tokens / $ref_seconds))")
    if [[ "$our_tokens" != "$ref_tokens" ]]; then
      echo "bench_tokenizers: $name: $our_tokens tokens here, $ref_tokens from $kind: not the same ids" >&2
      exit 1
    fi
    if [[ "$n" == "${threads[0]}" ]]; then
      # Once per tokenizer: every document's ids against the library's (exits 1 if any differs).
      # shellcheck disable=SC2086
      python3 tools/bench_tokenizers.py compare "$kind" "$model" "$work/out_text_document" \
        "$corpus" $extra | sed "s/^/compare $name: /" >&2
    fi
    library=$(case $kind in hf) echo tokenizers ;; spm) echo sentencepiece ;; *) echo tiktoken ;; esac)
    echo "| $name | $n | $ours | $library | $ref | $our_tokens / $ref_tokens |"
  done
done
