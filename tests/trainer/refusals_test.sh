#!/usr/bin/env bash
# One exit-code rule (base/exit_code.h): input the user must change is refused with exit
# 2 whatever kind it is and whenever it is found (a flag, a config file, a data file, a
# checkpoint folder, an output path), and a failure while running exits 1. Output paths
# and --profile's window are checked before the first step, naming the flag and errno.
source "$(dirname "$0")/trainer_test_lib.sh"

# expect_exit <code> "<substring of stderr>" args...: the exit code and the message, and
# no training step ran.
expect_exit() {
  local want_code="$1" want="$2"; shift 2
  "$trainer" --config "$config" --train-iters 4 --lr-warmup-iters 0 "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$?
  [[ $code -eq $want_code ]] || fail "'$*' exited $code, want $want_code: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "'$*' stderr lacks '$want': $(cat "$tmp/err")"
}

# A checkpoint to resume, of the tiny model.
"$trainer" --config "$config" --train-iters 2 --lr-warmup-iters 0 --save "$tmp/ckpt" \
  >"$tmp/save.log" 2>&1 || fail "saving a checkpoint failed: $(tail -3 "$tmp/save.log")"
echo 'no_such_field: 1' >"$tmp/bad.textproto"
echo 'hello' >"$tmp/a-file"
mkdir -p "$tmp/dangling"
echo 7 >"$tmp/dangling/latest_checkpointed_iteration.txt"

# Refusals of every kind exit 2, before training (found while parsing, resolving, loading
# the data or the checkpoint).
expect_exit 2 "--lr expects a number, got 'abc'" --lr abc
expect_exit 2 "$tmp/bad.textproto" --config "$tmp/bad.textproto"
expect_exit 2 "--data-path: cannot open $tmp/no-data.idx: No such file or directory" \
  --mock-data=false --data-path "$tmp/no-data" --vocab-size 512
expect_exit 2 "--load $tmp/a-file" --load "$tmp/a-file"
expect_exit 2 "--hidden-size 64 (checkpoint: 128)" --load "$tmp/ckpt" --hidden-size 64
expect_exit 2 "checkpoint of iteration 9 not found" --load "$tmp/ckpt" --ckpt-step 9
expect_exit 2 "checkpoint of iteration 7 not found" --load "$tmp/dangling"
grep -q '^ iteration ' "$tmp/out" && fail "a refused run trained"
# Every rank of a job exits 2 when one refuses its input, whichever the launcher sees
# first: the others stop with the refusal's kind, not as a failure of their own.
expect_exit 2 "--save $tmp/a-file cannot hold checkpoints" --save "$tmp/a-file" --nproc-per-node 2

# Output paths are checked before training, naming the flag and the reason.
expect_exit 2 "--profile-file $tmp/no-such-folder/p.json: the folder $tmp/no-such-folder does not exist" \
  --profile --profile-file "$tmp/no-such-folder/p.json"
expect_exit 2 "--tensorboard-dir $tmp/a-file/tb: $tmp/a-file is a file, not a folder" \
  --tensorboard-dir "$tmp/a-file/tb"
expect_exit 2 "--metrics-file $tmp/no-such-folder/m.jsonl: the folder" \
  --metrics-file "$tmp/no-such-folder/m.jsonl"
if [[ $(id -u) -ne 0 ]]; then  # root may write anywhere
  mkdir -p "$tmp/read-only" && chmod 555 "$tmp/read-only"
  expect_exit 2 "--profile-file $tmp/read-only/p.json: this process may not create files in $tmp/read-only (Permission denied)" \
    --profile --profile-file "$tmp/read-only/p.json"
fi
# A profile window after the last iteration would write an empty trace: refused. One
# that ends past it records what there is, and says so.
expect_exit 2 "--profile-step-start 4: the run ends after --train-iters 4" \
  --profile --profile-file "$tmp/p.json" --profile-step-start 4 --profile-step-end 6
expect_exit 0 "warning: --profile-step-end 6 is past --train-iters 4: the profile records iterations 3 to 4 only" \
  --profile --profile-file "$tmp/p.json" --profile-step-start 2 --profile-step-end 6
grep -q '"name": "iteration 4"' "$tmp/p.json" || fail "the profile lacks iteration 4"
# A run that resumes after the window has nothing to profile: it says so.
"$trainer" --config "$config" --train-iters 4 --lr-warmup-iters 0 --load "$tmp/ckpt" --profile \
  --profile-file "$tmp/late.json" --profile-step-start 0 --profile-step-end 1 >"$tmp/late.out" 2>&1 ||
  fail "a resumed profiled run failed: $(tail -3 "$tmp/late.out")"
grep -qF "warning: --profile records iterations 1 to 1, but this run resumes after iteration 2" \
  "$tmp/late.out" || fail "a resume past the profile window says nothing: $(grep -i profile "$tmp/late.out")"

# Failures while running exit 1: a write that fails (a full disk; a file at the size
# limit, `ulimit -f`, which the trainer survives to report instead of dying by SIGXFSZ).
expect_exit 1 "--metrics-file /dev/full: cannot write: No space left on device" \
  --metrics-file /dev/full
# expect_exit_at_size_limit "<substring of stderr>" args...: exit 1 and the message, with
# every file limited to 0 bytes; stderr reaches the test through a pipe (no file limit).
expect_exit_at_size_limit() {
  local want="$1"; shift
  { (ulimit -f 0; exec "$trainer" --config "$config" --train-iters 4 --lr-warmup-iters 0 "$@") \
      2>&1 >/dev/null; } | cat >"$tmp/err"
  local code=${PIPESTATUS[0]}
  [[ $code -eq 1 ]] || fail "'$*' at the size limit exited $code, want 1: $(cat "$tmp/err")"
  grep -qF -- "$want" "$tmp/err" || fail "'$*' at the size limit lacks '$want': $(cat "$tmp/err")"
}
expect_exit_at_size_limit "--trace-file: cannot write $tmp/trace.json: File too large" \
  --trace-file "$tmp/trace.json"
expect_exit_at_size_limit "--profile-file: cannot write $tmp/profile.json: File too large" \
  --profile --profile-file "$tmp/profile.json" --profile-step-start 0 --profile-step-end 1

# The host-memory check counts what the process holds before any tensor (the program,
# libraries, heaps: measured, some 200 MiB), not the model's memory alone.
"$trainer" --config "$config" --dry-run >"$tmp/plan" 2>&1 || fail "--dry-run failed: $(tail -3 "$tmp/plan")"
startup=$(sed -nE 's/^plan: host memory of this rank: .* predicted \(of which ([0-9.]+) MiB before any tensor\).*/\1/p' "$tmp/plan")
awk -v m="${startup:-0}" 'BEGIN { exit !(m > 50) }' ||
  fail "the host-memory line lacks what the process holds before any tensor: $(grep 'host memory' "$tmp/plan")"

finish
