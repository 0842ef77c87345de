#!/bin/sh
# The process keeps its name after k3host re-executes itself for the OpenMP wait policy
# (core/cli/openmp_reexec.cpp): /proc/PID/comm, which ps, top, pgrep -x and ss -p show, is the
# executable's name, never "exe". k3host tokenize waits on a FIFO's input while it is looked at.
#   process_name.sh K3HOST WORK
set -u
exe=$1 work=$2
name=$(basename "$exe")
rm -rf "$work" && mkdir -p "$work" || exit 1
fifo=$work/input
mkfifo "$fifo" || exit 1
exec 3<>"$fifo"  # a writer, so that k3host's read blocks until it is closed
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT -u KMP_BLOCKTIME -u K3_OMP_WAIT_POLICY_CHOSEN \
  "$exe" tokenize --config laptop <"$fifo" >"$work/out" 2>"$work/err" 3>&- &
pid=$!
fail() { echo "FAIL: $*"; exec 3>&-; wait "$pid"; cat "$work/err"; exit 1; }
# The re-executed process has k3host's choice in its environment.
i=0
until tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -q '^K3_OMP_WAIT_POLICY_CHOSEN='; do
  i=$((i + 1))
  [ $i -le 200 ] || fail "k3host (pid $pid) did not re-execute itself within 20 s"
  sleep 0.1
done
comm=$(cat "/proc/$pid/comm")
[ "$comm" = "$name" ] || fail "/proc/$pid/comm is '$comm', expected '$name'"
shown=$(ps -o comm= -p "$pid")
[ "$shown" = "$name" ] || fail "ps -o comm shows '$shown', expected '$name'"
pgrep -x "$name" | grep -qx "$pid" || fail "pgrep -x $name does not list pid $pid"
exec 3>&-  # end of input: tokenize prints an empty line and exits
wait "$pid" || fail "k3host tokenize failed"
echo "pid $pid is '$comm' after the re-execution; pgrep -x $name finds it"
