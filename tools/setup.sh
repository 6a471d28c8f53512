#!/usr/bin/env bash
# Installs every system dependency Conveyor builds against (Debian bookworm).
# Idempotent: packages already present are skipped, so running it twice is cheap.
set -euo pipefail

PACKAGES=(
  bazel-bootstrap      # Bazel 4.2.3, builds offline with third_party/repos.bzl
  g++
  libabsl-dev          # absl::Status / StatusOr / strings / flags helpers
  libprotobuf-dev protobuf-compiler   # proto/config.proto, checkpoint manifests
  libgtest-dev libgmock-dev
  libgloo-dev          # CPU collectives
  libopenblas-dev      # CPU GEMM
  libicu-dev           # Unicode classes for the GPT-2 tokenizer
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup: all system packages present"
fi

# nvcc is needed to compile the CUDA kernel library even on a machine without a GPU.
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: error: /usr/local/cuda/bin/nvcc not found; install the CUDA toolkit (13.x) there" >&2
  exit 1
fi
