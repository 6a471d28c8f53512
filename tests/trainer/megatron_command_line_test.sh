#!/usr/bin/env bash
# A Megatron-LM user's command line through the binary: the flags that change nothing
# are warned, one line per group with its reason; refused flags are named together, one
# line per feature (exit 2); and --load holding a checkpoint written by Megatron-LM is
# named with the route that exists (--load-hf), by a run and by --dry-run alike.
source "$(dirname "$0")/trainer_test_lib.sh"

# run <want exit> args...: the trainer's exit code, stdout in $tmp/out, stderr in $tmp/err.
run() {
  local want="$1"; shift
  "$trainer" --config "$config" --train-iters 2 --lr-warmup-iters 0 "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$?
  [[ $code -eq $want ]] || fail "'$*' exited $code, want $want: $(cat "$tmp/err")"
}
expect_err() { grep -qF -- "$1" "$tmp/err" || fail "stderr lacks '$1': $(cat "$tmp/err")"; }
expect_out() { grep -qF -- "$1" "$tmp/out" || fail "stdout lacks '$1': $(cat "$tmp/out")"; }

run 0 --dry-run --deterministic-mode --wandb-project p --wandb-exp-name x --logging-level 20
expect_err ": warning: Megatron's --deterministic-mode changes nothing here: Conveyor chooses no non-deterministic algorithm"
expect_err ": warning: Megatron's --wandb-project p, --wandb-exp-name x change nothing here: Conveyor writes no Weights & Biases logs"
expect_err ": warning: Megatron's --logging-level 20 changes nothing here"

run 2 --dsa-indexer-n-heads 64 --dsa-indexer-topk 2048 --mtp-use-repeated-layer --use-rotary-position-embeddings
expect_err "--dsa-indexer-n-heads, --dsa-indexer-topk: DeepSeek sparse attention is not implemented"
expect_err "--mtp-use-repeated-layer: this multi-token prediction variant is not implemented"
grep -q "did you mean" "$tmp/err" && fail "a Megatron flag got a suggestion: $(cat "$tmp/err")"

# Megatron-LM's torch_dist layout (megatron/training/checkpointing.py).
mkdir -p "$tmp/megatron/iter_0000100"
echo 100 >"$tmp/megatron/latest_checkpointed_iteration.txt"
touch "$tmp/megatron/iter_0000100/__0_0.distcp" "$tmp/megatron/iter_0000100/.metadata"
for mode in --dry-run --train-iters=2; do
  run 2 "$mode" --load "$tmp/megatron"
  expect_err "--load $tmp/megatron: $tmp/megatron holds a checkpoint written by Megatron-LM (Megatron-LM's torch_dist layout: iter_0000100 holds __0_0.distcp and .metadata)"
  expect_err "pass that folder to --load-hf"
done

# --dry-run reads a Conveyor checkpoint's manifest as the run would.
run 0 --save "$tmp/ckpt"
run 0 --dry-run --load "$tmp/ckpt"
expect_out "plan: --load $tmp/ckpt: iteration 2 (its manifest and data files open"
run 2 --dry-run --load "$tmp/ckpt" --ckpt-step 9
expect_err "--load $tmp/ckpt: checkpoint of iteration 9 not found"
# --use-checkpoint-args: the model's forced settings come from the checkpoint (the tiny
# config's swiglu is off), and the run resumes it.
run 0 --load "$tmp/ckpt" --train-iters 3 --use-checkpoint-args --swiglu
expect_out "conveyor: --use-checkpoint-args: from the checkpoint "
grep -q -- "--use-checkpoint-args: .*--swiglu false" "$tmp/out" || fail "--swiglu not from the checkpoint"
expect_out "loaded $tmp/ckpt/iter_0000002 (iteration 2)"
run 0 --dry-run --load "$tmp/none"
expect_out "plan: --load $tmp/none does not exist: the run starts from iteration 0"

finish
