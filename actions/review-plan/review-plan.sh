#!/usr/bin/env bash
# The step of the review-plan action (action.yml), runnable by any CI: judges a Terraform plan with
# `parley review --plan`, appends the verdicts as Markdown to $GITHUB_STEP_SUMMARY when set, and
# exits as parley does: 0 the plan may be applied, 1 a veto, hold or escalation blocks it, 2 bad
# input, 3 another failure. Without PARLEY_BIN it downloads the release PARLEY_VERSION for this
# runner and refuses it unless its SHA-256 matches the release's SHA256SUMS.
#
# Environment: PARLEY_PLAN (required), PARLEY_MODULE_DIR, PARLEY_AUTHOR, PARLEY_INTENT,
# PARLEY_MOTIVATION, PARLEY_REPO, PARLEY_ARGS (more flags, split on spaces), PARLEY_BIN or
# PARLEY_VERSION (and PARLEY_RELEASES_URL, default GitHub's releases of parleyhq/parley).
set -euo pipefail

fail() { echo "::error title=Parley::$1"; exit "${2:-2}"; }

[ -n "${PARLEY_PLAN:-}" ] || fail "the plan input is required: the JSON of terraform show -json PLANFILE"

parley=${PARLEY_BIN:-}
if [ -z "$parley" ]; then
	version=${PARLEY_VERSION:-}
	[ -n "$version" ] || fail "give the version of Parley to download, or a parley binary"
	case "${RUNNER_OS:-$(uname -s)}" in
	Linux) os=linux ;;
	macOS | Darwin) os=darwin ;;
	*) fail "Parley releases are built for Linux and macOS runners, not ${RUNNER_OS:-$(uname -s)}" ;;
	esac
	case "${RUNNER_ARCH:-$(uname -m)}" in
	X64 | x86_64 | amd64) arch=amd64 ;;
	ARM64 | arm64 | aarch64) arch=arm64 ;;
	*) fail "Parley releases are built for amd64 and arm64, not ${RUNNER_ARCH:-$(uname -m)}" ;;
	esac
	name="parley_${version}_${os}_${arch}"
	base="${PARLEY_RELEASES_URL:-https://github.com/parleyhq/parley/releases/download}/v${version}"
	dir=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/parley.XXXXXX")
	curl -fsSL --retry 3 -o "$dir/$name" "$base/$name" || fail "download $base/$name" 3
	curl -fsSL --retry 3 -o "$dir/SHA256SUMS" "$base/SHA256SUMS" || fail "download $base/SHA256SUMS" 3
	want=$(awk -v n="$name" '$2 == n { print $1 }' "$dir/SHA256SUMS")
	[ -n "$want" ] || fail "the release's SHA256SUMS does not list $name" 3
	if command -v sha256sum >/dev/null; then
		got=$(sha256sum "$dir/$name" | awk '{ print $1 }')
	else
		got=$(shasum -a 256 "$dir/$name" | awk '{ print $1 }')
	fi
	[ "$got" = "$want" ] || fail "$name has SHA-256 $got, the release's SHA256SUMS says $want: not running it" 3
	chmod +x "$dir/$name"
	parley="$dir/$name"
fi

args=(review --plan "$PARLEY_PLAN" --repo "${PARLEY_REPO:-.}" --module-dir "${PARLEY_MODULE_DIR:-.}")
[ -z "${PARLEY_AUTHOR:-}" ] || args+=(--author "$PARLEY_AUTHOR")
[ -z "${PARLEY_INTENT:-}" ] || args+=(--intent "$PARLEY_INTENT")
[ -z "${PARLEY_MOTIVATION:-}" ] || args+=(--motivation "$PARLEY_MOTIVATION")
[ -z "${GITHUB_STEP_SUMMARY:-}" ] || args+=(--summary "$GITHUB_STEP_SUMMARY")
if [ -n "${PARLEY_ARGS:-}" ]; then
	read -r -a extra <<<"$PARLEY_ARGS"
	args+=("${extra[@]}")
fi

code=0
"$parley" "${args[@]}" || code=$?
case $code in
0) ;;
1) echo "::error title=Parley::the plan changes a field the policy vetoes, holds or escalates; the verdicts are in the job summary" ;;
*) echo "::error title=Parley::parley review --plan failed (exit $code)" ;;
esac
exit "$code"
