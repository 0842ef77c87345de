#!/usr/bin/env python3
"""The table of tools/bench/stream_bench.sh: decode seconds per token beside the lower bound.

Arguments: one per run, "name=report.json=B1/S1/B2/S2=load": the disk bandwidth measured with
dd iflag=direct right before (B1 bytes in S1 seconds) and right after (B2 in S2) the run, and
the 1-minute load average when it started. The bound uses the higher of the two bandwidths.

From the k3host JSON report (core/src/job/job.cpp report_json), over the decode forward
passes only: generated token i's step (steps[i]) holds the forward pass of token i, so the
last step (sampling only, no forward pass: "forward": false) and the prefill (prefill_seconds, not a step) are
left out. Per decode token:
  s/token   = sum(steps[i].seconds) / n
  bytes     = sum(expert + trunk + table bytes read in the step) / n
  io wait   = sum(steps[i].io_wait_seconds) / n: the compute thread blocked on storage
              (trunk ring slot not ready, expert lease not ready, embedding rows, lm_head chunks)
  compute   = s/token - io wait: the time the compute thread was not waiting for storage
  I/O bound = bytes / measured disk bandwidth (the higher of before and after)
  bound     = max(I/O bound, compute);  ratio = s/token / bound  (goal <= 1.2)
"""
import json
import sys


def row(arg):
    name, path, bw, load = arg.split("=")
    b1, s1, b2, s2 = (float(v) for v in bw.split("/"))
    bw_before, bw_after = b1 / s1, b2 / s2
    with open(path) as f:
        r = json.load(f)
    steps = r["steps"]
    if steps and "forward" in steps[0]:
        decode = [s for s in steps if s["forward"]]
    else:  # reports before the "forward" field: every step but the last ran a forward pass
        decode = steps[:-1]
    if not decode:
        raise SystemExit(f"{path}: no decode forward pass (needs at least 2 new tokens)")
    n = len(decode)
    secs = sum(s["seconds"] for s in decode) / n
    nbytes = sum(s["expert_bytes_read"] + s["trunk_bytes_read"] + s["table_bytes_read"] for s in decode) / n
    expert_bytes = sum(s["expert_bytes_read"] for s in decode) / n
    trunk_bytes = sum(s["trunk_bytes_read"] for s in decode) / n
    wait = sum(s["io_wait_seconds"] for s in decode) / n
    req = sum(s["expert_requests"] for s in decode)
    hits = sum(s["expert_hits"] for s in decode)
    bw = max(bw_before, bw_after)
    compute = secs - wait
    io_bound = nbytes / bw
    bound = max(io_bound, compute)
    plan = r["plan"]
    return {
        "name": name,
        "n": n,
        "pinned": f'{plan["trunk_pinned_layers"]}/{plan["trunk_layers"]}',
        "ring": plan["trunk_ring_slots"],
        "slots": plan["expert_slots"],
        "hit": hits / req if req else 0.0,
        "secs": secs,
        "mb": nbytes / 1e6,
        "expert_mb": expert_bytes / 1e6,
        "trunk_mb": trunk_bytes / 1e6,
        "bw": bw / 1e9,
        "bw_pair": f"{bw_before / 1e9:.2f} / {bw_after / 1e9:.2f}",
        "io_bound": io_bound,
        "wait": wait,
        "compute": compute,
        "bound": bound,
        "ratio": secs / bound,
        "achieved": nbytes / secs / 1e9,
        "prefill": r["prefill_seconds"],
        "rss": r["peak_rss_bytes"] / 1e9,
        "load": load,
    }


def main(argv):
    if not argv:
        raise SystemExit(__doc__)
    rows = [row(a) for a in argv]
    print("| budget | trunk pinned | ring slots | expert slots | decode tokens | hit rate | MB read / token "
          "(experts + trunk) | disk GB/s before / after (dd, O_DIRECT) | I/O bound s | compute s | io wait s | bound s | "
          "**s/token** | **ratio** | read GB/s achieved | prefill s | peak RSS GB | load |")
    print("|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for x in rows:
        print(f'| {x["name"]} | {x["pinned"]} | {x["ring"]} | {x["slots"]} | {x["n"]} | {100 * x["hit"]:.1f}% | '
              f'{x["mb"]:.0f} ({x["expert_mb"]:.0f} + {x["trunk_mb"]:.0f}) | {x["bw_pair"]} | {x["io_bound"]:.3f} | '
              f'{x["compute"]:.3f} | {x["wait"]:.3f} | {x["bound"]:.3f} | **{x["secs"]:.3f}** | '
              f'**{x["ratio"]:.2f}** | {x["achieved"]:.2f} | {x["prefill"]:.2f} | {x["rss"]:.2f} | {x["load"]} |')


if __name__ == "__main__":
    main(sys.argv[1:])
