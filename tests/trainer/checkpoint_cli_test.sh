#!/usr/bin/env bash
# The trainer binary's --load and --save checks end to end: checkpoint material that
# cannot be loaded stops the run (exit 2, the file and the fix named) and leaves the
# folder byte for byte as it was, instead of training from scratch over it; only an
# absent or empty --load folder starts from scratch (and not with
# --exit-on-missing-checkpoint); a checkpoint without optimizer state, or with another
# vocabulary padding, names the flags that load it; an unwritable --save fails before
# training; a resume under another global batch size warns; ranks that would load
# different checkpoints stop before writing anything; a --save holding another run's
# checkpoints, or in use by a running job, is refused; interrupted saves are cleaned
# up; relaunching a finished run trains and changes nothing.
source "$(dirname "$0")/trainer_test_lib.sh"
cd "$tmp" || exit 1


# Short runs of the tiny model; --lr-warmup-iters 0 lets any --train-iters validate.
train() { "$trainer" --config "$config" --lr-warmup-iters 0 --log-interval 1 "$@"; }

# Every path and the hash of every file under a folder: equal before and after means
# nothing was created, removed or changed.
snapshot() { (cd "$1" && find . | LC_ALL=C sort && find . -type f -print0 | LC_ALL=C sort -z |
  xargs -0 sha256sum); }

# expect_refusal NAME FOLDER "<substring>"... -- trainer args: exit 2 (input to change,
# base/exit_code.h), each substring in stderr, no training step, FOLDER unchanged.
expect_refusal() {
  local name="$1" folder="$2"; shift 2
  local wants=()
  while [[ "$1" != "--" ]]; do wants+=("$1"); shift; done
  shift
  local before
  before=$(snapshot "$folder")
  train "$@" >"$name.out" 2>"$name.err"
  local code=$?
  [[ $code -eq 2 ]] || fail "$name: exited $code, want 2: $(tail -3 "$name.err")"
  for want in "${wants[@]}"; do
    grep -qF -- "$want" "$name.err" || fail "$name: stderr lacks '$want': $(grep error "$name.err")"
  done
  grep -q '^ iteration ' "$name.out" && fail "$name: trained"
  [[ "$(snapshot "$folder")" == "$before" ]] || fail "$name: $folder changed on disk"
}

# A clean checkpoint folder: iterations 5, 10, 15 and 20.
train --train-iters 20 --save clean --save-interval 5 >clean.log 2>&1 ||
  fail "saving run exited non-zero: $(tail -3 clean.log)"
[[ "$(cat clean/latest_checkpointed_iteration.txt)" == 20 ]] || fail "no checkpoint of iteration 20"
fresh_copy() { rm -rf "$1" && cp -r clean "$1"; }

# 1. latest_checkpointed_iteration.txt names an iteration that is not there.
fresh_copy dangling
echo 30 >dangling/latest_checkpointed_iteration.txt
expect_refusal dangling dangling \
  "dangling/iter_0000030 does not exist although latest_checkpointed_iteration.txt names it" \
  "committed iterations in dangling: 5, 10, 15, 20" "nothing was loaded or changed" \
  "--ckpt-step 20 to resume" "use a fresh --save folder" \
  -- --train-iters 25 --load dangling --save dangling

# A rank's data file is missing from the latest iteration.
fresh_copy no_data
rm no_data/iter_0000020/rank_00000.bin
expect_refusal no_data no_data \
  "checkpoint data file no_data/iter_0000020/rank_00000.bin is missing" "--ckpt-step 15" \
  -- --train-iters 25 --load no_data --save no_data

# A data file with a flipped byte: caught by its checksum, still nothing written.
fresh_copy flipped
python3 - flipped/iter_0000020/rank_00000.bin <<'EOF'
import sys
path = sys.argv[1]
data = bytearray(open(path, 'rb').read())
data[100] ^= 0x10
open(path, 'wb').write(data)
EOF
expect_refusal flipped flipped "checksum mismatch in flipped/iter_0000020/rank_00000.bin" \
  "--ckpt-step 15" -- --train-iters 25 --load flipped --save flipped

# --ckpt-step names an iteration that is not there: no fallback to another one.
expect_refusal absent_step clean "checkpoint of iteration 12 not found" \
  "--ckpt-step 20 to resume" -- --train-iters 25 --load clean --save clean --ckpt-step 12

# Committed folders but no latest file.
fresh_copy no_latest
rm no_latest/latest_checkpointed_iteration.txt
expect_refusal no_latest no_latest "--load no_latest holds committed checkpoints (iterations 5, 10, 15, 20)" \
  "--ckpt-step 20" -- --train-iters 25 --load no_latest --save no_latest
train --train-iters 22 --load no_latest --ckpt-step 20 >no_latest_step.out 2>&1 ||
  fail "--ckpt-step 20 without a latest file exited non-zero: $(tail -3 no_latest_step.out)"
grep -qF "loaded no_latest/iter_0000020 (iteration 20)" no_latest_step.out ||
  fail "--ckpt-step 20 did not load iteration 20"

# An absent --load folder starts from scratch (Megatron), creating nothing there...
train --train-iters 2 --load absent >absent.out 2>&1 || fail "absent --load exited non-zero"
grep -qF "conveyor: --load absent does not exist; starting from iteration 0" absent.out ||
  fail "no notice for an absent --load: $(grep conveyor absent.out)"
[[ -e absent ]] && fail "an absent --load folder was created"
# ...and so does one with no checkpoint (here, only an interrupted save's leftovers),
mkdir -p leftovers/iter_0000005.tmp-0123456789ab
train --train-iters 2 --load leftovers >leftovers.out 2>&1 || fail "leftovers --load exited non-zero"
grep -qF "conveyor: --load leftovers holds no checkpoint" leftovers.out || fail "no notice for leftovers"
# ...but not with --exit-on-missing-checkpoint.
expect_refusal exit_on_missing leftovers \
  "--exit-on-missing-checkpoint: --load leftovers holds no checkpoint" \
  -- --train-iters 2 --load leftovers --save leftovers --exit-on-missing-checkpoint
train --train-iters 2 --load absent --exit-on-missing-checkpoint >absent2.out 2>absent2.err
code=$?
[[ $code -eq 2 ]] || fail "--exit-on-missing-checkpoint with an absent folder exited $code, want 2"
grep -qF -- "--exit-on-missing-checkpoint: --load absent does not exist" absent2.err ||
  fail "--exit-on-missing-checkpoint error lacks the folder: $(cat absent2.err)"

# 2. A checkpoint saved with --no-save-optim needs --no-load-optim or --finetune.
train --train-iters 3 --save no_optim --no-save-optim >no_optim.log 2>&1 || fail "--no-save-optim run failed"
expect_refusal no_optim no_optim "no_optim/iter_0000003 was saved without optimizer state (--no-save-optim)" \
  "pass --no-load-optim" "or --finetune" -- --train-iters 4 --load no_optim --save no_optim
train --train-iters 4 --load no_optim --no-load-optim >no_optim_ok.out 2>&1 ||
  fail "--no-load-optim did not load a --no-save-optim checkpoint: $(tail -3 no_optim_ok.out)"

# 3. Another vocabulary padding: 512 padded by 192 x TP 1 is 576 rows, by 192 x TP 2 768.
train --train-iters 3 --save vocab --make-vocab-size-divisible-by 192 >vocab.log 2>&1 ||
  fail "vocabulary saving run failed"
expect_refusal vocab vocab "the padded vocabulary differs" "has 576 rows" "has 768" \
  "--make-vocab-size-divisible-by x --tensor-model-parallel-size" \
  "pass --make-vocab-size-divisible-by 72" \
  -- --train-iters 4 --load vocab --make-vocab-size-divisible-by 192 --nproc-per-node 2 \
  --tensor-model-parallel-size 2
train --train-iters 4 --load vocab --make-vocab-size-divisible-by 72 --nproc-per-node 2 \
  --tensor-model-parallel-size 2 >vocab_ok.out 2>&1 ||
  fail "the suggested --make-vocab-size-divisible-by 72 does not load: $(tail -3 vocab_ok.out)"

# 4. An unwritable --save fails before training: under a regular file...
echo x >a_file
train --train-iters 2 --save a_file/ckpt >bad_save.out 2>bad_save.err
code=$?
[[ $code -eq 2 ]] || fail "--save under a file exited $code, want 2"
grep -qF -- "--save a_file/ckpt cannot hold checkpoints (cannot create folder a_file/ckpt" bad_save.err ||
  fail "--save error lacks the flag or the reason: $(cat bad_save.err)"
grep -q '^ iteration ' bad_save.out && fail "trained before finding --save unwritable"
# ...a file itself, on every rank of a job (each reports it and none trains)...
train --train-iters 2 --save a_file --nproc-per-node 2 >bad_save2.out 2>bad_save2.err
code=$?
[[ $code -eq 2 ]] || fail "--save a file with 2 ranks exited $code, want 2"
grep -qF -- "--save a_file cannot hold checkpoints (a_file is a file, not a folder)" bad_save2.err ||
  fail "--save a file: $(cat bad_save2.err)"
grep -q '^ iteration ' bad_save2.out && fail "2 ranks trained before finding --save unwritable"
# ...and a read-only folder (root writes anywhere: then there is nothing to test).
mkdir -p read_only && chmod 555 read_only
if ! touch read_only/probe 2>/dev/null; then
  train --train-iters 2 --save read_only >ro.out 2>ro.err
  code=$?
  [[ $code -eq 2 ]] || fail "read-only --save exited $code, want 2"
  grep -qF -- "--save read_only cannot hold checkpoints" ro.err && grep -qF "Permission denied" ro.err ||
    fail "read-only --save: $(cat ro.err)"
fi
chmod 755 read_only
# A --save that does not exist yet is created, and the probe leaves nothing behind.
train --train-iters 2 --save new/nested --save-interval 100 >new.out 2>&1 || fail "new --save failed"
[[ "$(ls -A new/nested)" == $'iter_0000002\nlatest_checkpointed_iteration.txt' ]] ||
  fail "new --save holds: $(ls -A new/nested)"

# 5. Resuming under DP 2 with the config's --num-micro-batches 2 doubles the global batch
# (8 -> 16): one warning, on the logging rank, naming both and the flag that keeps 8.
train --train-iters 22 --load clean --nproc-per-node 2 >dp2.out 2>&1 || fail "DP2 resume failed"
[[ $(grep -c "warning: the global batch size changes on resume" dp2.out) -eq 1 ]] ||
  fail "want one global batch warning: $(grep -i warning dp2.out)"
grep -qF "trained with 8 samples per step (160 samples consumed in 20 iterations), this run takes 16" dp2.out &&
  grep -qF -- "pass --global-batch-size 8 to keep it" dp2.out || fail "warning text: $(grep warning dp2.out)"
train --train-iters 22 --load clean --nproc-per-node 2 --global-batch-size 8 --num-micro-batches 0 \
  >kept.out 2>&1 || fail "the suggested --global-batch-size 8 failed: $(tail -3 kept.out)"
grep -q "global batch size changes" kept.out && fail "warned with the suggested --global-batch-size"
train --train-iters 22 --load clean >same.out 2>&1 || fail "same-layout resume failed"
grep -q "global batch size changes" same.out && fail "warned without a change"

# 6. Ranks whose --load views differ (a --load folder per node, a stale copy on one
# node) would train apart: every rank stops, naming what each loaded and the fix, and
# nothing is written. The two ranks start as torchrun or srun starts them, with the same
# flags (--load ckpt --save ckpt), each in a folder of its own standing for its node's
# storage.
# mismatched_ranks NAME NODE0_CKPT NODE1_CKPT "<substring>"...: node N's ckpt is a copy of
# NODEN_CKPT ("-": none); both ranks exit 2, each substring in both ranks' stderr, no
# training step, node 0's ckpt unchanged and node 1's not created when it had none.
mismatched_ranks() {
  local name="$1" sources=("$2" "$3") rank before
  shift 3
  for rank in 0 1; do
    mkdir -p "$name.node$rank"
    [[ "${sources[rank]}" == - ]] || cp -r "${sources[rank]}" "$name.node$rank/ckpt"
  done
  before=$(snapshot "$name.node0/ckpt")
  for rank in 0 1; do
    (cd "$name.node$rank" && RANK=$rank WORLD_SIZE=2 LOCAL_RANK=$rank \
      CONVEYOR_RUN_DIR="$tmp/$name.run" timeout 300 \
      "$trainer" --config "$config" --lr-warmup-iters 0 --log-interval 1 --train-iters 25 \
      --distributed-timeout-minutes 1 --load ckpt --save ckpt \
      >"../$name.$rank.out" 2>"../$name.$rank.err") &
    pids[rank]=$!
  done
  for rank in 0 1; do
    wait "${pids[rank]}"
    local code=$?
    [[ $code -eq 2 ]] || fail "$name: rank $rank exited $code, want 2: $(tail -3 "$name.$rank.err")"
    for want in "$@"; do
      grep -qF -- "$want" "$name.$rank.err" ||
        fail "$name: rank $rank's stderr lacks '$want': $(grep error "$name.$rank.err")"
    done
    grep -q '^ iteration ' "$name.$rank.out" && fail "$name: rank $rank trained"
  done
  [[ "$(snapshot "$name.node0/ckpt")" == "$before" ]] || fail "$name: node 0's ckpt changed on disk"
  [[ "${sources[1]}" == - && -e "$name.node1/ckpt" ]] && fail "$name: node 1's ckpt was created"
}
# Rank 1's node has no --load folder: it would start from scratch.
mismatched_ranks per_node_load clean - \
  "the ranks loaded different checkpoints (rank 0: iteration 20 (160 samples consumed); rank 1: no checkpoint (starting from iteration 0))" \
  "nothing was trained or changed" "Every rank must see the same --load folder"
grep -qF "this rank's is ckpt" per_node_load.1.err || fail "rank 1 does not name its --load"
# Rank 1 sees a stale copy, whose latest file still names iteration 15.
fresh_copy stale
echo 15 >stale/latest_checkpointed_iteration.txt
mismatched_ranks stale_view clean stale \
  "(rank 0: iteration 20 (160 samples consumed); rank 1: iteration 15 (120 samples consumed))"

# 7. A --save folder holding another run's committed checkpoints is refused (exit 2, the
# folder byte for byte as it was, its interrupted save not cleaned): a fresh run, a run
# resuming from another folder, --finetune restarting at 0, on every rank of a job.
refuse_save="--save foreign holds another run's checkpoints (latest iteration 20) and"
choices=("To resume that run, pass --load foreign" "choose another --save folder"
  "pass --overwrite-save")
fresh_copy foreign
mkdir foreign/iter_0000025.tmp-0123456789ab
expect_refusal foreign_fresh foreign "$refuse_save this run starts from scratch (no --load)" \
  "nothing was trained or changed" "${choices[@]}" -- --train-iters 3 --save foreign
expect_refusal foreign_empty_load foreign \
  "$refuse_save this run starts from scratch (--load absent holds no checkpoint)" \
  "${choices[@]}" -- --train-iters 3 --load absent --save foreign
expect_refusal foreign_other_load foreign \
  "$refuse_save this run resumes from --load clean (iteration 20), another folder" \
  "${choices[@]}" -- --train-iters 22 --load clean --save foreign
expect_refusal foreign_finetune foreign \
  "$refuse_save --finetune restarts at iteration 0 (from --load foreign)" "${choices[@]}" \
  -- --train-iters 3 --load foreign --save foreign --finetune
expect_refusal foreign_pp2 foreign "$refuse_save this run starts from scratch (no --load)" \
  "rank(s) 0 could not prepare --save" \
  -- --train-iters 3 --save foreign --nproc-per-node 2 --pipeline-model-parallel-size 2
# --overwrite-save saves over them: iteration 3 is the latest, and once it is committed
# the earlier run's iterations go (named), so that no later --ckpt-step resumes from them.
train --train-iters 3 --save foreign --overwrite-save >overwrite.out 2>&1 ||
  fail "--overwrite-save exited non-zero: $(tail -3 overwrite.out)"
[[ "$(cat foreign/latest_checkpointed_iteration.txt)" == 3 ]] || fail "--overwrite-save did not save"
[[ "$(ls -A foreign | tr '\n' ' ')" == "iter_0000003 latest_checkpointed_iteration.txt " ]] ||
  fail "--overwrite-save left: $(ls -A foreign)"
grep -qF "conveyor: --overwrite-save: removed the earlier run's checkpoints from --save foreign now that this run has committed its own: iter_0000005, iter_0000010, iter_0000015, iter_0000020" overwrite.out ||
  fail "--overwrite-save did not name what it removed: $(grep conveyor overwrite.out)"
# Megatron's pattern stays: --load D --save D starts D when absent, resumes it, and
# --ckpt-step rewinds within it.
train --train-iters 3 --load own --save own >own1.out 2>&1 || fail "--load/--save own start failed"
train --train-iters 5 --load own --save own >own2.out 2>&1 || fail "--load/--save own resume failed"
grep -qF "loaded own/iter_0000003 (iteration 3)" own2.out || fail "own did not resume at 3"
train --train-iters 4 --load own --save own --ckpt-step 3 >own3.out 2>&1 ||
  fail "--ckpt-step 3 within own failed: $(tail -3 own3.out)"
[[ "$(cat own/latest_checkpointed_iteration.txt)" == 4 ]] || fail "own's latest is not 4"

# 8. A run that starts in its own folder removes what interrupted saves left there.
fresh_copy cleaned
mkdir cleaned/iter_0000021.tmp-0123456789ab
echo 21 >cleaned/latest_checkpointed_iteration.txt.tmp-0123456789ab
train --train-iters 21 --load cleaned --save cleaned >cleaned.out 2>&1 ||
  fail "resume with leftovers failed: $(tail -3 cleaned.out)"
grep -qF "conveyor: removed what interrupted saves left in --save cleaned: iter_0000021.tmp-0123456789ab, latest_checkpointed_iteration.txt.tmp-0123456789ab" cleaned.out ||
  fail "no notice of the removed leftovers: $(grep conveyor cleaned.out)"
[[ "$(ls -A cleaned | tr '\n' ' ')" == "iter_0000005 iter_0000010 iter_0000015 iter_0000020 iter_0000021 latest_checkpointed_iteration.txt " ]] ||
  fail "cleaned holds: $(ls -A cleaned)"

# 9. Two runs at once in one --save: the second stops at once (exit 1, naming the
# folder and the first run's pid and host, training nothing), and the first, saving
# asynchronously, goes on to its own checkpoint.
# (The trainer itself in the background, not `train`'s subshell: $! is its pid.)
"$trainer" --config "$config" --lr-warmup-iters 0 --train-iters 100000 --log-interval 100000 \
  --exit-signal-handler --async-save --save-interval 2 --save busy >busy.out 2>&1 &
busy=$!
for _ in $(seq 300); do grep -q 'memory (MiB)' busy.out && break; sleep 0.1; done
for args in "--load busy --save busy" "--save busy"; do
  train --train-iters 3 $args >second.out 2>second.err
  code=$?
  [[ $code -eq 1 ]] || fail "second run ($args) exited $code, want 1"
  grep -qF -- "--save busy is in use by another run (pid $busy on host $(uname -n), since " second.err &&
    grep -qF "holds its lock busy/.conveyor-save.lock); two runs saving into one folder overwrite each other's checkpoints" second.err &&
    grep -qF "Wait for that run to end or stop it, or choose another --save folder" second.err ||
    fail "second run ($args): $(cat second.err)"
  grep -q '^ iteration ' second.out && fail "second run ($args) trained"
done
kill -TERM "$busy"
wait "$busy"
code=$?
[[ $code -eq 0 ]] || fail "the first run exited $code after SIGTERM: $(tail -3 busy.out)"
last=$(sed -n 's/^conveyor: exiting after iteration \([0-9]*\):.*/\1/p' busy.out)
[[ -n "$last" && "$(cat busy/latest_checkpointed_iteration.txt)" == "$last" && -d "busy/iter_$(printf %07d "$last")" ]] ||
  fail "the first run's checkpoint: exited after '$last', latest $(cat busy/latest_checkpointed_iteration.txt)"
[[ -e busy/.conveyor-save.lock ]] && fail "the lock file outlived its run"

# 10. Relaunching a finished run trains nothing, says so, exits 0 and changes nothing
# (no save, no evaluation, no trace), on every pipeline stage, with and without
# evaluation and exit conditions; a larger --train-iters goes on from there.
pp2=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --vocab-size 512
  --micro-batch-size 2 --mock-data --global-batch-size 8 --nproc-per-node 2
  --pipeline-model-parallel-size 2 --train-iters 12)
# finished NAME FOLDER ARGS...: a relaunch of FOLDER's finished run.
finished() {
  local name="$1" folder="$2" before code
  shift 2
  before=$(snapshot "$folder")
  "$@" --trace-file "$name.trace" >"$name.out" 2>&1
  code=$?
  [[ $code -eq 0 ]] || fail "$name: exited $code, want 0: $(tail -3 "$name.out")"
  grep -qF "conveyor: nothing to train: --load $folder resumes at iteration 12 and --train-iters is 12; raise --train-iters to train further" "$name.out" &&
    grep -qx "conveyor: trained 0 iterations" "$name.out" || fail "$name: $(grep conveyor "$name.out")"
  grep -qE '^ iteration |validation loss' "$name.out" && fail "$name: trained or evaluated"
  [[ -e "$name.trace" ]] && fail "$name: wrote a trace"
  [[ "$(snapshot "$folder")" == "$before" ]] || fail "$name: $folder changed on disk"
}
for eval in "" "--eval-iters 0"; do
  rm -rf done_pp2
  "$trainer" "${pp2[@]}" $eval --save done_pp2 >done_pp2.out 2>&1 || fail "PP2 run $eval failed"
  finished "relaunch_pp2${eval// /}" done_pp2 "$trainer" "${pp2[@]}" $eval --save done_pp2 --load done_pp2
done
finished relaunch_exit done_pp2 "$trainer" "${pp2[@]}" --save done_pp2 --load done_pp2 \
  --exit-interval 4 --exit-duration-in-mins 60
train --train-iters 12 --save done_pp1 >done_pp1.out 2>&1 || fail "PP1 run failed"
finished relaunch_pp1 done_pp1 train --train-iters 12 --load done_pp1 --save done_pp1
"$trainer" "${pp2[@]/#12/14}" --load done_pp2 --save done_pp2 >more.out 2>&1 ||
  fail "a larger --train-iters failed: $(tail -3 more.out)"
grep -q "conveyor: trained 2 iterations, final lm loss" more.out && grep -q "on validation set" more.out ||
  fail "a larger --train-iters: $(grep conveyor more.out)"
[[ "$(cat done_pp2/latest_checkpointed_iteration.txt)" == 14 ]] || fail "no checkpoint of iteration 14"

# A checkpoint of another model names the flags that differ with the checkpoint's values;
# a mixture of experts' too: its experts, and the expert bias, state that a checkpoint
# saved without --moe-router-enable-expert-bias does not hold.
moe=(--num-experts 4 --moe-ffn-hidden-size 32 --disable-bias-linear)
train --train-iters 2 "${moe[@]}" --save moe_ckpt >moe_ckpt.out 2>&1 ||
  fail "MoE run failed: $(tail -3 moe_ckpt.out)"
expect_refusal moe_bias moe_ckpt "--load moe_ckpt/iter_0000002 holds a different model" \
  "--moe-router-enable-expert-bias true (checkpoint: false)" "use the checkpoint's values" \
  -- --train-iters 4 "${moe[@]}" --moe-router-score-function sigmoid \
  --moe-router-enable-expert-bias --load moe_ckpt --save moe_ckpt
expect_refusal moe_dense moe_ckpt "--num-experts 0 (checkpoint: 4)" \
  -- --train-iters 4 --disable-bias-linear --load moe_ckpt --save moe_ckpt

# RoPE's scalings and the sliding window may change between runs, as --rotary-base may
# (they hold no parameters): a RoPE checkpoint resumes under YaRN with a window, then
# under Llama 3.1's scaling; learned positions are still another model.
train --train-iters 2 --position-embedding-type rope --save rope_ckpt >rope_ckpt.out 2>&1 ||
  fail "RoPE run failed: $(tail -3 rope_ckpt.out)"
train --train-iters 4 --position-embedding-type yarn --rotary-scaling-factor 4 \
  --window-size 3,0 --load rope_ckpt --save rope_ckpt >rope_yarn.out 2>&1 ||
  fail "a YaRN resume of a RoPE checkpoint failed: $(tail -3 rope_yarn.out)"
grep -q "conveyor: trained 2 iterations" rope_yarn.out || fail "YaRN resume: $(grep conveyor rope_yarn.out)"
train --train-iters 6 --position-embedding-type rope --use-rope-scaling --load rope_ckpt \
  --save rope_ckpt >rope_llama3.out 2>&1 ||
  fail "a Llama 3.1 scaling resume failed: $(tail -3 rope_llama3.out)"
expect_refusal rope_learned rope_ckpt \
  "--position-embedding-type \"learned_absolute\" (checkpoint: \"rope\")" \
  -- --train-iters 8 --load rope_ckpt --save rope_ckpt

finish
