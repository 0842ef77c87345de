#!/usr/bin/env python3
"""The tables of tools/bench/fullscale_bench.sh (docs/benchmarks-log.md "Full K3 geometry").

Arguments: --throttle-mbps N, then one per run, "name=report.json=preset". The first run of
each preset is its baseline; a run named "<preset>-throttle<N>" is the throttle check.

From the k3host JSON report (core/src/job/job.cpp report_json), over the decode forward
passes only (steps with "forward": true; the prefill is not a step, and the last token needs
no forward pass):
  s/token    = mean step seconds
  bytes      = mean trunk / expert / table bytes read per step (table: embedding rows,
               lm_head chunks, global norms)
  io wait    = mean io_wait_seconds: the compute thread blocked on storage
  compute    = s/token - io wait: the compute thread's time not waiting for storage. On
               this machine it includes the cost of emulating the disk (the kernel copying
               zero pages out of the sparse files, the synthetic fill) on the reader threads,
               which share the cores: an upper estimate of the compute alone.
  predicted s/token at B bytes/s: the streaming design overlaps reads with compute (a
               second trunk ring slot is read while a layer computes; expert reads run under
               the shared expert and the other experts' products), so with two ring slots
               the time is bounded by the slower of the two: max(bytes / B, compute). With
               one ring slot (ultra) the trunk read of each layer is not overlapped: trunk / B
               + max((experts + tables) / B, compute).
  peak RSS   = the process's peak resident set (getrusage) beside the plan's total.
A second table predicts with the lowest compute measured in the invocation (see main()).
From each run's trace (name.trace beside name.json): per MoE layer, how many different
top-k sets the tokens chose and how many experts were chosen at all (over zeros: 1 and k).
The throttle check compares the throttled run's s/token with the prediction at its bandwidth.
"""
import json
import os
import struct
import sys

BANDWIDTHS = (2e9, 4e9, 7e9)


def load(arg):
    name, path, preset = arg.split("=")
    with open(path) as f:
        r = json.load(f)
    decode = [s for s in r["steps"] if s.get("forward")]
    if not decode:
        raise SystemExit(f"{path}: no decode forward pass (needs at least 2 new tokens)")
    n = len(decode)

    def mean(key):
        return sum(s[key] for s in decode) / n

    plan = r["plan"]
    req = sum(s["expert_requests"] for s in decode)
    hits = sum(s["expert_hits"] for s in decode)
    row = {
        "name": name,
        "preset": preset,
        "n": n,
        "secs": mean("seconds"),
        "trunk": mean("trunk_bytes_read"),
        "experts": mean("expert_bytes_read"),
        "tables": mean("table_bytes_read"),
        "wait": mean("io_wait_seconds"),
        "hit": hits / req if req else 0.0,
        "ring": plan["trunk_ring_slots"],
        "slots": plan["expert_slots"],
        "pinned": f'{plan["trunk_pinned_layers"]}/{plan["trunk_layers"]}',
        "plan_total": plan["total_bytes"],
        "rss": r["peak_rss_bytes"],
        "load_s": r["load_seconds"],
        "prefill_s": r["prefill_seconds"],
        "storage": r.get("storage", ""),
        "failures": len(r.get("expert_failures", [])),
        "ids": r["generated_ids"],
        "routing": routing_spread(os.path.splitext(path)[0] + ".trace"),
    }
    row["bytes"] = row["trunk"] + row["experts"] + row["tables"]
    row["compute"] = row["secs"] - row["wait"]
    return row


def routing_spread(path):
    """From a trace (docs/cache.md section 2): per MoE layer, the number of different top-k
    sets the tokens chose and of experts chosen at all; None when there is no trace."""
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"K3TRACE\0":
        raise SystemExit(f"{path}: not a k3host trace")
    header, = struct.unpack_from("<I", b, 12)
    experts, top_k = struct.unpack_from("<II", b, 20)
    count, = struct.unpack_from("<Q", b, 56)
    sets = {}  # layer -> position -> experts
    for i in range(count):
        word, layer, expert = struct.unpack_from("<IHH", b, header + 8 * i)
        sets.setdefault(layer, {}).setdefault(word & 0x7FFFFFFF, set()).add(expert)
    if not sets:
        return None
    distinct = [len({frozenset(e) for e in by_pos.values()}) for by_pos in sets.values()]
    used = [len(set().union(*by_pos.values())) for by_pos in sets.values()]
    tokens = max(len(by_pos) for by_pos in sets.values())
    return {"layers": len(sets), "tokens": tokens, "experts": experts, "top_k": top_k,
            "distinct": (min(distinct), max(distinct)), "used": (min(used), max(used))}


def predict(row, bandwidth, compute=None):
    c = row["compute"] if compute is None else compute
    if row["ring"] >= 2:
        return max(row["bytes"] / bandwidth, c)
    return row["trunk"] / bandwidth + max((row["experts"] + row["tables"]) / bandwidth, c)


def gb(x):
    return f"{x / 1e9:.2f}"


def main(argv):
    if len(argv) < 3 or argv[0] != "--throttle-mbps":
        raise SystemExit(__doc__)
    mbps = float(argv[1])
    rows = [load(a) for a in argv[2:]]
    base = {}
    for r in rows:
        if "-throttle" not in r["name"]:
            base.setdefault(r["preset"], r)

    print("| run | pinned | ring slots | expert slots | decode tokens | peak RSS GB | plan GB | RSS / plan | "
          "trunk GB/token | experts GB/token | tables GB/token | total GB/token | vs baseline | hit rate | "
          "s/token | io wait s | compute s | predicted s/token at 2 / 4 / 7 GB/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        b = base.get(r["preset"])
        vs = f'{r["bytes"] / b["bytes"]:.3f}' if b and b["bytes"] else "n/a"
        pred = " / ".join(f"{predict(r, bw):.1f}" for bw in BANDWIDTHS)
        print(f'| {r["name"]} | {r["pinned"]} | {r["ring"]} | {r["slots"]} | {r["n"]} | {gb(r["rss"])} | '
              f'{gb(r["plan_total"])} | {r["rss"] / r["plan_total"]:.3f} | {gb(r["trunk"])} | {gb(r["experts"])} | '
              f'{gb(r["tables"])} | {gb(r["bytes"])} | {vs} | {r["hit"]:.3f} | {r["secs"]:.1f} | {r["wait"]:.1f} | '
              f'{r["compute"]:.1f} | {pred} |')

    # On a machine with few cores the emulated disk (the kernel copying zero pages out of the
    # sparse files, the synthetic fill) competes with the compute for the cores whenever the
    # reads overlap it (two ring slots), so a run's own compute figure can be inflated. The
    # lowest compute measured in this invocation (typically ultra, whose trunk reads do not
    # overlap the compute) is the closer estimate of the compute alone.
    plain = [r for r in rows if "-throttle" not in r["name"]]
    if plain:
        low = min(plain, key=lambda r: r["compute"])
        print()
        print(f'Predicted s/token at 2 / 4 / 7 GB/s with the lowest compute measured here '
              f'({low["compute"]:.1f} s, {low["name"]}):')
        print()
        print("| run | bytes / 2 GB/s | bytes / 4 GB/s | bytes / 7 GB/s | predicted at 2 / 4 / 7 GB/s |")
        print("|---|---:|---:|---:|---|")
        for r in plain:
            io = " | ".join(f'{r["bytes"] / bw:.1f}' for bw in BANDWIDTHS)
            pred = " / ".join(f'{predict(r, bw, low["compute"]):.1f}' for bw in BANDWIDTHS)
            print(f'| {r["name"]} | {io} | {pred} |')

    for r in rows:
        if "-throttle" not in r["name"] or mbps <= 0:
            continue
        b = base.get(r["preset"])
        bw = mbps * 1e6
        # The prediction from the throttled run's own bytes and the unthrottled baseline's
        # compute (measured in the same invocation), and from its own compute.
        print()
        print(f'Throttle check ({r["name"]}: throttle at {mbps:.0f} MB/s in front of synthetic): '
              f'measured {r["secs"]:.1f} s/token; {gb(r["bytes"])} GB/token / {mbps / 1e3:g} GB/s = {r["bytes"] / bw:.1f} s')
        if b and predict(r, bw, b["compute"]) > 0:
            p = predict(r, bw, b["compute"])
            print(f'- predicted with the baseline\'s compute ({b["compute"]:.1f} s): {p:.1f} s/token; '
                  f'measured / predicted = {r["secs"] / p:.3f}')
        p = predict(r, bw)
        if p <= 0:
            continue
        print(f'- predicted with this run\'s own compute ({r["compute"]:.1f} s): {p:.1f} s/token; '
              f'measured / predicted = {r["secs"] / p:.3f}')

    # Every run feeds the same prompt: the output must be the same at every budget and
    # through every storage stack (compared over the shorter of two runs).
    print()
    first = rows[0]
    for r in rows:
        n = min(len(r["ids"]), len(first["ids"]))
        same = "same as" if r["ids"][:n] == first["ids"][:n] else "DIFFERENT from"
        extra = f', {r["failures"]} expert failures' if r["failures"] else ""
        print(f'- {r["name"]}: load {r["load_s"]:.1f} s, prefill {r["prefill_s"]:.1f} s, generated ids {r["ids"]} '
              f'({same} {first["name"]}){extra}')
        g = r["routing"]
        if g:
            # Over zeros every token picks the same set: 1 set and top-k experts per layer.
            print(f'  routing: {g["tokens"]} tokens x {g["layers"]} MoE layers; different top-{g["top_k"]} sets per '
                  f'layer {g["distinct"][0]}..{g["distinct"][1]}, experts chosen per layer {g["used"][0]}..{g["used"][1]} '
                  f'of {g["experts"]}')


if __name__ == "__main__":
    main(sys.argv[1:])
