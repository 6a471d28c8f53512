#!/usr/bin/env bash
# Multi-token prediction end to end (--mtp-num-layers, --mtp-loss-scaling-factor): the
# log line carries Megatron's "mtp_<k> loss" after the lm loss, as do the --metrics-file
# and TensorBoard (read back with its own reader); a run saved at iteration 3 and resumed, on one rank and under two
# pipeline stages (the depths and their copy of the embedding on the last), continues the
# run's losses (from its checkpoint of iteration 3); the depths' loss weight changes the run; the combinations
# Conveyor does not implement stop with exit 2 naming the flags.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1

flags=(--config "$config" --position-embedding-type rope --normalization RMSNorm --swiglu
  --untie-embeddings-and-output-weights --mtp-num-layers 2 --mtp-loss-scaling-factor 0.3
  --train-iters 6 --lr-warmup-iters 1 --log-interval 1 --eval-iters 0 --device cpu
  --global-batch-size 8 --num-micro-batches 0 --micro-batch-size 2 --seq-length 16)

# run NAME extra-flags...: trains, leaves stdout in NAME.out and the metrics in NAME.jsonl.
run() {
  local name="$1"; shift
  rm -f "$name.jsonl"
  "$trainer" "${flags[@]}" "$@" --metrics-file "$name.jsonl" >"$name.out" 2>"$name.err" ||
    fail "$name exited non-zero: $(tail -5 "$name.err")"
}

# field FILE KEY: the key's value on each line.
field() { sed -nE "s/.*\"$2\": ([0-9.eE+-]+).*/\1/p" "$1"; }

# same WHAT A B TOL: the two columns agree within TOL relative, line by line.
same() {
  paste <(echo "$2") <(echo "$3") |
    awk -v what="$1" -v tol="$4" 'function abs(x) { return x < 0 ? -x : x }
      { n++; if (abs($1 - $2) > tol * abs($2)) { print "FAIL: " what ": " $1 " vs " $2; bad = 1 } }
      END { if (n == 0) { print "FAIL: " what ": no values"; bad = 1 } exit bad }' ||
    failures=$((failures + 1))
}

run whole --save ckpt --save-interval 3 --tensorboard-dir tb
grep -qE 'lm loss: [0-9.E+-]+ \| mtp_1 loss: [0-9.E+-]+ \| mtp_2 loss: [0-9.E+-]+ \| grad norm' \
  whole.out || fail "the log line lacks mtp_1 and mtp_2 after lm loss: $(grep -m1 ' iteration ' whole.out)"
[[ $(field whole.jsonl mtp_2_loss | wc -l) -eq 6 ]] || fail "metrics: $(field whole.jsonl mtp_2_loss | wc -l) mtp_2_loss values, want 6"

# TensorBoard's own reader finds Megatron's "mtp_<k> loss" scalars with the metrics' values.
python3 - tb whole.jsonl <<'PY' || fail "the TensorBoard mtp scalars differ from the metrics (above)"
import json, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1]); acc.Reload()
lines = [json.loads(l) for l in open(sys.argv[2])]
bad = 0
for k in (1, 2):
    got = {e.step: e.value for e in acc.Scalars(f"mtp_{k} loss")}
    want = {l["iteration"]: l[f"mtp_{k}_loss"] for l in lines}
    for step, value in want.items():
        if step not in got or abs(got[step] - value) > 1e-6 * abs(value):
            print(f"FAIL: mtp_{k} loss at {step}: {got.get(step)} vs {value}"); bad = 1
sys.exit(bad)
PY

run resumed --load ckpt --ckpt-step 3
run resumed_pp2 --load ckpt --ckpt-step 3 --nproc-per-node 2 --pipeline-model-parallel-size 2
for key in lm_loss mtp_1_loss mtp_2_loss; do
  same "resumed $key" "$(field resumed.jsonl $key)" "$(field whole.jsonl $key | tail -3)" 0
  same "resumed under PP 2 $key" "$(field resumed_pp2.jsonl $key)" \
    "$(field whole.jsonl $key | tail -3)" 1e-5
done

# The depths' loss enters the gradient: another weight gives another run.
run lambda --mtp-loss-scaling-factor 1
[[ "$(field lambda.jsonl lm_loss | tail -1)" != "$(field whole.jsonl lm_loss | tail -1)" ]] ||
  fail "--mtp-loss-scaling-factor 1 trained the same model as 0.3"

# expect_refusal NAME "<substring>" -- trainer args: exit 2, the substring in stderr.
expect_refusal() {
  local name="$1" want="$2"; shift 3
  "$trainer" "${flags[@]}" "$@" >"$name.out" 2>"$name.err"
  local code=$?
  [[ $code -eq 2 ]] || fail "$name: exited $code, want 2: $(tail -3 "$name.err")"
  grep -qF -- "$want" "$name.err" || fail "$name: stderr lacks '$want': $(tail -3 "$name.err")"
}
expect_refusal learned "--mtp-num-layers with --position-embedding-type learned_absolute" -- \
  --position-embedding-type learned_absolute
expect_refusal negative "--mtp-num-layers -1 is negative" -- --mtp-num-layers -1
expect_refusal repeated "--mtp-use-repeated-layer" -- --mtp-use-repeated-layer
expect_refusal gpu "--mtp-num-layers 2 with --device cuda" -- --device cuda

finish
