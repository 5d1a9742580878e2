"""The default model's vocabulary stage (issue #29): which words it learns by heart, which
it must refuse, and the many-epoch corpus that teaches both.

Where it sits: tools/train-default-model, after corpus.py's WordNet readers (imported), before
tokenize.mjs. The design is the issue's: a small model can memorize a small, well-chosen
vocabulary, chosen by frequency from WordNet's own sense counts.

- Frequencies: `cntlist.rev` (Debian's wordnet-base; SemCor's sense-tag counts), one line per
  sense: `lemma%ss_type:lex_filenum:lex_id:head:head_id  sense_number  tag_count` (wndb(5),
  cntlist(5)). ss_type 1 noun, 2 verb, 3 adjective, 4 adverb, 5 adjective satellite; a sense
  number is the position in index.<pos>'s synset list, so (lemma, pos, n) names a synset.
- Chosen words: the `--words` single-word lemmas ([a-z]{2,}) of highest total tag count, plus
  the ten words of issue #29 (FORCED) and the words the README, model card and tests ask
  about (SHOWN). Their top senses: the most frequent sense of each part of
  speech whose count is ≥ 1/4 of the word's best, at most `--senses` of them; the first is the
  answer to "What does W mean?".
- corpus.py's 400 held-out nouns (`--exclude`) are neither chosen nor taught through a synset,
  so the model card's held-out measures stay held out (bread, one of the ten, excepted).
- Held-out rare words (`--rare`, seeded): lemmas with no tag count at all, never trained; the
  right answer about them is the refusal. Refusal training words (`--refusals`, seeded): other
  untagged lemmas, neither chosen nor held out.
- Corpus: `--epochs` passes over the chosen words, each pass with fresh question wordings in
  every form a user (and corpus.py) asks: "What does W mean?" / "Define W." / "What is the
  meaning of W?", "What is a W?" / "What is W?", the second sense by its part of speech,
  another word for W (an adjective synset of one word: its similar-to heads), the opposite, an
  example that uses W, what kind of thing a W is, the senses list. Where WordNet has no
  synonym, opposite or example, a short word-free "I don't know …" answer, never a made-up one.
  Refusal words are asked in all those forms, each answered by the one word-free REFUSAL; the
  greetings/identity/thanks/out-of-scope chats (CHATS) suggest only chosen words. A third of the
  conversations are two-turn, as in corpus.py.

Writes <out>/vocab.jsonl (chosen words: {word, count, senses: [{pos, count, definition,
synonyms, similar, antonyms, kind, examples}]}), <out>/rare.jsonl ({word, definition}),
<out>/refusal.txt (the refusal: the bench's held-out refusal loss), <out>/train.jsonl (the corpus)
and <out>/heldout.jsonl (train.py's held-out answer loss: one definition per chosen word, which
is *trained*: here it measures memorization).

Usage: python3 vocab.py --wordnet /usr/share/wordnet --out work/ --exclude heldout.jsonl [--words 3000] [--epochs 40]
"""
import argparse, json, os, random, re
from collections import defaultdict

from corpus import article, join_or, read_data, read_index, split_gloss

FORCED = ["dog", "happy", "run", "house", "bread", "cold", "book", "tree", "music", "water"]
# Words the README, the model card and the tests ask about, and the greetings suggest: taught too.
SHOWN = ["river"]
SS_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "a"}
POS_NAME = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


# The one refusal for a word outside the vocabulary. It never repeats the word: a small model
# copies an unknown word wrong ("What does brisk mean?" → "I don't know the word bring.").
REFUSAL = "I don't know that word. I only know common English words; try another one, for example water."

# Greetings, identity, thanks and polite out-of-scope refusals (corpus.py's GREETINGS, whose
# suggestions "brisk" and "poem" are not taught here): every word suggested is a chosen word.
CHATS = [
    (["Hello", "Hi", "Hello!", "Hi there", "Hey", "Good morning", "Good evening", "hello", "hi"],
     ["Hello! I am a small dictionary assistant. Ask me what a word means, for example: What is a river?",
      "Hi! I can tell you what common English words mean. Try: What does water mean?"]),
    (["Who are you?", "What are you?", "What can you do?", "Tell me about yourself.", "What is your name?"],
     ["I am the kvflash default model, a small dictionary assistant trained on WordNet. I know what a few hundred common English words mean, and their synonyms and examples.",
      "I am a small language model that knows the meanings of common English words from WordNet. Ask me what a word means, or for another word that means the same thing."]),
    (["How are you?", "How are you doing?", "How's it going?"],
     ["I am fine, thank you. Which word would you like me to explain?"]),
    (["Thank you", "Thanks!", "thanks", "Thank you very much."],
     ["You are welcome! Ask me about another word any time."]),
    (["Goodbye", "Bye", "See you later."],
     ["Goodbye! Come back when you want to know what a word means."]),
    (["Tell me a joke.", "Write a poem.", "What is the weather today?", "What is 2 + 2?", "Can you write code?", "Who won the game last night?"],
     ["I am only a small dictionary assistant, so I cannot do that. I can tell you what a word means: try asking What is a dog?",
      "Sorry, I only know what common English words mean. Ask me, for example: What does happy mean?"]),
]

# Every question form a user (and corpus.py) asks about one word, W. A chosen word is answered
# by its form; a word outside the vocabulary, asked in any of them, by REFUSAL.
MEAN_FORMS = ["What does {w} mean?", "What does {w} mean?", "What does {w} mean?", "Define {w}.", "What is the meaning of {w}?",
              "what does {w} mean", "What does '{w}' mean?", "What's the meaning of {w}?", "Meaning of {w}?"]
WHAT_FORMS = ["What is {aw}?", "What is {aw}?", "What is {w}?", "What's {aw}?", "Tell me what {aw} is.", "what is {aw}",
              "Can you explain what {aw} is?"]
SYN_FORMS = ["What is another word for {w}?", "Give me a synonym for {w}.", "What is a synonym of {w}?", "Which words mean the same as {w}?"]
OPP_FORMS = ["What is the opposite of {w}?", "What is an antonym of {w}?"]
EX_FORMS = ["Use {w} in a sentence.", "Give me an example with {w}.", "How do you use the word {w}?"]
KIND_FORMS = ["What kind of thing is {aw}?", "What type of thing is {aw}?"]


def form(rng, forms, w, noun=True):
    return rng.choice(forms).format(w=w, aw=f"{article(w)} {w}" if noun else w)


def read_counts(path):
    """cntlist.rev → {(lemma, pos, sense_number): tag_count}."""
    out = defaultdict(int)
    with open(path, encoding="latin-1") as f:
        for line in f:
            key, n, cnt = line.split()
            lemma, _, rest = key.partition("%")
            out[(lemma.replace("_", " "), SS_POS[rest[0]], int(n))] += int(cnt)
    return out


def choose(args, rng):
    synsets = {}
    for name in ["noun", "verb", "adj", "adv"]:
        synsets.update(read_data(os.path.join(args.wordnet, f"data.{name}")))
    index = {}
    for pos, name in [("n", "noun"), ("v", "verb"), ("a", "adj"), ("r", "adv")]:
        for lemma, p, tag, keys in read_index(os.path.join(args.wordnet, f"index.{name}"), pos):
            index[(lemma, p)] = keys
    counts = read_counts(os.path.join(args.wordnet, "cntlist.rev"))
    total, by_lemma = defaultdict(int), defaultdict(list)
    for (lemma, pos, n), c in counts.items():
        if (lemma, pos) in index and n <= len(index[(lemma, pos)]):
            total[lemma] += c
            by_lemma[lemma].append((pos, n, c))
    ranked = sorted((l for l in total if re.fullmatch(r"[a-z]{2,}", l)), key=lambda l: (-total[l], l))
    # The held-out nouns of corpus.py (the model card's held-out measures) stay unseen: no chosen
    # word is one, and no chosen sense's synset contains one; the ten of #29 excepted (bread is one).
    excluded = set()
    if args.exclude:
        with open(args.exclude) as f:
            excluded = {json.loads(l)["word"].lower() for l in f if l.strip()}
    ranked = [l for l in ranked if l not in excluded]
    chosen = list(dict.fromkeys(ranked[:args.words] + FORCED + SHOWN))

    def senses(lemma):
        """The word's top senses, most frequent first (one per part of speech)."""
        best = {}
        for pos, n, c in by_lemma[lemma]:
            if pos not in best or c > best[pos][0] or (c == best[pos][0] and n < best[pos][1]):
                best[pos] = (c, n)
        top = max(c for c, _ in best.values())
        rows = sorted(((c, pos, n) for pos, (c, n) in best.items() if c * 4 >= top), key=lambda r: (-r[0], r[1]))
        out = []
        for c, pos, n in rows[:args.senses]:
            s = synsets[index[(lemma, pos)][n - 1]]
            if lemma not in FORCED + SHOWN and excluded & {w.lower() for w in s["words"]}:
                continue
            definition, examples = split_gloss(s["gloss"])
            if not definition:
                continue
            linked = lambda sym: [synsets[o + p.replace("s", "a")]["words"][0] for y, o, p in s["ptrs"] if y == sym and o + p.replace("s", "a") in synsets]
            syns = [w for w in s["words"] if w.lower() != lemma]
            # An adjective synset of one word ("happy") has its near-synonyms as similar-to (&) heads.
            similar = [w for w in linked("&") if w.lower() != lemma and not excluded & {w.lower()}]
            kinds = [w for w in linked("@") + linked("@i") if not excluded & {w.lower()}]
            out.append({"pos": pos, "count": c, "definition": definition, "examples": examples[:2],
                        "synonyms": syns[:4], "similar": similar[:3], "antonyms": linked("!")[:1], "kind": kinds[:1]})
        return out

    vocab = [{"word": w, "count": total[w], "senses": senses(w)} for w in chosen]
    vocab = [v for v in vocab if v["senses"]]
    known = {v["word"] for v in vocab}
    # Untagged single-word lemmas: the rare words (held out) and the refusal training words.
    untagged = sorted({l for (l, pos) in index if re.fullmatch(r"[a-z]{4,}", l) and total.get(l, 0) == 0} - known)
    rng.shuffle(untagged)
    rare_words = sorted(untagged[:args.rare])
    refuse = untagged[args.rare:args.rare + args.refusals]
    first_gloss = {}
    for (l, pos), keys in index.items():
        if l in rare_words and l not in first_gloss:
            first_gloss[l] = split_gloss(synsets[keys[0]]["gloss"])[0]
    rare = [{"word": w, "definition": first_gloss[w]} for w in rare_words]
    return vocab, rare, refuse


def answer(w, s):
    d = s["definition"]
    if s["pos"] == "n":
        return f"{article(w).capitalize()} {w} is {d}."
    if s["pos"] == "v":
        return f"To {w} is to {d}."
    return f"{w[0].upper() + w[1:]} means {d}."


def exchanges(v, rng):
    """One pass over a chosen word: (question, answer) pairs, in every question form. A form
    WordNet has no data for (no synonym, opposite or example) gets a short word-free answer,
    so the model never makes one up."""
    w, senses = v["word"], v["senses"]
    out = []
    top = senses[0]
    noun = next((s for s in senses if s["pos"] == "n"), None)
    a = answer(w, top)
    if top["examples"] and rng.random() < 0.3:
        a += f' For example: "{top["examples"][0]}".'
    out.append((form(rng, MEAN_FORMS, w), a))
    # "What is a W?" (a noun sense if W has one), or "What is W?" for a verb or adjective.
    out.append((form(rng, WHAT_FORMS, w, noun is not None), answer(w, noun or top)))
    for s in senses:
        if s["pos"] == "n":
            q = form(rng, WHAT_FORMS, w)
        elif s["pos"] == "v":
            q = rng.choice([f"What does it mean to {w}?", f"Define the verb {w}."])
        else:
            q = rng.choice([f"What does {w} mean as an {POS_NAME[s['pos']]}?", f"Define the {POS_NAME[s['pos']]} {w}."])
        if s is not top and s is not noun:
            out.append((q, answer(w, s)))
    syns = list(dict.fromkeys(x for s in senses for x in s["synonyms"])) or list(dict.fromkeys(x for s in senses for x in s.get("similar", [])))
    out.append((form(rng, SYN_FORMS, w), f"Another word for {w} is {join_or(syns[:3])}." if syns else "I don't know another word for that one."))
    ants = [x for s in senses for x in s["antonyms"]]
    if ants:
        out.append((form(rng, OPP_FORMS, w), f"The opposite of {w} is {ants[0]}."))
    elif rng.random() < 0.3:
        out.append((form(rng, OPP_FORMS, w), "I don't know an opposite of that one."))
    # WordNet's examples belong to the synset and may use a synonym ("Take these letters to the
    # boss" for bring): only those that use W (a form of it: its stem) are W's examples.
    exs = [x for s in senses for x in s["examples"] if w[:max(3, len(w) - 2)].lower() in x.lower()]
    if exs:
        out.append((form(rng, EX_FORMS, w), f'Here is an example: "{rng.choice(exs)}".'))
    elif rng.random() < 0.3:
        out.append((form(rng, EX_FORMS, w), "I don't know an example for that one."))
    if noun and noun.get("kind") and rng.random() < 0.5:
        out.append((form(rng, KIND_FORMS, w), f"{article(w).capitalize()} {w} is a kind of {noun['kind'][0]}."))
    if len(senses) > 1 and rng.random() < 0.5:
        q = rng.choice([f"What are the meanings of {w}?", f"What can {w} mean?"])
        out.append((q, f"{w[0].upper() + w[1:]} can mean: " + " ".join(f"{i + 1}. {answer(w, s)}" for i, s in enumerate(senses))))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wordnet", default="/usr/share/wordnet")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--words", type=int, default=3000, help="chosen words, by SemCor frequency (plus the ten of issue #29)")
    ap.add_argument("--senses", type=int, default=2, help="top senses per chosen word")
    ap.add_argument("--rare", type=int, default=300, help="held-out untagged words (the refusal measure)")
    ap.add_argument("--refusals", type=int, default=3000, help="untagged words trained to be refused")
    ap.add_argument("--exclude", help="corpus.py's heldout.jsonl: words never chosen, synsets never taught")
    ap.add_argument("--epochs", type=int, default=40, help="passes over the chosen words")
    ap.add_argument("--chat-every", type=int, default=40, help="one greeting/identity/out-of-scope chat per this many exchanges")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    vocab, rare, refuse = choose(args, rng)

    ex = []
    for _ in range(args.epochs):
        for v in vocab:
            ex += exchanges(v, rng)
        # Refusals: a tenth of the refusal words each pass, so each is seen epochs/10 times.
        for w in rng.sample(refuse, max(1, len(refuse) // 10)):
            forms = rng.choice([MEAN_FORMS, MEAN_FORMS, WHAT_FORMS, WHAT_FORMS, SYN_FORMS, OPP_FORMS, EX_FORMS, KIND_FORMS])
            ex.append((form(rng, forms, w), REFUSAL))
    for _ in range(len(ex) // args.chat_every):
        qs, answers = rng.choice(CHATS)
        ex.append((rng.choice(qs), rng.choice(answers)))
    rng.shuffle(ex)
    convs, i = [], 0
    while i < len(ex):
        msgs = [{"role": "user", "content": ex[i][0]}, {"role": "assistant", "content": ex[i][1]}]
        if i + 1 < len(ex) and rng.random() < 0.33:
            i += 1
            msgs += [{"role": "user", "content": ex[i][0]}, {"role": "assistant", "content": ex[i][1]}]
        convs.append({"split": "train", "messages": msgs})
        i += 1

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "vocab.jsonl"), "w") as f:
        for v in vocab:
            f.write(json.dumps(v) + "\n")
    with open(os.path.join(args.out, "rare.jsonl"), "w") as f:
        for r in rare:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(args.out, "refusal.txt"), "w") as f:
        f.write(REFUSAL + "\n")
    with open(os.path.join(args.out, "train.jsonl"), "w") as f:
        for c in convs:
            f.write(json.dumps(c) + "\n")
    with open(os.path.join(args.out, "heldout.jsonl"), "w") as f:
        for v in vocab:
            f.write(json.dumps({"split": "heldout", "word": v["word"], "messages": [
                {"role": "user", "content": f"What does {v['word']} mean?"}, {"role": "assistant", "content": answer(v["word"], v["senses"][0])}]}) + "\n")
    print(json.dumps({"chosen": len(vocab), "rare": len(rare), "refusal_words": len(refuse), "exchanges": len(ex), "conversations": len(convs)}))


if __name__ == "__main__":
    main()
