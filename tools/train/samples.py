"""Greedy continuations of a few prompts by k3host, each checked against the float64 reference.

Usage: /usr/bin/python3 tools/train/samples.py MODEL_DIR --k3host BIN [--config PIPELINE] [-n 30]
       [--prompt TEXT ...] [--no-bos]

Each prompt is encoded here (bpe.py, the engine's ids) with [BOS] in front, as in training,
and given to `k3host --ids ... --temp 0`; tools/reference/k3_reference.py runs the same ids.
Prints a Markdown list of the continuations and whether the greedy ids agree; exit 1 if any
differ.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bpe  # noqa: E402

PROMPTS = ["The meaning of life is", "A computer", "Q: What do you call", "Love is",
           "Never trust a man who", "The best way to"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("--k3host", required=True)
    ap.add_argument("--config", help="pipeline (default: k3host's own default)")
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--prompt", action="append")
    ap.add_argument("--no-bos", action="store_true")
    args = ap.parse_args()
    with open(os.path.join(args.model, "config.json")) as f:
        bos = json.load(f)["bos_token_id"]
    enc = bpe.Encoder(bpe.read_rank_file(os.path.join(args.model, "tiktoken.model")))
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for text in args.prompt or PROMPTS:
            ids = ([] if args.no_bos else [bos]) + enc.encode(text)
            csv = ",".join(map(str, ids))
            cmd = [args.k3host] + (["--config", args.config] if args.config else []) + [
                "--set", f"model.path={args.model}", "--ids", csv, "--temp", "0", "-n", str(args.n),
                "--out", os.path.join(tmp, "run.json")]
            subprocess.run(cmd, check=True, capture_output=True)
            with open(os.path.join(tmp, "run.json")) as f:
                eng = json.load(f)["generated_ids"]
            ref = subprocess.run([sys.executable, os.path.join(HERE, "..", "reference", "k3_reference.py"), args.model,
                                  "--ids", csv, "--generate", str(args.n)], check=True, capture_output=True, text=True)
            ref_ids = json.loads(ref.stdout.splitlines()[0])["generated_ids"]
            same = eng == ref_ids
            ok &= same
            out = enc.decode(eng).replace("\n", "⏎").replace("\t", "⇥")
            print(f"- **{text}**{out}  \n  (greedy ids {'equal the reference' if same else 'DIFFER from the reference'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
