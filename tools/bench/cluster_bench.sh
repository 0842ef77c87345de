#!/bin/bash
# A model split over 1, 2 and 4 ranks on loopback (docs/cluster.md, docs/benchmarks.md
# "A model split over ranks"): every rank has the same memory budget and its own throttled
# disk (the `throttle` storage plugin in each rank's process, as if each machine had its
# own), so more ranks hold more of the model in memory in all. Per rank count: decode
# s/token of one stream (rank 0's report), the weight bytes every rank read and the bytes
# every rank sent per generated token, and the aggregate tokens/s of --streams prompts in flight (--prompts), with the most passes
# rank 0 had in flight at once (one per rank when the stages overlap). The ids of every run
# are checked equal to the one-process run's. Not a ctest test.
#
#   tools/bench/cluster_bench.sh [options]
#     --build DIR        build with k3host and the mpi plugin (default build)
#     --model PATH       checkpoint (default demo: generated on first use by the first run)
#     --ranks "1 2 4"    rank counts
#     --tokens N         generated tokens per run (default 16)
#     --streams N        prompts in flight for the aggregate figure (default 4)
#     --trunk-gb X       memory.trunk_gb of every rank (default 0.05)
#     --experts-gb X     memory.expert_cache_gb of every rank (default 0.05)
#     --mbps X           each rank's disk, MB/s (default 200)
#     --work DIR         reports and logs (default /tmp/k3-cluster-bench)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=build MODEL=demo RANKS="1 2 4" TOKENS=16 STREAMS=4 TRUNK=0.05 EXPERTS=0.05 MBPS=200 WORK=/tmp/k3-cluster-bench
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --streams) STREAMS=$2; shift 2 ;;
    --trunk-gb) TRUNK=$2; shift 2 ;;
    --experts-gb) EXPERTS=$2; shift 2 ;;
    --mbps) MBPS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    *) echo "cluster_bench: unknown option $1" >&2; exit 2 ;;
  esac
done
cd "$REPO"
EXE=$BUILD/bin/k3host
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$WORK"
for i in $(seq 1 "$STREAMS"); do echo "Prompt number $i is"; done >"$WORK/prompts.txt"
# budgets_for=model: the budgets are these bytes (-m demo would scale them as K3's, to nothing).
common=(--config presets/laptop.yaml -m "$MODEL" -t 1 --draft-max 0 --set job.stop_at_eos=false
        --set memory.budgets_for=model --set memory.trunk_gb="$TRUNK" --set memory.expert_cache_gb="$EXPERTS"
        --set storage.plugin=throttle --set storage.params.bandwidth_mbps="$MBPS")
launch() {  # launch RANKS args...: one process, or every rank under mpirun
  local n=$1; shift
  if [ "$n" = 1 ]; then "$EXE" "${common[@]}" "$@"; else
    mpirun -np "$n" --oversubscribe "$EXE" "${common[@]}" --set cluster.transport=mpi "$@"; fi
}
printf "%-6s %-12s %-14s %-24s %-22s %-34s %s\n" ranks "s/token" "vs 1 rank" "bytes read per token" "bytes sent per token" \
  "aggregate tokens/s ($STREAMS streams)" "passes in flight"
base_spt="" base_tps="" ref_ids=""
for n in $RANKS; do
  launch "$n" -p "Life is" -n "$TOKENS" --out "$WORK/one-$n.json" >/dev/null 2>"$WORK/one-$n.log"
  read -r spt ids read0 < <(python3 - "$WORK/one-$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["seconds_per_token"], ",".join(map(str, r["generated_ids"])), r["weight_bytes_read"])
PY
)
  [ -z "$ref_ids" ] && ref_ids=$ids
  if [ "$ids" != "$ref_ids" ]; then echo "cluster_bench: $n ranks generated other ids than the first run" >&2; exit 1; fi
  sent=$( (grep -o "sent [0-9]* bytes" "$WORK/one-$n.log" || true) | awk '{s += $2} END {print s + 0}')
  # Rank 0's reads are in its report, every later rank's in its closing line.
  read_all=$( (grep -o "read [0-9]* bytes of weights" "$WORK/one-$n.log" || true) |
    awk -v r0="$read0" '{s += $2} END {print s + r0}')
  launch "$n" --prompts "$WORK/prompts.txt" -n "$TOKENS" --parallel "$STREAMS" --out "$WORK/many-$n.json" \
    >/dev/null 2>"$WORK/many-$n.log"
  read -r tps flying < <(python3 - "$WORK/many-$n.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
# A build before passes overlapped has no most_in_flight: one at a time.
print("%.2f" % r["tokens_per_second"], r["steps"].get("most_in_flight", 1))
PY
)
  [ -z "$base_spt" ] && base_spt=$spt base_tps=$tps
  printf "%-6s %-12.4f %-14s %-24s %-22s %-34s %s\n" "$n" "$spt" "$(awk -v a="$spt" -v b="$base_spt" 'BEGIN {printf "%.2fx", a / b}')" \
    "$(awk -v s="$read_all" -v t="$TOKENS" 'BEGIN {printf "%.1f MB", s / t / 1e6}')" \
    "$(awk -v s="$sent" -v t="$TOKENS" 'BEGIN {printf "%.0f B", s / t}')" \
    "$tps ($(awk -v a="$tps" -v b="$base_tps" 'BEGIN {printf "%.2fx", a / b}'))" "$flying"
done
