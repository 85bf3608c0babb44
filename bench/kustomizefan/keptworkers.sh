#!/bin/bash
# keptworkers.sh OLD NEW REPO: `parley discover --repo REPO`, three rounds, each the OLD binary with
# --render-in-process, the OLD binary (its render workers), the NEW binary (its render workers):
# wall time, CPU (the workers' included: they are reaped children) and peak RSS, and whether the
# outputs are the same. docs/benchmarks.md, issue 24 ("Workers kept between jobs").
old=$1 new=$2 repo=$3
out=$(mktemp -d)
for round in 1 2 3; do
  for v in "old --render-in-process" "old" "new"; do
    set -- $v; which=$1; shift
    bin=$old; [ "$which" = new ] && bin=$new
    /usr/bin/time -f "round $round $v: wall %e s, user %U s, sys %S s, maxrss %M KB" \
      nice "$bin" discover --repo "$repo" "$@" > "$out/$round-${v// /_}" 2> "$out/time"
    tail -1 "$out/time"
  done
  cmp -s "$out/$round-old" "$out/$round-new" && cmp -s "$out/$round-old_--render-in-process" "$out/$round-new" &&
    echo "round $round: the same output all three ways" || echo "round $round: outputs differ"
done
rm -rf "$out"
