#!/usr/bin/env python3
"""The table of tools/bench/http_bench.sh. Arguments: "name=report.json=stderr.log" per run.

Per decode forward pass (the report's steps with "forward": true): s/token and bytes read.
From the plugins' summary lines in the run's stderr (whole run: load, prefill and decode):
[storage/http] ranges, requests, bytes over the wire, connections opened; mean range =
bytes / requests; [storage/tiered] bytes from the tier and from the inner backend.
"""
import json
import re
import sys

rows = []
for arg in sys.argv[1:]:
    name, report, log = arg.split("=")
    r = json.load(open(report))
    decode = [s for s in r["steps"] if s.get("forward", True)]
    n = len(decode)
    secs = sum(s["seconds"] for s in decode) / n
    nbytes = sum(s["expert_bytes_read"] + s["trunk_bytes_read"] + s["table_bytes_read"] for s in decode) / n
    err = open(log, errors="replace").read()
    h = re.search(r"\[storage/http\] info: (\d+) ranges in (\d+) requests \((\d+) retries\), (\d+) bytes, (\d+) connections", err)
    t = re.search(r"\[storage/tiered\] info: (\d+) bytes from the tier, (\d+) from the inner", err)
    tokens = len(r["generated_ids"])
    rows.append((name, secs, nbytes, h, t, tokens, r["generated_ids"]))

base = rows[0][1]
ids0 = rows[0][6]
print("| run | s/token | × direct | MB read/token | HTTP requests (per generated token) | MB over the wire | connections | mean range | tier / http MB | ids = direct |")
print("|---|---|---|---|---|---|---|---|---|---|")
for name, secs, nbytes, h, t, tokens, ids in rows:
    if h:
        req, wire, conns = int(h.group(2)), int(h.group(4)), int(h.group(5))
        http = f"{req} ({req / tokens:.0f})", f"{wire / 1e6:.1f}", str(conns), f"{wire / max(req, 1) / 1e3:.0f} kB"
    else:
        http = ("—", "—", "—", "—")
    tier = f"{int(t.group(1)) / 1e6:.1f} / {int(t.group(2)) / 1e6:.1f}" if t else "—"
    print(f"| {name} | {secs:.3f} | {secs / base:.2f} | {nbytes / 1e6:.1f} | {' | '.join(http)} | {tier} | {'yes' if ids == ids0 else 'NO'} |")
