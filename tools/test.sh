#!/usr/bin/env bash
# The README's test command: installs what the build needs and runs every test.
# Tests tagged `gpu` run too; without a GPU they skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel test //... "$@"
