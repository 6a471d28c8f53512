#!/usr/bin/env python3
"""PyTorch single-GPU training throughput baseline for Conveyor.

Trains the same GPT that Conveyor builds (pre-norm, LayerNorm with bias, learned
position embeddings, tied embeddings, fused QKV, GELU-tanh MLP of 4*hidden, biases
on every linear, Megatron's scaled init, padded vocab 50304, dropout 0) on a fixed
batch of random tokens with fused AdamW, and reports ms/iter, tokens/s, achieved
TFLOP/s and MFU. FLOPs use Megatron's formula, the one in trainer/planning/flops.cc, so the
numbers compare directly with Conveyor's own log. MFU is given against a bf16 GEMM
peak measured on the device and against the datasheet peak.

Invocation used by tools/device_check.sh on the H200 machine:

    python3 tools/bench_pytorch.py --model gpt2-124m --json $OUT/pytorch_124m.json

CPU smoke test:

    python3 tools/bench_pytorch.py --model tiny --device cpu --steps 3 --warmup 1 --no-compile
"""
import argparse
import json
import math
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# Micro-batch defaults: 124m at 16 x 1024 tokens keeps the h=768 GEMMs busy while
# using only ~20 GB; 1.3b at 8 x 2048 needs ~21 GB of fp32 params, grads and Adam
# state plus ~40 GB of activations and logits, leaving the rest of the H200's
# 141 GB as headroom for torch.compile's workspaces and autocast's bf16 weight copies.
PRESETS = {
    "gpt2-124m": dict(layers=12, hidden=768, heads=12, seq=1024, vocab=50304, micro_batch=16),
    "gpt-1.3b": dict(layers=24, hidden=2048, heads=16, seq=2048, vocab=50304, micro_batch=8),
    "tiny": dict(layers=2, hidden=128, heads=4, seq=64, vocab=512, micro_batch=4),
}
# Dense bf16 tensor-core peak of H100/H200 SXM; PCIe and NVL parts are slower.
DATASHEET_BF16_TFLOPS = 989.4


class Block(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden, eps=1e-5)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-5)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, h // self.heads).unbind(2)
        # Default SDPA dispatch picks FlashAttention for bf16 causal inputs on CUDA.
        y = F.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, layers, hidden, heads, seq, vocab):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        self._init_weights(layers)

    def _init_weights(self, layers):
        # Megatron: N(0, 0.02) everywhere, output projections scaled by 1/sqrt(2L)
        # so the residual stream's variance does not grow with depth.
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
            if isinstance(module, nn.Linear):
                nn.init.zeros_(module.bias)
        for block in self.blocks:
            for out in (block.proj, block.fc2):
                nn.init.normal_(out.weight, std=0.02 / math.sqrt(2 * layers))

    def forward(self, tokens, labels):
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.embed(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.embed.weight)  # tied output embedding
        # Loss in fp32, as Megatron does, whatever the model's precision.
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())


def megatron_flops_per_iter(B, s, L, h, a, V, g=None, ffn=None, swiglu=False):
    """Megatron's model FLOPs for forward+backward (trainer/planning/flops.cc)."""
    g = a if g is None else g
    ffn = 4 * h if ffn is None else ffn
    d = h // a
    attention = (1 + g / a + s / h) * (a * d / h)
    mlp = (ffn / h) * (1.5 if swiglu else 1)
    return 12 * B * s * L * h * h * (attention + mlp + V / (2 * L * h))


def measure_gemm_peak_tflops(device, n=8192):
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        torch.matmul(a, b)
    torch.cuda.synchronize()
    return 2 * n**3 * 10 / (time.perf_counter() - start) / 1e12


def datasheet_peak_tflops(name):
    if ("H100" in name or "H200" in name) and "PCIe" not in name and "NVL" not in name:
        return DATASHEET_BF16_TFLOPS
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", choices=PRESETS, default="gpt2-124m")
    p.add_argument("--micro-batch-size", type=int, help="default: per preset")
    p.add_argument("--steps", type=int, default=20, help="timed steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps (compile happens here)")
    p.add_argument("--precision", choices=["bf16-autocast", "bf16-pure"], default="bf16-autocast",
                   help="autocast: fp32 params, bf16 compute; pure: bf16 params and "
                        "bf16 AdamW state (torch's AdamW keeps no fp32 master copy)")
    p.add_argument("--compile", action=argparse.BooleanOptionalAction,
                   help="torch.compile the model (default: on for CUDA, off for CPU)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--json", metavar="FILE", help="also write the figures here as JSON")
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup < 1:
        p.error("--steps and --warmup must be at least 1")
    if args.micro_batch_size is not None and args.micro_batch_size < 1:
        p.error("--micro-batch-size must be at least 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        p.error(f"--device {args.device} requested but CUDA is not available")
    if args.compile is None:
        args.compile = args.device.startswith("cuda")
    return args


def make_optimizer(model, on_cuda):
    # Like Conveyor (model/parameter.h): no weight decay on biases and norm weights.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=6e-4, betas=(0.9, 0.95), fused=on_cuda)


def train(args, cfg, device):
    """Runs warmup + timed steps; returns (seconds for the timed steps, losses)."""
    torch.manual_seed(1234)
    model = GPT(cfg["layers"], cfg["hidden"], cfg["heads"], cfg["seq"], cfg["vocab"]).to(device)
    if args.precision == "bf16-pure":
        model = model.to(torch.bfloat16)
    optimizer = make_optimizer(model, device.type == "cuda")
    step_fn = torch.compile(model) if args.compile else model
    # One fixed batch, made once on the device: keeps data loading out of the timing
    # and lets the loss fall visibly, which shows the step really trains.
    data = torch.randint(0, cfg["vocab"], (args.micro_batch_size, cfg["seq"] + 1),
                         generator=torch.Generator().manual_seed(0)).to(device)
    tokens, labels = data[:, :-1], data[:, 1:]
    autocast = args.precision == "bf16-autocast"

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            loss = step_fn(tokens, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    losses = [step() for _ in range(args.warmup)]
    sync()
    start = time.perf_counter()
    losses += [step() for _ in range(args.steps)]  # no .item() here: it would sync
    sync()
    return time.perf_counter() - start, [x.item() for x in losses]


def fmt_mfu(tflops, peak):
    return "n/a" if peak is None else f"{100 * tflops / peak:.1f}%"


def main(argv):
    args = parse_args(argv)
    cfg = PRESETS[args.model]
    args.micro_batch_size = args.micro_batch_size or cfg["micro_batch"]
    device = torch.device(args.device)
    on_cuda = device.type == "cuda"
    device_name = torch.cuda.get_device_name(device) if on_cuda else "cpu"
    # The GEMM peak is measured before the model exists so nothing else holds memory.
    gemm_peak = measure_gemm_peak_tflops(device) if on_cuda else None
    datasheet = datasheet_peak_tflops(device_name)
    if on_cuda:
        torch.cuda.reset_peak_memory_stats(device)

    seconds, losses = train(args, cfg, device)

    B, s = args.micro_batch_size, cfg["seq"]
    flops = megatron_flops_per_iter(B, s, cfg["layers"], cfg["hidden"], cfg["heads"], cfg["vocab"])
    tflops = flops * args.steps / seconds / 1e12
    result = {
        "framework": "pytorch", "model": args.model, "precision": args.precision,
        "compile": args.compile, "micro_batch_size": B, "seq": s, "steps": args.steps,
        "ms_per_iter": 1e3 * seconds / args.steps,
        "tokens_per_s": B * s * args.steps / seconds,
        "tflops": tflops, "gemm_peak_tflops": gemm_peak, "datasheet_peak_tflops": datasheet,
        "mfu_measured": tflops / gemm_peak if gemm_peak else None,
        "mfu_datasheet": tflops / datasheet if datasheet else None,
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device) if on_cuda else None,
        "first_loss": losses[0], "last_loss": losses[-1],
        "device_name": device_name, "torch_version": torch.__version__,
    }
    mfu = "MFU n/a"
    if gemm_peak is not None:
        mfu = (f"MFU {fmt_mfu(tflops, gemm_peak)} of measured GEMM peak ({gemm_peak:.0f} TFLOP/s), "
               f"{fmt_mfu(tflops, datasheet)} of datasheet"
               + (f" ({datasheet:.0f})" if datasheet else ""))
    memory = ("n/a" if result["peak_memory_bytes"] is None
              else f"{result['peak_memory_bytes'] / 2**30:.1f} GiB")
    print(f"pytorch {args.model} {args.precision} {'compile' if args.compile else 'eager'}: "
          f"{result['ms_per_iter']:.1f} ms/iter, {result['tokens_per_s']:,.0f} tokens/s, "
          f"{tflops:.4g} TFLOP/s, {mfu}, peak memory {memory}, "
          f"loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
