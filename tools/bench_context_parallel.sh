#!/usr/bin/env bash
# The longest sequence that fits a fixed memory budget per rank under context
# parallelism CP 1, 2 and 4, predicted by the memory model (--dry-run) and then trained
# for a few iterations: measured peak memory of rank 0 and time per iteration.
# Model: 4 layers, hidden 128, 4 heads, vocabulary 1024, micro-batch 1, fp32, CPU.
# Usage: tools/bench_context_parallel.sh [budget MiB, default 64]
set -euo pipefail
cd "$(dirname "$0")/.."
budget=${1:-64}
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
trainer=$(bazel info bazel-bin 2>/dev/null)/trainer/trainer
common=(--mock-data --vocab-size 1024 --num-layers 4 --hidden-size 128 --num-attention-heads 4
        --micro-batch-size 1 --global-batch-size 1 --hidden-dropout 0 --attention-dropout 0
        --lr 1e-4 --lr-warmup-iters 0 --eval-iters 0)

# Predicted total MiB of rank 0 for `seq` tokens under CP `cp`.
predicted() {  # cp, seq
  "$trainer" "${common[@]}" --context-parallel-size "$1" --nproc-per-node "$1" \
    --seq-length "$2" --max-position-embeddings "$2" --train-iters 2 --dry-run |
    awk '$1 == "0" && NF == 15 { v = $14; if ($15 == "GiB") v *= 1024; print v }'
}

printf '%-4s %10s %16s %22s %16s\n' CP "seq" "predicted MiB" "measured MiB (rank 0)" "ms/iteration"
for cp in 1 2 4; do
  step=$((2 * cp * 64))  # the sequence splits into 2 CP chunks
  lo=$step hi=$((step * 256))
  while ((hi - lo > step)); do  # the longest multiple of `step` that fits the budget
    mid=$(((lo + hi) / 2 / step * step))
    if awk -v p="$(predicted "$cp" "$mid")" -v b="$budget" 'BEGIN { exit !(p <= b) }'; then
      lo=$mid
    else
      hi=$mid
    fi
  done
  log=$("$trainer" "${common[@]}" --context-parallel-size "$cp" --nproc-per-node "$cp" \
    --seq-length "$lo" --max-position-embeddings "$lo" --train-iters 3 --log-interval 3)
  ms=$(grep -E '^ *iteration +[0-9]+/' <<<"$log" | tail -n 1 |
    sed -E 's/.*per iteration \(ms\): ([0-9.]+).*/\1/')
  measured=$(grep '^\[rank 0\]' <<<"$log" | sed -E 's/.*max total: ([0-9.]+).*/\1/')
  printf '%-4s %10s %16s %22s %16s\n' "$cp" "$lo" "$(predicted "$cp" "$lo")" "$measured" "$ms"
done
