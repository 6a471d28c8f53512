#!/usr/bin/env bash
# Multi-rank CPU benchmark: the bench_cpu.sh model (4 layers, hidden 256, 4 heads,
# seq 256, vocab 8192) at a fixed global batch of 8 (micro-batch 2) on 1, 2 and 4
# ranks, data- and tensor-parallel, in fp32 and bf16. Prints tokens/s, the gradient-sync
# time (grads-reduce, max across ranks) and the megabytes each rank puts into its
# tensor- and data-parallel groups per iteration (max across ranks; bf16 tensors travel
# as bf16), averaged over the last 6 of 12 iterations; then the distributed optimizer and
# --grad-reduce-in-bf16 on DP 2.
# Ranks share this machine's cores, so this measures the parallel machinery's cost,
# not a speed-up.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
trainer=$(bazel info bazel-bin 2>/dev/null)/trainer/trainer

run() {  # name, extra flags...
  local name="$1"; shift
  local log
  log=$("$trainer" --mock-data --num-layers 4 --hidden-size 256 --num-attention-heads 4 \
    --seq-length 256 --micro-batch-size 2 --global-batch-size 8 --vocab-size 8192 \
    --hidden-dropout 0 --attention-dropout 0 --train-iters 12 --log-interval 6 --lr 1e-4 \
    --eval-iters 0 "$@")
  local last timers messages
  last=$(grep -E '^ *iteration +[0-9]+/' <<<"$log" | tail -n 1)
  timers=$(grep 'time across ranks' <<<"$log" | tail -n 1)
  messages=$(grep 'messages per iteration' <<<"$log" | tail -n 1)
  printf '%-14s %10s ms/it %10s tokens/s   grads-reduce max %8s ms   MB/it tp %7s dp %7s\n' \
    "$name" \
    "$(sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/' <<<"$last")" \
    "$(sed -E 's/.*tokens per second: ([0-9.]+).*/\1/' <<<"$last")" \
    "$(sed -E 's/.*grads-reduce \([0-9.]+, ([0-9.]+)\).*/\1/' <<<"$timers")" \
    "$(sed -E 's/.* tp ([0-9.]+) .*/\1/' <<<"$messages")" \
    "$(sed -E 's/.* dp ([0-9.]+) .*/\1/' <<<"$messages")"
}

echo "bench_parallel: global batch 8 x seq 256 on $(nproc) cores"
run "1 rank"
run "DP 2" --nproc-per-node 2
run "DP 4" --nproc-per-node 4
run "TP 2" --nproc-per-node 2 --tensor-model-parallel-size 2
run "TP 4" --nproc-per-node 4 --tensor-model-parallel-size 4
run "TP2 DP2" --nproc-per-node 4 --tensor-model-parallel-size 2
run "DP 2 bf16" --nproc-per-node 2 --bf16
run "TP 2 bf16" --nproc-per-node 2 --tensor-model-parallel-size 2 --bf16
run "TP2 DP2 bf16" --nproc-per-node 4 --tensor-model-parallel-size 2 --bf16
# The distributed optimizer and the data-parallel gradient type (bytes: reduce-scatter of
# the fp32 or bf16 gradients plus all-gather of the fp32 or bf16 values).
run "DP 2 dist" --nproc-per-node 2 --use-distributed-optimizer
run "DP 2 dist bf16" --nproc-per-node 2 --use-distributed-optimizer --bf16
run "DP 2 bf16-red" --nproc-per-node 2 --grad-reduce-in-bf16
run "DP 2 dist bf16 ovl" --nproc-per-node 2 --use-distributed-optimizer --bf16 \
  --grad-reduce-in-bf16 --overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 500000
