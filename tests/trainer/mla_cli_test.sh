#!/usr/bin/env bash
# Multi-latent attention through the trainer binary, with Megatron's flags: the tiny
# model trains; --dry-run counts DeepSeek-V2's parameters (written out here from the
# definition); a checkpoint resumes onto the unbroken run's curve and loads under tensor
# parallelism 2; broken combinations exit 2 naming the flag.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1

mla=(--position-embedding-type rope --normalization RMSNorm --qk-layernorm
  --multi-latent-attention --q-lora-rank 32 --kv-lora-rank 24 --qk-head-dim 16
  --qk-pos-emb-head-dim 8 --v-head-dim 24)
train() { "$trainer" --config "$config" --lr-warmup-iters 0 --log-interval 1 "${mla[@]}" "$@"; }
# The lm loss of iterations FROM..TO of a log.
losses() { awk -v from="$2" -v to="$3" '/^ iteration / { split($2, it, "/");
  if (it[1] + 0 >= from && it[1] + 0 <= to) { sub(/.*lm loss: /, ""); sub(/ .*/, ""); print } }' "$1"; }

# gpt-tiny: hidden 128, 4 heads, MLP 512 with biases, 512 tied vocabulary rows, 2 layers.
# Per layer: input norm, W_dq, its norm, W_uq (4 heads of 16 + 8), W_dkv (24 + 8), its
# norm, W_ukv (4 heads of 16 + 24), W_o and its bias, the MLP's norm, fc1, fc2.
h=128
layer=$((h + 32 * h + 32 + 4 * 24 * 32 + (24 + 8) * h + 24 + 4 * (16 + 24) * 24 +
  h * 4 * 24 + h + h + 512 * h + 512 + h * 512 + h))
want=$((2 * layer + 512 * h + h))
train --dry-run >plan.out 2>&1 || fail "--dry-run exited non-zero: $(tail -3 plan.out)"
grep -qE "^ +0 +$want " plan.out || fail "--dry-run does not count $want parameters: $(grep -A2 ' pp  parameters' plan.out)"
# DeepSeek's softmax scale 1 / sqrt(16 + 8).
grep -qF "plan: attention: multi-latent (query latent 32, key/value latent 24, query and key heads 16 + 8 rotated, value heads 24, softmax scale 0.204124)" plan.out ||
  fail "--dry-run does not describe the attention: $(grep 'plan: attention' plan.out)"

train --train-iters 6 --save whole --save-interval 3 >whole.log 2>&1 ||
  fail "the MLA run exited non-zero: $(tail -3 whole.log)"
[[ $(losses whole.log 1 6 | wc -l) -eq 6 ]] || fail "no lm loss for 6 iterations: $(tail -3 whole.log)"
# The same schedule, stopped after iteration 3 (--exit-interval), then resumed.
train --train-iters 6 --exit-interval 3 --save split >split.log 2>&1 ||
  fail "the first half exited non-zero: $(tail -3 split.log)"
train --train-iters 6 --load split --save split >resumed.log 2>&1 ||
  fail "the resume exited non-zero: $(tail -3 resumed.log)"
grep -qF "loaded split/iter_0000003 (iteration 3)" resumed.log || fail "iteration 3 not loaded"
[[ "$(losses resumed.log 4 6)" == "$(losses whole.log 4 6)" ]] ||
  fail "the resumed curve $(losses resumed.log 4 6 | xargs) left the unbroken $(losses whole.log 4 6 | xargs)"
train --train-iters 7 --load whole --nproc-per-node 2 --tensor-model-parallel-size 2 \
  >tp2.log 2>&1 || fail "the checkpoint does not load under TP 2: $(tail -3 tp2.log)"
grep -qF "loaded whole/iter_0000006 (iteration 6)" tp2.log || fail "TP 2 did not load iteration 6"
[[ $(losses tp2.log 7 7 | wc -l) -eq 1 ]] || fail "TP 2 trained no iteration 7"

# expect_refusal NAME "<substring>" -- args: exit 2, the substring in stderr, no training.
expect_refusal() {
  local name="$1" want="$2"; shift 3
  train --train-iters 2 "$@" >"$name.out" 2>"$name.err"
  local code=$?
  [[ $code -eq 2 ]] || fail "$name: exited $code, want 2: $(tail -3 "$name.err")"
  grep -qF -- "$want" "$name.err" || fail "$name: stderr lacks '$want': $(cat "$name.err")"
  grep -q '^ iteration ' "$name.out" && fail "$name: trained"
}
expect_refusal learned "--multi-latent-attention needs --position-embedding-type rope or yarn" \
  -- --position-embedding-type learned_absolute
expect_refusal odd "--qk-pos-emb-head-dim 7 must be even" -- --qk-pos-emb-head-dim 7
expect_refusal gpu "--multi-latent-attention with --device cuda" -- --device cuda
expect_refusal other_model "holds a different model: --kv-lora-rank 16 (checkpoint: 24)" \
  -- --load whole --kv-lora-rank 16
finish
