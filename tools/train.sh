#!/usr/bin/env bash
# The README's train command: installs what the build needs, builds the trainer and
# runs it. With no arguments it trains the embedded default, a small GPT on mock data
# (configs/gpt-tiny.textproto); any arguments are passed to the trainer instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //trainer:trainer >&2
if [[ $# -eq 0 ]]; then
  set -- --config configs/gpt-tiny.textproto
fi
exec bazel-bin/trainer/trainer "$@"
