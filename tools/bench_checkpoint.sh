#!/usr/bin/env bash
# Checkpoint save and load bandwidth for 1 GiB of fp32 state (the size of a ~90M
# parameter model with its Adam state), written to and read from a folder under
# $TMPDIR: snapshot (copy out of the training buffers), write (CRC32C, write, fsync,
# commit), load in the same layout and load of a half (as a TP2 rank would).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
bazel build -c opt //trainer/checkpoint:checkpoint_benchmark >&2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$(bazel info -c opt bazel-bin 2>/dev/null)/trainer/checkpoint/checkpoint_benchmark" "$dir" 1
