#!/bin/bash
# A/B of batched runs (`k3host --prompts FILE --parallel N`) between two k3host builds
# (docs/benchmarks-log.md, "Small work on one thread").
#
# The machine is noisy, so the baseline runs in the same loop, alternating base, current,
# base, current, ... for every parallel count and wait policy. Both sides must write the
# same results file (byte for byte): the script stops otherwise. Per run it takes
# tokens_per_second from the JSON report (every prompt's generated tokens over the batch's
# wall time); it prints the medians and current ÷ base. Not a ctest test.
#
#   tools/bench/prompts_ab.sh --base-exe EXE [options] [-- k3host args]
#     --base-exe EXE     the baseline's k3host (required), e.g. from a worktree of an older commit
#     --exe EXE          the current k3host (default: the repository's build/bin/k3host)
#     --config FILE      pipeline (default configs/default.yaml: the shipped model, resident)
#     --prompts FILE     one prompt per line (default: 8 prompts the script writes)
#     --parallel "1 8"   parallel counts (default "1 8")
#     --policies "..."   OpenMP wait policies: passive, active, spin:N (GOMP_SPINCOUNT=N)
#                        or k3host (nothing set) (default "k3host")
#     --tokens N         tokens per prompt (default 64)
#     --threads N        threads (default 2)
#     --rounds N         alternations (default 3)
#     --work DIR         reports and results (default /tmp/k3-prompts-ab)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BASE_EXE=""
EXE=$REPO/build/bin/k3host
CONFIG=$REPO/configs/default.yaml
PROMPTS=""
PARALLEL="1 8"
POLICIES="k3host"
TOKENS=64
THREADS=2
ROUNDS=3
WORK=/tmp/k3-prompts-ab
while [ $# -gt 0 ]; do
  case "$1" in
    --base-exe) BASE_EXE=$2; shift 2 ;;
    --exe) EXE=$2; shift 2 ;;
    --config) CONFIG=$2; shift 2 ;;
    --prompts) PROMPTS=$2; shift 2 ;;
    --parallel) PARALLEL=$2; shift 2 ;;
    --policies) POLICIES=$2; shift 2 ;;
    --tokens) TOKENS=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "prompts_ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
EXTRA=("$@")  # for k3host, after --
[ -n "$BASE_EXE" ] || { echo "prompts_ab.sh: --base-exe EXE is required" >&2; exit 2; }
for e in "$BASE_EXE" "$EXE"; do
  [ -x "$e" ] || { echo "prompts_ab.sh: $e is not an executable" >&2; exit 2; }
done
mkdir -p "$WORK"
if [ -z "$PROMPTS" ]; then
  PROMPTS=$WORK/prompts.txt
  for i in 1 2 3 4 5 6 7 8; do echo "The story number $i begins"; done > "$PROMPTS"
fi
[ -r "$PROMPTS" ] || { echo "prompts_ab.sh: cannot read $PROMPTS" >&2; exit 2; }

run() {  # side exe policy parallel round
  local side=$1 exe=$2 pol=$3 par=$4 round=$5
  local tag=$side-$pol-$par-$round
  local -a envs=()
  case "$pol" in
    k3host) ;;
    spin:*) envs=(GOMP_SPINCOUNT="${pol#spin:}") ;;
    *) envs=(OMP_WAIT_POLICY="$pol") ;;
  esac
  if ! env "${envs[@]}" "$exe" --config "$CONFIG" --prompts "$PROMPTS" --parallel "$par" -n "$TOKENS" \
      -t "$THREADS" --results "$WORK/$tag.jsonl" --out "$WORK/$tag.json" "${EXTRA[@]}" > /dev/null 2> "$WORK/$tag.err"; then
    echo "prompts_ab.sh: $side failed ($pol, --parallel $par); see $WORK/$tag.err" >&2
    exit 1
  fi
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tokens_per_second"])' "$WORK/$tag.json"
}

printf 'policy\tparallel\tside\ttokens_per_second\n' > "$WORK/runs.tsv"
for round in $(seq "$ROUNDS"); do
  for pol in $POLICIES; do
    for par in $PARALLEL; do
      b=$(run base "$BASE_EXE" "$pol" "$par" "$round")
      c=$(run current "$EXE" "$pol" "$par" "$round")
      if ! cmp -s "$WORK/base-$pol-$par-$round.jsonl" "$WORK/current-$pol-$par-$round.jsonl"; then
        echo "prompts_ab.sh: the results differ ($pol, --parallel $par, round $round): $WORK" >&2
        exit 1
      fi
      printf '%s\t%s\tbase\t%s\n%s\t%s\tcurrent\t%s\n' "$pol" "$par" "$b" "$pol" "$par" "$c" >> "$WORK/runs.tsv"
      echo "# round $round $pol --parallel $par: base $b, current $c tokens/s" >&2
    done
  done
done

python3 - "$WORK/runs.tsv" "$PARALLEL" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
first = sys.argv[2].split()[0]
med = {}
for r in rows:
    med.setdefault((r["policy"], r["parallel"], r["side"]), []).append(float(r["tokens_per_second"]))
med = {k: statistics.median(v) for k, v in med.items()}
print(f"| policy | --parallel | base tokens/s | current tokens/s | current ÷ base | base ÷ its --parallel {first} | current ÷ its --parallel {first} |")
print("|---|---:|---:|---:|---:|---:|---:|")
for (pol, par, side) in sorted(k for k in med if k[2] == "base"):
    b, c = med[(pol, par, "base")], med[(pol, par, "current")]
    b1, c1 = med[(pol, first, "base")], med[(pol, first, "current")]
    print(f"| {pol} | {par} | {b:.1f} | {c:.1f} | {c / b:.2f} | {b / b1:.2f} | {c / c1:.2f} |")
print("\nevery run of a (policy, parallel) wrote the same results on both sides")
EOF
