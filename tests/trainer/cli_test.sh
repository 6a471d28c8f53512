#!/usr/bin/env bash
# The trainer binary end to end: exit codes and messages for bad input, --help, a short
# training run on mock data whose loss falls, and fast OpenBLAS kernels.
source "$(dirname "$0")/trainer_test_lib.sh"

# expect_usage_error "<substring of stderr>" args...: exit code 2 and the message.
expect_usage_error() {
  local want="$1"; shift
  "$trainer" "$@" >"$tmp/out" 2>"$tmp/err"
  local code=$?
  [[ $code -eq 2 ]] || fail "'$*' exited $code, want 2"
  grep -qF -- "$want" "$tmp/err" || fail "'$*' stderr lacks '$want': $(cat "$tmp/err")"
}

expect_usage_error "did you mean --num-layers" --mock-data --vocab-size 64 --num-layer 2
expect_usage_error "--num-layers expects an integer, got 'abc'" --mock-data --vocab-size 64 --num-layers abc
expect_usage_error "--hidden-size" --mock-data --vocab-size 64 --hidden-size 100 --num-attention-heads 3
expect_usage_error "--num-query-groups" --mock-data --vocab-size 64 --num-attention-heads 4 --num-query-groups 3
expect_usage_error "--global-batch-size" --mock-data --vocab-size 64 --micro-batch-size 2 --num-micro-batches 2 --global-batch-size 8
expect_usage_error "--tensor-model-parallel-size" --mock-data --vocab-size 64 --nproc-per-node 3 --tensor-model-parallel-size 2
expect_usage_error "no-such.textproto" --config "$tmp/no-such.textproto"
# Every problem at once: both flags named in one run.
expect_usage_error "--adam-beta1" --mock-data --vocab-size 64 --adam-beta1 1.5 --log-interval 0
expect_usage_error "--log-interval" --mock-data --vocab-size 64 --adam-beta1 1.5 --log-interval 0

"$trainer" --help >"$tmp/help" 2>&1 || fail "--help exited non-zero"
for want in "--pipeline-model-parallel-size" "--num-micro-batches" "model architecture" "--config"; do
  grep -qF -- "$want" "$tmp/help" || fail "--help lacks $want"
done

"$trainer" --config "$config" --train-iters 30 --log-interval 10 \
  --metrics-file "$tmp/metrics.jsonl" >"$tmp/train" 2>&1 || fail "training exited non-zero: $(tail "$tmp/train")"
grep -qF "CPU backend" "$tmp/train" || fail "the run does not say it uses the CPU backend"
mapfile -t losses < <(sed -nE 's/.*lm loss: ([0-9.E+-]+).*/\1/p' "$tmp/train")
[[ ${#losses[@]} -eq 3 ]] || fail "want 3 log lines, got ${#losses[@]}"
awk -v a="${losses[0]}" -v b="${losses[2]}" 'BEGIN { exit !(b < a - 0.5) }' ||
  fail "loss did not fall: ${losses[*]}"
# Three log intervals, then the end-of-run validation and test losses.
[[ $(wc -l <"$tmp/metrics.jsonl") -eq 5 ]] || fail "metrics file should have 5 lines"
grep -q '"test_lm_loss"' "$tmp/metrics.jsonl" || fail "metrics file lacks the test loss"
grep -qF "validation loss at iteration 30 on test set" "$tmp/train" ||
  fail "the run does not end with the test loss"
# A second run (a resume, a relaunch) appends to the metrics file: nothing is lost.
cp "$tmp/metrics.jsonl" "$tmp/metrics.first"
"$trainer" --config "$config" --train-iters 10 --lr-warmup-iters 0 --log-interval 10 \
  --metrics-file "$tmp/metrics.jsonl" >"$tmp/train2" 2>&1 || fail "second run exited non-zero: $(tail "$tmp/train2")"
[[ $(wc -l <"$tmp/metrics.jsonl") -eq 8 ]] || fail "metrics file should have 5 + 3 lines"
[[ "$(head -5 "$tmp/metrics.jsonl")" == "$(cat "$tmp/metrics.first")" ]] ||
  fail "the second run changed the first run's metrics"
expect_usage_error "--overwrite-save needs --save FOLDER" --config "$config" --overwrite-save
# Megatron's default --tokenizer-type is GPT2BPETokenizer: one of its two files alone is
# refused naming the other (resolved_config_test runs both with GPT-2's own files).
expect_usage_error "--merge-file is missing: without --tokenizer-type" --config "$config" \
  --vocab-file "$tmp/vocab.json"
# --save-interval without --save is tolerated, as Megatron tolerates it: the run trains
# and says that nothing is saved.
"$trainer" --config "$config" --train-iters 5 --save-interval 5 >"$tmp/nosave" 2>&1 ||
  fail "--save-interval 5 without --save exited non-zero: $(tail "$tmp/nosave")"
grep -qF -- "--save-interval 5 without --save: no checkpoint is saved" "$tmp/nosave" ||
  fail "--save-interval without --save is not warned: $(head "$tmp/nosave")"
grep -qE "iteration +5/ +5" "$tmp/nosave" ||
  fail "--save-interval without --save did not train 5 steps"

# --device cuda without a GPU (CI) is refused on every rank (exit 2: a flag to change),
# naming the flag and the fix.
if ! nvidia-smi >/dev/null 2>&1; then
  for ranks in 1 2; do
    "$trainer" --config "$config" --device cuda --nproc-per-node "$ranks" --train-iters 2 \
      --lr-warmup-iters 1 >"$tmp/out" 2>"$tmp/err"
    code=$?
    [[ $code -eq 2 ]] || fail "--device cuda without a GPU ($ranks ranks) exited $code, want 2"
    grep -qF -- "--device cuda: no usable CUDA device" "$tmp/err" &&
      grep -qF -- "use --device cpu" "$tmp/err" ||
      fail "--device cuda error ($ranks ranks) lacks the flag or the fix: $(cat "$tmp/err")"
  done
fi

# --bf16 on the CPU: its GEMMs on AVX-512 BF16 where the CPU has it, else emulated; the
# log says which, and the run learns.
"$trainer" --config "$config" --bf16 --train-iters 20 --log-interval 10 >"$tmp/bf16" 2>&1 ||
  fail "--bf16 run exited non-zero: $(tail "$tmp/bf16")"
grep -qE "CPU backend, bf16 \(--bf16: GEMMs on the CPU's AVX-512 BF16|CPU backend, bf16 emulated" \
  "$tmp/bf16" || fail "the --bf16 run does not say how it computes bf16: $(head "$tmp/bf16")"
mapfile -t losses < <(sed -nE 's/.*lm loss: ([0-9.E+-]+).*/\1/p' "$tmp/bf16")
awk -v a="${losses[0]}" -v b="${losses[1]}" 'BEGIN { exit !(b < a - 0.5) }' ||
  fail "--bf16 loss did not fall: ${losses[*]}"

# Two ranks through the built-in launcher, tensor-parallel: the same final loss as one.
one=$("$trainer" --config "$config" --train-iters 6 2>&1 | grep 'final lm loss')
tp2=$("$trainer" --config "$config" --train-iters 6 --nproc-per-node 2 \
  --tensor-model-parallel-size 2 2>&1 | grep 'final lm loss')
[[ -n "$one" && "$one" == "$tp2" ]] || fail "TP2 run differs from one rank: '$one' vs '$tp2'"

# The same two ranks started one by one, as a Slurm script or torchrun starts them (RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT; no shared directory): they meet at the TCP
# store rank 0 serves and train alike.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
for rank in 0 1; do
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 300 "$trainer" --config "$config" --train-iters 6 --tensor-model-parallel-size 2 \
    >"$tmp/tcp.$rank" 2>&1 &
  pids[rank]=$!
done
for rank in 0 1; do
  wait "${pids[rank]}" || fail "rank $rank over the TCP store exited non-zero: $(tail "$tmp/tcp.$rank")"
done
tcp=$(grep 'final lm loss' "$tmp/tcp.0")
[[ "$tcp" == "$tp2" ]] || fail "TP2 over the TCP store differs from the launcher's: '$tcp' vs '$tp2'"

# Ranks given different flags stop at start-up, each naming what differs, before any
# group beyond the world exists: other layers (which used to abort inside gloo) and another
# --lr (which used to train on silently).
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
rank_flags=("--num-layers 2 --lr 0.001" "--num-layers 3 --lr 0.002")
for rank in 0 1; do
  # shellcheck disable=SC2086
  RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    timeout 300 "$trainer" --config "$config" --train-iters 6 --tensor-model-parallel-size 2 \
    ${rank_flags[rank]} >"$tmp/differ.$rank" 2>&1 &
  pids[rank]=$!
done
for rank in 0 1; do
  wait "${pids[rank]}"
  code=$?
  [[ $code -eq 2 ]] || fail "ranks with different flags: rank $rank exited $code, want 2: $(tail -3 "$tmp/differ.$rank")"
  for want in "rank $rank: the ranks were started with different settings" \
      "--num-layers 2 on rank 0, 3 on rank 1" "--lr 0.001 on rank 0, 0.002 on rank 1"; do
    grep -qF -- "$want" "$tmp/differ.$rank" || fail "ranks with different flags: rank $rank lacks '$want': $(tail -3 "$tmp/differ.$rank")"
  done
  grep -q "EnforceNotMet\|lm loss" "$tmp/differ.$rank" && fail "ranks with different flags: rank $rank went on"
done

# Output files are checked before the first step, not when first written.
expect_usage_error "--trace-file $tmp/no-such-folder/trace.json: the folder $tmp/no-such-folder does not exist" \
  --config "$config" --trace-file "$tmp/no-such-folder/trace.json"
expect_usage_error "--metrics-file $tmp is a folder" --config "$config" --metrics-file "$tmp"

# Runs one after another in the same CONVEYOR_RUN_DIR, as a Slurm script or torchrun
# restarts them: a second run, and a run after one that was killed, meet afresh (rank 1
# may start first) and train alike; a finished run leaves no rendezvous files.
run_dir="$tmp/shared-run-dir"
# two_ranks <label> <train iters> [delay of rank 0]: pids[r] are the trainers themselves
# (no `timeout` in between), so that kill reaches them; the runs that should end are
# bounded by --distributed-timeout-minutes.
two_ranks() {
  local label="$1" iters="$2" delay="${3:-0}" rank
  for rank in 1 0; do
    ((rank == 0)) && sleep "$delay"
    RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank CONVEYOR_RUN_DIR="$run_dir" \
      "$trainer" --config "$config" --train-iters "$iters" \
      --tensor-model-parallel-size 2 --distributed-timeout-minutes 1 >"$tmp/$label.$rank" 2>&1 &
    pids[rank]=$!
  done
}
for run in first second; do
  two_ranks "$run" 6
  for rank in 0 1; do
    wait "${pids[rank]}" || fail "$run run in one run dir: rank $rank exited non-zero: $(tail -3 "$tmp/$run.$rank")"
  done
  loss=$(grep 'final lm loss' "$tmp/$run.0")
  [[ "$loss" == "$tp2" ]] || fail "$run run in one run dir: '$loss', want '$tp2'"
done
[[ -z $(ls -A "$run_dir" | grep -v '^launch$') ]] || fail "finished runs left files: $(ls -A "$run_dir")"
two_ranks killed 100000
for _ in $(seq 300); do grep -q 'lm loss' "$tmp/killed.0" && break; sleep 0.1; done
kill -KILL "${pids[0]}" "${pids[1]}"
wait "${pids[0]}" "${pids[1]}" 2>/dev/null
two_ranks after-kill 6 1
for rank in 0 1; do
  wait "${pids[rank]}" || fail "run after a killed run: rank $rank exited non-zero: $(tail -3 "$tmp/after-kill.$rank")"
done
loss=$(grep 'final lm loss' "$tmp/after-kill.0")
[[ "$loss" == "$tp2" ]] || fail "run after a killed run: '$loss', want '$tp2'"

# An external launcher's environment of several ranks and --nproc-per-node contradict:
# refused at once (usage error), naming both and the fix.
RANK=0 WORLD_SIZE=2 timeout 60 "$trainer" --config "$config" --nproc-per-node 4 >"$tmp/out" 2>"$tmp/err"
code=$?
[[ $code -eq 2 ]] || fail "RANK/WORLD_SIZE with --nproc-per-node exited $code, want 2"
for want in "RANK=0 and WORLD_SIZE=2" "--nproc-per-node 4" "drop --nproc-per-node" \
    "unset RANK and WORLD_SIZE"; do
  grep -qF -- "$want" "$tmp/err" || fail "the launcher contradiction lacks '$want': $(cat "$tmp/err")"
done
# srun -n1 (one task) with --nproc-per-node is not a contradiction.
SLURM_PROCID=0 SLURM_NTASKS=1 "$trainer" --config "$config" --nproc-per-node 2 --dry-run \
  >"$tmp/out" 2>&1 || fail "SLURM_NTASKS=1 with --nproc-per-node 2 refused: $(tail -3 "$tmp/out")"

# A rank's failure names the rank once.
touch "$tmp/not-a-dir"
RANK=0 WORLD_SIZE=2 CONVEYOR_RUN_DIR="$tmp/not-a-dir/run" timeout 60 "$trainer" --config "$config" \
  >"$tmp/out" 2>"$tmp/err"
code=$?
[[ $code -eq 2 ]] || fail "an unusable CONVEYOR_RUN_DIR exited $code, want 2"
grep -qF "trainer: error: rank 0: meeting the other ranks in CONVEYOR_RUN_DIR=$tmp/not-a-dir/run" \
  "$tmp/err" || fail "no error naming the run dir: $(cat "$tmp/err")"
grep -q "rank 0: rank 0" "$tmp/err" && fail "the rank is named twice: $(cat "$tmp/err")"

# Validation loss (no dropout, forward only) is the same through a pipeline.
one=$("$trainer" --config "$config" --train-iters 6 --eval-interval 3 --eval-iters 2 \
  --num-layers 4 --num-micro-batches 4 2>&1 | grep 'validation loss')
two=$("$trainer" --config "$config" --train-iters 6 --eval-interval 3 --eval-iters 2 \
  --num-layers 4 --num-micro-batches 4 --nproc-per-node 2 --pipeline-model-parallel-size 2 \
  --pipeline-schedule zbv --num-virtual-stages-per-pipeline-rank 2 2>&1 | grep 'validation loss')
# At iterations 3 and 6, then on the validation and test sets after training.
[[ $(wc -l <<<"$one") -eq 4 && "$one" == "$two" ]] || fail "validation differs: '$one' vs '$two'"

# --dry-run prints the plan (rank map, bubble, Gantt chart, memory) and trains nothing.
"$trainer" --config "$config" --num-layers 4 --nproc-per-node 4 --pipeline-model-parallel-size 2 \
  --tensor-model-parallel-size 2 --num-micro-batches 4 --dry-run >"$tmp/plan" 2>&1 ||
  fail "--dry-run exited non-zero: $(tail -3 "$tmp/plan")"
for want in "rank map: world 4 = TP 2 x PP 2 x DP 1" "bubble 20.0% (formula), 20.0% (simulated)" \
    "rank 1  .  F0 B0" "plan: memory per GPU" "plan: traffic per step"; do
  grep -qF -- "$want" "$tmp/plan" || fail "--dry-run lacks '$want'"
done
grep -q '^ iteration ' "$tmp/plan" && fail "--dry-run trained"

# --trace-file merges every rank's last-iteration timeline into one Chrome trace.
"$trainer" --config "$config" --num-layers 4 --train-iters 2 --lr-warmup-iters 0 \
  --nproc-per-node 2 --pipeline-model-parallel-size 2 --num-micro-batches 4 --trace-file "$tmp/trace.json" \
  >"$tmp/out" 2>&1 || fail "traced run exited non-zero"
grep -q '"traceEvents"' "$tmp/trace.json" || fail "no Chrome trace written"
grep -q '"pid":1' "$tmp/trace.json" || fail "the trace lacks pipeline rank 1"
[[ $(grep -c '"name":"F[0-9]' "$tmp/trace.json") -eq 8 ]] || fail "want 8 forwards in the trace"
# The parts travel over the communicator, not through files beside the trace.
compgen -G "$tmp/trace.json.*" >/dev/null && fail "part files beside the trace: $(ls "$tmp")"

# SIGTERM with --exit-signal-handler: finish the step, save, exit 0 (one rank, and two
# ranks through the launcher, which forwards the signal).
for ranks in 1 2; do
  save="$tmp/signal$ranks"
  "$trainer" --config "$config" --train-iters 100000 --lr-warmup-iters 0 --log-interval 100000 \
    --nproc-per-node "$ranks" --exit-signal-handler --save "$save" >"$tmp/signal.log" 2>&1 &
  pid=$!
  # The signal goes once the first iteration is done (its memory line), however long the
  # start takes on a loaded machine: sent during the start, it would find no step to
  # finish and nothing to save. Waiting ends early only if the run itself ended.
  while ! grep -q 'memory (MiB)' "$tmp/signal.log" && kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  grep -q 'memory (MiB)' "$tmp/signal.log" ||
    fail "the $ranks-rank run ended before its first iteration: $(tail -3 "$tmp/signal.log")"
  kill -TERM "$pid"
  wait "$pid"
  code=$?
  [[ $code -eq 0 ]] || fail "SIGTERM with $ranks rank(s): exit $code: $(tail -3 "$tmp/signal.log")"
  grep -q 'exiting after iteration' "$tmp/signal.log" || fail "no exit notice after SIGTERM"
  [[ -s "$save/latest_checkpointed_iteration.txt" ]] || fail "SIGTERM left no checkpoint"
done

# Resuming a checkpoint of another model is refused, naming every differing flag.
"$trainer" --config "$config" --load "$tmp/signal1" --hidden-size 64 >"$tmp/out" 2>"$tmp/err"
code=$?
[[ $code -eq 2 ]] || fail "loading another model's checkpoint exited $code, want 2"
grep -qF -- "--hidden-size 64 (checkpoint: 128)" "$tmp/err" || fail "no field list: $(cat "$tmp/err")"

# One task launched by srun (-n1) forks --nproc-per-node ranks itself, as torchrun would.
SLURM_PROCID=0 SLURM_NTASKS=1 SLURM_LOCALID=0 "$trainer" --config "$config" --train-iters 5 \
  --nproc-per-node 2 >"$tmp/srun1" 2>&1 || fail "srun -n1 with --nproc-per-node 2 failed: $(tail "$tmp/srun1")"
grep -qF "[rank 1]" "$tmp/srun1" || fail "srun -n1 with --nproc-per-node 2 did not fork rank 1"

# On a CPU with AVX2 and FMA the trainer never runs OpenBLAS's generic Prescott (SSE3)
# kernels: when OpenBLAS falls back to them (a virtual machine hiding the CPU model), the
# trainer restarts itself naming faster ones (runtime/cpu/blas_kernels.h). OpenBLAS says
# which kernels it loads, each time it loads.
if grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo; then
  core=$(env -u OPENBLAS_CORETYPE OPENBLAS_VERBOSE=2 "$trainer" --help 2>&1 | grep '^Core: ' | tail -n 1)
  [[ -n "$core" && "$core" != "Core: Prescott" ]] ||
    fail "OpenBLAS runs '${core:-no reported}' kernels on a CPU with AVX2 and FMA"
fi

finish
