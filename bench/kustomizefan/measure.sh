#!/bin/bash
# measure.sh BIN ARGS...: run BIN under a 4 GiB address-space ulimit; at 60 s send SIGTERM, at 70 s
# SIGKILL; print its wall time, CPU time (utime+stime), peak RSS (VmHWM, of BIN only) and how it
# ended. Workers BIN starts are sampled too (the largest VmHWM among its children).
bin=$1; shift
out=$(mktemp)
start=$(date +%s%N)
( ulimit -v 4194304; exec nice "$bin" "$@" ) > "$out" 2>&1 &
pid=$!
hwm=0; child=0; ended=exited; ticks=0; termed=; killed=
while kill -0 $pid 2>/dev/null; do
  h=$(awk '/VmHWM/{print $2}' /proc/$pid/status 2>/dev/null); [ -n "$h" ] && hwm=$h
  t=$(awk '{print $14+$15}' /proc/$pid/stat 2>/dev/null); [ -n "$t" ] && ticks=$t
  for c in $(pgrep -P $pid); do ch=$(awk '/VmHWM/{print $2}' /proc/$c/status 2>/dev/null); [ -n "$ch" ] && [ "$ch" -gt "$child" ] && child=$ch; done
  el=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ $el -ge 60000 ] && [ -z "$termed" ]; then kill -TERM $pid; termed=1; ended="still running at 60 s; SIGTERM"; fi
  if [ $el -ge 70000 ] && [ -z "$killed" ]; then kill -KILL $pid; killed=1; ended="$ended ignored for 10 s; SIGKILL"; fi
  sleep 0.05
done
wait $pid; rc=$?
el=$(( ($(date +%s%N) - start) / 1000000 ))
echo "$(basename $bin) $*: exit $rc, wall $((el/1000)).$(( (el%1000)/10 )) s, cpu $((ticks/100)).$((ticks%100)) s (own, before its end), peak rss $((hwm/1024)) MiB, largest worker $((child/1024)) MiB ($ended)"
grep -i "overlays/prod" "$out" | head -2; rm -f "$out"
