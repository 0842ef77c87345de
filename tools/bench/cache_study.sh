#!/bin/bash
# The whole expert-cache evaluation of docs/cache.md in one command (§6 and §8): every cache
# plugin against Belady on the three trace families, the router lookahead's recall and
# precision on the trained model's held-out text, and prefetch on vs off (I/O wait and
# s/token, interleaved, behind the throttle storage decorator). Run it on an otherwise idle
# machine: the prefetch rows measure time. Not a ctest test. About 5 minutes on 2 cores.
#
#   tools/bench/cache_study.sh [--build DIR] [--work DIR] [--rounds N]
#     --build DIR   build with k3host and the plugins (default: the repository's build)
#     --work DIR    traces, reports and tables (default: bench/cache_study in the build folder)
#     --rounds N    off/on pairs per prefetch row (default 4)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build="$root/build"
work=""
rounds=4
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build=$(cd "$2" && pwd); shift 2 ;;
    --work) work="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "cache_study.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
k3host="$build/bin/k3host"
if [ ! -x "$k3host" ]; then
  echo "cache_study.sh: no k3host at $k3host (build first, or give --build DIR)" >&2
  exit 2
fi
work=${work:-$build/bench/cache_study}
mkdir -p "$work"
echo "# cache_study.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$root" rev-parse --short HEAD)"

echo "## 1. Every policy against Belady (docs/cache.md, \"The evaluation\")"
python3 "$root/tools/bench/cache_eval.py" "$k3host" "$work/eval"

echo "## 2. Router lookahead: recall and precision on the trained model's held-out text"
head -c 7000 "$root/data/text/heldout.txt" > "$work/heldout-7000.txt"
echo "| depth | recall | precision | experts read ahead | used | prefetch hits | hits | expert MB read |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for depth in 0 1 2; do
  "$k3host" --config "$root/presets/laptop.yaml" -m "$root/data/models/fortune" -f "$work/heldout-7000.txt" -n 1 -q \
    --set job.prefill_chunk=1 --set memory.expert_cache_gb=0.0005 --set cache.prefetch.depth=$depth \
    --out "$work/lookahead-$depth.json" > /dev/null
  python3 - "$work/lookahead-$depth.json" "$depth" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
p = r.get("prefetch") or {}
def pct(x):  # no lookahead at depth 0: nothing predicted
    return f"{100 * x:.1f} %" if isinstance(x, (int, float)) and p.get("depth") else "-"
print(f"| {sys.argv[2]} | {pct(p.get('recall'))} | {pct(p.get('precision'))} | {p.get('experts', 0):,} | "
      f"{p.get('used', 0):,} | {p.get('hits', 0):,} | {r['expert_hits']:,} | {r['bytes_read']['experts'] / 1e6:.1f} |")
EOF
done

echo "## 3. Prefetch on vs off (docs/cache.md, \"Measured: I/O wait and s/token, on vs off\")"
[ -d "$root/models/demo" ] || "$k3host" make-model -g demo -o "$root/models/demo" > /dev/null
bench() { "$root/tools/bench/prefetch_bench.sh" --build "$build" --rounds "$rounds" --work "$work/prefetch" "$@" 2>/dev/null | grep -v '^# round'; }
for threads in 1 2; do
  bench --model "$root/models/demo" --tokens 32 --mbps 1000 --mb-per-token 0 --threads $threads
done
fortune=(--model "$root/data/models/fortune" --preset laptop --experts-gb 0.0005 --tokens 48 --mbps 100 --latency-us 100)
bench "${fortune[@]}" --threads 1
bench "${fortune[@]}" --threads 1 --depth 2
bench "${fortune[@]}" --threads 2
