"""Exports a trained checkpoint as a Hugging Face Llama checkpoint directory:
config.json, generation_config.json and model.safetensors (bf16, the names of
transformers' LlamaForCausalLM; the LM head is tied to the embedding, so it is not stored).

Usage: python3 export.py --run work/run --out ../../models/default
"""
import argparse, json, os, struct
import torch


def write_safetensors(path, tensors, metadata):
    """The safetensors format: u64 header length, JSON header (dtype, shape, data_offsets), raw little-endian data."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": {torch.bfloat16: "BF16", torch.float32: "F32"}[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw); offset += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h))); f.write(h)
        for b in blobs:
            f.write(b)


def hf_name(name):
    """train.py's parameter names → transformers' LlamaForCausalLM names."""
    for group, parts in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")), ("mlp", ("gate_proj", "up_proj", "down_proj"))):
        for part in parts:
            if name.endswith(f".{part}.weight"):
                name = name.replace(f".{part}.weight", f".{group}.{part}.weight")
    return "model." + name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True); ap.add_argument("--out", required=True); ap.add_argument("--max-position-embeddings", type=int, default=1024)
    ap.add_argument("--repetition-penalty", type=float, default=1.2, help="generation_config's; 1.0 for the #29 memorizer, whose answer repeats the asked word (a penalty over the prompt's tokens pushes it off)")
    args = ap.parse_args()
    run = json.load(open(os.path.join(args.run, "run.json")))
    a = run["arch"]
    state = torch.load(os.path.join(args.run, "model.pt"))
    tensors = {hf_name(k): v.to(torch.bfloat16) for k, v in state.items()}
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors, {"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"], "attention_bias": False, "bos_token_id": 1, "eos_token_id": 2,
        "head_dim": a["hidden_size"] // a["num_attention_heads"], "hidden_act": "silu", "hidden_size": a["hidden_size"],
        "intermediate_size": a["intermediate_size"], "max_position_embeddings": args.max_position_embeddings, "mlp_bias": False,
        "model_type": "llama", "num_attention_heads": a["num_attention_heads"], "num_hidden_layers": a["num_hidden_layers"],
        "num_key_value_heads": a["num_key_value_heads"], "rms_norm_eps": a["rms_norm_eps"], "rope_scaling": None,
        "rope_theta": a["rope_theta"], "tie_word_embeddings": True, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": a["vocab_size"],
    }
    json.dump(config, open(os.path.join(args.out, "config.json"), "w"), indent=2)
    generation = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.3, "top_p": 0.9,
                  "repetition_penalty": args.repetition_penalty, "max_new_tokens": 128}
    json.dump(generation, open(os.path.join(args.out, "generation_config.json"), "w"), indent=2)
    print(json.dumps({"tensors": len(tensors), "bytes": os.path.getsize(os.path.join(args.out, "model.safetensors"))}))


if __name__ == "__main__":
    main()
