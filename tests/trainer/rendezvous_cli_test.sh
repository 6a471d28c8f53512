#!/usr/bin/env bash
# The TCP store's refusals through the binary with the exit code of the
# project's rule (2: the launch must change) and within seconds, not after
# --distributed-timeout-minutes:
#   1. MASTER_ADDR that does not resolve: named, with the fix, instead of retried.
#   2. Two processes started with RANK=1 (the launcher gave rank 2's process rank 1's
#      number): every process of the job says that rank 1 was claimed twice, and by whom.
source "$(dirname "$0")/trainer_test_lib.sh"
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# rank LOG RANK WORLD_SIZE MASTER_ADDR PORT: one rank of a job started as torchrun or srun
# start them (no run directory: the ranks meet at the TCP store).
rank() {
  env -u CONVEYOR_RUN_DIR -u CONVEYOR_STORE_PORT -u CONVEYOR_JOB_ID -u SLURM_PROCID \
    -u SLURM_NTASKS -u SLURM_LOCALID RANK="$2" WORLD_SIZE="$3" MASTER_ADDR="$4" \
    MASTER_PORT="$5" "$trainer" --config "$config" --train-iters 2 --lr-warmup-iters 0 \
    --distributed-timeout-minutes 1 >"$1" 2>&1
}

# 1. An unresolvable MASTER_ADDR.
start=$SECONDS
rank "$tmp/unresolvable" 1 2 no-such-host.invalid 29500
code=$?
[[ $code == 2 ]] || fail "unresolvable MASTER_ADDR: exit $code, want 2: $(cat "$tmp/unresolvable")"
((SECONDS - start < 30)) || fail "unresolvable MASTER_ADDR: took $((SECONDS - start))s"
grep -q '^trainer: error: rank 1: cannot resolve MASTER_ADDR "no-such-host.invalid": .*name resolution failed for good.*set MASTER_ADDR to global rank 0' \
  "$tmp/unresolvable" || fail "unresolvable MASTER_ADDR: not named: $(cat "$tmp/unresolvable")"

# 2. Ranks 0, 1, 1 of a job of 3. A port free a moment ago; should another program take
# it meanwhile, rank 0 says it cannot listen there, and the case runs again.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
for attempt in 1 2 3; do
  port=$(free_port)
  start=$SECONDS
  pids=()
  for p in 0 1 2; do
    rank "$tmp/twice.$p" $((p == 0 ? 0 : 1)) 3 127.0.0.1 "$port" &
    pids[p]=$!
  done
  codes=()
  for p in 0 1 2; do
    wait "${pids[p]}"
    codes[p]=$?
  done
  pids=()
  grep -q "cannot listen on MASTER_PORT $port" "$tmp/twice.0" || break
done
((SECONDS - start < 30)) || fail "RANK given twice: took $((SECONDS - start))s"
for p in 0 1 2; do
  r=$((p == 0 ? 0 : 1))
  [[ ${codes[p]} == 2 ]] || fail "RANK given twice: process $p (rank $r) exited ${codes[p]}, want 2: $(grep error "$tmp/twice.$p")"
  grep -qE "^trainer: error: rank $r: .*global rank 1 was claimed by two processes at the TCP store global rank 0 serves at port $port, from 127\.0\.0\.1:[0-9]+ and from 127\.0\.0\.1:[0-9]+: one of them was meant to be another rank \(or is left from an earlier launch\); start each rank once, with its own RANK" \
    "$tmp/twice.$p" || fail "RANK given twice: process $p (rank $r) does not say so: $(grep error "$tmp/twice.$p")"
done

finish
