#!/usr/bin/python3
"""
Maintenance script (the `embed` benchmark's baseline): builds the ONNX graph of
a BertModel directory (config.json + model.safetensors, f32) with Debian's
python3-onnx, in the shape Hugging Face's ONNX export (optimum, which
transformers.js runs) gives it:

  inputs   input_ids, attention_mask, token_type_ids   int64 [batch, sequence]
  output   last_hidden_state                           f32   [batch, sequence, hidden]

  x = LayerNormalization(Gather(word, ids) + Gather(pos, position_ids[:, :S]) + Gather(type, types))
  per layer (post-LN):
    q, k, v = x·Wᵀ + b  → [B, H, S, D];  p = Softmax(q·kᵀ/√D + (1 − mask)·−3.4e38)
    x = LN(x + (p·v → [B, S, h])·Woᵀ + bo)
    x = LN(x + GELU(x·W1ᵀ + b1)·W2ᵀ + b2)          GELU = x·0.5·(1 + Erf(x/√2))

onnxruntime fuses these patterns (LayerNorm, Gelu, attention) at session
creation as it does for an exported model. Usage:

  /usr/bin/python3 tools/embed-onnx/build_bert_onnx.py MODEL_DIR OUT.onnx

Needs python3-onnx (apt-get install python3-onnx) and numpy.
"""
import json
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        if e["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {e['dtype']}; this script reads F32 checkpoints")
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype=np.float32).reshape(e["shape"])
    return out


def build(model_dir, out_path):
    cfg = json.load(open(f"{model_dir}/config.json"))
    t = read_safetensors(f"{model_dir}/model.safetensors")
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in t else ""
    h = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    D = h // H
    eps = cfg.get("layer_norm_eps", 1e-12)
    inits, nodes = [], []

    def init(name, array):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(name, values, dtype=np.int64):
        return init(name, np.array(values, dtype=dtype))

    def node(op, inputs, name, **attrs):
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def w(name):
        return t[prefix + name]

    def linear(x, base, out):
        wt = init(f"{base}.weight_t", w(f"{base}.weight").T)  # [in, out]
        b = init(f"{base}.bias", w(f"{base}.bias"))
        return node("Add", [node("MatMul", [x, wt], f"{out}_mm"), b], out)

    def layer_norm(x, base, out):
        return node("LayerNormalization", [x, init(f"{base}.weight", w(f"{base}.weight")), init(f"{base}.bias", w(f"{base}.bias"))], out, axis=-1, epsilon=eps)

    # Embeddings.
    # position_ids = arange(max_position_embeddings)[:, :S], as BertEmbeddings slices its buffer.
    seq = node("Gather", [node("Shape", ["input_ids"], "ids_shape"), const("one_i", [1])], "seq_len", axis=0)
    table = const("position_ids_all", [list(range(cfg["max_position_embeddings"]))])
    pos = node("Slice", [table, const("zero_1d", [0]), seq, const("axis_1", [1])], "position_ids")
    emb = node("Add", [
        node("Add", [
            node("Gather", [init("word", w("embeddings.word_embeddings.weight")), "input_ids"], "emb_word"),
            node("Gather", [init("pos", w("embeddings.position_embeddings.weight")), pos], "emb_pos"),
        ], "emb_wp"),
        node("Gather", [init("type", w("embeddings.token_type_embeddings.weight")), "token_type_ids"], "emb_type"),
    ], "emb_sum")
    x = layer_norm(emb, "embeddings.LayerNorm", "emb_ln")

    # Additive mask [B, 1, 1, S]: 0 for tokens, the f32 minimum for padding.
    m = node("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    m = node("Mul", [node("Sub", [init("one_f", np.array(1, np.float32)), m], "mask_inv"), init("neg_f", np.array(np.finfo(np.float32).min, np.float32))], "mask_add")
    m = node("Unsqueeze", [m, const("mask_axes", [1, 2])], "mask_4d")

    split = const("split_shape", [0, 0, H, D])
    merge = const("merge_shape", [0, 0, h])
    scale = init("scale", np.array(1 / np.sqrt(D), np.float32))
    for l in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{l}."
        heads = lambda n, perm: node("Transpose", [node("Reshape", [linear(x, f"{p}attention.self.{n}", f"l{l}_{n}"), split], f"l{l}_{n}_4d")], f"l{l}_{n}_t", perm=perm)
        q = heads("query", [0, 2, 1, 3])
        k = heads("key", [0, 2, 3, 1])
        v = heads("value", [0, 2, 1, 3])
        s = node("Add", [node("Mul", [node("MatMul", [q, k], f"l{l}_qk"), scale], f"l{l}_scores"), m], f"l{l}_masked")
        ctx = node("MatMul", [node("Softmax", [s], f"l{l}_probs", axis=-1), v], f"l{l}_ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], f"l{l}_ctx_t", perm=[0, 2, 1, 3]), merge], f"l{l}_ctx_3d")
        a = linear(ctx, f"{p}attention.output.dense", f"l{l}_attn_out")
        x = layer_norm(node("Add", [a, x], f"l{l}_attn_res"), f"{p}attention.output.LayerNorm", f"l{l}_attn_ln")
        u = linear(x, f"{p}intermediate.dense", f"l{l}_up")
        g = node("Erf", [node("Div", [u, init(f"l{l}_sqrt2", np.array(np.sqrt(2), np.float32))], f"l{l}_gelu_div")], f"l{l}_gelu_erf")
        g = node("Mul", [node("Mul", [u, node("Add", [g, init(f"l{l}_one", np.array(1, np.float32))], f"l{l}_gelu_add")], f"l{l}_gelu_mul"), init(f"l{l}_half", np.array(0.5, np.float32))], f"l{l}_gelu")
        d = linear(g, f"{p}output.dense", f"l{l}_down")
        x = layer_norm(node("Add", [d, x], f"l{l}_out_res"), f"{p}output.LayerNorm", f"l{l}_out_ln")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    ints = lambda name: helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "sequence"])
    graph = helper.make_graph(nodes, "bert", [ints("input_ids"), ints("attention_mask"), ints("token_type_ids")],
                              [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", h])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="kvflash tools/embed-onnx")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: build_bert_onnx.py MODEL_DIR OUT.onnx")
    build(sys.argv[1], sys.argv[2])
