#!/usr/bin/env bash
# CPU throughput benchmark for a fixed small GPT: 4 layers, hidden 256, 4 heads,
# seq 256, micro-batch 8, vocab 8192, mock data. Prints ms/iteration and tokens/s,
# averaged over the last 6 of 12 iterations (the first ones warm caches and pages).
# tools/bench_cpu_vs_pytorch.sh runs the same model in PyTorch in the same call.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
log=$(bazel-bin/trainer/trainer --mock-data --num-layers 4 --hidden-size 256 \
  --num-attention-heads 4 --seq-length 256 --micro-batch-size 8 --num-micro-batches 1 \
  --vocab-size 8192 --hidden-dropout 0 --attention-dropout 0 --train-iters 12 \
  --log-interval 6 --lr 1e-4 --eval-iters 0)
last=$(grep -E '^ *iteration +[0-9]+/' <<<"$log" | tail -n 1)
ms=$(sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*/\1/' <<<"$last")
tps=$(sed -E 's/.*tokens per second: ([0-9.]+).*/\1/' <<<"$last")
tflops=$(sed -E 's/.*TFLOP\/s\/GPU\): ([0-9.]+).*/\1/' <<<"$last")
echo "bench_cpu: 4 layers, hidden 256, 4 heads, seq 256, micro-batch 8, vocab 8192 on $(nproc) cores"
echo "bench_cpu: ${ms} ms/iteration, ${tps} tokens/s, ${tflops} TFLOP/s"
