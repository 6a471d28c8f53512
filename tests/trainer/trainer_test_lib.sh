# Sourced first by every shell test over the trainer binary (trainer_sh_test.bzl), whose
# arguments are TRAINER CONFIG [CHECKER]: sets `trainer` and `config` (absolute paths),
# `tmp` (a fresh scratch folder under Bazel's TEST_TMPDIR), `fail MESSAGE` (counts a
# failure and goes on, so one run reports every failure) and `finish` (the verdict: the
# test's last command).
set -uo pipefail
trainer="$(realpath "$1")"
config="$(realpath "$2")"
tmp="$(mktemp -d "${TEST_TMPDIR:-/tmp}/$(basename "$0" .sh).XXXXXX")"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

finish() {
  if ((failures > 0)); then
    echo "$failures failure(s); outputs in $tmp"
    exit 1
  fi
  echo "PASS"
  exit 0
}
