"""Perplexity of a K3 model on a text file, by the definition k3host perplexity shares.

Usage:
  /usr/bin/python3 tools/train/perplexity.py TEXT --checkpoint MODEL_DIR [--context 256] [--stride 128] [--json]
  /usr/bin/python3 tools/train/perplexity.py TEXT --float MODEL_PT --tokenizer DIR [...]

Definition: the file's bytes (UTF-8) are tokenized without special tokens; [BOS] (the
config's bos_token_id, ranks+0) is prepended once. Windows of W = --context tokens slide by
S = --stride (default W/2): window k covers tokens [kS, kS+W), the last one cut at the end;
windows continue until one reaches the end. Each window is run from an empty state and
scores only positions no earlier window scored: the first scores positions 1..W-1, later
ones their last S positions (of the truncated last window, those past the previous window's
end). A position p is scored as -log softmax(logits of position p-1)[token p] in float64.
ppl = exp(mean of those negative log-likelihoods over all scored positions).

--checkpoint runs a release-format checkpoint through the float64 reference (tools/reference,
whole-sequence form); --float runs train.py's float32 weights (logits cast to float64).
"""

import argparse
import json
import math
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
from model import K3Model, TrainModel  # noqa: E402


def windows(n, W, S):
    """(begin, end, first scored position) of every window over n tokens."""
    out, scored_to, b = [], 0, 0
    while True:
        e = min(b + W, n)
        first = 1 if b == 0 else scored_to
        if e > first:
            out.append((b, e, first))
        scored_to = e
        if e >= n:
            return out
        b += S


def perplexity(ids, logits_fn, W, S):
    nll, count = 0.0, 0
    for b, e, first in windows(len(ids), W, S):
        logits = logits_fn(ids[b:e]).to(torch.float64)            # [e-b, V]
        logp = torch.log_softmax(logits, dim=-1)
        pos = torch.arange(first, e)
        nll -= logp[pos - 1 - b, torch.tensor(ids[first:e])].sum().item()
        count += e - first
    return math.exp(nll / count), nll / count, count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("text")
    ap.add_argument("--checkpoint", help="release-format model directory (float64 reference)")
    ap.add_argument("--float", dest="float_pt", help="train.py model.pt (float32)")
    ap.add_argument("--tokenizer", help="folder with tiktoken.model (default: the checkpoint's)")
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--stride", type=int)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if (args.checkpoint is None) == (args.float_pt is None):
        ap.error("give exactly one of --checkpoint and --float")
    W = args.context
    S = args.stride if args.stride is not None else W // 2
    if W < 2 or not 0 < S <= W - 1:
        ap.error("need --context >= 2 and 0 < --stride < context")
    torch.set_num_threads(args.threads)
    tok_dir = args.tokenizer or args.checkpoint
    if tok_dir is None:
        ap.error("--float needs --tokenizer")
    enc = bpe.Encoder(bpe.read_rank_file(os.path.join(tok_dir, "tiktoken.model")))
    if args.checkpoint:
        model = K3Model(args.checkpoint)
        fn = lambda w: model.forward_sequence(w)  # noqa: E731
    else:
        ck = torch.load(args.float_pt)
        model = TrainModel(ck["config"], ck["params"])
        fn = lambda w: model.forward_sequence(torch.tensor([w]))[0]  # noqa: E731
    bos = model.cfg.bos_ids[0]
    with open(args.text, "rb") as f:
        ids = [bos] + enc.encode(f.read().decode("utf-8"))
    t0 = time.time()
    with torch.no_grad():
        ppl, mean_nll, count = perplexity(ids, fn, W, S)
    res = {"ppl": ppl, "mean_nll": mean_nll, "scored_tokens": count, "tokens": len(ids), "context": W,
           "stride": S, "model": args.checkpoint or args.float_pt, "text": args.text,
           "seconds": round(time.time() - t0, 1)}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"ppl {ppl:.10g} over {count} scored tokens (mean NLL {mean_nll:.10g}, {len(ids)} tokens "
              f"with BOS, context {W}, stride {S})")


if __name__ == "__main__":
    main()
