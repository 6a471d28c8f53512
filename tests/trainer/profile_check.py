"""Checks a --profile trace of a TP 2 x PP 2 run (tests/trainer/profile_test.sh).

  profile_check.py TRACE DRY_RUN MICRO_BATCH SEQ HIDDEN MICRO_BATCHES PROFILED_ITERATIONS

Every rank of the rank map (the --dry-run text of the same layout) is a process named with its coordinates; each has
op, communication, pipeline and phase spans; the communications carry the bytes and
group the configuration implies; spans on each thread nest and never partly overlap;
every op of the forward-backward phase lies inside a pipeline action.
"""
import collections
import json
import re
import sys

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


# ts and dur are printed to 0.001 us: allow two roundings.
SLACK = 0.002


def contains(outer, inner):
    return (outer["ts"] - SLACK <= inner["ts"] and
            inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"] + SLACK)


def check_nesting(spans, where):
    """Sorted by start (longest first on ties), each span must lie inside every open
    span it starts in: a stack of open spans, as a flame graph draws them."""
    stack = []
    for s in sorted(spans, key=lambda s: (s["ts"], -s["dur"])):
        while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - SLACK:
            stack.pop()
        if stack and not contains(stack[-1], s):
            fail(f"{where}: '{s['name']}' at {s['ts']} (+{s['dur']}) partly overlaps "
                 f"'{stack[-1]['name']}' at {stack[-1]['ts']} (+{stack[-1]['dur']})")
            return
        stack.append(s)


def main(trace_path, log_path, micro_batch, seq, hidden, micro_batches, iterations):
    micro_batch, seq, hidden, micro_batches = map(int, (micro_batch, seq, hidden, micro_batches))
    iterations = [int(i) for i in iterations.split(",")]
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    with open(log_path) as f:
        log = f.read()
    # The rank map: "rank  tp  pp  dp" then one row per rank.
    coords = {int(r): (int(t), int(p), int(d))
              for r, t, p, d in re.findall(r"^ +(\d+) +(\d+) +(\d+) +(\d+)$", log, re.M)}
    if len(coords) != 4:
        sys.exit(f"FAIL: want a rank map of 4 ranks in the dry run, found {coords}")
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    for rank, (tp, pp, dp) in coords.items():
        want = f"rank {rank} (tp {tp}, pp {pp}, dp {dp})"
        if names.get(rank) != want:
            fail(f"process {rank} is named {names.get(rank)!r}, want {want!r}")
    spans = [e for e in events if e["ph"] == "X"]
    by_rank = collections.defaultdict(list)
    for s in spans:
        by_rank[s["pid"]].append(s)

    tp_groups = {r: sorted(q for q in coords if coords[q][1] == coords[r][1]) for r in coords}
    pp_groups = {r: sorted(q for q in coords if coords[q][0] == coords[r][0]) for r in coords}
    activation_bytes = 4 * micro_batch * seq * hidden  # fp32, the full hidden (no SP)
    for rank, (tp, pp, dp) in coords.items():
        mine = by_rank[rank]
        cats = collections.Counter(s["cat"] for s in mine)
        for cat in ["op", "comm", "pipeline", "phase"]:
            if cats[cat] == 0:
                fail(f"rank {rank} has no '{cat}' spans")
        ops = {s["name"] for s in mine if s["cat"] == "op"}
        want_ops = {"Gemm", "LinearForward", "NormForward", "AttentionForward",
                    "AttentionBackward", "LinearWeightGrad"}
        want_ops |= ({"EmbeddingForward"} if pp == 0
                     else {"RowMaxSumExpAndTarget", "CrossEntropyBackward"})
        if not want_ops <= ops:
            fail(f"rank {rank} lacks ops {sorted(want_ops - ops)}")
        comms = collections.Counter((s["name"], s["args"]["group"], s["args"]["bytes"])
                                    for s in mine if s["cat"] == "comm")
        # Megatron's TP all-reduces of activations: the group of this pipeline stage.
        tp_group = "tp[%s]" % ",".join(map(str, tp_groups[rank]))
        if comms[("AllReduceSum", tp_group, activation_bytes)] == 0:
            fail(f"rank {rank} has no AllReduceSum of {activation_bytes} bytes on {tp_group}: "
                 f"{sorted(comms)}")
        # The pipeline's activations and gradients: one micro-batch's activation each.
        pp_group = "pp[%s]" % ",".join(map(str, pp_groups[rank]))
        sends = comms[("BatchSendRecv", pp_group, activation_bytes)]
        if sends < 2 * micro_batches * len(iterations) // 2:
            fail(f"rank {rank}: {sends} BatchSendRecv of {activation_bytes} bytes on {pp_group}")
        # Every micro-batch's forward and backward, each profiled iteration.
        actions = collections.Counter(s["name"] for s in mine if s["cat"] == "pipeline")
        for m in range(micro_batches):
            for name in [f"F{m}", f"BW{m}"]:
                if actions[name] != len(iterations):
                    fail(f"rank {rank}: {actions[name]} '{name}' spans, want {len(iterations)}")
        steps = sorted(s["name"] for s in mine if s["cat"] == "phase" and
                       s["name"].startswith("iteration "))
        if steps != [f"iteration {i}" for i in iterations]:
            fail(f"rank {rank} profiled {steps}, want iterations {iterations}")
        for tid in {s["tid"] for s in mine}:
            check_nesting([s for s in mine if s["tid"] == tid], f"rank {rank} thread {tid}")
        # Ops of the forward-backward phase run inside the pipeline's actions.
        main_thread = [s for s in mine if s["tid"] == 0]
        phases = [s for s in main_thread if s["name"] == "forward-backward"]
        computes = [s for s in main_thread if re.fullmatch(r"(F|B|W|BW)\d+.*", s["name"])]
        for op in (s for s in main_thread if s["cat"] == "op"):
            if any(contains(p, op) for p in phases) and not any(contains(c, op) for c in computes):
                fail(f"rank {rank}: op '{op['name']}' at {op['ts']} is in forward-backward "
                     "but in no pipeline action")
                break
    print(f"profile: {len(spans)} spans over {len(by_rank)} ranks")


if __name__ == "__main__":
    main(*sys.argv[1:])
    sys.exit(1 if failures else 0)
