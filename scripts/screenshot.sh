#!/usr/bin/env bash
# Makes the README's picture of a field's page with the project's own commands: parley demo builds
# the demo repository, parley report writes its pages, headless Chromium takes the picture of the
# replicas field's page. The verdicts are decided at a fixed time, so the picture only changes when
# the pages or the demo do.
#
#   scripts/screenshot.sh            # writes docs/images/field-replicas.png
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local

browser=${PARLEY_CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
[ -n "$browser" ] || { echo "screenshot: chromium is not installed (scripts/system-packages.sh installs it)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/parley" ./cmd/parley
"$tmp/parley" demo --dir "$tmp/demo" >/dev/null 2>&1
"$tmp/parley" report --repo "$tmp/demo" --out "$tmp/report" --at 2026-11-22T12:00:00Z \
	--field 'k8s:apps/Deployment/prod/web#/spec/replicas'
page=$(ls "$tmp"/report/fields/*.html)
out=docs/images/field-replicas.png
# --no-sandbox: the page is a local file Parley wrote, and Chromium's sandbox cannot start as root.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,1300 \
	--screenshot="$PWD/$out" "file://$page" 2>/dev/null
echo "screenshot: wrote $out"
