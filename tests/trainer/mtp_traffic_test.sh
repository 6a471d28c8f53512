#!/usr/bin/env bash
# --dry-run's traffic per step counts the multi-token prediction depths (each a layer, the
# embedding's and M_k's regions, the output layer and its cross-entropy, on the last
# pipeline stage): under TP 2 with sequence parallelism, TP 2 x PP 2 (the last stage's
# rank is the busiest) and CP 2 with mixture-of-experts depths (their ring blocks and
# routers' logits, their experts' gradients), the plan's tensor-, context- and
# data-parallel MiB equal the run's measured messages per iteration (the log's MB, the
# max across ranks) to the plan's two decimals.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1

flags=(--config "$config" --position-embedding-type rope --normalization RMSNorm --swiglu
  --untie-embeddings-and-output-weights --mtp-num-layers 2 --train-iters 2 --lr-warmup-iters 1
  --log-interval 1 --eval-iters 0 --device cpu --global-batch-size 8 --num-micro-batches 0
  --micro-batch-size 2 --seq-length 16)

# check NAME KINDS -- extra-flags: for each "plan-name:log-name" in KINDS, the plan's
# figure equals the last logged one.
check() {
  local name="$1" kinds="$2"; shift 3
  "$trainer" "${flags[@]}" "$@" --dry-run >"$name.plan" 2>&1 ||
    fail "$name --dry-run exited non-zero: $(tail -3 "$name.plan")"
  "$trainer" "${flags[@]}" "$@" >"$name.out" 2>&1 ||
    fail "$name exited non-zero: $(tail -3 "$name.out")"
  local kind planned measured
  for kind in $kinds; do
    planned=$(sed -nE "s/.*traffic per step.* ${kind%%:*} ([0-9.]+) MiB.*/\1/p" "$name.plan")
    measured=$(grep 'messages per iteration' "$name.out" | tail -1 |
      sed -nE "s/.* ${kind##*:} ([0-9.]+).*/\1/p")
    [[ -n "$planned" && -n "$measured" ]] ||
      { fail "$name: no ${kind%%:*} figure (plan '$planned', log '$measured')"; continue; }
    # The log's MB (10^6 bytes) in the plan's MiB.
    measured=$(awk -v mb="$measured" 'BEGIN { printf "%.2f", mb * 1e6 / 1048576 }')
    [[ "$planned" == "$measured" ]] ||
      fail "$name: ${kind%%:*} planned $planned MiB, measured $measured MiB"
  done
}

check tp2_sp "tensor-parallel:tp" -- --nproc-per-node 2 --tensor-model-parallel-size 2 \
  --sequence-parallel
check tp2_pp2 "tensor-parallel:tp" -- --nproc-per-node 4 --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2
check cp2_moe "context-parallel:cp data-parallel:dp" -- --nproc-per-node 2 \
  --context-parallel-size 2 --num-experts 4 --moe-ffn-hidden-size 32 --disable-bias-linear
finish
