#!/usr/bin/env python3
"""Checks a Conveyor export against the Hugging Face folder it was imported from.

    transformers_check.py ORIGINAL_DIR EXPORTED_DIR

Three levels, each run when its library can be imported and otherwise reported as
SKIPPED with the reason (exit status 0 either way; 1 on a real mismatch):
  1. NumPy (and the safetensors format read by hand): every tensor of the export
     equals the original's bit for bit (the run trained with --lr 0).
  2. transformers: AutoConfig and GenerationConfig load the export and describe the
     original's architecture.
  3. transformers + torch: AutoModelForCausalLM loads the export and its logits equal
     the original model's.
"""
import json
import struct
import sys


def read_safetensors(path):
    import numpy as np
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = np.frombuffer(data[begin:end], dtype={"F32": "<f4", "F16": "<f2", "BF16": "<u2"}[entry["dtype"]])
        if entry["dtype"] == "BF16":
            raw = (raw.astype("<u4") << 16).view("<f4")
        out[name] = raw.astype("<f4").reshape(entry["shape"])
    return out


def read_folder(folder):
    import os
    index = os.path.join(folder, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(folder, "model.safetensors"))
    tensors = {}
    for file in sorted(set(json.load(open(index))["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(folder, file)))
    return tensors


def main(original, exported):
    failures = []
    try:
        import numpy as np
    except ImportError as e:
        print(f"SKIPPED all checks: numpy cannot be imported ({e})")
        return 0
    a, b = read_folder(original), read_folder(exported)
    if sorted(a) != sorted(b):
        failures.append(f"tensor names differ: {sorted(set(a) ^ set(b))}")
    for name in sorted(set(a) & set(b)):
        if a[name].shape != b[name].shape or not np.array_equal(a[name], b[name]):
            failures.append(f"{name} differs")
    print(f"numpy: {len(b)} tensors compared bit for bit")

    try:
        import transformers
    except ImportError as e:
        print(f"SKIPPED transformers checks: transformers cannot be imported ({e})")
        transformers = None
    if transformers is not None:
        want = json.load(open(f"{original}/config.json"))
        config = transformers.AutoConfig.from_pretrained(exported)
        for key in ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads",
                    "num_key_value_heads", "vocab_size", "rms_norm_eps", "tie_word_embeddings"):
            if key in want and getattr(config, key) != want[key]:
                failures.append(f"config {key}: export {getattr(config, key)}, original {want[key]}")
        # transformers 5 keeps the base period in rope_parameters, 4 in rope_theta.
        theta = getattr(config, "rope_parameters", None) or {"rope_theta": config.rope_theta}
        want_theta = want.get("rope_theta") or want["rope_parameters"]["rope_theta"]
        if theta["rope_theta"] != want_theta:
            failures.append(f"rope theta: export {theta['rope_theta']}, original {want_theta}")
        if config.architectures != want["architectures"]:
            failures.append(f"architectures {config.architectures} != {want['architectures']}")
        transformers.GenerationConfig.from_pretrained(exported)
        print(f"transformers {transformers.__version__}: {type(config).__name__} loaded")
        try:
            import torch
        except ImportError as e:
            print(f"SKIPPED model check: torch cannot be imported ({e})")
            torch = None
        if torch is not None:
            ids = torch.arange(16).reshape(1, 16) % config.vocab_size
            logits = [transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)(ids).logits
                      for d in (original, exported)]
            if not torch.allclose(logits[0], logits[1], rtol=1e-5, atol=1e-5):
                failures.append("logits of the export differ from the original's")
            print("torch: AutoModelForCausalLM logits compared")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
