#!/usr/bin/env bash
# Runs on the GPU machine from the unpacked bundle (see tools/device_bundle.sh): finds
# CUDA's libraries (the CUDA install's, then the PyTorch wheels' cuDNN, NCCL, NVRTC),
# then
#   1. the GPU tests: kernels, device memory, optimizer kernels and every op of the CUDA
#      backend against the CPU references; GPU training against the CPU loss curve;
#   2. the benchmark: GPT-2 124M and a 1.3B GPT in bf16, Conveyor and then the same
#      model in PyTorch (tools/bench_pytorch.py), summarised side by side
#      (tools/device_summary.py).
# Everything goes under $OUT (default ./device_out): device_check.log (tests.log and
# bench.log when run in two calls), each run's metrics and log, PyTorch's JSON,
# summary.json. Each step has its own time limit, and the whole call a budget
# (DEVICE_CHECK_SECONDS, default 470: one call stays under 8 minutes): a step gets at
# most what is left of it, and once it is spent the remaining steps are skipped, saying
# so. The steps run in order of need: the tests, then GPT-2 124M, then the 1.3B model.
#
#   tar -xJf device_bundle.tar.xz && device_bundle/device_check.sh [all|tests|bench]
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${OUT:-$PWD/device_out}"
mode="${1:-all}"
mkdir -p "$out"
# The CUDA install's libraries, then every library folder of the PyTorch wheels
# (cuDNN, NCCL, NVRTC, cuBLAS, whatever their layout), for the libraries it lacks.
wheel_libs=$(python3 - <<'PY' 2>/dev/null
import glob, os
import nvidia
folders = {os.path.dirname(so) for root in nvidia.__path__
           for so in glob.glob(os.path.join(root, "**", "lib*.so*"), recursive=True)}
print(":".join(sorted(folders)))
PY
)
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${wheel_libs:+:$wheel_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
models=(gpt2-124m gpt-1.3b)

budget="${DEVICE_CHECK_SECONDS:-470}"

# step NAME SECONDS COMMAND...: runs one step under its time limit, or what is left of
# the budget if less, and reports its exit; skips it when the budget is spent.
step() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS))
  echo "== $name"
  if ((left < 15)); then
    echo "skipped ($name): the ${budget} s budget of this call is spent"
    return
  fi
  ((limit > left)) && limit=$left
  timeout "$limit" "$@" 2>&1
  echo "exit $? ($name)"
}

tests() {
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  step cuda_ops_test 90 "$here/bin/cuda_ops_test"
  step cuda_memory_test 60 "$here/bin/cuda_memory_test"
  step cuda_optimizer_ops_test 60 "$here/bin/cuda_optimizer_ops_test"
  step cuda_backend_test 120 "$here/bin/cuda_backend_test"
  step cuda_attention_test 180 "$here/bin/cuda_attention_test"
  step backend_training_test 120 "$here/bin/backend_training_test"
  step nccl_communicator_test 60 "$here/bin/nccl_communicator_test"
  # Skips each layout on a machine with fewer GPUs than the layout has ranks.
  step cuda_parallel_training_test 120 "$here/bin/cuda_parallel_training_test"
}

bench() {
  for model in "${models[@]}"; do
    step "conveyor $model" 150 "$here/bin/trainer" --config "$here/$model.textproto" \
      --metrics-file "$out/conveyor_$model.jsonl" | tee "$out/conveyor_$model.log" |
      grep -v '^  '
    step "pytorch $model" 240 python3 "$here/bench_pytorch.py" --model "$model" \
      --json "$out/pytorch_$model.json"
  done
  echo "== summary"
  python3 "$here/device_summary.py" --out "$out" --models "${models[@]}" \
    --json "$out/summary.json"
}

case "$mode" in
  all) { tests; bench; } 2>&1 | tee "$out/device_check.log" ;;
  tests) tests 2>&1 | tee "$out/tests.log" ;;
  bench) bench 2>&1 | tee "$out/bench.log" ;;
  *) echo "device_check.sh: unknown mode '$mode': use all, tests or bench" >&2; exit 2 ;;
esac
