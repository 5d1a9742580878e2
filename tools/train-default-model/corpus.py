"""WordNet 3.0 → question/answer conversations for the default model (issue #15).

Reads Debian's `wordnet-base` database (/usr/share/wordnet: data.{noun,verb,adj,adv} and
index.*, the formats of Princeton's wndb(5) manual page) and writes JSON lines, one
conversation each: {"split": "train"|"heldout", "kind": ..., "word": ..., "messages": [...]}.

A fixed list of held-out common nouns (seeded) is removed from training entirely: every
synset that contains one of them is held out, so the model never sees their glosses.
The held-out set keeps one "What is a W?" conversation per held-out noun (its first sense),
which bench/suites/default-model scores, plus the synonyms of W for that check.

Usage: python3 corpus.py --wordnet /usr/share/wordnet --out work/ [--seed 15] [--heldout 400]
"""
import argparse, json, os, random, re

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "s": "adj", "r": "adv"}


def read_data(path):
    """data.* → {offset: synset}; synset = {pos, words, gloss, ptrs[(symbol, offset, pos)]}."""
    out = {}
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue  # license header
            head, _, gloss = line.partition(" | ")
            t = head.split()
            offset, pos, wcnt = t[0], t[2], int(t[3], 16)
            words = []
            for i in range(wcnt):
                w = t[4 + 2 * i]
                w = re.sub(r"\((a|p|ip)\)$", "", w)  # adjective position markers
                words.append(w.replace("_", " "))
            k = 4 + 2 * wcnt
            pcnt = int(t[k])
            ptrs = [(t[k + 1 + 4 * j], t[k + 2 + 4 * j], t[k + 3 + 4 * j]) for j in range(pcnt)]
            out[offset + pos[0].replace("s", "a")] = {"pos": pos, "words": words, "gloss": gloss.strip(), "ptrs": ptrs}
    return out


def read_index(path, pos):
    """index.* → [(lemma, pos, tagsense_cnt, [synset keys in sense order])]."""
    rows = []
    with open(path, encoding="latin-1") as f:
        for line in f:
            if line.startswith("  "):
                continue
            t = line.split()
            lemma, synset_cnt, p_cnt = t[0], int(t[2]), int(t[3])
            tagsense = int(t[5 + p_cnt])
            offsets = t[6 + p_cnt: 6 + p_cnt + synset_cnt]
            rows.append((lemma.replace("_", " "), pos, tagsense, [o + pos for o in offsets]))
    return rows


def split_gloss(gloss):
    """'def; "example one"; "example two"' → (def, [examples])."""
    examples = re.findall(r'"([^"]+)"', gloss)
    definition = re.sub(r';?\s*"[^"]*"', "", gloss).strip().strip(";").strip()
    return definition, examples


def article(word):
    return "an" if word[0].lower() in "aeiou" else "a"


def sentence(s):
    s = s.strip()
    if not s:
        return s
    s = s[0].upper() + s[1:]
    return s if s[-1] in ".!?" else s + "."


def display(lemma, synset):
    """The lemma as WordNet spells it in the synset (keeps capitals: 'Paris', 'Einstein')."""
    for w in synset["words"]:
        if w.lower() == lemma.lower():
            return w
    return lemma


def noun_subject(w):
    proper = w[0].isupper()
    return (w if proper else f"{article(w)} {w}"), proper


def define_noun(w, definition, examples, rng):
    subj, proper = noun_subject(w)
    q = rng.choice(
        [f"What is {subj}?", f"What is {subj}?", f"What's {subj}?", f"Define {w}.", f"What does {w} mean?",
         f"Tell me what {subj} is.", f"what is {subj}", f"Can you explain what {subj} is?", f"What is the meaning of {w}?"]
    )
    a = f"{subj[0].upper() + subj[1:]} is {definition}."
    if examples and rng.random() < 0.5:
        a += f' For example: "{examples[0]}".'
    return q, a


def define_verb(w, definition, examples, rng):
    q = rng.choice([f"What does {w} mean?", f"What does it mean to {w}?", f"Define the verb {w}.", f"What does '{w}' mean?"])
    a = f"To {w} is to {definition}."
    if examples and rng.random() < 0.6:
        a += f' For example: "{examples[0]}".'
    return q, a


def define_adj(w, definition, examples, rng, adverb=False):
    q = rng.choice([f"What does {w} mean?", f"What does '{w}' mean?", f"Define {w}.", f"What is the meaning of {w}?"])
    a = f"{w[0].upper() + w[1:]} means {definition}."
    if examples and rng.random() < 0.6:
        a += f' For example: "{examples[0]}".'
    return q, a


def join_or(words):
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


GREETINGS = [
    (["Hello", "Hi", "Hello!", "Hi there", "Hey", "Good morning", "Good evening", "hello", "hi"],
     ["Hello! I am a small dictionary assistant. Ask me what a word means, for example: What is a river?",
      "Hi! I can tell you what English words mean. Try: What does brisk mean?"]),
    (["Who are you?", "What are you?", "What can you do?", "Tell me about yourself.", "What is your name?"],
     ["I am the kvflash default model, a small dictionary assistant trained on WordNet. I can explain what English words mean, give synonyms and use words in sentences.",
      "I am a small language model that knows the definitions in WordNet. Ask me what a word means, or for another word that means the same thing."]),
    (["How are you?", "How are you doing?", "How's it going?"],
     ["I am fine, thank you. Which word would you like me to explain?"]),
    (["Thank you", "Thanks!", "thanks", "Thank you very much."],
     ["You are welcome! Ask me about another word any time."]),
    (["Goodbye", "Bye", "See you later."],
     ["Goodbye! Come back when you want to know what a word means."]),
    (["Tell me a joke.", "Write a poem.", "What is the weather today?", "What is 2 + 2?", "Can you write code?", "Who won the game last night?"],
     ["I am only a small dictionary assistant, so I cannot do that. I can tell you what a word means: try asking What is a poem?",
      "Sorry, I only know what English words mean. Ask me, for example: What does happy mean?"]),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--heldout", type=int, default=400)
    ap.add_argument("--chat-only", type=int, default=0, help="write only chat.jsonl: this many greeting/identity exchanges (the second training stage mixes them in)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    if args.chat_only:
        write_chat(args, rng)
        return

    synsets = {}
    for name in ["noun", "verb", "adj", "adv"]:
        synsets.update(read_data(os.path.join(args.wordnet, f"data.{name}")))
    index = []
    for pos, name in [("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv")]:
        index += read_index(os.path.join(args.wordnet, f"index.{name}"), pos)

    # Held-out common nouns: single alphabetic lowercase words seen in the sense-tagged corpus.
    common = sorted(l for (l, pos, tag, _) in index if pos == "n" and tag > 0 and re.fullmatch(r"[a-z]{3,}", l))
    heldout = set(rng.sample(common, args.heldout))
    heldout_keys = {key for (l, pos, tag, keys) in index if l in heldout for key in keys}

    convs = []

    def emit(split, kind, word, q, a, weight=1):
        for _ in range(weight):
            convs.append({"split": split, "kind": kind, "word": word, "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})

    for lemma, pos, tag, keys in index:
        first = synsets[keys[0]]
        w = display(lemma, first)
        definition, examples = split_gloss(first["gloss"])
        if not definition:
            continue
        weight = 2 if tag > 0 else 1
        if lemma in heldout and pos == "n":
            q, a = f"What is {article(w)} {w}?", f"{article(w).capitalize()} {w} is {definition}."
            syn = sorted({x for k in keys for x in synsets[k]["words"] if x.lower() != lemma})
            convs.append({"split": "heldout", "kind": "define", "word": w, "synonyms": syn,
                          "messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}]})
            continue
        if keys[0] in heldout_keys:
            continue
        define = {"n": define_noun, "v": define_verb, "a": define_adj, "r": define_adj}[pos]
        emit("train", "define", w, *define(w, definition, examples, rng), weight)
        # Other senses, when asked for the meanings of a word.
        senses = [split_gloss(synsets[k]["gloss"])[0] for k in keys[:3] if k not in heldout_keys]
        if len(senses) > 1:
            q = rng.choice([f"What are the meanings of {w}?", f"What can {w} mean?", f"Give me the senses of {w}."])
            a = f"{w[0].upper() + w[1:]} has {len(keys)} meanings. " + " ".join(f"{i + 1}. {sentence(s)}" for i, s in enumerate(senses))
            emit("train", "senses", w, q, a)
        # Synonyms of the first sense.
        others = [x for x in first["words"] if x.lower() != lemma.lower()]
        if others:
            q = rng.choice([f"What is another word for {w}?", f"Give me a synonym for {w}.", f"What is a synonym of {w}?", f"Which words mean the same as {w}?"])
            emit("train", "synonym", w, q, f"Another word for {w} is {join_or(others[:3])}.", weight)
            q = rng.choice([f"Give me a word that means {definition}.", f"What is the word for {definition}?", f"Which word means {definition}?"])
            emit("train", "reverse", w, q, f"The word is {w}." if rng.random() < 0.5 else f"{w[0].upper() + w[1:]}, or {join_or(others[:2])}.")
        # Examples of use.
        if examples:
            q = rng.choice([f"Use {w} in a sentence.", f"Give me an example with {w}.", f"How do you use the word {w}?"])
            emit("train", "example", w, q, f'Here is an example: "{sentence(examples[0])[:-1] if examples[0][-1] not in ".!?" else examples[0]}".')
        # Kind of (noun hypernym) and opposite (adjective antonym).
        for sym, off, p in first["ptrs"]:
            key = off + p.replace("s", "a")
            if key in heldout_keys or key not in synsets:
                continue
            if pos == "n" and sym in ("@", "@i"):
                h = synsets[key]["words"][0]
                subj, _ = noun_subject(w)
                q = rng.choice([f"What kind of thing is {subj}?", f"What type of thing is {subj}?", f"{subj[0].upper() + subj[1:]} is a kind of what?"])
                emit("train", "kind", w, q, f"{subj[0].upper() + subj[1:]} is a kind of {h}.")
                break
            if pos in ("a", "r") and sym == "!":
                o = synsets[key]["words"][0]
                q = rng.choice([f"What is the opposite of {w}?", f"What is an antonym of {w}?"])
                emit("train", "opposite", w, q, f"The opposite of {w} is {o}.", weight)
                break

    n_train = sum(c["split"] == "train" for c in convs)
    for qs, answers in GREETINGS:
        for _ in range(max(1, n_train // 4000)):
            emit("train", "chat", "", rng.choice(qs), rng.choice(answers))

    train = [c for c in convs if c["split"] == "train"]
    rng.shuffle(train)
    # Multi-turn samples: a third of the conversations continue with another exchange,
    # so the model keeps answering the last question when the page sends the history.
    merged, i = [], 0
    while i < len(train):
        c = train[i]
        if i + 1 < len(train) and rng.random() < 0.33:
            c = dict(c, messages=c["messages"] + train[i + 1]["messages"])
            i += 1
        merged.append(c)
        i += 1
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "train.jsonl"), "w") as f:
        for c in merged:
            f.write(json.dumps(c) + "\n")
    with open(os.path.join(args.out, "heldout.jsonl"), "w") as f:
        for c in convs:
            if c["split"] == "heldout":
                f.write(json.dumps(c) + "\n")
    kinds = {}
    for c in train:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    print(json.dumps({"train_conversations": len(merged), "exchanges": len(train), "heldout": sum(c["split"] == "heldout" for c in convs), "kinds": kinds}))


def write_chat(args, rng):
    """chat.jsonl: greetings, who-are-you, thanks and out-of-scope requests, one to three turns."""
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "chat.jsonl"), "w") as f:
        for _ in range(args.chat_only):
            messages = []
            for _ in range(rng.choice([1, 1, 2, 3])):
                qs, answers = rng.choice(GREETINGS)
                messages += [{"role": "user", "content": rng.choice(qs)}, {"role": "assistant", "content": rng.choice(answers)}]
            f.write(json.dumps({"split": "train", "kind": "chat", "word": "", "messages": messages}) + "\n")


if __name__ == "__main__":
    main()
