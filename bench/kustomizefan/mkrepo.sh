#!/bin/sh
# mkrepo.sh DIR (issue 24, docs/benchmarks.md): a GitOps repository whose overlay k8s/overlays/prod doubles its objects at each of
# 24 levels (48 kustomization files, each naming both halves of the level below).
set -e
d=$1; rm -rf "$d"; mkdir -p "$d/k8s/base" "$d/clusters/prod"; cd "$d"
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: b\n' > k8s/base/cm.yaml
printf 'resources: [cm.yaml]\n' > k8s/base/kustomization.yaml
for i in $(seq 1 23); do for s in a b; do
  mkdir -p k8s/overlays/l$i/$s
  if [ $i = 1 ]; then r='[../../../base]'; else r="[../../l$((i-1))/a, ../../l$((i-1))/b]"; fi
  printf 'nameSuffix: -%s\nresources: %s\n' $s "$r" > k8s/overlays/l$i/$s/kustomization.yaml
done; done
mkdir -p k8s/overlays/prod
printf 'namespace: prod\nresources: [../l23/a, ../l23/b]\n' > k8s/overlays/prod/kustomization.yaml
printf 'apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: prod\n  namespace: flux-system\nspec:\n  interval: 10m\n  path: ./k8s/overlays/prod\n  prune: true\n  sourceRef:\n    kind: GitRepository\n    name: flux-system\n' > clusters/prod/prod.yaml
git init -q && git add -A && git -c user.name=x -c user.email=x@example.com commit -qm hostile
