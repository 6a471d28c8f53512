#!/usr/bin/env bash
# Pipeline benchmarks on this machine's CPU ranks:
#  1. rehearsal: every action sleeps its cost (20 ms per unit) with real transfers; the
#     measured makespan against the simulator's, P=4 M=8 for each schedule;
#  2. training: the bubble each pipeline rank measured in real training, beside the
#     formula and the simulator, for several (P, M, V, schedule).
# Ranks share the cores, so the measured bubbles include the machine's contention.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build //trainer:trainer >&2
trainer=$(bazel info bazel-bin 2>/dev/null)/trainer/trainer
common=(--mock-data --vocab-size 512 --hidden-size 64 --num-attention-heads 4 --seq-length 64
        --hidden-dropout 0 --attention-dropout 0 --lr 1e-4 --lr-warmup-iters 0 --eval-iters 0)

echo "== rehearsal (P=4, M=8, 20 ms per cost unit, F=B=W=1)"
for schedule in gpipe 1f1b zb-h1 zb-h2; do
  "$trainer" "${common[@]}" --num-layers 8 --micro-batch-size 1 --num-micro-batches 8 \
    --nproc-per-node 4 --pipeline-model-parallel-size 4 --pipeline-schedule "$schedule" \
    --pipeline-rehearsal-ms 20 --train-iters 5 | grep '^rehearsal:'
done
for schedule in interleaved-1f1b zbv; do
  "$trainer" "${common[@]}" --num-layers 8 --micro-batch-size 1 --num-micro-batches 8 \
    --nproc-per-node 4 --pipeline-model-parallel-size 4 --pipeline-schedule "$schedule" \
    --num-virtual-stages-per-pipeline-rank 2 --pipeline-rehearsal-ms 20 --train-iters 5 |
    grep '^rehearsal:'
done

echo "== training: bubble measured per pipeline rank (last 5 of 10 iterations)"
run() {  # description, flags...
  local what="$1"; shift
  printf '%-34s' "$what"
  "$trainer" "${common[@]}" --micro-batch-size 1 --train-iters 10 --log-interval 5 "$@" |
    grep 'pipeline bubble' | tail -n 1 | sed -E 's/^ *pipeline bubble \(%\): //'
}
run "P=2 M=4 1f1b" --num-layers 4 --num-micro-batches 4 --nproc-per-node 2 --pipeline-model-parallel-size 2
run "P=2 M=8 1f1b" --num-layers 4 --num-micro-batches 8 --nproc-per-node 2 --pipeline-model-parallel-size 2
run "P=2 M=8 gpipe" --num-layers 4 --num-micro-batches 8 --nproc-per-node 2 --pipeline-model-parallel-size 2 --pipeline-schedule gpipe
run "P=2 M=8 zb-h1" --num-layers 4 --num-micro-batches 8 --nproc-per-node 2 --pipeline-model-parallel-size 2 --pipeline-schedule zb-h1
run "P=2 M=8 V=2 interleaved-1f1b" --num-layers 4 --num-micro-batches 8 --nproc-per-node 2 --pipeline-model-parallel-size 2 --num-virtual-stages-per-pipeline-rank 2
run "P=4 M=8 1f1b" --num-layers 8 --num-micro-batches 8 --nproc-per-node 4 --pipeline-model-parallel-size 4
run "P=4 M=16 1f1b" --num-layers 8 --num-micro-batches 16 --nproc-per-node 4 --pipeline-model-parallel-size 4
