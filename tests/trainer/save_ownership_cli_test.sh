#!/usr/bin/env bash
# A training run keeps saving into --save only while the folder is still its own. While
# a run trains, its folder's lock is lost three ways (the lock file removed by a tmp
# cleaner, with a second run then resuming there; the lock file rewritten by a run on
# another host whose lock service let it in too; the folder moved away), and each time
# the first run stops at its next save (exit 1) without renaming anything into the
# folder, naming what happened, while the folder stays loadable and, with the second
# run, ends as that run's.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1

train() { "$trainer" --config "$config" --lr-warmup-iters 0 --log-interval 1 "$@"; }

# start_long_run NAME: trains into NAME for far longer than the test takes, saving every
# 5 iterations; returns once its first checkpoint is committed (pid in $long_pid).
start_long_run() {
  local name="$1"
  train --train-iters 1000000 --save "$name" --save-interval 5 >"$name.out" 2>"$name.err" &
  long_pid=$!
  for _ in $(seq 600); do
    [[ -f "$name/latest_checkpointed_iteration.txt" ]] && return 0
    kill -0 "$long_pid" 2>/dev/null || break
    sleep 0.1
  done
  fail "$name: no first checkpoint: $(tail -3 "$name.err")"
}

# expect_stopped NAME "<substring>"...: the long run ended by itself with exit 1, its
# stderr holding each substring. Waits at most 60 s, then kills it and fails.
expect_stopped() {
  local name="$1"; shift
  for _ in $(seq 600); do
    kill -0 "$long_pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$long_pid" 2>/dev/null; then
    kill -9 "$long_pid"
    fail "$name: still training after losing its --save folder"
  fi
  wait "$long_pid"
  local code=$?
  [[ $code -eq 1 ]] || fail "$name: exited $code, want 1: $(tail -3 "$name.err")"
  for want in "$@"; do
    grep -qF -- "$want" "$name.err" || fail "$name: stderr lacks '$want': $(tail -3 "$name.err")"
  done
}

# 1. A tmp cleaner removes the lock file; a second run resumes from the folder.
start_long_run removed
rm -f removed/.conveyor-save.lock
train --train-iters 40 --load removed --save removed --save-interval 5 >second.out 2>&1 ||
  fail "the second run failed: $(tail -3 second.out)"
expect_stopped removed "--save removed is no longer this run's" \
  "this run stops without writing (its committed checkpoints stay as they are)"
[[ "$(cat removed/latest_checkpointed_iteration.txt)" == 40 ]] ||
  fail "removed: latest is $(cat removed/latest_checkpointed_iteration.txt), want the second run's 40"
train --train-iters 45 --load removed --save removed >resume.out 2>&1 ||
  fail "removed: the folder does not resume: $(tail -3 resume.out)"

# 2. A run on another host took the lock as well and wrote its claim into the file.
start_long_run other_host
echo "pid 77 on host node9, since 2026-01-01 00:00:00 UTC, claim 00000000deadbeef" \
  >other_host/.conveyor-save.lock
expect_stopped other_host "--save other_host is no longer this run's: another run claimed its lock file" \
  "(pid 77 on host node9, since 2026-01-01 00:00:00 UTC, claim 00000000deadbeef)" \
  "the file system's locks hold only on one host"
ls other_host | grep -q '\.tmp-' && fail "other_host: a save was left half-done: $(ls other_host)"

# 3. The folder is moved away: the run does not quietly recreate it.
start_long_run moved
mv moved moved_elsewhere
expect_stopped moved "--save moved is no longer this run's: the folder was moved or deleted"
[[ -e moved ]] && fail "moved: the folder was recreated: $(ls moved)"

finish
