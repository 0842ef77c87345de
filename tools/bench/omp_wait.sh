#!/bin/bash
# OpenMP wait policies on a busy machine (docs/benchmarks-log.md, "OpenMP wait policy").
#
# Runs one demo job (default: presets/laptop.yaml, 32 tokens, warm page cache; the demo held
# resident with memory.budgets_for=model, as when these results were taken) with each
# wait policy, on an idle machine and with BUSY CPU-bound loops pinned one per CPU (the
# "two other processes were busy" case), interleaved round by round so that the machine's
# drift spreads over every row. Per run: the wall time of the k3host process and, from the
# JSON report, the decode s/token (median of steps[].seconds) and the prefill seconds.
# Every run must generate the ids of the first run (the wait policy must never change the
# output): the script stops at the first difference. Not a ctest test.
#
#   tools/bench/omp_wait.sh [options]
#     --k3host EXE        k3host to run (default build/bin/k3host)
#     --config FILE       pipeline (default presets/laptop.yaml)
#     --tokens N          job.max_new_tokens (default 32)
#     --rounds N          rounds; each runs every policy under every load (default 3)
#     --policies "P ..."  policies, in order (default "passive active libgomp spin:10000
#                         spin:100000 k3host"):
#                           passive, active  OMP_WAIT_POLICY=passive / active
#                           libgomp          libgomp's own default (GOMP_SPINCOUNT=300000 with
#                                            OMP_WAIT_POLICY unset: the same spin count and
#                                            throttled count libgomp uses when nothing is set)
#                           spin:N           GOMP_SPINCOUNT=N, OMP_WAIT_POLICY unset
#                           k3host           nothing set: what k3host does on its own
#     --baseline P        the policy the ratios divide by, measured idle (default passive)
#     --loads "L ..."     idle and/or busy (default "idle busy")
#     --busy N            busy loops for "busy", pinned to CPUs 0..N-1 round robin
#                         (default: the number of online CPUs)
#     --timeout S         a run that takes longer is killed and recorded as > S (default 300)
#     --work DIR          reports and the raw table (default: bench/omp_wait in k3host's
#                         build folder)
#     -- ARGS             further k3host arguments (e.g. --set threads=2)
# Output: a Markdown table on stdout (medians over rounds; ratios = median wall ÷ the baseline
# policy's median wall idle, and under the same load), the load average before and after,
# the date and the commit.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K3HOST=$REPO/build/bin/k3host
CONFIG=presets/laptop.yaml
TOKENS=32
ROUNDS=3
POLICIES="passive active libgomp spin:10000 spin:100000 k3host"
BASELINE=passive
LOADS="idle busy"
BUSY=$(nproc)
TIMEOUT=300
WORK=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --k3host) K3HOST=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --baseline) BASELINE=$2; shift 2 ;;
    --loads) LOADS=$2; shift 2 ;;
    --busy) BUSY=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "omp_wait.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
K3HOST=$(cd "$(dirname "$K3HOST")" && pwd)/$(basename "$K3HOST")
[ -x "$K3HOST" ] || { echo "omp_wait.sh: $K3HOST not found (cmake --build build)" >&2; exit 2; }
WORK=${WORK:-$(dirname "$(dirname "$K3HOST")")/bench/omp_wait}
case " $POLICIES " in *" $BASELINE "*) ;; *) echo "omp_wait.sh: --baseline $BASELINE is not in --policies" >&2; exit 2 ;; esac
case " $LOADS " in *" idle "*) ;; *) echo "omp_wait.sh: the ratios need the idle load in --loads" >&2; exit 2 ;; esac
mkdir -p "$WORK"
cd "$REPO"

# env(1) arguments for a policy: the wait-policy variables are always cleared first, so the
# caller's own environment cannot leak into a row.
policy_env() {
  local clear=(-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME -u K3_OMP_WAIT_POLICY_CHOSEN)
  case "$1" in
    passive) echo "${clear[*]} OMP_WAIT_POLICY=passive" ;;
    active) echo "${clear[*]} OMP_WAIT_POLICY=active" ;;
    libgomp) echo "${clear[*]} GOMP_SPINCOUNT=300000" ;;
    spin:*) echo "${clear[*]} GOMP_SPINCOUNT=${1#spin:}" ;;
    k3host) echo "${clear[*]}" ;;
    *) echo "omp_wait.sh: unknown policy '$1'" >&2; exit 2 ;;
  esac
}
for p in $POLICIES; do policy_env "$p" >/dev/null; done

BUSY_PIDS=()
start_busy() {
  local cpus i
  cpus=$(nproc)
  for ((i = 0; i < BUSY; i++)); do
    taskset -c $((i % cpus)) sh -c 'while :; do :; done' &
    BUSY_PIDS+=($!)
  done
  sleep 1  # let the scheduler see them
}
stop_busy() {
  local p
  for p in "${BUSY_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${BUSY_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  BUSY_PIDS=()
}
trap stop_busy EXIT

run() {  # run POLICY LOAD ROUND → one line of runs.tsv
  local policy=$1 load=$2 round=$3 out t0 t1 code
  out="$WORK/$policy-$load-$round.json"
  rm -f "$out"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2046
  set +e
  env $(policy_env "$policy") timeout "$TIMEOUT" "$K3HOST" --config "$CONFIG" -m demo --set memory.budgets_for=model -q \
    --set job.max_new_tokens="$TOKENS" --out "$out" "${EXTRA[@]}" >/dev/null 2>"$WORK/$policy-$load-$round.err"
  code=$?
  set -e
  t1=$(date +%s.%N)
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$policy" "$load" "$round" "$(echo "$t1 - $t0" | bc)" "$code" "$out" >>"$WORK/runs.tsv"
  echo "# round $round $load $policy: $(echo "$t1 - $t0" | bc) s (exit $code)" >&2
}

: >"$WORK/runs.tsv"
echo "# warm-up (writes the demo checkpoint on a first run, fills the page cache)" >&2
env -u OMP_WAIT_POLICY OMP_WAIT_POLICY=passive "$K3HOST" --config "$CONFIG" -m demo --set memory.budgets_for=model -q --set job.max_new_tokens=1 \
  "${EXTRA[@]}" >/dev/null
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
START=$(date -u '+%Y-%m-%d %H:%M UTC')
for round in $(seq 1 "$ROUNDS"); do
  for load in $LOADS; do
    [ "$load" = busy ] && start_busy
    for policy in $POLICIES; do run "$policy" "$load" "$round"; done
    [ "$load" = busy ] && stop_busy
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "# $K3HOST --config $CONFIG -m demo --set memory.budgets_for=model -q --set job.max_new_tokens=$TOKENS ${EXTRA[*]}"
echo "# $START, commit $COMMIT, $(nproc) CPUs, busy loops: $BUSY, rounds: $ROUNDS, load average (1/5/15 min) before $LOAD_BEFORE, after $LOAD_AFTER"
python3 - "$WORK/runs.tsv" "$BASELINE" "$TIMEOUT" "$POLICIES" "$LOADS" <<'EOF'
import json, statistics, sys
from collections import defaultdict
tsv, baseline, timeout, policies, loads = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4].split(), sys.argv[5].split()
wall, decode, prefill, failed = defaultdict(list), defaultdict(list), defaultdict(list), defaultdict(int)
ids = None
for line in open(tsv):
    policy, load, rnd, secs, code, out = line.rstrip("\n").split("\t")
    key = (policy, load)
    if code != "0":  # 124: killed by timeout
        failed[key] += 1
        wall[key].append(timeout if code == "124" else float(secs))
        continue
    r = json.load(open(out))
    if ids is None:
        ids = r["generated_ids"]
    elif r["generated_ids"] != ids:
        sys.exit(f"omp_wait.sh: {policy} {load} round {rnd} generated other ids than the first run: {out}")
    wall[key].append(float(secs))
    steps = [s["seconds"] for s in r["steps"] if s.get("forward", True)]
    decode[key].append(statistics.median(steps))
    prefill[key].append(r["prefill_seconds"])
base = statistics.median(wall[(baseline, "idle")])
print()
print(f"| policy | load | wall s (median of {max(len(v) for v in wall.values())}) | × {baseline} idle | × {baseline}, same load "
      "| decode s/token (median) | prefill s (median) | runs failed |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for load in loads:
    for policy in policies:
        k = (policy, load)
        if not wall[k]:
            continue
        w = statistics.median(wall[k])
        d = f"{statistics.median(decode[k]):.4f}" if decode[k] else "—"
        p = f"{statistics.median(prefill[k]):.3f}" if prefill[k] else "—"
        over = ">" if failed[k] and w >= timeout else ""
        same = statistics.median(wall[(baseline, load)]) if wall[(baseline, load)] else float("nan")
        print(f"| {policy} | {load} | {over}{w:.2f} | {over}{w / base:.2f} | {over}{w / same:.2f} | {d} | {p} | {failed[k]} |")
print()
print(f"every successful run generated the same {len(ids or [])} ids")
EOF
