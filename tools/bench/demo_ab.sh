#!/bin/bash
# A/B of the whole model's per-token time between two revisions (docs/benchmarks-log.md,
# "No regression from the restructuring").
#
# The machine is noisy (two unequal vCPUs, other guests), so a change is measured against
# a baseline built from REV in the same run, alternating base, current, base, current, ...
# on the `demo` checkpoint, resident (presets/max.yaml) and streamed (presets/ultra.yaml).
# Both sides read the checkpoint the baseline's `make-model demo` writes (the current
# engine must read what an older writer wrote), so the generated ids must be identical:
# the script checks it. Per run: the median of steps[].seconds of the JSON report (decode s/token)
# and the prefill seconds. Not a ctest test.
#
#   tools/bench/demo_ab.sh --base REV [options]
#     --base REV        git revision of the baseline (required), e.g. HEAD~1 or a commit
#     --build DIR       build of the current tree with k3host and plugins (default: the repository's build)
#     --rounds N        alternations per preset (default 3)
#     --tokens N        generated tokens per run (default 32)
#     --threads N       threads (default 2)
#     --presets "A B"   preset names (default "max ultra")
#     --work DIR        worktree, builds and checkpoints (default: bench/demo_ab in the build folder)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BASE=""
BUILD=$REPO/build
ROUNDS=3
TOKENS=32
THREADS=2
PRESETS="max ultra"
WORK=""
while [ $# -gt 0 ]; do
  case "$1" in
    --base) BASE=$2; shift 2 ;;
    --build) BUILD=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --presets) PRESETS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "demo_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$BASE" ] || { echo "demo_ab.sh: --base REV is required" >&2; exit 2; }
CURRENT="$(cd "$BUILD" && pwd)/bin/k3host"
[ -x "$CURRENT" ] || { echo "demo_ab.sh: $CURRENT not found (cmake --build $BUILD)" >&2; exit 2; }
WORK=${WORK:-$(cd "$BUILD" && pwd)/bench/demo_ab}
# shellcheck source=baseline_build.sh
. "$HERE/baseline_build.sh"
build_baseline demo_ab.sh "$REPO" "$BASE" "$WORK" RelWithDebInfo k3host k3_all_plugins

exe_of() { if [ "$1" = base ]; then echo "$BASE_BUILD/bin/k3host"; else echo "$CURRENT"; fi; }
tree_of() { if [ "$1" = base ]; then echo "$TREE"; else echo "$REPO"; fi; }
if [ ! -f "$WORK/demo-$SHA/config.json" ]; then
  echo "# base: make-model demo -> $WORK/demo-$SHA"
  (cd "$TREE" && "$(exe_of base)" make-model -g demo -o "$WORK/demo-$SHA" --force >/dev/null)
fi

LOG="$WORK/runs.tsv"
: >"$LOG"
for preset in $PRESETS; do
  for round in $(seq 1 "$ROUNDS"); do
    for side in base current; do
      out="$WORK/$side-$preset-$round.json"
      echo "# $preset round $round/$ROUNDS: $side" >&2
      (cd "$(tree_of $side)" &&
        "$(exe_of $side)" --config "presets/$preset.yaml" --set model.path="$WORK/demo-$SHA" \
          --set model.generate_if_missing=false --set threads="$THREADS" \
          --set job.max_new_tokens="$TOKENS" --out "$out" --quiet >/dev/null)
      printf '%s\t%s\t%s\n' "$preset" "$side" "$out" >>"$LOG"
    done
  done
done

echo "# base $SHA vs current ($BUILD); $THREADS threads, $TOKENS tokens, $ROUNDS rounds per preset; $(date -u '+%Y-%m-%d %H:%M UTC')"
python3 - "$LOG" <<'EOF'
import json, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
ids = {}
for line in open(sys.argv[1]):
    preset, side, path = line.rstrip("\n").split("\t")
    r = json.load(open(path))
    steps = [s["seconds"] for s in r["steps"]]
    runs[(preset, side)].append((statistics.median(steps), r.get("prefill_seconds", float("nan"))))
    got = tuple(r["generated_ids"])
    if ids.setdefault(preset, got) != got:
        sys.exit(f"demo_ab.sh: {preset}: {side} generated other ids than the first run: {got} vs {ids[preset]}")
print("| preset | base s/token (median of runs) | current s/token | current / base | base prefill s | current prefill s |")
print("|---|---|---|---|---|---|")
for preset in dict.fromkeys(p for p, _ in runs):
    b = runs[(preset, "base")]
    c = runs[(preset, "current")]
    bm = statistics.median(x[0] for x in b)
    cm = statistics.median(x[0] for x in c)
    bp = statistics.median(x[1] for x in b)
    cp = statistics.median(x[1] for x in c)
    print(f"| {preset} | {bm:.4f} | {cm:.4f} | {cm / bm:.3f} | {bp:.3f} | {cp:.3f} |")
print("generated ids identical across sides and runs:", ", ".join(ids))
EOF
