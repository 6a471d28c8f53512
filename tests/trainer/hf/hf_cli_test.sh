#!/usr/bin/env bash
# Hugging Face folders through the trainer binary, per Llama-family architecture: a
# tiny random model (make_tiny_hf_model.py) loaded with --load-hf, trained under one
# rank and under TP 2 x PP 2 (the same losses; mixtures of experts under EP 2), trained
# with --lr 0 and exported with
# `trainer export --format hf` (the original weights, stored as fp32, bf16 or fp16,
# back bit for bit; config.json loaded by transformers where it is installed:
# transformers_check.py; CONVEYOR_PYTHON names the interpreter, python3 by default);
# config.json fields that are refused (exit 2, named) or unknown (one warning).
set -uo pipefail
trainer="$1"
make_model="$2"
check="$3"
python="${CONVEYOR_PYTHON:-python3}"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

if ! "$python" -c "import numpy" 2>/dev/null; then
  echo "SKIPPED: $python cannot import numpy, which make_tiny_hf_model.py needs"
  exit 0
fi

losses() { sed -nE 's/.*lm loss: ([0-9.E+-]+).*/\1/p' "$1"; }
common=(--mock-data --seq-length 32 --micro-batch-size 2 --global-batch-size 8 --log-interval 1
        --hidden-dropout 0 --attention-dropout 0 --eval-iters 0)

# One weight dtype each: the export (fp32) holds the widened values exactly.
declare -A dtype=([llama]=F32 [mistral]=F16 [qwen2]=BF16 [qwen3]=BF16)
for arch in llama mistral qwen2 qwen3; do
  in="$tmp/$arch-in"
  "$python" "$make_model" "$in" --arch "$arch" --dtype "${dtype[$arch]}" --shard-bytes 60000 ||
    fail "$arch: generator"
  class=$(sed -nE 's/.*"(\w+ForCausalLM)".*/\1/p' "$in/config.json")
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 3 --lr 1e-3 >"$tmp/$arch-1.log" 2>&1 ||
    fail "$arch: one rank: $(tail -3 "$tmp/$arch-1.log")"
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 3 --lr 1e-3 \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --nproc-per-node 4 \
    >"$tmp/$arch-4.log" 2>&1 || fail "$arch: TP2 x PP2: $(tail -3 "$tmp/$arch-4.log")"
  mapfile -t one < <(losses "$tmp/$arch-1.log")
  mapfile -t four < <(losses "$tmp/$arch-4.log")
  [[ ${#one[@]} -eq 3 && ${#four[@]} -eq 3 ]] || fail "$arch: want 3 losses, got ${one[*]} / ${four[*]}"
  for i in 0 1 2; do
    awk -v a="${one[$i]:-0}" -v b="${four[$i]:-1}" 'BEGIN { d = a - b; exit !(d * d <= 1e-10 * a * a) }' ||
      fail "$arch: iteration $((i + 1)) loss ${one[$i]:-} (one rank) vs ${four[$i]:-} (TP2 x PP2)"
  done
  # --lr 0: the weights stay the file's, so the export must give them back exactly.
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 1 --lr 0 --save "$tmp/$arch-ckpt" \
    >"$tmp/$arch-save.log" 2>&1 || fail "$arch: save: $(tail -3 "$tmp/$arch-save.log")"
  "$trainer" export --load "$tmp/$arch-ckpt" --format hf --output "$tmp/$arch-out" \
    --architecture "$class" --max-shard-bytes 60000 --bos-token-id 1 --eos-token-id 2 \
    >"$tmp/$arch-export.log" 2>&1 ||
    fail "$arch: export: $(cat "$tmp/$arch-export.log")"
  "$python" "$check" "$in" "$tmp/$arch-out" || fail "$arch: transformers_check.py"
done

# Mixtures of experts: one rank and expert parallelism 2 (Qwen2-MoE and DeepSeek-V3 also
# under TP 2 with expert TP 1) train alike; an --lr 0 checkpoint saved under EP 2 exports
# the file's weights back bit for bit (DeepSeek-V3's expert bias kept still by a zero
# update rate).
for arch in mixtral qwen2_moe qwen3_moe deepseek_v3; do
  in="$tmp/$arch-in"
  "$python" "$make_model" "$in" --arch "$arch" || fail "$arch: generator"
  layout=(--expert-model-parallel-size 2 --nproc-per-node 2)
  [[ $arch == qwen2_moe || $arch == deepseek_v3 ]] &&
    layout+=(--tensor-model-parallel-size 2 --sequence-parallel --expert-tensor-parallel-size 1)
  still=()
  [[ $arch == deepseek_v3 ]] && still=(--moe-router-bias-update-rate 0)
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 3 --lr 1e-3 >"$tmp/$arch-1.log" 2>&1 ||
    fail "$arch: one rank: $(tail -3 "$tmp/$arch-1.log")"
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 3 --lr 1e-3 "${layout[@]}" \
    >"$tmp/$arch-ep.log" 2>&1 || fail "$arch: ${layout[*]}: $(tail -3 "$tmp/$arch-ep.log")"
  mapfile -t one < <(losses "$tmp/$arch-1.log")
  mapfile -t ep < <(losses "$tmp/$arch-ep.log")
  [[ ${#one[@]} -eq 3 && ${#ep[@]} -eq 3 ]] || fail "$arch: want 3 losses, got ${one[*]} / ${ep[*]}"
  for i in 0 1 2; do
    awk -v a="${one[$i]:-0}" -v b="${ep[$i]:-1}" 'BEGIN { d = a - b; exit !(d * d <= 1e-10 * a * a) }' ||
      fail "$arch: iteration $((i + 1)) loss ${one[$i]:-} (one rank) vs ${ep[$i]:-} (${layout[*]})"
  done
  "$trainer" --load-hf "$in" "${common[@]}" --train-iters 1 --lr 0 --save "$tmp/$arch-ckpt" \
    "${layout[@]}" "${still[@]}" >"$tmp/$arch-save.log" 2>&1 || fail "$arch: save: $(tail -3 "$tmp/$arch-save.log")"
  "$trainer" export --load "$tmp/$arch-ckpt" --format hf --output "$tmp/$arch-out" \
    >"$tmp/$arch-export.log" 2>&1 || fail "$arch: export: $(cat "$tmp/$arch-export.log")"
  "$python" "$check" "$in" "$tmp/$arch-out" || fail "$arch: transformers_check.py"
done

# --dtype bf16: BF16 tensors, torch_dtype in config.json, and the folder loads again.
"$trainer" export --load "$tmp/llama-ckpt" --format hf --output "$tmp/llama-bf16" --dtype bf16 \
  >"$tmp/bf16-export.log" 2>&1 || fail "bf16 export: $(cat "$tmp/bf16-export.log")"
grep -qF '"torch_dtype": "bfloat16"' "$tmp/llama-bf16/config.json" ||
  fail "bf16 export: config.json lacks torch_dtype bfloat16"
head -c 4096 "$tmp/llama-bf16/model.safetensors" | grep -qF '"dtype":"BF16"' ||
  fail "bf16 export: the safetensors header names no BF16 tensor"
"$trainer" --load-hf "$tmp/llama-bf16" "${common[@]}" --train-iters 1 >"$tmp/bf16-load.log" 2>&1 ||
  fail "bf16 export: --load-hf: $(tail -3 "$tmp/bf16-load.log")"
"$trainer" export --load "$tmp/llama-ckpt" --format hf --output "$tmp/bad" --dtype fp8 \
  >"$tmp/bad-dtype.log" 2>&1
[[ $? -eq 2 ]] || fail "--dtype fp8 should exit 2"
# An export never overwrites: a folder that holds files is refused (exit 2), untouched.
before=$(cd "$tmp/llama-bf16" && sha256sum ./*)
"$trainer" export --load "$tmp/llama-ckpt" --format hf --output "$tmp/llama-bf16" \
  >"$tmp/overwrite.log" 2>&1
[[ $? -eq 2 ]] || fail "an export into a non-empty folder should exit 2: $(cat "$tmp/overwrite.log")"
grep -qF "the folder is not empty" "$tmp/overwrite.log" ||
  fail "the non-empty --output is not named: $(cat "$tmp/overwrite.log")"
[[ "$(cd "$tmp/llama-bf16" && sha256sum ./*)" == "$before" ]] ||
  fail "the refused export changed the folder's files"
mkdir "$tmp/empty-out"
"$trainer" export --load "$tmp/llama-ckpt" --format hf --output "$tmp/empty-out" \
  >"$tmp/empty-out.log" 2>&1 || fail "an export into an empty folder: $(cat "$tmp/empty-out.log")"

# A flag that contradicts config.json stops the run before anything starts.
"$trainer" --load-hf "$tmp/llama-in" "${common[@]}" --num-layers 3 >"$tmp/bad.log" 2>&1
[[ $? -eq 2 ]] || fail "a contradicting --num-layers should exit 2"
grep -qF -- "--num-layers 3 contradicts num_hidden_layers = 2" "$tmp/bad.log" ||
  fail "the contradiction is not named: $(cat "$tmp/bad.log")"

# config.json fields (trainer/hf/hf_config_fields.h): a value the file gives that Conveyor
# does not compute, of the wrong type or of an absurd size exits 2 naming the key and the
# value; an unknown field is named in one warning and the run goes on.
edited() {  # edited NAME PYTHON-STATEMENT: a copy of llama-in whose config.json `c` is edited
  rm -rf "$tmp/$1" && cp -r "$tmp/llama-in" "$tmp/$1"
  "$python" -c "import json, sys; p = sys.argv[1]; c = json.load(open(p)); $2; json.dump(c, open(p, 'w'))" \
    "$tmp/$1/config.json"
}
refused() {  # refused NAME MESSAGE: --load-hf NAME exits 2 and says MESSAGE
  "$trainer" --load-hf "$tmp/$1" "${common[@]}" --train-iters 1 >"$tmp/$1.log" 2>&1
  local rc=$?
  [[ $rc -eq 2 ]] || fail "$1: exit $rc, want 2: $(tail -3 "$tmp/$1.log")"
  grep -qF -- "$2" "$tmp/$1.log" || fail "$1: not named: $(cat "$tmp/$1.log")"
}
edited gpt2-scaled "c.clear(); c.update(model_type='gpt2', n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64, scale_attn_by_inverse_layer_idx=True)"
refused gpt2-scaled "scale_attn_by_inverse_layer_idx = true is not supported: Conveyor supports false"
edited string-size "c['hidden_size'] = '64'"
refused string-size 'hidden_size = "64" has the wrong type: expected an integer'
edited huge-layers "c['num_hidden_layers'] = 100000000"
refused huge-layers "num_hidden_layers = 100000000 is more than 16384"
edited wrong-class "c['architectures'] = ['GPT2LMHeadModel']"
refused wrong-class 'names architectures ["GPT2LMHeadModel"] but model_type "llama"'
edited unknown-field "c['my_new_scale'] = 2.0"
"$trainer" --load-hf "$tmp/unknown-field" "${common[@]}" --train-iters 1 >"$tmp/unknown.log" 2>&1 ||
  fail "unknown field: $(tail -3 "$tmp/unknown.log")"
[[ $(grep -c "warning: .*my_new_scale" "$tmp/unknown.log") -eq 1 ]] ||
  fail "the unknown field is not named in one warning: $(head -5 "$tmp/unknown.log")"

# A NaN and an infinity in one weight: refused at load naming the tensor, file and count.
rm -rf "$tmp/nan-in" && cp -r "$tmp/llama-in" "$tmp/nan-in"
"$python" - "$tmp/nan-in" <<'EOF_PY'
import json, os, struct, sys
index = json.load(open(os.path.join(sys.argv[1], "model.safetensors.index.json")))
name = "model.layers.1.mlp.up_proj.weight"
path = os.path.join(sys.argv[1], index["weight_map"][name])
data = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", data[:8])
start = 8 + n + json.loads(data[8:8 + n])[name]["data_offsets"][0]
data[start + 12:start + 16] = struct.pack("<f", float("nan"))
data[start + 40:start + 44] = struct.pack("<f", float("-inf"))
open(path, "wb").write(bytes(data))
EOF_PY
refused nan-in "tensor model.layers.1.mlp.up_proj.weight in $tmp/nan-in/model-"
grep -qF "holds 2 NaN or infinite values" "$tmp/nan-in.log" || fail "nan-in: count not given: $(cat "$tmp/nan-in.log")"

((failures == 0)) && echo "PASS" || exit 1
