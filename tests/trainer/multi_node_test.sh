#!/usr/bin/env bash
# Multi-node rehearsal: two "nodes", each a network namespace with its own address
# (10.77.0.1 and 10.77.0.2 on a veth pair) and host name, run 2 ranks each of a 4-rank
# job (TP 2 x DP 2: tensor parallelism inside a node, data parallelism across the link),
# started one by one as Slurm or torchrun start them (RANK, WORLD_SIZE, LOCAL_RANK,
# MASTER_ADDR=10.77.0.1, MASTER_PORT; no CONVEYOR_RUN_DIR, no shared folder to meet in).
#   1. An uninterrupted run: the loss of every iteration.
#   2. The same run saving every few iterations; once a checkpoint exists, the second
#      node's link goes down: every rank must exit non-zero within a bound set by
#      --distributed-timeout-minutes, and each rank must name the rank across the link it
#      waited on (directly, or through its node neighbour), wherever the cut fell.
#   3. The link comes back and the job resumes from the last checkpoint: each resumed
#      iteration's loss equals the uninterrupted run's as printed.
# The checkpoint folder is one folder for both nodes, as --save on a real cluster is on
# shared storage; only the rendezvous must not need a folder.
#
# Needs root, ip(8), unshare(1) and network namespaces; skips (exit 0, "SKIP: ...")
# without them. Runs outside Bazel's sandbox (tags local, no-sandbox, exclusive).
source "$(dirname "$0")/trainer_test_lib.sh"

skip() {
  echo "SKIP: $*"
  echo "SKIP: to run it, run as root on a machine that allows network namespaces and veth" \
    "links, outside a sandbox: sudo bazel test //tests/trainer:multi_node_test" \
    "(or tests/trainer/multi_node_test.sh bazel-bin/trainer/trainer configs/gpt-tiny.textproto)"
  exit 0
}

# Names unique to this run (interface names: at most 15 characters).
id="$$"
ns=("cvmn${id}a" "cvmn${id}b")
veth=("cvmn${id}a" "cvmn${id}b")
addr=(10.77.0.1 10.77.0.2)
host=(node-a node-b)
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    [[ -n "$pid" ]] && kill -KILL "$pid" 2>/dev/null
  done
  for pid in "${pids[@]}"; do
    [[ -n "$pid" ]] && wait "$pid" 2>/dev/null
  done
  # Deleting a namespace deletes the veth end in it, and with it the pair.
  ip netns del "${ns[0]}" 2>/dev/null
  ip netns del "${ns[1]}" 2>/dev/null
  ip link del "${veth[0]}" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
trap "exit 143" TERM  # bazel test --test_timeout: clean up too
trap "exit 130" INT

[[ $(id -u) -eq 0 ]] || skip "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"
for tool in ip unshare mount hostname; do
  command -v "$tool" >/dev/null || skip "no '$tool' command"
done

# Two nodes joined by one link.
ip netns add "${ns[0]}" 2>"$tmp/ip.err" || skip "cannot create a network namespace: $(cat "$tmp/ip.err")"
ip netns add "${ns[1]}" 2>"$tmp/ip.err" || skip "cannot create a network namespace: $(cat "$tmp/ip.err")"
ip link add "${veth[0]}" type veth peer name "${veth[1]}" 2>"$tmp/ip.err" ||
  skip "cannot create a veth pair: $(cat "$tmp/ip.err")"
for n in 0 1; do
  { ip link set "${veth[n]}" netns "${ns[n]}" &&
    ip -n "${ns[n]}" addr add "${addr[n]}/24" dev "${veth[n]}" &&
    ip -n "${ns[n]}" link set lo up &&
    ip -n "${ns[n]}" link set "${veth[n]}" up; } 2>"$tmp/ip.err" ||
    skip "cannot set up the link of node $n: $(cat "$tmp/ip.err")"
done
# Each node has its own host name, which resolves to its own address, as on real nodes:
# with MASTER_ADDR not a loopback address, gloo binds (and tells its peers) the address the
# host name resolves to, so a host name resolving to 127.0.0.1 would not reach across.
printf '127.0.0.1 localhost\n%s %s\n%s %s\n' "${addr[0]}" "${host[0]}" "${addr[1]}" "${host[1]}" \
  >"$tmp/hosts"
if ! ip netns exec "${ns[0]}" unshare --uts --mount sh -c \
    "hostname ${host[0]} && mount --bind $tmp/hosts /etc/hosts" 2>"$tmp/ip.err"; then
  skip "cannot give a namespace its own host name and /etc/hosts: $(cat "$tmp/ip.err")"
fi

nodes_script="$tmp/node.sh"
cat >"$nodes_script" <<'EOF'
#!/bin/sh
# node.sh HOSTNAME HOSTS_FILE COMMAND...: run COMMAND (same pid) as that node.
hostname "$1" && mount --bind "$2" /etc/hosts || exit 97
shift 2
exec "$@"
EOF
chmod +x "$nodes_script"

ranks=(0 1 2 3)
node_of() { echo $(($1 / 2)); }

# job LABEL PORT ARGS...: starts the 4 ranks in the background; pids[r] are the trainers
# themselves (ip, unshare, sh and env exec), so kill reaches them.
job() {
  local label="$1" port="$2" rank node
  shift 2
  for rank in "${ranks[@]}"; do
    node=$(node_of "$rank")
    ip netns exec "${ns[node]}" unshare --uts --mount "$nodes_script" "${host[node]}" "$tmp/hosts" \
      env -u CONVEYOR_RUN_DIR -u CONVEYOR_STORE_PORT -u CONVEYOR_JOB_ID -u SLURM_PROCID \
      -u SLURM_NTASKS -u SLURM_LOCALID RANK="$rank" WORLD_SIZE=4 LOCAL_RANK=$((rank % 2)) \
      MASTER_ADDR="${addr[0]}" MASTER_PORT="$port" \
      "$trainer" --config "$config" --tensor-model-parallel-size 2 --train-iters "$iters" \
      --lr-warmup-iters 0 --log-interval 1 --eval-iters 1 "$@" >"$tmp/$label.$rank" 2>&1 &
    pids[rank]=$!
  done
}

# wait_job LABEL SECONDS: waits for every rank, at most SECONDS in all; codes[r] is each
# exit code (-1: still running at the deadline, then killed), ended[r] its seconds.
wait_job() {
  local label="$1" limit="$2" start rank left
  start=$(date +%s.%N)
  codes=(-1 -1 -1 -1)
  ended=(- - - -)
  left=4
  while ((left > 0)); do
    for rank in "${ranks[@]}"; do
      [[ ${codes[rank]} != -1 ]] && continue
      if ! kill -0 "${pids[rank]}" 2>/dev/null; then
        wait "${pids[rank]}"
        codes[rank]=$?
        ended[rank]=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
        pids[rank]=""
        left=$((left - 1))
      fi
    done
    if awk -v a="$start" -v b="$(date +%s.%N)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
      for rank in "${ranks[@]}"; do
        [[ ${codes[rank]} == -1 ]] || continue
        fail "$label: rank $rank still running after ${limit}s: $(tail -3 "$tmp/$label.$rank")"
        kill -KILL "${pids[rank]}" 2>/dev/null
        wait "${pids[rank]}" 2>/dev/null
        pids[rank]=""
      done
      return
    fi
    sleep 0.1
  done
}

# losses LOG: "ITERATION LOSS" per logged iteration.
losses() { sed -nE 's/^ iteration +([0-9]+)\/ *[0-9]+ \|.*\| lm loss: ([0-9.E+-]+) \|.*/\1 \2/p' "$1"; }

iters=12
save_interval=4
timeout_minutes=1  # the smallest --distributed-timeout-minutes (an integer)

# 1. Uninterrupted.
job reference 29500 --distributed-timeout-minutes "$timeout_minutes"
wait_job reference 120
for rank in "${ranks[@]}"; do
  [[ ${codes[rank]} == 0 ]] || fail "reference run: rank $rank exited ${codes[rank]}: $(tail -3 "$tmp/reference.$rank")"
done
losses "$tmp/reference.0" >"$tmp/reference.losses"
[[ $(wc -l <"$tmp/reference.losses") -eq $iters ]] ||
  fail "reference run: want $iters losses, got: $(cat "$tmp/reference.losses")"

# 2. The same job, saving; the second node's link goes down once a checkpoint exists.
ckpt="$tmp/checkpoints"
job interrupted 29501 --distributed-timeout-minutes "$timeout_minutes" \
  --save "$ckpt" --save-interval "$save_interval"
for _ in $(seq 1200); do
  [[ -s "$ckpt/latest_checkpointed_iteration.txt" ]] && break
  kill -0 "${pids[0]}" 2>/dev/null || break
  sleep 0.05
done
[[ -s "$ckpt/latest_checkpointed_iteration.txt" ]] ||
  fail "interrupted run: no checkpoint appeared: $(tail -3 "$tmp/interrupted.0")"
ip -n "${ns[1]}" link set "${veth[1]}" down || fail "cannot take node 1's link down"
cut_at=$(losses "$tmp/interrupted.0" | tail -1)
echo "link of node 1 (ranks 2, 3) down after iteration ${cut_at%% *}"
# Bounds, in seconds after the cut: every rank ends at the timeout of the collective it
# waits in; the second node's ranks then try for at most 5 s to read the progress board
# from the TCP store behind the cut link (rank 0 serves it), which once cost them a
# whole timeout more.
survivor_bound=$((timeout_minutes * 60 + 20))
cut_off_bound=$((timeout_minutes * 60 + 30))
wait_job interrupted "$cut_off_bound"
echo "interrupted run: exit codes ${codes[*]}, seconds after the cut ${ended[*]}"
for rank in "${ranks[@]}"; do
  [[ ${codes[rank]} != 0 ]] || fail "interrupted run: rank $rank exited 0 (did the run end before the cut? raise iters)"
  echo "interrupted run, rank $rank: $(grep -m1 'error' "$tmp/interrupted.$rank")"
done
for rank in 0 1; do
  [[ ${ended[rank]} != - ]] && awk -v t="${ended[rank]}" -v b="$survivor_bound" 'BEGIN { exit !(t <= b) }' ||
    fail "interrupted run: rank $rank (first node) ended ${ended[rank]}s after the cut, want at most ${survivor_bound}s"
done
# What each rank names depends on where the cut fell, and the test must not: a rank waits
# either in a collective with its data-parallel peer across the link (rank 0 <-> 2,
# 1 <-> 3), which it names (as a rank that did not arrive, or, when the peer had posted
# its progress before the cut, as the peer of a stalled transfer), or, when its own
# transfer had completed just before the cut, in a collective with its node neighbour,
# which still waits on its own peer across the link: then it names the neighbour, and
# the neighbour names its peer. E.g. "trainer: error: rank 0: AllReduceSum #9 on group
# dp[0,2] (global ranks 0,2) timed out after 1m0.005s (timeout 1m): ranks that did not
# arrive: group rank 1 (global rank 2, last entered AllReduceSum, after collective #8)",
# or "...: every rank had arrived, so the transfer stalled, not a rank: transfers with
# group rank 1 (global rank 2) did not complete; ...". A bare "every rank had arrived"
# names nobody, and fails here.
error_of() { grep -m1 "^trainer: error: rank $1: " "$tmp/interrupted.$1"; }
# names RANK OTHER: whether RANK's error names global rank OTHER as the rank it waited on.
names() {
  error_of "$1" | grep -qE "^trainer: error: rank $1: [A-Za-z]+ #[0-9]+ on group .* (timed out|failed) after .*(ranks that did not arrive: |the transfer stalled, not a rank: transfers with ).*\(global rank $2[,)]"
}
for rank in "${ranks[@]}"; do
  peer=$(((rank + 2) % 4))
  neighbour=$((rank ^ 1))
  names "$rank" "$peer" && continue
  names "$rank" "$neighbour" && names "$neighbour" "$((neighbour ^ 2))" && continue
  fail "interrupted run: rank $rank names neither global rank $peer across the link nor its neighbour $neighbour waiting on it: $(error_of "$rank")"
done

# 3. The link back, resume from the last checkpoint.
ip -n "${ns[1]}" link set "${veth[1]}" up || fail "cannot bring node 1's link up"
resumed_from=$(cat "$ckpt/latest_checkpointed_iteration.txt")
((resumed_from < iters)) || fail "the last checkpoint is of iteration $resumed_from: the cut came too late"
job resumed 29502 --distributed-timeout-minutes "$timeout_minutes" --load "$ckpt"
wait_job resumed 120
for rank in "${ranks[@]}"; do
  [[ ${codes[rank]} == 0 ]] || fail "resumed run: rank $rank exited ${codes[rank]}: $(tail -3 "$tmp/resumed.$rank")"
done
losses "$tmp/resumed.0" >"$tmp/resumed.losses"
awk -v from="$resumed_from" '$1 > from' "$tmp/reference.losses" >"$tmp/reference.tail"
[[ $(wc -l <"$tmp/resumed.losses") -eq $((iters - resumed_from)) ]] ||
  fail "resumed run from $resumed_from: want $((iters - resumed_from)) losses, got $(wc -l <"$tmp/resumed.losses")"
diff "$tmp/reference.tail" "$tmp/resumed.losses" >"$tmp/diff" ||
  fail "resumed losses differ from the uninterrupted run's (< uninterrupted, > resumed): $(cat "$tmp/diff")"
echo "resumed from iteration $resumed_from: iterations $((resumed_from + 1))-$iters equal the uninterrupted run's"

finish
