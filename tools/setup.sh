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
  libicu-dev           # Unicode classes for the GPT-2 tokenizer, normalisation forms
  libpcre2-dev         # split patterns of tokenizer.json / tiktoken (lookahead: not RE2)
  libsentencepiece-dev # SentencePiece tokenizers (tokenizer.model)
  nlohmann-json3-dev   # reading tokenizer.json and rank files
  python3-pip          # fetches the cuDNN frontend headers (below) from PyPI
  chromium             # headless: tests/trainer/plan_html_test.sh, README screenshots
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

# TensorBoard (PyPI; Debian has no package) for its event reader in
# tests/trainer/tensorboard_test.sh, installed for the python3 the tests run.
if python3 -c 'import tensorboard' 2>/dev/null; then
  echo "setup: python tensorboard present"
else
  echo "setup: installing the python tensorboard package (PyPI)"
  # Debian's own python3 refuses pip installs without --break-system-packages (PEP 668).
  python3 -m pip install --quiet --disable-pip-version-check tensorboard ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages tensorboard
fi

# transformers (PyPI, with NumPy) for tests/trainer/hf/hf_cli_test.sh: NumPy writes the
# tiny Hugging Face models, transformers loads the exports' config files. (Its model
# loader needs torch, which the test skips without: too large to install here.)
if python3 -c 'import transformers, numpy' 2>/dev/null; then
  echo "setup: python transformers present"
else
  echo "setup: installing the python transformers package (PyPI)"
  python3 -m pip install --quiet --disable-pip-version-check transformers ||
    python3 -m pip install --quiet --disable-pip-version-check --break-system-packages transformers
fi

# nvcc is needed to compile the CUDA kernel library even on a machine without a GPU.
if [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "setup: error: /usr/local/cuda/bin/nvcc not found; install the CUDA toolkit (13.x) there" >&2
  exit 1
fi

# The cuDNN frontend headers (header-only, not a Debian package): the PyPI wheel of the
# version pinned in third_party/repos.bzl, its include/ unpacked into the git-ignored
# third_party/cudnn_frontend/. VERSION is written last, so an interrupted unpack is redone.
repo=$(cd "$(dirname "$0")/.." && pwd)
frontend_version=$(sed -n 's/^CUDNN_FRONTEND_VERSION = "\(.*\)"$/\1/p' "$repo/third_party/repos.bzl")
frontend_dir=$repo/third_party/cudnn_frontend
if [[ -z "$frontend_version" ]]; then
  echo "setup: error: no CUDNN_FRONTEND_VERSION in third_party/repos.bzl" >&2
  exit 1
elif [[ "$(cat "$frontend_dir/VERSION" 2>/dev/null)" == "$frontend_version" ]]; then
  echo "setup: cuDNN frontend $frontend_version present"
else
  echo "setup: fetching the cuDNN frontend $frontend_version headers (PyPI nvidia-cudnn-frontend)"
  if ! python3 -m pip --version >/dev/null 2>&1; then
    echo "setup: error: python3 -m pip is needed to fetch the cuDNN frontend wheel" >&2
    exit 1
  fi
  wheel_dir=$(mktemp -d)
  trap 'rm -rf "$wheel_dir"' EXIT
  # Any wheel of the version carries the same headers: ask for one platform's, so the
  # download does not depend on this machine's Python.
  python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 --implementation cp --abi cp311 \
    "nvidia-cudnn-frontend==$frontend_version" -d "$wheel_dir"
  rm -rf "$frontend_dir"
  python3 - "$wheel_dir"/nvidia_cudnn_frontend-*.whl "$frontend_dir" <<'PY'
import os, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.endswith("/"):
            continue
        if name.startswith("include/"):
            target = os.path.join(dest, name)
        elif ".dist-info/licenses/" in name:
            target = os.path.join(dest, "licenses", os.path.basename(name))
        else:
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(name) as src, open(target, "wb") as out:
            out.write(src.read())
PY
  [[ -f "$frontend_dir/include/cudnn_frontend.h" ]] || {
    echo "setup: error: the wheel had no include/cudnn_frontend.h" >&2
    exit 1
  }
  echo "$frontend_version" >"$frontend_dir/VERSION"
fi
