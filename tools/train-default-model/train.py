"""Trains the default model: a small Llama (LlamaForCausalLM's architecture exactly: RMSNorm,
rotary position embedding in the rotate-half layout, grouped-query attention, SiLU-gated MLP,
tied embeddings, no biases) on the tokenized corpus, on the CPU, with a fixed seed.

Next-token cross-entropy over every token of 256-token windows cut from the stream of
conversations; AdamW, linear warm-up then cosine decay to 10%. Logs the training loss every
10 steps and the held-out loss (assistant-answer tokens of the held-out conversations) every
--eval-every steps to <out>/loss.csv, and writes <out>/model.pt at the end.

Usage: python3 train.py --data work/train --heldout work/heldout --out work/run
       python3 train.py … --out work/run2 --init work/run --start-window 14400 --lr 1e-3 --warmup 1 --steps 400   (a second stage)
"""
import argparse, csv, json, math, os, time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ARCH = {"vocab_size": 4096, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 704, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}


class RMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__(); self.weight = nn.Parameter(torch.ones(d)); self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rope(x, cos, sin):
    """x [b, heads, t, hd]; HF Llama's rotate_half: pairs (i, i + hd/2)."""
    h = x.shape[-1] // 2
    rot = torch.cat((-x[..., h:], x[..., :h]), -1)
    return x * cos + rot * sin


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        d, hd = a["hidden_size"], a["hidden_size"] // a["num_attention_heads"]
        self.h, self.kv, self.hd = a["num_attention_heads"], a["num_key_value_heads"], hd
        self.q_proj = nn.Linear(d, self.h * hd, bias=False); self.k_proj = nn.Linear(d, self.kv * hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv * hd, bias=False); self.o_proj = nn.Linear(self.h * hd, d, bias=False)
        m = a["intermediate_size"]
        self.gate_proj = nn.Linear(d, m, bias=False); self.up_proj = nn.Linear(d, m, bias=False); self.down_proj = nn.Linear(m, d, bias=False)
        self.input_layernorm = RMSNorm(d, a["rms_norm_eps"]); self.post_attention_layernorm = RMSNorm(d, a["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.shape
        y = self.input_layernorm(x)
        q = rope(self.q_proj(y).view(b, t, self.h, self.hd).transpose(1, 2), cos, sin)
        k = rope(self.k_proj(y).view(b, t, self.kv, self.hd).transpose(1, 2), cos, sin)
        v = self.v_proj(y).view(b, t, self.kv, self.hd).transpose(1, 2)
        g = self.h // self.kv
        k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        s = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
        s = s.masked_fill(mask[:t, :t], float("-inf"))
        o = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
        x = x + self.o_proj(o)
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class Llama(nn.Module):
    def __init__(self, a, max_len):
        super().__init__()
        self.embed_tokens = nn.Embedding(a["vocab_size"], a["hidden_size"])
        self.layers = nn.ModuleList([Layer(a) for _ in range(a["num_hidden_layers"])])
        self.norm = RMSNorm(a["hidden_size"], a["rms_norm_eps"])
        hd = a["hidden_size"] // a["num_attention_heads"]
        inv = 1.0 / (a["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        f = torch.outer(torch.arange(max_len, dtype=torch.float64), inv)
        e = torch.cat((f, f), -1)
        self.register_buffer("cos", e.cos().float(), persistent=False)
        self.register_buffer("sin", e.sin().float(), persistent=False)
        self.register_buffer("mask", torch.triu(torch.ones(max_len, max_len, dtype=torch.bool), 1), persistent=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02 / (math.sqrt(2 * a["num_hidden_layers"]) if n.endswith(("o_proj.weight", "down_proj.weight")) else 1))

    def forward(self, ids):
        t = ids.shape[1]
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, self.cos[:t], self.sin[:t], self.mask)
        return self.norm(x) @ self.embed_tokens.weight.T  # tied LM head


def load(prefix):
    ids = np.fromfile(prefix + ".ids.u16", dtype=np.uint16).astype(np.int64)
    ans = np.fromfile(prefix + ".answer.u8", dtype=np.uint8)
    return torch.from_numpy(ids), torch.from_numpy(ans.astype(np.bool_))


@torch.no_grad()
def heldout_loss(model, ids, ans, window):
    """Mean next-token loss over the held-out answer tokens, in windows of `window` tokens."""
    model.eval()
    total, count = 0.0, 0
    for s in range(0, len(ids) - 1, window):
        x = ids[s:s + window + 1]
        if len(x) < 2:
            break
        logits = model(x[None, :-1])[0]
        loss = F.cross_entropy(logits, x[1:], reduction="none")
        m = ans[s + 1:s + len(x)]
        total += loss[m].sum().item(); count += int(m.sum())
    model.train()
    return total / count


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True); ap.add_argument("--heldout", required=True); ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=900); ap.add_argument("--batch", type=int, default=16); ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3); ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=100); ap.add_argument("--seed", type=int, default=15); ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--init", help="continue from this run directory's model.pt (a second stage)")
    ap.add_argument("--start-window", type=int, default=0, help="first window of the stream to read (a second stage goes on where the first stopped)")
    ap.add_argument("--extra", help="a second tokenized stream (e.g. work/chat) to mix in")
    ap.add_argument("--extra-rows", type=int, default=0, help="rows of each batch read from --extra")
    ap.add_argument("--save-every", type=int, default=0, help="also keep a checkpoint every this many steps in <out>/step-N/ (model.pt, run.json: export.py reads it as a run), for accuracy vs steps")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)

    ids, _ = load(args.data)
    hids, hans = load(args.heldout)
    extra = load(args.extra)[0] if args.extra else None
    epos = 0
    model = Llama(ARCH, args.window)
    if args.init:
        model.load_state_dict(torch.load(os.path.join(args.init, "model.pt")))
    nparams = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() == 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95))
    per_step = args.batch * args.window
    print(json.dumps({"params": nparams, "tokens": len(ids), "steps": args.steps, "tokens_per_step": per_step, "epochs": args.steps * per_step / len(ids)}), flush=True)

    log = open(os.path.join(args.out, "loss.csv"), "w", newline="")
    w = csv.writer(log); w.writerow(["step", "tokens", "train_loss", "heldout_answer_loss", "seconds"])
    t0 = time.time()
    pos = args.start_window * args.window  # the stream is read in order (the corpus is already shuffled), wrapping at the end
    for step in range(1, args.steps + 1):
        lr = args.lr * (step / args.warmup if step <= args.warmup else 0.1 + 0.45 * (1 + math.cos(math.pi * (step - args.warmup) / (args.steps - args.warmup))))
        for g in opt.param_groups:
            g["lr"] = lr
        rows = []
        for _ in range(args.batch - args.extra_rows):
            if pos + args.window + 1 > len(ids):
                pos = 0
            rows.append(ids[pos:pos + args.window + 1]); pos += args.window
        for _ in range(args.extra_rows if extra is not None else 0):
            if epos + args.window + 1 > len(extra):
                epos = 0
            rows.append(extra[epos:epos + args.window + 1]); epos += args.window
        x = torch.stack(rows)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 10 == 0 or step == 1:
            h = heldout_loss(model, hids, hans, args.window) if (step % args.eval_every == 0 or step == args.steps) else None
            w.writerow([step, step * per_step, f"{loss.item():.4f}", "" if h is None else f"{h:.4f}", f"{time.time() - t0:.0f}"]); log.flush()
            print(f"step {step} loss {loss.item():.3f}" + ("" if h is None else f" heldout {h:.3f}") + f" lr {lr:.2e} {time.time() - t0:.0f}s", flush=True)
        if step % 100 == 0:
            torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
        if args.save_every and step % args.save_every == 0:
            d = os.path.join(args.out, f"step-{step}")
            os.makedirs(d, exist_ok=True)
            torch.save(model.state_dict(), os.path.join(d, "model.pt"))
            json.dump({"arch": ARCH, "window": args.window, "args": vars(args), "params": nparams, "step": step}, open(os.path.join(d, "run.json"), "w"), indent=1)
    torch.save(model.state_dict(), os.path.join(args.out, "model.pt"))
    json.dump({"arch": ARCH, "window": args.window, "args": vars(args), "params": nparams}, open(os.path.join(args.out, "run.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
