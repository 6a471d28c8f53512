"""Reads a run's TensorBoard events with TensorBoard's own reader and checks them
against the run's --metrics-file and log (tests/trainer/tensorboard_test.sh).

  tensorboard_events_check.py full LOGDIR METRICS LOG
      every tag a run with all --log-*-to-tensorboard switches writes, each value
      equal to the metrics file's (or the log line's) figure at the same step;
  tensorboard_events_check.py bubble LOGDIR LOG
      a pipelined run whose last rank writes the log too: every bubble tag equal to
      the log's bubble lines;
  tensorboard_events_check.py killed LOGDIR METRICS MIN_STEPS
      a run killed mid-way: the events read without error and hold lm loss for
      iterations 1..k (k >= MIN_STEPS), equal to the metrics file's.
"""
import glob
import json
import math
import os
import re
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing import event_file_loader
except ImportError:
    sys.exit("FAIL: the Python package 'tensorboard' is missing; run tools/setup.sh, "
             "which installs it (python3 -m pip install tensorboard)")

failures = []


def fail(message):
    failures.append(message)
    print("FAIL:", message)


def close(a, b, rel=1e-6):
    # Event scalars are float32: 2^-24 relative rounding, so 1e-6 is tight but safe.
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-30)


def load(logdir):
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    if len(files) != 1:
        sys.exit(f"FAIL: want one event file in {logdir}, found {files}")
    # The raw loader checks every record's two checksums; it stops at a corrupt or
    # truncated record (check_full counts the records to catch that).
    records = list(event_file_loader.RawEventFileLoader(files[0]).Load())
    acc = event_accumulator.EventAccumulator(
        logdir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)}
               for tag in acc.Tags()["scalars"]}
    return scalars, len(records)


def metrics(path):
    with open(path) as f:
        return [json.loads(line) for line in f]


def expect_series(scalars, tag, want, rel=1e-6):
    """want: {step: value}; the tag must hold exactly these steps and values."""
    got = scalars.get(tag)
    if got is None:
        fail(f"tag '{tag}' missing; tags: {sorted(scalars)}")
        return
    if sorted(got) != sorted(want):
        fail(f"'{tag}' steps {sorted(got)}, want {sorted(want)}")
        return
    for step, value in want.items():
        if not close(got[step], value, rel):
            fail(f"'{tag}' at step {step} is {got[step]!r}, want {value!r}")


def check_full(logdir, metrics_path, log_path):
    scalars, records = load(logdir)
    # The loader stops at the first record whose checksum fails: every record read
    # means the version record plus one per scalar (each event holds one).
    scalar_count = sum(len(series) for series in scalars.values())
    if records != 1 + scalar_count:
        fail(f"{records} records read, want 1 + {scalar_count} scalars: a checksum failed")
    rows = metrics(metrics_path)
    train = [r for r in rows if "lm_loss" in r]
    # Validation during training, and once more after it (at the last iteration).
    valid = [r for r in rows if "valid_lm_loss" in r or "final_valid_lm_loss" in r]
    test = [r for r in rows if "test_lm_loss" in r]
    if len(train) < 2 or len(valid) < 1:
        sys.exit(f"FAIL: the metrics file has {len(train)} training and {len(valid)} "
                 "validation records; the run was too short")
    it = lambda key: {r["iteration"]: r[key] for r in train}
    samples = lambda key: {r["consumed_samples"]: r[key] for r in train}
    for tag, key in [("lm loss", "lm_loss"), ("learning-rate", "learning_rate"),
                     ("grad-norm", "grad_norm"), ("batch-size", "global_batch_size")]:
        expect_series(scalars, tag, it(key))
        expect_series(scalars, tag + " vs samples", samples(key))
    expect_series(scalars, "samples vs steps",
                  {r["iteration"]: r["consumed_samples"] for r in train})
    # The timed figures are the writing rank's own clock (the last rank; the metrics
    # file is the logging rank's), so they are checked through what they imply, which
    # holds on every rank: tokens per second x seconds per iteration = tokens per step,
    # TFLOP/s per GPU x seconds = the metrics file's TFLOP per GPU per iteration.
    seconds = scalars.get("iteration-time", {})
    tokens = scalars.get("tokens-per-second", {})
    tflops = scalars.get("throughput", {})
    for r in train:
        i = r["iteration"]
        if i not in seconds or i not in tokens or i not in tflops:
            fail(f"iteration {i} lacks iteration-time, tokens-per-second or throughput")
            continue
        per_step = r["tokens_per_second"] * r["ms_per_iteration"] / 1e3
        if not close(tokens[i] * seconds[i], per_step, 1e-5):
            fail(f"at {i}: tokens-per-second x iteration-time = {tokens[i] * seconds[i]}, "
                 f"want {per_step} tokens per step")
        work = r["tflops_per_gpu"] * r["ms_per_iteration"] / 1e3
        if not close(tflops[i] * seconds[i], work, 1e-5):
            fail(f"at {i}: throughput x iteration-time = {tflops[i] * seconds[i]}, want {work}")
    for tag in ["iteration-time", "tokens-per-second", "throughput"]:
        if sorted(scalars.get(tag, {})) != sorted(r["iteration"] for r in train):
            fail(f"'{tag}' steps {sorted(scalars.get(tag, {}))}")
    expect_series(scalars, "skipped-iterations", it("skipped_iterations"))
    expect_series(scalars, "nan-iterations", it("nan_iterations"))
    world = int(os.environ["WORLD_SIZE_EXPECTED"])
    expect_series(scalars, "world-size", {r["iteration"]: world for r in train})
    # consumed_samples at an evaluation: the training record of the same iteration.
    samples_at = {r["iteration"]: r["consumed_samples"] for r in train}
    v = {r["iteration"]: r.get("valid_lm_loss", r.get("final_valid_lm_loss")) for r in valid}
    expect_series(scalars, "lm loss test", {r["iteration"]: r["test_lm_loss"] for r in test})
    expect_series(scalars, "lm loss validation", v)
    expect_series(scalars, "lm loss validation vs samples",
                  {samples_at[i]: loss for i, loss in v.items()})
    expect_series(scalars, "lm loss validation ppl",
                  {i: math.exp(min(loss, 20.0)) for i, loss in v.items()})

    # The log's figures, printed rounded: the timers in ms to 0.01, the bubble in % to 0.1.
    with open(log_path) as f:
        log = f.read()
    timer_lines = re.findall(r"\(min, max\) time across ranks \(ms\):(.*)", log)
    bubble_lines = re.findall(r"pipeline bubble \(%\): predicted ([0-9.]+) \(formula\), "
                              r"([0-9.]+) \(simulated\) \| measured per pipeline rank:(.*)", log)
    iterations = [r["iteration"] for r in train]
    if len(timer_lines) != len(iterations) or len(bubble_lines) != len(iterations):
        fail(f"{len(timer_lines)} timer and {len(bubble_lines)} bubble lines in the log, "
             f"want {len(iterations)}")
        return
    for name in ["forward-backward", "grads-reduce", "optimizer"]:
        got = scalars.get(name + "-time", {})
        for i, line in zip(iterations, timer_lines):
            ms = float(re.search(re.escape(name) + r" \(([0-9.]+), ([0-9.]+)\)", line).group(2))
            if i not in got or abs(got[i] * 1e3 - ms) > 0.005 + 1e-9:
                fail(f"'{name}-time' at {i} is {got.get(i)} s, the log says max {ms} ms")
    # The measured bubbles are gathered over the writing rank's pipeline group (TP rank
    # 1's here), the log's over the logging rank's (TP rank 0's): fractions, one per
    # stage. check_bubble compares them exactly where the two ranks are one.
    check_bubble_lines(scalars, iterations, bubble_lines, measured_exact=False)
    # Activations are freed by the end of a step, when the live bytes are read.
    for tag, low in [("mem-allocated-bytes", 1), ("mem-max-allocated-bytes", 1),
                     ("mem-weights-bytes", 1), ("mem-activations-bytes", 0), ("params-norm", 1e-3)]:
        values = scalars.get(tag, {})
        if sorted(values) != iterations or not all(x >= low for x in values.values()):
            fail(f"'{tag}' should be >= {low} at iterations {iterations}: {values}")
    # The weights do not change size during training; the peak bounds the live total.
    weights = set(scalars.get("mem-weights-bytes", {}).values())
    if len(weights) != 1:
        fail(f"'mem-weights-bytes' varies: {weights}")
    for i in iterations:
        live = scalars.get("mem-allocated-bytes", {}).get(i, 0)
        peak = scalars.get("mem-max-allocated-bytes", {}).get(i, 0)
        if live > peak:
            fail(f"at {i} mem-allocated-bytes {live} > mem-max-allocated-bytes {peak}")


def check_bubble_lines(scalars, iterations, bubble_lines, measured_exact):
    for i, (formula, simulated, measured) in zip(iterations, bubble_lines):
        pairs = [("pipeline-bubble predicted (formula)", float(formula)),
                 ("pipeline-bubble predicted (simulated)", float(simulated))]
        measured_pairs = [(f"pipeline-bubble measured/pp-rank-{r}", float(m))
                          for r, m in enumerate(measured.split())]
        for tag, percent in pairs + (measured_pairs if measured_exact else []):
            got = scalars.get(tag, {}).get(i)
            if got is None or abs(100 * got - percent) > 0.05 + 1e-6:
                fail(f"'{tag}' at {i} is {got}, the log says {percent}%")
        for tag, _ in measured_pairs:
            got = scalars.get(tag, {}).get(i)
            if got is None or not 0 <= got < 1:
                fail(f"'{tag}' at {i} is {got}, not a fraction")


def check_bubble(logdir, log_path):
    """A run whose log and events come from one rank: every bubble tag equals the log."""
    scalars, _ = load(logdir)
    lines, iteration = [], None
    with open(log_path) as f:
        for line in f:
            m = re.match(r" iteration +(\d+)/", line)
            iteration = int(m.group(1)) if m else iteration
            m = re.search(r"pipeline bubble \(%\): predicted ([0-9.]+) \(formula\), ([0-9.]+) "
                          r"\(simulated\) \| measured per pipeline rank:(.*)", line)
            if m and iteration is not None:
                lines.append((iteration, *m.groups()))
    if not lines:
        sys.exit("FAIL: no log line with its bubble line in " + log_path)
    check_bubble_lines(scalars, [i for i, *_ in lines], [rest for _, *rest in lines],
                       measured_exact=True)
    print(f"bubble: {len(lines)} log intervals match")


def check_killed(logdir, metrics_path, min_steps):
    scalars, records = load(logdir)
    loss = scalars.get("lm loss", {})
    steps = sorted(loss)
    if len(steps) < min_steps or steps != list(range(1, len(steps) + 1)):
        fail(f"'lm loss' steps {steps}: want 1..k with k >= {min_steps}")
    want = {r["iteration"]: r["lm_loss"] for r in metrics(metrics_path) if "lm_loss" in r}
    for step in steps:
        if step in want and not close(loss[step], want[step]):
            fail(f"'lm loss' at {step} is {loss[step]}, the metrics file says {want[step]}")
    print(f"killed run: {records} records, lm loss for iterations 1..{len(steps)}")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "full":
        check_full(*sys.argv[2:5])
    elif mode == "bubble":
        check_bubble(sys.argv[2], sys.argv[3])
    elif mode == "killed":
        check_killed(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif mode == "steps":  # how many lm loss steps are readable now (for polling)
        print(len(load(sys.argv[2])[0].get("lm loss", {})))
        sys.exit(0)
    sys.exit(1 if failures else 0)
