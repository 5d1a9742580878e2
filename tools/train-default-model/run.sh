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
# Stage 1: 900 steps of 16 × 256 tokens from the conversation stream.
$py train.py --data "$work/train" --heldout "$work/heldout" --out "$work/run" --steps 900 --window 256 --batch 16 --seed 15
# Stage 2: 300 more steps where stage 1 stopped (window 900 × 16), at a lower rate, one row of
# each batch from greeting/identity/out-of-scope chats (rare in the WordNet stream).
$py corpus.py --out "$work" --seed 16 --chat-only 3000
node tokenize.mjs "$out" "$work/chat.jsonl" "$work/chat"
$py train.py --data "$work/train" --heldout "$work/heldout" --out "$work/run2" --init "$work/run" --start-window 14400 \
    --steps 300 --window 256 --batch 16 --lr 1e-3 --warmup 1 --extra "$work/chat" --extra-rows 1 --seed 16
$py export.py --run "$work/run2" --out "$out"
cp "$work/heldout.jsonl" "$here/heldout.jsonl"
cp "$work/train.unigram.json" "$here/unigram.json"
cp "$work/run/loss.csv" "$here/loss-stage1.csv"
cp "$work/run2/loss.csv" "$here/loss-stage2.csv"
node sample.mjs "$out" --json "$work/samples.json"
$py check-export.py --run "$work/run2" --samples "$work/samples.json"
