#!/usr/bin/env bash
# Rebuilds models/default from WordNet (issue #15): corpus → tokenizer → token ids → training →
# export → check. About an hour on 2 cores. Needs Debian's wordnet-base and python3-torch
# (apt-get install wordnet-base python3-torch libopenblas0-pthread: without OpenBLAS, torch's
# reference BLAS is ~7× slower), and `npm run build` (the tokenizer and sampler are kvflash's).
# Everything is seeded; work files go to tools/train-default-model/work (gitignored).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$here/work"
out="$root/models/default"
py=/usr/bin/python3   # Debian's python3, where python3-torch is installed
mkdir -p "$work" "$out"
cd "$here"
$py corpus.py --wordnet /usr/share/wordnet --out "$work" --seed 15 --heldout 400
$py bpe.py --corpus "$work/train.jsonl" --out "$out" --vocab 4096
# The first 120k shuffled conversations (~5.6M tokens) are more than one run reads.
head -n 120000 "$work/train.jsonl" > "$work/train-120k.jsonl"
node tokenize.mjs "$out" "$work/train-120k.jsonl" "$work/train"
node tokenize.mjs "$out" "$work/heldout.jsonl" "$work/heldout"
$py train.py --data "$work/train" --heldout "$work/heldout" --out "$work/run" --steps 900 --window 256 --batch 16 --seed 15
$py export.py --run "$work/run" --out "$out"
cp "$work/heldout.jsonl" "$here/heldout.jsonl"
cp "$work/train.unigram.json" "$here/unigram.json"
cp "$work/run/loss.csv" "$here/loss.csv"
node sample.mjs "$out" --json "$work/samples.json"
$py check-export.py --run "$work/run" --samples "$work/samples.json"
