"""Trains the default model's BPE tokenizer and writes tokenizer.json + tokenizer_config.json.

The tokenizer has the shape of Llama 2's fast tokenizer (what `@huggingface/tokenizers` and
transformers load as a LlamaTokenizerFast): normalizer Prepend("▁") + Replace(" " → "▁"),
no pre-tokenizer, a BPE model with byte fallback (<0x00>..<0xFF>), and the decoder
Replace("▁" → " "), ByteFallback, Fuse, Strip(1 leading space). Only the vocabulary is new:
trained on the corpus with classic BPE (Sennrich et al. 2016): count the corpus's pieces,
then repeatedly merge the most frequent adjacent pair.

Pieces never cross a word start ("▁") or a letter/non-letter boundary, so merges never do
either, and applying the merges over a whole normalized string (what the BPE model does with
no pre-tokenizer) gives the same tokens as applying them piece by piece.

Ids: 0 <unk>, 1 <s>, 2 </s>, 3 <|system|>, 4 <|user|>, 5 <|assistant|>, 6..261 the bytes,
then the single characters seen at least --min-char-count times, then the merges.

Usage: python3 bpe.py --corpus work/train.jsonl --out ../../models/default --vocab 4096
"""
import argparse, collections, heapq, json, os, re

SPECIALS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]
PIECE = re.compile(r"▁?[A-Za-z]+|▁?[0-9]|▁?[^A-Za-z0-9▁]+|▁")

CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'system' %}{{ '<|system|>' + message['content'] | trim }}"
    "{% elif message['role'] == 'user' %}{{ '<|user|>' + message['content'] | trim }}"
    "{% elif message['role'] == 'assistant' %}{{ '<|assistant|>' + message['content'] | trim + eos_token }}"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)


def pieces_of(text):
    return PIECE.findall("▁" + text.replace(" ", "▁"))


def train(counts, alphabet, n_merges):
    """counts: {piece: frequency}. Returns the merges, most frequent first."""
    words = [list(p) for p in counts]
    freq = list(counts.values())
    pair_count = collections.Counter()
    where = collections.defaultdict(set)
    for i, w in enumerate(words):
        for a, b in zip(w, w[1:]):
            pair_count[(a, b)] += freq[i]
            where[(a, b)].add(i)
    heap = [(-c, p) for p, c in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    while len(merges) < n_merges and heap:
        c, pair = heapq.heappop(heap)
        if -c != pair_count.get(pair, 0) or -c <= 0:
            continue  # stale entry
        merges.append(pair)
        a, b = pair
        joined = a + b
        for i in list(where[pair]):
            w, f = words[i], freq[i]
            j, out = 0, []
            changed = False
            while j < len(w):
                if j + 1 < len(w) and w[j] == a and w[j + 1] == b:
                    out.append(joined); j += 2; changed = True
                else:
                    out.append(w[j]); j += 1
            if not changed:
                continue
            for x, y in zip(w, w[1:]):
                pair_count[(x, y)] -= f
                where[(x, y)].discard(i)
            for x, y in zip(out, out[1:]):
                pair_count[(x, y)] += f
                where[(x, y)].add(i)
            touched = set(zip(out, out[1:]))
            for p in touched:
                heapq.heappush(heap, (-pair_count[p], p))
            words[i] = out
        pair_count.pop(pair, None)
    return merges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--min-char-count", type=int, default=50)
    args = ap.parse_args()

    counts = collections.Counter()
    with open(args.corpus) as f:
        for line in f:
            for m in json.loads(line)["messages"]:
                counts.update(pieces_of(m["content"].strip()))
    chars = collections.Counter()
    for p, c in counts.items():
        for ch in p:
            chars[ch] += c
    alphabet = sorted(ch for ch, c in chars.items() if c >= args.min_char_count)
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for ch in alphabet:
        vocab[ch] = len(vocab)
    # Pieces with characters outside the alphabet are split there (byte fallback handles them).
    keep = collections.Counter()
    for p, c in counts.items():
        for part in re.split("[^" + re.escape("".join(alphabet)) + "]", p):
            if len(part) > 1:
                keep[part] += c
    merges = train(keep, alphabet, args.vocab - len(vocab))
    for a, b in merges:
        vocab[a + b] = len(vocab)
    print(json.dumps({"pieces": len(counts), "alphabet": len(alphabet), "merges": len(merges), "vocab": len(vocab)}))

    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True} for i, t in enumerate(SPECIALS)]
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "}, {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": True, "byte_fallback": True, "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    config = {
        "add_bos_token": True, "add_eos_token": False,
        "added_tokens_decoder": {str(a["id"]): {k: v for k, v in a.items() if k != "id"} for a in added},
        "additional_special_tokens": SPECIALS[3:],
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
        "chat_template": CHAT_TEMPLATE, "clean_up_tokenization_spaces": False, "legacy": True,
        "model_max_length": 1024, "spaces_between_special_tokens": False, "tokenizer_class": "LlamaTokenizer",
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tokenizer.json"), "w") as f:
        json.dump(tokenizer, f, ensure_ascii=False, indent=1)
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)


if __name__ == "__main__":
    main()
