#!/usr/bin/env bash
# Absurd sizes through the binary, under a 4 GiB address-space limit so that a regression
# cannot eat the machine: each is refused with exit 2 and a message naming the flag and
# the limit (they ended in std::bad_alloc, SIGABRT); --dry-run plans a huge global batch
# under pipeline parallelism and a ramp over billions of samples at once; --train-samples
# ends a run within the ramp.
source "$(dirname "$0")/trainer_test_lib.sh"

# run CODE args...: the trainer on the tiny config, bounded in memory and time; fails
# unless it exits CODE (a crash is 134, the timeout 124).
run() {
  local want="$1"; shift
  (ulimit -v 4194304; timeout 120 "$trainer" --config "$config" "$@") >"$tmp/out" 2>"$tmp/err"
  local code=$?
  [[ $code -eq $want ]] || fail "'$*' exited $code, want $want: $(tail -c 400 "$tmp/err")"
}

# expect_refused "<substring of stderr>" args...
expect_refused() {
  local want="$1"; shift
  run 2 "$@"
  grep -qF -- "$want" "$tmp/err" || fail "'$*' stderr lacks '$want': $(tail -c 400 "$tmp/err")"
}

expect_refused "--num-layers 100000000 is more than 16384, the largest Conveyor accepts" \
  --num-layers 100000000 --dry-run
expect_refused "--num-layers 100000000 is more than 16384" --num-layers 100000000
expect_refused "--num-experts 100000000 is more than 16384" \
  --num-experts 100000000 --disable-bias-linear --dry-run
expect_refused "--moe-layer-freq '([1]*1000000000)' repeats 1 entries 1000000000 times" \
  --num-experts 4 --disable-bias-linear --moe-layer-freq '([1]*1000000000)' --dry-run
expect_refused "more entries than --num-layers 2" \
  --num-experts 4 --disable-bias-linear --moe-layer-freq '[0]*3000000000'
expect_refused "--seq-length 2000000000 is more than 16777216" --seq-length 2000000000 --dry-run
# Training lists every micro-batch of a step: 2e8 of them are refused, naming the fix.
expect_refused "M 200000000 micro-batches" \
  --pipeline-model-parallel-size 2 --nproc-per-node 2 --num-micro-batches 0 \
  --global-batch-size 200000000 --micro-batch-size 1

# --dry-run plans the same batch from a prefix of the schedule.
run 0 --pipeline-model-parallel-size 2 --nproc-per-node 2 --num-micro-batches 0 \
  --global-batch-size 200000000 --micro-batch-size 1 --dry-run
grep -qF "plan: schedule 1f1b, P 2, V 1, M 200000000" "$tmp/out" &&
  grep -qF "simulated for the first 1024 micro-batches" "$tmp/out" ||
  fail "the dry-run of a global batch of 2e8 lacks its schedule line: $(grep 'plan: schedule' "$tmp/out")"

# A ramp over 1.9e9 samples (4 -> 8 in one increment): 475000000 steps at 4 consume
# 1.9e9 samples, then (2e9 - 1.9e9) / 8 = 12500000 steps at 8; counted, not walked.
ramp=(--train-iters 0 --lr-warmup-iters 0 --train-samples 2000000000
  --rampup-batch-size 4 4 1900000000)
run 0 "${ramp[@]}" --dry-run
grep -qF "plan: --rampup-batch-size: 475000000 steps ramp the global batch from 4 to 8 over 1900000000 samples, then 12500000 steps at 8" "$tmp/out" ||
  fail "the large ramp's plan line: $(grep 'rampup' "$tmp/out")"

# --train-samples 40 within a ramp of 1000 samples at 4: 10 steps, 40 samples (Megatron's
# update_train_iters gave 251 ramp steps + (40 - 1004) // 8 = 130: the run trained on 520
# samples, and the plan counted -121 steps after the ramp).
short=(--train-iters 0 --lr-warmup-iters 0 --train-samples 40 --rampup-batch-size 4 4 1000
  --log-interval 1 --eval-iters 1)
run 0 "${short[@]}" --dry-run
grep -qF "plan: --rampup-batch-size: --train-samples 40 ends the run within the ramp: 10 steps on 40 samples at a global batch of 4" "$tmp/out" ||
  fail "the short ramp's plan line: $(grep 'rampup' "$tmp/out")"
grep -qE "train_iters \.+ 10$" "$tmp/out" || fail "the dry-run's train_iters: $(grep train_iters "$tmp/out")"
run 0 "${short[@]}"
grep -qF "conveyor: trained 10 iterations" "$tmp/out" ||
  fail "the short ramp trained: $(grep 'trained' "$tmp/out")"
grep -qE "iteration +10/ +10 \| consumed samples: +40 \|" "$tmp/out" ||
  fail "the short ramp's last log line: $(grep 'consumed samples' "$tmp/out" | tail -1)"

finish
