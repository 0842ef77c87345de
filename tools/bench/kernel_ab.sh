#!/bin/bash
# A/B of kernel sets between two revisions (docs/benchmarks-log.md, "Kernel sets").
#
# On this VM the two vCPUs can differ by 25% or more at the same moment (one shares its
# physical core with another guest), and which one is slow changes over minutes. So a
# kernel change is measured against a baseline in the same run, on the same pinned CPU,
# alternating: base, current, base, current, ... and the ratio of the medians is printed.
#
# The baseline is built from REV in a git worktree (its own k3bench-kernels and plugins:
# the bench finds the plugins next to its own libk3core). The current side is the given
# build directory. Not a ctest test.
#
#   tools/bench/kernel_ab.sh --base REV [options]
#     --base REV        git revision of the baseline (required), e.g. HEAD~1 or a commit
#     --build DIR       build of the current tree with k3bench-kernels built (default: the repository's build)
#     --cpu N           pin every run to this CPU (default 0)
#     --rounds N        alternations (default 5)
#     --work DIR        worktree and its build (default: bench/kernel_ab in the build folder)
#     -- ARGS           k3bench-kernels arguments for both sides
#                       (default: --sets avx512 --kernels mxfp4 --threads 1 --min-time 0.3)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BASE=""
BUILD=$REPO/build
CPU=0
ROUNDS=5
WORK=""
ARGS=(--sets avx512 --kernels mxfp4 --threads 1 --min-time 0.3)
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --cpu) CPU=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --) shift; ARGS=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "kernel_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$BASE" ] || { echo "kernel_ab.sh: --base REV is required" >&2; exit 2; }
CURRENT="$BUILD/bin/k3bench-kernels"
[ -x "$CURRENT" ] || { echo "kernel_ab.sh: $CURRENT not found (cmake --build $BUILD --target k3bench-kernels)" >&2; exit 2; }
command -v taskset >/dev/null || { echo "kernel_ab.sh: taskset (util-linux) is needed" >&2; exit 2; }

WORK=${WORK:-$(cd "$BUILD" && pwd)/bench/kernel_ab}
# shellcheck source=baseline_build.sh
. "$HERE/baseline_build.sh"
build_baseline kernel_ab.sh "$REPO" "$BASE" "$WORK" RelWithDebInfo k3bench-kernels k3_all_plugins

LOG="$WORK/runs.tsv"
: >"$LOG"
for round in $(seq 1 "$ROUNDS"); do
  for side in base current; do
    exe=$CURRENT
    [ "$side" = base ] && exe="$BASE_BUILD/bin/k3bench-kernels"
    echo "# round $round/$ROUNDS: $side" >&2
    # Table rows: | kernel | shape | set | threads | batch | GB/s | ...
    taskset -c "$CPU" "$exe" "${ARGS[@]}" |
      awk -F'|' -v side="$side" '/^\| (bf16|mxfp4|f32) /{gsub(/ /,"",$2);gsub(/^ +| +$/,"",$3);gsub(/ /,"",$4);gsub(/ /,"",$5);gsub(/ /,"",$6);gsub(/ /,"",$7);
        print side "\t" $2 "\t" $3 "\t" $4 "\t" $5 "\t" $6 "\t" $7}' >>"$LOG"
  done
done

echo "# base $SHA vs current ($BUILD), CPU $CPU, $ROUNDS rounds; GB/s of weights, median over rounds"
python3 - "$LOG" <<'EOF'
import statistics, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    side, kernel, shape, kset, threads, batch, gbs = line.rstrip("\n").split("\t")
    runs[(kernel, shape, kset, threads, batch, side)].append(float(gbs))
keys = sorted({k[:5] for k in runs})
print("| kernel | shape | set | threads | batch | base GB/s | current GB/s | current / base |")
print("|---|---|---|---|---|---|---|---|")
for k in keys:
    b = statistics.median(runs[k + ("base",)]) if runs[k + ("base",)] else float("nan")
    c = statistics.median(runs[k + ("current",)]) if runs[k + ("current",)] else float("nan")
    print(f"| {' | '.join(k)} | {b:.2f} | {c:.2f} | {c / b:.3f} |")
EOF
