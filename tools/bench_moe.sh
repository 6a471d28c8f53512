#!/usr/bin/env bash
# CPU throughput of a mixture of experts against the dense model of the same active
# parameters: 4 layers, hidden 256, 4 heads, seq 256, micro-batch 8, vocab 8192, SwiGLU,
# no biases, mock data. The MoE model has 8 experts of width 512 per layer, top-2 (1024
# active MLP width per token, 4.5x the dense model's parameters); the dense one an MLP of
# width 1024. Each runs 12 iterations, three times alternately; the figures are each
# model's median of the last 6 iterations' averages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
common=(--mock-data --num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256
  --micro-batch-size 8 --num-micro-batches 1 --vocab-size 8192 --hidden-dropout 0
  --attention-dropout 0 --swiglu --disable-bias-linear --train-iters 12 --log-interval 6
  --lr 1e-4 --eval-iters 0)
dense=(--ffn-hidden-size 1024)
moe=(--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 512 --moe-aux-loss-coeff 1e-2)

# Prints "ms tokens/s TFLOP/s ep-MB" of the last log interval (ep-MB: what the all-to-all
# put into the expert-parallel group per iteration, max over ranks).
run() {
  local log ep
  log=$(bazel-bin/trainer/trainer "${common[@]}" "$@")
  ep=$(grep 'messages per iteration' <<<"$log" | tail -n 1 | sed -E 's/.* ep ([0-9.]+) .*/\1/')
  echo "$(grep -E '^ *iteration +[0-9]+/' <<<"$log" | tail -n 1 |
    sed -E 's/.*elapsed time per iteration \(ms\): ([0-9.]+).*TFLOP\/s\/GPU\): ([0-9.]+).*tokens per second: ([0-9.]+).*/\1 \3 \2/')" \
    "${ep:-0}"
}
median() { sort -n | sed -n 2p; }

# `tools/bench_moe.sh ep`: the MoE model on 2 ranks, data parallel (every rank holds all 8
# experts) against expert parallel (4 each, tokens crossing by all-to-all): the same FLOPs
# per rank, so the difference is the exchange's cost.
# `tools/bench_moe.sh etp`: the MoE model on TP 2 (SP), its experts split over both TP
# ranks (the default expert TP) against whole experts, 4 per rank, with EP 2 over the TP
# pair (--expert-tensor-parallel-size 1): the same FLOPs per rank, but each rank runs half
# of the rows through wider GEMMs and exchanges them by the all-to-all.
if [[ "${1:-}" == ep ]]; then
  names=(dp2 ep2)
  first=("${moe[@]}" --nproc-per-node 2)
  second=("${moe[@]}" --nproc-per-node 2 --expert-model-parallel-size 2)
elif [[ "${1:-}" == etp ]]; then
  names=(tp2_etp2 tp2_etp1_ep2)
  first=("${moe[@]}" --nproc-per-node 2 --tensor-model-parallel-size 2 --sequence-parallel)
  second=("${first[@]}" --expert-model-parallel-size 2 --expert-tensor-parallel-size 1)
else
  names=(dense moe)
  first=("${dense[@]}")
  second=("${moe[@]}")
fi

first_runs=() second_runs=()
for _ in 1 2 3; do
  first_runs+=("$(run "${first[@]}")")
  second_runs+=("$(run "${second[@]}")")
done
echo "bench_moe: 4 layers, hidden 256, seq 256, micro-batch 8, vocab 8192 on $(nproc) cores"
for i in 0 1; do
  if [[ $i == 0 ]]; then runs=("${first_runs[@]}"); else runs=("${second_runs[@]}"); fi
  ms=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f1 | median)
  tps=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f2 | median)
  tflops=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f3 | median)
  ep_mb=$(printf '%s\n' "${runs[@]}" | cut -d' ' -f4 | median)
  echo "bench_moe: ${names[$i]}: ${ms} ms/iteration, ${tps} tokens/s, ${tflops} TFLOP/s," \
    "all-to-all ${ep_mb} MB/iteration"
done
