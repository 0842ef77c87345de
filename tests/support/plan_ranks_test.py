#!/usr/bin/python3
"""`k3host plan --ranks N` (docs/cluster.md, "Full K3 on several machines"), on the demo
geometry: the ranks' ranges cover every layer once (auto and explicit), a per-rank override
changes only its rank, the experts and the bytes each rank sends follow from the geometry
file and the wire format docs/cluster.md describes (computed here, not read from k3host),
the text form has a row per rank, and a rank that does not fit is exit 3 naming it.

  plan_ranks_test.py K3HOST SOURCE_DIR
"""
import json
import math
import re
import subprocess
import sys

EXE, SRC = sys.argv[1], sys.argv[2]
BASE = ["plan", "--config", f"{SRC}/presets/laptop.yaml", "--set", "model.geometry=demo",
        "--set", "memory.budgets_for=model", "--set", "memory.trunk_gb=0.0001",
        "--set", "memory.expert_cache_gb=0.0001"]


def fail(what, run=None):
    extra = f"\n--- exit {run.returncode}\n--- stdout:\n{run.stdout}\n--- stderr:\n{run.stderr}" if run else ""
    sys.exit(f"plan --ranks: {what}{extra}")


def plan(*args, code=0):
    room = [] if "--available-gb" in args else ["--available-gb", "8"]
    run = subprocess.run([EXE, *BASE, *room, *args], capture_output=True, text=True, cwd=SRC)
    if run.returncode != code:
        fail(f"{' '.join(args)}: exit {run.returncode}, expected {code}", run)
    return run


def geometry():
    g = {}
    for line in open(f"{SRC}/configs/models/demo.yaml"):
        m = re.match(r"\s+(\w+):\s*(\d+)\s*$", line)
        if m:
            g[m.group(1)] = int(m.group(2))
    return g


g = geometry()
L, E, B = g["num_hidden_layers"], g["hidden_size"], g["attn_res_block_size"]
moe_layers = L - g["first_k_dense_replace"]


def sent(last):
    """The wire format of docs/cluster.md: a 48-byte header, 80 bytes a sequence (its
    sampling settings among them), 4 a row, then the residual and ceil(last / block) AttnRes
    snapshots in fp32; back from the last rank, the header and the pick (4 bytes)."""
    if last == L:
        return 48 + 4
    return 48 + 80 + 4 + (1 + math.ceil(last / B)) * E * 4


def check(ranks, want_ranges, what):
    got = [(r["first_layer"], r["last_layer"]) for r in ranks]
    if want_ranges is not None and got != want_ranges:
        fail(f"{what}: ranges {got}, expected {want_ranges}")
    if got[0][0] != 0 or got[-1][1] != L or any(a[1] != b[0] for a, b in zip(got, got[1:])):
        fail(f"{what}: ranges {got} do not cover layers 0-{L - 1} once, in order")
    for r in ranks:
        if r["bytes_sent"] != sent(r["last_layer"]):
            fail(f"{what}: rank {r['rank']} sends {r['bytes_sent']} bytes, the wire format gives {sent(r['last_layer'])}")
    if sum(r["experts"] for r in ranks) != moe_layers * g["num_experts"]:
        fail(f"{what}: the ranks hold {sum(r['experts'] for r in ranks)} experts in all")


auto = json.loads(plan("--ranks", "3", "--json").stdout)["ranks"]
check(auto, None, "auto, 3 ranks")
if any(r["pinned_layers"] != 0 or r["trunk_bytes_read"] == 0 or r["expert_bytes_read"] <= 0 for r in auto):
    fail(f"tiny budgets should pin nothing and read every layer: {auto}")

explicit = json.loads(plan("--ranks", "3", "--json", "--set", "cluster.layers=0-0,1-13,14-15").stdout)["ranks"]
check(explicit, [(0, 1), (1, 14), (14, 16)], "explicit ranges")

# Rank 1 alone gets room for its whole trunk.
big = json.loads(plan("--ranks", "2", "--json", "--set", "cluster.ranks.1.memory.trunk_gb=1").stdout)["ranks"]
check(big, None, "a per-rank override")
r0, r1 = big
if r1["pinned_layers"] != r1["last_layer"] - r1["first_layer"] or r1["trunk_bytes_read"] != 0:
    fail(f"rank 1's own trunk_gb should pin all its layers: {r1}")
if r0["pinned_layers"] != 0 or r0["trunk_bytes_read"] == 0:
    fail(f"rank 0 kept the tiny budget and pins nothing: {r0}")
same = json.loads(plan("--ranks", "2", "--json").stdout)["ranks"]
if same[0] != r0:
    fail(f"rank 1's override changed rank 0's plan: {same[0]} against {r0}")

text = plan("--ranks", "2").stdout
rows = re.findall(r"^(\d+)\s+(\d+)-(\d+)\s", text, re.M)
if "per decoded token of one sequence" not in text or [r[0] for r in rows] != ["0", "1"]:
    fail("the text form has no row per rank", subprocess.CompletedProcess([], 0, text, ""))

small = plan("--ranks", "2", "--set", "cluster.ranks.1.memory.trunk_gb=1", "--available-gb", "0.05", code=3)
if not re.search(r"rank 1: the memory plan needs .* a shortfall of", small.stderr):
    fail("a rank that does not fit is not named", small)
alone = subprocess.run([EXE, *BASE, "--json"], capture_output=True, text=True, cwd=SRC)
if alone.returncode != 2 or "--json goes with --ranks" not in alone.stderr:
    fail("--json without --ranks", alone)
print("plan --ranks: ok")
