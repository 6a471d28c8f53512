#!/usr/bin/env python3
"""Conveyor's GPU throughput beside PyTorch's, from one tools/device_check.sh call.

Reads, for each model, Conveyor's --metrics-file (JSON lines) and log, and
tools/bench_pytorch.py's JSON, and prints one table: ms/iter, tokens/s, TFLOP/s
(Megatron's formula for both), MFU against the bf16 GEMM peak PyTorch measured on the
same device in the same call and against the datasheet, peak memory, and the ratio of
Conveyor's tokens/s to PyTorch's. Writes the same figures to --json.

    python3 device_summary.py --out DIR --models gpt2-124m gpt-1.3b --json DIR/summary.json
"""
import argparse
import json
import os
import re
import sys


def conveyor_figures(out, model):
    """Mean of the logged intervals after the first (which holds warm-up)."""
    path = os.path.join(out, f"conveyor_{model}.jsonl")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        # The log interval's records; validation and test losses have their own.
        records = [r for r in (json.loads(line) for line in f if line.strip())
                   if "ms_per_iteration" in r]
    steady = records[1:] or records
    if not steady:
        return None
    mean = lambda key: sum(r[key] for r in steady) / len(steady)
    figures = {"ms_per_iter": mean("ms_per_iteration"), "tokens_per_s": mean("tokens_per_second"),
               "tflops": mean("tflops_per_gpu"), "last_loss": records[-1]["lm_loss"]}
    log = os.path.join(out, f"conveyor_{model}.log")
    if os.path.exists(log):
        match = re.search(r"GPU memory: peak ([\d.]+) GiB in tensors, ([\d.]+) GiB reserved",
                          open(log).read())
        if match:
            figures["peak_memory_gib"] = float(match.group(2))
    return figures


def pytorch_figures(out, model):
    path = os.path.join(out, f"pytorch_{model}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        p = json.load(f)
    figures = {"ms_per_iter": p["ms_per_iter"], "tokens_per_s": p["tokens_per_s"],
               "tflops": p["tflops"], "last_loss": p["last_loss"],
               "gemm_peak_tflops": p.get("gemm_peak_tflops"),
               "datasheet_peak_tflops": p.get("datasheet_peak_tflops")}
    if p.get("peak_memory_bytes"):
        figures["peak_memory_gib"] = p["peak_memory_bytes"] / 2**30
    return figures


def mfu(tflops, peak):
    return None if not peak else tflops / peak


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder device_check.sh wrote")
    parser.add_argument("--models", nargs="+", required=True)
    parser.add_argument("--json", help="write the table as JSON here")
    args = parser.parse_args()

    rows = {}
    for model in args.models:
        conveyor, pytorch = conveyor_figures(args.out, model), pytorch_figures(args.out, model)
        gemm_peak = pytorch and pytorch["gemm_peak_tflops"]
        datasheet = pytorch and pytorch["datasheet_peak_tflops"]
        row = {"conveyor": conveyor, "pytorch": pytorch, "gemm_peak_tflops": gemm_peak,
               "datasheet_peak_tflops": datasheet}
        for name, figures in (("conveyor", conveyor), ("pytorch", pytorch)):
            if figures:
                figures["mfu_measured"] = mfu(figures["tflops"], gemm_peak)
                figures["mfu_datasheet"] = mfu(figures["tflops"], datasheet)
        if conveyor and pytorch:
            row["conveyor_over_pytorch"] = conveyor["tokens_per_s"] / pytorch["tokens_per_s"]
        rows[model] = row

    def cell(figures, key, fmt):
        value = figures and figures.get(key)
        return "n/a" if value is None else fmt.format(value)

    print(f"{'model':<10} {'who':<9} {'ms/iter':>8} {'tokens/s':>10} {'TFLOP/s':>8} "
          f"{'MFU(GEMM)':>9} {'MFU(sheet)':>10} {'mem GiB':>8} {'loss':>6}")
    for model, row in rows.items():
        for who in ("conveyor", "pytorch"):
            f = row[who]
            print(f"{model:<10} {who:<9} {cell(f, 'ms_per_iter', '{:.1f}'):>8} "
                  f"{cell(f, 'tokens_per_s', '{:,.0f}'):>10} {cell(f, 'tflops', '{:.1f}'):>8} "
                  f"{cell(f, 'mfu_measured', '{:.1%}'):>9} {cell(f, 'mfu_datasheet', '{:.1%}'):>10} "
                  f"{cell(f, 'peak_memory_gib', '{:.1f}'):>8} {cell(f, 'last_loss', '{:.2f}'):>6}")
        ratio = row.get("conveyor_over_pytorch")
        print(f"{model:<10} conveyor / pytorch tokens/s: "
              f"{'n/a' if ratio is None else f'{ratio:.2f}x'}; GEMM peak measured "
              f"{cell(row, 'gemm_peak_tflops', '{:.0f}')} TFLOP/s, datasheet "
              f"{cell(row, 'datasheet_peak_tflops', '{:.0f}')}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
