#!/bin/bash
# Streaming from disk (docs/benchmarks-log.md "Streaming from disk").
#
# On a checkpoint larger than RAM (configs/models/bench-big.yaml, generated outside the
# repository), for each memory budget: drop the page cache, measure the disk's sequential
# read bandwidth with O_DIRECT (parallel dd iflag=direct over shards), drop the page cache, run
# k3host with storage `direct` (O_DIRECT: no read is served from the page cache) on a fixed
# prompt and keep its JSON report, then drop the page cache and measure the bandwidth again. stream_bench_table.py then puts each run's decode
# seconds per token beside the lower bound max(bytes read / measured bandwidth, compute time).
# Needs root (drop_caches). Not a ctest test.
#
#   tools/bench/stream_bench.sh --model DIR [options]
#     --model DIR       the checkpoint (required; 30 GB: generate it once, on the disk to
#                       measure, with k3host make-model -g configs/models/bench-big.yaml -o DIR)
#     --k3host EXE      k3host to run (default: the repository's build/bin/k3host)
#     --work DIR        reports and logs (default: bench/stream_bench in k3host's build folder)
#     --tokens N        new tokens per run (default 8; N-1 decode forward passes are measured)
#     --ids LIST        prompt token ids (default 3072,100,200,300,400,500: [BOS] and five tokens;
#                       six tokens make the prefill touch every slot of a 6 GB expert cache)
#     --bw-mib N        MiB read by each bandwidth measurement (before and after each run; default 4096)
#     --bw-streams N    parallel dd streams of that measurement (default 4)
#     --budget SPEC     a run: "name|--set a=b --set c=d" (repeatable; replaces the defaults)
#     --extra ARGS      more k3host arguments for every run (e.g. "--set storage.params.threads=4")
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
MODEL=""
WORK=""
TOKENS=8
IDS=3072,100,200,300,400,500
BW_MIB=4096
STREAMS=4
EXTRA=""
BUDGETS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --ids) IDS=$2; shift 2 ;;
    --bw-mib) BW_MIB=$2; shift 2 ;;
    --bw-streams) STREAMS=$2; shift 2 ;;
    --budget) BUDGETS+=("$2"); shift 2 ;;
    --extra) EXTRA=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "stream_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ ${#BUDGETS[@]} -eq 0 ]; then
  # Trunk budgets: 0.07 GB pins nothing (two ring slots stream every layer), 0.3 GB pins 9 of
  # the 24 layers, 1 GB pins all of them. Expert caches from 0.5 to 6 GB.
  BUDGETS=(
    "cache0.5-trunk0.07|--set memory.expert_cache_gb=0.5 --set memory.trunk_gb=0.07"
    "cache2-trunk0.07|--set memory.expert_cache_gb=2 --set memory.trunk_gb=0.07"
    "cache6-trunk0.07|--set memory.expert_cache_gb=6 --set memory.trunk_gb=0.07"
    "cache2-trunk0.3|--set memory.expert_cache_gb=2 --set memory.trunk_gb=0.3"
    "cache2-trunk1|--set memory.expert_cache_gb=2 --set memory.trunk_gb=1"
  )
fi

[ -n "$MODEL" ] || {
  echo "usage: tools/bench/stream_bench.sh --model DIR [options] (--help); DIR from: k3host make-model -g configs/models/bench-big.yaml -o DIR" >&2
  exit 2
}
[ -x "$K3HOST" ] || { echo "stream_bench.sh: no k3host at '$K3HOST' (--k3host)" >&2; exit 2; }
WORK=${WORK:-$(cd "$(dirname "$K3HOST")/.." && pwd)/bench/stream_bench}
[ -f "$MODEL/config.json" ] || {
  echo "stream_bench.sh: no checkpoint in '$MODEL'; generate it with: $K3HOST make-model -g configs/models/bench-big.yaml -o $MODEL" >&2
  exit 2
}
[ -w /proc/sys/vm/drop_caches ] || { echo "stream_bench.sh: cannot drop the page cache (needs root)" >&2; exit 2; }
mkdir -p "$WORK"

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

model_bytes=$(du -b --apparent-size -c "$MODEL"/*.safetensors | tail -1 | cut -f1)
ram_bytes=$(awk '/^MemTotal:/ {printf "%.0f", $2 * 1024}' /proc/meminfo)
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "k3host: $K3HOST (source tree at commit $(git -C "$REPO" log -1 --format=%h))"
  echo "model: $MODEL, $model_bytes bytes of shards; RAM $ram_bytes bytes"
  echo "OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset}; extra k3host arguments: ${EXTRA:-none}"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$WORK/machine.txt"
if [ "$model_bytes" -le "$ram_bytes" ]; then
  echo "stream_bench.sh: warning: the checkpoint ($model_bytes B) is not larger than RAM ($ram_bytes B)" >&2
fi

shards=("$MODEL"/*.safetensors)
# Sequential O_DIRECT reads, 16 MiB blocks, $STREAMS streams at once over different shards
# (one dd stream alone does not reach the disk's bandwidth, least of all on a busy CPU).
# Prints "bytes seconds": all bytes over the wall time of the slowest stream.
disk_bandwidth() {  # tag
  local per=$(( BW_MIB / STREAMS / 16 )) t0 t1 s
  rm -f "$WORK/$1".dd*.txt
  t0=$(date +%s.%N)
  for s in $(seq 0 $(( STREAMS - 1 ))); do
    dd if="${shards[$(( (i + s) % ${#shards[@]} ))]}" of=/dev/null bs=16M count=$per iflag=direct 2> "$WORK/$1.dd$s.txt" &
  done
  wait
  t1=$(date +%s.%N)
  echo "$(cat "$WORK/$1".dd*.txt | grep copied | cut -d' ' -f1 | paste -sd+ | bc) $(echo "$t1 - $t0" | bc -l)"
}

runs=()
i=0
for spec in "${BUDGETS[@]}"; do
  name=${spec%%|*}
  sets=${spec#*|}

  # The disk's bandwidth right before and right after the run (it varies with what else
  # the machine does); the table's bound uses the higher of the two.
  drop_caches
  read -r bw_bytes bw_secs < <(disk_bandwidth "$name.before")
  i=$(( i + STREAMS ))

  drop_caches
  load=$(cut -d' ' -f1 /proc/loadavg)
  # shellcheck disable=SC2086  # $sets and $EXTRA are word lists on purpose
  "$K3HOST" --config "$REPO/configs/default.yaml" --set "model.path=$MODEL" --set model.generate_if_missing=false \
    --set storage.plugin=direct --set memory.context=256 --set job.max_new_tokens="$TOKENS" \
    --set job.stop_at_eos=false --ids "$IDS" $sets $EXTRA --out "$WORK/$name.json" \
    > "$WORK/$name.log" 2>&1 || { echo "stream_bench.sh: run '$name' failed (exit $?), see $WORK/$name.log" >&2; exit 1; }
  drop_caches
  read -r bw2_bytes bw2_secs < <(disk_bandwidth "$name.after")
  i=$(( i + STREAMS ))
  echo "$name: disk ${bw_bytes} B in ${bw_secs} s before, ${bw2_bytes} B in ${bw2_secs} s after; load ${load}; $(grep -m1 '^read:' "$WORK/$name.log")"
  runs+=("$name=$WORK/$name.json=$bw_bytes/$bw_secs/$bw2_bytes/$bw2_secs=$load")
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"

python3 "$HERE/stream_bench_table.py" "${runs[@]}" | tee "$WORK/table.md"
