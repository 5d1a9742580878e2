"""Checks an export against PyTorch: the log-probabilities kvflash gave its greedy tokens
(sample.mjs --json) must match this model's, run in float32 on the same bf16-rounded weights.

Usage: python3 check-export.py --run work/run --samples work/samples.json
"""
import argparse, json, os
import torch
from train import Llama


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True); ap.add_argument("--samples", required=True)
    args = ap.parse_args()
    run = json.load(open(os.path.join(args.run, "run.json")))
    state = {k: v.to(torch.bfloat16).float() for k, v in torch.load(os.path.join(args.run, "model.pt")).items()}
    model = Llama(run["arch"], 1024)
    model.load_state_dict(state)
    model.eval()
    worst, greedy_same, n = 0.0, 0, 0
    for s in json.load(open(args.samples)):
        ids = torch.tensor(s["prompt_ids"] + s["ids"])
        with torch.no_grad():
            logp = model(ids[None, :-1])[0].log_softmax(-1)
        p = len(s["prompt_ids"])
        for j, (tok, lp) in enumerate(zip(s["ids"], s["logprobs"])):
            row = logp[p - 1 + j]
            worst = max(worst, abs(row[tok].item() - lp))
            greedy_same += int(row.argmax().item() == tok); n += 1
    print(json.dumps({"tokens": n, "max_abs_logprob_diff": worst, "torch_argmax_agrees": greedy_same / n}))


if __name__ == "__main__":
    main()
