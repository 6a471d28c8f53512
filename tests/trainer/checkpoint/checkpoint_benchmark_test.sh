#!/usr/bin/env bash
# tools/bench_checkpoint.sh's program on a small checkpoint: it saves twice, measures the
# raw disk between the saves, loads back (checking the values) and prints every line the
# benchmark figures come from. The figures themselves are not asserted (see
# docs/benchmarks.md); this keeps the program working.
set -uo pipefail
benchmark="$1"
dir="${TEST_TMPDIR:-$(mktemp -d)}/bench"
out=$("$benchmark" "$dir" 0.01 4 2>&1)
code=$?
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
[[ $code == 0 ]] || fail "exit $code"
for line in "save 1: snapshot" "save 2: snapshot" "x the raw disk" "raw disk, same bytes" \
  "commit (manifest, renames)" "load, same layout" "load, TP2 column half"; do
  grep -qF -- "$line" <<<"$out" || fail "no line with \"$line\""
done
[[ $(grep -c "x the raw disk" <<<"$out") == 2 ]] || fail "want one raw-disk ratio per save"
echo PASS
