#!/bin/bash
# Streaming a packed trunk from disk, uncoded against coded (docs/benchmarks-log.md "Trunk codec").
#
# Packs MODEL's trunk three times (pack-trunk --codec none, bf16-zstd and bf16-huff, kept in WORK),
# then runs k3host on a fixed prompt with every trunk layer streamed (memory.trunk_gb tiny),
# the experts cached, and storage `direct` (O_DIRECT: every read is the disk's), alternating
# none / bf16-zstd / bf16-huff ROUNDS times so that all see the same machine (it is shared and
# noisy). Prints each run's seconds per token and trunk bytes read per token, then the medians
# and their ratios to none. The outputs (generated ids) must be identical: checked.
#
#   tools/bench/trunk_codec_ab.sh [--k3host EXE] [--model DIR] [--work DIR] [--rounds N] [--tokens N]
# Defaults: the repository's build/bin/k3host, a demo checkpoint generated into WORK,
# WORK = bench/trunk_codec_ab in k3host's build folder, 5 rounds, 8 tokens.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
MODEL=""
WORK=""
ROUNDS=5
TOKENS=8
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "usage: tools/bench/trunk_codec_ab.sh [--k3host EXE] [--model DIR] [--work DIR] [--rounds N] [--tokens N]" >&2
       exit 2 ;;
  esac
done
[ -x "$K3HOST" ] || { echo "trunk_codec_ab.sh: no k3host at '$K3HOST' (--k3host)" >&2; exit 2; }
WORK=${WORK:-$(cd "$(dirname "$K3HOST")/.." && pwd)/bench/trunk_codec_ab}
mkdir -p "$WORK"
if [ -z "$MODEL" ]; then
  MODEL=$WORK/demo
  [ -f "$MODEL/config.json" ] || "$K3HOST" -q make-model -g demo -o "$MODEL" >/dev/null
fi
CODECS="none bf16-zstd bf16-huff"
for codec in $CODECS; do
  "$K3HOST" -q pack-trunk --force --codec "$codec" "$MODEL" "$WORK/trunk-$codec" | sed "s/^/[$codec] /"
done
echo "k3host: $K3HOST (source tree at commit $(git -C "$REPO" log -1 --format=%h)); $(date -u '+%Y-%m-%d %H:%M UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)"

for round in $(seq 1 "$ROUNDS"); do
  for codec in $CODECS; do
    "$K3HOST" --config "$REPO/configs/default.yaml" --set "model.path=$MODEL" --set model.generate_if_missing=false \
      --set storage.plugin=direct --set memory.context=256 --set job.max_new_tokens="$TOKENS" \
      --set job.stop_at_eos=false --ids 3072,100,200 --set memory.trunk_gb=0.001 --set memory.expert_cache_gb=1 \
      --set "model.packed_trunk=$WORK/trunk-$codec" --out "$WORK/$codec-$round.json" >"$WORK/$codec-$round.log" 2>&1
  done
done

python3 - "$WORK" "$ROUNDS" <<'EOF'
import json, statistics, sys
work, rounds = sys.argv[1], int(sys.argv[2])
runs = {c: [json.load(open(f"{work}/{c}-{r}.json")) for r in range(1, rounds + 1)] for c in ("none", "bf16-zstd", "bf16-huff")}
ids = {tuple(j["generated_ids"]) for c in runs for j in runs[c]}
print("outputs identical:", len(ids) == 1)
med = {}
for c, js in runs.items():
    spt = [j["seconds_per_token"] for j in js]
    trunk = [st["trunk_bytes_read"] / 1e6 for j in js for st in j["steps"] if st["forward"]]
    med[c] = statistics.median(spt)
    print(f"{c:10s} s/token: " + " ".join(f"{x:.3f}" for x in spt) + f"  median {med[c]:.3f};"
          f" trunk MB read per decode step {statistics.median(trunk):.1f}")
for c in ("bf16-zstd", "bf16-huff"):
    print(f"{c} / none, median s/token: {med[c] / med['none']:.3f}")
if len(ids) != 1:
    sys.exit(1)
EOF
