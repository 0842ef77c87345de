"""Trains the demo K3 model (configs/models/fortune.yaml) on the fortune corpus, on CPU.

Usage: /usr/bin/python3 tools/train/train.py --data DIR --out DIR [--steps N] [--threads N] ...

DIR holds train.txt and heldout.txt (data.py) and tiktoken.model (tokenizer.py). Everything is
seeded (weights, batch order), so a rerun with the same options and thread count repeats the
run. Each sequence is [BOS] followed by a random window of the training token stream; the
target is the next token everywhere. AdamW, linear warm-up then cosine decay to 10 %.
Routing balance: the auxiliary-loss-free rule (each MoE layer's e_score_correction_bias moves
by --bias-rate toward under-used experts after every step; it only changes which experts are
chosen, never the weights). Writes OUT/loss.csv, OUT/balance.csv and OUT/model.pt (float32).
"""

import argparse
import csv
import json
import math
import os
import sys
import time

import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpe  # noqa: E402
from model import PREFIX, TrainModel, init_params  # noqa: E402


def load_config(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    return {"text_config": doc["text_config"]}


def token_stream(path, enc):
    # Without Kimi's 400,000-character cuts: they would split a word at every cut of the
    # 2.4 MB training text (a few ids differ); the committed model was trained on this stream.
    with open(path, "rb") as f:
        return torch.tensor(enc.encode(f.read().decode("utf-8"), kimi_cuts=False), dtype=torch.long)


def batch(stream, starts, T, bos):
    w = torch.stack([stream[s:s + T] for s in starts.tolist()])
    x = torch.cat([torch.full((len(w), 1), bos, dtype=torch.long), w[:, :-1]], dim=1)
    return x, w


def lm_loss(model, x, y):
    logits = model.forward_sequence(x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "configs", "models", "fortune.yaml"))
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--bias-rate", type=float, default=1e-3)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-batches", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    os.makedirs(args.out, exist_ok=True)

    cfg_doc = load_config(args.config)
    enc = bpe.Encoder(bpe.read_rank_file(os.path.join(args.data, "tiktoken.model")))
    bos = cfg_doc["text_config"]["bos_token_id"]
    train_ids = token_stream(os.path.join(args.data, "train.txt"), enc)
    held_ids = token_stream(os.path.join(args.data, "heldout.txt"), enc)
    params = init_params(__import__("k3_config").K3Config(cfg_doc), args.seed)
    model = TrainModel(cfg_doc, params)
    cfg = model.cfg
    n_params = sum(p.numel() for p in params.values())
    print(f"train {len(train_ids)} tokens, held-out {len(held_ids)}, params {n_params}", flush=True)

    # Norm gains, biases, A_log, dt_bias and conv kernels are not decayed; matrices are.
    decay = [p for n, p in params.items() if isinstance(p, torch.nn.Parameter) and p.dim() >= 2
             and "conv1d" not in n]
    no_decay = [p for n, p in params.items() if isinstance(p, torch.nn.Parameter) and (p.dim() < 2 or "conv1d" in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    gen = torch.Generator().manual_seed(args.seed)
    # A fixed held-out sample: evenly spaced windows, the same at every evaluation.
    n_eval = args.eval_batches * args.batch
    eval_starts = torch.linspace(0, len(held_ids) - args.seq - 1, n_eval).long()
    moe_layers = [i for i in range(cfg.n_layers) if not cfg.is_dense(i)]
    bias_names = {i: f"{PREFIX}layers.{i}.block_sparse_moe.gate.e_score_correction_bias" for i in moe_layers}

    def heldout_loss():
        with torch.no_grad():
            tot = 0.0
            for b in range(args.eval_batches):
                x, y = batch(held_ids, eval_starts[b * args.batch:(b + 1) * args.batch], args.seq, bos)
                tot += lm_loss(model, x, y).item()
            return tot / args.eval_batches

    def save():
        torch.save({"config": cfg_doc, "params": {n: p.detach().clone() for n, p in params.items()},
                    "args": vars(args)}, os.path.join(args.out, "model.pt"))

    loss_f = open(os.path.join(args.out, "loss.csv"), "w", newline="")
    loss_w = csv.writer(loss_f)
    loss_w.writerow(["step", "tokens", "seconds", "lr", "train_loss", "heldout_loss"])
    bal_f = open(os.path.join(args.out, "balance.csv"), "w", newline="")
    bal_w = csv.writer(bal_f)
    bal_w.writerow(["step", "layer", "max_over_mean", "min_over_mean", "unused_experts"])
    t0 = time.time()
    tokens = 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, len(train_ids) - args.seq, (args.batch,), generator=gen)
        x, y = batch(train_ids, starts, args.seq, bos)
        loss = lm_loss(model, x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in params.values() if isinstance(p, torch.nn.Parameter)], 1.0)
        opt.step()
        with torch.no_grad():
            for i in moe_layers:
                load = model.loads[i].float()
                params[bias_names[i]] += args.bias_rate * torch.sign(load.mean() - load)
        tokens += x.numel()
        last = step == args.steps - 1
        held = heldout_loss() if (step + 1) % args.eval_every == 0 or last else None
        el = time.time() - t0
        loss_w.writerow([step + 1, tokens, f"{el:.1f}", f"{lr_at(step):.6g}", f"{loss.item():.5f}",
                         "" if held is None else f"{held:.5f}"])
        loss_f.flush()
        if (step + 1) % 10 == 0 or held is not None:
            msg = f"step {step + 1} loss {loss.item():.4f} tok/s {tokens / el:.0f} {el:.0f}s"
            print(msg + ("" if held is None else f" held-out {held:.4f}"), flush=True)
        if held is not None:
            for i in moe_layers:
                load = model.loads[i].float()
                bal_w.writerow([step + 1, i, f"{(load.max() / load.mean()).item():.3f}",
                                f"{(load.min() / load.mean()).item():.3f}", int((load == 0).sum())])
            bal_f.flush()
            save()
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump({"steps": args.steps, "tokens": tokens, "seconds": round(time.time() - t0, 1),
                   "tokens_per_second": round(tokens / (time.time() - t0), 1), "params": n_params,
                   "final_train_loss": loss.item(), "final_heldout_loss": held, "threads": args.threads}, f, indent=1)


if __name__ == "__main__":
    main()
