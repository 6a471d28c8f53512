#!/usr/bin/env bash
# A mixture of experts' logged figures under context parallelism are one rank's: the
# --metrics-file's load-balancing and z losses (within 1e-5 relative), the fewest and
# most tokens per expert and the dropped tokens (exactly) of a run whose samples are
# spread over two context-parallel ranks (alone, and with two data-parallel ranks) equal
# those of the same run on one rank.
source "$(dirname "$0")/trainer_test_lib.sh"

# A capacity of 1.0 drops tokens at every step.
flags=(--config "$config" --num-experts 4 --disable-bias-linear --moe-aux-loss-coeff 0.01
  --moe-z-loss-coeff 0.001 --moe-expert-capacity-factor 1.0 --train-iters 4
  --lr-warmup-iters 1 --log-interval 2 --eval-iters 0 --device cpu
  --global-batch-size 8 --num-micro-batches 0)

# run NAME extra-flags...: trains, leaves the metrics in $tmp/NAME.jsonl.
run() {
  local name="$1"; shift
  rm -f "$tmp/$name.jsonl"
  "$trainer" "${flags[@]}" "$@" --metrics-file "$tmp/$name.jsonl" >"$tmp/$name.out" 2>&1 ||
    fail "$name exited non-zero: $(tail -5 "$tmp/$name.out")"
}

# field FILE KEY: the key's value on each line.
field() { sed -nE "s/.*\"$2\": ([0-9.eE+-]+).*/\1/p" "$1"; }

run one
run cp2 --nproc-per-node 2 --context-parallel-size 2
run cp2_dp2 --nproc-per-node 4 --context-parallel-size 2
[[ $(wc -l <"$tmp/one.jsonl") -eq 2 ]] || fail "one rank logged $(wc -l <"$tmp/one.jsonl") lines, want 2"
[[ $(field "$tmp/one.jsonl" dropped_tokens | head -1) -gt 0 ]] || fail "no token dropped"
for layout in cp2 cp2_dp2; do
  for key in min_tokens_per_expert max_tokens_per_expert dropped_tokens; do
    [[ "$(field "$tmp/$layout.jsonl" $key)" == "$(field "$tmp/one.jsonl" $key)" ]] ||
      fail "$layout $key: $(field "$tmp/$layout.jsonl" $key | tr '\n' ' ')vs one rank's $(field "$tmp/one.jsonl" $key | tr '\n' ' ')"
  done
  for key in load_balancing_loss z_loss; do
    paste <(field "$tmp/$layout.jsonl" $key) <(field "$tmp/one.jsonl" $key) |
      awk -v what="$layout $key" 'function abs(x) { return x < 0 ? -x : x }
        { n++; if (abs($1 - $2) > 1e-5 * abs($2)) { print "FAIL: " what ": " $1 " vs one rank " $2; bad = 1 } }
        END { if (n != 2) { print "FAIL: " what ": " n " values, want 2"; bad = 1 } exit bad }' ||
      failures=$((failures + 1))
  done
done

finish
