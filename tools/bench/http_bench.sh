#!/bin/bash
# Streaming over loopback HTTP against local O_DIRECT (docs/benchmarks-log.md "Streaming over HTTP").
#
# One checkpoint several times larger than the memory budget, the same budget and prompt for
# every run, the page cache dropped before each run (root: echo 3 > /proc/sys/vm/drop_caches):
#   direct        storage `direct` (O_DIRECT) on the local folder
#   http          storage `http` from nginx on 127.0.0.1, nginx reading with O_DIRECT (directio)
#   http-cached   the same, nginx reading through the page cache (dropped before the run)
#   http-cached-again  once more, the page cache not dropped: a warm server
#   tiered-cold   `tiered` (an empty tier directory) in front of the same http
#   tiered-warm   the same tier again, now full (page cache dropped: the tier is read from disk)
# For each: decode s/token over the forward passes (as stream_bench_table.py), bytes read per
# token, and from the plugins' summary lines: HTTP requests, bytes over the wire, connections
# opened, mean range size; bytes served from the tier and from http. Not a ctest test.
#
#   tools/bench/http_bench.sh [--k3host EXE] [--model DIR] [--work DIR] [--tokens N]
#                             [--budget "--set memory.expert_cache_gb=X --set memory.trunk_gb=Y"]
#                             [--http-params "connections: 8"]
# Defaults: the repository's build/bin/k3host; the demo checkpoint in bench/models/demo of
# k3host's build folder (written by make-model -g demo when missing); work folder
# bench/http_bench there (emptied at the start); 9 tokens; the budget and params above.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
MODEL=""
WORK=""
TOKENS=9
BUDGET="--set memory.expert_cache_gb=0.05 --set memory.trunk_gb=0.02"
HTTP_PARAMS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --http-params) HTTP_PARAMS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "http_bench.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$K3HOST" ] || { echo "http_bench.sh: no k3host at '$K3HOST' (--k3host)" >&2; exit 2; }
BUILD_DIR=$(cd "$(dirname "$K3HOST")/.." && pwd)
WORK=${WORK:-$BUILD_DIR/bench/http_bench}
if [ -z "$MODEL" ]; then
  MODEL=$BUILD_DIR/bench/models/demo
  [ -f "$MODEL/config.json" ] || { echo "http_bench.sh: writing the demo checkpoint to $MODEL" >&2
                                   "$K3HOST" -q make-model -g demo -o "$MODEL" >/dev/null; }
fi
[ -f "$MODEL/config.json" ] || { echo "http_bench.sh: no checkpoint at $MODEL: k3host make-model -g demo -o $MODEL" >&2; exit 2; }
rm -rf "$WORK"; mkdir -p "$WORK"
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
server_pid=""
start_nginx() {  # $1: extra launcher flags
  rm -f "$WORK/port"
  /usr/bin/python3 "$REPO/tests/support/run_nginx.py" --root "$MODEL" --prefix "$WORK/nginx" \
      --port-file "$WORK/port" --lifetime 1800 $1 &
  server_pid=$!
  for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
  URL="http://127.0.0.1:$(cat "$WORK/port")/m/"
}
stop_nginx() { kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; }
trap stop_nginx EXIT
common=(--config "$REPO/configs/default.yaml" --set threads=2 --set memory.context=256
        --set job.max_new_tokens="$TOKENS" --set job.stop_at_eos=false --set model.generate_if_missing=false
        --ids 3072,100,200,300,400,500 --verbose)
run() {  # name, model path, storage, params; then drop-cache flag
  local name=$1 path=$2 storage=$3 params=$4 dropit=$5
  [ "$dropit" = 1 ] && drop
  OMP_WAIT_POLICY=passive "$K3HOST" "${common[@]}" $BUDGET --set "model.path=$path" --set "storage.plugin=$storage" \
      --set "storage.params={$params}" --out "$WORK/$name.json" > "$WORK/$name.out" 2> "$WORK/$name.err"
  echo "$name=$WORK/$name.json=$WORK/$name.err" >> "$WORK/runs"
}
run direct "$MODEL" direct "" 1
start_nginx --directio
run http "$URL" http "$HTTP_PARAMS" 1
run tiered-cold "$URL" tiered "dir: '$WORK/tier', inner: http${HTTP_PARAMS:+, }$(echo "$HTTP_PARAMS" | sed 's/\([a-z_]*\):/inner.\1:/g')" 1
run tiered-warm "$URL" tiered "dir: '$WORK/tier', inner: http${HTTP_PARAMS:+, }$(echo "$HTTP_PARAMS" | sed 's/\([a-z_]*\):/inner.\1:/g')" 1
stop_nginx
start_nginx ""
run http-cached "$URL" http "$HTTP_PARAMS" 1
run http-cached-again "$URL" http "$HTTP_PARAMS" 0   # the server's page cache now warm
stop_nginx
echo "model $MODEL ($(du -sb "$MODEL" | cut -f1) bytes), budget: $BUDGET, $TOKENS new tokens, load $(cut -d' ' -f1 /proc/loadavg)"
/usr/bin/python3 "$HERE/http_bench_table.py" $(cat "$WORK/runs")
