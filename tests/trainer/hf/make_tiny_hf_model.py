#!/usr/bin/env python3
"""Writes a tiny random Hugging Face model folder (config.json + safetensors).

    make_tiny_hf_model.py OUT_DIR [--arch llama|mistral|qwen2|qwen3|mixtral|qwen2_moe|qwen3_moe|
                                          deepseek_v3]
                          [--dtype F32|BF16|F16] [--layers 2] [--hidden 64] [--heads 4]
                          [--kv-heads 2] [--ffn 128] [--vocab 256] [--experts 4] [--topk 2]
                          [--moe-ffn 32] [--shared-ffn 48] [--seed 0] [--shard-bytes N]

The layout is transformers' own (LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM: model.embed_tokens,
model.layers.N.self_attn.{q,k,v,o}_proj (Qwen3: and {q,k}_norm),
mlp.{gate,up,down}_proj, the two RMSNorms, model.norm, lm_head; the mixtures of experts
MixtralForCausalLM (block_sparse_moe.gate, experts.E.w1/w3/w2), Qwen2MoeForCausalLM and
Qwen3MoeForCausalLM (mlp.gate, mlp.experts.E.{gate,up,down}_proj; Qwen2-MoE's
mlp.shared_expert.* and shared_expert_gate) in place of the MLP; DeepseekV3ForCausalLM's
multi-latent attention (self_attn.q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa,
kv_a_layernorm, kv_b_proj, o_proj), a dense first layer, then mlp.gate with its
e_score_correction_bias, mlp.experts.E.* and mlp.shared_experts.*), written with NumPy
only, so the README's walk-through and the tests need no torch. With --shard-bytes
the weights are split into model-0000i-of-0000n.safetensors plus
model.safetensors.index.json, as save_pretrained does for large models.
"""
import argparse
import json
import os
import struct

import numpy as np

CLASSES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
           "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
           "mixtral": "MixtralForCausalLM", "qwen2_moe": "Qwen2MoeForCausalLM",
           "qwen3_moe": "Qwen3MoeForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM"}
# DeepSeek-V3's multi-latent attention widths at toy size.
MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8,
       "v_head_dim": 16}


def to_bytes(array, dtype):
    """Row-major little-endian bytes of `array` (float32) in safetensors' `dtype`."""
    a = np.ascontiguousarray(array, dtype="<f4")
    if dtype == "F32":
        return a.tobytes()
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    # BF16: the top 16 bits of the fp32 pattern, rounded to nearest even.
    bits = a.view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def write_safetensors(path, tensors, dtype):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        blob = to_bytes(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def attention_weights(args, rng, p):
    """Layer prefix p's q/k/v/o projections (Qwen2: q/k/v biases, Qwen3: q/k norms)."""
    d = args.hidden // args.heads
    q, kv = args.heads * d, args.kv_heads * d
    t = {}
    for name, rows in (("q", q), ("k", kv), ("v", kv)):
        t[p + f"self_attn.{name}_proj.weight"] = rng.normal(0, 0.3, (rows, args.hidden))
        if args.arch in ("qwen2", "qwen2_moe"):
            t[p + f"self_attn.{name}_proj.bias"] = rng.normal(0, 0.3, rows)
    if args.arch in ("qwen3", "qwen3_moe"):
        t[p + "self_attn.q_norm.weight"] = 1 + rng.normal(0, 0.1, d)
        t[p + "self_attn.k_norm.weight"] = 1 + rng.normal(0, 0.1, d)
    t[p + "self_attn.o_proj.weight"] = rng.normal(0, 0.3, (args.hidden, q))
    return t


def mla_weights(args, rng, p):
    """DeepSeek-V3's multi-latent attention projections of layer prefix p."""
    a, h, n = p + "self_attn.", args.hidden, args.heads
    dq = MLA["qk_nope_head_dim"] + MLA["qk_rope_head_dim"]
    return {a + "q_a_proj.weight": rng.normal(0, 0.3, (MLA["q_lora_rank"], h)),
            a + "q_a_layernorm.weight": 1 + rng.normal(0, 0.1, MLA["q_lora_rank"]),
            a + "q_b_proj.weight": rng.normal(0, 0.3, (n * dq, MLA["q_lora_rank"])),
            a + "kv_a_proj_with_mqa.weight":
                rng.normal(0, 0.3, (MLA["kv_lora_rank"] + MLA["qk_rope_head_dim"], h)),
            a + "kv_a_layernorm.weight": 1 + rng.normal(0, 0.1, MLA["kv_lora_rank"]),
            a + "kv_b_proj.weight": rng.normal(
                0, 0.3, (n * (MLA["qk_nope_head_dim"] + MLA["v_head_dim"]), MLA["kv_lora_rank"])),
            a + "o_proj.weight": rng.normal(0, 0.3, (h, n * MLA["v_head_dim"]))}


def weights(args, rng):
    t = {"model.embed_tokens.weight": rng.normal(0, 0.3, (args.vocab, args.hidden)),
         "model.norm.weight": 1 + rng.normal(0, 0.1, args.hidden),
         "lm_head.weight": rng.normal(0, 0.3, (args.vocab, args.hidden))}
    deepseek = args.arch == "deepseek_v3"
    for i in range(args.layers):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = 1 + rng.normal(0, 0.1, args.hidden)
        t[p + "post_attention_layernorm.weight"] = 1 + rng.normal(0, 0.1, args.hidden)
        t.update(mla_weights(args, rng, p) if deepseek else attention_weights(args, rng, p))
        # DeepSeek-V3's first layer is dense (first_k_dense_replace 1).
        if args.arch in ("mixtral", "qwen2_moe", "qwen3_moe") or (deepseek and i > 0):
            t.update(moe_weights(args, rng, p))
            continue
        t[p + "mlp.gate_proj.weight"] = rng.normal(0, 0.3, (args.ffn, args.hidden))
        t[p + "mlp.up_proj.weight"] = rng.normal(0, 0.3, (args.ffn, args.hidden))
        t[p + "mlp.down_proj.weight"] = rng.normal(0, 0.3, (args.hidden, args.ffn))
    return {k: v.astype(np.float32) for k, v in t.items()}


def moe_weights(args, rng, p):
    """The router, the experts (and Qwen2-MoE's gated shared expert, DeepSeek-V3's expert
    bias and shared experts) of layer prefix p."""
    mixtral = args.arch == "mixtral"
    block = p + ("block_sparse_moe." if mixtral else "mlp.")
    names = ("w1", "w3", "w2") if mixtral else ("gate_proj", "up_proj", "down_proj")
    t = {block + "gate.weight": rng.normal(0, 0.3, (args.experts, args.hidden))}

    def gated_mlp(prefix, width):
        t[prefix + names[0] + ".weight"] = rng.normal(0, 0.3, (width, args.hidden))
        t[prefix + names[1] + ".weight"] = rng.normal(0, 0.3, (width, args.hidden))
        t[prefix + names[2] + ".weight"] = rng.normal(0, 0.3, (args.hidden, width))
    for e in range(args.experts):
        gated_mlp(f"{block}experts.{e}.", args.moe_ffn)
    if args.arch == "qwen2_moe":
        gated_mlp(block + "shared_expert.", args.shared_ffn)
        t[block + "shared_expert_gate.weight"] = rng.normal(0, 0.3, (1, args.hidden))
    if args.arch == "deepseek_v3":  # one shared expert as wide as a routed one
        gated_mlp(block + "shared_experts.", args.moe_ffn)
        t[block + "gate.e_score_correction_bias"] = rng.uniform(0, 0.2, args.experts)
    return t


def moe_config(args):
    """The mixture-of-experts fields of config.json."""
    if args.arch == "deepseek_v3":  # two groups of experts, the best one kept
        return dict(MLA, n_routed_experts=args.experts, num_experts_per_tok=args.topk,
                    moe_intermediate_size=args.moe_ffn, n_shared_experts=1, n_group=2,
                    topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5,
                    first_k_dense_replace=1, rope_interleave=True, attention_bias=False,
                    num_key_value_heads=args.heads)
    if args.arch == "mixtral":
        return {"num_local_experts": args.experts, "num_experts_per_tok": args.topk,
                "intermediate_size": args.moe_ffn, "router_jitter_noise": 0.0,
                "sliding_window": None}
    c = {"num_experts": args.experts, "num_experts_per_tok": args.topk,
         "moe_intermediate_size": args.moe_ffn, "decoder_sparse_step": 1, "mlp_only_layers": [],
         "norm_topk_prob": args.arch == "qwen3_moe", "use_sliding_window": False,
         "sliding_window": 4096}
    if args.arch == "qwen2_moe":
        c.update(shared_expert_intermediate_size=args.shared_ffn, qkv_bias=True)
    else:
        c.update(head_dim=args.hidden // args.heads, attention_bias=False)
    return c


def config(args):
    c = {"architectures": [CLASSES[args.arch]], "model_type": args.arch,
         "hidden_act": "silu", "hidden_size": args.hidden, "intermediate_size": args.ffn,
         "num_attention_heads": args.heads, "num_key_value_heads": args.kv_heads,
         "num_hidden_layers": args.layers, "vocab_size": args.vocab,
         "max_position_embeddings": 4096, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
         "rope_scaling": None, "tie_word_embeddings": False,
         "torch_dtype": {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}[args.dtype]}
    if args.arch == "mistral":
        c["sliding_window"] = None
    if args.arch in ("qwen2", "qwen3"):
        c.update(use_sliding_window=False, sliding_window=4096)
    if args.arch == "qwen3":
        c.update(head_dim=args.hidden // args.heads, attention_bias=False)
    if args.arch in ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3"):
        c.update(moe_config(args))
    return c


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--arch", choices=sorted(CLASSES), default="llama")
    parser.add_argument("--dtype", choices=["F32", "BF16", "F16"], default="F32")
    for flag, default in (("layers", 2), ("hidden", 64), ("heads", 4), ("kv-heads", 2),
                          ("ffn", 128), ("vocab", 256), ("experts", 4), ("topk", 2),
                          ("moe-ffn", 32), ("shared-ffn", 48), ("seed", 0), ("shard-bytes", 0)):
        parser.add_argument(f"--{flag}", type=int, default=default)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tensors = weights(args, np.random.default_rng(args.seed))
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config(args), f, indent=2, sort_keys=True)
        f.write("\n")
    if args.shard_bytes <= 0:
        write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, args.dtype)
        return
    shards, size = [[]], 0
    for name in sorted(tensors):
        if shards[-1] and size + tensors[name].nbytes > args.shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(name)
        size += tensors[name].nbytes
    weight_map = {}
    for i, names in enumerate(shards):
        file = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(args.out, file), {n: tensors[n] for n in names}, args.dtype)
        weight_map.update({n: file for n in names})
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": sum(t.nbytes for t in tensors.values())},
                   "weight_map": weight_map}, f, indent=2, sort_keys=True)


if __name__ == "__main__":
    main()
