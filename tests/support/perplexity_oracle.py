#!/usr/bin/python3
"""ctest driver: k3host perplexity against the float64 PyTorch reference's perplexity
(tools/train/perplexity.py --checkpoint) on the same text, window and stride.

  perplexity_oracle.py --k3host EXE --model DIR --text FILE [--lines N] [--window W]
                       [--stride S] [--digits D] [--work DIR] [-- extra k3host args]

The first N lines of FILE (default: all) are scored by both; they must agree on the count of
scored tokens and on the perplexity to D significant digits (default 7: a relative difference
below 5e-7). Exits 77 (ctest SKIP) when this interpreter has no torch or numpy.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k3host", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--lines", type=int, default=0)
    ap.add_argument("--window", type=int, default=128)
    ap.add_argument("--stride", type=int, default=0)
    ap.add_argument("--digits", type=int, default=7)
    ap.add_argument("--work", default=".")
    ap.add_argument("extra", nargs="*", help="more k3host arguments (after --)")
    args = ap.parse_args()
    for name in ("numpy", "torch"):
        if importlib.util.find_spec(name) is None:
            print(f"SKIP: {sys.executable} has no {name} (tools/install-deps.sh --with-reference)")
            return 77
    stride = args.stride or args.window // 2
    os.makedirs(args.work, exist_ok=True)
    text = args.text
    if args.lines:
        with open(args.text, "rb") as f:
            lines = f.read().split(b"\n")[: args.lines]
        text = os.path.join(args.work, "excerpt.txt")
        with open(text, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")

    engine = subprocess.run(
        [args.k3host, "perplexity", text, "--json", "-q", "--set", f"model.path={args.model}",
         "--window", str(args.window), "--stride", str(stride), *args.extra],
        capture_output=True, text=True)
    if engine.returncode != 0:
        print(f"k3host perplexity failed ({engine.returncode}):\n{engine.stdout}\n{engine.stderr}")
        return 1
    e = json.loads(engine.stdout)
    ref = subprocess.run(
        [sys.executable, os.path.join(ROOT, "tools", "train", "perplexity.py"), text, "--checkpoint", args.model,
         "--context", str(args.window), "--stride", str(stride), "--json"],
        capture_output=True, text=True)
    if ref.returncode != 0:
        print(f"reference perplexity failed ({ref.returncode}):\n{ref.stdout}\n{ref.stderr}")
        return 1
    r = json.loads(ref.stdout.strip().splitlines()[-1])
    rel = abs(e["perplexity"] - r["ppl"]) / abs(r["ppl"])
    print(f"k3host    ppl {e['perplexity']:.12g} over {e['scored']} tokens ({e['kernels']}, {e['threads']} threads)")
    print(f"reference ppl {r['ppl']:.12g} over {r['scored_tokens']} tokens (float64)")
    print(f"relative difference {rel:.3g}; {args.digits} significant digits need < {0.5 * 10 ** (1 - args.digits):.3g}")
    if e["scored"] != r["scored_tokens"] or e["ids"] != r["tokens"]:
        print("FAIL: the two scored different token counts (tokenizer or window definition differs)")
        return 1
    if not rel < 0.5 * 10 ** (1 - args.digits):
        print("FAIL: the perplexities disagree")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
