#!/bin/bash
# The trunk codec on full-size K3 layers (docs/benchmarks-log.md, "The trunk codec on
# full-size K3 layers").
#
# A whole coded pack of K3 (~75 GB) does not fit most disks, so this packs a few layers
# (pack-trunk --layers A-B) of the headers-only K3 checkpoint (make-model --geometry k3
# --headers-only, read through the `synthetic` storage decorator as fullscale_bench.sh does:
# valid pseudo-random weights of make-model's value rules), raw and with each codec, then
# runs k3bench-packed-layers on them through `synthetic` over `direct` (O_DIRECT: every read
# is the disk's). It prints, per layer: raw and coded bytes, the disk's GB/s (plain reads of
# the raw run), the seconds to read the layer raw and coded as a run's trunk ring does (every
# byte checked against trunk.json; the checks' seconds and share beside), and the decode
# GB/s of one core on the same layers; then the whole trunk per token as the measured
# per-layer figures times the model's count of each layer kind (dense, MoE with KDA, MoE
# with MLA). With --runs, k3host also runs the `laptop` preset over the same storage with
# each partial pack (a prefill and one decode pass each), so the report's verify_seconds and
# the decode s/token come from real runs and their ids can be compared.
# The packs are deleted at the end unless --keep (about 7 GB raw and 4.5 GB per codec for
# the default layers 0-4).
#
#   tools/bench/fullscale_codec.sh [--k3host EXE] [--bench EXE] [--work DIR] [--layers A-B]
#                                  [--codecs LIST] [--repeats N] [--coded-piece-mib N] [--runs] [--keep]
# Defaults: the repository's build/bin/k3host and build/bin/k3bench-packed-layers, WORK =
# bench/fullscale_codec in k3host's build folder, layers 0-4 (the dense layer 0, MoE layers
# with KDA 1, 2, 4 and with MLA 3: every kind), codecs bf16-huff,bf16-zstd, 3 repeats.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
BENCH=""
WORK=""
LAYERS=0-4
CODECS=bf16-huff,bf16-zstd
REPEATS=3
RUNS=0
KEEP=0
PIECE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --bench) BENCH=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --codecs) CODECS=$2; shift 2 ;;
    --repeats) REPEATS=$2; shift 2 ;;
    --coded-piece-mib) PIECE=$2; shift 2 ;;
    --runs) RUNS=1; shift ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fullscale_codec.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$K3HOST" ] || { echo "fullscale_codec.sh: no k3host at '$K3HOST' (--k3host)" >&2; exit 2; }
BENCH=${BENCH:-$(dirname "$K3HOST")/k3bench-packed-layers}
[ -x "$BENCH" ] || { echo "fullscale_codec.sh: no k3bench-packed-layers at '$BENCH' (--bench; cmake --build build --target k3bench-packed-layers)" >&2; exit 2; }
WORK=${WORK:-$(cd "$(dirname "$K3HOST")/.." && pwd)/bench/fullscale_codec}
mkdir -p "$WORK"
MODEL=$WORK/k3-headers
stamp() { date -u '+%H:%M:%S'; }

if [ ! -f "$MODEL/config.json" ] || ! grep -q '"headers_only": true' "$MODEL/config.json"; then
  echo "[$(stamp)] writing the headers-only K3 checkpoint to $MODEL"
  "$K3HOST" -q make-model --geometry k3 --headers-only --force --out "$MODEL" >/dev/null
fi
cleanup() { [ "$KEEP" = 1 ] || rm -rf "$WORK"/pack-*; }
trap cleanup EXIT

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'); source tree at commit $(git -C "$REPO" log -1 --format=%h)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "disk free under $WORK: $(df -h --output=avail "$WORK" | tail -1 | tr -d ' ')"
} | tee "$WORK/machine.txt"

pack() {  # name, pack-trunk options...
  local name=$1; shift
  local t0=$SECONDS
  "$K3HOST" -q pack-trunk --force --storage synthetic --layers "$LAYERS" "$@" "$MODEL" "$WORK/pack-$name" > "$WORK/pack-$name.log"
  echo "[$(stamp)] pack-$name ($*): $(du -sh "$WORK/pack-$name" | cut -f1) in $(( SECONDS - t0 )) s"
}
pack none
IFS=, read -r -a codecs <<< "$CODECS"
for codec in "${codecs[@]}"; do pack "$codec" --codec "$codec"; done

for codec in "${codecs[@]}"; do
  echo
  echo "[$(stamp)] k3bench-packed-layers, raw against $codec, storage synthetic over direct"
  "$BENCH" --model "$MODEL" --raw "$WORK/pack-none" --coded "$WORK/pack-$codec" --storage synthetic \
    --param inner=direct --repeats "$REPEATS" --coded-piece-mib "$PIECE" | tee "$WORK/layers-$codec.md"
done

if [ "$RUNS" = 1 ]; then
  BOS=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bos_token_id"])' "$MODEL/config.json")
  for name in none "${codecs[@]}"; do
    echo
    echo "[$(stamp)] k3host, laptop, synthetic over direct, model.packed_trunk=pack-$name"
    "$K3HOST" --config "$REPO/presets/laptop.yaml" -m "$MODEL" --set model.geometry=k3 \
      --set model.generate_if_missing=false --set job.stop_at_eos=false --set job.max_new_tokens=2 --ids "$BOS" \
      --set storage.plugin=synthetic --set storage.params.inner=direct \
      --set "model.packed_trunk=$WORK/pack-$name" --out "$WORK/run-$name.json" > "$WORK/run-$name.log" 2>&1
  done
  python3 - "$WORK" none "${codecs[@]}" <<'EOF'
import json, sys
work, names = sys.argv[1], sys.argv[2:]
print("\n| pack | ids | prefill s | decode s/token | trunk GB per decode token | verify s (whole run) | verify share of prefill + decode |")
print("|---|---|---:|---:|---:|---:|---:|")
for n in names:
    r = json.load(open(f"{work}/run-{n}.json"))
    dec = [s for s in r["steps"] if s.get("forward")]
    spt = sum(s["seconds"] for s in dec) / len(dec)
    trunk = sum(s["trunk_bytes_read"] for s in dec) / len(dec)
    busy = r["prefill_seconds"] + sum(s["seconds"] for s in r["steps"])
    print(f"| {n} | {r['generated_ids']} | {r['prefill_seconds']:.1f} | {spt:.1f} | {trunk / 1e9:.2f} | "
          f"{r['verify_seconds']:.2f} | {100 * r['verify_seconds'] / busy:.2f}% |")
EOF
fi
