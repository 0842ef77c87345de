#!/usr/bin/env bash
# A rank of a model split over ranks killed with -9 mid-run (tests/cmake/cluster_mpi.cmake,
# case killed): every rank ends within 10 s, mpirun exits non-zero, and its message names
# the rank and the signal. Run from the source folder.
#   cluster_kill.sh MPIRUN K3HOST WORK
set -u
mpirun=$1 exe=$2 work=$3
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# A streamed model on a slow (throttled) disk, so the run lasts long enough to be killed.
"$mpirun" -np 3 --oversubscribe "$exe" --config presets/laptop.yaml -t 1 -q --set cluster.transport=mpi \
  -p "Life is" -n 2000 --set job.stop_at_eos=false --set memory.trunk_gb=0.0001 --set memory.expert_cache_gb=0.0001 \
  --set storage.plugin=throttle --set storage.params.latency_us=2000 >"$work/out" 2>"$work/err" &
mp=$!
victim=""
for _ in $(seq 1 600); do  # up to 60 s for the ranks to start and rank 0 to print a token
  if [[ -s "$work/out" ]]; then
    for pid in $(pgrep -P "$mp"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$pid; fi
    done
    [[ -n "$victim" ]] && break
  fi
  sleep 0.1
done
if [[ -z "$victim" ]]; then
  kill -9 "$mp" 2>/dev/null
  echo "rank 1 never started generating"; cat "$work/err"; exit 1
fi
ranks=$(pgrep -P "$mp" | tr '\n' ' ')
kill -9 "$victim"
start=$(date +%s%N)
code=""
for _ in $(seq 1 150); do  # 15 s at most; the limit checked is 10 s
  if ! kill -0 "$mp" 2>/dev/null; then wait "$mp"; code=$?; break; fi
  sleep 0.1
done
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
if [[ -z "$code" ]]; then
  kill -9 "$mp" $ranks 2>/dev/null
  echo "mpirun still runs 15 s after rank 1 was killed"; cat "$work/err"; exit 1
fi
for pid in $ranks; do  # a zombie not reaped yet has ended; a live k3host has not
  state=$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)
  if [[ -n "$state" && "$state" != Z ]] && grep -q k3host "/proc/$pid/cmdline" 2>/dev/null; then
    echo "rank process $pid outlived the job"; kill -9 "$pid"; exit 1
  fi
done
if ((elapsed_ms > 10000)); then echo "the ranks took ${elapsed_ms} ms to end"; exit 1; fi
if [[ "$code" == 0 ]]; then echo "mpirun exited 0 after a rank was killed"; exit 1; fi
if ! grep -Eq "rank 1 .*(signal 9|Killed)" "$work/err"; then
  echo "no line names rank 1 and the signal:"; cat "$work/err"; exit 1
fi
echo "killed rank 1: every rank ended in ${elapsed_ms} ms, mpirun exit ${code}"
