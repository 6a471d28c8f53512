#!/usr/bin/env python3
"""Conveyor against the same model in PyTorch on this CPU, interleaved in one call.

The model is tools/bench_cpu.sh's (GPT-2 architecture, 4 layers, hidden 256, 4 heads,
seq 256, micro-batch 8, vocab 8192, dropout 0), built in PyTorch by tools/bench_pytorch.py's
GPT class (the same layers, tied embeddings, biases everywhere). Each round runs each
Conveyor trainer given (a fresh process: the mean of its last 6 of 12 iterations, as its
log reports it; several, e.g. before=A after=B, compare builds) and then each PyTorch
mode on one warm model (6 timed steps after the warm-up), so that a shared or throttled
machine slows all alike; ratios are taken per round, and each round runs fp32 and then
bf16 (Conveyor's --bf16, PyTorch's CPU autocast to bfloat16), so that the two precisions
compare within a round too. Also measured each round: the GEMM peak of the machine in
each precision, on the step's largest GEMM shapes (fp32: the best of Conveyor's AVX-512
kernel, OpenBLAS and torch.mm; bf16 with fp32 accumulation: the
best of Conveyor's AVX-512 BF16 kernel, through gemm_peak, and torch.mm on bfloat16), and
the fraction of it each step reaches (Megatron's FLOPs per iteration,
trainer/planning/flops.cc).

    tools/bench_cpu_vs_pytorch.sh   (builds the trainer and the virtual environment)
"""
import argparse
import ctypes
import os
import re
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pytorch import GPT, megatron_flops_per_iter  # noqa: E402

MODEL = dict(layers=4, hidden=256, heads=4, seq=256, vocab=8192, micro_batch=8)
TRAINER_ARGS = [
    "--mock-data", "--num-layers", "4", "--hidden-size", "256", "--num-attention-heads", "4",
    "--seq-length", "256", "--micro-batch-size", "8", "--num-micro-batches", "1",
    "--vocab-size", "8192", "--hidden-dropout", "0", "--attention-dropout", "0",
    "--train-iters", "12", "--log-interval", "6", "--lr", "1e-4", "--eval-iters", "0",
]
# The step's GEMMs: [tokens, hidden] against the MLP's and the output layer's weights.
TOKENS = MODEL["micro_batch"] * MODEL["seq"]
PEAK_SHAPES = [(TOKENS, 4 * MODEL["hidden"], MODEL["hidden"]),
               (TOKENS, MODEL["vocab"], MODEL["hidden"]),
               (TOKENS, MODEL["hidden"], MODEL["vocab"])]


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def best_gflops(run, m, n, k, repeats=5):
    run()
    best = min(timed(run) for _ in range(repeats))
    return 2.0 * m * n * k / best / 1e9


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load_openblas():
    """The system OpenBLAS (the library Conveyor links) and the kernels it runs."""
    try:
        blas = ctypes.CDLL("libopenblas.so.0")
    except OSError:
        return None, "no libopenblas.so.0"
    blas.openblas_get_corename.restype = ctypes.c_char_p
    f, i, p = ctypes.c_float, ctypes.c_int, ctypes.c_void_p
    blas.cblas_sgemm.argtypes = [i, i, i, i, i, i, f, p, i, p, i, f, p, i]
    return blas, blas.openblas_get_corename().decode()


def openblas_peak(blas):
    """Best sgemm GFLOP/s of OpenBLAS on the step's shapes."""
    if blas is None:
        return 0.0
    sgemm = blas.cblas_sgemm
    best = 0.0
    for m, n, k in PEAK_SHAPES:
        a, b, c = torch.randn(m, k), torch.randn(n, k), torch.empty(m, n)
        # Row-major (101), C = A B^T (111 no-trans, 112 trans): the linear layers' forward.
        run = lambda: sgemm(101, 111, 112, m, n, k, 1.0, a.data_ptr(), k, b.data_ptr(), k, 0.0,
                            c.data_ptr(), n)
        best = max(best, best_gflops(run, m, n, k))
    return best


def torch_peak(dtype=torch.float32):
    best = 0.0
    for m, n, k in PEAK_SHAPES:
        a, b = torch.randn(m, k).to(dtype), torch.randn(n, k).to(dtype)
        c = torch.empty(m, n, dtype=dtype)
        best = max(best, best_gflops(lambda: torch.mm(a, b.t(), out=c), m, n, k))
    return best


def conveyor_peaks(gemm_peak):
    """Best GFLOP/s of Conveyor's CPU GEMMs per kind (runtime/cpu/gemm_peak): fp32 as the
    CPU backend runs it (its AVX-512 kernel where the CPU has one), fp32 through OpenBLAS,
    bf16 through the AVX-512 BF16 kernel (absent without it)."""
    if not gemm_peak:
        return {}
    shapes = [f"{m},{n},{k}" for m, n, k in PEAK_SHAPES]
    out = subprocess.run([gemm_peak] + shapes, check=True, capture_output=True, text=True).stdout
    best = {}
    for line in out.splitlines():  # gemm_peak <precision> <layout> M N K <GFLOP/s>
        fields = line.split()
        best[fields[1]] = max(best.get(fields[1], 0.0), float(fields[6]))
    return best


class Peaks:
    """The machine's measured GEMM peak in fp32 and in bf16, and where each came from."""

    def __init__(self, blas, gemm_peak, bf16_cpu):
        conveyor = conveyor_peaks(gemm_peak)
        self.fp32 = {"OpenBLAS": openblas_peak(blas), "torch.mm": torch_peak()}
        if "fp32" in conveyor:
            self.fp32["Conveyor's kernel"] = conveyor["fp32"]
        self.bf16 = {"torch.mm": torch_peak(torch.bfloat16)} if bf16_cpu else {}
        if "bf16" in conveyor:
            self.bf16["Conveyor's kernel"] = conveyor["bf16"]

    def best(self, bf16):
        # Without bf16 instructions the bf16 GEMMs run at fp32's rate at best.
        return max((self.bf16 if bf16 and self.bf16 else self.fp32).values())

    def line(self, bf16):
        sources = self.bf16 if bf16 else self.fp32
        return ", ".join(f"{name} {v:.0f}" for name, v in sources.items()) + " GFLOP/s"


def run_conveyor(trainer, bf16):
    args = [trainer] + TRAINER_ARGS + (["--bf16"] if bf16 else [])
    log = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    last = [l for l in log.splitlines() if re.match(r"^ *iteration +\d+/", l)][-1]
    return float(re.search(r"elapsed time per iteration \(ms\): ([0-9.]+)", last).group(1))


class TorchMode:
    """One warm PyTorch model and optimizer: eager (SDPA, fused AdamW) or torch.compile."""

    def __init__(self, name, compiled, bf16):
        self.name = name
        torch.manual_seed(1234)
        model = GPT(MODEL["layers"], MODEL["hidden"], MODEL["heads"], MODEL["seq"],
                    MODEL["vocab"])
        decay = [p for p in model.parameters() if p.dim() >= 2]
        no_decay = [p for p in model.parameters() if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
            lr=1e-4, fused=True)
        self.forward = torch.compile(model) if compiled else model
        self.bf16 = bf16
        data = torch.randint(0, MODEL["vocab"], (MODEL["micro_batch"], MODEL["seq"] + 1),
                             generator=torch.Generator().manual_seed(0))
        self.tokens, self.labels = data[:, :-1], data[:, 1:]
        for _ in range(3):  # compilation happens here
            self.step()

    def step(self):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            loss = self.forward(self.tokens, self.labels)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def ms_per_iteration(self, steps=6):
        return 1e3 * timed(lambda: [self.step() for _ in range(steps)]) / steps


def spread(values):
    return f"{min(values):.1f} - {max(values):.1f} (median {statistics.median(values):.1f})"


class Precision:
    """One precision's PyTorch modes and, per round, its step times and GEMM peaks."""

    def __init__(self, bf16, trainers, modes):
        self.bf16, self.label = bf16, "bf16" if bf16 else "fp32"
        self.torch_modes = [TorchMode(m, m == "compile", bf16) for m in modes]
        self.ms = {name: [] for name in list(trainers) + [f"pytorch {m.name}"
                                                          for m in self.torch_modes]}
        self.peaks = []

    def run_round(self, r, trainers, peaks):
        self.peaks.append(peaks.best(self.bf16))
        for name, path in trainers.items():
            self.ms[name].append(run_conveyor(path, self.bf16))
        for mode in self.torch_modes:
            self.ms[f"pytorch {mode.name}"].append(mode.ms_per_iteration())
        print(f"  {self.label} round {r + 1}: GEMM peak ({peaks.line(self.bf16)}) "
              f"{self.peaks[-1]:.0f} GFLOP/s; "
              + ", ".join(f"{name} {v[-1]:.1f} ms" for name, v in self.ms.items()), flush=True)

    def summary(self, trainers, flops):
        for name, v in self.ms.items():
            fractions = [flops / t / 1e6 / p for t, p in zip(v, self.peaks)]
            print(f"{self.label}: {name} {spread(v)} ms/iteration, "
                  f"{statistics.median(fractions):.0%} of the {self.label} GEMM peak measured "
                  f"in its round")
        for name in trainers:
            for other in self.ms:
                if other.startswith("pytorch ") or (other != name and other in trainers):
                    print(f"{self.label}: {name} / {other} per round: "
                          + ratios(self.ms[name], self.ms[other]))


def ratios(a, b):
    return ", ".join(f"{x / y:.2f}" for x, y in zip(a, b))


def bench(trainers, precisions, modes, rounds, blas, gemm_peak, flops):
    """Rounds of every precision's trainers and PyTorch modes; prints each round and a
    summary, and bf16's time over fp32's per round for each trainer and mode."""
    bf16_cpu = "avx512_bf16" in cpu_flags()
    runs = [Precision(p == "bf16", trainers, modes) for p in precisions]
    for r in range(rounds):
        peaks = Peaks(blas, gemm_peak, bf16_cpu)
        for run in runs:
            run.run_round(r, trainers, peaks)
    for run in runs:
        run.summary(trainers, flops)
    if len(runs) == 2 and runs[0].bf16 != runs[1].bf16:
        fp32, bf16 = (runs[0], runs[1]) if runs[1].bf16 else (runs[1], runs[0])
        for name in fp32.ms:
            print(f"bf16 / fp32: {name} per round: {ratios(bf16.ms[name], fp32.ms[name])}")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--trainer", action="append", required=True, metavar="[LABEL=]PATH",
                   help="a Conveyor trainer binary; repeat (before=A --trainer after=B) "
                        "to compare builds in the same rounds")
    p.add_argument("--commit", default="unknown")
    p.add_argument("--gemm-peak", default="", metavar="PATH",
                   help="Conveyor's runtime/cpu:gemm_peak binary (its GEMM rates)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--modes", default="eager,compile", help="PyTorch modes: eager, compile")
    p.add_argument("--precisions", default="fp32,bf16")
    args = p.parse_args(argv)

    trainers = {}
    for t in args.trainer:
        label, _, path = t.rpartition("=")
        trainers[label or "conveyor"] = path
    blas, blas_core = load_openblas()
    peaks = Peaks(blas, args.gemm_peak, "avx512_bf16" in cpu_flags())
    peak = peaks.best(bf16=False)
    flops = megatron_flops_per_iter(MODEL["micro_batch"], MODEL["seq"], MODEL["layers"],
                                    MODEL["hidden"], MODEL["heads"], MODEL["vocab"])
    print(f"machine: {cpu_model()}, {len(os.sched_getaffinity(0))} usable CPUs"
          f"{', AVX-512 BF16' if 'avx512_bf16' in cpu_flags() else ''}; "
          f"conveyor commit {args.commit}; torch {torch.__version__} "
          f"({torch.get_num_threads()} threads)")
    print(f"GEMM peak (fp32, best of the step's shapes; OpenBLAS runs {blas_core}): "
          f"{peaks.line(False)}; the step is {flops / 1e9:.1f} GFLOP, "
          f"{flops / peak / 1e6:.0f} ms at that peak")
    if peaks.bf16:
        print(f"GEMM peak (bf16 inputs, fp32 accumulation): {peaks.line(True)}; "
              f"{flops / peaks.best(True) / 1e6:.0f} ms at that peak")
    print(f"load average before: {load_average()}")
    modes = [m for m in args.modes.split(",") if m]
    bench(trainers, [p for p in args.precisions.split(",") if p], modes, args.rounds, blas,
          args.gemm_peak, flops)
    # Above the usable CPUs, other work shared the machine: compare within a round only.
    print(f"load average after: {load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
