#!/usr/bin/env bash
# Builds here (no GPU needed) what the GPU machine runs, into one compressed file small
# enough to carry: the trainer and the GPU test binaries (absl, protobuf and OpenBLAS
# linked statically) plus the shared libraries they need that a bare machine lacks.
# CUDA's own libraries (cudart, NCCL, cuDNN) are not bundled: the GPU machine has them
# (see tools/device_check.sh).
#
#   tools/device_bundle.sh            -> device_bundle.tar.xz (and device_bundle/)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh >&2
executables=(//trainer:trainer //tests/runtime:cuda_ops_test //tests/runtime:cuda_memory_test
  //tests/runtime:cuda_optimizer_ops_test //tests/runtime:cuda_backend_test
  //tests/runtime:cuda_attention_test
  //tests/trainer:backend_training_test //tests/trainer:cuda_parallel_training_test
  //tests/parallel:nccl_communicator_test)
bazel build -c opt --config=static "${executables[@]}" //data/tokenizers:libconveyor_sentencepiece.so >&2
bin=$(bazel info -c opt --config=static bazel-bin 2>/dev/null)

rm -rf device_bundle device_bundle.tar.xz
mkdir -p device_bundle/bin device_bundle/lib
for target in "${executables[@]}"; do
  path=${target#//}
  cp "$bin/${path/://}" device_bundle/bin/
done
# The SentencePiece tokenizers open this shim at run time from beside the executable
# (data/tokenizers/sentencepiece_model.cc); its own libsentencepiece comes with the libraries below.
cp "$bin/data/tokenizers/libconveyor_sentencepiece.so" device_bundle/bin/
cp configs/gpt-tiny.textproto configs/gpt2-124m.textproto configs/gpt-1.3b.textproto \
  tools/device_check.sh tools/bench_pytorch.py tools/device_summary.py device_bundle/
# Every shared library the binaries load, except the C library's own and CUDA's.
for b in device_bundle/bin/*; do
  ldd "$b" | awk '$3 ~ /^\// { print $3 }'
done | sort -u | grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" device_bundle/lib/; done

tar -cJf device_bundle.tar.xz device_bundle
size=$(stat -c %s device_bundle.tar.xz)
echo "device_bundle.tar.xz: $((size / 1024 / 1024)) MiB ($(du -sh device_bundle | cut -f1) unpacked)"
if ((size > 60 * 1024 * 1024)); then
  echo "device_bundle: over the 60 MiB that may be carried" >&2
  exit 1
fi
