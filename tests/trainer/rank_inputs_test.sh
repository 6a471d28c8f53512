#!/usr/bin/env bash
# What the ranks of a job read, end to end with two real ranks started as torchrun
# starts them (RANK, WORLD_SIZE, LOCAL_RANK), each in a folder of its own standing for
# its node's storage, with the same relative paths:
#   1. per-node and per-rank --data-cache-path folders on identical data train (every
#      rank builds its own view's cache once; before, rank 1 waited 30 minutes for a
#      file that only its own folder could hold, and rank 0 failed at the timeout);
#   2. a stale copy of the dataset on one node stops both ranks before training (exit 2),
#      naming the file, the ranks and the contents each read;
#   3. node-local copies of two runs' checkpoints of the same iteration stop both ranks
#      (exit 2), naming the manifests' checksums;
#   4. other --load-hf weights on one node (another run's export) stop both (exit 2).
# Copies of the same files at each node train.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1


# make_dataset PREFIX SEED: a Megatron uint16 dataset of 400 documents of 20-120 tokens.
make_dataset() {
  python3 - "$1" "$2" <<'EOF'
import random, struct, sys
prefix, rng = sys.argv[1], random.Random(int(sys.argv[2]))
lengths = [rng.randint(20, 120) for _ in range(400)]
pointers, end = [], 0
with open(prefix + ".bin", "wb") as f:
    for n in lengths:
        f.write(struct.pack("<%dH" % n, *[rng.randrange(1, 500) for _ in range(n)]))
        pointers.append(end)
        end += 2 * n
with open(prefix + ".idx", "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lengths), len(lengths) + 1))
    f.write(struct.pack("<%di" % len(lengths), *lengths))
    f.write(struct.pack("<%dq" % len(pointers), *pointers))
    f.write(struct.pack("<%dq" % (len(lengths) + 1), *range(len(lengths) + 1)))
EOF
}

data_flags=(--mock-data=false --data-path corpus --split 8,1,1 --eval-iters 1)

# two_ranks NAME LOCAL_RANK_OF_RANK_1 -- trainer args: runs rank r in NAME.node<r>
# (LOCAL_RANK 0 for rank 0); codes[r] is its exit code, NAME.<r>.{out,err} its output.
two_ranks() {
  local name="$1" local1="$2" rank pids=()
  shift 3
  for rank in 0 1; do
    (cd "$name.node$rank" && RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$((rank == 0 ? 0 : local1)) \
      CONVEYOR_RUN_DIR="$tmp/$name.run" timeout 300 \
      "$trainer" --config "$config" --lr-warmup-iters 0 --log-interval 1 \
      --distributed-timeout-minutes 1 "$@" >"../$name.$rank.out" 2>"../$name.$rank.err") &
    pids[rank]=$!
  done
  for rank in 0 1; do
    wait "${pids[rank]}"
    codes[rank]=$?
  done
}

# expect_refused NAME "<substring>"...: both ranks exited 2 with each substring in their
# stderr, and neither trained.
expect_refused() {
  local name="$1" rank want
  shift
  for rank in 0 1; do
    [[ ${codes[rank]} -eq 2 ]] ||
      fail "$name: rank $rank exited ${codes[rank]}, want 2: $(tail -2 "$name.$rank.err")"
    for want in "$@"; do
      grep -qF -- "$want" "$name.$rank.err" ||
        fail "$name: rank $rank's stderr lacks '$want': $(grep error "$name.$rank.err")"
    done
    grep -q '^ iteration ' "$name.$rank.out" && fail "$name: rank $rank trained"
  done
}

# 1. Each rank's own cache folder, ranks of one node (rank 1 is LOCAL_RANK 1) and of two
# nodes (both LOCAL_RANK 0); then a folder both share, written once.
for layout in "same_node 1" "two_nodes 0"; do
  read -r name local1 <<<"$layout"
  for rank in 0 1; do mkdir -p "$name.node$rank" && make_dataset "$name.node$rank/corpus" 1; done
  two_ranks "$name" "$local1" -- --train-iters 3 "${data_flags[@]}" --data-cache-path cache
  for rank in 0 1; do
    [[ ${codes[rank]} -eq 0 ]] ||
      fail "$name: rank $rank exited ${codes[rank]}: $(tail -2 "$name.$rank.err")"
    count=$(ls "$name.node$rank/cache" 2>/dev/null | grep -c 'description.txt$')
    [[ $count -eq 3 ]] || fail "$name: node $rank's cache holds $count index sets, want 3"
  done
  grep -q 'trained 3 iterations' "$name.0.out" "$name.1.out" || fail "$name: no training"
done
for rank in 0 1; do mkdir -p "shared.node$rank" && make_dataset "shared.node$rank/corpus" 1; done
two_ranks shared 1 -- --train-iters 3 "${data_flags[@]}" --data-cache-path "$tmp/shared.cache"
[[ ${codes[0]} -eq 0 && ${codes[1]} -eq 0 ]] ||
  fail "shared cache: exit codes ${codes[*]}: $(tail -2 shared.1.err)"
count=$(ls shared.cache | grep -c 'description.txt$')
[[ $count -eq 3 ]] || fail "shared cache: $count index sets, want 3"

# 2. Node 1 holds a stale copy of the corpus: as many documents, other tokens.
mkdir -p stale.node0 stale.node1
make_dataset stale.node0/corpus 1
make_dataset stale.node1/corpus 2
two_ranks stale 1 -- --train-iters 3 "${data_flags[@]}"
expect_refused stale "the ranks read different files, and would train apart" \
  "--data-path dataset 1 of 1 (.bin): " "on rank 0 (rank 0 reads corpus.bin)" \
  "on rank 1 (rank 1 reads corpus.bin)" "give every node the same copy"

# 3. Two runs (other seeds) saved iteration 3; node 0 resumes from one, node 1 from the
# other: the same iteration and consumed samples, other weights.
for seed in 1 2; do
  "$trainer" --config "$config" --lr-warmup-iters 0 --train-iters 3 --seed $seed \
    --save "run$seed" >"run$seed.log" 2>&1 ||
    fail "run $seed did not save: $(tail -2 "run$seed.log")"
done
mkdir -p ckpt.node0 ckpt.node1
cp -r run1 ckpt.node0/ckpt
cp -r run2 ckpt.node1/ckpt
two_ranks ckpt 1 -- --train-iters 5 --load ckpt
expect_refused ckpt "the ranks loaded different checkpoints" \
  "(rank 0: iteration 3 (24 samples consumed, manifest CRC32C " \
  "rank 1: iteration 3 (24 samples consumed, manifest CRC32C " \
  "this rank's is ckpt (it loaded ckpt/iter_0000003/manifest.pb)"
# Copies of one run's checkpoint at each node agree (no --save: it must be one folder).
rm -rf ckpt.node1/ckpt ckpt.run && cp -r run1 ckpt.node1/ckpt
two_ranks ckpt 1 -- --train-iters 5 --load ckpt
[[ ${codes[0]} -eq 0 && ${codes[1]} -eq 0 ]] ||
  fail "copies of one checkpoint: exit codes ${codes[*]}: $(tail -2 ckpt.1.err)"

# 4. --load-hf: node 1 holds the other run's export, the same model with other weights;
# copies of one export at each node agree.
for seed in 1 2; do
  "$trainer" export --load "run$seed" --format hf --output "hf$seed" >"hf$seed.log" 2>&1 ||
    fail "export of run $seed: $(tail -2 "hf$seed.log")"
done
mkdir -p hf.node0 hf.node1
cp -r hf1 hf.node0/hf
cp -r hf2 hf.node1/hf
two_ranks hf 1 -- --train-iters 2 --load-hf hf
expect_refused hf "the ranks read different files, and would train apart" \
  "--load-hf model.safetensors: " "on rank 0 (rank 0 reads hf/model.safetensors)" \
  "on rank 1 (rank 1 reads hf/model.safetensors)"
rm -rf hf.node1/hf hf.run && cp -r hf1 hf.node1/hf
two_ranks hf 1 -- --train-iters 2 --load-hf hf
[[ ${codes[0]} -eq 0 && ${codes[1]} -eq 0 ]] ||
  fail "copies of one export: exit codes ${codes[*]}: $(tail -2 hf.1.err)"

finish
