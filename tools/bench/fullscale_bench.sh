#!/bin/bash
# Full K3 geometry (docs/benchmarks-log.md "Full K3 geometry").
#
# Runs the released K3 shape — 93 layers, 896 experts, 2.78 T parameters — on this machine
# without its 1.56 TB of weights: `make-model --geometry k3 --headers-only` writes the real
# layout over sparse files (~75 MB of disk), and the `synthetic` storage decorator fills
# every tensor read with valid pseudo-random values, so routing spreads over the experts as
# with real weights. Each run generates a few tokens at a memory preset; from its JSON report
# fullscale_table.py prints, over the decode forward passes: peak RSS beside the plan's
# total, bytes read per token (trunk / experts / tables), compute seconds per token, and
# the s/token predicted at 2, 4 and 7 GB/s of disk bandwidth; and from each run's trace,
# how many different expert sets the tokens chose per layer. One extra run puts the
# `throttle` decorator in front at a set bandwidth and compares the measured s/token with
# the prediction for that bandwidth.
#
# Levers: --lever "name|--set key=value ..." runs every preset again with those settings
# and reports its bytes per token beside the baseline (the first row of each preset).
#
#   tools/bench/fullscale_bench.sh [options]
#     --k3host EXE      k3host to run (default: the repository's build/bin/k3host; its plugins
#                       next to it)
#     --work DIR        the headers-only checkpoint (made when missing, ~75 MB of disk),
#                       reports, logs and table.md (default: bench/fullscale_bench in
#                       k3host's build folder)
#     --geometry NAME   the geometry (default k3; tiny or demo try the script in seconds)
#     --presets LIST    memory presets, comma-separated (default ultra,laptop)
#     --tokens N        new tokens per run (default 3: the prefill's forward pass and 2 decode
#                       forward passes; the last token is sampled from the previous logits)
#     --ids LIST        prompt token ids (default: [BOS] alone, a one-token prefill; 163584 for K3)
#     --lever SPEC      "name|--set a=b --set c=d" (repeatable): every preset again with these
#     --throttle-mbps N the throttle check's bandwidth in MB/s (default 500: well below what the
#                       sparse files and the fill deliver here, so the run is I/O-bound; 0 = no check)
#     --throttle-preset NAME  the preset of the throttle check (default laptop)
#     --throttle-tokens N     new tokens of the throttle check (default 2: one decode forward pass)
#     --cpus LIST       taskset CPU list for every run (default: all CPUs of this machine)
#     --extra ARGS      more k3host arguments for every run
#     --dry-run         print the commands, run nothing
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
WORK=""
GEOMETRY=k3
PRESETS=ultra,laptop
TOKENS=3
IDS=
LEVERS=()
THROTTLE_MBPS=500
THROTTLE_TOKENS=2
THROTTLE_PRESET=laptop
CPUS=0-$(( $(nproc) - 1 ))
EXTRA=""
DRY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --geometry) GEOMETRY=$2; shift 2 ;;
    --presets) PRESETS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --ids) IDS=$2; shift 2 ;;
    --lever) LEVERS+=("$2"); shift 2 ;;
    --throttle-mbps) THROTTLE_MBPS=$2; shift 2 ;;
    --throttle-preset) THROTTLE_PRESET=$2; shift 2 ;;
    --throttle-tokens) THROTTLE_TOKENS=$2; shift 2 ;;
    --cpus) CPUS=$2; shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "fullscale_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$K3HOST" ] || { echo "fullscale_bench.sh: no k3host at '$K3HOST' (--k3host)" >&2; exit 2; }
[ "$TOKENS" -ge 2 ] 2>/dev/null || { echo "fullscale_bench.sh: --tokens must be at least 2 (one decode forward pass)" >&2; exit 2; }
K3HOST=$(cd "$(dirname "$K3HOST")" && pwd)/$(basename "$K3HOST")
WORK=${WORK:-$(dirname "$(dirname "$K3HOST")")/bench/fullscale_bench}
mkdir -p "$WORK"
MODEL=$WORK/$GEOMETRY-headers

stamp() { date -u '+%H:%M:%S'; }

# The checkpoint: reused when its config says it is a headers-only layout.
if [ ! -f "$MODEL/config.json" ] || ! grep -q '"headers_only": true' "$MODEL/config.json"; then
  echo "[$(stamp)] writing the headers-only $GEOMETRY checkpoint to $MODEL"
  [ "$DRY" = 1 ] || "$K3HOST" make-model --geometry "$GEOMETRY" --headers-only --force --out "$MODEL"
fi

if [ -z "$IDS" ]; then  # [BOS] of the geometry (the released config's bos_token_id)
  IDS=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["bos_token_id"])' "$MODEL/config.json" 2>/dev/null || echo 163584)
fi

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "k3host: $K3HOST ($("$K3HOST" --version 2>/dev/null | head -1)); source tree at commit $(git -C "$REPO" log -1 --format=%h)"
  echo "model: $MODEL (make-model --geometry $GEOMETRY --headers-only, read through storage 'synthetic' over 'posix')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; runs pinned with taskset -c $CPUS"
  echo "RAM: $(awk '/^MemTotal:/ {printf "%.1f GB", $2 * 1024 / 1e9}' /proc/meminfo); tokens per run: $TOKENS; prompt ids: $IDS"
  echo "extra k3host arguments: ${EXTRA:-none}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$WORK/machine.txt"

# One run: name, preset, storage settings, more settings, new tokens. The report goes to
# $WORK/name.json, the routing trace to $WORK/name.trace (how spread the routing is), the
# console output to $WORK/name.log.
runs=()
run() {
  local name=$1 preset=$2 storage=$3 sets=$4 tokens=$5
  local cmd=(taskset -c "$CPUS" "$K3HOST" --config "$REPO/presets/$preset.yaml" -m "$MODEL"
             --set model.geometry="$GEOMETRY" --set model.generate_if_missing=false
             --set job.stop_at_eos=false --set job.max_new_tokens="$tokens" --ids "$IDS")
  # shellcheck disable=SC2206  # word lists on purpose
  cmd+=($storage $sets $EXTRA --set trace.out="$WORK/$name.trace" --out "$WORK/$name.json")
  echo "[$(stamp)] $name: ${cmd[*]}"
  if [ "$DRY" = 1 ]; then return; fi
  local t0=$SECONDS
  "${cmd[@]}" > "$WORK/$name.log" 2>&1 &
  local pid=$!
  # Progress: the run's last line (the tokens as they come) every 30 s.
  while kill -0 "$pid" 2>/dev/null; do
    sleep 30
    kill -0 "$pid" 2>/dev/null && echo "[$(stamp)]   $name: $(( SECONDS - t0 )) s, $(tail -c 200 "$WORK/$name.log" | tr '\n' ' ' | tail -c 100)"
  done
  if ! wait "$pid"; then
    echo "fullscale_bench.sh: run '$name' failed, see $WORK/$name.log" >&2
    exit 1
  fi
  echo "[$(stamp)] $name done in $(( SECONDS - t0 )) s; load $(cut -d' ' -f1 /proc/loadavg)"
  runs+=("$name=$WORK/$name.json=$preset")
}

SYNTHETIC="--set storage.plugin=synthetic --set storage.params.inner=posix"
IFS=, read -r -a preset_list <<< "$PRESETS"
for preset in "${preset_list[@]}"; do
  run "$preset-baseline" "$preset" "$SYNTHETIC" "" "$TOKENS"
  for spec in "${LEVERS[@]}"; do
    run "$preset-${spec%%|*}" "$preset" "$SYNTHETIC" "${spec#*|}" "$TOKENS"
  done
done
if [ "$THROTTLE_MBPS" != 0 ]; then
  # throttle in front of synthetic: the emulated device's waits cover the fill's time.
  run "$THROTTLE_PRESET-throttle$THROTTLE_MBPS" "$THROTTLE_PRESET" \
    "--set storage.plugin=throttle --set storage.params.inner=synthetic --set storage.params.bandwidth_mbps=$THROTTLE_MBPS" "" "$THROTTLE_TOKENS"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"
[ "$DRY" = 1 ] && exit 0

python3 "$HERE/fullscale_table.py" --throttle-mbps "$THROTTLE_MBPS" "${runs[@]}" | tee "$WORK/table.md"
