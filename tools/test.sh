#!/usr/bin/env bash
# The README's test command: installs what the build needs and runs every test.
# Tests tagged `gpu` run too; without a GPU they skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
# The data tests read fixtures from the shared folder that sits beside the project
# (../shared). Tell them where it is, so that a checkout elsewhere finds it too:
# CONVEYOR_SHARED_DIR if set, else ../shared, else /work/shared.
shared="${CONVEYOR_SHARED_DIR:-}"
for candidate in "$shared" ../shared /work/shared; do
  if [[ -n "$candidate" && -d "$candidate/data" ]]; then
    shared=$(cd "$candidate" && pwd)
    break
  fi
done
bazel test //... --test_env=CONVEYOR_SHARED_DIR="$shared" "$@"
