#!/usr/bin/env bash
# Conveyor against the same model in PyTorch on this CPU, in one call, interleaved
# (tools/bench_cpu_vs_pytorch.py): ms/iteration of both, their ratio per round, the
# machine, the commit, the machine's GEMM peak in fp32 and in bf16 (runtime/cpu:gemm_peak
# measures Conveyor's kernels) and the fraction of it each step reaches, fp32 and --bf16.
# PyTorch comes from a virtual environment this script creates once (pip install torch,
# about 5.6 GB) in $CONVEYOR_BENCH_VENV (default ~/.cache/conveyor/bench-venv); the tests
# do not need it. Arguments go to the Python script (--rounds, --modes, --precisions).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${CONVEYOR_BENCH_VENV:-$HOME/.cache/conveyor/bench-venv}"
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  echo "bench_cpu_vs_pytorch: creating $venv (pip install torch, about 5.6 GB)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet torch numpy >&2
fi
bash tools/setup.sh >&2
bazel build //trainer:trainer //runtime/cpu:gemm_peak >&2
# Copies: other builds may replace bazel-bin's binaries while the rounds run.
trainer=$(mktemp)
gemm_peak=$(mktemp)
trap 'rm -f "$trainer" "$gemm_peak"' EXIT
cp bazel-bin/trainer/trainer "$trainer"
cp bazel-bin/runtime/cpu/gemm_peak "$gemm_peak"
chmod u+x "$trainer" "$gemm_peak"  # mktemp's files are not executable
commit=$(git rev-parse --short HEAD)$(git diff --quiet -- runtime model trainer || echo "+changes")
"$venv/bin/python" tools/bench_cpu_vs_pytorch.py --trainer "conveyor=$trainer" \
  --gemm-peak "$gemm_peak" --commit "$commit" "$@"
