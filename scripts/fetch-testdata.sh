#!/usr/bin/env bash
# Fetches the pinned npm packages whose GitHub artifacts some tests read, into .cache/npm/ (ignored
# by git): @octokit/webhooks-examples (GitHub's own example webhook payloads) and @octokit/openapi
# (GitHub's REST API description). Idempotent: a version already cached is not fetched again.
# Change a pin here and the next run fetches the new version beside the old one.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
	"@octokit/webhooks-examples@7.6.1"
	"@octokit/openapi@23.0.2"
)

cache=.cache/npm
mkdir -p "$cache"
for spec in "${packages[@]}"; do
	dest="$cache/$spec"
	if [ -f "$dest/package.json" ]; then
		continue
	fi
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	echo "fetch-testdata: fetching $spec" >&2
	(cd "$tmp" && npm pack --silent --loglevel=error "$spec" >/dev/null 2>"$tmp/npm.log") || {
		cat "$tmp/npm.log" >&2
		echo "fetch-testdata: could not fetch $spec from the npm registry" >&2
		exit 1
	}
	mkdir -p "$tmp/unpacked"
	tar -xzf "$tmp"/*.tgz -C "$tmp/unpacked"
	mkdir -p "$(dirname "$dest")"
	rm -rf "$dest.partial"
	mv "$tmp/unpacked/package" "$dest.partial"
	mv "$dest.partial" "$dest" # the rename makes a half-fetched package impossible to see
	rm -rf "$tmp"
	trap - EXIT
done
echo "fetch-testdata: ${packages[*]} in $cache" >&2
