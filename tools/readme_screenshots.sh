#!/usr/bin/env bash
# The README's pictures of "Watching a run", taken with headless Chromium (Debian's
# chromium, installed by tools/setup.sh) from a real run:
#   docs/images/tensorboard_scalars.png  TensorBoard (served on localhost) showing the
#                                        scalars of a two-stage pipelined gpt-tiny run;
#   docs/images/plan_page.png            the --plan-html page of a TP 2 x PP 4 zb-h1 plan.
# Usage: tools/readme_screenshots.sh   (after bazel build //trainer)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
trainer=$repo/bazel-bin/trainer/trainer
images=$repo/docs/images
work=$(mktemp -d)
tensorboard_pid=""
cleanup() {
  [[ -n "$tensorboard_pid" ]] && kill "$tensorboard_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$images"
shot() {  # shot URL PNG WIDTH HEIGHT
  HOME=$work timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$work/chromium" --window-size="$3,$4" --virtual-time-budget=20000 \
    --screenshot="$2" "$1" 2>/dev/null
}

# 1. A real run's scalars: 150 iterations of gpt-tiny on two pipeline stages.
"$trainer" --config "$repo/configs/gpt-tiny.textproto" --nproc-per-node 2 \
  --pipeline-model-parallel-size 2 --train-iters 150 --log-interval 10 --eval-interval 30 \
  --eval-iters 2 --tensorboard-dir "$work/logs/gpt-tiny-pp2" --log-validation-ppl-to-tensorboard \
  --log-timers-to-tensorboard >"$work/train.log" 2>&1
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tensorboard --logdir "$work/logs" --host 127.0.0.1 --port "$port" >"$work/tensorboard.log" 2>&1 &
tensorboard_pid=$!
for _ in $(seq 60); do
  curl -sf "http://127.0.0.1:$port/data/runs" >/dev/null && break
  sleep 0.5
done
filter='^(lm loss|lm loss validation|learning-rate|grad-norm|throughput|pipeline-bubble.*)$'
shot "http://127.0.0.1:$port/#scalars&tagFilter=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$filter")" \
  "$images/tensorboard_scalars.png" 1400 1000

# 2. The plan page.
"$trainer" --config "$repo/configs/gpt-tiny.textproto" --dry-run --nproc-per-node 8 \
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --num-layers 8 \
  --num-micro-batches 8 --pipeline-schedule zb-h1 --plan-html "$work/plan.html" >/dev/null
shot "file://$work/plan.html" "$images/plan_page.png" 1100 900
ls -l "$images"/tensorboard_scalars.png "$images"/plan_page.png
