#!/usr/bin/python3
"""Independent float64 PyTorch reference of the Kimi K3 text model (docs/model-spec.md).

Usage:
  k3_reference.py MODEL_DIR --ids 1,2,3 [--generate N] [--out FILE.json] [--logits FILE]
                  [--mode incremental|recompute] [--dump-routing] [--dtype float64|float32]

Teacher forcing over --ids gives logits at every position; then N greedy tokens follow
(stopping after eos_token_id). Output (see README.md): a JSON report plus a raw
little-endian float64 logits file [rows, vocab], one row per fed token.
Exit codes: 0 ok, 1 runtime failure, 2 bad usage, config or checkpoint.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from k3_checkpoint import CheckpointError  # noqa: E402
from k3_model import K3Model, argmax_first  # noqa: E402

FORMAT = "k3-reference-v1"


def parse_ids(text):
    try:
        ids = [int(t) for t in text.replace(" ", "").split(",") if t != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--ids: not a comma-separated list of integers: {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("--ids: empty")
    return ids


def run(model, ids, generate, mode, dump_routing, chunk):
    """Returns (rows of logits [n, V] as a list of tensors, fed tokens, generated ids, routing)."""
    eos = set(model.cfg.eos_ids)
    fed, rows, routing, generated = [], [], [], []
    if mode == "incremental":
        state = model.new_state()

        def feed(tok):
            trace = [] if dump_routing else None
            rows.append(model.step(state, tok, trace))
            fed.append(tok)
            if dump_routing:
                routing.append({"position": len(fed) - 1, "token": tok, "layers": trace})
    else:
        def feed(tok):
            fed.append(tok)
            rows.append(model.forward_sequence(fed, chunk)[-1])

    if mode == "recompute":
        # teacher forcing in one pass, then one full recompute per generated token
        all_logits = model.forward_sequence(ids, chunk)
        rows.extend(all_logits)
        fed.extend(ids)
    else:
        for tok in ids:
            feed(tok)
    for n in range(generate):
        nxt = argmax_first(rows[-1])
        generated.append(nxt)
        if nxt in eos or n == generate - 1:
            break
        feed(nxt)
    return rows, fed, generated, routing


def write_atomic(path, data, binary):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
        f.write(data)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Float64 PyTorch reference of the Kimi K3 text model.")
    ap.add_argument("model_dir")
    ap.add_argument("--ids", required=True, type=parse_ids, help="prompt token ids, comma separated")
    ap.add_argument("--generate", type=int, default=0, metavar="N", help="greedy tokens after the prompt")
    ap.add_argument("--out", help="JSON report path (default: print a summary only)")
    ap.add_argument("--logits", help="raw float64 logits path (default: <out without .json>.logits.f64)")
    ap.add_argument("--mode", choices=("incremental", "recompute"), default="incremental",
                    help="incremental: recurrent state, one token at a time; recompute: whole-sequence "
                         "form from scratch for every row (independent cross-check)")
    ap.add_argument("--chunk", type=int, default=16, help="KDA chunk length of the recompute form")
    ap.add_argument("--dump-routing", action="store_true",
                    help="add the top-k routing trace (experts, weights, selection margin) per position and layer")
    ap.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                    help="float32 only to estimate how far an fp32 engine may drift; the reference is float64")
    args = ap.parse_args(argv)
    if args.generate < 0:
        ap.error("--generate must be >= 0")
    if args.chunk < 1:
        ap.error("--chunk must be >= 1")
    if args.dump_routing and args.mode != "incremental":
        ap.error("--dump-routing needs --mode incremental")

    torch.set_num_threads(1)
    dtype = torch.float64 if args.dtype == "float64" else torch.float32
    t0 = time.perf_counter()
    try:
        model = K3Model(args.model_dir, dtype=dtype)
        V = model.cfg.vocab
        bad = [t for t in args.ids if not 0 <= t < V]
        if bad:
            print(f"k3_reference: --ids: token id {bad[0]} outside the vocabulary 0..{V - 1}", file=sys.stderr)
            return 2
        t1 = time.perf_counter()
        rows, fed, generated, routing = run(model, args.ids, args.generate, args.mode, args.dump_routing, args.chunk)
    except CheckpointError as e:
        print(f"k3_reference: {e}", file=sys.stderr)
        return 2
    t2 = time.perf_counter()
    logits = torch.stack(rows).to(torch.float64).numpy()
    if not np.isfinite(logits).all():
        print("k3_reference: non-finite logits", file=sys.stderr)
        return 1
    argmax = [argmax_first(torch.from_numpy(r)) for r in logits]
    report = {
        "format": FORMAT,
        "model_dir": os.path.abspath(args.model_dir),
        "dtype": args.dtype,
        "mode": args.mode,
        "layer_kinds": model.cfg.layer_kinds(),
        "prompt_ids": args.ids,
        "generated_ids": generated,
        "eos_token_id": model.cfg.eos_ids,
        "row_tokens": fed,
        "argmax": argmax,
        "seconds": {"load": round(t1 - t0, 4), "run": round(t2 - t1, 4)},
    }
    if args.dump_routing:
        report["routing"] = routing
    if args.out:
        lpath = args.logits or (args.out[:-5] if args.out.endswith(".json") else args.out) + ".logits.f64"
        write_atomic(lpath, logits.astype("<f8").tobytes(), binary=True)
        out_dir = os.path.dirname(os.path.abspath(args.out))
        report["logits"] = {"file": os.path.relpath(os.path.abspath(lpath), out_dir), "dtype": "float64",
                            "byte_order": "little", "shape": list(logits.shape)}
        write_atomic(args.out, json.dumps(report, indent=1) + "\n", binary=False)
    print(f"k3_reference: {model.cfg.layer_kinds()} | prompt {len(args.ids)} ids | generated {generated} | "
          f"load {t1 - t0:.2f}s run {t2 - t1:.2f}s", file=sys.stderr)
    if not args.out:
        json.dump({k: report[k] for k in ("argmax", "generated_ids")}, sys.stdout)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
