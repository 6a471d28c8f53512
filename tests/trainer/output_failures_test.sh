#!/usr/bin/env bash
# What a run does when what it writes fails: a closed stdout does not stop it; a metrics
# file that cannot take a line stops it (exit 1) with every earlier line whole; a run
# whose every step was skipped for NaN fails and saves nothing.
source "$(dirname "$0")/trainer_test_lib.sh"

# A closed stdout, one rank and two: stdout is a pipe whose reader is gone before the
# trainer starts (deterministic, unlike `| head`, which may exit after the last line),
# with SIGPIPE at its default as a shell gives it. The run trains to the end, saves, exits
# 0, and says once per rank on stderr that stdout is gone.
for ranks in 1 2; do
  rm -rf "$tmp/closed$ranks"
  python3 - "$tmp/closed$ranks.err" "$trainer" --config "$config" --train-iters 6 \
    --lr-warmup-iters 0 --log-interval 1 --nproc-per-node "$ranks" --save "$tmp/closed$ranks" <<'PY'
import os, subprocess, sys
read_end, write_end = os.pipe()
os.close(read_end)
with open(sys.argv[1], "w") as err:
    # restore_signals (the default) gives the child SIGPIPE's default action.
    code = subprocess.run(sys.argv[2:], stdout=write_end, stderr=err).returncode
sys.exit(code if code >= 0 else 128 - code)
PY
  code=$?
  [[ $code -eq 0 ]] || fail "closed stdout, $ranks rank(s): exit $code, want 0: $(cat "$tmp/closed$ranks.err")"
  [[ $(cat "$tmp/closed$ranks/latest_checkpointed_iteration.txt" 2>/dev/null) == 6 ]] ||
    fail "closed stdout, $ranks rank(s): no checkpoint of iteration 6"
  lines=$(grep -c "cannot write to stdout (Broken pipe: its reader has closed it); the run goes on" \
    "$tmp/closed$ranks.err")
  [[ $lines -ge 1 && $lines -le $ranks ]] ||
    fail "closed stdout, $ranks rank(s): $lines notices, want 1 to $ranks: $(cat "$tmp/closed$ranks.err")"
done
# As a user types it: the pipeline's status is the trainer's, 0.
"$trainer" --config "$config" --train-iters 6 --lr-warmup-iters 0 --log-interval 1 2>/dev/null | head -1 >/dev/null
[[ ${PIPESTATUS[0]} -eq 0 ]] || fail "trainer | head -1 exited ${PIPESTATUS[0]}, want 0"

# A metrics file that reaches the size limit (as a full disk would) mid-run: exit 1,
# naming the file and the errno text, and the file holds whole JSON lines only (the line
# cut by the limit is removed again). stderr goes through a pipe, which has no limit.
{ (ulimit -f 2; exec "$trainer" --config "$config" --train-iters 40 --lr-warmup-iters 0 \
    --log-interval 1 --metrics-file "$tmp/metrics.jsonl") 2>&1 >/dev/null; } | cat >"$tmp/full.err"
code=${PIPESTATUS[0]}
[[ $code -eq 1 ]] || fail "metrics at the size limit: exit $code, want 1: $(cat "$tmp/full.err")"
grep -qF -- "--metrics-file $tmp/metrics.jsonl: cannot write (the partly written line was removed again): File too large" \
  "$tmp/full.err" || fail "metrics at the size limit: no message naming the file: $(cat "$tmp/full.err")"
python3 - "$tmp/metrics.jsonl" <<'PY' || fail "metrics at the size limit: a line is not whole JSON"
import json, sys
data = open(sys.argv[1]).read()
assert data.endswith("\n"), "the file ends mid-line"
lines = data.splitlines()
assert len(lines) >= 2, lines
for n, line in enumerate(lines, 1):
    assert json.loads(line)["iteration"] == n, (n, line)
PY

# TensorBoard's event file at the size limit: exit 1 naming the file and the errno text.
{ (ulimit -f 1; exec "$trainer" --config "$config" --train-iters 20 --lr-warmup-iters 0 \
    --tensorboard-dir "$tmp/tb") 2>&1 >/dev/null; } | cat >"$tmp/tb.err"
code=${PIPESTATUS[0]}
[[ $code -eq 1 ]] || fail "events at the size limit: exit $code, want 1: $(cat "$tmp/tb.err")"
grep -qE -- "--tensorboard-dir: cannot write $tmp/tb/events.out.tfevents.* \(File too large\)" \
  "$tmp/tb.err" || fail "events at the size limit: no message naming the file: $(cat "$tmp/tb.err")"

# --nan-policy skip where every step is NaN (weights of 1e30): exit 1, the error says
# all were skipped, no checkpoint is saved (it would hold the initial weights under a
# later iteration), and no line claims the iterations were trained.
"$trainer" --config "$config" --train-iters 6 --lr-warmup-iters 0 --save "$tmp/nan" \
  --save-interval 2 --init-method-std 1e30 --nan-policy skip >"$tmp/nan.out" 2>"$tmp/nan.err"
code=$?
[[ $code -eq 1 ]] || fail "every step skipped: exit $code, want 1: $(tail -3 "$tmp/nan.err")"
grep -qF "every one of this run's 6 steps had a NaN or inf loss or gradient norm and was skipped" \
  "$tmp/nan.err" || fail "every step skipped: no such error: $(cat "$tmp/nan.err")"
grep -qF "not saving iteration 2: every step since iteration 0 was skipped" "$tmp/nan.out" ||
  fail "every step skipped: no notice of the skipped save: $(tail -5 "$tmp/nan.out")"
grep -q "trained" "$tmp/nan.out" && fail "every step skipped: a line claims training: $(grep trained "$tmp/nan.out")"
[[ -z $(ls -A "$tmp/nan" 2>/dev/null | grep -v '^\.') ]] ||
  fail "every step skipped: a checkpoint was saved: $(ls -A "$tmp/nan")"

# Some steps skipped (an absurd --lr makes every step after the first NaN): the run ends,
# and its last line counts the skipped steps apart from the trained ones.
"$trainer" --config "$config" --train-iters 5 --lr 1e30 --min-lr 0 --lr-warmup-iters 0 \
  --nan-policy skip >"$tmp/some.out" 2>&1 || fail "some steps skipped: exit $?: $(tail -3 "$tmp/some.out")"
grep -qF "conveyor: trained 1 iterations (4 more skipped for a NaN or inf, --nan-policy skip)" \
  "$tmp/some.out" || fail "some steps skipped: the last line does not count them: $(grep trained "$tmp/some.out")"

finish
