#!/bin/sh
# Throughput of the cache-policy simulator (not a ctest test): generates a K3-shaped trace
# of about 8 million requests (92 layers x top-16, 5,440 tokens; zipf 0.8, reuse 0.4) and
# replays it through every cache plugin at 1x, 2x and 4x one token's working set. The
# Mreq/s columns of the table are requests / time of the replay loop (host bookkeeping, the
# plugin calls and, for belady, set_future's next-use index included), by wall clock and by
# the replaying thread's CPU time (the one to quote on a shared machine).
#
#   tools/bench/cache_sim_bench.sh [K3HOST] [WORKDIR]
#     defaults: the repository's build/bin/k3host; bench/cache_sim_bench in its build folder
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -le 2 ] || { echo "usage: tools/bench/cache_sim_bench.sh [K3HOST] [WORKDIR]" >&2; exit 2; }
K3HOST=${1:-$(cd "$(dirname "$0")/../.." && pwd)/build/bin/k3host}
[ -x "$K3HOST" ] || { echo "cache_sim_bench.sh: no k3host at '$K3HOST'" >&2; exit 2; }
WORK=${2:-$(cd "$(dirname "$K3HOST")/.." && pwd)/bench/cache_sim_bench}
mkdir -p "$WORK"
TRACE="$WORK/k3-bench.k3trace"
"$K3HOST" sim --generate-trace "$TRACE" --layers 92 --experts 896 --top-k 16 --tokens 5440 \
  --zipf 0.8 --reuse 0.4 --seed 11
"$K3HOST" sim "$TRACE" --capacity 1x,2x,4x --json "$WORK/k3-bench.json"
rm -f "$TRACE"
