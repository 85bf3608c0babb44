#!/bin/bash
# sigterm.sh BIN REPO: parley discover on the hostile repository with a 10-minute render budget; SIGTERM at
# 3 s; how long until it exits, what it says, and whether a worker is left.
bin=$1
out=$(mktemp)
nice "$bin" discover --repo "$2" --render-timeout 10m > "$out" 2>&1 &
pid=$!
sleep 3; kids=$(pgrep -P $pid); t0=$(date +%s%N); kill -TERM $pid
while kill -0 $pid 2>/dev/null; do sleep 0.02; done; wait $pid; rc=$?
el=$(( ($(date +%s%N) - t0) / 1000000 ))
left=; for k in $kids; do kill -0 $k 2>/dev/null && left="$left $k"; done
echo "$(basename $bin): exit $rc ${el} ms after SIGTERM; workers at SIGTERM: ${kids:-none}; left:${left:- none}"
grep "overlays/prod:" "$out"; rm -f "$out"
