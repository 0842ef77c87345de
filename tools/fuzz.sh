#!/usr/bin/env bash
# Runs the libFuzzer harnesses of a K3_FUZZ build (tests/fuzz, docs/testing.md "Fuzzing").
# Usage: tools/fuzz.sh [--build-dir DIR] [--seconds N] [HARNESS ...]
#   --build-dir DIR  the clang fuzz build (default: build-fuzz), configured with
#                    cmake -S . -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++-14
#                          -DCMAKE_C_COMPILER=clang-14 -DK3_FUZZ=ON
#   --seconds N      how long each harness runs (default 60; CI's short budget is 20)
#   HARNESS          names (safetensors, pipeline, ...; default: every k3fuzz-* built)
# Each harness fuzzes a working corpus in DIR/fuzz/corpus/NAME, seeded from (and never
# writing to) tests/fuzz/corpus/NAME and tests/fuzz/regressions/NAME; a finding (crash,
# sanitizer report, undocumented exception, timeout, out of memory) lands in
# DIR/fuzz/findings/NAME/. Exit status: 0 when no harness found anything, 1 otherwise,
# 2 for a usage error.
set -uo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build-fuzz"
seconds=60
names=()
while (($#)); do
  case "$1" in
    --build-dir) build="$(cd "${2:?--build-dir needs a folder}" && pwd)" || exit 2; shift 2 ;;
    --seconds) seconds="${2:?--seconds needs a number}"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) names+=("$1"); shift ;;
  esac
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || ((seconds < 1)); then
  echo "fuzz.sh: --seconds must be a whole number of seconds >= 1, got '$seconds'" >&2
  exit 2
fi
if ! grep -q '^K3_FUZZ:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  echo "fuzz.sh: $build is not a K3_FUZZ build (configure it as --help says, then" \
       "cmake --build $build --target fuzz or build the k3fuzz-* targets)" >&2
  exit 2
fi
if ((${#names[@]} == 0)); then
  for exe in "$build"/bin/k3fuzz-*; do [[ -x "$exe" ]] && names+=("${exe##*/k3fuzz-}"); done
  if ((${#names[@]} == 0)); then
    echo "fuzz.sh: no harness built in $build/bin (cmake --build $build --target fuzz)" >&2
    exit 2
  fi
fi
for n in "${names[@]}"; do
  if [[ ! -x "$build/bin/k3fuzz-$n" ]]; then
    echo "fuzz.sh: no harness '$n' in $build/bin (built: $(cd "$build/bin" && ls k3fuzz-* 2>/dev/null | sed 's/k3fuzz-//' | tr '\n' ' '))" >&2
    exit 2
  fi
done

work="$build/fuzz"
# The harnesses write their files (pipelines, state files, traces) to a scratch folder; on
# tmpfs when there is one, where the writers' fsync costs nothing.
scratch="$work/tmp"
[[ -d /dev/shm && -w /dev/shm ]] && scratch="/dev/shm/k3fuzz-$(id -u)"
mkdir -p "$scratch"
# Leaks are findings here (the sanitizer build's default options turn LeakSanitizer off).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export TMPDIR="$scratch"
status=0
printf '%-18s %8s %12s %10s %6s  %s\n' harness seconds execs exec/s cov result
for n in "${names[@]}"; do
  corpus="$work/corpus/$n" findings="$work/findings/$n" log="$work/$n.log"
  mkdir -p "$corpus" "$findings"
  seeds=()
  for d in "$here/tests/fuzz/corpus/$n" "$here/tests/fuzz/regressions/$n"; do [[ -d "$d" ]] && seeds+=("$d"); done
  start=$(date +%s)
  "$build/bin/k3fuzz-$n" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$findings/" "$corpus" "${seeds[@]}" </dev/null >"$log" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
  if ((rc == 0)); then
    result=ok
  else
    result="FINDING (exit $rc): $(grep -a -m1 -E 'ERROR: |k3 fuzz finding|runtime error|Test unit written' "$log" | cut -c1-120)"
    status=1
  fi
  printf '%-18s %8s %12s %10s %6s  %s\n' "$n" "$took" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$result"
  if ((rc != 0)); then
    echo "  log: $log"
    for f in "$findings"/*; do [[ -f "$f" ]] && echo "  input: $f"; done
    echo "  keep it: mkdir -p tests/fuzz/regressions/$n && cp INPUT tests/fuzz/regressions/$n/<what-it-was>"
  fi
done
exit $status
