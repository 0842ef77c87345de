#!/usr/bin/env python3
"""Speculative decoding: bytes read per generated token on the trained model's text
(docs/benchmarks-log.md, "Speculative decoding").

For each of the first N fortunes of data/text/heldout.txt, its first line is the prompt;
k3host generates --tokens tokens greedily (and with --temp, sampled) at a laptop-scaled
budget of the shipped fortune model (no trunk layer pinned, expert slots 3.5 x top-k, as the
laptop preset gives K3: 56 slots for top-16), once per job.speculative.max_draft setting,
interleaved per prompt. Every setting must generate the ids of max_draft 0 (else exit 1).
Prints per setting: tokens per forward pass, drafts accepted, decode bytes per generated
token (trunk, experts, total) and their ratio to max_draft 0, the same ratio weighted as K3
at the laptop preset reads (trunk 109 GB, experts 26 GB per token), and decode seconds
per token. Not a ctest test.

  tools/bench/speculative_bench.py [--k3host build/bin/k3host] [--prompts 12] [--tokens 64]
      [--drafts 0,2,4,8] [--ngram 3] [--min-ngram 1] [--temp 0] [--work DIR]
      [--extra "--set kernels.set=scalar"] [--datastore TRAIN.txt] [--draft-model DIR] [--coded DIR]

With --coded DIR (a trunk packed by `k3host pack-trunk --codec bf16-huff`), every setting
runs a second time reading its trunk from DIR, so the table has the codec alone, the drafts
alone and both, each against max_draft 0 on the checkpoint's shards.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
# K3 at the laptop preset: decode bytes per token, trunk and routed experts (measured on the
# full geometry: docs/benchmarks-log.md, "Full K3 geometry").
K3_TRUNK, K3_EXPERTS = 109e9, 26e9


def prompts(n):
    text = open(os.path.join(REPO, "data/text/heldout.txt"), encoding="utf-8").read()
    out = []
    for block in text.split("\n\n"):
        line = block.strip().split("\n")[0].strip()
        if len(line) >= 12 and not line.startswith("--"):
            out.append(line[:100])
        if len(out) == n:
            break
    return out


def run(args, prompt, draft, coded, report):
    cmd = [args.k3host, "--config", "laptop", "-q", "-p", prompt, "-n", str(args.tokens),
           "--temp", str(args.temp), "--seed", "1", "--out", report,
           "--set", "memory.trunk_gb=0.0001", "--set", "memory.expert_cache_gb=0.000115",
           "--set", f"job.speculative.max_draft={draft}", "--set", f"job.speculative.ngram={args.ngram}",
           "--set", f"job.speculative.min_ngram={args.min_ngram}"] + shlex.split(args.extra)
    if coded:
        cmd += ["--set", f"model.packed_trunk={args.coded}"]
    if args.datastore and draft > 0:
        cmd += ["--set", f"job.speculative.datastore={args.datastore}"]
    if args.draft_model and draft > 0:
        cmd += ["--set", f"job.speculative.draft_model={args.draft_model}"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(report, encoding="utf-8") as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--k3host", default=os.path.join(REPO, "build/bin/k3host"))
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--drafts", default="0,2,4,8")
    ap.add_argument("--ngram", type=int, default=3)
    ap.add_argument("--min-ngram", type=int, default=1)
    ap.add_argument("--temp", type=float, default=0.0)
    ap.add_argument("--work", default=None, help="the reports (default: bench/speculative_bench in the build "
                    "folder of --k3host)")
    ap.add_argument("--extra", default="")
    ap.add_argument("--coded", default="", help="a coded packed trunk of the fortune model: every setting also "
                    "runs with model.packed_trunk=DIR")
    ap.add_argument("--datastore", default="", help="job.speculative.datastore for every setting but 0 "
                    "(e.g. the training text: /usr/bin/python3 tools/train/data.py DIR writes DIR/train.txt)")
    ap.add_argument("--draft-model", default="", help="job.speculative.draft_model for every setting but 0 "
                    "(e.g. data/models/fortune-draft)")
    args = ap.parse_args()
    drafts = [int(d) for d in args.drafts.split(",")]
    if drafts[0] != 0:
        drafts.insert(0, 0)
    if args.work is None:
        args.work = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.k3host))), "bench",
                                 "speculative_bench")
    os.makedirs(args.work, exist_ok=True)
    settings = [(d, False) for d in drafts] + ([(d, True) for d in drafts] if args.coded else [])
    totals = {k: {"fed": 0, "passes": 0, "proposed": 0, "accepted": 0, "trunk": 0.0, "experts": 0.0,
                  "tables": 0.0, "seconds": 0.0} for k in settings}
    mismatches = 0
    ps = prompts(args.prompts)
    for i, prompt in enumerate(ps):
        ids0 = None
        for d, coded in settings:
            r = run(args, prompt, d, coded, os.path.join(args.work, f"p{i}-d{d}{'-coded' if coded else ''}.json"))
            print(f"# prompt {i + 1}/{len(ps)} max_draft {d}{' coded trunk' if coded else ''}: "
                  f"{r['speculative']['tokens_per_pass']:.2f} tokens/pass", file=sys.stderr)
            if ids0 is None:
                ids0 = r["generated_ids"]
            elif r["generated_ids"] != ids0:
                mismatches += 1
                print(f"MISMATCH: prompt {i} max_draft {d} coded {coded} generated other ids than max_draft 0",
                      file=sys.stderr)
            t = totals[(d, coded)]
            fed = r["decode_forwards"]
            per = r["decode_bytes_per_token"]
            t["fed"] += fed
            t["passes"] += r["speculative"]["forward_passes"]
            t["proposed"] += r["speculative"]["drafts_proposed"]
            t["accepted"] += r["speculative"]["drafts_accepted"]
            t["trunk"] += per["trunk"] * fed
            t["experts"] += per["experts"] * fed
            t["tables"] += per["embedding_head"] * fed
            t["seconds"] += r["seconds_per_token"] * fed
    base = totals[(0, False)]

    def per_token(t, key):
        return t[key] / max(1, t["fed"])

    print(f"{len(ps)} held-out prompts x {args.tokens} tokens, temperature {args.temp}, ngram "
          f"{args.ngram}..{args.min_ngram}, datastore {args.datastore or 'none'}, draft model {args.draft_model or 'none'}, coded trunk {args.coded or 'none'}; ids identical to max_draft 0: {'yes' if mismatches == 0 else 'NO'}")
    print("| max_draft | tokens/pass | drafts accepted | trunk B/token | experts B/token | total B/token "
          "| total vs 0 | trunk vs 0 | experts vs 0 | K3-weighted vs 0 | s/token vs 0 |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for d, coded in settings:
        t = totals[(d, coded)]
        tr, ex, tb = per_token(t, "trunk"), per_token(t, "experts"), per_token(t, "tables")
        btr, bex, btb = per_token(base, "trunk"), per_token(base, "experts"), per_token(base, "tables")
        rt, re_ = tr / btr if btr else 0, ex / bex if bex else 0
        k3 = (K3_TRUNK * rt + K3_EXPERTS * re_) / (K3_TRUNK + K3_EXPERTS)
        acc = f"{t['accepted']}/{t['proposed']} ({100 * t['accepted'] / t['proposed']:.0f}%)" if t["proposed"] else "-"
        print(f"| {d}{' + codec' if coded else ''} | {t['fed'] / max(1, t['passes']):.2f} | {acc} | {tr:,.0f} | {ex:,.0f} | {tr + ex + tb:,.0f} "
              f"| {(tr + ex + tb) / (btr + bex + btb):.3f} | {rt:.3f} | {re_:.3f} | {k3:.3f} "
              f"| {per_token(t, 'seconds') / per_token(base, 'seconds'):.3f} |")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
