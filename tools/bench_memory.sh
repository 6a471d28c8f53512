#!/usr/bin/env bash
# What each pipeline schedule and recompute setting costs in memory and time, for one
# fixed config: 8 layers, hidden 256, 4 heads, seq 128, micro-batch 2, M=8, P=4 ranks.
# Prints ms/iteration and the first stage's peak activation memory (the memory report
# of rank 0), with the model's prediction from --dry-run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
trainer=$(bazel info bazel-bin 2>/dev/null)/trainer/trainer
common=(--mock-data --vocab-size 4096 --num-layers 8 --hidden-size 256 --num-attention-heads 4
        --seq-length 128 --micro-batch-size 2 --num-micro-batches 8 --nproc-per-node 4
        --pipeline-model-parallel-size 4 --hidden-dropout 0 --attention-dropout 0 --lr 1e-4
        --lr-warmup-iters 0 --eval-iters 0)

printf '%-40s %12s %22s %22s\n' setting ms/iteration "rank 0 activations MiB" "predicted MiB"
run() {  # description, flags...
  local what="$1"; shift
  local log plan ms act predicted
  log=$("$trainer" "${common[@]}" --train-iters 6 --log-interval 3 "$@")
  plan=$("$trainer" "${common[@]}" --train-iters 6 --dry-run "$@")
  ms=$(grep -E '^ *iteration +[0-9]+/' <<<"$log" | tail -n 1 | sed -E 's/.*per iteration \(ms\): ([0-9.]+).*/\1/')
  act=$(grep '^\[rank 0\]' <<<"$log" | sed -E 's/.*max activations: ([0-9.]+).*/\1/')
  predicted=$(awk '$1 == "0" && NF == 15 { print $12 }' <<<"$plan")
  printf '%-40s %12s %22s %22s\n' "$what" "$ms" "$act" "$predicted"
}
run "1f1b"
run "gpipe" --pipeline-schedule gpipe
run "zb-h1" --pipeline-schedule zb-h1
run "interleaved-1f1b V=2" --num-virtual-stages-per-pipeline-rank 2
run "1f1b + selective (core_attn)" --recompute-activations
run "1f1b + selective (all modules)" --recompute-granularity selective --recompute-modules core_attn mlp layernorm
run "1f1b + full uniform 1" --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
run "gpipe + full uniform 1" --pipeline-schedule gpipe --recompute-granularity full --recompute-method uniform --recompute-num-layers 1
