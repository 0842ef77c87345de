#!/usr/bin/python3
"""Evaluation of every cache plugin against Belady on three trace families (docs/cache.md,
"Adaptive and predicting policies"). Not a ctest test.

    tools/bench/cache_eval.py [K3HOST] [WORKDIR]
    defaults: the repository's build/bin/k3host; bench/cache_eval in that k3host's build folder

Families and traces (all deterministic; the generator settings were fixed before any policy
parameter was chosen, and no policy was tuned on them):
  (a) calibrated: configs/traces/k3-calibrated.yaml (full-recompute decode) and its
      incremental variant (--recompute-prompt 0 --tokens 68);
  (b) fortune: the trained demo model (data/models/fortune) fed held-out text one token per
      forward, as tools/bench/fortune_traces.sh does; "train" = bytes 0..7000 of
      data/text/heldout.txt (the only text policy defaults were chosen on), "test" = bytes
      64000..71000;
  (c) generated variants, 16 layers x 128 experts, top-8, 2,000 tokens: skewed (zipf 1.0,
      reuse 0.1), sticky (zipf 0.2, reuse 0.6), middle (zipf 0.6, reuse 0.3).
Capacities: 0.5x 1x 2x 4x 8x one token's working set (the calibrated full-recompute trace:
8 16 32 64 128 GB, as in docs/cache.md section 5); "mid" = the middle three.

Besides the plugins, `static*` is the best fixed set of c experts chosen in hindsight from
the trace's request counts (static_best below): a reference for what popularity alone is
worth, not an online policy.

Writes WORKDIR/cache-eval.md (the Markdown tables) and WORKDIR/cache-eval.csv (one row per
trace, capacity and policy), and prints the Markdown.
"""
import collections
import csv
import json
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
if len(sys.argv) > 3 or (len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help")):
    print(__doc__ if len(sys.argv) == 2 else "usage: tools/bench/cache_eval.py [K3HOST] [WORKDIR]",
          file=sys.stdout if len(sys.argv) == 2 else sys.stderr)
    sys.exit(0 if len(sys.argv) == 2 else 2)
K3HOST = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "k3host")
WORK = sys.argv[2] if len(sys.argv) > 2 else \
    os.path.join(os.path.dirname(os.path.dirname(K3HOST)), "bench", "cache_eval")
X_CAPS = "0.5x,1x,2x,4x,8x"
GB_CAPS = "8GB,16GB,32GB,64GB,128GB"
PRESET = os.path.join(ROOT, "configs", "traces", "k3-calibrated.yaml")
GEN_SHAPE = ["--layers", "16", "--experts", "128", "--top-k", "8", "--tokens", "2000"]
# (family, trace name, how to make it, capacities)
TRACES = [
    ("calibrated", "k3-calibrated", ("gen", ["--trace-preset", PRESET]), GB_CAPS),
    ("calibrated", "k3-incremental", ("gen", ["--trace-preset", PRESET, "--recompute-prompt", "0", "--tokens", "68"]), X_CAPS),
    ("fortune", "fortune-train", ("fortune", 0), X_CAPS),
    ("fortune", "fortune-test", ("fortune", 64000), X_CAPS),
    ("generated", "gen-skewed", ("gen", GEN_SHAPE + ["--zipf", "1.0", "--reuse", "0.1", "--seed", "101"]), X_CAPS),
    ("generated", "gen-sticky", ("gen", GEN_SHAPE + ["--zipf", "0.2", "--reuse", "0.6", "--seed", "102"]), X_CAPS),
    ("generated", "gen-middle", ("gen", GEN_SHAPE + ["--zipf", "0.6", "--reuse", "0.3", "--seed", "103"]), X_CAPS),
]
FORTUNE_BYTES = 7000


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def make_trace(path, how):
    kind, arg = how
    if kind == "gen":
        run([K3HOST, "sim", "--generate-trace", path] + arg)
        return
    with open(os.path.join(ROOT, "data", "text", "heldout.txt"), "rb") as f:
        f.seek(arg)
        text = f.read(FORTUNE_BYTES)
    txt = path + ".txt"
    with open(txt, "wb") as f:
        f.write(text)
    run([K3HOST, "--config", os.path.join(ROOT, "presets", "laptop.yaml"), "-m", os.path.join(ROOT, "data", "models", "fortune"),
         "-f", txt, "-n", "1", "--set", "job.prefill_chunk=1", "--set", "trace.out=" + path,
         "--out", path + ".run.json", "-q"])


def static_best(path, capacities):
    """Hit rate of the best fixed set of c experts chosen in hindsight from the whole trace's
    request counts (each still misses once, when first loaded): what knowing every expert's
    popularity in advance is worth, without knowing when it is used. A reference, not a
    bound: an online policy can beat it by following recency."""
    with open(path, "rb") as f:
        data = f.read()
    count = struct.unpack_from("<Q", data, 56)[0]
    # A record is u32 position word, u16 layer, u16 expert: the top 32 bits are the expert.
    uses = collections.Counter(r >> 32 for r in struct.unpack_from("<%dQ" % count, data, 72))
    ranked = sorted((n for n in uses.values()), reverse=True)
    return [sum(n - 1 for n in ranked[:c]) / count for c in capacities]


def pct(x):
    return "%.2f %%" % (100 * x)


def main():
    os.makedirs(WORK, exist_ok=True)
    results = {}  # trace -> (trace info, [(capacity, slots, {policy: hit rate})])
    policies = None
    for family, name, how, caps in TRACES:
        path = os.path.join(WORK, name + ".k3trace")
        make_trace(path, how)
        out = os.path.join(WORK, name + ".json")
        run([K3HOST, "sim", path, "--capacity", caps, "--json", out])
        with open(out) as f:
            sim = json.load(f)
        rows = {}
        order = []
        for r in sim["results"]:
            if r["capacity"] not in rows:
                rows[r["capacity"]] = (r["slots"], {})
                order.append(r["capacity"])
            rows[r["capacity"]][1][r["policy"]] = r["hit_rate"]
        names = list(rows[order[0]][1])
        if policies is None:
            policies = names
        static = static_best(path, [rows[c][0] for c in order])
        for c, hit in zip(order, static):
            rows[c][1]["static*"] = hit
        results[name] = (family, sim["trace"], [(c, rows[c][0], rows[c][1]) for c in order])
    policies = policies + ["static*"]
    online = [p for p in policies if p not in ("belady", "static*")]

    md = []
    with open(os.path.join(WORK, "cache-eval.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["family", "trace", "capacity", "slots", "policy", "hit_rate", "hit_rate_over_belady"])
        for name, (family, info, rows) in results.items():
            for cap, slots, hits in rows:
                for p in policies:
                    b = hits["belady"]
                    w.writerow([family, name, cap, slots, p, "%.6f" % hits[p], "%.4f" % (hits[p] / b if b > 0 else 0)])

    for name, (family, info, rows) in results.items():
        md.append("**%s** (%s; %d layers x %d experts, top-%d, %s requests, %s distinct experts)\n" % (
            name, family, info["layers"], info["experts_per_layer"], info["top_k"],
            format(info["requests"], ","), format(info["distinct_experts"], ",")))
        md.append("| capacity | slots | " + " | ".join(policies) + " | best online | best ÷ belady |")
        md.append("|---:|---:|" + "---:|" * len(policies) + "---|---:|")
        for cap, slots, hits in rows:
            best = max(online, key=lambda p: (hits[p], -online.index(p)))
            cells = []
            for p in policies:
                c = pct(hits[p])
                cells.append("**%s**" % c if p == best else c)
            ratio = hits[best] / hits["belady"] if hits["belady"] > 0 else 0
            md.append("| %s | %s | %s | %s | %.2f |" % (cap, format(slots, ","), " | ".join(cells), best, ratio))
        md.append("")

    # Summary: hit rate / Belady, averaged over each trace's middle three capacities.
    md.append("**Hit rate ÷ Belady, mean over the middle three capacities of each trace**\n")
    names = list(results)
    md.append("| policy | " + " | ".join(names) + " | worst |")
    md.append("|---|" + "---:|" * (len(names) + 1))
    for p in online:
        vals = []
        for name in names:
            rows = results[name][2][1:4]
            vals.append(sum(h[p] / h["belady"] for _, _, h in rows) / len(rows))
        md.append("| %s | %s | %.2f |" % (p, " | ".join("%.2f" % v for v in vals), min(vals)))
    md.append("")
    text = "\n".join(md)
    with open(os.path.join(WORK, "cache-eval.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
