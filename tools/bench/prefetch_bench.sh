#!/bin/bash
# Router-lookahead prefetch on vs off at the same budget (docs/cache.md, "Router-lookahead
# prefetch"): interleaved runs (off, on, off, on, ...) of one streamed model behind the
# `throttle` storage decorator, which holds every read back as a device of the given
# bandwidth and latency would (the page cache would otherwise make reads nearly free).
# Per run, from the JSON report's decode steps: I/O wait per generated token, s/token (the
# decode seconds over the tokens, and the median step) and the process's CPU seconds (user +
# system, load included, /usr/bin/time); then the medians over runs per side and the
# ratios on/off, the prefetch counters and the predictor's recall and precision. The generated ids must be the same in every
# run (the script checks it). Not a ctest test.
#
#   tools/bench/prefetch_bench.sh [options]
#     --build DIR        build with k3host and plugins (default: the repository's build)
#     --model PATH       checkpoint (default: the demo model at models/demo)
#     --preset NAME      preset the budgets start from (default ultra)
#     --experts-gb X     memory.expert_cache_gb (default 0.05: about a sixth of demo's experts)
#     --trunk-gb X       memory.trunk_gb (default: the preset's)
#     --mbps N           throttle bandwidth, MB/s (default 500)
#     --latency-us N     throttle latency per request, us (default 100)
#     --depth N          cache.prefetch.depth of the "on" side (default 1)
#     --mb-per-token X   cache.prefetch.mb_per_token of the "on" side (default 0: no limit)
#     --rounds N         off/on pairs (default 3)
#     --tokens N         generated tokens per run (default 32)
#     --threads N        threads (default 2)
#     --prompt-file F    prompt file (default: the preset's prompt)
#     --set KEY=VALUE    extra pipeline key for both sides (repeatable)
#     --work DIR         reports (default: bench/prefetch_bench in the build folder)
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$REPO/build
MODEL=""
PRESET=ultra
EXPERTS_GB=0.05
TRUNK_GB=""
MBPS=500
LATENCY=100
DEPTH=1
MB_PER_TOKEN=0
ROUNDS=3
TOKENS=32
THREADS=2
PROMPT_FILE=""
EXTRA=()
WORK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --experts-gb) EXPERTS_GB=$2; shift 2 ;;
    --trunk-gb) TRUNK_GB=$2; shift 2 ;;
    --mbps) MBPS=$2; shift 2 ;;
    --latency-us) LATENCY=$2; shift 2 ;;
    --depth) DEPTH=$2; shift 2 ;;
    --mb-per-token) MB_PER_TOKEN=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --prompt-file) PROMPT_FILE=$2; shift 2 ;;
    --set) EXTRA+=(--set "$2"); shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "prefetch_bench.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
K3HOST="$(cd "$BUILD" && pwd)/bin/k3host"
[ -x "$K3HOST" ] || { echo "prefetch_bench.sh: $K3HOST not found (cmake --build $BUILD)" >&2; exit 2; }
WORK=${WORK:-$(cd "$BUILD" && pwd)/bench/prefetch_bench}
mkdir -p "$WORK"
ARGS=(--config "$REPO/presets/$PRESET.yaml" --set threads="$THREADS" --set job.max_new_tokens="$TOKENS"
      --set memory.expert_cache_gb="$EXPERTS_GB"
      --set storage.plugin=throttle --set storage.params.bandwidth_mbps="$MBPS"
      --set storage.params.latency_us="$LATENCY")
[ -n "$MODEL" ] && ARGS+=(-m "$MODEL")
[ -n "$TRUNK_GB" ] && ARGS+=(--set memory.trunk_gb="$TRUNK_GB")
[ -n "$PROMPT_FILE" ] && ARGS+=(-f "$PROMPT_FILE")
ARGS+=("${EXTRA[@]+"${EXTRA[@]}"}")

LOG="$WORK/runs.tsv"
: >"$LOG"
for round in $(seq 1 "$ROUNDS"); do
  for side in off on; do
    out="$WORK/$side-$round.json"
    depth=0
    [ "$side" = on ] && depth=$DEPTH
    echo "# round $round/$ROUNDS: prefetch $side" >&2
    (cd "$REPO" && /usr/bin/time -f "%U %S" -o "$out.cpu" "$K3HOST" "${ARGS[@]}" --set cache.prefetch.depth="$depth" \
      --set cache.prefetch.mb_per_token="$MB_PER_TOKEN" --out "$out" --quiet >/dev/null)
    printf '%s\t%s\n' "$side" "$out" >>"$LOG"
  done
done

echo "# prefetch_bench.sh: ${PRESET} with memory.expert_cache_gb=$EXPERTS_GB${TRUNK_GB:+ trunk_gb=$TRUNK_GB}," \
     "throttle ${MBPS} MB/s ${LATENCY} us, depth $DEPTH, mb_per_token $MB_PER_TOKEN, $THREADS threads," \
     "$TOKENS tokens, $ROUNDS rounds; $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git -C "$REPO" rev-parse --short HEAD)"
python3 - "$LOG" <<'EOF'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
ids = None
for line in open(sys.argv[1]):
    side, path = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    steps = [s for s in r["steps"] if s.get("forward", True)]
    tokens = max(1, len(r["generated_ids"]) - 1)  # the last token needs no forward pass
    wait = sum(s.get("io_wait_seconds", 0.0) for s in steps) / tokens
    spt = statistics.median(s["seconds"] for s in steps) if steps else float("nan")
    read = sum(s.get("expert_bytes_read", 0) for s in steps) / tokens
    mean = sum(s["seconds"] for s in steps) / tokens
    cpu = sum(float(x) for x in open(path + ".cpu").read().split()[-2:])
    runs[side].append((wait, spt, read, r, mean, cpu))
    got = tuple(r["generated_ids"])
    if ids is None:
        ids = got
    elif got != ids:
        sys.exit(f"prefetch_bench.sh: {path} generated other ids than the first run")
med = lambda side, k: statistics.median(x[k] for x in runs[side])
print("| side | I/O wait s/token | s/token (decode s ÷ tokens) | s/token (median step) | CPU s per run | expert MB read/token | runs (wait/s per token) |")
print("|---|---|---|---|---|---|---|")
for side in ("off", "on"):
    print(f"| {side} | {med(side, 0):.4f} | {med(side, 4):.4f} | {med(side, 1):.4f} | {med(side, 5):.2f} | {med(side, 2) / 1e6:.2f} | "
          + ", ".join(f"{x[0]:.4f}/{x[4]:.4f}" for x in runs[side]) + " |")
ratio = lambda k: med('on', k) / max(med('off', k), 1e-12)
print(f"ratio on/off (medians over runs): I/O wait {ratio(0):.3f}, s/token {ratio(4):.3f} (median step {ratio(1):.3f}), "
      f"CPU {ratio(5):.3f}")
p = runs["on"][-1][3]["prefetch"]
o = runs["on"][-1][3]
print(f"last 'on' run: {p['experts']} experts read ahead, {p['used']} used "
      f"({100.0 * p['used'] / max(1, p['experts']):.1f}%), wasted {p['wasted_bytes'] / 1e6:.1f} MB; "
      f"prefetch hits {p['hits']} of {o['expert_requests']} requests, expert hits {o['expert_hits']}; "
      f"predictor recall {100 * p['recall']:.1f}%, precision {100 * p['precision']:.1f}%")
print("generated ids identical in every run:", ids is not None)
EOF
