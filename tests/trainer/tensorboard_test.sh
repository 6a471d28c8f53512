#!/usr/bin/env bash
# --tensorboard-dir end to end: a pipelined run's events read back with TensorBoard's
# own reader and compared with the same run's --metrics-file and log, and a run killed
# with SIGKILL mid-way whose events stay readable up to the last flush.
source "$(dirname "$0")/trainer_test_lib.sh"
check="$3"

python3 -c 'import tensorboard' 2>/dev/null || {
  echo "FAIL: the Python package 'tensorboard' is missing for $(command -v python3); run" \
    "tools/setup.sh, which installs it"
  exit 1
}

# TP 2 x PP 2 (the bubble tags; the last rank, 3, writes, as in Megatron, not rank 2
# which writes the log), every switch on; the validation at 4 and 8 and the final
# validation and test losses at 10.
WORLD_SIZE_EXPECTED=4
"$trainer" --config "$config" --nproc-per-node 4 --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 \
  --train-iters 10 --log-interval 1 --eval-interval 4 --eval-iters 2 \
  --metrics-file "$tmp/full.jsonl" --tensorboard-dir "$tmp/full" \
  --log-timers-to-tensorboard --log-memory-to-tensorboard --log-world-size-to-tensorboard \
  --log-validation-ppl-to-tensorboard --log-params-norm >"$tmp/full.log" 2>&1 ||
  fail "the full run exited non-zero: $(tail "$tmp/full.log")"
grep -qF "conveyor: rank 3 wrote TensorBoard events to $tmp/full/events.out.tfevents." \
  "$tmp/full.log" || fail "the log does not say that rank 3 wrote the events, and where"
WORLD_SIZE_EXPECTED=$WORLD_SIZE_EXPECTED python3 "$check" full "$tmp/full" "$tmp/full.jsonl" \
  "$tmp/full.log" || fail "the full run's events differ from its metrics (above)"

# params-norm counts every parameter once over TP and PP: one rank training
# the same model (layouts give the same parameters) logs the same norms.
"$trainer" --config "$config" --train-iters 10 --log-interval 10 --eval-iters 0 \
  --tensorboard-dir "$tmp/one-rank" --log-params-norm >"$tmp/one-rank.log" 2>&1 ||
  fail "the one-rank run exited non-zero: $(tail "$tmp/one-rank.log")"
python3 - "$tmp/full" "$tmp/one-rank" <<'PY' || fail "params-norm differs between layouts (above)"
import math, sys
from tensorboard.backend.event_processing import event_accumulator
def norms(logdir):
    acc = event_accumulator.EventAccumulator(logdir); acc.Reload()
    return {e.step: e.value for e in acc.Scalars("params-norm")}
pp2, one = norms(sys.argv[1]), norms(sys.argv[2])
bad = [(s, pp2.get(s), v) for s, v in one.items() if not math.isclose(pp2.get(s, 0), v, rel_tol=1e-5)]
print("params-norm (step, PP 2, one rank) where they differ:", bad) if bad else None
sys.exit(1 if bad or len(one) != 10 else 0)
PY

# --log-num-zeros-in-grad: with an untied output layer, the input embedding rows of
# tokens absent from a step have exactly zero gradient whatever the layout, so one rank
# and TP 2 count the same zeros (and some; an element whose rounding lands on 0 in one
# layout only may add one), in the log line, the metrics and the events.
for layout in one tp2; do
  extra=()
  [[ $layout == tp2 ]] && extra=(--nproc-per-node 2 --tensor-model-parallel-size 2)
  "$trainer" --config "$config" --untie-embeddings-and-output-weights --train-iters 4 --lr-warmup-iters 1 \
    --log-interval 1 --eval-iters 0 --log-num-zeros-in-grad "${extra[@]}" \
    --metrics-file "$tmp/zeros-$layout.jsonl" --tensorboard-dir "$tmp/zeros-$layout" \
    >"$tmp/zeros-$layout.log" 2>&1 || fail "the $layout zeros run exited non-zero"
  grep -o 'num zeros: [0-9.]*' "$tmp/zeros-$layout.log" >"$tmp/zeros-$layout.txt"
done
[[ $(wc -l <"$tmp/zeros-one.txt") == 4 ]] || fail "no 'num zeros' in 4 log lines: $(cat "$tmp/zeros-one.txt")"
grep -q 'num zeros: 0.0' "$tmp/zeros-one.txt" && fail "a step with no zero gradient: $(cat "$tmp/zeros-one.txt")"
paste "$tmp/zeros-one.txt" "$tmp/zeros-tp2.txt" |
  awk '{d = $3 - $6; if (d < 0) d = -d; if (d > 0.001 * $3) bad = 1} END {exit bad}' ||
  fail "zeros differ between one rank and TP 2: $(paste "$tmp/zeros-one.txt" "$tmp/zeros-tp2.txt")"
python3 - "$tmp/zeros-tp2" "$tmp/zeros-tp2.jsonl" <<'PY' || fail "num-zeros events differ from the metrics (above)"
import json, sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1]); acc.Reload()
events = {e.step: e.value for e in acc.Scalars("num-zeros")}
metrics = {r["iteration"]: r["num_zeros"] for r in map(json.loads, open(sys.argv[2])) if "num_zeros" in r}
print("num-zeros events", events, "metrics", metrics) if events != metrics else None
sys.exit(0 if events == metrics and len(events) == 4 else 1)
PY

# --tensorboard-log-interval 3: the per-iteration tags at 3, 6 and 9 only. On PP 2
# alone the last rank writes the log too: the measured bubbles equal the log's.
"$trainer" --config "$config" --nproc-per-node 2 --pipeline-model-parallel-size 2 \
  --train-iters 9 --log-interval 3 --eval-iters 0 \
  --tensorboard-dir "$tmp/every3" --tensorboard-log-interval 3 >"$tmp/every3.log" 2>&1 ||
  fail "the interval run exited non-zero: $(tail "$tmp/every3.log")"
python3 "$check" bubble "$tmp/every3" "$tmp/every3.log" || fail "the bubble tags (above)"
steps=$(python3 - "$tmp/every3" <<'PY'
import sys
from tensorboard.backend.event_processing import event_accumulator
acc = event_accumulator.EventAccumulator(sys.argv[1]); acc.Reload()
print(" ".join(str(e.step) for e in acc.Scalars("lm loss")))
PY
)
[[ "$steps" == "3 6 9" ]] || fail "--tensorboard-log-interval 3 logged lm loss at '$steps'"

# SIGKILL once at least 3 iterations are readable: what was flushed stays readable.
"$trainer" --config "$config" --train-iters 100000 --log-interval 1 --eval-iters 0 \
  --metrics-file "$tmp/killed.jsonl" --tensorboard-dir "$tmp/killed" >"$tmp/killed.log" 2>&1 &
pid=$!
for _ in $(seq 600); do
  n=$(python3 "$check" steps "$tmp/killed" 2>/dev/null || echo 0)
  ((n >= 3)) && break
  sleep 0.2
done
kill -KILL "$pid"
wait "$pid" 2>/dev/null
python3 "$check" killed "$tmp/killed" "$tmp/killed.jsonl" 3 ||
  fail "the killed run's events are not readable up to its last flush (above)"

# A folder that cannot be created: a usage-style message naming the flag.
touch "$tmp/a-file"
"$trainer" --config "$config" --train-iters 10 --tensorboard-dir "$tmp/a-file/tb" >"$tmp/bad.log" 2>&1 &&
  fail "a --tensorboard-dir under a file should fail"
grep -qF -- "--tensorboard-dir $tmp/a-file/tb" "$tmp/bad.log" ||
  fail "the failure does not name --tensorboard-dir: $(cat "$tmp/bad.log")"

"$trainer" --config "$config" --tensorboard-dir "$tmp/x" --tensorboard-log-interval 0 \
  >"$tmp/zero.log" 2>&1
[[ $? -eq 2 ]] || fail "--tensorboard-log-interval 0 should be a usage error"
grep -qF -- "--tensorboard-log-interval 0 must be positive" "$tmp/zero.log" ||
  fail "--tensorboard-log-interval 0: $(cat "$tmp/zero.log")"
"$trainer" --help >"$tmp/help" 2>&1
for flag in --tensorboard-dir --tensorboard-log-interval --tensorboard-queue-size --profile \
  --profile-step-start --profile-ranks --plan-html; do
  grep -qF -- "$flag" "$tmp/help" || fail "--help lacks $flag"
done

finish
