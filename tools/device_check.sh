#!/usr/bin/env bash
# Runs on the GPU machine, in one call (see tools/device_bundle.sh): unpacks nothing,
# finds CUDA's libraries (cuBLAS from the CUDA install, cuDNN and NCCL from the
# machine's PyTorch wheels), then
#   1. the GPU tests: kernels, device memory, optimizer kernels and every op of the CUDA
#      backend against the CPU references; GPU training against the CPU loss curve;
#   2. the benchmark: GPT-2 124M and a 1.3B GPT in bf16, Conveyor and then the same
#      model in PyTorch (tools/bench_pytorch.py), summarised side by side
#      (tools/device_summary.py).
# Everything goes under $OUT (default ./device_out): device_check.log, each run's
# metrics and log, PyTorch's JSON, summary.json. Each step has a time limit, so the
# whole check stays under about 8 minutes.
#
#   tar -xJf device_bundle.tar.xz && device_bundle/device_check.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${OUT:-$PWD/device_out}"
mkdir -p "$out"
extra=""
for module in nvidia.cudnn nvidia.nccl nvidia.cublas; do
  dir=$(python3 -c "import $module as m; print(m.__path__[0])" 2>/dev/null) || continue
  extra="$extra:$dir/lib"
done
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
models=(gpt2-124m gpt-1.3b)

# step NAME SECONDS COMMAND...: runs one step under a time limit and reports its exit.
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name"
  timeout "$limit" "$@" 2>&1
  echo "exit $? ($name)"
}

{
  echo "== machine"
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
  step cuda_ops_test 90 "$here/bin/cuda_ops_test"
  step cuda_memory_test 60 "$here/bin/cuda_memory_test"
  step cuda_optimizer_ops_test 60 "$here/bin/cuda_optimizer_ops_test"
  step cuda_backend_test 120 "$here/bin/cuda_backend_test"
  step backend_training_test 120 "$here/bin/backend_training_test"
  step nccl_communicator_test 60 "$here/bin/nccl_communicator_test"
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
} 2>&1 | tee "$out/device_check.log"
