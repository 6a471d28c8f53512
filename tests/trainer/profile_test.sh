#!/usr/bin/env bash
# --profile on a TP 2 x PP 2 run: one trace with every rank as a process, its ops,
# communications (bytes, group) and pipeline actions, properly nested per thread.
source "$(dirname "$0")/trainer_test_lib.sh"
check="$3"

# gpt-tiny: micro-batch 4, seq 64, hidden 128; M 2. Iterations 3 and 4 profiled. The
# --dry-run of the same layout prints the rank map the process names must follow.
layout=(--nproc-per-node 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)
"$trainer" --config "$config" "${layout[@]}" --dry-run >"$tmp/dry.txt" 2>&1 ||
  fail "the dry run exited non-zero: $(tail "$tmp/dry.txt")"
"$trainer" --config "$config" "${layout[@]}" --train-iters 5 --lr-warmup-iters 1 --eval-iters 0 \
  --log-interval 5 --profile --profile-step-start 2 --profile-step-end 4 \
  --profile-file "$tmp/profile.json" >"$tmp/run.log" 2>&1 ||
  fail "the profiled run exited non-zero: $(tail "$tmp/run.log")"
python3 "$check" "$tmp/profile.json" "$tmp/dry.txt" 4 64 128 2 3,4 ||
  fail "the trace (above)"
ls "$tmp"/profile.json.rank* >/dev/null 2>&1 && fail "per-rank parts were left behind"

# --profile-ranks 3: one process in the trace.
"$trainer" --config "$config" --nproc-per-node 4 --tensor-model-parallel-size 2 \
  --pipeline-model-parallel-size 2 --train-iters 3 --lr-warmup-iters 1 --eval-iters 0 \
  --log-interval 3 --profile --profile-step-start 1 --profile-step-end 2 --profile-ranks 3 \
  --profile-file "$tmp/one.json" >"$tmp/one.log" 2>&1 ||
  fail "the --profile-ranks run exited non-zero: $(tail "$tmp/one.log")"
pids=$(python3 -c 'import json,sys; print(sorted({e["pid"] for e in json.load(open(sys.argv[1]))["traceEvents"]}))' "$tmp/one.json")
[[ "$pids" == "[3]" ]] || fail "--profile-ranks 3 traced processes $pids"

"$trainer" --config "$config" --profile --profile-step-start 4 --profile-step-end 4 >"$tmp/bad.log" 2>&1
[[ $? -eq 2 ]] && grep -qF -- "--profile-step-end" "$tmp/bad.log" ||
  fail "--profile-step-end 4 = start: $(cat "$tmp/bad.log")"

finish
