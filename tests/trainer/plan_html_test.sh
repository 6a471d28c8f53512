#!/usr/bin/env bash
# --dry-run --plan-html: the page's embedded figures equal the --dry-run text's, and
# headless Chromium (Debian's chromium, installed by tools/setup.sh) runs its script
# and renders a non-blank picture.
source "$(dirname "$0")/trainer_test_lib.sh"
check="$3"

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chromium" ]]; then
  echo "FAIL: chromium is not installed; run tools/setup.sh, which installs Debian's chromium"
  exit 1
fi

# TP 2 x PP 2; DP 2 with the distributed optimizer; an interleaved schedule (V 2);
# zero-bubble (W actions) on PP 4.
cases=(
  "--nproc-per-node 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --num-micro-batches 4"
  "--nproc-per-node 4 --pipeline-model-parallel-size 2 --use-distributed-optimizer --num-micro-batches 2"
  "--nproc-per-node 4 --pipeline-model-parallel-size 2 --num-layers 4 --num-virtual-stages-per-pipeline-rank 2 --num-micro-batches 4"
  "--nproc-per-node 4 --pipeline-model-parallel-size 4 --num-layers 4 --pipeline-schedule zb-h1 --num-micro-batches 8"
)
for i in "${!cases[@]}"; do
  # shellcheck disable=SC2086
  "$trainer" --config "$config" --dry-run ${cases[$i]} --plan-html "$tmp/plan$i.html" \
    >"$tmp/dry$i.txt" 2>&1 || { fail "case $i exited non-zero: $(tail -3 "$tmp/dry$i.txt")"; continue; }
  grep -qF "plan: page written to $tmp/plan$i.html" "$tmp/dry$i.txt" || fail "case $i: no 'page written' line"
  python3 "$check" data "$tmp/plan$i.html" "$tmp/dry$i.txt" || fail "case $i: the page's data differ (above)"
  flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/chromium$i"
         --window-size=1100,800)
  HOME="$tmp" timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$tmp/plan$i.html" \
    >"$tmp/dom$i.html" 2>"$tmp/chromium$i.log" || fail "case $i: chromium --dump-dom failed: $(tail -3 "$tmp/chromium$i.log")"
  HOME="$tmp" timeout 120 "$chromium" "${flags[@]}" --screenshot="$tmp/shot$i.png" \
    "file://$tmp/plan$i.html" >>"$tmp/chromium$i.log" 2>&1 || fail "case $i: chromium --screenshot failed: $(tail -3 "$tmp/chromium$i.log")"
  python3 "$check" render "$tmp/plan$i.html" "$tmp/dom$i.html" "$tmp/shot$i.png" ||
    fail "case $i: the rendering (above)"
done

"$trainer" --config "$config" --plan-html "$tmp/x.html" >"$tmp/nodry.txt" 2>&1
[[ $? -eq 2 ]] && grep -qF -- "--plan-html is written by --dry-run" "$tmp/nodry.txt" ||
  fail "--plan-html without --dry-run: $(cat "$tmp/nodry.txt")"

finish
