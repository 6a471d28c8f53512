#!/usr/bin/env bash
# Runs on the GPU machine, in one call (see tools/device_bundle.sh): unpacks the
# bundle, finds CUDA's libraries (cuDNN and NCCL from the machine's PyTorch wheels),
# runs the GPU op tests against the CPU references and the NCCL test, and a short
# training run, writing everything under $OUT (default ./device_out).
#
#   tar -xJf device_bundle.tar.xz && device_bundle/device_check.sh
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="${OUT:-$PWD/device_out}"
mkdir -p "$out"
extra=""
for module in nvidia.cudnn nvidia.nccl; do
  dir=$(python3 -c "import $module as m; print(m.__path__[0])" 2>/dev/null) || continue
  extra="$extra:$dir/lib"
done
export LD_LIBRARY_PATH="$here/lib:/usr/local/cuda/lib64${extra}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{
  echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  echo "== cuda_ops_test"; "$here/bin/cuda_ops_test" 2>&1; echo "exit $?"
  echo "== nccl_communicator_test"; "$here/bin/nccl_communicator_test" 2>&1; echo "exit $?"
  echo "== training (CPU backend until the CUDA training path exists)"
  "$here/bin/trainer" --config "$here/gpt-tiny.textproto" --train-iters 20 --log-interval 10 \
    --metrics-file "$out/metrics.jsonl" 2>&1 | grep -v '^  '
  echo "exit $?"
} | tee "$out/device_check.log"
