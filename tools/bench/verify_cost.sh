#!/usr/bin/env bash
# What checking bytes costs (docs/benchmarks-log.md, "What checking bytes costs"): on the demo
# checkpoint with everything streaming (every trunk layer through the ring, embedding rows
# and lm_head in row chunks, the experts in a small cache), the same prompt run
#   - from the shards (no pack: nothing to check but the identity at open),
#   - from a packed trunk (pack-trunk, raw) and a coded one (--codec bf16-zstd), every byte of
#     which is checked against trunk.json as it is read,
#   - through a warm `tiered` disk tier over posix (every block served is read whole and
#     checked),
# alternated for --rounds rounds; with --base EXE (a build without the checks, e.g. the
# commit before them) the same four runs of it alternate with these, each build with packs
# and a tier of its own, and the table gives the ratio of the medians. From each run's JSON
# report: the decode s/token, the time
# spent checking (verify_seconds for the pack, storage_counters.tier_check_ns for the tier),
# its share of the run's prefill + decode time, the bytes checked, and the checkpoint
# identity's cost at open (checkpoint.seconds, checkpoint.sampled_bytes). The generated ids
# must be the same in every run (the script fails otherwise).
# --storage direct reads the shards, the packs and the tier's inner files with O_DIRECT, so
# the runs wait for the disk as a real streamed run does (the default, posix, reads what the
# page cache holds: the worst case for the checks' share, with no disk time to hide behind).
#
#   tools/bench/verify_cost.sh [--k3host EXE] [--base EXE] [--work DIR] [--rounds N] [--tokens N]
#                              [--storage posix|direct]
set -euo pipefail

K3HOST=build/bin/k3host
BASE=""
WORK=/tmp/k3-verify-cost
ROUNDS=3
TOKENS=8
STORAGE=posix
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --storage) STORAGE=$2; shift 2 ;;
    *) echo "usage: $0 [--k3host EXE] [--base EXE] [--work DIR] [--rounds N] [--tokens N] [--storage posix|direct]" >&2; exit 2 ;;
  esac
done
REPO=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$WORK"
MODEL=$WORK/demo
[ -f "$MODEL/config.json" ] || "$K3HOST" -q make-model -g demo -o "$MODEL" >/dev/null
BUILDS=(new)
[ -n "$BASE" ] && BUILDS+=(base)
exe() { if [ "$1" = base ]; then echo "$BASE"; else echo "$K3HOST"; fi; }
for b in "${BUILDS[@]}"; do
  "$(exe "$b")" -q pack-trunk --force "$MODEL" "$WORK/$b-pack-none" >/dev/null
  "$(exe "$b")" -q pack-trunk --force --codec bf16-zstd "$MODEL" "$WORK/$b-pack-zstd" >/dev/null
  rm -rf "$WORK/$b-tier"
done
echo "k3host: $K3HOST (source tree at commit $(git -C "$REPO" log -1 --format=%h)); base: ${BASE:-none}; storage: $STORAGE; $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"

run() {  # build, name, extra args...
  local b=$1 name=$2; shift 2
  "$(exe "$b")" --config "$REPO/configs/default.yaml" --set "model.path=$MODEL" --set model.generate_if_missing=false \
    --set memory.context=256 --set job.max_new_tokens="$TOKENS" --set job.stop_at_eos=false --ids 3072,100,200 \
    --set memory.trunk_gb=0.001 --set memory.expert_cache_gb=0.05 --set memory.stream_embedding=true \
    --set "storage.plugin=$STORAGE" --out "$WORK/$b-$name.json" "$@" >"$WORK/$b-$name.log" 2>&1
}
for b in "${BUILDS[@]}"; do
  run "$b" tier-fill --set storage.plugin=tiered --set "storage.params={dir: '$WORK/$b-tier', inner: $STORAGE}"  # not measured
done
for round in $(seq 1 "$ROUNDS"); do
  for b in "${BUILDS[@]}"; do
    run "$b" "shards-$round"
    run "$b" "none-$round" --set "model.packed_trunk=$WORK/$b-pack-none"
    run "$b" "zstd-$round" --set "model.packed_trunk=$WORK/$b-pack-zstd"
    run "$b" "tier-$round" --set storage.plugin=tiered --set "storage.params={dir: '$WORK/$b-tier', inner: $STORAGE}"
  done
done

python3 - "$WORK" "$ROUNDS" "${#BUILDS[@]}" <<'EOF'
import json, statistics, sys
work, rounds, builds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ids = None
load = lambda b, name: [json.load(open(f"{work}/{b}-{name}-{r}.json")) for r in range(1, rounds + 1)]
for b in ["base"] if builds > 1 else []:
    for name in ["shards", "none", "zstd", "tier"]:
        for r in load(b, name):
            if ids is None:
                ids = r["generated_ids"]
            if r["generated_ids"] != ids:
                sys.exit(f"base {name}: generated ids {r['generated_ids']} differ from {ids}")
print("| run | median s/token | base median s/token (ratio) | checking s (median) | share of prefill + decode | bytes checked per run | identity at open |")
print("|---|---:|---:|---:|---:|---:|---|")
for name in ["shards", "none", "zstd", "tier"]:
    reps = load("new", name)
    base = statistics.median(r["seconds_per_token"] for r in load("base", name)) if builds > 1 else None
    for r in reps:
        if ids is None:
            ids = r["generated_ids"]
        if r["generated_ids"] != ids:
            sys.exit(f"{name}: generated ids {r['generated_ids']} differ from {ids}")
    spt = statistics.median(r["seconds_per_token"] for r in reps)
    versus = f"{base:.3f} ({spt / base:.3f})" if base else "—"
    if name == "tier":
        check = [r["storage_counters"]["tier_check_ns"] * 1e-9 for r in reps]
        checked = statistics.median(r["storage_counters"]["tier_block_bytes_read"] for r in reps)
    else:
        check = [r["verify_seconds"] for r in reps]
        checked = statistics.median(r["bytes_read"]["trunk"] + r["bytes_read"]["embedding_head"] for r in reps) if name != "shards" else 0
    share = statistics.median(c / (r["prefill_seconds"] + sum(s["seconds"] for s in r["steps"])) for c, r in zip(check, reps))
    ident = reps[0]["checkpoint"]
    print(f"| {name} | {spt:.3f} | {versus} | {statistics.median(check):.4f} | {100 * share:.2f}% | {checked / 1e6:.1f} MB | "
          f"{ident['identity']}: {ident['sampled_bytes'] / 1e6:.2f} MB sampled from {ident['shards']} shards, "
          f"{statistics.median(r['checkpoint']['seconds'] for r in reps) * 1e3:.1f} ms |")
for name in ["none"]:  # raw: the bytes read are the bytes hashed
    reps = load("new", name)
    rate = statistics.median((r["bytes_read"]["trunk"] + r["bytes_read"]["embedding_head"]) / r["verify_seconds"]
                             for r in reps if r["verify_seconds"] > 0)
    print(f"{name}: checked at {rate / 1e9:.2f} GB/s of checking time (median over rounds)")
print(f"generated ids (every run): {ids}")
EOF
